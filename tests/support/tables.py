"""A command's tables as a user's terminal shows them: stdout made a terminal of a given width for rich (what
`cli.tables.table_console` reads, as a shell's `COLUMNS` sets it), and the printed text read back as cells."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len

from llmsweep.words import count_of

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RULE = re.compile(r"[│┃]")


def as_terminal(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    """What prints after this prints as to a terminal `width` columns wide (rich's `TTY_COMPATIBLE`, and `COLUMNS`
    as a shell sets it), without colour."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def shown(out: str) -> str:
    """The text a terminal shows of `out` (bold and italic left out)."""
    return _ANSI.sub("", out)


def body_lines(text: str) -> list[list[str]]:
    """The cells of every table body line (`│ a │ b │`), as printed (padding kept)."""
    return [_RULE.split(line)[1:-1] for line in text.splitlines() if line.startswith("│")]


def cells(text: str) -> set[str]:
    """Every cell of every table line, header lines too, stripped."""
    return {c.strip() for line in text.splitlines() if _RULE.match(line) for c in _RULE.split(line)[1:-1]}


def rows(text: str, starts: int = 0) -> list[list[list[str]]]:
    """The body rows of the tables in `text`, each a list of its cells' lines (stripped): a line whose cell `starts`
    is filled begins a row, and the lines after it that leave that cell empty are the row's wrapped lines."""
    out: list[list[list[str]]] = []
    for line in body_lines(text):
        if line[starts].strip() or not out:
            out.append([[] for _ in line])
        for i, cell in enumerate(line):
            if cell.strip():
                out[-1][i].append(cell.strip())
    return out


def fits(text: str, width: int) -> None:
    """Every line of `text` within `width` columns (a wide character, an emoji verdict mark, takes two)."""
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    shown = "\n".join(too_wide)
    assert not too_wide, f"{count_of(len(too_wide), 'line')} wider than {width}:\n{shown}\n\n{text}"
