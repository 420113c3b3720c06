"""Golden acceptance-length (AL) curves: the committed targets every AgentX spec-decode run is pinned to.

InferenceX measures one curve per (model, draft method/model, thinking mode, draft length K) with SPEED-Bench and
recipes hard-code the value; hand-copying is how the wrong number (or the wrong precision's number) ends up in a
recipe. Here the curves are packaged data (verbatim copies of ``golden_al_distribution/*.yaml``), their header
comments are parsed into provenance, and :func:`resolve_acceptance` answers the planner's question together with
where the answer came from, so a policy rule can say "curve measured on NVFP4, recipe serves FP8".

K is the draft length the curve is keyed on: vLLM ``num_speculative_tokens``; for SGLang EAGLE/MTP it is
``--speculative-num-steps`` (with ``--speculative-eagle-topk 1`` and ``--speculative-num-draft-tokens`` = steps + 1),
so the seed recipe's ``--speculative-num-steps 3`` reads qwen3.5 thinking-on K=3 -> 3.39.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.catalog.precision import families_agree, named_format, precision_family, refines, served_format
from llmsweep.catalog.sources import PACKAGED_DIR, build_models, cached, catalog_dirs, load_yaml
from llmsweep.errors import ConfigError

log = logging.getLogger(__name__)

CURVE_DIR = "golden_al"
INDEX_FILE = "golden_al.yaml"
CURVES_ENV_VAR = "LLMSWEEP_GOLDEN_AL_DIR"
"""Directories (pathsep list) of curve files a user collected (`llmsweep al collect`), read next to the packaged
curves and the catalog directories' ``golden_al/`` folders by `llmsweep al` and the planner alike."""

Method = Literal["mtp", "eagle3", "dspark", "ngram", "draft_model"]
ThinkingMode = Literal["thinking_on", "thinking_off"]

#: How recipes and engines spell a draft method -> the curve family it reads. SGLang spells native MTP "EAGLE"
#: (and older releases "NEXTN"); both use the model's own MTP head, so they read the MTP curve.
METHOD_ALIASES: dict[str, Method] = {
    "mtp": "mtp",
    "eagle": "mtp",
    "nextn": "mtp",
    "deepseek_mtp": "mtp",
    "qwen3_next_mtp": "mtp",
    "eagle3": "eagle3",
    "dspark": "dspark",
    "ngram": "ngram",
    "draft_model": "draft_model",
}

def normalise_method(method: str) -> Method | None:
    """Map a method spelling (``mtp``, ``EAGLE``, ``nextn``, ``eagle3``, ``dspark``) to a curve family; else None."""
    return METHOD_ALIASES.get(method.strip().lower().replace("-", "_"))


def normalise_thinking(thinking: bool | str) -> ThinkingMode:
    """``True``/``"on"``/``"thinking_on"`` -> thinking_on; ``False``/``"off"``/``"thinking_off"`` -> thinking_off."""
    if isinstance(thinking, bool):
        return "thinking_on" if thinking else "thinking_off"
    text = thinking.strip().lower().replace("-", "_")
    if text in {"on", "true", "yes", "1", "thinking_on", "thinking"}:
        return "thinking_on"
    if text in {"off", "false", "no", "0", "thinking_off", "none"}:
        return "thinking_off"
    raise ConfigError(f"thinking mode {thinking!r} is not understood", fix="use on|off (or thinking_on|thinking_off)")


def stated_precision(text: str) -> str:
    """The precision a collected curve's `precision:` line states: its first word, lower-case (``bf16 (config.json of
    /models/m)`` and ``BF16 (recipe)`` both state bf16); the rest says where it was read."""
    return (text.split() or [""])[0].lower()


class CurveIndexEntry(BaseModel):
    """What the index says about one curve file (the body says only checkpoint -> mode -> K -> AL)."""

    model_config = ConfigDict(extra="forbid")

    model_prefix: str
    method: Method
    variant: str | None = Field(default=None, description="Distinguishes curves of one family, e.g. 'gqa'.")
    draft_model: str | None = Field(default=None, description="HF id of the draft heads; None for a native MTP head.")
    default: bool = Field(default=True, description="Picked when the caller names no draft model or variant.")


