"""Which GPUs of this host a server is given: the one reader of `CUDA_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES` and
`ROCR_VISIBLE_DEVICES`. The power sampler (`power.backends`) asks :func:`resolve_visible`; the GPUs a job records as
its hardware (`execute.lifecycle.observe_runtime`) and the launch preflight's (`execute.preflight.check_gpus`, and a
role-by-role deployment's shares of the host, `execute.roles.gpu_partition`) ask :func:`select_listed` of the GPUs a
vendor tool listed, which reads the selection with it: all name the same GPUs.

What the runtimes do with the variables, and so what :func:`resolve_visible` does:

- **NVIDIA** (CUDA): only `CUDA_VISIBLE_DEVICES` counts; `HIP_`/`ROCR_VISIBLE_DEVICES` are ignored. An entry is an
  index, a GPU UUID (``GPU-…``) or a unique prefix of one, or a MIG UUID (``MIG-…``, or the older
  ``MIG-GPU-<uuid>/<gi>/<ci>``), which here means the GPU holding the instance. Set and empty, it shows no GPU.
  An index counts the GPUs in CUDA's device order, which is nvidia-smi's (and NVML's: PCI bus order) only under
  `CUDA_DEVICE_ORDER=PCI_BUS_ID`; CUDA's default, `FASTEST_FIRST`, puts the fastest GPU first, another GPU than
  nvidia-smi's first on a host of mixed GPUs. Indices are read here in nvidia-smi's order, so a GPU server llmsweep
  launches on an NVIDIA host runs with `PCI_BUS_ID` (:data:`DEVICE_ORDER`, `execute.preflight.in_bus_order`).
- **AMD** (ROCm): `ROCR_VISIBLE_DEVICES` is applied first, by the ROCr runtime: indices or UUIDs (``GPU-`` and the
  16 hex digits of the GPU's unique id, any case, or a unique prefix of that), surfaced in the variable's order.
  HIP then reads `HIP_VISIBLE_DEVICES`, or `CUDA_VISIBLE_DEVICES` when HIP's is unset or empty (never both): its
  indices count among the GPUs ROCR left (`ROCR_VISIBLE_DEVICES=2,3 HIP_VISIBLE_DEVICES=1` is GPU 3), and a
  ``GPU-…`` entry must name one of those.
- Every runtime stops at the first entry it cannot resolve, hiding it and all after it. So an entry that names no
  GPU of this host (a typo, an ambiguous prefix, a UUID of another machine, a HIP index past what ROCR left) is not
  guessed at: the selection is empty, with a `problem` saying why. GPUs read or named for a server that may not use
  them would be credited to it; "all GPUs" is never the answer to an entry that names none. A negative index
  (`CUDA_VISIBLE_DEVICES=-1`, the usual way to hide every GPU from a process) is such an entry: named first, it hides
  every GPU, and the problem says so.

Which vendor's rules apply is asked only when `HIP_`/`ROCR_VISIBLE_DEVICES` is set (with `CUDA_VISIBLE_DEVICES`
alone both read the same): NVIDIA where `nvidia-smi` is on PATH, else AMD. Indices come out as the vendor tool
numbers the GPUs (`nvidia-smi`, `amd-smi`), which is how the power backends address them; an AMD index entry counts in
HIP's order, mapped to amd-smi's by each GPU's `hip_id` (`Listed.runtime_order`), and where amd-smi is there but does
not answer its listing the entry names no GPU (a problem saying why), never one taken in amd-smi's order. UUIDs are
looked up only when an entry is not an index: NVML, else `nvidia-smi -L`, on NVIDIA; `amd-smi list -e --json` (its
`hip_uuid`, else the serial inside its `uuid`), else `rocm-smi --showuniqueid --json`, on AMD.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from llmsweep.words import count_of, noun

log = logging.getLogger(__name__)

CUDA, HIP, ROCR = "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"
VISIBLE_ENV = (CUDA, HIP, ROCR)
DEVICE_ORDER, BUS_ORDER = "CUDA_DEVICE_ORDER", "PCI_BUS_ID"
"""The variable that sets the order CUDA numbers the GPUs in (its indices in `CUDA_VISIBLE_DEVICES`, and device N of
the process), and its value for nvidia-smi's order, the order every index is read in here (module docstring)."""
Vendor = Literal["nvidia", "amd"]


