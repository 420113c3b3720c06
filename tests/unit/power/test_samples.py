"""`gpu_metrics.jsonl` read back: what a killed writer leaves is read as far as it got."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.power.integrate import WorkDone, power_block
from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, TelemetryHeader, read_gpu_metrics, write_gpu_metrics

T0 = 1_800_000_000.0


def test_a_last_line_cut_short_is_a_missing_reading_not_a_damaged_file(tmp_path: Path) -> None:
    """A writer killed while appending leaves its last line cut short: the samples before it read, with no problem
    (power stays valid where they bracket the window); a damaged line elsewhere still makes power invalid."""
    path = tmp_path / GPU_METRICS_FILE
    samples = [GpuSample(t=T0 + dt, gpu="0", power_w=300.0) for dt in (-1.0, 0.5, 1.0, 1.5, 2.5)]
    write_gpu_metrics(path, TelemetryHeader(backend="nvml", expected_gpus=1), samples)
    whole = path.read_text()
    path.write_text(whole + '{"type":"sample","t":1800000003.0,"gpu":"0","pow')
    header, got, problems = read_gpu_metrics(path)
    assert header is not None and got == samples and problems == []
    work = WorkDone(start=T0, end=T0 + 2, duration_s=2.0, successful=1, input_tokens=10, output_tokens=10,
                    total_tps_per_gpu=10.0, output_tps_per_gpu=5.0, gpus=1)
    block = power_block(path, work)
    assert block["power_valid"] is True and block["energy_j"] == pytest.approx(600.0)
    lines = whole.splitlines(keepends=True)
    path.write_text("".join([*lines[:2], '{"type":"sample","t":18', "\n", *lines[2:]]))
    assert read_gpu_metrics(path)[2] == ["line 3"]
    assert "invalid_timestamp_sample" in power_block(path, work)["reasons"]
