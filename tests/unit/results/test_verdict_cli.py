"""`llmsweep compare --baseline RUN --format markdown`: a pull request's verdict per point and the success rate."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.errors import LlmsweepError
from llmsweep.results.verdict import success_rate


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_regression_is_called_only_with_a_between_run_band(make_run, store_path: Path) -> None:
    base = make_run("base", concs=(4,), requests=100)
    reps = [make_run(f"base{i}", concs=(4,), requests=100, seed=10 + i) for i in range(2)]
    slow = make_run("pr", concs=(4, 8), requests=100, seed=5, speed=0.5, expected_extra=("never-ran",))
    _run("results", "ingest", str(base.path))
    md = _run("compare", "--baseline", "base", str(slow.path), "--format", "markdown",
              "--no-history", *[a for r in reps for a in ("--repeats-from", str(r.path))])
    assert "1 regression, 0 improvements, 0 without change, 0 unverified" in md
    assert "❌ regression" in md and "(no between-run band)" not in md
    assert "Sweep success rate: **66.7%** (2/3 jobs)" in md  # the job that never ran counts as a failure
    assert "**New points:**" in md

    # Without repeats nothing can be called: the same slowdown is `unverified` — not a point without change (it
    # said `1 without change` and `➖ no change (no between-run band)` beside a 50% slowdown) —, and says why.
    alone = _run("compare", "--baseline", "base", str(slow.path), "--format", "markdown",
                 "--no-history")
    assert "**0 regressions, 0 improvements, 0 without change, 1 unverified**" in alone, alone
    assert "❔ unverified (no between-run band)" in alone and "➖ no change" not in alone


def test_baseline_takes_exactly_one_run(make_run, store_path: Path) -> None:
    res = CliRunner().invoke(cli, ["compare", "--baseline", "x"])
    assert res.exit_code != 0 and "run under test" in res.output


def test_success_rate_reads_the_runs_outcomes(make_run) -> None:
    run = make_run("r", concs=(1, 4))
    meta = {"outcomes": [{"job_id": "a", "status": "valid"}, {"job_id": "b", "status": "skipped"},
                         {"job_id": "c", "status": "failed"}, {"job_id": "d", "status": "refused"}]}
    rate = success_rate(meta, [])
    assert (rate.success, rate.total, rate.rate) == (2, 4, 0.5)
    assert success_rate(run.meta, []).total == 2  # no outcomes recorded: the expected jobs, none with a result


def test_a_point_the_run_reused_from_the_baseline_is_listed_as_reused(make_run, store_path: Path) -> None:
    """`run --reuse` stood the run's conc-1 job on the baseline's stored result: the verdict lists that point as
    reused, not as one the run did not have (it listed every reused point under "Only in the baseline")."""
    import json

    from llmsweep.results.point import result_id_for
    from llmsweep.results.rundir import load_run

    base = make_run("base", concs=(1, 4), requests=60)
    _run("results", "ingest", str(base.path))
    pr = make_run("pr", concs=(4,), requests=60, seed=3)
    conc1 = next(j.job_id for j in base.jobs if "conc1" in j.job_id)
    meta = json.loads((pr.path / "run.json").read_text())
    meta["reused"] = {f"pr-{conc1}": {"run_id": "base", "job_id": conc1, "result_id": result_id_for("base", conc1),
                                      "verdict": "valid"}}
    (pr.path / "run.json").write_text(json.dumps(meta))
    assert load_run(pr.path).reused  # as `run --reuse` records it
    for ref in (str(pr.path), "pr"):  # a run folder, then the stored run
        if ref == "pr":
            _run("results", "ingest", str(pr.path))
        md = _run("compare", "--baseline", "base", ref, "--format", "markdown", "--no-history")
        assert f"**Reused from the baseline, not measured again:** `{conc1}`" in md, md
        assert "Only in the baseline" not in md
        doc = json.loads(_run("compare", "--baseline", "base", ref, "--json", "--no-history"))
        assert doc["verdict"]["reused"] == [conc1]
        # `compare A B --markdown FILE` (the comparison's PR table) said "Only in A" for the point B reused
        table = pr.path.parent / "compare.md"
        printed = _run("compare", "base", ref, "--markdown", str(table), "--no-history")
        # ... and its terminal table, printed by the same call, said "only in A" for it still
        assert f"reused by B from A, not measured again: {conc1}" in printed, printed
        assert "only in A" not in printed, printed
        said = table.read_text()
        assert f"**Reused by B from A, not measured again:** `{conc1}`" in said, said
        assert "Only in A" not in said
        assert "verdict" not in json.loads(_run("compare", "base", ref, "--json", "--markdown", str(table),
                                                "--no-history"))  # no --baseline: no verdict


def test_points_the_run_stood_on_a_third_runs_results_are_said_not_silently_left_out(make_run,
                                                                                      store_path: Path) -> None:
    """B's `run --reuse` stood its conc-1 job on run C's stored result: comparing A with B left that point out with
    no word ("B has no result", or A's point "only in A"); the comparison now says which run holds it and how to
    compare with it, in the table, the markdown and the JSON alike."""
    import json

    from llmsweep.results.point import result_id_for

    base = make_run("base", concs=(1, 4), requests=60)
    other = make_run("other", concs=(1,), requests=60, seed=5)
    for run in (base, other):
        _run("results", "ingest", str(run.path))
    pr = make_run("pr", concs=(4,), requests=60, seed=3)
    conc1 = next(j.job_id for j in other.jobs if "conc1" in j.job_id)
    meta = json.loads((pr.path / "run.json").read_text())
    meta["reused"] = {f"pr-{conc1}": {"run_id": "other", "job_id": conc1, "result_id": result_id_for("other", conc1),
                                      "verdict": "valid"}}
    (pr.path / "run.json").write_text(json.dumps(meta))
    said = "B (pr) stood 1 job on stored results of run other (`run --reuse`), not on A's"
    printed = _run("compare", "base", str(pr.path), "--no-history")
    assert said in printed and "`llmsweep compare base other` compares them" in printed, printed
    md = _run("compare", "--baseline", "base", str(pr.path), "--format", "markdown",
              "--no-history")
    assert said in md, md
    doc = json.loads(_run("compare", "base", str(pr.path), "--json", "--no-history"))
    assert any(said in n for n in doc["notes"]), doc["notes"]


def test_the_verdict_table_orders_concurrency_as_a_number(make_run, store_path: Path) -> None:
    """Rows sorted by their label put conc 16 and 64 before conc 4."""
    import re

    base = make_run("base", concs=(4, 16, 64), requests=60)
    pr = make_run("pr", concs=(4, 16, 64), requests=60, seed=3)
    _run("results", "ingest", str(base.path))
    md = _run("compare", "--baseline", "base", str(pr.path), "--format", "markdown",
              "--no-history")
    concs = [int(m.group(1)) for m in re.finditer(r"^\| .* · conc (\d+) \|", md, re.M)]
    assert concs == [4, 16, 64], md


def _invalidate(run_path: Path, reason: str) -> None:
    """Mark every job of a run folder invalid, as the gates would (a read-back mismatch they cannot see)."""
    import json

    for summary in run_path.glob("jobs/*/summary.json"):
        doc = json.loads(summary.read_text())
        doc["validity"]["verdict"] = "invalid"
        doc["validity"]["reasons"].append(reason)
        summary.write_text(json.dumps(doc))


def test_a_point_the_change_made_invalid_is_a_regression_not_an_improvement(make_run, store_path: Path) -> None:
    """B's measurement of the point is invalid (its requests may fail fast and look quick): the verdict called it
    an improvement, and `--fail-on-regression` passed. Now the point is a regression that names why, its figures
    call no change, and the gate fails."""
    import json

    base = make_run("base", concs=(4,), requests=100)
    reps = [make_run(f"base{i}", concs=(4,), requests=100, seed=10 + i) for i in range(2)]
    fast = make_run("pr", concs=(4,), requests=100, seed=5, speed=1.6)
    _invalidate(fast.path, "spec acceptance read back 1.0, expected 3.4")
    args = ["--no-history", *[a for r in reps for a in ("--repeats-from", str(r.path))]]
    md = _run("compare", "--baseline", str(base.path), str(fast.path), "--format", "markdown", *args)
    assert "1 regression, 0 improvements, 0 without change" in md, md
    assert "❌ regression (B's measurement is invalid: spec acceptance read back 1.0, expected 3.4)" in md
    doc = json.loads(_run("compare", "--baseline", str(base.path), str(fast.path), "--json", *args))
    (m,) = doc["matched"]
    assert m["invalidated"] and {d["verdict"] for d in m["deltas"]} <= {"unverified", "within noise", "n/a"}
    assert doc["verdict"]["points"][0]["verdict"] == "regression"
    res = CliRunner().invoke(cli, ["compare", str(base.path), str(fast.path), "--fail-on-regression", *args])
    assert res.exit_code == 1 and "1 point B measured invalid where A's is valid" in str(res.exception)
    # a baseline that is invalid calls nothing either way: unverified, and why
    _invalidate(base.path, "warm-up not drained")
    md = _run("compare", "--baseline", str(base.path), str(fast.path), "--format", "markdown", *args)
    assert "❔ unverified (B's measurement is invalid" in md and "0 without change, 1 unverified" in md


def test_the_verdict_names_the_points_it_did_not_compare(make_run, store_path: Path) -> None:
    """A measured baseline against a simulated run: every matched point is refused (sources differ). The verdict said
    `0 regression(s) … over 0 matched point(s)` and nothing else — the refused points were in no list at all."""
    base = make_run("base", concs=(1, 4), requests=40, source="measured")
    sim = make_run("pr", concs=(1, 4), requests=40, seed=2)
    md = _run("compare", "--baseline", str(base.path), str(sim.path), "--format", "markdown",
              "--no-history")
    assert "over 0 matched points, **4 results not compared** (listed below)" in md, md
    line = next(x for x in md.splitlines() if x.startswith("**Not compared:**"))
    assert "sources differ (measured, simulated); pass --mix-sources to compare" in line
    assert all(f"`{j.job_id}`" in line for j in base.jobs)


def test_fail_on_regression_fails_a_comparison_that_compared_nothing(make_run, store_path: Path) -> None:
    """A measured baseline against a simulated run compares no point (sources differ): --fail-on-regression exited 0,
    so a CI gate with a baseline of the wrong kind let every change through."""
    base = make_run("base", concs=(1, 4), requests=40, source="measured")
    sim = make_run("pr", concs=(1, 4), requests=40, seed=2)
    res = CliRunner().invoke(cli, ["compare", "--baseline", str(base.path), str(sim.path),
                                   "--no-history", "--fail-on-regression"])
    said = str(res.exception)
    assert res.exit_code != 0 and "nothing was compared: 4 results were not compared" in said, res.output
    assert "sources differ" in said
    # A's points and a new configuration only B has: A's are compared, the new one passes
    fresh = make_run("new", concs=(1, 4, 8), requests=40, seed=3)
    ok = CliRunner().invoke(cli, ["compare", "--baseline", str(sim.path), str(fresh.path),
                                  "--no-history", "--fail-on-regression"])
    assert ok.exit_code == 0, ok.output
    # and a pull request's new configuration alone (a narrowed sweep): nothing of A's was measured again, nothing
    # near it either, so it passes, and the table says which identity fields kept every point apart
    only_new = make_run("only-new", concs=(8,), requests=40, seed=3)
    res = CliRunner().invoke(cli, ["compare", "--baseline", str(sim.path), str(only_new.path),
                                   "--no-history", "--fail-on-regression"])
    assert res.exit_code == 0, res.output
    assert "no point of A matches a point of B: every point differs in conc (A 1, 4; B 8)" in res.output


def test_the_markdown_verdict_of_a_point_is_the_json_verdict_and_says_what_it_means(make_run,
                                                                                    store_path: Path) -> None:
    """A run against its baseline without repeats: the table and `--json`'s deltas said `❔ unverified`, while the
    Markdown verdict said `➖ no change (no between-run band)` and counted every point `without change`. Both give one
    verdict now, `unverified`, counted as such, with a legend that says what it means — and only what is shown."""
    import json

    base = make_run("base", concs=(1, 4), requests=100)
    slow = make_run("pr", concs=(1, 4), requests=100, seed=5, speed=0.5)
    args = ["--baseline", str(base.path), str(slow.path), "--no-history"]
    md = _run("compare", *args, "--format", "markdown")
    doc = json.loads(_run("compare", *args, "--json"))
    verdicts = [p["verdict"] for p in doc["verdict"]["points"]]
    assert verdicts == ["unverified", "unverified"], doc["verdict"]
    assert doc["verdict"]["counts"] == {"improvement": 0, "regression": 0, "no change": 0, "unverified": 2}
    assert "**0 regressions, 0 improvements, 0 without change, 2 unverified**" in md, md
    rows = [line for line in md.splitlines() if line.startswith("| Qwen")]
    assert len(rows) == 2 and all("| ❔ unverified (no between-run band) |" in row for row in rows), rows
    (legend,) = [line for line in md.splitlines() if line.startswith("_Verdicts:_")]
    from llmsweep.results.verdict import POINT_VERDICT_MEANING  # what each verdict of a point means: its one home

    assert legend == f"_Verdicts:_ ❔ unverified — {POINT_VERDICT_MEANING['unverified']}", legend


def test_the_compare_table_and_markdown_say_what_each_verdict_shown_means(make_run, store_path: Path,
                                                                          tmp_path: Path) -> None:
    """`❔ unverified` and `≈ within noise` were never defined in compare's output: a legend line under the table
    (and the `--markdown` file's) says what each verdict kind shown means, from where the verdicts are defined."""
    base = make_run("base", concs=(4,), requests=100)
    slow = make_run("pr", concs=(4,), requests=100, seed=5, speed=0.5)
    out = tmp_path / "comment.md"
    table = _run("compare", str(base.path), str(slow.path), "--no-history", "--markdown", str(out))
    assert "verdicts: " in table and "_Verdicts:_ " in out.read_text(), table
    from llmsweep.report.markdown import VERDICT_MARK
    from llmsweep.results.compare import VERDICT_MEANING  # what each verdict of a metric means: its one home

    shown = {v for v in VERDICT_MEANING if f"│ {VERDICT_MARK[v]}" in table}
    assert "unverified" in shown, table
    (legend,) = [line for line in table.splitlines() if line.startswith("verdicts: ")]
    assert legend == "verdicts: " + "; ".join(f"{VERDICT_MARK[v]} — {m}" for v, m in VERDICT_MEANING.items()
                                              if v in shown), legend
    md = out.read_text()
    (md_legend,) = [line for line in md.splitlines() if line.startswith("_Verdicts:_ ")]
    in_md = {v for v in VERDICT_MEANING if f" {VERDICT_MARK[v]} |" in md}
    assert md_legend == "_Verdicts:_ " + "; ".join(f"{VERDICT_MARK[v]} — {m}" for v, m in VERDICT_MEANING.items()
                                                   if v in in_md), md


def test_a_comparison_that_matched_no_point_says_which_fields_differ_and_fails_the_gate(make_run,
                                                                                         store_path: Path) -> None:
    """Two runs of one recipe under another image tag: `compare A B --fail-on-regression` said `no point of A
    matches a point of B (identity must match exactly; see --ignore)` and exited 0, the Markdown gave an empty table
    of `0 matched points` and `--json` no note. Each now says which identity field differs and what `compare
    --ignore` would match; the gate, which compared nothing, exits 2 with the reason."""
    import json

    base = make_run("base", concs=(1, 4), requests=40)
    pr = make_run("pr", concs=(1, 4), requests=40, seed=2, image="lmsysorg/sglang-rocm:v0.5.17-rocm720-mi30x-20260801")
    why = ("no point of A matches a point of B: every point differs in image (A lmsysorg/sglang-rocm:v0.5.16-rocm720-"
           "mi30x-20260730; B lmsysorg/sglang-rocm:v0.5.17-rocm720-mi30x-20260801); `compare --ignore image` matches "
           "2 points")
    args = [str(base.path), str(pr.path), "--no-history"]
    table = _run("compare", *args)
    assert f"nothing compared: {why}" in " ".join(table.split()), table
    assert json.loads(_run("compare", *args, "--json"))["notes"] == [why]
    md = _run("compare", "--baseline", *args, "--format", "markdown")
    assert f"> {why}" in md and "| Point |" not in md, md  # said, and no empty table
    res = CliRunner().invoke(cli, ["compare", *args, "--fail-on-regression"])
    assert isinstance(res.exception, LlmsweepError) and res.exception.exit_code == 2, res.output
    assert res.exception.message == f"nothing was compared: {why}"
    ok = CliRunner().invoke(cli, ["compare", *args, "--ignore", "image", "--fail-on-regression"])
    assert ok.exit_code == 0, ok.output  # matched, and nothing regressed beyond a band


def test_a_deltas_sign_is_one_minus_in_every_cell() -> None:
    """A delta was signed with a Unicode minus (`−403.4`) and its percentage with a hyphen (`-20.3%`): one style
    now, the minus sign (U+2212), wherever compare writes a signed figure (an eval score's delta:
    `test_eval_results`)."""
    from llmsweep.report.markdown import delta_cell
    from llmsweep.results.compare import MetricDelta

    down = MetricDelta("tput_per_gpu", 1983.5, 1580.1, -403.4, -0.2034, None, "unverified")
    assert delta_cell(down) == "\u2212403.4 (\u221220.3%) (no band)"
    up = MetricDelta("tput_per_gpu", 1580.1, 1983.5, 403.4, 0.2553, None, "unverified")
    assert delta_cell(up) == "+403.4 (+25.5%) (no band)"


@pytest.mark.parametrize("new", [{"hardware": "mi355x"}, {"framework": "vllm"}, {"precision": "fp4"}])
def test_a_new_configuration_alone_passes_the_gate_though_an_ignore_would_pair_it(make_run, store_path: Path,
                                                                                    new: dict[str, str]) -> None:
    """A pull request's sweep of the same recipe on a new GPU (engine, precision) compares nothing with the baseline:
    the gate failed it, exit 2, and its fix (`compare --ignore hardware`) would have compared mi300x with mi355x as one
    point. Only what a point was measured under (image, corpus) makes a mispairing; a new configuration passes, and
    the table still says why nothing matched."""
    base = make_run("base", concs=(1, 4), requests=40)
    pr = make_run("pr", concs=(1, 4), requests=40, seed=2, **new)
    res = CliRunner().invoke(cli, ["compare", "--baseline", str(base.path), str(pr.path), "--no-history",
                                   "--fail-on-regression"])
    assert res.exit_code == 0, (res.output, res.exception)
    said = " ".join(res.output.split())
    assert "nothing compared: no point of A matches a point of B: every point differs in" in said, said