class Sampling(BaseModel):
    """Sampling settings of one thinking mode, as the curve header states them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params: dict[str, float | int | str] = Field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    raw: str = ""


class GoldenCurve(BaseModel):
    """One golden AL curve with its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="File stem, e.g. 'qwen3.5_mtp'.")
    file: str
    model_prefix: str
    method: Method
    variant: str | None = None
    draft_model: str | None = None
    default: bool = True
    checkpoint: str = Field(description="Model key of the curve body: the checkpoint the curve was measured on.")
    precision_measured: str | None = Field(description="Checkpoint precision (nvfp4, fp8, fp4…); None if unknown.")
    precision_basis: Literal["checkpoint", "header", "script", "unknown"] = Field(
        description="Where precision_measured comes from: the checkpoint id, the header's `precision:` line (curves "
        "`llmsweep al collect` wrote), or the generating script's name."
    )
    hardware: str | None = None
    engine: str | None = None
    source: str | None = Field(default=None, description="URL of the GitHub Actions run that measured the curve.")
    dataset: str | None = None
    output_len: int | None = None
    sampling_common: dict[str, float | int | str] = Field(default_factory=dict)
    sampling: dict[str, Sampling] = Field(default_factory=dict, description="Per thinking mode.")
    speculative_config: dict[str, str] = Field(default_factory=dict)
    script: str | None = None
    k_meaning: str | None = None
    notes: list[str] = Field(default_factory=list, description="The header's `note:` lines (how it was measured).")
    simulated: bool = Field(default=False, description="Collected on llmsweep's simulator: a modelled AL, not a "
                            "measured one (the header's `simulated: yes`).")
    values: dict[ThinkingMode, dict[int, float]]

    @property
    def packaged(self) -> bool:
        """True for a curve shipped with llmsweep; False for one a user collected or copied in."""
        return PACKAGED_DIR in Path(self.file).resolve().parents

    def value(self, thinking: bool | str, k: int) -> float | None:
        return self.values.get(normalise_thinking(thinking), {}).get(k)

    @property
    def modes(self) -> list[str]:
        return sorted(self.values)

    @property
    def ks(self) -> list[int]:
        return sorted({k for per in self.values.values() for k in per})


