"""Every CLI option that more than one command takes, declared once: its spelling, type, default and help.

A command takes a shared option with `option(CONCEPT, ...)` (or one of the small helpers below), never with a second
hand-written `click.option`: the concept fixes the spelling and the parameter name, and the help comes from the
pydantic field that backs the option where there is one (`client.config`, `spec`), so the CLI says what the model
says. A command may narrow an option (its own default, `required`, a more specific help or type) but not respell it.

An option renamed for consistency keeps its old spelling as a hidden alias: it still works, and says once on stderr
`warning: --old is now --new`. A concept's old spellings are declared on its `Concept` (they then work wherever it
does); `tests/unit/cli/test_cli_names.py` and `tests/e2e/test_cli_options.py` walk every command and fail on a
second spelling of a concept.

Lists, one convention: a list option is repeatable, and each value may hold several, comma-separated (`--conc 4,8
--conc 16`): `Opt(listed=True)`. InferenceX's own list flags (`--config-keys`, the `matrix` filters, `al collect -k`)
also take several after one flag (`greedy`), as its argparse `nargs='+'` does. An option whose value may itself hold a
comma (a path, a run id or folder, KEY=VALUE YAML, JSON, a note, a pattern, a pull-request label) is repeated only.

Output: a command that writes a file or folder the user names refuses, before any work (exit 2), one that already
holds results, unless `--force` (:func:`refuse_replacing`); the file is left as it was. One that cannot be written
(under a file, in a missing or read-only folder) is refused the same way (`llmsweep.writable.refuse_unwritable`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from llmsweep.execute.bound import DEFAULT_ALLOWANCE_MINUTES
from llmsweep.option_kit import BIND_PORT as BIND_PORT
from llmsweep.option_kit import FINITE_POSITIVE as FINITE_POSITIVE
from llmsweep.option_kit import LISTED_HELP as LISTED_HELP
from llmsweep.option_kit import FiniteRange as FiniteRange
from llmsweep.option_kit import Opt as Opt
from llmsweep.option_kit import Source as Source
from llmsweep.option_kit import describe as describe
from llmsweep.option_kit import field_default as field_default
from llmsweep.option_kit import field_option as field_option
from llmsweep.option_kit import field_range as field_range
from llmsweep.option_kit import from_field as _from_field
from llmsweep.option_kit import no_default_if_required as _no_default_if_required
from llmsweep.option_kit import renamed as renamed
from llmsweep.option_kit import split_list as split_list
from llmsweep.option_spellings import SPELLINGS, SWITCHES, negation

F = TypeVar("F", bound=Callable[..., Any])


class PathValue(click.Path):
    """A path an option takes: a value spelled like a long option (`compare --markdown --json`) is that option, given
    where the path was missing, not a file to write; click took it for the path and the option never applied. A file
    whose name starts with `--` is still reachable as `./--name`. An option whose value is a path or a name (a trace
    source, a tokenizer directory or hub id, an interpreter) is one too, `path_type=str`: it refuses the same."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("--"):
            self.fail(f"{value!r} is an option, not a path: give this option its path first", param, ctx)
        return super().convert(value, param, ctx)


