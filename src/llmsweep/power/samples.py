"""`gpu_metrics.jsonl`: what a power sampler recorded for one job, in SI units.

Line 1 is a `TelemetryHeader` (`"type": "header"`); every other line is one `GpuSample` (`"type": "sample"`): one GPU
at one instant. A sampler's own file (a server folder's, a multi-node job's node's: `power.sampler.PowerSampler.flush`)
also has a `ReadFailure` line (`"type": "read_error"`) for each read of its backend that failed, when and what it said:
a role-by-role job counts its window's from its nodes' files (`power.deployment.merge`); a job's own file says them in
its header (`read_failures`, `read_error`). Timestamps are unix seconds of the host that sampled (the client's records
use the same clock).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llmsweep import atomic
from llmsweep.option_spellings import flag, negation

GPU_METRICS_FILE = "gpu_metrics.jsonl"

PowerSource = Literal["measured", "simulated"]

REQUIRE_POWER_HELP = ("Fail a job whose GPU power is not valid (no sampler, gaps, GPU count not TP x PP x PCP, ...); "
                      f"the recipe's `require-power`, overridden by `llmsweep run {flag('require_power')}/"
                      f"{negation('require_power')}`.")
"""What requiring power means, said once: the recipe field, the run switch and the settings all show this text."""


class TelemetryHeader(BaseModel):
    """What sampled and what the integration must check."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["header"] = "header"
    backend: str | None = Field(description="Sampler backend (nvml, amd-smi, nvidia-smi, sim); None: none available.")
    source: PowerSource | None = Field(
        default="measured", description="Where the samples come from (measured by a backend, or the simulator's "
        "model); None where no backend sampled and none is named (a file of no samples claims no source).")
    interval_s: float = Field(default=1.0, gt=0, description="Sampling period.")
    max_gap_s: float = Field(default=3.0, gt=0, description="Longest gap between samples the integration accepts.")
    expected_gpus: int | None = Field(default=None, description="GPUs the job's topology uses (TP x PP x PCP).")
    gpu_ids: list[str] = Field(default_factory=list, description="The GPUs the sampler was asked to read.")
    require: bool = Field(default=False, description=REQUIRE_POWER_HELP)
    error: str | None = Field(default=None, description="Why no samples could be taken, when none were.")
    read_failures: int = Field(default=0, ge=0, description="Reads of the backend that failed during the job.")
    read_error: str | None = Field(default=None, description="What the last failed read during the job said.")
    not_modelled: bool = Field(
        default=False, description="The simulator's power model gives no figure for the job's topology "
        "(`power.virtual.sim_power_unmodelled`, `error` says why): reason `not_modelled`, no samples were missed.")
    gpu_roles: dict[str, str] = Field(
        default_factory=dict, description="A disaggregated deployment's samples: the role (prefill, decode) of each "
        "GPU id; empty for one aggregated server.")
    role_gpus: dict[str, int] = Field(default_factory=dict, description="GPUs each role's topology uses.")
    missing: list[str] = Field(
        default_factory=list, description="Samplers of a multi-node deployment that left no samples (node, role).")


    @model_validator(mode="before")
    @classmethod
    def _no_backend_no_source(cls, data: Any) -> Any:
        """A header that names no backend and no source (`NoSampler`'s: nothing could sample) claims no source; it
        had said `measured` by default. A header naming a backend without a source (an earlier release's) stays
        measured."""
        if isinstance(data, dict) and data.get("backend") is None and "source" not in data:
            return {**data, "source": None}
        return data


class GpuSample(BaseModel):
    """One GPU at one instant; a figure the driver does not report is None."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["sample"] = "sample"
    t: float = Field(description="Unix seconds.")
    gpu: str = Field(description="GPU index (or id) as the backend names it.")
    power_w: float | None = None
    energy_j: float | None = Field(default=None, description="The driver's cumulative energy counter, J.")
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    util_gpu: float | None = Field(default=None, description="Share of time a kernel ran, 0-100 %.")
    util_mem: float | None = Field(default=None, description="Memory-controller utilisation, 0-100 %.")


class ReadFailure(BaseModel):
    """A read of the sampler's backend that failed: when, and what the backend said (`<backend>: <message>`)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["read_error"] = "read_error"
    t: float = Field(description="Unix seconds.")
    error: str


Telemetry = tuple[TelemetryHeader, list[GpuSample]]
"""A job's power telemetry in memory: what its `gpu_metrics.jsonl` holds (header, then samples)."""


def write_gpu_metrics(path: Path, header: TelemetryHeader, samples: Iterable[GpuSample]) -> None:
    """Write the header and the samples (atomically: a reader never sees half a file)."""
    with atomic.writing(path) as fh:
        fh.write(header.model_dump_json() + "\n")
        for s in samples:
            fh.write(s.model_dump_json(exclude_none=True) + "\n")


def read_gpu_metrics(path: Path) -> tuple[TelemetryHeader | None, list[GpuSample], list[str]]:
    """(header, samples, problems): unreadable lines are reported, not fatal (they make power invalid). A last line
    with no line end that does not parse is a reading its writer was killed while appending (a server folder's file,
    `PowerSampler.flush`): that reading is missing, not damaged, and is passed over; so are a sampler's own file's
    failed reads (`ReadFailure`: what a job's window had of them its header says)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None, [], ["telemetry_file_unreadable"]
    lines = text.splitlines()
    header, samples, _failures, problems = parse_gpu_metrics(lines)
    if lines and not text.endswith("\n") and problems and problems[-1] == f"line {len(lines)}":
        problems.pop()
    return header, samples, problems


def parse_gpu_metrics(lines: Iterable[str], first_line: int = 1
                      ) -> tuple[TelemetryHeader | None, list[GpuSample], list[ReadFailure], list[str]]:
    """The lines of a `gpu_metrics.jsonl` (numbered from `first_line` in the problems) as (header, samples, failed
    reads, problems)."""
    header: TelemetryHeader | None = None
    samples: list[GpuSample] = []
    failures: list[ReadFailure] = []
    problems: list[str] = []
    for n, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            kind = doc.get("type") if isinstance(doc, dict) else None
            if kind == "header":
                header = TelemetryHeader.model_validate(doc)
            elif kind == "read_error":
                failures.append(ReadFailure.model_validate(doc))
            else:
                samples.append(GpuSample.model_validate(doc))
        except (ValueError, ValidationError):
            problems.append(f"line {n}")
    return header, samples, failures, problems
