"""A run resolves each Hugging Face trace dataset once, before any server starts, to the commit every point replays.

A dataset that gets commits (AgentX's `..._with_subagents` ids name rolling datasets) was fetched again by each
point's workload: points of one sweep replayed different corpora under one trace source, each summary's corpus digest
saying so and nothing stopping or saying it. Here the hub is a real Hugging Face cache (`snapshots/<commit>`,
`refs/main`) read offline by the real `snapshot_download`, standing in for the hub by moving `refs/main` to a new
commit after every fetch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_main

from llmsweep.workload.agentic import replay_corpus_digest
from llmsweep.workload.traces.synth import SynthProfile, synthesize, write_jsonl

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
DATASET = "org/rolling"
COMMITS = [f"{i:x}" * 40 for i in range(1, 9)]


def _rolling_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 asked: list[str | None] | None = None) -> Callable[[], str]:
    """A hub cache holding `DATASET` at each of `COMMITS` (another corpus each), `refs/main` at the first; every
    fetch moves `refs/main` to the next commit, as a dataset that gets commits during a sweep, and is added to
    `asked` (the revision it asked for). Returns the commit `refs/main` names now."""
    import huggingface_hub
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "datasets--org--rolling"
    for seed, commit in enumerate(COMMITS, start=1):
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        write_jsonl(synthesize(SynthProfile(traces=3, seed=seed, max_isl=4096)), snapshot / "traces.jsonl")
    main = repo / "refs" / "main"
    main.parent.mkdir(parents=True)
    main.write_text(COMMITS[0])
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    real = huggingface_hub.snapshot_download

    def moving(repo_id: str, **kwargs: Any) -> str:
        if asked is not None:
            asked.append(kwargs.get("revision"))
        local = str(real(repo_id, **kwargs))
        at = COMMITS.index(main.read_text())
        main.write_text(COMMITS[min(at + 1, len(COMMITS) - 1)])  # the dataset got a commit
        return local

    monkeypatch.setattr(huggingface_hub, "snapshot_download", moving)
    return main.read_text


def _sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two points (conc 2 and 3) of one agentic arm on the simulator, replaying `DATASET`: (the recipe, --out)."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    recipe = tmp_path / "two.yaml"
    text = QUICKSTART.read_text().replace("conc-list: [1, 4, 8, 12, 16]", "conc-list: [2, 3]")
    text = "\n".join(line for line in text.splitlines() if "kv-offloading: dram, kv-offload-backend" not in line)
    recipe.write_text(text.replace("duration: 1800", "duration: 10"))
    return recipe, tmp_path / "out"


def _replayed(out: Path) -> dict[str, tuple[str | None, str, str | None]]:
    """Each point's (commit, corpus digest) as its summary records them, and the commit its job.json pins."""
    points = {}
    for job in sorted((out / "jobs").iterdir()):
        workload = json.loads((job / "summary.json").read_text())["provenance"]["workload"]
        pinned = json.loads((job / "job.json").read_text())["workload"]["traces"].get("revision")
        points[job.name] = (workload.get("revision"), workload["corpus_digest"], pinned)
    return points


def _recorded(run: Path) -> list[tuple[str, str | None, str, list[str] | None]]:
    """run.json's `trace_revisions`: each (source, revision asked, commit, the jobs that replayed it)."""
    return [(pin["source"], pin["revision"], pin["commit"], sorted(pin["jobs"]) if pin["jobs"] is not None else None)
            for pin in json.loads(run.read_text())["trace_revisions"]]


def _jobs(out: Path) -> list[str]:
    return sorted(job.name for job in (out / "jobs").iterdir())


def test_every_point_of_a_sweep_replays_the_commit_resolved_before_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[str | None] = []
    main_now = _rolling_hub(tmp_path, monkeypatch, asked)
    recipe, out = _sweep(tmp_path, monkeypatch)
    code, _, err = run_main(capsys, "run", recipe, "--traces", DATASET, "--out", out, "--no-report")
    assert code == 0, err
    assert main_now() != COMMITS[0]  # the dataset moved during the sweep
    first = str(tmp_path / "hub" / "datasets--org--rolling" / "snapshots" / COMMITS[0] / "traces.jsonl")
    points = _replayed(out)
    assert len(points) == 2 and len({digest for _, digest, _ in points.values()}) == 1, points  # one corpus
    assert set(points.values()) == {(COMMITS[0], replay_corpus_digest(first), COMMITS[0])}, points
    assert _recorded(out / "run.json") == [(DATASET, None, COMMITS[0], _jobs(out))]
    assert f"trace source {DATASET}: every point replays commit {COMMITS[0]}" in err
    # the hub is asked once, for the latest: its commit was fetched again by the check and each point (5 asks)
    assert asked == [None], asked


