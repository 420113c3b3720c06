"""The packaged lm-eval task files and the local-file form of each.

`gsm8k` (the default, 5-shot) and `gpqa_diamond_cot_n_shot` are YAML files beside this module. Their samples come
from the Hugging Face hub (lm-eval's own download) unless the run names a local file in the same format: then the
task file is rewritten into the job's eval folder with its dataset lines pointing at that file (JSON lines, used as
the few-shot and the test split), and the run works offline.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from llmsweep.errors import ConfigError, DatasetError
from llmsweep.jsonline import numbered_values
from llmsweep.option_spellings import flag as _flag
from llmsweep.words import count_of

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


@dataclass(frozen=True)
class TaskInput:
    """What a local file must hold for a task: the columns every row needs (what its prompt, its target or its
    `process_docs` reads), and the shape of any of them that is scored (column -> (pattern, the words for it))."""

    fields: tuple[str, ...]
    shapes: dict[str, tuple[str, str]] = field(default_factory=dict)


INPUTS = {
    "gsm8k": TaskInput(("question", "answer"),
                       {"answer": (r"####\s*-?[$0-9.,]*[0-9]", "end in a `#### <number>` line")}),
    # the columns `tasks/utils.py`'s process_docs reads (the hub's GPQA columns)
    "gpqa_diamond_cot_n_shot": TaskInput(("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                                          "Incorrect Answer 3")),
}


def known_tasks() -> list[str]:
    return sorted(p.stem for p in TASK_DIR.glob("*.yaml"))


class _TaskLoader(yaml.SafeLoader):
    """A task file as data: lm-eval's `!function utils.x` tags read as their text."""


def _function_tag(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(node.value)


_TaskLoader.add_constructor("!function", _function_tag)


def hub_dataset(task: str) -> str | None:
    """The Hugging Face dataset a packaged task reads its samples from (`openai/gsm8k`); None for a task llmsweep does
    not package, or one that names none."""
    try:
        return _field(_packaged(task).read_text(encoding="utf-8"), "dataset_path")
    except ConfigError:
        return None


def local_dataset(task: str, dataset: str | None) -> bool:
    """`dataset` is a local file (`--eval-dataset`), not `task`'s hub dataset; an eval's record that does not say
    (None, or an imported row's `unknown`) is taken as the hub's: InferenceX runs no other."""
    return dataset not in (None, "unknown", hub_dataset(task))


def task_label(task: str, dataset: str | None, limit: int | None) -> str:
    """The task as a table or an export names it: `gsm8k` on its whole hub dataset, else with what it ran on —
    `gsm8k (adds.jsonl, first 6)`: an eval of a local file or of part of the samples is not the task's score."""
    said = [Path(dataset).name] if dataset is not None and local_dataset(task, dataset) else []
    if limit is not None:
        said.append(f"first {limit}")
    return f"{task} ({', '.join(said)})" if said else task


def task_filters(task: str) -> tuple[str, ...]:
    """The filters lm-eval reports a packaged task's metrics under (`exact_match,strict-match`): its task file's
    `filter_list` names, else lm-eval's `none`."""
    doc = yaml.load(_packaged(task).read_text(encoding="utf-8"), Loader=_TaskLoader)
    return tuple(str(f["name"]) for f in doc.get("filter_list") or []) or ("none",)


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


def _shots(text: str) -> int | None:
    fewshot = _field(text, "num_fewshot")
    return int(fewshot) if fewshot and fewshot.isdigit() else None


def check_dataset(task: str, dataset: Path) -> None:
    """Raise a DatasetError (exit 2) naming file:line (a JSON array's row: its place in it) and the fix unless
    `dataset` is a local file `task` can run on: JSON lines (or one JSON array) of objects, each with the task's
    columns in their shape, and more rows than the task's few-shot examples (they come from the same file, the
    question itself left out). Checked before any server starts: lm-eval would find each of these only once the eval
    began."""
    spec = INPUTS[task]
    fix = (f"give {_flag('eval_dataset')} a JSON-lines file in the {task} format: one object a line with "
           + ", ".join(f"`{c}`" + (f" (which must {spec.shapes[c][1]})" if c in spec.shapes else "")
                       for c in spec.fields))
    path = dataset.expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"eval dataset {dataset} cannot be read: {exc}", fix=fix) from exc
    rows: list[tuple[str, object]] = []  # (where the row is, as an error names it; the row)
    if text.lstrip().startswith("["):  # one JSON array: the `json` builder lm-eval loads it with reads that too
        try:
            array = json.loads(text)
        except ValueError as exc:
            raise DatasetError(f"eval dataset {path}: not JSON ({exc})", fix=fix) from exc
        # a row named by its place in the array (every row of an array had been named line 1)
        rows = [(f"{path}: row {i + 1} (index {i})", row) for i, row in enumerate(array)]
    else:
        rows = [(f"{path}:{n}", row) for n, row in numbered_values(
            text, lambda n, exc: DatasetError(f"eval dataset {path}:{n}: not a JSON object ({exc})", fix=fix))]
    for where, row in rows:
        if not isinstance(row, dict):
            raise DatasetError(f"eval dataset {where}: a row is {type(row).__name__}, not an object", fix=fix)
        missing = [c for c in spec.fields if row.get(c) in (None, "")]
        if missing:
            raise DatasetError(f"eval dataset {where}: the row lacks {', '.join(map(repr, missing))} ({task} "
                               f"reads {', '.join(map(repr, spec.fields))})", fix=fix)
        for column, (pattern, said) in spec.shapes.items():
            if not re.search(pattern, str(row[column])):
                raise DatasetError(f"eval dataset {where}: {column!r} does not {said} ({task} scores that)",
                                   fix=fix)
    shots = _shots(_packaged(task).read_text(encoding="utf-8")) or 0
    if not rows:
        raise DatasetError(f"eval dataset {path} holds no row", fix=fix)
    if len(rows) <= shots:
        raise DatasetError(f"eval dataset {path} holds {count_of(len(rows), 'row')}: {task} takes {shots} few-shot "
                           "examples for each question from the same file, the question itself left out",
                           fix=f"give at least {shots + 1} rows")


def task_file(task: str, dataset: Path | None, out_dir: Path) -> TaskFile:
    """The task file of `task`: the packaged one, or (with a local `dataset`) a copy in `out_dir` reading it."""
    src = _packaged(task)
    text = src.read_text(encoding="utf-8")
    shots = _shots(text)
    if dataset is None:
        return TaskFile(task, src, _field(text, "dataset_path") or "?", shots)
    data = dataset.expanduser().resolve()
    if not data.is_file():
        raise ConfigError(f"eval dataset {dataset} is not a file",
                          fix=f"give a JSON-lines file in the {task} format ({_flag('eval_dataset')})")
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
