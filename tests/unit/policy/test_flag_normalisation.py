"""Policy sees what the engine will see: a recipe flag is resolved the way the engine's argparse resolves it (unique
prefixes, `--flag=value`, `-sc`-style aliases, `_` for `-`) before any rule looks at it. vLLM 0.26.0 reads
`--speculative-conf` as `--speculative-config` (reproduced on the H200); a rule that compared spellings missed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.engines import get_adapter
from llmsweep.engines.base import AmbiguousFlagError
from llmsweep.policy import validate_files

VLLM = """k:
  image: vllm/vllm-openai:v0.26.0
  model: MiniMaxAI/MiniMax-M3
  model-prefix: minimaxm3
  runner: cluster:h200-cw
  precision: fp8
  framework: vllm
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: 0.8
      search-space:
      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [8] }
  serve:
    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA }
    args:
"""
SPEC = "'{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}'"


def _findings(tmp_path: Path, text: str) -> list:
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return validate_files([path]).findings


@pytest.mark.parametrize("written", [
    f"--speculative-conf: {SPEC}",  # a unique prefix
    f"--speculative_config: {SPEC}",  # underscores
    "'--speculative-config={\"method\": \"eagle3\"}': true",  # `=`-joined
    f"-sc: {SPEC}",  # vLLM's short alias
    "--speculative-conf.num_speculative_tokens: 5",  # an abbreviated dotted sub-key replaces the JSON flag
])
def test_vllm_spec_conflict_catches_every_spelling_argparse_accepts(tmp_path: Path, written: str) -> None:
    hits = [f for f in _findings(tmp_path, VLLM + f"      {written}\n") if f.rule == "serve.spec-conflict"]
    assert hits, f"`{written}` reaches vLLM as --speculative-config and must be caught"
    assert hits[0].line == VLLM.count("\n") + 1


def test_abbreviation_of_several_flags_is_refused_naming_them(tmp_path: Path) -> None:
    found = _findings(tmp_path, VLLM + "      --data-parallel-s: 2\n")
    (hit,) = [f for f in found if f.rule == "serve.ambiguous-flag"]
    assert "--data-parallel-size" in hit.message and "--data-parallel-start-rank" in hit.message
    with pytest.raises(AmbiguousFlagError, match="--data-parallel-size-local"):
        get_adapter("vllm").resolve_flag("--data-parallel-s")


def test_resolution_follows_each_engines_parser() -> None:
    vllm, sglang, atom, trt = (get_adapter(e) for e in ("vllm", "sglang", "atom", "trtllm"))
    assert vllm.resolve_flag("--speculative-conf") == "--speculative-config"
    assert vllm.resolve_flag("--max-model-len=4096") == "--max-model-len"
    assert vllm.resolve_flag("--model") == "--model", "an exact flag wins over a longer one it prefixes"
    assert sglang.resolve_flag("--speculative-num-st") == "--speculative-num-steps"
    assert sglang.resolve_flag("--tp") == "--tp-size"
    assert atom.resolve_flag("-tp") == "--tensor-parallel-size"
    assert atom.resolve_flag("--spec-decode-acceptance-len") == "--spec-decode-acceptance-length"
    assert atom.resolve_flag("--server-p") == "--server-port"
    # trtllm-serve is click: no abbreviations; a prefix stays what it is (and click rejects it)
    assert trt.resolve_flag("--extra_llm_api") == "--extra-llm-api"
    assert vllm.resolve_flag("--not-a-vllm-flag") == "--not-a-vllm-flag"


def test_hand_written_acceptance_in_an_abbreviated_flag_is_caught(tmp_path: Path) -> None:
    text = (VLLM.replace("vllm/vllm-openai:v0.26.0", "rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.3")
            .replace("framework: vllm", "framework: atom").replace("cluster:h200-cw", "cluster:mi355x-amds")
            + "      --spec-decode-acceptance-len: 2.5\n")
    hits = [f for f in _findings(tmp_path, text) if f.rule == "golden-al.hand-written"]
    assert hits and "--spec-decode-acceptance-length" in hits[0].message


def test_unsupported_flag_written_with_equals_is_caught_at_its_line(tmp_path: Path) -> None:
    text = VLLM + "      --mem_fraction_static=0.8: true\n"
    (hit,) = [f for f in _findings(tmp_path, text) if f.rule == "serve.unsupported-arg"]
    assert "--gpu-memory-utilization" in (hit.fix or "") and hit.line == VLLM.count("\n") + 1


SGLANG = """k:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi300x
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [4] }
  serve:
    engine: { name: ENGINE }
