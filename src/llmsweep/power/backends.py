"""Power sampler backends, a small registry keyed by kind: `nvml`, `amd-smi`, `nvidia-smi`, `sim`.

A backend answers one question, many times: "each GPU, now?" (`read`, one `GpuSample` per GPU, SI units). The
sampler (`power.sampler`) calls it at its interval in a background thread. Adding a backend is one class here
decorated with `@register_backend` (kind, source, `probe` saying why it cannot run on this host, `read`, `close`).

- `nvml`: NVIDIA's management library through `nvidia-ml-py` (import `pynvml`, the optional extra `power`): board
  power (mW), the total-energy counter (mJ, Volta and newer), SM and memory clocks, temperature, utilisation.
- `amd-smi`: `amd-smi metric -p -c -t -u --csv` one shot per tick, plus `amd-smi metric -E --csv` for the energy
  counter; columns found by InferenceX's header rules (wave-2 spec §3.1).
- `nvidia-smi`: the CSV fallback InferenceX uses, with its exact fields (`timestamp,index,power.draw,temperature.gpu,
  clocks.current.sm,clocks.current.memory,utilization.gpu,utilization.memory`), one shot per tick.
- `dcgm`: DCGM's `dcgmi dmon` one shot per tick (power W, total-energy counter mJ, clocks, temperature,
  utilisation): the lane InferenceX uses for multi-node (disaggregated prefill/decode) roles, where a node's
  DCGM host engine is already running; `auto` tries it first for those roles (`power.sampler.auto_order`).
- `sim`: the simulator's `GET /power`, which reports its modelled power the way NVML is read (mW, mJ, MHz, °C, %).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from llmsweep.direct import DIRECT
from llmsweep.power.samples import GpuSample, PowerSource
from llmsweep.visible import resolve_visible

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class BackendContext:
    """What a backend needs to know: the server's URL (the simulator's) and which GPUs it runs on (None: all)."""

    base_url: str | None = None
    gpu_indices: tuple[int, ...] | None = None
    timeout_s: float = 5.0
    env: Mapping[str, str] = field(default_factory=dict)


class Backend:
    kind: ClassVar[str]
    source: ClassVar[PowerSource] = "measured"
    summary: ClassVar[str] = ""

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    @classmethod
    def probe(cls, ctx: BackendContext) -> str | None:
        """None when this backend can sample on this host, else why not."""
        return None

    def read(self) -> list[GpuSample]:
        raise NotImplementedError

    def close(self) -> None:
        return None


B = TypeVar("B", bound=type[Backend])
BACKENDS: dict[str, type[Backend]] = {}


def register_backend(cls: B) -> B:
    if cls.kind in BACKENDS:
        raise ValueError(f"power backend {cls.kind!r} registered twice")
    BACKENDS[cls.kind] = cls
    return cls


def visible_gpus(env: Mapping[str, str]) -> tuple[int, ...] | None:
    """The GPU indices the server's `*_VISIBLE_DEVICES` select, in the runtime's order, or None when none narrows
    them (all GPUs): :func:`llmsweep.visible.resolve_visible`, the one reader of those variables (GPU, MIG and AMD
    UUIDs; ROCR first, then HIP within what it left). An entry that names no GPU of this host selects none (``()``,
    with :func:`visible_problem` saying why and a warning logged): power read from every GPU of the host would be
    credited to a server that uses only some of them."""
    visible = resolve_visible(env)
    if visible.problem is not None:
        log.warning("power: %s", _not_read(visible.problem))
    return visible.gpus


def visible_problem(env: Mapping[str, str]) -> str | None:
    """Why the `*_VISIBLE_DEVICES` selection names no GPU of this host (see :func:`visible_gpus`), else None."""
    problem = resolve_visible(env).problem
    return _not_read(problem) if problem is not None else None


def _not_read(problem: str) -> str:
    return f"{problem}: power is not read rather than read from GPUs the server may not use"


def _selection_problem(ctx: BackendContext) -> str | None:
    """A measured backend's first probe: a server pinned to GPUs this host does not have is not sampled."""
    if ctx.gpu_indices == ():
        return visible_problem(ctx.env) or "the server's *_VISIBLE_DEVICES selects no GPU"
    return None