class AcceptanceResolution(BaseModel):
    """The answer to "which AL does this job pin?", with the curve's provenance attached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    curve: str
    model_prefix: str
    method: Method
    variant: str | None
    draft_model: str | None
    checkpoint: str
    precision_measured: str | None
    precision_basis: str
    requested_precision: str | None
    served_precision: str | None = Field(
        default=None, description="The format the served weights are in, as the curve was matched to it "
        "(`catalog.precision.served_format`): the one the model id names as a token (amd/Qwen3.5-397B-A17B-MXFP4: "
        "mxfp4), else requested_precision.")
    hardware: str | None
    engine: str | None
    source: str | None
    dataset: str | None
    thinking: ThinkingMode
    k: int
    simulated: bool = Field(default=False, description="The curve was collected on the simulator (modelled AL).")
    passed_over: str | None = Field(
        default=None, description="The family's default curve, passed over for this one measured in the precision "
        "the recipe serves.")
    better: list[str] = Field(
        default_factory=list, description="Curves of the same family and draft measured in the served precision that "
        "lack this (thinking, K) cell, as 'id (precision, thinking K…)'; the warning names them.")
    unlike: list[str] = Field(
        default_factory=list, description="Curves measured in the served precision that hold the cell but were "
        "sampled otherwise than this curve states for the thinking mode, as 'id (key value, not value; …)': an AL "
        "depends on the sampling, so they do not stand in for it; the warning names them.")
    simulated_left_out: list[str] = Field(
        default_factory=list, description="Curves collected on the simulator (`al collect --simulate`) in the served "
        "precision that hold the cell, as 'id (file)': a modelled AL never passes over a measured one, so they are "
        "left out; `al` and the warning name them.")
    sampling: dict[str, float | int] = Field(
        default_factory=dict, description="The sampling the answering curve states for this thinking mode "
        "(:func:`stated_sampling`): what a collection must be sampled with to stand in for it; a key it leaves "
        "unstated (not here) was the server's, and a collection sends none.")

    def served_precision_note(self, precision: str) -> str:
        """Why no curve of the served precision answers (for the precision-provenance warning): those lacking the
        cell, those sampled otherwise, or none known; starts with '; '."""
        cell = f"thinking {self.thinking.removeprefix('thinking_')} K={self.k}"
        notes = []
        if self.better:
            notes.append(f"the curve measured in {precision}, {'; '.join(self.better)}, lacks {cell}: collect that "
                         "cell with `llmsweep al collect`")
        if self.unlike:
            notes.append(f"the curve measured in {precision}, {'; '.join(self.unlike)}, was sampled otherwise than "
                         f"{self.curve}: collect it again with `llmsweep al collect`, which samples each thinking "
                         f"mode as {self.curve} states it unless told otherwise")
        if self.simulated_left_out:
            notes.append(f"the curve collected on llmsweep's simulator in {precision}, "
                         f"{'; '.join(self.simulated_left_out)}, is left out: a modelled AL never stands in for a "
                         f"measured one (collect {cell} on an engine with `llmsweep al collect`, without --simulate)")
        if not notes:
            notes.append(f"no curve for {precision} is known (collect one with `llmsweep al collect` rather than "
                         "adjusting by hand)")
        return "; " + "; ".join(notes)

    def precision_mismatch(self, recipe_precision: str | None = None) -> bool:
        """True when the curve was measured in another precision family than the recipe serves (FP8 vs NVFP4, MXFP4
        vs NVFP4; a bare FP4 is told apart from neither: `catalog.precision.families_agree`); `recipe_precision`
        defaults to the served one (:attr:`served_precision`)."""
        wanted = recipe_precision if recipe_precision is not None else self.served_precision or \
            self.requested_precision
        if not wanted or not self.precision_measured:
            return False
        return not families_agree(wanted, self.precision_measured)

    def provenance(self) -> str:
        """One line for findings and `llmsweep al`: curve, checkpoint, hardware, engine, run URL."""
        parts = [f"curve {self.curve}", f"measured on {self.checkpoint}"]
        if self.precision_measured:
            parts.append(f"precision {self.precision_measured}")
        if self.hardware or self.engine:
            parts.append(" / ".join(x for x in (self.hardware, self.engine) if x))
        if self.source:
            parts.append(self.source)
        if self.simulated:
            parts.append("collected on llmsweep's simulator (a modelled AL)")
        return ", ".join(parts)


# --------------------------------------------------------------------------------------------------- header parsing

_MEASURED = re.compile(
    r"Measured on (?P<ckpt>\S+) \((?P<hw>[^,()]+), (?P<engine>\S+)(?P<label>[^,()]*)(?:, draft: (?P<draft>[^)]+))?\)"
)
_METHODS_RX = "mtp|eagle3|dspark|ngram|draft_model"
_FILE_KEYS = (
    re.compile(rf"^(?P<prefix>[^_]+)_(?P<method>{_METHODS_RX})(?:_(?P<variant>.+))?$"),  # qwen3.5_mtp
    re.compile(rf"^(?P<prefix>[a-z0-9.]+?)-(?:.+-)?(?P<method>{_METHODS_RX})(?P<variant>)$"),  # dsv4-pro-0813-dspark
)


def _parse_scalar(text: str) -> float | int | str:
    text = text.strip()
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _parse_params(text: str) -> dict[str, float | int | str]:
    """``temperature: 1.0 | top_p: 0.95``, ``temperature=1.0,`` and ``temp 0.6 top_p 0.95`` all parse."""
    params: dict[str, float | int | str] = {}
    text = text.replace("|", " ").replace(",", " ")
    tokens = re.findall(r"([A-Za-z_]+)\s*[:=]?\s*([-+0-9.eE]+)", text)
    for key, value in tokens:
        params["temperature" if key == "temp" else key] = _parse_scalar(value)
    return params


def _parse_mode_line(rest: str) -> Sampling:
    kwargs: dict[str, Any] = {}
    m = re.search(r"chat_template_kwargs:\s*(\{.*\})", rest)
    before = rest
    if m:
        try:
            kwargs = json.loads(m.group(1))
        except json.JSONDecodeError:
            kwargs = {"raw": m.group(1)}
        before = rest[: m.start()]
    return Sampling(params=_parse_params(before), chat_template_kwargs=kwargs, raw=rest.strip())


def parse_header(lines: list[str]) -> dict[str, Any]:
    """Provenance from a curve file's leading comments (the only place InferenceX records it)."""
    out: dict[str, Any] = {"sampling": {}, "sampling_common": {}, "speculative_config": {}}
    for line in lines:
        text = line.lstrip("#").strip()
        if text.startswith(("Source GitHub Actions run:", "Source:")):
            out["source"] = text.split(":", 1)[1].strip()
        elif text.startswith("dataset:"):
            fields = [f.strip() for f in text.split("|")]
            out["dataset"] = fields[0].split(":", 1)[1].strip()
            common = _parse_params(" ".join(fields[1:]))
            if "output_len" in common:
                out["output_len"] = int(common.pop("output_len"))
            out["sampling_common"] = common
        elif m := re.match(r"(thinking_on|thinking_off)\s*:?\s*(.*)", text):
            out["sampling"][m.group(1)] = _parse_mode_line(m.group(2))
        elif text.startswith("speculative-config:"):
            for item in text.split(":", 1)[1].split("|"):
                if "=" in item:
                    k, v = item.split("=", 1)
                    out["speculative_config"][k.strip()] = v.strip()
        elif m := _MEASURED.search(text):
            out["header_checkpoint"] = m.group("ckpt")
            out["hardware"] = m.group("hw").strip()
            out["engine"] = m.group("engine").strip()
            if m.group("draft"):
                out["header_draft"] = m.group("draft").strip()
        elif text.startswith("draft_model:"):  # collected curves: the recipe's draft model
            out["header_draft"] = text.split(":", 1)[1].strip()
        elif text.startswith(("precision:", "engine:", "hardware:")):
            key, value = text.split(":", 1)
            out["header_" + key] = value.strip()  # collected curves: stated, not guessed from names
        elif text.startswith("simulated:"):
            out["simulated"] = text.split(":", 1)[1].strip().lower().startswith(("yes", "true"))
        elif text.startswith("note:"):
            out.setdefault("notes", []).append(text.split(":", 1)[1].strip())
        elif text.startswith("Auto-generated by"):
            out["script"] = text.removeprefix("Auto-generated by").split("(")[0].strip()
        elif text.startswith("key ="):
            out["k_meaning"] = text
    return out


def _index_from_name(stem: str) -> CurveIndexEntry:
    m = next((m for rx in _FILE_KEYS if (m := rx.match(stem.lower()))), None)
    if not m:
        raise ConfigError(
            f"golden AL curve file '{stem}.yaml' has no index entry and its name does not say prefix and method",
            fix=f"name it <prefix>_<{_METHODS_RX}>[_<variant>].yaml or add it under 'curves:' in {INDEX_FILE}",
        )
    variant = m.group("variant") or None
    return CurveIndexEntry(
        model_prefix=m.group("prefix"),
        method=METHOD_ALIASES[m.group("method")],
        variant=variant,
        default=variant is None,
    )


