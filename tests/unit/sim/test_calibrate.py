"""Calibration recovers known efficiencies from records the simulator itself produced (closed loop)."""

from __future__ import annotations

import pytest

from llmsweep.errors import ResultError
from llmsweep.sim.calibrate import calibrate
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.predict import Predictor
from llmsweep.sim.synthetic import ChatWorkload


def test_calibration_recovers_the_efficiencies_that_produced_the_records() -> None:
    truth = {"mem": 0.55, "step_s": 0.003, "per_seq_s": 60e-6, "frontend_s": 0.025}
    measured = EngineConfig(model="llama-3.1-8b", hardware="h200", efficiency=truth)
    records: list[dict] = []
    runs = [(isl, conc) for isl in (1000, 6000) for conc in (1, 4, 16, 48)]
    for i, (isl, conc) in enumerate(runs):
        records += Predictor(build_core(measured), start_time=1000.0 * i).run(
            ChatWorkload(isl=isl, osl=200, seed=i), concurrency=conc, duration=40)
    fitted = calibrate(records, EngineConfig(model="llama-3.1-8b", hardware="h200"))
    eff = fitted.efficiency
    # client-side records only approximate the batch (context, mixed prefill steps): close, not exact
    assert eff.mem == pytest.approx(truth["mem"], rel=0.15)
    assert eff.step_s == pytest.approx(truth["step_s"], rel=0.35)
    assert eff.per_seq_s == pytest.approx(truth["per_seq_s"], rel=0.2)
    assert eff.frontend_s == pytest.approx(truth["frontend_s"], rel=0.15)
    assert fitted.r2 > 0.95
    default = EngineConfig(model="llama-3.1-8b", hardware="h200").efficiency_factors()
    assert abs(eff.mem - truth["mem"]) < abs(default.mem - truth["mem"])  # moved from the default towards truth


def test_too_few_records_say_what_is_needed() -> None:
    with pytest.raises(ResultError, match="at least 5"):
        calibrate([], EngineConfig())


def test_cli_calibrate_prints_factors_as_json(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from llmsweep.cli.sim import sim

    records: list[dict] = []
    for i, (isl, conc) in enumerate([(500, 1), (3000, 1), (500, 8), (3000, 8)]):
        records += Predictor(build_core(EngineConfig(model="llama-3.1-8b", hardware="h100")),
                             start_time=1000.0 * i).run(ChatWorkload(isl=isl, osl=64), concurrency=conc, duration=15)
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = CliRunner().invoke(sim, ["calibrate", str(path), "--model", "llama-3.1-8b", "--hardware", "h100", "--json"])
    assert out.exit_code == 0, out.output
    fitted = json.loads(out.output)
    assert fitted["efficiency"]["mem"] == pytest.approx(0.75, rel=0.1)
    assert fitted["samples"] == len(records)


@pytest.mark.parametrize(("line", "said"), [
    ("[1, 2]", "a JSON list, not a request record"),
    ('{"first_token_at": "soon", "end_at": 2.0, "chunk_times": [1.0, 1.5, 2.0]}', "first_token_at is 'soon'"),
    ('{"first_token_at": 1.0, "end_at": 2.0, "chunk_times": "1.0,1.5"}', "chunk_times is not a list"),
    ('{"first_token_at": 1.0, "end_at": 2.0, "prompt_tokens": "512"}', "prompt_tokens is '512'"),
])
def test_a_records_line_that_is_not_a_record_names_file_and_line_not_a_traceback(tmp_path, capsys, line: str,
                                                                                 said: str) -> None:
    """A records.jsonl line of another shape (hand-edited, another tool's file) crashed the fit with an
    AttributeError or TypeError; it is refused naming the file, the line and what is wrong."""
    from support.cli import run_main

    good = '{"first_token_at": 1.0, "end_at": 2.0, "chunk_times": [1.0, 1.5, 2.0]}'
    path = tmp_path / "records.jsonl"
    path.write_text(f"{good}\n{line}\n")
    code, _, err = run_main(capsys, "sim", "calibrate", path, "--model", "llama-3.1-8b", "--hardware", "h200")
    assert code == 2, err
    assert f"records.jsonl:2: {said}" in err and "fix:" in err


def test_a_record_whose_text_holds_a_line_separator_is_one_record(tmp_path) -> None:
    """`records.jsonl` was split with `str.splitlines()`, which also ends a line at U+2028 inside a string (an
    answer's text may hold one): the record was read as two lines, neither JSON, and the file refused."""
    import json

    from llmsweep.sim.calibrate import load_records

    record = {"first_token_at": 1.0, "end_at": 2.0, "chunk_times": [1.0, 2.0], "text": "one\u2028two"}
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_records(path) == [record]


@pytest.mark.parametrize("runs", [[(1000, 16)], [(1000, 1), (1000, 16)], [(1000, 16), (6000, 16)]],
                         ids=["one-level", "one-prompt-length", "one-concurrency"])
def test_records_of_one_concurrency_or_one_prompt_length_are_refused_not_fitted(runs: list[tuple[int, int]]) -> None:
    """The decode-step model needs concurrency and context varied independently. Records of one level came back as
    factors at their bounds (mem 1.0 against a true 0.55, per_seq_s 12x the truth) with an R^2 of -2e28 and no
    word of doubt; they are refused with what the records spanned and what to measure."""
    truth = {"mem": 0.55, "step_s": 0.003, "per_seq_s": 60e-6, "frontend_s": 0.025}
    measured = EngineConfig(model="llama-3.1-8b", hardware="h200", efficiency=truth)
    records: list[dict] = []
    for i, (isl, conc) in enumerate(runs):
        records += Predictor(build_core(measured), start_time=1000.0 * i).run(
            ChatWorkload(isl=isl, osl=200, seed=i), concurrency=conc, duration=40)
    with pytest.raises(ResultError, match="cannot separate") as exc:
        calibrate(records, EngineConfig(model="llama-3.1-8b", hardware="h200"))
    assert "two concurrencies and two prompt lengths" in (exc.value.fix or "")


def test_two_concurrencies_by_two_prompt_lengths_are_enough() -> None:
    truth = {"mem": 0.55, "step_s": 0.003, "per_seq_s": 60e-6, "frontend_s": 0.025}
    measured = EngineConfig(model="llama-3.1-8b", hardware="h200", efficiency=truth)
    records: list[dict] = []
    for i, (isl, conc) in enumerate([(1000, 1), (1000, 2), (2000, 1), (2000, 2)]):
        records += Predictor(build_core(measured), start_time=1000.0 * i).run(
            ChatWorkload(isl=isl, osl=200, seed=i), concurrency=conc, duration=40)
    eff = calibrate(records, EngineConfig(model="llama-3.1-8b", hardware="h200")).efficiency
    assert eff.mem == pytest.approx(0.55, rel=0.05) and eff.per_seq_s == pytest.approx(60e-6, rel=0.1)
