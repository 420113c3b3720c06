"""`true` on a flag that takes a value renders the bare flag, which the engine's argparse refuses after the job waited
for its node: `serve.flag-needs-value` refuses it at its line, from the engine flag catalog's `arity` (read in each
engine's source). A switch, a flag the catalog does not classify, and an unknown flag are never refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import QWEN35_FP8, recipe_text, write_recipe

from llmsweep.catalog.engines import flag_arity, known_flags
from llmsweep.policy import validate_files

SGLANG = ("lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "sglang")
VLLM = ("vllm/vllm-openai-rocm:v0.27.1", "vllm")
ATOM = ("rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.2", "atom")


ARGS_LINE = recipe_text(framework="sglang", image="i", served=QWEN35_FP8, agentic=True, args="").splitlines().index(
    "    args: {  }") + 1
"""The line of the serve block's `args` in the recipes these tests write (where the finding points)."""


def _found(tmp_path: Path, engine: tuple[str, str], flag: str) -> list[tuple[int | None, str, str]]:
    path = write_recipe(tmp_path / "r.yaml", framework=engine[1], image=engine[0], served=QWEN35_FP8,
                        runner="cluster:mi300x-amds", agentic=True, args=f"{flag}: true")
    return [(f.line, f.message, f.fix or "") for f in validate_files([path]).findings
            if f.rule == "serve.flag-needs-value"]


@pytest.mark.parametrize(("engine", "flag"), [(SGLANG, "--attention-backend"), (SGLANG, "--attention_backend"),
                                              (SGLANG, "--tp-size"), (SGLANG, "--hicache-io-backend"),
                                              (VLLM, "--attention-backend"), (VLLM, "--max-num-seqs"),
                                              (ATOM, "--max-num-seqs")])
def test_true_on_a_flag_that_takes_a_value_is_an_error_at_its_line(tmp_path: Path, engine: tuple[str, str],
                                                                    flag: str) -> None:
    found = _found(tmp_path, engine, flag)
    assert len(found) == 1, found
    line, message, fix = found[0]
    assert line == ARGS_LINE
    assert message.startswith(f"`{flag}: true` renders the bare flag `{flag}`, but {engine[1]}'s ")
    assert "takes a value" in message and "refuse to start" in message
    assert fix.startswith(f"write its value (`{flag}: <value>`)")


def test_the_message_lists_the_values_the_catalog_knows(tmp_path: Path) -> None:
    [(_, message, _)] = _found(tmp_path, SGLANG, "--kv-cache-dtype")
    assert "takes a value (one of auto, fp8_e5m2, fp8_e4m3" in message


@pytest.mark.parametrize(("engine", "flag"), [
    (SGLANG, "--skip-server-warmup"), (SGLANG, "--enable-dp-attention"),  # switches
    (SGLANG, "--enable-lora"), (SGLANG, "--cuda-graph-bs"),  # not classified (optional bool, nargs in some releases)
    (SGLANG, "--not-a-flag-at-all"),  # unknown: not refused here (serve.flag-unknown's business)
    (VLLM, "--enforce-eager"), (VLLM, "--no-enable-prefix-caching"), (VLLM, "--hf-token"),
    (ATOM, "--enforce-eager"),
])
def test_switches_and_unclassified_flags_pass(tmp_path: Path, engine: tuple[str, str], flag: str) -> None:
    assert _found(tmp_path, engine, flag) == []


def test_a_memory_fraction_true_is_reported_once_by_its_own_rule(tmp_path: Path) -> None:
    assert _found(tmp_path, SGLANG, "--mem-fraction-static") == []


@pytest.mark.parametrize("engine", ["vllm", "sglang", "atom"])
def test_arity_classifies_only_listed_flags_and_never_both_ways(engine: str) -> None:
    arity = flag_arity(engine)
    assert arity is not None and arity.switches and arity.takes_value
    assert not arity.switches & arity.takes_value
    assert (arity.switches | arity.takes_value) <= known_flags(engine)
