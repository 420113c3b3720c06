"""The rule registry: every rule llmsweep applies, with its id, severity, title, fix and evidence.

Policy rules are small functions registered with :func:`rule`; schema rules of the recipe loader are listed here
too (they run in `llmsweep.spec`), so `llmsweep rules` shows one catalogue and `validate` one list of findings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from llmsweep.findings import Finding, Severity

if TYPE_CHECKING:
    from llmsweep.policy.context import Context

Stage = Literal["schema", "plan", "policy", "changelog"]
"""Where a rule runs: the recipe loader, planning, the policy rules, or `llmsweep changelog` on its own file."""
RuleFn = Callable[["Context"], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """One rule. `softens_in_sim`: image/version/incompatibility rules become warnings when the simulator runs."""

    id: str
    severity: Severity
    title: str
    fix: str
    evidence: str | None = None
    stage: Stage = "policy"
    softens_in_sim: bool = False
    check: RuleFn | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, str | None]:
        return {"id": self.id, "severity": self.severity.value, "stage": self.stage, "title": self.title,
                "fix": self.fix, "evidence": self.evidence}


_RULES: dict[str, Rule] = {}


def register(rule_: Rule) -> Rule:
    if rule_.id in _RULES:
        raise ValueError(f"rule {rule_.id} registered twice")
    _RULES[rule_.id] = rule_
    return rule_


def rule(
    id: str,
    severity: Severity,
    title: str,
    fix: str,
    evidence: str | None = None,
    *,
    softens_in_sim: bool = False,
) -> Callable[[RuleFn], RuleFn]:
    """Register a policy rule function `fn(ctx) -> findings`."""

    def deco(fn: RuleFn) -> RuleFn:
        register(Rule(id, severity, title, fix, evidence, "policy", softens_in_sim, fn))
        return fn

    return deco


def get_rule(rule_id: str) -> Rule:
    return _RULES[rule_id]


def all_rules() -> list[Rule]:
    """Every rule, schema rules first, then plan, policy and changelog rules, each in registration order."""
    _load_rule_modules()
    order = {"schema": 0, "plan": 1, "policy": 2, "changelog": 3}
    return sorted(_RULES.values(), key=lambda r: order[r.stage])


def policy_rules() -> Iterator[Rule]:
    _load_rule_modules()
    return (r for r in _RULES.values() if r.check is not None)


def _load_rule_modules() -> None:
    # Importing registers; the modules are listed once, here.
    from llmsweep.policy import (  # noqa: F401
        rules_agentx,
        rules_consumed,
        rules_engine,
        rules_golden,
        rules_grid,
        rules_input,
        rules_resources,
        schema_rules,
    )
