"""`llmsweep al collect RECIPE`: measure a golden acceptance-length curve on a served model (`llmsweep.alcollect`).

Thin: parses options, loads the recipe's job and the prompt set, calls :func:`llmsweep.alcollect.collect_curve`,
prints progress lines on stderr and the cells as a table (or `--json`). Exit 0 when every cell was measured, 1 when
some were not (the curve holds the measured ones), 2 for bad input.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args, get_origin

import click
from click.core import ParameterSource

from llmsweep.alcollect.settings import CollectResult, CollectSettings, Sampling
from llmsweep.cli.options import (
    ManyValues,
    PathValue,
    config_keys_option,
    field_option,
    json_option,
    option,
    out_option,
    refuse_replacing,
    runner_config_option,
)
from llmsweep.cli.options import executor_options as parse_executor_options
from llmsweep.errors import ConfigError, DatasetError, LlmsweepError
from llmsweep.words import count_of

if TYPE_CHECKING:
    from llmsweep.alcollect.modes import ModeSettings
    from llmsweep.alcollect.prompts import PromptSet
    from llmsweep.catalog.golden import GoldenCurve, ThinkingMode
    from llmsweep.execute.base import ServerLauncher
    from llmsweep.plan.job import Job

C = TypeVar("C", bound=Callable[..., Any])

EXECUTORS = ("local", "docker")
"""Executors whose launcher starts a server from this process (Slurm runs its lifecycle on the node)."""


SAMPLING_FLAGS = {name: "--" + name.replace("_", "-") for name in Sampling.model_fields}
"""The options that set one Sampling field for every thinking mode (`--sampling MODE=...` sets it for one): one per
field, spelled from its name (`--top-p`), fed by :func:`_sampling_options`."""


def _sampling_help(name: str) -> str:
    field = Sampling.model_fields[name]
    default = "else not sent" if field.default is None else \
        f"not sent where the curve leaves it unstated, else {field.default}"
    return (f"{(field.description or '').rstrip('.')}, for every thinking mode (default: as the model's golden curve "
            f"states it for the mode, {default}).")


def _value_type(name: str) -> type:
    """The number type of a Sampling field (``Annotated[int, ...] | None``: int)."""
    (inner,) = (a for a in get_args(Sampling.model_fields[name].annotation) if a is not type(None))
    value = get_args(inner)[0] if get_origin(inner) is Annotated else inner
    assert isinstance(value, type)
    return value


def _sampling_options(command: C) -> C:
    """The options of :data:`SAMPLING_FLAGS`, each passed to the command under its field's name (None: not given)."""
    for name, flag in reversed(SAMPLING_FLAGS.items()):
        command = field_option(flag, name, source=(Sampling, name), type=_value_type(name), default=None,
                               help=_sampling_help(name))(command)
    return command


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def _kwargs(pairs: tuple[str, ...]) -> dict[ThinkingMode, dict[str, Any]]:
    out: dict[ThinkingMode, dict[str, Any]] = {}
    for pair in pairs:
        mode, sep, text = pair.partition("=")
        try:  # strict JSON: Python's reader takes NaN/Infinity, which the request body would carry to the server
            value = json.loads(text, parse_constant=_not_json) if sep else None
        except ValueError:
            value = None
        if mode.strip() not in ("on", "off") or not isinstance(value, dict):
            raise ConfigError(f"--chat-template-kwargs {pair!r} is not on=JSON or off=JSON (NaN and Infinity are not "
                              "JSON)", fix="e.g. --chat-template-kwargs 'on={\"enable_thinking\": true}'")
        key: ThinkingMode = "thinking_on" if mode.strip() == "on" else "thinking_off"
        if key in out:
            raise ConfigError(f"--chat-template-kwargs gives {mode.strip()} twice ({out[key]} and {value}): one "
                              "would be dropped", fix=f"pass one --chat-template-kwargs {mode.strip()}=JSON")
        out[key] = value
    return out


