"""SGLang: `python3 -m sglang.launch_server`, speculative decoding as EAGLE flags, synthetic acceptance as env.

SGLang spells every MTP/EAGLE draft as `--speculative-algorithm EAGLE` (EAGLE3 for eagle3 heads); K is
`--speculative-num-steps`. Synthetic acceptance is three environment variables, spelled by the engine's identity
(`engine_ids.SGLANG`; the token mode is only read from 0.5.16 — policy gates it on the image's version). HiCache sizes
its host pool per rank in GB.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from llmsweep.catalog.engines import flag_default
from llmsweep.catalog.version import Version, as_version
from llmsweep.engine_ids import SGLANG
from llmsweep.engines.base import (
    BIND_HOST,
    DIST_INIT_PORT,
    HOST_FIX,
    MODEL_FIX,
    PINNED_POOL_FLAGS,
    SERVED_NAME_FIX,
    Adapter,
    Derived,
    RoleContext,
    agentic_conc,
    topology,
)
from llmsweep.engines.checkpoint_kv import CheckpointKvDtype
from llmsweep.engines.launch import NODE_RANK, LaunchSpec, RoleWorker, node_host
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of

SPEC_ALGORITHM: dict[str, str] = {
    "mtp": "EAGLE",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "draft_model": "STANDALONE",
    "ngram": "NGRAM",
    "dspark": "DSPARK",
}
"""serve.spec-decoding method → `--speculative-algorithm`. SGLang has no Medusa: a `medusa` recipe is refused (its
heads loaded as an EAGLE draft would fail, or measure another method under Medusa's name). DSpark is its own
algorithm from SGLang 0.5.16 (sgl-project/sglang#30261; the `sglang.speculative-algorithm-dspark` gate refuses it on
older images): its draft runs in blocks of `--speculative-dspark-block-size` tokens, and SGLang sets the step count,
top-k and draft tokens from the block itself (one step, top-k 1, block + 1 draft tokens)."""
DRAFT_MODEL_METHODS = frozenset({"draft_model", "dspark"})
"""Methods SGLang serves only from a draft checkpoint (`--speculative-draft-model-path`): a small standalone model,
DSpark heads. An EAGLE or EAGLE-3 launch (`eagle`, `eagle3`, and `mtp` rendered as EAGLE) without one takes the
target's own MTP layers as the draft, which SGLang does for a model that has them: a model the catalog knows to have
none fails at start-up without the checkpoint (`_needs_draft`). `ngram` needs no model."""
CUDA_GRAPH_MAX_BS_CAP = 64
BOOTSTRAP_PORT = 8998
"""SGLang's default `--disaggregation-bootstrap-port`: the prefill server's KV-handshake port the router passes on."""
ROUTER_PORT = 30000
"""The PD router's port in InferenceX's AMD disagg script (wave-2 spec §6.4); its workers serve on 8000 there."""
WORKER_PORT = 8000


EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
PREFILL_ROUND_ROBIN_BEFORE = Version.parse("0.5.7")
"""SGLang releases before this one assert `--prefill-round-robin-balance` on a decode worker of dp-size > 1 (its
ServerArgs `_handle_disaggregation`: "Prefill round robin balance is required when dp size > 1. Please make sure that
the prefill instance is launched with `--load-balance-method round_robin` and `--prefill-round-robin-balance` is set
for decode server"). sgl-project/sglang#16195 (2025-12-31) deprecated the flag and dropped the assert, and #16110
(2025-12-30) made the prefill's default `follow_bootstrap_room`, after which `round_robin` on a prefill worker is
truly round-robin and no longer what the decode worker expects: the flags are rendered only below this version.
The bound is the first release after those merges (0.5.6.post2 was the release they followed); whether 0.5.7 itself
carries them is not established, so a 0.5.7/0.5.8 decode that still asserts fails at start-up, loudly."""
"""The algorithms SGLang sizes with the (num-steps, eagle-topk, num-draft-tokens) triple."""


def eagle_triple(method: str, steps: int | None, topk: int | None,
                 draft_tokens: int | None) -> tuple[int | None, int | None, int | None]:
    """The (num-steps, eagle-topk, num-draft-tokens) SGLang is launched with for an EAGLE-family draft.

    SGLang takes all three or none (sglang/srt/server_args.py `_handle_speculative_decoding`): with no num-steps it
    asserts the other two are unset and chooses all three itself; with num-steps but no top-k it compares `None > 1`
    and dies at start-up. A recipe that gives only K (`num-steps`) means the chain draft the golden curves are keyed
    on: top-k 1 and K + 1 draft tokens (what SGLang itself forces for top-k 1). A top-k above 1 without its draft
    tokens, or a top-k or draft-token count without K, is refused: no one value is what the recipe meant."""
    if steps is None:
        if topk is not None or draft_tokens is not None:
            raise ConfigError(f"SGLang's `{method}` drafting needs `num-steps` beside `topk`/`num-draft-tokens`: it "
                              "takes all three or none (and chooses all three itself with none)",
                              fix="add `serve.spec-decoding.num-steps` (K), or drop `topk` and `num-draft-tokens`")
        return steps, topk, draft_tokens
    if topk is None:
        topk = 1
    if draft_tokens is None:
        if topk != 1:
            raise ConfigError(f"SGLang's `{method}` drafting with topk {topk} needs `num-draft-tokens` (the tree's "
                              "verified tokens): SGLang has no default for it",
                              fix="add `serve.spec-decoding.num-draft-tokens`, or use topk 1 (a chain of K + 1)")
        draft_tokens = steps + 1
    return steps, topk, draft_tokens


NGRAM_BREADTH_FLAG = "--speculative-ngram-max-bfs-breadth"


def ngram_tree(steps: int | None, topk: int | None, draft_tokens: int | None) -> tuple[None, int | None]:
    """The (eagle-topk, num-draft-tokens) an NGRAM draft is launched with, for the recipe's K (`num-steps`).

    SGLang's NGRAM reads neither `--speculative-num-steps` nor `--speculative-eagle-topk`
    (sglang/srt/server_args.py `_handle_speculative_decoding`): its tree's breadth is
    `--speculative-ngram-max-bfs-breadth` (default 10), written over any top-k, and the tokens it verifies a step are
    `--speculative-num-draft-tokens`, which defaults to `--speculative-ngram-max-match-window-size` (12). Rendered as K
    alone, an `ngram` K=3 job drafted 11 tokens a step under a K=3 label. K drafts are K + 1 verified tokens (the tree
    counts the last accepted token as its root, as SGLang's EAGLE chain of K does: `ngram_info.NgramVerifyInput`
    commits the accepted drafts + 1). A `topk` SGLang would overwrite is refused."""
    if topk is not None:
        raise ConfigError(f"SGLang's NGRAM drafting ignores `topk` {topk}: it sets the tree's breadth from "
                          f"{NGRAM_BREADTH_FLAG} (default 10)",
                          fix="drop `serve.spec-decoding.topk`; set the breadth with "
                              f"`serve.args: {{{NGRAM_BREADTH_FLAG}: {topk}}}`")
    if draft_tokens is None and steps is not None:
        draft_tokens = steps + 1
    return None, draft_tokens


HICACHE_DIRECT_PAGE_FIRST_FROM = Version.parse("0.5.4")
"""The first release read that runs the page_first layout with the direct I/O backend as page_first_direct ("Page
first layout is not supported with direct IO backend"): through 0.5.9 HiRadixCache.__init__ rewrites it at start-up
(before it sizes the host pool; a FIXME there says the logic belongs in server-args parsing), from 0.5.10
ServerArgs._handle_hicache does (PyPI wheels 0.5.4, 0.5.9, 0.5.10, 0.5.12 through 0.5.23). 0.5.1 has no
page_first_direct layout (its --hicache-mem-layout takes layer_first and page_first) and runs page_first as written;
0.5.2 and 0.5.3 are not read."""
HICACHE_SOURCE = ("sglang python/sglang/srt/server_args.py ServerArgs._handle_hicache (arg_groups/hicache_hook.py "
                  "handle_hicache from 0.5.19), read in the PyPI wheels of 0.5.4, 0.5.9 and 0.5.10 through 0.5.23")
HICACHE_DIRECT_SOURCE = ("sglang python/sglang/srt/mem_cache/hiradix_cache.py HiRadixCache.__init__ through 0.5.9, "
                         "ServerArgs._handle_hicache from 0.5.10 (arg_groups/hicache_hook.py from 0.5.19), read in the "
                         "PyPI wheels of 0.5.4, 0.5.9 and 0.5.10 through 0.5.23")


def hicache_as_launched(args: Mapping[str, Any], version: Version | None) -> tuple[dict[str, Any], dict[str, str]]:
    """SGLang's HiCache settings as its start-up normalisation leaves them (HICACHE_SOURCE), over a launch's flags
    named without dashes: a layout the I/O backend cannot take is rewritten (page_first_direct with the kernel backend
    runs on the direct one; page_first with the direct backend as page_first_direct, from 0.5.4: HiRadixCache.__init__
    through 0.5.9, HICACHE_DIRECT_PAGE_FIRST_FROM), and the mooncake
    storage backend, which takes no layer_first layout, runs layer_first as page_first (kernel I/O) or
    page_first_direct (direct I/O). Through 0.5.13 layer_first is the layout's default, so a mooncake HiCache launch
    that sets none runs page_first. A flag the launch leaves unset is read at the parser's default for `version` from
    the flag catalog; none recorded (a release not read, an image naming none): that rewrite is not judged. Returns the
    flags with each rewritten one set as launched, and a sentence per rewritten flag. Not modelled: the FlashAttention3
    decode rewrite of 0.5.9-0.5.13 (a CUDA fa3 decode backend runs HiCache on the direct backend) and 0.5.23's
    exemption of DCP > 1 from the mooncake rewrite (llmsweep launches SGLang without DCP)."""
    out = dict(args)
    rewritten: dict[str, str] = {}
    if "enable-hierarchical-cache" not in args:
        return out, rewritten

    def setting(flag: str) -> tuple[str | None, str]:
        if flag in args:
            return str(args[flag]), f"--{flag} {args[flag]}"
        default = flag_default(SGLANG.id, flag, version)
        if default is None:
            return None, ""
        return default.value, f"--{flag} (unset: sglang {default.version}'s default {default.value})"

    def rewrite(flag: str, written: str, value: str, why: str, source: str = HICACHE_SOURCE) -> None:
        out[flag] = value
        rewritten[flag] = f"SGLang launches {written} as {value}: {why} ({source})"

    io, io_said = setting("hicache-io-backend")
    layout, layout_said = setting("hicache-mem-layout")
    if layout == "page_first_direct" and io == "kernel":
        rewrite("hicache-io-backend", io_said, "direct", "its kernel I/O backend does not take page_first_direct")
        io = "direct"
    elif layout == "page_first" and io == "direct" and (
            version is None or not version.below(HICACHE_DIRECT_PAGE_FIRST_FROM)):
        rewrite("hicache-mem-layout", layout_said, "page_first_direct", "its direct I/O backend does not take "
                "page_first", HICACHE_DIRECT_SOURCE)
        layout = "page_first_direct"
    if str(args.get("hicache-storage-backend", "")) == "mooncake" and layout == "layer_first" and io in (
            "kernel", "direct"):
        rewrite("hicache-mem-layout", layout_said, "page_first" if io == "kernel" else "page_first_direct",
                f"the mooncake storage backend takes no layer_first layout (with the {io} I/O backend)")
    return out, rewritten


def model_path(job: Job) -> str:
    return job.serve.model_path if job.serve is not None and job.serve.model_path else job.model


def per_rank_gb(total_gb: int | None, ranks: int) -> int:
    """Host-pool GB per rank from the job's node-share DRAM budget (HiCache and LMCache size per rank)."""
    return max(int((total_gb or 0) // max(ranks, 1)), 0)


class SGLangAdapter(Adapter):
    identity = SGLANG
    context_flag: ClassVar[str | None] = "--context-length"
    running_cap_flag: ClassVar[str | None] = "--max-running-requests"
    checkpoint_kv_dtypes: ClassVar[dict[str, CheckpointKvDtype]] = {
        "fp8": CheckpointKvDtype(Version.parse("0.5.4"), "fp8_e4m3")}
    """At `auto` ModelRunner.configure_kv_cache_dtype (mem_cache/kv_cache_dtype.py from 0.5.19) keeps FP8 where the
    model's quant_config has kv_cache_quant_algo "FP8" (a ModelOpt config reads it from hf_quant_config.json; any
    other value keeps the model's dtype): read in the PyPI wheels 0.5.4, 0.5.9, 0.5.12, 0.5.19 and 0.5.23, where
    0.4.6, 0.4.10 and 0.5.1 keep the model's dtype (0.5.2 and 0.5.3 not read)."""
    launch_flags: ClassVar[dict[str, str]] = {"--host": HOST_FIX, "--model-path": MODEL_FIX,
                                              "--served-model-name": SERVED_NAME_FIX}
    renders_draft_tree: ClassVar[bool] = True
    parallel_flags: ClassVar[frozenset[str]] = frozenset(
        {"--tp-size", "--pp-size", "--ep-size", "--dp-size", "--enable-dp-attention"}
    )
    spec_flags: ClassVar[frozenset[str]] = frozenset({
        "--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
        "--speculative-num-draft-tokens", "--speculative-draft-model-path"})
    # ServerArgs' long spellings of the parallel sizes are aliases of the short ones (sglang's own
    # test_server_args_annotated_cli `test_aliases_and_dest`: `--tp-size`/`--tensor-parallel-size`, and pp, dp, ep).
    flag_aliases: ClassVar[dict[str, str]] = {"--tp": "--tp-size", "--pp": "--pp-size", "--ep": "--ep-size",
                                               "--dp": "--dp-size", "--tensor-parallel-size": "--tp-size",
                                               "--pipeline-parallel-size": "--pp-size",
                                               "--data-parallel-size": "--dp-size",
                                               "--expert-parallel-size": "--ep-size", "--model": "--model-path",
                                               "--max-model-len": "--context-length"}
    unsupported_args: ClassVar[dict[str, str]] = {
        "--gpu-memory-utilization": "SGLang spells it `--mem-fraction-static`",
        "--max-num-seqs": "SGLang spells it `--max-running-requests`",
        "--speculative-config": "write `serve.spec-decoding`; SGLang takes --speculative-* flags",
        "--kv-transfer-config": "SGLang offloads KV with HiCache: `kv-offload-backend: {name: hicache}`",
        "--max-num-batched-tokens": "SGLang spells it `--chunked-prefill-size`",
        **dict.fromkeys(PINNED_POOL_FLAGS,
                        "SGLang has no flag that pins its KV pool (these are vLLM's): it sizes the pool from "
                        "`--mem-fraction-static`, and `--max-total-tokens` caps it"),
    }
    kv_offload_backends: ClassVar[frozenset[str]] = frozenset({"hicache", "mooncake"})
    disagg_transfer_default: ClassVar[str | None] = "mooncake"
    disagg_worker_port: ClassVar[int | None] = WORKER_PORT
    role_port_flags: ClassVar[tuple[str, ...]] = ("--disaggregation-bootstrap-port", "--dist-init-addr")
    dynamo_module: ClassVar[str | None] = "dynamo.sglang"

    def launcher(self, job: Job) -> list[str]:
        return ["python3", "-m", "sglang.launch_server"]

    def as_launched(self, args: Mapping[str, Any], version: Version | None) -> tuple[dict[str, Any], dict[str, str]]:
        return hicache_as_launched(args, version)

    def engine_spelling(self, flag: str, role: RoleContext | None = None) -> str:
        """SGLang's spelling: every server flag is spelled with `-` (ServerArgs field `mem_fraction_static` →
        `--mem-fraction-static`) and its plain argparse folds no `_` into `-`, so a recipe's `--mem_fraction_static`
        (one flag to the policy, which compares them normalised) is passed as `--mem-fraction-static` rather than
        refused at start-up (`unrecognized arguments`)."""
        return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived()
        parallel = topology(job)
        tp, pp, ep, dp_attn = parallel.tp, parallel.pp, parallel.ep, parallel.dp_attn
        a = d.args
        a["--model-path"] = model_path(job)
        a["--served-model-name"] = job.workload.served_model_name
        a["--host"] = BIND_HOST
        a["--port"] = port
        a["--tp-size"] = tp
        if pp > 1:
            a["--pp-size"] = pp
        a["--ep-size"] = ep
        if dp_attn:
            a["--enable-dp-attention"] = True
            a["--dp-size"] = parallel.dp_ranks
        self.derive_context(job, d)
        if job.serve is not None and job.serve.load_format:
            a["--load-format"] = job.serve.load_format
        a["--enable-metrics"] = True
        if job.scenario is ScenarioId.AGENTIC_CODING:
            conc = agentic_conc(job)
            a["--max-running-requests"] = 2 * conc
            a["--cuda-graph-max-bs"] = min(conc, CUDA_GRAPH_MAX_BS_CAP)
        self._kv_offload(job, d, tp * pp)
        self._spec(job, d)
        return d

    def _kv_offload(self, job: Job, d: Derived, ranks: int) -> None:
        if job.kv_offloading != "dram" or job.kv_offload_backend is None:
            return
        d.args["--enable-hierarchical-cache"] = True
        d.args["--hicache-size"] = per_rank_gb(job.total_cpu_dram_gb, ranks)
        if job.kv_offload_backend.name == "mooncake":
            d.args["--hicache-storage-backend"] = "mooncake"
        d.notes.append(f"HiCache host pool: {job.total_cpu_dram_gb} GB total-cpu-dram-gb over {ranks} ranks")

    def _spec(self, job: Job, d: Derived) -> None:
        sd = job.serve.spec_decoding if job.serve is not None else None
        if sd is None or job.spec_decoding == "none":
            return
        algorithm = SPEC_ALGORITHM.get(sd.method)
        if algorithm is None:
            raise ConfigError(f"SGLang has no `{sd.method}` speculative decoding",
                              fix=f"use one of {', '.join(SPEC_ALGORITHM)}, or an engine that serves {sd.method}")
        if not sd.draft_model and (why := _needs_draft(job, sd.method)) is not None:
            raise ConfigError(f"SGLang's `{sd.method}` drafting needs the draft checkpoint "
                              f"(`--speculative-draft-model-path`): {why}, and SGLang fails at start-up without one",
                              fix="set `serve.spec-decoding.draft-model` to the draft's checkpoint")
        d.args["--speculative-algorithm"] = algorithm
        if sd.draft_model:
            d.args["--speculative-draft-model-path"] = sd.draft_model
        steps, topk, draft_tokens = sd.num_steps, sd.topk, sd.num_draft_tokens
        if algorithm == "DSPARK":
            if (topk or 1) != 1 or draft_tokens not in (None, (steps or 0) + 1):
                raise ConfigError(
                    "SGLang's DSpark drafts a chain of its block size (top-k 1, block + 1 draft tokens) and sets "
                    f"both itself: topk {topk} / num-draft-tokens {draft_tokens} would not run as written",
                    fix="drop `topk` and `num-draft-tokens`; `num-steps` K is the DSpark block size")
            if steps is not None:
                d.args["--speculative-dspark-block-size"] = steps
            steps = topk = draft_tokens = None
        if algorithm in EAGLE_FAMILY:
            steps, topk, draft_tokens = eagle_triple(sd.method, steps, topk, draft_tokens)
        elif algorithm == "NGRAM":
            topk, draft_tokens = ngram_tree(steps, topk, draft_tokens)
        if steps is not None:
            d.args["--speculative-num-steps"] = steps
        if topk is not None:
            d.args["--speculative-eagle-topk"] = topk
        if draft_tokens is not None:
            d.args["--speculative-num-draft-tokens"] = draft_tokens
        pin = self.pinned_acceptance(job)
        if pin is not None:
            if topk is not None and topk != 1:
                raise ConfigError(
                    f"SGLang cannot pin the acceptance length of a `{sd.method}` draft tree with topk {topk}: its "
                    "synthetic acceptance replays the real draft tokens (SGLANG_SIMULATE_ACC_TOKEN_MODE="
                    "real-draft-token), which SGLang refuses at the first verify step unless "
                    "--speculative-eagle-topk is 1",
                    fix="use topk 1 (a chain of K + 1 draft tokens, what the golden curves are keyed on)")
            d.env.update(pin.env)

    def derive_role(self, job: Job, port: int, role: RoleContext, d: Derived) -> None:
        """SGLang's PD-disaggregation flags (`sglang.srt.server_args`): the worker's mode, the KV-transfer backend
        (the job's `kv-p2p-transfer`, e.g. mori on AMD, as InferenceX's `KV_P2P_TRANSFER` overrides it; mooncake by
        default), the prefill bootstrap port; a worker wider than a node adds `--nnodes/--node-rank/--dist-init-addr`.
        Unverified against a run: the RDMA device flag (`--disaggregation-ib-device`) is site-specific and left to
        `serve.args`."""
        a = d.args
        a["--disaggregation-mode"] = role.kind
        a["--disaggregation-transfer-backend"] = role.transfer
        if role.kind == "prefill":
            a["--disaggregation-bootstrap-port"] = BOOTSTRAP_PORT
        if len(role.nodes) > 1:
            a["--nnodes"] = len(role.nodes)
            a["--node-rank"] = NODE_RANK
            a["--dist-init-addr"] = f"{role.head}:{DIST_INIT_PORT}"
        self._dp_balance(job, role, d)

    def _dp_balance(self, job: Job, role: RoleContext, d: Derived) -> None:
        """A DP-attention worker (dp-size > 1) of an SGLang before PREFILL_ROUND_ROBIN_BEFORE: the decode worker
        gets `--prefill-round-robin-balance` (else ServerArgs asserts at start-up) and the prefill worker
        `--load-balance-method round_robin` (its default then, written out as the assert's message asks)."""
        dp = d.args.get("--dp-size")
        if not isinstance(dp, int) or dp <= 1:
            return
        version = as_version(self.image_and_version(job)[1])
        if version is None or version.base >= PREFILL_ROUND_ROBIN_BEFORE.base:
            said = "unknown" if version is None else str(version)
            d.notes.append(f"DP attention in disaggregation: no --prefill-round-robin-balance / --load-balance-method "
                           f"round_robin for SGLang {said} (only releases before {PREFILL_ROUND_ROBIN_BEFORE} assert "
                           "it; later ones route prefill DP ranks by bootstrap room, sgl-project/sglang#16110)")
            return
        if role.kind == "decode":
            d.args["--prefill-round-robin-balance"] = True
        elif role.kind == "prefill":
            d.args["--load-balance-method"] = "round_robin"

    def _bootstrap_port(self, spec: LaunchSpec) -> int:
        """The bootstrap port a prefill worker's launch listens on, as rendered (`role_ports`: a recipe's
        `--disaggregation-bootstrap-port` replaces the derived one), which the router must hand on: it passed the
        default 8998 whatever the worker listened on."""
        ports = [p for flag, p in self.role_ports(spec) if flag == "--disaggregation-bootstrap-port"]
        return ports[-1].start if ports else BOOTSTRAP_PORT

    def router_spec(self, job: Job, prefill: list[RoleWorker], decode: list[RoleWorker], node: int,
                    transfer: str) -> LaunchSpec:
        """`python3 -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP … --decode URL …`
        (sglang-router; the AMD disagg script's router on port 30000)."""
        argv = ["python3", "-m", "sglang_router.launch_router", "--pd-disaggregation"]
        for w in prefill:
            argv += ["--prefill", f"http://{w.spec.host}:{w.spec.port}", str(self._bootstrap_port(w.spec))]
        for w in decode:
            argv += ["--decode", f"http://{w.spec.host}:{w.spec.port}"]
        argv += ["--host", BIND_HOST, "--port", str(ROUTER_PORT)]
        version = job.router.version if job.router is not None else None
        return LaunchSpec(engine="sglang-router", engine_version=version, image=job.image, argv=tuple(argv),
                          host=node_host(node), port=ROUTER_PORT, health_path="/health", metrics_path=None,
                          served_model_name=job.workload.served_model_name,
                          notes=(f"PD router over {len(prefill)} prefill and "
                                 f"{count_of(len(decode), 'decode worker')}; KV "
                                 f"moves prefill→decode over {transfer}",))


def _needs_draft(job: Job, method: str) -> str | None:
    """Why a launch of `method` without a draft checkpoint cannot start, or None where SGLang drafts without one: a
    standalone or DSpark draft is always a checkpoint of its own; an EAGLE-family head is the target's own MTP layers
    only where the model has them (SGLang then takes the target's path as the draft), so a model the catalog knows to
    have none needs one (a model the catalog does not know is not judged)."""
    if method in DRAFT_MODEL_METHODS:
        return f"`{method}` drafts with a model of its own"
    if SPEC_ALGORITHM.get(method) not in EAGLE_FAMILY:
        return None
    from llmsweep.catalog.models import find_model

    model = find_model(job.model)
    if model is None or model.mtp_layers > 0:
        return None
    return (f"{model.id} has no MTP layers (the catalog: mtp_layers 0) for SGLang to take as the draft in its "
            "stead")
