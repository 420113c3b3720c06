from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.spec.workload import ResolvedWorkload
from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.build import agentic_config, build_workload, fixed_config
from llmsweep.workload.fixed import FixedLengthWorkload
from llmsweep.workload.traces import loader
from llmsweep.workload.traces.stats import corpus_stats


def _fixed(**extra: object) -> ResolvedWorkload:
    return ResolvedWorkload.model_validate({
        "scenario": "fixed-seq-len", "tokenizer": "org/model", "served-model-name": "m", "use-chat-template": False,
        "isl": 1024, "osl": 128, "num-prompts-per-conc": 10, "range-ratio": 0.8, **extra,
    })


def _agentic(traces: dict) -> ResolvedWorkload:
    return ResolvedWorkload.model_validate({
        "scenario": "agentic-coding", "tokenizer": "org/model", "served-model-name": "m", "use-chat-template": True,
        "traces": traces, "duration": 900, "warmup-per-lane": 3,
    })


def test_fixed_job_defaults_follow_inferencex() -> None:
    cfg = fixed_config(_fixed(), concurrency=8, tokenizer=None)
    assert (cfg.num_prompts, cfg.num_warmups, cfg.range_ratio, cfg.api) == (80, 16, 0.8, "completions")
    assert cfg.tokenizer is None
    assert fixed_config(_fixed(), concurrency=8).tokenizer == "org/model"  # the job's tokenizer by default
    assert isinstance(build_workload(_fixed(), concurrency=2, tokenizer=None), FixedLengthWorkload)


def test_fixed_job_without_lengths_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="isl and osl"):
        fixed_config(_fixed(isl=None), concurrency=1)


def test_agentic_job_with_synthetic_traces() -> None:
    resolved = _agentic({"synthetic": {"traces": 3, "seed": 1, "max-isl": 16384, "max-osl": 50, "subagents": False}})
    workload = build_workload(resolved, concurrency=4, tokenizer=None)
    assert isinstance(workload, AgenticWorkload)
    assert workload.config.warmup_requests_per_lane == 3 and workload.config.concurrency == 4
    stats = corpus_stats(workload.traces)
    assert stats.traces == 3 and stats.osl.max <= 50 and stats.subagent_groups == 0 and stats.isl.max <= 16384


def test_agentic_job_with_a_trace_path(traces_dir: Path) -> None:
    cfg = agentic_config(_agentic({"path": str(traces_dir / "handbuilt.jsonl")}), concurrency=2, tokenizer=None)
    assert [t.id for t in AgenticWorkload(cfg).traces] == ["tree-a", "tree-b"]


def test_agentx_loader_ids_resolve_to_hub_datasets(monkeypatch: pytest.MonkeyPatch, traces_dir: Path) -> None:
    asked: list[str] = []

    def fake_download(repo_id: str, revision: str | None = None) -> Path:
        asked.append(repo_id)
        return traces_dir

    monkeypatch.setattr(loader, "download_dataset", fake_download)
    traces = loader.load_traces("semianalysis_cc_traces_weka_062126_256k")
    assert asked == ["semianalysisai/cc-traces-weka-062126-256k"] and len(traces) == 2
    # AIPerf's legacy no-subagents loader answers to both spellings (research/agentx-spec §1.5): the short one was
    # "neither a file, a directory nor a Hugging Face dataset id"
    for legacy in ("semianalysis_cc_traces_weka", "semianalysis_cc_traces_weka_no_subagents"):
        asked.clear()
        loader.load_traces(legacy)
        assert asked == ["semianalysisai/cc-traces-weka-no-subagents-051826"], legacy


def test_synthetic_source_keyword() -> None:
    from llmsweep.workload.traces.synth import SynthProfile

    cfg = AgenticConfig(source="synthetic", synthetic=SynthProfile(traces=2, max_isl=16384), run_id="s")
    assert len(AgenticWorkload(cfg).traces) == 2


def test_a_hub_dataset_of_gzip_compressed_json_lines_is_downloaded_and_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, traces_dir: Path) -> None:
    """The loader reads `.jsonl.gz` wherever it finds one (`traces synth --out x.jsonl.gz`), but the hub download
    asked only for `*.jsonl`/`*.json`: a dataset uploaded compressed came down empty, 'no traces found in org/name'."""
    import fnmatch
    import gzip

    import huggingface_hub

    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "traces.jsonl.gz").write_bytes(gzip.compress((traces_dir / "handbuilt.jsonl").read_bytes()))
    (remote / "README.md").write_text("---\nconfigs: []\n---\n")

    def snapshot_download(repo_id: str, *, repo_type: str, revision: str | None,
                          allow_patterns: list[str]) -> str:
        """The hub's rule: only files matching a pattern come down."""
        assert (repo_id, repo_type) == ("org/packed", "dataset")
        local = tmp_path / "snapshot"
        local.mkdir(exist_ok=True)
        for f in remote.iterdir():
            if any(fnmatch.fnmatch(f.name, p) for p in allow_patterns):
                (local / f.name).write_bytes(f.read_bytes())
        return str(local)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    assert [t.id for t in loader.load_traces("org/packed")] == ["tree-a", "tree-b"]