def load_curve(path: Path, index: CurveIndexEntry | None = None) -> GoldenCurve:
    """Parse one curve file (body + header) into a :class:`GoldenCurve`; malformed bodies name file and fix."""
    body = load_yaml(path)  # first: a file that is not UTF-8 YAML is refused naming it
    text = path.read_text(encoding="utf-8")
    header = parse_header([ln for ln in text.splitlines() if ln.startswith("#")])
    fix = "the body must be '<checkpoint>: {thinking_on|thinking_off: {K: AL}}' with K >= 1 and 1 <= AL <= K + 1"
    if not isinstance(body, dict) or len(body) != 1:
        raise ConfigError(f"{path}: a golden AL file holds exactly one checkpoint key", fix=fix)
    (checkpoint, modes), = body.items()
    if not isinstance(modes, dict) or not modes:
        raise ConfigError(f"{path}: checkpoint '{checkpoint}' has no thinking modes", fix=fix)
    values: dict[ThinkingMode, dict[int, float]] = {}
    for mode, per_k in modes.items():
        if mode not in ("thinking_on", "thinking_off") or not isinstance(per_k, dict):
            raise ConfigError(f"{path}: unexpected key '{mode}' under '{checkpoint}'", fix=fix)
        values[mode] = {}
        for k, al in per_k.items():
            if not isinstance(k, int) or k < 1 or not isinstance(al, (int, float)) or not 1.0 <= float(al) <= k + 1:
                raise ConfigError(f"{path}: {checkpoint}.{mode}.{k}: {al!r} is not a valid (K, AL) pair", fix=fix)
            values[mode][k] = float(al)
    idx = index or _index_from_name(path.stem)
    precision = named_format(str(checkpoint))
    basis: Literal["checkpoint", "header", "script", "unknown"] = "checkpoint"
    if header.get("header_precision"):
        precision, basis = stated_precision(header["header_precision"]), "header"
    elif precision is None and header.get("script"):
        precision = named_format(Path(header["script"]).stem)
        basis = "script" if precision else "unknown"
    elif precision is None:
        basis = "unknown"
    return GoldenCurve(
        id=path.stem,
        file=str(path),
        model_prefix=idx.model_prefix,
        method=idx.method,
        variant=idx.variant,
        draft_model=idx.draft_model or header.get("header_draft"),
        default=idx.default,
        checkpoint=str(checkpoint),
        precision_measured=precision,
        precision_basis=basis,
        hardware=header.get("header_hardware") or header.get("hardware"),
        engine=header.get("header_engine") or header.get("engine"),
        source=header.get("source"),
        dataset=header.get("dataset"),
        output_len=header.get("output_len"),
        sampling_common=header.get("sampling_common", {}),
        sampling=header.get("sampling", {}),
        speculative_config=header.get("speculative_config", {}),
        script=header.get("script"),
        k_meaning=header.get("k_meaning"),
        notes=header.get("notes", []),
        simulated=header.get("simulated", False),
        values=values,
    )


def user_curve_dirs(extra: Sequence[Path | str] = ()) -> tuple[Path, ...]:
    """Directories of user curve files: ``extra`` (a command's ``--curves``), then ``$LLMSWEEP_GOLDEN_AL_DIR``; a
    folder the variable names that is not one is refused naming the variable (not an option never given)."""
    raw = os.environ.get(CURVES_ENV_VAR, "")
    env = [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]
    for folder in env:
        if not folder.is_dir():
            raise ConfigError(f"${CURVES_ENV_VAR} names {folder}, which "
                              f"{'is a file, not a folder' if folder.exists() else 'does not exist'}",
                              fix=f"point ${CURVES_ENV_VAR} at the folder `llmsweep al collect` wrote into, or "
                                  "unset it")
    return tuple(dict.fromkeys([Path(p).expanduser() for p in extra] + env))


def _curve_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")) if folder.is_dir() else []


def packaged_curve_ids() -> frozenset[str]:
    """The ids (file stems) of the curves shipped with llmsweep: names a user curve may not take."""
    return frozenset(path.stem for path in _curve_files(PACKAGED_DIR / CURVE_DIR))


def _refuse_shadowing(path: Path, packaged: frozenset[str]) -> None:
    """A user curve with a packaged curve's stem would replace it whole, losing every cell it does not hold (a
    partial collection named ``qwen3.5_mtp.yaml`` deletes the seed recipe's thinking-on K=3): refused, not swapped."""
    if path.stem in packaged and path.resolve().parent != (PACKAGED_DIR / CURVE_DIR).resolve():
        raise ConfigError(
            f"golden AL curve {path} has the name of the packaged curve {path.stem}: it would replace that curve "
            "and every cell it does not measure",
            fix=f"rename it {path.stem}_<variant>.yaml (e.g. the precision it was measured in: `llmsweep al "
            "collect` names its curves so); a curve measured in the precision a recipe serves wins over the "
            "packaged one where it has the cell")


@cached
def _curves(dirs: tuple[Path, ...], curve_dirs: tuple[Path, ...] = ()) -> dict[str, GoldenCurve]:
    index = {k: v for k, (v, _) in build_models(INDEX_FILE, "curves", CurveIndexEntry, dirs).items()}
    files: dict[str, Path] = {}
    packaged = packaged_curve_ids()
    for d in dirs:
        for path in _curve_files(d / CURVE_DIR):
            _refuse_shadowing(path, packaged)
            files[path.stem] = path
    for folder in reversed(curve_dirs):  # the first directory named wins
        if not folder.is_dir():
            raise ConfigError(f"golden AL curve directory {folder} does not exist",
                              fix=f"point --curves / {CURVES_ENV_VAR} at the folder `llmsweep al collect` wrote into")
        for path in _curve_files(folder):
            _refuse_shadowing(path, packaged)
            files[path.stem] = path
    return {stem: load_curve(path, index.get(stem)) for stem, path in sorted(files.items())}


