"""A discovery stage on a real engine starts one server per arm: the ladder's repeats share the launch as they are,
and an agentic arm's concurrency-sized flags are pinned to the stage's highest concurrency (read from the adapter's
own rendering); on the simulator in virtual time nothing is pinned."""

from __future__ import annotations

from pathlib import Path

from llmsweep import engines
from llmsweep.discover.recipe import load_arms, stage_document, write_stage
from llmsweep.discover.servers import size_for_top
from llmsweep.plan import jobs_from_files

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
H200 = REPO / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-discover.yaml"
FLEET = REPO / "examples" / "gpu" / "fleet.yaml"
LADDER = [1, 2, 4, 8, 16, 32, 64]


def _launches(stage: Path, runner_config: Path | None) -> dict[str, set[str]]:
    """Distinct launch fingerprints per stage recipe key (arm × seed)."""
    out: dict[str, set[str]] = {}
    for job in jobs_from_files([stage], runner_config=runner_config):
        out.setdefault(job.recipe_key, set()).add(engines.launch_fingerprint(job))
    return out


def _stage(tmp_path: Path, recipe: Path, *, simulate: bool, runner_config: Path | None) -> tuple[
        dict[str, dict[str, object]], Path, list[str]]:
    _, arms = load_arms(recipe)
    doc, keys = stage_document(recipe, arms, {a.id: LADDER for a in arms}, 3, None)
    path = write_stage(tmp_path / "ladder.yaml", doc)
    pins = size_for_top(path, doc, keys, simulate=simulate, runner_config=runner_config)
    write_stage(path, doc)
    return pins, path, [a.id for a in arms]


def test_the_h200_recipe_runs_its_whole_ladder_and_repeats_on_one_server(tmp_path: Path) -> None:
    pins, path, _ = _stage(tmp_path, H200, simulate=False, runner_config=FLEET)
    assert pins == {}  # nothing in a fixed-seq-len vLLM launch depends on the concurrency
    jobs = jobs_from_files([path], runner_config=FLEET)
    assert len(jobs) == 21 and len({engines.launch_fingerprint(j) for j in jobs}) == 1


def test_an_agentic_arm_is_served_by_one_server_sized_for_the_stage_top(tmp_path: Path) -> None:
    _, arms = load_arms(SEED)
    before, _ = stage_document(SEED, arms, {a.id: LADDER for a in arms}, 3, None)
    unpinned = _launches(write_stage(tmp_path / "plain.yaml", before), None)
    assert all(len(fps) == len(LADDER) for fps in unpinned.values())  # a server per point without the pins

    pins, path, ids = _stage(tmp_path, SEED, simulate=False, runner_config=None)
    assert set(pins) == set(ids)
    for flags in pins.values():  # SGLang sizes its batch (2 × conc) and CUDA graphs from the concurrency
        assert flags["--max-running-requests"] == 128 and "--cuda-graph-max-bs" in flags
    launches = _launches(path, None)
    assert all(len(fps) == 1 for fps in launches.values())
    # The three seeds of an arm share that server; the two arms (DRAM offload or not) stay apart.
    assert len(set().union(*launches.values())) == len(ids)
    argv = engines.render(jobs_from_files([path])[0]).argv
    assert argv[argv.index("--max-running-requests") + 1] == "128"


def test_nothing_is_pinned_on_the_simulator_in_virtual_time(tmp_path: Path) -> None:
    pins, _, _ = _stage(tmp_path, SEED, simulate=True, runner_config=None)
    assert pins == {}


def test_a_refinement_estimate_counts_a_server_start_per_fresh_server_and_the_slowest_plain_run() -> None:
    from llmsweep.discover.model import Stage
    from llmsweep.discover.sweep import DiscoverRequest, Stages

    stages = Stages(DiscoverRequest(recipe=H200, out=Path("/nonexistent")), [], lambda _: None)
    assert stages.estimate(2, servers=1) is None  # nothing measured yet
    # The ladder: one server whose start (80 s) the first run carries, 20 runs of 5–9 s, 6 s of planning and storing.
    runs = [86.0, *[5.0 + (i % 5) for i in range(20)]]
    stages.records.append(Stage(name="ladder", recipe="", run_dir="", runs_planned=21, runs_measured=21,
                                server_launches=1, seconds=sum(runs) + 6.0, run_seconds=runs))
    assert stages.estimate(2, servers=1) == 6.0 + 86.0 + 9.0
    assert stages.estimate(2, servers=0) == 6.0 + 2 * 9.0  # the simulator in virtual time starts nothing
