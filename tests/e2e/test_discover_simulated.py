"""`llmsweep discover --simulate`: a small arm with a KV cliff, measured on the simulator in virtual time, proposes a
grid that stops at the knee, with its evidence, as a recipe that loads back.

The discoveries run a 60-s window (`--duration 60`, the recipe says 240): the same knee, cliff and refinement target
in virtual time, half the CPU (the simulation of conc 16 and 32 is most of it)."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_run_support import cli_env, cli_here

from llmsweep.spec.loader import load_recipes
from llmsweep.words import count_of

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "discover" / "cliff-sim.yaml"
WINDOW = "60"


def _raising_at_run(n: int, error: BaseException, said: list[str] | None = None) -> Callable[[str], None]:
    """A discovery's event sink that raises `error` when the `n`th run finishes (its `… valid in …` line): a signal or
    a failure landing mid-stage, in this process. `said` collects every line."""
    lines = said if said is not None else []

    def event(line: str) -> None:
        lines.append(line)
        if " valid in " in line and sum(" valid in " in s for s in lines) == n:
            raise error

    return event


def _discover(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`llmsweep discover ARGS`, in this process (the SIGTERM test below starts its own)."""
    return cli_here(["discover", *args], cli_env(tmp_path))


@pytest.mark.timeout(300)
def test_discover_on_the_simulator_proposes_a_grid_that_stops_at_the_knee(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RECIPE, "--simulate", "--repeats", "2", "--ladder-top", "32", "--refine", "1",
                     "--duration", WINDOW, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert result == json.loads((out / "discovery.json").read_text())
    # Progress lines on stderr name each stage.
    assert "discover: stage ladder" in proc.stderr and "× 2 repeats" in proc.stderr
    (arm,) = result["arms"]
    assert arm["error"] is None and arm["original"] == [1, 4, 8]
    ladder = sorted({r["conc"] for r in result["runs"] if r["stage"] == "ladder"})
    assert ladder == [1, 2, 4, 8, 16, 32]
    # Repeats differ in their workload seed, and the noise comes from them.
    assert {r["seed"] for r in result["runs"] if r["stage"] == "ladder"} == {42, 43}
    assert {r["source"] for r in result["runs"]} == {"simulated"}
    noise = {n["metric"]: n for n in arm["noise"]}
    assert noise["tput_per_gpu"]["cv"] > 0 and noise["tput_per_gpu"]["dof"] == len(ladder)
    # The server's KV figures were read back: the cliff is named, and the grid stops at the knee, below the top.
    knee = arm["knee"]
    assert knee["cliff_conc"] is not None and "KV cache peaks" in knee["cliff"]
    concs = [p["conc"] for p in arm["proposed"]]
    assert concs[0] == 1 and concs[-1] == knee["conc"] and concs == sorted(set(concs)) and concs[-1] < 32
    assert all(p["why"] for p in arm["proposed"])
    # The proposed recipe loads and says the proposed grid; the diff is written beside it.
    recipe = load_recipes([out / "proposed.yaml"]).raise_on_error().recipes["disc-sim-cliff"]
    (entry,) = recipe.scenarios.agentic_coding[0].search_space  # type: ignore[index]
    assert entry.conc_list == concs
    assert recipe.policy is not None and recipe.policy.max_conc == knee["conc"]
    assert (out / "proposed.diff").read_text() == result["patch"] and "+      - { tp: 8" in result["patch"]
    # ...and says, in the file a user commits, that its grid stands on simulated points, not measured ones
    head = (out / "proposed.yaml").read_text().split("\n", 2)
    assert head[0].startswith("# llmsweep discover proposed this grid from every point predicted by the simulator")
    assert "+# llmsweep discover proposed this grid" in result["patch"]
    # Every run is a simulated job of an ordinary `llmsweep run` under stages/.
    summaries = list((out / "stages").glob("*/jobs/*/summary.json"))
    assert len(summaries) == result["runs_measured"] == len(result["runs"])
    assert all(json.loads(s.read_text())["provenance"]["clock"] == "virtual" for s in summaries)
    # ...with the window --duration asked for; the proposed recipe keeps its own.
    assert {json.loads((s.parent / "job.json").read_text())["workload"]["duration"] for s in summaries} == {60}
    assert recipe.workload is not None and recipe.workload.duration == 240
    # ...and it passes `llmsweep validate` as it is
    checked = cli_here(["validate", "--simulate", out / "proposed.yaml"], cli_env(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The table says what its figures are: simulated, and smoke runs (a 60-s window is no official one).
    from llmsweep.cli.discover import _print
    from llmsweep.discover.model import Discovery

    capsys.readouterr()
    _print(Discovery.model_validate(result))
    table = capsys.readouterr().out
    assert table.startswith("llmsweep discover — simulated, virtual time\n"), table[:300]
    smoke = sum(r["verdict"] == "smoke" for r in result["runs"])
    assert smoke == len(result["runs"]), {r["verdict"] for r in result["runs"]}
    assert (f"simulated {count_of(result['points_measured'], 'point')} in {count_of(len(result['runs']), 'run')} "
            f"({smoke} of them smoke") in table, table


def test_discover_refuses_a_single_repeat_and_a_used_out(tmp_path: Path) -> None:
    proc = _discover(tmp_path, RECIPE, "--simulate", "--repeats", "1", "--out", tmp_path / "d")
    assert proc.returncode == 2 and "--repeats" in proc.stderr
    (tmp_path / "d" / "stages").mkdir(parents=True)
    proc = _discover(tmp_path, RECIPE, "--simulate", "--out", tmp_path / "d")
    assert proc.returncode == 2 and "already holds a discovery" in proc.stderr


@pytest.mark.timeout(300)
def test_a_refinement_that_would_not_fit_the_time_limit_is_skipped_and_the_ladder_proposes_alone(
        tmp_path: Path) -> None:
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RECIPE, "--simulate", "--repeats", "2", "--ladder-top", "32", "--refine", "2",
                     "--time-limit", "0.5", "--duration", WINDOW, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    ladder, refine = result["stages"]
    assert ladder["name"] == "ladder" and ladder["runs_measured"] == 12 and ladder["skipped"] is None
    assert ladder["seconds"] > 0 and len(ladder["run_seconds"]) == 12
    assert refine["name"] == "refine-1" and refine["runs_measured"] == 0 and "--time-limit" in refine["skipped"]
    assert "discover: stage refine-1 skipped" in proc.stderr
    assert {r["stage"] for r in result["runs"]} == {"ladder"} and result["interrupted"] is None
    assert result["arms"][0]["error"] is None and (out / "proposed.yaml").exists()


H200 = Path(__file__).resolve().parents[2] / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-discover.yaml"


def test_what_cannot_run_as_asked_is_refused_before_any_stage(tmp_path: Path) -> None:
    proc = _discover(tmp_path, RECIPE, "--simulate", "--executor", "slurm", "--out", tmp_path / "a")
    assert proc.returncode == 2 and "--executor slurm would place no server" in proc.stderr
    proc = _discover(tmp_path, H200, "--duration", "60", "--runner-config", H200.parent / "fleet.yaml",
                     "--out", tmp_path / "b")
    assert proc.returncode == 2 and "fixed-seq-len arm" in proc.stderr and "num-prompts-per-conc" in proc.stderr
    proc = _discover(tmp_path, H200, "--executor", "slurm", "--executor-option", "no_such=1",
                     "--runner-config", H200.parent / "fleet.yaml", "--out", tmp_path / "c")
    assert proc.returncode == 2 and "no_such" in proc.stderr
    # a recipe that serves the simulator runs in this process too: every stage's jobs would be refused
    proc = _discover(tmp_path, RECIPE, "--executor", "slurm", "--out", tmp_path / "d")
    assert proc.returncode == 2 and "serves the simulator" in proc.stderr and "would place no server" in proc.stderr
    # a fixed total of prompts under a ladder above it: its upper rungs would never hold that many users
    fixed_total = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "no-serve.yaml"
    proc = _discover(tmp_path, fixed_total, "--simulate", "--ladder-top", "8", "--out", tmp_path / "f")
    assert proc.returncode == 2 and "workload.num-prompts 2 at every concurrency" in proc.stderr, proc.stderr[-2000:]
    assert "num-prompts-per-conc" in proc.stderr
    # a trace source that does not exist: once, before any stage (it had been refused job by job in the ladder)
    proc = _discover(tmp_path, RECIPE, "--simulate", "--traces", tmp_path / "no-such-traces", "--out", tmp_path / "e")
    assert proc.returncode == 2 and "--traces" in proc.stderr and "does not exist" in proc.stderr, proc.stderr[-2000:]
    assert not any((tmp_path / d / "stages").exists() for d in "abcdef")


def test_a_recipe_that_fails_validation_is_refused_at_its_own_lines_before_any_stage(tmp_path: Path) -> None:
    """An error of the recipe (a policy rule its every job breaks) is named at the recipe's line, exit 2, as `run`
    says it: a stage's run refused each job naming the stage recipe and exited 1; a grid rule is not one (the
    stages run grids of their own)."""
    bad = tmp_path / "bad.yaml"
    rising = RECIPE.parent / "rising-fixed-sim.yaml"
    bad.write_text(rising.read_text().replace("- isl: 256", "- isl: 900000", 1), encoding="utf-8")
    proc = _discover(tmp_path, bad, "--simulate", "--repeats", "2", "--out", tmp_path / "a")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "discover: the recipe fails validation" in proc.stderr, proc.stderr[-3000:]
    assert f"{bad}:14: error [input.context-length]" in proc.stderr, proc.stderr[-3000:]
    assert "stages" not in proc.stderr and not (tmp_path / "a" / "stages").exists()


@pytest.mark.timeout(120)
def test_a_refinement_with_nothing_to_refine_says_why_and_the_recipes_warning_is_said_once(tmp_path: Path) -> None:
    """--refine 2 with a knee already resolved by the ladder runs no refinement round, and says why (discovery.json
    records the skipped stage); the recipe's warning is said once, not once per stage recipe discover writes."""
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RECIPE, "--simulate", "--repeats", "2", "--ladder-top", "2", "--refine", "2",
                     "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    stages = json.loads(proc.stdout)["stages"]
    assert [s["name"] for s in stages] == ["ladder", "refine-1"]
    assert stages[1]["runs_measured"] == 0 and stages[1]["skipped"].startswith("nothing to refine: ")
    # conc 1 -> 2 rises more than the knee rule calls flat, inside this short ladder's noise: no knee is placed
    # (one had been, at conc 1, from noise alone), and the skip says so
    assert "too noisy to place a knee" in stages[1]["skipped"], stages[1]["skipped"]
    assert "discover: stage refine-1 skipped — nothing to refine" in proc.stderr
    assert proc.stderr.count("warning [golden-al.precision-provenance]") == 1


RISING = RECIPE.with_name("rising-fixed-sim.yaml")


@pytest.mark.timeout(120)
def test_a_knee_above_the_ladder_is_not_reached_and_the_recipe_above_the_ladder_is_kept(tmp_path: Path) -> None:
    """A ladder whose top still raises throughput per GPU beyond noise found no knee: it says `not reached (above
    N)` in the table and discovery.json, and the proposal keeps the recipe's concurrencies above the ladder instead
    of cutting the grid at its top (2026-12-03: `knee: conc 8 — … the knee lies above it`, then [4, 16, 20, 24, 32]
    -> [4, 8])."""
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RISING, "--simulate", "--repeats", "2", "--ladder-top", "4", "--refine", "0",
                     "--out", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "knee: not reached (above 4) — throughput per GPU still rises beyond noise" in proc.stdout
    # what the figures are, as `run` says them: the recipe serves the simulator (it said `measured 3 point(s)`)
    assert proc.stdout.startswith("llmsweep discover — simulated, virtual time\n"), proc.stdout[:300]
    assert "simulated 3 points in 6 runs; " in proc.stdout and "measured 3 points" not in proc.stdout
    assert "knee: conc" not in proc.stdout and "the knee, where the grid stops" not in proc.stdout
    saved = json.loads((out / "discovery.json").read_text())
    assert {(r["source"], r["clock"]) for r in saved["runs"]} == {("simulated", "virtual")}
    (arm,) = saved["arms"]
    assert arm["error"] is None and arm["original"] == [1, 16, 24, 32]
    assert arm["knee"]["conc"] is None and arm["knee"]["above"] == 4 and arm["knee"]["next_conc"] is None
    concs = [p["conc"] for p in arm["proposed"]]
    assert concs[0] == 1 and 4 in concs and concs[-3:] == [16, 24, 32] and concs == sorted(set(concs))
    assert f"recipe: [1, 16, 24, 32]  ->  proposed: {concs}" in proc.stdout
    # the proposed recipe says that grid, and caps nothing: no knee was measured
    recipe = load_recipes([out / "proposed.yaml"]).raise_on_error().recipes["disc-sim-rising"]
    (entry,) = recipe.scenarios.fixed_seq_len[0].search_space  # type: ignore[index]
    assert entry.conc_list == concs
    assert recipe.policy is None or recipe.policy.max_conc is None


@pytest.mark.timeout(300)
def test_a_sigterm_stops_the_discovery_which_keeps_what_it_measured_and_exits_143(tmp_path: Path) -> None:
    """It exited 130 whatever the signal (the README's rule, and `run`'s, is 128 + the signal)."""
    import signal

    from support.procs import wait_for

    out, log = tmp_path / "disc", tmp_path / "log"
    fh = open(log, "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "discover", str(RECIPE), "--simulate",
                             "--repeats", "2", "--ladder-top", "32", "--refine", "1", "--duration", WINDOW,
                             "--out", str(out)], env=cli_env(tmp_path), stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "discover: stage ladder" in log.read_text(errors="replace"), timeout=120,
                 what="the ladder stage", proc=proc, log=log)
        # the signal lands once the ladder has a job folder (a fixed sleep sent it before there was one under load)
        jobs = out / "stages" / "ladder" / "jobs"
        wait_for(lambda: jobs.is_dir() and any(jobs.iterdir()), timeout=120, what="the ladder's first job folder",
                 proc=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 143, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    result = json.loads((out / "discovery.json").read_text())
    assert result["interrupted"] is not None and not (out / "proposed.yaml").exists()
    # What it says it measured is what finished: a job the signal cut (its outcome `failed: interrupted by SIGTERM`)
    # is not counted, whatever summary it left (it was, and set the highest measured concurrency).
    from llmsweep.metrics.model import SUCCESS_STATUSES

    (ladder,) = [s for s in result["stages"] if s["name"] == "ladder"]
    finished = [j for j in (Path(ladder["run_dir"]) / "jobs").iterdir()
                if (j / "outcome.json").is_file() and json.loads((j / "outcome.json").read_text())["status"]
                in SUCCESS_STATUSES]
    assert ladder["runs_measured"] == len(finished), (ladder, [j.name for j in finished])
    said = log.read_text(errors="replace")
    assert "--resume" not in said, said[-3000:]  # a stage is not the user's to resume; the discovery is run again


def test_an_out_that_cannot_be_written_is_one_error_line_before_any_stage(tmp_path: Path) -> None:
    """An --out through a file (or a folder this user cannot write) is refused as `run` refuses its own, exit 2:
    it was a NotADirectoryError traceback from writing the ladder's stage recipe, exit 1."""
    (tmp_path / "file").write_text("", encoding="utf-8")
    for out, said in ((tmp_path / "file", "is a file, not a folder"), (tmp_path / "file" / "sub", "cannot be written")):
        proc = _discover(tmp_path, RISING, "--simulate", "--ladder-top", "2", "--out", out)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert f"--out {out} {said}" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.timeout(120)
def test_a_recipe_cap_below_a_knee_not_reached_is_raised_so_the_proposal_validates(tmp_path: Path) -> None:
    """A recipe whose own `policy.max-conc` lies below a ladder that still rose at its top: the proposed grid runs to
    the ladder's top, so the cap is raised to it (and said); it was kept, and `llmsweep validate proposed.yaml`
    failed (`grid.max-conc`: conc [3, 4] above policy.max-conc 2)."""
    capped = tmp_path / "capped.yaml"
    text = RISING.read_text(encoding="utf-8").replace("conc-list: [1, 16, 24, 32]", "conc-list: [1, 2]")
    capped.write_text(text.replace("  precision: fp8\n", "  precision: fp8\n  policy: { max-conc: 2 }\n"),
                      encoding="utf-8")
    out = tmp_path / "disc"
    proc = _discover(tmp_path, capped, "--simulate", "--repeats", "2", "--ladder-top", "4", "--refine", "0",
                     "--out", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "policy.max-conc 2 raised to 4" in proc.stderr, proc.stderr[-3000:]
    recipe = load_recipes([out / "proposed.yaml"]).raise_on_error().recipes["disc-sim-rising"]
    (entry,) = recipe.scenarios.fixed_seq_len[0].search_space  # type: ignore[index]
    assert entry.conc_list is not None and max(entry.conc_list) == 4
    assert recipe.policy is not None and recipe.policy.max_conc == 4
    checked = cli_here(["validate", out / "proposed.yaml"], cli_env(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # raised to the recipe's own 32, kept above a knee the ladder did not reach: not "measured" there, as it said
    capped.write_text(RISING.read_text(encoding="utf-8").replace(
        "  precision: fp8\n", "  precision: fp8\n  policy: { max-conc: 4 }\n"), encoding="utf-8")
    proc = _discover(tmp_path, capped, "--simulate", "--repeats", "2", "--ladder-top", "4", "--refine", "0",
                     "--out", tmp_path / "kept")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert ("policy.max-conc 4 raised to 32, the top of the proposed grid (the recipe's own concurrencies above "
            "conc 4, the top of what was measured, kept as they are: the knee was not reached)") in proc.stderr


@pytest.mark.timeout(120)
def test_an_interrupted_discovery_proposes_no_policy_and_says_how_to_go_on(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C after a few ladder runs: the discovery proposes no recipe, and no policy either (its table said
    `policy: min-conc-step 1, max-conc 2` from a knee the signal cut the ladder above, beside `no recipe proposed`,
    and discovery.json held them as proposed), and says how to go on: its --out is refused to a second discovery,
    which does not resume. The interrupt lands on the 4th finished job, in this process."""
    from llmsweep.cli.discover import _print
    from llmsweep.discover.sweep import DiscoverRequest, discover

    said: list[str] = []
    event = _raising_at_run(4, KeyboardInterrupt(), said)

    out = tmp_path / "disc"
    result = discover(DiscoverRequest(recipe=RISING, out=out, simulate=True, repeats=2, ladder_top=4, refine=0),
                      event=event)
    assert result.interrupted == "ladder" and 3 <= result.runs_measured <= 4, said[-5:]
    assert result.arms[0].error is None and result.arms[0].concs  # what the runs so far give, for the evidence
    assert result.min_conc_step is None and result.max_conc is None and result.proposed_recipe is None
    saved = json.loads((out / "discovery.json").read_text())
    assert saved["min_conc_step"] is None and saved["max_conc"] is None
    assert not (out / "proposed.yaml").exists()
    assert "run it again with another --out" in said[-1], said[-1]
    _print(result)
    table = capsys.readouterr().out
    assert "policy: none proposed" in table and "no recipe or policy proposed" in table, table
    assert "run it again with another --out" in table and "->  proposed:" not in table, table


def test_a_store_that_cannot_be_written_is_refused_before_any_stage_and_the_fixed_command_runs(tmp_path: Path) -> None:
    """A --store through a file is refused (exit 2) before the ladder's stage is written: it was refused by the
    stage's own run after `stages/` was, so the same command with the store fixed was refused as `--out … already
    holds a discovery`. Nothing is made on a refusal: the store is checked before --out is made (an empty --out was
    left behind)."""
    (tmp_path / "file").write_text("", encoding="utf-8")
    out = tmp_path / "disc"
    args = ("--simulate", "--repeats", "2", "--ladder-top", "2", "--refine", "0", "--out", out)
    proc = _discover(tmp_path, RISING, *args, "--store", tmp_path / "file" / "s.sqlite")
    assert proc.returncode == 2 and "cannot be written" in proc.stderr and "is a file, not a folder" in proc.stderr, \
        proc.stderr[-3000:]
    assert not out.exists()
    if Path("/proc/self").is_dir():  # a folder SQLite cannot make a file in (procfs): refused when opened
        proc = _discover(tmp_path, RISING, *args, "--store", "/proc/x.sqlite")
        assert proc.returncode == 2 and "cannot open results store /proc/x.sqlite" in proc.stderr, proc.stderr[-3000:]
        assert not out.exists()
    proc = _discover(tmp_path, RISING, *args, "--store", tmp_path / "s.sqlite")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "discovery.json").exists()


def test_a_discovery_interrupted_before_any_run_finished_says_so(tmp_path: Path) -> None:
    """Ctrl-C before the ladder's first run finished (a real engine's server still starting): the arm says the
    interrupt is why it has no run; it said `no valid run of this arm (no valid run)`."""
    from llmsweep.discover.sweep import DiscoverRequest, discover

    def event(line: str) -> None:
        if re.search(r" jobs? planned, ", line):  # inside the ladder's run, before its first job
            raise KeyboardInterrupt

    result = discover(DiscoverRequest(recipe=RISING, out=tmp_path / "disc", simulate=True, repeats=2, ladder_top=4,
                                      refine=0), event=event)
    (arm,) = result.arms
    assert result.interrupted == "ladder" and result.runs_measured == 0
    assert arm.error == ("no valid run of this arm (the discovery was interrupted during stage ladder before one "
                         "finished)"), arm.error


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), RuntimeError("a defect of ours")],
                         ids=["disk-full", "unexpected"])
def test_a_stage_that_failed_mid_ladder_proposes_nothing_and_blames_the_failure_not_the_ladder_top(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], failure: Exception) -> None:
    """A stage that stopped on an error half-way up the ladder: the grid is what the runs so far give, not proposed,
    and the knee's advice is to run it again (it had said `proposed` and `raise --ladder-top`, though the ladder went
    to 8 and the failure cut it at 2). An error of no kind we expect (a defect, a raw sqlite error) had lost every run
    measured: discovery.json is written first, then it is raised with its traceback. (The ladder's first pass runs
    1, 2, 4, 8, its second pass repeats them: the failure lands on the 6th run.)"""
    from llmsweep.cli.discover import _print
    from llmsweep.discover.sweep import DiscoverRequest, discover

    event = _raising_at_run(6, failure)

    out = tmp_path / "disc"
    request = DiscoverRequest(recipe=RISING, out=out, simulate=True, repeats=2, ladder_top=8, refine=0)
    if isinstance(failure, OSError):
        result = discover(request, event=event)
    else:
        with pytest.raises(RuntimeError, match="a defect of ours"):
            discover(request, event=event)
        from llmsweep.discover.model import Discovery

        result = Discovery.model_validate_json((out / "discovery.json").read_text())
    assert result.failed is not None and result.failed.startswith("stage ladder failed"), result.failed
    assert result.runs_measured == 6 and result.interrupted is None and result.proposed_recipe is None
    (arm,) = result.arms
    assert arm.error is None and arm.knee is not None and not arm.knee.found, (arm.error, arm.knee)
    assert "--ladder-top" not in arm.knee.reason, arm.knee.reason
    assert "the discovery stopped as stage ladder failed before measuring it: run it again" in arm.knee.reason
    _print(result)
    table = capsys.readouterr().out
    assert "from the runs so far (not proposed)" in table and "->  proposed:" not in table, table


def test_a_recipe_whose_own_trace_source_is_missing_is_refused_before_any_stage(tmp_path: Path) -> None:
    """Without --traces, the recipe's own trace source is resolved before any stage too: a missing path had every
    ladder job refused (exit 1, the --out used up), and the corrected command was refused for that --out."""
    recipe = tmp_path / "missing.yaml"
    recipe.write_text(RECIPE.read_text(encoding="utf-8").replace(
        "      synthetic: { traces: 16, seed: 7, max-isl: 64000, max-osl: 1000 }",
        f"      path: {tmp_path / 'nowhere' / 'traces.jsonl'}"), encoding="utf-8")
    out = tmp_path / "disc"
    proc = _discover(tmp_path, recipe, "--simulate", "--repeats", "2", "--ladder-top", "2", "--out", out)
    assert proc.returncode == 2 and "discover: the recipe's trace source:" in proc.stderr, proc.stderr[-3000:]
    assert not (out / "stages").exists() and not (out / "discovery.json").exists()


def test_a_ladder_whose_every_job_was_refused_says_why_and_exits_1(tmp_path: Path) -> None:
    """--traces naming a folder without a trace is refused once, before any stage, exit 2 (every ladder job had been
    refused, exit 1, and the corrected command then refused for the --out the failed discovery had used)."""
    (tmp_path / "traces").mkdir()
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RECIPE, "--simulate", "--traces", tmp_path / "traces", "--repeats", "2",
                     "--ladder-top", "2", "--out", out, "--json")
    assert proc.returncode == 2 and "holds no trace" in proc.stderr, proc.stderr[-3000:]
    assert not (out / "stages").exists() and not (out / "discovery.json").exists()


@pytest.mark.timeout(300)
def test_ladder_points_never_run_an_8k1k_rows_accuracy_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README: "Ladder points never run an 8k1k row's accuracy eval". The recipe's conc-16 and conc-32 rows are
    `run-eval` points (InferenceX marks 8k1k at conc >= 16); a discovery measures throughput, so it needs no lm-eval
    and its stage jobs carry no eval — without lm-eval, a `run` of the recipe would refuse them."""
    recipe = tmp_path / "eval-8k1k.yaml"
    text = (RECIPE.parents[1] / "run" / "eval-8k1k.yaml").read_text(encoding="utf-8")
    recipe.write_text(text.replace("conc-list: [16]", "conc-list: [16, 32]")
                      + "  workload:\n    num-prompts-per-conc: 2\n    num-warmups: 1\n", encoding="utf-8")
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)
    out = tmp_path / "disc"
    proc = _discover(tmp_path, recipe, "--simulate", "--repeats", "2", "--ladder-top", "32", "--refine", "0",
                     "--out", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    jobs = list((out / "stages").glob("*/jobs/*/"))
    assert len(jobs) == 4, jobs  # conc 16 and 32, two repeats each
    for jdir in jobs:
        assert json.loads((jdir / "job.json").read_text()).get("run-eval") in (None, False), jdir.name
        assert "eval" not in json.loads((jdir / "summary.json").read_text()), jdir.name
        assert not (jdir / "eval").exists(), jdir.name
    assert "lm-eval" not in proc.stderr
    # the stages store their runs in --out's store.sqlite (no --store given), not $LLMSWEEP_STORE's
    with sqlite3.connect(out / "store.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM results").fetchone() == (4,)
    assert not (tmp_path / "store.sqlite").exists()


@pytest.mark.parametrize(("concs", "top"), [("[2, 4]", 64), ("[2, 32]", 128)])
def test_the_defaults_ladder_to_the_larger_of_64_and_4x_the_highest_with_three_repeats(
        tmp_path: Path, concs: str, top: int) -> None:
    """The README's defaults, which nothing else ran: the coarse ladder climbs from the arm's first concurrency by
    powers of two to `--ladder-top` (default: the larger of 64 and 4x the recipe's highest concurrency), each point
    run `--repeats` times (default 3), each repeat with its own workload seed; `--refine` (default 2) rounds follow."""
    recipe = tmp_path / "fixed.yaml"
    recipe.write_text((RECIPE.parents[1] / "run" / "fixed-sim.yaml").read_text(encoding="utf-8").replace(
        "conc-list: [2, 4]", f"conc-list: {concs}"), encoding="utf-8")
    out = tmp_path / "disc"
    proc = _discover(tmp_path, recipe, "--simulate", "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert (result["ladder_top"], result["repeats"]) == (top, 3)
    ladder = [2, *(c for c in (4, 8, 16, 32, 64, 128) if c <= top)]
    runs = [r for r in result["runs"] if r["stage"] == "ladder"]
    assert sorted({r["conc"] for r in runs}) == ladder and len(runs) == 3 * len(ladder)
    assert {r["seed"] for r in runs} == {42, 43, 44}
    # a knee above the ladder leaves the first refinement round nothing to bisect: said, not run
    assert [s["name"] for s in result["stages"]] == ["ladder", "refine-1"]
    assert "nothing to refine" in result["stages"][1]["skipped"] and result["arms"][0]["knee"]["above"] == top


def test_a_rung_that_failed_above_a_rising_top_is_the_knees_upper_bound_not_above_the_ladder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ladder's conc 4 failed (its server died: out of memory, as a real engine does past its KV): only valid runs
    reached the curve, so throughput still rising at conc 2 read as `knee: not reached (above 2)` — raise
    --ladder-top — and the recipe's concurrencies above were kept. Conc 4 was measured and did not serve: the knee
    lies between 2 and 4, the grid stops at 2, and the reason names the failure. (The simulator does not run out of
    memory: the stage's conc-4 jobs are made to have failed as a dead server's leave them, before the read-back.)"""
    from llmsweep.discover import sweep

    read_back = sweep.Stages._read_back

    def after_a_dead_server(self: sweep.Stages, record: object, keys: object) -> None:
        for job in (Path(record.run_dir) / "jobs").iterdir():  # type: ignore[attr-defined]
            if "_conc4_" in job.name:
                (job / "summary.json").unlink()
                outcome = json.loads((job / "outcome.json").read_text())
                outcome.update(status="failed", reasons=["server exited with status 137 during the job"])
                (job / "outcome.json").write_text(json.dumps(outcome))
        read_back(self, record, keys)  # type: ignore[arg-type]

    monkeypatch.setattr(sweep.Stages, "_read_back", after_a_dead_server)
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RISING, "--simulate", "--repeats", "2", "--ladder-top", "4", "--refine", "0",
                     "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    (arm,) = json.loads(proc.stdout)["arms"]
    knee = arm["knee"]
    assert (knee["conc"], knee["next_conc"], knee["above"]) == (2, 4, None), knee
    assert "conc 4 did not serve (failed: server exited with status 137 during the job)" in knee["reason"]
    concs = [p["conc"] for p in arm["proposed"]]
    assert concs[-1] == 2 and not any(c > 4 for c in concs), concs  # not the recipe's 16, 24, 32 "kept"


def test_a_rung_measured_across_a_pause_is_left_out_not_read_as_a_concurrency_that_did_not_serve(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run of the ladder's conc 4 judged invalid because llmsweep was stopped (Ctrl-Z) while it measured: the
    discovery says such a run is left out, yet counted conc 4 as a concurrency that did not serve, placing a knee
    between 2 and 4 from a pause. It is left out of the knee too. (Virtual time sees no pause: the stage's conc-4
    jobs are made to look as a paused run leaves them, before the read-back.)"""
    from llmsweep.discover import sweep
    from llmsweep.execute.readback import PAUSED

    read_back = sweep.Stages._read_back

    def after_a_pause(self: sweep.Stages, record: object, keys: object) -> None:
        for job in (Path(record.run_dir) / "jobs").iterdir():  # type: ignore[attr-defined]
            if "_conc4_" in job.name:
                outcome = json.loads((job / "outcome.json").read_text())
                outcome.update(status="invalid", reasons=["llmsweep was stopped for 2.0 s while it measured"])
                (job / "outcome.json").write_text(json.dumps(outcome))
                summary = json.loads((job / "summary.json").read_text())
                summary["validity"]["verdict"] = "invalid"
                (job / "summary.json").write_text(json.dumps(summary))
                info = json.loads((job / "run.json").read_text())
                info[PAUSED] = "llmsweep was stopped for 2.0 s (Ctrl-Z, SIGTSTP or SIGSTOP, then SIGCONT); rerun it"
                (job / "run.json").write_text(json.dumps(info))
        read_back(self, record, keys)  # type: ignore[arg-type]

    monkeypatch.setattr(sweep.Stages, "_read_back", after_a_pause)
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RISING, "--simulate", "--repeats", "2", "--ladder-top", "4", "--refine", "0",
                     "--out", out, "--json")
    result = json.loads(proc.stdout)
    (ladder,) = result["stages"]
    assert len(ladder["paused"]) == 2, ladder
    (arm,) = result["arms"]
    assert "did not serve" not in arm["knee"]["reason"] and arm["knee"]["next_conc"] is None, arm["knee"]


@pytest.mark.timeout(300)
def test_a_stage_that_fails_keeps_what_was_measured_and_a_recipe_that_cannot_be_rewritten_keeps_it_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refinement stage that stopped on an error (a disk full, a store or executor error) had thrown away every run
    measured before it (no discovery.json, the --out burned); and a proposal that could not be written back (arms
    sharing one YAML node) had ended the discovery with exit 2 after the whole sweep, no discovery.json, and a wrong
    proposed.yaml left behind."""
    from llmsweep.discover import recipe as proposal
    from llmsweep.discover import sweep
    from llmsweep.errors import ConfigError, LlmsweepError

    real = sweep.Stages.run

    def failing(self: sweep.Stages, name: str, concs: dict[str, list[int]], repeats: int) -> None:
        real(self, name, concs, repeats)  # the ladder measures, then its stage stops on an error
        raise LlmsweepError("the disk is full", fix="free some space")

    monkeypatch.setattr(sweep.Stages, "run", failing)
    out = tmp_path / "failed"
    proc = _discover(tmp_path, RECIPE, "--simulate", "--repeats", "2", "--ladder-top", "8", "--refine", "1",
                     "--duration", WINDOW, "--out", out, "--json")
    assert proc.returncode == 1, proc.stderr[-3000:]
    kept = json.loads((out / "discovery.json").read_text())
    assert kept["failed"].startswith("stage ladder failed: the disk is full") and kept["runs_measured"] == 8
    assert not (out / "proposed.yaml").exists() and "stage ladder failed" in proc.stderr
    monkeypatch.setattr(sweep.Stages, "run", real)

    def unwritable(*args: object, **kwargs: object) -> None:
        raise ConfigError("the proposed recipe does not load back", fix="apply the grids by hand")

    monkeypatch.setattr(sweep, "propose", unwritable)
    out = tmp_path / "unwritten"
    proc = _discover(tmp_path, RECIPE, "--simulate", "--repeats", "2", "--ladder-top", "8", "--refine", "0",
                     "--duration", WINDOW, "--out", out)
    assert proc.returncode == 2, proc.stderr[-3000:]
    kept = json.loads((out / "discovery.json").read_text())
    assert kept["proposal_error"].startswith("the proposed recipe does not load back") and kept["runs_measured"] == 8
    assert kept["arms"][0]["proposed"] and not (out / "proposed.yaml").exists()
    assert "no proposed recipe" in proc.stdout
    assert proposal.propose is not unwritable  # the module's own function is untouched


def test_a_tokenizer_that_does_not_load_is_refused_at_the_recipes_own_field_before_any_stage(tmp_path: Path) -> None:
    """A recipe whose `workload.tokenizer` is missing on this host: every ladder job had been refused, each naming the
    stage recipe discover wrote (`…/stages/ladder.yaml: …-discover1-seed42.workload.tokenizer`), exit 1, and the
    --out used up. `run`'s own check of the recipe's inputs, once, before anything is written: exit 2 at the recipe's
    file and field."""
    recipe = tmp_path / "no-tokenizer.yaml"
    missing = tmp_path / "no-such-tokenizer"
    recipe.write_text(H200.read_text(encoding="utf-8").replace(
        "    tokenizer: /tmp/models/smollm2-135m-instruct", f"    tokenizer: {missing}"), encoding="utf-8")
    out = tmp_path / "disc"
    proc = _discover(tmp_path, recipe, "--runner-config", H200.parent / "fleet.yaml", "--repeats", "2",
                     "--ladder-top", "2", "--out", out)
    assert proc.returncode == 2, proc.stderr[-3000:]
    said = " ".join(proc.stderr.split())
    assert f"{recipe}: smollm2-135m-bf16-h200-vllm-discover.workload.tokenizer: tokenizer '{missing}'" in said, said
    assert "stages" not in said and not out.exists()


@pytest.mark.timeout(120)
def test_a_quiet_arm_proposes_no_point_per_concurrency_and_says_what_the_proposal_costs(tmp_path: Path) -> None:
    """The simulator's fixed-length runs differ by about 1 % between seeds: the noise rule alone had turned the
    recipe's 4 concurrencies into 68 (1, 2, 3, …, 23, 25, …, 122, 128), most of them interpolated, with `min-conc-step:
    1` and not a word of the cost. Each step is now at least half an octave, and the table, discovery.json and
    proposed.yaml say how many jobs the proposed recipe plans against the recipe's."""
    out = tmp_path / "disc"
    proc = _discover(tmp_path, RISING, "--simulate", "--refine", "0", "--out", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    saved = json.loads((out / "discovery.json").read_text())
    (arm,) = saved["arms"]
    concs = [p["conc"] for p in arm["proposed"]]
    assert saved["ladder_top"] == 128 and concs[0] == 1 and concs[-1] == 128, concs
    assert all(b * b >= 2 * a * a for a, b in itertools.pairwise(concs)), concs  # each step half an octave or more
    assert len(concs) <= 15, concs  # at most two per doubling (it was 68)
    assert (saved["recipe_jobs"], saved["proposed_jobs"]) == (4, len(concs))
    growth = f"plans {count_of(len(concs), 'job')} where"
    assert f"proposed recipe {growth} the recipe plans 4 jobs" in proc.stdout, proc.stdout[-2000:]
    head = " ".join(ln.removeprefix("# ") for ln in (out / "proposed.yaml").read_text().splitlines()[:8])
    assert f"llmsweep discover: this recipe {growth} {RISING} plans 4 jobs" in head, head


@pytest.mark.timeout(120)
def test_a_disaggregated_arms_cost_counts_each_concurrency_a_job_as_run_runs_it(tmp_path: Path) -> None:
    """A multinode entry's conc list is one planned job, but `run` runs one job per concurrency: the statement counted
    planned jobs and said `plans 1 job where the recipe plans 1 job (×1.0)` of a grid grown from 4 concurrencies to a
    dozen."""
    out = tmp_path / "disc"
    recipe = RECIPE.with_name("disagg-sim.yaml")
    proc = _discover(tmp_path, recipe, "--simulate", "--refine", "0", "--out", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    saved = json.loads((out / "discovery.json").read_text())
    (arm,) = saved["arms"]
    concs = [p["conc"] for p in arm["proposed"]]
    assert arm["original"] == [1, 16, 24, 32] and len(concs) > 4, concs
    assert (saved["recipe_jobs"], saved["proposed_jobs"]) == (4, len(concs))
    growth = f"plans {count_of(len(concs), 'job')} where"
    assert f"proposed recipe {growth} the recipe plans 4 jobs (×{len(concs) / 4:.1f})" in proc.stdout, \
        proc.stdout[-2000:]
    head = " ".join(ln.removeprefix("# ") for ln in (out / "proposed.yaml").read_text().splitlines()[:12])
    assert f"llmsweep discover: this recipe {growth} {recipe} plans 4 jobs" in head, head


SEED = Path(__file__).resolve().parents[2] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"


@pytest.mark.timeout(120)
def test_an_arm_a_real_engine_would_refuse_carries_the_warning_wherever_its_grid_is_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed recipe's HiCache arm breaks a known incompatibility of SGLang 0.5.16 on ROCm, softened on the
    simulator: the discovery said it once, on stderr at start-up, and then proposed the arm's grid in discovery.json,
    the table and proposed.yaml as if an engine would run it."""
    out = tmp_path / "disc"
    proc = _discover(tmp_path, SEED, "--simulate", "--traces", "synthetic", "--duration", WINDOW, "--ladder-top", "8",
                     "--repeats", "2", "--refine", "0", "--out", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    saved = json.loads((out / "discovery.json").read_text())
    resident, hicache = saved["arms"]
    refusal = "a real engine would refuse them: [engine.known-incompatibility]"
    assert [w["runs"] for w in hicache["warnings"] if w["warning"].startswith(refusal)] == [4], hicache["warnings"]
    assert not [w for w in resident["warnings"] if w["warning"].startswith(refusal)], resident["warnings"]
    assert all(any(w.startswith(refusal) for w in r["warnings"]) == ("kvdram" in r["job_id"]) for r in saved["runs"])
    # the table, under the arm's heading, before its grid
    table = proc.stdout
    at = table.index(hicache["arm"])
    assert refusal in " ".join(table[at:].split()) and refusal not in table[:at], table[:3000]
    # proposed.yaml's head names the arm and the rule (above the recipe's own comments); the resident arm gets none
    lines = (out / "proposed.yaml").read_text().splitlines()
    own = lines.index(SEED.read_text().splitlines()[0])
    note = " ".join(ln.removeprefix("# ") for ln in lines[:own])
    assert (f"the grid of {hicache['arm']} ({hicache['label']}) was proposed from 4 runs a real engine would refuse: "
            "[engine.known-incompatibility]") in note, note
    assert f"{resident['arm']} " not in note, note
