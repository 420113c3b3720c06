"""Dependencies point down the data flow (CONTRIBUTING, house rules): the CLI sits on top, so no other room imports
it. A room that needs what a command parses reads it from the parser's own home below the CLI — the simulated
engine's `sim serve` options are `llmsweep.sim.serve_args`, which `execute.virtual` reads a launch with; a CLI option's
spelling is `llmsweep.option_spellings` — never `llmsweep.cli`. Checked over every import statement of every module,
those inside functions too (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import llmsweep

SRC = Path(llmsweep.__file__).resolve().parent

ENTRY_POINTS = {"__main__.py"}
"""`python -m llmsweep` starts the CLI: the one module outside it that may import it."""

BELOW_EVERY_ROOM = ("option_kit.py", "option_spellings.py")
"""Modules every room may import, which therefore import no room of llmsweep."""


def _imported(text: str, where: Path) -> list[tuple[int, str]]:
    """(line, module) of every module the source `text` of the file `where` (relative to the package) imports,
    relative imports resolved against its package; `from llmsweep import cli` imports `llmsweep.cli`."""
    package = ["llmsweep", *where.parent.parts]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[:len(package) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _imports_of(path: Path) -> list[tuple[int, str]]:
    return _imported(path.read_text(encoding="utf-8"), path.relative_to(SRC))


def _in_cli(module: str) -> bool:
    return module == "llmsweep.cli" or module.startswith("llmsweep.cli.")


def _outside_the_cli() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py")
                  if p.relative_to(SRC).parts[0] != "cli" and str(p.relative_to(SRC)) not in ENTRY_POINTS)


def test_the_walk_sees_the_rooms_below_the_cli() -> None:
    seen = {str(p.relative_to(SRC)) for p in _outside_the_cli()}
    assert {"execute/virtual.py", "sim/serve_args.py", "engines/sim.py", "report/html.py"} <= seen
    assert not any(s.startswith("cli/") for s in seen)


def test_no_room_below_the_cli_imports_it() -> None:
    upward = [f"{p.relative_to(SRC)}:{line} imports {module}"
              for p in _outside_the_cli() for line, module in _imports_of(p) if _in_cli(module)]
    assert not upward, ("a room below the CLI imports it (move what it needs below the CLI, as "
                        f"`sim.serve_args` holds `sim serve`'s options): {upward}")


def test_the_check_sees_a_lazy_and_a_relative_import_of_the_cli() -> None:
    """The check itself: an import inside a function, a relative one and one of the package's attribute are seen."""
    text = "def f():\n    from llmsweep.cli.sim import serve\n\nfrom ..cli import options\nfrom llmsweep import cli\n"
    found = {m for _, m in _imported(text, Path("execute") / "probe.py") if _in_cli(m)}
    assert {"llmsweep.cli.sim", "llmsweep.cli.options", "llmsweep.cli"} <= found
    assert not [m for _, m in _imported("from llmsweep import client\n", Path("x.py")) if _in_cli(m)]


@pytest.mark.parametrize("module", BELOW_EVERY_ROOM)
def test_a_module_below_every_room_imports_no_room(module: str) -> None:
    rooms = [f"{module}:{line} imports {m}" for line, m in _imports_of(SRC / module)
             if m == "llmsweep" or m.startswith("llmsweep.")]
    assert not rooms, rooms


def test_the_simulators_command_line_sits_below_the_rooms_that_read_it() -> None:
    """`execute.virtual` reads a launch, and `engines.sim` renders one, with `sim.serve_args`: it imports neither
    room (the typical acceptance `sim serve` realises is the simulator's own, `sim.config.typical_acceptance`)."""
    above = [f"sim/serve_args.py:{line} imports {m}" for line, m in _imports_of(SRC / "sim" / "serve_args.py")
             if m.split(".")[:2] in (["llmsweep", "execute"], ["llmsweep", "engines"], ["llmsweep", "cli"])]
    assert not above, above


SIMULATOR_ABOVE = ("execute", "plan")
"""Rooms the simulator (`llmsweep.sim`) sits below: the executors run it (`execute.virtual`, `execute.predict_pool`)
and the planner's jobs are rendered into its launch (`engines.sim`); what the simulator reads of a run's folder is
named below both (`job_files`, `client.files`), and a planned job reaches it as the caller reads it (`sim calibrate`'s
`config_for`, the CLI's)."""

SIMULATOR_KNOWN_UPWARD = {("sim/predict.py", "llmsweep.plan.point")}
"""Imports of a room above the simulator it still makes, each a debt to pay, not a rule: `predict_point` takes the
plan's `Point` (a type-only import). The check fails when one is paid, so the list only shrinks."""


def _simulator_upward() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for p in sorted((SRC / "sim").rglob("*.py")):
        for _, module in _imports_of(p):
            parts = module.split(".")
            if parts[0] == "llmsweep" and len(parts) > 1 and parts[1] in SIMULATOR_ABOVE:
                found.add((str(p.relative_to(SRC)), module))
    return found


def test_the_simulator_imports_neither_the_executors_nor_the_planner() -> None:
    """`sim calibrate` read a job folder's file names from `execute.files` and validated job.json with the plan's
    `Job`: the simulator room reached up into the rooms that run and plan it (CONTRIBUTING, dependencies point
    down). Checked over every import of `llmsweep/sim`, lazy and type-only ones included."""
    upward = _simulator_upward()
    new = sorted(f"{where} imports {module}" for where, module in upward
                 if not any(where == w and (module == m or module.startswith(m + ".")) for w, m in
                            SIMULATOR_KNOWN_UPWARD))
    assert not new, ("the simulator imports a room above it (move what it needs below both, or pass it in from the "
                     f"caller): {new}")
    paid = sorted(f"{w} {m}" for w, m in SIMULATOR_KNOWN_UPWARD
                  if not any(where == w and (module == m or module.startswith(m + ".")) for where, module in upward))
    assert not paid, f"no longer imported: drop from SIMULATOR_KNOWN_UPWARD: {paid}"


def test_the_simulator_check_sees_an_import_of_the_executors_and_the_planner() -> None:
    text = ("from llmsweep.execute.files import JOB_FILE\n\ndef f():\n    from llmsweep.plan.job import Job\n"
            "from ..execute import artifacts\n")
    found = {m for _, m in _imported(text, Path("sim") / "calibrate.py")}
    assert {"llmsweep.execute.files", "llmsweep.plan.job", "llmsweep.execute.artifacts"} <= found
