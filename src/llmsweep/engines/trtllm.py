"""TensorRT-LLM: `trtllm-serve MODEL` with underscore flags; synthetic acceptance counts draft tokens only.

`TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS` is AL − 1 (the fractional part is the probability of one more accepted
token), e.g. golden 2.78 → 1.78. The speculative method itself lives in the LLM-API options file
(`extra_llm_api_options.yaml`, read by `trtllm-serve --extra_llm_api_options PATH`): the adapter renders it as a
:class:`~llmsweep.engines.launch.LaunchFile`, which the executor writes beside the launch (and into the job's folder).

The file's `speculative_config` follows the LLM API's decoding configs (`tensorrt_llm.llmapi.llm_args`):
MTP is `{decoding_type: MTP, num_nextn_predict_layers: K}`; EAGLE/EAGLE3 is `{decoding_type: Eagle, max_draft_len: K,
speculative_model_dir: DRAFT}`; a draft model is `{decoding_type: DraftTarget, ...}` and n-gram
`{decoding_type: NGram, max_draft_len: K}` (those two are unverified against a run). The file also turns on
`return_perf_metrics` and `enable_iter_perf_stats`, without which `/prometheus/metrics` carries no per-request
speculative or KV-cache counters (the read-back needs them).
"""

from __future__ import annotations

from typing import Any, ClassVar

import yaml

from llmsweep.engine_ids import TLLM_FORCE_ACCEPTED_ENV, TLLM_PROMPT_OVER_BUDGET, TRTLLM
from llmsweep.engines.base import (
    BIND_HOST,
    PINNED_POOL_FLAGS,
    Adapter,
    Derived,
    PromptLimit,
    RoleContext,
    agentic_conc,
    in_launch,
    token_count,
    topology,
)
from llmsweep.engines.launch import LaunchFile, LaunchSpec, RoleWorker, node_host
from llmsweep.engines.sglang import model_path
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of

LLM_API_OPTIONS = "extra_llm_api_options.yaml"
OPTIONS_FLAG = "--extra_llm_api_options"
DECODING_TYPE: dict[str, str] = {"mtp": "MTP", "eagle": "Eagle", "eagle3": "Eagle", "draft_model": "DraftTarget",
                                 "ngram": "NGram"}
"""serve.spec-decoding method → the LLM API's `decoding_type`."""
TWO_MODEL_DECODING = frozenset({"DraftTarget", "NGram"})
"""Decoding types that always run TensorRT-LLM's two-model path (TorchSampler), which reads the forced acceptance as an
integer; Eagle is two-model only with `eagle3_one_model: false` (its default is true: `EagleDecodingConfig`)."""
FORCE_ACCEPTED_ENV = TLLM_FORCE_ACCEPTED_ENV
"""The pin's variable, from its one home (`engine_ids`)."""
DISAGG_CONFIG = "disagg_config.yaml"
DISAGG_SERVER_PORT = 8000
"""The disaggregated server faces the client on trtllm-serve's usual port; context/generation servers use 8336."""
WORKER_PORT = 8336

MAX_NUM_TOKENS_DEFAULT = 8192
"""trtllm-serve's `--max_num_tokens` when a launch sets none (click default `BuildConfig.max_num_tokens`,
`tensorrt_llm/commands/serve.py`; `BaseLlmArgs.max_num_tokens` 8192 where BuildConfig's fields moved)."""
MAX_NUM_TOKENS_FLAG, CHUNKED_PREFILL_FLAG, CP_FLAG = "--max_num_tokens", "--enable_chunked_prefill", "--cp_size"
CACHE_TRANSCEIVER: dict[str, str] = {"nixl": "NIXL", "ucx": "UCX", "mpi": "MPI", "default": "DEFAULT"}
"""`kv-p2p-transfer` → the LLM API's `cache_transceiver_config.backend` (NIXL/UCX as InferenceX's dynamo-trt recipes
write it, wave-2 spec §6.3)."""


def click_spelling(flag: str) -> str:
    """`--max-num-tokens` as trtllm-serve's click option spells it, `--max_num_tokens` (a long flag only)."""
    if not flag.startswith("--"):
        return flag
    return "--" + flag[2:].replace("-", "_")


