"""`compare`'s noise bands on real runs on the simulator in virtual time (seconds): bands-base.yaml against
bands-pr.yaml (the same point, every prompt prefilled in two chunks), each run once and with `--repeats 6`.

A band is checked against what a hand computation from the runs' own summaries gives.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from test_run_support import cli_exits

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "results"
T975_10 = 2.228  # the two-sided 95 % t quantile at 10 degrees of freedom (6 + 6 repeats)


_cli = cli_exits


def _compare(*args: str | Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_cli("compare", *args, "--json").stdout)
    return doc


def _delta(doc: dict[str, Any], metric: str) -> dict[str, Any]:
    (point,) = doc["matched"]
    found: dict[str, Any] = {d["metric"]: d for d in point["deltas"]}[metric]
    return found


def _p90(run: Path, metric: str) -> list[float]:
    """Each repeat's P90 of a latency (`ttft`, `e2el`; s), as its summary.json says it."""
    return [json.loads((job / "summary.json").read_text())["latency"][metric]["p90"]
            for job in sorted((run / "jobs").iterdir())]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders: a1/b1 once, a6/b6 with six repeats (a repeat k ≥ 2 draws its own sample; the first is the single
    run's sample again)."""
    tmp = tmp_path_factory.mktemp("bands")
    out = {}
    for name, recipe, repeats in (("a1", "bands-base.yaml", 1), ("b1", "bands-pr.yaml", 1),
                                  ("a6", "bands-base.yaml", 6), ("b6", "bands-pr.yaml", 6)):
        out[name] = tmp / name
        _cli("run", RECIPES / recipe, "--out", out[name], "--repeats", str(repeats), "--store", tmp / "store.sqlite",
             "--no-report")
    return out


def test_more_repeats_narrow_the_band_below_one_runs_sampling_noise(runs: dict[str, Path]) -> None:
    """The between-run band of two means of 6 runs was floored at one run's sampling noise (the within-run band of a
    single run per side): √6 too wide, so repeats never narrowed it below what one run gives (in one such run, a
    P90 TTFT every one of B's six repeats put above every one of A's was `within noise`). P90 E2E latency: a
    statistic whose bootstrap spread holds steady whatever the result ids seed it with."""
    a, b = _p90(runs["a6"], "e2el"), _p90(runs["b6"], "e2el")
    assert len(a) == len(b) == 6 and min(b) > max(a)  # the change moved every repeat: no noise could do that

    single = _delta(_compare(runs["a1"], runs["b1"], "--no-history"), "p90_e2el")
    assert single["band"]["kind"] == "within-run"
    six = _delta(_compare(runs["a6"], runs["b6"], "--no-history"), "p90_e2el")
    assert six["band"]["kind"] == "between-run" and six["band"]["runs"] == 12
    assert six["delta"] == pytest.approx(statistics.mean(b) - statistics.mean(a))

    ss = sum((v - statistics.mean(a)) ** 2 for v in a) + sum((v - statistics.mean(b)) ** 2 for v in b)
    by_hand = T975_10 * math.sqrt(ss / 10 * (1 / 6 + 1 / 6))  # the pooled two-sample t band
    assert six["band"]["half_width"] >= by_hand - 1e-12  # never narrower than the repeats' own spread says
    # one run's sampling noise over √6 (≈ 0.41 of it; the bootstrap of another result id, a few % either way)
    assert six["band"]["half_width"] < 0.7 * single["band"]["half_width"]
    assert six["verdict"] == "regression"


def test_an_imported_mean_of_repeats_counts_as_its_repeats(runs: dict[str, Path], tmp_path: Path) -> None:
    """A6's InferenceX export is one row per point, the mean of its 6 repeats with their sd (`llmsweep.repeats`).
    Imported and compared, it counted as one run and its sd was thrown away: against B's 6 repeats its band was B's
    spread alone at 5 degrees of freedom and 1/1 + 1/6 (±8.4 tok/s/GPU where the folder gives ±4.1), and against
    one run of B there was no between-run band at all. It is 6 runs now, its spread in the pooled variance."""
    run_id = json.loads((runs["a6"] / "run.json").read_text())["run_id"]
    store = runs["a6"].parent / "store.sqlite"
    exported = tmp_path / "a6.json"
    _cli("results", "export", "--run", run_id, "--format", "inferencex", "--include-unpublished", "--store", store,
         "--out", exported)
    (row,) = json.loads(exported.read_text())
    assert row["llmsweep"]["repeats"]["n"] == 6
    imported = tmp_path / "imported.sqlite"
    _cli("results", "import", exported, "--store", imported)

    a, b = _p90(runs["a6"], "ttft"), _p90(runs["b6"], "ttft")
    doc = _compare(run_id, runs["b6"], "--store", imported)
    (point,) = doc["matched"]
    assert point["a"][0]["origin"] == "llmsweep-export" and point["runs"] == {"a": 6, "b": 6}
    assert any("is the mean of 6 repeats" in n and "counted as that many runs" in n for n in doc["notes"])
    ttft = _delta(doc, "p90_ttft")
    ss = sum((v - statistics.mean(a)) ** 2 for v in a) + sum((v - statistics.mean(b)) ** 2 for v in b)
    assert ttft["band"] == {"half_width": pytest.approx(T975_10 * math.sqrt(ss / 10 * (1 / 6 + 1 / 6))),
                            "kind": "between-run", "runs": 12}  # no records imported: no within-run floor
    assert ttft["a"] == pytest.approx(statistics.mean(a)) and ttft["verdict"] == "regression"

    one = _delta(_compare(run_id, runs["b1"], "--store", imported), "p90_ttft")  # B once: A's repeats give the band
    sd_a = statistics.stdev(a)
    assert one["band"] == {"half_width": pytest.approx(2.571 * sd_a * math.sqrt(1 / 6 + 1)), "kind": "between-run",
                           "runs": 7}
    table = _cli("compare", run_id, runs["b6"], "--store", imported).stdout
    assert "(runs A 6, B 6, history 0)" in " ".join(table.split())  # the title as the terminal wraps it
    _cli("compare", run_id, runs["b6"], "--store", imported, "--markdown", tmp_path / "cmp.md")
    md = (tmp_path / "cmp.md").read_text()
    assert "| 6/6 |" in md, md  # the Markdown's runs column counts them alike (it said 1/6)


def test_records_packed_as_a_slice_give_no_within_run_band(runs: dict[str, Path], tmp_path: Path) -> None:
    """Evidence packed for a repository keeps a job's first records (20 of hundreds): compare bootstrapped the slice
    as if it were the run, a band of 20 requests' noise beside figures measured over 256 (and an error ratio of
    the slice's, ±0 when its first requests happened not to fail). Such a result has no within-run band now, and a
    note names it; the summary's figures stand."""
    packed = tmp_path / "b1-packed"
    shutil.copytree(runs["b1"], packed)
    (job,) = (packed / "jobs").iterdir()
    records = job / "records.jsonl"
    records.write_text("".join(records.read_text().splitlines(keepends=True)[:22]))  # 2 warm-ups, 20 requests

    whole = _compare(runs["a1"], runs["b1"], "--no-history")
    sliced = _compare(runs["a1"], packed, "--no-history")
    for metric in ("tput_per_gpu", "p90_e2el", "error_ratio"):
        assert _delta(whole, metric)["band"]["kind"] == "within-run"
        assert _delta(sliced, metric)["band"] is None and _delta(sliced, metric)["verdict"] == "unverified"
        assert _delta(sliced, metric)["b"] == _delta(whole, metric)["b"]  # the summary's figures, unchanged
    run_id = json.loads((packed / "run.json").read_text())["run_id"]
    assert any(f"{run_id}/{job.name}" in n and "no within-run band" in n for n in sliced["notes"]), sliced["notes"]
    assert not any("no within-run band" in n for n in whole["notes"])
