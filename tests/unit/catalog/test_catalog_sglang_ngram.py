"""SGLang's NGRAM drafting and what it cannot be launched with, as the PyPI wheels of 0.5.9-0.5.23 read.

A pinned acceptance length is ignored by NGRAM's own verify through 0.5.13 (the run measures NGRAM's real acceptance
under the pinned label); from 0.5.14 NGRAM verifies through `eagle_sample`, which reads it, and from 0.5.15 raises at
the first verify step on the real-draft-token mode llmsweep pins with (NGRAM's tree has no top-k of 1). Every release
read refuses NGRAM with DP attention at start-up. Each was validated clean before."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.findings import Finding
from llmsweep.policy import validate_files

RECIPE = """k:
  image: lmsysorg/sglang:vVERSION-rocm720-mi30x
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: cluster:mi300x-amds
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    SCENARIO:
    - ENTRY
      search-space:
      - { tp: 8, DP spec-decoding: mtp, KVconc-list: [4] }
  serve:
    spec-decoding: { method: METHOD, num-steps: 3PIN }
"""
PIN = ", acceptance-length: 2.1, acceptance-length-source: https://example.org/run/1"


def _findings(tmp_path: Path, version: str, *, method: str = "ngram", pinned: bool = True,
              dp_attn: bool = False) -> list[Finding]:
    text = (RECIPE.replace("VERSION", version).replace("METHOD", method).replace("PIN", PIN if pinned else "")
            .replace("DP ", "dp-attn: true, " if dp_attn else "")
            .replace("KV", "kv-offloading: none, " if pinned else ""))
    text = (text.replace("SCENARIO", "agentic-coding").replace("ENTRY", "dram-utilization: 0.8") if pinned else
            text.replace("SCENARIO", "fixed-seq-len").replace("ENTRY", "isl: 1024\n      osl: 1024"))
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return [f for f in validate_files([path]).findings if f.rule == "engine.known-incompatibility"]


def _ids(found: list[Finding]) -> list[str]:
    return [f.message.split("]")[0].lstrip("[") for f in found]


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13"])
def test_a_pinned_acceptance_length_ngram_ignores_is_refused(tmp_path: Path, version: str) -> None:
    found = _findings(tmp_path, version)
    assert _ids(found) == ["sglang-ngram-synthetic-acceptance-ignored"], [f.render() for f in found]
    assert found[0].is_error and found[0].path == "k.serve.spec-decoding"
    assert "real acceptance under the pinned acceptance length's label" in found[0].message


@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_a_pinned_acceptance_length_ngram_refuses_at_its_first_verify_is_refused(tmp_path: Path,
                                                                                 version: str) -> None:
    found = _findings(tmp_path, version)
    assert _ids(found) == ["sglang-ngram-synthetic-acceptance-real-draft-token"], [f.render() for f in found]
    assert "requires speculative_eagle_topk=1" in found[0].message


def test_the_release_that_reads_the_pin_without_the_token_mode_is_left_to_the_token_mode_gate(tmp_path: Path) -> None:
    """0.5.14's NGRAM verifies through eagle_sample (the pin holds) and reads no token mode: no incompatibility; the
    token mode llmsweep also sets is the `engine.feature-gate`'s to judge."""
    assert _findings(tmp_path, "0.5.14") == []


def test_ngram_without_a_pin_and_a_pinned_chain_draft_are_not_refused(tmp_path: Path) -> None:
    assert _findings(tmp_path, "0.5.12", pinned=False) == []
    assert _findings(tmp_path, "0.5.16", method="mtp") == []


def test_ngram_with_dp_attention_is_refused_on_every_release_read(tmp_path: Path) -> None:
    for version in ("0.5.9", "0.5.16", "0.5.23"):
        found = _findings(tmp_path, version, pinned=False, dp_attn=True)
        assert _ids(found) == ["sglang-ngram-dp-attention"], [f.render() for f in found]
        assert "does not support dp attention" in found[0].message
        # the PR that drops the guard (open, in no release read) is named, so a later release is checked against it
        assert found[0].evidence is not None and "sgl-project/sglang/pull/28616" in found[0].evidence
    assert _findings(tmp_path, "0.5.16", method="mtp", pinned=False, dp_attn=True) == []