@dataclass(frozen=True, slots=True)
class GpuTable:
    """The host's GPUs by UUID: every GPU's (and MIG instance's) UUID, lower case -> the GPU's index."""

    vendor: Vendor | None
    uuids: Mapping[str, int]
    source: str
    """What listed them (or why nothing could), for a problem's message."""
    complete: bool = False
    """Whether it holds every UUID the host's tools would list (`nvidia-smi -L`: the GPUs' and their MIG
    instances'), so an entry it lacks is looked up nowhere else; False (`--query-gpu`: no MIG instance) lists the
    host when an entry is not in it."""


@dataclass(frozen=True, slots=True)
class Visible:
    """The GPUs a process is given, in the order its runtime numbers them; None: no variable narrows them (all)."""

    gpus: tuple[int, ...] | None
    problem: str | None = None
    """Why the selection is empty: an entry names no GPU of this host. None when every entry resolved."""


def resolve_visible(env: Mapping[str, str], known: GpuTable | None = None,
                    order: Sequence[int] | None = None) -> Visible:
    """The GPU indices `env`'s `*_VISIBLE_DEVICES` select, as the runtime applies them (module docstring).

    `known`: GPUs the caller has already listed (an `nvidia-smi --query-gpu` CSV); the host is listed only for an
    entry that is not an index and that `known` does not name. `order`: an AMD host's GPUs (the tool's indices) in the
    order ROCr and HIP number them (`Listed.runtime_order`, from amd-smi's `hip_id`): an index entry counts in that
    order, not the tool's; None takes the tool's. One :func:`gpu_tool_step` (or part of the caller's): a tool that
    hangs is waited for once."""
    with gpu_tool_step("this reading of the GPU selection"):
        return _resolve(env, known, order)


def _resolve(env: Mapping[str, str], known: GpuTable | None, order: Sequence[int] | None) -> Visible:
    cuda, hip, rocr = (_value(env, name) for name in VISIBLE_ENV)
    lookup = _Lookup(env, known, order)
    vendor = known.vendor if known is not None and known.vendor is not None else None
    if cuda is None and env.get(CUDA) is not None and hip is None:
        vendor = vendor or host_vendor(env)
        if vendor == "nvidia":  # set and empty: CUDA shows no GPU (HIP reads an empty one as unset)
            return Visible((), f"{CUDA} is set and empty, which hides every GPU from CUDA")
    if hip is None and rocr is None:
        return Visible(None) if cuda is None else _select(CUDA, cuda, lookup)
    vendor = vendor or host_vendor(env)
    if vendor == "nvidia":  # CUDA reads its own variable only
        return Visible(None) if cuda is None else _select(CUDA, cuda, lookup)
    among: tuple[int, ...] | None = None
    if rocr is not None:
        left = _select(ROCR, rocr, lookup)
        if left.problem is not None:
            return left
        among = left.gpus
    name, value = (HIP, hip) if hip is not None else (CUDA, cuda)
    if value is None:
        return Visible(among)
    return _select(name, value, lookup, among=among, rocr=rocr)


def host_vendor(env: Mapping[str, str]) -> Vendor | None:
    """Whose GPUs this host has, by the tools on PATH: nvidia-smi (NVIDIA), amd-smi or rocm-smi (AMD), else None."""
    path = env.get("PATH")
    if shutil.which("nvidia-smi", path=path):
        return "nvidia"
    if shutil.which("amd-smi", path=path) or shutil.which("rocm-smi", path=path):
        return "amd"
    return None


def _value(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name)
    return raw.strip() if raw is not None and raw.strip() else None


