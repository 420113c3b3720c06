"""`results export` / `results import` on real runs: InferenceX's row fields, several runs in one export, what an
InferenceX export publishes, and imported rows that export again as they came.

Two runs of one tiny recipe on the simulator in virtual time go into one store (a module fixture: a few seconds).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_run_support import cli_here

from llmsweep.results.store import Store

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

RUN_RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run"


def _cli(*args: str | Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = cli_here(args)
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
    rows = _export(store, "inferencex", tmp_path / "ix.json", "--run", first, "--include-unpublished")
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


@pytest.mark.parametrize("fmt", ["json", "inferencex"])
def test_an_export_of_several_runs_imports_as_those_runs(two_runs: tuple[Path, list[str]], tmp_path: Path,
                                                         fmt: str) -> None:
    store, ids = two_runs
    path = tmp_path / f"all.{fmt}.json"
    _export(store, fmt, path, *(["--include-unpublished"] if fmt == "inferencex" else []))  # the same jobs twice
    fresh = tmp_path / "fresh.sqlite"
    out = _cli("results", "import", path, "--store", fresh).stdout
    assert "imported 4 results" in out and all(i in out for i in ids)
    runs = json.loads(_cli("results", "runs", "--json", "--store", fresh).stdout)
    assert sorted(r["run_id"] for r in runs) == sorted(ids) and [r["results"] for r in runs] == [2, 2]
    listed = json.loads(_cli("results", "list", "--all", "--json", "--store", fresh).stdout)
    assert sorted(p["run_id"] for p in listed) == sorted(ids * 2)
    again = _cli("results", "import", path, "--store", fresh).stdout  # importing again replaces, never doubles
    assert "imported 4 results" in again
    assert len(json.loads(_cli("results", "list", "--all", "--json", "--store", fresh).stdout)) == 4


def test_an_export_imported_into_the_store_it_came_from_never_replaces_its_runs(
        two_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    shared, ids = two_runs
    store = tmp_path / "store.sqlite"
    shutil.copyfile(shared, store)  # the module's store serves the other tests as it is
    path = tmp_path / "all.json"
    _export(store, "json", path)
    before = json.loads(_cli("results", "list", "--all", "--json", "--store", store).stdout)
    out = _cli("results", "import", path, "--store", store).stdout
    runs = {r["run_id"]: r for r in json.loads(_cli("results", "runs", "--json", "--store", store).stdout)}
    copies = [rid for rid in runs if rid.startswith("import:all-")]
    assert sorted(c.rsplit(":", 1)[1] for c in copies) == sorted(ids) and all(c in out for c in copies)
    assert all(runs[i]["origin"] == "llmsweep" for i in ids)
    after = json.loads(_cli("results", "list", "--all", "--json", "--store", store).stdout)
    assert [p for p in after if p["run_id"] in ids] == before  # the runs of ours are as they were


def test_an_inferencex_export_publishes_only_valid_measured_points(two_runs: tuple[Path, list[str]],
                                                                    tmp_path: Path) -> None:
    shared, _ = two_runs
    store = tmp_path / "store.sqlite"
    shutil.copyfile(shared, store)
    # A published InferenceX row (measured, valid) joins the two simulated runs.
    measured = {"hw": "b200", "conc": 64, "image": "vllm/vllm-openai:v0.11.0", "model": "deepseek-ai/DeepSeek-R1",
                "infmax_model_prefix": "dsr1", "framework": "vllm", "precision": "fp4", "spec_decoding": "none",
                "disagg": False, "isl": 1024, "osl": 1024, "tp": 4, "ep": 4, "dp_attention": "false",
                "tput_per_gpu": 5000.0, "median_ttft": 0.2, "num_requests_total": 640, "num_requests_successful": 640}
    (tmp_path / "agg_bmk.json").write_text(json.dumps([measured]))
    _cli("results", "import", tmp_path / "agg_bmk.json", "--store", store)

    proc = _cli("results", "export", "--format", "inferencex", "--store", store)
    rows = json.loads(proc.stdout)
    assert [r["hw"] for r in rows] == ["b200"] and "benchmark_outcome" not in rows[0] and "source" not in rows[0]
    assert "left out 4 points" in proc.stderr and "4 simulated" in proc.stderr

    every = json.loads(_cli("results", "export", "--format", "inferencex", "--include-unpublished", "--store",
                            store).stdout)
    assert len(every) == 5
    simulated = [r for r in every if r["hw"] != "b200"]
    assert all(r["benchmark_outcome"]["status"] == "failed" and r["source"] == "simulated" for r in simulated)
    # Imported back, a row marked failed is not a valid point; its source is kept.
    (tmp_path / "every.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "llmsweep"}
                                                     for r in simulated]))
    fresh = tmp_path / "fresh.sqlite"
    _cli("results", "import", tmp_path / "every.json", "--store", fresh)
    back = json.loads(_cli("results", "list", "--all", "--json", "--store", fresh).stdout)
    assert {(p["source"], p["verdict"]) for p in back} == {("simulated", "invalid")}


def test_an_imported_multinode_row_exports_again_as_it_was_published(tmp_path: Path) -> None:
    row = {"hw": "gb200-multinode", "conc": 256, "image": "nvcr.io#nvidia/ai-dynamo/sglang-runtime:0.6.1",
           "model": "deepseek-ai/DeepSeek-R1", "infmax_model_prefix": "dsr1", "framework": "dynamo-sglang",
           "precision": "fp4", "spec_decoding": "none", "disagg": True, "isl": 8192, "osl": 1024,
           "is_multinode": True, "num_prefill_gpu": 8, "num_decode_gpu": 16,
           **{f"{role}_{k}": v for role, tp in (("prefill", 4), ("decode", 16)) for k, v in
              (("tp", tp), ("pp", 1), ("dcp_size", 1), ("pcp_size", 1), ("ep", tp), ("dp_attention", True),
               ("num_workers", 2 if role == "prefill" else 1))},
           "tput_per_gpu": 2400.0, "output_tput_per_gpu": 1800.0, "input_tput_per_gpu": 7200.0,
           "median_ttft": 0.9, "p90_ttft": 1.4, "median_intvty": 40.0,
           "num_requests_total": 2560, "num_requests_successful": 2560,
           "power_metric_schema_version": 2, "power_valid": 1, "total_gpu_energy_j": 1.5e6,
           "avg_total_gpu_power_w": 24000.0, "avg_power_w": 1000.0, "joules_per_output_token": 0.5,
           "prefill_gpu_energy_j": 4.0e5, "decode_gpu_energy_j": 1.1e6, "prefill_avg_power_w": 800.0,
           "decode_avg_power_w": 1100.0, "prefill_joules_per_input_token": 0.02,
           "decode_joules_per_output_token": 0.45}
    (tmp_path / "agg_bmk.json").write_text(json.dumps([row]))
    store = tmp_path / "store.sqlite"
    _cli("results", "import", tmp_path / "agg_bmk.json", "--store", store)
    (listed,) = json.loads(_cli("results", "list", "--all", "--json", "--store", store).stdout)
    assert listed["gpus"] == 24  # 8 prefill + 16 decode GPUs, not tp 1
    assert listed["output_tput_per_gpu"] == 1800.0 * 16 / 24  # llmsweep's meaning: every GPU of the deployment

    (again,) = _export(store, "inferencex", tmp_path / "again.json")
    assert {k: v for k, v in again.items() if k != "llmsweep"} == row
    assert again["llmsweep"]["origin"] == "inferencex"
    # ... and that export imports and exports once more, unchanged.
    fresh = tmp_path / "fresh.sqlite"
    _cli("results", "import", tmp_path / "again.json", "--store", fresh)
    (third,) = _export(fresh, "inferencex", tmp_path / "third.json")
    assert {k: v for k, v in third.items() if k != "llmsweep"} == row


def test_a_simulated_disaggregated_run_exports_each_roles_modelled_power(tmp_path: Path) -> None:
    """The simulator models every worker's power (`llmsweep run` in virtual time, 2 prefill + 1 decode worker of TP8):
    the InferenceX row of each point carries its roles' energy, watts per GPU and J per input (prefill) / output
    (decode) token as the summary recorded them, says the power was simulated, and leaves the row out of what
    InferenceX publishes (it is no measurement). A run that modelled no power exports no power field at all."""
    store = tmp_path / "store.sqlite"
    _cli("run", RUN_RECIPES / "disagg-sim.yaml", "--out", tmp_path / "out", "--store", store, "--no-report")
    assert _export(store, "inferencex", tmp_path / "published.json") == []
    rows = _export(store, "inferencex", tmp_path / "ix.json", "--include-unpublished")
    with Store(store, readonly=True) as st:
        summaries = {p.job_id: p.summary for p in st.results()}
    assert len(rows) == 2
    for row in rows:
        summary = summaries[row["llmsweep"]["job_id"]]
        assert summary is not None and summary.power is not None and summary.power.roles is not None
        prefill, decode = summary.power.roles["prefill"], summary.power.roles["decode"]
        assert row["is_multinode"] and (row["num_prefill_gpu"], row["num_decode_gpu"]) == (16, 8)
        assert row["power_valid"] == 1 and row["source"] == "simulated"
        assert row["llmsweep"]["power"]["source"] == "simulated"  # the run's word: modelled, not measured
        assert row["prefill_gpu_energy_j"] == pytest.approx(prefill.energy_j, abs=1e-3)
        assert row["decode_gpu_energy_j"] == pytest.approx(decode.energy_j, abs=1e-3)
        assert row["prefill_gpu_energy_j"] + row["decode_gpu_energy_j"] == pytest.approx(row["total_gpu_energy_j"])
        assert row["prefill_avg_power_w"] == pytest.approx(prefill.avg_power_w, abs=1e-3)
        assert row["decode_avg_power_w"] == pytest.approx(decode.avg_power_w, abs=1e-3)
        assert row["prefill_joules_per_input_token"] == pytest.approx(prefill.joules_per_input_token, abs=1e-6)
        assert row["decode_joules_per_output_token"] == pytest.approx(decode.joules_per_output_token, abs=1e-6)
        assert "prefill_joules_per_output_token" not in row and "decode_joules_per_input_token" not in row

    off = tmp_path / "off.sqlite"
    _cli("run", RUN_RECIPES / "disagg-sim.yaml", "--out", tmp_path / "off", "--store", off, "--no-report",
         "--power-backend", "off")
    for row in _export(off, "inferencex", tmp_path / "off.json", "--include-unpublished"):
        # the 0 verdict InferenceX gives a row without samples, and no figure
        assert (row["power_valid"], row["power_metric_schema_version"]) == (0, 2), row
        assert not [k for k in row if ("power" in k or "energy" in k or "joules" in k)
                    and k not in ("power_valid", "power_metric_schema_version")], row
        # no power, and the assumed cost, which needs none, kept with its price
        assert row["llmsweep"]["power"]["source"] is None and row["llmsweep"]["power"]["tokens_per_joule"] is None
        assert row["llmsweep"]["power"]["cost"]["usd_per_gpu_hour"] > 0, row["llmsweep"]


def test_an_export_that_fails_while_writing_leaves_the_file_it_would_replace(
        two_runs: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--out FILE --force` wrote FILE in place: a write that failed part way (a full disk, a kill; here a character
    UTF-8 cannot hold) left the earlier export truncated. It is written whole or not at all."""
    from support.cli import run_main

    from llmsweep.results import interchange

    store, (first, _) = two_runs
    out = tmp_path / "ix.json"
    _cli("results", "export", "--format", "inferencex", "--out", out, "--store", store, "--run", first,
         "--include-unpublished")
    before = out.read_bytes()
    real = interchange.export_points
    monkeypatch.setattr(interchange, "export_points", lambda *a, **kw: real(*a, **kw) + "\ud800")
    with pytest.raises(UnicodeEncodeError):  # (the stand-in for a write that fails part way)
        run_main(capsys, "results", "export", "--format", "inferencex", "--out", out, "--store", store, "--run", first,
                 "--include-unpublished", "--force")
    assert out.read_bytes() == before and not list(tmp_path.glob("*.tmp"))
