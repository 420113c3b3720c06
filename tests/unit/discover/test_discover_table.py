"""`llmsweep discover`'s grid of each arm is laid out as every table is (`cli.tables`): titled with the arm and
whether the grid is proposed, each concurrency whole in its cell and its reason wrapped at its spaces within the
terminal (it was a borderless, untitled rich table of its own); the rows are those `--json` gives
(`arms[].proposed`)."""

from __future__ import annotations

import itertools
import json

import pytest
from support.tables import as_terminal, fits, rows, shown

from llmsweep.discover.model import ArmProposal, Discovery, GridPoint

WHY = ("first step that separates from conc {prev}: Throughput per GPU +43.0% (noise ±7.2%), P90 E2E-normalised "
       "interactivity -7.5% (noise ±5.1%) (interpolated between measured points)")


def _discovery(**extra: object) -> Discovery:
    concs = [1, 2, 48, 1024]
    grid = [GridPoint(conc=1, why="the arm's first concurrency (the recipe's)"),
            *(GridPoint(conc=c, why=WHY.format(prev=p)) for p, c in itertools.pairwise(concs))]
    arm = ArmProposal(arm="disc-sim:scenarios.fixed-seq-len[0].search-space[0]", recipe_key="disc-sim",
                      path="scenarios.fixed-seq-len[0].search-space[0]", label="fixed-seq-len tp=8",
                      original=[1, 1024], proposed=grid, min_step=1, knee=None, noise=[], curve=[])
    return Discovery.model_validate({"recipe_file": "disc.yaml", "simulate": True, "repeats": 2, "ladder_top": 1024,
                                     "runs": [], "arms": [arm.model_dump()], "points_measured": 4,
                                     "runs_measured": 8, "min_conc_step": 1, "max_conc": None, **extra})


@pytest.mark.parametrize("width", [60, 80, 120])
def test_each_arms_grid_is_a_titled_table_of_whole_concurrencies_and_their_reasons(
        width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.discover import _print

    result = _discovery()
    as_terminal(monkeypatch, width)
    _print(result)
    text = shown(capsys.readouterr().out)
    fits(text, width)
    assert "fixed-seq-len tp=8: proposed grid" in " ".join(text.split()), text
    # the rows --json gives: each concurrency whole in its cell, its reason every word of it, in order
    expected = json.loads(result.model_dump_json())["arms"][0]["proposed"]
    table = rows(text)
    assert [(" ".join(conc), " ".join(why)) for conc, why in table] == [
        (str(p["conc"]), p["why"]) for p in expected], text


def test_a_grid_that_is_not_proposed_says_so_in_its_title(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.discover import _print

    as_terminal(monkeypatch, 80)
    _print(_discovery(interrupted="ladder", min_conc_step=None))
    text = " ".join(shown(capsys.readouterr().out).split())
    assert "fixed-seq-len tp=8: grid from the runs so far (not proposed)" in text, text
    assert "proposed grid" not in text, text


def test_the_proposed_recipes_diff_is_printed_as_written_whatever_the_terminal(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The diff's lines are printed as proposed.diff holds them: rich wrapped a long `+` line at the terminal's width,
    and its continuation lost the `+` (a reader, or `patch`, took it for context)."""
    from llmsweep.cli.discover import _print

    patch = ("--- disc.yaml\n+++ proposed.yaml\n@@ -1,2 +1,2 @@\n-      conc-list: [1, 1024]\n"
             "+      conc-list: [" + ", ".join(str(c) for c in range(1, 60)) + "]\n")
    as_terminal(monkeypatch, 60)
    _print(_discovery(patch=patch))
    out = shown(capsys.readouterr().out)
    assert patch in out, out
