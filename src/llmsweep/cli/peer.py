"""`llmsweep peer crosscheck|table|import`: llmsweep's client beside aiperf on one server, and aiperf runs read back.

Thin: options become a `CrossCheckConfig` (or an artifact path), `llmsweep.peers` does the work, the table is
printed from what it returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from llmsweep.cli.options import (
    FINITE_POSITIVE,
    Opt,
    PathValue,
    held_results,
    json_group_option,
    json_option,
    option,
    out_option,
    refuse_replacing,
)
from llmsweep.errors import ConfigError
from llmsweep.metrics.model import RUN_SOURCES, RunSource


@click.group("peer")
@json_group_option()
def peer() -> None:
    """Peer clients (aiperf) against the same endpoint, and their records under llmsweep's definitions."""


@peer.command("crosscheck")
@option("url")
@option("model")
@option("tokenizer", required=True, help="Tokenizer directory both clients count with (the served model's).")
@click.option("--isl", type=click.IntRange(min=1), required=True, help="Input tokens per request (prompt content).")
@click.option("--osl", type=click.IntRange(min=1), required=True,
              help="Output tokens per request (max_tokens, ignore_eos).")
@click.option("--concurrency", "levels", cls=Opt, listed=True, type=click.IntRange(min=1), required=True,
              help="Closed-loop levels, in order, e.g. 1,8,32.")
@option("num_prompts_per_conc", dest="prompts_per_conc", default=4, show_default=True)
@click.option("--min-prompts", type=click.IntRange(min=1), default=16, show_default=True,
              help="At least this many measured requests per run.")
@option("num_warmups_per_conc", dest="warmups_per_conc", default=2, show_default=True)
@option("repeats", default=2, help="Runs of each client per level, alternating.")
@click.option("--aiperf", "aiperf_exe", default="aiperf", show_default=True, help="aiperf executable.")
@option("request_timeout", dest="timeout")
@click.option("--run-deadline", type=FINITE_POSITIVE, default=None,
              help="Stop one aiperf run after this many seconds. Default: the longest a run that keeps making "
                   "progress can take ((requests / concurrency, rounded up, + 1) x --request-timeout + 120 s).")
@option("no_ignore_eos", help="Neither client sends ignore_eos (servers that answer 422).")
@option("gpus", default=None, show_default=False, type=click.IntRange(min=1),
        help="GPUs behind the endpoint. Default: as the server reports; else unknown (figures per endpoint).")
@option("seed", help="Seed of the first run's prompts (each run adds its position; the recipe's client seed).")
@out_option("Result directory; one that holds a cross-check is refused unless --force.", dest="out_dir",
            required=True)
