"""vLLM: `vllm serve MODEL`, speculative decoding and synthetic acceptance in one `--speculative-config` JSON.

KV offload goes through `--kv-transfer-config` (the native OffloadingConnector for `vllm-simple`/`native`, LMCache's
connector with its per-rank CPU size in env for `lmcache`). vLLM exposes /metrics by default.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any, ClassVar

from llmsweep.catalog.version import Version
from llmsweep.engine_ids import VLLM
from llmsweep.engines.base import (
    AUTO_CONTEXT,
    BIND_HOST,
    DIST_INIT_PORT,
    HOST_FIX,
    MODEL_FIX,
    SERVED_NAME_FIX,
    Adapter,
    Derived,
    RoleContext,
    agentic_conc,
    norm_flag,
    token_count,
    topology,
    worker_parallelism,
)
from llmsweep.engines.checkpoint_kv import CheckpointKvDtype
from llmsweep.engines.launch import NODE_RANK, LaunchSpec, RoleWorker, node_host
from llmsweep.engines.sglang import model_path, per_rank_gb
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of

BYTES_PER_GB = 1_000_000_000
KV_CONNECTORS: dict[str, str] = {"nixl": "NixlConnector", "mooncake": "MooncakeConnector",
                                 "lmcache": "LMCacheConnectorV1"}
"""`kv-p2p-transfer` → vLLM's KV connector between prefill and decode (NixlConnector verified in vLLM's docs; the
others unverified against a run)."""
PROXY_PORT = 8000
"""The disaggregated router serves the client on vLLM's usual port; the workers behind it move to WORKER_PORT."""
WORKER_PORT = 8100
NIXL_PORT_ENV, NIXL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST"
"""Where a NixlConnector worker listens for its peers' handshake: it binds `PORT + its data-parallel rank`
(vLLM 0.26.0 `nixl/base_scheduler.py`), on HOST (default `localhost`: unreachable from another node)."""
NIXL_PORT_BASE = 5600
"""vLLM's default side-channel port; each worker of a deployment gets its own block above it (`nixl_side_port`)."""
NIXL_PORT_STRIDE = 8
"""Side-channel ports a worker reserves at least (one per data-parallel rank; room for 8 on a worker without DP)."""
NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})")
"""vLLM's start-up line of every argument it was given away from its default (`serve/utils/api_utils.py`); the
kv_transfer_config is a `KVTransferConfig(... kv_role='kv_producer' ...)` in it (a dict where given as one)."""
KV_ROLE = re.compile(r"""kv_role['"]?\s*[:=]\s*['"](\w+)['"]""")
LOGGED_CONNECTORS: dict[str, str] = {"NixlPullConnector": "nixl", "NixlPushConnector": "nixl"}
"""Connector names vLLM logs for a `kv_connector` it resolves to another class, → the `kv-p2p-transfer` they are
(beside KV_CONNECTORS' own names): vLLM 0.26.0 configured with `NixlConnector` logs `Creating v1 connector with name:
NixlPullConnector` (read on the H100, 2026-12-05: `tests/data/vllm/pd-0.26.0-{prefill,decode}.log`)."""
CONNECTOR_LINE = re.compile(r"Creating v1 connector with name: (?P<name>\w+) and engine_id: (?P<engine_id>\S+)")
"""vLLM's line as it creates a worker's KV connector (`kv_connector/factory.py`)."""
ENGINE_CONFIG = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: .*")
"""vLLM's engine line, with every parallel size written out (`v1/engine/core.py`)."""
ROLE_KV = {"prefill": "kv_producer", "decode": "kv_consumer"}
"""The `kv_role` of each disaggregated worker on NixlConnector."""
ROLE_OF_KV = {v: k for k, v in ROLE_KV.items()}
EXPLICIT_KV_ROLES = "0.11.0"
"""The first vLLM release whose NixlConnector documents `kv_producer` (prefill) and `kv_consumer` (decode): vLLM PR
#24249 ("make NixlConnector example more clear": "we can tell between consumer and producer role"), merged 2025-09,
so first released in 0.11.0 (inferred from the merge date; no run of an older release checked it). 0.26.0 warns that
`kv_both` is deprecated for NixlConnector (`nixl/connector.py`, RFC vllm#43807, docs PR #55693). Below this release,
or on another connector than NIXL, every worker keeps `kv_both` (the role then comes from the request's
`kv_transfer_params`)."""


