"""Eval points are a property of the whole matrix (every recipe under the repository's `recipes/`, as InferenceX marks
them over all its master files together): `changes`, `run FILE --changed`, plain `run FILE` and `ci matrix` mark the
same rows whichever subset of the files they are handed, and plan only the files handed.

A fresh-user review found `llmsweep changes main..HEAD --evals-only` saying `0 jobs to run` while `llmsweep run
recipes/x.yaml --changed main..HEAD --evals-only` planned an eval CI never would: `changes` weighed every file under
recipes/, where the configuration's highest concurrency lay in another file, and `run` only the file it was given."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from changes_scratch import commit, git

from llmsweep.changes import changes_between
from llmsweep.changes.github import sweep_jobs
from llmsweep.cli.main import main
from llmsweep.plan import EvalOptions, Job, jobs_from_files
from llmsweep.policy import validate_files
from llmsweep.spec.scope import UNWEIGHED_RULE, alone_note

RECIPE = """\
{key}:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi300x
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - {{ tp: 8, conc-list: {concs} }}
  serve:
    engine: {{ name: sim }}
    env:
      SPEC_VAR: "{var}"
  workload:
    num-prompts-per-conc: 4
    num-warmups: 1
"""
"""One configuration (model, runner, framework, precision, 8k1k, no spec, no DP attention) over two files: its eval
rows are its highest and upper-median concurrency of 16 or more among the rows of both."""

EVALS_ONLY = EvalOptions(evals_only=True)


def _write(repo: Path, name: str, key: str, concs: str, var: str = "1", folder: str = "recipes") -> Path:
    path = repo / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RECIPE.format(key=key, concs=concs, var=var))
    return path


def _repo(tmp_path: Path) -> tuple[Path, str, str]:
    """`small.yaml` at [16, 32] beside `big.yaml` at [64, 128, 256]: the matrix's eval rows are big's 64 and 256. The
    head commit adds conc 24 to small and changes its env: the matrix's eval rows stay big's (16 24 32 64 128 256:
    the highest and the upper median, 64), while small alone would move its eval to 24 and change its 32."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    _write(repo, "big.yaml", "big-sim", "[64, 128, 256]")
    _write(repo, "small.yaml", "small-sim", "[16, 32]")
    base = commit(repo, "base")
    _write(repo, "small.yaml", "small-sim", "[16, 24, 32]", var="2")
    return repo, base, commit(repo, "small grows, its env changes")


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def _ids(jobs: list[Job], key: str | None = None) -> list[tuple[str, bool | None, bool | None]]:
    return [(j.id, j.run_eval, j.eval_only) for j in jobs if key is None or j.recipe_key == key]


def test_changes_and_run_changed_of_one_file_mark_the_evals_of_the_whole_matrix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    repo, base, head = _repo(tmp_path)
    spec = f"{base}..{head}"
    small = repo / "recipes" / "small.yaml"
    whole = changes_between(spec, (), repo=repo, evals=EVALS_ONLY)
    assert (len(whole.added), len(whole.changed), len(whole.removed)) == (0, 0, 0)
    assert sorted(j.conc for j in whole.unchanged) == [64, 256]  # big's: the change touched no eval row
    one = changes_between(spec, [small], repo=repo, evals=EVALS_ONLY)
    assert one.to_run() == [] and not one.added and not one.removed  # was: conc 24 added, conc 32 changed
    assert not one.notes

    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, out, err = _main(capsys, "changes", spec, "--evals-only", "--json")
    assert code == 0, err
    assert json.loads(out)["to_run"] == []
    code, out, err = _main(capsys, "run", "recipes/small.yaml", "--changed", spec, "--evals-only", "--simulate",
                           "--out", str(tmp_path / "out"), "--no-report", "--json")
    assert code == 0, err
    assert f"{spec}: 0 added, 0 changed, 0 removed" in err and "no eval job changed: nothing to run" in err
    assert json.loads(out)["jobs"] == []
    # the CI workflow's matrix of the pull request, given the folder or the one file, agrees
    for files in ([repo / "recipes"], [small]):
        assert sweep_jobs(files, changed=spec, evals_only=True)[0] == []


