"""A simulated result records the context its simulator served (`launch.context_served`), live or in virtual time:
the longest request the engine takes (`SimConfig.served_context`), which a live server reports as `/v1/models`'
`max_model_len` and the virtual-time executor reads from the same function. A virtual-time run recorded none, so a
live and a virtual-time run of one job differed in provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute import virtual
from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, run_group
from llmsweep.execute.local import LocalLauncher
from llmsweep.plan import Job, jobs_from_files

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run"


def _launch(recipe: str, context: bool) -> tuple[Job, LaunchSpec]:
    """The recipe's first job and its launch, with its context flag or without (the pool then bounds the context)."""
    job = min(jobs_from_files([RECIPES / recipe]), key=lambda j: j.concs[0])
    spec = engines.render(job, port=0)
    if not context:
        argv = list(spec.argv)
        at = argv.index("--context-length")
        spec = spec.model_copy(update={"argv": (*argv[:at], *argv[at + 2:])})
    return job, spec


def _served(run_dir: Path, job: Job) -> object:
    summary = json.loads((run_dir / "jobs" / job.id / "summary.json").read_text())
    return summary["provenance"]["launch"]["context_served"]


@pytest.mark.parametrize(("recipe", "context"), [
    ("fixed-sim.yaml", True), ("fixed-sim.yaml", False), ("spec-fixed-sim.yaml", False)])
def test_a_virtual_time_run_records_the_context_a_live_run_of_the_job_reports(tmp_path: Path, recipe: str,
                                                                              context: bool) -> None:
    job, spec = _launch(recipe, context)
    config = virtual.engine_config(spec).sim_config()
    expected = config.served_context()
    # with the flag, the flag's; without, the pool less a step's lookahead (a verify step's drafts too), not the pool
    lookahead = (config.spec.k if config.spec is not None else 0) + 1
    assert expected == (config.context_length if context else config.pool_tokens - lookahead)

    (outcome,) = virtual.run_groups([ServerGroup(id="virtual", spec=spec, jobs=[job], source="simulated")],
                                    tmp_path / "virtual", LifecycleSettings(stop_grace_s=5), event=lambda _m: None)
    assert outcome.status == "valid", outcome.reasons
    (live,) = run_group(ServerGroup(id="live", spec=spec, jobs=[job], source="simulated"), LocalLauncher(),
                        tmp_path / "live", LifecycleSettings(stop_grace_s=5))
    assert live.status == "valid", live.reasons
    assert _served(tmp_path / "virtual", job) == _served(tmp_path / "live", job) == expected


def test_a_disaggregated_virtual_time_run_records_its_first_decode_workers_context(tmp_path: Path) -> None:
    """A live deployment's router answers `/v1/models` with its first decode worker's (`llmsweep.router`): so does
    the virtual-time deployment's result."""
    from llmsweep.execute.virtual_disagg import disagg_config, is_disaggregated

    job = min((j for j in jobs_from_files([RECIPES / "disagg-sim.yaml"]) if is_disaggregated(j)),
              key=lambda j: j.concs[0])
    group = ServerGroup(id="virtual", spec=engines.render(job, port=0), jobs=[job], source="simulated")
    (outcome,) = virtual.run_groups([group], tmp_path, LifecycleSettings(stop_grace_s=5), event=lambda _m: None)
    assert outcome.status == "valid", outcome.reasons
    decode = disagg_config(job).decode.engine.sim_config()
    assert _served(tmp_path, job) == decode.served_context() is not None


@pytest.mark.parametrize(("written", "served"), [(20_000, 20_000), (300_000, 262_144)])
def test_a_disaggregated_job_s_roles_serve_the_context_its_virtual_time_run_and_job_json_record(
        tmp_path: Path, written: int, served: int) -> None:
    """A simulated ATOM deployment with the recipe's `--max-model-len`: every live role's `--context-length` is the
    context its virtual-time run served (`launch.context_served`) and job.json records — the recipe's, cut to the
    checkpoint's 262,144 positions where it asks for more (ATOM's cap). The live roles were rendered from the planned
    job and said the derived 576 (isl 256 + osl 64 + 256) while job.json and virtual time said the recipe's."""
    from llmsweep.execute.virtual_disagg import disagg_config, is_disaggregated
    from llmsweep.plan import full_sweep
    from llmsweep.spec import loads_recipes

    text = ((RECIPES / "disagg-sim.yaml").read_text().replace("framework: sglang-disagg", "framework: atom-disagg")
            .replace("engine: { name: sim }", f"engine: {{ name: sim }}\n    args: {{--max-model-len: {written}}}"))
    job = min((j for j in full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes) if is_disaggregated(j)),
              key=lambda j: j.concs[0])
    topology = engines.render_topology(job, simulate=True)
    contexts = {(role.name, w.index): w.spec.argv[w.spec.argv.index("--context-length") + 1]
                for role in topology.roles if role.kind != "router" for w in role.workers}
    assert len(contexts) == 3 and set(contexts.values()) == {str(served)}, contexts

    group = ServerGroup(id="virtual", spec=engines.render(job, port=0), jobs=[job], source="simulated")
    (outcome,) = virtual.run_groups([group], tmp_path, LifecycleSettings(stop_grace_s=5), event=lambda _m: None)
    assert outcome.status == "valid", outcome.reasons
    recorded = Job.model_validate(json.loads((tmp_path / "jobs" / job.id / "job.json").read_text()))
    assert _served(tmp_path, job) == recorded.max_model_len == served
    assert disagg_config(job).decode.engine.sim_config().served_context() == served
