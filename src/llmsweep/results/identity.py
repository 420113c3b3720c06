"""What a result *is*: the full point identity and the series it belongs to.

InferenceX's compare matched baselines without image, pp/dcp/pcp or offload, and its published AgentX curves mixed
decode methods and offload modes in one series. Here every identity field takes part in point matching, and the
series key keeps spec decoding, offload and source apart, so nothing is mixed silently.

Jobs arrive as `job.json` documents (hyphenated InferenceX keys plus llmsweep fields); imported rows arrive with
underscored InferenceX aggregate keys. Both are normalised through :func:`identity_from_job`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from llmsweep.spec.workload import ScenarioId

if TYPE_CHECKING:
    from llmsweep.metrics.model import Summary

INFERENCEX_AGENTIC_PREFIX = "agentic"
"""How InferenceX tells an agentic row by its `scenario_type` (its results app's `benchmark-mapper.ts`: a scenario
type that starts with this; research/inferencex-wave2-spec §5.3). `agentic_scenario` applies it."""


def agentic_scenario(scenario: str) -> bool:
    """Whether a scenario (a point identity's, `scenario_of`, or an imported row's `scenario_type`) is an agentic
    one, as InferenceX tells them: `agentic-coding` is; a Mooncake replay and a fixed-length point are not."""
    return scenario.startswith(INFERENCEX_AGENTIC_PREFIX)


# Fields that take part in point matching, in display order.
POINT_FIELDS: tuple[str, ...] = (
    "model", "hardware", "engine", "precision", "scenario", "image", "tp", "pp", "dcp", "pcp", "ep", "dp_attn",
    "spec", "offload", "offload_backend", "disagg", "workers", "router", "conc", "isl", "osl", "corpus",
)
SERIES_FIELDS: tuple[str, ...] = ("model", "hardware", "engine", "precision", "scenario", "spec", "offload")
TOPOLOGY_FIELDS: tuple[str, ...] = ("disagg", "workers")
SERVER_FIELDS: tuple[str, ...] = ("tp", "pp", "dcp", "pcp", "ep", "dp_attn")
"""One server's parallelism. A disaggregated point has one per role, said in `workers`; its own values of these are
the defaults (nobody set them), never what ran."""
"""Fields that tell an aggregated point from a disaggregated one: part of a disaggregated series' key, and never
ignored by `compare`."""


@dataclass(frozen=True, slots=True)
class PointIdentity:
    """Every field that makes two measurements the same experiment."""

    model: str = ""
    hardware: str = ""
    engine: str = ""
    precision: str = ""
    scenario: str = ""
    image: str = ""
    tp: int = 1
    pp: int = 1
    dcp: int = 1
    pcp: int = 1
    ep: int = 1
    dp_attn: bool = False
    spec: str = "none"
    offload: str = "none"
    offload_backend: str = ""
    disagg: bool = False
    workers: str = ""
    """Multinode prefill/decode topology, e.g. `P1x(tp4 ep1) D1x(tp8 ep1)`; empty for single node."""
    router: str = ""
    conc: int = 0
    isl: int | None = None
    osl: int | None = None
    corpus: str = ""
    """The trace corpus an agentic or replay point replayed, by the digest its summary read back (`sha256:` and 16
    hex digits); empty for fixed-length points, imported rows and jobs without a result. Two AgentX points at the same
    concurrency on different corpora are different experiments."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def shown(self) -> dict[str, Any]:
        """The fields as a page describes the point: a disaggregated point's parallelism is its `workers`' (per
        role), so the single-server fields (`SERVER_FIELDS`, defaults for it: `tp 1 ep 1`) are left out."""
        return {k: v for k, v in self.as_dict().items() if not (self.workers and k in SERVER_FIELDS)}

    def key(self, ignore: frozenset[str] = frozenset()) -> str:
        """A stable string key over every point field not in `ignore` (for SQL columns and dict keys)."""
        return "|".join(f"{f}={getattr(self, f)}" for f in POINT_FIELDS if f not in ignore)

    def series_key(self) -> str:
        """Series identity. A disaggregated point's series also carries its topology (`disagg` and the workers), so
        it is never drawn, nor compared, on an aggregated curve; an aggregated key is what it always was."""
        key = "|".join(str(getattr(self, f)) for f in SERIES_FIELDS)
        if not (self.disagg or self.workers):
            return key
        return "|".join([key, *(str(getattr(self, f)) for f in TOPOLOGY_FIELDS)])

    def series_label(self) -> str:
        """Short human label: `model · hardware · engine · precision · scenario [+spec] [+offload]`."""
        parts = [self.model_short, self.hardware, self.engine, self.precision, self.scenario_label]
        if self.spec not in ("", "none"):
            parts.append(f"spec={self.spec}")
        if self.offload not in ("", "none"):
            parts.append(f"offload={self.offload}")
        if self.disagg or self.workers:
            parts.append(f"disagg {self.workers}".rstrip())
        return " · ".join(p for p in parts if p)

    @property
    def scenario_label(self) -> str:
        """The scenario as a person reads it: a fixed-length point's lengths apart (`fixed 256/64`, `fixed 8k/1k`;
        the identity's `fixed-25664` runs them together), any other scenario as it is."""
        if self.scenario == scenario_of({"isl": self.isl, "osl": self.osl}) and self.isl and self.osl:
            return f"fixed {_k(self.isl)}/{_k(self.osl)}"
        return self.scenario

    @property
    def image_short(self) -> str:
        """The image as a label names it: its last path part (`sglang-rocm:v0.5.16-rocm720-mi30x-20260730`)."""
        return self.image.rsplit("/", 1)[-1] or "no image"

    @property
    def model_short(self) -> str:
        return self.model.rsplit("/", 1)[-1]

    def topology(self) -> str:
        if self.workers:
            return self.workers
        extra = "".join(f" {k}{v}" for k, v in (("pp", self.pp), ("dcp", self.dcp), ("pcp", self.pcp)) if v != 1)
        return f"tp{self.tp} ep{self.ep}{' dpa' if self.dp_attn else ''}{extra}"


