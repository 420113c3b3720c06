"""An n-gram drafter drafts only where its pattern matches: `al collect`'s AL, 1 + accepted / drafts (InferenceX's
definition, kept), is that of the steps that drafted. Each cell records its draft coverage (the share of its output
from those steps), the table shows it, the curve's header notes it, and a low one is said with what a step gives over
the run — the AL the planner pins is otherwise read as every step's."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.alcollect.collect import coverage_note, draft_coverage, low_coverage
from llmsweep.alcollect.settings import CellResult
from llmsweep.catalog.golden import load_curve
from llmsweep.cli.alcollect import collect

REPO = Path(__file__).resolve().parents[3]
EVIDENCE = REPO / "examples" / "results" / "h200-al-collect-smollm2" / "al-evidence.tgz"
LLAMA = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"


def _evidence_cell(k: int) -> CellResult:
    """A cell of the SmolLM2 n-gram collection measured on an H200 (vLLM 0.26.0), as its cell.json says."""
    with tarfile.open(EVIDENCE) as tgz:
        member = next(m for m in tgz.getmembers() if m.name.endswith(f"thinking_off-k{k}/cell.json"))
        doc = tgz.extractfile(member)
        assert doc is not None
        cell = CellResult.model_validate(json.loads(doc.read()))
    cell.draft_coverage = draft_coverage(cell.drafts, cell.accepted_tokens, cell.output_tokens)
    return cell


def test_an_ngram_cell_that_drafted_little_says_its_al_holds_only_for_its_drafted_steps() -> None:
    cell = _evidence_cell(3)  # 265 drafts, 439 accepted, 3,872 output tokens: AL 2.66
    assert cell.draft_coverage == pytest.approx((265 + 439) / 3872)
    assert coverage_note(cell) == (
        "thinking_off K=3: draft coverage 18% (704 of 3,872 output tokens from steps that drafted); only 18% of its "
        "output came from steps that drafted (below 50%): its AL 2.66 holds for those steps alone, not for every step "
        "(1.13 tokens per decode step over the run)")


def test_a_cell_that_drafts_every_step_is_noted_without_a_warning() -> None:
    cell = CellResult(thinking="thinking_off", k=3, status="measured", directory="d", acceptance_length=3.3,
                      accepted_tokens=538, drafts=231, output_tokens=768)
    cell.draft_coverage = draft_coverage(cell.drafts, cell.accepted_tokens, cell.output_tokens)
    assert cell.draft_coverage == 1.0 and low_coverage(cell) is None  # (769 of 768: at most all of them)
    assert coverage_note(cell) == ("thinking_off K=3: draft coverage 100% (768 of 768 output tokens from steps that "
                                   "drafted)")
    assert draft_coverage(231, None, 768) is None  # SGLang counts verify calls, no accepted tokens: not known


@pytest.mark.timeout(120)
def test_the_collection_records_shows_and_notes_each_cells_coverage(tmp_path: Path) -> None:
    got = CliRunner().invoke(collect, [str(LLAMA), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
                                       "--output-len", "16", "-k", "1", "--out", str(tmp_path / "out"), "--json"])
    assert got.exit_code == 0, got.output
    (cell,) = json.loads(got.stdout[got.stdout.index("{"):])["cells"]
    assert cell["draft_coverage"] is not None and 0 < cell["draft_coverage"] <= 1
    assert json.loads((Path(cell["directory"]) / "cell.json").read_text())["draft_coverage"] == cell["draft_coverage"]
    (curve,) = (tmp_path / "out").glob("*.yaml")
    assert any(n.startswith("thinking_off K=1: draft coverage ") for n in load_curve(curve).notes)
    table = CliRunner().invoke(collect, [str(LLAMA), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
                                         "--output-len", "16", "-k", "1", "--out", str(tmp_path / "again")])
    assert table.exit_code == 0 and " coverage " in table.stdout, table.output
