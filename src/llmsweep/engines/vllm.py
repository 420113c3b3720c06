"""vLLM: `vllm serve MODEL`, speculative decoding and synthetic acceptance in one `--speculative-config` JSON.

KV offload goes through `--kv-transfer-config` (the native OffloadingConnector for `vllm-simple`/`native`, LMCache's
connector with its per-rank CPU size in env for `lmcache`). vLLM exposes /metrics by default.
"""

from __future__ import annotations

from typing import Any, ClassVar

from llmsweep.engine_ids import VLLM
from llmsweep.engines.base import BIND_HOST, Adapter, Derived, agentic_conc, norm_flag, topology
from llmsweep.engines.sglang import model_path, per_rank_gb
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId

BYTES_PER_GB = 1_000_000_000


class VLLMAdapter(Adapter):
    identity = VLLM
    parallel_flags: ClassVar[frozenset[str]] = frozenset({
        "--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
        "--decode-context-parallel-size", "--prefill-context-parallel-size",
    })
    spec_flags: ClassVar[frozenset[str]] = frozenset({"--speculative-config"})
    flag_aliases: ClassVar[dict[str, str]] = {"--tp": "--tensor-parallel-size", "--pp": "--pipeline-parallel-size",
                                               "--dp": "--data-parallel-size", "--dcp": "--decode-context-parallel-size",
                                               "--sc": "--speculative-config"}
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

    def canonical(self, flag: str) -> str:
        """vLLM's spellings of one flag: `-sc` is `--speculative-config`, and a dotted sub-key
        (`--speculative-config.synthetic_acceptance_length 2`) replaces the whole JSON flag, as vLLM appends it last.
        Found on the H200: `-sc` after the rendered --speculative-config ran AL 2.0 under a 3.39 pin, unseen by policy."""
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
        if job.scenario is ScenarioId.FIXED_SEQ_LEN and job.max_model_len:
            a["--max-model-len"] = job.max_model_len
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
