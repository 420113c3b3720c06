"""One JSON line: how llmsweep encodes and decodes a line of its `.jsonl` files (records, samples, scrapes); and how it
reads the text of a JSON file it may not have written (:func:`read_json_text`).

orjson where it is installed (a core dependency): compact, UTF-8, ~20x `json` at encoding a record of thousands of chunk
times and ~4x at decoding it. A source tree run without llmsweep's dependencies (the GPU scripts put `src` on
PYTHONPATH on a bare image) falls back to `json`, slower: the same values, and for a record's fields (clock readings,
counts, text) the same bytes; the two spell a very small or large float differently (`1e-05` against `1e-5`), which
no reader minds. `metrics.accumulate` decodes records in batches on its own faster path (chunk arrays cut out).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

try:
    import orjson
except ImportError:  # llmsweep's sources without its dependencies
    orjson = None  # type: ignore[assignment]


def finite_or_null(doc: Any) -> Any:
    """`doc` with every float that is not finite (NaN, ±Infinity) as null, through dicts, lists and tuples: JSON has no
    spelling for them, and a strict reader (JavaScript's JSON.parse, jq) refuses the file that has them. Null says the
    field is there without a number (an export of an imported row's published NaN; the dashboard's page data)."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: finite_or_null(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [finite_or_null(v) for v in doc]
    return doc


def dumps_line(doc: Any) -> bytes:
    """`doc` as one compact JSON line, newline included. Floats must be finite (orjson would write NaN as null,
    `json` refuses it): use :func:`json.dumps` for documents that may hold NaN (a Prometheus scrape)."""
    if orjson is None:
        return (json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode()
    # numpy scalars as `json` writes them (np.float64 is a float to `json`; a missed `.tolist()` must not crash a run)
    return orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def text_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text: they end at "\n" only (a trailing "\r" dropped), as JSON lines do and
    lm-eval's reader reads them; `str.splitlines()` also ends one at U+2028, U+0085 and the other separators JSON
    allows inside a string, refusing a valid row at a line it does not have."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def numbered_values(text: str, not_json: Callable[[int, ValueError], Exception]) -> Iterator[tuple[int, Any]]:
    """(line number from 1, JSON value) of each non-blank line of a JSON-lines text (:func:`text_lines`); a line that
    is not JSON raises what `not_json(number, error)` makes of it (each reader names its file and fix)."""
    for number, line in enumerate(text_lines(text), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise not_json(number, exc) from exc
        yield number, value


def loads_line(line: bytes | str) -> Any:
    """One line's JSON value; `json.JSONDecodeError` (a `ValueError`) when it is not JSON. What orjson refuses but
    `json` reads (the NaN and Infinity that `json.dumps` writes by default) is read by `json`."""
    if orjson is not None:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)


FOREIGN_ENCODING = "utf-8-sig"
"""How llmsweep decodes a JSON (or JSON-lines) file it may not have written — an import, a peer's export, a run
folder's run.json or summary.json a user edited or copied through Windows tools: UTF-8, a byte-order mark at the
file's start skipped (Notepad and PowerShell write one, and `json` refused the file: "Unexpected UTF-8 BOM"). A mark
anywhere else is part of the text, as the document's parser then says."""


def read_json_text(path: Path, *, errors: str = "strict") -> str:
    """The whole text of such a file (:data:`FOREIGN_ENCODING`). `errors`: as :meth:`bytes.decode`."""
    return path.read_text(encoding=FOREIGN_ENCODING, errors=errors)


def open_json_text(path: Path, *, errors: str = "strict") -> TextIO:
    """Such a file opened for reading line by line (a JSON-lines export): a mark at its start is skipped, once."""
    return path.open(encoding=FOREIGN_ENCODING, errors=errors)


def load_json_file(path: Path) -> Any:
    """The JSON document of a file read as :func:`read_json_text` reads it; `OSError`, `UnicodeDecodeError` or
    `json.JSONDecodeError` (both `ValueError`) when it does not read."""
    return json.loads(read_json_text(path))