def first_number(text: object) -> float | None:
    """The first number in a field (`[N/A]`, empty or absent: None)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = re.search(r"-?\d+(?:\.\d+)?", str(text or ""))
    return float(m.group()) if m else None


def _run(argv: Sequence[str], timeout_s: float) -> str:
    """A tool's stdout; a byte that is not UTF-8 (a unit sign in another encoding) is replaced, not a reason to lose
    the whole reading (it had raised UnicodeDecodeError, which the probe let through as a traceback)."""
    done = subprocess.run(list(argv), capture_output=True, text=True, encoding="utf-8", errors="replace",
                          timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise OSError(f"{argv[0]} exited {done.returncode}: {(done.stderr.strip() or done.stdout.strip())[:200]}")
    return done.stdout


def _read_problem(cls: type[Backend], ctx: BackendContext) -> str | None:
    """A tool-backed probe's last step: one read as the sampler will make it. A tool on PATH that cannot report (no
    driver, no GPU, a hang) fails the probe here, before any server starts, rather than every read of the run (and
    `auto` goes on to the next backend)."""
    try:
        got = cls(ctx).read()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cls.kind} could not be read: {exc}"
    except Exception as exc:  # output it could not make sense of: as the sampler's reads, a reason, never a crash
        return f"{cls.kind} could not be read: {type(exc).__name__}: {exc}"
    if not any(s.power_w is not None for s in got):
        return f"{cls.kind} reported no GPU power"
    return None


# ------------------------------------------------------------------------------------------------------ NVML


@register_backend
class NvmlBackend(Backend):
    kind = "nvml"
    summary = "NVIDIA NVML through nvidia-ml-py (power, energy counter, clocks, temperature, utilisation)"

    @classmethod
    def probe(cls, ctx: BackendContext) -> str | None:
        if (problem := _selection_problem(ctx)) is not None:
            return problem
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py is not installed (pip install 'llmsweep[power]')"
        try:
            pynvml.nvmlInit()
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:
            return f"NVML did not initialise: {exc}"
        return None

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        import pynvml

        self.nvml: Any = pynvml
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        indices = ctx.gpu_indices if ctx.gpu_indices is not None else tuple(range(count))
        self.handles = [(i, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in indices if i < count]

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError:
            return None

    def read(self) -> list[GpuSample]:
        n = self.nvml
        out = []
        for index, h in self.handles:
            t = time.time()
            power_mw = self._try(n.nvmlDeviceGetPowerUsage, h)
            energy_mj = self._try(n.nvmlDeviceGetTotalEnergyConsumption, h)
            util = self._try(n.nvmlDeviceGetUtilizationRates, h)
            out.append(GpuSample(
                t=t, gpu=str(index),
                power_w=power_mw / 1000 if power_mw is not None else None,
                energy_j=energy_mj / 1000 if energy_mj is not None else None,
                sm_clock_mhz=self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
                mem_clock_mhz=self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
                temperature_c=self._try(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
                util_gpu=util.gpu if util is not None else None,
                util_mem=util.memory if util is not None else None,
            ))
        return out

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()


# ------------------------------------------------------------------------------------------------ nvidia-smi

NVIDIA_SMI_FIELDS = ("timestamp", "index", "power.draw", "temperature.gpu", "clocks.current.sm",
                     "clocks.current.memory", "utilization.gpu", "utilization.memory")
"""InferenceX's `benchmark_lib.sh` query, field for field (wave-2 spec §3.1)."""


@register_backend
class NvidiaSmiBackend(Backend):
    kind = "nvidia-smi"
    summary = "nvidia-smi --query-gpu CSV (InferenceX's fields; no energy counter)"

    @classmethod
    def probe(cls, ctx: BackendContext) -> str | None:
        if (problem := _selection_problem(ctx)) is not None:
            return problem
        if not shutil.which("nvidia-smi"):
            return "nvidia-smi is not on PATH"
        return _read_problem(cls, ctx)

    def read(self) -> list[GpuSample]:
        argv = ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"]
        if self.ctx.gpu_indices is not None:
            argv.append("--id=" + ",".join(str(i) for i in self.ctx.gpu_indices))
        return parse_nvidia_smi(_run(argv, self.ctx.timeout_s), time.time())