def list_curves(curve_dirs: Sequence[Path | str] = ()) -> list[GoldenCurve]:
    """Every golden curve, packaged and user-supplied (catalog directories, ``curve_dirs``, the env var), by id."""
    return list(_curves(catalog_dirs(), user_curve_dirs(curve_dirs)).values())


def get_curve(curve_id: str, curve_dirs: Sequence[Path | str] = ()) -> GoldenCurve | None:
    return _curves(catalog_dirs(), user_curve_dirs(curve_dirs)).get(curve_id)


def _prefix_candidates(model_prefix: str, model: str) -> list[str]:
    prefixes = [model_prefix.strip().lower()] if model_prefix else []
    if model:
        try:  # a model id resolves to its family prefix (e.g. DeepSeek-V4-Pro-0813 -> dsv4)
            from llmsweep.catalog.models import get_model

            prefixes.append(get_model(model).prefix)
        except ConfigError:
            pass
    return list(dict.fromkeys(prefixes))


def find_curves(model_prefix: str, method: str, model: str = "",
                curve_dirs: Sequence[Path | str] = ()) -> list[GoldenCurve]:
    """Curves of one model family and draft method (all variants), default curve first, then packaged ones."""
    fam = normalise_method(method)
    if fam is None:
        return []
    prefixes = _prefix_candidates(model_prefix, model)
    found = [c for c in list_curves(curve_dirs) if c.model_prefix in prefixes and c.method == fam]
    # packaged before user curves: a user curve takes over only where it was measured in the served precision
    return sorted(found, key=lambda c: (not c.default, not c.packaged, c.id))


def local_draft(draft_model: str) -> bool:
    """Whether a recipe's `draft-model` is a path on the serving host (``/models/MiniMax-M3-EAGLE3``, ``./heads``,
    ``~/d``, ``a/b/c``) rather than a hub id (``org/name``): no curve header names a path, so which curve such a
    drafter is can only be said by the recipe (`golden-curve`)."""
    text = draft_model.strip()
    return text.startswith(("/", ".", "~")) or text.count("/") > 1


def drafter_conflict(curve: GoldenCurve, served_draft: str | None) -> bool:
    """Whether `curve` measured another drafter than the one the recipe launches (`served_draft`, its `draft-model`):
    both are named, the served one is a hub id (a local path is the recipe's word that the curve is its drafter's)
    and they differ. `golden-curve` chooses among curves of one drafter (Kimi-K3 DSpark's sampling variants), never
    another drafter's acceptance for the one launched (MiniMax-M3's GQA curve, 2.78 at K=3, for the EAGLE3 heads
    whose own curve says 2.83)."""
    return bool(served_draft and curve.draft_model and not local_draft(served_draft)
                and served_draft.strip().lower() != curve.draft_model.lower())


def _pick(curves: list[GoldenCurve], draft_model: str | None, served_draft: str | None = None) -> GoldenCurve | None:
    """Named draft model (HF id), variant tag or curve id wins; otherwise the family's default curve. A curve chosen
    by `golden-curve` that measured another drafter than `served_draft` (the launched `draft-model`,
    :func:`drafter_conflict`) is none: its AL is not the launched drafter's."""
    chosen = _choose(curves, draft_model)
    return None if chosen is not None and drafter_conflict(chosen, served_draft) else chosen


def _choose(curves: list[GoldenCurve], draft_model: str | None) -> GoldenCurve | None:
    if not curves:
        return None
    if draft_model:
        want = draft_model.strip().lower()
        for c in curves:
            if want == c.id.lower() or (c.draft_model and want == c.draft_model.lower()):
                return c
        for c in curves:
            if c.variant and (want == c.variant.lower() or want.endswith("-" + c.variant.lower())):
                return c
        if any(c.draft_model for c in curves):
            # the family's curves name their drafters and this one is none of them: another drafter's curve is no
            # golden AL for it (`golden-al.missing` says so); it had pinned the default drafter's value
            return None
        defaults = [c for c in curves if c.default]
        return defaults[0] if defaults else None
    defaults = [c for c in curves if c.default]
    return defaults[0] if defaults else curves[0]


def _same_draft(a: GoldenCurve, b: GoldenCurve) -> bool:
    """Two curves of one family measure the same drafter (same draft heads; a precision is not a variant of it)."""
    return (a.draft_model or "").lower() == (b.draft_model or "").lower()


def _served_precision(curves: list[GoldenCurve], chosen: GoldenCurve, precision: str) -> list[GoldenCurve]:
    """Curves of the chosen one's family and drafter measured in the precision family the recipe serves (or one not
    told apart from it: `catalog.precision.families_agree`), those measured in that very family first, those
    collected on the simulator among them (:func:`resolve_acceptance` names those, never pins them over a measured
    curve)."""
    if not precision:
        return []
    found = [c for c in curves if c.id != chosen.id and _same_draft(c, chosen) and c.precision_measured
             and families_agree(c.precision_measured, precision)]
    return sorted(found, key=lambda c: precision_family(c.precision_measured or "") != precision_family(precision))


