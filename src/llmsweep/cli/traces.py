"""`llmsweep traces`: synthesise AgentX-shaped trace corpora and show corpus statistics."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llmsweep.cli.options import PathValue, json_group_option, json_option, option, out_option
from llmsweep.spec.workload import SyntheticTraces
from llmsweep.workload.traces.synth import FULL_SCALE_ISL
from llmsweep.writable import refuse_unwritable


@click.group("traces")
@json_group_option()
def traces() -> None:
    """Synthesise agentic traces and show corpus statistics."""


@traces.command("synth")
@out_option("JSONL file to write (one trace per line, the Weka format), written anew: the corpus is a pure "
            "function of the options.", type=PathValue(dir_okay=False, path_type=Path), required=True)
@option("num_traces", dest="n_traces", deprecated=("--traces",), default=32)
@option("seed", source=(SyntheticTraces, "seed"), help="Generator seed; the corpus is a pure function of it.")
@click.option("--max-isl", type=click.IntRange(min=2048), default=FULL_SCALE_ISL, show_default=True,
              help="Largest prompt; scales every token count (e.g. 16384 for a seconds-fast CI corpus).")
def synth(out: Path, n_traces: int, seed: int, max_isl: int) -> None:
    """Write a synthetic corpus with the shape of the published AgentX traces (hash ids, no text)."""
    from llmsweep.workload.traces.synth import SynthProfile, synthesize, write_jsonl

    refuse_unwritable(out, folder=False)
    corpus = synthesize(SynthProfile(traces=n_traces, seed=seed, max_isl=max_isl))
    write_jsonl(corpus, out)
    requests = sum(len(t.all_requests()) for t in corpus)
    click.echo(f"wrote {len(corpus)} traces ({requests} requests) to {out}", err=True)


@traces.command("stats")
@click.argument("source")
@json_option("the statistics")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Read at most this many traces.")
@click.option("--scale-to", "scale_to", type=click.IntRange(min=2048), default=FULL_SCALE_ISL, show_default=True,
              help="Compare with the published figures scaled to a corpus made with `synth --max-isl` this value.")
def stats(source: str, as_json: bool, limit: int | None, scale_to: int) -> None:
    """Corpus statistics of SOURCE (a JSONL/JSON file, a directory, or a Hugging Face dataset id)."""
    from llmsweep.workload.traces.loader import stream_traces
    from llmsweep.workload.traces.stats import band_report, corpus_stats

    result = corpus_stats(stream_traces(source, limit=limit))  # one trace at a time: a corpus can take gigabytes
    bands = band_report(result, scale=scale_to / FULL_SCALE_ISL)
    if as_json:
        click.echo(json.dumps({**result.to_json(), "reference": bands}, indent=2))
        return
    _print_table(result, bands)


def _print_table(result: object, bands: list[dict[str, object]]) -> None:
    """The statistics as tables laid out as every table is (`cli.tables.print_tables`): the counts, the distributions
    (a statistic to a column, each figure whole) and the reference bands; what does not fit beside the first column
    goes into a continuation table."""
    from llmsweep.cli.tables import Column, plain, print_tables, table_console
    from llmsweep.workload.traces.stats import CorpusStats

    assert isinstance(result, CorpusStats)
    console = table_console()
    counts = [
        ("traces", result.traces), ("main turns", result.main_turns), ("subagent groups", result.subagent_groups),
        ("subagent inner requests", result.subagent_inner_requests), ("total requests", result.total_requests),
        ("background groups", result.background_groups), ("groups outliving the root", result.outliving_groups),
    ]
    rows = [[name, f"{value:,}"] for name, value in counts]
    rows += [["prefix hit (request mean)", f"{result.prefix_hit_request_mean:.3f}"],
             ["prefix hit (token weighted)", f"{result.prefix_hit_token_weighted:.3f}"],
             ["think time above 300 s cap", f"{result.think_time_above_cap_share:.2%}"]]
    print_tables("corpus statistics", [Column("statistic", kind="key", justify="left"), Column("value")], rows,
                 console=console)
    stats = ("mean", "p50", "p90", "p99")
    rows = [[name, *(fmt.format(getattr(dist, k)) for k in stats)] for name, dist, fmt in (
        ("ISL", result.isl, "{:,.0f}"), ("OSL", result.osl, "{:,.0f}"),
        ("main turns / trace", result.main_turns_per_trace, "{:,.1f}"),
        ("subagent groups / trace", result.subagent_groups_per_trace, "{:,.1f}"),
        ("inner requests / group", result.inner_requests_per_group, "{:,.1f}"),
        ("spawn batch size", result.spawn_batch_size, "{:,.2f}"),
        ("think time (s)", result.think_time_s, "{:,.2f}"),
    )]
    print_tables("corpus distributions", [Column("statistic", kind="key", justify="left"),
                                          *(Column(k) for k in stats)], rows, console=console)
    columns = [Column("figure", kind="key", justify="left"), Column("this corpus"), Column("published"),
               Column("band"), Column("")]
    rows = [[plain(row["what"]), f"{row['value']:,.3g}", f"{row['published']:,.3g}",
             f"{row['low']:,.3g} – {row['high']:,.3g}", "ok" if row["inside"] else "outside"] for row in bands]
    print_tables(plain("against the published AgentX 062126 corpus figures (bands: ±30 % around them, wider for "
                       "tails)"), columns, rows, console=console)
