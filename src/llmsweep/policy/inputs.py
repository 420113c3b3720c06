"""What the jobs read besides their recipes, checked once before any job starts: the one home of that check, which
`run`, `predict`, `validate` and `render` call on the jobs they planned.

It reads the catalog files every job reads — `power.yaml` (the simulator's power model and every summary's cost
block), `sim_calibration.yaml` where a job runs on the simulator — and what the evals read besides their server
(`evals.results.check_inputs`: the score floors of `eval_thresholds.yaml`, an `--eval-dataset`). A malformed user file
there failed every job in turn, or after its eval had run, while `validate` passed the recipes: here it is bad input
(exit 2). `check_side_inputs` raises the first error as it is (a command that stops on it says it once);
`input_findings` gives every error as a finding (a catalog file's with its file, line and field:
`errors.CatalogError`), for the findings `validate` prints, counts and writes as JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from llmsweep.errors import CatalogError, LlmsweepError

if TYPE_CHECKING:
    from llmsweep.evals.harness import EvalSettings
    from llmsweep.findings import Finding
    from llmsweep.plan.job import Job

EVAL_INPUT_RULE = "eval.input"
"""The rule of an eval input's error that names no catalog file (an `--eval-dataset` that the task cannot run on)."""


def _checks(jobs: Sequence[Job], evals: EvalSettings | None,
            simulate: bool) -> list[tuple[str, Callable[[], object]]]:
    """(the rule an error without a finding of its own is listed under, the check) for what `jobs` read."""
    from llmsweep.catalog.power import all_power
    from llmsweep.engines import runs_on_simulator
    from llmsweep.evals.results import check_inputs as eval_inputs
    from llmsweep.sim.calibration import load_calibrations

    checks: list[tuple[str, Callable[[], object]]] = []
    if jobs:
        checks.append((CatalogError.RULE, all_power))
    if any(runs_on_simulator(job.engine, simulate=simulate) for job in jobs):
        checks.append((CatalogError.RULE, load_calibrations))
    if evals is not None:
        checks.append((EVAL_INPUT_RULE, lambda: eval_inputs(jobs, evals)))
    return checks


def check_side_inputs(jobs: Sequence[Job], evals: EvalSettings | None, *, simulate: bool = False) -> None:
    """Raise the first error of what `jobs` read besides their recipes (`evals`: the run's eval settings, None where
    no eval runs, as under `predict`; `simulate`: every job runs on the simulator); nothing when all of it reads."""
    for _, check in _checks(jobs, evals, simulate):
        check()


def input_findings(jobs: Sequence[Job], evals: EvalSettings | None, *, simulate: bool = False) -> list[Finding]:
    """Every error of what `jobs` read besides their recipes, each a finding (one per file that does not read). Catalog
    folders that are not there (`$LLMSWEEP_CATALOG_DIR`) are not these files' error: the policy rules that read a
    catalog say it (`policy.input`), and it is not said a second time here."""
    from llmsweep.catalog.sources import user_dirs

    try:
        user_dirs()
    except LlmsweepError:
        return []
    found: list[Finding] = []
    for rule, check in _checks(jobs, evals, simulate):
        try:
            check()
        except LlmsweepError as exc:
            found += [f for f in exc.as_findings(rule) if f not in found]
    return found
