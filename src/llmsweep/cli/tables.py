"""The console every command prints its tables to, and the one rule for laying a wide table out in it.

A number (or an id a user copies, kind `id`) is never wrapped, folded or cut: its column is as wide as its widest cell,
and only a header may wrap (at its spaces). Free text (a reason) wraps. The key column (the job) is what gives:
shortened (`job_label`) when the table would not fit with whole ids, folded if it still must. Columns that do not fit
beside the key go, in their order, into a continuation table that repeats the key — none is dropped. A title wider
than its table (a continuation table is narrow) and a line of ids wider than the console break at a word's joints,
never mid-name (`break_long_words`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text


def plain(value: object) -> str:
    """Free text (a job id, a reason, a path) as a table cell: shown as written, never read as rich markup (a reason
    quoting `[rule-id]` lost it, and one holding `[/…` raised a MarkupError that ended the command)."""
    from rich.markup import escape

    return escape(str(value))


def table_console() -> Console:
    """stdout for a table: under a terminal, its width (`print_tables` lays a wide table out in it); into a log or a
    pipe, each table at its natural width, never folded, so a row can be read or grepped whole."""
    from rich.console import Console

    console = Console(soft_wrap=False)
    return console if console.is_terminal else Console(width=10_000, soft_wrap=False)


@dataclass(frozen=True)
class Column:
    """A column of a table `fit_tables` lays out. `kind`: `key` (names the row; repeated in every part, shortened and
    then folded to fit), `number` (never wrapped: as wide as its widest cell), `id` (a handle another command takes,
    such as a result id: kept whole as a number is), `text` (wraps down to `min_width`). A key is folded down to the
    larger of `min_width` and 20 columns (a run id of 27 is kept whole with `min_width=27`)."""

    header: str
    kind: Literal["key", "number", "id", "text"] = "number"
    justify: Literal["left", "right"] = "right"
    min_width: int = 16
    drop_empty: bool = False
    """A text column empty in every row is left out (nothing to read in it)."""


_EDGE = 1
_PER_COLUMN = 3  # a space of padding each side, and a rule
_KEY_MIN = 20
_WHOLE = ("number", "id")
"""The kinds of column never wrapped, folded or cut."""
_SEGMENT = re.compile(r"[^_…\- ]*[_…\- ]|[^_…\- ]+$")
"""A key's segments, each with the `_`, `-`, `…` or space that ends it (a job id has no space; a metric's label,
`interactivity tok/s/user`, does)."""
_BREAK_AFTER = re.compile(r"[^_…\-/, ]*[_…\-/,]|[^_…\-/, ]+")
"""A word's pieces where a line may end inside it: after a `_`, `-`, `/`, `…` or `,` (a job id's, an image's or a
path's own joints), never mid-name."""
_ID = re.compile(r"^(?P<head>.+?)_(?P<hash>[0-9a-f]{12})(?P<repeat>-repeat\d+)?$")


def job_label(job_id: str, exp_name: str | None = None, width: int = 48) -> str:
    """A job id short enough for a table: its leading identity (the experiment name, which names the model and, for
    most scenarios, the parallelism, concurrency and arm) and its hash suffix, `qwen3.5_tp8_conc4_kvnone_spec-mtp…
    79501af65b18` (with `eval_` / `-repeatK` where the id has them). An id of at most `width` characters is kept whole.
    The hash is the recipe's, shared by its jobs: `job_labels` tells a table's rows apart."""
    return job_labels([job_id], {job_id: exp_name} if exp_name else None, width)[0]


def job_labels(job_ids: Sequence[str], exp_names: Mapping[str, str] | None = None, width: int = 48) -> list[str]:
    """`job_label` of each id, told apart: where rows share a label (one recipe's jobs whose experiment name does not
    name what differs, e.g. a fixed-length sweep's concurrencies), the parts of the id that differ join it
    (`qwen3.5_1024_1024…conc4_b7e6f7ef7631`). Ids that would still collide are kept whole."""
    names = exp_names or {}
    parsed: dict[int, tuple[str, list[str], str]] = {}  # the ids to shorten: (lead, the segments after it, tail)
    for i, job_id in enumerate(job_ids):
        m = _ID.match(job_id)
        if len(job_id) <= width or m is None:
            continue
        head, tail = m["head"], m["hash"] + (m["repeat"] or "")
        if head.endswith("_eval"):
            head, tail = head[: -len("_eval")], "eval_" + tail
        name = names.get(job_id)
        lead = name if name and head.startswith(name + "_") else head
        parsed[i] = (lead, head[len(lead) + 1:].split("_") if lead != head else [], tail)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (lead, _, tail) in parsed.items():
        groups.setdefault((lead, tail), []).append(i)
    labels = list(job_ids)
    for (lead, tail), members in groups.items():
        common = set.intersection(*(set(parsed[i][1]) for i in members))
        for i in members:
            rest = [seg for seg in parsed[i][1] if seg not in common]
            room = max(8, width - len(tail) - 1)
            labels[i] = lead[:room] + "…" + "".join(f"{seg}_" for seg in rest) + tail
    if len(set(labels)) < len(set(job_ids)):
        return list(job_ids)
    return labels