class TRTLLMAdapter(Adapter):
    identity = TRTLLM
    context_flag: ClassVar[str | None] = "--max_seq_len"
    running_cap_flag: ClassVar[str | None] = "--max_batch_size"
    """Each attention-DP rank's: every rank runs its own executor, whose capacity scheduler takes max_batch_size (x pp)
    and nothing divides it by the DP size (tensorrt_llm/_torch/pyexecutor/_util.py, v1.1.0rc5, as read in
    ai-dynamo/dynamo#11982), so the server admits up to DP x max_batch_size."""
    parallel_flags: ClassVar[frozenset[str]] = frozenset({"--tp-size", "--pp-size", "--ep-size", "--cp-size",
                                                          "--cluster-size"})
    spec_flags: ClassVar[frozenset[str]] = frozenset({"--extra-llm-api-options"})
    flag_aliases: ClassVar[dict[str, str]] = {
        "--tensor-parallel-size": "--tp-size", "--pipeline-parallel-size": "--pp-size",
        "--context-parallel-size": "--cp-size", "--moe-expert-parallel-size": "--ep-size",
        "--moe-cluster-parallel-size": "--cluster-size",
        "--free-gpu-memory-fraction": "--kv-cache-free-gpu-memory-fraction",
        "--config": "--extra-llm-api-options",
    }
    """The second names trtllm-serve's click options carry for one parameter (`--tensor_parallel_size`/`--tp_size`,
    `--config`/`--extra_llm_api_options`, tensorrt_llm/commands/serve.py): click takes the last of them silently, so
    a recipe's long name must replace the derived short one (and meet the parallelism and speculative checks)."""
    allow_abbrev: ClassVar[bool] = False  # trtllm-serve is a click command: no abbreviations
    disagg_transfer_default: ClassVar[str | None] = "nixl"
    disagg_worker_port: ClassVar[int | None] = WORKER_PORT
    dynamo_module: ClassVar[str | None] = "dynamo.trtllm"

    def dynamo_launcher(self, job: Job) -> list[str]:
        return ["python3", "-m", "dynamo.trtllm", "--model-path", model_path(job)]  # unverified spelling
    unsupported_args: ClassVar[dict[str, str]] = {
        "--mem-fraction-static": "TensorRT-LLM sets the KV share with `kv_cache_config.free_gpu_memory_fraction`",
        "--gpu-memory-utilization": "TensorRT-LLM sets the KV share with `kv_cache_config.free_gpu_memory_fraction`",
        "--speculative-config": "write `serve.spec-decoding`",
        "--enable-hierarchical-cache": "HiCache is SGLang's",
        **dict.fromkeys(PINNED_POOL_FLAGS,
                        "TensorRT-LLM has no flag that pins its KV pool (these are vLLM's): it sizes the pool from "
                        "`kv_cache_config.free_gpu_memory_fraction`, capped by `kv_cache_config.max_tokens`, in the "
                        "LLM-API options file"),
    }

    def launcher(self, job: Job) -> list[str]:
        return ["trtllm-serve", model_path(job)]

    def engine_spelling(self, flag: str, role: RoleContext | None = None) -> str:
        """trtllm-serve's spelling: its click options are all spelled with `_` (`--kv_cache_free_gpu_memory_fraction`)
        and click folds no `-` into `_`, so a recipe's `--kv-cache-free-gpu-memory-fraction` (one flag to the policy,
        which compares them normalised) is passed as `--kv_cache_free_gpu_memory_fraction` rather than refused at
        start-up (`No such option`). A Dynamo worker (`python3 -m dynamo.trtllm`, argparse with `-` flags) keeps the
        flags as written."""
        return flag if role is not None and role.dynamo else click_spelling(flag)

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived()
        tp, pp, ep, _dp_attn, _dcp, _pcp = topology(job)  # dp-attn: in the LLM-API options file
        a = d.args
        a["--host"] = BIND_HOST
        a["--port"] = port
        a["--backend"] = "pytorch"
        a["--tp_size"] = tp
        if pp > 1:
            a["--pp_size"] = pp
        a["--ep_size"] = ep
        self.derive_context(job, d)
        if job.scenario is ScenarioId.AGENTIC_CODING:
            a["--max_batch_size"] = 2 * agentic_conc(job)
        options = self.llm_api_options(job)
        if options is not None:
            file = LaunchFile(name=LLM_API_OPTIONS, content=yaml.safe_dump(options, sort_keys=False),
                              description="TensorRT-LLM LLM-API options: the speculative config and perf metrics, "
                                          "attention data parallelism")
            d.files.append(file)
            a[OPTIONS_FLAG] = file.placeholder_path
            if (spec := options.get("speculative_config")) is not None:
                d.notes.append(f"speculative_config ({spec['decoding_type']}) is in {LLM_API_OPTIONS}, written "
                               "beside the launch")
                pin = self.pinned_acceptance(job)
                if pin is not None:
                    self._refuse_fraction_on_two_models(spec, dict(pin.env))
                    d.env.update(pin.env)
            if options.get("enable_attention_dp"):
                d.notes.append(f"attention data parallelism: enable_attention_dp in {LLM_API_OPTIONS}")
        return d

    @staticmethod
    def _refuse_fraction_on_two_models(spec: dict[str, Any], env: dict[str, str]) -> None:
        """TensorRT-LLM's two-model speculative paths (DraftTarget, NGram, two-model Eagle) read
        TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS through `get_force_num_accepted_tokens()`, `int()` of it, even
        after NVIDIA/TensorRT-LLM#13569 (only the one-model path reads the fraction,
        `get_force_num_accepted_tokens_float`): a value like 1.5 logs "must be a valid integer ... Using default value
        0" and the run measures real acceptance under the pinned label. Refused rather than rounded: a rounded pin
        is another AL than the job's."""
        two_models = spec["decoding_type"] in TWO_MODEL_DECODING or spec.get("eagle3_one_model") is False
        value = env.get(FORCE_ACCEPTED_ENV)
        if not two_models or value is None or float(value).is_integer():
            return
        raise ConfigError(
            f"TensorRT-LLM's {spec['decoding_type']} decoding (a two-model path) reads {FORCE_ACCEPTED_ENV} as an "
            f"integer: the pinned AL − 1 = {value} is read as 0, so the run would measure real acceptance under the "
            "pinned label",
            fix="pin an acceptance length whose AL − 1 is a whole number (2.0, 3.0), or use MTP or one-model EAGLE "
                "(which read the fraction from NVIDIA/TensorRT-LLM#13569), or another engine")

    def prompt_limit(self, job: Job) -> PromptLimit | None:
        """trtllm-serve's PyTorch backend runs with chunked prefill off unless `--enable_chunked_prefill` is given,
        and then refuses a prompt whose tokens over its context-parallel ranks exceed `--max_num_tokens` (the recipe's,
        else 8192) with a 400 (`LLM._check_arguments`) rather than splitting it over steps."""
        if job.framework.startswith("dynamo-"):
            return None  # Dynamo's TensorRT-LLM worker: its launch defaults were not read
        chunked = self.recipe_value(job, CHUNKED_PREFILL_FLAG)
        if chunked is not None and in_launch(chunked[1]):
            return None
        given = self.recipe_value(job, MAX_NUM_TOKENS_FLAG)
        pinned = token_count(given[1]) if given is not None else None
        if given is not None and pinned is not None:
            budget, whose = pinned, f"the recipe's `{given[0]}: {pinned}`"
        else:
            budget = MAX_NUM_TOKENS_DEFAULT
            whose = f"trtllm-serve's default {MAX_NUM_TOKENS_FLAG} {budget}"
        cp_given = self.recipe_value(job, CP_FLAG)
        cp = (token_count(cp_given[1]) if cp_given is not None else None) or 1
        over = f" over {cp} context-parallel ranks" if cp > 1 else ""
        return PromptLimit(
            tokens=budget * cp, flag=MAX_NUM_TOKENS_FLAG, per=cp,
            why=f"{whose}{over}, without `{CHUNKED_PREFILL_FLAG}` (off by default in trtllm-serve)",
            message=TLLM_PROMPT_OVER_BUDGET.replace("{tokens}", str(budget)),
            fix=f"add `{CHUNKED_PREFILL_FLAG}: true` to `serve.args` (prompts are then split over steps of "
                f"{MAX_NUM_TOKENS_FLAG} tokens), or raise `{MAX_NUM_TOKENS_FLAG}` above the longest prompt")

    def llm_api_speculative_config(self, job: Job) -> dict[str, Any] | None:
        """The LLM API's `speculative_config` for the job's `serve.spec-decoding`, or None without one."""
        sd = job.serve.spec_decoding if job.serve is not None else None
        if sd is None or job.spec_decoding == "none":
            return None
        decoding = DECODING_TYPE.get(sd.method)
        if decoding is None:
            raise ConfigError(f"TensorRT-LLM has no `{sd.method}` speculative decoding llmsweep can render",
                              fix=f"use one of {', '.join(sorted(DECODING_TYPE))}, or another engine")
        spec: dict[str, Any] = {"decoding_type": decoding}
        if decoding == "MTP":
            spec["num_nextn_predict_layers"] = sd.num_steps or 1
            return spec
        if sd.num_steps is not None:
            spec["max_draft_len"] = sd.num_steps
        if decoding in ("Eagle", "DraftTarget"):
            if not sd.draft_model:
                raise ConfigError(f"TensorRT-LLM's {decoding} decoding needs the draft checkpoint",
                                  fix="set `serve.spec-decoding.draft-model`")
            spec["speculative_model_dir"] = sd.draft_model
        return spec

    def llm_api_options(self, job: Job) -> dict[str, Any] | None:
        """The contents of `extra_llm_api_options.yaml`: the speculative config (with perf metrics) and attention data
        parallelism (`enable_attention_dp`, the LLM API's switch: trtllm-serve has no flag for it); None when the job
        needs neither."""
        options: dict[str, Any] = {}
        spec = self.llm_api_speculative_config(job)
        if spec is not None:
            options.update(speculative_config=spec, return_perf_metrics=True, enable_iter_perf_stats=True)
        if topology(job)[3]:
            options["enable_attention_dp"] = True
        return options or None

    def derive_role(self, job: Job, port: int, role: RoleContext, d: Derived) -> None:
        """A context (prefill) or generation (decode) server: the LLM-API options file gains
        `cache_transceiver_config.backend` (the KV transfer), and a context server `disable_overlap_scheduler`
        (TensorRT-LLM's disaggregated examples; unverified against a run). A worker wider than a node runs under
        `trtllm-llmapi-launch` with MPI across its nodes (left to the placer; noted)."""
        backend = CACHE_TRANSCEIVER.get(role.transfer.lower())
        if backend is None:
            raise ConfigError(f"TensorRT-LLM has no cache transceiver for kv-p2p-transfer `{role.transfer}`",
                              fix=f"use one of {', '.join(sorted(CACHE_TRANSCEIVER))}")
        options: dict[str, Any] = dict(self.llm_api_options(job) or {})
        options["cache_transceiver_config"] = {"backend": backend}
        if role.kind == "prefill":
            options["disable_overlap_scheduler"] = True
        d.files = [f for f in d.files if f.name != LLM_API_OPTIONS]
        file = LaunchFile(name=LLM_API_OPTIONS, content=yaml.safe_dump(options, sort_keys=False),
                          description=f"TensorRT-LLM LLM-API options of a {role.kind} server: KV transfer over "
                                      f"{backend}")
        d.files.append(file)
        d.args[OPTIONS_FLAG] = file.placeholder_path
        if role.dynamo:
            d.args["--disaggregation-mode"] = role.kind  # Dynamo's TensorRT-LLM worker flag (unverified)
        if len(role.nodes) > 1:
            nodes = count_of(len(role.nodes), "node")
            d.notes.append(f"spans {nodes}: started under trtllm-llmapi-launch (MPI) on each")

    def router_spec(self, job: Job, prefill: list[RoleWorker], decode: list[RoleWorker], node: int,
                    transfer: str) -> LaunchSpec:
        """`trtllm-serve disaggregated -c disagg_config.yaml`: the config lists the context and generation servers
        (TensorRT-LLM's disaggregated serving docs; unverified against a run)."""
        config = {
            "hostname": BIND_HOST,
            "port": DISAGG_SERVER_PORT,
            "backend": "pytorch",
            "context_servers": {"num_instances": len(prefill),
                                "urls": [f"{w.spec.host}:{w.spec.port}" for w in prefill]},
            "generation_servers": {"num_instances": len(decode),
                                   "urls": [f"{w.spec.host}:{w.spec.port}" for w in decode]},
        }
        file = LaunchFile(name=DISAGG_CONFIG, content=yaml.safe_dump(config, sort_keys=False),
                          description="TensorRT-LLM disaggregated server: its context and generation servers")
        return LaunchSpec(engine="trtllm-disagg", image=job.image,
                          argv=("trtllm-serve", "disaggregated", "-c", file.placeholder_path),
                          host=node_host(node), port=DISAGG_SERVER_PORT, health_path="/health", metrics_path=None,
                          files=(file,), served_model_name=job.workload.served_model_name,
                          notes=(f"disaggregated server over {len(prefill)} context and "
                                 f"{count_of(len(decode), 'generation server')}; KV over {transfer}",))