class _Lookup:
    """UUID -> index, from `known` first, then (listed once, when first needed) the host's tools."""

    def __init__(self, env: Mapping[str, str], known: GpuTable | None, order: Sequence[int] | None = None) -> None:
        self.env, self.known = env, known
        self._order = tuple(order) if order is not None else None
        self._order_asked = order is not None
        self._order_problem: str | None = None
        self.listed: GpuTable | None = None

    @property
    def order(self) -> tuple[int, ...] | None:
        """The tool's indices in the runtime's order (`resolve_visible`'s `order`), else, on an AMD host, as
        `amd-smi list -e` gives it (asked once, when an index entry first needs it); None: the tool's order (an
        NVIDIA host's, an AMD host's without amd-smi, or an amd-smi that answers without `hip_id`: every reader
        then reads the same order), or none can be read (:attr:`order_problem`)."""
        if not self._order_asked:
            self._order_asked = True
            vendor = self.known.vendor if self.known is not None and self.known.vendor else host_vendor(self.env)
            if vendor == "amd" and (exe := shutil.which("amd-smi", path=self.env.get("PATH"))):
                try:
                    self._order = list_amd_smi(exe).runtime_order
                except OSError as exc:
                    # never amd-smi's order in its stead: the preflight may have read HIP's from its own listing,
                    # and the GPUs recorded and sampled would be others than the ones it checked
                    self._order_problem = str(exc)
        return self._order

    @property
    def order_problem(self) -> str | None:
        """Why HIP's order of an AMD host's GPUs, which an index entry counts in, could not be read: the amd-smi on
        PATH did not answer `list` (it failed, or hung); None when it was read or is the tool's."""
        _ = self.order
        return self._order_problem

    def index(self, entry: str) -> int | None:
        if self.known is not None and ((hit := match_uuid(entry, self.known.uuids)) is not None
                                       or self.known.complete):
            return hit
        if self.listed is None:
            self.listed = list_gpus(self.env)
        merged = {**(self.known.uuids if self.known is not None else {}), **self.listed.uuids}
        return match_uuid(entry, merged)

    def source(self) -> str:
        sources = [t.source for t in (self.known, self.listed) if t is not None]
        return "; ".join(sources) or "no GPU listed"


def _select(name: str, raw: str, lookup: _Lookup, *, among: tuple[int, ...] | None = None,
            rocr: str | None = None) -> Visible:
    """One variable's entries -> GPU indices. `among`: the GPUs ROCR left, which HIP's indices count within."""
    found: list[int] = []
    unknown: list[str] = []
    hidden: list[str] = []
    past: list[str] = []
    unordered: list[str] = []
    negative: list[str] = []
    parts = [p for p in (p.strip() for p in raw.split(",")) if p]
    if parts and _NEGATIVE.fullmatch(parts[0]):  # no GPU index: the runtime stops before any GPU
        return Visible((), f"{name}={raw} hides every GPU ({parts[0]} is no GPU index, and the runtime shows no GPU "
                           "from the first entry that names none)")
    for part in parts:
        if _NEGATIVE.fullmatch(part):  # not a UUID either: nothing to look up
            negative.append(part)
            continue
        if part.isdigit():
            index = int(part)
            if among is not None:
                if index >= len(among):
                    hidden.append(part)
                    continue
                index = among[index]
            elif lookup.order is not None:  # counts in the runtime's order (HIP's id), not the tool's
                if index >= len(lookup.order):
                    past.append(part)
                    continue
                index = lookup.order[index]
            elif lookup.order_problem is not None:  # an order not read is never guessed
                unordered.append(part)
                continue
        else:
            hit = lookup.index(part)
            if hit is None:
                unknown.append(part)
                continue
            if among is not None and hit not in among:
                hidden.append(part)
                continue
            index = hit
        if index not in found:
            found.append(index)
    reasons = []
    if negative:
        reasons.append(f"{', '.join(negative)}, which is no GPU index")
    if unknown:
        reasons.append(f"{', '.join(unknown)}, which no GPU of this host has ({lookup.source()})")
    if past:
        reasons.append(f"{noun(len(past), 'GPU')} {', '.join(past)}, past the "
                       f"{count_of(len(lookup.order or ()), 'GPU')} the runtime numbers on this host")
    if unordered:
        reasons.append(f"{noun(len(unordered), 'GPU')} {', '.join(unordered)} by index, which counts in HIP's order "
                       f"of the GPUs, and that order could not be read ({lookup.order_problem}): amd-smi numbers the "
                       "GPUs its own way, so none is taken in its stead (name the GPUs by UUID, `hip_uuid` in "
                       "`amd-smi list -e`, to select them without it)")
    if hidden:
        reasons.append(f"{', '.join(hidden)}, which is not among the {count_of(len(among or ()), 'GPU')} "
                       f"{ROCR}={rocr} leaves (HIP counts within those)")
    if reasons:
        return Visible((), f"{name}={raw} names " + "; and ".join(reasons))
    return Visible(tuple(found))