def fit_tables(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], *, width: int,
               short_keys: Sequence[str] | None = None, caption: str | None = None) -> list[Table]:
    """`rows` as one table at most `width` wide, or, when its numbers do not fit beside the key, as several (each
    repeating the key column; the later ones titled `… (continued)`). A cell is rich markup (free text escaped with
    `plain`) or a rich Text. `short_keys`: the key cells to show when whole ones do not fit (the caption says so)."""
    from rich.text import Text

    texts = [[c if isinstance(c, Text) else Text.from_markup(c) for c in row] for row in rows]
    keep = [i for i, col in enumerate(columns)
            if not (col.drop_empty and all(not row[i].plain.strip() for row in texts))]
    key = next((i for i in keep if columns[i].kind == "key"), None)

    def natural(i: int) -> int:
        return max([len(columns[i].header), *(row[i].cell_len for row in texts)])

    def least(i: int) -> int:
        col = columns[i]
        word = max((len(w) for w in col.header.split()), default=1)
        cells = max((row[i].cell_len for row in texts), default=1)
        if col.kind in _WHOLE:
            return max(word, cells)
        floor = max(_KEY_MIN, col.min_width) if col.kind == "key" else col.min_width
        return min(max(cells, len(col.header)), max(word, floor))

    captions = [caption] if caption else []
    if key is not None and short_keys is not None and _EDGE + sum(natural(i) + _PER_COLUMN for i in keep) > width:
        shortened = False
        for row, short in zip(texts, short_keys, strict=True):
            shortened = shortened or short != row[key].markup
            row[key] = Text.from_markup(short)
        if shortened:  # ids short enough are kept whole: then nothing was
            captions.append("job ids shortened to their experiment name and hash (--json lists them whole)")

    # the columns, in their order, into parts that fit at their least widths
    base = _EDGE + (least(key) + _PER_COLUMN if key is not None else 0)
    parts: list[list[int]] = [[]]
    used = base
    for i in (i for i in keep if i != key):
        need = least(i) + _PER_COLUMN
        if parts[-1] and used + need > width:
            parts.append([])
            used = base
        parts[-1].append(i)
        used += need

    tables = []
    for n, part in enumerate(parts):
        index = ([key] if key is not None else []) + part
        widths = {i: least(i) for i in index}
        spare = width - _EDGE - sum(w + _PER_COLUMN for w in widths.values())
        # room to spare: the key first, then the numbers' headers unwrapped, then the text
        for kinds in (("key",), _WHOLE, ("text",)):
            for i in index:
                if columns[i].kind in kinds and spare > 0:
                    grow = min(spare, natural(i) - widths[i])
                    if grow > 0:
                        widths[i] += grow
                        spare -= grow
        last = n == len(parts) - 1
        # rich fits the title to the table's width, folding a word longer than it mid-name (a continuation table
        # holds the key and a few numbers: narrower than a title naming a model and two runs)
        wide = _EDGE + sum(w + _PER_COLUMN for w in widths.values())
        tables.append(_table(break_long_words(title if n == 0 else f"{title} (continued)", wide, style="table.title"),
                             columns, texts, index, widths,
                             caption="\n".join(captions) if last and captions else None))
    return tables


def _table(title: str | Text, columns: Sequence[Column], texts: list[list[Text]], index: list[int],
           widths: dict[int, int], *, caption: str | None) -> Table:
    from rich.table import Table

    table = Table(title=title, show_header=True, header_style="bold", caption=caption, caption_justify="left")
    for i in index:
        col = columns[i]
        # a number's column is as wide as its widest cell: only its header wraps
        table.add_column(col.header, justify=col.justify, width=widths[i], overflow="fold")
    for row in texts:
        cells = []
        for i in index:
            cell = row[i].copy()
            if columns[i].kind in _WHOLE:
                cell.no_wrap = True
            elif columns[i].kind == "key" and cell.cell_len > widths[i]:
                cell = _break_at_segments(cell, widths[i])
            cells.append(cell)
        table.add_row(*cells)
    return table


def print_tables(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], *,
                 short_keys: Sequence[str] | None = None, caption: str | None = None,
                 console: Console | None = None) -> None:
    """Lay the table out for the console (`table_console()` by default) and print it."""
    console = console or table_console()
    for table in fit_tables(title, columns, rows, width=console.width, short_keys=short_keys, caption=caption):
        console.print(table)


def break_long_words(markup: str | Text, width: int, *, style: str = "") -> str | Text:
    """`markup` (a title, a line of ids) laid out for `width` columns as rich lays it (wrapped at its spaces), except
    that a word wider than `width` — a job id, a model's name, a path — is broken after the `_`, `-`, `/`, `…` or `,`
    that join its parts (:data:`_BREAK_AFTER`), each line of it at most `width`, where rich folded it at the width,
    mid-name (`…mi355x_79` / `501af65b18`). A piece wider than `width` by itself still folds. Returned as it came when
    no word is wider than `width`; else as a Text (`style`: the base style rich gives a str in that place, such as a
    table title's)."""
    from rich.text import Text

    text = markup if isinstance(markup, Text) else Text.from_markup(markup)
    plain_text = text.plain
    cuts: list[int] = []
    for word in re.finditer(r"\S+", plain_text):
        if len(word[0]) <= width:
            continue
        line = 0
        for piece in _BREAK_AFTER.finditer(word[0]):
            if line and line + len(piece[0]) > width:
                cuts.append(word.start() + piece.start())
                line = 0
            line += len(piece[0])
    if not cuts:
        return markup
    lines = text.divide(cuts)
    out = Text("\n", style=style).join(lines)
    out.style = style or text.style
    return out


def _break_at_segments(cell: Text, width: int) -> Text:
    """A key wider than its column, broken into lines after its segments' `_`, `-` or `…` rather than mid-word (rich
    wraps at spaces only, and a job id has none: it folded `qwen3.5_tp8_co` / `nc4_kvnone…`). A segment wider than
    the column still folds."""
    from rich.text import Text

    lines: list[str] = []
    line = ""
    for piece in _SEGMENT.findall(cell.plain):
        if line and len(line.rstrip(" ")) + len(piece.rstrip(" ")) > width:
            lines.append(line.rstrip(" "))
            line = ""
        line += piece
    lines.append(line.rstrip(" "))
    return Text("\n".join(lines), style=cell.style)
