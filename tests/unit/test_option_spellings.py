"""A fix that names one of the CLI's options spells it as the CLI does: it reads the spelling from its one home,
`llmsweep.option_spellings`, never a copy written by hand (which a renamed option would leave behind, telling the
user to type a flag the CLI no longer takes)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import llmsweep
from llmsweep.option_spellings import SPELLINGS

SRC = Path(llmsweep.__file__).resolve().parent

READ_FROM_THE_HOME = {
    "changes/github.py": set(),
    "changes/reuse.py": set(),
    "engines/sim.py": set(),  # `sim serve`'s and `sim router`'s shared options: `sim.serve_flags`, `option_spellings`
    "execute/docker.py": {"--gpus", "--format"},  # `docker run --gpus`, `docker inspect --format`: docker's own
    "execute/executor.py": set(),
    "execute/lifecycle.py": {"--format"},  # `nvidia-smi --format=csv`
    "execute/local.py": set(),
    "execute/pipeline.py": set(),
    "execute/placement.py": set(),
    "execute/preflight.py": {"--format"},  # `nvidia-smi --format=csv`
    "execute/roles.py": {"--gpus", "--url"},  # `python -m llmsweep.execute.node_power`'s own argparse flags
    "execute/slurm.py": set(),
    "sim/serve_args.py": set(),
    "sim/serve_flags.py": set(),
    **{f"report/{p.name}": set() for p in (SRC / "report").glob("*.py")},
    **{f"results/{p.name}": set() for p in (SRC / "results").glob("*.py")},
}
"""The modules whose fixes and command lines name the CLI's options only through `option_spellings` (with the
spellings of other tools' flags that match one of ours). An option one command takes alone (`matrix --format`) has no
spelling there: `test_a_fix_names_only_options_llmsweep_takes` holds those to the CLI's options."""

_SPELLING = re.compile(r"(?<![\w-])(" + "|".join(re.escape(s) for s in sorted(SPELLINGS.values(), key=len,
                                                                                   reverse=True)) + r")(?![\w-])")


def _hand_written(path: Path) -> list[tuple[int, str]]:
    """The CLI option spellings the module's string literals write (docstrings, which explain, aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, m[1]) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            for m in _SPELLING.finditer(node.value)]


@pytest.mark.parametrize("module", sorted(READ_FROM_THE_HOME))
def test_a_module_that_reads_its_spellings_from_the_home_writes_none_by_hand(module: str) -> None:
    found = [(line, s) for line, s in _hand_written(SRC / module) if s not in READ_FROM_THE_HOME[module]]
    assert not found, f"{module} spells CLI options by hand (line, spelling): {found}; use option_spellings.flag"


def test_the_fixes_name_the_option_as_the_cli_spells_it() -> None:
    """Each fix is written with a concept's spelling changed in the home (in a fresh process, before any room is
    imported): the fix follows it, and no longer names the old spelling anywhere."""
    code = r"""
import json
from pathlib import Path
import llmsweep.option_spellings as o
o.SPELLINGS.update({"executor_option": "--xo", "out": "--xout", "changed": "--xchanged", "repeats": "--xrepeats",
                   "executor": "--xexecutor", "store": "--xstore"})
from llmsweep.errors import ConfigError
from llmsweep.execute import slurm
from llmsweep.execute.docker import DockerOptions
from llmsweep.execute.executor import validate_options
from llmsweep.changes.github import repo_path

texts = {}
try:
    validate_options("docker", DockerOptions, {"model_dri": "/m"})
except ConfigError as exc:
    texts["validate_options"] = exc.fix
texts["slurm time limit"] = slurm.TimeLimit("1:00:00", 3600, "time_limit").fix
texts["slurm refusals"] = " ".join(fix for _, fix in slurm._REFUSED_FIXES)
texts["slurm never starts"] = " ".join(fix for _, fix in slurm._NEVER_STARTS.values())
texts["slurm ended"] = " ".join(fix for _, fix in slurm._ENDED_BY_SLURM.values())
texts["slurm worker"] = " ".join(slurm.DEFAULT_WORKER_COMMAND)
try:
    repo_path(Path("/elsewhere/r.yaml"), Path("/repo"), "recipe")
except ConfigError as exc:
    texts["ci github"] = exc.fix