_NEGATIVE = re.compile(r"-\d+")


@dataclass(frozen=True, slots=True)
class Listed:
    """A host's GPUs as one vendor tool listed them."""

    tool: str
    """What listed them, as a message names it (`nvidia-smi`, `rocm-smi`, `amd-smi`)."""
    indices: tuple[int, ...]
    """Each GPU's index as the tool numbers it, in its order."""
    uuids: GpuTable | None
    """Their UUIDs as the listing gave them; None: listed by :func:`list_gpus` if an entry is a UUID."""
    models: Mapping[int, str] = field(default_factory=dict)
    """Each GPU's model as the tool names it (`nvidia-smi -L`: `NVIDIA H200`), by index; empty where it names none
    (AMD's list)."""
    runtime_order: tuple[int, ...] | None = None
    """The tool's indices in the order the GPUs' runtime numbers them, where that may differ from the tool's: an AMD
    host's, by each GPU's `hip_id` in `amd-smi list -e` (HIP's device id, in ROCr's enumeration order, which
    `ROCR_VISIBLE_DEVICES` and `HIP_VISIBLE_DEVICES` indices count in; amd-smi numbers the GPUs its own way). None where
    the tool's order is the runtime's (nvidia-smi's, under `CUDA_DEVICE_ORDER=PCI_BUS_ID`) or the listing does not
    say (an amd-smi without `-e`, a GPU without a `hip_id`): index entries are then taken in the tool's order."""


def select_listed(listed: Listed, env: Mapping[str, str]) -> Visible:
    """The GPUs of `listed` a process running with `env` is given, in its runtime's order: every listed GPU when no
    `*_VISIBLE_DEVICES` narrows them (:func:`resolve_visible`, with the listing's UUIDs), else the selection. An empty
    selection with the problem when an entry names no GPU of the host, or names an index the tool does not list (the
    runtime stops at it, hiding it and every GPU named after it: never the GPUs before it and after it)."""
    visible = resolve_visible(env, listed.uuids, listed.runtime_order)
    if visible.problem is not None:
        return visible
    if visible.gpus is None:
        return Visible(listed.indices)
    if missing := [i for i in visible.gpus if i not in listed.indices]:
        named = ", ".join(f"{name}={env[name]}" for name in VISIBLE_ENV if env.get(name, "").strip())
        has = (f"{count_of(len(listed.indices), 'GPU')} on this host ({_span(listed.indices)})" if listed.indices
               else "no GPU on this host")
        return Visible((), f"{named} names {noun(len(missing), 'GPU')} {', '.join(map(str, missing))}, but "
                           f"{listed.tool} lists {has}; the runtime stops at it, hiding it and every GPU named after "
                           "it")
    return visible


def _span(indices: tuple[int, ...]) -> str:
    """`0-7` for consecutive indices, else the indices listed."""
    if len(indices) > 1 and indices == tuple(range(indices[0], indices[0] + len(indices))):
        return f"{indices[0]}-{indices[-1]}"
    return ", ".join(map(str, indices))


