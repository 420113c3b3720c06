"""A KV page flag whose value is no positive whole number of tokens is refused at its line (`serve.page-size`).

`--block-size: '16k'` (or `0`) validated clean: only the simulator's launch refused it, and only where a
`--num-gpu-blocks-override` counts in it, while the engine's parser (an int) refuses it at start-up after the job
waited for its node. `validate` reads the page as the simulator does (`engines.sim.engine_page`, the one reading of a
job's page) and says it with the file, line, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import recipe_text, write_recipe

from llmsweep.policy import validate_files

ENGINES = {"vllm": "vllm/vllm-openai:v0.26.0", "sglang": "lmsysorg/sglang:v0.5.9-cu129", "atom": "rocm/atom:v0.1.3"}
ARGS_LINE = recipe_text(framework="vllm", image="i", args="").splitlines().index("    args: {  }") + 1
"""The line of the serve block's `args` in the recipes these tests write (where the finding points)."""


def _found(tmp_path: Path, framework: str, args: str, *,
           engine: str | None = None) -> list[tuple[str | None, int | None, str | None, str, str, str | None]]:
    path = write_recipe(tmp_path / "r.yaml", framework=framework, image=ENGINES[framework], osl=256, args=args,
                        engine=engine, runner="mi300x" if framework == "atom" else "h200")
    return [(f.file, f.line, f.path, f.severity.value, f.message, f.fix) for f in validate_files([path]).findings
            if f.rule == "serve.page-size"]


@pytest.mark.parametrize(("framework", "flag", "value", "shown", "default"), [
    ("vllm", "--block-size", "'16k'", '"16k"', "vLLM's default: 16"),
    ("vllm", "--block-size", "0", "0", "vLLM's default: 16"),
    ("vllm", "--block_size", "16.5", "16.5", "vLLM's default: 16"),  # vLLM's parser reads `_` as `-`
    ("sglang", "--page-size", "'sixty-four'", '"sixty-four"', "SGLang's default: 1"),
    ("atom", "--block-size", "-16", "-16", "ATOM (ROCm)'s default: 16"),
    ("vllm", "--block-size", "'-16'", '"-16"', "vLLM's default: 16"),  # int() reads it: a whole, negative page
    ("vllm", "--block-size", "'²'", '"\\u00b2"', "vLLM's default: 16"),  # a digit to str.isdigit(), not to int()
])
def test_a_page_that_is_no_positive_whole_number_is_an_error_at_its_line(
        tmp_path: Path, framework: str, flag: str, value: str, shown: str, default: str) -> None:
    ((file, line, path, severity, message, fix),) = _found(tmp_path, framework, f"{flag}: {value}")
    assert (file, line, path, severity) == (str(tmp_path / "r.yaml"), ARGS_LINE, f"k.serve.args.{flag}", "error")
    assert message.startswith(f"`{flag}: {shown}` is not a KV page: "), message
    assert fix is not None and fix.startswith("write ") and default in fix, fix


def test_the_simulator_stands_in_with_the_same_reading(tmp_path: Path) -> None:
    """A recipe the simulator serves (`engine: sim`) for vLLM is read as vLLM reads it: the same finding."""
    assert len(_found(tmp_path, "vllm", "--block-size: '16k'", engine="name: sim")) == 1


@pytest.mark.parametrize(("framework", "args"), [
    ("vllm", "--block-size: 32"), ("vllm", "--block-size: '32'"), ("vllm", "--block-size: false"),
    ("sglang", "--page-size: 64"), ("vllm", ""),
    ("vllm", "--block-size: true"),  # the bare flag: serve.flag-needs-value's, said once
    # the engine's parser reads a string with int(), which takes a sign and surrounding blanks: vLLM serves these
    ("vllm", "--block-size: '+16'"), ("vllm", "--block-size: ' 32 '"), ("sglang", "--page-size: '+64'"),
])
def test_a_whole_page_or_none_passes(tmp_path: Path, framework: str, args: str) -> None:
    assert _found(tmp_path, framework, args) == []