SAMPLING_KEYS = ("temperature", "top_p", "top_k", "presence_penalty")
"""The request parameters an AL depends on that a curve header states."""
INTEGER_KEYS = ("top_k",)
"""Those of :data:`SAMPLING_KEYS` a request sends as an integer (a count of tokens, not a weight)."""


def stated_sampling(curve: GoldenCurve, mode: str) -> dict[str, float | int]:
    """The sampling parameters `curve`'s header states for thinking `mode`, as it states them: its per-mode line
    over its common (dataset) line, numbers only, the keys an AL depends on (:data:`SAMPLING_KEYS`)."""
    params = {**curve.sampling_common, **(curve.sampling[mode].params if mode in curve.sampling else {})}
    return {k: v for k, v in params.items()
            if k in SAMPLING_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)}


def sampling_values(params: dict[str, float | int]) -> dict[str, float]:
    """Stated sampling parameters as compared: floats, presence_penalty 0 when unstated (the API's default, what a
    collection that does not send it ran with)."""
    return {k: float(params.get(k, 0.0)) for k in SAMPLING_KEYS if k in params or k == "presence_penalty"}


def mode_sampling(curve: GoldenCurve, mode: str) -> dict[str, float]:
    """The sampling `curve` states for thinking `mode` (:func:`stated_sampling`), as compared
    (:func:`sampling_values`)."""
    return sampling_values(stated_sampling(curve, mode))


def sampling_differences(candidate: GoldenCurve, reference: GoldenCurve, mode: str) -> list[str]:
    """Each parameter the two curves do not state alike for `mode`, as 'key got, not want': one `reference` states
    that `candidate` states otherwise or not at all, and one `candidate` states that `reference` leaves unstated
    (sent where the reference left it to the server: DSv4's curve states only its temperature)."""
    got, want = mode_sampling(candidate, mode), mode_sampling(reference, mode)

    def said(values: dict[str, float], key: str) -> str:
        return f"{values[key]:g}" if key in values else "unstated"

    return [f"{key} {said(got, key)}, not {said(want, key)}" for key in SAMPLING_KEYS
            if (key in got or key in want) and got.get(key) != want.get(key)]


def reference_curve(model_prefix: str, method: str, model: str = "", draft_model: str | None = None,
                    curve_dirs: Sequence[Path | str] = (), served_draft: str | None = None) -> GoldenCurve | None:
    """The curve :func:`resolve_acceptance` answers from before it looks for one of the served precision: the
    family's default (or the named drafter's). Another curve stands in for it only when sampled as it states for the
    thinking mode, so a collection (`llmsweep al collect`) defaults each mode's sampling to it."""
    return _pick(find_curves(model_prefix, method, model, curve_dirs), draft_model, served_draft)


def other_drafters_curve(model_prefix: str, method: str, model: str, golden_curve: str | None,
                         served_draft: str | None, curve_dirs: Sequence[Path | str] = ()) -> GoldenCurve | None:
    """The curve `golden-curve` names when it measured another drafter than the recipe launches (`served_draft`,
    :func:`drafter_conflict`), which :func:`resolve_acceptance` refuses to answer from; None when there is none."""
    if not golden_curve:
        return None
    named = _choose(find_curves(model_prefix, method, model, curve_dirs), golden_curve)
    return named if named is not None and drafter_conflict(named, served_draft) else None


def variant_siblings(model_prefix: str, method: str, model: str, chosen: str,
                     curve_dirs: Sequence[Path | str] = ()) -> list[GoldenCurve]:
    """The other variants of the curve `chosen` (an id): curves of its family that measured the same drafter under
    another variant tag in the same precision (Kimi-K3's DSpark default and `probabilistic-block`), which
    `golden-curve` chooses between. A curve of another precision is no sampling variant of it: the served precision
    chose between them (`qwen3.5_mtp_fp8` over the NVFP4 default)."""
    family = find_curves(model_prefix, method, model, curve_dirs)
    pick = next((c for c in family if c.id == chosen), None)
    if pick is None:
        return []
    def measured_in(curve: GoldenCurve) -> str | None:  # None: a curve that states no precision
        return precision_family(curve.precision_measured) if curve.precision_measured else None

    return [c for c in family if c.id != pick.id and _same_draft(c, pick) and c.variant != pick.variant
            and measured_in(c) == measured_in(pick)]


def _cells_text(curve: GoldenCurve) -> str:
    modes = ", ".join(f"{m.removeprefix('thinking_')} K {' '.join(str(k) for k in sorted(curve.values[m]))}"
                      for m in sorted(curve.values))
    return f"{curve.id} ({curve.precision_measured}, {modes})"