@option("force", help="Replace the cross-check --out holds.")
@json_option("the cross-check (crosscheck.json)")
def crosscheck(**kw: Any) -> None:
    """Run llmsweep's client and aiperf in turn at each concurrency on the same prompts; print both side by side.

    Writes OUT/crosscheck.json, OUT/crosscheck.md and one folder per run (OUT/cCONC/CLIENT-REPEAT) with records.jsonl
    and summary.json; aiperf's folders also hold its artifacts, the dataset it replayed and its command line.
    """
    from llmsweep.client import Endpoint
    from llmsweep.folderlock import refuse_held
    from llmsweep.peers.crosscheck import (
        BUSY_FIX,
        ClientRun,
        CrossCheckConfig,
        load_crosscheck,
        markdown,
        run_crosscheck,
    )

    out: Path = kw["out_dir"]
    refuse_held(out, fix=BUSY_FIX)  # a live cross-check's (or bench's, run's) folder, refused before any probe
    refuse_replacing(out, held_results(out), force=kw["force"], what="a cross-check")
    levels = list(kw["levels"])
    if len(set(levels)) < len(levels):  # (their runs share c<N>/<client>-<repeat>: the second overwrote the first,
        # and the table built a band from repeats never asked for, comparing a run with itself)
        twice = sorted({c for c in levels if levels.count(c) > 1})
        raise ConfigError(f"--concurrency names {', '.join(map(str, twice))} more than once",
                          fix="name each level once; --repeats runs a level several times")
    cfg = CrossCheckConfig(
        endpoint=Endpoint(base_url=kw["url"], model=kw["model"], api="chat", send_ignore_eos=not kw["no_ignore_eos"]),
        isl=kw["isl"], osl=kw["osl"], concurrencies=list(kw["levels"]),
        prompts_per_concurrency=kw["prompts_per_conc"], min_prompts=kw["min_prompts"],
        warmups_per_concurrency=kw["warmups_per_conc"], repeats=kw["repeats"], tokenizer=kw["tokenizer"],
        aiperf=kw["aiperf_exe"], timeout_s=kw["timeout"], run_deadline_s=kw["run_deadline"], seed=kw["seed"],
        gpus=kw["gpus"],
    )

    ran: list[ClientRun] = []

    def progress(run: ClientRun) -> None:
        ran.append(run)
        click.echo(f"conc {run.concurrency} {run.client} #{run.repeat}: {run.problem or 'ok'}", err=True)

    def unreplaced() -> None:  # under the claim: a cross-check written there since the check above
        refuse_replacing(out, held_results(out), force=False, what="a cross-check")

    # the folder is claimed for the whole run (`run_crosscheck`): --force never takes one a live process holds;
    # nothing answering at --url is refused (exit 2) before either client runs, as `bench` refuses it
    try:
        check = run_crosscheck(cfg, out, on_run=progress, claimed=None if kw["force"] else unreplaced,
                               say=lambda note: click.echo(note, err=True))
    except KeyboardInterrupt:  # as `bench` does: what was measured before the signal is printed, then the exit
        if ran:  # (130, 143) the signal gives; the cross-check it wrote holds the interrupted run
            stopped = load_crosscheck(out)
            click.echo(json.dumps(stopped.to_dict(), indent=2) if kw["as_json"] else markdown(stopped))
            click.echo(f"the runs so far are in {out} (crosscheck.json, crosscheck.md)", err=True)
        raise
    click.echo(json.dumps(check.to_dict(), indent=2) if kw["as_json"] else markdown(check))
    if not all(any(r.ok for r in check.runs if r.client == c) for c in ("llmsweep", "aiperf")):
        raise click.exceptions.Exit(1)  # one of the clients measured nothing: there is no comparison
    if any(r.paused for r in check.runs):  # measured across a Ctrl-Z: invalid, as `run` judges a job (exit 1)
        raise click.exceptions.Exit(1)


@peer.command("table")
@click.argument("out_dir", type=PathValue(exists=True, file_okay=False, path_type=Path))
@option("resummarize", dest="resummarise")
@click.option("--write", is_flag=True, help="Write the recomputed crosscheck.json and crosscheck.md back.")
@json_option("the recomputed cross-check")
def table(out_dir: Path, resummarise: bool, write: bool, as_json: bool) -> None:
    """Recompute and print the side-by-side table of a cross-check directory from its runs."""
    from llmsweep.peers.crosscheck import load_crosscheck, markdown, write_crosscheck

    check = load_crosscheck(out_dir, resummarise=resummarise)
    if write:
        write_crosscheck(check, out_dir)
    click.echo(json.dumps(check.to_dict(), indent=2) if as_json else markdown(check))


@peer.command("import")
@click.argument("artifact_dir", type=PathValue(exists=True, file_okay=False, path_type=Path))
@out_option("Run directory to write; one that holds results is refused unless --force.", dest="out_dir",
            required=True)
@option("force", help="Replace the results --out holds.")
@option("num_warmups", dest="warmups", default=None, show_default=False,
        help="Warm-up requests the aiperf run sent (its --warmup-request-count). aiperf labels each warm-up in its "
             "export, and those are the warm-ups: a count given here is checked against them, and another is "
             "refused (exit 2, nothing written). Default: as the export labels them.")
@option("gpus", default=None, show_default=False, type=click.IntRange(min=1),
        help="GPUs behind the endpoint aiperf loaded. Default: unknown (the artifacts do not say; figures per "
             "endpoint).")
@click.option("--served-by", "source", type=click.Choice(RUN_SOURCES), required=True,
              help="What served aiperf's load, the summary's source: a real engine (measured) or llmsweep's "
                   "simulator (simulated). Required: the artifacts do not say, and a label is never guessed.")
@json_option("the summary (summary.json)")
def import_(artifact_dir: Path, out_dir: Path, force: bool, warmups: int | None, gpus: int | None, source: RunSource,
            as_json: bool) -> None:
    """Read an aiperf --artifact-dir into OUT (records.jsonl, run.json, summary.json under llmsweep's definitions)."""
    from llmsweep.cli.bench import _print_summary
    from llmsweep.peers import import_aiperf_dir

    refuse_replacing(out_dir, held_results(out_dir), force=force, what="results")
    summary = import_aiperf_dir(artifact_dir, out_dir, warmups=warmups, gpus=gpus, source=source)
    _print_summary(summary, out_dir, as_json=as_json)
    if summary.validity.verdict == "invalid":
        raise click.exceptions.Exit(1)
