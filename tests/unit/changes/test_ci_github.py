"""`llmsweep ci github`: the workflow validates against GitHub's schema, its labels mean what InferenceX's mean, its
jobs are ordered by the priority score and run on the fleet's runner labels."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from changes_scratch import RECIPE, commit, git, scratch_repo, write_multinode, write_recipe
from click.testing import CliRunner

from llmsweep.changes.github import carries_eval, collect, matrix_entries, workflow
from llmsweep.changes.priority import priority
from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError
from llmsweep.plan import Job, jobs_from_files
from llmsweep.spec.workload import ScenarioId


def _checker() -> str | None:
    local = Path(sys.executable).parent / "check-jsonschema"
    return str(local) if local.exists() else shutil.which("check-jsonschema")


@pytest.mark.parametrize("source", ["matrix", "changes"])
def test_generated_workflow_validates_against_githubs_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             source: str) -> None:
    checker = _checker()
    if checker is None:
        pytest.skip("check-jsonschema is not installed (pip install -e '.[test]')")
    recipe = write_recipe(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / ".github" / "workflows" / "sweep.yml"
    res = CliRunner().invoke(cli, ["ci", "github", str(recipe.relative_to(tmp_path)), "--out", str(out), "--source",
                                   source, "--baseline", "run-main", "--ci-store", "/srv/llmsweep/results.sqlite"])
    assert res.exit_code == 0, res.output
    proc = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "&id" not in out.read_text()  # no YAML anchors
    # the file validated carries the eval labels: `ci matrix` flags from them, `run` the flag of each entry's plan
    import yaml

    jobs = yaml.safe_load(out.read_text())["jobs"]
    matrix_env = _step(jobs["setup"], "matrix")["env"]
    assert matrix_env["EVALS_ONLY"] == "${{ contains(github.event.pull_request.labels.*.name, 'evals-only') }}"
    assert matrix_env["ALL_EVALS"] == "${{ contains(github.event.pull_request.labels.*.name, 'all-evals') }}"
    assert """contains(fromJSON('["evals-only","all-evals"]'), github.event.label.name)""" in jobs["setup"]["if"]
    assert _step(jobs["sweep"], "Run the job")["env"]["PLAN"] == "${{ matrix.plan }}"


def test_labels_fail_fast_artifacts_and_collect_job() -> None:
    doc = workflow([Path("recipes/chg.yaml")], source="changes", baseline="run-main")
    setup, sweep, collect_job = (doc["jobs"][k] for k in ("setup", "sweep", "collect"))
    gate = next(s for s in setup["steps"] if s.get("id") == "gate")["env"]
    assert "'full-sweep-enabled'" in gate["RUN"] and "'full-sweep-fail-fast'" in gate["RUN"]
    assert "github.event_name != 'pull_request'" in gate["RUN"]  # a push to main always sweeps
    assert "full-sweep-fail-fast" in gate["FAIL_FAST"] and "full-sweep-enabled" not in gate["FAIL_FAST"]
    assert "exit 1" in next(s for s in setup["steps"] if s.get("id") == "gate")["run"]  # one full-sweep label only
    assert "&&" in gate["BOTH"]
    assert sweep["strategy"]["fail-fast"] == "${{ needs.setup.outputs.fail-fast == 'true' }}"
    assert sweep["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    upload = next(s for s in sweep["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["name"] == "bmk_${{ matrix.job }}" and upload["if"] == "always()"
    assert collect_job["if"].startswith("(!cancelled() || ") and collect_job["needs"] == ["setup", "sweep"]
    runs = "\n".join(s.get("run", "") for s in collect_job["steps"])
    assert "llmsweep ci collect" in runs and "llmsweep results ingest sweep" in runs
    assert "llmsweep compare --baseline run-main sweep --format markdown" in runs and "GITHUB_STEP_SUMMARY" in runs
    matrix_step = next(s for s in setup["steps"] if s.get("id") == "matrix")
    # against the merge tree actions/checkout gives a pull request, whose plan is what the sweep runs
    assert '--changed "$BASE.."' in matrix_step["run"] and "$HEAD" not in matrix_step["run"]
    # the eval labels become `ci matrix`'s flags, on a pull request and (never labelled) a push alike
    lines = matrix_step["run"].splitlines()
    assert lines[:3] == ["set --", 'if [ "$EVALS_ONLY" = true ]; then set -- "$@" --evals-only; fi',
                         'if [ "$ALL_EVALS" = true ]; then set -- "$@" --all-evals; fi']
    assert sum(line.count('--github-output "$GITHUB_OUTPUT" "$@"') for line in lines) == 1  # one `ci matrix`
    run_job = next(s for s in sweep["steps"] if s.get("name") == "Run the job")
    assert run_job["run"] == 'llmsweep run recipes/chg.yaml --job "$JOB" ${PLAN:+"$PLAN"} --out "runs/$JOB" ' \
                             "--no-report"
    assert "${{" not in matrix_step["run"]
    assert all("${{" not in s.get("run", "") for job in doc["jobs"].values() for s in job["steps"])


@pytest.mark.parametrize(("before", "swept", "said"), [
    ("base", "changed", None),
    ("head", "none", None),  # a push that changed no job sweeps none
    ("0" * 40, "all", "the first push of this branch (no commit before it): every job of the plan is swept"),
    ("force", "all", "is not an ancestor of HEAD (a force-push) or not in the clone: every job of the plan is swept"),
    ("1" * 40, "all", "is not an ancestor of HEAD (a force-push) or not in the clone: every job of the plan is swept"),
])
def test_a_push_to_main_sweeps_the_jobs_it_changed(tmp_path: Path, before: str, swept: str, said: str | None) -> None:
    """The workflow's own setup script, run by bash for a push to main under `--source changes`: it sweeps the jobs the
    push changed since the commit before it (`github.event.before`), as the README says. It swept every job of the
    plan on each push. Where the commit before says nothing of what the push changed — a branch's first push (all
    zeros), a force-push (not an ancestor of the commit pushed, or not in the clone) — it sweeps every job and its
    log says why. A manual run sweeps every job."""
    repo, base, head = scratch_repo(tmp_path)
    if before == "force":  # the history the force-push replaced: a commit beside the one pushed
        git(repo, "checkout", "-q", "-b", "old", base)
        write_recipe(repo, tp4_concs="[2, 4, 16]")
        before = commit(repo, "replaced by the force-push")
        git(repo, "checkout", "-q", head)
    before = {"base": base, "head": head}.get(before, before)
    doc = workflow([Path("recipes/chg.yaml")], source="changes")
    matrix_step = _step(doc["jobs"]["setup"], "matrix")
    shim = _cli_shim(tmp_path)

    def setup_matrix(event: dict[str, Any], tag: str) -> tuple[list[str], str]:
        env = {k: _interpolate(v, event) for k, v in matrix_step["env"].items()}
        out = tmp_path / f"github-output-{tag}"
        done = _bash(matrix_step["run"], repo, {**env, "GITHUB_OUTPUT": str(out)}, shim)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
        return sorted(json.loads(outputs["jobs"])), done.stdout

    every = sorted(j.id for j in jobs_from_files([repo / "recipes" / "chg.yaml"]))
    push: dict[str, Any] = {"event_name": "push", "ref": "refs/heads/main", "event": {"before": before, "after": head}}
    jobs, log = setup_matrix(push, "push")
    if swept == "changed":
        assert len(jobs) == 3 and set(jobs) < set(every)  # conc 8 added to tp4, tp8's env var changed: not tp4's 2, 4
    else:
        assert jobs == (every if swept == "all" else [])
    if said is None:
        assert "::notice::" not in log
    else:
        assert "::notice::" in log and said in log
    manual, log = setup_matrix({"event_name": "workflow_dispatch", "event": {}}, "manual")
    assert manual == every and "::notice::" not in log


def test_priority_score_follows_the_policy(tmp_path: Path) -> None:
    listed = jobs_from_files([write_recipe(tmp_path)])[0]
    assert listed.model_prefix == "qwen3.5" and priority(listed) == Decimal("2.250")  # base + sglang + a listed model
    for prefix, extra in (("glm5", "0.75"), ("glm5.1", "0.75"), ("kimik2.5", "0.75"), ("minimaxm3", "0.75"),
                          ("dsr1", "0.75"), ("kimik3", "1.5"), ("glm5.2", "0"), ("qwen3", "0")):
        assert priority(listed.model_copy(update={"model_prefix": prefix})) == Decimal("1.500") + Decimal(extra)
    job = listed.model_copy(update={"model_prefix": "llama3.1"})  # no model term: the other terms alone
    assert priority(job) == Decimal("1.500")  # base + sglang
    assert priority(job, event="push") == Decimal("3.500")
    big = job.model_copy(update={"multinode": True, "scenario": ScenarioId.AGENTIC_CODING, "precision": "fp4",
                                 "spec_decoding": "mtp", "model_prefix": "dsv4"})
    assert priority(big) == Decimal("6.000")  # the spec's example: multi-node agentic sglang fp4 mtp dsv4
    assert priority(big, labels=["ci-checklist-complete"]) == Decimal("6.250")
    assert priority(big, labels=["ci-patchwork"]) == Decimal("0.000")
    assert priority(big, labels=["engine-patch", "ci-patchwork-waived"]) == Decimal("6.000")
    assert priority(job.model_copy(update={"framework": "sglang-disagg"})) == Decimal("1.500")
    assert priority(job.model_copy(update={"framework": "sglangx"})) == Decimal("1.000")


def test_matrix_is_ordered_by_priority_and_checks_runner_labels(tmp_path: Path) -> None:
    from llmsweep.catalog.fleet import default_fleet

    jobs = jobs_from_files([write_recipe(tmp_path)])
    jobs[3] = jobs[3].model_copy(update={"precision": "fp4"})
    include = matrix_entries(jobs, default_fleet())
    assert include[0]["job"] == jobs[3].id and include[0]["priority"] == "3.000"  # base, sglang, qwen3.5, fp4
    assert {e["runner"] for e in include} == {"mi300x"}
    with pytest.raises(ConfigError, match="not in the fleet"):
        matrix_entries([jobs[0].model_copy(update={"runner_label": "nope-gpu"})], default_fleet())


def test_ci_matrix_changed_and_github_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, base, head = scratch_repo(tmp_path)
    monkeypatch.chdir(repo)
    out = tmp_path / "gh-output"
    res = CliRunner().invoke(cli, ["ci", "matrix", "recipes/chg.yaml", "--changed", f"{base}..{head}",
                                   "--github-output", str(out)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["include"]) == 3
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert lines["count"] == "3" and len(json.loads(lines["jobs"])) == 3
    assert json.loads(lines["matrix"])["include"][0]["runner"] == "mi300x"


def test_collect_merges_job_runs_and_counts_a_missing_one_as_failed(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    for n, job in enumerate(("job-a", "job-b")):
        run = artifacts / f"bmk_{job}"
        (run / "jobs" / job).mkdir(parents=True)
        (run / "jobs" / job / "job.json").write_text(json.dumps({"id": job}))
        (run / "run.json").write_text(json.dumps({
            "run_id": f"r{n}", "started": f"2026-01-0{n + 1}T00:00:00+00:00", "reuse_keys": {job: f"{n}" * 64},
            "reuse_parts": {f"{n}" * 64: {"launch": f"{n}" * 16}},
            "outcomes": [{"job_id": job, "exp_name": "x", "status": "valid"}]}))
    meta = collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=["job-a", "job-b", "job-c"])
    assert meta["expected_job_ids"] == ["job-a", "job-b", "job-c"]
    assert [o["status"] for o in meta["outcomes"]] == ["valid", "valid", "failed"]
    assert meta["started"] == "2026-01-01T00:00:00+00:00" and set(meta["reuse_keys"]) == {"job-a", "job-b"}
    # each key's part digests too, which say what differs from it part by part (`changes.reuse.RECORDED_PARTS`)
    assert meta["reuse_parts"] == {"0" * 64: {"launch": "0" * 16}, "1" * 64: {"launch": "1" * 16}}
    assert sorted(p.name for p in (tmp_path / "sweep" / "jobs").iterdir()) == ["job-a", "job-b"]
    with pytest.raises(ConfigError, match="not empty"):
        collect(artifacts, tmp_path / "sweep", run_id="again")
    # No job uploaded an artifact (each died before its upload step): the download leaves no folder at all, and the
    # sweep is still collected, every expected job failed for want of one, rather than the collect job failing alone.
    meta = collect(tmp_path / "none", tmp_path / "empty-sweep", run_id="gh-2-1", expected=["job-a", "job-b"])
    assert [(o["job_id"], o["status"]) for o in meta["outcomes"]] == [("job-a", "failed"), ("job-b", "failed")]
    assert (tmp_path / "empty-sweep" / "run.json").is_file()
    with pytest.raises(ConfigError, match="not a directory"):  # and nothing to expect: nothing to collect
        collect(tmp_path / "none", tmp_path / "nothing", run_id="gh-3-1")


@pytest.mark.parametrize(("value", "says"), [
    (None, "$JOBS, which is not set"), ("", "$JOBS, which is empty"), ("  ", "$JOBS, which is empty"),
    ("5", "must hold a JSON list of job ids"), ('"ab"', "must hold a JSON list of job ids"),
    ('["job-a", 3]', "must hold a JSON list of job ids"), ("[job-a]", "is not a JSON list of job ids"),
])
def test_collect_refuses_an_expected_env_that_does_not_hold_the_job_ids(
        value: str | None, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--expected-env JOBS` with JOBS unset or empty had collected against no expected job (a sweep whose every job
    lost its artifact went green); `5` was a TypeError traceback and `"ab"` the jobs `a` and `b`."""
    from support.cli import run_main

    artifacts = tmp_path / "artifacts"
    (artifacts / "bmk_job-a").mkdir(parents=True)
    if value is None:
        monkeypatch.delenv("JOBS", raising=False)
    else:
        monkeypatch.setenv("JOBS", value)
    code, _, err = run_main(capsys, "ci", "collect", artifacts, "--out", tmp_path / "sweep", "--run", "gh-1-1",
                            "--expected-env", "JOBS")
    assert code == 2, err[-2000:]
    assert "Traceback" not in err and says in err and "fix:" in err, err[-2000:]
    assert not (tmp_path / "sweep").exists()


