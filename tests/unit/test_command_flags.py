"""A message that names a command with one of its options names an option that command takes.

`test_option_spellings` holds every flag a fix names to *some* llmsweep command's options; this holds each
`llmsweep CMD [SUB] … --flag` the package's source writes (a fix, a help text, a docstring; `CMD --flag` without the
`llmsweep` in front, the `` `CMD`'s `--flag` `` and `` `CMD` without --flag `` forms, and a message that starts
with its command, `CMD: --flag …`, too) to the options of the command it names, read from the click tree itself (no
second list): `llmsweep predict --resume` fails, as only `run` takes `--resume`. A spelling a message reads from
`option_spellings` is checked as it renders (the module's `_flag("resume")` and `negation("require_power")` names and
calls are resolved); any other `{…}` in an f-string is left a placeholder.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from support.cli import walk

import llmsweep
from llmsweep.cli.main import cli
from llmsweep.cli.options import DefaultCommandGroup
from llmsweep.option_spellings import flag, negation

SRC = Path(llmsweep.__file__).resolve().parent

PLACEHOLDER = "{…}"
"""What an f-string's replacement field renders as when it is not a spelling read from `option_spellings`."""

_FLAG = re.compile(r"--[a-z][a-z0-9-]*[a-z0-9]")


# --- the command tree -------------------------------------------------------------------------------------------

def _subcommands(group: click.Group) -> dict[str, click.Command]:
    ctx = click.Context(group)
    return {name: sub for name in group.list_commands(ctx) if (sub := group.get_command(ctx, name)) is not None}


def _takes(command: click.Command, flag: str) -> bool:
    """Whether `command` itself takes `flag` (old spellings and `--help` included)."""
    if flag in click.Context(command).help_option_names:
        return True
    return any(flag in (*p.opts, *p.secondary_opts, *getattr(p, "old_spellings", ()))
               for p in command.params if isinstance(p, click.Option))


TOP_LEVEL = frozenset(_subcommands(cli))


@dataclass(frozen=True)
class Named:
    """A flag a text names with a command: `command` as typed (`run`, `results export`), `problem` what is wrong
    (None when the command takes it)."""

    command: str
    flag: str
    problem: str | None


def _check(words: list[str], extra_flags: tuple[str, ...] = ()) -> list[Named]:
    """Walk `words` (after `llmsweep`) down the command tree: a word that names a subcommand of the group in hand
    descends into it (`a|b`: each of them; `…`: every one of them, as in `bench … --out`), a flag must be an option
    of every command in hand (a group's default subcommand's where the group lacks it), any other word is an
    argument (a value, a placeholder) — or, where the group in hand has neither that subcommand nor a default one, a
    misnamed subcommand. `extra_flags`: flags the text names with the command from outside its backticks (``
    `llmsweep discover` without --simulate ``), checked against the command the words end at."""
    here: list[click.Command] = [cli]
    path: list[str] = []
    found: list[Named] = []

    def check(flag: str) -> None:
        nonlocal here
        for i, command in enumerate(here):
            if not _takes(command, flag) and isinstance(command, DefaultCommandGroup):
                here[i] = command = _subcommands(command)[command.default_command]
        wrong = [c for c in here if not _takes(c, flag)]
        found.append(Named(" ".join(path), flag, None if not wrong else
                           f"`llmsweep {' '.join(path)}` takes no {flag}"))

    for raw in words:
        word = raw.strip("[](),;:.'\"")
        if word.startswith("--"):
            for part in word.split("/"):
                if _FLAG.fullmatch(flag := part.split("=", 1)[0]):
                    check(flag)
            continue
        groups = [c for c in here if isinstance(c, click.Group)]
        if not groups:
            continue  # an argument or an option's value
        names = word.split("|")
        if all(all(n in _subcommands(g) for g in groups) for n in names):
            here = [_subcommands(g)[n] for g in groups for n in names]
            path.append(word)
        elif word in {"…", "..."} and cli not in groups:  # `bench … --out`: whichever subcommand, so each of them
            here = [sub for g in groups for sub in _subcommands(g).values()]
            path.append(word)
        elif all(isinstance(g, DefaultCommandGroup) for g in groups):
            here = [_subcommands(g)[g.default_command] for g in groups if isinstance(g, DefaultCommandGroup)]
        elif re.fullmatch(r"[a-z][a-z-]*", word):
            found.append(Named(" ".join(path), word, f"`llmsweep {' '.join(path)}` has no subcommand {word!r}"))
            return found
        else:
            return found  # a placeholder where the subcommand goes: which command is not known
    for flag in extra_flags:
        check(flag)
    return found


# --- the scanner ------------------------------------------------------------------------------------------------