def get_field(doc: Mapping[str, Any], *names: str) -> Any:
    """First present key among spellings (`dcp-size`, `dcp_size`, ...)."""
    for name in names:
        for spelling in (name, name.replace("-", "_"), name.replace("_", "-")):
            if spelling in doc and doc[spelling] is not None:
                return doc[spelling]
    return None


def _name(value: Any) -> str:
    """Objects like `{name, version}` collapse to their name; strings pass through."""
    if isinstance(value, Mapping):
        return str(value.get("name") or value.get("key") or value.get("id") or "")
    return "" if value is None else str(value)


def _int(value: Any, default: int | None) -> int | None:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _worker(doc: Any) -> str:
    if not isinstance(doc, Mapping):
        return ""
    parts = [f"tp{_int(get_field(doc, 'tp'), 1)}", f"ep{_int(get_field(doc, 'ep'), 1)}"]
    if _bool(get_field(doc, "dp-attn")):
        parts.append("dpa")
    parts += [f"{k}{v}" for k in ("pp", "dcp", "pcp") if (v := _int(get_field(doc, k, f"{k}-size"), 1)) != 1]
    return f"{_int(get_field(doc, 'num-worker'), 1)}x({' '.join(parts)})"


def workers_of(job: Mapping[str, Any]) -> str:
    """Prefill/decode worker topology of a multinode job (InferenceX `prefill`/`decode` blocks or flat
    `prefill_tp`… row keys); empty for single node."""
    prefill, decode = get_field(job, "prefill"), get_field(job, "decode")
    if isinstance(prefill, Mapping) or isinstance(decode, Mapping):
        return f"P{_worker(prefill)} D{_worker(decode)}"
    if get_field(job, "prefill_tp") is not None:
        keys = ("num_workers", "tp", "ep", "dp_attention", "pp", "dcp_size", "pcp_size")
        flat = {role: {k: get_field(job, f"{role}_{k}") for k in keys} for role in ("prefill", "decode")}
        for role in flat.values():
            role["num-worker"], role["dp-attn"] = role.pop("num_workers"), role.pop("dp_attention")
        return f"P{_worker(flat['prefill'])} D{_worker(flat['decode'])}"
    return ""


