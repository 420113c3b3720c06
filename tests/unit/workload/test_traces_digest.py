"""A run's agentic corpus has a fingerprint: stable across resolutions of one source, changed by any change to what
a replay would send."""

from __future__ import annotations

from pathlib import Path

from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.traces.synth import SynthProfile

SMALL = SynthProfile(traces=4, seed=5, max_isl=16384)


def _digest(config: AgenticConfig) -> str:
    workload = AgenticWorkload(config)
    described = workload.describe()
    assert described["corpus_digest"] == workload.corpus_digest  # what provenance records is what was replayed
    return workload.corpus_digest


def test_digest_is_stable_across_resolutions_and_storage(tmp_path: Path) -> None:
    first = _digest(AgenticConfig(synthetic=SMALL))
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    assert _digest(AgenticConfig(synthetic=SMALL, seed=9)) == first  # replay seed: same traces, same digest
    # the same corpus written to a file and read back (as a run that kept its traces would) digests alike
    corpus = tmp_path / "traces.jsonl"
    corpus.write_text("".join(t.to_json_line() + "\n" for t in AgenticWorkload(AgenticConfig(synthetic=SMALL)).traces))
    assert _digest(AgenticConfig(source=str(corpus))) == first


def test_digest_changes_when_the_generated_corpus_changes(tmp_path: Path) -> None:
    base = _digest(AgenticConfig(synthetic=SMALL))
    others = {
        _digest(AgenticConfig(synthetic=SMALL.model_copy(update={"seed": 6}))),
        _digest(AgenticConfig(synthetic=SMALL.model_copy(update={"max_osl": 64}))),
        _digest(AgenticConfig(synthetic=SMALL.model_copy(update={"traces": 3}))),
    }
    assert base not in others and len(others) == 3
    # one token of one request edited in the file is another corpus
    corpus = tmp_path / "traces.jsonl"
    traces = AgenticWorkload(AgenticConfig(synthetic=SMALL)).traces
    edited = traces[0].model_copy(deep=True)
    edited.main_requests[-1].out += 1
    corpus.write_text("".join(t.to_json_line() + "\n" for t in [edited, *traces[1:]]))
    assert _digest(AgenticConfig(source=str(corpus))) not in {base, *others}


def test_traces_handed_to_a_synthetic_config_are_digested_as_they_are() -> None:
    """The synthetic corpus's digest is computed once per process; traces passed in (a subset, an edited copy) under
    the same config are another corpus and get their own."""
    config = AgenticConfig(synthetic=SMALL)
    whole = _digest(config)
    traces = AgenticWorkload(config).traces
    subset = AgenticWorkload(config, traces=traces[:2]).corpus_digest
    edited = traces[0].model_copy(deep=True)
    edited.main_requests[0].out += 1
    changed = AgenticWorkload(config, traces=[edited, *traces[1:]]).corpus_digest
    assert len({whole, subset, changed}) == 3
    assert AgenticWorkload(config, traces=list(traces)).corpus_digest == whole