_COMMAND = r"(?:llmsweep(?: [^`]*)?|(?:" + "|".join(sorted(TOP_LEVEL, key=len, reverse=True)) + r")(?: [^`]*)?)"
_MENTION = re.compile(
    r"(?<![\w`])`(?P<words>" + _COMMAND + r")`"  # `llmsweep run … --resume`, `run --reuse`
    + r"(?:(?:'s|’s) `?(?P<own>--[a-z][a-z0-9-]*)"  # `run`'s `--resume`
    + r"| (?:with|without) `?(?P<with>--[a-z][a-z0-9-]*))?"  # `llmsweep discover` without --simulate
)
_FLAG_OF = re.compile(r"`?(?P<flag>--[a-z][a-z0-9-]*)`? (?:of|to) `(?P<words>" + _COMMAND + r")`")  # --out of `CMD`
_PREFIXED = re.compile(  # `compare: --ignore tp would …`: a message that starts (a line) with the command it is of
    r"(?m)^(?:llmsweep )?(?P<words>(?:" + "|".join(sorted(TOP_LEVEL, key=len, reverse=True))
    + r")(?: [a-z][a-z0-9|-]*)*): `?(?P<flag>--[a-z][a-z0-9-]*)")


def _is_command(words: list[str]) -> bool:
    """Whether `words` (after `llmsweep`) are a command's own name, every one a subcommand of the one before."""
    command: click.Command = cli
    for word in words:
        if not isinstance(command, click.Group) or word not in (subs := _subcommands(command)):
            return False
        command = subs[word]
    return True


def named_flags(text: str) -> list[Named]:
    """Every flag `text` names with an llmsweep command, each with what is wrong about the pairing."""
    found: list[Named] = []
    for m in _MENTION.finditer(text):
        words = m["words"].split()
        if words[0] == "llmsweep":
            words = words[1:]
        extra = tuple(f for f in (m["own"], m["with"]) if f)
        if any(_FLAG.search(w) for w in words) or extra:
            found += _check(words, extra)
    for m in _FLAG_OF.finditer(text):
        words = m["words"].split()
        found += _check(words[1:] if words[0] == "llmsweep" else words, (m["flag"],))
    for m in _PREFIXED.finditer(text):
        if _is_command(words := m["words"].split()):  # `run without requiring power: --x` is prose, not `run`
            found += _check(words, (m["flag"],))
    return found


def _rendered(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string the module writes, docstrings included, an f-string rendered with the spellings
    it reads from `option_spellings` (`_flag("resume")`, or a module-level name bound to one) and `{…}` for any other
    replacement field; implicit concatenation is one string, as Python parses it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = {"flag": flag, "_flag": flag, "negation": negation, "_negation": negation}
    bound: dict[str, str] = {}

    def spelled(node: ast.expr) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
            try:
                return calls[node.func.id](str(node.args[0].value))
            except KeyError:
                return None
        return bound.get(node.id) if isinstance(node, ast.Name) else None

    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name) and (s := spelled(statement.value)) is not None:
            bound[statement.targets[0].id] = s
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    texts: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in parts:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            texts.append((node.lineno, "".join(
                str(v.value) if isinstance(v, ast.Constant)
                else (spelled(v.value) or PLACEHOLDER) if isinstance(v, ast.FormattedValue) else PLACEHOLDER
                for v in node.values)))
    return texts


def test_every_message_names_a_flag_its_command_takes() -> None:
    wrong = [f"{p.relative_to(SRC)}:{line}: {n.problem}" for p in sorted(SRC.rglob("*.py"))
             for line, text in _rendered(p) for n in named_flags(text) if n.problem]
    assert not wrong, "messages pair a command with an option it does not take:\n" + "\n".join(wrong)


def test_the_scan_sees_the_messages() -> None:
    """The scan is not vacuous: it finds the pairings the run's fixes write with spellings from the home."""
    seen = {(n.command, n.flag) for p in sorted(SRC.rglob("*.py")) for _, text in _rendered(p)
            for n in named_flags(text)}
    assert {("run", "--resume"), ("run", "--out"), ("results export", "--format"), ("render", "--job"),
            ("matrix full-sweep", "--config-files"), ("run", "--reuse"), ("discover", "--simulate"),
            ("run", "--require-power"), ("run", "--no-require-power"), ("run", "--al-tolerance"),
            ("compare", "--ignore")} <= seen
    assert len(seen) > 60


RUN_ONLY = ("--require-power", "--power-backend")
"""`run`'s own options that docstrings across the rooms name (the power sampler's, the pipeline's, the report's)."""