def flag(value: bool) -> str:
    """A boolean as InferenceX's rows spell it: "true" or "false"."""
    return "true" if value else "false"


@dataclass(frozen=True, slots=True)
class DpAttention:
    """Whether a job's attention ran data-parallel, as the job record the run wrote says (never the recipe): one
    value for a single server (`single`), one per role for a disaggregated deployment (`prefill`, `decode`; None for
    a single server). Every exported row (throughput and eval) reads it from here."""

    single: bool = False
    prefill: bool | None = None
    decode: bool | None = None

    @property
    def per_role(self) -> bool:
        return self.prefill is not None or self.decode is not None

    def inferencex(self) -> str:
        """InferenceX's `dp_attention` string: the server's value; a multinode job's roles' value when they agree,
        else `prefill=<x>,decode=<y>` (as `collect_eval_results.py` writes a mixed deployment's)."""
        if not self.per_role:
            return flag(self.single)
        prefill, decode = bool(self.prefill), bool(self.decode)
        return flag(prefill) if prefill == decode else f"prefill={flag(prefill)},decode={flag(decode)}"

    def role_flag(self, role: str) -> bool:
        """InferenceX's `<role>_dp_attention` (`prefill` or `decode`): a boolean, in eval rows and multinode
        throughput rows alike. meta_env.json carries the role fields as booleans (wave-2 spec §1.6) and
        `collect_eval_results.py` copies them into its rows as they are (§1.8); only the top-level `dp_attention` is
        a string (`inferencex`)."""
        if role not in ("prefill", "decode"):
            raise ValueError(f"no role {role!r}: prefill or decode")
        return bool(self.prefill if role == "prefill" else self.decode)


def dp_attention_of(job: Mapping[str, Any]) -> DpAttention:
    """A job's DP attention from its record: a job.json (`dp-attn`, or each worker block's), or an InferenceX row
    (`dp_attention`, or the flat `prefill_dp_attention`/`decode_dp_attention` of a multinode one)."""
    single = _bool(get_field(job, "dp-attn", "dp-attention"))
    prefill, decode = get_field(job, "prefill"), get_field(job, "decode")
    if isinstance(prefill, Mapping) or isinstance(decode, Mapping):
        roles = [_bool(get_field(w, "dp-attn", "dp-attention")) if isinstance(w, Mapping) else None
                 for w in (prefill, decode)]
        return DpAttention(single, roles[0], roles[1])
    flat = [get_field(job, f"{role}_dp_attention") for role in ("prefill", "decode")]
    if any(v is not None for v in flat):
        return DpAttention(single, _bool(flat[0]) if flat[0] is not None else None,
                           _bool(flat[1]) if flat[1] is not None else None)
    return DpAttention(single)


def _conc(job: Mapping[str, Any]) -> int:
    """A result is one concurrency point (`llmsweep run` gives each concurrency of a multinode row its own job); a
    stored job listing several takes its first. A legacy InferenceX agentic row spells its concurrency `users`
    (wave-2 spec §5.3: agentic rows carry `conc`, legacy ones `users`), read when it has no `conc`."""
    conc = get_field(job, "conc")
    if conc is None and agentic_scenario(scenario_of(job)):
        conc = get_field(job, "users")
    if isinstance(conc, (list, tuple)):
        return _int(conc[0], 0) or 0 if conc else 0
    return _int(conc, 0) or 0


LEGACY_OFFLOAD_MODES = {"off": "none"}
"""A legacy InferenceX agentic row's `offload_mode` (`on`/`off`) in the `kv-offloading` vocabulary: `off` is
`none`; `on` stays `on` (the row does not say which tier)."""


def _offload(job: Mapping[str, Any]) -> str:
    """KV offload: `kv-offloading` (`none`, `dram`: ours and InferenceX's current rows), else a legacy InferenceX
    agentic row's `offload_mode` (the app reads offload from `offload_mode`, else `kv_offloading`: wave-2 spec §5.3;
    where a row has both, the descriptor is kept, since it names the tier), else none."""
    offload = _name(get_field(job, "kv-offloading"))
    if not offload and (mode := _name(get_field(job, "offload_mode")).strip().lower()):
        offload = LEGACY_OFFLOAD_MODES.get(mode, mode)
    return offload or "none"


