"""Hugging Face `transformers serve`: a second real engine that runs where vLLM cannot be installed.

`python3 -m transformers.cli.transformers serve MODEL --continuous-batching --cb-use-cuda-graph`. Without continuous
batching requests run one at a time; without CUDA graphs it is ~7x slower per token on an H200
(research/gpu-and-ci-notes.md), so both are derived, CUDA graphs only when a GPU is expected (`--device cpu` in
`serve.args` means none is). A recipe turns either off with `--no-continuous-batching: true` /
`--no-cb-use-cuda-graph: true` (a `false` value is dropped before any adapter sees it).

What the server is not, and the launch therefore says: it has no parallelism, speculative decoding, KV offload or
Prometheus metrics (`metrics_path` None: the client does not scrape, no gate requires a metric prefix); it is pinned to
the model argument it was started with and answers HTTP 400 to any other `model` in a request, so the served name is
that argument; it answers HTTP 422 to request fields it does not know (`ignore_eos`, declared in the catalog as a
rejected request field, so the client leaves it out: serve a model whose EOS logit never wins, e.g. `llmsweep model
synth --weights random`); `/v1/completions` takes only a text prompt (HTTP 400 for token ids), so fixed-length jobs
must use the chat route; `/v1/models` answers 500 unless the model sits in the HF hub cache layout.
"""

from __future__ import annotations

from typing import Any, ClassVar

from llmsweep.engine_ids import TRANSFORMERS
from llmsweep.engines.base import BIND_HOST, Adapter, Derived, RoleContext, norm_flag, topology
from llmsweep.engines.launch import LaunchSpec
from llmsweep.engines.sglang import model_path
from llmsweep.errors import ContractError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId

CB_FLAG = "--continuous-batching"
CUDA_GRAPH_FLAG = "--cb-use-cuda-graph"
DEVICE_FLAG = "--device"
CACHE_SIZING_FLAGS = frozenset({"--cb-num-blocks", "--cb-max-memory-percent"})
DTYPE_FLAG = "--dtype"
TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
"""The `--dtype` a recipe's unquantised `precision` loads the weights in. transformers serve's default is `auto`, the
checkpoint's `torch_dtype` (SmolLM2's config says bfloat16): without the flag an fp32 row runs bf16. A quantised
precision (fp8, fp4, int4, ...) derives none: `auto` keeps the checkpoint's own quantisation config, which
`input.precision-checkpoint` checks against `precision` by the checkpoint's name."""
TORCH_DTYPE_NAMES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
"""The precision each `--dtype` value transformers serve accepts loads (it reads the value as `getattr(torch, value)`,
so torch's aliases `float` and `half` count)."""


def derived_dtype(job: Job) -> str | None:
    """The `--dtype` the launch derives from the job's `precision` (:data:`TORCH_DTYPE`); None for a quantised one."""
    return TORCH_DTYPE.get(job.precision.strip().lower())


def device_of(job: Job) -> str | None:
    """The recipe's `--device` value (transformers serve's default is `auto`), if it sets one."""
    args = job.serve.args if job.serve is not None else {}
    for flag, value in args.items():
        if norm_flag(flag) == DEVICE_FLAG and isinstance(value, str):
            return value
    return None


def expects_gpu(job: Job) -> bool:
    """False when the recipe pins the server to the CPU (`--device cpu`); a GPU is expected otherwise."""
    device = device_of(job)
    return not (device is not None and device.strip().lower().startswith("cpu"))


