"""vLLM: `vllm serve MODEL`, speculative decoding and synthetic acceptance in one `--speculative-config` JSON.

KV offload goes through `--kv-transfer-config` (the native OffloadingConnector for `vllm-simple`/`native`, LMCache's
connector with its per-rank CPU size in env for `lmcache`). vLLM exposes /metrics by default.
"""

from __future__ import annotations

from typing import Any, ClassVar

from llmsweep.engine_ids import VLLM
from llmsweep.engines.base import (
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
    topology,
)
from llmsweep.engines.launch import NODE_RANK, LaunchSpec, RoleWorker, node_host
from llmsweep.engines.sglang import model_path, per_rank_gb
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId

BYTES_PER_GB = 1_000_000_000
KV_CONNECTORS: dict[str, str] = {"nixl": "NixlConnector", "mooncake": "MooncakeConnector",
                                 "lmcache": "LMCacheConnectorV1"}
"""`kv-p2p-transfer` → vLLM's KV connector between prefill and decode (NixlConnector verified in vLLM's docs; the
others unverified against a run)."""
PROXY_PORT = 8000
"""The disaggregated proxy serves the client on vLLM's usual port; the workers behind it move to WORKER_PORT."""
WORKER_PORT = 8100


class VLLMAdapter(Adapter):
    identity = VLLM
    context_flag: ClassVar[str | None] = "--max-model-len"
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
    dynamo_module: ClassVar[str | None] = "dynamo.vllm"

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
        tp, pp, ep, dp_attn, dcp, pcp = topology(job)
        a = d.args
        a["--served-model-name"] = job.workload.served_model_name
        a["--host"] = BIND_HOST
        a["--port"] = port
        if dp_attn:
            a["--tensor-parallel-size"] = 1
            a["--data-parallel-size"] = tp
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
        self._kv_offload(job, d, tp * pp)
        spec = self.speculative_config(job)
        if spec is not None:
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

    def _kv_offload(self, job: Job, d: Derived, ranks: int) -> None:
        if job.kv_offloading != "dram" or job.kv_offload_backend is None:
            return
        backend = job.kv_offload_backend.name
        total = job.total_cpu_dram_gb or 0
        if backend in ("vllm-simple", "native"):
            d.args["--kv-transfer-config"] = {
                "kv_connector": "OffloadingConnector",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"cpu_bytes_to_use": total * BYTES_PER_GB},
            }
        elif backend == "lmcache":
            d.args["--kv-transfer-config"] = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
            d.env["LMCACHE_LOCAL_CPU"] = "True"
            d.env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = str(per_rank_gb(total, ranks))
        d.notes.append(f"KV offload ({backend}): {total} GB total-cpu-dram-gb")

    def derive_role(self, job: Job, port: int, role: RoleContext, d: Derived) -> None:
        """vLLM's disaggregated worker: every worker gets `--kv-transfer-config` with the transfer connector and
        `kv_role: kv_both` (the proxy decides who prefills); a worker wider than a node adds vLLM's multi-node
        `--nnodes/--node-rank/--master-addr/--master-port`, and its nodes after the first run `--headless`
        (:meth:`follower_spec`). A KV-offload connector the job already has
        is kept beside it in a MultiConnector (unverified)."""
        connector = KV_CONNECTORS.get(role.transfer)
        if connector is None:
            raise ConfigError(f"vLLM has no KV connector llmsweep knows for kv-p2p-transfer `{role.transfer}`",
                              fix=f"use one of {', '.join(sorted(KV_CONNECTORS))}")
        transfer: dict[str, Any] = {"kv_connector": connector, "kv_role": "kv_both"}
        offload = d.args.get("--kv-transfer-config")
        if isinstance(offload, dict):
            transfer = {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"connectors": [transfer, offload]}}
        d.args["--kv-transfer-config"] = transfer
        if role.dynamo:
            d.args["--is-prefill-worker"] = role.kind == "prefill"  # Dynamo's vLLM worker flag (unverified)
        if len(role.nodes) > 1:
            d.args["--nnodes"] = len(role.nodes)
            d.args["--node-rank"] = NODE_RANK
            d.args["--master-addr"] = role.head
            d.args["--master-port"] = DIST_INIT_PORT

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
        """vLLM's disaggregated proxy (`toy_proxy_server.py` of vLLM's NIXL integration tests: it sends each request
        to a prefiller with max_tokens 1, then to a decoder with the KV handle). Unverified: the script is not in the
        vLLM wheel and must be provided beside the launch."""
        argv = ["python3", "toy_proxy_server.py", "--host", BIND_HOST, "--port", str(PROXY_PORT),
                "--prefiller-hosts", *(w.spec.host for w in prefill), "--prefiller-ports",
                *(str(w.spec.port) for w in prefill), "--decoder-hosts", *(w.spec.host for w in decode),
                "--decoder-ports", *(str(w.spec.port) for w in decode)]
        return LaunchSpec(engine="vllm-proxy", image=job.image, argv=tuple(argv), host=node_host(node),
                          port=PROXY_PORT, health_path="/healthcheck", metrics_path=None,
                          served_model_name=job.workload.served_model_name,
                          notes=(f"disaggregated proxy over {len(prefill)} prefill and {len(decode)} decode "
                                 f"worker(s); KV over {transfer} (unverified: toy_proxy_server.py is vLLM's test "
                                 "proxy, not in the wheel)",))