def match_uuid(entry: str, table: Mapping[str, int]) -> int | None:
    """The GPU index of a GPU or MIG UUID, or of a unique prefix of one (any case; the old-style
    ``MIG-GPU-<uuid>/gi/ci`` reads its GPU's UUID); None when it names none, or more than one GPU."""
    key = entry.lower()
    if key.startswith("mig-gpu-"):
        key = key.removeprefix("mig-").split("/", 1)[0]
    if key in table:
        return table[key]
    if key.rstrip("-") in ("gpu", "mig"):
        return None
    hits = {index for uuid, index in table.items() if uuid.startswith(key)}
    return hits.pop() if len(hits) == 1 else None


# ------------------------------------------------------------------------------------------------ listing the GPUs


def list_gpus(env: Mapping[str, str]) -> GpuTable:
    """Every GPU's UUID on this host: NVML, `nvidia-smi -L`, `amd-smi list` (:func:`list_amd_smi`), `rocm-smi
    --showuniqueid`, the first that answers; an empty table saying why when none does."""
    why: list[str] = []
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            return GpuTable("nvidia", _nvml_uuids(pynvml), "listed by NVML")
        except Exception as exc:  # NVMLError, or a driver that does not answer: try the tools
            log.debug("NVML could not list GPU UUIDs: %s", exc)
            why.append(f"NVML: {exc}")
    path = env.get("PATH")
    try:
        if exe := shutil.which("nvidia-smi", path=path):
            listed = read_nvidia_smi_list(run_gpu_tool([exe, "-L"])).uuids
            assert listed is not None  # nvidia-smi -L's table is always a whole one
            return listed
    except (OSError, ValueError) as exc:
        why.append(str(exc))
    try:
        if (exe := shutil.which("amd-smi", path=path)) and (table := list_amd_smi(exe).uuids) is not None:
            return table
    except (OSError, ValueError) as exc:
        why.append(str(exc))
    try:
        if exe := shutil.which("rocm-smi", path=path):
            return GpuTable("amd", parse_rocm_smi_unique_ids(run_gpu_tool([exe, "--showuniqueid", "--json"])),
                            "listed by rocm-smi --showuniqueid --json")
    except (OSError, ValueError) as exc:
        why.append(str(exc))
    return GpuTable(None, {}, "; ".join(why) or "neither NVML, nvidia-smi, amd-smi nor rocm-smi is here to list "
                                                 "the GPUs' UUIDs")


GPU_TOOL_TIMEOUT_S = 30.0
"""How long a vendor tool is given to list the GPUs (or answer a query of them) before it is taken to hang."""

@dataclass(slots=True)
class _Step:
    """One step of a run that asks the vendor tools (:func:`gpu_tool_step`): what it is, and the tools that did not
    answer in it (the executable, `_tool_key`, -> what was asked and how long it was waited for)."""

    what: str
    hung: dict[str, str] = field(default_factory=dict)


_STEP: ContextVar[_Step | None] = ContextVar("llmsweep_gpu_tool_step", default=None)


@contextmanager
def gpu_tool_step(what: str) -> Iterator[None]:
    """One step of a run that asks the GPUs' vendor tools — a launch preflight, the recording of one server's GPUs, the
    choice of the GPUs a power sampler reads — named by `what` (`this launch preflight`) for the warning. A tool that
    did not answer within its timeout in the step is not asked again in it (`run_gpu_tool` refuses it at once): a hung
    driver hangs every query, and amd-smi asked `list -e` and then `list`, `static --limit` and then without, waited
    30 s for each. The memory ends with the step: the next one (a later server group's preflight, a later job's
    recording) asks the tool again, as a stall (amd-smi waiting on a server that is initialising) may have passed. A
    step opened inside another is part of it. Outside any step nothing is remembered."""
    if _STEP.get() is not None:
        yield
        return
    token = _STEP.set(_Step(what))
    try:
        yield
    finally:
        _STEP.reset(token)


