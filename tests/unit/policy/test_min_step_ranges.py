"""`grid.min-step` reads a conc-start/conc-end range as the concurrencies it plans: only conc-list entries were
checked, so a range of 1..16 (1, 2, 4, 8, 16: a step of 1) under `min-conc-step: 3` said nothing."""

from __future__ import annotations

from pathlib import Path

from llmsweep.policy import validate_files

CASE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy" / "grid.min-step.yaml"


def test_a_range_finer_than_the_noise_floor_is_said_at_its_entry(tmp_path: Path) -> None:
    text = CASE.read_text().replace("conc-list: [4, 5, 8]", "conc-start: 1, conc-end: 16")
    text = text.replace("min-conc-step: 2", "min-conc-step: 3")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    hits = [f for f in validate_files([path]).findings if f.rule == "grid.min-step"]
    assert len(hits) == 1 and "conc 1 and 2 are 1 apart; policy.min-conc-step is 3" in hits[0].message, hits
    assert hits[0].line == 15
    path.write_text(text.replace("conc-start: 1,", "conc-start: 4,"))  # 4, 8, 16: steps of 4 and 8
    assert [f for f in validate_files([path]).findings if f.rule == "grid.min-step"] == []