def parse_nvidia_smi(text: str, now: float) -> list[GpuSample]:
    """Rows of `--format=csv,noheader,nounits` in NVIDIA_SMI_FIELDS order; the host clock stamps them."""
    out = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) < len(NVIDIA_SMI_FIELDS):
            continue  # a truncated line
        v = [c.strip() for c in row]
        n = [first_number(c) for c in v]
        out.append(GpuSample(t=now, gpu=v[1], power_w=n[2], temperature_c=n[3], sm_clock_mhz=n[4],
                             mem_clock_mhz=n[5], util_gpu=n[6], util_mem=n[7]))
    return out


# ------------------------------------------------------------------------------------------------ amd-smi

_ID_HEADERS = ("index", "gpu", "gpu_id", "gpu_index", "card", "device")


def _column(headers: Sequence[str], test: Callable[[str], bool]) -> int | None:
    return next((i for i, h in enumerate(headers) if test(h.strip().lower())), None)


def _amd_table(text: str) -> tuple[list[str], list[list[str]]]:
    """An amd-smi CSV's headers (lower case) and the rows under them. The header is the first line with a GPU id
    column: amd-smi prints its own warnings on stdout before the table (`WARNING: User is missing the following
    required groups: render, video. ...`, for a user outside those groups), which are not the header."""
    rows = list(csv.reader(io.StringIO(text)))
    for n, row in enumerate(rows):
        headers = [h.strip().lower() for h in row]
        if any(h in _ID_HEADERS for h in headers):
            return headers, rows[n + 1:]
    return [], []


def parse_amd_smi(text: str, now: float, energy: Mapping[str, float] | None = None) -> list[GpuSample]:
    """`amd-smi metric … --csv` rows, columns found as InferenceX finds them: power = the first header naming power
    but no limit/cap/max/min (`socket_power`), GPU id = a header exactly index|gpu|gpu_id|gpu_index|card|device."""
    headers, rows = _amd_table(text)
    if not headers:
        return []
    power = _column(headers, lambda h: "power" in h and not re.search(r"limit|cap|max|min", h))
    gpu = _column(headers, lambda h: h in _ID_HEADERS)
    temp = _column(headers, lambda h: "hotspot" in h) or _column(headers, lambda h: "temp" in h or "edge" in h)
    gfx_clk = _column(headers, lambda h: "gfx" in h and "clk" in h)
    mem_clk = _column(headers, lambda h: ("mem" in h or "uclk" in h) and "clk" in h)
    util = _column(headers, lambda h: "gfx_activity" in h or h == "gfx_usage")
    umc = _column(headers, lambda h: "umc_activity" in h or h == "mem_usage")

    def cell(row: Sequence[str], i: int | None) -> float | None:
        return first_number(row[i]) if i is not None and i < len(row) else None

    out = []
    for row in rows:
        if gpu is None or gpu >= len(row) or not row[gpu].strip() or [c.strip().lower() for c in row] == headers:
            continue
        gid = row[gpu].strip()
        out.append(GpuSample(t=now, gpu=gid, power_w=cell(row, power), temperature_c=cell(row, temp),
                             sm_clock_mhz=cell(row, gfx_clk), mem_clock_mhz=cell(row, mem_clk),
                             util_gpu=cell(row, util), util_mem=cell(row, umc),
                             energy_j=(energy or {}).get(gid)))
    return out


def parse_amd_energy(text: str) -> dict[str, float]:
    """`amd-smi metric -E --csv`: GPU id -> `total_energy_consumption` (J)."""
    headers, rows = _amd_table(text)
    gpu = _column(headers, lambda h: h in _ID_HEADERS)
    energy = _column(headers, lambda h: "total_energy_consumption" in h)
    out: dict[str, float] = {}
    for row in rows:
        if gpu is None or energy is None or max(gpu, energy) >= len(row):
            continue
        value = first_number(row[energy])
        if value is not None:
            out[row[gpu].strip()] = value
    return out


