"""`llmsweep.words`: the one wording of a count — `1 GPU`, `8 GPUs` — that messages and the dashboard share."""

from __future__ import annotations

import re
from pathlib import Path

from llmsweep.words import count_of, noun

SRC = Path(__file__).resolve().parents[2] / "src" / "llmsweep"


def test_a_count_takes_the_singular_for_one_and_the_plural_otherwise() -> None:
    assert [count_of(n, "GPU") for n in (0, 1, 2, 8)] == ["0 GPUs", "1 GPU", "2 GPUs", "8 GPUs"]
    assert count_of(1, "process", "processes") == "1 process"
    assert count_of(3, "process", "processes") == "3 processes"
    assert (noun(1, "node"), noun(2, "node")) == ("node", "nodes")


def test_no_message_counts_gpus_nodes_or_workers_as_maybe_plural() -> None:
    """`GPU(s)`, `node(s)`, `worker(s)` are said through `count_of` / `noun` in every room (the words a count of
    hardware is said in); a new message that writes one by hand fails here, naming it."""
    # a count (an f-string's `{n}` or a log's `%d`, perhaps a word between) before the maybe-plural noun, or a list
    # of them (`on node(s) 0, 1`)
    pattern = re.compile(r"(\}|%d) ([\w/-]+ )?(GPU|node|worker|server|step)\(s\)|process\(es\)"
                         r"|\b(GPU|node|worker)\(s\) \{")
    found = [f"{path.relative_to(SRC)}:{i}" for path in sorted(SRC.rglob("*.py")) if path.name != "words.py"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line) and not line.lstrip().startswith("#")]
    assert found == []
