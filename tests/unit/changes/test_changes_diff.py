"""`llmsweep changes`: a recipe commit gives exactly the jobs it adds, removes and changes, with the cause."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.changes import changes_between
from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError
from llmsweep.plan import jobs_from_files
from llmsweep.plan.matrix import EvalOptions

if shutil.which("git") is None:  # pragma: no cover - git is part of the dev environment
    pytest.skip("git is not installed", allow_module_level=True)

from changes_scratch import RECIPE, scratch_repo, write_recipe


def test_added_concurrency_and_changed_env_give_exactly_those_jobs(tmp_path: Path) -> None:
    repo, base, head = scratch_repo(tmp_path)
    cs = changes_between(f"{base}..{head}", repo=repo)

    head_jobs = jobs_from_files([repo / "recipes" / "chg.yaml"])
    tp8 = {j.id for j in head_jobs if j.tp == 8}
    assert [(j.tp, j.conc) for j in cs.added] == [(4, 8)]
    assert {c.head.id for c in cs.changed} == tp8
    assert all(c.causes == ("env",) and c.fields == ("serve.env.ARM_VAR",) for c in cs.changed)
    assert not cs.removed
    assert sorted((j.tp, j.conc) for j in cs.unchanged) == [(4, 2), (4, 4)]
    assert set(cs.to_run()) == tp8 | {cs.added[0].id}


def test_two_directories_and_removed_jobs(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write_recipe(old, tp4_concs="[2, 4, 8]")
    write_recipe(new, tp4_concs="[2]")
    cs = changes_between(f"{old}..{new}")
    assert sorted(j.conc for j in cs.removed) == [4, 8]
    assert not cs.added and not cs.changed


def test_a_discovery_below_the_recipes_is_not_a_second_copy_of_them(tmp_path: Path) -> None:
    """`llmsweep discover --out` beside the recipes writes a proposal under the recipe's own key: a change that adds it
    adds no jobs (the folder walk is the loader's, which leaves a discovery's output out)."""
    old, new = tmp_path / "old", tmp_path / "new"
    write_recipe(old, tp4_concs="[2, 4]")
    write_recipe(new, tp4_concs="[2, 4]")
    found = new / "recipes" / "discovered"
    found.mkdir(parents=True)
    (found / "discovery.json").write_text("{}")
    (found / "proposed.yaml").write_text(RECIPE.format(tp4_concs="[2, 4, 8, 16]", arm_var="a"))
    cs = changes_between(f"{old}..{new}")
    assert not cs.added and not cs.changed and not cs.removed


def test_a_recipe_wide_field_is_reported_as_the_recipe_not_the_search_space(tmp_path: Path) -> None:
    repo, _, head = scratch_repo(tmp_path)
    path = repo / "recipes" / "chg.yaml"
    path.write_text(path.read_text().replace("  multinode: false\n", "  multinode: false\n  require-power: true\n"))
    cs = changes_between(f"{head}..", repo=repo)
    assert len(cs.changed) == 5
    assert {(c.causes, c.fields) for c in cs.changed} == {(("recipe",), ("require_power",))}


def test_image_change_names_image_and_empty_head_is_the_working_tree(tmp_path: Path) -> None:
    repo, _, head = scratch_repo(tmp_path)
    path = repo / "recipes" / "chg.yaml"
    path.write_text(path.read_text().replace("20260730", "20260801"))
    cs = changes_between(f"{head}..", repo=repo)
    assert cs.head == "working tree"
    assert len(cs.changed) == 5 and {c.causes for c in cs.changed} == {("image",)}


def test_cli_json_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, base, head = scratch_repo(tmp_path)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["changes", f"{base}..{head}", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert (doc["added"], doc["changed"], doc["removed"], doc["unchanged"]) == (1, 2, 0, 2)
    assert {r["change"] for r in doc["jobs"]} == {"added", "changed"}
    table = CliRunner().invoke(cli, ["changes", f"{base}..{head}", "recipes/chg.yaml"])
    assert table.exit_code == 0, table.output
    assert "serve.env.ARM_VAR" in table.output and "1 added, 2 changed, 0 removed" in table.output


def test_bad_range_is_a_clear_error(tmp_path: Path) -> None:
    repo, base, _ = scratch_repo(tmp_path)
    with pytest.raises(ConfigError, match=r"BASE\.\.HEAD"):
        changes_between(f"{base}..no-such-rev", repo=repo)



def test_workload_change_names_workload(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write_recipe(old)
    path = write_recipe(new)
    path.write_text(path.read_text().replace("num-prompts-per-conc: 4", "num-prompts-per-conc: 6"))
    cs = changes_between(f"{old}..{new}")
    assert len(cs.changed) == 4 and {c.causes for c in cs.changed} == {("workload",)}
    assert all(any(f.startswith("workload.") for f in c.fields) for c in cs.changed)
    # the recipe named inside either directory is that path on both sides (inside BASE's was "in neither")
    for named in (path, old / "recipes" / "chg.yaml"):
        assert len(changes_between(f"{old}..{new}", [named]).changed) == 4


def test_a_missing_recipe_file_or_a_tree_without_recipes_is_refused_not_an_empty_change(tmp_path: Path) -> None:
    """Both used to give '0 job(s) to run' and exit 0, so a typo could make CI run nothing."""
    repo, base, head = scratch_repo(tmp_path)
    with pytest.raises(ConfigError, match=r"recipes/typo\.yaml is in neither"):
        changes_between(f"{base}..{head}", [repo / "recipes" / "typo.yaml"], repo=repo)
    old, new = tmp_path / "old", tmp_path / "new"
    write_recipe(old, tp4_concs="[2, 4]")
    write_recipe(new, tp4_concs="[2, 4, 8]")
    flat_old, flat_new = tmp_path / "flat-old", tmp_path / "flat-new"  # the recipe beside, not under recipes/
    for src, dst in ((old, flat_old), (new, flat_new)):
        dst.mkdir()
        shutil.copy(src / "recipes" / "chg.yaml", dst / "chg.yaml")
    with pytest.raises(ConfigError, match=r"neither .* has recipe files under recipes/"):
        changes_between(f"{flat_old}..{flat_new}")
    cs = changes_between(f"{flat_old}..{flat_new}", [flat_new / "chg.yaml"])  # named: compared
    assert [j.conc for j in cs.added] == [8]


def test_a_file_inside_neither_directory_is_refused_not_compared_with_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`changes A/..B/ /elsewhere/x.yaml` read that one file on both sides: "0 changed", exit 0, and `ci matrix
    --changed` selected nothing (the typo guard passed too, the file existing)."""
    old, new = tmp_path / "old", tmp_path / "new"
    write_recipe(old, tp4_concs="[2, 4]")
    write_recipe(new, tp4_concs="[2, 4, 8]")
    elsewhere = write_recipe(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    for named in (elsewhere, Path("elsewhere/recipes/chg.yaml"), Path("old/../elsewhere/recipes/chg.yaml")):
        with pytest.raises(ConfigError, match=r"is in(side)? neither .*old nor .*new"):
            changes_between("old..new", [named])
    from support.cli import run_main

    code, _, err = run_main(capsys, "changes", "old..new", elsewhere)
    assert code == 2 and "inside neither" in err, err
    # inside either directory, or as both trees hold it, the file is compared
    for named in (Path("recipes/chg.yaml"), Path("new/recipes/chg.yaml"), old / "recipes" / "chg.yaml"):
        assert [j.conc for j in changes_between("old..new", [named]).added] == [8]


def test_a_fleet_file_in_the_repository_is_read_from_each_side(tmp_path: Path) -> None:
    """The fleet's DRAM sizes the HiCache arm's host pool: lowering it in a change changes those jobs, which used to
    be reported unchanged (both sides were planned with the working tree's fleet file)."""
    from changes_scratch import commit, git

    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    git(repo, "init", "-q")
    root = Path(__file__).resolve().parents[3]
    shutil.copy(root / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml", repo / "recipes" / "seed.yaml")
    fleet = repo / "runners.yaml"
    shutil.copy(root / "src" / "llmsweep" / "catalog" / "data" / "runners.yaml", fleet)
    base = commit(repo, "base")
    fleet.write_text(fleet.read_text().replace("available-cpu-dram-mib: 2_321_924",
                                               "available-cpu-dram-mib: 1_000_000"))
    head = commit(repo, "fleet")
    cs = changes_between(f"{base}..{head}", repo=repo, runner_config=fleet)
    hicache = {c.head.id for c in cs.changed}
    assert hicache and all("kvdram" in i for i in hicache)
    assert all(c.fields == ("total_cpu_dram_gb",) for c in cs.changed), [c.fields for c in cs.changed]
    assert not cs.added and not cs.removed


def test_a_block_inserted_before_one_of_the_same_identity_leaves_that_one_unchanged(tmp_path: Path) -> None:
    """Two tp4 blocks differ only in their router, which the job id does not show. Inserting one before the existing
    one used to pair the jobs by position: the existing job was reported changed (and re-run), the new one added."""
    from changes_scratch import commit, git

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    path = write_recipe(repo, tp4_concs="[2]")
    text = path.read_text()
    routed = "      - { tp: 4, conc-list: [2], router: { name: sglang-router, version: '0.2' } }\n"
    path.write_text(text.replace("      - { tp: 4, conc-list: [2] }\n", routed))
    base = commit(repo, "base: one routed tp4 block")
    inserted = "      - { tp: 4, conc-list: [2], router: { name: sglang-router, version: '0.3' } }\n"
    path.write_text(text.replace("      - { tp: 4, conc-list: [2] }\n", inserted + routed))
    head = commit(repo, "head: a block of the same identity inserted before it")

    cs = changes_between(f"{base}..{head}", repo=repo)
    assert not cs.changed and not cs.removed
    assert [j.router.version for j in cs.added if j.router is not None] == ["0.3"]
    assert len(cs.added) == 1
    assert sorted((j.tp, j.conc, j.router.version if j.router else None) for j in cs.unchanged) == [
        (4, 2, "0.2"), (8, 2, None), (8, 4, None)]
    assert cs.to_run() == [cs.added[0].id]


def test_citing_where_a_pinned_acceptance_length_was_measured_changes_no_job(tmp_path: Path) -> None:
    # A citation (`acceptance-length-source`) is provenance: adding one to satisfy golden-al.missing re-runs nothing.
    corpus = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy"
    recipe = (corpus / "golden-al.missing.yaml").read_text()
    spec = 'num-draft-tokens: 4, thinking: "on"'
    assert spec in recipe
    old, new, moved = tmp_path / "old", tmp_path / "new", tmp_path / "moved"
    for folder, extra in ((old, ", acceptance-length: 2.1"),
                          (new, ', acceptance-length: 2.1, acceptance-length-source: "https://example.org/run/9"'),
                          (moved, ', acceptance-length: 2.2, acceptance-length-source: "https://example.org/run/9"')):
        (folder / "recipes").mkdir(parents=True)
        (folder / "recipes" / "r.yaml").write_text(recipe.replace(spec, spec + extra))
    cited = changes_between(f"{old}..{new}")
    assert not cited.changed and not cited.added and not cited.removed and len(cited.unchanged) == 3
    repinned = changes_between(f"{new}..{moved}")  # the value itself is a cause
    assert len(repinned.changed) == 3
    assert {c.causes for c in repinned.changed} == {("engine args", "golden curve")}


def _eval_grid(folder: Path, *, tp4_concs: str, arm_var: str) -> Path:
    """The scratch recipe at 8k1k, where rows are marked for an eval (tp4's highest and median concurrency ≥ 16)."""
    path = write_recipe(folder, tp4_concs=tp4_concs, arm_var=arm_var)
    path.write_text(path.read_text().replace("isl: 256", "isl: 8192").replace("osl: 64", "osl: 1024"))
    return path


@pytest.mark.parametrize(("evals", "expected"), [
    # the eval marking follows the grid: adding 64 evaluates it (32 keeps its eval); tp8 has no point ≥ 16 to evaluate
    (EvalOptions(evals_only=True), {(4, 64)}),
    # every 8k1k row is an eval: the added point and the changed arm's two
    (EvalOptions(all_evals=True), {(4, 64), (8, 2), (8, 4)}),
    (EvalOptions(no_evals=True), {(4, 64), (8, 2), (8, 4)}),
])
def test_under_an_eval_selection_the_change_set_names_the_jobs_that_selection_plans(
        tmp_path: Path, evals: EvalOptions, expected: set[tuple[int, int]]) -> None:
    """`run --changed BASE..HEAD --evals-only` failed with "3 job id(s) are not in the plan": the change set named the
    default plan's throughput ids, and under --evals-only the plan holds `…_eval_…` ids. Both sides are now planned
    under the run's selection, so the ids are that plan's, and the run's own resolution takes them."""
    from llmsweep.execute.pipeline import _only

    old, new = tmp_path / "old", tmp_path / "new"
    _eval_grid(old, tp4_concs="[2, 4, 16, 32]", arm_var="a")
    recipe = _eval_grid(new, tp4_concs="[2, 4, 16, 32, 64]", arm_var="b")
    cs = changes_between(f"{old}..{new}", evals=evals)
    run = cs.jobs_to_run()
    assert {(j.tp, j.conc) for j in run} == expected
    eval_only = evals.evals_only or evals.all_evals
    assert all(bool(j.eval_only) is eval_only and ("_eval_" in j.id) is eval_only for j in run)
    plan = jobs_from_files([recipe], evals=evals)
    chosen, _ = _only(plan, [], cs.to_run())
    assert [j.id for j in chosen] == [j.id for j in plan if j.id in set(cs.to_run())]
    with pytest.raises(ConfigError, match="not in the plan"):  # an id the plan truly lacks is still refused
        _only(plan, [], [*cs.to_run(), "qwen3.5_no_such_job_0123456789ab"])


def test_changes_takes_the_eval_flags_run_changed_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`changes --json`'s `to_run` is what `run --changed` runs: with --evals-only, the eval jobs that changed."""
    old, new = tmp_path / "old", tmp_path / "new"
    _eval_grid(old, tp4_concs="[2, 4, 16, 32]", arm_var="a")
    _eval_grid(new, tp4_concs="[2, 4, 16, 32, 64]", arm_var="b")
    res = CliRunner().invoke(cli, ["changes", f"{old}..{new}", "--evals-only", "--json"])
    assert res.exit_code == 0, res.output
    (job,) = json.loads(res.output)["to_run"]
    assert "_conc64_" in job and "_eval_" in job
    both = CliRunner().invoke(cli, ["changes", f"{old}..{new}", "--evals-only", "--no-evals"])
    assert isinstance(both.exception, ConfigError) and "mutually exclusive" in str(both.exception)


def test_an_eval_marking_that_moves_away_changes_no_job_and_one_that_arrives_is_an_eval_change(tmp_path: Path) -> None:
    """Raising an 8k1k curve's top concurrency moves its upper median (the evaluated point) up: conc 32 lost its eval
    mark and was listed `changed … search space | run_eval`, so `run --changed` measured its identical point again.
    A point that loses its eval owes nothing; one that gains it owes its eval, said as cause `eval`."""
    before, raised, cut = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _eval_grid(before, tp4_concs="[2, 4, 8, 16, 32, 64]", arm_var="a")
    _eval_grid(raised, tp4_concs="[2, 4, 8, 16, 32, 64, 128]", arm_var="a")
    marks = {j.conc: bool(j.run_eval) for j in jobs_from_files([before / "recipes" / "chg.yaml"]) if j.tp == 4}
    assert marks[32] and marks[64]  # the upper median and the highest
    up = changes_between(f"{before}..{raised}")
    assert [(j.tp, j.conc) for j in up.added] == [(4, 128)] and not up.changed, [c.as_dict() for c in up.changed]
    assert (4, 32) in {(j.tp, j.conc) for j in up.unchanged}
    _eval_grid(cut, tp4_concs="[2, 4, 8, 16, 32]", arm_var="a")  # 64 and 128 go: 32 is evaluated now
    down = changes_between(f"{raised}..{cut}")
    assert [(c.head.conc, c.causes, c.fields) for c in down.changed] == [(32, ("eval",), ("run_eval",))]
    assert sorted(j.conc for j in down.removed) == [64, 128]


def _real(fraction: str) -> str:
    """The scratch recipe served by its real engine (SGLang), its memory fraction written as `fraction`."""
    return RECIPE.format(tp4_concs="[2]", arm_var="a").replace(
        "    engine: { name: sim }\n", f"    args:\n      --mem-fraction-static: {fraction}\n")


@pytest.mark.parametrize(("fraction", "runs"), [('"0.75"', False), ("0.7", True)], ids=["respelled", "changed"])
def test_an_edit_that_renders_the_same_real_launch_is_listed_with_nothing_to_run(tmp_path: Path, fraction: str,
                                                                                 runs: bool) -> None:
    """`0.75` → `"0.75"` renders the same server command: `changes` listed it as an engine-args change and `run
    --changed` measured the job again, where --reuse and --resume stand on what it measured. It is still listed
    (the recipe did change), said to render the same launch, and is not among the jobs to run; a value that does
    change the launch still runs."""
    old, new = tmp_path / "old", tmp_path / "new"
    for side, value in ((old, "0.75"), (new, fraction)):
        (side / "recipes").mkdir(parents=True)
        (side / "recipes" / "real.yaml").write_text(_real(value))
    cs = changes_between(f"{old}..{new}")
    assert len(cs.changed) == 3 and not cs.added and not cs.removed
    for change in cs.changed:
        assert change.fields == ("serve.args.--mem-fraction-static",) and change.same_launch is not runs
    assert sorted(cs.to_run()) == (sorted(c.head.id for c in cs.changed) if runs else [])
    result = CliRunner().invoke(cli, ["changes", f"{old}..{new}"])
    assert result.exit_code == 0, result.output
    assert ("respelled: the same launch, nothing to run" in result.output) is not runs, result.output
