"""Complete an existing golden-AL curve with a new collection's cells (`llmsweep al collect --merge-into CURVE`).

Two collections make one curve only when they measured the same thing: the same model family, draft method and
checkpoint, the same served precision, hardware and engine, the same prompt set and output length, the same sampling
and chat-template kwargs for a thinking mode both measured, and both real (or both simulated). Precision, hardware
and engine are compared as what they identify, not as the text that also says where they were read (:data:`IDENTITY`):
`fp8 (config.json of /models/q)` and `fp8 (recipe)` are one precision, `1 x NVIDIA H200 (nvidia-smi)` and `h200
(runner label; ...)` one GPU, `vllm 0.26.0 (reported by /version)` and `vllm 0.26.0 (image tag; ...)` one engine. A
thinking mode the curve does not hold yet joins with its own sampling and kwargs (Qwen3.5 samples thinking on and off
differently), and the header keeps each mode's. :func:`differences` says what differs; :func:`merge` writes the
union: a new cell replaces the curve's cell of the same (thinking, K) and a note says so with both values, the
`Source:` line names every collection that still holds a cell (host, time, evidence, and which cells), and the notes
of both are kept, less those a measured cell makes untrue.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from llmsweep.alcollect.prompts import DIGEST_WORD
from llmsweep.alcollect.settings import Replacement
from llmsweep.catalog.golden import CurveHeader, ThinkingMode, normalise_method, sampling_values, stated_precision
from llmsweep.catalog.precision import precision_family

Cell = tuple[ThinkingMode, int]
Values = dict[ThinkingMode, dict[int, float]]

COMPARED: tuple[str, ...] = ("checkpoint", "draft_model", "precision", "hardware", "engine", "dataset", "output_len",
                             "simulated")
"""The header fields two collections must share to be one curve (method, model prefix, and the per-mode sampling and
kwargs apart: compared for the modes both hold)."""
REPORTED = ("hardware", "engine")
"""What only the servers say (nvidia-smi, /version): compared after measuring; the rest is compared before."""
BEFORE_MEASURING = tuple(f for f in COMPARED if f not in REPORTED)


def precision_identity(text: str) -> str:
    """The precision a `precision:` line identifies, as a curve is matched to a recipe: the family of the precision it
    states (`catalog.golden.stated_precision`, `catalog.precision.precision_family`: ``fp8 (config.json of
    /models/q)`` and ``FP8 (recipe)`` are fp8; nvfp4 and mxfp4 two families), whatever path or record it was read
    from. Compared as equal, not as `families_agree`: a bare fp4 line would let one curve hold NVFP4 cells and MXFP4
    cells (`--precision` states the one served)."""
    return precision_family(stated_precision(text))


def hardware_identity(text: str) -> tuple[bool, str]:
    """The GPU a `hardware:` line identifies (`collect._hardware_text` writes it): whether the simulator stood in for
    it, and the SKU the hardware catalog knows its name by (`catalog.hardware.hardware_for_runner`, word by word:
    ``1 x NVIDIA H200 (nvidia-smi)`` and ``h200 (runner label; not read from the host)`` are both h200); a line that
    names no catalogued SKU is its whole text."""
    from llmsweep.catalog.hardware import hardware_for_runner

    words = text.split()
    sku = next((spec.id for word in words if (spec := hardware_for_runner(word)) is not None), None)
    return words[:1] == ["simulated"], sku or text.strip()


def engine_identity(text: str) -> str:
    """The engine and version an `engine:` line identifies (`collect._engine_text` writes `vllm 0.26.0 (reported by
    /version)` or `vllm 0.26.0 (image tag; the server reported no version)`): the words before the parenthesis that
    says where the version was read. An unknown version stays unknown, so it never passes for a known one."""
    return " ".join(text.split(" (", 1)[0].lower().split())


IDENTITY: dict[str, Callable[[str], object]] = {"precision": precision_identity, "hardware": hardware_identity,
                                                "engine": engine_identity}
"""Header fields compared as what they identify (their text also says where each was read); others as written."""

_DIGEST = re.compile(rf", {DIGEST_WORD} [0-9a-f]{{12}}\)$")


def same_dataset(theirs: str, ours: str) -> bool:
    """Whether two `dataset` lines name one prompt set: as written, digest of the prompts sent included
    (`prompts.PromptSet.describe`); a line written before the digest was recorded is compared without the other's
    digest (origin and count only: what could be compared then)."""
    if bool(_DIGEST.search(theirs)) != bool(_DIGEST.search(ours)):
        return _DIGEST.sub(")", theirs) == _DIGEST.sub(")", ours)
    return theirs == ours

GENERATOR = "llmsweep al collect"
_CELLS = r"(?:thinking_(?:on|off) K=\d+(?: \d+)*(?:, )?)+"
_ENTRY = re.compile(rf"(?:^|; )(?P<cells>{_CELLS}) (?P<text>.*?)(?=; {_CELLS} |$)")


class Collected(BaseModel):
    """One curve as a collection states it: the family its file name keys, the header, the body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_prefix: str
    header: CurveHeader
    values: Values

    @property
    def cells(self) -> set[Cell]:
        return {(m, k) for m, per in self.values.items() for k in per}


class Collection(BaseModel):
    """A collection named in a curve's `Source:` line ("on HOST at TIME (evidence: DIR)") and the cells it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    cells: frozenset[tuple[str, int]]


class Merged(BaseModel):
    """The union of two collections' cells, with the header that states where each cell came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    header: CurveHeader
    values: Values
    replaced: list[Replacement]