def _sampling(pairs: tuple[str, ...]) -> dict[ThinkingMode, dict[str, Any]]:
    """``on=temperature=0.6,top_p=0.95,top_k=20`` per thinking mode (keys: Sampling's fields, `-` or `_`)."""
    out: dict[ThinkingMode, dict[str, Any]] = {}
    fix = "e.g. --sampling on=temperature=0.6,top_p=0.95,top_k=20 --sampling off=temperature=0.7,presence_penalty=1.5"
    seen: dict[str, str] = {}
    for pair in pairs:
        mode, _, text = pair.partition("=")
        if mode.strip() not in ("on", "off") or not text.strip():
            raise ConfigError(f"--sampling {pair!r} is not on=KEY=VALUE,… or off=KEY=VALUE,…", fix=fix)
        if mode.strip() in seen:
            raise ConfigError(f"--sampling gives {mode.strip()} twice ({seen[mode.strip()]!r} and {pair!r}): one "
                              "would be dropped", fix=f"pass one --sampling {mode.strip()}=KEY=VALUE,… with every "
                              f"key of the mode, e.g. --sampling {mode.strip()}=temperature=0.6,top_p=0.95")
        seen[mode.strip()] = pair
        given = out.setdefault("thinking_on" if mode.strip() == "on" else "thinking_off", {})
        for item in text.split(","):
            key, sep, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in Sampling.model_fields or not value.strip():
                raise ConfigError(f"--sampling {pair!r}: {item.strip()!r} is not KEY=VALUE with KEY one of "
                                  f"{', '.join(Sampling.model_fields)}", fix=fix)
            given[key] = value.strip()
    return out


def _launcher(executor: str, options: dict[str, Any]) -> ServerLauncher:
    if executor == "docker":
        from llmsweep.execute.docker import DockerExecutor

        return DockerExecutor(options).launcher
    from llmsweep.execute.local import LocalExecutor

    return LocalExecutor(options).launcher


def _prompts(source: str, category: str, limit: int | None, echo: Callable[[str], None]) -> PromptSet:
    """The prompt set, said loudly where it holds fewer rows of the category than --num-prompts asked for: a small
    file is legitimate, and the collection sends what it holds (the curve's dataset line states that count), but a
    reader of the command line would take the asked-for count for the one measured."""
    from llmsweep.alcollect.prompts import BUILTIN, HUB, load_prompts

    if source != "auto":
        prompts = load_prompts(source, category, limit)
    else:
        try:
            prompts = load_prompts(HUB, category, limit)
        except DatasetError as exc:
            echo(f"the hub's prompt set cannot be used ({str(exc).splitlines()[0]}); using the builtin coding set "
                 "— the curve's dataset line says so")
            prompts = load_prompts(BUILTIN, category, limit)
    found = len(prompts.prompts)
    if limit is not None and found < limit:
        echo(f"warning: {prompts.origin} has {count_of(found, f'`{category}` row')}, fewer than --num-prompts {limit} "
             f"asks for: collecting with {found} (the curve's dataset line states {count_of(found, 'prompt')})")
    return prompts


def _collection_job(recipe: Path, config_keys: tuple[str, ...], runner_config: Path | None, *, simulate: bool,
                    echo: Callable[[str], None], runner_labels: tuple[str, ...] = ()) -> Job:
    """RECIPE's speculative job, planned and checked once as `run` plans and checks: recipes that do not load or
    expand stop the command, and the job's policy errors (`validate`'s, softened as `run --simulate` softens them)
    refuse the collection before any server starts, each printed."""
    from llmsweep.alcollect.collect import collection_job
    from llmsweep.policy import validate_files
    from llmsweep.policy.planning import errors_about

    checked = validate_files([recipe], config_keys=list(config_keys) or None, runner_config=runner_config,
                             simulate=simulate, runner_labels=runner_labels).raise_unrunnable()
    job = collection_job(checked.jobs, simulate=simulate)
    errors = errors_about(job, checked.findings, checked.loaded.recipes)
    for f in errors:
        echo(f.render())
    if errors:
        first = errors[0]
        raise ConfigError(f"{job.exp_name} has {count_of(len(errors), 'policy error')}, first [{first.rule}] "
                          f"{first.message}; "
                          "no server was started", fix=first.fix or "fix the recipe (llmsweep validate says how)")
    return job


