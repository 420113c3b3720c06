"""Conformance: llmsweep expands InferenceX's own inputs into exactly the jobs InferenceX's generator emits.

Compared as multisets of entry dicts (order may differ, every key and value must match).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from llmsweep.catalog.fleet import load_fleet
from llmsweep.plan import EvalOptions, full_sweep, test_config
from llmsweep.spec import load_recipes

REPO = Path(__file__).resolve().parents[2]
MODES = {
    "amd-master.full-sweep.json": ([], EvalOptions()),
    "amd-master.full-sweep.evals-only.json": (["--evals-only"], EvalOptions(evals_only=True)),
    "amd-master.full-sweep.all-evals.json": (["--all-evals"], EvalOptions(all_evals=True)),
}


def multiset(entries: list[dict]) -> Counter[str]:
    return Counter(json.dumps(e, sort_keys=True) for e in entries)


@pytest.fixture(scope="module")
def inferencex(shared_dir: Path) -> Path:
    return shared_dir / "reference" / "inferencex"


@pytest.mark.parametrize("expected_name", list(MODES))
def test_library_full_sweep_equals_inferencex(inferencex: Path, expected_name: str) -> None:
    recipes = load_recipes([inferencex / "amd-master.yaml"]).recipes
    jobs = full_sweep(recipes, load_fleet(inferencex / "runners.yaml"), MODES[expected_name][1])
    expected = json.loads((inferencex / "expected" / expected_name).read_text())
    got = [j.matrix_entry() for j in jobs]
    assert len(got) == len(expected)
    assert multiset(got) == multiset(expected)
    assert len({j.id for j in jobs}) == len(jobs)


@pytest.mark.parametrize("expected_name", list(MODES))
def test_cli_full_sweep_equals_inferencex(inferencex: Path, expected_name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "llmsweep.cli.main", "matrix", "full-sweep", "--config-files",
         str(inferencex / "amd-master.yaml"), "--runner-config", str(inferencex / "runners.yaml"),
         *MODES[expected_name][0]],
        capture_output=True, text=True, cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    expected = json.loads((inferencex / "expected" / expected_name).read_text())
    assert multiset(json.loads(out.stdout)) == multiset(expected)
    # and identical as text: the same rows in the same order, each with its keys in InferenceX's order
    assert [json.dumps(e) for e in json.loads(out.stdout)] == [json.dumps(e) for e in expected]


def test_seed_master_entry_test_config_equals_inferencex(inferencex: Path) -> None:
    recipes = load_recipes([inferencex / "seed-recipe.master-entry.yaml"]).recipes
    jobs = test_config(recipes, ["qwen3.5-fp8-mi300x-sglang-agentic-mtp"], load_fleet(inferencex / "runners.yaml"))
    expected = json.loads((inferencex / "expected" / "seed-recipe.test-config.json").read_text())
    assert multiset([j.matrix_entry() for j in jobs]) == multiset(expected)


def test_seed_recipe_with_serve_yields_the_same_nine_jobs(inferencex: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "llmsweep.cli.main", "matrix", "test-config", "--config-keys",
         "qwen3.5-fp8-mi300x-sglang-agentic-mtp"],
        capture_output=True, text=True, cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    expected = json.loads((inferencex / "expected" / "seed-recipe.test-config.json").read_text())
    assert len(json.loads(out.stdout)) == 9
    assert multiset(json.loads(out.stdout)) == multiset(expected)


def test_seed_recipe_master_fields_match_the_reference_entry(inferencex: Path) -> None:
    ours = load_recipes([REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"]).recipes
    ref = load_recipes([inferencex / "seed-recipe.master-entry.yaml"]).recipes
    key = "qwen3.5-fp8-mi300x-sglang-agentic-mtp"
    strip = {"serve", "workload"}
    assert ours[key].model_dump(exclude=strip) == ref[key].model_dump(exclude=strip)