def _tool_key(exe: str) -> str:
    """The executable a tool's argv[0] runs, as found on PATH (a bare name and its full path are one tool)."""
    return os.path.realpath(shutil.which(exe) or exe)


def hung_in_this_step(exe: str) -> bool:
    """Whether the tool `exe` runs did not answer earlier in the :func:`gpu_tool_step` this runs in."""
    step = _STEP.get()
    return step is not None and _tool_key(exe) in step.hung


def run_gpu_tool(argv: Sequence[str], timeout_s: float | None = None) -> str:
    """What a vendor tool printed on stdout; OSError naming the command when it is missing, exits non-zero or does not
    answer within `timeout_s` (None: :data:`GPU_TOOL_TIMEOUT_S`). A tool that did not answer is not asked again in the
    same :func:`gpu_tool_step`: the OSError says so at once, and the warning that it hung is logged once a step."""
    timeout_s = GPU_TOOL_TIMEOUT_S if timeout_s is None else timeout_s
    said = shlex.join(argv)
    tool = _tool_key(argv[0])
    step = _STEP.get()
    if step is not None and (hung := step.hung.get(tool)) is not None:
        raise OSError(f"`{said}` was not asked: {hung} earlier in {step.what}, and a tool that hung is not waited for "
                      "again in one step")
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        name = os.path.basename(argv[0])
        if step is not None:
            step.hung[tool] = f"`{said}` did not answer within {timeout_s:.0f} s"
            again = (f"{name} is not asked again in {step.what} (the next step, a later server group's preflight or "
                     "recording, asks it again)")
        else:
            again = f"{name} is asked again when next needed"
        log.warning("`%s` did not answer within %.0f s: %s; what it would have said is left unread (a hung GPU driver "
                    "hangs every query; check the driver, `dmesg`)", said, timeout_s, again)
        raise OSError(f"`{said}` did not answer within {timeout_s:.0f} s") from exc
    except OSError as exc:
        raise OSError(f"`{said}` could not run: {exc}") from exc
    if done.returncode != 0:
        output = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise OSError(f"`{said}` failed with exit status {done.returncode}: {output}")
    return done.stdout


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_uuids(nvml: Any) -> dict[str, int]:
    nvml.nvmlInit()
    try:
        table: dict[str, int] = {}
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            table[_text(nvml.nvmlDeviceGetUUID(handle)).lower()] = i
            try:
                migs = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
            except Exception:  # not MIG-capable
                migs = 0
            for j in range(migs):
                try:
                    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
                except Exception:  # an empty slot
                    continue
                table[_text(nvml.nvmlDeviceGetUUID(mig)).lower()] = i
        return table
    finally:
        nvml.nvmlShutdown()


_SMI_GPU = re.compile(r"^GPU (\d+):(?: (.+?) \(UUID: ([^)\s]+)\))?")
_SMI_MIG = re.compile(r"^\s+MIG .*\(UUID: (MIG-[^)\s]+)\)")


def read_nvidia_smi_list(text: str) -> Listed:
    """`nvidia-smi -L`, the one reader of it: every GPU it lists (`GPU N: MODEL (UUID: GPU-…)`), by index in its
    order, its model (`NVIDIA H200`), and each GPU's UUID and those of the MIG instances listed under it -> the GPU's
    index (every UUID the host has: a complete table). A GPU line without a UUID still counts the GPU."""
    indices: list[int] = []
    table: dict[str, int] = {}
    models: dict[int, str] = {}
    gpu: int | None = None
    for line in text.splitlines():
        if m := _SMI_GPU.match(line):
            gpu = int(m.group(1))
            indices.append(gpu)
            if m.group(3) is not None:
                models[gpu] = m.group(2).strip()
                if m.group(3).upper().startswith("GPU-"):
                    table[m.group(3).lower()] = gpu
        elif (m := _SMI_MIG.match(line)) and gpu is not None:
            table[m.group(1).lower()] = gpu
    return Listed("nvidia-smi", tuple(indices), GpuTable("nvidia", table, "listed by nvidia-smi -L", complete=True),
                  models)


