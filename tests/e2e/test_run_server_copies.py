"""A job planned twice on one server (`grid.duplicate`: a concurrency listed twice; `grid.duplicate-arm`, two recipes
alike) sends one point twice to one server. Their first runs draw two samples (each its job id), and repeat k of both
copies drew one (`workload.scenario.sample_name` follows what the point sends and k, so the arms of a point pair up):
the later copy's repeat was no sample of its own, and on a server that keeps its prefix cache between jobs it found
the earlier copy's fixed-length prompts there (the live simulator: 87 % of its prompt tokens, 1,536 of them, where the
workload plans none). `run --reuse` then stood both copies on one stored result. A later copy now draws its own sample
in every repeat (`Job.server_copy`), and its reuse key says which copy it is.

Real runs of the CLI on the simulator, into a private store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_here

from llmsweep.workload.scenario import repeat_of


def _twice(tmp_path: Path) -> Path:
    """fixed-sim.yaml with conc 2 listed twice: two jobs of one point on its one server."""
    recipe = tmp_path / "twice.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("conc-list: [2, 4]", "conc-list: [2, 2]"))
    return recipe


def _drawn(out: Path) -> dict[str, dict[str, Any]]:
    """Each job's seed, the prompts it sent (each one's index and length: what the sample decides), its prefix-cache
    hits and its copy (`server-copy`), by job id."""
    drawn = {}
    for name, jdir in job_dirs(out).items():
        summary = read_json(jdir / "summary.json")
        rows = [json.loads(line) for line in (jdir / "records.jsonl").read_text().splitlines() if line.strip()]
        drawn[name] = {"seed": summary["provenance"]["workload"]["seed"],
                       "prompts": sorted((r["phase"], r["request_index"], r["input_tokens_expected"]) for r in rows),
                       "cached": summary["cache"]["observed_cached_tokens"],
                       "copy": read_json(jdir / "job.json").get("server-copy")}
    return drawn


@pytest.mark.timeout(300)
def test_the_copies_of_a_job_on_one_server_draw_their_own_samples_in_every_repeat(tmp_path: Path) -> None:
    """Live, on one simulator server: the later copy's repeat found the earlier's prompts in the prefix cache."""
    env = cli_env(tmp_path)
    out = tmp_path / "live"
    proc = run_here([_twice(tmp_path), "--repeats", "2", "--live", "--out", out, "--no-report"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "grid.duplicate" in proc.stderr  # still planned twice, as InferenceX plans it, and said
    drawn = _drawn(out)
    assert len(drawn) == 4
    for name, job in drawn.items():  # no job finds another's prompts in the server's prefix cache
        assert job["cached"] == 0, (name, job["cached"])
    assert len({job["seed"] for job in drawn.values()}) == 4, drawn  # four samples: no copy draws another's
    firsts = sorted(name for name in drawn if repeat_of(name)[1] == 1)
    assert [drawn[name]["copy"] for name in firsts] == [None, 2]  # the second by job id is the later copy


def _copies(out: Path) -> tuple[str, str]:
    """(the first copy's repeat 2, the later copy's): the later copy is the second by job id."""
    firsts = sorted(name for name in job_dirs(out) if repeat_of(name)[1] == 1)
    assert len(firsts) == 2
    return f"{firsts[0]}-repeat2", f"{firsts[1]}-repeat2"


@pytest.mark.timeout(300)
def test_a_later_copy_keeps_its_sample_when_run_alone_and_reuse_stands_each_copy_on_its_own(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    recipe, out = _twice(tmp_path), tmp_path / "run"
    proc = run_here([recipe, "--repeats", "2", "--out", out, "--no-report"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    drawn = _drawn(out)
    first, later = _copies(out)
    assert drawn[later]["seed"] != drawn[first]["seed"] and drawn[later]["prompts"] != drawn[first]["prompts"]
    keys = read_json(out / "run.json")["reuse_keys"]
    assert len(set(keys.values())) == 4  # each copy's key its own, the first runs' too

    # the later copy's repeat measured again alone (`--force --job <id>-repeat2`) is still the later copy: its sample
    again = run_here([recipe, "--repeats", "2", "--out", out, "--no-report", "--force", "--job", later], env)
    assert again.returncode == 0, again.stderr[-4000:]
    assert _drawn(out)[later]["seed"] == drawn[later]["seed"]
    assert read_json(out / "run.json")["reuse_keys"][later] == keys[later]

    # `--reuse` stands each copy on its own stored result (it had stood both on one: the run held one result twice)
    reusing = run_here([recipe, "--repeats", "2", "--out", tmp_path / "reusing", "--no-report", "--reuse"], env)
    assert reusing.returncode == 0, reusing.stderr[-4000:]
    stood = read_json(tmp_path / "reusing" / "run.json")["reused"]
    assert {job: src["job_id"] for job, src in stood.items()} == {job: job for job in drawn}
    assert len({src["result_id"] for src in stood.values()}) == 4


@pytest.mark.timeout(300)
def test_force_of_one_copy_keeps_the_other_copy_in_the_run(tmp_path: Path) -> None:
    """Two copies of a job share what names a job across two plans (`changes.diff.match_id`: the id without its
    hash), so `--force --job <one copy>` took the other copy's folder for an earlier attempt of the job renamed: moved
    into its attempts/ ("superseded"), its result dropped from the run, which then counted one job fewer."""
    env = cli_env(tmp_path)
    recipe, out = _twice(tmp_path), tmp_path / "run"
    proc = run_here([recipe, "--repeats", "2", "--out", out, "--no-report"], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    drawn, keys = _drawn(out), read_json(out / "run.json")["reuse_keys"]
    first, later = _copies(out)
    for one in (repeat_of(first)[0], later):  # a first run of one copy, a repeat of the other
        again = run_here([recipe, "--repeats", "2", "--out", out, "--no-report", "--force", "--job", one], env)
        assert again.returncode == 0, again.stderr[-4000:]
        assert "superseded" not in again.stderr, again.stderr[-4000:]
        assert "the whole run: 4 jobs, 4 with a valid" in again.stderr, again.stderr[-2000:]
        assert sorted(_drawn(out)) == sorted(drawn)
        for attempt in (out / "jobs").glob("*/attempts/*"):  # every attempt kept is its own job's
            assert read_json(attempt / "job.json")["id"] == attempt.parent.parent.name, attempt
        assert read_json(out / "run.json")["reuse_keys"] == keys


def test_run_renders_each_job_once_however_often_it_is_sent_or_repeated(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`run` renders each job's server to find its copies (`server_copies`, over the whole plan) and to group its
    jobs (`_groups`): a job sent twice was rendered by both, and each repeat again (330 points sent twice: 660
    renders of 165 launches as the server sees them). It renders each job once; the copies and groups stand."""
    from llmsweep.execute import pipeline

    rendered: list[str] = []
    real = pipeline._server_of

    def counted(job: Any, *args: Any) -> Any:
        rendered.append(job.id)
        return real(job, *args)

    monkeypatch.setattr(pipeline, "_server_of", counted)
    recipe = tmp_path / "copies.yaml"
    recipe.write_text(_twice(tmp_path).read_text().replace("conc-list: [2, 2]", "conc-list: [2, 2, 4]"))
    out = tmp_path / "out"
    proc = run_here([recipe, "--repeats", "2", "--out", out, "--no-report"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    # conc 2 sent twice and conc 4, each repeated: two jobs as their server sees them, each rendered once
    assert len(rendered) == 2, rendered
    drawn = _drawn(out)
    assert len(drawn) == 6
    assert sorted(str(job["copy"]) for job in drawn.values()) == ["2", "2", "None", "None", "None", "None"], drawn
    assert len({job["seed"] for job in drawn.values()}) == 6, drawn
