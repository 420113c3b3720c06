"""What every engine adapter shares: flag rendering, the derived-then-recipe merge, secrets, endpoint facts.

An adapter turns a Job into a :class:`LaunchSpec`. It derives what the job implies (parallelism, context length,
speculative decoding, synthetic acceptance, KV offload, agentic sizing, metrics), then applies the recipe's own
`serve.args`/`env`, which win. It also declares what it consumes, so policy can reject what it would silently drop:
flags it marks unsupported, environment of another engine, offload backends and topologies it cannot render.

Who the engine is (id, framework spellings, env prefix, image patterns, acceptance-length spelling, metric prefix) is
its :class:`~llmsweep.engine_ids.EngineIdentity`; the adapter names it once (`identity = SGLANG`) and derives the rest.
"""

from __future__ import annotations

import difflib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from llmsweep.catalog.engines import EngineInfo, get_engine, known_flags
from llmsweep.catalog.images import parse_image
from llmsweep.catalog.version import Version
from llmsweep.engine_ids import EngineIdentity, PinnedAcceptance, foreign_env_prefixes
from llmsweep.engines.checkpoint_kv import CheckpointKvDtype
from llmsweep.engines.launch import (
    LaunchFile,
    LaunchSpec,
    Role,
    RoleKind,
    RoleWorker,
    Topology,
    is_secret_name,
    node_host,
)
from llmsweep.engines.running_cap import dp_running_cap
from llmsweep.errors import ConfigError, ContractError
from llmsweep.plan.job import Job, Worker
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import noun

if TYPE_CHECKING:
    from llmsweep.evals.context import NativeContext

BIND_HOST = "0.0.0.0"
"""Servers bind every interface: a container's port is only reachable from the host that way."""

PORT_FIX = "delete the flag: the executor picks the port and polls it (`serve.port` asks for one)"
HOST_FIX = "delete the flag: the launch binds every interface (a container's port is reachable only that way)"
MODEL_FIX = "delete the flag: the launch serves `model`; serve a local checkpoint with `serve.model-path`"
SERVED_NAME_FIX = ("delete the flag: set `workload.served-model-name`, the name the launch serves and the client "
                   "asks for")
"""The fixes of `serve.launch-conflict`, one per thing the launch decides (`Adapter.launch_flags`)."""

Flags = dict[str, Any]


def tag_version(image: str | None) -> str | None:
    """The engine version an image tag names (`catalog.images.parse_image`); None for a nightly/dev/latest or dated
    tag, an image no engine is recognised in, or a reference that does not parse."""
    if not image:
        return None
    try:
        parsed = parse_image(image).version
    except ConfigError:
        return None
    return str(parsed) if parsed is not None else None


def stated_version(job: Job) -> str | None:
    """The recipe's `serve.engine.version`, if it states one."""
    override = job.serve.engine if job.serve is not None else None
    return override.version if override is not None and override.version else None


def job_version(job: Job) -> str | None:
    """The engine version a job's launch runs: its image tag's, else the recipe's `serve.engine.version`, in the
    version's own spelling where it parses (`v0.5.16` is 0.5.16), so a version compared against releases read is
    found however the recipe writes it."""
    version = tag_version(job.image) or stated_version(job)
    parsed = Version.try_parse(version) if version is not None else None
    return str(parsed) if parsed is not None else version


def norm_flag(flag: str) -> str:
    """`--tp_size` and `--tp-size` are one flag to every engine we render (argparse accepts both spellings);
    `--flag=value` names `--flag`."""
    return "--" + flag.split("=", 1)[0].lstrip("-").replace("_", "-")


def split_flag(flag: str, value: Any) -> tuple[str, Any]:
    """A recipe flag written `--flag=value` (value True: a bare key) is `--flag` with that value, as argparse reads
    it; any other key keeps its value."""
    if "=" in flag and (value is True or value is None):
        name, _, joined = flag.partition("=")
        return name, joined
    return flag.split("=", 1)[0], value


def token_count(value: Any) -> int | None:
    """A flag's value as a whole number (`8192`, `"8192"`, `"+16"`, `"-1"`), read as the engines' argparse `type=int`
    reads a string (Python's int(): a sign, surrounding blanks and `_` digit groups taken, `16k`, `16.5` and `²`
    refused), or None when it is not one. A negative count is returned as such: a caller refuses it where the engine
    does (a page, a pinned pool), and keeps it where the engine gives it a meaning (SGLang's `--chunked-prefill-size
    -1`, no chunking)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


AUTO_CONTEXT = "auto"
"""What :meth:`Adapter.read_context` returns for a context flag that asks the engine to fit the context to its memory
at start-up (vLLM's `--max-model-len auto` or `-1`): the launch fixes no length; the server's own report says it."""


PINNED_POOL_FLAGS: tuple[str, str] = ("--num-gpu-blocks-override", "--kv-cache-memory-bytes")
"""vLLM's flags that pin its KV pool whatever the memory fraction: blocks on each DP rank (`may_override_num_blocks`
replaces the profiled count; it wins over the bytes, which only set the memory the count is profiled from) and bytes
on each GPU (`Worker.determine_available_memory` returns them unprofiled). The simulator serves them
(`engines.sim.SimAdapter._pinned_pool`); the adapters of engines whose parsers define neither (SGLang, TensorRT-LLM,
ATOM) refuse both, each with its own fix (`Adapter.unsupported_args`). SGLang's `--max-total-tokens`, a cap on the
profiled pool, is the simulator's `TRANSLATED`."""


MISSPELLED_RATIO = 0.85
"""How close (difflib's ratio) an unlisted flag must be to a listed one to be called a slip of it: one letter off or
swapped in a flag of 15 or more characters, not a different word."""


MULTINODE_NOT_DISAGG = (
    "a multinode job whose prefill/decode pools are not disaggregated (`disagg: false`) cannot be launched as "
    "planned: llmsweep launches (and simulates) a multinode job only as a disaggregated prefill/decode deployment, "
    "and anything else would run under this job's name"
)
"""Why a multinode job that is not a disaggregated prefill/decode deployment is refused (render, run, simulator)."""
MULTINODE_NOT_DISAGG_FIX = (
    "set `disagg: true` if the pools are a prefill/decode deployment, or plan it only (`matrix`): `run` and "
    "`predict` refuse it rather than run another deployment under its name"
)
"""Its fix: the one `validate`'s finding (`launch.multinode-not-disagg`), `run`'s and `predict`'s refusal
(`MULTINODE_NOT_DISAGG_REFUSAL`) and `render`'s error give."""
MULTINODE_NOT_DISAGG_REFUSAL = ContractError(MULTINODE_NOT_DISAGG, fix=MULTINODE_NOT_DISAGG_FIX).one_line()
"""`engines.launch_refusal`'s answer for such a job, a refused job's reason: the reason with its fix on one line."""

