"""GPQA documents for lm-eval: each question twice, its four choices shuffled with a fixed seed, the letter of the
correct one as the target."""

from __future__ import annotations

import random
from typing import Any

REPEATS = 2
SEED = 3407


def _clean(text: Any) -> str:
    return " ".join(str(text or "").replace(" [title]", ". ").split())


def process_docs(dataset: Any) -> Any:
    rng = random.Random(SEED)
    rows: dict[str, list[Any]] = {"Question": [], "choice1": [], "choice2": [], "choice3": [], "choice4": [],
                                  "answer": []}
    for _ in range(REPEATS):
        for doc in dataset:
            choices = [_clean(doc["Correct Answer"]), _clean(doc["Incorrect Answer 1"]),
                       _clean(doc["Incorrect Answer 2"]), _clean(doc["Incorrect Answer 3"])]
            correct = choices[0]
            rng.shuffle(choices)
            rows["Question"].append(_clean(doc["Question"]))
            for i, choice in enumerate(choices):
                rows[f"choice{i + 1}"].append(choice)
            rows["answer"].append("ABCD"[choices.index(correct)])
    return type(dataset).from_dict(rows)
