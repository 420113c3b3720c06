"""A multinode row's DECODE_MTP_SIZE and <ROLE>_NODES are what InferenceX's launcher runs and allocates: one that is
not a number, a 0 on a drafting row, or a node count other than the one llmsweep places is refused at its line,
never run as the default K or labelled with another allocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.policy import validate_files

CORPUS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy" / "serve.row-settings.yaml"


def hits(tmp_path: Path, decode: str, prefill: str = "PREFILL_NODES=1") -> list[str]:
    text = CORPUS.read_text().replace('"PREFILL_NODES=3"', f'"{prefill}"')
    text = text.replace('"DECODE_NODES=2", "DECODE_MTP_SIZE=3"', decode)
    file = tmp_path / "r.yaml"
    file.write_text(text)
    return [f.message for f in validate_files([file]).findings if f.rule == "serve.row-settings"]


@pytest.mark.parametrize(("decode", "said"), [
    ('"DECODE_NODES=2", "DECODE_MTP_SIZE=2x"', "DECODE_MTP_SIZE=2x is not a number of draft steps"),
    ('"DECODE_NODES=2", "DECODE_MTP_SIZE=0"', "DECODE_MTP_SIZE=0: InferenceX's decode worker does not draft"),
    ('"DECODE_NODES=1", "DECODE_MTP_SIZE=3"', "DECODE_NODES=1 but its workers take 2 nodes"),
])
def test_a_row_setting_that_misdescribes_the_row_is_refused(tmp_path: Path, decode: str, said: str) -> None:
    found = hits(tmp_path, decode)
    assert len(found) == 1 and said in found[0], found


def test_settings_that_describe_the_row_pass(tmp_path: Path) -> None:
    assert hits(tmp_path, '"DECODE_NODES=2", "DECODE_MTP_SIZE=3"') == []
    assert hits(tmp_path, '"DECODE_MTP_SIZE=3"') == []  # a row that names no node count
