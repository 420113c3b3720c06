"""The packaged lm-eval task files and the local-file form of each.

`gsm8k` (the default, 5-shot) and `gpqa_diamond_cot_n_shot` are YAML files beside this module. Their samples come
from the Hugging Face hub (lm-eval's own download) unless the run names a local file in the same format: then the
task file is rewritten into the job's eval folder with its dataset lines pointing at that file (JSON lines, used as
the few-shot and the test split), and the run works offline.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from llmsweep.errors import ConfigError

TASK_DIR = Path(__file__).resolve().parent / "tasks"
DEFAULT_TASK = "gsm8k"
_DATASET_KEYS = ("dataset_path:", "dataset_name:", "dataset_kwargs:", "training_split:", "fewshot_split:",
                 "test_split:", "validation_split:")


@dataclass(frozen=True)
class TaskFile:
    """A task file lm-eval reads (`--tasks PATH`), the task it defines and where its samples come from."""

    task: str
    path: Path
    dataset: str
    num_fewshot: int | None


def known_tasks() -> list[str]:
    return sorted(p.stem for p in TASK_DIR.glob("*.yaml"))


def _packaged(task: str) -> Path:
    path = TASK_DIR / f"{task}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown eval task {task!r}", fix=f"use one of: {', '.join(known_tasks())}")
    return path


def _field(text: str, key: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(f"{key}:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    return None


def task_file(task: str, dataset: Path | None, out_dir: Path) -> TaskFile:
    """The task file of `task`: the packaged one, or (with a local `dataset`) a copy in `out_dir` reading it."""
    src = _packaged(task)
    text = src.read_text(encoding="utf-8")
    fewshot = _field(text, "num_fewshot")
    shots = int(fewshot) if fewshot and fewshot.isdigit() else None
    if dataset is None:
        return TaskFile(task, src, _field(text, "dataset_path") or "?", shots)
    data = dataset.expanduser().resolve()
    if not data.is_file():
        raise ConfigError(f"eval dataset {dataset} is not a file",
                          fix=f"give a JSON-lines file in the {task} format (--eval-dataset)")
    kept = [line for line in text.splitlines() if not line.startswith(_DATASET_KEYS)]
    # One split for the questions and the few-shot examples: lm-eval then leaves each question out of its own
    # examples (it excludes the evaluated doc only when the few-shot split *is* the test split; a `train` split
    # naming the same file would let a question's own worked answer into its prompt).
    local = ["dataset_path: json", "dataset_kwargs:", "  data_files:", f"    test: {_quote(data)}",
             "fewshot_split: test", "test_split: test"]
    at = next(i for i, line in enumerate(kept) if line.startswith("task:")) + 1
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / src.name
    path.write_text("\n".join([*kept[:at], *local, *kept[at:]]) + "\n", encoding="utf-8")
    helper = TASK_DIR / "utils.py"
    if "!function utils." in text:
        shutil.copyfile(helper, out_dir / helper.name)
    return TaskFile(task, path, str(data), shots)


def _quote(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'
