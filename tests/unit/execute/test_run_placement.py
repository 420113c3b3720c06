"""A simulated job runs where `--executor` says or is refused: in virtual time it runs in this process (an
`--executor slurm` run once recorded `executor: slurm` and touched no Slurm), and the live simulator runs on the host,
never from an image (`--executor docker` found that only after launching, with a fix to set an image the recipe had).
Options that refuse every job so are bad input, said once before anything is written (they refused each job with the
same line, exited 1 and left a run of no result in the store); a job among others that run is refused on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.cli.main import main

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, list[dict[str, object]], str]:
    with pytest.raises(SystemExit) as done:
        main(["run", str(RECIPE), *args, "--out", str(tmp_path / "run"), "--no-report", "--json"])
    captured = capsys.readouterr()
    return int(done.value.code or 0), json.loads(captured.out)["jobs"], captured.err


@pytest.mark.parametrize(("args", "said"), [
    (("--executor", "slurm"), "--executor slurm would place no server (add --live"),
    # --live is no way out through docker (the live simulator runs on the host): the fix never names it there
    (("--executor", "docker"), "--executor docker would place no server (drop --executor"),
    (("--executor", "docker", "--live"), "--executor docker has no container to start for it"),
])
def test_a_simulated_job_is_refused_where_the_executor_would_not_run_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: tuple[str, ...], said: str) -> None:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    with pytest.raises(SystemExit) as done:
        main(["run", str(RECIPE), *args, "--out", str(tmp_path / "run"), "--no-report", "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 2 and not captured.out, captured.err  # bad input: no table
    # said once for the two jobs, with the fix, and nothing planned into --out or the store
    reason, _, fix = said.partition(" (")
    assert captured.err.startswith("error: none of the 2 jobs can run: ") and captured.err.count(reason) == 1
    assert f"fix: {fix}" in captured.err
    assert not (tmp_path / "run").exists() and not (tmp_path / "store.sqlite").exists()


def test_the_local_executor_runs_them_in_virtual_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, rows, err = _run(capsys, tmp_path, "--executor", "local")
    assert code == 0 and [r["verdict"] for r in rows] == ["valid", "valid"], err


def test_a_job_reused_once_and_refused_later_shows_no_borrowed_figures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """What a job reused is this invocation's answer (run.json `reused`), not a `reused.json` an earlier invocation
    left in its folder: a review found a refused job showing the old run's throughput beside `refused`."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    for args in ((), ("--reuse",)):
        with pytest.raises(SystemExit) as done:
            main(["run", str(RECIPE), *args, "--out", str(tmp_path / ("b" if args else "a")), "--no-report"])
        assert done.value.code == 0
    capsys.readouterr()
    # refused now among jobs of another recipe (refused for their own reason): a refusal of the run's jobs, not of
    # the whole run
    with pytest.raises(SystemExit):
        main(["run", str(RECIPE), str(RECIPE.parent / "no-serve.yaml"), "--executor", "docker", "--force", "--out",
              str(tmp_path / "b"), "--no-report", "--json"])
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["jobs"]
    assert [r["verdict"] for r in rows] == ["refused", "refused", "refused"]
    assert all(r["tput_per_gpu"] is None for r in rows), rows
    assert "reused stored results" not in captured.err and "3 expected jobs without a result" in captured.err
    assert sum("--executor docker would place no server" in str(r["reason"]) for r in rows) == 2


@pytest.mark.parametrize("simulate", [False, True], ids=["sim-engine", "--simulate"])
def test_run_and_discover_refuse_a_simulated_job_for_one_reason_in_one_wording(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], simulate: bool) -> None:
    """`run` decides per job and `discover` up front, from one function: the same reason, said the same way (only
    the fix differs where the command does: discover offers no --live)."""
    from llmsweep.discover.sweep import DiscoverRequest, discover
    from llmsweep.errors import ConfigError
    from llmsweep.execute.placement import simulator_placement_refusal

    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    flags = ("--simulate",) if simulate else ()
    with pytest.raises(SystemExit):
        main(["run", str(RECIPE), "--executor", "slurm", *flags, "--out", str(tmp_path / "run"), "--no-report"])
    err = capsys.readouterr().err
    why = simulator_placement_refusal(engine="sim", simulate=simulate, executor="slurm", live=False)
    assert why is not None and f": {why.reason}\n  fix: {why.fix}" in err, err
    with pytest.raises(ConfigError) as refused:
        discover(DiscoverRequest(recipe=RECIPE, out=tmp_path / "discover", executor="slurm", simulate=simulate),
                 event=lambda _msg: None)
    said = simulator_placement_refusal(engine="sim", simulate=simulate, executor="slurm", live=False,
                                       live_option=False)
    assert said is not None and said.reason == why.reason
    assert refused.value.message.endswith(f": {why.reason}") and refused.value.fix == said.fix
    assert "--live" in why.fix and "--live" not in said.fix
    assert not (tmp_path / "discover" / "stages").exists()
