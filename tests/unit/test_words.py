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


HAND_COUNT = re.compile(r"\{([^{}]+)\} (GPUs|nodes|workers)\b")
"""An f-string's count written before a hand-made plural (`over the {tp} GPUs`, `{n} nodes`): `1 GPUs` at a count of
one."""
NOT_COUNTS = {"kind", "where[0]"}
"""Expressions before such a word that name a kind of worker, not a count of them (`the {kind} workers`)."""


def test_no_message_writes_a_counts_plural_by_hand() -> None:
    """`over the {config.tp} GPUs` said `over the 1 GPUs` at TP 1: a count before `GPUs`, `nodes` or `workers` in an
    f-string is said through `count_of` (`over {count_of(tp, 'GPU')}`), even where the count cannot be one today. A
    constant (`{MAX_NODES} nodes`) and a worker's kind are no count to say."""
    found = [f"{path.relative_to(SRC)}:{i}: {{{match.group(1)}}} {match.group(2)}"
             for path in sorted(SRC.rglob("*.py")) if path.name != "words.py"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if not line.lstrip().startswith("#")
             for match in HAND_COUNT.finditer(line)
             if match.group(1) not in NOT_COUNTS and not re.fullmatch(r"[A-Z_]+", match.group(1))]
    assert found == []


def test_the_hand_count_scan_finds_what_it_names() -> None:
    """The scan above fails on the line the review found, and passes what it exempts."""
    hits = [m.group(1) for m in HAND_COUNT.finditer('f"{gb:.4g} GB of DRAM over the {config.tp} GPUs (SGLang\'s "')]
    assert hits == ["config.tp"]
    assert [m.group(1) for m in HAND_COUNT.finditer('f"{count_of(tp, \'GPU\')} over {count_of(n, \'node\')}"')] == []


def test_recorded_counts_are_said_in_words_and_old_records_still_read() -> None:
    """A virtual-time point's late requests and a run's dead client workers are counted in words, and the openings
    that runs recorded before (`request(s)`, `client worker(s) died`) keep their meaning: a timeout warning of its own
    kind, a stop that invalidates the run."""
    from llmsweep.metrics.gates import EARLY_STOPS, client_workers_died
    from llmsweep.sim_warnings import WarningKind, timeout_not_applied, warning_kind

    assert timeout_not_applied(1, 5).startswith("1 request ran longer than --request-timeout 5 s")
    assert timeout_not_applied(2, 5).startswith("2 requests ran longer")
    one, two = client_workers_died(["w0 exited with 1"]), client_workers_died(["w0 exited with 1", "w1 exited with -9"])
    assert (one, two) == ("the client lost 1 worker: w0 exited with 1",
                          "the client lost 2 workers: w0 exited with 1, w1 exited with -9")
    assert all(reason.startswith(EARLY_STOPS) for reason in (one, two, "client worker(s) died: w0 exited with 1"))
    assert warning_kind("3 request(s) ran longer than --request-timeout 5 s, …") is WarningKind.TIMEOUT_NOT_APPLIED
