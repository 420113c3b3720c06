"""Plan-level checks that need the expanded jobs, reported as findings (not errors: the plan is still valid)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.spec.recipe import Recipe


def unused_overrides(recipes: Mapping[str, Recipe], jobs: Sequence[Job]) -> list[Finding]:
    """Warn about `serve.overrides` entries that matched no job of their recipe (a typo'd `when` value, a dead arm).

    Only meaningful for an unfiltered expansion: filters legitimately drop the arms an override targets.
    """
    applied: dict[str, set[int]] = {}
    for job in jobs:
        if job.serve is not None:
            applied.setdefault(job.recipe_key, set()).update(job.serve.applied_overrides)
    findings: list[Finding] = []
    for key, recipe in recipes.items():
        if recipe.serve is None or key not in applied:
            continue
        for index, override in enumerate(recipe.serve.overrides):
            if index in applied[key]:
                continue
            path = ("serve", "overrides", index, "when")
            findings.append(Finding(
                rule="plan.override-unused", severity=Severity.WARNING, file=recipe.file,
                line=recipe.line_of(path), path=recipe.path_of(path),
                message=f"override {index} (`when: {override.when}`) matches no job of `{key}`",
                fix="check the `when` values against the search-space entries, or delete the override",
            ))
    return findings
