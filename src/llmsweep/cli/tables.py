"""The console every command prints its tables to (one rule for all of them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def plain(value: object) -> str:
    """Free text (a job id, a reason, a path) as a table cell: shown as written, never read as rich markup (a reason
    quoting `[rule-id]` lost it, and one holding `[/…` raised a MarkupError that ended the command)."""
    from rich.markup import escape

    return escape(str(value))


def table_console() -> Console:
    """stdout for a table: under a terminal, its width (long cells fold inside their column); into a log or a pipe,
    each table at its natural width, never folded, so a row can be read or grepped whole."""
    from rich.console import Console

    console = Console(soft_wrap=False)
    return console if console.is_terminal else Console(width=10_000, soft_wrap=False)