@pytest.mark.parametrize("evals", [EvalOptions(), EVALS_ONLY])
def test_a_plan_of_one_file_marks_the_rows_the_whole_matrix_marks(tmp_path: Path, evals: EvalOptions) -> None:
    """Plain `run FILE` (and `render`, `validate`, `ci matrix FILE`: `jobs_from_files`) plans the file's jobs as a
    plan of the whole folder has them: small's conc 32 is no eval row, as it would be planned alone."""
    repo, _, _ = _repo(tmp_path)
    small = repo / "recipes" / "small.yaml"
    folder = _ids(jobs_from_files([repo / "recipes"], evals=evals), "small-sim")
    assert _ids(jobs_from_files([small], evals=evals)) == folder
    assert not any(run or only for _, run, only in folder)
    # a file of the folder that does not load weighs nothing, and stops no plan of the others
    (repo / "recipes" / "broken.yaml").write_text("broken: [\n")
    assert _ids(jobs_from_files([small], evals=evals)) == folder
    assert _ids(jobs_from_files([repo / "recipes" / "big.yaml"], evals=evals)) \
        == _ids(jobs_from_files([repo / "recipes" / "big.yaml", small], evals=evals), "big-sim")


def test_a_file_outside_the_recipes_folder_is_weighed_alone_and_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    repo, _, _ = _repo(tmp_path)
    example = _write(repo, "small.yaml", "example-sim", "[16, 32]", folder="examples")
    base = commit(repo, "an example")
    _write(repo, "small.yaml", "example-sim", "[16, 24, 32]", var="2", folder="examples")
    head = commit(repo, "the example grows")
    # the example's own eval rows: its highest and upper-median concurrency, big's left out of it
    assert [j.conc for j in jobs_from_files([example], evals=EVALS_ONLY)] == [24, 32]
    change = changes_between(f"{base}..{head}", [example], repo=repo, evals=EVALS_ONLY)
    assert [j.conc for j in change.added] == [24] and [c.head.conc for c in change.changed] == [32]
    assert alone_note([example]) in change.notes
    outside = tmp_path / "elsewhere" / "small.yaml"
    outside.parent.mkdir()
    shutil.copy(repo / "recipes" / "small.yaml", outside)
    assert [j.conc for j in jobs_from_files([outside], evals=EVALS_ONLY)] == [24, 32]
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)  # its eval jobs are refused before any server starts
    _, _, err = _main(capsys, "run", str(outside), "--evals-only", "--simulate", "--out", str(tmp_path / "out"),
                      "--store", str(tmp_path / "store.sqlite"), "--no-report")
    assert f"note: {alone_note([outside])}" in " ".join(err.split())


WIDE = """\
wide-sim:
  image: lmsysorg/sglang:v0.5.17-cu130
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: cluster:b300-nv
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - { tp: 16, kv-offloading: dram, kv-offload-backend: { name: hicache }, conc-list: [1] }
"""
"""A recipe that loads and does not plan: its arm is wider than the runner's node."""


