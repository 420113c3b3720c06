"""`summarize` labels a folder with what served its records as recorded when they were, never a default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.client.folder import run_json, summarise_dir, write_run_json
from llmsweep.errors import ResultInputError
from llmsweep.metrics import GateConfig

RECORD = {"id": 0, "t_send": 0.0, "t_first": 0.05, "t_end": 0.2, "input_tokens": 10, "output_tokens": 8,
          "chunk_times": [0.05 + 0.02 * i for i in range(8)], "ok": True}


def _folder(tmp_path: Path, doc: dict[str, object]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "records.jsonl").write_text(json.dumps(RECORD) + "\n")
    (tmp_path / "run.json").write_text(json.dumps(doc))
    return tmp_path


def _legacy_doc(**extra: object) -> dict[str, object]:
    """A run.json as llmsweep wrote it before it carried the source."""
    doc = run_json(provenance={"kind": "fixed"}, gates=GateConfig(), client={}, gpus=1, source="simulated")
    del doc["source"]
    return {**doc, **extra}


def test_the_source_written_in_run_json_labels_the_summary(tmp_path: Path) -> None:
    write_run_json(tmp_path, run_json(provenance={"kind": "fixed"}, gates=GateConfig(), client={}, gpus=1,
                                      source="simulated"))
    (tmp_path / "records.jsonl").write_text(json.dumps(RECORD) + "\n")
    assert summarise_dir(tmp_path, write=False).source == "simulated"


def test_an_older_run_json_takes_the_source_its_provenance_or_its_summary_recorded(tmp_path: Path) -> None:
    bench = _folder(tmp_path / "bench", _legacy_doc(provenance={"kind": "fixed", "source": "simulated"}))
    assert summarise_dir(bench, write=False).source == "simulated"
    run = _folder(tmp_path / "run", _legacy_doc())
    (run / "summary.json").write_text(json.dumps({"source": "simulated"}))
    assert summarise_dir(run, write=True).source == "simulated"
    assert json.loads((run / "summary.json").read_text())["source"] == "simulated"


@pytest.mark.parametrize("summary", ["{}", '{"source": "measured"}'])
def test_a_folder_that_never_recorded_its_source_is_refused_and_keeps_its_summary(tmp_path: Path,
                                                                                  summary: str) -> None:
    """Its summary's `measured` does not count: older llmsweeps wrote it by default, whatever served the records."""
    folder = _folder(tmp_path, _legacy_doc())
    (folder / "summary.json").write_text(summary)
    with pytest.raises(ResultInputError, match="does not say what served") as err:
        summarise_dir(folder)
    assert '"source": "measured"' in (err.value.fix or "")
    assert (folder / "summary.json").read_text() == summary


def test_a_run_json_or_summary_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    """A bench folder copied through a Windows editor: its run.json (and an older summary.json) start with a UTF-8
    byte-order mark, which `summarize` had refused ('Unexpected UTF-8 BOM'). They read as without the mark."""
    folder = _folder(tmp_path, _legacy_doc())
    (folder / "summary.json").write_text(json.dumps({"source": "simulated"}), encoding="utf-8-sig")
    (folder / "run.json").write_text((folder / "run.json").read_text(), encoding="utf-8-sig")
    assert summarise_dir(folder, write=False).source == "simulated"
