"""Summary → hot columns: every column comes from the metric table, and the noise bands recompute each one from the
records with the summary's own definitions."""

from __future__ import annotations

import json

from llmsweep.metrics import registry, summarise
from llmsweep.results.extract import extract_hot
from llmsweep.results.samples import STATISTICS, load_samples, point_estimate, samples_from_records


def test_reads_the_metrics_layout(make_run) -> None:
    run = make_run("r", concs=(4,))
    art = run.jobs[0]
    ex = extract_hot(art.summary)
    s = art.summary
    assert ex.metrics["tput_per_gpu"] == s.throughput.per_gpu.total_tps
    assert ex.metrics["p90_ttft"] == s.latency.ttft.p90
    assert ex.metrics["p90_e2e_norm_intvty"] == s.e2e_norm_interactivity.p90
    assert ex.metrics["p50_intvty"] == s.interactivity.p50
    assert ex.metrics["p99_tpot"] == s.latency.tpot.p99
    assert ex.source == "simulated" and ex.verdict == "valid" and ex.valid
    assert ex.num_successful == s.requests.successful
    assert set(ex.metrics) == set(registry.HOT_BY_NAME)


def test_records_recompute_every_statistic_the_summary_reports(make_run) -> None:
    """Noise bands resample records with the same definitions the summary used; they must agree exactly."""
    run = make_run("r", concs=(8,), requests=120)
    art = run.jobs[0]
    ex = extract_hot(art.summary)
    samples = load_samples(art.records_path)
    assert samples is not None
    sampled = {c.name for c in registry.HOT_COLUMNS if c.metric.sample is not None}
    assert set(STATISTICS) == sampled and "p50_tpot" in STATISTICS and "p99_tpot" in STATISTICS
    for metric in STATISTICS:
        assert point_estimate(samples, metric, gpus=8) == ex.metrics[metric], metric


def test_bands_centre_on_the_stored_value_when_the_server_reports_no_prompt_tokens(make_run) -> None:
    """Without `prompt_tokens` the summary counts the workload's intended ISL; the samples count the same (they
    counted 0, so input-throughput bands were centred away from the stored value)."""
    run = make_run("r", concs=(4,))
    records = [json.loads(line) for line in run.jobs[0].records_path.read_text().splitlines()]
    for rec in records:
        rec["input_tokens_expected"] = rec.pop("prompt_tokens", None) or 100
    stored = extract_hot(summarise(records, gpus=2))
    samples = samples_from_records(records)
    for metric in ("input_tput_per_gpu", "tput_per_gpu"):
        assert stored.metrics[metric] and point_estimate(samples, metric, gpus=2) == stored.metrics[metric], metric


def test_a_stored_column_is_one_entry_of_the_metric_table() -> None:
    """Labels, units and polarity of every column (tables, axes, the store) are the metric's."""
    col = registry.HOT_BY_NAME["p90_ttft"]
    assert (col.label, col.unit, col.polarity, col.metric) == ("P90 TTFT", "s", "min", registry.TTFT)
    assert registry.HOT_BY_NAME["error_ratio"].unit == ""  # ratios print as percentages
    assert registry.HOT_BY_NAME["tput_per_gpu"].polarity == "max"
    names = [c.name for c in registry.HOT_COLUMNS]
    assert len(names) == len(set(names))


def test_a_point_whose_every_request_failed_has_no_latency_figure_not_zero(make_run) -> None:
    """`run`'s table, `--json`, the store and the dashboard showed P50 TTFT 0.0 ms, TPOT 0.00 and interactivity 0.0
    for a point with no successful request, and the chart drew it at (0, 0): a statistic without a sample is None."""
    from llmsweep.cli.run import outcome_rows
    from llmsweep.execute.lifecycle import JobOutcome
    from llmsweep.execute.pipeline import RunOutcome

    run = make_run("r", concs=(4,))
    records = [json.loads(line) for line in run.jobs[0].records_path.read_text().splitlines()]
    for r in records:  # every request timed out before its first token
        r.update(error_class="timeout", error="whole-request timeout", first_token_at=None, chunk_tokens=[],
                 completion_tokens=None)
    s = summarise(records, gpus=8)
    assert s.requests.successful == 0 and s.latency.ttft.count == 0
    ex = extract_hot(s)
    for name in ("p50_ttft", "p90_ttft", "p50_tpot", "p50_intvty", "p90_e2e_norm_intvty", "p90_e2el"):
        assert ex.metrics[name] is None, (name, ex.metrics[name])
    path = run.path / "failed-summary.json"
    path.write_text(json.dumps(s.dump()))
    outcome = RunOutcome(run_dir=run.path, run_id="r", findings=[], outcomes=[JobOutcome(
        job_id="j", exp_name="e", status="invalid", reasons=["no successful profiling request"],
        summary_path=str(path))])
    (row,) = outcome_rows(outcome)
    assert (row["p50_ttft"], row["p50_tpot"], row["p50_intvty"]) == (None, None, None), row
