"""A policy error about a multi-node job refuses every part of it that runs: its concurrencies run as points with
ids of their own (`<id>-conc<N>`), and a slice of it (the concurrencies a change added) too, while the finding names
the job. Both used to run, and come out `valid`, under the job's label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.cli.main import main
from llmsweep.plan import jobs_from_files
from llmsweep.plan.slices import slice_concurrencies

SPEC_STEPS_ROW = """\
mn-sim:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi355x-disagg
  precision: fp8
  framework: sglang-disagg
  multinode: true
  disagg: true
  kv-p2p-transfer: mori
  scenarios:
    fixed-seq-len:
    - isl: 256
      osl: 64
      search-space:
      - conc-list: [2, 4, 8]
        spec-decoding: mtp
        prefill: {num-worker: 2, tp: 8, ep: 8, dp-attn: true}
        decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false, additional-settings: ["DECODE_MTP_SIZE=2"]}
  serve:
    engine: { name: sim }
    spec-decoding: { method: mtp, num-steps: 3 }
  workload:
    num-prompts-per-conc: 4
    num-warmups: 1
"""



def _run(recipe: Path, out: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[Any]]:
    """`llmsweep run ... --json` as the console script runs it: (exit status, the table's rows)."""
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), *args, "--out", str(out), "--no-report", "--json"])
    return int(done.value.code or 0), json.loads(capsys.readouterr().out)["jobs"]


def test_every_point_of_a_refused_multinode_job_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "mn.yaml"
    recipe.write_text(SPEC_STEPS_ROW)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, rows = _run(recipe, tmp_path / "out", capsys)
    assert [(r["conc"], r["verdict"]) for r in rows] == [(2, "refused"), (4, "refused"), (8, "refused")]
    assert all("serve.spec-steps-row" in str(r["reason"]) for r in rows)
    assert code == 2  # a policy error refused jobs (README: "Malformed and hostile recipes")


def test_a_slice_is_refused_for_what_its_job_is_refused_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "mn.yaml"
    recipe.write_text(SPEC_STEPS_ROW)
    (job,) = jobs_from_files([recipe])
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    for concs in ([8], [4, 8]):  # one concurrency runs under the slice's id, two as its points
        sliced = slice_concurrencies(job, concs)
        code, rows = _run(recipe, tmp_path / f"out{len(concs)}", capsys, "--job", sliced.id)
        assert [(r["conc"], r["verdict"]) for r in rows] == [(c, "refused") for c in concs], rows
        assert all("serve.spec-steps-row" in str(r["reason"]) for r in rows)
        assert code == 2


def test_a_cap_refuses_only_the_points_above_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """grid.max-conc names the points of a multi-node job above the cap, not the job: its in-cap points run (naming
    the job, every point of it was refused once findings followed a job into its points)."""
    recipe = tmp_path / "mn.yaml"
    recipe.write_text(SPEC_STEPS_ROW.replace("        spec-decoding: mtp\n", "")
                      .replace(', additional-settings: ["DECODE_MTP_SIZE=2"]', "")
                      .replace("    spec-decoding: { method: mtp, num-steps: 3 }\n", "")
                      .replace("  workload:\n", "  policy: { max-conc: 4 }\n  workload:\n"))
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, rows = _run(recipe, tmp_path / "out", capsys)
    assert [(r["conc"], r["verdict"]) for r in rows] == [(2, "valid"), (4, "valid"), (8, "refused")], rows
    assert "grid.max-conc" in str(rows[2]["reason"]) and code == 1  # partly ran: 1, not 2 (nothing ran)


def test_a_multinode_job_that_is_not_disaggregated_is_refused_with_the_fix_validate_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`disagg: false` with prefill and decode pools: `validate` warns with a fix (set `disagg: true`, or plan it
    only), and `run` refused every point with the reason alone — the fix was in neither its table nor its summary of
    the refused jobs. Both now give the finding's one fix."""
    recipe = tmp_path / "mn.yaml"
    recipe.write_text(SPEC_STEPS_ROW.replace("        spec-decoding: mtp\n", "")
                      .replace(', additional-settings: ["DECODE_MTP_SIZE=2"]', "")
                      .replace("    spec-decoding: { method: mtp, num-steps: 3 }\n", "")
                      .replace("  disagg: true\n", "  disagg: false\n"))
    with pytest.raises(SystemExit) as done:
        main(["validate", str(recipe), "--json"])
    assert not done.value.code
    (finding,) = [f for f in json.loads(capsys.readouterr().out) if f["rule"] == "launch.multinode-not-disagg"]
    assert finding["fix"]
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, rows = _run(recipe, tmp_path / "out", capsys, "--simulate")
    assert [(r["conc"], r["verdict"]) for r in rows] == [(2, "refused"), (4, "refused"), (8, "refused")], rows
    for row in rows:
        assert f"{finding['message']} (fix: {finding['fix']})" in str(row["reason"]), row["reason"]
    assert code == 1