def _references(job: Job, merge_into: Path | None) -> list[GoldenCurve]:
    """The curves whose statements default each mode: the one `--merge-into` completes, then the family's reference
    curve (the one a collected curve must be sampled like to stand in for: `catalog.golden.reference_curve`)."""
    from llmsweep.catalog.golden import load_curve, reference_curve

    assert job.serve is not None and job.serve.spec_decoding is not None
    out: list[GoldenCurve] = []
    if merge_into is not None and merge_into.is_file():
        out.append(load_curve(merge_into))
    sd = job.serve.spec_decoding
    reference = reference_curve(job.model_prefix.lower(), sd.method, job.model, sd.curve_selector,
                                served_draft=sd.curve_drafter)
    if reference is not None and not any(Path(c.file).resolve() == Path(reference.file).resolve() for c in out):
        out.append(reference)
    return out


def _plan_modes(job: Job, thinking: tuple[str, ...], references: list[GoldenCurve], every_mode: dict[str, Any],
                per_mode: dict[ThinkingMode, dict[str, Any]], kwargs: dict[ThinkingMode, dict[str, Any]],
                echo: Callable[[str], None]) -> tuple[list[ModeSettings], list[str]]:
    """The modes to collect (`--thinking`, else off and on where the model has a thinking switch) with their settings,
    and the header notes the choice needs. Thinking on is refused where the chat template shows no switch: its cells
    would be the thinking-off ones under another label."""
    from llmsweep.alcollect.modes import MODES, plan_modes, thinking_switch

    planned = plan_modes(MODES, references=references, every_mode=every_mode, per_mode=per_mode,
                         every_mode_origin={k: f"given ({SAMPLING_FLAGS[k]})" for k in every_mode}, kwargs=kwargs)
    switch = thinking_switch(job, planned["thinking_on"].chat_template_kwargs,
                             planned["thinking_off"].chat_template_kwargs, references)
    notes: list[str] = []
    if not thinking:
        modes: list[ThinkingMode] = ["thinking_off", "thinking_on"] if switch.present else ["thinking_off"]
        if switch.present:
            echo(f"thinking off and on (the default): {switch.why}")
        elif switch.present is None:  # cannot tell: thinking on may be asked for, and is collected with a warning
            echo(f"thinking off only: {switch.why}; pass --thinking off on to collect thinking on "
                 "(--chat-template-kwargs on=JSON: the kwargs its template reads)")
        else:  # the template was read: thinking on would be the thinking-off prompts, and --thinking on is refused
            echo(f"thinking off only: {switch.why}, so thinking on would collect the thinking-off curve under another "
                 "label (--chat-template-kwargs on=JSON names another switch, where the template reads one)")
    else:
        modes = [f"thinking_{m}" for m in dict.fromkeys(thinking)]  # type: ignore[misc]
        if "thinking_on" in modes and switch.present is False:
            raise ConfigError(f"thinking on would collect the thinking-off curve under another label: {switch.why}",
                              fix="pass --chat-template-kwargs on=JSON with the switch the model's template reads, "
                              "or collect --thinking off")
        if "thinking_on" in modes and switch.present is None:
            echo(f"warning: thinking on is not checked against the model's chat template: {switch.why}")
            notes.append(f"thinking_on: the thinking switch was not checked before collecting ({switch.why})")
    # a mode's --sampling or --chat-template-kwargs for a mode not collected would be dropped without a word
    ignored = [m for m in dict.fromkeys([*per_mode, *kwargs]) if m not in modes]
    if ignored:
        flags = [(flag, m) for m in ignored for flag, given_for in (("--sampling", per_mode),
                                                                   ("--chat-template-kwargs", kwargs))
                 if m in given_for]
        given = " ".join(f"{flag} {m.removeprefix('thinking_')}=…" for flag, m in flags)
        verb = "samples" if all(flag == "--sampling" for flag, _ in flags) else "configures"
        raise ConfigError(f"{given} {verb} {', '.join(ignored)}, which this collection does not collect "
                          f"(thinking {' '.join(m.removeprefix('thinking_') for m in modes)}); no server was started",
                          fix=f"drop {given}" + (f" (the model has no thinking switch: {switch.why})"
                                                 if "thinking_on" in ignored and switch.present is False else
                                                 ", or collect the mode: --thinking " + " ".join(
                                                     m.removeprefix("thinking_")
                                                     for m in dict.fromkeys([*modes, *ignored]))))
    chosen = [planned[m] for m in modes]
    for m in chosen:
        echo(f"sampling {m.describe()}")
    return chosen, notes


