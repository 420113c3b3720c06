"""A run folder's own files re-saved by a Windows editor start with a UTF-8 byte-order mark: the executor's reader
(`execute.artifacts.read_json`, what `run --resume` reads the run's id and start from) reads them as without it."""

from __future__ import annotations

import json
from pathlib import Path

from llmsweep.execute import artifacts as art


def test_a_run_json_with_a_byte_order_mark_keeps_its_run_id(tmp_path: Path) -> None:
    """read_json had answered None ('does not read') for such a run.json: `run --resume` then wrote the run under a
    new run id and start, as if it had never run."""
    doc = {"run_id": "r-2026", "started": "2026-11-29T12:00:00Z"}
    path = tmp_path / art.RUN_FILE
    path.write_text(json.dumps(doc), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert art.read_json(path) == doc
