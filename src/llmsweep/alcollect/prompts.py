"""The prompt set a golden-AL collection drafts against: SPEED-Bench's qualitative split, or a file in its format.

InferenceX measures every golden curve on SPEED-Bench Qualitative's `coding` category (80 of its 880 prompts). Its
rows carry `question_id`, `category`, `sub_category`, `turns` (the user turns), `source`, `src_id`, `difficulty` and
`multiturn`; a local JSONL file with those fields (at least `category` and `turns`) is read the same way. The hub is
read through the Hugging Face datasets server's JSON rows API (no extra dependency; `HF_TOKEN` for a gated copy).
Without the hub, llmsweep ships its own small coding set (`builtin`: 24 programming requests written for llmsweep,
same format) — a stand-in whose curve says so in its `dataset` line, never a SPEED-Bench curve.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.errors import DatasetError, undecodable_line
from llmsweep.jsonline import numbered_values

log = logging.getLogger(__name__)

HUB_DATASET = "nvidia/SPEED-Bench"
HUB_CONFIG = "qualitative"
HUB_SPLIT = "test"
ROWS_API = "https://datasets-server.huggingface.co/rows"
ROWS_PAGE = 100
"""The rows API returns at most 100 rows a call: the 880 qualitative rows are 9 calls."""
BUILTIN = "builtin"
HUB = "hub"
BUILTIN_FILE = Path(__file__).resolve().parent / "data" / "coding_prompts.jsonl"


class PromptRow(BaseModel):
    """One SPEED-Bench row (the fields llmsweep reads; others are kept out)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question_id: str = ""
    category: str
    turns: list[str] = Field(min_length=1)
    source: str = ""
    multiturn: bool = False


class PromptSet(BaseModel):
    """The prompts of one category, with where they came from (the curve's `dataset` line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    origin: str = Field(description="hub id (config/split), file path, or the builtin set.")
    category: str
    prompts: list[PromptRow]

    def describe(self, sent: int) -> str:
        """The curve header's dataset text: category first (InferenceX's field), then origin, count and the digest of
        the prompts sent (:func:`sent_digest`): a file edited in place keeps its path and may keep its count."""
        multi = sum(1 for p in self.prompts[:sent] if len(p.turns) > 1)
        turns = f"; first turn of {multi} multi-turn rows" if multi else ""
        digest = sent_digest([p.turns[0] for p in self.prompts[:sent]])
        return f"{self.category} ({self.origin}, {sent} prompts{turns}, {DIGEST_WORD} {digest})"


DIGEST_WORD = "sha256"
"""How a dataset line names its prompts' digest (`coding (prompts.jsonl, 80 prompts, sha256 1a2b3c4d5e6f)`)."""


def sent_digest(texts: Sequence[str]) -> str:
    """The first 12 hex digits of sha256 over the prompts a collection sends, in order (each length-prefixed, so no
    two lists share a digest by where one prompt ends): what `--merge-into` compares besides the origin and count."""
    h = hashlib.sha256(b"llmsweep-al-prompts-v1")
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)
    return h.hexdigest()[:12]


EXPECTED = "`category` (e.g. coding) and `turns` (a list of the user turns, at least one)"
"""The fields of a SPEED-Bench row llmsweep needs (:class:`PromptRow`), as an error states them."""
FILE_FIX = f"each line is a JSON object with {EXPECTED}"


def prompt_row(doc: Any, where: str, *, fix: str) -> PromptRow:
    """One loaded row (a JSONL line, a hub row) as a SPEED-Bench row. A row of another shape (a dataset whose rows
    carry `prompt` or `messages`, not `turns`) is refused naming `where` (file:line, or the dataset and row index),
    what is wrong, the fields the row has and those expected, rather than a validation traceback."""
    if not isinstance(doc, dict):
        raise DatasetError(f"{where}: not a SPEED-Bench row (a JSON {type(doc).__name__}, not an object); expected an "
                           f"object with {EXPECTED}", fix=fix)
    try:
        return PromptRow.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].lower()}" for e in exc.errors()[:3])
        has = f"fields {', '.join(f'`{k}`' for k in doc)}" if doc else "no fields"
        raise DatasetError(f"{where}: not a SPEED-Bench row ({problems}): it has {has}; expected {EXPECTED}",
                           fix=fix) from exc


