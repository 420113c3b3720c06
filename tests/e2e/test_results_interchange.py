"""`results export` / `results import` on real runs: InferenceX's row fields, several runs in one export, what an
InferenceX export publishes, and imported rows that export again as they came.

Two runs of one tiny recipe on the simulator in virtual time go into one store (a module fixture: a few seconds).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmsweep.results.store import Store

RUN_RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run"


def _cli(*args: str | Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=240)
    if ok:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store holding two runs of fixed-sim.yaml (the same job ids in each); their run ids."""
    root = tmp_path_factory.mktemp("two-runs")
    store = root / "store.sqlite"
    ids = []
    for name in ("one", "two"):
        doc = json.loads(_cli("run", RUN_RECIPES / "fixed-sim.yaml", "--out", root / name, "--store", store,
                              "--no-report", "--json").stdout)
        ids.append(doc["run_id"])
    return store, ids


def _export(store: Path, fmt: str, out: Path, *extra: str) -> Any:
    _cli("results", "export", "--format", fmt, "--out", out, "--store", store, *extra)
    return json.loads(out.read_text())


def test_inferencex_rows_spell_energy_and_dp_attention_as_inferencex_does(two_runs: tuple[Path, list[str]],
                                                                          tmp_path: Path) -> None:
    store, (first, _) = two_runs
    rows = _export(store, "inferencex", tmp_path / "ix.json", "--run", first)
    assert len(rows) == 2
    for row in rows:
        assert row["power_valid"] == 1 and row["total_gpu_energy_j"] > 0 and "gpu_energy_j" not in row
        assert row["dp_attention"] == "false"  # single node: the string process_result.py received
    # An export of an earlier llmsweep (`gpu_energy_j`) imports under InferenceX's name.
    legacy = [{**{k: v for k, v in r.items() if k != "total_gpu_energy_j"}, "gpu_energy_j": r["total_gpu_energy_j"]}
              for r in rows]
    (tmp_path / "legacy.json").write_text(json.dumps(legacy))
    fresh = tmp_path / "fresh.sqlite"
    _cli("results", "import", tmp_path / "legacy.json", "--store", fresh)
    with Store(fresh, readonly=True) as st:
        imported = [p.imported for p in st.results()]
    assert sorted(r["total_gpu_energy_j"] for r in imported) == sorted(r["total_gpu_energy_j"] for r in rows)
    assert not any("gpu_energy_j" in r for r in imported)