def _rocr_uuid(unique_id: str) -> str | None:
    """ROCr's UUID of a GPU (``GPU-`` + its 64-bit unique id as 16 hex digits, lower case here) from the id in hex
    (``0x…`` or bare); None for an id that is absent (`N/A`) or zero (ROCr then matches no UUID)."""
    body = unique_id.strip().lower().removeprefix("gpu-").removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{1,16}", body) or int(body, 16) == 0:
        return None
    return f"gpu-{int(body, 16):016x}"


_AMD_SMI_UUID = re.compile(r"^([0-9a-f]{2})[0-9a-f]{6}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{2}([0-9a-f]{2})"
                           r"-([0-9a-f]{12})$")


def amd_smi_uuid_serial(uuid: str) -> str | None:
    """The ASIC serial (the unique id ROCr's UUID carries) inside amd-smi's UUID. amd-smi builds its UUID as
    ``<serial byte 7><fn><device id>-0000-1000-80<serial byte 6>-<serial bytes 5..0>`` (`amdsmi_uuid_gen`), so
    ``f8ff73bf-0000-1000-80ff-eb47a027de4d`` carries the serial ``f8ffeb47a027de4d``."""
    m = _AMD_SMI_UUID.match(uuid.strip().lower())
    return m.group(1) + m.group(2) + m.group(3) if m else None