class ManyValues(Opt):
    """An option taking one or more space-separated values (argparse `nargs='+'`); repeating it also works."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("greedy", True)
        super().__init__(*args, **kwargs)


class FieldRef:
    """A model field read only when an option is built, so a command imports only the models its options use."""

    def __init__(self, model: Callable[[], type[BaseModel]], name: str) -> None:
        self.model = model
        self.name = name

    def source(self) -> Source:
        return self.model(), self.name


def _endpoint() -> type[BaseModel]:
    from llmsweep.client.config import Endpoint

    return Endpoint


def _run_options() -> type[BaseModel]:
    from llmsweep.client.config import RunOptions

    return RunOptions


def _workload() -> type[BaseModel]:
    from llmsweep.spec.workload import WorkloadSpec

    return WorkloadSpec


def _synthetic_traces() -> type[BaseModel]:
    from llmsweep.spec.workload import SyntheticTraces

    return SyntheticTraces


def _spec_decoding() -> type[BaseModel]:
    from llmsweep.spec.serve import SpecDecoding

    return SpecDecoding


@dataclass(frozen=True)
class Concept:
    """One option concept: the parameter name commands receive, its click settings, its old spellings, and its one
    spelling, which is the concept's entry in `option_spellings.SPELLINGS` (where rooms below the CLI read it too),
    filled in when :data:`CONCEPTS` is built."""

    dest: str
    settings: dict[str, Any] = dataclass_field(default_factory=dict)
    deprecated: tuple[str, ...] = ()
    source: FieldRef | None = None
    spelling: str = ""


def _http_url(value: str | None) -> str | None:
    """`--url`: an http or https URL. Without its scheme (`127.0.0.1:8000`) the request library said `unknown url type`,
    and the probe that nothing answers there."""
    if value is not None and not re.match(r"^https?://", value, re.IGNORECASE):
        raise click.BadParameter(f"{value!r} has no http:// or https:// in front: give --url http://{value} (or "
                                 "https://… for a TLS server)")
    return value


_DECLARED: dict[str, Concept] = {
    "json": Concept("as_json", {"is_flag": True, "help": "Print the result as JSON on stdout."}),
    "config_keys": Concept("config_keys", {
        "multiple": True, "help": "Only these recipe keys (`*`/`?` globs allowed); default: every key.",
    }, deprecated=("--config-key",)),
    "runner_config": Concept("runner_config", {
        "type": PathValue(path_type=Path), "default": None,
        "help": "Runner (fleet) file in InferenceX's runners.yaml format (default: the packaged fleet).",
    }),
    "runner_labels": Concept("runner_labels", {
        "listed": True, "metavar": "LABEL",
        "help": "A runner label the runner (fleet) file does not list that the self-hosted runners carry (e.g. "
                "InferenceX's `cluster:mi325x-tw`): its jobs are planned and run, not refused as an unknown label "
                "(`fleet.unknown-label`); any other unlisted label still is.",
    }),
    "allowance_minutes": Concept("allowance_minutes", {
        "type": click.IntRange(min=0), "default": DEFAULT_ALLOWANCE_MINUTES, "show_default": True, "metavar": "MINUTES",
        "help": "Minutes each sweep job may take beyond the longest its `llmsweep run` can take (derived from the "
                "job's plan: its server's start-up deadline, its points' windows or request counts at the request "
                "timeout, its eval's limit) for what no limit of the run bounds: the checkout, the installs, an engine "
                "image's pull, the upload. The job's `run` step times out at their sum (a failed job, collected as "
                "such), the job itself the allowance later.",
    }),
    "store": Concept("store_path", {  # a directory is the store's own error, with its fix
        "type": PathValue(path_type=Path), "default": None,
        "help": "Results store (SQLite). Default: $LLMSWEEP_STORE, else ~/.llmsweep/results.sqlite.",
    }),
    "no_evals": Concept("no_evals", {
        "is_flag": True, "help": "Throughput jobs only: no row is marked for an eval (InferenceX `--no-evals`).",
    }),
    "evals_only": Concept("evals_only", {
        "is_flag": True, "help": "Only the eval jobs (InferenceX `--evals-only`, label `evals-only`).",
    }),
    "all_evals": Concept("all_evals", {
        "is_flag": True, "help": "Evals on every 8k1k fixed-seq-len and agentic job (InferenceX `--all-evals`).",
    }),
    "changed": Concept("changed", {
        "metavar": "BASE..HEAD", "default": None,
        "help": "Only the jobs a recipe change added or changed (`llmsweep changes BASE..HEAD`: git revisions or two "
                "directories; BASE.. compares with the working tree).",
    }),
    "baseline": Concept("baseline", {
        "metavar": "RUN", "default": None,
        "help": "The baseline run to compare with (a stored run id or a run directory).",
    }),
    "simulate": Concept("simulate", {
        "is_flag": True, "help": "Use the built-in simulated engine in place of each job's real one.",
    }),
    "mix_sources": Concept("mix_sources", {
        "is_flag": True,
        "help": "Let measured, simulated and predicted points share series, frontiers and comparisons.",
    }),
    "url": Concept("url", {"required": True, "callback": lambda _c, _p, v: _http_url(v)},
                   source=FieldRef(_endpoint, "base_url")),
    "model": Concept("model", {"required": True}, source=FieldRef(_endpoint, "model")),
    "tokenizer": Concept("tokenizer", {"default": None, "type": PathValue(path_type=str),
                                                      "metavar": "DIR_OR_ID"},  # a hub id stays a string
                         source=FieldRef(_workload, "tokenizer")),
    "no_ignore_eos": Concept("no_ignore_eos", {
        "is_flag": True, "help": "Do not send ignore_eos (servers that answer 422).",
    }),
    "gpus": Concept("gpus", {"type": int, "show_default": True}, source=FieldRef(_run_options, "gpus")),
    "request_timeout": Concept("request_timeout", {"type": float, "show_default": True},
                               deprecated=("--timeout",), source=FieldRef(_run_options, "timeout_s")),
    "client_workers": Concept("client_workers", {"type": int, "show_default": True},
                              deprecated=("--workers",), source=FieldRef(_run_options, "workers")),
    "seed": Concept("seed", {
        "type": int, "show_default": True, "help": "Seed of the prompts and arrivals (the recipe's client seed).",
    }, source=FieldRef(_run_options, "seed")),
    "num_prompts": Concept("num_prompts", {"type": click.IntRange(min=1)},  # the workload's gt=0
                           source=FieldRef(_workload, "num_prompts")),
    "num_warmups": Concept("num_warmups", {"type": int}, deprecated=("--warmup", "--warmups"),
                           source=FieldRef(_workload, "num_warmups")),  # bench fixed --warmup, peer import --warmups
    "num_prompts_per_conc": Concept("num_prompts_per_conc", {
        "type": click.IntRange(min=1), "help": "Measured requests per unit of concurrency.",
    }, deprecated=("--prompts-per-conc",)),
    "num_warmups_per_conc": Concept("num_warmups_per_conc", {
        "type": click.IntRange(min=0), "help": "Warm-up requests per unit of concurrency.",
    }, deprecated=("--warmups-per-conc",)),
    "duration": Concept("duration", {"type": FINITE_POSITIVE, "metavar": "SECONDS"},
                        source=FieldRef(_run_options, "duration_s")),  # any window: finite, above 0, a fraction too
    "num_traces": Concept("num_traces", {"type": click.IntRange(min=1), "show_default": True},
                          source=FieldRef(_synthetic_traces, "traces")),
    "traces": Concept("traces", {"type": PathValue(path_type=str), "metavar": "SOURCE",
                                             "help": "Trace file, directory or Hugging Face dataset id."}),
    "spec_method": Concept("spec_method", {}, source=FieldRef(_spec_decoding, "method")),
    "spec_k": Concept("spec_k", {"type": click.IntRange(min=1)},
                      source=FieldRef(_spec_decoding, "num_steps")),
    "executor": Concept("executor", {"default": "local", "show_default": True}),
    "executor_option": Concept("executor_options", {
        "multiple": True, "metavar": "KEY=VALUE", "help": "An executor setting (repeatable), e.g. allow_image=true.",
    }),
    "startup_timeout": Concept("startup_timeout", {
        "type": FINITE_POSITIVE, "default": None, "help": "Seconds to wait for a server to become ready.",
    }),
    "repeats": Concept("repeats", {
        "type": click.IntRange(min=1), "default": 1, "show_default": True, "help": "Runs of every point.",
    }),
    "force": Concept("force", {"is_flag": True, "help": "Write over what the output already holds."},
                     deprecated=("--replace",)),
    "out": Concept("out", {"type": PathValue(path_type=Path), "default": None,
                                    "help": "Where the output is written."}, deprecated=("--save-to",)),
    "run_id": Concept("run_id", {"default": None, "metavar": "RUN", "help": "Only results of this run id."},
                      deprecated=("--run-id",)),
    "job": Concept("job", {
        "metavar": "JOB", "help": "A planned job: its id, a unique id prefix or its exp-name.",
    }, deprecated=("--only-job",)),
    "draft_model": Concept("draft_model", {
        "default": None, "help": "The speculative drafter (a recipe's `draft-model`).",
    }),  # `model synth`'s flag that also writes a drafter is `--with-draft` (its old --draft and --draft-model)
    "pr_number": Concept("pr_number", {
        "type": click.IntRange(min=1), "default": None, "metavar": "N",
        "help": "The InferenceX pull request the changelog change belongs to."}),
    "changelog_base": Concept("base", {
        "default": None, "metavar": "REV|FILE",
        "help": "The changelog before this change: a git revision of its repository, or a file."}),
    "processes": Concept("processes", {
        "type": click.IntRange(min=1), "default": None,
        "help": "Worker processes that predict points in parallel (default: the CPUs this process may use, at most "
                "one per point; 1 = one point after another in this process). The output is the same either way.",
    }),
    "resummarize": Concept("resummarize", {
        "is_flag": True, "help": "First recompute every run's summary from its raw files (needs whole records.jsonl).",
    }, deprecated=("--resummarise",)),
    # a server of ours (`sim serve`, `sim router`, `router`)
    "bind_host": Concept("host", {"default": "127.0.0.1", "show_default": True, "help": "Address to bind."}),
    "kv_transfer": Concept("kv_transfer", {
        "default": None, "help": "The KV-transfer backend between prefill and decode workers (said in /version; on the "
                                 "simulator, what its modelled link stands for).",
    }),
    # a PD router's workers (`sim router`, `router`)
    "prefill_urls": Concept("prefill", {
        "listed": True, "required": True, "help": "A prefill worker's URL.",
    }),
    "decode_urls": Concept("decode", {
        "listed": True, "required": True, "help": "A decode worker's URL.",
    }),
    # `run`'s own: concepts because the run's messages below the CLI name them (`option_spellings`)
    "live": Concept("live", {"is_flag": True}),
    "resume": Concept("resume", {"is_flag": True}),
    "reuse": Concept("reuse", {"is_flag": True}),
    "eval_task": Concept("eval_task"),
    "eval_dataset": Concept("eval_dataset"),
    "eval_limit": Concept("eval_limit"),
    "eval_max_tokens": Concept("eval_max_tokens"),
    "require_power": Concept("require_power"),  # a switch: declared as the pair `--require-power/--no-require-power`
    "power_backend": Concept("power_backend"),
    # `matrix`'s recipe files, which the job-id fixes below the CLI name (`execute.pipeline`, `plan.select`)
    "config_files": Concept("config_files"),
    # `compare`'s further runs of A's and B's points, which `results.compare`'s notes name
    "repeats_from": Concept("repeats_a"),
    "b_repeats_from": Concept("repeats_b"),
    # a command's output format: each command gives its own choices, default and help
    "format": Concept("fmt"),
}
if _DECLARED.keys() != SPELLINGS.keys():  # pragma: no cover - a concept added in one place and not the other
    raise ImportError("cli.options and option_spellings.SPELLINGS declare different concepts: "
                      f"{sorted(_DECLARED.keys() ^ SPELLINGS.keys())}")
CONCEPTS: dict[str, Concept] = {name: replace(c, spelling=SPELLINGS[name]) for name, c in _DECLARED.items()}
"""Every shared option concept by name, each with its spelling."""


def option(concept: str, *, dest: str | None = None, short: str | None = None, deprecated: tuple[str, ...] = (),
           source: Source | None = None, cls: type[Opt] = Opt, **overrides: Any) -> Callable[[F], F]:
    """The option of `concept`, passed to the command as `dest` (default: the concept's own parameter name).

    The option's default and help are those of the model field it feeds: the concept's, or this command's `source`.
    `overrides` narrow the shared settings for one command (default, required, type, a more specific help);
    `deprecated` adds old spellings this command used to accept. A switch (`option_spellings.SWITCHES`) is declared
    as click's on/off pair, its off spelling derived from its one spelling (`run --require-power/--no-require-power`).
    """
    spec = CONCEPTS[concept]
    settings = dict(spec.settings)
    if source is not None:  # this command feeds a field of its own: its default and description win
        settings.update(_from_field(source))
    elif spec.source is not None and not {"default", "help"} <= overrides.keys():
        source = spec.source.source()  # import the model only when this command takes something from it
        settings = {**_from_field(source), **settings}
    settings.update(overrides)
    # The bounds of the field the option feeds hold even where this command gives its own default and help
    # (`peer import --num-warmups -3` was taken, as the workload's `ge=0` is not checked there).
    bounded_by = source or (spec.source.source() if spec.source is not None else None)
    if bounded_by is not None:
        settings["type"] = field_range(bounded_by, settings.get("type"))
    _no_default_if_required(settings)
    spelling = f"{spec.spelling}/{negation(concept)}" if concept in SWITCHES else spec.spelling
    decls = [spelling] + ([short] if short else []) + [dest or spec.dest]
    return click.option(*decls, cls=cls, concept=concept, old_spellings=spec.deprecated + deprecated, source=source,
                        **settings)


_JSON_META = "llmsweep.json"
"""The key of `ctx.meta` (one dict shared by a command's context and its groups') that says `--json` was given."""


def _inherit_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """`--json` given to a group (`results --json runs`, `catalog --json hardware`) holds for its subcommand too."""
    if value:
        ctx.meta[_JSON_META] = True
    return bool(ctx.meta.get(_JSON_META))


def json_option(what: str = "the result") -> Callable[[F], F]:
    """`--json`: print WHAT as JSON on stdout instead of a table; also honoured when given to the parent group."""
    return option("json", help=f"Print {what} as JSON on stdout.", callback=_inherit_json)


def json_group_option() -> Callable[[F], F]:
    """`--json` of a group whose subcommands take it: given to the group, it holds for the subcommand (the group's
    function takes no parameter for it). `tests/unit/cli/test_cli_contracts.py` checks every such group has it."""
    return option("json", help="Print the subcommand's result as JSON on stdout (as its own --json).",
                  callback=_inherit_json, expose_value=False)


class DefaultCommandGroup(click.Group):
    """A group with a default subcommand (`llmsweep al MODEL …` is `al lookup MODEL …`): the words after the
    group's own flags (`--json`) name a subcommand, or are the default subcommand's. `default_when_empty`: no words
    at all run the default too."""

    def __init__(self, *args: Any, default_command: str, default_when_empty: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default_command = default_command
        self.default_when_empty = default_when_empty

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        flags = {o for p in self.params if isinstance(p, click.Option) and p.is_flag for o in p.opts}
        i = 0
        while i < len(args) and args[i] in flags:
            i += 1
        rest = args[i:]
        if (rest and rest[0] not in self.commands and rest[0] not in ctx.help_option_names) or \
                (not rest and self.default_when_empty):
            args = [*args[:i], self.default_command, *rest]
        return super().parse_args(ctx, args)


def config_keys_option(*, required: bool = False) -> Callable[[F], F]:
    """`--config-keys`: recipe keys to take, several after one flag (`--config-keys a b`, as InferenceX's flag) in
    every command; a recipe file or folder after them (:func:`names_a_path`) is the command's argument, not a key."""
    help_text = ("Only these recipe keys (`*`/`?` globs allowed); several may follow one flag, or repeat it (a recipe "
                 "file after them is not taken for a key)")
    help_text += "." if required else "; default: every key."
    return option("config_keys", cls=ManyValues, listed=True, stop_at=names_a_path, required=required, help=help_text)


def names_a_path(word: str) -> bool:
    """A command-line word that names a recipe file or folder, never a recipe key: a YAML file name, a path with a
    separator, or a folder here that holds recipes (InferenceX's keys are names: letters, digits, `.`, `-`, `_`,
    globs). A folder of another kind (a run folder named after its key, even one holding an engine's YAML launch
    files) does not end the keys."""
    from llmsweep.spec.loader import RECIPE_SUFFIXES

    if word.endswith(RECIPE_SUFFIXES) or os.sep in word or "/" in word:
        return True
    from llmsweep.results.rundir import folder_kind

    folder = Path(word)  # an output of ours (a run, job, bench or predict folder) may hold YAML that is no recipe
    return (folder.is_dir() and folder_kind(folder) == "other"
            and any(p.suffix in RECIPE_SUFFIXES for p in folder.rglob("*")))


def recipe_files_argument(*, required: bool = True) -> Callable[[F], F]:
    """FILES: recipe files or folders of them, as every command that plans recipes takes them (`validate`, `run`,
    `render`, `predict`, `changes`, `ci`). Click checks nothing about them: the recipe loader does, so a missing file,
    an empty one, a folder or a pipe (`<(…)`, `/dev/stdin`) gets the same finding from every command (`schema.file`,
    `schema.empty-file`, `plan.no-jobs`)."""
    return click.argument("files", nargs=-1, required=required, type=PathValue(path_type=Path))


def store_option(dest: str = "store_path", **overrides: Any) -> Callable[[F], F]:
    """`--store`: the results database."""
    return option("store", dest=dest, **overrides)


def out_option(help: str, *, dest: str = "out", **overrides: Any) -> Callable[[F], F]:
    """`--out`: where this command writes (a file or a folder, as its help says); `--save-to` is its old spelling."""
    return option("out", dest=dest, help=help, **overrides)


RESULT_FILES = ("records.jsonl", "summary.json", "run.json", "crosscheck.json")
"""The files that make a folder hold results: a measurement's or prediction's records and summary, a run's run.json,
a cross-check's table."""


def held_results(path: Path) -> list[str]:
    """What `path` holds that a command writing there would replace: a non-empty file itself; in a folder, its
    result files at any depth (:data:`RESULT_FILES`, relative paths). An empty file or a folder of other things
    holds none."""
    if path.is_file():
        return [path.name] if path.stat().st_size else []
    if not path.is_dir():
        return []
    return sorted(str(f.relative_to(path)) for f in path.rglob("*") if f.name in RESULT_FILES and f.is_file())


def refuse_replacing(path: Path, holds: list[str], *, force: bool, what: str, option_name: str = "--out") -> None:
    """Before any work: an output the user named that already holds results (`holds`: what it holds, empty when
    nothing) is refused (exit 2, the file left as it was) unless `--force`, which is said on stderr."""
    if not holds:
        return
    if not force:
        from llmsweep.errors import ConfigError

        more = f" and {len(holds) - 1} more" if len(holds) > 1 else ""
        files = "" if path.is_file() else f" ({holds[0]}{more})"
        raise ConfigError(f"{option_name} {path} already holds {what}{files}; nothing was written",
                          fix=f"pass a new path to {option_name}, or --force to replace it")
    click.echo(f"--force: replacing {path}, which holds {what}" if path.is_file() else
               f"--force: replacing {what} in {path}", err=True)


def runner_config_option() -> Callable[[F], F]:
    """`--runner-config`: the fleet file."""
    return option("runner_config")


def executor_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`--executor-option KEY=VALUE` pairs as the executor's settings (values read as YAML scalars: true, 4, 1.5)."""
    import yaml

    from llmsweep.errors import ConfigError

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--executor-option {pair!r} is not KEY=VALUE",
                              fix="e.g. --executor-option partition=gpu, --executor-option allow_image=true")
        try:
            out[key.strip().replace("-", "_")] = yaml.safe_load(value)
        except yaml.YAMLError as exc:  # `node={srun: x` (a brace lost to the shell): said, not a traceback
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"--executor-option {pair!r}: the value {value!r} is not YAML ({problem})",
                              fix="values are read as YAML: quote the whole option for the shell, e.g. "
                              "--executor-option 'node={srun: /opt/slurm/bin/srun}', or quote a plain string in "
                              "it (KEY='\"a: b\"')") from exc
    return out