def _router(job: Mapping[str, Any]) -> str:
    router = get_field(job, "router")
    if isinstance(router, Mapping):
        return "@".join(str(router[k]) for k in ("name", "version") if router.get(k))
    return _name(router)


def hardware_of(job: Mapping[str, Any]) -> str:
    """Hardware SKU: the job's `hardware` object/name, else the SKU part of the runner label
    (`cluster:mi300x-amds` → `mi300x`, `b200-multinode` → `b200`, as InferenceX's baseline lookup strips it)."""
    hw = _name(get_field(job, "hardware", "sku"))
    if hw:
        return hw
    runner = _name(get_field(job, "runner", "hw"))
    return runner.split(":", 1)[-1].split("-", 1)[0]


_FIXED_LENGTHS = "fixed-"
"""How a fixed-length point's identity scenario begins, its lengths after it (`fixed-1k1k`: `scenario_of`)."""


def scenario_of(job: Mapping[str, Any]) -> str:
    # What the job sent (a replayed Mooncake trace is not an agentic-coding point), else the matrix's scenario type.
    workload = job.get("workload")
    sent = workload.get("scenario") if isinstance(workload, Mapping) else None
    scenario = _name(sent or get_field(job, "scenario-type", "scenario", "scenario_type"))
    if scenario and scenario != ScenarioId.FIXED_SEQ_LEN:
        return scenario
    isl, osl = _int(get_field(job, "isl"), None), _int(get_field(job, "osl"), None)
    if isl is not None and osl is not None:
        return f"{_FIXED_LENGTHS}{_k(isl)}{_k(osl)}"
    return scenario or "unknown"


def scenario_id_of(scenario: str) -> str:
    """The scenario (`ScenarioId`) a point identity's `scenario` (`scenario_of`) is a point of: `fixed-seq-len` for a
    fixed-length point's `fixed-1k1k`, any other as it is."""
    return ScenarioId.FIXED_SEQ_LEN if scenario.startswith(_FIXED_LENGTHS) else scenario


