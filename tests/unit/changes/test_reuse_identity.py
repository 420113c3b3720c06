"""The reuse identity: every part the issue names is in it, llmsweep's measurement definitions included."""

from __future__ import annotations

from pathlib import Path

import pytest
from changes_scratch import write_recipe

from llmsweep.changes.reuse import reuse_key, reuse_keys
from llmsweep.metrics import version
from llmsweep.plan import Job, jobs_from_files
from llmsweep.workload.scenario import repeat_index


@pytest.fixture
def job(tmp_path: Path) -> Job:
    return jobs_from_files([write_recipe(tmp_path)])[0]


def test_measurement_version_is_part_of_the_identity(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    before = reuse_key(job, "launch")
    monkeypatch.setattr(version, "MEASUREMENT_VERSION", version.MEASUREMENT_VERSION + 1)
    assert reuse_key(job, "launch") != before


def test_a_metric_definition_change_is_part_of_the_identity(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.metrics import registry

    before = reuse_key(job, "launch")
    defs = registry.all_metrics()
    changed = [defs[0].__class__(defs[0].name, "other-unit", defs[0].description), *defs[1:]]
    monkeypatch.setattr(registry, "all_metrics", lambda: changed)
    assert reuse_key(job, "launch") != before


def test_launch_image_workload_fingerprint_and_repeat_are_part_of_the_identity(job: Job) -> None:
    key = reuse_key(job, "launch")
    assert reuse_key(job, "launch") == key
    assert reuse_key(job, "other launch") != key
    assert reuse_key(job.model_copy(update={"image": "x/y:z"}), "launch") != key
    assert reuse_key(job.model_copy(update={"recipe_fingerprint": "0" * 64}), "launch") != key
    wl = job.workload.model_copy(update={"seed": 7})
    assert reuse_key(job.model_copy(update={"workload": wl}), "launch") != key
    assert reuse_key(job, "launch", repeat=2) != key
    assert repeat_index(job.id + "-repeat3") == 3 and repeat_index(job.id) == 1


def test_env_change_changes_the_rendered_launch_key(tmp_path: Path) -> None:
    a = jobs_from_files([write_recipe(tmp_path / "a")])
    b = jobs_from_files([write_recipe(tmp_path / "b", arm_var="other")])
    ka, kb = reuse_keys(a, simulate=False), reuse_keys(b, simulate=False)
    same = {j.id for j in a if ka[j.id] == kb.get(j.id)}
    assert same == {j.id for j in a if j.tp == 4}
