"""The engine version a server ran, against the one its recipe declared: a result is labelled with the version that
ran, never with one it did not earn.

A launch is rendered and policy-checked at the version the recipe declares (its image tag's, else
`serve.engine.version`): feature gates (`engine.feature-gate`) are judged there. Where the server then says it is
another version (its `/version`), or the interpreter that ran it has another one installed (the local executor
serving the host's engine, which no image pins), the run says so, labels the result with the version that ran
(`provenance.launch.engine_version`, the declared one kept as `engine_version_declared`), and judges the launch's
gated knobs again at that version: a knob the running version ignores or rejects fails the group's jobs (the row
would measure a launch without it under its name); otherwise the jobs run, each result warned with which gates were
judged on the declared version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmsweep.catalog.engines import GateVerdict
from llmsweep.catalog.version import same_version
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ContractError
from llmsweep.plan import Job
from llmsweep.sim_warnings import ENGINE_VERSION_OPENING

FIX = ("state the engine version that runs (`serve.engine.version`, or an image whose tag names it), or serve with "
       "the engine the recipe declares (the local executor runs the python3 first on PATH)")


@dataclass(frozen=True)
class EngineVersionDrift:
    """A server that ran another engine version than its launch declared."""

    engine: str
    declared: str
    ran: str
    source: str
    """Where `ran` was read: the server's `/version`, or the launch's interpreter's installed package."""
    judged: tuple[GateVerdict, ...] = ()
    """The launch's gated knobs as policy judged them, at the declared version."""
    rejudged: tuple[GateVerdict, ...] = ()
    """The same knobs at the version that ran."""

    @property
    def changed(self) -> list[tuple[GateVerdict, GateVerdict]]:
        """(at the declared version, at the one that ran) for each gated knob whose verdict differs."""
        at_ran = {(v.kind, v.name): v for v in self.rejudged}
        return [(v, at_ran[(v.kind, v.name)]) for v in self.judged
                if (v.kind, v.name) in at_ran and at_ran[(v.kind, v.name)].honoured != v.honoured]

    @property
    def refused(self) -> list[GateVerdict]:
        """The gated knobs the version that ran does not honour (it ignores or rejects them)."""
        return [v for v in self.rejudged if v.honoured is False]

    def warning(self) -> str:
        """What the result says: the two versions, where the running one was read, and which gates were judged on
        the declared one."""
        said = (f"{ENGINE_VERSION_OPENING}the recipe declares {self.engine} {self.declared}, but the server ran "
                f"{self.engine} {self.ran} ({self.source}); the result is labelled {self.ran}")
        if not self.judged:
            return said + "; the launch uses no version-gated knob"
        names = ", ".join(v.name for v in self.judged)
        said += f"; feature gates were judged at the declared {self.declared}: {names}"
        changed = self.changed
        if changed:
            said += f"; at {self.ran}: " + "; ".join(after.reason for _, after in changed)
        else:
            said += f" (the same verdicts at {self.ran})"
        return said

    def error(self) -> ContractError | None:
        """The refusal when the running version does not honour a gated knob of the launch; None otherwise."""
        refused = self.refused
        if not refused:
            return None
        return ContractError(
            f"{self.engine} {self.ran} ran ({self.source}), not the declared {self.declared}, and it does not honour "
            "what the launch sets: " + "; ".join(v.reason for v in refused) + ". The row would measure a launch "
            "without it under its name", fix=FIX)


def ran_version(observed: Mapping[str, Any]) -> tuple[str, str] | None:
    """(version, where it was read) of the engine that served: what the server reports, else what the interpreter
    that ran it has installed; None when neither was read."""
    reported = observed.get("engine_version")
    if reported:
        return str(reported), "its /version says so"
    installed = observed.get("engine_version_installed")
    if installed:
        return str(installed), "the python that ran it has it installed"
    return None


def version_drift(job: Job, spec: LaunchSpec, observed: Mapping[str, Any]) -> EngineVersionDrift | None:
    """The drift between the version `spec` declares and the one `observed` says ran, with `job`'s launch's gated
    knobs judged at both; None when they agree, or either is unknown."""
    from llmsweep.policy.rules_engine import launch_gates

    declared = spec.engine_version
    ran = ran_version(observed)
    if not declared or ran is None or same_version(ran[0], declared):
        return None
    return EngineVersionDrift(engine=spec.engine, declared=declared, ran=ran[0], source=ran[1],
                              judged=tuple(launch_gates(job, spec, declared)),
                              rejudged=tuple(launch_gates(job, spec, ran[0])))
