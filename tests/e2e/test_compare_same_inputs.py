"""`compare` of two runs of identical inputs on the simulator in virtual time: the core is deterministic, so B's
figures are A's again — said, never banded as if they were two samples.

Real runs on the simulator: fixed-sim.yaml twice (two concurrencies, four prompts each; a second or two each), and
once with the workload's seed 7 (other prompts: other inputs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_exits

_cli = cli_exits


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("same-inputs")
    out = {}
    seeded = tmp / "fixed-sim-seed7.yaml"
    seeded.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("num-warmups: 1", "num-warmups: 1\n    seed: 7"))
    for name, recipe in (("a", RECIPES / "fixed-sim.yaml"), ("b", RECIPES / "fixed-sim.yaml"), ("seed7", seeded)):
        out[name] = tmp / name
        _cli("run", recipe, "--out", out[name], "--no-report", "--store", tmp / "store.sqlite")
    return out


def test_two_virtual_time_runs_of_identical_inputs_are_said_to_be_equal_by_construction(runs: dict[str, Path]) -> None:
    """`compare a b` of one recipe run twice in virtual time printed `+0.0 ±10.3 within-run · within noise` for every
    metric: a noise band for two samples that are one, and a `no change` that was never measured. Now each point says
    the sides ran the same inputs (their recorded reuse keys are equal), with no band, and the verdict says why."""
    doc: dict[str, Any] = json.loads(_cli("compare", "--baseline", runs["a"], runs["b"], "--no-history",
                                          "--json").stdout)
    assert len(doc["matched"]) == 2
    for m in doc["matched"]:
        assert m["same_inputs"] is True
        assert {d["verdict"] for d in m["deltas"]} == {"same inputs"}
        assert all(d["band"] is None and d["delta"] == 0 for d in m["deltas"])
    assert [(p["verdict"], p["called"], p["why"]) for p in doc["verdict"]["points"]] == [
        ("no change", False, "A and B ran the same inputs on the simulator in virtual time: equal by construction")] * 2
    (note,) = [n for n in doc["notes"] if "the same inputs" in n]
    assert "2 compared points" in note and "deterministic" in note, note
    assert not any(n.startswith("no repeats") for n in doc["notes"])  # no band was wanted: none is missing
    table = _cli("compare", runs["a"], runs["b"], "--no-history").stdout
    assert "same inputs" in table and "within-run" not in table
    # another seed draws other prompts: other inputs, compared as two samples
    other: dict[str, Any] = json.loads(_cli("compare", runs["a"], runs["seed7"], "--no-history", "--json").stdout)
    assert len(other["matched"]) == 2 and all(m["same_inputs"] is False for m in other["matched"])
    assert "same inputs" not in {d["verdict"] for m in other["matched"] for d in m["deltas"]}
