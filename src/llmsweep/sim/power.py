"""The simulator's GPU power model, read the way NVML is read (`GET /power`: mW, mJ, MHz, °C, %).

Power per GPU between the SKU's idle and maximum board watts (`catalog/data/power.yaml`), from the roofline
utilisation of what the core did since the previous reading (its public counters and its timer's figures):

    duty     = busy step seconds / elapsed seconds            (NVML's utilization.gpu: share of time a kernel ran)
    mem      = weight bytes the steps read / (elapsed × HBM bandwidth × TP)
    compute  = 2 × active params × tokens processed / (elapsed × peak FLOP/s × TP)
    activity = min(1, 0.25 × duty + 0.45 × mem + 0.8 × compute)
    power    = idle + (max − idle) × activity

The weights encode how a GPU's draw splits in practice: clocks up and kernels resident lift a busy GPU well above
idle even when it waits on memory; streaming HBM at full bandwidth (memory-bound decode) takes roughly half the
dynamic range; tensor cores at full rate (prefill, large decode batches) take the rest. Throughput grows with the
batch far faster than these terms, so tokens per joule rises with concurrency, as measured sweeps show. The energy
counter integrates the modelled power over time, like NVML's total-energy counter. Everything here is simulated and
the power block says so (`source: simulated`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from llmsweep.power.backends import sim_samples
from llmsweep.sim.core import EngineCore
from llmsweep.sim.perf import RooflineTimer

if TYPE_CHECKING:
    from llmsweep.power.samples import GpuSample

W_DUTY, W_MEM, W_COMPUTE = 0.25, 0.45, 0.8
DEFAULT_IDLE_W, DEFAULT_MAX_W = 75.0, 700.0
"""A SKU without a power.yaml entry is modelled as an H200."""
SM_CLOCK_IDLE_MHZ, SM_CLOCK_BUSY_MHZ, MEM_CLOCK_MHZ = 345.0, 1980.0, 2619.0
MIN_INTERVAL_S = 0.05
"""Readings closer together than this repeat the last one (two readers must not skew each other's averages)."""


@dataclass(frozen=True, slots=True)
class Watts:
    idle_w: float
    max_w: float
    source: str


class PowerReading(NamedTuple):
    """One GPU's reading of the model: the fields of a GPU in `GET /power`'s document, in its order and units (mW,
    mJ, MHz, °C, %)."""

    power_usage_mw: int
    total_energy_consumption_mj: int
    clock_sm_mhz: float
    clock_mem_mhz: float
    temperature_c: float
    utilization_gpu: int
    utilization_memory: int

    def samples(self, now: float, gpus: int) -> list[GpuSample]:
        """The samples at unix time `now` of `gpus` GPUs that read this: what the `sim` backend reads from the
        model's document (`power.backends.parse_sim_power`), built without the document."""
        # float() of each figure, as the parser's `first_number` reads them
        return sim_samples(now, gpus, power_mw=float(self.power_usage_mw),
                           energy_mj=float(self.total_energy_consumption_mj), sm_clock_mhz=float(self.clock_sm_mhz),
                           mem_clock_mhz=float(self.clock_mem_mhz), temperature_c=float(self.temperature_c),
                           util_gpu=float(self.utilization_gpu), util_mem=float(self.utilization_memory))


def watts_for(hardware: str) -> Watts:
    """The SKU's idle and maximum watts from the power catalog (an H200's when it has none)."""
    from llmsweep.catalog.power import find_power

    spec = find_power(hardware)
    if spec is None:
        return Watts(DEFAULT_IDLE_W, DEFAULT_MAX_W, f"no power.yaml entry for {hardware!r}: modelled as an H200")
    return Watts(spec.idle_w, spec.max_w, spec.watts_source)


class PowerModel:
    """Per-GPU modelled power of one simulated engine (its TP GPUs draw alike)."""

    def __init__(self, core: EngineCore, *, hardware: str, tp: int, clock: Any = time.monotonic) -> None:
        self.core, self.tp, self.clock = core, max(1, tp), clock
        self.watts = watts_for(hardware)
        self._last_t = clock()
        c = core.counters
        self._last = (c.busy_seconds, c.steps, c.computed_prompt_tokens + c.generation_tokens)
        self.power_w = self.watts.idle_w
        self.energy_j = 0.0
        self.duty = self.mem = self.compute = 0.0

    def utilisation(self, d_busy: float, d_steps: int, d_tokens: int, dt: float) -> tuple[float, float, float]:
        """(duty, memory, compute) utilisation over an interval of `dt` seconds, each 0-1."""
        duty = min(1.0, d_busy / dt)
        timer = self.core.timer
        if not isinstance(timer, RooflineTimer) or d_steps <= 0:
            return duty, 0.0, 0.0
        p = timer.inputs
        tokens_per_step = max(1, round(d_tokens / d_steps))
        weight_bytes = timer.weight_bytes_read(tokens_per_step) * d_steps
        mem = min(1.0, weight_bytes / (dt * p.hbm_bw * timer.tp))
        compute = min(1.0, 2.0 * p.params_active * d_tokens / (dt * p.flops * timer.tp))
        return duty, mem, compute

    def advance(self, now: float | None = None) -> PowerReading:
        """Advance the model to `now` (None: its clock's time) and return each GPU's reading (NVML's units; its TP GPUs
        read alike)."""
        if now is None:
            now = self.clock()
        dt = now - self._last_t
        if dt >= MIN_INTERVAL_S:
            c = self.core.counters
            current = (c.busy_seconds, c.steps, c.computed_prompt_tokens + c.generation_tokens)
            d_busy, d_steps, d_tokens = (current[0] - self._last[0], current[1] - self._last[1],
                                         current[2] - self._last[2])
            self.duty, self.mem, self.compute = self.utilisation(d_busy, d_steps, d_tokens, dt)
            activity = min(1.0, W_DUTY * self.duty + W_MEM * self.mem + W_COMPUTE * self.compute)
            self.power_w = self.watts.idle_w + (self.watts.max_w - self.watts.idle_w) * activity
            self.energy_j += self.power_w * dt
            self._last_t, self._last = now, current
        busy = self.duty > 0
        temperature = 30.0 + 45.0 * (self.power_w - self.watts.idle_w) / (self.watts.max_w - self.watts.idle_w)
        return PowerReading(power_usage_mw=round(self.power_w * 1000),
                            total_energy_consumption_mj=round(self.energy_j * 1000),
                            clock_sm_mhz=SM_CLOCK_BUSY_MHZ if busy else SM_CLOCK_IDLE_MHZ,
                            clock_mem_mhz=MEM_CLOCK_MHZ, temperature_c=round(temperature, 1),
                            utilization_gpu=round(100 * self.duty), utilization_memory=round(100 * self.mem))

    def read(self) -> dict[str, Any]:
        """Advance the model to now and return the NVML-style document of `GET /power`."""
        gpu = self.advance()._asdict()  # (the reading's fields are the document's keys, in its order)
        return {"source": "simulated", "model": "roofline-utilisation", "idle_w": self.watts.idle_w,
                "max_w": self.watts.max_w, "watts_source": self.watts.source,
                "gpus": [{"index": i, **gpu} for i in range(self.tp)]}
