"""The recipe's `require-power`: a boolean at the recipe's top level that every planned job carries; the run's
`--require-power/--no-require-power` overrides it; anything but a boolean is an error at its file and line."""

from __future__ import annotations

from pathlib import Path

from llmsweep.plan import jobs_from_files
from llmsweep.power.sampler import PowerSettings
from llmsweep.spec import load_recipes

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _with(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.read_text().replace("  multinode: false\n", f"  multinode: false\n  {line}\n"))
    return path


def test_recipe_field_reaches_every_job_and_the_switch_overrides_it(tmp_path: Path) -> None:
    jobs = jobs_from_files([_with(tmp_path, "require-power: true")])
    assert len(jobs) == 2 and all(job.require_power is True for job in jobs)
    assert PowerSettings().required(jobs) is True  # the recipe decides when the run does not say
    assert PowerSettings(require=False).required(jobs) is False  # --no-require-power
    assert PowerSettings(require=True).for_jobs(jobs).require is True


def test_a_recipe_without_the_field_requires_nothing_unless_the_run_does() -> None:
    jobs = jobs_from_files([RECIPE])
    assert all(job.require_power is None for job in jobs)
    assert "require-power" not in jobs[0].to_json()  # job.json of older recipes is unchanged
    assert PowerSettings().required(jobs) is False
    assert PowerSettings(require=True).required(jobs) is True


def test_a_value_that_is_not_a_boolean_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = _with(tmp_path, 'require-power: "sometimes"')
    (finding,) = load_recipes([path]).errors
    assert finding.file == str(path) and finding.line == 11
    assert "require-power" in finding.message and "boolean" in (finding.fix or "")
