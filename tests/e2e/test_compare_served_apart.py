"""`compare` of two simulated runs whose simulator builds differ: the delta is partly the simulator's change, not the
compared configuration's alone, and the point says so beside its verdict (table, `--json`, the Markdown verdict).

Real runs on the simulator: fixed-sim.yaml (two concurrencies, four prompts each; a second or two each), and once
with the workload's seed 7 (other prompts: other inputs, compared as two samples). Both ran in this checkout, so one
simulator build served them: B's summaries' typed provenance (`Provenance.simulator.digest`) is edited to another
build's digest, as a run of a pull request that changed the simulator's code or catalogs records it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_exits

from llmsweep.metrics.model import SimulatorProvenance, Summary
from llmsweep.metrics.version import measurement_identity

OTHER_BUILD = "0123456789abcdef"


_cli = cli_exits


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("served-apart")
    seeded = tmp / "fixed-sim-seed7.yaml"
    seeded.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("num-warmups: 1", "num-warmups: 1\n    seed: 7"))
    out = {"a": tmp / "a", "b": tmp / "b"}
    for name, recipe in (("a", RECIPES / "fixed-sim.yaml"), ("b", seeded)):
        _cli("run", recipe, "--out", out[name], "--no-report", "--store", tmp / "store.sqlite")
    return out


def _rebuild(run: Path, digest: str) -> str:
    """Each of the run's summaries with its simulator build set to `digest`; returns the build they recorded."""
    builds = set()
    paths = sorted(run.glob("jobs/*/summary.json"))
    assert paths, f"no summary under {run}"
    for path in paths:
        summary = Summary.load(path)
        simulator = summary.provenance.simulator
        assert simulator is not None and simulator.digest
        builds.add(simulator.digest)
        other = SimulatorProvenance.model_validate({**simulator.model_dump(), "digest": digest})
        summary.model_copy(update={"provenance": summary.provenance.model_copy(
            update={"simulator": other})}).write(path)
    (build,) = builds
    return build


def test_another_simulator_build_is_said_beside_each_point_verdict(runs: dict[str, Path]) -> None:
    """A simulated run of a pull request that changed the simulator was compared with main's as if only the recipe
    had changed: nothing named the two simulator builds. Each point now says them, in the table's `served apart` row,
    `--json`'s `matched[].served_apart` and `verdict.points[].served_apart`, and the Markdown verdict's cell."""
    plain = json.loads(_cli("compare", runs["a"], runs["b"], "--no-history", "--json").stdout)
    assert [m["served_apart"] for m in plain["matched"]] == [[], []]  # one build served both
    build = _rebuild(runs["b"], OTHER_BUILD)
    said = f"simulator build {build} vs {OTHER_BUILD} (its code and catalogs, as each simulated result records them; " \
           "run or predict B again on A's llmsweep checkout, or A on B's)"
    doc: dict[str, Any] = json.loads(_cli("compare", "--baseline", runs["a"], runs["b"], "--no-history",
                                          "--json").stdout)
    assert len(doc["matched"]) == 2
    assert [m["served_apart"] for m in doc["matched"]] == [[said], [said]]
    assert [p["served_apart"] for p in doc["verdict"]["points"]] == [[said], [said]]
    table = _cli("compare", runs["a"], runs["b"], "--no-history").stdout
    assert table.count("served apart") == 2, table
    assert " ".join(table.split()).count(f"not the same configuration: simulator build {build} vs") == 2, table
    assert " ".join(table.split()).count("run or predict B again on A's llmsweep checkout, or A on B's") == 2, table
    markdown = _cli("compare", "--baseline", runs["a"], runs["b"], "--no-history", "--format", "markdown").stdout
    assert markdown.count(f"not the same configuration: {said}") == 2, markdown


def test_another_measurement_version_is_said_beside_each_point_verdict(runs: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    """Results measured by other measurement definitions (`MEASUREMENT_VERSION`, recorded in run.json beside the
    reuse keys, not in the summaries) compared as if only the configuration had changed. B's run.json is edited to
    record an earlier version, as a run of an llmsweep before a change to how a figure is measured records it: each
    point names both, in the table, `--json` and the Markdown verdict."""
    b = tmp_path / "b"
    shutil.copytree(runs["b"], b)
    record = json.loads((b / "run.json").read_text())
    ours = record["measurement"]
    assert ours == measurement_identity()
    earlier = "m1-0123456789abcdef"
    (b / "run.json").write_text(json.dumps({**record, "measurement": earlier}))
    said = f"measurement version {ours} vs {earlier} (llmsweep's measurement definitions"
    doc: dict[str, Any] = json.loads(_cli("compare", "--baseline", runs["a"], b, "--no-history", "--json").stdout)
    assert len(doc["matched"]) == 2
    for apart in (*(m["served_apart"] for m in doc["matched"]), *(p["served_apart"] for p in doc["verdict"]["points"])):
        assert sum(s.startswith(said) for s in apart) == 1, apart
    table = " ".join(_cli("compare", runs["a"], b, "--no-history").stdout.split())
    assert table.count(f"measurement version {ours} vs {earlier}") == 2, table
    markdown = _cli("compare", "--baseline", runs["a"], b, "--no-history", "--format", "markdown").stdout
    assert markdown.count(said) == 2, markdown