from llmsweep.execute.placement import simulator_placement_refusal
from llmsweep.results.store import _STORE_FIX
texts["placement"] = simulator_placement_refusal(engine="sim", simulate=True, executor="docker", live=False).line()
texts["store"] = _STORE_FIX
print(json.dumps(texts))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    texts = json.loads(run.stdout)
    assert set(texts) == {"validate_options", "slurm time limit", "slurm refusals", "slurm never starts",
                          "slurm ended", "slurm worker", "ci github", "placement", "store"}
    for what, text in texts.items():
        assert not {"--executor-option", "--out", "--changed", "--repeats", "--executor", "--store"} \
            & set(_SPELLING.findall(text)), (what, text)
    assert "--xo model_dir=" in texts["validate_options"]
    assert texts["slurm time limit"] == "raise --xo time_limit=HH:MM:SS"
    assert "--xo partition=NAME" in texts["slurm refusals"] and "--xo partition=NAME" in texts["slurm never starts"]
    assert "(--xo {exclude}; {why})" in texts["slurm ended"]  # still a template, formatted when a node fails
    assert " --xout {out}" in texts["slurm worker"]
    assert "--xout <that repository>" in texts["ci github"]
    assert "--xexecutor docker would place no server" in texts["placement"] and "drop --xexecutor" in texts["placement"]
    assert texts["store"].startswith("point --xstore (or $")


def test_the_spellings_the_fixes_read_are_the_clis() -> None:
    """The home's spelling is the one `llmsweep run` and `ci github` take (the table the fixes read is the CLI's)."""
    import click

    from llmsweep.cli.main import cli

    ctx = click.Context(cli)
    run = cli.get_command(ctx, "run")
    ci = cli.get_command(ctx, "ci")
    assert run is not None and isinstance(ci, click.Group)
    github = ci.get_command(ctx, "github")
    assert github is not None
    run_opts = {o for p in run.params for o in p.opts}
    assert {SPELLINGS[c] for c in ("executor_option", "out", "changed", "repeats")} <= run_opts
    assert SPELLINGS["out"] in {o for p in github.params for o in p.opts}


FIX_ROOMS = ("changes/reuse.py", "execute/lifecycle.py", "execute/pipeline.py", "execute/placement.py",
             "execute/roles.py", "report", "results")
"""Rooms below the CLI whose messages tell the user which llmsweep option to pass."""

OTHER_TOOLS = {
    "execute/lifecycle.py": {"--query-gpu", "--format"},  # nvidia-smi's
    # `python -m llmsweep.execute.node_power`'s own argparse flags; srun's --nodes and --nodelist
    "execute/roles.py": {"--dir", "--backend", "--gpus", "--url", "--role", "--nodes", "--nodelist"},
    "results/compare.py": {"--power-cap"},  # `amd-smi set --power-cap`, where compare says how to set A's limit
}
"""Flags those messages and command lines name that are another program's, by module."""

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9](?![\w-])")


def _cli_options() -> set[str]:
    """Every spelling some llmsweep command takes, old spellings included."""
    import click

    from llmsweep.cli.main import cli

    def walk(command: click.Command) -> list[click.Command]:
        if not isinstance(command, click.Group):
            return [command]
        ctx = click.Context(command)
        subs = [command.get_command(ctx, name) for name in command.list_commands(ctx)]
        return [command, *(c for sub in subs if sub is not None for c in walk(sub))]

    return {o for command in walk(cli) for p in command.params if isinstance(p, click.Option)
            for o in (*p.opts, *p.secondary_opts, *getattr(p, "old_spellings", ()))}


def _named_flags(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, flag) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            for flag in _FLAG.findall(node.value)]


def test_a_fix_names_only_options_llmsweep_takes() -> None:
    """A message that tells the user to pass `--x` names an option some llmsweep command takes: an option renamed
    in the CLI (and not kept as an old spelling) cannot leave a stale hint behind, whether the message reads its
    spelling from `option_spellings` or names an option only one command takes (`matrix --format`)."""
    taken = _cli_options()
    assert {"--resume", "--reuse", "--live", "--out", "--force"} <= taken  # the walk sees the commands
    files = sorted(p for room in FIX_ROOMS for p in ((SRC / room).rglob("*.py") if (SRC / room).is_dir()
                                                      else [SRC / room]))
    stale = [f"{p.relative_to(SRC)}:{line} {flag}" for p in files for line, flag in _named_flags(p)
             if flag not in taken and flag not in OTHER_TOOLS.get(str(p.relative_to(SRC)), set())]
    assert not stale, f"messages name options no llmsweep command takes: {stale}"


