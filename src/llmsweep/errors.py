"""The one exception hierarchy of llmsweep.

Every error a user can cause derives from :class:`LlmsweepError`. Messages name the operation, the offending input
(file:line where there is one) and the fix; the CLI prints them once, without a traceback, and maps the class to an
exit code (bad input 2, failed run or gate 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from llmsweep.findings import Finding


class LlmsweepError(Exception):
    """Root of every error llmsweep raises on purpose."""

    exit_code: int = 2

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.fix}" if self.fix else self.message

    def one_line(self) -> str:
        """The message and its fix on one line, as a refusal's reason says them."""
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message

    def as_findings(self, rule: str) -> list[Finding]:
        """The error as `validate` lists it: one error finding under `rule` with its message and fix (a ConfigError
        gives the findings it carries, a CatalogError its own, with its file, line and field)."""
        from llmsweep.findings import Finding, Severity

        return [Finding(rule=rule, severity=Severity.ERROR, message=self.message, fix=self.fix)]


class ConfigError(LlmsweepError):
    """A recipe, runner file or other input is malformed; carries the findings that say where and why."""

    def __init__(self, message: str, *, fix: str | None = None, findings: list[Finding] | None = None) -> None:
        super().__init__(message, fix=fix)
        self.findings = list(findings or [])

    def as_findings(self, rule: str) -> list[Finding]:
        return list(self.findings) or super().as_findings(rule)


class CatalogError(ConfigError):
    """A catalog file (packaged, or the user's under `$LLMSWEEP_CATALOG_DIR`) that does not read: its message is
    `file:line: problem`, and `as_findings` gives the finding `validate` lists — rule `catalog.file`, the file, the
    line and the field (`power.mi300x.idle_w`) where known. (It carries no `findings`: a policy rule that reads a bad
    catalog says so once, as `policy.input`.)"""

    RULE = "catalog.file"

    def __init__(self, problem: str, *, file: Path, line: int | None = None, column: int | None = None,
                 field: str | None = None, fix: str | None = None) -> None:
        from llmsweep.findings import Finding, Severity

        where = f"{file}{f':{line}' if line else ''}{f':{column}' if line and column else ''}"
        super().__init__(f"{where}: {problem}", fix=fix)
        self.finding = Finding(rule=self.RULE, severity=Severity.ERROR, file=str(file), line=line, path=field,
                               message=problem, fix=fix)

    def as_findings(self, rule: str) -> list[Finding]:
        return [self.finding]


class ContractError(LlmsweepError):
    """A job asks an engine or image for something it cannot do (version gate, known incompatibility)."""


class LaunchError(LlmsweepError):
    """A server could not be started, became unready, or died."""

    exit_code = 1


class EndpointError(LlmsweepError):
    """An endpoint could not be reached or spoke something other than the expected protocol."""

    exit_code = 1


class DatasetError(LlmsweepError):
    """A trace corpus or prompt source could not be read or does not have the expected shape."""


class ResultError(LlmsweepError):
    """A result could not be computed, stored or read back, or failed a validity gate."""

    exit_code = 1


class ResultInputError(ResultError):
    """What the command line names is not there or not what it was named as (a run id, a result id, a folder that is
    not a run, a file that is not an export), or a file of it does not read (a run's run.json, a job's job.json or
    summary.json cut short or hand-edited): bad input, exit 2, not a failed result."""

    exit_code = 2


def undecodable_line(exc: UnicodeDecodeError) -> int | None:
    """The line (1-based) of the first byte a UTF-8 decode refused, for an error that names file:line; None when the
    error does not hold the bytes it decoded."""
    raw = exc.object
    return raw[:exc.start].count(b"\n") + 1 if isinstance(raw, (bytes, bytearray)) else None
