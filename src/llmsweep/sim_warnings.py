"""The warnings a result the simulator produced carries (`JobOutcome.warnings`), and their two kinds: the one home of
their wording and of telling them apart.

- **engine-refuses**: the job breaks an engine rule that is softened to a warning because the simulator serves it
  (`Rule.softens_in_sim`): a real engine would refuse the job, so its point stands for nothing a GPU would run.
- **engine-version**: a real engine's server ran another engine version than its recipe declared
  (`execute.version_drift`): the result is labelled with the one that ran; its gates were judged at the declared one.
- **timeout-not-applied**: a virtual-time point whose requests ran longer than `--request-timeout`
  (`execute.virtual.outlived_timeout`): virtual time cuts no request, so they count as served where a live client
  would have timed them out. A real engine would run the job: it is no engine refusal.
- **context-served**: a real engine's server reported serving another context length than its launch set
  (`/v1/models`' `max_model_len`, read back by the lifecycle): job.json keeps the launch's, provenance the server's.
- **no-gpu**: a real engine's server ran on no GPU (its launch uses 0: a CPU rehearsal): its per-GPU figures divide
  the endpoint's by GPUs that served nothing, and its result says `gpus_known: false`.
- **not-modelled**: the job sets something the simulator does not model (`engines.sim.unmodelled`: pipeline or
  context parallelism, DP attention's per-rank prefix caches, serving settings it runs without such as a page size
  other than its 64-token blocks): a real engine would run it, and the point predicts it without modelling that (a
  switch as if it were off, a setting at the simulator's own value, said in parentheses).
- **catalog-estimates**: the simulator modelled the job with catalog figures the catalog marks as estimates
  (`engines.sim.estimated_figures`, recorded as `provenance.estimated`: a placeholder model shape, an unsourced GPU
  bandwidth or HBM size): the point predicts the job no better than those figures, which `llmsweep catalog --json
  models|hardware` says how each was estimated.

The warnings are recorded as text (`outcome.json`, `run.json: outcomes`), so the kind is read back from the text's
opening words (:func:`warning_kind`); the report, the run's completeness lines and the CLI key on it, never on
wording of their own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from llmsweep.option_spellings import flag
from llmsweep.words import count_of, noun


class WarningKind(StrEnum):
    ENGINE_REFUSES = "engine-refuses"
    """A real engine would refuse the job: the simulator ran it despite an engine rule."""
    NOT_MODELLED = "not-modelled"
    """The simulator does not model something the job sets: its point predicts the job without modelling it."""
    ENGINE_VERSION = "engine-version"
    """A real engine's server ran another engine version than its recipe declared (`execute.version_drift`): the
    result is labelled with the one that ran, and its feature gates were judged at the declared one."""
    CONTEXT_SERVED = "context-served"
    """A real engine's server reported another context length than its launch set (:func:`context_served`)."""
    NO_GPU = "no-gpu"
    """A real engine's server ran on no GPU (a CPU rehearsal): its per-GPU figures are no GPU's (`no_gpu_figures`)."""
    TIMEOUT_NOT_APPLIED = "timeout-not-applied"
    """Requests of a virtual-time point ran longer than `--request-timeout`, which virtual time does not apply: a live
    client would have timed them out (`execute.virtual.outlived_timeout`)."""
    CATALOG_ESTIMATES = "catalog-estimates"
    """The simulator modelled the job with catalog figures the catalog marks as estimates (`provenance.estimated`):
    its point is no surer than those figures (:func:`catalog_estimates`)."""


ENGINE_REFUSES_OPENING = "a real engine would refuse them: "
NOT_MODELLED_OPENING = "the simulator does not model "
ENGINE_VERSION_OPENING = "engine version: "
NO_GPU_OPENING = "the server ran on no GPU (its launch uses 0): "
CONTEXT_SERVED_OPENING = "context served: "
CATALOG_ESTIMATES_OPENING = "modelled with catalog estimates: "
_TIMEOUT_NOT_APPLIED = re.compile(r"\d+ request(s|\(s\))? ran longer than --request-timeout ")
"""How :func:`timeout_not_applied` opens its warning (`182 requests ran longer than --request-timeout 5 s, …`; runs
recorded before 2026-12-07 wrote `request(s)`): read as a kind of its own, not as the engine refusal a warning of no
known opening is taken for."""
_LEGACY_NOT_MODELLED = "it does not model "
"""How runs recorded before the subject was named (2026-12-04) open a not-modelled warning."""


def timeout_not_applied(late: int, timeout_s: float) -> str:
    """The warning of a virtual-time point `late` of whose requests ran longer than `--request-timeout` `timeout_s`
    (`execute.virtual.outlived_timeout`)."""
    return (f"{count_of(late, 'request')} ran longer than --request-timeout {timeout_s:g} s, which virtual time does "
            "not apply: a live client would have timed them out (`--live` applies it)")


def no_gpu_figures(planned: int) -> str:
    """The warning of a job whose server ran on no GPU (its launch uses 0), beside its result's `gpus_known: false`:
    a per-GPU column divides its figures by the `planned` GPUs of the job, which no GPU served."""
    return NO_GPU_OPENING + ("per-GPU figures are the whole endpoint's" if planned == 1 else
                             f"per-GPU figures are the endpoint's divided by the {count_of(planned, 'GPU')} the job "
                             "plans")


