"""What a module loads decides what every process that imports it pays (the suite starts hundreds of llmsweep
processes; a run in virtual time sends no request): the readers of results and the virtual-time path load neither the
client's HTTP stack (aiohttp and its SSL contexts, the runner) nor, for the readers, the engine adapters. Checked in a
fresh interpreter, by the modules loaded (not by timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY_HTTP = ("aiohttp", "llmsweep.client.runner", "llmsweep.client.transport")
ENGINES = ("llmsweep.engines",)


@pytest.mark.parametrize(("module", "absent"), [
    ("llmsweep.results.rundir", HEAVY_HTTP + ENGINES),
    ("llmsweep.results.store", HEAVY_HTTP + ENGINES),
    ("llmsweep.report.data", HEAVY_HTTP + ENGINES),
    ("llmsweep.cli.results", HEAVY_HTTP + ENGINES),
    ("llmsweep.client.folder", HEAVY_HTTP + ENGINES),
    ("llmsweep.client.files", HEAVY_HTTP + ENGINES),
    ("llmsweep.job_files", HEAVY_HTTP + ENGINES),
    ("llmsweep.execute.virtual", HEAVY_HTTP),
    ("llmsweep.execute.pipeline", HEAVY_HTTP),
    ("llmsweep.sim.predict", HEAVY_HTTP),
])
def test_a_module_loads_nothing_it_does_not_use(module: str, absent: tuple[str, ...]) -> None:
    code = f"import sys, {module}; print(' '.join(m for m in {absent!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "", f"importing {module} loads {run.stdout.strip()}"


def test_the_lazy_client_names_are_the_ones_it_declares_for_type_checkers() -> None:
    """`llmsweep.client` names each lazy name twice (for type checkers, and where `__getattr__` loads it from): the two
    lists agree, and every name loads from the module it is declared in."""
    import ast
    import importlib

    import llmsweep.client as client

    tree = ast.parse(Path(client.__file__).read_text())
    declared = {alias.asname or alias.name: node.module
                for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("llmsweep.client.") for alias in node.names}
    homes = client._HOME
    assert declared == {name: f"llmsweep.client.{home}" for name, home in homes.items()}
    for name, home in homes.items():
        assert getattr(client, name) is getattr(importlib.import_module(f"llmsweep.client.{home}"), name)