def _read_back(curve_file: Path, settings: CollectSettings) -> str:
    """How to read the collected curve back with `llmsweep al`: the lookup that answers from it (with the precision it
    was collected in, where the family's default curve was measured in another), checked by resolving it; else what
    answers instead and why (a simulated curve never passes over a measured one), and where the curve is."""
    from llmsweep.catalog.golden import load_curve, resolve_acceptance

    curve = load_curve(curve_file)
    measured = [(m, k) for m in settings.thinking for k in settings.ks if k in curve.values.get(m, {})]
    if not measured:
        return f"it holds no cell yet (read it: {curve_file})"
    mode, k = measured[-1] if len(settings.thinking) > 1 else measured[0]
    where = str(curve_file.parent)
    draft = curve.draft_model  # a curve of another draft head answers only a lookup that names it
    for precision in ("", curve.precision_measured or ""):
        res = resolve_acceptance(curve.model_prefix, "", precision, curve.method, mode, k, curve_dirs=[where],
                                 draft_model=draft)
        if res is not None and res.curve == curve.id:
            flag = (f" --precision {precision}" if precision else "") + (f" --draft-model {draft}" if draft else "")
            return (f"read it back: llmsweep al {curve.model_prefix} -m {curve.method} -k {k} --thinking "
                    f"{mode.removeprefix('thinking_')}{flag} --curves {where}")
    res = resolve_acceptance(curve.model_prefix, "", curve.precision_measured or "", curve.method, mode, k,
                             curve_dirs=[where], draft_model=draft)
    key = f"thinking {mode.removeprefix('thinking_')} K={k}"
    instead = f"`llmsweep al` answers {key} from {res.curve}" if res else f"`llmsweep al` has no answer for {key}"
    if curve.simulated:
        return (f"collected on llmsweep's simulator (a modelled AL), it never passes over a measured curve: {instead}, "
                f"and the planner pins that; read the collected curve: {curve_file}")
    return f"{instead}, not from it; read the collected curve: {curve_file}"


def _nothing_measured(result: CollectResult, merge_into: Path | None) -> str | None:
    """What a collection that measured no cell wrote: nothing (no curve, or the `--merge-into` curve as it was), and
    why, each reason once with its cells. None where a cell was measured."""
    if any(c.status == "measured" for c in result.cells):
        return None
    why: dict[str, list[str]] = {}
    for c in result.cells:
        why.setdefault(c.reason or "not measured", []).append(f"{c.thinking} K={c.k}")
    reasons = "; ".join(f"{', '.join(cells)}: {reason}" for reason, cells in why.items())
    if merge_into is not None:
        return f"nothing was merged into {merge_into}: no cell was measured ({reasons}); the curve is as it was"
    return f"no curve was written: no cell was measured ({reasons})"


def _finish_hint(result: CollectResult) -> str | None:
    """How to measure the cells a collection left unmeasured (a signal, a server that did not start) into the curve
    it wrote, without measuring again the ones it holds (the same call with --merge-into would: a measured cell is
    re-measured and replaced): --merge-into and the missing cells' -k, per thinking mode."""
    missing: dict[str, list[int]] = {}
    for c in result.cells:
        if c.status != "measured":
            missing.setdefault(c.thinking.removeprefix("thinking_"), []).append(c.k)
    if not missing or not result.curve_file:
        return None
    by_ks: dict[tuple[int, ...], list[str]] = {}
    for mode, ks in missing.items():
        by_ks.setdefault(tuple(ks), []).append(mode)
    calls = [f"--thinking {' '.join(modes)} -k {' '.join(map(str, ks))}" for ks, modes in by_ks.items()]
    count = sum(len(ks) * len(modes) for ks, modes in by_ks.items())
    return (f"{count} of {len(result.cells)} cells not measured; to measure them into the curve, run this call again "
            f"with --merge-into {result.curve_file} in place of --out/--variant/--force, and "
            + (calls[0] if len(calls) == 1 else "one call each: " + "; ".join(calls)))


