"""`predict`'s summaries are those of `run` in virtual time: the same point earns the same verdict from both. A short
agentic window is `smoke` (below the 900 s minimum); predict had judged it `invalid`, its coverage gate counting the
replay's whole idle tail, since the provenance it summarised with lacked the workload block that names AgentX's
idle cap."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_env, cli_here, run_here


def test_predict_and_run_judge_a_short_agentic_point_alike(tmp_path: Path) -> None:
    text = (RECIPES / "agentic-sim.yaml").read_text()
    text = text.replace("conc-list: [8] }\n      - { tp: 8, spec-decoding: mtp, kv-offloading: dram, "
                        "kv-offload-backend: { name: hicache }, conc-list: [8] }", "conc-list: [2] }")
    text = text.replace("duration: 8", "duration: 30")
    recipe = tmp_path / "short.yaml"
    recipe.write_text(text)
    env = cli_env(tmp_path)
    predicted = cli_here(["predict", recipe, "--json", "--processes", "1"], env)
    assert predicted.returncode == 0, predicted.stderr
    ran = run_here([recipe, "--out", tmp_path / "run", "--no-report", "--json"], env)
    assert ran.returncode == 0, ran.stderr
    p = {r["job"]: r["summary"]["validity"] for r in json.loads(predicted.stdout)}
    r = {row["job"]: row["verdict"] for row in json.loads(ran.stdout)["jobs"]}
    assert p.keys() == r.keys() and len(r) == 1, (p, r)
    for job, verdict in r.items():
        assert verdict == "smoke" and p[job]["verdict"] == verdict, (p[job], verdict)
