"""SGLang reads `--tensor-parallel-size`, `--pipeline-parallel-size`, `--data-parallel-size` and
`--expert-parallel-size` as its `--tp-size`, `--pp-size`, `--dp-size` and `--ep-size` (ServerArgs aliases; sglang's
own `test_aliases_and_dest`). llmsweep called `--tensor-parallel-size` a flag SGLang does not have
(`serve.unsupported-arg`, fix "spells it `--tp-size`"), and let the other three through unchecked: a
`--pipeline-parallel-size: 2` on a pp=1 arm validated clean and launched SGLang at pp 2 under the job's pp=1 name."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.policy import validate_files
from llmsweep.policy.planning import Validation

RECIPE = """k:
  image: lmsysorg/sglang:v0.5.12-rocm700-mi35x
  model: amd/DeepSeek-R1-0528-MXFP4-Preview
  model-prefix: dsr1
  runner: mi355x
  precision: fp4
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 8, ep: 1, conc-list: [4] }
  serve:
    args:
      --mem-fraction-static: 0.75
"""


def _validate(tmp_path: Path, flag: str, value: int) -> tuple[Validation, str]:
    path = tmp_path / "r.yaml"
    text = RECIPE + f"      {flag}: {value}\n"
    path.write_text(text, encoding="utf-8")
    return validate_files([path]), text


@pytest.mark.parametrize(("flag", "value"), [
    ("--tensor-parallel-size", 4), ("--pipeline-parallel-size", 2), ("--data-parallel-size", 2),
    ("--expert-parallel-size", 8),
])
def test_a_long_parallel_spelling_that_contradicts_the_search_space_is_refused_at_its_line(
        flag: str, value: int, tmp_path: Path) -> None:
    result, text = _validate(tmp_path, flag, value)
    errors = [f for f in result.findings if f.is_error]
    assert [(f.rule, f.path) for f in errors] == [("serve.parallelism-conflict", f"k.serve.args.{flag}")], \
        [f.render() for f in errors]
    assert errors[0].line == text.count("\n")


def test_the_long_tp_spelling_agreeing_with_the_search_space_is_sglangs_tp_flag(tmp_path: Path) -> None:
    result, _ = _validate(tmp_path, "--tensor-parallel-size", 8)
    assert result.ok, [f.render() for f in result.findings if f.is_error]
    (job,) = result.jobs
    argv = engines.render(job).argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8" and "--tp-size" not in argv
