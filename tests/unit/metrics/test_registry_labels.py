"""How tables head a metric (`metrics.registry`, the one home of its label): a figure per output token says so, beside
the figures per input plus output token that are several times smaller."""

from __future__ import annotations

from llmsweep.metrics.registry import HOT_BY_NAME, HOT_COLUMNS


def test_a_figure_of_output_tokens_says_output_where_a_table_heads_it() -> None:
    # `results show` and the run table headed J per output token "Energy J/tok" and $ per million output tokens
    # "Assumed cost $/Mtok", read as per token of any kind (the per-total-token figures are ~5x lower)
    per_output = [c for c in HOT_COLUMNS if "output" in c.metric.name]
    assert {"joules_per_output_token", "usd_per_mtok_output", "output_tput_per_gpu"} <= {c.name for c in per_output}
    for column in per_output:
        assert "output" in column.header.lower(), column.header
    assert HOT_BY_NAME["joules_per_output_token"].header == "Output energy J/tok"
    assert HOT_BY_NAME["usd_per_mtok_output"].header == "Assumed output cost $/Mtok"