class AmbiguousFlagError(ConfigError):
    """A flag abbreviation that more than one of the engine's flags starts with (argparse refuses it too)."""

    def __init__(self, engine: str, flag: str, candidates: list[str]) -> None:
        self.flag, self.candidates = flag, candidates
        super().__init__(f"{engine} reads `{flag}` as an abbreviation, and it is ambiguous: it could match "
                         f"{', '.join(candidates)}", fix="write the flag in full")


def in_launch(value: Any) -> bool:
    """Whether a flag with this value reaches the launch's argv (:func:`flag_argv` leaves out False and None): a
    switch the recipe turns on (`--enable_chunked_prefill: true`) is in it, one it writes `false` is not."""
    return value is not None and value is not False


def flag_argv(flags: Flags) -> list[str]:
    """Flags to argv: scalar → `--f v`; True → `--f`; False/None → omitted; list → `--f a b`; mapping → compact JSON."""
    argv: list[str] = []
    for flag, value in flags.items():
        if not in_launch(value):
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [flag, str(value)]
    return argv


def recipe_flag_order(args: Flags) -> Flags:
    """The recipe's flags with valued flags first and bare switches last, each group in recipe order."""
    valued = {k: v for k, v in args.items() if v is not True}
    switches = {k: v for k, v in args.items() if v is True}
    return {**valued, **switches}


@dataclass(frozen=True)
class Conflict:
    """A recipe flag that overrides a flag the adapter derives from the job's topology."""

    flag: str
    derived: Any
    recipe: Any


@dataclass(frozen=True)
class PromptLimit:
    """The longest prompt a launch accepts where its engine refuses a longer one outright instead of chunking it
    (TensorRT-LLM without chunked prefill: a prompt over `max_num_tokens` is a 400)."""

    tokens: int
    """Prompts of more tokens are refused."""
    flag: str
    """The engine's flag for the budget (where a recipe raises it)."""
    why: str
    """Where the limit comes from, in words: the flag (the recipe's or the engine's default) and the missing switch."""
    message: str
    """The engine's own error text for a refused prompt, `{prompt}` the tokens it counts (`str.format` field)."""
    fix: str
    """How a recipe lifts it."""
    per: int = 1
    """What the engine divides a prompt's tokens by before it compares them (TensorRT-LLM: its context-parallel
    ranks); `tokens` is already the limit in prompt tokens."""

    def refusal(self, prompt_tokens: int) -> str | None:
        """The engine's error for a prompt of `prompt_tokens` tokens; None when it takes it."""
        if prompt_tokens <= self.tokens:
            return None
        return self.message.format(prompt=prompt_tokens / self.per)


@dataclass
class Derived:
    """What an adapter derives from a job before the recipe's own flags apply."""

    args: Flags = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    files: list[LaunchFile] = field(default_factory=list)
    """Files the engine reads at start-up, written beside the launch (argv names them `{launch_dir}/NAME`)."""
    side_ports: dict[str, int] = field(default_factory=dict)
    """Environment variables that hold a port the server listens on besides its serving port → how many
    consecutive ports from it it binds (`LaunchSpec.side_ports`)."""


DEFAULT_GPUS_PER_NODE = 8
"""GPUs per node assumed for a runner the fleet catalog does not describe (the topology notes say so)."""
DYNAMO_FRONTEND_PORT = 8000
"""NVIDIA Dynamo's frontend HTTP port as InferenceX's srt-slurm recipes use it (wave-2 spec §6.3)."""
DIST_INIT_PORT = 20000
"""Port the first node of a multi-node worker listens on for its peers' process-group rendezvous (unverified)."""
DYNAMO_WORKER_PORT = DYNAMO_FRONTEND_PORT + 1
"""Where an engine's workers serve under Dynamo when their usual port is the frontend's (the frontend shares node 0
with the first prefill worker)."""


@dataclass(frozen=True)
class RoleContext:
    """Which worker of a disaggregated job an adapter renders: its role, index, nodes, and the job-wide choices."""

    kind: RoleKind
    index: int
    nodes: tuple[int, ...]
    transfer: str
    """The KV-transfer backend in the engine's spelling."""
    dynamo: bool
    """Launched under NVIDIA Dynamo (framework `dynamo-*`): `python3 -m dynamo.<engine>` workers and its frontend."""
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    """GPUs per node the placement assumed (`worker_nodes`)."""
    prefill_nodes: tuple[tuple[int, ...], ...] = ()
    """The nodes of each prefill worker, in index order (where the KV a decode worker takes comes from)."""

    @property
    def head(self) -> str:
        """The host placeholder of the worker's first node."""
        return node_host(self.nodes[0])


def worker_job(job: Job, worker: Worker, kind: RoleKind) -> Job:
    """The job as one worker of a multinode pool sees it: a single server with that worker's parallelism.

    `topology()`, the GPU count and every derived flag then read the worker's own TP/PP/EP/DP-attention. Only the
    prefill pool offloads KV to host memory (the DRAM budget is one prefill replica's, `plan.dram`): a decode worker
    sees no offload (SGLang's decode server runs without the radix cache that HiCache extends)."""
    update: dict[str, object] = {
        "multinode": False, "tp": worker.tp, "pp": worker.pp, "ep": worker.ep, "dp_attn": worker.dp_attn,
        "dcp_size": worker.dcp_size, "pcp_size": worker.pcp_size, "gpus": worker.gpus_per_replica,
    }
    if kind == "decode" and job.kv_offloading not in (None, "none"):
        update.update(kv_offloading="none", kv_offload_backend=None, total_cpu_dram_gb=None)
    return job.model_copy(update=update)


def worker_nodes(job: Job, gpus_per_node: int) -> dict[RoleKind, list[tuple[int, ...]]]:
    """Where each prefill and decode worker of a multinode job lands, as node indices within its allocation: each
    worker takes ceil(its GPUs / GPUs per node) nodes of its own, prefill workers first (the one placement rule that
    `render_topology` and the simulator's disaggregated model both read)."""
    assert job.prefill is not None and job.decode is not None
    out: dict[RoleKind, list[tuple[int, ...]]] = {}
    next_node = 0
    pools: tuple[tuple[RoleKind, Worker], ...] = (("prefill", job.prefill), ("decode", job.decode))
    for kind, worker in pools:
        per = math.ceil(worker.gpus_per_replica / gpus_per_node)
        nodes: list[tuple[int, ...]] = []
        for _ in range(worker.num_worker):
            nodes.append(tuple(range(next_node, next_node + per)))
            next_node += per
        out[kind] = nodes
    return out


def settings_env(worker: Worker) -> dict[str, str]:
    """A worker's InferenceX `additional-settings` (`NAME=VALUE` lines its launch script reads) as environment."""
    out: dict[str, str] = {}
    for item in worker.additional_settings or []:
        name, sep, value = item.partition("=")
        if sep:
            out[name.strip()] = value
    return out


