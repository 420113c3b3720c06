"""A Mooncake trace replayed from a recipe, planned and run by `llmsweep run`'s pipeline on the simulator."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from llmsweep.execute.pipeline import RunRequest, run_sweep

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "replay-sim.yaml"
ROWS = 12


def test_a_recipe_replays_a_mooncake_trace_on_the_simulator(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 100 * i, "input_length": 700 + 10 * i, "output_length": 6, "hash_ids": [0, 1 + i % 3]}
            for i in range(ROWS)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = tmp_path / "replay.yaml"
    recipe.write_text(RECIPE.read_text().replace("mooncake: TRACE", f"mooncake: {trace}"))
    events: list[str] = []

    outcome = run_sweep(RunRequest(files=[recipe], out=tmp_path / "out", store=tmp_path / "store.sqlite",
                                   live=True, report=False, settings={"stop_grace_s": 5}), event=events.append)

    (job,) = outcome.outcomes
    assert job.status == "valid", (job.reasons, events)  # a replay has no window minimum
    jdir = tmp_path / "out" / "jobs" / job.job_id
    assert json.loads((jdir / "job.json").read_text())["workload"]["scenario"] == "mooncake-replay"
    records = [json.loads(line) for line in (jdir / "records.jsonl").read_text().splitlines()]
    # Every row once, closed loop at the job's conc, prompts of the rows' exact lengths.
    assert sorted(r["input_tokens_expected"] for r in records) == [700 + 10 * i for i in range(ROWS)]
    assert {r["lane"] for r in records} == {0, 1, 2, 3}
    assert all(r["phase"] == "profiling" and r["api"] == "chat" for r in records)
    summary = json.loads((jdir / "summary.json").read_text())
    assert summary["requests"]["successful"] == ROWS
    assert summary["cache"]["theoretical_hit_rate"] > 0  # rows share their leading block
    # The corpus it replayed, as an agentic replay's summary names its own: the trace file's digest, which the
    # result's identity keeps (a Mooncake summary recorded none, so its identity named no corpus)
    digest = summary["provenance"]["workload"]["corpus_digest"]
    assert digest == "file-sha256:" + hashlib.sha256(trace.read_bytes()).hexdigest(), digest
    launch = summary["provenance"]["launch"]
    assert (launch["executor"], launch["launcher"]) == ("local", "local")
    assert any("conc 4 (mooncake-replay)" in e for e in events)
    # The store keeps it apart from agentic-coding points of the same recipe.
    from llmsweep.results.store import Store

    with Store(tmp_path / "store.sqlite") as store:
        (point,) = store.results(outcome.run_id)
    assert point.identity.scenario == "mooncake-replay"
    assert point.identity.corpus == digest[:len("file-sha256:") + 16]