def _k(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


CORPUS_DIGITS = 16
"""Hex digits of a corpus digest kept in the identity (64 bits: enough to tell corpora apart, short to read)."""


def corpus_of(summary: Any) -> str:
    """The replayed corpus's digest a summary (a `Summary` or its document) recorded, shortened; "" when none."""
    if summary is None:
        return ""
    if isinstance(summary, Mapping):
        workload = (summary.get("provenance") or {}).get("workload") or {}
        digest = workload.get("corpus_digest") if isinstance(workload, Mapping) else None
    else:
        digest = summary.provenance.corpus_digest
    return short_digest(digest) if isinstance(digest, str) else ""


def short_digest(digest: str) -> str:
    """A corpus digest (`sha256:<64 hex>`) as identities keep it: the algorithm and CORPUS_DIGITS hex digits."""
    if not digest:
        return ""
    algo, _, hexdigits = digest.partition(":")
    return f"{algo}:{hexdigits[:CORPUS_DIGITS]}" if hexdigits else digest[:CORPUS_DIGITS]


def identity_from_job(job: Mapping[str, Any], summary: Any = None) -> PointIdentity:
    """Normalise a job.json (or an InferenceX aggregate row) into a PointIdentity; `summary` (the job's, when it has
    one) gives what the run read back: the corpus it replayed."""
    engine = _name(get_field(job, "framework")) or _name(get_field(job, "engine"))
    backend = get_field(job, "kv-offload-backend")
    return PointIdentity(
        model=_name(get_field(job, "model")),
        hardware=hardware_of(job),
        engine=engine,
        precision=_name(get_field(job, "precision")),
        scenario=scenario_of(job),
        image=_name(get_field(job, "image")),
        tp=_int(get_field(job, "tp"), 1) or 1,
        pp=_int(get_field(job, "pp"), 1) or 1,
        dcp=_int(get_field(job, "dcp-size", "dcp"), 1) or 1,
        pcp=_int(get_field(job, "pcp-size", "pcp"), 1) or 1,
        ep=_int(get_field(job, "ep"), 1) or 1,
        dp_attn=dp_attention_of(job).single,
        spec=_name(get_field(job, "spec-decoding")) or "none",
        offload=_offload(job),
        offload_backend=_name(backend),
        disagg=_bool(get_field(job, "disagg")),
        workers=workers_of(job),
        router=_router(job),
        conc=_conc(job),
        isl=_int(get_field(job, "isl"), None),
        osl=_int(get_field(job, "osl"), None),
        corpus=corpus_of(summary),
    )


def identity_from_dict(doc: Mapping[str, Any]) -> PointIdentity:
    """Rebuild from :meth:`PointIdentity.as_dict` output (store round trip)."""
    names = {f.name for f in fields(PointIdentity)}
    return PointIdentity(**{k: v for k, v in doc.items() if k in names})


def gpus_of(job: Mapping[str, Any], identity: PointIdentity) -> int:
    """GPU count for per-GPU normalisation: the job's `gpus` when given, else a multinode InferenceX row's
    num_prefill_gpu + num_decode_gpu, else tp·pp·pcp (dcp uses no GPUs)."""
    gpus = get_field(job, "gpus")
    if isinstance(gpus, (int, float)) and gpus > 0:
        return int(gpus)
    if isinstance(gpus, (list, tuple)) and gpus:
        return len(gpus)
    roles = [_int(get_field(job, f"num_{role}_gpu"), 0) or 0 for role in ("prefill", "decode")]
    if sum(roles) > 0:
        return sum(roles)
    return max(1, identity.tp * identity.pp * identity.pcp)


PER_RUN_WORKLOAD_KEYS: frozenset[str] = frozenset({"seed", "run_id", "concurrency"})
"""Keys of a recorded workload description that are not part of what was measured: the seed and the run-wide
cache-bust marker differ between the repeats of one point by design (each repeat draws its own sample), and the
concurrency is the point identity's."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """What a result measured at its point beyond the point identity: the load the client drove and the workload it
    sent, as the result's summary recorded them. Two results of one point are repeats of one measurement only when
    these are equal: a 900 s window of a recipe is not a repeat of its 1,800 s window.

    From the summary's client options (`RunOptions`): the profiling window (`duration_s`), the profiling request
    budget (`num_requests`: fixed-length prompts per point), the warm-up requests, and the open-loop rate and arrival
    process. From its workload description (`provenance.workload`: the resolved workload config the client or the
    simulator ran: ISL/OSL range ratio, prompt and warm-up counts, agentic warm-up per lane, warm start and idle
    caps, the trace source, synthetic corpus parameters, the replayed corpus's digest), a digest of everything but
    the per-run keys (`PER_RUN_WORKLOAD_KEYS`); "" when the summary records no workload."""

    duration_s: float | None = None
    num_requests: int | None = None
    warmup_requests: int = 0
    request_rate: float | None = None
    arrival: str = ""
    workload: str = ""

    def key(self) -> str:
        """A stable string over every field (part of `ResultPoint.configuration`)."""
        return (f"window={_g(self.duration_s)}|requests={_g(self.num_requests)}|warmup={self.warmup_requests}"
                f"|rate={_g(self.request_rate)}|arrival={self.arrival}|workload={self.workload}")


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def measurement_of(summary: Summary | None) -> Measurement | None:
    """The measurement a summary records; None when it records no client options (a summary from before they were
    recorded, or one imported from elsewhere): such a result is a repeat of nothing, since its window is unknown."""
    from llmsweep.client.config import RunOptions

    prov = summary.provenance if summary is not None else None
    if prov is None or not prov.options:
        return None
    known = {k: v for k, v in prov.options.items() if k in RunOptions.model_fields}  # options a later llmsweep retired
    try:
        options = RunOptions.model_validate(known)
    except ValueError:
        return None
    workload = ""
    if prov.workload:
        kept = {k: v for k, v in prov.workload.items() if k not in PER_RUN_WORKLOAD_KEYS}
        blob = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
        workload = short_digest("sha256:" + hashlib.sha256(blob.encode()).hexdigest())
    return Measurement(duration_s=options.duration_s, num_requests=options.num_requests,
                       warmup_requests=options.warmup_requests, request_rate=options.request_rate,
                       arrival=options.arrival if options.request_rate is not None else "", workload=workload)
