"""Every declared field is consumed by the engine adapter or rejected: no silently ignored knob.

InferenceX lost `--ep-size` in a launcher (GSM8K 0.93 on the PR, 0.0 after merge), declared `ep: 4` for a script
without EP, and ran MTP configs through non-MTP scripts. Here the adapter says what it consumes; what it would drop
is an error before launch.
"""

from __future__ import annotations

from collections.abc import Iterator

from llmsweep.catalog.version import Version
from llmsweep.engine_ids import SIM
from llmsweep.engines import ADAPTERS, adapter_for, get_adapter
from llmsweep.engines.base import AUTO_CONTEXT, Conflict, job_version, pools
from llmsweep.engines.launch import is_secret_name
from llmsweep.engines.sim import SimAdapter
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.policy.context import Context, entry_path, serve_arg_path, serve_env_path
from llmsweep.policy.registry import rule
from llmsweep.spec.source import FieldPath
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of

EP_LESSON = "InferenceX changelog #1266: a launcher silently dropped --ep-size (GSM8K 0.93 → 0.0); #1019 ep: 4 unused"


@rule("serve.unsupported-arg", Severity.ERROR, "A serve flag the job's engine does not have",
      "use the engine's own spelling (the message names it)", EP_LESSON)
def unsupported_arg(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        for flag, fix in adapter.unsupported(job):
            yield ctx.hit("serve.unsupported-arg", recipe, serve_arg_path(recipe, job, flag),
                          f"{adapter.name} has no `{flag}`: it would be rejected or ignored", job=job, fix=fix)


@rule("serve.ambiguous-flag", Severity.ERROR,
      "A serve flag abbreviates several of the engine's flags (its argparse refuses to start)",
      "write the flag in full (the message lists what it could mean)",
      "issue 14: `--speculative-conf` reaches vLLM 0.26.0 as `--speculative-config`; argparse resolves unique "
      "prefixes and refuses ambiguous ones")
def ambiguous_flag(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        for exc in adapter_for(job).ambiguous_flags(job):
            original = next((k for k in (job.serve.args if job.serve else {}) if k.split("=", 1)[0] == exc.flag),
                            exc.flag)
            yield ctx.hit("serve.ambiguous-flag", recipe, serve_arg_path(recipe, job, original),
                          f"`{exc.flag}` is ambiguous to {job.engine}: it could be {', '.join(exc.candidates)}",
                          job=job, fix="write the flag in full")


@rule("serve.duplicate-flag", Severity.ERROR,
      "Two serve flags the engine's parser reads as one flag (two spellings, an alias, an abbreviation)",
      "keep one of them, spelled in full; an override replaces a base flag only when it spells it the same way",
      "the engine's parser takes the last of them silently, so the other value never runs")
def duplicate_flag(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine is None:
            continue
        adapter = adapter_for(job)
        if isinstance(adapter, SimAdapter):  # it reads the flags as the engine it stands in for
            adapter = adapter.flag_reader(job) or adapter
        for first, later, name in adapter.duplicate_flags(job):
            yield ctx.hit("serve.duplicate-flag", recipe, serve_arg_path(recipe, job, later),
                          f"`{first}` and `{later}` are one flag to {adapter.name} (`{name}`): it would take one of "
                          "them silently", job=job,
                          fix=f"keep one of them, spelled `{name}` (in an override too, so that it replaces the base "
                              "flag)")
        if recipe.serve is None or job.serve is None:
            continue
        for index in job.serve.applied_overrides:
            args = recipe.serve.overrides[index].args
            removed = [k for k, v in args.items() if v is None or v is False]
            for key, kept, name in adapter.unremoved_flags(job, removed):
                yield ctx.hit("serve.duplicate-flag", recipe, ("serve", "overrides", index, "args", key),
                              f"`{key}: {args[key]}` removes nothing: {adapter.name} reads it as `{name}`, which the "
                              f"launch still sets as `{kept}`", job=job,
                              fix=f"spell it `{kept}`, as the flag it removes is spelled")


@rule("serve.flag-unknown", Severity.WARNING,
      "A serve flag the engine's parser is not known to define, one slip away from one it does (a typo)",
      "rename it to the flag the message names; if the flag is real and new, add it to the catalog's engine_flags.yaml",
      "the engine's argparse refuses an unknown flag at launch, after the job waited for its node")
def flag_unknown(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        for written, meant in adapter.misspelled_flags(job):
            yield ctx.hit("serve.flag-unknown", recipe, serve_arg_path(recipe, job, written),
                          f"`{written}` is not a flag {adapter.name}'s parser is known to define; did you mean "
                          f"`{meant}`? The engine would refuse to start", job=job, fix=f"rename it to `{meant}`")


@rule("serve.flag-value", Severity.ERROR,
      "A serve flag's value the engine's parser does not accept (its argparse `choices`)",
      "use one of the values the message lists (the engine's own spelling)",
      "SGLang's `--kv-cache-dtype` takes fp8_e4m3/fp8_e5m2, never vLLM's `fp8`: argparse refuses it at start-up, "
      "after the job waited for its node (catalog engine_flags.yaml `values`, each with its source)")
def flag_value(ctx: Context) -> Iterator[Finding]:
    """A value outside the catalog's choices for the flag. An error when the image's engine version is one the list
    covers; a warning when the version is unknown or newer than the list was read from (it may accept more)."""
    from llmsweep.catalog.engines import flag_values
    from llmsweep.catalog.version import as_version
    from llmsweep.policy.context import engine_flags

    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        table = flag_values(adapter.name)
        if not table:
            continue
        version = as_version(adapter.image_and_version(job)[1])
        for written, name, value in engine_flags(job):
            entry = table.get(name)
            if entry is None or value is None or isinstance(value, bool) or str(value) in entry.choices:
                continue
            newer = (version is not None and entry.complete_through is not None
                     and version.base > entry.complete_through.base)
            near = entry.suggestions(str(value))
            hint = f"; did you mean {' or '.join(f'`{n}`' for n in near)}?" if near else ""
            said = (f"`{written}: {value}` is not a value {adapter.name}'s parser accepts for `{name}` (it takes "
                    f"{', '.join(entry.choices)}){hint}")
            severity = None
            if version is None or newer:
                severity = Severity.WARNING
                said += (f" (the image's {adapter.name} version is unknown" if version is None
                         else f" ({adapter.name} {version} is newer than {entry.complete_through}, the release the "
                              "list was read from") + ": it may accept more)"
            yield ctx.hit("serve.flag-value", recipe, serve_arg_path(recipe, job, written), said, job=job,
                          fix=f"use {near[0]!r}" if near else f"use one of {', '.join(entry.choices)}",
                          evidence=entry.source, severity=severity)


@rule("serve.flag-needs-value", Severity.ERROR,
      "A serve flag that takes a value written `true`: the launch renders the bare flag, which the engine's parser "
      "refuses",
      "write the flag's value (`--flag: value`), or delete the flag to take the engine's default",
      "review: `--attention-backend: true` validated clean and rendered a bare `--attention-backend`, which argparse "
      "refuses after the job waited for its node (catalog engine_flags.yaml `arity`, each engine's with its source)")
def flag_needs_value(ctx: Context) -> Iterator[Finding]:
    """`true` on a flag the engine flag catalog records as taking a value (`arity.takes-value`). A flag the catalog does
    not classify (an unlisted one, a switch, an optional value) is never refused. A memory-fraction flag is
    `serve.memory-fraction`'s."""
    from llmsweep.catalog.engines import flag_arity, flag_values
    from llmsweep.engines.base import norm_flag
    from llmsweep.engines.memory import memory_fraction_flags
    from llmsweep.policy.context import engine_flags

    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        arity = flag_arity(adapter.name)
        if arity is None:
            continue
        fractions = {written for written, _ in memory_fraction_flags(job)}
        for written, name, value in engine_flags(job):
            if value is not True or written in fractions or norm_flag(name) not in arity.takes_value:
                continue
            choices = flag_values(adapter.name).get(norm_flag(name))
            takes = f" (one of {', '.join(choices.choices)})" if choices is not None else ""
            yield ctx.hit("serve.flag-needs-value", recipe, serve_arg_path(recipe, job, written),
                          f"`{written}: true` renders the bare flag `{written}`, but {adapter.name}'s `{name}` takes "
                          f"a value{takes}: the engine's parser would refuse to start", job=job,
                          fix=f"write its value (`{written}: <value>`), or delete it to take {adapter.name}'s default",
                          evidence=arity.source)


@rule("serve.memory-fraction", Severity.ERROR,
      "A serve flag that sets the engine's memory fraction to something other than a number in (0, 1]",
      "set it to a number in (0, 1] (a share of the GPU's memory, e.g. 0.85), or delete it to take the engine's "
      "default",
      "review: `--mem-fraction-static: 5` (or `40`, `\"0,4\"`, `true`, `-1`, `[0.5]`) validated clean, the HBM-fit "
      "check silently used the engine's default instead, and render printed `--mem-fraction-static 5`, which the "
      "engine refuses or misreads after the job waited for its node")
def memory_fraction(ctx: Context) -> Iterator[Finding]:
    """Each of the job's flags its launch reads as the memory fraction (`engines.memory.memory_fraction_flags`: the
    engine's flag from the engines catalog, in any spelling its parser reads as it) whose value is no fraction."""
    import json

    from llmsweep.engines.base import in_launch
    from llmsweep.engines.memory import fraction_value, memory_fraction_flags

    for job, recipe in ctx.runnable_pairs():
        if job.engine is None:
            continue
        for written, value in memory_fraction_flags(job):
            if not in_launch(value) or fraction_value(value) is not None:
                continue  # false/null: the flag is left out, and the engine's default stands
            shown = json.dumps(value) if isinstance(value, (bool, str, list)) else str(value)
            name = written.split("=", 1)[0]
            yield ctx.hit("serve.memory-fraction", recipe, serve_arg_path(recipe, job, written),
                          f"`{name}: {shown}` is not a memory fraction: {name} takes a number in (0, 1], the share "
                          "of each GPU's memory the engine takes; the launch would pass it as written, and the "
                          "memory checks would assume the engine's default instead", job=job,
                          fix=f"set `{name}` to a number in (0, 1] (e.g. 0.85), or delete it to take the engine's "
                              "default")


@rule("serve.page-size", Severity.ERROR,
      "A serve flag that sets the engine's KV page (block) to something other than a positive whole number of tokens",
      "write the page as a whole number of tokens (the message names the engine's default), or delete it to take the "
      "engine's default",
      "review: `--block-size: '16k'` (or `0`) validated clean and only the simulator's launch refused it, where a "
      "`--num-gpu-blocks-override` counts in it; the engine's parser reads the flag as an int and refuses it at "
      "start-up, after the job waited for its node (engines catalog `page_size_default`: the flag and its default)")
def page_size(ctx: Context) -> Iterator[Finding]:
    """The page flag of the job's engine (its catalog entry's `page_size_default`, in any spelling its parser reads as
    it), as the one reading of a job's page reads it (`engines.sim.engine_page`), where it is no positive whole
    number of tokens. `true` (the bare flag) is `serve.flag-needs-value`'s."""
    import json

    from llmsweep.engines.sim import engine_page

    for job, recipe in ctx.runnable_pairs():
        page = engine_page(job)
        if page is None or not page.pinned or page.tokens is not None or page.written_as is None \
                or page.written is True:
            continue
        flag, value = page.default.flag, page.written
        shown = json.dumps(value) if isinstance(value, (bool, str, list, dict)) else str(value)
        yield ctx.hit("serve.page-size", recipe, serve_arg_path(recipe, job, page.written_as),
                      f"`{page.written_as.split('=', 1)[0]}: {shown}` is not a KV page: {page.engine} reads {flag} as "
                      "a whole number of tokens, one page of its KV cache, and this is no positive one (its parser "
                      "refuses it at start-up, or the engine cannot page its cache with it)", job=job,
                      fix=f"write {flag} as a whole number of tokens ({page.engine}'s default: "
                          f"{page.default.tokens}), or delete it to take the default")


@rule("serve.foreign-env", Severity.ERROR, "Environment of another engine (declared but never read)",
      "delete it, or move it to a recipe for the engine that reads it", EP_LESSON)
def foreign_env(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        for name in adapter.foreign_env(job):
            yield ctx.hit("serve.foreign-env", recipe, serve_env_path(recipe, job, name),
                          f"`{name}` is not read by {adapter.name}: declared but unused", job=job)


@rule("serve.launch-conflict", Severity.ERROR,
      "A serve flag sets what the launch decides: the port, the bind address, the model path, the served model name",
      "delete the flag: the executor picks the port and polls it, the launch binds its address; serve a local "
      "checkpoint with `serve.model-path`, under the name `workload.served-model-name`",
      None)
def launch_conflict(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine is None:
            continue
        for written, fix in adapter_for(job).launch_conflicts(job):
            yield ctx.hit("serve.launch-conflict", recipe, serve_arg_path(recipe, job, written),
                          f"`{written}` sets what the launch decides: the run would wait for a server where it is "
                          "not, benchmark another model under this job's name, or ask for a model name the server "
                          "does not answer to", job=job, fix=fix)


@rule("serve.precision-conflict", Severity.ERROR,
      "A serve flag loads the weights in another dtype than the recipe's `precision`",
      "delete the flag: the launch derives it from `precision` (transformers serve: fp32 → `--dtype float32`, bf16 → "
      "`bfloat16`, fp16 → `float16`); to serve another dtype, change `precision`",
      "review: a SmolLM2 recipe at `precision: fp32` without `--dtype` ran transformers serve's `--dtype auto` (the "
      "checkpoint's bf16) and stored an fp32 row; `precision: bf16` with `--dtype: float32` validated clean")
def precision_conflict(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        for written, loads, fix in adapter_for(job).precision_conflicts(job):
            yield ctx.hit("serve.precision-conflict", recipe, serve_arg_path(recipe, job, written),
                          f"`{written}` makes {job.engine} load the weights {loads}, but the recipe's precision is "
                          f"`{job.precision}`: the row would be labelled with a precision that did not run", job=job,
                          fix=fix)


@rule("serve.context-conflict", Severity.ERROR,
      "A serve flag sets the engine's context length below what the job sends, or to no number of tokens",
      "delete the flag (a fixed-seq-len launch renders isl + osl + 256), or set it at least that high",
      "a recipe's --context-length 100 replaced the 576 an isl 256 / osl 64 job needs, and job.json said 576")
def context_conflict(ctx: Context) -> Iterator[Finding]:
    from llmsweep.evals.context import serving_job

    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        launched = serving_job(job)
        given = adapter.recipe_context(launched)
        if given is None:
            continue
        written, value = given
        path = serve_arg_path(recipe, job, written)
        count = adapter.read_context(value)
        if count == AUTO_CONTEXT:  # the engine fits the context to its memory at start-up; hbm-fit judges the memory
            since, ran = adapter.auto_context_since, Version.try_parse(job_version(launched) or "")
            if since is not None and ran is not None and ran < since:
                name = adapter.info().display_name
                yield ctx.hit("serve.context-conflict", recipe, path,
                              f"`{written}: {value}` asks {name} to fit its context to its memory at start-up, which "
                              f"{name} {ran} does not do: its parser takes that from {since}, and refuses it (or "
                              "reads -1 as a length) before", job=job,
                              fix=f"write `{written}` as a number of tokens, or serve {name} {since} or later")
            continue
        if not isinstance(count, int):
            yield ctx.hit("serve.context-conflict", recipe, path,
                          f"`{written}: {value}` {adapter.context_unread(value)}: llmsweep cannot check it against "
                          "what the job sends, nor record the context the launch runs with", job=job,
                          fix=f"write `{written}` as a number of tokens, e.g. `{written}: "
                              f"{launched.max_model_len or 8192}`")
            continue
        need = launched.max_model_len if launched.scenario is ScenarioId.FIXED_SEQ_LEN else None
        if need is None or count >= need:
            continue
        sends = (f"isl {launched.isl} + osl {launched.osl}" if launched.isl is not None and launched.osl is not None
                 else "its requests")
        yield ctx.hit("serve.context-conflict", recipe, path,
                      f"`{written}: {count}` sets {adapter.name}'s context length below the {need} tokens this job's "
                      f"launch needs ({sends}, with room for the chat template and the length range): requests "
                      f"longer than {count} tokens would be refused", job=job,
                      fix=f"delete `{written}` (the launch renders {need}), or set it to at least {need}")


@rule("serve.context-capped", Severity.WARNING,
      "A serve flag asks for a longer context than the engine serves the model at: the engine cuts it without a word",
      "lower the context flag to the length the engine serves (the message names it)",
      "ATOM serves min(--max-model-len, the checkpoint's max_position_embeddings) (ROCm/ATOM atom/config.py) and its "
      "/v1/models reports no length: before llmsweep recorded the cut length, job.json said the recipe's longer "
      "context, which never ran")
def context_capped(ctx: Context) -> Iterator[Finding]:
    """The launch records the cut length (`Adapter.launched_context`); this says the recipe asked for more, and where
    the length the engine cuts to is only the catalog's estimate (not applied), that it is unknown."""
    from llmsweep.evals.context import serving_job

    for job, recipe in ctx.runnable_pairs():
        if job.engine is None:
            continue
        launched = serving_job(job)
        try:
            adapter = adapter_for(job)
            given = adapter.recipe_context(launched)
            reader = adapter.context_reader(launched)  # the simulator standing in for ATOM serves what ATOM would
            limit = reader.context_limit(launched) if given is not None else None
        except LlmsweepError:  # no adapter launches it: `serve.render-failed` says why, once
            continue
        if given is None or limit is None:
            continue
        written, value = given
        count = reader.read_context(value)
        if not isinstance(count, int) or count <= limit.tokens:
            continue
        name, cap = reader.info().display_name, limit.tokens
        path = serve_arg_path(recipe, job, written)
        if limit.estimate is not None:
            yield ctx.hit("serve.context-capped", recipe, path,
                          f"`{written}: {value}` asks {name} for {count:,} tokens of context, over {job.model}'s "
                          f"native {cap:,} as {limit.source} estimates it ({limit.estimate}): {name} cuts the flag to "
                          "the checkpoint's max_position_embeddings without a word and its /v1/models reports no "
                          f"length, and that length is unknown here, so job.json records the recipe's {count:,} "
                          f"tokens, which {name} may not serve", job=job,
                          fix=f"read max_position_embeddings in the checkpoint's config.json and lower `{written}` to "
                              "it if it is shorter, or point `serve.model-path` at a local copy of the checkpoint "
                              "(llmsweep then reads it)")
            continue
        yield ctx.hit("serve.context-capped", recipe, path,
                      f"`{written}: {value}` asks {name} for {count:,} tokens of context, over {job.model}'s native "
                      f"{cap:,} (read from {limit.source}): {name} cuts the flag to the checkpoint's "
                      "max_position_embeddings without a word and its /v1/models reports no length, so the launch "
                      f"serves {cap:,} tokens, which job.json records", job=job,
                      fix=f"lower `{written}` to {cap} (what {name} serves the model at)")


@rule("serve.agentic-context", Severity.WARNING,
      "An agentic job replays requests longer than the context its server allows",
      "replay traces that fit (synthetic: a `max-isl` at most the context; the model's 256k corpus), or raise or "
      "delete the recipe's context flag",
      "AgentX's 256k corpus drops requests whose in + out exceed 256,000 tokens; a request over the context fails as "
      "a context overflow and ends its session, over 1 % of them make the run invalid, and a root primer's stops it")
def agentic_context(ctx: Context) -> Iterator[Finding]:
    from llmsweep.evals.context import serving_job
    from llmsweep.policy.rules_input import recipe_model
    from llmsweep.workload.build import longest_request

    for job, recipe in ctx.runnable_pairs():
        traces = job.workload.traces
        # an eval-only job sends the eval's prompts, none of its row's traces (its context is the eval's rule's)
        if job.workload.scenario is not ScenarioId.AGENTIC_CODING or traces is None or job.eval_only:
            continue
        longest = longest_request(traces)
        model = recipe_model(recipe)
        if longest is None or model is None:
            continue
        need, said = longest
        launched = serving_job(job)
        try:
            given = adapter_for(job).recipe_context(launched)
        except LlmsweepError:  # no adapter launches it: `serve.render-failed` says why, once
            continue
        read = adapter_for(job).context_reader(launched).read_context(given[1]) if given is not None else None
        flag = read if isinstance(read, int) else None  # `auto` fits at most the native context to memory
        if ctx.simulated(job):  # the simulator serves the flag's context (and without one only its KV pool bounds)
            if flag is None:
                continue
            by_flag = True
        else:  # a real engine serves the flag's context, else its checkpoint's (a flag above it is refused or capped)
            by_flag = given is not None and flag is not None and flag < model.native_context
        context, whose = ((flag, f"the recipe's `{given[0]}: {flag}`") if by_flag and given is not None
                          and flag is not None else (model.native_context, f"{model.id}'s native context"))
        if need <= context:
            continue
        path = serve_arg_path(recipe, job, given[0]) if by_flag and given is not None else ("workload", "traces")
        yield ctx.hit("serve.agentic-context", recipe, path,
                      f"requests reach {need:,} tokens ({said}), over the {context:,} tokens of {whose}: each longer "
                      "one fails as a context overflow and ends its session; over 1 % of them make the run invalid, "
                      "and a root primer that overflows stops the run at once", job=job)


@rule("serve.prompt-budget", Severity.ERROR,
      "The engine refuses a prompt longer than one step's token budget outright, and the job sends longer ones",
      "turn on chunked prefill (TensorRT-LLM: `--enable_chunked_prefill: true`), or raise the budget "
      "(`--max_num_tokens`) above the longest prompt",
      "trtllm-serve runs with chunked prefill off and max_num_tokens 8192: a prompt over it is a 400 (`The sum of "
      "prompt length ... should not exceed max_num_tokens`), so an AgentX replay or a 16k-token fixed point would "
      "have failed every long request on the GPUs")
def prompt_budget(ctx: Context) -> Iterator[Finding]:
    from llmsweep.policy.rules_input import recipe_model
    from llmsweep.workload.build import longest_request

    for job, recipe in ctx.runnable_pairs():
        # a recipe of the simulator standing in for an engine (framework trt) is refused as that engine refuses
        engine = SimAdapter.stands_in_for(job) if job.engine == SIM.id else job.engine
        if engine is None or job.eval_only:  # an eval-only job sends the eval's prompts, not its row's
            continue
        try:
            adapter = get_adapter(engine)
            limit = adapter.prompt_limit(job)
        except LlmsweepError:  # no adapter launches it: `serve.render-failed` says why, once
            continue
        if limit is None:
            continue
        traces = job.workload.traces
        if job.workload.scenario is ScenarioId.AGENTIC_CODING and traces is not None:
            longest = longest_request(traces)
            model = recipe_model(recipe)
            if longest is None and model is not None:  # a corpus that says nothing: the served context bounds it
                served = adapter.launched_context(job)
                longest = ((served, f"up to the {served:,}-token context it launches with")
                           if served is not None and served < model.native_context
                           else (model.native_context, f"up to {model.id}'s native context"))
            if longest is None:
                continue
            sends, said = longest
            what = f"requests reach {sends:,} tokens ({said})"
        elif job.isl is not None:
            sends, what = job.isl, f"its prompts are {job.isl:,} tokens (isl)"
        else:
            continue
        if sends <= limit.tokens:
            continue
        written = adapter.recipe_value(job, limit.flag)
        path = serve_arg_path(recipe, job, written[0]) if written is not None else ("serve", "args")
        yield ctx.hit("serve.prompt-budget", recipe, path,
                      f"{what}, over the {limit.tokens:,} tokens {adapter.info().display_name} takes in one prompt "
                      f"({limit.why}): each longer one is refused with a 400 (\"{limit.refusal(sends)}\")",
                      job=job, fix=limit.fix)


def _conflicts(job: Job, kind: str = "parallel") -> list[Conflict]:
    """The serve flags that override what the job's launch renders; none when its launch cannot be rendered at all
    (`serve.render-failed` says why, once, rather than each rule that reads the rendering failing on it)."""
    try:
        return adapter_for(job).conflicts(job, kind)
    except LlmsweepError:
        return []


@rule("serve.parallelism-conflict", Severity.ERROR,
      "A serve flag overrides the parallelism the search space declares",
      "delete the flag; set tp/ep/pp/dp-attn in the search-space entry (one source of truth)", EP_LESSON)
def parallelism_conflict(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        for c in _conflicts(job):
            derived = "absent" if c.derived is None else f"`{c.derived}`"
            yield ctx.hit("serve.parallelism-conflict", recipe, serve_arg_path(recipe, job, c.flag),
                          f"`{c.flag}: {c.recipe}` but the search space renders {derived} for it", job=job)


@rule("serve.spec-conflict", Severity.ERROR,
      "A serve flag overrides the speculative decoding that serve.spec-decoding renders",
      "delete the flag; describe drafting in `serve.spec-decoding` (the adapter adds the pinned AL)",
      "InferenceX spec §8 lesson 13 (synthetic AL hand-copied into flags); changelog #2305 (spec flags drift)")
def spec_conflict(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        for c in _conflicts(job, "spec"):
            derived = "nothing" if c.derived is None else f"`{c.derived}`"
            yield ctx.hit("serve.spec-conflict", recipe, serve_arg_path(recipe, job, c.flag),
                          f"`{c.flag}` replaces {derived} rendered from serve.spec-decoding", job=job)


@rule("serve.spec-steps-row", Severity.ERROR,
      "A multinode row's decode `DECODE_MTP_SIZE` differs from the draft steps serve.spec-decoding renders",
      "keep rows whose DECODE_MTP_SIZE equals `serve.spec-decoding.num-steps` in this recipe; put the others in a "
      "recipe whose num-steps matches them",
      "InferenceX amd-master: DECODE_MTP_SIZE varies 1-3 per row within one key; its launch script reads it as the "
      "decode worker's MTP steps, while every worker here renders serve.spec-decoding's")
def spec_steps_row(ctx: Context) -> Iterator[Finding]:
    from llmsweep.engines.base import ROW_DRAFT_STEPS, row_draft_steps

    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve is not None else None
        if job.decode is None or sd is None or job.spec_decoding == "none":
            continue
        size = row_draft_steps(job)
        if size is None or size == (sd.num_steps or 0):
            continue
        yield ctx.hit("serve.spec-steps-row", recipe, (*entry_path(recipe, job), "decode", "additional-settings"),
                      f"this row's decode worker runs {ROW_DRAFT_STEPS}={size} draft steps in InferenceX, but "
                      f"serve.spec-decoding renders num-steps {sd.num_steps} for it: the row would run "
                      f"K={sd.num_steps} under a point InferenceX measures at K={size}", job=job)


def _row_setting(job: Job, at: FieldPath, kind: str, name: str) -> tuple[FieldPath, str] | None:
    """(where, value as written) of a multinode row's `kind` worker's additional setting `name`; None if unset."""
    worker = job.prefill if kind == "prefill" else job.decode
    for i, item in enumerate(worker.additional_settings or [] if worker is not None else []):
        key, sep, value = item.partition("=")
        if sep and key.strip() == name:
            return (*at, kind, "additional-settings", i), value.strip()
    return None


@rule("serve.row-settings", Severity.ERROR,
      "A multinode row's additional-settings that llmsweep reads do not describe what the row runs",
      "write DECODE_MTP_SIZE as the decode worker's draft steps (a whole number, 1 or more on a speculative row) and "
      "<ROLE>_NODES as the nodes its workers take (num-worker × ceil(GPUs per worker / GPUs per node))",
      "InferenceX amd-master: its AMD launcher sizes the allocation from PREFILL_NODES/DECODE_NODES and drafts "
      "DECODE_MTP_SIZE steps; llmsweep places workers and renders K from the row itself")
def row_settings(ctx: Context) -> Iterator[Finding]:
    from llmsweep.engines.base import ROW_DRAFT_STEPS, worker_nodes
    from llmsweep.policy.rules_resources import gpus_per_node_of

    for job, recipe in ctx.runnable_pairs():
        if job.prefill is None or job.decode is None:
            continue
        at = entry_path(recipe, job)
        steps = _row_setting(job, at, "decode", ROW_DRAFT_STEPS)
        if steps is not None:
            where, text = steps
            if not text.isdigit():
                yield ctx.hit("serve.row-settings", recipe, where,
                              f"{ROW_DRAFT_STEPS}={text} is not a number of draft steps: the row would run the "
                              "default K", job=job)
            elif int(text) == 0 and job.spec_decoding != "none":
                yield ctx.hit("serve.row-settings", recipe, where,
                              f"{ROW_DRAFT_STEPS}=0: InferenceX's decode worker does not draft on this row, but the "
                              f"arm has spec-decoding {job.spec_decoding}", job=job)
        per_node = gpus_per_node_of(ctx, job)
        if per_node is None:
            continue
        placed = worker_nodes(job, per_node)
        for kind in ("prefill", "decode"):
            declared = _row_setting(job, at, kind, f"{kind.upper()}_NODES")
            if declared is None:
                continue
            where, text = declared
            nodes = sum(len(n) for n in placed["prefill" if kind == "prefill" else "decode"])
            if text.isdigit() and int(text) != nodes:
                yield ctx.hit("serve.row-settings", recipe, where,
                              f"{kind.upper()}_NODES={text} but its workers take {count_of(nodes, 'node')} at "
                              f"{count_of(per_node, 'GPU')} a node: the allocation InferenceX sizes from it is not "
                              "the one llmsweep places and labels", job=job)


@rule("serve.spec-unused", Severity.ERROR,
      "serve.spec-decoding is declared but no search-space arm uses speculative decoding",
      "set `spec-decoding: mtp` on the arms that draft, or delete `serve.spec-decoding`",
      "InferenceX #2183, #2689 (spec-decoding dropped between matrix and job)")
def spec_unused(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        if recipe.serve is None or recipe.serve.spec_decoding is None:
            continue
        jobs = ctx.jobs_of(recipe.key)
        if jobs and all(j.spec_decoding == "none" for j in jobs):
            # Recipe-wide (every arm is concerned): it names no job, so every job of the recipe is refused.
            yield ctx.hit("serve.spec-unused", recipe, ("serve", "spec-decoding"),
                          "spec-decoding is declared but unused: every arm has `spec-decoding: none`")


@rule("serve.spec-missing", Severity.ERROR,
      "An arm asks for speculative decoding but serve says nothing about how",
      "add `serve.spec-decoding: {method: ..., num-steps: K}`",
      "InferenceX #1739: MTP configs silently ran non-MTP scripts")
def spec_missing(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.spec_decoding != "none" and job.serve is not None and job.serve.spec_decoding is None:
            yield ctx.hit("serve.spec-missing", recipe, (*entry_path(recipe, job), "spec-decoding"),
                          f"`spec-decoding: {job.spec_decoding}` but no `serve.spec-decoding`: the engine would "
                          "run without drafting", job=job)


@rule("serve.kv-offload-backend", Severity.ERROR, "A KV-offload backend the job's engine adapter cannot render",
      "use a backend the engine has (SGLang: hicache, mooncake; vLLM: vllm-simple, native, lmcache; ATOM: lmcache)",
      "agentx-spec §4.4 (CPU DRAM offload backends per engine)", softens_in_sim=True)
def kv_backend(ctx: Context) -> Iterator[Finding]:
    """A backend the job's engine adapter cannot launch: refused for a real engine; under the simulator, which
    serves every backend as a DRAM tier of the job's `total-cpu-dram-gb`, a warning, and the result names the
    backend's own sizing as not modelled (`engines.sim.unmodelled`): InferenceX's vLLM arms with a Mooncake store
    (MiniMax-M3 MXFP8 on H200, agentx-spec §1.3) are predicted, not refused."""
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id) or job.kv_offloading != "dram" or job.kv_offload_backend is None:
            continue
        adapter = adapter_for(job)
        name = job.kv_offload_backend.name
        if name not in adapter.kv_offload_backends:
            known = ", ".join(sorted(adapter.kv_offload_backends)) or "none"
            yield ctx.hit("serve.kv-offload-backend", recipe, (*entry_path(recipe, job), "kv-offload-backend"),
                          f"{adapter.name} cannot offload KV with `{name}` (it has: {known})", job=job)


@rule("serve.topology-unsupported", Severity.ERROR,
      "Pipeline or context parallelism (pp, dcp/pcp) on an engine that renders none, in a server or a worker pool",
      "set pp, dcp-size and pcp-size to 1 for this engine, or use one that has them (vLLM)", EP_LESSON)
def topology_unsupported(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        for role, pool in pools(job).items():
            where: tuple[str, ...] = () if role == "server" else (role,)
            pp, dcp, pcp = pool.pp, pool.dcp, pool.pcp
            for field, size, ok in (("pp", pp, adapter.supports_pp), ("dcp-size", dcp, adapter.supports_dcp),
                                    ("pcp-size", pcp, adapter.supports_pcp)):
                if size > 1 and not ok:
                    server = f"its {where[0]} workers" if where else "it"
                    yield ctx.hit("serve.topology-unsupported", recipe, (*entry_path(recipe, job), *where, field),
                                  f"{field} {size} but {adapter.name} renders no such parallelism: {server} would "
                                  f"run without it on the GPUs counted for it", job=job)


@rule("serve.ep-size", Severity.ERROR,
      "An expert-parallel size between 1 and the server's TP on an engine whose EP spans every rank",
      "set ep to 1 (no expert parallelism) or to tp (the experts over every rank), what the engine can run",
      EP_LESSON)
def ep_size(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.engine in (None, SIM.id):
            continue
        adapter = adapter_for(job)
        if not adapter.expert_parallel_all_ranks:
            continue
        for role, pool in pools(job).items():
            if pool.ep in (1, pool.tp):
                continue
            where: tuple[str, ...] = () if role == "server" else (role,)
            yield ctx.hit("serve.ep-size", recipe, (*entry_path(recipe, job), *where, "ep"),
                          f"ep {pool.ep} but {adapter.name} renders expert parallelism as a switch over all "
                          f"{pool.tp} ranks: the job would run EP {pool.tp} under the name ep{pool.ep}", job=job)


@rule("serve.spec-tree", Severity.ERROR,
      "A draft tree (topk above 1, or num-draft-tokens other than K + 1) on an engine whose launch renders a chain",
      "drop `topk` and `num-draft-tokens` (a chain of K draft tokens, what the golden curves are keyed on), or use "
      "an engine that launches trees (SGLang)",
      "a draft setting the launch drops measures another draft under the recipe's settings")
def spec_tree(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve is not None else None
        if job.engine in (None, SIM.id) or sd is None or job.spec_decoding == "none":
            continue
        adapter = adapter_for(job)
        if adapter.renders_draft_tree:
            continue
        for field, value, chain in (("topk", sd.topk, 1), ("num-draft-tokens", sd.num_draft_tokens,
                                                           (sd.num_steps or 0) + 1)):
            if value is not None and value != chain:
                yield ctx.hit("serve.spec-tree", recipe, ("serve", "spec-decoding", field),
                              f"{field} {value} but {adapter.name}'s launch renders a chain of "
                              f"{sd.num_steps} draft tokens and drops it", job=job)


@rule("serve.secret-value", Severity.ERROR, "A secret-looking variable has its value written in the recipe",
      "delete the value and list the name under `serve.secret-env`; it is read from the caller's environment",
      "DESIGN.md principle 2 (the command is written beside the results; secrets never are)")
def secret_value(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        serve = recipe.serve
        if serve is None:
            continue
        envs: list[tuple[FieldPath, str, str | None, int | None]] = [
            (("serve", "env", n), n, v, None) for n, v in serve.env.items()
        ]
        envs += [(("serve", "overrides", i, "env", n), n, v, i) for i, o in enumerate(serve.overrides)
                 for n, v in o.env.items()]
        for job in ctx.jobs_of(recipe.key):  # a worker's InferenceX additional-settings are environment too
            for kind, worker in (("prefill", job.prefill), ("decode", job.decode)):
                for at, item in enumerate(worker.additional_settings or [] if worker is not None else []):
                    setting, _, written = item.partition("=")
                    if written and is_secret_name(setting.strip()):
                        yield ctx.hit("serve.secret-value", recipe,
                                      (*entry_path(recipe, job), kind, "additional-settings", at),
                                      f"{kind} additional setting `{setting.strip()}` carries a value in the recipe "
                                      "file", job=job)
        for path, name, value, index in envs:
            if not (value and is_secret_name(name)):
                continue
            # In an override, the jobs that apply it launch with the secret; in base env (or an override no job
            # applies) the recipe file itself is at fault and the finding names no job.
            concerned: list[Job] = [] if index is None else [j for j in ctx.jobs_of(recipe.key)
                                                  if j.serve is not None and index in j.serve.applied_overrides]
            message = f"`{name}` carries a value in the recipe file"
            if not concerned:
                yield ctx.hit("serve.secret-value", recipe, path, message)
            for job in concerned:
                yield ctx.hit("serve.secret-value", recipe, path, message, job=job)


@rule("serve.render-failed", Severity.ERROR, "The engine adapter cannot render the job's launch",
      "fix the field the message names", None, softens_in_sim=True)
def render_failed(ctx: Context) -> Iterator[Finding]:
    """The launch of the job's own engine must render. Under `--simulate` the simulator serves a real engine's job
    anyway, so there the finding is a warning that says so (and the result says a real engine would refuse the
    job); a job of the `sim` engine that cannot render stays an error: nothing else would serve it."""
    from llmsweep.engines import render
    from llmsweep.policy.context import SOFTENED_NOTE

    for job, recipe in ctx.runnable_pairs():
        own = job.engine == SIM.id
        try:
            render(job, simulate=own)
        except (LlmsweepError, KeyError, ValueError) as exc:
            # an adapter's refusal carries its own fix: the finding's fix, not a second line inside its message
            said, fix = (exc.message, exc.fix) if isinstance(exc, LlmsweepError) else (str(exc), None)
            hit = ctx.hit("serve.render-failed", recipe, ("serve",), f"cannot render: {said}", job=job, fix=fix)
            if own:
                hit = hit.model_copy(update={"severity": Severity.ERROR,
                                             "message": hit.message.removesuffix(SOFTENED_NOTE)})
            yield hit


def _fraction_flag(sim: SimAdapter, job: Job) -> frozenset[str]:
    """The memory-fraction flag of the engine a `sim` recipe stands in for, as that engine reads it (the engines
    catalog's `memory_fraction_default.flag`: TensorRT-LLM's `--kv_cache_free_gpu_memory_fraction` too), which the
    simulator sizes its KV pool from (`engines.launch_memory_fraction`); empty when the catalog records none."""
    from llmsweep.catalog.engines import get_engine

    engine = SimAdapter.stands_in_for(job)
    try:
        record = get_engine(engine).memory_fraction_default if engine is not None else None
    except ConfigError:
        return frozenset()
    return frozenset({sim.parsed_flag(job, record.flag)}) if record is not None else frozenset()


@rule("serve.sim-ignored", Severity.WARNING,
      "A serve flag the simulated engine does not model (it runs as if the flag were absent)",
      "delete it from a `framework: sim` recipe, or accept that the prediction ignores it",
      "DESIGN.md principle 3 (every declared field is consumed or rejected)")
def sim_ignored(ctx: Context) -> Iterator[Finding]:
    """A `framework: sim` recipe: every flag the simulator does not translate. A real engine's job the simulator
    serves (`--simulate`): the serving settings it runs without (`engines.sim.unmodelled_settings`), which its result
    names too (`provenance.unmodelled`)."""
    from llmsweep.engines.sim import MODELLED, setting_said, unmodelled_flags

    sim = ADAPTERS[SIM.id]
    assert isinstance(sim, SimAdapter)
    for job, recipe in ctx.runnable_pairs():
        if job.serve is None:
            continue
        if job.engine != SIM.id:
            if not ctx.simulated(job):
                continue
            for flag, value, instead in unmodelled_flags(job):  # in the words its result says them in
                yield ctx.hit("serve.sim-ignored", recipe, serve_arg_path(recipe, job, flag),
                              f"the simulator does not model {setting_said(flag, value)} ({instead}): the prediction "
                              "runs as if it were absent", job=job,
                              fix="accept that the prediction ignores it, or run the job on its engine")
            continue
        modelled = MODELLED | _fraction_flag(sim, job)
        for flag in job.serve.args:
            if sim.parsed_flag(job, flag) not in modelled:  # as the engine it stands in for reads the flag
                yield ctx.hit("serve.sim-ignored", recipe, serve_arg_path(recipe, job, flag),
                              f"the simulator does not model `{flag}`", job=job)


@rule("serve.settings-conflict", Severity.ERROR,
      "A worker's InferenceX additional-settings item sets a variable its launch sets otherwise",
      "set the variable in one place: `serve.env` (every worker, and over what llmsweep derives for a worker) or the "
      "worker's additional-settings (that pool), not both",
      "DESIGN.md principle 3: the launch's value (`serve.env`, or one the adapter derives for the worker, e.g. its "
      "side-channel port) won and the additional setting was dropped, while the render's note still listed it as "
      "passed")
def settings_conflict(ctx: Context) -> Iterator[Finding]:
    from llmsweep.engines import render_topology
    from llmsweep.engines.base import settings_env

    for job, recipe in ctx.runnable_pairs():
        if job.serve is None or not job.multinode:
            continue
        try:  # what each worker launches with (a job that cannot render is `serve.render-failed`'s)
            topology = render_topology(job, simulate=ctx.simulated(job))
        except (LlmsweepError, KeyError, ValueError):
            continue
        launched = {role.kind: [w.spec.env for w in role.workers] for role in topology.roles}
        for kind, worker in (("prefill", job.prefill), ("decode", job.decode)):
            if worker is None or kind not in launched:
                continue
            settings = settings_env(worker)
            for index, item in enumerate(worker.additional_settings or []):
                name, sep, _ = item.partition("=")
                name = name.strip()
                value = settings.get(name)
                env = next((e[name] for e in launched[kind] if e.get(name) not in (None, value)), None)
                if not sep or env is None:
                    continue
                by = (f"`serve.env` `{name}: {env}`" if job.serve.env.get(name) is not None else
                      f"the value llmsweep derives for each {kind} worker (`{name}={env}`)")
                yield ctx.hit("serve.settings-conflict", recipe,
                              (*entry_path(recipe, job), kind, "additional-settings", index),
                              f"{kind} additional setting `{name}={value}` is overridden by {by}: the worker would "
                              f"run with {env!r}", job=job)