SELF_DRAFTING_METHODS = frozenset({"mtp", "ngram"})
"""serve.spec-decoding methods vLLM serves without a draft checkpoint: MTP drafts with the target's own head (vLLM takes
the target model as the draft) and n-gram needs no model. For every other method (eagle, eagle3, draft_model, medusa,
dspark) vLLM's SpeculativeConfig raises "num_speculative_tokens was provided but without speculative model" at
start-up when `--speculative-config` names no `model` (vllm/config/speculative.py `__post_init__`, the same branch in
every release read; later ones say "dspark requires an independent draft checkpoint model path")."""


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def max_model_len(value: Any) -> int | str | None:
    """`--max-model-len` as vLLM's parser reads it (`human_readable_int_or_auto` in vllm/engine/arg_utils.py): `auto`
    or `-1` asks vLLM to fit the context to the KV memory it profiled (vllm-project/vllm#29431, merged 2025-11-25;
    :data:`AUTO_CONTEXT`); `32k` is 32,000 tokens and `32K` 32,768 (a decimal with a lower-case suffix, `25.6k`, is
    taken, not with an upper-case one); else a whole number as Python's int() reads it. None when vLLM's parser
    refuses the value."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return AUTO_CONTEXT if value == -1 else value
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text == "-1" or text.lower() == AUTO_CONTEXT:
        return AUTO_CONTEXT
    match = _HUMAN_INT.fullmatch(text)
    if match is not None:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY[suffix] if number.isdigit() else None
    return token_count(text)


class VLLMAdapter(Adapter):
    identity = VLLM
    context_flag: ClassVar[str | None] = "--max-model-len"
    running_cap_flag: ClassVar[str | None] = "--max-num-seqs"
    checkpoint_kv_dtypes: ClassVar[dict[str, CheckpointKvDtype]] = {
        "fp8": CheckpointKvDtype(Version.parse("0.14.0"), "fp8"),
        "nvfp4": CheckpointKvDtype(Version.parse("0.26.0"), "nvfp4"),
    }
    """From 0.14.0 (vllm-project/vllm#30785) EngineArgs.create_engine_config resolves `auto` with
    vllm/utils/torch_utils.py resolve_kv_cache_dtype_string from a `modelopt*` quantisation config's kv_cache_scheme /
    kv_cache_quant_algo (MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP: fp8 -> fp8_e4m3; nvfp4 in 0.26.0, not in 0.14.0, the
    releases between not read; any other value falls back to auto), where 0.12.0 and 0.13.0 keep the model's dtype
    (PyPI wheels 0.12.0, 0.13.0, 0.14.0 and 0.26.0, read 2026-12-07)."""
    expert_parallel_all_ranks: ClassVar[bool] = True
    parallel_flags: ClassVar[frozenset[str]] = frozenset({
        "--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
        "--decode-context-parallel-size", "--prefill-context-parallel-size",
    })
    spec_flags: ClassVar[frozenset[str]] = frozenset({"--speculative-config"})
    launch_flags: ClassVar[dict[str, str]] = {"--host": HOST_FIX, "--model": MODEL_FIX,
                                              "--served-model-name": SERVED_NAME_FIX}
    """`vllm serve MODEL` replaces a `--model` flag by its positional model (the flag would be read and dropped)."""
    flag_aliases: ClassVar[dict[str, str]] = {
        "--tp": "--tensor-parallel-size", "--pp": "--pipeline-parallel-size", "--dp": "--data-parallel-size",
        "--dcp": "--decode-context-parallel-size", "--sc": "--speculative-config",
    }
    unsupported_args: ClassVar[dict[str, str]] = {
        "--mem-fraction-static": "vLLM spells it `--gpu-memory-utilization`",
        "--max-running-requests": "vLLM spells it `--max-num-seqs`",
        "--tp-size": "vLLM spells it `--tensor-parallel-size`",
        "--ep-size": "vLLM has no EP size: set `ep` in the search space (rendered as --enable-expert-parallel)",
        "--context-length": "vLLM spells it `--max-model-len`",
        "--enable-hierarchical-cache": "HiCache is SGLang's; vLLM offloads through `--kv-transfer-config`",
        "--speculative-algorithm": "write `serve.spec-decoding`; vLLM takes `--speculative-config`",
        "--chunked-prefill-size": "vLLM spells it `--max-num-batched-tokens`",
    }
    kv_offload_backends: ClassVar[frozenset[str]] = frozenset({"vllm-simple", "native", "lmcache"})
    supports_dcp: ClassVar[bool] = True
    supports_pcp: ClassVar[bool] = True
    disagg_transfer_default: ClassVar[str | None] = "nixl"
    disagg_worker_port: ClassVar[int | None] = WORKER_PORT
    role_port_flags: ClassVar[tuple[str, ...]] = ("--master-port",)
    dynamo_module: ClassVar[str | None] = "dynamo.vllm"
    launches_roles: ClassVar[bool] = True
    launched_transfers: ClassVar[frozenset[str]] = frozenset({"nixl"})

    auto_context_since: ClassVar[Version | None] = Version.parse("0.12.0")
    """vllm-project/vllm#29431 (merged 2025-11-25): the first release is inferred as 0.12.0, whose notes list PRs merged
    after it (#29559, #29757); no run of 0.11.x checked it. Earlier parsers read `auto` as no integer and -1 as a
    length."""

    def read_context(self, value: Any) -> int | str | None:
        return max_model_len(value)

    def context_unread(self, value: Any) -> str:
        return f"is no number of tokens {self.name}'s parser takes (a whole number, 32k, 32K or auto)"

    def dynamo_launcher(self, job: Job) -> list[str]:
        return ["python3", "-m", "dynamo.vllm", "--model", model_path(job)]  # unverified spelling

    def canonical(self, flag: str) -> str:
        """vLLM's spellings of one flag: `-sc` is `--speculative-config`, and a dotted sub-key
        (`--speculative-config.synthetic_acceptance_length 2`) replaces the whole JSON flag, as vLLM appends it last.
        Found on the H200: `-sc` after the rendered --speculative-config ran AL 2.0 under a 3.39 pin, unseen by
        policy."""
        return super().canonical(norm_flag(flag).split(".", 1)[0])

    def launcher(self, job: Job) -> list[str]:
        return ["vllm", "serve", model_path(job)]

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived()
        parallel = topology(job)
        tp, pp, ep, dp_attn, dcp, pcp = parallel
        a = d.args
        a["--served-model-name"] = job.workload.served_model_name
        a["--host"] = BIND_HOST
        a["--port"] = port
        if dp_attn:
            a["--tensor-parallel-size"] = tp // parallel.dp_ranks
            a["--data-parallel-size"] = parallel.dp_ranks
        else:
            a["--tensor-parallel-size"] = tp
        if pp > 1:
            a["--pipeline-parallel-size"] = pp
        if ep > 1:
            a["--enable-expert-parallel"] = True
        if dcp > 1:
            a["--decode-context-parallel-size"] = dcp
        if pcp > 1:
            a["--prefill-context-parallel-size"] = pcp
        self.derive_context(job, d)
        if job.serve is not None and job.serve.load_format:
            a["--load-format"] = job.serve.load_format
        if job.scenario is ScenarioId.AGENTIC_CODING:
            a["--max-num-seqs"] = 2 * agentic_conc(job)
        self._kv_offload(job, d, tp * pp, parallel.dp_ranks)
        spec = self.speculative_config(job)
        if spec is not None:
            if spec["method"] not in SELF_DRAFTING_METHODS and "model" not in spec:
                raise ConfigError(f"vLLM's `{spec['method']}` drafting needs the draft checkpoint (the speculative "
                                  "config's `model`): without one vLLM refuses to start (\"num_speculative_tokens was "
                                  "provided but without speculative model\")",
                                  fix="set `serve.spec-decoding.draft-model`")
            a["--speculative-config"] = spec
        return d

    def speculative_config(self, job: Job) -> dict[str, Any] | None:
        sd = job.serve.spec_decoding if job.serve is not None else None
        if sd is None or job.spec_decoding == "none":
            return None
        spec: dict[str, Any] = {"method": sd.method}
        if sd.num_steps is not None:
            spec["num_speculative_tokens"] = sd.num_steps
        if sd.draft_model:
            spec["model"] = sd.draft_model
        pin = self.pinned_acceptance(job)
        if pin is not None:
            spec.update(pin.speculative_config)
        return spec

    def _kv_offload(self, job: Job, d: Derived, ranks: int, engines: int) -> None:
        """The job's DRAM budget as its backend's host pool. `ranks` is every GPU rank of the launch (TP × PP, the
        DP-attention ranks included), `engines` the DP engines it runs (1 without DP attention): each engine reads
        the connector config on its own.

        - `vllm-simple`: SimpleCPUOffloadConnector (vllm-project/vllm#37160), as InferenceX's scripts launch it:
          `cpu_bytes_to_use_per_rank` the budget over the ranks, `lazy_offload` false, and `PYTHONHASHSEED=42` so
          that identical prefixes hash to the same block keys on every rank.
        - `native`: OffloadingConnector, whose `cpu_bytes_to_use` is one engine's pool (CPUOffloadingSpec divides it
          over that engine's TP × PP workers): the budget over the DP engines, or each of them would take all of it.
        - `lmcache`: LMCache's per-rank local CPU size."""
        if job.kv_offloading != "dram" or job.kv_offload_backend is None:
            return
        backend = job.kv_offload_backend.name
        total = job.total_cpu_dram_gb or 0
        if backend == "vllm-simple":
            d.args["--kv-transfer-config"] = {
                "kv_connector": "SimpleCPUOffloadConnector",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"cpu_bytes_to_use_per_rank": total * BYTES_PER_GB // max(ranks, 1),
                                              "lazy_offload": False},
            }
            d.env["PYTHONHASHSEED"] = "42"
        elif backend == "native":
            d.args["--kv-transfer-config"] = {
                "kv_connector": "OffloadingConnector",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"cpu_bytes_to_use": total * BYTES_PER_GB // max(engines, 1)},
            }
        elif backend == "lmcache":
            d.args["--kv-transfer-config"] = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
            d.env["LMCACHE_LOCAL_CPU"] = "True"
            d.env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = str(per_rank_gb(total, ranks))
        d.notes.append(f"KV offload ({backend}): {total} GB total-cpu-dram-gb")

    def derive_role(self, job: Job, port: int, role: RoleContext, d: Derived) -> None:
        """vLLM's disaggregated worker: `--kv-transfer-config` with the transfer connector and its `kv_role`
        (NixlConnector from vLLM 0.11.0: `kv_producer` for prefill, `kv_consumer` for decode, `EXPLICIT_KV_ROLES`;
        else `kv_both`); a NIXL worker gets a side-channel port of its own (`nixl_side_port`, listed in the launch's
        `side_ports` so a placement on one host can move it to a free one) and its node's address as the side-channel
        host. A worker wider than a node adds vLLM's multi-node `--nnodes/--node-rank/--master-addr/--master-port`,
        and its nodes after the first run `--headless` (:meth:`follower_spec`). A KV-offload connector the job
        already has is kept beside it in a MultiConnector (unverified)."""
        connector = KV_CONNECTORS.get(role.transfer)
        if connector is None:
            raise ConfigError(f"vLLM has no KV connector llmsweep knows for kv-p2p-transfer `{role.transfer}`",
                              fix=f"use one of {', '.join(sorted(KV_CONNECTORS))}")
        kv_role = self.kv_role(job, role)
        transfer: dict[str, Any] = {"kv_connector": connector, "kv_role": kv_role}
        offload = d.args.get("--kv-transfer-config")
        if isinstance(offload, dict):
            transfer = {"kv_connector": "MultiConnector", "kv_role": kv_role,
                        "kv_connector_extra_config": {"connectors": [transfer, offload]}}
        d.args["--kv-transfer-config"] = transfer
        if connector == KV_CONNECTORS["nixl"]:
            d.env[NIXL_PORT_ENV] = str(nixl_side_port(job, role))
            d.env[NIXL_HOST_ENV] = role.head
            d.side_ports[NIXL_PORT_ENV] = side_port_span(job, role.kind)
        if role.dynamo:
            d.args["--is-prefill-worker"] = role.kind == "prefill"  # Dynamo's vLLM worker flag (unverified)
        if len(role.nodes) > 1:
            d.args["--nnodes"] = len(role.nodes)
            d.args["--node-rank"] = NODE_RANK
            d.args["--master-addr"] = role.head
            d.args["--master-port"] = DIST_INIT_PORT

    def role_report(self, version: dict[str, Any], log: str) -> dict[str, Any]:
        """vLLM's `/version` is only `{"version": ...}`: what a worker runs as is read from its start-up log (the
        lines of vLLM 0.26.0, `NON_DEFAULT_ARGS`, `CONNECTOR_LINE`, `ENGINE_CONFIG`): `role` from the `kv_role`
        (kv_producer: prefill, kv_consumer: decode; kv_both says none), `kv_transfer` from the connector's name,
        `engine_id`, and `tp` = the GPUs it uses (tensor × pipeline × data parallel). A line the log does not hold
        leaves its keys out (the read-back says what it could not check)."""
        report: dict[str, Any] = {"version": version.get("version")}
        args = NON_DEFAULT_ARGS.search(log)
        connector = CONNECTOR_LINE.search(log)
        if connector is not None:
            name = connector.group("name")
            report["connector"] = name
            report["engine_id"] = connector.group("engine_id")
            report["kv_transfer"] = next((k for k, v in KV_CONNECTORS.items() if v == name),
                                         LOGGED_CONNECTORS.get(name, name))
        if args is not None:
            said = KV_ROLE.search(args.group("args"))
            if said is not None:
                report["kv_role"] = said.group(1)
                if said.group(1) in ROLE_OF_KV:
                    report["role"] = ROLE_OF_KV[said.group(1)]
        sizes: dict[str, int] = {}
        config = ENGINE_CONFIG.search(log)
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            found = re.search(rf"\b{key}=(\d+)", config.group(0)) if config is not None else None
            if found is None and args is not None:  # the non-default args leave out a size at its default, 1
                found = re.search(rf"'{key}': (\d+)", args.group("args"))
                sizes[key] = int(found.group(1)) if found is not None else 1
            elif found is not None:
                sizes[key] = int(found.group(1))
        if sizes:
            report["tp"] = math.prod(sizes.values())
            report["parallel"] = sizes
        return report

    def kv_role(self, job: Job, role: RoleContext) -> str:
        """The worker's `kv_role`: explicit on NixlConnector from `EXPLICIT_KV_ROLES` (a tag that names no version,
        a nightly, is taken as newer), `kv_both` otherwise."""
        if role.transfer != "nixl" or role.kind not in ROLE_KV or self._before_explicit_roles(job) is not None:
            return "kv_both"
        return ROLE_KV[role.kind]

    def _before_explicit_roles(self, job: Job) -> str | None:
        """The image's vLLM version when it predates `EXPLICIT_KV_ROLES` (its NIXL workers run `kv_both`), else None."""
        _image, version = self.image_and_version(job)
        parsed = Version.try_parse(version) if version else None
        if parsed is not None and parsed.base < Version.parse(EXPLICIT_KV_ROLES):
            return version
        return None

    def role_launch_refusal(self, job: Job) -> str | None:
        """Besides the adapter's own refusals: a vLLM older than `EXPLICIT_KV_ROLES` runs its NIXL workers `kv_both`,
        so no worker says which role it serves, and the read-back, which takes each role from the worker's own word,
        would fail the job after both servers had started."""
        why = super().role_launch_refusal(job)
        old = self._before_explicit_roles(job)
        if why is None and old is not None:
            return (f"vLLM {old} names no prefill or decode role for its NIXL workers (`kv_producer`/`kv_consumer` "
                    f"from {EXPLICIT_KV_ROLES}): none would say which role it serves, and llmsweep reads each role "
                    "back from the worker's own word; serve it with vLLM >= 0.11.0")
        return why

    def follower_spec(self, spec: LaunchSpec) -> LaunchSpec | None:
        """vLLM's multi-node worker (multiprocessing backend): the nodes of rank >= 1 add `--headless` and run no API
        server (vLLM docs, serving/parallelism_scaling.md "Running vLLM with MultiProcessing", vllm-project/vllm
        #30509); without it each would start an API server of its own."""
        return spec.model_copy(update={
            "argv": (*spec.argv, "--headless"),
            "notes": (*spec.notes, "node rank >= 1 of a multi-node worker: `--headless`, no API server (the worker "
                                   "serves from its first node)")})

    def router_spec(self, job: Job, prefill: list[RoleWorker], decode: list[RoleWorker], node: int,
                    transfer: str) -> LaunchSpec:
        """llmsweep's PD router with vLLM's NIXL protocol (`llmsweep router --protocol vllm-nixl`): each request goes
        to a prefill worker with `max_tokens` 1 and a request for a remote decode, then to a decode worker with the
        KV handle the prefill answer carries; a prefill answer without one is refused (502), never recomputed on
        the decode worker. Workers are named by URL (`http://{nodeK}:PORT`), so a placement that moves their ports
        moves the router's with them. vLLM's own `toy_proxy_server.py` is not in the wheel and lacks /health over
        the workers, /v1/models, /version and /metrics."""
        from llmsweep.router import PD_ROUTER_READY_LINE  # here: the router's module imports aiohttp

        argv = [sys.executable, "-m", "llmsweep.cli.main", "router", "--protocol", ROUTER_PROTOCOL]
        for w in prefill:
            argv += ["--prefill", f"http://{w.spec.host}:{w.spec.port}"]
        for w in decode:
            argv += ["--decode", f"http://{w.spec.host}:{w.spec.port}"]
        argv += ["--kv-transfer", transfer, "--host", node_host(node), "--port", str(PROXY_PORT)]
        _image, version = self.image_and_version(job)
        return LaunchSpec(engine=self.name, engine_version=version, image=None, argv=tuple(argv), host=node_host(node),
                          port=PROXY_PORT, health_path="/health", metrics_path=None,
                          ready_log_markers=(PD_ROUTER_READY_LINE,),
                          served_model_name=job.workload.served_model_name,
                          notes=(f"llmsweep's PD router ({ROUTER_PROTOCOL}) over {len(prefill)} prefill and "
                                 f"{count_of(len(decode), 'decode worker')}; KV over {transfer}",))


ROUTER_PROTOCOL = "vllm-nixl"
"""The protocol llmsweep's PD router speaks to vLLM's NIXL workers (`llmsweep router --protocol`)."""


def side_port_span(job: Job, kind: str) -> int:
    """Side-channel ports one worker of `kind` reserves: one per data-parallel rank (DP attention renders
    `--data-parallel-size`, `Parallelism.dp_ranks`), at least NIXL_PORT_STRIDE."""
    worker = job.prefill if kind == "prefill" else job.decode
    return max(NIXL_PORT_STRIDE, worker_parallelism(worker).dp_ranks if worker is not None else 1)


def nixl_side_port(job: Job, role: RoleContext) -> int:
    """The side-channel port of one worker: NIXL_PORT_BASE plus the spans of the workers before it (prefill
    workers first, then decode), so no two workers of a deployment share one, on one host or several."""
    prefills = job.prefill.num_worker if job.prefill is not None else 0
    before = (role.index * side_port_span(job, "prefill") if role.kind == "prefill"
              else prefills * side_port_span(job, "prefill") + role.index * side_port_span(job, "decode"))
    return NIXL_PORT_BASE + before
