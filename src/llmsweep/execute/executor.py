"""The `Executor` protocol: what every executor provides, and the registry its module registers it in.

An executor places server groups: it decides where each group's lifecycle runs (this process, or a batch job on an
allocated node), which launcher starts the group's server there, and it tears every server down before it returns.
Provenance records what was placed — the group's executor kind and the launcher that started the server (`local`,
`docker`, `srun`) — never merely which executor the command line asked for.

A new executor is one module: a class with `kind`, `summary`, `options_model` (its pydantic options,
`extra="forbid"`), `lifecycle_here` (whether the jobs' client runs on this host), `image_mounts` (the host folders
a server in a job's image sees, and where) and `run_groups`, decorated with
`@register_executor`, plus its module on the import line of :mod:`llmsweep.execute.registry`. The CLI's
`--executor` choices and `llmsweep run`'s dispatch come from the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from llmsweep import shell
from llmsweep.option_spellings import flag as _flag

_OPTION = _flag("executor_option")
"""`--executor-option`, as this module's fixes name it: read from its one home, `option_spellings`."""

if TYPE_CHECKING:
    from llmsweep.execute.base import ImageMount, ServerLauncher
    from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup

Event = Callable[[str], None]


class Executor(Protocol):
    """Places server groups, starts each group's server, runs its jobs there and tears the server down."""

    kind: ClassVar[str]
    """Registry key and the `--executor` choice; recorded in each group and in every job's provenance."""
    summary: ClassVar[str]
    """One line for `--help`: where servers run."""
    options_model: ClassVar[type[BaseModel]]
    """The executor's settings (`--executor-option KEY=VALUE`), validated with `extra="forbid"`."""
    lifecycle_here: ClassVar[bool]
    """Whether a job's lifecycle (its client: workload, tokenizer, load) runs on this host; False where it runs on
    the node the executor places it on (Slurm), whose files and caches this host may not see."""

    def __init__(self, options: Any = None) -> None: ...

    def image_mounts(self) -> tuple[ImageMount, ...] | None:
        """Where the executor serves a job that names an image in a container of that image (docker; Slurm's pyxis
        steps): the host folders it mounts there, each with the path the container sees it at (its own, or another:
        `-v /host/patches:/opt/patches`), whose files the server reads as this host holds them; any other path the
        server reads is the image's copy. None where it serves real engines on the host they run on, reading its
        files (the local executor). The reuse key reads what a search-path folder holds only where the server reads
        it, through the mount's source (`changes.reuse.reuse_keys`)."""
        ...

    def run_groups(self, groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
                   event: Event) -> list[JobOutcome]:
        """Run every group (each on one server, always torn down); the outcomes of the jobs that ran.

        Stops after the first group with a failed job when `settings.fail_fast`; jobs left out get no outcome.
        """
        ...


E = TypeVar("E", bound=type[Executor])

_EXECUTORS: dict[str, type[Executor]] = {}


def register_executor(cls: E) -> E:
    """Class decorator: make `cls` the executor of `cls.kind` (a second class for one kind is a programming error)."""
    known = _EXECUTORS.get(cls.kind)
    if known is not None and known is not cls:
        raise ValueError(f"executor kind {cls.kind!r} is registered twice ({known.__qualname__}, {cls.__qualname__})")
    _EXECUTORS[cls.kind] = cls
    return cls


def registered_executors() -> dict[str, type[Executor]]:
    """The executors registered so far, by kind (import :mod:`llmsweep.execute.registry` for every built-in one)."""
    return dict(_EXECUTORS)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """The interrupt signals (SIGINT, SIGTERM, SIGHUP, SIGUSR1, ...) unwind like Ctrl-C while servers run here, so
    `finally` blocks stop them.

    Python's default SIGTERM ends the process at once: a `kill` of the driver (or a closed terminal) would leave the
    server, which runs in its own session, holding its port and GPUs. The teardowns themselves are shielded (see
    :mod:`llmsweep.execute.signals`): a second signal hurries them but cannot cut them short.
    """
    from llmsweep.execute.signals import interrupting

    with interrupting():
        yield


def run_groups_here(launcher: ServerLauncher, groups: Sequence[ServerGroup], run_dir: Path,
                    settings: LifecycleSettings, event: Event) -> list[JobOutcome]:
    """Run the groups one after the other in this process, each server started by `launcher` (local, docker)."""
    from llmsweep.execute.lifecycle import run_group

    outcomes: list[JobOutcome] = []
    with terminate_as_interrupt():
        for group in groups:
            got = run_group(group, launcher, run_dir, settings, event=event)
            outcomes.extend(got)
            if settings.fail_fast and not all(o.ok for o in got):
                event("fail-fast: stopping after the first failed job")
                break
    return outcomes


M = TypeVar("M", bound=BaseModel)


