"""A policy rule that raises fails the validation closed: its `policy.internal` finding is an error (exit 2) naming
the rule and calling it an llmsweep bug, with the traceback logged. As a warning, a recipe an error-class rule would
refuse validated with exit 0 whenever that rule crashed."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmsweep.findings import Finding, Severity
from llmsweep.policy import registry, validate_files
from llmsweep.policy.context import Context

SEED = Path(__file__).resolve().parents[3] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident.yaml"


def _boom(ctx: Context) -> Iterator[Finding]:
    raise KeyError("no-such-key")


def test_a_crashing_rule_is_an_error_naming_the_rule(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    assert validate_files([SEED]).ok  # the recipe is clean when every rule runs
    registry.all_rules()  # load the rule modules
    crashed = registry.get_rule("engine.known-incompatibility")
    monkeypatch.setitem(registry._RULES, crashed.id, dataclasses.replace(crashed, check=_boom))
    with caplog.at_level(logging.ERROR, logger="llmsweep.policy"):
        result = validate_files([SEED])
    assert not result.ok  # `validate` exits 2
    internal = [f for f in result.findings if f.rule == "policy.internal"]
    assert len(internal) == 1 and internal[0].severity is Severity.ERROR
    assert "engine.known-incompatibility" in internal[0].message and "llmsweep bug" in internal[0].message
    assert "KeyError" in internal[0].message and "report this as an llmsweep bug" in (internal[0].fix or "")
    logged = [r for r in caplog.records
              if r.levelno >= logging.ERROR and "engine.known-incompatibility" in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log


def test_a_catalog_folder_that_does_not_exist_is_the_users_to_fix_said_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`LLMSWEEP_CATALOG_DIR` naming a folder that is not there: the rules that read the catalog stop with the
    catalog's own error, and validation says it once, as the user's input with its fix, naming the rules it stopped —
    it said seven times `rule … could not run (ConfigError: …): an llmsweep bug`, fix "report this as an llmsweep
    bug". Still an error: those rules checked nothing."""
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path / "missing"))
    from llmsweep.catalog.sources import clear_caches

    clear_caches()
    try:
        result = validate_files([SEED])
    finally:
        monkeypatch.delenv("LLMSWEEP_CATALOG_DIR")
        clear_caches()
    assert not result.ok
    assert not [f.render() for f in result.findings if f.rule == "policy.internal"]
    (said,) = [f for f in result.findings if f.rule == "policy.input"]
    assert said.severity is Severity.ERROR and str(tmp_path / "missing") in said.message
    assert "input.unknown-model" in said.message and "llmsweep bug" not in said.message
    assert said.fix and "LLMSWEEP_CATALOG_DIR" in said.fix
