"""TensorRT-LLM: `trtllm-serve MODEL` with underscore flags; synthetic acceptance counts draft tokens only.

`TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS` is AL − 1 (the fractional part is the probability of one more accepted
token), e.g. golden 2.78 → 1.78. The speculative method itself lives in the LLM-API options file, which the adapter
records as a note (the executor writes `extra_llm_api_options.yaml` beside the results).
"""

from __future__ import annotations

from typing import ClassVar

from llmsweep.engine_ids import TRTLLM
from llmsweep.engines.base import BIND_HOST, Adapter, Derived, agentic_conc, topology
from llmsweep.engines.sglang import model_path
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId


class TRTLLMAdapter(Adapter):
    identity = TRTLLM
    parallel_flags: ClassVar[frozenset[str]] = frozenset({"--tp-size", "--pp-size", "--ep-size"})
    flag_aliases: ClassVar[dict[str, str]] = {"--moe-expert-parallel-size": "--ep-size"}
    unsupported_args: ClassVar[dict[str, str]] = {
        "--mem-fraction-static": "TensorRT-LLM sets the KV share with `kv_cache_config.free_gpu_memory_fraction`",
        "--gpu-memory-utilization": "TensorRT-LLM sets the KV share with `kv_cache_config.free_gpu_memory_fraction`",
        "--speculative-config": "write `serve.spec-decoding`",
        "--enable-hierarchical-cache": "HiCache is SGLang's",
    }

    def launcher(self, job: Job) -> list[str]:
        return ["trtllm-serve", model_path(job)]

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived()
        tp, pp, ep, _dp_attn, _dcp, _pcp = topology(job)
        a = d.args
        a["--host"] = BIND_HOST
        a["--port"] = port
        a["--backend"] = "pytorch"
        a["--tp_size"] = tp
        if pp > 1:
            a["--pp_size"] = pp
        a["--ep_size"] = ep
        if job.scenario is ScenarioId.FIXED_SEQ_LEN and job.max_model_len:
            a["--max_seq_len"] = job.max_model_len
        if job.scenario is ScenarioId.AGENTIC_CODING:
            a["--max_batch_size"] = 2 * agentic_conc(job)
        sd = job.serve.spec_decoding if job.serve is not None else None
        if sd is not None and job.spec_decoding != "none":
            d.notes.append(
                f"speculative_config: {{decoding_type: {sd.method}, max_draft_len: {sd.num_steps}}} goes in "
                "extra_llm_api_options.yaml"
            )
            pin = self.pinned_acceptance(job)
            if pin is not None:
                d.env.update(pin.env)
        return d