def tool_json(text: str) -> object:
    """The JSON document an AMD tool printed (`amd-smi ... --json`, `rocm-smi ... --json`), skipping the lines it
    printed on stdout before it: amd-smi's "WARNING: User is missing the following required groups: render, video"
    (for a user outside those groups: a container, a node whose udev rules grant the GPUs instead), rocm-smi's
    "WARNING: ..." lines. None when there is no document."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[min(starts):])[0]
    except ValueError:
        return None


def _listed_json(text: str) -> object:
    """:func:`tool_json` for a listing; ValueError when there is no document (the next tool is asked)."""
    if (doc := tool_json(text)) is None:
        raise ValueError(f"no JSON document in its output: {text.strip()[:200]!r}")
    return doc


def amd_smi_entries(doc: object) -> list[dict[str, Any]]:
    """The per-GPU objects of an amd-smi `--json` document: ROCm 6.x's amd-smi prints a list of them, 7.x's an
    object whose `gpu_data` holds that list (some builds use another key, so the first list value is taken, and an
    object with none is one GPU's). Anything else holds none."""
    if isinstance(doc, dict):
        wrapped = doc.get("gpu_data")
        doc = wrapped if isinstance(wrapped, list) else next((v for v in doc.values() if isinstance(v, list)), [doc])
    return [entry for entry in doc if isinstance(entry, dict)] if isinstance(doc, list) else []


def amd_smi_index(entry: Mapping[str, Any], key: str = "gpu") -> int | None:
    """amd-smi's index of the GPU an object of its `--json` document describes (its `gpu`: a number, or a decimal
    string; another `key` of the same form, `hip_id`); None when it has none (`N/A`)."""
    raw = entry.get(key)
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    return int(raw.strip()) if isinstance(raw, str) and raw.strip().isdecimal() and raw.strip().isascii() else None


AMD_SMI_LIST_ARGS: tuple[tuple[str, ...], ...] = (("list", "-e", "--json"), ("list", "--json"))
"""How amd-smi is asked for the host's GPUs, in turn: `-e` adds `hip_uuid` (the UUID ROCr and HIP match); an older
amd-smi has no `-e`."""


def read_amd_smi_list(text: str, args: Sequence[str] = AMD_SMI_LIST_ARGS[0]) -> Listed:
    """`amd-smi list [-e] --json` (`args`: how it was asked): every GPU it lists, by its `gpu` index in the document's
    order, and each one's ROCr UUID -> that index, from `hip_uuid` and from the serial inside `uuid` (they agree; an
    amd-smi without `-e` has only the second, and one whose serial fell back to decimal gets the first wrong). The
    document is ROCm 6.x's list of one object per GPU, or 7.x's object that wraps it (`amd_smi_entries`); a GPU's
    `uuid`/`hip_uuid` is `N/A` for a user outside the render and video groups (amd-smi 6.4 on: its index is still
    listed). ValueError when the output holds no JSON document."""
    indices: list[int] = []
    table: dict[str, int] = {}
    hip: dict[int, int | None] = {}
    for entry in amd_smi_entries(_listed_json(text)):
        index = amd_smi_index(entry)
        if index is None:
            continue
        if index not in indices:
            indices.append(index)
            hip[index] = amd_smi_index(entry, "hip_id")
        serial = amd_smi_uuid_serial(str(entry.get("uuid", "")))
        for uuid in (_rocr_uuid(str(entry.get("hip_uuid", ""))), _rocr_uuid(serial) if serial else None):
            if uuid is not None:
                table[uuid] = index
    how = " ".join(args)
    # complete where `-e` gave every GPU's ROCr UUID: no other tool would list one it lacks
    every = "-e" in args and bool(indices) and set(indices) <= set(table.values())
    return Listed("amd-smi", tuple(indices), GpuTable("amd", table, f"listed by amd-smi {how}", complete=every),
                  runtime_order=hip_order(hip))


def hip_order(hip_ids: Mapping[int, int | None]) -> tuple[int, ...] | None:
    """amd-smi's indices in HIP's order, from each GPU's `hip_id` (amd-smi's index -> it): None unless every GPU has
    one and they are 0..N-1 (a listing that numbers some GPUs and not others, or twice, orders none of them)."""
    ids = list(hip_ids.values())
    if not ids or any(i is None for i in ids) or sorted(i for i in ids if i is not None) != list(range(len(ids))):
        return None
    return tuple(sorted(hip_ids, key=lambda index: hip_ids[index] or 0))


def list_amd_smi(exe: str, timeout_s: float | None = None) -> Listed:
    """The host's GPUs as amd-smi `exe` lists them (:func:`read_amd_smi_list`): `list -e --json`, else `list --json`
    (an older amd-smi has no `-e`), the one way amd-smi is asked to list them. OSError saying what each asking
    answered when neither lists them (the tool failed, hung, or printed no JSON document); one that hung is not asked
    the second way."""
    why: list[str] = []
    with gpu_tool_step("this listing of the GPUs"):  # (part of the caller's step, where it has one)
        for args in AMD_SMI_LIST_ARGS:
            argv = [exe, *args]
            try:
                return read_amd_smi_list(run_gpu_tool(argv, timeout_s), args)
            except OSError as exc:
                why.append(str(exc))
                if hung_in_this_step(exe):  # it hung: asked no other way (`run_gpu_tool` would refuse it anyway)
                    break
            except ValueError as exc:  # no JSON document in what it printed
                why.append(f"`{shlex.join(argv)}` did not list the GPUs: {exc}")
    raise OSError("; ".join(why))


def parse_rocm_smi_unique_ids(text: str) -> dict[str, int]:
    """`rocm-smi --showuniqueid --json` (``{"card0": {"Unique ID": "0x…"}}``): each GPU's ROCr UUID -> its index."""
    doc = _listed_json(text)
    table: dict[str, int] = {}
    for card, fields in (doc.items() if isinstance(doc, dict) else ()):
        m = re.fullmatch(r"card(\d+)", str(card))
        if m is None or not isinstance(fields, dict):
            continue
        value = next((str(v) for k, v in fields.items() if "unique" in str(k).lower()), "")
        if (uuid := _rocr_uuid(value)) is not None:
            table[uuid] = int(m.group(1))
    return table
