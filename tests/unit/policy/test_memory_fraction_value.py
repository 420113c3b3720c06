"""A memory-fraction flag whose value is no number in (0, 1] is refused at its line (`serve.memory-fraction`).

It used to fall back silently to the engine's default in `engines.memory` (whose docstring said the recipe check
refused it; no rule did): the HBM-fit warning disappeared and render printed `--mem-fraction-static 5`."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import QWEN35_FP8, recipe_text, write_recipe

from llmsweep.policy import validate_files

SGLANG = ("lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "sglang")
VLLM = ("vllm/vllm-openai-rocm:v0.27.1", "vllm")


ARGS_LINE = recipe_text(framework="sglang", image="i", served=QWEN35_FP8, agentic=True, args="").splitlines().index(
    "    args: {  }") + 1
"""The line of the serve block's `args` in the recipes these tests write (where the finding points)."""


def _found(tmp_path: Path, engine: tuple[str, str], flag: str, value: str) -> list[tuple[int | None, str, str]]:
    path = write_recipe(tmp_path / "r.yaml", framework=engine[1], image=engine[0], served=QWEN35_FP8,
                        runner="cluster:mi300x-amds", agentic=True, args=f"{flag}: {value}")
    return [(f.line, f.message, f.fix or "") for f in validate_files([path]).findings
            if f.rule == "serve.memory-fraction"]


@pytest.mark.parametrize(("value", "shown"), [("40", "40"), ('"0,4"', '"0,4"'), ("true", "true"), ("-1", "-1"),
                                              ("5", "5"), ("[0.5]", "[0.5]"), ("0", "0"), ('"abc"', '"abc"')])
def test_a_value_that_is_no_fraction_is_an_error_at_its_line(tmp_path: Path, value: str, shown: str) -> None:
    found = _found(tmp_path, SGLANG, "--mem-fraction-static", value)
    assert len(found) == 1, found
    line, message, fix = found[0]
    assert line == ARGS_LINE
    assert message.startswith(f"`--mem-fraction-static: {shown}` is not a memory fraction: --mem-fraction-static "
                              "takes a number in (0, 1]")
    assert "a number in (0, 1]" in fix


@pytest.mark.parametrize("value", ["0.85", '"0.85"', "1", "false", "null"])
def test_a_fraction_or_a_removed_flag_passes(tmp_path: Path, value: str) -> None:
    assert _found(tmp_path, SGLANG, "--mem-fraction-static", value) == []


@pytest.mark.parametrize(("engine", "flag"), [(VLLM, "--gpu-memory-utilization"), (VLLM, "--gpu_memory_utilization"),
                                              (SGLANG, "--mem-frac"), (SGLANG, "--mem-fraction-static=1.5")])
def test_every_spelling_the_engine_reads_as_its_memory_fraction(tmp_path: Path, engine: tuple[str, str],
                                                                 flag: str) -> None:
    value = "true" if "=" in flag else "1.5"
    assert len(_found(tmp_path, engine, flag, value)) == 1


def test_another_engines_fraction_flag_is_not_this_rules(tmp_path: Path) -> None:
    # vLLM has no --mem-fraction-static: serve.unsupported-arg says so, not this rule
    assert _found(tmp_path, VLLM, "--mem-fraction-static", "5") == []
