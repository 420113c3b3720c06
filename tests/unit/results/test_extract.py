"""summary.json → hot columns: the one adapter between the metrics room's layout and everything else."""

from __future__ import annotations

from llmsweep.results.extract import extract_hot
from llmsweep.results.samples import STATISTICS, load_samples, point_estimate


def test_reads_the_metrics_layout(make_run) -> None:
    run = make_run("r", concs=(4,))
    art = run.jobs[0]
    ex = extract_hot(art.summary)
    s = art.summary
    assert ex.metrics["tput_per_gpu"] == s["throughput"]["per_gpu"]["total_tps"]
    assert ex.metrics["p90_ttft"] == s["latency"]["ttft"]["p90"]
    assert ex.metrics["p90_e2e_norm_intvty"] == s["e2e_norm_interactivity"]["p90"]
    assert ex.metrics["p50_intvty"] == s["interactivity"]["p50"]
    assert ex.source == "simulated" and ex.verdict == "valid" and ex.valid
    assert ex.num_successful == s["requests"]["successful"]


def test_records_recompute_every_statistic_the_summary_reports(make_run) -> None:
    """Noise bands resample records with the same definitions the summary used; they must agree exactly."""
    run = make_run("r", concs=(8,), requests=120)
    art = run.jobs[0]
    ex = extract_hot(art.summary)
    samples = load_samples(art.records_path)
    assert samples is not None
    for metric in STATISTICS:
        assert point_estimate(samples, metric, gpus=8) == ex.metrics[metric], metric


def test_alternative_nesting_and_missing_blocks() -> None:
    nested = {
        "source": "measured",
        "request_metrics": {"latency": {"ttft": {"p90": 0.5}, "e2e_norm_intvty": {"p90": 42.0}},
                            "throughput": {"per_gpu": {"total_tput_tps": 900.0}}},
        "requests": {"successful": 90, "failed": 10},
    }
    ex = extract_hot(nested)
    assert ex.metrics["p90_ttft"] == 0.5
    assert ex.metrics["p90_e2e_norm_intvty"] == 42.0
    assert ex.metrics["tput_per_gpu"] == 900.0
    assert ex.metrics["error_ratio"] == 0.1
    assert ex.verdict == "unknown" and ex.reasons  # no validity block is said, not assumed valid
    bad = extract_hot({"validity": {"verdict": "invalid", "reasons": ["error ratio too high"]}})
    assert not bad.valid and bad.reasons == ("error ratio too high",)
    assert bad.metrics["tput_per_gpu"] is None