def resolve_acceptance(
    model_prefix: str,
    model: str,
    precision: str,
    method: str,
    thinking: bool | str,
    k: int,
    draft_model: str | None = None,
    curve_dirs: Sequence[Path | str] = (),
    served_draft: str | None = None,
) -> AcceptanceResolution | None:
    """The golden AL for (model family, draft method and model, thinking mode, K), or None when no curve has it.

    ``method``: ``mtp``/``eagle``/``nextn`` read the model's MTP curve, ``eagle3`` the EAGLE3 curves, ``dspark`` the
    DSpark curves, ``ngram`` and ``draft_model`` their own. ``draft_model`` (HF id such as
    ``Inferact/MiniMax-M3-EAGLE3-GQA``, a variant tag such as ``eagle3-gqa``, or a curve id) selects among curves of
    one family; without it the family's default curve is used. ``served_draft`` is the draft model launched where
    ``draft_model`` is a recipe's `golden-curve`: a curve of another drafter than it answers nothing
    (:func:`drafter_conflict`; a local path is taken at the recipe's word). ``k`` is the draft length (vLLM
    ``num_speculative_tokens``, SGLang ``--speculative-num-steps``).

    A curve of the same family and drafter measured in the precision the recipe serves (the format ``model``'s id
    names as a token, else ``precision``: `catalog.precision.served_format`) wins over the default curve measured in
    another precision family (`catalog.precision.families_agree`: an MXFP4 checkpoint is not NVFP4's), when it has
    the (thinking, K) cell: InferenceX's fix for a curve measured on the wrong checkpoint is a new collection on the
    right one (`llmsweep al collect`), and once it exists it is the curve to pin. The resolution says which curve it
    passed over; when the better curve lacks the cell, it names it.
    A curve collected on the simulator (`al collect --simulate`) never passes over a measured one, nor does one
    sampled otherwise than the default curve states for the thinking mode (:func:`sampling_differences`): an AL
    depends on the sampling (Qwen3.5's curve: temperature 0.6, top_p 0.95, top_k 20 thinking on).
    """
    family = find_curves(model_prefix, method, model, curve_dirs)
    curve = _pick(family, draft_model, served_draft)  # reference_curve's
    if curve is None:
        return None
    mode = normalise_thinking(thinking)
    passed_over: str | None = None
    serves = served_format(model, precision)  # the checkpoint's own format where its id names one
    served = _served_precision(family, curve, serves)
    # a curve collected on the simulator (a modelled AL) never stands in for a measured one: named, not used
    left_out = [c for c in served if c.simulated and not curve.simulated]
    better = [c for c in served if c not in left_out]
    unlike: list[str] = []
    measured = curve.precision_measured
    if measured and serves and refines(serves, measured):
        # the curve answering was measured in a bare format (fp4: InferenceX's curves, read from their script names)
        # that the served one refines (mxfp4): not told apart from it, yet a curve measured in the served format
        # itself says more, and is better than it
        exact = precision_family(serves)
        better = [c for c in better if precision_family(c.precision_measured or "") == exact]
        left_out = [c for c in left_out if precision_family(c.precision_measured or "") == exact]
    if measured and serves and (refines(serves, measured) or not families_agree(measured, serves)):
        having = [c for c in better if c.values.get(mode, {}).get(int(k)) is not None]
        # an AL depends on the sampling: a curve sampled otherwise than the one it would replace is not its stand-in
        alike = [c for c in having if not sampling_differences(c, curve, mode)]
        unlike = [f"{c.id} ({'; '.join(sampling_differences(c, curve, mode))})" for c in having if c not in alike]
        better = [c for c in better if c not in having]
        if alike:
            passed_over, curve = curve.id, alike[0]
            better, unlike = [], []
    else:  # the curve answering was measured in the served precision (or in one the served one does not refine: a
        # bare fp4 recipe may serve NVFP4 or MXFP4): no curve is better than it, nor left out for it
        better, left_out = [], []
    left_out = [c for c in left_out if c.values.get(mode, {}).get(int(k)) is not None and passed_over is None]
    value = curve.values.get(mode, {}).get(int(k))
    if value is None:
        log.debug("curve %s has no %s K=%s (has %s, K %s)", curve.id, mode, k, curve.modes, curve.ks)
        return None
    return AcceptanceResolution(
        value=value,
        curve=curve.id,
        model_prefix=curve.model_prefix,
        method=curve.method,
        variant=curve.variant,
        draft_model=curve.draft_model,
        checkpoint=curve.checkpoint,
        precision_measured=curve.precision_measured,
        precision_basis=curve.precision_basis,
        requested_precision=precision or None,
        served_precision=serves or None,
        hardware=curve.hardware,
        engine=curve.engine,
        source=curve.source,
        dataset=curve.dataset,
        thinking=mode,
        k=int(k),
        simulated=curve.simulated,
        passed_over=passed_over,
        better=[_cells_text(c) for c in better] if passed_over is None else [],
        unlike=unlike,
        simulated_left_out=[f"{c.id} ({c.file})" for c in left_out],
        sampling={k: int(v) if k in INTEGER_KEYS else float(v)  # in SAMPLING_KEYS' order, as the table prints them
                  for k, v in sorted(stated_sampling(curve, mode).items(), key=lambda kv: SAMPLING_KEYS.index(kv[0]))},
    )


# --------------------------------------------------------------------------------------------------- writing