def test_what_of_the_matrix_does_not_load_or_plan_is_said_where_eval_rows_were_chosen_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A file of recipes/ that does not load, and a recipe there that does not plan, weighed nothing in silence: the
    eval rows of `run recipes/small.yaml` were then chosen among fewer rows than a plan of the whole folder, and `run`
    and `ci` could put a configuration's eval at different points without a word. Each is a warning of `validate`,
    `run`, `matrix` and `changes`, with the loader's or the planner's reason."""
    repo, _, head = _repo(tmp_path)
    (repo / "recipes" / "broken.yaml").write_text("broken: [\n")
    (repo / "recipes" / "wide.yaml").write_text(WIDE)
    small = repo / "recipes" / "small.yaml"
    found = [f for f in validate_files([small]).findings if f.rule == UNWEIGHED_RULE]
    assert [(Path(f.file or "").name, f.path, f.is_error) for f in found] == [
        ("broken.yaml", None, False), ("wide.yaml", "wide-sim", False)]
    assert "without this file (it does not load: YAML syntax error" in found[0].message, found[0].message
    assert "without this recipe (it does not plan: tp=16" in found[1].message, found[1].message
    said = [f.render().splitlines()[0] for f in found]
    # the plan of the files is what it was: a warning, not a refusal
    assert jobs_from_files([small]) == validate_files([small]).jobs

    monkeypatch.chdir(repo)
    code, out, err = _main(capsys, "validate", str(small))
    assert code == 0 and all(line in out for line in said), out + err
    code, out, err = _main(capsys, "matrix", "full-sweep", "--config-files", str(small))
    assert code == 0 and all(line in err for line in said), err
    code, out, err = _main(capsys, "render", str(small), "--simulate", "--job", jobs_from_files([small])[0].id)
    assert code == 0 and all(line in err for line in said), err
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)
    _, _, err = _main(capsys, "run", str(small), "--simulate", "--evals-only", "--out", str(tmp_path / "out"),
                      "--store", str(tmp_path / "store.sqlite"), "--no-report")
    assert all(line in err for line in said), err
    notes = changes_between(f"{head}..", [small], repo=repo).notes
    assert all(line in notes for line in said), notes
    # the whole folder planned is no part of a matrix: its own loading refuses the broken file
    assert not [f for f in validate_files([repo / "recipes"]).findings if f.rule == UNWEIGHED_RULE]


def test_run_of_one_file_says_where_the_matrix_plans_an_eval_the_file_alone_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """small.yaml alone runs its configuration's eval at conc 32; the matrix plans it at big's 64 and 256, so `run
    recipes/small.yaml` dropped the eval it used to run without a word. It says where the eval is planned, once per
    such configuration, and nothing of a file whose eval stays in it or which had none."""
    repo, _, _ = _repo(tmp_path)
    small = repo / "recipes" / "small.yaml"
    matrix = validate_files([small]).matrix
    assert matrix is not None
    (moved,) = matrix.moved
    note = ("note: the eval of small-sim (Qwen/Qwen3.5-397B-A17B-FP8 fp8 sglang on mi300x, isl 8192 osl 1024) is "
            "planned at conc 64 and 256 in recipes/big.yaml (eval rows are chosen across recipes/, the matrix the "
            "planned files belong to)")
    assert moved.note() == note
    big = validate_files([repo / "recipes" / "big.yaml"]).matrix
    assert big is not None and big.moved == []  # its evals are the matrix's
    tiny = validate_files([_write(repo, "tiny.yaml", "tiny-sim", "[2, 4]")]).matrix
    assert tiny is not None and tiny.moved == []  # alone it runs no eval (below conc 16): none to lose
    assert validate_files([small], evals=EvalOptions(no_evals=True)).matrix is None

    monkeypatch.chdir(repo)
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)
    code, _, err = _main(capsys, "run", "recipes/small.yaml", "--simulate", "--evals-only", "--out",
                         str(tmp_path / "out"), "--store", str(tmp_path / "store.sqlite"), "--no-report")
    said = " ".join(err.split())
    assert code == 2 and said.count(note) == 1, said
    _, _, err = _main(capsys, "run", "recipes/big.yaml", "--simulate", "--evals-only", "--out",
                      str(tmp_path / "out-big"), "--store", str(tmp_path / "store.sqlite"), "--no-report")
    assert "note: the eval of" not in err, err
    # `matrix full-sweep` of the file says it too (it printed the file's rows without its eval, silently)
    code, out, err = _main(capsys, "matrix", "full-sweep", "--config-files", "recipes/small.yaml")
    said = " ".join(err.split())
    assert code == 0 and said.count(note) == 1, said
    assert not [row for row in json.loads(out) if row.get("run-eval")], out
