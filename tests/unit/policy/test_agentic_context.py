"""`serve.agentic-context`: an agentic job whose replayed requests outgrow the context its server allows is warned
about before any GPU hour, at the line that decides it (the recipe's context flag, else its trace source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.policy import validate_files

RECIPE = """\
agentic:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: cluster:mi300x-amds
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    agentic-coding:
    - search-space:
      - {{ tp: 8, conc-list: [4], kv-offloading: none, spec-decoding: none }}
  serve:
    engine: {{ name: {engine} }}
    args:
      --mem-fraction-static: 0.8{flag}
  workload:
    traces:
      {traces}
"""


def _said(tmp_path: Path, traces: str, flag: str = "", engine: str = "sglang") -> list[str]:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.format(traces=traces, flag=flag, engine=engine), encoding="utf-8")
    return [f"{f.path} {f.message}" for f in validate_files([path]).findings if f.rule == "serve.agentic-context"]


@pytest.mark.parametrize(("traces", "flag", "expected"), [
    # synthetic traces without a max-isl take the 1M-token shape; Qwen3.5 holds 262,144
    ("synthetic: { traces: 8 }", "", "agentic.workload.traces requests reach 1,000,000 tokens (synthetic traces "
     "without a max-isl, which take the full-scale shape), over the 262,144 tokens of qwen3.5-397b-a17b's native "
     "context"),
    # the model's own 256k corpus fits its context, not a recipe's lower flag
    ("hf: semianalysis_cc_traces_weka_062126_256k", "\n      --context-length: 131072",
     "agentic.serve.args.--context-length requests reach 256,000 tokens (semianalysis_cc_traces_weka_062126_256k's "
     "256k cut (in + out)), over the 131,072 tokens of the recipe's `--context-length: 131072`"),
])
def test_requests_longer_than_the_servers_context_are_warned_about_where_they_are_decided(
        tmp_path: Path, traces: str, flag: str, expected: str) -> None:
    (said,) = _said(tmp_path, traces, flag)
    assert said.startswith(expected), said


@pytest.mark.parametrize(("traces", "flag", "engine"), [
    ("hf: semianalysis_cc_traces_weka_062126_256k", "", "sglang"),  # the corpus InferenceX picks fits
    ("synthetic: { traces: 8, max-isl: 131072 }", "\n      --context-length: 131072", "sglang"),  # at the limit
    ("path: /no/such/corpus.jsonl", "\n      --context-length: 1024", "sglang"),  # only reading it would tell
    ("synthetic: { traces: 8 }", "", "sim"),  # without a context flag only its KV pool bounds the simulator
])
def test_traces_that_fit_or_cannot_be_judged_unread_are_not(tmp_path: Path, traces: str, flag: str,
                                                            engine: str) -> None:
    assert _said(tmp_path, traces, flag, engine) == []


def test_an_agentic_recipe_whose_framework_no_adapter_launches_is_not_a_rule_crash(tmp_path: Path) -> None:
    """`framework: x` (no adapter) made this rule fail on the render, printed as `policy.internal: rule
    serve.agentic-context could not run: ContractError …`, fix "report this as an llmsweep bug", beside the
    `serve.render-failed` errors that already say why the jobs cannot launch."""
    path = tmp_path / "r.yaml"
    text = RECIPE.format(traces="synthetic: { traces: 4, max-isl: 300000 }", flag="", engine="sglang")
    path.write_text(text.replace("  framework: sglang\n", "  framework: x\n").replace("    engine: { name: sglang }\n",
                                                                                     ""), encoding="utf-8")
    findings = validate_files([path]).findings
    assert not [f.render() for f in findings if f.rule == "policy.internal"]
    assert [f.rule for f in findings if f.is_error] == ["serve.render-failed"]
