"""Energy over the profile window: InferenceX's worked vector, its reason codes, the counter cross-check, and the
per-token, per-joule, per-MW and cost figures a user reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.metrics import summarise
from llmsweep.metrics.model import Summary
from llmsweep.power.integrate import WorkDone, integrate
from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, TelemetryHeader, write_gpu_metrics

T0 = 1_800_000_000.0
OFFSETS = (-1.0, 1.0, 3.5, 6.0, 8.5, 11.0)


def _work(**kw: object) -> WorkDone:
    base: dict[str, object] = dict(start=T0, end=T0 + 10, duration_s=10.0, successful=10, input_tokens=1000,
                                   output_tokens=4000, total_tps_per_gpu=250.0, output_tps_per_gpu=200.0, gpus=2)
    base.update(kw)
    return WorkDone(**base)  # type: ignore[arg-type]


def _linear(gpu: str, w0: float, w1: float, offsets: tuple[float, ...] = OFFSETS, energy: bool = False
            ) -> list[GpuSample]:
    """Power rising linearly from w0 at the window start to w1 at its end (10 s), sampled at `offsets`."""
    out = []
    for dt in offsets:
        p = w0 + (w1 - w0) * dt / 10
        e = (w0 * dt + (w1 - w0) * dt * dt / 20) + 1e6 if energy else None  # the integral of p, plus an offset
        out.append(GpuSample(t=T0 + dt, gpu=gpu, power_w=p, energy_j=e))
    return out


HEADER = TelemetryHeader(backend="nvml", expected_gpus=2)


def test_worked_vector_of_the_spec() -> None:
    """2 GPUs linear 100→340 W and 200→440 W sampled at t−1, +1, +3.5, +6, +8.5, +11 over a 10 s window:
    2200 + 3200 = 5400 J, 540 W in total, 270 W per GPU (inferencex-wave2-spec §3.2)."""
    block = integrate(HEADER, _linear("0", 100, 340) + _linear("1", 200, 440), _work())
    assert block["power_valid"] is True, block["reasons"]
    assert block["per_gpu_energy_j"] == {"0": pytest.approx(2200), "1": pytest.approx(3200)}
    assert block["energy_j"] == pytest.approx(5400)
    assert block["avg_total_gpu_power_w"] == pytest.approx(540)
    assert block["avg_power_w"] == pytest.approx(270)
    assert block["peak_power_w"] == pytest.approx(440)
    assert block["joules_per_output_token"] == pytest.approx(5400 / 4000)
    assert block["joules_per_input_token"] == pytest.approx(5400 / 1000)
    assert block["joules_per_total_token"] == pytest.approx(5400 / 5000)
    assert block["joules_per_successful_query"] == pytest.approx(540)
    assert block["tokens_per_joule"] == pytest.approx(5000 / 5400)
    # 250 tok/s/GPU x 2 GPUs against 540 W.
    assert block["tokens_per_s_per_mw"] == pytest.approx(500 / 540e-6)


def test_duplicate_timestamps_are_averaged() -> None:
    samples = _linear("0", 100, 340) + _linear("1", 200, 440)
    samples.append(GpuSample(t=T0 + 6.0, gpu="0", power_w=100 + 24 * 6 + 50))
    samples.append(GpuSample(t=T0 + 6.0, gpu="0", power_w=100 + 24 * 6 - 50))
    assert integrate(HEADER, samples, _work())["energy_j"] == pytest.approx(5400)


@pytest.mark.parametrize(("samples", "header", "work", "code"), [
    (_linear("0", 100, 340), HEADER, _work(), "expected_gpu_count_mismatch"),
    (_linear("0", 100, 340, (1.0, 3.5, 6.0, 8.5, 11.0)) + _linear("1", 200, 440), HEADER, _work(),
     "benchmark_window_not_bracketed"),
    (_linear("0", 100, 340, (-1.0, 3.0, 11.0)) + _linear("1", 200, 440), HEADER, _work(), "sampling_gap_exceeded"),
    (_linear("0", 100, 340, (5.0,)) + _linear("1", 200, 440), HEADER, _work(), "insufficient_power_samples"),
    ([], HEADER, _work(), "telemetry_file_empty"),
    (_linear("0", 100, 340) + _linear("1", 200, 440), TelemetryHeader(backend=None, error="no NVML"), _work(),
     "telemetry_unavailable"),
    (_linear("0", 100, 340) + _linear("1", 200, 440), HEADER, _work(output_tokens=0), "invalid_output_token_count"),
    (_linear("0", 100, 340) + _linear("1", 200, 440), HEADER, _work(duration_s=20.0), "benchmark_duration_mismatch"),
    (_linear("0", 100, 340) + _linear("1", 200, 440), HEADER, _work(end=None), "invalid_benchmark_window"),
])
def test_power_is_invalid_with_a_reason_code(samples: list[GpuSample], header: TelemetryHeader, work: WorkDone,
                                             code: str) -> None:
    block = integrate(header, samples, work)
    assert block["power_valid"] is False
    assert code in block["reasons"]
    assert block.get("energy_j") is None and block.get("tokens_per_joule") is None  # nothing measured is reported


def test_the_energy_counter_cross_checks_the_integral() -> None:
    block = integrate(HEADER, _linear("0", 100, 340, energy=True) + _linear("1", 200, 440, energy=True), _work())
    check = block["counter_check"]
    assert check["energy_j"] == pytest.approx(5400, rel=0.01)  # a quadratic counter, interpolated linearly
    assert check["within_tolerance"] is True
    # A counter that disagrees by 20 % is reported, but (advisory, as InferenceX's) leaves power valid.
    skewed = [s.model_copy(update={"energy_j": s.energy_j * 1.2 if s.energy_j and s.t > T0 else s.energy_j})
              for s in _linear("0", 100, 340, energy=True) + _linear("1", 200, 440, energy=True)]
    block = integrate(HEADER, skewed, _work())
    assert block["power_valid"] is True
    assert block["counter_check"]["within_tolerance"] is False


def test_cost_per_million_tokens_comes_from_the_catalog_assumption() -> None:
    block = integrate(HEADER, _linear("0", 100, 340) + _linear("1", 200, 440), _work(), sku="H200-SXM")
    cost = block["cost"]
    assert cost["assumption"] is True and cost["sku"] == "h200" and cost["source"] and cost["date"]
    price = cost["usd_per_gpu_hour"]
    assert cost["usd_per_mtok_output"] == pytest.approx(price / (200 * 3600) * 1e6)
    assert cost["usd_per_mtok_total"] == pytest.approx(price / (250 * 3600) * 1e6)
    assert cost["tokens_per_s_per_mw_all_in"] == pytest.approx(250 * 1000 / 1.73)


def _records(path: Path, n: int = 10) -> None:
    """n successful requests, the first sent at T0 and the last ending at T0 + 10; 100 in, 400 out tokens each."""
    with path.open("w") as fh:
        for i in range(n):
            sent = T0 + i * 0.9
            chunks = [sent + 0.1, T0 + 10 - (n - 1 - i) * 0.05]
            fh.write(json.dumps({
                "id": str(i), "phase": "profiling", "scheduled_at": sent, "sent_at": sent, "first_byte_at": sent + 0.05,
                "first_token_at": chunks[0], "end_at": chunks[-1], "chunk_times": chunks, "chunk_tokens": [1, 399],
                "status": 200, "error_class": None, "error": None, "prompt_tokens": 100, "completion_tokens": 400,
                "cached_tokens": 0, "input_tokens_expected": 100, "theoretical_cached_tokens": 0, "max_tokens": 400,
                "worker": 0}) + "\n")


def test_summary_carries_the_power_block_and_required_power_gates_the_verdict(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    _records(records)
    summary = summarise(records, gpus=2)
    assert summary.power is None  # no gpu_metrics.jsonl: no block, the summary keeps its old shape
    assert "power" not in summary.dump()

    write_gpu_metrics(tmp_path / GPU_METRICS_FILE, TelemetryHeader(backend="nvml", expected_gpus=2),
                      _linear("0", 100, 340, (-1.0, 1.0, 3.5, 6.0, 8.5, 11.0, 12.0))
                      + _linear("1", 200, 440, (-1.0, 1.0, 3.5, 6.0, 8.5, 11.0, 12.0)))
    summary = Summary.from_doc(summarise(records, gpus=2, provenance={"hardware": {"sku": "h200"}}).dump())
    power = summary.power
    assert power is not None and power.power_valid, power
    assert power.source == "measured" and power.backend == "nvml"
    assert power.energy_j == pytest.approx(5400, rel=0.01)
    assert power.cost is not None and power.cost.usd_per_mtok_output is not None
    assert summary.units["power.tokens_per_joule"] == "tok/J"

    # Required power that is not valid (a GPU missing) makes the job invalid, with the reason first.
    write_gpu_metrics(tmp_path / GPU_METRICS_FILE, TelemetryHeader(backend="nvml", expected_gpus=2, require=True),
                      _linear("0", 100, 340, (-1.0, 1.0, 3.5, 6.0, 8.5, 11.0, 12.0)))
    summary = summarise(records, gpus=2)
    assert summary.validity.verdict == "invalid"
    assert any("expected_gpu_count_mismatch" in r for r in summary.validity.reasons)
    # Not required: the same defect is a warning only.
    write_gpu_metrics(tmp_path / GPU_METRICS_FILE, TelemetryHeader(backend="nvml", expected_gpus=2),
                      _linear("0", 100, 340, (-1.0, 1.0, 3.5, 6.0, 8.5, 11.0, 12.0)))
    summary = summarise(records, gpus=2)
    assert summary.validity.verdict != "invalid"
    assert any("power not valid" in w for w in summary.validity.warnings)


def test_a_job_that_sampled_no_power_keeps_its_assumed_cost_and_claims_no_power(tmp_path: Path) -> None:
    """`run --power-backend off` dropped the cost per million output tokens with the power block, though it needs
    only the throughput and the catalog's price (a job whose power the simulator does not model kept it): the block
    holds the cost alone, its power figures, source and backend empty, and no warning of invalid power is given."""
    from llmsweep.metrics.registry import HOT_BY_NAME

    records = tmp_path / "records.jsonl"
    _records(records)
    summary = Summary.from_doc(summarise(records, gpus=2, provenance={"hardware": {"sku": "h200"}}).dump())
    power = summary.power
    assert power is not None and not power.power_valid and power.reasons == ["not_sampled"]
    assert power.source is None and power.backend is None and power.error is None and power.unrecorded is None
    assert power.energy_j is None and power.tokens_per_joule is None and power.avg_power_w is None
    cost = power.cost
    assert cost is not None and cost.assumption and cost.sku == "h200" and cost.source and cost.date
    assert cost.usd_per_gpu_hour is not None
    output_per_gpu = summary.throughput.per_gpu.output_tps
    assert cost.usd_per_mtok_output == pytest.approx(cost.usd_per_gpu_hour / (output_per_gpu * 3600) * 1e6)
    assert HOT_BY_NAME["usd_per_mtok_output"].read(summary) == cost.usd_per_mtok_output
    assert HOT_BY_NAME["tokens_per_joule"].read(summary) is None
    assert not summary.validity.warnings, summary.validity  # nothing was asked to sample: no power is missed


def test_energy_covers_the_window_the_tokens_were_counted_over_when_the_first_request_failed(tmp_path: Path) -> None:
    """A profiling request sent 3 s before the first successful one, and failed: the throughput's window starts at
    the first success, so the energy must too (it started at the failed send: `benchmark_duration_mismatch`, power
    invalid, or joules per token over a longer window than its tokens)."""
    records = tmp_path / "records.jsonl"
    _records(records)
    with records.open("a") as fh:
        fh.write(json.dumps({
            "id": "failed", "phase": "profiling", "scheduled_at": T0 - 3, "sent_at": T0 - 3, "first_byte_at": None,
            "first_token_at": None, "end_at": T0 + 5, "chunk_times": [], "chunk_tokens": [], "status": None,
            "error_class": "timeout", "error": "read timed out", "prompt_tokens": None, "completion_tokens": None,
            "cached_tokens": None, "input_tokens_expected": 100, "theoretical_cached_tokens": 0, "max_tokens": 400,
            "worker": 0}) + "\n")
    offsets = (-4.0, -2.0, -1.0, 1.0, 3.5, 6.0, 8.5, 11.0, 12.0)
    write_gpu_metrics(tmp_path / GPU_METRICS_FILE, TelemetryHeader(backend="nvml", expected_gpus=2),
                      _linear("0", 100, 340, offsets) + _linear("1", 200, 440, offsets))
    summary = summarise(records, gpus=2)
    power = summary.power
    assert summary.throughput.duration_s == pytest.approx(10.0) and summary.requests.failed == 1
    assert power is not None and power.power_valid, power.reasons if power else None
    assert power.window.start == pytest.approx(T0) and power.energy_j == pytest.approx(5400, rel=0.01)


def test_a_slower_sampling_interval_allowed_by_max_gap_is_read_beyond_three_seconds() -> None:
    """InferenceX reads samples within 3 s of the window; a run that allows 5 s between samples (max_gap_s) must
    find the one 4 s before its start rather than call the window unbracketed."""
    offsets = (-4.0, 1.0, 5.5, 10.0, 14.0)
    header = TelemetryHeader(backend="nvml", expected_gpus=2, max_gap_s=5.0)
    block = integrate(header, _linear("0", 100, 340, offsets) + _linear("1", 200, 440, offsets), _work())
    assert block["power_valid"] is True, block["reasons"]


def test_an_energy_counter_that_reset_in_the_window_is_a_negative_delta() -> None:
    """GPU 1's counter starts low and drops by 1 kJ between +3.5 s and +6 s (a driver reload, a wrapped
    accumulator), then climbs on: it ends above where it began, but its rise is no measure of the energy. The
    cross-check says the counter went backwards (InferenceX: no negative delta between snapshots) and does not
    agree; power, from the samples, stays valid (the check is advisory)."""
    gpu1 = [s.model_copy(update={"energy_j": (s.energy_j or 0) - 1e6 + 100 - (1000 if s.t >= T0 + 6 else 0)})
            for s in _linear("1", 200, 440, energy=True)]
    block = integrate(HEADER, _linear("0", 100, 340, energy=True) + gpu1, _work())
    assert block["power_valid"] is True and block["energy_j"] == pytest.approx(5400)
    check = block["counter_check"]
    assert check["energy_j"] > 0  # the counters' rise over the window is positive...
    assert check["negative_delta"] is True and check["within_tolerance"] is False  # ...but one went backwards
    plain = integrate(HEADER, _linear("0", 100, 340, energy=True) + _linear("1", 200, 440, energy=True), _work())
    assert plain["counter_check"]["negative_delta"] is False


def test_power_the_simulator_does_not_model_says_so_in_a_reason_of_its_own() -> None:
    """A simulated job whose power the simulator does not model (pp 2: `power.virtual.sim_power_unmodelled`) has no
    samples: its block said `telemetry_unavailable, telemetry_file_empty`, as if a sampler had failed."""
    from llmsweep.power.sampler import PowerSettings
    from llmsweep.power.virtual import VirtualPower

    power = VirtualPower(hardware="mi300x", tp=4, start_time=T0, settings=PowerSettings(), gpus=8)
    assert power.probe is None  # nothing is sampled
    header, samples = power.telemetry(8)
    block = integrate(header, samples, _work(gpus=8))
    assert block["power_valid"] is False and block["reasons"] == ["not_modelled"], block["reasons"]
    assert block["error"].startswith("not modelled: the simulator's power model covers one engine's 4 tensor-parallel")
    modelled = VirtualPower(hardware="mi300x", tp=8, start_time=T0, settings=PowerSettings(), gpus=8)
    assert modelled.probe is not None and not modelled.telemetry(8)[0].not_modelled


def test_gpus_reading_alike_are_integrated_once_each_figure_per_gpu() -> None:
    """A tensor-parallel group the simulator models reads alike: each GPU still gets its energy, samples and gap,
    the same as one alone; a GPU whose counter (not its power) differs gets its own counter check."""
    alike = [_linear(str(g), 100, 340, energy=True) for g in range(3)]
    one = integrate(TelemetryHeader(backend="sim", expected_gpus=1), alike[0], _work(gpus=1))
    block = integrate(TelemetryHeader(backend="sim", expected_gpus=3), [s for g in alike for s in g], _work(gpus=3))
    assert block["power_valid"] is True, block["reasons"]
    assert block["per_gpu_energy_j"] == {g: one["per_gpu_energy_j"]["0"] for g in ("0", "1", "2")}
    assert block["per_gpu_sample_counts"] == {"0": 6, "1": 6, "2": 6}
    assert block["energy_j"] == pytest.approx(3 * 2200)
    # the third GPU's counter went backwards in the window: its reset is its own, though its power reads alike
    reset = [s.model_copy(update={"energy_j": (s.energy_j or 0) - (1e6 if i >= 3 else 0)})
             for i, s in enumerate(alike[2])]
    mixed = integrate(TelemetryHeader(backend="sim", expected_gpus=3), alike[0] + alike[1] + reset, _work(gpus=3))
    assert block["counter_check"]["negative_delta"] is False
    assert mixed["counter_check"]["negative_delta"] is True
    assert mixed["counter_check"]["energy_j"] == pytest.approx(block["counter_check"]["energy_j"] - 1e6)
    assert mixed["per_gpu_energy_j"] == block["per_gpu_energy_j"]