@register_backend
class AmdSmiBackend(Backend):
    kind = "amd-smi"
    summary = "amd-smi metric CSV (socket power, clocks, temperature, activity; energy counter from -E)"

    @classmethod
    def probe(cls, ctx: BackendContext) -> str | None:
        if (problem := _selection_problem(ctx)) is not None:
            return problem
        if not shutil.which("amd-smi"):
            return "amd-smi is not on PATH"
        return _read_problem(cls, ctx)

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        self.energy_hung = False
        """The energy counter's call (`metric -E`) did not answer once: it is not asked again by this backend (a
        sampler's life, one server), where each read would wait its timeout before the power call and stretch every
        tick by it; power is still read. The next server's sampler asks again."""

    def read(self) -> list[GpuSample]:
        sel = ["-g", *(str(i) for i in self.ctx.gpu_indices)] if self.ctx.gpu_indices is not None else []
        energy: dict[str, float] = {}
        if not self.energy_hung:
            try:
                energy = parse_amd_energy(_run(["amd-smi", "metric", "-E", *sel, "--csv"], self.ctx.timeout_s))
            except subprocess.TimeoutExpired:
                self.energy_hung = True
                log.warning("`amd-smi metric -E` did not answer within %.0f s: the energy counter is not asked again "
                            "for this server (its power, which the energy is integrated from, is still read each tick; "
                            "only the counter's cross-check is lost)", self.ctx.timeout_s)
            except OSError as exc:
                log.debug("amd-smi energy counter unavailable: %s", exc)
        # stamped while the power is read (the middle of its call), not before the energy call: each amd-smi call
        # can take a second or more, which would date every power reading that much too early
        began = time.time()
        text = _run(["amd-smi", "metric", "-p", "-c", "-t", "-u", *sel, "--csv"], self.ctx.timeout_s)
        return parse_amd_smi(text, (began + time.time()) / 2, energy)


# ------------------------------------------------------------------------------------------------ DCGM

DCGM_FIELDS = {155: "POWER", 156: "TOTEC", 100: "SMCLK", 101: "MMCLK", 150: "TMPTR", 203: "GPUTL", 204: "MCUTL"}
"""DCGM field ids `dcgmi dmon -e` asks for, with the short names its header prints: DCGM_FI_DEV_POWER_USAGE (W),
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ), SM and memory clocks (MHz), GPU temperature (C), GPU and memory-copy
utilisation (%)."""


def dcgmi_argv(gpu_indices: Sequence[int] | None) -> list[str]:
    """One sample of every field (`-c 1`), taken at once (`-d 100` ms rather than dmon's 1 s default)."""
    argv = ["dcgmi", "dmon", "-e", ",".join(str(f) for f in DCGM_FIELDS), "-c", "1", "-d", "100"]
    if gpu_indices is not None:
        argv += ["-i", ",".join(str(i) for i in gpu_indices)]
    return argv


def parse_dcgmi_dmon(text: str, now: float) -> list[GpuSample]:
    """`dcgmi dmon` output: a `#Entity` header naming the fields, a units line (`ID  W  mJ ...`), then one row per
    entity (`GPU 0  312.45  ...`); `N/A` is None; rows of other entities and repeated headers are skipped. Columns
    are found by their short names, so a DCGM that prints them in another order still reads right."""
    names: list[str] = []
    out: list[GpuSample] = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].startswith("#"):  # `#Entity POWER ...` or `# Entity POWER ...`: the field names
            names = [w for w in words if w.lstrip("#").lower() not in ("", "entity")]
            continue
        if words[0] != "GPU" or len(words) < 2 or not words[1].isdigit() or not names:
            continue
        values = dict(zip(names, words[2:], strict=False))

        def field(name: str, values: dict[str, str] = values) -> float | None:
            return first_number(values.get(name)) if values.get(name, "N/A") != "N/A" else None

        energy_mj = field("TOTEC")
        out.append(GpuSample(t=now, gpu=words[1], power_w=field("POWER"),
                             energy_j=energy_mj / 1000 if energy_mj is not None else None,
                             sm_clock_mhz=field("SMCLK"), mem_clock_mhz=field("MMCLK"),
                             temperature_c=field("TMPTR"), util_gpu=field("GPUTL"), util_mem=field("MCUTL")))
    return out


