"""The parts every llmsweep command line is built of, below every room: the number types that refuse what the model
field they feed refuses as the option is parsed, and the option class (`Opt`: its concept, list and greedy values,
old spellings) with `field_option`, an option that feeds one model field.

The CLI builds its commands from these (`llmsweep.cli.options` declares the shared concepts with them); a room below
the CLI that owns a command line of its own — the simulated engine's `sim serve`, whose parser `execute.virtual`
reads a launch with (`llmsweep.sim.serve_args`) — declares it with the same parts, without importing the CLI. This
module imports no room of llmsweep.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import BaseModel

F = TypeVar("F", bound=Callable[..., Any])

class FiniteRange(click.FloatRange):
    """A finite number in a range: `inf` and `nan` are refused as the bounds are, when the option is parsed (exit 2,
    the option named), never by a model's validation after the command has started (a traceback) or in the middle
    of the run (`--request-rate inf` overflowed the client's sizing; `predict --duration -5` started its workers and
    refused every point)."""

    def __init__(self, min: float | None = None, max: float | None = None, min_open: bool = False,
                 max_open: bool = False, clamp: bool = False) -> None:
        super().__init__(min, max, min_open, max_open, clamp)
        if min is None and max is None:
            self.name = "float"  # any finite number: shown as FLOAT, as click's own

    def _describe_range(self) -> str:
        """No range in the help of an unbounded one (click's own said `[x<=None]`)."""
        return "" if self.min is None and self.max is None else str(super()._describe_range())

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


FINITE_POSITIVE = FiniteRange(min=0, min_open=True)
"""A window in seconds, a rate: finite and above 0."""

BIND_PORT = click.IntRange(0, 65535)
"""A port a server of ours binds (0: any free one): refused as parsed (exit 2, the option named), never by the
socket's `bind()` after the server has started building (`sim serve --port -1` ended in an OverflowError
traceback)."""

Source = tuple[type[BaseModel], str]

_NEGATIVE_NUMBER = re.compile(r"^-\d+$")
_WARNED: set[str] = set()


def describe(model: type[BaseModel], name: str) -> str:
    """The description of `model.name`: the one source of an option's help where a model field backs it."""
    return model.model_fields[name].description or ""


def field_default(model: type[BaseModel], name: str) -> Any:
    """The default of `model.name`, so an option and the field it feeds cannot disagree."""
    return model.model_fields[name].get_default(call_default_factory=True)


def renamed(old: str, new: str) -> str:
    """The one line an old spelling says on stderr."""
    return f"warning: {old} is now {new}"


def _warn_deprecated(old: str, new: str) -> None:
    if old in _WARNED:
        return
    _WARNED.add(old)
    click.echo(renamed(old, new), err=True)


LISTED_HELP = "Repeatable; commas also separate values."


def split_list(value: str) -> list[str]:
    """One value of a list option as the values it lists: `4,8` is 4 and 8 (spaces around a comma and empty pieces
    dropped)."""
    return [piece.strip() for piece in value.split(",") if piece.strip()]


class Opt(click.Option):
    """A click option that names its concept, may take several values, and keeps old spellings.

    `listed`: a list (repeatable), each value split at commas (`--conc 4,8 --conc 16`): the convention of every list
    option whose values never hold a comma.
    `greedy`: one or more values after one flag (argparse `nargs='+'`, as InferenceX's flags); repeating also works.
    `old_spellings`: hidden old spellings that set this option and say once on stderr what it is now.
    `source`: the model field the option feeds (its default and description), where one does.
    """

    def __init__(self, *args: Any, concept: str | None = None, greedy: bool = False, listed: bool = False,
                 old_spellings: tuple[str, ...] = (), source: Source | None = None,
                 stop_at: Callable[[str], bool] | None = None, **kwargs: Any) -> None:
        if greedy or listed:
            kwargs["multiple"] = True
        if listed and kwargs.get("help") and LISTED_HELP not in kwargs["help"]:
            kwargs["help"] = f"{kwargs['help'].rstrip()} {LISTED_HELP}"
        super().__init__(*args, **kwargs)
        self.concept = concept
        self.source = source
        self.greedy = greedy
        self.listed = listed
        self.stop_at = stop_at
        """Greedy: a following word for which this is true is not a value (a positional argument after them)."""
        self.old_spellings = tuple(old_spellings)

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        name = self.opts[0]
        primary = parser._long_opt.get(name) or parser._short_opt.get(name)
        if primary is None:  # pragma: no cover - click registers every declared spelling
            return
        if self.listed:
            one = primary.process

            def listed(value: Any, state: Any, one: Callable[..., None] = one) -> None:
                for piece in split_list(value) if isinstance(value, str) else [value]:
                    one(piece, state)

            primary.process = listed  # one parser option for every spelling: `-k 1,2` too
        if self.greedy:
            original = primary.process
            stop_at = self.stop_at or (lambda _: False)

            def greedy(value: Any, state: Any, original: Callable[..., None] = original) -> None:
                original(value, state)
                while state.rargs and (not state.rargs[0].startswith("-") or _NEGATIVE_NUMBER.match(state.rargs[0])):
                    if stop_at(state.rargs[0]):
                        break
                    original(state.rargs.pop(0), state)

            primary.process = greedy
        for old in self.old_spellings:
            alias = copy.copy(primary)

            def warned(value: Any, state: Any, old: str = old, process: Callable[..., None] = primary.process) -> None:
                _warn_deprecated(old, name)
                process(value, state)

            alias.process = warned
            parser._long_opt[old] = alias


def from_field(source: Source) -> dict[str, Any]:
    model, name = source
    settings: dict[str, Any] = {"help": describe(model, name)}
    if not model.model_fields[name].is_required():
        settings["default"] = field_default(model, name)
    return settings


def field_range(source: Source, given: Any) -> Any:
    """The option type that refuses, as the option is parsed (exit 2, the option named), what the model field it
    feeds refuses: a float field's `gt`/`ge`/`lt`/`le` bounds as a `FiniteRange` (nan and inf are no timeouts or
    ratios either), an int field's as an `IntRange`. `given`: the type the concept declares; a range it already is,
    or a field without bounds, leaves it as it is. A bound only the model checked came back as a pydantic traceback
    after the command had started (`run --request-timeout 0`)."""
    import annotated_types as at

    if given not in (float, int, None) or isinstance(given, click.ParamType):
        return given
    model, name = source
    info = model.model_fields[name]
    lo: Any = None
    hi: Any = None
    lo_open = hi_open = False
    for m in info.metadata:
        if isinstance(m, at.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, at.Ge):
            lo = m.ge
        elif isinstance(m, at.Lt):
            hi, hi_open = m.lt, True
        elif isinstance(m, at.Le):
            hi = m.le
    kind = given if given is not None else float if float in _types(info.annotation) else int \
        if int in _types(info.annotation) else None
    if kind is float:
        return FiniteRange(min=lo, max=hi, min_open=lo_open, max_open=hi_open)
    if kind is int and (lo is not None or hi is not None):
        return click.IntRange(min=None if lo is None else int(lo), max=None if hi is None else int(hi),
                              min_open=lo_open, max_open=hi_open)
    return given


def _types(annotation: Any) -> tuple[Any, ...]:
    import typing

    return typing.get_args(annotation) or (annotation,)


def no_default_if_required(settings: dict[str, Any]) -> None:
    """A required option has no default. Click (8.3 on) takes an explicit `default=None` for a value given, so a
    required option that kept its concept's or field's `None` default was never asked for: `al lookup` without
    `--spec-k`, `changelog canonicalize` without `--base`, `peer crosscheck` without `--tokenizer` ran on and ended
    in a traceback (exit 1) instead of click's "Missing option" (exit 2)."""
    if settings.get("required"):
        settings.pop("default", None)


def field_option(*decls: str, source: Source, **overrides: Any) -> Callable[[F], F]:
    """One command's own option that feeds one model field: the field's default and description, unless narrowed."""
    settings = {**from_field(source), **overrides}
    settings["type"] = field_range(source, settings.get("type"))
    no_default_if_required(settings)
    return click.option(*decls, cls=Opt, source=source, **settings)
