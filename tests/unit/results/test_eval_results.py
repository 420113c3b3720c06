"""Eval results are results: stored in the `evals` table, exported in InferenceX's eval row shape, kept off the
throughput export and frontiers when eval-only, and compared against the scores' standard error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from llmsweep.metrics.model import EvalBlock, EvalMetric, EvalRun, Summary
from llmsweep.results.compare import compare_points
from llmsweep.results.frontier import compute_frontiers
from llmsweep.results.interchange import export_points
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.rundir import RunDir, load_run
from llmsweep.results.store import Store

MakeRun = Callable[..., RunDir]


def with_eval(run: RunDir, conc: int, score: float, *, mode: str = "run-eval", stderr: float = 0.01) -> RunDir:
    """Give the run's job at `conc` an eval block (as `llmsweep.evals` writes it) and read the run again."""
    art = next(a for a in run.jobs if a.job.get("conc") == conc)
    summary = Summary.load(art.dir / "summary.json")
    verdict = "valid" if score >= 0.9 else "invalid"
    summary.eval = EvalBlock(
        mode=mode, task="gsm8k", harness_version="0.4.13", dataset="openai/gsm8k", model_prefix="qwen3.5",
        context_length=9472, max_tokens=5376, score=score, score_name="exact_match,strict-match",
        score_stderr=stderr, verdict=verdict, reasons=[] if verdict == "valid" else ["below the threshold"],
        runs=[EvalRun(conc=conc, status="completed", n_samples=1319, command=["python", "-m", "lm_eval"],
                      metrics=[EvalMetric(name="exact_match,strict-match", value=score, stderr=stderr),
                               EvalMetric(name="exact_match,flexible-extract", value=score + 0.01, stderr=stderr)])])
    if mode == "eval-only":
        summary.validity.verdict = verdict  # type: ignore[assignment]
    summary.write(art.dir / "summary.json")
    return load_run(run.path)


def test_an_eval_is_stored_and_exported_as_inferencex_eval_rows(make_run: MakeRun, tmp_path: Path) -> None:
    run = with_eval(make_run("a", concs=(16, 32), source="measured"), 32, 0.95)
    with Store(tmp_path / "s.sqlite") as store:
        store.ingest_run(run)
        (stored,) = store.evals()
        points = store.results()
    assert (stored.task, stored.score, stored.verdict, stored.mode, stored.harness_version) == (
        "gsm8k", 0.95, "valid", "run-eval", "0.4.13")
    (row,) = json.loads(export_points(points, "inferencex-evals"))
    assert (row["task"], row["em_strict"], row["em_strict_se"], row["em_flexible"], row["n_eff"]) == (
        "gsm8k", 0.95, 0.01, 0.96, 1319)
    assert row["conc"] == 32 and row["score_name"] == "exact_match,strict-match" and row["hw"] == row["hw"].upper()
    # a run-eval point is a throughput point too
    assert len(json.loads(export_points(points, "inferencex", include_unpublished=True))) == 2


def test_an_eval_only_result_has_no_throughput_row_and_no_frontier_place(make_run: MakeRun) -> None:
    run = with_eval(make_run("a", concs=(16, 32)), 32, 0.95, mode="eval-only")
    points = points_from_run(run)
    (only,) = [p for p in points if p.eval_only]
    assert len(json.loads(export_points(points, "inferencex", include_unpublished=True))) == 1
    assert only.metric("tput_per_gpu") is None and only.metric("p50_ttft") is None  # no throughput, not zero
    fronts = compute_frontiers(points)
    on_front = {i for by_series in fronts.values() for ids in by_series.values() for i in ids}
    assert not on_front & {p.result_id for p in points if p.eval_only}


def test_compare_judges_an_eval_score_change_against_the_scores_stderr(make_run: MakeRun) -> None:
    a = points_from_run(with_eval(make_run("a", concs=(32,)), 32, 0.95))
    b = points_from_run(with_eval(make_run("b", concs=(32,)), 32, 0.90))
    (m,) = compare_points(a, b).matched
    assert m.eval is not None and m.eval.verdict == "regression" and round(m.eval.delta or 0, 6) == -0.05
    assert m.eval.band is not None and abs(m.eval.band - 1.96 * (2 * 0.01**2) ** 0.5) < 1e-9
    close = points_from_run(with_eval(make_run("c", concs=(32,)), 32, 0.94))
    (m2,) = compare_points(a, close).matched
    assert m2.eval is not None and m2.eval.verdict == "within noise"
    assert compare_points(a, b).regressions[-1][1] == m.eval


