"""A Hugging Face trace dataset is read at a revision: `pin_dataset` resolves its latest (or a branch, tag) to the
commit a sweep replays, and every later read at that commit gets that snapshot whatever the dataset got since.

The hub is a real Hugging Face cache (`snapshots/<commit>`, `refs/main`) read by the real `snapshot_download`
offline; the dataset getting a commit is `refs/main` moving.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmsweep.errors import DatasetError
from llmsweep.spec import loads_recipes
from llmsweep.spec.workload import AGENTX_LOADERS
from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload, replay_corpus_digest
from llmsweep.workload.traces import loader
from llmsweep.workload.traces.synth import SynthProfile, synthesize, write_jsonl

LOADER = "semianalysis_cc_traces_weka_with_subagents"
OLD, NEW = "a" * 40, "b" * 40


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The AgentX loader id's dataset in a hub cache at two commits (another corpus each), `refs/main` at OLD;
    returns its `refs/main` file."""
    from huggingface_hub import constants

    org, name = AGENTX_LOADERS[LOADER].split("/")
    repo = tmp_path / "hub" / f"datasets--{org}--{name}"
    for seed, commit in ((1, OLD), (2, NEW)):
        (repo / "snapshots" / commit).mkdir(parents=True)
        write_jsonl(synthesize(SynthProfile(traces=3, seed=seed, max_isl=4096)),
                    repo / "snapshots" / commit / "traces.jsonl")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(OLD)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return repo / "refs" / "main"


def test_a_pinned_commit_is_read_after_the_dataset_moved(hub: Path) -> None:
    commit = loader.pin_dataset(LOADER)  # an AgentX loader id: its dataset's commit
    assert commit == OLD and loader.pin_dataset(AGENTX_LOADERS[LOADER]) == OLD
    pinned = replay_corpus_digest(LOADER, revision=commit)
    hub.write_text(NEW)  # the dataset got a commit
    assert replay_corpus_digest(LOADER) != pinned  # its latest is another corpus
    assert replay_corpus_digest(LOADER, revision=commit) == pinned
    workload = AgenticWorkload(AgenticConfig(source=LOADER, revision=commit, run_id="r"))
    assert workload.corpus_digest == pinned
    assert workload.describe()["revision"] == commit  # the point's provenance says which commit it replayed


def test_a_commit_that_cannot_be_fetched_is_refused_naming_it(hub: Path) -> None:
    gone = "c" * 40
    with pytest.raises(DatasetError, match=rf"could not fetch trace dataset '{AGENTX_LOADERS[LOADER]}' at "
                                           rf"revision {gone} from the Hugging Face hub"):
        loader.pin_dataset(LOADER, gone)


def test_a_snapshot_folder_that_names_no_commit_is_not_pinned(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`snapshot_download` into a `local_dir`, or a stand-in hub, gives a folder that is not `snapshots/<commit>`:
    no commit can be recorded, and saying one would be a label the run did not earn."""
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: str(tmp_path))
    with pytest.raises(DatasetError, match="names no commit"):
        loader.pin_dataset("org/name")
    with pytest.raises(DatasetError, match="is not a Hugging Face dataset"):
        loader.pin_dataset(str(tmp_path))


def test_a_revision_is_a_hub_datasets_only() -> None:
    recipe = (Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "agentic-sim.yaml").read_text()
    synthetic = "synthetic: { traces: 8, seed: 7, max-isl: 4000, max-osl: 200 }"
    assert synthetic in recipe
    (finding,) = loads_recipes(recipe.replace(synthetic, "path: t.jsonl\n      revision: main"), "r.yaml").errors
    assert "`traces.revision` is a Hugging Face dataset's" in finding.message and finding.fix
    assert not loads_recipes(recipe.replace(synthetic, "hf: org/name\n      revision: main"), "r.yaml").errors


def test_a_commit_is_fetched_once_per_process_and_a_branch_each_time_it_is_asked(
        hub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run read its pinned commit through `snapshot_download` at its pin, its check and each point's load, and a
    `discover` at every stage again: a commit's files never change, so once is enough. A branch (the latest, `main`)
    may move, and is asked again each time."""
    import huggingface_hub

    real = huggingface_hub.snapshot_download
    asked: list[str | None] = []

    def counting(repo_id: str, **kwargs: Any) -> str:
        asked.append(kwargs["revision"])
        return str(real(repo_id, **kwargs))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", counting)
    commit = loader.pin_dataset(LOADER)
    digest = replay_corpus_digest(LOADER, revision=commit)
    for _ in range(3):  # a stage's pin and check, a point's load
        assert loader.pin_dataset(LOADER, commit) == commit
        assert replay_corpus_digest(LOADER, revision=commit) == digest
    assert asked == [None]  # the latest resolved once; its commit never asked for again
    hub.write_text(NEW)  # the dataset got a commit
    assert loader.pin_dataset(LOADER) == NEW and loader.pin_dataset(LOADER, "main") == NEW
    assert asked == [None, None, "main"]
    assert replay_corpus_digest(LOADER, revision=NEW) != digest and asked == [None, None, "main"]


def test_a_loader_ids_local_copy_named_like_its_dataset_is_read_without_the_hub(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An AgentX loader id is read from a folder here named like its dataset (`hf download --repo-type dataset
    semianalysisai/… --local-dir semianalysisai/…`), as `--traces semianalysisai/…` reads it: a local copy, not
    pinned (it has no commit) and never fetched."""
    monkeypatch.chdir(tmp_path)
    copy = tmp_path / AGENTX_LOADERS[LOADER]
    copy.mkdir(parents=True)
    corpus = synthesize(SynthProfile(traces=2, seed=3, max_isl=4096))
    write_jsonl(corpus, copy / "traces.jsonl")

    def no_hub(repo_id: str, revision: str | None = None) -> Path:
        raise AssertionError(f"asked the hub for {repo_id}")

    monkeypatch.setattr(loader, "download_dataset", no_hub)
    assert loader.hub_dataset(LOADER) is None and loader.hub_dataset(AGENTX_LOADERS[LOADER]) is None
    assert [t.id for t in loader.load_traces(LOADER)] == [t.id for t in corpus]
    assert replay_corpus_digest(LOADER) == replay_corpus_digest(str(copy / "traces.jsonl"))


def test_a_commit_found_in_one_hub_cache_is_not_read_from_it_under_another(
        hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of fetched commits is per hub cache: a process pointed at another cache (`HF_HUB_CACHE`) reads the
    snapshot there, not the folder the first cache gave."""
    import shutil

    from huggingface_hub import constants

    first = loader.download_dataset(AGENTX_LOADERS[LOADER], OLD)
    other = tmp_path / "other-hub"
    shutil.copytree(tmp_path / "hub", other)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(other))
    again = loader.download_dataset(AGENTX_LOADERS[LOADER], OLD)
    assert again != first and again.is_relative_to(other) and again.name == OLD
