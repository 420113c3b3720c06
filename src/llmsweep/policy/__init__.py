"""Policy and contract rules: what must hold before any GPU hour is spent, each rule with an id, fix and evidence.

Public API:
    check(load_result_or_recipes, jobs, *, simulate=False, fleet=None) -> list[Finding]
        every policy rule over recipes and their planned jobs; given a LoadResult, its schema findings come first
    validate_files(paths, *, config_keys=None, runner_config=None, simulate=False) -> Validation
        load → plan → check in one call (what `validate`, `render` and `run` share)
    all_rules() -> list[Rule]      schema, plan and policy rules (what `llmsweep rules` prints)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from llmsweep.catalog.fleet import FleetCatalog, default_fleet
from llmsweep.errors import ConfigError
from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.policy.context import Context
from llmsweep.policy.planning import Validation, plan_recipes, validate_files
from llmsweep.policy.registry import Rule, all_rules, get_rule, policy_rules
from llmsweep.spec import LoadResult
from llmsweep.spec.recipe import Recipe
from llmsweep.words import noun

log = logging.getLogger(__name__)


def check(
    source: LoadResult | Mapping[str, Recipe],
    jobs: Sequence[Job],
    *,
    simulate: bool = False,
    fleet: FleetCatalog | None = None,
) -> list[Finding]:
    """Run every policy rule; findings that differ only in the job are merged into one naming every job
    (`job` is the comma-separated list of ids, so a runner can refuse exactly the jobs concerned)."""
    recipes = source.recipes if isinstance(source, LoadResult) else dict(source)
    ctx = Context(recipes, list(jobs), simulate, fleet or default_fleet())
    found: list[Finding] = []
    unreadable: dict[tuple[str, str | None], list[str]] = {}
    for r in policy_rules():
        assert r.check is not None
        try:
            found.extend(r.check(ctx))
        except ConfigError as exc:  # an input the rule reads is bad (a catalog folder missing): the user's to fix
            found.extend(exc.findings)
            unreadable.setdefault((exc.message, exc.fix), []).append(r.id)
        except Exception as exc:  # a rule bug must not hide every other finding
            # Fail closed: the rule did not check the recipes, so what it would refuse is not known to be absent; a
            # warning let a recipe an error-class rule refuses validate with exit 0. The traceback goes to the log.
            log.error("policy rule %s crashed (an llmsweep bug)", r.id, exc_info=True)
            found.append(Finding(rule="policy.internal", severity=Severity.ERROR,
                                 message=f"rule {r.id} could not run ({type(exc).__name__}: {exc}): an llmsweep bug, "
                                         "so what it checks is unchecked and the recipes are not passed",
                                 fix=f"report this as an llmsweep bug, naming rule {r.id} and attaching the recipe "
                                     "and the traceback logged above"))
    for (message, fix), rules in unreadable.items():  # once, naming every rule it stopped
        found.append(Finding(rule="policy.input", severity=Severity.ERROR,
                             message=f"{message}: {noun(len(rules), 'rule')} {', '.join(rules)} could not check the "
                                     "recipes, so they are not passed", fix=fix))
    merged = _merge(found)
    return [*source.findings, *merged] if isinstance(source, LoadResult) else merged


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (rule, place, message), naming every job it concerns."""
    groups: dict[tuple[object, ...], dict[str, None]] = {}
    first: dict[tuple[object, ...], Finding] = {}
    for f in findings:
        key = (f.rule, f.severity, f.file, f.line, f.path, f.message, f.fix, f.evidence)
        first.setdefault(key, f)
        groups.setdefault(key, {}).update(dict.fromkeys(f.jobs))
    out = [f.model_copy(update={"jobs": tuple(groups[k])}) for k, f in first.items()]
    return sorted(out, key=lambda f: (f.file or "", f.line or 0, f.rule))


__all__ = ["Rule", "Validation", "all_rules", "check", "get_rule", "plan_recipes", "validate_files"]
