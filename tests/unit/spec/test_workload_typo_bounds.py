"""A typo in an agentic recipe's size — one zero too many — is refused by `validate` at its line, with the fix, before
anything runs: `traces.synthetic.traces` (every process that replays or predicts the corpus builds it whole: a probe
of 100,000 traces held 10 GB and swapped the machine) and `duration` (every point holds its GPUs that long)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_main

from llmsweep.spec import loads_recipes
from llmsweep.spec.workload import ResolvedWorkload

REPO = Path(__file__).resolve().parents[3]
AGENTIC = (REPO / "tests" / "data" / "recipes" / "run" / "agentic-sim.yaml").read_text(encoding="utf-8")
SYNTH = "synthetic: { traces: 8, seed: 7, max-isl: 4000, max-osl: 200 }"
DURATION = "    duration: 8\n"
MOST_TRACES, LONGEST_S = 1024, 14_400  # the limits a user reads in the messages


def test_ten_times_the_most_synthetic_traces_is_refused_at_its_line_with_the_fix() -> None:
    assert SYNTH in AGENTIC
    text = AGENTIC.replace(SYNTH, SYNTH.replace("traces: 8,", f"traces: {MOST_TRACES}0,"))
    (finding,) = loads_recipes(text, "r.yaml").errors
    assert finding.rule == "schema.range" and finding.path == "run-sim-agentic.workload.traces.synthetic.traces"
    assert finding.file == "r.yaml" and finding.line is not None
    assert f"traces: {MOST_TRACES}0" in text.splitlines()[finding.line - 1]
    assert "10,240 synthetic traces" in finding.message and "above the limit of 1,024" in finding.message
    assert finding.fix and "at most 1,024" in finding.fix and "llmsweep traces synth --num-traces" in finding.fix
    at_limit = AGENTIC.replace(SYNTH, SYNTH.replace("traces: 8,", f"traces: {MOST_TRACES},"))
    assert not loads_recipes(at_limit, "r.yaml").errors


def test_a_duration_with_a_zero_too_many_is_refused_at_its_line_with_the_fix() -> None:
    assert DURATION in AGENTIC
    text = AGENTIC.replace(DURATION, "    duration: 36000\n")
    (finding,) = loads_recipes(text, "r.yaml").errors
    assert finding.rule == "schema.range" and finding.path == "run-sim-agentic.workload.duration"
    assert finding.line is not None and "duration: 36000" in text.splitlines()[finding.line - 1]
    assert "10.0 h per point" in finding.message and "14,400 s" in finding.message
    assert finding.fix and "`duration: 3600`" in finding.fix
    for fine in (3600, LONGEST_S):
        assert not loads_recipes(AGENTIC.replace(DURATION, f"    duration: {fine}\n"), "r.yaml").errors


def test_validate_exits_2_naming_the_file_line_field_and_fix(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "typo.yaml"
    recipe.write_text(AGENTIC.replace(SYNTH, SYNTH.replace("traces: 8,", "traces: 80000,"))
                      .replace(DURATION, "    duration: 36000\n"))
    code, out, err = run_main(capsys, "validate", recipe)
    said = out + err
    assert code == 2 and "Traceback" not in said
    lines = recipe.read_text().splitlines()
    trace_line = next(i for i, line in enumerate(lines, 1) if "traces: 80000" in line)
    duration_line = next(i for i, line in enumerate(lines, 1) if "duration: 36000" in line)
    assert (f"{recipe}:{trace_line}: error [schema.range] run-sim-agentic.workload.traces.synthetic.traces: "
            in said)
    assert f"{recipe}:{duration_line}: error [schema.range] run-sim-agentic.workload.duration: " in said
    assert "fix: use at most 1,024" in said and "fix: use at most 14,400" in said


def test_a_job_json_written_with_more_traces_still_reads() -> None:
    """The bounds are the recipe's: a job folder an earlier release planned with a larger corpus (or a longer
    window) still loads, for `summarize`, `--resume` and the report."""
    job = ResolvedWorkload.model_validate({
        "scenario": "agentic-coding", "tokenizer": "t", "served-model-name": "m", "use-chat-template": False,
        "traces": {"synthetic": {"traces": 10 * MOST_TRACES}}, "duration": 10 * LONGEST_S})
    assert job.traces is not None and job.traces.synthetic is not None
    assert job.traces.synthetic.traces == 10 * MOST_TRACES and job.duration == 10 * LONGEST_S


def test_discover_refuses_a_duration_its_stage_recipes_could_not_carry(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`discover --duration 20000` wrote it into every stage recipe, then failed on their lines in a generated file:
    the option is refused as it is parsed, with the recipe's limit."""
    recipe = REPO / "tests" / "data" / "recipes" / "discover" / "cliff-sim.yaml"
    code, _, err = run_main(capsys, "discover", recipe, "--simulate", "--duration", "20000", "--out", tmp_path / "d")
    assert code == 2 and f"20000.0 is not in the range 0<x<={LONGEST_S}" in err
    assert not (tmp_path / "d").exists()
