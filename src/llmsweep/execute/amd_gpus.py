"""What `amd-smi` says of this host's AMD GPUs: each GPU's marketing name, the driver version, the enforced power cap
and the GFX clocks. `execute.lifecycle.observe_runtime` reads them where nvidia-smi is absent, as it reads
`nvidia-smi --query-gpu` on NVIDIA hosts, and narrows them to the server's GPUs with the same selection.

Two calls, one per fact family, each best effort (an error, a timeout or a document this module cannot read leaves
its facts None, never a failure): `amd-smi static --asic --driver --limit --json` (the identity and the power cap;
asked again without `--limit` when that fails, as a virtual machine's amd-smi has no `--limit`), and, only for the
GPUs' state, `amd-smi metric --clock --json`. An amd-smi that hung (`visible.run_gpu_tool`: 30 s) is not asked again
in the same step (`visible.gpu_tool_step`: the recording of one server's GPUs): its facts are None at once; the next
server's recording asks it again.

The JSON shapes, paraphrased (no code copied) from: the ROCm/amdsmi CLI source, `amdsmi_cli/amdsmi_commands.py` and
`amdsmi_logger.py`, at a ROCm 6.0-era revision and at a ROCm 7.x one (the `static_gpu`/`metric_gpu` commands); its
CHANGELOG (the ROCm 6.1.1 entry that split `metric --clock` per engine); a public emulation of amd-smi 7.1's and 7.2's
`static --limit --json` (the `gpu_data` wrapper, the 7.2 `ppt0`/`ppt1` blocks); and the "AMD SMI CLI tool usage"
pages of rocm.docs.amd.com/projects/amdsmi (docs-6.1.2, docs-6.4.2, latest: amd-smi 24.5 to 26.x):

- The document is a list with one object per GPU (ROCm 6.x) or an object whose `gpu_data` holds that list (7.x);
  each object's `gpu` is amd-smi's index of the GPU (`llmsweep.visible.amd_smi_entries`, `amd_smi_index`).
- A value is a plain number (the ROCm 6.0-era amd-smi), ``{"value": 750, "unit": "W"}`` (later releases), or the
  string ``N/A`` where the driver gives none. Anything else reads as None here, and so does a power cap or clock of
  0 (amd-smi's own stand-in for "not reported" in several fields).
- `static --asic`: `asic.market_name` ("AMD Instinct MI300X").
- `static --driver`: `driver.version` (later releases, beside `driver.name`, "amdgpu"); `driver.driver_version`
  in the 6.0-era one.
- `static --limit` (bare metal only): the enforced power cap is `limit.socket_power` (later releases through 7.1,
  beside `max_power`/`min_power`, the range it may be set in), `limit.ppt0.socket_power_limit` (7.2, one block per
  package-power-tracking sensor; `ppt1` all N/A on a GPU without a second one), `limit.power` (the 6.0-era one).
- `metric --clock`: `clock.gfx_0` … `clock.gfx_7` (6.1.1 on: one per graphics engine, up to eight), each with
  `clk`, `min_clk`, `max_clk` (the last two per clock type, so the same for every engine), `clk_locked` and
  `deep_sleep`; an engine that is not running reports N/A. Before 6.1.1 one `clock.gfx` with `cur_clk`, `min_clk`,
  `max_clk` (plain MHz). Recorded here: the first engine that reports a clock (`gfx_0` on a healthy GPU), its `clk`
  as the current clock and `max_clk` as the maximum.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmsweep.visible import amd_smi_entries, amd_smi_index, gpu_tool_step, run_gpu_tool, tool_json

log = logging.getLogger(__name__)

STATIC_ARGV = ("amd-smi", "static", "--asic", "--driver", "--limit", "--json")
"""The identity and the power cap in one call; without `--limit` when that fails (`query_static`)."""
CLOCK_ARGV = ("amd-smi", "metric", "--clock", "--json")
"""The GFX clocks, asked only for a server on this host (`GpuState`)."""


@dataclass(frozen=True, slots=True)
class AmdGpu:
    """One GPU as `amd-smi static` lists it; a field it does not give is None."""

    index: int
    name: str | None
    driver_version: str | None
    power_limit_w: float | None


@dataclass(frozen=True, slots=True)
class GfxClock:
    """One GPU's GFX clock as `amd-smi metric --clock` gives it, MHz; None where it gives none."""

    max_mhz: float | None
    mhz: float | None