def validate_options(kind: str, model: type[M], options: Mapping[str, Any] | BaseModel | None) -> M:
    """`options` as the executor's options model; unknown or ill-typed fields are a ConfigError naming them."""
    from pydantic import ValidationError

    from llmsweep.errors import ConfigError

    if isinstance(options, model):
        return options
    try:
        return model.model_validate(options if options is not None else {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(options)'}: "
            + (f"not an option of this executor{_did_you_mean(model, e['loc'])}" if e["type"] == "extra_forbidden"
               else e["msg"])
            for e in exc.errors())
        unknown = [e for e in exc.errors() if e["type"] == "extra_forbidden"]
        renames = [(e, close) for e in unknown if (close := _closest(model, e["loc"])) is not None]
        fixes = [  # a misspelt key: the option it means, with the value given (inside its mapping, renamed there)
            _renamed(model, close, e.get("input")) if len(e["loc"]) == 1
            else f"rename `{e['loc'][-1]}` to `{close}` in `{'.'.join(str(p) for p in e['loc'][:-1])}`"
            for e, close in renames]
        if any(len(e["loc"]) == 1 for e in unknown):  # a key this executor does not have: the keys it has
            fixes.append(f"{_OPTION} KEY=VALUE, KEY one of: {', '.join(sorted(model.model_fields))}")
        # the keys are right, a value is not: what each of those options is, and a value as the error says
        keys = list(dict.fromkeys(str(e["loc"][0]) for e in exc.errors() if e["loc"] and e not in unknown))
        if keys or not fixes:
            said = "; ".join(f"{key} is {_what_it_is(model, key)}" for key in keys)
            forms = [form for key in keys if (form := _form_of(model, key)) is not None]
            fixes.append((f"{said}: give a value of the form the error names" if said else "check the values given")
                         + (f" ({'; '.join(forms)})" if forms else ""))
        fix = "; ".join(fixes)
        raise ConfigError(f"invalid {kind} executor options: {problems}", fix=fix) from exc


def _fields_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The option names of the (nested) options model an error's `loc` ends in: `node.srunn` is SrunOptions'."""
    import typing

    current: Any = model
    for part in loc[:-1]:
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) \
            else None
        if field is None:
            return []
        inner = [a for a in (field.annotation, *typing.get_args(field.annotation))
                 if isinstance(a, type) and issubclass(a, BaseModel)]
        if not inner:
            return []
        current = inner[0]
    return sorted(current.model_fields)


def _closest(model: type[BaseModel], loc: Sequence[Any]) -> str | None:
    import difflib

    close = difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc), n=1) if loc else []
    return close[0] if close else None


def _did_you_mean(model: type[BaseModel], loc: Sequence[Any]) -> str:
    close = _closest(model, loc)
    return f"; did you mean `{close}`?" if close else ""


def _renamed(model: type[BaseModel], key: str, value: Any) -> str:
    """The fix for a misspelt option whose likely meaning is `key`: `--executor-option KEY=VALUE` with the value given
    where `key` takes it; else with a placeholder, and why the value given is not one (`stop_timeout_s=-1` meant for
    `import_timeout_s` would be refused there too: a fix must not hand on a value the option refuses)."""
    from pydantic import ValidationError

    try:
        model.model_validate({key: value})
    except ValidationError as exc:
        said = [e["msg"] for e in exc.errors() if e["loc"][:1] == (key,)]
        if said:
            given = (f"{value:g}" if isinstance(value, float) else str(value) if isinstance(value, (int, str))
                     and not isinstance(value, bool) else _option_text(key, value).partition("=")[2].strip("'"))
            return (f"{_OPTION} {key}=VALUE ({key} is {_what_it_is(model, key)}; it does not take {given}: "
                    f"{said[0]})")
    return f"{_OPTION} {_option_text(key, value)}"


def _option_text(key: str, value: Any) -> str:
    """`KEY=VALUE` as `--executor-option` reads it (the value as YAML), one shell word: a fix that repeats what was
    given under the right key."""
    import json

    return shell.quote(f"{key}={value if isinstance(value, str) else json.dumps(value, default=str)}")


def _form_of(model: type[BaseModel], key: str) -> str | None:
    """How `--executor-option` spells a value of a list or mapping option (values are read as YAML), for the fix of
    a bad one: `exclude=vm` was refused as "not a valid tuple" with no word of the form that is. The example is one
    shell word (`shell.quote`), as it is pasted: bare, zsh takes `[a,b]` for a glob and `{k: v}` is two words."""
    import typing

    field = model.model_fields.get(key)
    if field is None:
        return None
    kinds = {typing.get_origin(a) or a for a in (field.annotation, *typing.get_args(field.annotation))}
    if kinds & {list, tuple, set, frozenset}:
        return f"a list: {_OPTION} {shell.quote(f'{key}=[a,b]')}"
    if dict in kinds:
        return f"a mapping: {_OPTION} {shell.quote(f'{key}={{k: v}}')}"
    return None


def _what_it_is(model: type[BaseModel], key: str) -> str:
    """An option's description (its model field's, first letter lowered), else its type: what a fix for a bad value
    of it says."""
    field = model.model_fields.get(key)
    if field is None:
        return "no option"
    if field.description:
        text = field.description.rstrip(".")
        if text.startswith(("How ", "What ", "Where ", "Whether ", "When ")):  # "node is how the node starts …"
            return f"{text[0].lower()}{text[1:]}"
        return f"the {text[0].lower()}{text[1:]}" if not text.startswith(("-", "the ", "The ")) else text
    return f"a {getattr(field.annotation, '__name__', field.annotation)}"