def test_a_docstring_names_runs_power_options_with_run() -> None:
    """A docstring cannot read a spelling from `option_spellings`, so it writes `--require-power` and
    `--power-backend` by hand; each time it names one, it names it with its command (`run --power-backend off`), so
    the scan holds it to `run`'s options: a loose `--power-backend` would go unchecked were `run` to drop or rename
    it, or another command to take it."""
    loose = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(text := node.value.value, str)):
                continue
            for option in RUN_ONLY:
                written = len(re.findall(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])", text))
                held = sum(1 for n in named_flags(text) if n.flag == option and n.command == "run" and not n.problem)
                if written != held:
                    loose.append(f"{path.relative_to(SRC)}:{node.lineno}: {option} {written} times, "
                                 f"{held} with `run`")
    assert not loose, "docstrings name run's options without `run`:\n" + "\n".join(loose)


@pytest.mark.parametrize(("text", "problems"), [
    ("rerun with `llmsweep run RECIPE --out DIR --resume`", []),
    ("rerun with `llmsweep predict --resume`", ["`llmsweep predict` takes no --resume"]),
    ("as `run --reuse` does", []),
    ("as `predict --reuse` does", ["`llmsweep predict` takes no --reuse"]),
    ("`llmsweep results export --format json`", []),
    ("`llmsweep results list --served-by measured`", ["`llmsweep results list` takes no --served-by"]),
    ("`llmsweep results exprot --format json`", ["`llmsweep results` has no subcommand 'exprot'"]),
    ("`llmsweep catalog --json models|hardware`", []),
    ("`llmsweep catalog models|hardware --force`", ["`llmsweep catalog models|hardware` takes no --force"]),
    ("`llmsweep al MODEL … --curves DIR`", []),  # `al`'s default subcommand, `lookup`
    ("`llmsweep al MODEL … --eval-limit 3`", ["`llmsweep al` takes no --eval-limit"]),
    ("`llmsweep run --require-power/--no-require-power`", []),
    ("`llmsweep discover` without --simulate", []),
    ("`llmsweep report` without --simulate", ["`llmsweep report` takes no --simulate"]),
    ("`render`'s `--job`", []),
    ("`render`'s `--resume`", ["`llmsweep render` takes no --resume"]),
    ("point at the --out of `llmsweep peer crosscheck`", []),
    ("pass --repeats to `llmsweep bench fixed`", ["`llmsweep bench fixed` takes no --repeats"]),
    ("a `bench … --out` folder", []),  # each bench command takes --out
    ("a `bench --out` folder", ["`llmsweep bench` takes no --out"]),  # the group does not
    ("`matrix … --resume`", ["`llmsweep matrix …` takes no --resume"]),
    ("`llmsweep {…} --resume`", []),  # which command is not known
    ("`docker run --gpus all`", []),  # another tool's
    ("compare: --ignore tp would match aggregated and disaggregated points", []),
    ("compare: --resume is not taken", ["`llmsweep compare` takes no --resume"]),
    ("llmsweep results export: --format csv", []),
    ("results list: --served-by measured", ["`llmsweep results list` takes no --served-by"]),
    ("run without requiring power: --no-require-power", []),  # prose before the colon: no command named
    ("a failed compare: --resume", []),  # the form starts the message (or a line of it)
])
def test_the_scan_holds_a_flag_to_the_command_named(text: str, problems: list[str]) -> None:
    """On strings: a flag paired with a command that does not take it is caught, a right pairing passes."""
    assert [n.problem for n in named_flags(text) if n.problem] == problems


def test_the_scan_renders_spellings_from_the_home(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('from llmsweep.option_spellings import flag as _flag\n_RESUME = _flag("resume")\n'
                     'X = f"`llmsweep predict {_RESUME}`, `llmsweep run {_flag(\'out\')} {1}`"\n', encoding="utf-8")
    text = [t for _, t in _rendered(probe) if t.startswith("`")]
    assert text == ["`llmsweep predict --resume`, `llmsweep run --out {…}`"]
    assert [n.problem for n in named_flags(text[0]) if n.problem] == ["`llmsweep predict` takes no --resume"]


def test_the_scan_renders_a_switchs_off_spelling(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('from llmsweep.option_spellings import negation\n'
                     'X = f"`llmsweep predict {negation(\'require_power\')}`, `run {negation(\'require_power\')}`"\n',
                     encoding="utf-8")
    text = [t for _, t in _rendered(probe) if t.startswith("`")]
    assert text == ["`llmsweep predict --no-require-power`, `run --no-require-power`"]
    assert [n.problem for n in named_flags(text[0]) if n.problem] == ["`llmsweep predict` takes no --no-require-power"]


def test_the_tree_walk_is_the_clis() -> None:
    """The scan reads every command the CLI lists (the walk the CLI contract tests use)."""
    assert {path.split()[0] for path, _ in walk(cli) if path} == TOP_LEVEL
