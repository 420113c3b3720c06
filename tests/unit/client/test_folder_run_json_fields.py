"""`summarize` on a run.json that reads as JSON but holds a field of the wrong kind: exit 2 naming the file, the field
and the fix, the folder's summary.json left as it is — as for a run.json cut short. Each had been a traceback (exit 1):
pydantic's ValidationError for a gate, a TypeError for `gpus: null`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.client.folder import run_json
from llmsweep.metrics import GateConfig

RECORD = {"id": 0, "t_send": 0.0, "t_first": 0.05, "t_end": 0.2, "input_tokens": 10, "output_tokens": 8,
          "chunk_times": [0.05 + 0.02 * i for i in range(8)], "ok": True}


def _doc(**gates: Any) -> dict[str, Any]:
    doc = run_json(provenance={"kind": "fixed"}, gates=GateConfig(), client={}, gpus=1, source="simulated")
    doc["gates"].update(gates)
    return doc


CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "gate of the wrong type": (_doc(max_error_ratio="abc"),
                               ['`gates.max_error_ratio` is "abc": Input should be a valid number',
                                "fix: set `gates.max_error_ratio` in run.json to a valid value (failed / finished, "
                                "inclusive), or remove it for the default, 0.05"]),
    "gate out of range": (_doc(min_coverage=2), ["`gates.min_coverage` is 2: Input should be less than or equal to 1"]),
    # a newer llmsweep's gate (or a name mistyped by hand): refused, not ignored (a verdict without it would be
    # written over the one the release that knew it gave)
    "gate this release does not know": (_doc(typo_gate=1),
                                        ["`gates.typo_gate` is no gate llmsweep",
                                         "so its summary.json is left as it is",
                                         "fix: summarize it with the llmsweep release that wrote it (or a newer one); "
                                         "a name mistyped by hand: correct or remove it (the gates: max_error_ratio,"]),
    "gates not an object": ({**_doc(), "gates": [1]}, ["`gates` is [1], not an object of gate settings"]),
    # the read-back tolerances `run` records beside them, read the same way (a traceback too)
    "read-back setting of the wrong type": ({**_doc(), "readback": {"al_tolerance": "wide"}},
                                            ['`readback.al_tolerance` is "wide": Input should be a valid number']),
    "read-back setting this release does not know": ({**_doc(), "readback": {"al_slack": 1}},
                                                     ["`readback.al_slack` is no read-back setting llmsweep"]),
    "gpus null": ({**_doc(), "gpus": None}, ["`gpus` is null, not a whole number of GPUs (at least 1)",
                                             'fix: set "gpus" in run.json to the number of GPUs']),
    "gpus a fraction": ({**_doc(), "gpus": 0.5}, ["`gpus` is 0.5, not a whole number of GPUs"]),
    "client not an object": ({**_doc(), "client": "x"}, ['`client` is "x", not an object']),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_run_json_field_that_does_not_read_is_exit_2_naming_it_and_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    doc, said = CASES[case]
    (tmp_path / "records.jsonl").write_text(json.dumps(RECORD) + "\n")
    (tmp_path / "run.json").write_text(json.dumps(doc))
    (tmp_path / "summary.json").write_text('{"kept": true}')
    code, out, err = run_main(capsys, "summarize", tmp_path)
    assert code == 2, (out, err)
    assert f"error: {tmp_path / 'run.json'}: " in err and "Traceback" not in err
    for text in said:
        assert text in err, err
    assert (tmp_path / "summary.json").read_text() == '{"kept": true}'


def test_the_same_folder_with_its_fields_mended_summarizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "records.jsonl").write_text(json.dumps(RECORD) + "\n")
    (tmp_path / "run.json").write_text(json.dumps({**_doc(max_error_ratio=0.1), "gpus": 2}))
    code, out, err = run_main(capsys, "summarize", tmp_path, "--json")
    assert code in (0, 1), (out, err)  # a verdict, whatever it is; not a refusal
    doc = json.loads(out)
    assert doc["throughput"]["gpus"] == 2