def test_compare_pairs_a_run_eval_jobs_eval_with_an_eval_only_jobs_eval_of_the_same_point(make_run: MakeRun,
                                                                                          store_path: Path) -> None:
    """Main's full sweep (conc 32 `run-eval`: its throughput point, then the eval on its server) against a pull
    request's `--evals-only` run (conc 32 `eval-only`): the same accuracy measurement of the same configuration, so
    its score change is judged, each side's kind of job named (`compare`'s table: `(A run-eval, B eval-only)`, as the
    README says); neither point is "only in" a side."""
    main_run = with_eval(make_run("main", concs=(4, 32)), 32, 0.95)
    pr_run = with_eval(make_run("pr", concs=(32,)), 32, 0.90, mode="eval-only")
    base, pr = points_from_run(main_run), points_from_run(pr_run)
    from click.testing import CliRunner

    from llmsweep.cli.main import cli

    table = CliRunner().invoke(cli, ["compare", str(main_run.path), str(pr_run.path), "--no-history"],
                               catch_exceptions=False)
    assert table.exit_code == 0, table.output
    assert "eval gsm8k score (A run-eval, B eval-only)" in table.output, table.output
    comp = compare_points(base, pr)
    (m,) = [m for m in comp.matched if m.eval is not None]
    assert m.eval is not None and m.eval.verdict == "regression" and round(m.eval.delta or 0, 6) == -0.05
    assert (m.eval.mode_a, m.eval.mode_b) == ("run-eval", "eval-only") and m.deltas == ()
    assert m.a[0].identity.conc == 32 and [p.identity.conc for p in comp.only_a] == [4] and comp.only_b == ()
    assert comp.regressions == [(m, m.eval)]
    doc = comp.as_dict()["matched"][0]["eval"]
    assert (doc["eval_mode_a"], doc["eval_mode_b"]) == ("run-eval", "eval-only")
    # either way round
    (back,) = compare_points(pr, base).matched
    assert back.eval is not None and back.eval.verdict == "improvement"
    assert (back.eval.mode_a, back.eval.mode_b) == ("eval-only", "run-eval")


def test_an_eval_only_eval_joins_the_matched_throughput_point_whose_side_ran_no_eval(make_run: MakeRun) -> None:
    """A run-eval point on A matched by a throughput point on B that ran no eval (B's evals ran as eval-only jobs):
    the throughput deltas and the eval comparison are one point's."""
    base = points_from_run(with_eval(make_run("main", concs=(32,)), 32, 0.95))
    tput = points_from_run(make_run("tput", concs=(32,)))
    evals = points_from_run(with_eval(make_run("evals", concs=(32,)), 32, 0.95, mode="eval-only"))
    (m,) = compare_points(base, tput + evals).matched
    assert m.deltas and [p.job_id for p in m.b] == [tput[0].job_id]
    assert m.eval is not None and m.eval.verdict == "within noise" and m.eval.mode_b == "eval-only"
    comp = compare_points(base, tput + evals)
    assert comp.only_a == () and comp.only_b == ()


def test_evals_of_different_sources_are_not_paired_across_kinds_without_mix_sources(make_run: MakeRun) -> None:
    base = points_from_run(with_eval(make_run("main", concs=(32,), source="measured"), 32, 0.95))
    pr = points_from_run(with_eval(make_run("pr", concs=(32,)), 32, 0.0, mode="eval-only"))
    comp = compare_points(base, pr)
    assert comp.matched == () and comp.only_a == comp.only_b == () and {s.reason for s in comp.skipped} == {
        "sources differ (measured, simulated); pass --mix-sources to compare"}
    (m,) = compare_points(base, pr, mix_sources=True).matched
    assert m.eval is not None and m.eval.verdict == "regression"


def test_the_csv_export_has_the_eval_columns_of_a_result_row(make_run: MakeRun) -> None:
    """The CSV's columns are a result row's (`RESULT_COLUMNS`, as `results list --json` gives them): an eval's kind,
    task, score with its name and stderr, verdict and reasons beside the throughput figures, as the JSON export's
    summary holds them; empty for a point without an eval. An export of nothing has the same header."""
    import csv
    import io

    points = points_from_run(with_eval(with_eval(make_run("a", concs=(4, 16, 32)), 32, 0.85), 16, 0.95,
                                       mode="eval-only"))
    reader = csv.DictReader(io.StringIO(export_points(points, "csv")))
    rows = {int(r["conc"]): r for r in reader}
    evals = {r["identity"]["conc"]: r["summary"]["eval"]
             for r in json.loads(export_points(points, "json"))["results"] if r["summary"].get("eval")}
    assert sorted(evals) == [16, 32]
    for conc, block in evals.items():
        row = rows[conc]
        assert (row["eval_mode"], row["eval_task"], float(row["eval_score"]), row["eval_score_name"],
                float(row["eval_score_stderr"]), row["eval_verdict"], row["eval_reasons"]) == (
            block["mode"], block["task"], block["score"], block["score_name"], block["score_stderr"],
            block["verdict"], json.dumps(block["reasons"]))
    assert (rows[32]["eval_mode"], rows[32]["eval_verdict"], rows[32]["verdict"]) == ("run-eval", "invalid", "valid")
    assert rows[16]["eval_mode"] == "eval-only" and rows[16]["tput_per_gpu"] == ""
    from llmsweep.results.interchange import CSV_COLUMNS, csv_column
    from llmsweep.results.point import RESULT_COLUMNS

    assert tuple(csv_column(c) for c in (*RESULT_COLUMNS, "warnings")) == CSV_COLUMNS
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS  # and what its run warned of each row
    assert all(rows[4][c] == "" for c in RESULT_COLUMNS if c.startswith("eval_"))
    assert next(csv.reader(io.StringIO(export_points([], "csv")))) == list(CSV_COLUMNS)