def test_collect_of_a_missing_folder_without_expected_jobs_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --expected-env a missing artifacts folder had been a FileNotFoundError traceback (exit 1)."""
    from support.cli import run_main

    code, _, err = run_main(capsys, "ci", "collect", tmp_path / "missing", "--out", tmp_path / "sweep", "--run", "x")
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert "missing does not exist, so holds no job's artifact" in err and "fix:" in err
    assert not (tmp_path / "sweep").exists()


def test_collect_counts_a_multinode_jobs_points_and_keeps_each_jobs_hardware(tmp_path: Path) -> None:
    """`run` records a multi-node job's outcomes under its points' ids (`<id>-conc2`, `<id>-conc4`), while the matrix
    names the job: every sweep with one was failed for 'no artifact' (collect exit 1, the success rate too low). And
    the merged run.json dropped `job_hardware`, so a job without a result was counted under hardware `unknown`."""
    artifacts = tmp_path / "artifacts"
    runs = {"multi": (["multi-conc2", "multi-conc4"], "mi355x"), "single": (["single"], "mi300x")}
    for job, (points, hw) in runs.items():
        run = artifacts / f"bmk_{job}"
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({
            "run_id": job, "expected_job_ids": points, "job_hardware": {p: hw for p in points},
            "outcomes": [{"job_id": p, "exp_name": "x", "status": "valid"} for p in points]}))
    meta = collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=["multi", "single", "lost"])
    assert {o["job_id"]: o["status"] for o in meta["outcomes"]} == {
        "multi-conc2": "valid", "multi-conc4": "valid", "single": "valid", "lost": "failed"}
    assert meta["job_hardware"] == {"multi-conc2": "mi355x", "multi-conc4": "mi355x", "single": "mi300x"}


def test_collect_records_each_unreadable_artifact_as_its_jobs_failure_and_goes_on(tmp_path: Path) -> None:
    """A truncated run.json in one artifact stopped `ci collect` with a traceback, and nothing was collected; a
    refused job (run.json, no `jobs/`), a run stopped before its outcomes and an artifact without run.json were each
    said to have no artifact. Each is now its job's failure with the file and what is wrong, every other artifact is
    collected, and the workflow's collect step exits 1 after writing the run, its later steps still running."""
    artifacts = tmp_path / "artifacts"

    def artifact(job: str, meta: dict[str, Any] | None, *, job_dir: bool = True) -> Path:
        run = artifacts / f"bmk_{job}"
        run.mkdir(parents=True)
        if job_dir:
            (run / "jobs" / job).mkdir(parents=True)
            (run / "jobs" / job / "job.json").write_text(json.dumps({"id": job}))
            (run / "jobs" / job / "run.json").write_text("{}")  # the job's own record, not a run's
        if meta is not None:
            (run / "run.json").write_text(json.dumps({"run_id": f"r-{job}", "started": "2026-01-01T00:00:00+00:00",
                                                      "expected_job_ids": [job], **meta}, indent=2))
        return run / "run.json"

    artifact("job-a", {"outcomes": [{"job_id": "job-a", "exp_name": "x", "status": "valid"}]})
    cut = artifact("job-b", {"outcomes": [{"job_id": "job-b", "exp_name": "x", "status": "valid"}]})
    cut.write_text(cut.read_text()[:60])  # the upload was cut short
    artifact("job-c", {"outcomes": [{"job_id": "job-c", "exp_name": "x", "status": "refused",
                                     "reasons": ["policy error [fleet.unknown-label] ..."]}]}, job_dir=False)
    artifact("job-d", {})  # the runner job was cancelled while its run ran: no outcomes yet
    artifact("job-e", None)
    expected = [f"job-{c}" for c in "abcdef"]
    meta = collect(artifacts, tmp_path / "merged", run_id="gh-1-1", expected=expected)
    got = {o["job_id"]: (o["status"], o.get("reasons") or []) for o in meta["outcomes"]}
    assert meta["expected_job_ids"] == expected
    assert got["job-a"] == ("valid", [])
    assert got["job-b"][0] == "failed"
    assert got["job-b"][1][0].startswith(f"{cut} is not valid JSON (Unterminated string starting at: line 3, ")
    assert got["job-b"][1][0].endswith("the file is truncated or corrupt")
    assert got["job-c"] == ("refused", ["policy error [fleet.unknown-label] ..."])
    assert got["job-d"] == ("failed", [f"{artifacts / 'bmk_job-d' / 'run.json'} records no outcome for this job: its "
                                       "run stopped before it finished (the runner job was cancelled, timed out or "
                                       "killed)"])
    assert got["job-e"] == ("failed", [f"artifact {artifacts / 'bmk_job-e'} holds no run.json: the job's run did "
                                       "not start, or did not get to write it"])
    assert got["job-f"] == ("failed", ["no artifact: the matrix job did not upload its results"])
    assert sorted(p.name for p in (tmp_path / "merged" / "jobs").iterdir()) == ["job-a", "job-d"]
    # the workflow's collect step, as GitHub runs it: the run written, every failure said, exit 1
    steps = workflow([Path("recipes/chg.yaml")])["jobs"]["collect"]["steps"]
    merge = _step({"steps": steps}, "Merge the jobs into one run")
    env = {"JOBS": json.dumps(expected), "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1"}
    done = _bash(merge["run"], tmp_path, env, _cli_shim(tmp_path))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "  failed: job-b: artifacts/bmk_job-b/run.json is not valid JSON (Unterminated" in done.stderr
    assert "collected 6 jobs into sweep (1 with a result)" in done.stderr
    written = json.loads((tmp_path / "sweep" / "run.json").read_text())["outcomes"]
    assert [(o["job_id"], o["status"]) for o in written] == [(o["job_id"], o["status"]) for o in meta["outcomes"]]
    after = steps[steps.index(merge) + 1:]
    assert after and all(s["if"] == "${{ (!cancelled() || (needs.sweep.result == 'failure' && "
                         "needs.setup.outputs.fail-fast == 'true')) && hashFiles('sweep/run.json') != '' }}"
                         for s in after)