"""


@pytest.mark.parametrize(("engine", "serve", "pair"), [
    ("sglang", "  args: {--mem-fraction-static: 0.8, --mem-frac: 0.7}", ("--mem-fraction-static", "--mem-frac")),
    ("sglang", "  args: {--mem-fraction-static: 0.8, --mem_fraction_static: 0.7}",
     ("--mem-fraction-static", "--mem_fraction_static")),
    ("sglang", "  args: {'--chunked-prefill-size=4096': true, --chunked-prefill: 8192}",
     ("--chunked-prefill-size=4096", "--chunked-prefill")),
    ("vllm", "  args: {--max-num-seqs: 8, --max-num-s: 16}", ("--max-num-seqs", "--max-num-s")),
    ("trtllm", "  args: {--max_batch_size: 8, --max-batch-size: 16}", ("--max_batch_size", "--max-batch-size")),
    ("sglang", "  args: {--mem-fraction-static: 0.8}\n    overrides:\n    - when: {tp: 8}\n"
               "      args: {--mem-frac: 0.7}", ("--mem-fraction-static", "--mem-frac")),
])
def test_one_flag_given_in_two_spellings_is_refused_naming_both(tmp_path: Path, engine: str, serve: str,
                                                                pair: tuple[str, str]) -> None:
    """The engine's parser reads both as one flag and takes the last silently: the other value never runs (an
    override that spells a base flag another way adds it rather than replacing it)."""
    text = SGLANG.replace("ENGINE", engine) + f"  {serve}\n"
    hits = [f for f in _findings(tmp_path, text) if f.rule == "serve.duplicate-flag"]
    assert len(hits) == 1 and hits[0].is_error, [f.render() for f in hits]
    assert f"`{pair[0]}` and `{pair[1]}`" in hits[0].message and hits[0].fix
    assert hits[0].path is not None and hits[0].path.endswith(f".args.{pair[1]}")
    assert ("overrides" in hits[0].path) == ("overrides" in serve)


def test_distinct_flags_and_vllm_dotted_sub_keys_are_not_duplicates(tmp_path: Path) -> None:
    text = SGLANG.replace("ENGINE", "vllm") + ("    args: {--compilation-config.level: 3, "
                                                "--compilation-config.cudagraph_mode: FULL, --max-num-seqs: 8, "
                                                "--max-num-batched-tokens: 8192}\n")
    assert not [f for f in _findings(tmp_path, text) if f.rule == "serve.duplicate-flag"]


def test_an_override_that_removes_a_flag_spelled_another_way_is_refused(tmp_path: Path) -> None:
    """`--mem_fraction_static: null` in an override removed nothing: the base's `--mem-fraction-static` stayed."""
    text = SGLANG.replace("ENGINE", "sglang") + ("    args: {--mem-fraction-static: 0.8}\n    overrides:\n"
                                                 "    - when: {tp: 8}\n      args: {--mem_fraction_static: null}\n")
    (hit,) = [f for f in _findings(tmp_path, text) if f.rule == "serve.duplicate-flag"]
    assert "removes nothing" in hit.message and "`--mem-fraction-static`" in hit.message
    assert hit.path is not None and hit.path.endswith("overrides[0].args.--mem_fraction_static")
    same = text.replace("--mem_fraction_static: null", "--mem-fraction-static: null")
    assert not [f for f in _findings(tmp_path, same) if f.rule == "serve.duplicate-flag"]