ROW_DRAFT_STEPS = "DECODE_MTP_SIZE"
"""The additional setting an InferenceX multinode row's decode worker reads as its MTP draft steps (amd-master: 1-3
per row within one key)."""


def row_draft_steps(job: Job) -> int | None:
    """The draft steps a multinode row's decode worker runs in InferenceX (its `DECODE_MTP_SIZE`), None where the row
    names none."""
    size = settings_env(job.decode).get(ROW_DRAFT_STEPS, "").strip() if job.decode is not None else ""
    return int(size) if size.isdigit() and int(size) > 0 else None


def with_settings(spec: LaunchSpec, settings: dict[str, str]) -> LaunchSpec:
    """A worker's launch with its InferenceX additional-settings (:func:`settings_env`) as environment, and notes that
    say which were passed: one the launch already sets otherwise (`serve.env`, or what the adapter derives for the
    worker, e.g. its side-channel port) keeps the launch's value and is named as not passed (policy
    `serve.settings-conflict` refuses the job); a secret-named one is passed by name from the caller's environment,
    its value never written (policy `serve.secret-value` refuses a written value)."""
    if not settings:
        return spec
    secrets = set(spec.secret_env)
    passed: dict[str, str] = {}
    held: list[str] = []
    by_name: list[str] = []
    for name, value in settings.items():
        if is_secret_name(name, secrets):
            by_name.append(name)
        elif name in spec.env and spec.env[name] != value:
            held.append(f"{name}={value} (the launch sets {name}={spec.env[name]})")
        else:
            passed[name] = value
    notes = list(spec.notes)
    if passed:
        notes.append("InferenceX additional-settings passed as environment: " + ", ".join(passed))
    if held:
        notes.append("InferenceX additional-settings NOT passed, the launch's own value stands: " + "; ".join(held))
    if by_name:
        notes.append("InferenceX additional-settings passed from the caller's environment by name (secret), their "
                     "values never written: " + ", ".join(by_name))
    return spec.model_copy(update={"env": {**passed, **spec.env},
                                   "secret_env": (*spec.secret_env, *(n for n in by_name if n not in secrets)),
                                   "notes": tuple(notes)})


def agentic_conc(job: Job) -> int:
    """The concurrency that sizes a server: the job's (largest) conc."""
    return max(job.concs)


def synthetic_acceptance(job: Job) -> float | None:
    """The AL the job's throughput launch pins, or None. An eval-only job pins none; a run-eval row pins it for its
    throughput point and runs its eval on a server relaunched with real verification (:func:`real_verification`)."""
    if job.acceptance is None or job.eval_only:
        return None
    return job.acceptance.value


def real_verification(job: Job) -> Job:
    """The job as its eval's server launches it: the same launch without any spelling of synthetic acceptance (every
    adapter spells the pin from :func:`synthetic_acceptance`, which this view leaves nothing to pin)."""
    return job if job.acceptance is None else job.model_copy(update={"acceptance": None})


def relaunches_for_eval(job: Job) -> bool:
    """A run-eval row whose throughput point pins acceptance: its eval runs on a second server, relaunched with real
    verification (InferenceX's eval servers never pin it); without a pin the eval shares the throughput server."""
    return bool(job.run_eval and synthetic_acceptance(job) is not None)  # never an eval-only job: it pins none


def startup_timeout_s(job: Job) -> float:
    """How long `run` waits for the job's server to become ready: the recipe's `serve.health-timeout`, else the
    launch's default (`LaunchSpec.startup_timeout_s`: real engines take minutes to compile and capture graphs)."""
    if job.serve is not None and job.serve.health_timeout:
        return float(job.serve.health_timeout)
    default = LaunchSpec.model_fields["startup_timeout_s"].default
    assert isinstance(default, float)
    return default


class Parallelism(NamedTuple):
    """One pool's parallelism: an aggregated job's server, or a disaggregated job's prefill or decode worker."""

    tp: int
    pp: int
    ep: int
    dp_attn: bool
    dcp: int
    pcp: int

    @property
    def dp_ranks(self) -> int:
        """DP-attention ranks: `tp` with DP attention (as InferenceX launches it: SGLang's `--dp-size`, vLLM's
        `--data-parallel-size` are the TP size), else 1."""
        return self.tp if self.dp_attn else 1


def pools(job: Job) -> dict[str, Parallelism]:
    """Each pool's parallelism by role: `server` (an aggregated job), else `prefill` then `decode`. The one place
    that reads a job's parallelism knobs; everything else derives from it."""
    if job.tp is not None:
        return {"server": Parallelism(job.tp, job.pp or 1, job.ep or 1, bool(job.dp_attn), job.dcp_size or 1,
                                      job.pcp_size or 1)}
    workers = {role: w for role, w in (("prefill", job.prefill), ("decode", job.decode)) if w is not None}
    assert workers, "a job has either tp or workers"
    return {role: worker_parallelism(w) for role, w in workers.items()}


def worker_parallelism(worker: Worker) -> Parallelism:
    """One worker pool's parallelism (a disaggregated job's prefill or decode workers)."""
    return Parallelism(worker.tp, worker.pp, worker.ep, worker.dp_attn, worker.dcp_size, worker.pcp_size)


def topology(job: Job) -> Parallelism:
    """The parallelism of the server this adapter launches (a multinode job: its decode worker)."""
    return list(pools(job).values())[-1]