class TransformersAdapter(Adapter):
    identity = TRANSFORMERS
    flag_aliases: ClassVar[dict[str, str]] = {
        "--no-continuous-batching": CB_FLAG,
        "--no-cb-use-cuda-graph": CUDA_GRAPH_FLAG,
    }
    """A recipe's `--no-X` replaces the derived `--X` (typer's boolean pair)."""
    unsupported_args: ClassVar[dict[str, str]] = {
        "--tensor-parallel-size": "transformers serve has no tensor parallelism: use tp 1",
        "--tp": "transformers serve has no tensor parallelism: use tp 1",
        "--tp-size": "transformers serve has no tensor parallelism: use tp 1",
        "--served-model-name": "transformers serve answers to the model argument it was started with; clients send "
                               "that (the adapter sets it as the served name)",
        "--model-path": "write `serve.model-path`",
        "--load-format": "transformers serve loads real weights: "
                         "write them with `llmsweep model synth --weights random`",
        "--max-num-seqs": "transformers serve has no running-request cap; bound the batch with `--cb-max-batch-tokens`",
        "--max-running-requests": "transformers serve has no running-request cap; bound the batch with "
                                  "`--cb-max-batch-tokens`",
        "--max-num-batched-tokens": "transformers serve spells it `--cb-max-batch-tokens`",
        "--chunked-prefill-size": "transformers serve spells it `--cb-max-batch-tokens`",
        "--gpu-memory-utilization": "transformers serve spells the KV share `--cb-max-memory-percent` (0.0-1.0)",
        "--mem-fraction-static": "transformers serve spells the KV share `--cb-max-memory-percent` (0.0-1.0)",
        "--max-model-len": "transformers serve takes the context length from the model's config",
        "--context-length": "transformers serve takes the context length from the model's config",
        "--speculative-config": "transformers serve has no speculative decoding in continuous batching",
        "--enable-hierarchical-cache": "HiCache is SGLang's; transformers serve has no KV offload",
        "--enable-prefix-caching": "transformers serve has no prefix-caching switch",
    }

    def launcher(self, job: Job) -> list[str]:
        return ["python3", "-m", "transformers.cli.transformers", "serve", model_path(job)]

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived()
        a = d.args
        a[CB_FLAG] = True
        dtype = derived_dtype(job)
        if dtype is not None:
            a[DTYPE_FLAG] = dtype
        if expects_gpu(job):
            a[CUDA_GRAPH_FLAG] = True
        else:
            d.notes.append("CPU server (`--device cpu`): no CUDA graphs, no GPU preflight")
            given = {self.canonical(f) for f in self.recipe_args(job)}
            if not (given & CACHE_SIZING_FLAGS and "--cb-max-batch-tokens" in given):
                d.notes.append("without --cb-num-blocks (or --cb-max-memory-percent) and --cb-max-batch-tokens, "
                               "continuous batching sizes its KV cache and batch buffers from 90% of free host RAM, "
                               "allocated during the first request (27-50 s on 2 cores)")
        a["--host"] = BIND_HOST
        a["--port"] = port
        return d

    def precision_conflicts(self, job: Job) -> list[tuple[str, str, str]]:
        """A recipe `--dtype` other than the one `precision` derives (`auto` included: it loads the checkpoint's
        `torch_dtype`, which nothing checks against `precision`). A quantised precision derives none, and a `--dtype`
        beside it sets only the dtype of the layers its quantisation leaves: not judged here."""
        want = derived_dtype(job)
        given = self.recipe_value(job, DTYPE_FLAG)
        if want is None or given is None:
            return []
        written, value = given
        loads = TORCH_DTYPE_NAMES.get(str(value).strip())
        if loads == job.precision.strip().lower():
            return []
        said = ("in the checkpoint's own `torch_dtype` (`auto`), which llmsweep does not check against `precision`"
                if str(value).strip() == "auto"
                else f"as {loads} (`{value}`)" if loads is not None else f"as `{value}`")
        return [(written, said, f"delete `{written}`: `precision: {job.precision}` renders `{DTYPE_FLAG} {want}`; "
                                f"to serve {value}, change `precision`")]

    def refusals(self, job: Job) -> list[str]:
        """What the job asks for that transformers serve cannot do (rendering it would silently drop it)."""
        out: list[str] = []
        tp, pp, ep, dp_attn, dcp, pcp = topology(job)
        if job.multinode:
            out.append("multinode jobs (transformers serve is one process)")
        if max(tp, pp, ep, dcp, pcp) > 1 or dp_attn:
            out.append(f"parallelism (tp {tp}, pp {pp}, ep {ep}, dp-attn {dp_attn}): it serves on one device")
        if job.spec_decoding != "none":
            out.append(f"speculative decoding (`spec-decoding: {job.spec_decoding}`)")
        if job.kv_offloading == "dram":
            out.append("KV offload (`kv-offloading: dram`)")
        if job.serve is not None and job.serve.load_format:
            out.append(f"`load-format: {job.serve.load_format}` (it loads real weights: write random ones with "
                       "`llmsweep model synth MODEL --weights random`)")
        if job.scenario is ScenarioId.FIXED_SEQ_LEN and not job.workload.use_chat_template:
            out.append("token-id prompts on /v1/completions (HTTP 400 'prompt must be a string'): set "
                       "`workload.use-chat-template: true` so fixed-length prompts go to the chat route as text")
        return out

    def render(self, job: Job, *, port: int | None = None, role: RoleContext | None = None) -> LaunchSpec:
        refused = self.refusals(job)
        if refused:
            raise ContractError(
                f"job {job.id}: transformers serve cannot run " + "; ".join(refused),
                fix="change the recipe as the message says, or run this job on vLLM/SGLang (`serve.engine.name`)",
            )
        spec = super().render(job, port=port, role=role)
        served = model_path(job)
        notes = list(spec.notes)
        if job.workload.served_model_name != served:
            notes.append(f"requests name the model {served!r} (the server's pinned model argument), not the "
                         f"workload's served-model-name {job.workload.served_model_name!r}")
        notes.append("no Prometheus /metrics: server-side read-back is unavailable; `ignore_eos` is left out of "
                     "requests (HTTP 422), so serve a model that never emits EOS")
        notes.append("/v1/models answers 500 unless the model sits in the Hugging Face hub cache layout")
        notes.append("the first request initialises continuous batching (seconds to tens of seconds): warm up")
        update: dict[str, Any] = {"served_model_name": served, "notes": tuple(notes)}
        if not expects_gpu(job):
            update["gpus"] = 0
        return spec.model_copy(update=update)