@register_backend
class DcgmBackend(Backend):
    kind = "dcgm"
    summary = "DCGM's dcgmi dmon (power, total-energy counter, clocks, temperature, utilisation): multi-node roles"

    @classmethod
    def probe(cls, ctx: BackendContext) -> str | None:
        if (problem := _selection_problem(ctx)) is not None:
            return problem
        if not shutil.which("dcgmi"):
            return "dcgmi is not on PATH (install DCGM, or run its host engine nv-hostengine)"
        try:
            _run(["dcgmi", "discovery", "-l"], ctx.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"dcgmi cannot reach a DCGM host engine: {exc}"
        # a host engine that lists the GPUs may still not report their power to `dmon` (its watches refused, every
        # field N/A): one read as the sampler makes it, so `auto` goes on to NVML rather than sampling nothing
        return _read_problem(cls, ctx)

    def read(self) -> list[GpuSample]:
        now = time.time()
        return parse_dcgmi_dmon(_run(dcgmi_argv(self.ctx.gpu_indices), self.ctx.timeout_s), now)


# ------------------------------------------------------------------------------------------------ simulator


@register_backend
class SimBackend(Backend):
    kind = "sim"
    source = "simulated"
    summary = "the simulator's modelled power from GET /power (NVML units), labelled simulated"

    @classmethod
    def probe(cls, ctx: BackendContext) -> str | None:
        return None if ctx.base_url else "the sim backend needs the simulator's URL"

    def read(self) -> list[GpuSample]:
        url = f"{(self.ctx.base_url or '').rstrip('/')}/power"
        with DIRECT.open(url, timeout=self.ctx.timeout_s) as resp:  # the simulator's own URL: never a proxy
            doc = json.loads(resp.read().decode() or "{}")
        return parse_sim_power(doc, time.time())


def parse_sim_power(doc: Mapping[str, Any], now: float) -> list[GpuSample]:
    """The simulator's `/power` document (NVML's units: mW, mJ) as samples in SI units."""
    return [_sim_sample(now, str(g.get("index")), first_number(g.get("power_usage_mw")),
                        first_number(g.get("total_energy_consumption_mj")), first_number(g.get("clock_sm_mhz")),
                        first_number(g.get("clock_mem_mhz")), first_number(g.get("temperature_c")),
                        first_number(g.get("utilization_gpu")), first_number(g.get("utilization_memory")))
            for g in doc.get("gpus") or ()]


def sim_samples(now: float, gpus: int, *, power_mw: float, energy_mj: float, sm_clock_mhz: float,
                mem_clock_mhz: float, temperature_c: float, util_gpu: float, util_mem: float) -> list[GpuSample]:
    """The samples :func:`parse_sim_power` reads from a document of GPUs 0..`gpus`-1 that all report these figures
    (the model's GPUs draw alike), built without the document: the virtual-time power reads the model at every
    scrape (`sim.power.PowerReading.samples`)."""
    return [_sim_sample(now, str(i), power_mw, energy_mj, sm_clock_mhz, mem_clock_mhz, temperature_c, util_gpu,
                        util_mem) for i in range(gpus)]


def _sim_sample(now: float, gpu: str, mw: float | None, mj: float | None, sm: float | None, mem: float | None,
                temperature: float | None, util_gpu: float | None, util_mem: float | None) -> GpuSample:
    """One GPU's `/power` figures (NVML's units: mW, mJ) as a sample in SI units."""
    return GpuSample(t=now, gpu=gpu, power_w=mw / 1000 if mw is not None else None,
                     energy_j=mj / 1000 if mj is not None else None, sm_clock_mhz=sm, mem_clock_mhz=mem,
                     temperature_c=temperature, util_gpu=util_gpu, util_mem=util_mem)


def backend_kinds() -> tuple[str, ...]:
    return tuple(BACKENDS)