def context_served(served: int, launched: int) -> str:
    """The warning of a job whose server reported (`/v1/models`) a context of `served` tokens where its launch set
    `launched`: job.json records the launch's, provenance `launch.context_served` the server's."""
    return (f"{CONTEXT_SERVED_OPENING}the server reports {served:,} tokens where the launch set {launched:,} (job.json "
            "records the launch's; provenance `launch.context_served` the server's)")


def engine_refuses(rule: str, message: str) -> str:
    """The warning of a job that breaks engine rule `rule` (softened under the simulator)."""
    return f"{ENGINE_REFUSES_OPENING}[{rule}] {message}"


def not_modelled(missed: Sequence[str]) -> str:
    """The warning of a simulated job that sets what the simulator does not model (`missed`, non-empty)."""
    those = "it" if len(missed) == 1 else "them"
    return f"{NOT_MODELLED_OPENING}{' or '.join(missed)}: it predicts the points without modelling {those}"


def catalog_estimates(estimated: Sequence[str]) -> str:
    """The warning of a simulated job modelled with catalog figures the catalog marks as estimates (`estimated`,
    non-empty: `engines.sim.estimated_figures`, each `<entry> <field>` as `provenance.estimated` records it)."""
    return (f"{CATALOG_ESTIMATES_OPENING}{', '.join(estimated)} (`llmsweep catalog {flag('json')} models|hardware` "
            "says how each was estimated)")


def simulator_warnings(missed: Sequence[str], estimated: Sequence[str]) -> list[str]:
    """The warnings of a result the simulator gave for a job, from what it did not model of the job (`missed`:
    `engines.sim.unmodelled`, `provenance.unmodelled`) and the catalog estimates it modelled the job with
    (`estimated`: `engines.sim.estimated_figures`, `provenance.estimated`), in that order: `run`'s pipeline records
    them from the job, `predict` says them from the point's provenance, the same words either way."""
    return ([not_modelled(missed)] if missed else []) + ([catalog_estimates(estimated)] if estimated else [])


def normalised(warning: str) -> str:
    """`warning` as it reads today: a not-modelled warning recorded before it named its subject ("it does not model
    DP attention: …", which says nothing on its own) names the simulator."""
    if warning.startswith(_LEGACY_NOT_MODELLED):
        return NOT_MODELLED_OPENING + warning.removeprefix(_LEGACY_NOT_MODELLED)
    return warning


def warning_kind(warning: str) -> WarningKind:
    """Which kind `warning` is; a warning of neither opening is taken as engine-refuses (the one kind that was
    recorded before the not-modelled one)."""
    if normalised(warning).startswith(NOT_MODELLED_OPENING):
        return WarningKind.NOT_MODELLED
    if warning.startswith(ENGINE_VERSION_OPENING):
        return WarningKind.ENGINE_VERSION
    if warning.startswith(NO_GPU_OPENING):
        return WarningKind.NO_GPU
    if warning.startswith(CONTEXT_SERVED_OPENING):
        return WarningKind.CONTEXT_SERVED
    if warning.startswith(CATALOG_ESTIMATES_OPENING):
        return WarningKind.CATALOG_ESTIMATES
    if _TIMEOUT_NOT_APPLIED.match(warning):
        return WarningKind.TIMEOUT_NOT_APPLIED
    return WarningKind.ENGINE_REFUSES


def ran_on_the_simulator(count: int, warning: str) -> str:
    """The run's completeness line for `count` jobs with `warning`: `2 jobs ran on the simulator although a real
    engine would refuse them: …`, `1 job ran on the simulator, which does not model pipeline parallelism
    (pp 2): …`, or `9 jobs ran on the simulator, modelled with catalog estimates: mi300x hbm_gb (…)`."""
    said = normalised(warning)
    if warning_kind(said) is WarningKind.ENGINE_VERSION:  # a real engine's result: no simulator in it
        return f"{count_of(count, 'job')} ran on another {said}"
    if warning_kind(said) is WarningKind.NO_GPU:  # a real engine's result, on no GPU
        return (f"{count_of(count, 'job')} ran on no GPU ({noun(count, 'its', 'their')} launch uses 0): "
                f"{said.removeprefix(NO_GPU_OPENING)}")
    if warning_kind(said) is WarningKind.CONTEXT_SERVED:  # a real engine's result: no simulator in it
        return f"{count_of(count, 'job')} ran with another {said}"
    if warning_kind(said) is WarningKind.TIMEOUT_NOT_APPLIED:  # a real engine would run it: no refusal to name
        if count > 1:  # one warning of several jobs: the same count in each, never their total
            said = _TIMEOUT_NOT_APPLIED.sub(lambda m: m.group(0).replace(" ran ", " of each ran ", 1), said, count=1)
        return f"{count_of(count, 'job')} ran in virtual time, where {said}"
    if warning_kind(said) is WarningKind.CATALOG_ESTIMATES:  # a real engine would run it: no refusal to name
        return f"{count_of(count, 'job')} ran on the simulator, {said}"
    if warning_kind(said) is WarningKind.NOT_MODELLED:
        return (f"{count_of(count, 'job')} ran on the simulator, which does not model "
                f"{said.removeprefix(NOT_MODELLED_OPENING)}")
    return f"{count_of(count, 'job')} ran on the simulator although {said}"