@click.command("collect")
@click.argument("recipe", type=PathValue(exists=True, dir_okay=False, path_type=Path))
@config_keys_option()
@runner_config_option()
@option("runner_labels")
@option("spec_k", dest="ks", short="-k", cls=ManyValues, listed=True, type=click.IntRange(min=1), default=(1, 2, 3),
        show_default=True, help="Draft lengths K, a fresh server each (several after one flag: -k 1 2 3 4).")
@click.option("--thinking", "thinking", cls=ManyValues, listed=True, type=click.Choice(["off", "on"]), default=(),
              help="Thinking modes, a fresh server per K each (--thinking off on). Default: off and on where the "
              "model's chat template (or a measured golden curve) shows a thinking switch, else off; on is refused "
              "where the template renders the same prompt for both.")
@click.option("--chat-template-kwargs", "template_kwargs", multiple=True, metavar="MODE=JSON",
              help='chat_template_kwargs per thinking mode (default: as the golden curve states them for the mode, '
                   'else on={"enable_thinking": true}, off={"enable_thinking": false}).')
@click.option("--sampling", "mode_sampling", multiple=True, metavar="MODE=KEY=VALUE,…",
              help=f"Sampling of one thinking mode, over {'/'.join(SAMPLING_FLAGS.values())} (e.g. "
              "--sampling on=temperature=0.6,top_p=0.95,top_k=20). Unless given, each mode samples as the curve "
              "--merge-into completes states it for the mode, else as the model's golden curve does (so that the "
              "collected curve may stand in for it), a key the curve leaves unstated not sent, else with the "
              "defaults; the collection says which.")
@click.option("--prompts", "prompt_source", default="auto", show_default=True,
              help="hub (SPEED-Bench qualitative from the Hugging Face hub), builtin (llmsweep's own 24 coding "
              "prompts), a JSONL file of SPEED-Bench rows, or auto (the hub, else builtin).")
@click.option("--category", default="coding", show_default=True, help="SPEED-Bench category (InferenceX: coding).")
@option("num_prompts", default=None, type=click.IntRange(min=1),
        help="Use only the first N prompts of the category (default: all of them); a set holding fewer is "
        "used whole, with a warning.")
@field_option("--output-len", source=(CollectSettings, "output_len"), type=click.IntRange(min=1), show_default=True)
@_sampling_options
@option("executor", type=click.Choice(EXECUTORS),
        help="Where each cell's server starts: this machine, or a docker container here.")
@option("executor_option",
        help="An executor setting (local: cwd, allow_image=true when the engine is installed on the host).")
@option("simulate")
@out_option("Directory the curve file is written into; read it back with `llmsweep al MODEL … --curves DIR` (the "
            "planner: LLMSWEEP_GOLDEN_AL_DIR=DIR).", dest="out_dir", type=PathValue(file_okay=False, path_type=Path),
            default=Path("golden_al"), show_default=True)
@click.option("--merge-into", "merge_into", type=PathValue(dir_okay=False, path_type=Path), default=None,
              metavar="CURVE.yaml", help="Complete this curve (one `al collect` wrote): refused before any server "
              "starts if it was collected otherwise (precision, prompts, sampling, output length, kwargs, simulated; "
              "hardware and engine once measured), else rewritten with the union of the cells, a re-measured cell "
              "replacing the old one. Takes the place of --out, --variant and --force.")
@click.option("--variant", default=None, help="Curve file suffix: <prefix>_<method>_<variant>.yaml (e.g. fp8).")
@click.option("--run-dir", type=PathValue(file_okay=False, path_type=Path), default=None,
              help="Evidence folder (server logs and commands, /metrics before and after, client records) per "
              "cell; default: OUT/<curve>.runs (with --merge-into: CURVE.runs-<UTC time>, beside the earlier ones).")
