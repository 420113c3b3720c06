"""CPU-rehearsal stand-in for nvidia-ml-py (module `pynvml`): one NVIDIA H200 (LLMSWEEP_STANDIN_GPUS=N: N of them,
as the rehearsal's `nvidia-smi` lists) for `check_power.py` and the `nvml` power backend, never installed anywhere
(put this folder on PYTHONPATH for a rehearsal only: what it reports is made up, so a run sampled through it is not a
measurement).

Board power follows a fixed curve of the wall clock, 400 W ± 250 W with a 37 s period (faster than 1 Hz sampling
can follow at its turns), and the total-energy counter is that curve's exact integral since a fixed epoch, as
NVML's counter is the board's true energy. The trapezoid of 1 Hz samples then differs from the counter by what
sampling misses, which is what `scripts/gpu/check_power.py` measures on the device.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
_BASE_W, _SWING_W, _PERIOD_S, _EPOCH = 400.0, 250.0, 37.0, 1_700_000_000.0
_ready = False


class NVMLError(Exception):
    pass


@dataclass
class _Util:
    gpu: int
    memory: int


def _check() -> None:
    if not _ready:
        raise NVMLError("Uninitialized")


def _watts(t: float) -> float:
    return _BASE_W + _SWING_W * math.sin(2 * math.pi * (t - _EPOCH) / _PERIOD_S)


def _joules(t: float) -> float:
    w = 2 * math.pi / _PERIOD_S
    return _BASE_W * (t - _EPOCH) + _SWING_W / w * (1 - math.cos(w * (t - _EPOCH)))


def nvmlInit() -> None:
    global _ready
    _ready = True


def nvmlShutdown() -> None:
    global _ready
    _ready = False


def nvmlDeviceGetCount() -> int:
    _check()
    return int(os.environ.get("LLMSWEEP_STANDIN_GPUS", "1"))


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    _check()
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError("Invalid Argument")
    return index


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    _check()
    return round(1000 * _watts(time.time()))


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    _check()
    return round(1000 * _joules(time.time()))


def nvmlDeviceGetClockInfo(handle: int, kind: int) -> int:
    _check()
    return 1980 if kind == NVML_CLOCK_SM else 3201


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    _check()
    return round(30 + 40 * (_watts(time.time()) - 150) / 500)


def nvmlDeviceGetUtilizationRates(handle: int) -> _Util:
    _check()
    return _Util(gpu=round(100 * (_watts(time.time()) - 150) / 500), memory=40)


def nvmlDeviceGetName(handle: int) -> str:
    _check()
    return "NVIDIA H200"