def test_ci_matrix_refuses_changed_jobs_its_files_do_not_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow compared the branch's two commits while planning the merge checkout: a pull request's own job
    whose id differs once merged was dropped from the matrix without a word."""
    repo, base, head = scratch_repo(tmp_path)
    monkeypatch.chdir(repo)
    recipe = repo / "recipes" / "chg.yaml"
    recipe.write_text(recipe.read_text().replace("20260730", "20260801"))  # the checked-out tree differs from HEAD
    res = CliRunner().invoke(cli, ["ci", "matrix", "recipes/chg.yaml", "--changed", f"{base}..{head}"])
    assert isinstance(res.exception, ConfigError) and "not in the plan of the files given" in str(res.exception)
    against_tree = CliRunner().invoke(cli, ["ci", "matrix", "recipes/chg.yaml", "--changed", f"{base}.."])
    assert against_tree.exit_code == 0, against_tree.output
    assert len(json.loads(against_tree.stdout)["include"]) == 5  # the image changed every job


def test_ci_matrix_takes_a_directory_so_a_recipe_the_change_adds_is_swept(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _, head = scratch_repo(tmp_path)
    monkeypatch.chdir(repo)
    text = (repo / "recipes" / "chg.yaml").read_text().replace("chg-sim:", "chg-new:")
    (repo / "recipes" / "new.yaml").write_text(text)  # a recipe file added by the change
    res = CliRunner().invoke(cli, ["ci", "matrix", "recipes", "--changed", f"{head}.."])
    assert res.exit_code == 0, res.output
    assert {e["recipe"] for e in json.loads(res.stdout)["include"]} == {"chg-new"}


def test_ci_matrix_refuses_more_jobs_than_a_github_matrix_runs(tmp_path: Path) -> None:
    recipe = tmp_path / "big.yaml"
    recipe.write_text(RECIPE.format(tp4_concs=list(range(1, 300)), arm_var="a"))
    res = CliRunner().invoke(cli, ["ci", "matrix", str(recipe)])
    assert isinstance(res.exception, ConfigError)  # exit 2 from the command line
    assert "301 jobs in one matrix: GitHub runs at most 256 jobs of a matrix" in str(res.exception)
    # `ci github` refuses it too, before it writes a workflow whose setup job would fail on every push to main
    out = tmp_path / ".github" / "workflows" / "wf.yml"  # the repository the workflow runs in holds the recipe
    res = CliRunner().invoke(cli, ["ci", "github", str(recipe), "--out", str(out)])
    assert isinstance(res.exception, ConfigError) and "301 jobs in one matrix" in str(res.exception)
    assert not out.exists()


def _evaluate(expression: str, github: dict[str, object], matrix: dict[str, object] | None = None,
              **names: object) -> object:
    """A GitHub Actions expression of the forms the workflow writes, evaluated for one event (`&&`/`||` return an
    operand, as GitHub's do; `labels.*.name` is the list of the labels' names, empty where the event has none);
    `names`: more contexts and functions (`needs`, `cancelled`)."""
    import re

    class Context(dict[str, object]):
        def __getattr__(self, name: str) -> object:  # a property the event lacks is null (falsy), as on GitHub
            return self.get(name, Context())

        def __missing__(self, name: str) -> object:
            return Context()

    def ns(value: object) -> object:
        if value is None:
            return Context()
        return Context({k: ns(v) for k, v in value.items()}) if isinstance(value, dict) else value

    def star(items: object, key: str) -> list[object]:
        return [item[key] for item in items] if isinstance(items, list) else []

    code = re.sub(r"([\w.]+)\.\*\.(\w+)", r"star(\1, '\2')", expression)
    code = re.sub(r"(?<=\w)\.(\w+(?:-\w+)+)", r"['\1']", code)  # a property with a hyphen: `outputs.fail-fast`
    code = code.replace("&&", " and ").replace("||", " or ").replace("!=", "\0").replace("!", " not ")
    env = {"github": ns(github), "matrix": ns(matrix), "fromJSON": json.loads, "star": star,
           "contains": lambda seq, item: item in seq, "format": lambda text, *args: text.format(*args),
           **{k: ns(v) if isinstance(v, dict) else v for k, v in names.items()}}
    return eval(code.replace("\0", "!="), env)  # the workflow's own expressions, in a test


def _interpolate(text: str, github: dict[str, object], matrix: dict[str, object] | None = None) -> str:
    """`text` with its `${{ … }}` evaluated, as GitHub writes a value (`true`/`false` for a boolean)."""
    import re

    def value(m: re.Match[str]) -> str:
        result = _evaluate(m[1], github, matrix)
        return str(result).lower() if isinstance(result, bool) else str(result or "")

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


@pytest.mark.parametrize(("action", "label", "on_pr", "sweeps"), [
    ("labeled", "documentation", ["full-sweep-enabled"], False),
    ("unlabeled", "documentation", ["full-sweep-enabled"], False),
    ("labeled", "full-sweep-fail-fast", ["full-sweep-fail-fast"], True),
    ("unlabeled", "full-sweep-enabled", [], True),  # the sweep stops (or its fail-fast changes)
    ("synchronize", None, ["full-sweep-enabled"], True),
    # a modifier label changes what a labelled pull request sweeps (`ci matrix --evals-only`/`--all-evals`) ...
    ("labeled", "evals-only", ["full-sweep-enabled", "evals-only"], True),
    ("unlabeled", "evals-only", ["full-sweep-fail-fast"], True),
    ("labeled", "all-evals", ["full-sweep-fail-fast", "all-evals"], True),
    ("unlabeled", "all-evals", ["full-sweep-enabled", "evals-only"], True),
    # ... and alone runs nothing: no sweep to restart, nor one cancelled
    ("labeled", "evals-only", ["evals-only"], False),
    ("unlabeled", "all-evals", ["documentation"], False),
])
def test_only_a_label_that_changes_what_runs_restarts_the_sweep(action: str, label: str | None, on_pr: list[str],
                                                                sweeps: bool) -> None:
    """Adding an unrelated label to a pull request used to cancel its running sweep (one concurrency group) and start
    it again on the multi-node cluster. `on_pr`: the pull request's labels once the event's is added or removed."""
    doc = workflow([Path("recipes/chg.yaml")], source="changes")
    assert "unlabeled" in doc["on"]["pull_request"]["types"]
    event = {"event_name": "pull_request", "ref": "refs/pull/7/merge", "run_id": 99,
             "event": {"action": action, "label": {"name": label} if label else None,
                       "pull_request": {"number": 7, "labels": [{"name": name} for name in on_pr]}}}
    assert bool(_evaluate(doc["jobs"]["setup"]["if"], event)) is sweeps
    group = _interpolate(doc["concurrency"]["group"], event)
    assert (group == "llmsweep-7") is sweeps  # the running sweep's group: joining it cancels that sweep
    push = {"event_name": "push", "ref": "refs/heads/main", "run_id": 5, "event": {"action": None}}
    assert _evaluate(doc["jobs"]["setup"]["if"], push)
    # each push to main sweeps the jobs it changed: a second push must not cancel the first one's sweep
    later = {**push, "run_id": 6}
    assert _interpolate(doc["concurrency"]["group"], push) != _interpolate(doc["concurrency"]["group"], later)


def test_a_runner_label_the_fleet_file_omits_is_vouched_for_by_name(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """InferenceX's own master names `cluster:mi325x-tw`, which its runners.yaml does not list: `ci matrix` refused
    it even with that runners.yaml, and its fix (edit the runner file) meant inventing nodes in InferenceX's file."""
    recipe = tmp_path / "tw.yaml"
    text = RECIPE.format(tp4_concs="[2]", arm_var="a")
    recipe.write_text(text.replace("runner: mi300x", "runner: cluster:mi325x-tw"))
    refused = CliRunner().invoke(cli, ["ci", "matrix", str(recipe)])
    assert isinstance(refused.exception, ConfigError)
    assert "--runner-label cluster:mi325x-tw" in (refused.exception.fix or "")
    res = CliRunner().invoke(cli, ["ci", "matrix", str(recipe), "--runner-label", "cluster:mi325x-tw"])
    assert res.exit_code == 0, res.output
    assert {e["runner"] for e in json.loads(res.stdout)["include"]} == {"cluster:mi325x-tw"}
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "sweep.yml"
    wrote = CliRunner().invoke(cli, ["ci", "github", "tw.yaml", "--out", str(out), "--runner-label",
                                     "cluster:mi325x-tw"])
    assert wrote.exit_code == 0, wrote.output
    assert "--runner-label cluster:mi325x-tw" in out.read_text()  # the workflow's own `ci matrix` step vouches too


