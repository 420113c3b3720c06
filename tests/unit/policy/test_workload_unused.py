"""A `workload` field no scenario of the recipe reads is a `workload.unused` warning at its line, never silently
dropped: `duration: 60` on a fixed-length recipe does not cap its run, `num-prompts` on an agentic one sends nothing
fewer (DESIGN.md principle 3)."""

from __future__ import annotations

from pathlib import Path

import yaml

from llmsweep.policy import validate_files

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def _unused(tmp_path: Path, name: str, workload: dict[str, object]) -> list[tuple[str | None, int | None]]:
    doc = yaml.safe_load((DATA / name).read_text(encoding="utf-8"))
    (recipe,) = doc.values()
    recipe["workload"] = {**(recipe.get("workload") or {}), **workload}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    result = validate_files([path])
    assert result.ok, [f.render() for f in result.findings if f.is_error]  # a warning: the jobs still run
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [f for f in result.findings if f.rule == "workload.unused"]
    for f in hits:
        assert f.line is not None and f.path and lines[f.line - 1].strip().startswith(f.path.rsplit(".", 1)[1] + ":")
    return [(f.path, f.line) for f in hits]


def test_fixed_length_fields_on_an_agentic_recipe_are_named(tmp_path: Path) -> None:
    hits = _unused(tmp_path, "agentic-sim.yaml", {"num-prompts": 100, "range-ratio": 0.5, "num-warmups": 3})
    assert sorted(p or "" for p, _ in hits) == [f"run-sim-agentic.workload.{k}"
                                               for k in ("num-prompts", "num-warmups", "range-ratio")]


def test_agentic_fields_on_a_fixed_length_recipe_are_named(tmp_path: Path) -> None:
    hits = _unused(tmp_path, "fixed-sim.yaml", {"duration": 60, "warmup-per-lane": 2,
                                                 "traces": {"synthetic": {"traces": 4}}})
    assert sorted(p or "" for p, _ in hits) == [f"run-sim-fixed.workload.{k}"
                                               for k in ("duration", "traces", "warmup-per-lane")]


def test_a_replay_reads_duration_but_not_the_agentic_warmup(tmp_path: Path) -> None:
    hits = _unused(tmp_path, "replay-sim.yaml", {"duration": 60, "warmup-per-lane": 2})
    assert [p for p, _ in hits] == ["run-sim-replay.workload.warmup-per-lane"]


def test_fields_their_scenario_reads_are_not_flagged(tmp_path: Path) -> None:
    assert _unused(tmp_path, "fixed-sim.yaml", {"num-prompts-per-conc": 3, "range-ratio": 0.5, "seed": 3}) == []
    assert _unused(tmp_path, "agentic-sim.yaml", {"duration": 60, "warmup-per-lane": 2, "seed": 3}) == []
