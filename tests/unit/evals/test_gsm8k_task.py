"""GSM8K's `strict-match` score reads the reply's *last* `#### <number>` line, as InferenceX's gsm8k.yaml does
(`group_select: -1`): a model that writes an intermediate `#### ...` while working and its answer last is scored
on its answer."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmsweep.evals.tasks import TASK_DIR

REPO = Path(__file__).resolve().parents[3]
REPLY = "Step one gives\n#### 3\nthen doubling and adding 36:\n#### 42"


def _filters() -> dict[str, list[dict[str, Any]]]:
    task = yaml.safe_load((TASK_DIR / "gsm8k.yaml").read_text())
    return {f["name"]: f["filter"] for f in task["filter_list"]}


def test_strict_match_regex_selects_the_last_answer_line() -> None:
    regex = next(step for step in _filters()["strict-match"] if step["function"] == "regex")
    # lm-eval's RegexFilter keeps findall(reply)[group_select], group_select defaulting to 0 (the first match)
    assert regex.get("group_select", 0) == -1


def _lm_eval_python() -> str:
    python = os.environ.get("LLMSWEEP_LM_EVAL") or str(REPO / ".venv-lmeval" / "bin" / "python")
    if not Path(python).exists():
        pytest.skip("needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")
    probe = subprocess.run([python, "-c", "import lm_eval.filters"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"{python} cannot import lm_eval")
    return python


_APPLY = """
import json, sys
import lm_eval.filters  # registers the filters
from lm_eval.api.registry import get_filter
steps, reply = json.load(sys.stdin)
resps = [[reply]]
for step in steps:
    kwargs = {k: v for k, v in step.items() if k != "function"}
    resps = list(get_filter(step["function"])(**kwargs).apply(resps, [{}]))
print(json.dumps(resps[0]))
"""


def test_lm_eval_scores_the_last_answer_line_under_strict_match() -> None:
    python = _lm_eval_python()
    out = subprocess.run([python, "-c", _APPLY], input=json.dumps([_filters()["strict-match"], REPLY]),
                         capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == "42"


_LOAD = """
import json, runpy, sys
from lm_eval.tasks import TaskManager
runpy.run_path(sys.argv[1], run_name="runtime")["install"]()  # the runtime's changes, without starting the CLI
tm = TaskManager()
loaded = tm.load([sys.argv[2]])
print(json.dumps({"indexed": len(tm.all_tasks), "tasks": sorted(loaded["tasks"])}))
"""


@pytest.mark.parametrize(("name", "row"), [
    ("gsm8k", {"question": "1+1?", "answer": "1+1=2\n#### 2"}),
    ("gpqa_diamond_cot_n_shot", {"Question": "Which?", "Correct Answer": "a", "Incorrect Answer 1": "b",
                                 "Incorrect Answer 2": "c", "Incorrect Answer 3": "d"}),
])
def test_the_bootstrap_loads_a_packaged_task_by_path_without_lm_evals_built_in_index(
        name: str, row: dict[str, str], tmp_path: Path) -> None:
    """What `run` starts lm-eval with (`evals.harness.BOOTSTRAP`, which runs `evals/lm_eval_runtime.py`): its task
    manager indexes none of lm-eval's ~14,000 built-in task files (17 CPU-seconds a run), and still loads llmsweep's
    task file, passed by path as `run` passes it (here with a local dataset, as offline runs do)."""
    from llmsweep.evals.harness import RUNTIME
    from llmsweep.evals.tasks import task_file

    python = _lm_eval_python()
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    task = task_file(name, data, tmp_path / "task")
    offline = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([python, "-c", _LOAD, str(RUNTIME), str(task.path)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=offline)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["indexed"] == 0 and doc["tasks"] == [name], doc
