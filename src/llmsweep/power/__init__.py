"""GPU power: sampled while a server runs (`sampler`, through a backend of `backends`), integrated over a job's
profile window (`integrate`) into the summary's `power` block, with cost per token from the catalog's assumptions.

`gpu_metrics.jsonl` beside a job's records is the contract between the two halves: a header line (what sampled,
how often, how many GPUs were expected, whether power is required) then one line per GPU per sample.
"""

from __future__ import annotations

from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, TelemetryHeader, read_gpu_metrics, write_gpu_metrics

__all__ = ["GPU_METRICS_FILE", "GpuSample", "TelemetryHeader", "read_gpu_metrics", "write_gpu_metrics"]