class Adapter(ABC):
    """One engine's renderer and the contract of what it consumes."""

    identity: ClassVar[EngineIdentity]
    """Who the engine is; everything below that another room needs is derived from it."""
    parallel_flags: ClassVar[frozenset[str]] = frozenset()
    """Flags derived from the job's topology; a recipe overriding one with another value is a policy error."""
    spec_flags: ClassVar[frozenset[str]] = frozenset()
    """Flags derived from `serve.spec-decoding` and the pinned AL; a recipe changing one silently drops the contract."""
    flag_aliases: ClassVar[dict[str, str]] = {}
    """Short spellings the engine accepts for a derived flag (`--tp` for `--tp-size`; a single-dash `-sc` is
    looked up as `--sc`)."""
    allow_abbrev: ClassVar[bool] = True
    """The engine's parser takes a unique prefix of a long flag for the flag (argparse's default; click's is off)."""
    port_flag: ClassVar[str] = "--port"
    """The flag that carries the serving port (the executor substitutes a free port after it)."""
    launch_flags: ClassVar[dict[str, str]] = {"--host": HOST_FIX}
    """Flags the launch itself decides besides `port_flag` (the bind address; the model path and the served model
    name where a flag carries them) → the fix: a recipe setting one would serve somewhere, something, or under a
    name, the run does not look at."""
    context_flag: ClassVar[str | None] = None
    """The flag that sets the engine's context length (`--context-length`, `--max-model-len`, `--max_seq_len`): a
    fixed-seq-len launch renders the job's `max-model-len` in it; None where the engine takes no such flag."""
    running_cap_flag: ClassVar[str | None] = None
    """The flag that caps the requests the server runs at once (`--max-num-seqs`, `--max-running-requests`): under DP
    attention the launch note says how the engine counts the value in the launch (`engines.running_cap`: SGLang's is
    the server's total, divided among its ranks, and one below the ranks is refused; vLLM's, ATOM's and TensorRT-LLM's
    `--max_batch_size` each rank's).
    An agentic job sets it to 2 x conc (AgentX's headroom for sub-agent fan-out), kept per rank where the engine
    counts it so: InferenceX's own vLLM DP-attention scripts disagree on the per-engine value (2 x conc / DP, conc /
    DP, conc), and no rank should clip the fan-out a session-affine router concentrates on it. None: no note."""
    checkpoint_kv_dtypes: ClassVar[dict[str, CheckpointKvDtype]] = {}
    """KV-cache quantisations a checkpoint may name (`engines.checkpoint_kv.checkpoint_kv_algo`'s names) that the
    engine's `--kv-cache-dtype auto` keeps, from the release given, rather than the model's dtype: what
    `resources.kv-dtype-auto` warns of. Empty: `auto` is the model's dtype whatever the checkpoint names (or not
    read)."""
    unsupported_args: ClassVar[dict[str, str]] = {}
    """Flags this engine does not have (often another engine's spelling) → the fix."""
    kv_offload_backends: ClassVar[frozenset[str]] = frozenset()
    supports_pp: ClassVar[bool] = True
    """The engine renders pipeline parallelism (a flag for `pp`); False: a `pp` above 1 is refused by policy."""
    supports_dcp: ClassVar[bool] = False
    supports_pcp: ClassVar[bool] = False
    expert_parallel_all_ranks: ClassVar[bool] = False
    """The engine renders `ep` as a switch (vLLM's and ATOM's `--enable-expert-parallel`) that spreads the experts over
    every rank of the server (TP × DP), not as a size: an `ep` other than 1 or the server's TP is refused by policy,
    since the job would run full EP under another size's name. False: a size flag (SGLang's and TensorRT-LLM's
    `--ep-size`)."""
    renders_draft_tree: ClassVar[bool] = False
    """The engine's launch carries serve.spec-decoding's draft tree (`topk` above 1, `num-draft-tokens` other than
    K + 1: SGLang's EAGLE flags); False: it renders a chain of K draft tokens only, and policy refuses a tree."""
    disagg_transfer_default: ClassVar[str | None] = None
    """The KV-transfer backend a disaggregated launch uses when the job names none (`kv-p2p-transfer`); None: this
    adapter renders no disaggregated launch, and a multinode job of its engine is refused with that reason."""
    disagg_worker_port: ClassVar[int | None] = None
    """The port a disaggregated worker serves on when the caller names none (None: the engine's default port)."""
    role_port_flags: ClassVar[tuple[str, ...]] = ()
    """Flags of a disaggregated worker's launch that set a port it listens on, on its first node, besides its serving
    port (SGLang's `--disaggregation-bootstrap-port`; a `HOST:PORT` value's port, as `--dist-init-addr`'s), as the
    engine spells them: `render_topology` refuses two listeners on one port of a node."""
    dynamo_module: ClassVar[str | None] = None
    """NVIDIA Dynamo's worker module for this engine (`dynamo.sglang`), for the `dynamo-*` frameworks."""
    launches_roles: ClassVar[bool] = False
    """`run` launches this engine's disaggregated roles, each worker a server of its own behind llmsweep's router
    (`engines.launch_refusal` says where); False: its disaggregated jobs are rendered, never run."""
    launched_transfers: ClassVar[frozenset[str]] = frozenset()
    """The `kv-p2p-transfer` backends whose role launch llmsweep runs (and reads back) for this engine."""

    # ------------------------------------------------------------------------------------------- to implement

    @abstractmethod
    def launcher(self, job: Job) -> list[str]:
        """argv before the flags (`python3 -m sglang.launch_server`, `vllm serve MODEL`)."""

    @abstractmethod
    def derive(self, job: Job, port: int) -> Derived:
        """Flags and env the job implies, in the order a reader expects them."""

    # ------------------------------------------------------------------------------------------- shared

    @property
    def name(self) -> str:
        return self.identity.id

    @property
    def foreign_env_prefixes(self) -> tuple[str, ...]:
        """Environment prefixes of other engines (from their identities): this engine never reads them."""
        return foreign_env_prefixes(self.name)

    def info(self) -> EngineInfo:
        return get_engine(self.name)

    def pinned_acceptance(self, job: Job) -> PinnedAcceptance | None:
        """How this launch pins the job's acceptance length, in the engine's spelling (None: nothing pinned)."""
        al = synthetic_acceptance(job)
        if al is None or self.identity.pin_acceptance is None:
            return None
        sd = job.serve.spec_decoding if job.serve is not None else None
        return self.identity.pin_acceptance(al, sd.num_steps if sd is not None else None)

    @property
    def known_flags(self) -> frozenset[str]:
        """The engine's long flags (catalog data, `catalog/data/engine_flags.yaml`), normalised."""
        return known_flags(self.name)

    def resolve_flag(self, flag: str) -> str:
        """The flag the engine's parser will see for `flag`: `_`/`-` and `--flag=value` normalised, an alias
        resolved, then (argparse's `allow_abbrev`) a unique prefix of a known long flag expanded. An exact known flag
        wins over a longer one it prefixes, as in argparse; a prefix of several raises :class:`AmbiguousFlagError`
        naming them; a flag the catalog does not list is returned as written (normalised)."""
        name = norm_flag(flag)
        name = self.flag_aliases.get(name, name)
        known = self.known_flags
        if not self.allow_abbrev or not known or name in known:
            return name
        candidates = sorted(k for k in known if k.startswith(name))
        if len(candidates) == 1:
            name = candidates[0]
            return self.flag_aliases.get(name, name)
        if len(candidates) > 1:
            raise AmbiguousFlagError(self.name, flag, candidates)
        return name

    def canonical(self, flag: str) -> str:
        """`resolve_flag`, except that an ambiguous abbreviation stays as written (the `serve.ambiguous-flag` rule
        reports it; the engine would refuse to start)."""
        try:
            return self.resolve_flag(flag)
        except AmbiguousFlagError:
            return norm_flag(flag)

    def ambiguous_flags(self, job: Job) -> list[AmbiguousFlagError]:
        """The recipe's flags the engine's parser would refuse as ambiguous abbreviations."""
        out: list[AmbiguousFlagError] = []
        for flag in self.recipe_args(job):
            try:
                self.resolve_flag(flag)
            except AmbiguousFlagError as exc:
                out.append(exc)
        return out

    def flag_identity(self, flag: str) -> str | None:
        """The flag the engine's parser reads `flag` as (:meth:`resolve_flag`; `--flag=value` names `--flag`), None
        for an ambiguous abbreviation. Unlike :meth:`canonical`, a vLLM dotted sub-key is a flag of its own."""
        try:
            return self.resolve_flag(split_flag(flag, True)[0])
        except AmbiguousFlagError:
            return None

    def unremoved_flags(self, job: Job, removed: list[str]) -> list[tuple[str, str, str]]:
        """(the removal as written, the flag the launch still carries as written, the flag both are) for each of
        `removed` (an applied override's `null`/`false` keys) that the engine reads as a flag the job's `serve.args`
        still set under another spelling: the override removed nothing."""
        kept = [(written, self.flag_identity(written)) for written in (job.serve.args if job.serve else {})]
        out: list[tuple[str, str, str]] = []
        for key in removed:
            name = self.flag_identity(key)
            out += [(key, written, name) for written, other in kept if name is not None and other == name]
        return out

    def duplicate_flags(self, job: Job) -> list[tuple[str, str, str]]:
        """(the first as written, a later one as written, the flag both are) for each recipe flag that names, as the
        engine's parser reads it (`_`/`-`, an alias, a unique prefix), a flag an earlier one already names:
        `--mem-fraction-static` and `--mem-frac` are one flag to SGLang, which would take the last silently. A
        dotted sub-key (vLLM's `--compilation-config.level`) is a flag of its own here; `serve.spec-conflict` judges
        one that replaces a derived flag."""
        first: dict[str, str] = {}
        out: list[tuple[str, str, str]] = []
        for written, (flag, _value) in self._written_args(job):
            name = self.flag_identity(flag)
            if name is None:
                continue  # `serve.ambiguous-flag` reports it
            if name in first:
                out.append((first[name], written, name))
            else:
                first[name] = written
        return out

    def misspelled_flags(self, job: Job) -> list[tuple[str, str]]:
        """(as written, the listed flag it most likely means) for each recipe flag the catalog does not list and that
        is one slip away from one it does (`--mem-fracton-static`): the engine's parser would refuse to start. A flag
        that abbreviates listed ones is the ambiguity rule's; a catalog without a list for this engine says nothing."""
        known = self.known_flags
        if not known:
            return []
        out: list[tuple[str, str]] = []
        for written, (flag, _value) in self._written_args(job):
            name = self.canonical(flag)
            if not name.startswith("--") or name in known or any(k.startswith(name) for k in known):
                continue
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=MISSPELLED_RATIO)
            if close:
                out.append((written, close[0]))
        return out

    def recipe_args(self, job: Job) -> Flags:
        """The recipe's `serve.args`, a `--flag=value` key split into flag and value."""
        if job.serve is None:
            return {}
        return dict(split_flag(k, v) for k, v in job.serve.args.items())

    def conflicts(self, job: Job, kind: str = "parallel") -> list[Conflict]:
        """Recipe flags that change a derived parallelism flag (the launcher silently dropping --ep-size cost
        InferenceX a GSM8K 0.0: topology comes from the search space, never from a hand-written flag), or with
        `kind="spec"` a derived speculative-decoding flag."""
        watched = self.parallel_flags if kind == "parallel" else self.spec_flags
        derived = {self.canonical(k): v for k, v in self.derive(job, self.info().default_port).args.items()}
        out: list[Conflict] = []
        for written, (flag, value) in self._written_args(job):
            name = self.canonical(flag)
            if name not in watched:
                continue
            have = derived.get(name)
            if have is None or not (have == value or str(have).lower() == str(value).lower()):
                out.append(Conflict(written, have, value))
        return out

    def derive_context(self, job: Job, d: Derived) -> None:
        """Render the context length a fixed-seq-len job needs (its `max-model-len`, isl + osl + 256) in
        `context_flag`; an agentic job leaves the engine's default (its prompts have no fixed length)."""
        if self.context_flag is not None and job.scenario is ScenarioId.FIXED_SEQ_LEN and job.max_model_len:
            d.args[self.context_flag] = job.max_model_len

    def prompt_limit(self, job: Job) -> PromptLimit | None:
        """The longest prompt the job's launch accepts where the engine refuses longer ones outright rather than
        chunking them; None (every engine but TensorRT-LLM without chunked prefill): any prompt its context holds."""
        return None

    def recipe_value(self, job: Job, flag: str) -> tuple[str, Any] | None:
        """(as written, value) of the recipe flag the engine's parser reads as `flag` (the last one where the recipe
        sets it twice, as the parser takes it); None when the recipe sets none."""
        target = self.canonical(flag)
        found = [(written, value) for written, (name, value) in self._written_args(job)
                 if self.canonical(name) == target]
        return found[-1] if found else None

    def recipe_context(self, job: Job) -> tuple[str, Any] | None:
        """(as written, value) of the recipe flag that sets the context length, read as the engine's parser reads
        it (`--max-model-len` is SGLang's alias of `--context-length`, `--max-model` vLLM's prefix of
        `--max-model-len`); None when the recipe sets none (the last one when it sets it twice, as the parser
        takes it: `serve.duplicate-flag` refuses that)."""
        if self.context_flag is None:
            return None
        return self.recipe_value(job, self.context_flag)

    def read_context(self, value: Any) -> int | str | None:
        """The context flag's value as the engine's parser reads it: a token count, :data:`AUTO_CONTEXT` where the
        engine fits the context to its memory at start-up, or None when the parser takes no such value. Here a whole
        number (argparse `type=int`: SGLang's `--context-length`, TensorRT-LLM's `--max_seq_len`)."""
        return token_count(value)

    auto_context_since: ClassVar[Version | None] = None
    """The first release whose parser takes :data:`AUTO_CONTEXT` in `context_flag` (None: none does; an earlier one
    refuses it at start-up)."""

    def context_reader(self, job: Job) -> Adapter:
        """The adapter whose parser reads the job's context flag (this one; the simulator's: the engine it stands in
        for)."""
        return self

    def fits_context(self, job: Job) -> bool:
        """The recipe's context flag asks the engine to fit the context to its memory at start-up
        (:data:`AUTO_CONTEXT`): the launch fixes no length, and the engine runs at most the model's native one."""
        given = self.recipe_context(job)
        return given is not None and self.context_reader(job).read_context(given[1]) == AUTO_CONTEXT

    def context_unread(self, value: Any) -> str:
        """What is wrong with a context flag's `value` that :meth:`read_context` reads as no length (None), for a
        message that goes on `` `FLAG: VALUE` ``."""
        return f"is no number of tokens {self.name}'s parser takes"

    def context_limit(self, job: Job) -> NativeContext | None:
        """The length the engine cuts any context it is given to without a word, with where llmsweep read it (ATOM:
        its checkpoint's `max_position_embeddings`, `evals.context.native_context_of`), an estimate included; None:
        the engine serves the length its launch sets, or refuses one it cannot serve at start-up, or nothing says."""
        return None

    def context_cap(self, job: Job) -> int | None:
        """The length the engine cuts any context it is given to, where it is known (:meth:`context_limit`, unless
        the only source is an estimate: a guessed cut is not recorded as what ran; `serve.context-capped` says the
        cap is unknown)."""
        limit = self.context_limit(job)
        return limit.tokens if limit is not None and limit.estimate is None else None

    def asked_context(self, job: Job) -> int | None:
        """The context length the launch asks for: the token count the recipe's context flag sets, else the job's
        `max-model-len` (what a fixed-seq-len launch derives; None: the engine's default, or a length the engine
        fits to its memory at start-up — :data:`AUTO_CONTEXT` — which no plan can know)."""
        given = self.recipe_context(job)
        count = self.context_reader(job).read_context(given[1]) if given is not None else None
        if count == AUTO_CONTEXT:
            return None
        return count if isinstance(count, int) else job.max_model_len

    def launched_context(self, job: Job) -> int | None:
        """The context length the launch runs with: the one it asks for (:meth:`asked_context`), cut to the engine's
        :meth:`context_cap` (read by the engine that reads the context flag, so the simulator standing in for ATOM
        serves what ATOM would), as `serve.context-capped` warns."""
        asked = self.asked_context(job)
        cap = self.context_reader(job).context_cap(job)
        return asked if asked is None or cap is None else min(asked, cap)

    def launch_conflicts(self, job: Job) -> list[tuple[str, str]]:
        """(as written, fix) for each recipe flag that sets what the launch decides: the port the executor picks and
        the health check polls, the bind address, the model path (`serve.model-path` says that), the served model
        name (the client asks for `workload.served-model-name`). Flags are read as the engine's parser reads them."""
        owned = {self.canonical(f): fix for f, fix in ((self.port_flag, PORT_FIX), *self.launch_flags.items())}
        out: list[tuple[str, str]] = []
        for written, (flag, _value) in self._written_args(job):
            fix = owned.get(self.canonical(flag))
            if fix is not None:
                out.append((written, fix))
        return out

    def precision_conflicts(self, job: Job) -> list[tuple[str, str, str]]:
        """(as written, what it makes the engine load, fix) for each recipe flag that sets the dtype the engine loads
        the weights in to other than the job's `precision`: the row would be labelled with a precision that did not
        run. None by default (the engine has no such flag, or loads what the checkpoint's format names)."""
        return []

    def _written_args(self, job: Job) -> list[tuple[str, tuple[str, Any]]]:
        """(the key as the recipe wrote it, (flag, value) as argparse reads it) for each of `serve.args`."""
        args = job.serve.args if job.serve is not None else {}
        return [(k, split_flag(k, v)) for k, v in args.items()]

    def unsupported(self, job: Job) -> list[tuple[str, str]]:
        """(flag, fix) for recipe flags this engine does not consume."""
        bad = {norm_flag(k): v for k, v in self.unsupported_args.items()}
        out: list[tuple[str, str]] = []
        for written, (flag, _value) in self._written_args(job):
            name = norm_flag(flag)
            if name not in bad:
                name = self.canonical(flag)
            if name in bad:
                out.append((written, bad[name]))
        return out

    def foreign_env(self, job: Job) -> list[str]:
        env = job.serve.env if job.serve is not None else {}
        return [name for name in env if name.startswith(self.foreign_env_prefixes)]

    def merged_args(self, job: Job, port: int, role: RoleContext | None = None) -> tuple[Flags, Derived]:
        """Derived flags, then the recipe's; a recipe flag replaces the derived one of the same meaning."""
        derived = self.derive(job, port)
        if role is not None:
            self.derive_role(job, port, role, derived)
        recipe = self.recipe_args(job)
        taken = {self.canonical(k) for k in recipe}
        args = {k: v for k, v in derived.args.items() if self.canonical(k) not in taken}
        args.update(recipe_flag_order(recipe))
        return {self.engine_spelling(k, role): v for k, v in args.items()}, derived

    def engine_spelling(self, flag: str, role: RoleContext | None = None) -> str:
        """`flag` as the engine's parser spells it. Policy compares flags with `-` and `_` folded (vLLM's parser folds
        them); an engine whose parser does not (SGLang's argparse, trtllm-serve's click) gets its own spelling here,
        so a recipe flag the policy passed is not refused at start-up. The default keeps the flag as written."""
        return flag

    def port_of(self, job: Job, port: int | None) -> int:
        if port is not None:
            return port
        if job.serve is not None and job.serve.port is not None:
            return job.serve.port
        return self.info().default_port

    def image_and_version(self, job: Job) -> tuple[str | None, str | None]:
        """(image, engine version): the version the image tag names, else the recipe's `serve.engine.version`.

        The stated version only stands in for a tag that names none (nightly, dev, latest, a dated build): where the
        tag names one, that is what runs, so gates are checked, and the launch is recorded, at the tag's version
        (a stated version that disagrees is the policy error `engine.version-mismatch`, never a relabel)."""
        return job.image, tag_version(job.image) or stated_version(job)

    def render(self, job: Job, *, port: int | None = None, role: RoleContext | None = None) -> LaunchSpec:
        """The launch of `job`'s server; with `role`, of that worker of a disaggregated job (`job` is then the
        worker's view, `worker_job`)."""
        info = self.info()
        port = self.port_of(job, port)
        args, derived = self.merged_args(job, port, role)
        merged = {**derived.env, **(job.serve.env if job.serve is not None else {})}
        env = {k: v for k, v in merged.items() if v is not None}  # a recipe's `null` unsets a derived variable
        secrets = list(job.serve.secret_env) if job.serve is not None else []
        extra = set(secrets)
        notes = list(derived.notes)
        cap_note = self.dp_running_cap_note(job, derived)
        if cap_note is not None:
            notes.append(cap_note)
        for name in list(env):
            if is_secret_name(name, extra):
                env.pop(name)
                if name not in secrets:
                    secrets.append(name)
                notes.append(f"{name} is passed from the caller's environment by name; its value is never written")
        if relaunches_for_eval(job) and self.pinned_acceptance(job) is not None:
            notes.append("run-eval job: this launch serves the throughput point at the pinned acceptance; its eval "
                         "runs on a relaunch of the same command without synthetic acceptance (real verification)")
        if job.multinode:
            notes.append("multinode job: this is one decode worker's launch; the prefill pool, router and KV "
                         "transfer are started by the cluster orchestrator")
        image, version = self.image_and_version(job)
        spec = LaunchSpec(
            engine=self.name,
            engine_version=version,
            image=image,
            argv=tuple([*(self.launcher(job) if role is None or not role.dynamo else self.dynamo_launcher(job)),
                        *flag_argv(args)]),
            env=env,
            secret_env=tuple(secrets),
            port=port,
            health_path=info.health_path,
            metrics_path=info.metrics_path,
            metrics_prefix=info.metric_prefix,
            ready_log_markers=tuple(info.ready_markers),
            port_flag=self.port_flag,
            files=tuple(derived.files),
            side_ports={k: n for k, n in derived.side_ports.items() if k in env},
            rejected_request_fields=tuple(info.rejected_request_fields),
            served_model_name=job.workload.served_model_name,
            gpus=job.decode.gpus_per_replica if job.multinode and job.decode is not None else job.gpus,
            notes=tuple(notes),
        )
        return spec.model_copy(update={"startup_timeout_s": startup_timeout_s(job)})

    def dp_running_cap_note(self, job: Job, derived: Derived) -> str | None:
        """The note on a DP-attention launch's running-request cap (`running_cap_flag`), built from the value the
        launch runs with: the recipe's where it writes the flag, else the one derived (an agentic job's 2 x conc).
        None without DP attention, or where the launch sets no count. Raises ConfigError where the engine divides
        the cap among its ranks and it leaves each none (`engines.running_cap.dp_running_cap`), which
        `serve.render-failed` reports."""
        flag = self.running_cap_flag
        dp = topology(job).dp_ranks
        if flag is None or dp <= 1:
            return None
        written = self.recipe_value(job, flag)
        launched = token_count(written[1] if written is not None else derived.args.get(flag))
        if launched is None or launched <= 0:
            return None
        if written is not None:
            origin = f"as serve.args writes it, {written[0]}"
        elif job.scenario is ScenarioId.AGENTIC_CODING:
            origin = f"2 x conc {agentic_conc(job)}, AgentX's headroom for sub-agent fan-out"
        else:
            origin = "as the launch derives it"
        return dp_running_cap(self.identity.id, flag, launched, dp).note(origin)

    def speculative_config(self, job: Job) -> dict[str, Any] | None:
        """The vLLM-style speculative-config mapping this launch passes, if any (feature gates read its keys)."""
        return None

    def as_launched(self, args: Mapping[str, Any], version: Version | None) -> tuple[dict[str, Any], dict[str, str]]:
        """The launch's flags (named without leading dashes, as policy reads them) as the engine at `version` runs
        them after its own start-up normalisation, and one sentence per flag it rewrote (keyed as the flags are);
        only an engine whose normalisation is modelled rewrites any (SGLang's HiCache settings)."""
        return dict(args), {}

    # ------------------------------------------------------------------------------------------- roles

    def disagg_refusal(self, job: Job) -> str | None:
        """Why `job` cannot be rendered role by role (None when it can): a multinode job that is not disaggregated
        (whatever the engine), else what this engine lacks (:meth:`engine_disagg_refusal`)."""
        if not job.disagg:
            return MULTINODE_NOT_DISAGG
        return self.engine_disagg_refusal(job)

    def engine_disagg_refusal(self, job: Job) -> str | None:
        """Why this engine's adapter cannot render a disaggregated launch (None when it can)."""
        if self.disagg_transfer_default is None:
            return (f"llmsweep cannot render {self.name}'s disaggregated prefill/decode launch (framework "
                    f"`{job.framework}`) yet")
        if job.framework.startswith("dynamo-") and self.dynamo_module is None:
            return f"llmsweep has no NVIDIA Dynamo worker for {self.name}"
        return None

    def role_report(self, version: dict[str, Any], log: str) -> dict[str, Any]:
        """What one started worker says it runs as, in the keys a role read-back checks (`role`, `node`, `tp` = the
        GPUs it uses, `kv_transfer`, `ep`, `max_running_requests`, `kv_links`), from its `/version` document and its
        log so far. Default: the `/version` document (the simulator says all of it there)."""
        return version

    def transfer_of(self, job: Job) -> str | None:
        """The KV-transfer backend a disaggregated launch of `job` uses: the job's `kv-p2p-transfer`, else this
        adapter's default (None: it renders no disaggregated launch)."""
        return job.kv_p2p_transfer or self.disagg_transfer_default

    def role_launch_refusal(self, job: Job) -> str | None:
        """Why this engine's roles of `job` are not launched although the adapter launches roles (None: they are):
        a deployment llmsweep's router does not front (NVIDIA Dynamo's), or a KV transfer it does not read back."""
        if job.framework.startswith("dynamo-"):
            return (f"{self.name}'s NVIDIA Dynamo deployment (framework `{job.framework}`: its frontend, etcd and "
                    "NATS) is rendered, not launched")
        transfer = self.transfer_of(job)
        if transfer not in self.launched_transfers:
            return (f"{self.name}'s roles are launched only with KV over {', '.join(sorted(self.launched_transfers))}"
                    f" (the transfer llmsweep reads back); kv-p2p-transfer `{transfer}` is rendered, not launched")
        return None

    def derive_role(self, job: Job, port: int, role: RoleContext, d: Derived) -> None:
        """Add the flags one disaggregated worker needs (its mode, KV transfer, bootstrap, multi-node rendezvous)."""
        raise ContractError(f"{self.name} renders no disaggregated worker", fix="run an aggregated configuration")

    def follower_spec(self, spec: LaunchSpec) -> LaunchSpec | None:
        """The launch on a multi-node worker's nodes after its first, where the engine needs another one than `spec`
        (None: every node runs `spec`, its `{node_rank}` filled in per node)."""
        return None

    def dynamo_launcher(self, job: Job) -> list[str]:
        """argv before the flags of a Dynamo worker of this engine (unverified against a Dynamo release)."""
        assert self.dynamo_module is not None
        return ["python3", "-m", self.dynamo_module]

    def router_spec(self, job: Job, prefill: list[RoleWorker], decode: list[RoleWorker], node: int,
                    transfer: str) -> LaunchSpec:
        """The launch of the router/front door of a disaggregated job (the client talks to it)."""
        raise ContractError(f"{self.name} renders no disaggregated router", fix="run an aggregated configuration")

    def dynamo_frontend(self, job: Job, node: int) -> LaunchSpec:
        """NVIDIA Dynamo's OpenAI frontend: workers register with it through etcd/NATS, so it takes no worker list.
        Unverified: flag spellings follow Dynamo's docs (`python -m dynamo.frontend --http-port`); the etcd and NATS
        services it needs are not rendered."""
        port = DYNAMO_FRONTEND_PORT
        return LaunchSpec(
            engine=self.name, image=job.image, argv=("python3", "-m", "dynamo.frontend", "--http-port", str(port)),
            host=node_host(node), port=port, health_path="/health", metrics_path="/metrics",
            served_model_name=job.workload.served_model_name,
            notes=("NVIDIA Dynamo frontend: needs etcd and NATS reachable by every worker (not rendered)",),
        )

    def role_ports(self, spec: LaunchSpec) -> list[tuple[str, range]]:
        """The ports a disaggregated worker's launch listens on, on its first node, besides its serving port, read from
        what was rendered: each of `role_port_flags` in its argv, and its `side_ports` (from the port its variable
        holds, as many as it binds), each by the flag or variable that sets it."""
        ports: list[tuple[str, range]] = []
        argv = spec.argv
        for i, arg in enumerate(argv[:-1]):
            if arg in self.role_port_flags:
                value = argv[i + 1].rpartition(":")[2]
                if value.isdigit():
                    ports.append((arg, range(int(value), int(value) + 1)))
        for name, span in spec.side_ports.items():
            if spec.env.get(name, "").isdigit():
                ports.append((name, range(int(spec.env[name]), int(spec.env[name]) + span)))
        return ports

    def _refuse_shared_ports(self, job: Job, pools: dict[str, list[RoleWorker]], router: LaunchSpec,
                             port: int | None) -> None:
        """Refuse a topology in which two listeners would take one port of a node: a worker's serving port, a port
        its launch listens on besides it (`role_ports`), and the front door on node 0. A worker has nodes of its own,
        the front door shares node 0 with prefill worker 0. The fix is another `--port` where the caller's port is
        one of the two (the others are the engine's own), else a report: the adapter's defaults collide."""
        listeners: list[tuple[int, str, str, range]] = []  # (node, worker, what listens, ports)
        for kind, workers in pools.items():
            for w in workers:
                who = f"{kind} worker {w.index}"
                listeners.append((w.nodes[0], who, who, range(w.spec.port, w.spec.port + 1)))
                listeners += [(w.nodes[0], who, f"{who}'s {name}", ports) for name, ports in self.role_ports(w.spec)]
        front = f"the {router.engine} front door"
        listeners.append((0, front, front, range(router.port, router.port + 1)))
        for i, (node, who, what, ports) in enumerate(listeners):
            for other_node, other_who, other, other_ports in listeners[i + 1:]:
                shared = sorted(set(ports) & set(other_ports)) if node == other_node else []
                if not shared:
                    continue
                said = other.replace(f"{who}'s ", "its ", 1) if other_who == who else other
                serving = port is not None and port in shared and (what == who or other == other_who)
                raise ContractError(
                    f"job {job.id}: {what} and {said} would both listen on port {shared[0]} of node {node}",
                    fix=(f"pass another --port for the workers (not {port}: {other if what == who else what} "
                         "takes it)") if serving else f"report this: {self.name}'s default ports collide")

    def render_topology(self, job: Job, *, port: int | None = None,
                        gpus_per_node: int | None = None) -> Topology:
        """Every role `job` launches and where: one `server` role for an aggregated job; prefill and decode pools
        (each worker with its own parallelism, on its own nodes) and a router for a multinode one.

        Nodes are numbered within the job's allocation: each worker takes ceil(its GPUs / GPUs per node) nodes of its
        own, prefill workers first; the router runs on node 0 beside the first prefill worker (as InferenceX's AMD
        disagg script does). A ContractError says why a job cannot be rendered role by role."""
        if not job.multinode:
            spec = self.render(job, port=port)
            parallel = topology(job)
            server = Role(name="server", kind="server", count=1, gpus_per_worker=spec.gpus, nodes_per_worker=1,
                          ep=parallel.ep, dp_ranks=parallel.dp_ranks,
                          workers=(RoleWorker(index=0, nodes=(0,), spec=spec),))
            return Topology(job=job.id, engine=self.name, disaggregated=False, gpus_per_node=gpus_per_node, nodes=1,
                            roles=(server,))
        refusal = self.disagg_refusal(job)
        if refusal is not None:
            fix = (MULTINODE_NOT_DISAGG_FIX if refusal == MULTINODE_NOT_DISAGG
                   else "it stays planned; run an aggregated configuration of the model instead")
            raise ContractError(f"job {job.id}: {refusal}", fix=fix)
        assert job.prefill is not None and job.decode is not None
        notes: list[str] = []
        if gpus_per_node is None:
            gpus_per_node = DEFAULT_GPUS_PER_NODE
            notes.append(f"runner `{job.runner}` has no GPUs-per-node record: {DEFAULT_GPUS_PER_NODE} assumed")
        transfer = self.transfer_of(job)
        assert transfer is not None
        # An adapter without a Dynamo worker that still renders the job (the simulator) launches its own roles.
        dynamo = job.framework.startswith("dynamo-") and self.dynamo_module is not None
        worker_port = port if port is not None else self.disagg_worker_port
        if dynamo and port is None and worker_port == DYNAMO_FRONTEND_PORT:
            worker_port = DYNAMO_WORKER_PORT
            notes.append(f"workers serve on {DYNAMO_WORKER_PORT}: the Dynamo frontend takes {DYNAMO_FRONTEND_PORT} on "
                         "node 0")
        placed = worker_nodes(job, gpus_per_node)
        roles: list[Role] = []
        pools: dict[str, list[RoleWorker]] = {}
        pool_workers: tuple[tuple[RoleKind, Worker], ...] = (("prefill", job.prefill), ("decode", job.decode))
        for kind, worker in pool_workers:
            wjob = worker_job(job, worker, kind)
            per = math.ceil(worker.gpus_per_replica / gpus_per_node)
            workers: list[RoleWorker] = []
            for i, nodes in enumerate(placed[kind]):
                ctx = RoleContext(kind=kind, index=i, nodes=nodes, transfer=transfer, dynamo=dynamo,
                                  gpus_per_node=gpus_per_node, prefill_nodes=tuple(placed["prefill"]))
                spec = self.render(wjob, port=worker_port, role=ctx)
                role_notes = [f"{kind} worker {i}: TP{worker.tp} PP{worker.pp} EP{worker.ep}"
                              f"{' DP-attention' if worker.dp_attn else ''} on {noun(len(nodes), 'node')} "
                              f"{', '.join(map(str, nodes))}"]
                spec = spec.model_copy(update={"host": node_host(nodes[0]), "notes": (*spec.notes, *role_notes)})
                spec = with_settings(spec, settings_env(worker))
                follower = self.follower_spec(spec) if len(nodes) > 1 else None
                workers.append(RoleWorker(index=i, nodes=nodes, spec=spec, follower=follower))
            pools[kind] = workers
            parallel = worker_parallelism(worker)
            roles.append(Role(name=kind, kind=kind, count=worker.num_worker,
                              gpus_per_worker=worker.gpus_per_replica, nodes_per_worker=per, ep=parallel.ep,
                              dp_ranks=parallel.dp_ranks, workers=tuple(workers)))
        router = (self.dynamo_frontend(job, 0) if dynamo
                  else self.router_spec(job, pools["prefill"], pools["decode"], 0, transfer))
        self._refuse_shared_ports(job, pools, router, port)
        roles.append(Role(name="router", kind="router", count=1, gpus_per_worker=0, nodes_per_worker=0,
                          workers=(RoleWorker(index=0, nodes=(0,), spec=router),)))
        return Topology(job=job.id, engine=self.name, disaggregated=True, gpus_per_node=gpus_per_node,
                        nodes=max(n for pool in placed.values() for nodes in pool for n in nodes) + 1,
                        kv_transfer=transfer, roles=tuple(roles), notes=tuple(notes))
