"""A server that ran another engine version than its recipe declared: the run says so, labels the result with the
version that ran, and judges the launch's feature gates again there (`execute.version_drift`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from llmsweep import engines
from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute.lifecycle import ServerGroup, _provenance, command_text
from llmsweep.execute.version_drift import version_drift
from llmsweep.plan import Job, full_sweep
from llmsweep.sim_warnings import WarningKind, ran_on_the_simulator, warning_kind
from llmsweep.spec import loads_recipes

TOKEN_MODE = "SGLANG_SIMULATE_ACC_TOKEN_MODE"  # gated: SGLang reads it only from 0.5.16 (catalog engines.yaml)


def sglang_job(env: str = f"      {TOKEN_MODE}: real-draft-token\n") -> Job:
    text = ("k:\n  image: lmsysorg/sglang:nightly\n  model: llmsweep/llama-1b\n  model-prefix: llama-1b\n"
            "  runner: h200\n  precision: bf16\n  framework: sglang\n  multinode: false\n  scenarios:\n"
            "    fixed-seq-len:\n    - isl: 1024\n      osl: 128\n      search-space:\n"
            "      - { tp: 1, conc-list: [4] }\n"
            "  serve:\n    engine: { name: sglang, version: 0.5.16 }\n"
            + (f"    env:\n{env}" if env else ""))
    return full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes)[0]


def test_an_older_engine_that_ignores_a_gated_knob_refuses_the_jobs() -> None:
    job = sglang_job()
    spec = engines.render(job)
    assert spec.engine_version == "0.5.16"
    drift = version_drift(job, spec, {"engine_version": "0.5.12"})
    assert drift is not None and drift.ran == "0.5.12" and drift.declared == "0.5.16"
    said = drift.warning()
    assert said.startswith("engine version: the recipe declares sglang 0.5.16, but the server ran sglang 0.5.12")
    assert f"feature gates were judged at the declared 0.5.16: {TOKEN_MODE}" in said and "at 0.5.12: " in said
    error = drift.error()
    assert error is not None and TOKEN_MODE in error.message and "not the declared 0.5.16" in error.message


def test_a_newer_engine_is_said_and_labelled_not_refused() -> None:
    job = sglang_job()
    spec = engines.render(job)
    drift = version_drift(job, spec, {"engine_version_installed": "0.5.17"})
    assert drift is not None and drift.error() is None
    said = drift.warning()
    assert "(the python that ran it has it installed)" in said and "(the same verdicts at 0.5.17)" in said
    assert warning_kind(said) is WarningKind.ENGINE_VERSION
    assert ran_on_the_simulator(2, said).startswith("2 jobs ran on another engine version: the recipe declares")

    prov = _provenance(job, spec, ServerGroup(id="g", spec=spec, jobs=[job]), {}, drift=drift)
    assert prov["launch"]["engine_version"] == "0.5.17" and prov["launch"]["engine_version_declared"] == "0.5.16"

    class Launcher:
        kind = "local"

        def render(self, s: LaunchSpec) -> list[str]:
            return list(s.argv)

    launcher: Any = Launcher()
    text = command_text(spec, launcher, drift=drift)
    assert text.startswith("# engine: sglang 0.5.17\n") and f"# note: {said}" in text
    assert command_text(spec, launcher).startswith("# engine: sglang 0.5.16\n")


@pytest.mark.parametrize("observed", [{"engine_version": "0.5.16"}, {"engine_version_installed": "0.5.16.0"}, {}])
def test_the_same_or_an_unread_version_is_no_drift(observed: dict[str, Any]) -> None:
    job = sglang_job()
    assert version_drift(job, engines.render(job), observed) is None


def test_a_launch_without_gated_knobs_says_so() -> None:
    job = sglang_job(env="")
    drift = version_drift(job, engines.render(job), {"engine_version": "0.5.12"})
    assert drift is not None and drift.error() is None
    assert drift.warning().endswith("the launch uses no version-gated knob")


@pytest.mark.parametrize(("image", "where"), [
    ("nvcr.io/nvidia/sglang:0.5.16", "llmsweep does not ask the python of a server in a Slurm container"),
    (None, "llmsweep does not ask the python of a server on another node"),
])
def test_a_server_whose_python_is_not_asked_says_the_declared_version_is_unconfirmed(
        tmp_path: Path, image: str | None, where: str) -> None:
    """A pyxis server, or a role on another node, that reports no version: nothing read what ran, yet the result was
    labelled with the declared version unsaid (only the host's own engine and a Docker container were asked). It is
    recorded as unread and the run says the declared version is unconfirmed, naming why."""
    from llmsweep.execute.lifecycle import LifecycleSettings, _Server

    job = sglang_job(env="")
    spec = engines.render(job)
    said: list[str] = []

    class Remote:  # a server reached at another node's address (not loopback), run from an image or not
        base_url = "http://10.11.12.13:30000"

    server = _Server(ServerGroup(id="g", spec=spec, jobs=[job]), cast(Any, None), tmp_path, LifecycleSettings(),
                     said.append)
    server.observed = {"engine_version": None, "image": image}
    server._unread_version(spec, server._read_installed_version(cast(Any, Remote()), spec))
    assert server.observed["engine_version_installed"] is None
    assert said == [f"warning: the sglang version that ran was not read (the server reports none, and {where}): the "
                    "result carries the declared 0.5.16, unconfirmed"]
    # a server that reports its version is not warned about
    said.clear()
    server.observed = {"engine_version": "0.5.16", "image": image}
    server._unread_version(spec, server._read_installed_version(cast(Any, Remote()), spec))
    assert said == [] and "engine_version_installed" not in server.observed