@field_option("--checkpoint", source=(CollectSettings, "checkpoint"))
@field_option("--precision", source=(CollectSettings, "precision"))
@click.option("--note", "notes", multiple=True, help="A `note:` line for the curve header (repeatable).")
@option("startup_timeout")
@option("request_timeout", source=(CollectSettings, "request_timeout_s"), show_default=True)
@option("force")
@json_option("the cells and the curve file")
def collect(recipe: Path, config_keys: tuple[str, ...], runner_config: Path | None, runner_labels: tuple[str, ...],
            ks: tuple[int, ...],
            thinking: tuple[str, ...], template_kwargs: tuple[str, ...], mode_sampling: tuple[str, ...],
            prompt_source: str, category: str, num_prompts: int | None, output_len: int, executor: str,
            executor_options: tuple[str, ...], simulate: bool, out_dir: Path,
            variant: str | None, merge_into: Path | None, run_dir: Path | None, checkpoint: str | None,
            precision: str | None, notes: tuple[str, ...],
            startup_timeout: float | None, request_timeout: float, force: bool, as_json: bool,
            **sampling: float | None) -> None:
    """Measure a golden acceptance-length curve: per thinking mode and draft length K, a fresh server of RECIPE's
    speculative job (real verification), the SPEED-Bench-style prompt set at concurrency 1, AL = 1 + Δaccepted /
    Δdrafts from the server's /metrics; written as an InferenceX golden-AL file with its provenance."""
    from llmsweep.alcollect.collect import (
        curve_file_name,
        read_merge_target,
        refuse_unearned_precision,
        refuse_unmodelled,
        refuse_unreadable_records,
        refuse_unwritable_outputs,
    )

    def echo(line: str) -> None:
        click.echo(line, err=True)

    kwargs, per_mode = _kwargs(template_kwargs), _sampling(mode_sampling)
    every_mode = {k: v for k, v in sampling.items() if k in SAMPLING_FLAGS and v is not None}  # _sampling_options'
    job = _collection_job(recipe, config_keys, runner_config, simulate=simulate, echo=echo,
                          runner_labels=runner_labels)
    from llmsweep.engines import runs_on_simulator

    # a recipe whose engine is the simulator's runs on it without --simulate: checked, named and labelled as such
    simulate = runs_on_simulator(job.engine, simulate=simulate)
    modes, mode_notes = _plan_modes(job, thinking, _references(job, merge_into), every_mode, per_mode, kwargs, echo)
    settings = CollectSettings.model_validate({
        "ks": list(ks), "thinking": [m.mode for m in modes],
        "chat_template_kwargs": {m.mode: m.chat_template_kwargs for m in modes},
        "sampling": {m.mode: m.sampling for m in modes}, "output_len": output_len,
        "startup_timeout_s": startup_timeout, "request_timeout_s": request_timeout, "checkpoint": checkpoint,
        "precision": precision, "notes": [*mode_notes, *notes]})
    if simulate:  # what the simulator cannot model is refused here, before the prompts are fetched or a server starts
        refuse_unmodelled(job, settings)
    refuse_unearned_precision(job, precision, simulate=simulate)  # before it names the file
    merge = merge_into is not None
    if merge_into is not None:
        given = [name for name, param in (("--out", "out_dir"), ("--variant", "variant"), ("--force", "force"))
                 if click.get_current_context().get_parameter_source(param) != ParameterSource.DEFAULT]
        if given:
            raise ConfigError(f"--merge-into {merge_into} names the file to write: {', '.join(given)} would name "
                              "another", fix=f"drop {', '.join(given)}, or drop --merge-into to write a fresh curve")
        out = merge_into
        read_merge_target(out)  # a missing curve refused before its folder is claimed (and so made)
        planned = run_dir or out.parent / f"{out.stem}.runs-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    else:
        out = out_dir / curve_file_name(job, variant, precision=precision, simulate=simulate)
        _refuse_existing(out, force=force)
        planned = run_dir or out_dir / f"{out.stem}.runs"
    refuse_unwritable_outputs(out, planned, merge=merge)  # before the claim makes the folder, before the prompts
    if run_dir is not None:
        _refuse_held_evidence(run_dir, settings, merge_into, force=force)
    refuse_unreadable_records(job, simulate=simulate)  # what the header states, read before anything is made
    prompts = _prompts(prompt_source, category, num_prompts, echo)
    from llmsweep.folderlock import claim

    # The curve's folder is this collection's alone from here until its curve is written: a second collection into
    # it (a fresh curve of the same name, a --merge-into of the same curve: each read the curve before the other
    # wrote it, and one's cells were lost) is refused, exit 2, naming this one, whatever --force says.
    with contextlib.ExitStack() as held:
        held.enter_context(claim(out.parent, "llmsweep al collect", fix=_BUSY_FIX[merge]))
        if run_dir is not None and run_dir.resolve() != out.parent.resolve():
            # a named evidence folder is this collection's alone too: two collections into other curve folders but
            # one --run-dir each passed the check above before either wrote a cell, then wrote over each other's
            held.enter_context(claim(run_dir, "llmsweep al collect", fix=_RUN_DIR_BUSY_FIX))
        if not merge:  # checked again under the claim: another collection may have written the curve since
            _refuse_existing(out, force=force)
        result = _collect_claimed(job, settings, out, planned, merge_into, named=run_dir is not None, force=force,
                                  prompts=prompts,
                                  launcher=lambda: _launcher(executor, parse_executor_options(executor_options)),
                                  simulate=simulate, servers="simulated" if simulate else executor, echo=echo)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        from llmsweep.alcollect.collect import low_coverage
        from llmsweep.cli.tables import Column, plain, print_tables, table_console

        # laid out as every table is (`cli.tables`): each cell named by its thinking mode and K in every part, the
        # figures whole (rich cut the columns to `acc…`, `tok…`, `meas…` in a 60-column terminal), the columns that
        # do not fit in a continuation table
        columns = [Column("cell", kind="key", justify="left", min_width=max(len(f"{c.thinking} K={c.k}")
                                                                           for c in result.cells)),
                   *(Column(h) for h in ("AL", "accepted", "drafts", "coverage", "requests", "tokens", "s")),
                   Column("status", kind="id", justify="left")]
        rows = [[plain(f"{c.thinking} K={c.k}"), f"{c.acceptance_length:.2f}" if c.acceptance_length else "—",
                 f"{c.accepted_tokens:.0f}" if c.accepted_tokens is not None else "—",
                 f"{c.drafts:.0f}" if c.drafts is not None else "—",
                 f"{c.draft_coverage:.0%}" if c.draft_coverage is not None else "—", f"{c.requests_ok}",
                 str(c.output_tokens),
                 f"{c.seconds:.0f}", c.said] for c in result.cells]
        print_tables(plain(f"Golden AL: {result.checkpoint} {result.method} ({result.engine})"), columns, rows,
                     console=table_console())
        for c in result.cells:
            if c.reason:
                see = f" (see {c.directory})" if c.directory else ""
                click.echo(f"{c.thinking} K={c.k}: {c.reason}{see}", err=True)
            elif (low := low_coverage(c)) is not None:  # (coverage: the share of output from steps that drafted)
                click.echo(f"warning: {c.thinking} K={c.k}: {low}", err=True)
        for r in result.replaced:
            click.echo(f"{r.thinking} K={r.k}: {r.new:.2f} replaces {r.old:.2f} (from the collection "
                       f"{r.old_collection})", err=True)
        if result.curve_file:
            verb = "merged the cells into" if result.merged_into else "wrote"
            click.echo(f"{verb} {result.curve_file}; {_read_back(Path(result.curve_file), settings)}")
    if (nothing := _nothing_measured(result, merge_into)) is not None:
        click.echo(nothing, err=True)
    if (hint := _finish_hint(result)) is not None:
        click.echo(hint, err=True)
    from llmsweep.execute import signals

    if signals.received():  # stopped by a signal: the cells measured are written up; the status says the signal
        raise SystemExit(signals.exit_code())
    if not result.ok:
        raise SystemExit(1)