def hub_prompt_rows(items: Sequence[Any], dataset: str, offset: int = 0) -> list[PromptRow]:
    """One page of the datasets server's rows API (``{"row_idx": N, "row": {...}}`` each) as SPEED-Bench rows; a row
    of another shape is refused naming the dataset and its row index (:func:`prompt_row`)."""
    fix = (f"{dataset}'s rows are not in SPEED-Bench's shape (another dataset, or its fields renamed): pass --prompts "
           "FILE (JSONL rows with `category` and `turns`) or --prompts builtin")
    rows: list[PromptRow] = []
    for i, item in enumerate(items):
        index = item.get("row_idx", offset + i) if isinstance(item, dict) else offset + i
        row = item.get("row", item) if isinstance(item, dict) else item
        rows.append(prompt_row(row, f"{dataset} row {index}", fix=fix))
    return rows


def _rows_from_jsonl(path: Path) -> list[PromptRow]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read prompt file {path}: {exc}", fix="check the --prompts path") from exc
    except UnicodeDecodeError as exc:  # (a binary file, rows saved in another encoding): named, not a traceback
        at = undecodable_line(exc)
        raise DatasetError(f"{path}{f':{at}' if at else ''}: prompt file is not UTF-8 text ({exc.reason})",
                           fix="save the JSONL as UTF-8 (JSON text is UTF-8)") from exc
    def not_json(n: int, exc: ValueError) -> DatasetError:
        return DatasetError(f"{path}:{n}: not a SPEED-Bench row (not JSON: {exc})", fix=FILE_FIX)

    return [prompt_row(doc, f"{path}:{n}", fix=FILE_FIX) for n, doc in numbered_values(text, not_json)]


def _hub_rows(timeout_s: float = 30.0) -> list[PromptRow]:
    headers = {"User-Agent": "llmsweep"}
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    rows: list[PromptRow] = []
    offset, total = 0, None
    while total is None or offset < total:
        query = urllib.parse.urlencode({"dataset": HUB_DATASET, "config": HUB_CONFIG, "split": HUB_SPLIT,
                                        "offset": offset, "length": ROWS_PAGE})
        request = urllib.request.Request(f"{ROWS_API}?{query}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                doc: dict[str, Any] = json.loads(resp.read().decode())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DatasetError(
                f"cannot read {HUB_DATASET} ({HUB_CONFIG}/{HUB_SPLIT}) from the Hugging Face hub: {exc}",
                fix="set HF_TOKEN if the dataset is gated, or pass --prompts FILE (SPEED-Bench rows as JSONL) or "
                "--prompts builtin",
            ) from exc
        page = hub_prompt_rows(doc.get("rows", []), f"{HUB_DATASET} {HUB_CONFIG}/{HUB_SPLIT}", offset)
        if not page:
            break
        rows += page
        offset += len(page)
        total = int(doc.get("num_rows_total", offset))
    return rows


def load_prompts(source: str, category: str = "coding", limit: int | None = None) -> PromptSet:
    """The rows of `category` from `source`: ``hub`` (SPEED-Bench qualitative), ``builtin``, or a JSONL file."""
    if source == HUB:
        rows, origin = _hub_rows(), f"{HUB_DATASET} {HUB_CONFIG}/{HUB_SPLIT}"
    elif source == BUILTIN:
        rows, origin = _rows_from_jsonl(BUILTIN_FILE), "llmsweep builtin coding set (not SPEED-Bench)"
    else:
        path = Path(source).expanduser()
        rows, origin = _rows_from_jsonl(path), str(path)
    picked = [r for r in rows if r.category == category]
    if not picked:
        cats = sorted({r.category for r in rows})
        raise DatasetError(f"prompt set {origin} has no `{category}` rows (it has: {', '.join(cats) or 'none'})",
                           fix="choose one of those with --category")
    if limit is not None:
        picked = picked[:limit]
    log.info("prompt set %s: %d %s prompts", origin, len(picked), category)
    return PromptSet(origin=origin, category=category, prompts=picked)
