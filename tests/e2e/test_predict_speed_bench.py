"""`bench/predict_speed.py --against REV` times the same point on this tree and on another revision in turn (the way
a speed change is judged on a shared machine) and says whether the two predict the same records."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_run_support import cli_env

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "predict_speed.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                reason="needs git and a checkout of the repository")


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(BENCH), "--workload", "toy", "--duration", "20", *args]
    return subprocess.run(argv, env=cli_env(tmp_path), capture_output=True, text=True, timeout=280, cwd=tmp_path)


@pytest.mark.timeout(300)
def test_against_a_revision_interleaves_both_trees_and_compares_their_records(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "--against", "HEAD", "--repeats", "2")
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    assert len(re.findall(r"^round \d/2: this tree [\d.]+ s, HEAD [\d.]+ s$", out, re.M)) == 2, out
    trees = dict(re.findall(r"^\s+(this tree|HEAD): min [\d.]+ {2}median [\d.]+ {2}\((\d+) requests", out, re.M))
    assert set(trees) == {"this tree", "HEAD"} and trees["this tree"] == trees["HEAD"] and int(trees["HEAD"]) > 0
    ratio = re.search(r"ratio HEAD / this tree: ([\d.]+)x at the minimum, ([\d.]+)x at the median; records and "
                      r"scrapes identical: (yes|no)", out)
    assert ratio is not None, out
    assert float(ratio.group(1)) > 0 and float(ratio.group(2)) > 0
    unchanged = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "src"]).returncode == 0
    if unchanged:  # the same source predicts the same records
        assert ratio.group(3) == "yes"


def test_a_revision_git_cannot_read_is_an_error_that_names_it(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "--against", "no-such-revision-x", "--repeats", "1")
    assert proc.returncode != 0
    assert "--against no-such-revision-x: git archive failed" in proc.stderr


@pytest.mark.timeout(300)
def test_matrix_times_predict_per_key_and_counts_a_refused_point_apart(tmp_path: Path) -> None:
    """`--matrix` read every JSON row as a summary: a key with one point predict refused (here a policy error, tp 3
    on an 8-GPU node) stopped the whole bench with a KeyError after minutes of work."""
    fixed = ROOT / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(fixed.read_text(encoding="utf-8").replace(
        "{ tp: 8, conc-list: [2, 4] }", "{ tp: 8, conc-list: [2] }\n      - { tp: 3, conc-list: [2] }"),
        encoding="utf-8")
    argv = [sys.executable, str(BENCH), "--matrix", str(recipe), "--max-requests", "3", "--processes", "1",
            "--traces", ""]
    proc = subprocess.run(argv, env=cli_env(tmp_path), capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert re.search(r"^run-sim-fixed: 1 points \(1 refused\), [\d,]+ virtual s measured, [\d.]+ s CPU", proc.stdout,
                     re.M), proc.stdout
    assert re.search(r"^total: 1 keys, 1 points, ", proc.stdout, re.M), proc.stdout
    # predict exits 1 for a partial prediction (the refusal is counted above, not a failure of the key)
    assert "failed:" not in proc.stdout, proc.stdout