def _cli_shim(tmp_path: Path) -> Path:
    """A folder holding `llmsweep`: the CLI of the tree under test, for a workflow step run by bash."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "llmsweep").write_text(f"#!{sys.executable}\nimport sys\nfrom llmsweep.cli.main import main\n"
                                   "main(sys.argv[1:])\n")
    (shim / "llmsweep").chmod(0o755)
    return shim


@pytest.mark.parametrize("typed", ["relative", "absolute"])
def test_the_workflow_names_the_recipes_relative_to_the_repository_root(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        typed: str) -> None:
    """`ci github` run from a subfolder (`../recipes/chg.yaml`) or given absolute paths wrote them into the workflow
    as typed; its steps run at the root of the repository's checkout on another machine, where neither names the
    file. A recipe outside the repository is refused: the runners would not have it."""
    import yaml

    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    git(repo, "init", "-q")
    recipe = write_recipe(repo)
    fleet = repo / "fleet.yaml"
    fleet.write_text("labels:\n  mi300x: [mi300x-amds_0]\n")
    monkeypatch.chdir(repo / "sub")
    out = repo / ".github" / "workflows" / "sweep.yml"
    given = ["../recipes/chg.yaml", "../fleet.yaml"] if typed == "relative" else [str(recipe), str(fleet)]
    wrote = CliRunner().invoke(cli, ["ci", "github", given[0], "--runner-config", given[1], "--out", str(out)])
    assert wrote.exit_code == 0, wrote.output
    jobs = yaml.safe_load(out.read_text())["jobs"]
    matrix_step, run_step = _step(jobs["setup"], "matrix"), _step(jobs["sweep"], "Run the job")
    for step in (matrix_step, run_step):
        assert "recipes/chg.yaml --runner-config fleet.yaml " in step["run"]
        assert "../" not in step["run"] and str(repo) not in step["run"]
    # the setup step, run at the repository root as GitHub runs it, plans the recipe
    push: dict[str, Any] = {"event_name": "push", "event": {"action": None}}
    outputs = tmp_path / "github-output"
    env = {k: _interpolate(v, push) for k, v in matrix_step["env"].items()}
    done = _bash(matrix_step["run"], repo, {**env, "GITHUB_OUTPUT": str(outputs)}, _cli_shim(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"count={len(jobs_from_files([recipe], runner_config=fleet))}" in outputs.read_text().splitlines()
    outside = tmp_path / "outside.yaml"
    shutil.copy(recipe, outside)
    refused = CliRunner().invoke(cli, ["ci", "github", str(outside), "--out", str(out)])
    assert isinstance(refused.exception, ConfigError), refused.output
    assert f"{outside} is outside the repository the workflow runs in ({repo})" in refused.exception.message
    assert f"move or copy it into {repo}" in (refused.exception.fix or "")
    # the default --out, written from the subfolder, would land in sub/.github/workflows, which GitHub never reads
    default = CliRunner().invoke(cli, ["ci", "github", given[0], "--runner-config", given[1]])
    assert isinstance(default.exception, ConfigError), default.output
    assert f"below the root of its repository ({repo})" in default.exception.message
    assert f"--out {repo / '.github' / 'workflows'}" in (default.exception.fix or "")
    assert not (repo / "sub" / ".github").exists()


def test_a_vouched_runner_label_reaches_the_runner_jobs_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow's own setup and runner scripts, run by bash: with `--runner-label`, the runner job's `llmsweep
    run` runs the job it is given on that label. `ci github` passed the label to `ci matrix` only, so every runner's
    `run` refused its job as an unknown label (`fleet.unknown-label`), and `ci github` said so and wrote it anyway."""
    import yaml

    shim = _cli_shim(tmp_path)
    recipe = write_recipe(tmp_path)
    recipe.write_text(recipe.read_text().replace("runner: mi300x", "runner: cluster:mi325x-tw"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / ".github" / "workflows" / "sweep.yml"
    wrote = CliRunner().invoke(cli, ["ci", "github", "recipes/chg.yaml", "--out", str(out), "--runner-label",
                                     "cluster:mi325x-tw"])
    assert wrote.exit_code == 0, wrote.output
    assert "refused" not in wrote.stderr, wrote.stderr  # nothing the runners' `run` will refuse
    jobs = yaml.safe_load(out.read_text())["jobs"]
    matrix_step, run_step = _step(jobs["setup"], "matrix"), _step(jobs["sweep"], "Run the job")
    push: dict[str, Any] = {"event_name": "push", "event": {"action": None}}
    outputs = tmp_path / "github-output"
    env = {k: _interpolate(v, push) for k, v in matrix_step["env"].items()}
    done = _bash(matrix_step["run"], tmp_path, {**env, "GITHUB_OUTPUT": str(outputs)}, shim)
    assert done.returncode == 0, done.stdout + done.stderr
    entry = json.loads(dict(line.split("=", 1) for line in outputs.read_text().splitlines())["matrix"])["include"][0]
    assert jobs["sweep"]["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    assert entry["runner"] == "cluster:mi325x-tw"
    run_env = {k: _interpolate(v, push, entry) for k, v in run_step["env"].items()}
    ran = _bash(run_step["run"], tmp_path, {**run_env, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}, shim)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    meta = json.loads((tmp_path / "runs" / entry["job"] / "run.json").read_text())
    assert [(o["job_id"], o["status"]) for o in meta["outcomes"]] == [(entry["job"], "valid")]
    assert meta["runner_labels"] == ["cluster:mi325x-tw"]  # what the run vouched for is on its record


def _at_8k1k(path: Path) -> Path:
    """The scratch recipe at 8k1k, where InferenceX marks rows for an accuracy eval (`run-eval`)."""
    path.write_text(path.read_text().replace("isl: 256", "isl: 8192").replace("osl: 64", "osl: 1024"))
    return path


def test_ci_matrix_gives_every_job_an_entry_its_evals_included(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ci matrix` dropped every `run-eval` row (its throughput point and its eval) and every eval-only job without a
    word, because the workflow did not install lm-eval: now every planned job has an entry, `eval: true` on those
    that run an eval (the workflow installs lm-eval for them). A job the runner's `run` refuses whatever it has keeps
    its entry and is said on stderr with the reason: here the multi-node row, whose eval needs its deployment served
    live, which the workflow's `run` (virtual time) does not do."""
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)  # the runner has lm-eval; this machine need not
    files = [_at_8k1k(write_recipe(tmp_path, tp4_concs="[2, 4, 16, 32]")),
             write_multinode(tmp_path, concs="[8, 16, 32]", isl=8192, osl=1024)]
    jobs = jobs_from_files(files)
    assert sum(carries_eval(j) for j in jobs) == 2  # tp4's conc 32 and the multi-node row (eval at 32)
    res = CliRunner().invoke(cli, ["ci", "matrix", *map(str, files)])
    assert res.exit_code == 0, res.output
    include = json.loads(res.stdout)["include"]
    assert sorted(e["job"] for e in include) == sorted(j.id for j in jobs)
    assert {e["job"]: e["eval"] for e in include} == {j.id: carries_eval(j) for j in jobs}
    (multinode,) = [j for j in jobs if j.multinode]
    # counted as `run` runs them: the multi-node row's three points apart, only its eval point (32) refused
    assert f"note: 1 of the {len(jobs) + 2} jobs (a multi-node job's points counted apart) will be refused by " \
           f"`llmsweep run` on the runner (e.g. {multinode.id}-conc32): the accuracy eval of a multinode job needs " \
           "its deployment served live" in res.stderr
    assert res.stderr.count("note:") == 1  # the single-node eval runs: lm-eval is installed where it runs


def _grown_8k1k_curve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A repository (the working directory now) whose 8k1k TP4 curve grows from conc 32 to 64 in its second commit,
    which makes 64 the curve's eval point; returns both commits."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    _at_8k1k(write_recipe(repo, tp4_concs="[2, 4, 16, 32]"))
    base = commit(repo, "base")
    _at_8k1k(write_recipe(repo, tp4_concs="[2, 4, 16, 32, 64]"))
    head = commit(repo, "head")
    monkeypatch.chdir(repo)
    return base, head


def test_ci_matrix_changed_keeps_the_eval_point_a_change_adds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --changed, the point a change added was exactly one `ci matrix` dropped: adding conc 64 to an 8k1k curve
    makes it the curve's eval point (`run-eval`), and it had no entry."""
    base, head = _grown_8k1k_curve(tmp_path, monkeypatch)
    res = CliRunner().invoke(cli, ["ci", "matrix", "recipes/chg.yaml", "--changed", f"{base}..{head}"])
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(res.stdout)["include"]
    assert "_tp4-" in entry["job"] and "_conc64_" in entry["job"] and entry["eval"] is True


def test_the_runner_job_installs_lm_eval_only_for_an_entry_that_carries_an_eval() -> None:
    from llmsweep.evals.harness import ENV_VAR, PINNED_VERSION

    doc = workflow([Path("recipes/chg.yaml")])
    steps = doc["jobs"]["sweep"]["steps"]
    names = [s.get("name", s.get("uses")) for s in steps]
    install = next(s for s in steps if "lm-eval" in s.get("name", ""))
    assert names.index(install["name"]) < names.index("Run the job")  # the harness is there before the job runs
    assert f"'lm-eval[api]=={PINNED_VERSION}'" in install["run"] and f"{ENV_VAR}=" in install["run"]
    assert '>> "$GITHUB_ENV"' in install["run"]  # the steps after it (`llmsweep run`) see LLMSWEEP_LM_EVAL
    assert install["if"] == "matrix.eval"  # the entry's boolean (`ci matrix`): a throughput job installs nothing


def test_the_reviewers_mixed_file_gets_every_planned_job(tmp_path: Path, shared_dir: Path) -> None:
    """The reproduction: `dsr1-fp4-mi355x-sglang` (two TP curves whose conc 32/64 points run evals) and
    `qwen3.5-fp8-mi355x-sglang-disagg` from InferenceX's master plan 11 jobs; `ci matrix` gave 6, saying nothing."""
    import yaml

    ref = shared_dir / "reference" / "inferencex"
    master = yaml.safe_load((ref / "amd-master.yaml").read_text())
    keys = ("dsr1-fp4-mi355x-sglang", "qwen3.5-fp8-mi355x-sglang-disagg")
    recipe = tmp_path / "f.yaml"
    recipe.write_text(yaml.safe_dump({k: master[k] for k in keys}, sort_keys=False))
    ids = CliRunner().invoke(cli, ["matrix", "test-config", "--config-files", str(recipe), "--runner-config",
                                   str(ref / "runners.yaml"), "--config-keys", "*", "--format", "ids"])
    assert ids.exit_code == 0, ids.output
    res = CliRunner().invoke(cli, ["ci", "matrix", str(recipe), "--runner-config", str(ref / "runners.yaml")])
    assert res.exit_code == 0, res.output
    include = json.loads(res.stdout)["include"]
    assert sorted(e["job"] for e in include) == sorted(ids.stdout.split()) and len(include) == 11
    assert sum(e["eval"] for e in include) == 5  # 4 run-eval points of the TP curves, the disaggregated row
    # they cannot run on a runner (no `serve`; a real engine's roles): each reason said once, with its count
    counted = "of the 15 jobs (a multi-node job's points counted apart) will be refused"  # as `run` runs them
    assert f"note: 10 {counted}" in res.stderr and "no `serve` section" in res.stderr
    # the disaggregated row: its own reason (a real engine's roles are not launched), not its eval's, whose fix
    # (--no-evals) would not make it run
    assert f"note: 5 {counted}" in res.stderr and "disaggregated prefill/decode launch is not" \
        in res.stderr and "served live" not in res.stderr


def test_a_job_a_policy_error_will_refuse_on_the_runner_is_said_up_front() -> None:
    """The seed recipe's HiCache arm breaks an engine rule (`validate` says error [engine.known-incompatibility]), so
    the runner's `run --job` refuses its four jobs: `ci matrix` gave them entries and said nothing."""
    seed = Path(__file__).resolve().parents[3] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    res = CliRunner().invoke(cli, ["ci", "matrix", str(seed)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["include"]) == 9
    assert "note: 4 of the 9 jobs will be refused by `llmsweep run` on the runner" in res.stderr
    assert "policy error [engine.known-incompatibility]" in res.stderr
    # under the eval labels, the HiCache arm's eval-only jobs too: `validate` planned the plain plan only, whose
    # findings name no `…_eval_…` id (the runner's `run --all-evals` refuses 4 of them)
    for flags, said in ((["--all-evals"], "note: 8 of the 18 jobs"), (["--all-evals", "--evals-only"],
                                                                       "note: 4 of the 9 jobs")):
        labelled = CliRunner().invoke(cli, ["ci", "matrix", str(seed), *flags])
        assert labelled.exit_code == 0 and said in labelled.stderr, (flags, labelled.stderr)
        assert "policy error [engine.known-incompatibility]" in labelled.stderr


def _planned_by_run(args: list[str]) -> dict[str, Job]:
    """The jobs `llmsweep run ARGS` plans (its files under its eval flags, the arguments parsed by the real command):
    where the runner's `run --job ID` looks the id up."""
    from llmsweep.cli.run import run
    from llmsweep.plan.matrix import EvalOptions

    params = run.make_context("run", list(args)).params
    evals = EvalOptions(no_evals=params["no_evals"], evals_only=params["evals_only"], all_evals=params["all_evals"])
    return {job.id: job for job in jobs_from_files(list(params["files"]), evals=evals)}


@pytest.mark.parametrize(("flags", "plans"), [
    ((), {"": 6}),  # no modifier label: the plain plan (tp4's conc 32 runs its point, then its eval)
    (("--evals-only",), {"--evals-only": 1}),  # the eval row alone, eval-only
    (("--all-evals",), {"--no-evals": 6, "--all-evals": 6}),  # every 8k1k row's eval, the throughput kept
    (("--evals-only", "--all-evals"), {"--all-evals": 6}),  # InferenceX: throughput dropped, evals expanded
])
def test_ci_matrix_plans_as_the_eval_labels_select(tmp_path: Path, flags: tuple[str, ...],
                                                   plans: dict[str, int]) -> None:
    """InferenceX's PR labels `evals-only` and `all-evals` (core spec §3.3, §7.2) had no counterpart in `ci matrix`:
    a labelled pull request swept the plain plan. Each entry names the `run` flag that plans its id (`plan`): an
    eval-only job's id exists only under --evals-only/--all-evals, and all-evals' throughput jobs run with --no-evals
    (their evals are the eval-only jobs)."""
    recipe = _at_8k1k(write_recipe(tmp_path, tp4_concs="[2, 4, 16, 32]"))
    res = CliRunner().invoke(cli, ["ci", "matrix", str(recipe), *flags])
    assert res.exit_code == 0, res.output
    include = json.loads(res.stdout)["include"]
    assert Counter(e["plan"] for e in include) == plans
    assert len({e["job"] for e in include}) == len(include)
    for entry in include:
        job = _planned_by_run([str(recipe), *([entry["plan"]] if entry["plan"] else []), "--job", entry["job"]])[
            entry["job"]]
        assert entry["eval"] == carries_eval(job)
        assert bool(job.eval_only) == (entry["plan"] in ("--evals-only", "--all-evals"))
        if job.eval_only:  # without its flag, the runner's `run --job` would not find it
            assert entry["job"] not in _planned_by_run([str(recipe)])


def test_ci_matrix_changed_under_the_eval_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --changed, both sides are planned as each entry's `run` plans: adding conc 64 to an 8k1k curve moves its
    eval point there (evals-only: that eval alone) and, under all-evals, adds a throughput point and its eval."""
    base, head = _grown_8k1k_curve(tmp_path, monkeypatch)
    for flag, plans in (("--evals-only", ["--evals-only"]), ("--all-evals", ["--all-evals", "--no-evals"])):
        res = CliRunner().invoke(cli, ["ci", "matrix", "recipes/chg.yaml", "--changed", f"{base}..{head}", flag])
        assert res.exit_code == 0, res.output
        include = json.loads(res.stdout)["include"]
        assert sorted(e["plan"] for e in include) == plans
        assert all("_tp4-" in e["job"] and "_conc64_" in e["job"] for e in include)
        assert {e["plan"]: e["eval"] for e in include} == {p: p != "--no-evals" for p in plans}


_SHIM = '''\
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["run"]:  # plan only: does the plan of these files under these eval flags hold --job's id?
    from llmsweep.cli.run import run
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.matrix import EvalOptions
    p = run.make_context("run", args[1:]).params
    evals = EvalOptions(no_evals=p["no_evals"], evals_only=p["evals_only"], all_evals=p["all_evals"])
    planned = {job.id: job for job in jobs_from_files(list(p["files"]), evals=evals)}
    with open(os.environ["RUN_LOG"], "a") as fh:
        for job in p["only_job"]:
            fh.write(json.dumps({"job": job, "argv": args, "planned": job in planned,
                                 "eval_only": job in planned and bool(planned[job].eval_only)}) + "\\n")
else:
    from llmsweep.cli.main import main
    main(args)
'''


def _step(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if s.get("id") == name or s.get("name") == name)


def _bash(script: str, cwd: Path, env: dict[str, str], shim: Path) -> subprocess.CompletedProcess[str]:
    """A workflow step's script as GitHub runs it (`bash -e`), `llmsweep` on PATH being the shim."""
    import os

    import llmsweep

    full = {**os.environ, **env, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(Path(llmsweep.__file__).resolve().parents[1])}
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize(("on_pr", "plans"), [
    (["full-sweep-enabled"], [""]),  # the plain sweep: the added point is the curve's eval point (`run-eval`)
    (["full-sweep-enabled", "evals-only"], ["--evals-only"]),
    (["full-sweep-fail-fast", "all-evals"], ["--all-evals", "--no-evals"]),
    (["full-sweep-enabled", "all-evals", "evals-only"], ["--all-evals"]),  # InferenceX: the expanded evals alone
])
def test_the_workflow_sweeps_what_the_eval_labels_select(tmp_path: Path, on_pr: list[str], plans: list[str]) -> None:
    """The workflow's own setup and runner scripts, run by bash for a pull request with its labels: the setup job's
    `ci matrix` plans with the labels' flags and every runner job's `llmsweep run` plans its entry's id under the
    same flag. The workflow ignored `evals-only` and `all-evals`, and an eval-only entry's `run --job` without
    its flag would not find the id. A push carries no labels: the plain plan."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "llmsweep").write_text(f"#!{sys.executable}\n{_SHIM}")
    (shim / "llmsweep").chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    _at_8k1k(write_recipe(repo, tp4_concs="[2, 4, 16, 32]"))
    base = commit(repo, "base")
    _at_8k1k(write_recipe(repo, tp4_concs="[2, 4, 16, 32, 64]"))  # the merge checkout: conc 64 added
    doc = workflow([Path("recipes/chg.yaml")], source="changes")
    matrix_step, run_step = _step(doc["jobs"]["setup"], "matrix"), _step(doc["jobs"]["sweep"], "Run the job")
    assert run_step["env"] == {"JOB": "${{ matrix.job }}", "PLAN": "${{ matrix.plan }}"}
    assert '--job "$JOB" ${PLAN:+"$PLAN"} --out' in run_step["run"]

    def setup_matrix(event: dict[str, Any]) -> list[dict[str, Any]]:
        env = {k: _interpolate(v, event) for k, v in matrix_step["env"].items()}
        assert env["EVALS_ONLY"] == str("evals-only" in labels(event)).lower()
        assert env["ALL_EVALS"] == str("all-evals" in labels(event)).lower()
        out = tmp_path / f"github-output-{event['event_name']}"
        done = _bash(matrix_step["run"], repo, {**env, "GITHUB_OUTPUT": str(out)}, shim)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
        return list(json.loads(outputs["matrix"])["include"])

    def labels(event: dict[str, Any]) -> list[str]:
        return [label["name"] for label in event["event"].get("pull_request", {}).get("labels", [])]

    pr: dict[str, Any] = {"event_name": "pull_request", "event": {"action": "labeled", "pull_request": {
        "number": 7, "base": {"sha": base}, "labels": [{"name": name} for name in on_pr]}}}
    include = setup_matrix(pr)
    assert sorted(e["plan"] for e in include) == plans
    log = tmp_path / "runs.jsonl"
    for entry in include:
        run_env = {k: _interpolate(v, pr, entry) for k, v in run_step["env"].items()}
        done = _bash(run_step["run"], repo, {**run_env, "RUN_LOG": str(log)}, shim)
        assert done.returncode == 0, done.stdout + done.stderr
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["job"] for r in runs] == [e["job"] for e in include]
    assert all(r["planned"] for r in runs)  # each runner's `run --job` finds its job
    for entry, ran in zip(include, runs, strict=True):
        assert [a for a in ran["argv"] if a in ("--no-evals", "--evals-only", "--all-evals")] == \
            ([entry["plan"]] if entry["plan"] else [])
        assert ran["eval_only"] is (entry["plan"] in ("--evals-only", "--all-evals"))
    if len(on_pr) == 3:  # a push to main: every job of the plain plan, whatever the merged pull request carried
        pushed = setup_matrix({"event_name": "push", "event": {"action": None}})
        assert {e["plan"] for e in pushed} == {""}
        assert sorted(e["job"] for e in pushed) == sorted(j.id for j in jobs_from_files([repo / "recipes" /
                                                                                        "chg.yaml"]))


def test_the_ci_store_is_the_collect_jobs_only() -> None:
    """`--ci-store PATH` was workflow-wide: every sweep job's `run` opened it (failing where the path is not on the
    GPU runner, or storing its one job there as a run of its own)."""
    doc = workflow([Path("recipes/chg.yaml")], store="/srv/llmsweep/store.sqlite")
    assert "env" not in doc or "LLMSWEEP_STORE" not in doc["env"]
    assert doc["jobs"]["collect"]["env"] == {"LLMSWEEP_STORE": "/srv/llmsweep/store.sqlite"}
    assert "LLMSWEEP_STORE" not in str(doc["jobs"]["sweep"]) and "LLMSWEEP_STORE" not in str(doc["jobs"]["setup"])


def test_validate_render_and_predict_vouch_for_a_runner_label_as_run_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recipe the workflow runs on a vouched label checks locally the same way: `validate`, `render` and `predict`
    take `--runner-label` too (without it they refuse the label as the fleet file omits it, as `run` does)."""
    from support.cli import run_main

    recipe = write_recipe(tmp_path)
    recipe.write_text(recipe.read_text().replace("runner: mi300x", "runner: cluster:mi325x-tw"))
    vouch = ["--runner-label", "cluster:mi325x-tw"]
    code, out, err = run_main(capsys, "validate", recipe)
    assert code == 2 and "fleet.unknown-label" in out + err, out + err
    code, out, err = run_main(capsys, "validate", recipe, *vouch)
    assert code == 0, out + err
    (job, *_) = jobs_from_files([recipe])
    code, out, err = run_main(capsys, "render", recipe, "--job", job.id, "--simulate")
    assert code == 2 and "fleet.unknown-label" in err, out + err
    code, out, err = run_main(capsys, "render", recipe, "--job", job.id, "--simulate", *vouch)
    assert code == 0 and "unknown-label" not in err, out + err
    window = ["--max-requests", "4", "--duration", "30", "--processes", "1", "--json"]
    code, out, err = run_main(capsys, "predict", recipe, *window, *vouch)
    assert code == 0, out + err
    assert {row["job"] for row in json.loads(out) if "summary" in row} >= {job.id}
    code, out, err = run_main(capsys, "predict", recipe, *window)
    assert code == 2 and "fleet.unknown-label" in err, out + err


def test_the_default_out_is_the_workflow_file_the_readme_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`llmsweep ci github recipes/*.yaml …` at the repository root writes `.github/workflows/llmsweep-sweep.yml`,
    where GitHub reads it (the README's Change control example), and says what it wrote."""
    import yaml

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_recipe(repo)
    monkeypatch.chdir(repo)
    wrote = CliRunner().invoke(cli, ["ci", "github", "recipes/chg.yaml", "--baseline", "run-main", "--ci-store",
                                     "/srv/llmsweep/results.sqlite"])
    assert wrote.exit_code == 0, wrote.output
    out = repo / ".github" / "workflows" / "llmsweep-sweep.yml"
    assert "wrote .github/workflows/llmsweep-sweep.yml" in wrote.output
    jobs = yaml.safe_load(out.read_text())["jobs"]
    assert set(jobs) == {"setup", "sweep", "collect"}
    assert "llmsweep run recipes/chg.yaml --job" in _step(jobs["sweep"], "Run the job")["run"]


def test_a_stored_baseline_without_a_ci_store_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collect job runs on an ephemeral runner with no store: a baseline run id would be compared against
    nothing there (`compare` exits 2 on every pull request). Refused when the workflow is written."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_recipe(repo)
    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["ci", "github", "recipes/chg.yaml", "--baseline", "run-main"])
    assert res.exit_code == 2 and "--ci-store" in res.output, res.output
    assert not (repo / ".github").exists()


def test_a_rerun_jobs_upload_replaces_the_earlier_attempts_artifact() -> None:
    """GitHub keeps a run's artifacts across its attempts, and actions/upload-artifact@v4 fails a second upload of a
    name (`409 Conflict: an artifact with this name already exists on the workflow run`) unless it may overwrite: a
    sweep job re-run ("Re-run failed jobs") failed at its upload, and the collect job merged the failed first
    attempt's results under the new attempt's run id; the re-run collect job's dashboard upload failed the same way."""
    jobs = workflow([Path("recipes/chg.yaml")])["jobs"]
    uploads = [s for job in jobs.values() for s in job["steps"]
               if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert {s["with"]["name"] for s in uploads} == {"bmk_${{ matrix.job }}", "dashboard"}
    assert all(s["with"].get("overwrite") is True for s in uploads), uploads


def _run_artifact(artifacts: Path, job: str, status: str = "valid", **meta: Any) -> Path:
    """A runner job's artifact as `llmsweep run --job JOB` leaves it: run.json and the job's folder."""
    run = artifacts / f"bmk_{job}"
    (run / "jobs" / job).mkdir(parents=True)
    (run / "jobs" / job / "job.json").write_text(json.dumps({"id": job}))
    record = {"run_id": f"r-{job}", "llmsweep_version": "0.1.0", "started": "2026-01-01T00:00:00+00:00",
              "recipe_files": ["recipes/chg.yaml"], "executor": "local", "measurement": "m6-aaaa", "repeats": 1,
              "simulated_clock": "virtual", "power_backend": "auto", "expected_job_ids": [job],
              "outcomes": [{"job_id": job, "exp_name": "x", "status": status}], **meta}
    (run / "run.json").write_text(json.dumps({k: v for k, v in record.items() if v is not None}))  # None: absent
    return run / "run.json"


@pytest.mark.parametrize(("field", "other"), [
    ("measurement", "m5-bbbb"), ("llmsweep_version", "0.2.0"), ("simulated_clock", "wall"),
    ("recipe_files", ["recipes/other.yaml"]), ("executor", "slurm"), ("power_backend", "off"),
])
def test_collect_refuses_artifacts_that_did_not_measure_alike(tmp_path: Path, field: str, other: object) -> None:
    """Every artifact's run.json but the first was read for outcomes alone: artifacts measured under another
    llmsweep, measurement definition, clock, executor, power backend or recipe set (the downloads of two workflow
    runs in one folder) merged into one run labelled with the first one's, and its results stored and compared as
    measured alike. Refused, naming both files and what differs, before anything is written."""
    artifacts = tmp_path / "artifacts"
    first = _run_artifact(artifacts, "job-a")
    differs: dict[str, Any] = {field: other}
    second = _run_artifact(artifacts, "job-b", **differs)
    with pytest.raises(ConfigError) as err:
        collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=["job-a", "job-b"])
    said = str(err.value)
    assert f"{second} and {first} disagree on {field}" in said and repr(other) in said, said
    assert not (tmp_path / "sweep").exists()


def test_collect_keeps_what_the_jobs_measured_under(tmp_path: Path) -> None:
    """The merged run.json dropped the fields `run` records of what its jobs measured under (the simulator's clock,
    the power backend, the repeats): the collected run said less than each of its jobs' runs."""
    artifacts = tmp_path / "artifacts"
    _run_artifact(artifacts, "job-a")
    _run_artifact(artifacts, "job-b", simulated_clock=None, eval_settings={"task": "gsm8k"})
    meta = collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=["job-a", "job-b"])
    assert {k: meta.get(k) for k in ("simulated_clock", "power_backend", "repeats", "eval_settings", "measurement")} \
        == {"simulated_clock": "virtual", "power_backend": "auto", "repeats": 1, "eval_settings": {"task": "gsm8k"},
            "measurement": "m6-aaaa"}
    assert json.loads((tmp_path / "sweep" / "run.json").read_text())["simulated_clock"] == "virtual"


def test_collect_refuses_two_artifacts_of_one_job(tmp_path: Path) -> None:
    """Two artifacts holding the same job (two workflow runs' downloads side by side, `gh run download` of each) were
    merged silently: the outcome of the one sorted last won — a failure hidden by a pass, or a pass by a failure — and
    both job folders were copied into one, their files mixed. Refused, naming both files; nothing is written."""
    artifacts = tmp_path / "artifacts"
    passed = _run_artifact(artifacts / "run-1", "job-a")
    failed = _run_artifact(artifacts / "run-2", "job-a", status="failed")
    _run_artifact(artifacts / "run-2", "job-b")
    with pytest.raises(ConfigError) as err:
        collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=["job-a", "job-b"])
    assert f"{failed} and {passed} both record job-a" in str(err.value), str(err.value)
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(("project", "given", "installs"), [
    (None, (), f"pip install llmsweep=={__import__('llmsweep').__version__}"),  # a repository of recipes
    ('[project]\nname = "inference-recipes"\n', (), f"pip install llmsweep=={__import__('llmsweep').__version__}"),
    ('[project]\nname = "llmsweep"\n', (), "pip install ."),  # llmsweep's own checkout
    (None, ("--install", "pip install 'git+https://example.com/llmsweep@v0.1.0'"),
     "pip install 'git+https://example.com/llmsweep@v0.1.0'"),
])
def test_the_workflow_installs_llmsweep_in_a_repository_of_recipes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: str | None, given: tuple[str, ...],
        installs: str) -> None:
    """Every job installed llmsweep with `pip install .`: the checkout of the repository the workflow is in, which
    is llmsweep only in llmsweep's own repository. In a benchmark engineer's repository of recipes each job failed
    at that step (`Directory '.' is not installable`), or installed their project instead of llmsweep. The workflow
    now installs the llmsweep that wrote it (`pip install .` in llmsweep's own checkout), or `--install CMD`."""
    import yaml

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_recipe(repo)
    if project is not None:
        (repo / "pyproject.toml").write_text(project)
    monkeypatch.chdir(repo)
    wrote = CliRunner().invoke(cli, ["ci", "github", "recipes/chg.yaml", *given])
    assert wrote.exit_code == 0, wrote.output
    assert f"installs llmsweep with `{installs}`" in wrote.output
    jobs = yaml.safe_load((repo / ".github" / "workflows" / "llmsweep-sweep.yml").read_text())["jobs"]
    assert [_step(job, "Install llmsweep")["run"] for job in jobs.values()] == [installs] * 3


def test_the_collect_job_waits_for_a_setup_that_planned_the_sweep(tmp_path: Path) -> None:
    """A failed job's outputs written before it failed stay readable: when `ci matrix` failed in the setup job (more
    jobs than a matrix runs under `all-evals`, a changed job the files do not plan), its `run` output was already
    'true' and `count` unset, so the collect job ran anyway (`always()`) and failed a second time, saying only that
    the sweep's job ids were unknown. It runs only after a setup that succeeded."""
    collect_job = workflow([Path("recipes/chg.yaml")])["jobs"]["collect"]
    assert "needs.setup.result == 'success'" in collect_job["if"].split(" && ")
    # what it had said: the merge step with the setup job's `jobs` output unset
    merge = _step(collect_job, "Merge the jobs into one run")
    (tmp_path / "artifacts").mkdir()
    done = _bash(merge["run"], tmp_path, {"JOBS": "", "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1"},
                 _cli_shim(tmp_path))
    assert done.returncode == 2 and "$JOBS, which is empty" in done.stderr, done.stderr


def test_collect_of_one_flat_artifact_whose_run_json_is_cut_fails_its_job(tmp_path: Path) -> None:
    """actions/download-artifact extracts a pattern that matches one artifact flat into its path (no `bmk_<job>`
    folder): a one-job sweep (`--source changes` on a pull request that changes one job) whose run.json was cut
    short was collected as two jobs — a job named `.` failed with the file's problem, and the sweep's job failed for
    `no artifact`. Its job is failed with the file's problem, and is the only job."""
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "run.json").write_text('{"run_id": ')
    meta = collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=["job-a"])
    assert [o["job_id"] for o in meta["outcomes"]] == ["job-a"]
    assert meta["outcomes"][0]["reasons"][0].startswith(f"{artifacts / 'run.json'} is not valid JSON")


def _setup_matrix(tmp_path: Path, repo: Path, doc: dict[str, Any], tag: str) -> tuple[list[dict[str, Any]], str]:
    """The workflow's own setup script, run by bash for a push: its matrix's entries and what it said on stderr."""
    matrix_step = _step(doc["jobs"]["setup"], "matrix")
    push: dict[str, Any] = {"event_name": "push", "event": {"action": None}}
    env = {k: _interpolate(v, push) for k, v in matrix_step["env"].items()}
    out = tmp_path / f"github-output-{tag}"
    done = _bash(matrix_step["run"], repo, {**env, "GITHUB_OUTPUT": str(out)}, _cli_shim(tmp_path / tag))
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return list(json.loads(outputs["matrix"])["include"]), done.stderr


def _timeouts(tmp_path: Path, recipe_text: str, tag: str, **options: Any) -> tuple[dict[str, int], str]:
    """Each job's run timeout as GitHub reads it (the sweep job's `run` step's `timeout-minutes` with its matrix
    entry: what ends a hung run) for the recipe `recipe_text`, and what the setup said on stderr. The job's own
    timeout-minutes is checked to come the allowance later."""
    repo = tmp_path / tag
    (repo / "recipes").mkdir(parents=True)
    (repo / "recipes" / "chg.yaml").write_text(recipe_text)
    doc = workflow([Path("recipes/chg.yaml")], **options)
    include, said = _setup_matrix(tmp_path, repo, doc, tag)
    sweep = doc["jobs"]["sweep"]
    (run,) = [step for step in sweep["steps"] if step.get("name") == "Run the job"]
    push: dict[str, Any] = {"event_name": "push", "event": {"action": None}}
    allowance = options.get("allowance_minutes", 30)
    runs = {e["job"]: int(_interpolate(run["timeout-minutes"], push, e)) for e in include}
    assert {e["job"]: int(_interpolate(sweep["timeout-minutes"], push, e)) for e in include} == {
        job: minutes + allowance for job, minutes in runs.items()}
    # keyed by the job's topology and concurrency: its id's hash changes with the recipe
    return {"/".join(re.search(r"_(tp\d+)-.*_(conc\d+)_", job).groups()):  # type: ignore[union-attr]
            minutes for job, minutes in runs.items()}, said


def test_each_sweep_job_times_out_after_the_longest_its_run_can_take(tmp_path: Path) -> None:
    """The runner jobs had no timeout-minutes: a hung benchmark held its self-hosted GPU runner for GitHub's default
    six hours. Each job's timeout is now what its run's own limits allow — its server's start-up deadline, its
    warm-up and profiling requests at the request timeout over its lanes, its window — plus --allowance-minutes, so
    it follows the plan: a later start-up deadline, more prompts, a longer allowance each lengthen it by their own
    amount, and a smaller sweep frees its runner sooner."""
    plain = RECIPE.format(tp4_concs="[2, 4]", arm_var="a")
    base, _ = _timeouts(tmp_path, plain, "base")
    assert set(base) == {"tp4/conc2", "tp4/conc4", "tp8/conc2", "tp8/conc4"}
    assert all(30 < minutes < 360 for minutes in base.values()), base  # below GitHub's six hours
    # the recipe's start-up deadline (serve.health-timeout, 30 min by default) is the run's: one more hour, 60 more
    slow_start, _ = _timeouts(tmp_path, plain.replace("  serve:\n", "  serve:\n    health-timeout: 5400\n"), "start")
    assert {job: slow_start[job] - base[job] for job in base} == dict.fromkeys(base, 60)
    # twice the prompts per lane: 4 more rounds of the 10-minute request timeout at any concurrency
    more, _ = _timeouts(tmp_path, plain.replace("num-prompts-per-conc: 4", "num-prompts-per-conc: 8"), "prompts")
    assert {job: more[job] - base[job] for job in base} == dict.fromkeys(base, 40)
    # the allowance for what the run does not bound (checkout, installs, an image's pull) is the workflow's option
    tight, _ = _timeouts(tmp_path, plain, "tight", allowance_minutes=5)
    assert {job: base[job] - tight[job] for job in base} == dict.fromkeys(base, 25)


def test_an_agentic_jobs_timeout_follows_its_window_and_a_whole_trace_replay_keeps_githubs(tmp_path: Path) -> None:
    """An agentic point runs for its window (`duration`): a window twice as long gives its runner job that much more
    time. A replay of a whole Mooncake trace runs as long as the trace, which no plan bounds: it keeps GitHub's six
    hours, and the setup says so with the fix (a `duration`, or `max-rows` replayed in closed loop)."""
    recipe = (Path(__file__).parents[2] / "data" / "recipes" / "run" / "replay-sim.yaml").read_text()
    agentic = recipe.replace("  workload:\n    replay:\n      mooncake: TRACE\n", "")
    short, _ = _timeouts(tmp_path, agentic.replace("  serve:\n", "  workload: {duration: 1800}\n  serve:\n"), "short")
    long, _ = _timeouts(tmp_path, agentic.replace("  serve:\n", "  workload: {duration: 3600}\n  serve:\n"), "long")
    assert [long[job] - short[job] for job in short] == [30]
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 64, "output_length": 8, "hash_ids": [1]}\n')
    whole, said = _timeouts(tmp_path, recipe.replace("TRACE", str(trace)), "whole")
    assert list(whole.values()) == [360 - 30]  # the job GitHub's six hours; its run the allowance less, so it fails
    assert "1 job (" in said and "replays a whole trace, whose length nothing in the plan bounds" in said
    assert "give the replay a `duration`" in said
    windowed, said = _timeouts(tmp_path, recipe.replace("TRACE", str(trace)).replace(
        "  workload:\n    replay:", "  workload:\n    duration: 600\n    replay:"), "windowed")
    assert max(windowed.values()) < 360 and "a whole trace" not in said
    # `max-rows`, as the note offers, bounds a closed-loop replay: its rows over its lanes at the request timeout
    # (the note offered it, but nothing read it: the replay kept GitHub's six hours)
    rows = recipe.replace("TRACE", str(trace)).replace("      mooncake: ", "      max-rows: 8\n      mooncake: ")
    capped, said = _timeouts(tmp_path, rows, "rows")
    assert max(capped.values()) < 360 and "a whole trace" not in said
    more, _ = _timeouts(tmp_path, rows.replace("max-rows: 8", "max-rows: 16"), "more-rows")
    assert [more[job] - capped[job] for job in capped] == [20]  # 8 more rows over 4 lanes: 2 rounds of 10 minutes
    # on the trace's timestamps its length is the trace's, `max-rows` or not
    timed, said = _timeouts(tmp_path, rows.replace("      mooncake: ", "      timestamps: true\n      mooncake: "),
                            "timed")
    assert list(timed.values()) == [360 - 30] and "replays a whole trace" in said


@pytest.mark.parametrize(("requests", "lanes", "warmups", "per_lane", "window", "bound"), [
    (8, 2, 0, 0, None, (8 / 2 + 1) * 600),  # list scheduling: n / lanes rounds, and one for the request caught last
    (8, 2, 4, 0, None, (4 / 2 + 1) * 600 + (8 / 2 + 1) * 600),  # the shared warm-ups first
    (None, 4, 0, 11, 1800.0, 11 * 600 + 1800 + 30),  # an agentic lane's primer and warm-up turns, then its window
    (None, None, 0, 0, None, None),  # a whole trace at its own timestamps: its length is the trace's
])
def test_a_loads_bound_is_its_requests_at_the_request_timeout_over_its_lanes(
        requests: int | None, lanes: int | None, warmups: int, per_lane: int, window: float | None,
        bound: float | None) -> None:
    from llmsweep.workload.scenario import Load

    load = Load(concurrency=lanes, num_requests=requests, duration_s=window, warmup_requests=warmups,
                warmup_per_lane=per_lane)
    assert load.bound_s(request_timeout_s=600, grace_s=30) == bound


def test_a_cancelled_sweep_is_not_collected_and_a_timed_out_job_is_collected_as_failed(tmp_path: Path) -> None:
    """The collect job ran `if: always() && …`, and `always()` holds in a cancelled workflow run too: a sweep that a
    newer push superseded (cancel-in-progress) or a person stopped was merged with its cancelled jobs as failed, and
    stored and compared as a sweep that finished. It is skipped now (`!cancelled()`); a sweep whose jobs failed is
    still collected.

    A job past its `timeout-minutes` ends *cancelled* too, and whether a dependent job's `!cancelled()` holds then is
    not documented: a sweep with one hung job could go uncollected as if stopped by hand. So the job's `run` step
    has a timeout of its own, before the job's: the runner fails a step past its timeout (actions/runner
    `StepsRunner.RunStepAsync`: "The action has timed out", a failed step), the job fails, its results are uploaded
    and the collect job takes it as the failure it is. The job's own timeout is the backstop, the allowance later."""
    doc = workflow([Path("recipes/chg.yaml")], baseline="run-main")
    collect_job, sweep = doc["jobs"]["collect"], doc["jobs"]["sweep"]
    planned = {"setup": {"result": "success", "outputs": {"run": "true", "count": "3"}}}
    push: dict[str, object] = {"event_name": "push", "event": {"action": None}}

    def starts(cancelled: bool, sweep: str) -> bool:
        return bool(_evaluate(collect_job["if"], push, always=lambda: True, cancelled=lambda: cancelled,
                              needs={**planned, "sweep": {"result": sweep}}))

    assert not starts(True, "cancelled")
    assert starts(False, "failure") and starts(False, "success")
    # its steps after the merge: not on a cancel that comes while it runs, either
    assert all(s["if"].startswith("${{ (!cancelled() || ") for s in collect_job["steps"][-5:])
    # a hung run: its step times out first (a failure, which the collect job takes), the job's own timeout later
    names = [step.get("name") for step in sweep["steps"]]
    run = sweep["steps"][names.index("Run the job")]
    upload = sweep["steps"][names.index("Upload the job's results")]
    assert run["timeout-minutes"] == "${{ matrix.run_timeout }}" and sweep["timeout-minutes"] == "${{ matrix.timeout }}"
    assert upload["if"] == "always()" and names.index("Upload the job's results") > names.index("Run the job")
    entries = matrix_entries(jobs_from_files([write_recipe(tmp_path, tp4_concs="[2, 4]")]), allowance_minutes=30)
    assert entries and all(e["run_timeout"] > 0 and e["run_timeout"] + 30 == e["timeout"] for e in entries), entries


@pytest.mark.parametrize("cancelled_counts_needed_cancels", [False, True])
def test_a_sweep_fail_fast_stopped_is_collected_and_one_cancelled_before_a_failure_is_not(
        cancelled_counts_needed_cancels: bool) -> None:
    """`full-sweep-fail-fast`: at the first failed job GitHub cancels the matrix's other jobs. The user expects the
    sweep's finished results collected (stored, reported, compared), its unfinished jobs failed — not a sweep skipped
    as if it had been stopped by hand. GitHub documents `cancelled()` as "the workflow was canceled", and not whether
    it stays false in a job whose needed matrix lost jobs to fail-fast's cancels; the collect job's condition gives
    the same answer under both readings (the parameter). A run cancelled before any job failed — by hand, or
    superseded by a push — is not collected, fail-fast or not."""
    collect_job = workflow([Path("recipes/chg.yaml")], baseline="run-main")["jobs"]["collect"]
    push: dict[str, object] = {"event_name": "push", "event": {"action": None}}

    def collected(*, sweep: str, fail_fast: bool, run_cancelled: bool, setup: str = "success") -> bool:
        """Whether the collect job starts. `run_cancelled`: the workflow run was cancelled. Under the second reading
        `cancelled()` is also true where a needed job was cancelled, as fail-fast's are (its sweep result is then
        `failure`: a job failed, which is what set fail-fast off)."""
        cut = fail_fast and sweep == "failure"
        says_cancelled = run_cancelled or (cancelled_counts_needed_cancels and (cut or sweep == "cancelled"))
        needs = {"setup": {"result": setup, "outputs": {"run": "true", "count": "4",
                                                        "fail-fast": str(fail_fast).lower()}},
                 "sweep": {"result": sweep}}
        return bool(_evaluate(collect_job["if"], push, needs=needs, always=lambda: True,
                              cancelled=lambda: says_cancelled))

    # the sweep ran to its end: collected, whatever its jobs' results
    assert collected(sweep="success", fail_fast=False, run_cancelled=False)
    assert collected(sweep="failure", fail_fast=False, run_cancelled=False)
    assert collected(sweep="success", fail_fast=True, run_cancelled=False)
    # fail-fast stopped it at a failure: collected; also when the run is cancelled after that failure
    assert collected(sweep="failure", fail_fast=True, run_cancelled=False)
    assert collected(sweep="failure", fail_fast=True, run_cancelled=True)
    # cancelled by hand or superseded before any job failed: not collected, fail-fast or not
    assert not collected(sweep="cancelled", fail_fast=True, run_cancelled=True)
    assert not collected(sweep="cancelled", fail_fast=False, run_cancelled=True)
    # without fail-fast a cancel stops the sweep whatever had failed: not collected
    assert not collected(sweep="failure", fail_fast=False, run_cancelled=True)
    # a setup that did not plan the sweep: nothing to collect
    assert not collected(sweep="failure", fail_fast=True, run_cancelled=False, setup="failure")
    # the setup job exports what the condition reads, and the matrix's fail-fast is the same output
    setup = workflow([Path("recipes/chg.yaml")])["jobs"]["setup"]
    assert setup["outputs"]["fail-fast"] == "${{ steps.gate.outputs.fail-fast }}"
    assert "needs.setup.outputs.fail-fast == 'true'" in collect_job["if"]


def _step_key(step: dict[str, Any]) -> str:
    return str(step.get("id") or step.get("name") or step["uses"])


def _collect_steps_run(collect_job: dict[str, Any], needs: dict[str, object], *, cancelled: bool,
                       cancel_at: str | None = None, failing: str | None = None) -> list[str]:
    """The collect job's steps that run (ids, or names where a step has none), each `if` evaluated as the runner
    does (actions/runner `StepsRunner.RunAsync`): a step without one gets the default `success()`, which — like
    `cancelled()` and `failure()` in a step — reads the job's own status, never its needs' results (the job's status
    starts as succeeded); a cancel of the run marks the job cancelled. `cancelled`: what `cancelled()` says from the
    start; `cancel_at`: a step before which the run is cancelled (`cancelled()` true from then on); `failing`: a step
    that fails. `ci collect` writes the run and exits 1 when the sweep did not succeed (a job without a result)."""
    push: dict[str, object] = {"event_name": "push", "event": {"action": None}}
    outcomes: dict[str, dict[str, object]] = {}
    ran: list[str] = []
    failed = wrote = False
    sweep_result = needs["sweep"]["result"] if isinstance(needs["sweep"], dict) else None
    for step in collect_job["steps"]:
        key = _step_key(step)
        cancelled = cancelled or key == cancel_at
        condition = step.get("if", "success()").removeprefix("${{").removesuffix("}}")
        status = "cancelled" if cancelled else "failure" if failed else "success"  # the job's own, as the runner's
        if not _evaluate(condition, push, needs=needs, always=lambda: True,
                         cancelled=lambda s=status: s == "cancelled", success=lambda s=status: s == "success",
                         failure=lambda s=status: s == "failure", steps=dict(outcomes),
                         hashFiles=lambda *_, w=wrote: "f00d" if w else ""):
            outcomes[key] = {"outcome": "skipped"}
            continue
        ran.append(key)
        merge = "llmsweep ci collect" in step.get("run", "")
        fails = key == failing or (merge and sweep_result != "success")
        wrote = wrote or merge
        failed = failed or fails
        outcomes[key] = {"outcome": "failure" if fails else "success"}
    return ran


@pytest.mark.parametrize("cancelled_counts_needed_cancels", [False, True])
def test_every_collect_step_runs_where_the_collect_job_does(cancelled_counts_needed_cancels: bool) -> None:
    """The fail-fast collect condition was the collect job's `if` alone: its checkout, installs, download and merge
    had none, so GitHub gave them `success()`, false in a run cancelled after fail-fast's failure, and the steps after
    the merge asked `!cancelled()`. The job the condition started then skipped every step — nothing merged, stored or
    compared, the job green — under a real cancel and under the reading of `cancelled()` that counts fail-fast's
    cancels. Each step now carries the job's condition: wherever the collect job starts, every step runs, under both
    readings (the parameter; in a step the runner's `cancelled()` is the run's cancel, the first reading, and both are
    checked) and whatever the sweep's result."""
    collect_job = workflow([Path("recipes/chg.yaml")], baseline="run-main")["jobs"]["collect"]
    steps = [_step_key(s) for s in collect_job["steps"]]
    push: dict[str, object] = {"event_name": "push", "event": {"action": None}}
    started = 0
    for sweep in ("success", "failure", "cancelled"):
        for fail_fast in (False, True):
            for run_cancelled in (False, True):
                cut = fail_fast and sweep == "failure"
                says = run_cancelled or (cancelled_counts_needed_cancels and (cut or sweep == "cancelled"))
                needs: dict[str, object] = {
                    "setup": {"result": "success",
                              "outputs": {"run": "true", "count": "4", "fail-fast": str(fail_fast).lower()}},
                    "sweep": {"result": sweep}}
                if not _evaluate(collect_job["if"], push, needs=needs, always=lambda: True,
                                 cancelled=lambda says=says: says):
                    continue
                started += 1
                for step_cancelled in {says, run_cancelled}:
                    ran = _collect_steps_run(collect_job, needs, cancelled=step_cancelled)
                    assert ran == steps, (sweep, fail_fast, run_cancelled, step_cancelled, ran)
    # the run not cancelled: its 6 sweeps (under the second reading, not the 2 whose result is a cancelled job, and
    # the fail-fast one its failure stopped as the second operand's); the run cancelled: the one fail-fast stopped
    assert started == (5 if cancelled_counts_needed_cancels else 7)
    assert steps[:5] == ["checkout", "python", "install", "download", "merge"]

    def needs_of(sweep: str, fail_fast: bool) -> dict[str, object]:
        return {"setup": {"result": "success", "outputs": {"run": "true", "count": "4",
                                                           "fail-fast": str(fail_fast).lower()}},
                "sweep": {"result": sweep}}

    # the run cancelled while the job runs: a sweep fail-fast stopped is collected to its end (not cut off half-way
    # through storing it); one that ran to its end is stopped there, as a cancel stops the rest of a run
    assert _collect_steps_run(collect_job, needs_of("failure", True), cancelled=False, cancel_at="install") == steps
    assert _collect_steps_run(collect_job, needs_of("success", False), cancelled=False,
                              cancel_at="download") == ["checkout", "python", "install"]
    # a step that fails stops the steps up to the merge, as the default `success()` did; with no merged run the steps
    # after it have nothing to take
    assert _collect_steps_run(collect_job, needs_of("failure", True), cancelled=True,
                              failing="install") == ["checkout", "python", "install"]
    # the merge fails (a job without a result) after writing the run: the steps after it still take it
    assert _collect_steps_run(collect_job, needs_of("failure", False), cancelled=False)[-5:] == steps[-5:]


def test_the_workflow_refuses_a_matrix_a_label_makes_too_large_for_github(tmp_path: Path) -> None:
    """`ci github` checked the plain plan's matrix alone; `all-evals` adds an eval-only job for every 8k1k row beside
    the throughput jobs, so a plan of 141 jobs became 282 on a pull request labelled so, and its setup job failed there.
    Every plan the labels can select is checked before the workflow is written. (`run --repeats` and `discover` make
    no matrix entries: the workflow runs neither.)"""
    recipe = _at_8k1k(write_recipe(tmp_path, tp4_concs=str(list(range(1, 140)))))
    assert len(jobs_from_files([recipe])) == 141
    out = tmp_path / ".github" / "workflows" / "wf.yml"
    res = CliRunner().invoke(cli, ["ci", "github", str(recipe), "--out", str(out)])
    assert isinstance(res.exception, ConfigError), res.output
    assert "282 jobs in one matrix under the pull-request label all-evals: GitHub runs at most 256" in \
        str(res.exception)
    assert not out.exists()
    # `ci matrix` names the label too, where the workflow's setup job runs it
    res = CliRunner().invoke(cli, ["ci", "matrix", str(recipe), "--all-evals"])
    assert isinstance(res.exception, ConfigError) and "under the pull-request label all-evals" in str(res.exception)


def test_the_allowance_default_lives_below_the_cli_which_takes_it_from_there() -> None:
    """The sweep's default allowance is the run bound's (`execute.bound`), where the workflow and the matrix read it
    and the CLI option takes its default from: planning a matrix loads nothing of the CLI (it read the default back
    from `cli.options`, a dependency pointing up the data flow)."""
    from llmsweep.cli.options import CONCEPTS
    from llmsweep.execute.bound import DEFAULT_ALLOWANCE_MINUTES

    assert CONCEPTS["allowance_minutes"].settings["default"] == DEFAULT_ALLOWANCE_MINUTES
    code = ("import sys; from llmsweep.changes.github import matrix_entries; matrix_entries([]); "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] == ['llmsweep', 'cli']))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", run.stdout


def test_the_workflow_spells_the_clis_flags_without_loading_the_cli() -> None:
    """The workflow and the matrix write `llmsweep` command lines with the CLI's shared options (`--runner-label`,
    `--evals-only`, `--job`, `--changed`, ...): they read each spelling from `option_spellings`, below every room,
    where the CLI's options take theirs from — not from `cli.options` (a room below the CLI reaching up into it)."""
    from llmsweep.cli.options import CONCEPTS
    from llmsweep.option_spellings import SPELLINGS

    assert {name: c.spelling for name, c in CONCEPTS.items()} == SPELLINGS
    code = ("import sys, json; from pathlib import Path; from llmsweep.changes.github import label_plans, workflow; "
            "plans = [f for f, _ in label_plans(evals_only=True) + label_plans(all_evals=True)]; "
            "doc = workflow([Path('r.yaml')], source='changes', baseline='b', runner_config=Path('f.yaml'), "
            "runner_labels=['cluster:x']); "
            "print(json.dumps([sorted(m for m in sys.modules if m.split('.')[:2] == ['llmsweep', 'cli']), plans, "
            "doc['jobs']['setup']['steps'][-1]['run'], "
            "next(s['run'] for s in doc['jobs']['sweep']['steps'] if s.get('name') == 'Run the job')]))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    loaded, plans, matrix_cmd, run_cmd = json.loads(run.stdout)
    assert loaded == [], f"writing the workflow loads the CLI: {loaded}"
    assert plans == [CONCEPTS["evals_only"].spelling, CONCEPTS["no_evals"].spelling, CONCEPTS["all_evals"].spelling]
    for concept in ("runner_config", "runner_labels", "changed", "allowance_minutes"):
        assert f" {CONCEPTS[concept].spelling} " in matrix_cmd, (concept, matrix_cmd)
    for concept in ("runner_config", "runner_labels", "job", "out"):
        assert f" {CONCEPTS[concept].spelling} " in run_cmd, (concept, run_cmd)


def _runner_job(artifacts: Path, job: str, status: str, ended: str, *, fail_fast: bool = True,
                elapsed_s: str | None = None) -> None:
    """The runner job's record of how it ended (`RUNNER_JOB_FILE`), as the sweep job's step writes it (`elapsed_s`:
    how long it had run, of a 30-minute timeout; None: a record of before the two were written)."""
    folder = artifacts / f"bmk_{job}"
    folder.mkdir(parents=True, exist_ok=True)
    said = {"status": status, "fail_fast": str(fail_fast).lower(), "ended": ended}
    if elapsed_s is not None:
        said |= {"elapsed_s": elapsed_s, "timeout_minutes": "30"}
    (folder / "runner_job.json").write_text(json.dumps(said))


@pytest.mark.parametrize("fail_fast", [True, False])
def test_collect_names_fail_fast_as_what_cut_a_job_short(tmp_path: Path, fail_fast: bool) -> None:
    """A fail-fast sweep stopped by a failed job had its cancelled jobs said to have `no artifact`, or that the runner
    job `was cancelled, timed out or killed` — as if something went wrong on their runners. Each artifact now records
    how its runner job ended, so collect names the cause and the job that failed first; a job cancelled before that
    failure (by hand, its own timeout) and a job that failed itself are not said to be fail-fast's. Without fail-fast
    nothing is said to be fail-fast's."""
    artifacts = tmp_path / "artifacts"
    _run_artifact(artifacts, "ok")
    _runner_job(artifacts, "ok", "success", "2026-01-01T00:00:05Z", fail_fast=fail_fast)
    _run_artifact(artifacts, "first", status="failed")  # fail-fast went off here ...
    _runner_job(artifacts, "first", "failure", "2026-01-01T00:00:10Z", fail_fast=fail_fast)
    _run_artifact(artifacts, "second", status="failed")  # ... and a job failing in the same minute is no casualty
    _runner_job(artifacts, "second", "failure", "2026-01-01T00:00:12Z", fail_fast=fail_fast)
    _run_artifact(artifacts, "running", outcomes=[])  # its run was cancelled mid-way: no outcome
    _runner_job(artifacts, "running", "cancelled", "2026-01-01T00:00:11Z", fail_fast=fail_fast)
    _runner_job(artifacts, "setting-up", "cancelled", "2026-01-01T00:00:11Z", fail_fast=fail_fast)  # no run.json
    _run_artifact(artifacts, "earlier", outcomes=[])  # cancelled before anything failed: not fail-fast's doing
    _runner_job(artifacts, "earlier", "cancelled", "2026-01-01T00:00:01Z", fail_fast=fail_fast)
    # ended by its own 30-minute timeout after the failure (GitHub says `cancelled` of it too): not fail-fast's doing
    _run_artifact(artifacts, "hung", outcomes=[])
    _runner_job(artifacts, "hung", "cancelled", "2026-01-01T00:00:20.000000Z", fail_fast=fail_fast, elapsed_s="1795")
    _run_artifact(artifacts, "cut", outcomes=[])  # cancelled 10 minutes into its 30: fail-fast's
    _runner_job(artifacts, "cut", "cancelled", "2026-01-01T00:00:20.000000Z", fail_fast=fail_fast, elapsed_s="600")
    expected = ["ok", "first", "second", "running", "setting-up", "earlier", "hung", "cut", "queued"]  # queued: never
    # started
    meta = collect(artifacts, tmp_path / "sweep", run_id="gh-1-1", expected=expected)
    said = {o["job_id"]: (o.get("reasons") or [""])[0] for o in meta["outcomes"]}
    cut = "cancelled by fail-fast after first failed"
    assert not any(cut in said[j] for j in ("ok", "first", "second", "earlier", "hung"))
    assert said["hung"].endswith("(the runner job was cancelled, timed out or killed)")
    assert said["cut"].endswith(f"({cut})") == fail_fast
    assert said["earlier"].endswith("its run stopped before it finished (the runner job was cancelled, timed out or "
                                    "killed)")
    if fail_fast:
        assert said["running"] == (f"{artifacts / 'bmk_running' / 'run.json'} records no outcome for this job: its "
                                   f"run stopped before it finished ({cut})")
        assert said["setting-up"] == (f"artifact {artifacts / 'bmk_setting-up'} holds no run.json: the job's run did "
                                      f"not start, or did not get to write it ({cut})")
        assert said["queued"] == f"no artifact: the matrix job did not upload its results ({cut})"
    else:
        assert said["running"].endswith("(the runner job was cancelled, timed out or killed)")
        assert said["setting-up"].endswith("did not get to write it")
        assert said["queued"] == "no artifact: the matrix job did not upload its results"


def test_the_sweep_jobs_record_how_they_ended_and_collect_says_fail_fast_cut_the_rest(tmp_path: Path) -> None:
    """The workflow's own steps, run by bash as GitHub runs them: each sweep job's `always()` step records its
    `job.status` and the setup's fail-fast in its artifact folder, and the collect step then says of the cancelled
    job, and of the one that never started (no artifact), that fail-fast cancelled it after the job that failed."""
    doc = workflow([Path("recipes/chg.yaml")])
    sweep, collect_job = doc["jobs"]["sweep"], doc["jobs"]["collect"]
    record = _step(sweep, "Record how the runner job ended")
    upload = _step(sweep, "Upload the job's results")
    assert record["if"] == "always()" and sweep["steps"].index(record) == sweep["steps"].index(upload) - 1
    assert upload["with"]["path"] == "runs/${{ matrix.job }}"  # the record travels in the job's artifact
    push: dict[str, Any] = {"event_name": "push", "event": {"action": None}}
    needs = {"setup": {"outputs": {"fail-fast": "true"}}}
    shim = _cli_shim(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    # the job's first step notes when it began (in $GITHUB_ENV, read by the steps after it)
    started = sweep["steps"][0]
    assert started["name"] == "Note when the runner job started"
    github_env = work / "github_env"
    done = _bash(started["run"], work, {"GITHUB_ENV": str(github_env)}, shim)
    assert done.returncode == 0, done.stderr
    name, _, began = github_env.read_text().strip().partition("=")
    assert name == "LLMSWEEP_JOB_STARTED" and abs(int(began) - time.time()) < 60
    for job, status in (("job-a", "failure"), ("job-b", "cancelled")):
        def value(m: re.Match[str], job: str = job, status: str = status) -> str:
            return str(_evaluate(m[1], push, {"job": job, "timeout": "30"}, needs=needs, job={"status": status}))

        env = {k: re.sub(r"\$\{\{(.*?)\}\}", value, v) for k, v in record["env"].items()}
        done = _bash(record["run"], work, {**env, "LLMSWEEP_JOB_STARTED": str(int(time.time()) - 100)}, shim)
        assert done.returncode == 0, done.stderr
        said = json.loads((work / "runs" / job / "runner_job.json").read_text())
        assert said["timeout_minutes"] == "30" and 99 <= int(said["elapsed_s"]) <= 160, said
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", said["ended"]), said
        # the runner uploads runs/<job>; download-artifact extracts it as artifacts/bmk_<job>
        shutil.copytree(work / "runs" / job, work / "artifacts" / f"bmk_{job}")
    _run_artifact(work / "artifacts", "job-a", status="failed")  # its run.json beside its record
    merge = _step(collect_job, "Merge the jobs into one run")
    env = {"JOBS": json.dumps(["job-a", "job-b", "job-c"]), "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1"}
    done = _bash(merge["run"], work, env, shim)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert ("  failed: job-b: artifact artifacts/bmk_job-b holds no run.json: the job's run did not start, or did "
            "not get to write it (cancelled by fail-fast after job-a failed)") in done.stderr
    assert ("  failed: job-c: no artifact: the matrix job did not upload its results (cancelled by fail-fast after "
            "job-a failed)") in done.stderr
    assert "job-a: cancelled" not in done.stderr
