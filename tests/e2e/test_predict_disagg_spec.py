"""`predict` of a disaggregated speculative row as an InferenceX master file writes it (no `serve` block): its
acceptance length is the simulator's estimate, labelled so as the aggregated points' are, at the draft steps the
row's decode worker runs (`DECODE_MTP_SIZE`), not the default K."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from test_run_support import RECIPES, cli_env, cli_here


def test_a_disaggregated_speculative_rows_acceptance_is_an_estimate_at_its_own_draft_steps(tmp_path: Path) -> None:
    doc = yaml.safe_load((RECIPES / "disagg-sim.yaml").read_text())
    (recipe,) = doc.values()
    del recipe["serve"]  # as a master file writes it: the simulator stands in for SGLang
    (entry,) = recipe["scenarios"]["fixed-seq-len"][0]["search-space"]
    entry.update({"spec-decoding": "mtp", "conc-list": [2]})
    entry["decode"]["additional-settings"] = ["DECODE_NODES=1", "DECODE_MTP_SIZE=2"]
    path = tmp_path / "mtp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = cli_here(["predict", path, "--max-requests", "4", "--processes", "1", "--json"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = json.loads(proc.stdout)
    acceptance = row["summary"]["provenance"]["acceptance"]
    assert acceptance["source"] == "estimate" and "K=2" in acceptance["basis"], acceptance
    assert row["conc"] == 2


def test_a_job_refused_by_policy_names_its_concurrency(tmp_path: Path, shared_dir: Path) -> None:
    """A policy refusal of a whole single-concurrency job said `"concurrency": null` and `refused <id>:`, where every
    other refusal of a point names it."""
    ref = shared_dir / "reference" / "inferencex"
    proc = cli_here(["predict", ref / "amd-master.yaml", "--runner-config", ref / "runners.yaml", "--traces",
                     "synthetic", "--config-keys", "dsv4-fp8-mi325x-vllm", "--processes", "1", "--json"],
                    cli_env(tmp_path))
    assert proc.returncode == 2, proc.stderr[-3000:]
    rows = json.loads(proc.stdout)
    assert rows and all("fleet.unknown-label" in r["refused"] for r in rows)
    assert all(r["conc"] is not None and f"_conc{r['conc']}_" in r["job"] for r in rows), rows
    assert all(f" conc {r['conc']}: policy error" in proc.stderr for r in rows)
