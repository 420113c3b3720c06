"""The one exception hierarchy of llmsweep.

Every error a user can cause derives from :class:`LlmsweepError`. Messages name the operation, the offending input
(file:line where there is one) and the fix; the CLI prints them once, without a traceback, and maps the class to an
exit code (bad input 2, failed run or gate 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


class ConfigError(LlmsweepError):
    """A recipe, runner file or other input is malformed; carries the findings that say where and why."""

    def __init__(self, message: str, *, fix: str | None = None, findings: list[Finding] | None = None) -> None:
        super().__init__(message, fix=fix)
        self.findings = list(findings or [])


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