class CurveHeader(BaseModel):
    """What a collected curve file states about itself: the provenance `load_curve` reads back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="Where and when it was collected (first line).")
    checkpoint: str = Field(description="The body's model key: the checkpoint served.")
    method: str = Field(description="Draft method as the engine spells it (ngram, mtp, eagle3…).")
    draft_model: str | None = Field(default=None, description="The draft model served (HF id or path), which keys "
                                    "drafter families (EAGLE3, DSpark); None for a model's own MTP head or n-gram.")
    precision: str = Field(description="Precision of the served weights, and where that was read.")
    hardware: str
    engine: str = Field(description="Engine and version as the server reported them.")
    dataset: str = Field(description="Prompt set: category, origin, prompt count.")
    sampling: dict[ThinkingMode, dict[str, float | int]] = Field(
        description="Per thinking mode, the sampling keys its requests sent (temperature, top_p, top_k, "
        "presence_penalty; a key left to the server is not sent, and not stated): the header states what every mode "
        "shares on the dataset line and the rest on the mode's line.")
    output_len: int
    chat_template_kwargs: dict[ThinkingMode, dict[str, Any]]
    generator: str
    simulated: bool = Field(default=False, description="Collected on llmsweep's simulator (no drafting).")
    notes: list[str] = Field(default_factory=list)


def format_curve(header: CurveHeader, values: dict[ThinkingMode, dict[int, float]]) -> str:
    """A curve file in InferenceX's golden-AL format (header comments, then ``checkpoint: {mode: {K: AL}}`` with two
    decimals), whose header :func:`load_curve` parses back into the same provenance. The sampling every mode of the
    body shares is on the dataset line; a mode's own (Qwen3.5: 0.6/0.95/20 thinking on, 0.7/0.8/20 + presence 1.5
    off) on its line, before its chat-template kwargs, as InferenceX's headers state it."""
    modes = sorted(values)
    per_mode = {m: header.sampling.get(m, {}) for m in modes}
    first = per_mode[modes[0]] if modes else {}
    common = {k: v for k, v in first.items() if all(k in p and p[k] == v for p in per_mode.values())}
    sampling = "".join(f" | {k}: {v}" for k, v in common.items())
    plain = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]*", header.checkpoint)
    key = header.checkpoint if plain else json.dumps(header.checkpoint)
    lines = [
        f"# Source: {header.source}",
        "# Acceptance Length (AL) reference values measured with SPEED-Bench-style prompts.",
        f"# dataset: {header.dataset}{sampling} | output_len: {header.output_len}",
    ]
    for mode in modes:
        own = "".join(f"{k}: {v} | " for k, v in per_mode[mode].items() if k not in common)
        kwargs = header.chat_template_kwargs.get(mode, {})
        lines.append(f"# {mode} {own}chat_template_kwargs: {json.dumps(kwargs, sort_keys=True)}")
    lines += [
        f"# precision: {header.precision}",
        f"# hardware: {header.hardware}",
        f"# engine: {header.engine}",
        *([f"# draft_model: {header.draft_model}"] if header.draft_model else []),
        *(["# simulated: yes (llmsweep's simulator drafts nothing: these ALs are its acceptance model, not a "
            "measurement)"] if header.simulated else []),
        *(f"# note: {note}" for note in header.notes),
        f"# Auto-generated by {header.generator}",
        "#",
        f"# key = num_speculative_tokens ({header.method} level); value = golden AL = 1 + accepted / drafts "
        "(counter deltas over the cell's run, concurrency 1, a fresh server per cell)",
        f"{key}:",
    ]
    for mode in sorted(values):
        lines.append(f"  {mode}:")
        lines += [f"    {k}: {values[mode][k]:.2f}" for k in sorted(values[mode])]
    return "\n".join(lines) + "\n"


def read_curve_header(path: Path) -> tuple[CurveHeader, GoldenCurve]:
    """The :class:`CurveHeader` a collected curve file states (the inverse of :func:`format_curve`), with the curve it
    heads; a file whose header lacks a line `llmsweep al collect` writes (an InferenceX curve) is refused, naming it."""
    curve = load_curve(path)
    lines = [ln.lstrip("#").strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("#")]
    header = parse_header(lines)
    generator = next((ln.removeprefix("Auto-generated by").strip() for ln in lines if ln.startswith("Auto-gen")), "")
    level = re.search(r"\((\S+) level\)", header.get("k_meaning") or "")
    stated = {"source": header.get("source"), "precision": header.get("header_precision"),
              "hardware": header.get("header_hardware"), "engine": header.get("header_engine"),
              "dataset": header.get("dataset"), "output_len": header.get("output_len"),
              "key = num_speculative_tokens (METHOD level)": level}
    missing = [name for name, value in stated.items() if value is None]
    if missing:
        raise ConfigError(f"{path}: its header does not state {', '.join(missing)}, as a curve `llmsweep al collect` "
                          "wrote does", fix="name a curve file that `llmsweep al collect` wrote")
    assert level is not None
    return CurveHeader(
        source=header["source"], checkpoint=curve.checkpoint, method=level.group(1),
        draft_model=header.get("header_draft"),
        precision=header["header_precision"], hardware=header["header_hardware"], engine=header["header_engine"],
        dataset=header["dataset"], sampling={m: stated_sampling(curve, m) for m in curve.values},
        output_len=header["output_len"],
        chat_template_kwargs={m: curve.sampling[m].chat_template_kwargs for m in curve.values if m in curve.sampling},
        generator=generator or "unknown", simulated=curve.simulated, notes=curve.notes), curve
