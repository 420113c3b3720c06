"""Findings: what a schema check or policy rule says about a recipe, in a form people and programs can act on.

A finding always says where (file, line, field path), what is wrong (message), and what to do (fix). Schema errors
from the recipe loader and policy rules produce the same type, so `llmsweep validate` prints one list.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


def visible_text(text: str) -> str:
    """`text` with every non-printable character escaped as Python would (`\\n`, `\\r`, `\\x1b`): the one way text
    from outside (a recipe value, a node's log line) is shown on a terminal or put after `# ` in a script, where a
    control character could move the cursor, clear a line or start a line that reads as something else."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


JOBS_SHOWN = 3
"""Job ids `render` names before counting the rest (`validate --json` keeps them all)."""


class Finding(BaseModel):
    """One thing a rule found. Serialises to the `validate --json` object shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str = Field(description="Rule id, e.g. 'schema.unknown-key' or 'golden-al.precision-provenance'.")
    severity: Severity
    file: str | None = Field(default=None, description="Recipe file the finding points at.")
    line: int | None = Field(default=None, description="1-based line in that file.")
    path: str | None = Field(default=None, description="Field path inside the file, e.g. 'my-key.serve.env'.")
    jobs: tuple[str, ...] = Field(default=(), description="Ids of the jobs concerned, when the finding is about jobs "
                                  "(empty: it is about the recipe or file).")
    message: str
    fix: str | None = None
    evidence: str | None = Field(default=None, description="Where the rule's knowledge comes from (PR, issue, doc).")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def location(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        return where

    def render(self) -> str:
        """Human one-paragraph form: `file:line: severity [rule] path: message` plus fix and evidence lines. A
        control character a recipe put in a key or a value is shown escaped: it cannot move the cursor, clear the
        line or start a line that reads as another finding."""
        head = f"{self.location()}: {self.severity.value} [{self.rule}]"
        if self.path:
            head += f" {visible_text(self.path)}"
        text = f"{head}: {visible_text(self.message)}"
        if self.jobs:
            text += f"\n  job: {', '.join(self.jobs[:JOBS_SHOWN])}"
            if len(self.jobs) > JOBS_SHOWN:
                text += f" (+{len(self.jobs) - JOBS_SHOWN} more)"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        if self.evidence:
            text += f"\n  evidence: {self.evidence}"
        return text

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def has_errors(findings: list[Finding]) -> bool:
    return any(f.is_error for f in findings)