def differences(old: Collected, new: Collected, fields: tuple[str, ...] = COMPARED) -> list[str]:
    """What keeps `new`'s cells out of `old`'s curve, one line per field: field, the curve's value, the new one."""
    found: list[str] = []

    def differ(name: str, theirs: object, ours: object) -> None:
        if theirs != ours:
            found.append(f"{name}: {theirs!r} in the curve, {ours!r} in this collection")

    differ("model prefix", old.model_prefix, new.model_prefix)
    differ("method", normalise_method(old.header.method), normalise_method(new.header.method))
    for name in fields:
        theirs, ours = getattr(old.header, name), getattr(new.header, name)
        identity = IDENTITY.get(name)
        if name == "dataset":
            if not same_dataset(theirs, ours):
                found.append(f"{name}: {theirs!r} in the curve, {ours!r} in this collection")
        elif identity is None:
            differ(name, theirs, ours)
        elif identity(theirs) != identity(ours):  # named as written: the reader sees both lines whole
            found.append(f"{name}: {theirs!r} in the curve, {ours!r} in this collection")
    for mode in sorted(set(old.values) & set(new.header.sampling)):
        theirs, ours = (sampling_values(h.sampling.get(mode, {})) for h in (old.header, new.header))
        keys = [k for k in {**theirs, **ours} if theirs.get(k) != ours.get(k)]
        if keys:
            def said(values: dict[str, float], keys: list[str] = keys) -> str:
                return ", ".join(f"{k} {values[k]:g}" if k in values else f"{k} unstated" for k in keys)
            found.append(f"{mode} sampling: {said(theirs)} in the curve, {said(ours)} in this collection")
    for mode in sorted(set(old.values) & set(new.header.chat_template_kwargs)):
        differ(f"{mode} chat_template_kwargs", old.header.chat_template_kwargs.get(mode, {}),
               new.header.chat_template_kwargs[mode])
    return found


def collections(curve: Collected) -> list[Collection]:
    """The collections the curve's `Source:` line names, each with its cells; a source in no form this module writes
    is one collection holding every cell."""
    source = curve.header.source
    prefix = f"{GENERATOR}, "
    if source.startswith(prefix) and " collections: " in source:
        body = source.split(" collections: ", 1)[1]
        found = [Collection(text=m.group("text"), cells=frozenset(_parse_cells(m.group("cells"))))
                 for m in _ENTRY.finditer(body)]
        if found:
            return found
    text = source.removeprefix(f"{GENERATOR} ") if source.startswith(f"{GENERATOR} on ") else source
    return [Collection(text=text, cells=frozenset(curve.cells))]


def _parse_cells(text: str) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for part in text.split(", "):
        mode, _, ks = part.partition(" K=")
        out |= {(mode, int(k)) for k in ks.split()}
    return out


def cells_text(cells: set[tuple[str, int]] | frozenset[tuple[str, int]]) -> str:
    """``thinking_off K=1 2 3, thinking_on K=2``."""
    modes = sorted({m for m, _ in cells})
    return ", ".join(f"{m} K={' '.join(str(k) for k in sorted(k for mm, k in cells if mm == m))}" for m in modes)


def source_line(entries: list[Collection]) -> str:
    """One collection: ``llmsweep al collect on HOST at TIME (evidence: DIR)``; several: each with its cells."""
    if len(entries) == 1:
        (only,) = entries
        return f"{GENERATOR} {only.text}" if only.text.startswith("on ") else only.text
    return f"{GENERATOR}, {len(entries)} collections: " + "; ".join(
        f"{cells_text(e.cells)} {e.text}" for e in entries)


def _about(note: str, cells: set[Cell]) -> bool:
    """A note that names one of `cells` by its (thinking, K): "not measured: M K=k (…)", "M K=k: …"."""
    return any(note.startswith((f"not measured: {m} K={k} ", f"{m} K={k}: ")) for m, k in cells)


def merge(old: Collected, new: Collected) -> Merged:
    """The curve holding `old`'s cells and `new`'s (`new` winning a cell both hold); the caller has checked
    :func:`differences` is empty."""
    values: Values = {m: dict(per) for m, per in old.values.items()}
    for mode, per in new.values.items():
        values.setdefault(mode, {}).update(per)
    merged_cells = {(m, k) for m, per in values.items() for k in per}
    new_cells = new.cells
    old_entries = collections(old)
    (new_entry,) = collections(new)
    replaced: list[Replacement] = []
    for mode, k in sorted(old.cells & new_cells):
        holder = next((e.text for e in old_entries if (mode, k) in e.cells), old.header.source)
        replaced.append(Replacement(thinking=mode, k=k, old=old.values[mode][k], new=new.values[mode][k],
                                    old_collection=holder))
    entries = [Collection(text=e.text, cells=e.cells - new_cells) for e in old_entries if e.cells - new_cells]
    entries.append(Collection(text=new_entry.text, cells=frozenset(new_cells)))

    def untrue(note: str) -> bool:  # "not measured: M K=k" of a cell the curve now holds
        return note.startswith("not measured: ") and _about(note, merged_cells)

    notes = [n for n in old.header.notes if not _about(n, new_cells) and not untrue(n)]
    notes += [n for n in new.header.notes if not untrue(n)]
    notes += [f"{r.thinking} K={r.k}: {r.new:.2f} from the collection {new_entry.text} replaces {r.old:.2f} from "
              f"the one {r.old_collection}" for r in replaced]
    header = new.header.model_copy(update={
        "source": source_line(entries),
        "sampling": {**old.header.sampling, **new.header.sampling},
        "chat_template_kwargs": {**old.header.chat_template_kwargs, **new.header.chat_template_kwargs},
        "notes": list(dict.fromkeys(notes)),
    })
    return Merged(header=header, values=values, replaced=replaced)