def number(value: object) -> float | None:
    """An amd-smi value as a number: a plain number, a ``{"value": n, "unit": u}``, or a numeric string with an
    optional unit (``750 W``); None for ``N/A``, a boolean, an error text or any other shape."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and (m := re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*[A-Za-z/%]*\s*", value)):
        return float(m.group(1))
    return None


def _positive(value: object) -> float | None:
    n = number(value)
    return n if n is not None and n > 0 else None


def _text(value: object) -> str | None:
    """A string field (a name, a version); None for ``N/A``, an empty string or another type."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text if text and text.upper() != "N/A" else None


def _section(entry: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = entry.get(key)
    return value if isinstance(value, dict) else {}


def power_cap_w(limit: Mapping[str, Any]) -> float | None:
    """The enforced power cap of a `static --limit` block, in any of its shapes (module docstring)."""
    ppt0 = limit.get("ppt0")
    if isinstance(ppt0, dict):
        return _positive(ppt0.get("socket_power_limit"))
    for key in ("socket_power", "power"):
        if key in limit:
            return _positive(limit[key])
    return None


def parse_static(text: str) -> dict[int, AmdGpu]:
    """`amd-smi static --asic --driver [--limit] --json`: each GPU by amd-smi's index, in the document's order. A
    GPU object without an index is skipped; a document that is not JSON lists none."""
    gpus: dict[int, AmdGpu] = {}
    for entry in amd_smi_entries(tool_json(text)):
        index = amd_smi_index(entry)
        if index is None:
            continue
        driver = _section(entry, "driver")
        gpus[index] = AmdGpu(index=index, name=_text(_section(entry, "asic").get("market_name")),
                             driver_version=_text(driver.get("version", driver.get("driver_version"))),
                             power_limit_w=power_cap_w(_section(entry, "limit")))
    return gpus


_GFX_ENGINE = re.compile(r"gfx(?:_(\d+))?")


def gfx_clock(clock: Mapping[str, Any]) -> GfxClock:
    """A `metric --clock` block's GFX clock: the first engine (by number) that reports a current or maximum clock."""
    found = [(int(m.group(1) or 0), value) for key, value in clock.items()
             if isinstance(key, str) and (m := _GFX_ENGINE.fullmatch(key.lower())) and isinstance(value, dict)]
    engines = sorted(found, key=lambda engine: engine[0])  # (`gfx` and `gfx_0` both number 0: never compare blocks)
    for _, engine in engines:
        current = _positive(engine.get("clk", engine.get("cur_clk")))
        top = _positive(engine.get("max_clk"))
        if current is not None or top is not None:
            return GfxClock(max_mhz=top, mhz=current)
    return GfxClock(max_mhz=None, mhz=None)


def parse_clocks(text: str) -> dict[int, GfxClock]:
    """`amd-smi metric --clock --json`: each GPU's GFX clock by amd-smi's index."""
    clocks: dict[int, GfxClock] = {}
    for entry in amd_smi_entries(tool_json(text)):
        if (index := amd_smi_index(entry)) is not None:
            clocks[index] = gfx_clock(_section(entry, "clock"))
    return clocks


def _ask(argv: tuple[str, ...]) -> str | None:
    """What amd-smi printed, through `visible.run_gpu_tool` (an amd-smi that hung earlier in this step is not waited
    for again); None when it failed, hung or hung before in the step."""
    try:
        return run_gpu_tool(argv)
    except OSError as exc:
        log.info("could not query amd-smi (check the amdgpu driver and that amd-smi runs): %s", exc)
        return None


def query_static() -> dict[int, AmdGpu] | None:
    """This host's GPUs as `amd-smi static` lists them; None when amd-smi answers neither with nor without
    `--limit` (the GPUs' names matter more than their power cap)."""
    with gpu_tool_step("this reading of the GPUs' names"):  # (part of the caller's step, where it has one)
        for argv in (STATIC_ARGV, tuple(a for a in STATIC_ARGV if a != "--limit")):
            if (out := _ask(argv)) is not None:
                return parse_static(out)
    return None


def query_clocks() -> dict[int, GfxClock]:
    """This host's GPUs' GFX clocks by amd-smi's index; empty when amd-smi does not answer."""
    out = _ask(CLOCK_ARGV)
    return parse_clocks(out) if out is not None else {}