def test_a_resume_replays_the_runs_commit_or_is_refused_naming_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    main_now = _rolling_hub(tmp_path, monkeypatch)
    recipe, out = _sweep(tmp_path, monkeypatch)
    args = ("run", recipe, "--traces", DATASET, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    unfinished = sorted((out / "jobs").iterdir())[1]
    (unfinished / "summary.json").unlink()
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0 and "1 resumed" in err, err
    assert {p[0] for p in _replayed(out).values()} == {COMMITS[0]}  # the dataset's latest is another commit
    assert f"every point replays commit {COMMITS[0]} (as the run it resumes did)" in err

    # the run's commit is no longer to be had (the dataset's history squashed, a cache without it, offline)
    (unfinished / "summary.json").unlink()
    snapshot = tmp_path / "hub" / "datasets--org--rolling" / "snapshots" / COMMITS[0]
    snapshot.rename(snapshot.with_name("gone"))
    meta = (out / "run.json").read_text()
    latest = main_now()  # what the refusal's look at the dataset's latest finds (and moves on from)
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 2, err
    assert f"replayed trace source {DATASET} at commit {COMMITS[0]}, which cannot be fetched now" in err
    assert f"its latest is commit {latest}" in err and "fix: make commit" in err
    assert (out / "run.json").read_text() == meta and not (unfinished / "summary.json").exists()  # nothing ran


def test_predict_replays_one_commit_at_every_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _rolling_hub(tmp_path, monkeypatch)
    recipe, _ = _sweep(tmp_path, monkeypatch)
    code, out, err = run_main(capsys, "predict", recipe, "--traces", DATASET, "--processes", "1", "--json")
    assert code == 0, err
    replayed = [(row["summary"]["provenance"]["workload"].get("revision"),
                 row["summary"]["provenance"]["workload"]["corpus_digest"]) for row in json.loads(out)]
    assert len(replayed) == 2 and len(set(replayed)) == 1 and replayed[0][0] == COMMITS[0], replayed


def test_a_pinned_job_keeps_the_reuse_identity_it_had(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned commit is no part of a reuse key's identity: what the corpus holds is the key's context (its
    digest), so a stored result replaying the same traces stands for the job at another commit, and the keys runs
    recorded before commits were pinned still match."""
    from llmsweep.changes.reuse import reuse_doc
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.point import TracePin, corpus_ref, pin_trace_sources, with_traces

    _rolling_hub(tmp_path, monkeypatch)
    recipe, _ = _sweep(tmp_path, monkeypatch)
    jobs = with_traces(jobs_from_files([recipe]), DATASET)
    pinned, pins, failed = pin_trace_sources(jobs)
    assert pins == [TracePin(source=DATASET, commit=COMMITS[0], jobs=[j.id for j in jobs])] and not failed
    # one fetch: both at the first commit
    assert [ref.revision if (ref := corpus_ref(j)) else None for j in pinned] == [COMMITS[0]] * 2
    assert [reuse_doc(j, "") for j in pinned] == [reuse_doc(j, "") for j in jobs]


def test_a_loader_id_and_its_datasets_id_are_one_source_pinned_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs naming one dataset by an AgentX loader id and by the dataset's own id were pinned as two sources: the
    dataset was asked twice, and where it got a commit between the two asks, one sweep replayed two corpora of it,
    run.json recording two pins of one dataset."""
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.point import TracePin, corpus_ref, pin_trace_sources, with_traces
    from llmsweep.spec.workload import AGENTX_LOADERS

    asked: list[str | None] = []
    _rolling_hub(tmp_path, monkeypatch, asked)
    monkeypatch.setitem(AGENTX_LOADERS, "rolling_with_subagents", DATASET)
    recipe, _ = _sweep(tmp_path, monkeypatch)
    by_loader = with_traces(jobs_from_files([recipe])[:1], "rolling_with_subagents")
    by_id = with_traces(jobs_from_files([recipe])[1:], DATASET)
    pinned, pins, failed = pin_trace_sources(by_loader + by_id)
    assert asked == [None] and not failed, asked  # one fetch, of the dataset's latest
    assert pins == [TracePin(source=DATASET, commit=COMMITS[0], jobs=[j.id for j in by_loader + by_id])], pins
    assert [ref.revision if (ref := corpus_ref(j)) else None for j in pinned] == [COMMITS[0]] * 2
    assert pinned[0].workload.traces is not None and pinned[0].workload.traces.hf == "rolling_with_subagents"
    # what a resume replays: the commit recorded for the dataset, under either name
    again, _, _ = pin_trace_sources(by_loader, recorded=pins)
    assert [ref.revision if (ref := corpus_ref(j)) else None for j in again] == [COMMITS[0]]


def test_a_resume_of_a_run_from_before_pinning_keeps_its_finished_jobs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A run measured before sweeps pinned their hub sources recorded no commit (run.json without `trace_revisions`,
    job.json without `traces.revision`). Its `--resume` pins the dataset's latest, and a finished job whose corpus is
    that commit's (its reuse key's corpus digest says so) is the same job: it ran again as 'workload.traces.revision
    changed', hours of GPU time for a label its result had never carried."""
    _rolling_hub(tmp_path, monkeypatch)
    recipe, out = _sweep(tmp_path, monkeypatch)
    args = ("run", recipe, "--traces", DATASET, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    meta = json.loads((out / "run.json").read_text())
    del meta["trace_revisions"]  # as the earlier llmsweep wrote them
    (out / "run.json").write_text(json.dumps(meta))
    finished, unfinished = sorted((out / "jobs").iterdir())
    for job in (finished, unfinished):
        doc = json.loads((job / "job.json").read_text())
        del doc["workload"]["traces"]["revision"]
        (job / "job.json").write_text(json.dumps(doc))
    (unfinished / "summary.json").unlink()
    hub = tmp_path / "hub" / "datasets--org--rolling"
    (hub / "refs" / "main").write_text(COMMITS[0])  # the dataset's latest is still the corpus they replayed
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0 and "1 resumed" in err, err
    assert "changed" not in err, err


def test_a_force_of_part_of_the_run_replays_the_runs_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--force --job` runs one job again and keeps the others' results: it pinned the dataset's latest, so the job
    replayed another corpus than the rest of the run, and run.json's `trace_revisions` named that commit for all."""
    main_now = _rolling_hub(tmp_path, monkeypatch)
    recipe, out = _sweep(tmp_path, monkeypatch)
    args = ("run", recipe, "--traces", DATASET, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    assert main_now() != COMMITS[0]  # the dataset got a commit since
    again = json.loads((sorted((out / "jobs").iterdir())[0] / "job.json").read_text())["id"]
    code, _, err = run_main(capsys, *args, "--force", "--job", again)
    assert code == 0, err
    assert f"every point replays commit {COMMITS[0]} (as the rest of the run did)" in err
    assert {p[0] for p in _replayed(out).values()} == {COMMITS[0]}, _replayed(out)
    assert _recorded(out / "run.json") == [(DATASET, None, COMMITS[0], _jobs(out))]
    # the whole run forced again replays the dataset's commit now
    latest = main_now()
    code, _, err = run_main(capsys, *args, "--force")
    assert code == 0, err
    assert {p[0] for p in _replayed(out).values()} == {latest}
    assert _recorded(out / "run.json") == [(DATASET, None, latest, _jobs(out))]


def test_every_stage_of_a_discovery_replays_the_commit_its_recipes_branch_was_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recipe's `traces.revision: main` was resolved again by each stage's run: a dataset that got a commit
    mid-discovery had its ladder and refinements replay different corpora, analysed as one arm — and a stage another
    commit than the one the discovery had checked before it started."""
    from llmsweep.discover.sweep import DiscoverRequest, discover

    main_now = _rolling_hub(tmp_path, monkeypatch)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    text = (REPO / "tests" / "data" / "recipes" / "discover" / "cliff-sim.yaml").read_text()
    synthetic = "synthetic: { traces: 16, seed: 7, max-isl: 64000, max-osl: 1000 }"
    assert synthetic in text
    recipe = tmp_path / "branch.yaml"
    recipe.write_text(text.replace(synthetic, f"{{ hf: {DATASET}, revision: main }}").replace("    traces:\n      ",
                                                                                               "    traces: "))
    out = tmp_path / "disc"
    discover(DiscoverRequest(recipe=recipe, out=out, simulate=True, repeats=2, ladder_top=2, refine=0, duration=30),
             event=lambda _: None)
    assert main_now() != COMMITS[0]
    stages = sorted((out / "stages").glob("*/run.json"))
    assert stages, out
    for run in stages:
        assert {pin[:3] for pin in _recorded(run)} == {(DATASET, COMMITS[0], COMMITS[0])}, run
        assert {p[0] for p in _replayed(run.parent).values()} == {COMMITS[0]}, run
        stage = yaml.safe_load(run.parent.with_suffix(".yaml").read_text())  # the stage recipe says so
        assert {key["workload"]["traces"]["revision"] for key in stage.values()} == {COMMITS[0]}, stage


TAGGED = COMMITS[5]
"""The commit the dataset's tag `v1` names (`refs/v1`), which does not move."""


def _keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, revisions: dict[str, str | None]) -> tuple[Path, Path]:
    """A recipe of one agentic key per entry of `revisions` (its name's suffix: the `traces.revision` it asks of
    `DATASET`, None: none), one point (conc 2) each, on the simulator: (the recipe, --out). The hub gets tag `v1`."""
    (tmp_path / "hub" / "datasets--org--rolling" / "refs" / "v1").write_text(TAGGED)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    text = QUICKSTART.read_text().replace("conc-list: [1, 4, 8, 12, 16]", "conc-list: [2]")
    text = "\n".join(line for line in text.splitlines() if "kv-offloading: dram, kv-offload-backend" not in line)
    text = text.replace("duration: 1800", "duration: 10")
    synthetic = "synthetic: { traces: 64, seed: 7, max-isl: 256000 }"
    key = "qwen3.5-fp8-mi300x-sim-agentic-mtp:"
    assert synthetic in text and key in text
    recipe = tmp_path / "keys.yaml"
    recipe.write_text("\n".join(
        text.replace(key, f"{key[:-1]}-{name}:").replace(
            synthetic, f"hf: {DATASET}" + (f"\n      revision: {revision}" if revision else ""))
        for name, revision in revisions.items()))
    return recipe, tmp_path / "out"


def _by_key(out: Path) -> dict[str, tuple[str, str | None, str]]:
    """Each job folder by its recipe key's suffix: (its id, the commit its summary says it replayed, its corpus)."""
    found = {}
    for folder in (out / "jobs").iterdir():
        job = json.loads((folder / "job.json").read_text())
        workload = json.loads((folder / "summary.json").read_text())["provenance"]["workload"]
        found[job["recipe-key"].rsplit("-", 1)[1]] = (folder.name, workload.get("revision"), workload["corpus_digest"])
    return found


def test_two_revisions_of_one_dataset_are_recorded_apart_and_each_resumes_at_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Two recipe keys of one run naming one dataset, one at its latest and one at tag `v1`: run.json's
    `trace_revisions` was keyed by the dataset alone, so it recorded one of the two commits (the last pinned) as the
    whole run's, and a `--resume` compared the other key's commit with it and was refused — or, for the key at its
    latest, replayed the tag's commit under the latest's name."""
    main_now = _rolling_hub(tmp_path, monkeypatch)
    recipe, out = _keys(tmp_path, monkeypatch, {"latest": None, "tagged": "v1"})
    args = ("run", recipe, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    ran = _by_key(out)
    assert {key: commit for key, (_, commit, _) in ran.items()} == {"latest": COMMITS[0], "tagged": TAGGED}, ran
    assert ran["latest"][2] != ran["tagged"][2]  # two corpora, each said by its own jobs
    assert sorted(_recorded(out / "run.json"), key=str) == sorted(
        [(DATASET, None, COMMITS[0], [ran["latest"][0]]), (DATASET, "v1", TAGGED, [ran["tagged"][0]])], key=str)
    assert f"trace source {DATASET}: every point replays commit {COMMITS[0]}" in err
    assert f"trace source {DATASET} at revision v1: every point replays commit {TAGGED}" in err

    assert main_now() != COMMITS[0]  # the dataset got commits since
    for folder in (out / "jobs").iterdir():
        (folder / "summary.json").unlink()  # neither finished
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0, err
    assert _by_key(out) == ran  # each key replayed the commit it replayed in the run, not the dataset's latest
    assert f"every point replays commit {COMMITS[0]} (as the run it resumes did)" in err
    assert f"at revision v1: every point replays commit {TAGGED} (as the run it resumes did)" in err
    assert sorted(_recorded(out / "run.json"), key=str) == sorted(
        [(DATASET, None, COMMITS[0], [ran["latest"][0]]), (DATASET, "v1", TAGGED, [ran["tagged"][0]])], key=str)


def test_a_branch_a_recipe_names_resumes_at_the_runs_commit_as_its_latest_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`traces.revision: main` names what a recipe without one replays (the dataset's latest), yet a resume after
    `main` got a commit was refused while one without `revision` replayed the run's commit: one run, two answers for
    one corpus. Both resume at the run's commit now; a recipe whose revision changed since the run (another commit,
    another tag) is refused naming both commits, as its jobs would replay another corpus than the run's."""
    main_now = _rolling_hub(tmp_path, monkeypatch)
    recipe, out = _keys(tmp_path, monkeypatch, {"main": "main"})
    args = ("run", recipe, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    ((folder, commit, corpus),) = _by_key(out).values()
    assert commit == COMMITS[0] and main_now() != COMMITS[0]
    (out / "jobs" / folder / "summary.json").unlink()
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0, err
    assert _by_key(out) == {"main": (folder, COMMITS[0], corpus)}
    assert f"at revision main: every point replays commit {COMMITS[0]} (as the run it resumes did)" in err
    code, _, err = run_main(capsys, *args, "--force", "--job", folder)  # a narrowed --force: the rest of the run's
    assert code == 0 and "(as the rest of the run did)" in err, err
    assert _by_key(out) == {"main": (folder, COMMITS[0], corpus)}

    (out / "jobs" / folder / "summary.json").unlink()
    for other in (COMMITS[3], "v1"):  # the recipe edited to name another commit, another tag
        recipe.write_text(recipe.read_text().replace("revision: main", f'revision: "{other}"'))
        code, _, err = run_main(capsys, *args, "--resume")
        assert code == 2, err
        assert (f"replayed trace source {DATASET} at commit {COMMITS[0]}, and its recipe's traces.revision {other} "
                f"is commit {COMMITS[3] if other != 'v1' else TAGGED} now") in err, err
        assert not (out / "jobs" / folder / "summary.json").exists()  # nothing ran
        recipe.write_text(recipe.read_text().replace(f'revision: "{other}"', "revision: main"))


def test_a_run_json_of_an_earlier_release_still_resumes_at_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """run.json's `trace_revisions` was `{dataset: commit}` before it recorded each revision asked and its jobs: such
    a run still resumes at that commit, and keeps the entry (it names neither the revision asked nor the jobs)."""
    main_now = _rolling_hub(tmp_path, monkeypatch)
    recipe, out = _sweep(tmp_path, monkeypatch)
    args = ("run", recipe, "--traces", DATASET, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    meta = json.loads((out / "run.json").read_text())
    meta["trace_revisions"] = {DATASET: COMMITS[0]}  # as the earlier llmsweep wrote it
    (out / "run.json").write_text(json.dumps(meta))
    unfinished = sorted((out / "jobs").iterdir())[1]
    (unfinished / "summary.json").unlink()
    assert main_now() != COMMITS[0]
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0 and "1 resumed" in err, err
    assert {p[0] for p in _replayed(out).values()} == {COMMITS[0]}
    assert _recorded(out / "run.json") == [(DATASET, None, COMMITS[0], None), (DATASET, None, COMMITS[0], _jobs(out))]
