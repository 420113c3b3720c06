"""How a command's table shows a verdict (`run`'s end table, `predict`'s): one colour per verdict, and the marks that
qualify it — `(resumed)` for a job `--resume` did not run again, `(reused)` for one `--reuse` found stored, `⚠N` for a
warning said under the table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from llmsweep.cli.tables import plain

COLOURS = {"valid": "green", "smoke": "yellow", "skipped": "cyan"}
"""A verdict's colour; any other (invalid, failed, refused) is red."""

WARNING_MARK = "⚠"
"""Beside a verdict: the result carries a warning (numbered; the note under the table says it)."""


def verdict_cell(verdict: str, *, kept: Literal["resumed", "reused"] | None = None, notes: Sequence[int] = ()) -> str:
    """`valid`, `smoke (resumed)`, `valid (reused)`, `valid ⚠1`: the verdict in its colour, then its marks (rich
    markup). `kept`: the job did not run in this invocation, its verdict is that of the result it was kept for.
    `notes`: the numbers of its warnings (:class:`Notes`), said in order (`⚠1,2,3`, as the notes under the table
    read, whichever warning a row came to first)."""
    marks = (f" ({kept})" if kept else "") + (f" {WARNING_MARK}{','.join(map(str, sorted(notes)))}" if notes else "")
    return f"[{COLOURS.get(verdict, 'red')}]{plain(verdict)}[/]{plain(marks)}"


class Notes:
    """The warnings of a table's rows, each said once under it and numbered in order of first use."""

    def __init__(self) -> None:
        self.said: dict[str, int] = {}

    def number(self, warnings: Sequence[str]) -> list[int]:
        """The numbers of `warnings` (new ones numbered next)."""
        return [self.said.setdefault(w, len(self.said) + 1) for w in warnings]

    def lines(self) -> list[str]:
        """`⚠1 a real engine would refuse them: …`, one per warning, for the table's caption."""
        return [f"{WARNING_MARK}{n} {w}" for w, n in self.said.items()]