def test_the_check_sees_a_stale_option(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Docs may say --anything."""\nFIX = f"pass --no-such-option {1}, or --out DIR"\n',
                     encoding="utf-8")
    assert [flag for _, flag in _named_flags(probe)] == ["--no-such-option", "--out"]
    assert "--no-such-option" not in _cli_options()


def test_the_job_id_and_compare_fixes_follow_the_home() -> None:
    """`--config-files`, `--format` and `--repeats-from` are concepts of the home too (two commands take `--format`
    and `--config-files`; several fixes name each): with the spellings changed there, the fixes say the new ones."""
    code = r"""
import json
import llmsweep.option_spellings as o
o.SPELLINGS.update({"config_files": "--xconfig-files", "format": "--xformat", "repeats_from": "--xrepeats-from"})
from llmsweep.errors import ConfigError
from llmsweep.plan.select import select_job
from llmsweep.results import compare
try:
    select_job([], "no-such-job")
except ConfigError as exc:
    print(json.dumps({"select": exc.fix, "compare": compare._REPEATS_FROM}))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    texts = json.loads(run.stdout)
    assert "`llmsweep matrix full-sweep --xconfig-files FILE --xformat ids`" in texts["select"]
    assert texts["compare"] == "--xrepeats-from"


def test_the_power_switch_and_backend_follow_the_home() -> None:
    """`--require-power` is one spelling in the home, from which the CLI declares the pair `--x/--no-x` (the off
    spelling derived, never written again), and `--power-backend` a concept the power fixes and the run's messages
    read: with both changed there, `run` takes the new spellings and every message says them."""
    code = r"""
import json
import llmsweep.option_spellings as o
o.SPELLINGS.update({"require_power": "--xrequire-power", "power_backend": "--xpower-backend"})
import click
from llmsweep.changes.reuse import KEY_PARTS
from llmsweep.cli.main import cli
from llmsweep.execute import pipeline
from llmsweep.power import sampler, samples, virtual
run = cli.get_command(click.Context(cli), "run")
params = {p.name: p for p in run.params}
parsed = {}
for args in ([], ["--xrequire-power"], ["--no-xrequire-power", "--xpower-backend", "off"]):
    ctx = run.make_context("run", ["r.yaml", *args], resilient_parsing=True)
    parsed[" ".join(args)] = [ctx.params["require_power"], ctx.params["power_backend"]]
print(json.dumps({
    "require_power": [params["require_power"].opts, params["require_power"].secondary_opts],
    "power_backend": params["power_backend"].opts, "parsed": parsed,
    "gates": KEY_PARTS["gates"], "evals": pipeline._power_not_required_of_evals(2),
    "said": pipeline._options_said("power_backend", "off"), "help": samples.REQUIRE_POWER_HELP,
    "off": sampler.OFF_REASON, "off fix": sampler._none_can(sampler.PowerSettings(backend="off"), (), ()).fix,
    "other fix": sampler._none_can(sampler.PowerSettings(backend="nvml"), ("nvml",), ("nvml: none",)).fix,
    "not required": sampler.NOT_REQUIRED_FIX, "not modelled": virtual.NOT_MODELLED_FIX,
}))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    texts = json.loads(run.stdout)
    assert texts.pop("require_power") == [["--xrequire-power"], ["--no-xrequire-power"]]
    assert texts.pop("power_backend") == ["--xpower-backend"]
    assert texts.pop("parsed") == {"": [None, "auto"], "--xrequire-power": [True, "auto"],
                                   "--no-xrequire-power --xpower-backend off": [False, "off"]}
    assert "(`run --xrequire-power`, `run --al-tolerance`, `run --request-timeout`)" in texts["gates"]
    assert "though asked (--xrequire-power or the recipe's `require-power`)" in texts["evals"]
    assert texts["said"] == "--xpower-backend off"
    assert "`llmsweep run --xrequire-power/--no-xrequire-power`" in texts["help"]
    assert texts["off"] == "power sampling is off (--xpower-backend off)"
    assert texts["off fix"].startswith("--xpower-backend auto")
    assert "choose another backend: --xpower-backend " in texts["other fix"]
    assert "--no-xrequire-power" in texts["not required"] and "--no-xrequire-power" in texts["not modelled"]
    for what, text in texts.items():
        assert not re.search(r"(?<![\w-])--(no-)?(require-power|power-backend)(?![\w-])", text), (what, text)