_BUSY_FIX = {False: "wait for it to finish, or pass another --out (one collection per curve folder at a time)",
             True: "wait for it to finish, then run this --merge-into again: it completes the curve as the other "
                   "left it (one collection per curve folder at a time)"}
"""How to go on when a live process holds the curve's folder, for a fresh curve and for a --merge-into."""
_RUN_DIR_BUSY_FIX = "wait for it to finish, or pass another --run-dir (one collection per evidence folder at a time)"
"""How to go on when a live process holds the evidence folder --run-dir names."""


def _refuse_existing(out: Path, *, force: bool) -> None:
    if out.exists() and not force:
        raise ConfigError(f"{out} exists", fix="pass --force to replace it, --variant to write another file, "
                          "or --merge-into to add these cells to it")


def _refuse_held_evidence(run_dir: Path, settings: CollectSettings, merge_into: Path | None, *, force: bool) -> None:
    """An evidence folder named (--run-dir): a cell's earlier evidence is not replaced (without --force; never by a
    --merge-into, whose cells complete a curve that evidence may belong to)."""
    cells = [f"{mode}-k{k}" for mode in settings.thinking for k in settings.ks]
    held = [cell for cell in cells if (run_dir / cell).is_dir() and any((run_dir / cell).iterdir())]
    if held and merge_into is not None:
        raise ConfigError(f"--run-dir {run_dir} already holds the evidence of {', '.join(held)}; nothing was "
                          "written", fix="pass a new --run-dir, or leave it out (a completion's evidence goes "
                          f"to {merge_into.stem}.runs-<UTC time> beside the curve)")
    refuse_replacing(run_dir, held, force=force, what="evidence of these cells", option_name="--run-dir")


