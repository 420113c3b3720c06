"""ATOM (ROCm): an OpenAI-compatible server with vLLM-like flags; synthetic acceptance as a flag.

`--spec-decode-acceptance-length AL` keeps the golden AL unchanged (range [1, K+1]).

Flag spellings, checked against ATOM's public CLI (ROCm/ATOM `atom/entrypoints/openai_server.py` main() and
`atom/model_engine/arg_utils.py` EngineArgs.add_cli_args): the entrypoint `python3 -m atom.entrypoints.openai_server`;
`--host` and `--server-port` are the HTTP server's (`--port` is the engine's *internal* port, so the serving port is
`--server-port`, which the executor substitutes: `port_flag`); `--model`, `--tensor-parallel-size`/`-tp`,
`--enable-expert-parallel`, `--enable-dp-attention`, `--max-model-len`, `--max-num-seqs`, `--method`,
`--num-speculative-tokens` are defined there. `--served-model-name`, `--load-format`, `--draft-model` and
`--spec-decode-acceptance-length` come from later releases (ATOM's docs and InferenceX's atom recipes), not from the
arg_utils read; unverified against the exact image a job names.

KV offload (`kv-offload-backend: lmcache`): ATOM's in-engine LMCache connector (ROCm/ATOM
atom/kv_transfer/offload: `--kv-transfer-config {"kv_connector": "lmcache_offload", "kv_role": "offload"}`), which
builds its LMCache engine from the `LMCACHE_*` environment as vLLM's LMCache connector does
(atom/kv_transfer/offload/config.py: `LMCacheEngineConfig.from_env()`), each TP worker its own
`LMCACHE_MAX_LOCAL_CPU_SIZE` pool: InferenceX's kimik3 and glm5.2 ATOM agentic rows (amd-master.yaml) run it, their
script dividing the DRAM budget by TP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from llmsweep.engine_ids import ATOM
from llmsweep.engines.base import (
    BIND_HOST,
    HOST_FIX,
    MODEL_FIX,
    PINNED_POOL_FLAGS,
    SERVED_NAME_FIX,
    Adapter,
    Derived,
    RoleContext,
    agentic_conc,
    token_count,
    topology,
)
from llmsweep.engines.sglang import model_path, per_rank_gb
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId

if TYPE_CHECKING:
    from llmsweep.evals.context import NativeContext

UNDERSCORE_FLAGS: dict[str, str] = {
    "--kv-cache-dtype": "--kv_cache_dtype",
    "--enable-prefix-caching": "--enable_prefix_caching",
    "--no-enable-prefix-caching": "--no-enable_prefix_caching",
    "--load-dummy": "--load_dummy",
}
"""ATOM's long flags spelled with `_` (ROCm/ATOM atom/model_engine/arg_utils.py EngineArgs.add_cli_args, the same in
every release read: `--kv_cache_dtype`, `--enable_prefix_caching` and its BooleanOptionalAction negative
`--no-enable_prefix_caching`, `--load_dummy`); every other flag is spelled with `-`."""


SPEC_METHODS: frozenset[str] = frozenset({"mtp", "eagle3", "dspark"})
"""serve.spec-decoding methods ATOM serves, spelled as its `--method` takes them: the parser's `choices` (ROCm/ATOM
atom/model_engine/arg_utils.py EngineArgs.add_cli_args; the early release at 0027562b allows `mtp` only, later ones
add `eagle3` and `dspark`). Any other value (`eagle`, `draft_model`, `ngram`, `medusa`) is refused by ATOM's argparse
at start-up (`invalid choice`), so the adapter refuses it before the GPU is taken."""
DRAFT_MODEL_METHODS = frozenset({"eagle3"})
"""Methods ATOM serves only from a standalone draft checkpoint (`--draft-model`: "Required when --method eagle3")."""


POOL_PIN_FIX = (
    "ATOM has no flag that pins its KV pool (vLLM's --num-gpu-blocks-override, --kv-cache-memory-bytes): it sizes its "
    "block count from the memory its weights leave at --gpu-memory-utilization (ROCm/ATOM atom/model_engine/"
    "arg_utils.py EngineArgs defines neither; Config.num_kvcache_blocks is no CLI flag), so size the pool with "
    "`--gpu-memory-utilization`, or delete the flag")
"""Why ATOM refuses vLLM's KV-pool pins, and what to write instead: its parser defines neither flag (argparse refuses
it at start-up), and the simulator, which would otherwise count the blocks in vLLM's, refuses it for an ATOM job too
(`engines.sim.SimAdapter._pinned_pool`)."""


OFFLOAD_CONNECTOR = "lmcache_offload"
"""ATOM's in-engine LMCache KV-offload connector (ROCm/ATOM atom/kv_transfer/offload/__init__.py registers it with
its KVConnectorFactory), `kv_role: offload`."""


class ATOMAdapter(Adapter):
    identity = ATOM
    context_flag: ClassVar[str | None] = "--max-model-len"
    running_cap_flag: ClassVar[str | None] = "--max-num-seqs"
    launch_flags: ClassVar[dict[str, str]] = {"--host": HOST_FIX, "--model": MODEL_FIX,
                                              "--served-model-name": SERVED_NAME_FIX}
    expert_parallel_all_ranks: ClassVar[bool] = True
    parallel_flags: ClassVar[frozenset[str]] = frozenset({"--tensor-parallel-size", "--enable-expert-parallel",
                                                          "--enable-dp-attention", "--data-parallel-size"})
    spec_flags: ClassVar[frozenset[str]] = frozenset({"--method", "--num-speculative-tokens", "--draft-model",
                                                      "--spec-decode-acceptance-length"})
    flag_aliases: ClassVar[dict[str, str]] = {"--tp": "--tensor-parallel-size", "--dp": "--data-parallel-size"}
    port_flag: ClassVar[str] = "--server-port"
    supports_pp: ClassVar[bool] = False  # ROCm/ATOM's public CLI has no pipeline-parallel flag
    kv_offload_backends: ClassVar[frozenset[str]] = frozenset({"lmcache"})
    unsupported_args: ClassVar[dict[str, str]] = {
        "--mem-fraction-static": "ATOM spells it `--gpu-memory-utilization`",
        "--enable-hierarchical-cache": "HiCache is SGLang's",
        "--speculative-config": "write `serve.spec-decoding`",
        **dict.fromkeys(PINNED_POOL_FLAGS, POOL_PIN_FIX),
    }

    def launcher(self, job: Job) -> list[str]:
        return ["python3", "-m", "atom.entrypoints.openai_server"]

    def read_context(self, value: Any) -> int | str | None:
        """`--max-model-len` as ATOM reads it: argparse `type=int, default=None` in every release read (ROCm/ATOM
        `atom/model_engine/arg_utils.py` `EngineArgs.add_cli_args`, from the early 0027562b to the trees with
        DeepSeek-V4's `--index-cache-dtype`), so `auto` and `32k` fail at start-up ("invalid int value"); unset,
        `atom/config.py` `Config.__post_init__` takes the checkpoint's `max_position_embeddings`, and a length is cut
        to it (`min(max_model_len, max_position_embeddings)`). Nothing fits the context to the KV memory: -1 (vLLM's
        `auto`) or 0 would be kept as the length itself, no context a request fits, so a count below 1 is none here
        (None), refused by `serve.context-conflict` saying why (:meth:`context_unread`)."""
        count = token_count(value)
        return count if count is not None and count >= 1 else None

    def context_limit(self, job: Job) -> NativeContext | None:
        """The checkpoint's `max_position_embeddings`, which ATOM cuts `--max-model-len` to without a word (ROCm/ATOM
        `atom/config.py` `Config.__post_init__`: `min(max_model_len, max_position_embeddings)`), as llmsweep knows it
        (`evals.context.native_context_of`: the local checkpoint's config.json, else the model catalog's native
        context, which may be marked an estimate); None when neither says. `launched_context` records the cut length
        in job.json (not where only an estimate is known: `context_cap`), and `serve.context-capped` says that a recipe
        asked for more.

        The live read-back cannot catch the cut: ATOM's `/v1/models` says no `max_model_len` (ROCm/ATOM
        `atom/entrypoints/openai/protocol.py` `ModelCard`: id, object, created and owned_by only; `api_server.py`
        `list_models`), so `execute.ready.served_context` reads none for an ATOM server and provenance
        `launch.context_served` stays absent: the length ATOM serves is known from the plan alone."""
        from llmsweep.evals.context import native_context_of

        return native_context_of(job)

    def context_unread(self, value: Any) -> str:
        """`auto` and `32k` fail ATOM's argparse `type=int` at start-up; -1 and 0 pass it and are kept as the length
        itself (:meth:`read_context`)."""
        if token_count(value) is not None:
            return ("is no context length ATOM serves (its parser takes the number, and ATOM keeps it as the length "
                    "itself, which no request fits: ATOM fits no context to its memory, as vLLM does for -1)")
        return ("is no number of tokens ATOM's parser takes (a whole number only, argparse type=int: ATOM fits no "
                "context to its memory, and without the flag serves the checkpoint's max_position_embeddings)")

    def engine_spelling(self, flag: str, role: RoleContext | None = None) -> str:
        """ATOM's spelling: plain argparse, which folds no `-`/`_`, over flags spelled mostly with `-` and a few with
        `_` (`UNDERSCORE_FLAGS`). A recipe's `--kv-cache-dtype` (one flag to the policy, which compares them
        normalised) is passed as `--kv_cache_dtype`, and `--max_num_seqs` as `--max-num-seqs`, rather than refused at
        start-up (`unrecognized arguments`)."""
        if not flag.startswith("--"):
            return flag
        dashed = "--" + flag[2:].replace("_", "-")
        return UNDERSCORE_FLAGS.get(dashed, dashed)

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived(notes=["ATOM flags checked against ROCm/ATOM's public CLI; --served-model-name, --load-format "
                           "and --spec-decode-acceptance-length from later releases' docs: confirm against the image"])
        tp, _pp, ep, dp_attn, _dcp, _pcp = topology(job)
        a = d.args
        a["--model"] = model_path(job)
        a["--served-model-name"] = job.workload.served_model_name
        a["--host"] = BIND_HOST
        a[self.port_flag] = port
        a["--tensor-parallel-size"] = tp
        if ep > 1:
            a["--enable-expert-parallel"] = True
        if dp_attn:
            a["--enable-dp-attention"] = True
        self.derive_context(job, d)
        if job.serve is not None and job.serve.load_format:
            a["--load-format"] = job.serve.load_format
        if job.scenario is ScenarioId.AGENTIC_CODING:
            a["--max-num-seqs"] = 2 * agentic_conc(job)
            # An agentic replay measures prefix reuse: ATOM releases whose `--enable_prefix_caching` is a plain
            # store_true (ROCm/ATOM arg_utils.py at 0027562b: default off) would run it with no prefix cache; later
            # ones (BooleanOptionalAction) default it on. Written out unless the recipe chose either way.
            if self.recipe_value(job, "--enable-prefix-caching") is None \
                    and self.recipe_value(job, "--no-enable-prefix-caching") is None:
                a["--enable-prefix-caching"] = True
        if job.kv_offloading == "dram" and job.kv_offload_backend is not None \
                and job.kv_offload_backend.name == "lmcache":
            total = job.total_cpu_dram_gb or 0
            a["--kv-transfer-config"] = {"kv_connector": OFFLOAD_CONNECTOR, "kv_role": "offload"}
            d.env["LMCACHE_LOCAL_CPU"] = "True"
            d.env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = str(per_rank_gb(total, tp))
            d.notes.append(f"KV offload (lmcache): {total} GB total-cpu-dram-gb, {per_rank_gb(total, tp)} GB on each "
                           f"of the {tp} TP workers")
        sd = job.serve.spec_decoding if job.serve is not None else None
        if sd is not None and job.spec_decoding != "none":
            if sd.method not in SPEC_METHODS:
                raise ConfigError(f"ATOM has no `{sd.method}` speculative decoding: its `--method` takes "
                                  f"{', '.join(sorted(SPEC_METHODS))} only, and refuses `{sd.method}` at start-up",
                                  fix=f"use one of {', '.join(sorted(SPEC_METHODS))} (an MTP head is `mtp` on ATOM), "
                                      f"or an engine that serves {sd.method}")
            if sd.method in DRAFT_MODEL_METHODS and not sd.draft_model:
                raise ConfigError(f"ATOM's `{sd.method}` drafting needs the draft checkpoint (`--draft-model`): "
                                  "it refuses to start without one",
                                  fix="set `serve.spec-decoding.draft-model`")
            a["--method"] = sd.method
            if sd.draft_model:
                a["--draft-model"] = sd.draft_model
            if sd.num_steps is not None:
                a["--num-speculative-tokens"] = sd.num_steps
            pin = self.pinned_acceptance(job)
            if pin is not None:
                a.update(pin.args)
        return d
