"""Word problems in GSM8K's format (`question`, `answer` ending in `#### <number>`) that a 135M-parameter model can
partly solve: one addition or subtraction of small numbers each. The real GSM8K comes from the Hugging Face hub, which
neither CI nor the lent GPU machine can reach; this set is made here, deterministically, so an eval on real weights
scores something real offline. `ops` picks the kinds: SmolLM2-135M-Instruct adds well and subtracts badly, which is
what lets a test show the score depends on the questions (and so on the model's answers), not on the harness.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

NAMES = ("Sam", "Mia", "Tom", "Ana", "Leo", "Ivy", "Max", "Zoe", "Ben", "Eva")
THINGS = ("apples", "books", "pens", "cards", "coins", "shells", "stickers", "marbles")


def problem(rng: random.Random, op: str) -> dict[str, str]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    if op == "add":
        c = a + b
        return {"question": f"{name} has {a} {thing}. {name} gets {b} more {thing}. How many {thing} does {name} "
                            f"have now?",
                "answer": f"{name} has {a} + {b} = <<{a}+{b}={c}>>{c} {thing}.\n#### {c}"}
    a += b
    c = a - b
    return {"question": f"{name} has {a} {thing}. {name} gives away {b} {thing}. How many {thing} does {name} have "
                        f"left?",
            "answer": f"{name} has {a} - {b} = <<{a}-{b}={c}>>{c} {thing} left.\n#### {c}"}


def write_arith(path: Path, n: int, *, seed: int = 7, ops: tuple[str, ...] = ("add", "sub")) -> Path:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(problem(rng, ops[i % len(ops)])) + "\n")
    return path