def test_a_pull_requests_verdict_calls_an_eval_regression(make_run: MakeRun) -> None:
    """The verdict `compare --baseline A B --format markdown` gives: main's run-eval score 0.95 against the pull
    request's eval-only 0.80, far beyond the scores' stderr band, is a regression — as `--fail-on-regression` calls
    it — and a score within its band is a verified `no change`. It counted neither (`no change (no between-run
    band)`)."""
    from llmsweep.report.verdict import verdict_markdown
    from llmsweep.results.verdict import SuccessRate, point_called, point_verdict, verdict_counts

    base = points_from_run(with_eval(make_run("main", concs=(32,)), 32, 0.95))
    worse = compare_points(base, points_from_run(with_eval(make_run("pr", concs=(32,)), 32, 0.80, mode="eval-only")))
    (m,) = worse.matched
    assert worse.regressions and point_verdict(m) == "regression" and point_called(m)
    assert verdict_counts(worse) == {"improvement": 0, "regression": 1, "no change": 0, "unverified": 0}
    assert "**1 regression, 0 improvements, 0 without change, 0 unverified**" in verdict_markdown(worse,
                                                                                                 SuccessRate(1, 1))
    same = compare_points(base, points_from_run(with_eval(make_run("pr2", concs=(32,)), 32, 0.95, mode="eval-only")))
    (s,) = same.matched
    assert point_verdict(s) == "no change" and point_called(s)


def test_an_eval_scores_delta_is_signed_as_every_delta_is(make_run: MakeRun, store_path: Path) -> None:
    """An eval score's delta was written `-0.1500` (a hyphen; the table: no sign at all) beside metric deltas signed
    `−403.4`: one style, the minus sign (U+2212), in the Markdown and the table alike."""
    from click.testing import CliRunner

    from llmsweep.cli.main import cli
    from llmsweep.report.markdown import comparison_markdown

    main, pr = with_eval(make_run("main", concs=(32,)), 32, 0.95), with_eval(make_run("pr", concs=(32,)), 32, 0.80)
    worse = compare_points(points_from_run(main), points_from_run(pr))
    (row,) = [line for line in comparison_markdown(worse).splitlines() if "| gsm8k |" in line]  # the eval table's
    assert "| \u22120.1500 ±" in row and "-0.15" not in row, row
    res = CliRunner().invoke(cli, ["compare", str(main.path), str(pr.path), "--no-history"], catch_exceptions=False)
    assert "\u22120.15 ±" in res.output and "-0.15" not in res.output, res.output