def _collect_claimed(job: Job, settings: CollectSettings, out: Path, evidence: Path, merge_into: Path | None, *,
                     named: bool, force: bool, prompts: PromptSet,
                     launcher: Callable[[], ServerLauncher], simulate: bool, servers: str,
                     echo: Callable[[str], None]) -> CollectResult:
    """The collection, once the curve's folder is claimed: its evidence folder checked again (or made, for a
    `--merge-into`), every cell measured and the curve written (`--merge-into`: the curve read again under the claim,
    so that the cells another collection merged meanwhile are kept)."""
    from llmsweep.alcollect.collect import collect_curve, refuse_unwritable_outputs

    made: Path | None = None  # the evidence folder made here (a --merge-into collection's own)
    if merge_into is not None and not named:  # the curve's earlier evidence stays: `<curve>.runs-<UTC time>`
        evidence = made = _new_folder(evidence)
    elif named:  # checked again under the claim
        _refuse_held_evidence(evidence, settings, merge_into, force=force)
    try:
        refuse_unwritable_outputs(out, evidence, merge=merge_into is not None)  # (the folder made above)
        assert job.serve is not None and job.serve.spec_decoding is not None
        echo(f"collecting {out.stem}: {job.model} {job.serve.spec_decoding.method} "
             f"K {' '.join(map(str, settings.ks))}, thinking "
             f"{' '.join(m.removeprefix('thinking_') for m in settings.thinking)}, "
             f"{count_of(len(prompts.prompts), 'prompt')} ({prompts.origin}), {servers} servers")
        return collect_curve(job, settings, prompts, evidence, out, launcher=launcher(), simulate=simulate,
                             event=echo, merge=merge_into is not None)
    except LlmsweepError:
        if made is not None and made.is_dir() and not any(made.iterdir()):
            made.rmdir()  # refused before any cell: the evidence folder made for it would name a collection of none
        raise


def _new_folder(path: Path) -> Path:
    """`path`, made now, or `path-2`, `path-3`... where a collection started in the same second took it: two
    `--merge-into` collections of one curve shared one evidence folder, each cell's files overwriting the other's.
    Where nothing can be made, `path` (the collection refuses it before any server starts, with the reason)."""
    candidate, n = path, 1
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.name}-{n}")
        except OSError:
            return path