def _eval_repeats(tmp_path: Path, name: str, scores: tuple[tuple[float, float], ...],
                  verdicts: tuple[str, ...] = ()) -> list[ResultPoint]:
    """A run of one conc-32 point measured `len(scores)` times (`run --repeats N`: `<id>`, `<id>-repeat2`, ...), each
    repeat's job running an eval of (score, stderr), valid unless `verdicts` says otherwise, repeat by repeat."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    job = synthetic_job(conc=32)
    ids = [job["id"], *(f"{job['id']}-repeat{k}" for k in range(2, len(scores) + 1))]
    run = write_synthetic_run(tmp_path / name, [SyntheticPoint({**job, "id": i}) for i in ids], run_id=name)
    for i, (score, stderr), verdict in zip(ids, scores, verdicts or ("valid",) * len(scores), strict=True):
        art = next(a for a in run.jobs if a.job_id == i)
        summary = Summary.load(art.dir / "summary.json")
        summary.eval = EvalBlock(
            mode="run-eval", task="gsm8k", dataset="openai/gsm8k", context_length=9472, max_tokens=5376, score=score,
            score_name="exact_match,strict-match", score_stderr=stderr, verdict=verdict)
        summary.write(art.dir / "summary.json")
    return points_from_run(load_run(run.path))


def test_a_mean_of_repeated_evals_is_judged_against_the_standard_error_of_that_mean(tmp_path: Path) -> None:
    """`run --repeats 3` with an eval: A's score is the mean of its three repeats, and its band was the first
    repeat's stderr alone. The repeats score the same questions greedily (lm-eval's first `limit` samples,
    temperature 0), so their mean keeps the question-sampling error each one's stderr holds, less the part their
    spread shows to be the repeats' own, which the mean averages down: var = mean(se²) − (1 − 1/N)·s², never below
    s²/N, the spread's own standard error of a mean."""
    single = _eval_repeats(tmp_path, "b", ((0.87, 0.006),))
    # repeats that agree to the stderr they report: the band is theirs (the first's stderr was 0.001 of three)
    agree = _eval_repeats(tmp_path, "a1", ((0.90, 0.001), (0.90, 0.01), (0.90, 0.01)))
    (m,) = compare_points(agree, single).matched
    assert m.eval is not None and m.eval.a is not None and abs(m.eval.a - 0.90) < 1e-12
    se_a = ((0.001 ** 2 + 0.01 ** 2 + 0.01 ** 2) / 3) ** 0.5
    assert m.eval.band is not None and abs(m.eval.band - 1.96 * (se_a ** 2 + 0.006 ** 2) ** 0.5) < 1e-9
    assert m.eval.verdict == "regression"  # −0.03 against a band of 0.02
    # repeats that scatter far beyond their stderr (0.85 to 0.95, each ± 0.006): the mean 0.90 is known to about
    # s/√3 = 0.029, so 0.87 is within noise (the first repeat's stderr called it a regression)
    scatter = _eval_repeats(tmp_path, "a2", ((0.90, 0.006), (0.95, 0.006), (0.85, 0.006)))
    (m,) = compare_points(scatter, single).matched
    assert m.eval is not None and m.eval.a is not None and abs(m.eval.a - 0.90) < 1e-12
    var_a = max(0.006 ** 2 - (1 - 1 / 3) * 0.05 ** 2, 0.05 ** 2 / 3)
    assert m.eval.band is not None and abs(m.eval.band - 1.96 * (var_a + 0.006 ** 2) ** 0.5) < 1e-9
    assert m.eval.verdict == "within noise"
    assert m.eval.as_dict()["runs"] == {"a": 3, "b": 1}


def test_the_eval_verdict_beside_a_mean_of_repeats_is_every_repeats_not_the_firsts(tmp_path: Path) -> None:
    """A side's score is the mean of its repeats' evals; the verdict printed beside it (`0.8700 (valid)`) was the
    first repeat's, so a repeat that fell below its threshold left the mean labelled valid. One eval is valid only
    where every run of it reached its thresholds: a mean of repeats is too."""
    single = _eval_repeats(tmp_path, "b", ((0.87, 0.006),))
    mixed = _eval_repeats(tmp_path, "a", ((0.90, 0.006), (0.60, 0.006)), ("valid", "invalid"))
    (m,) = compare_points(mixed, single).matched
    assert m.eval is not None and m.eval.a is not None and abs(m.eval.a - 0.75) < 1e-12
    assert (m.eval.verdict_a, m.eval.verdict_b) == ("invalid", "valid")
    assert m.eval.as_dict()["eval_verdict_a"] == "invalid"
    every = _eval_repeats(tmp_path, "a2", ((0.90, 0.006), (0.91, 0.006)))
    (m,) = compare_points(every, single).matched
    assert m.eval is not None and m.eval.verdict_a == "valid"
    # a repeat that passed on too few samples (`smoke`) makes the mean smoke, not invalid: it missed no threshold
    smoke = _eval_repeats(tmp_path, "a3", ((0.90, 0.006), (0.91, 0.006)), ("valid", "smoke"))
    (m,) = compare_points(smoke, single).matched
    assert m.eval is not None and m.eval.verdict_a == "smoke"


def test_an_evals_only_side_against_throughput_points_alone_says_why_nothing_matched(make_run: MakeRun) -> None:
    """A's throughput points (no evals) against B's `--evals-only` run of the same configuration: nothing pairs, and
    the note said "no point of one holds the other's combination" of the identity fields, though every combination
    is on both sides: it says B's results are evals alone, which pair only with evals."""
    a = points_from_run(make_run("tput", concs=(32,)))
    b = points_from_run(with_eval(make_run("evals", concs=(32,)), 32, 0.95, mode="eval-only"))
    comp = compare_points(a, b)
    assert not comp.matched and not comp.mispaired
    assert comp.unmatched == ("no point of A matches a point of B: B's results are evals alone (`--evals-only`), "
                              "which pair only with evals, and the other side ran none of the same points")
