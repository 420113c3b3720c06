"""`llmsweep bench fixed|agentic|replay` and `llmsweep summarize`: drive load, print the summary, gate the exit code.

Thin by design: options are parsed into `Endpoint`, `RunOptions` and a workload, `llmsweep.client.run_benchmark`
does the work, and the summary table is printed from `summary.json`. Exit 1 only when a validity gate fails; runs
shorter than 900 s are marked smoke but succeed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llmsweep.cli.options import (
    FINITE_POSITIVE,
    FiniteRange,
    PathValue,
    describe,
    field_option,
    json_group_option,
    json_option,
    option,
    out_option,
)
from llmsweep.client.config import DURATION_REACHED, RunOptions
from llmsweep.client.files import RECORDS_FILE
from llmsweep.errors import ConfigError
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of
from llmsweep.workload.fixed import FixedLengthConfig
from llmsweep.writable import refuse_unwritable

if TYPE_CHECKING:
    from llmsweep.metrics.model import Summary
    from llmsweep.workload.base import Api, Workload


_NON_NEGATIVE = FiniteRange(min=0)
_RATIO = FiniteRange(min=0, max=1)
_AT_LEAST_ONE = click.IntRange(min=1)


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options every bench subcommand shares."""
    opts = [
        option("url"),
        option("model"),
        out_option("Result directory (default results/bench-<kind>-<time>-<random>); one a live bench or run holds "
                   "is refused.", dest="out_dir"),
        option("seed"),
        option("request_timeout", dest="timeout"),
        field_option("--stall-timeout", show_default=True, source=(RunOptions, "stall_timeout_s")),
        field_option("--grace", type=_NON_NEGATIVE, show_default=True, source=(RunOptions, "grace_s")),
        click.option("--max-failure-ratio", type=_RATIO, default=None,
                     help="Failed/finished ratio that stops the run and fails the gate (fixed 0.05, agentic 0.10)."),
        option("client_workers", dest="workers", default=None, show_default=False, type=_AT_LEAST_ONE,
               help="Client worker processes (default: 1 unless the load needs more)."),
        click.option("--api", type=click.Choice(["chat", "completions"]), default=None,
                     help="OpenAI route to stream from."),
        # bench's workloads count lengths with the built-in word tokenizer unless told (a recipe's `tokenizer` defaults
        # to its model: not this option's default)
        option("tokenizer", source=(FixedLengthConfig, "tokenizer")),
        option("gpus", default=None, show_default=False, type=_AT_LEAST_ONE,
               help="GPUs serving the endpoint, for per-GPU throughput (default: what the server reports — the "
                    "simulator and SGLang do; otherwise throughput is shown per endpoint)."),
        click.option("--metrics-url", default=None, help="Prometheus URL (default URL/metrics; 'none' disables)."),
        field_option("--require-metrics-prefix", source=(RunOptions, "require_metrics_prefix")),
        option("no_ignore_eos"),
        click.option("--no-stream-options", is_flag=True, help="Do not send stream_options (servers that answer 422)."),
        option("force", help="Replace the measurement --out already holds (its records, summary and run.json); "
                             "without it such an --out is refused."),
        json_option("the summary (summary.json)"),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@click.group("bench")
@json_group_option()
def bench() -> None:
    """Drive load against an OpenAI-compatible endpoint and write records.jsonl, summary.json.

    A server started with an API key (`vllm serve --api-key`, a gateway) is sent the key in $OPENAI_API_KEY as
    `Authorization: Bearer …` on every request and probe; the key is never written to the run's files.
    """


@bench.command("fixed")
@_common
@click.option("--isl", type=_AT_LEAST_ONE, required=True, help="Input tokens per request.")
@click.option("--osl", type=_AT_LEAST_ONE, required=True, help="Output tokens per request (max_tokens, ignore_eos).")
@click.option("--concurrency", type=_AT_LEAST_ONE, default=None, help="Closed loop: requests in flight.")
@click.option("--request-rate", type=FINITE_POSITIVE, default=None, help="Open loop: requests per second.")
@click.option("--arrival", type=click.Choice(["poisson", "constant"]), default="poisson", show_default=True)
@option("num_prompts")
@option("duration")
@option("num_warmups", dest="warmup", type=click.IntRange(min=0))
@click.option("--range-ratio", type=FiniteRange(min=0, max=1, min_open=True), default=1.0, show_default=True,
              help="Lengths uniform in [ratio*L, L].")
def fixed(**kw: Any) -> None:
    """Fixed input/output lengths (the InferenceX fixed-seq-len scenario)."""
    if (kw["concurrency"] is None) == (kw["request_rate"] is None):
        raise ConfigError("bench fixed needs exactly one of --concurrency or --request-rate",
                          fix="pass --concurrency C (closed loop) or --request-rate R (open loop)")
    if (kw["num_prompts"] is None) == (kw["duration"] is None):
        raise ConfigError("bench fixed needs exactly one of --num-prompts or --duration",
                          fix="pass --num-prompts N or --duration S")
    from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

    warmup = kw["warmup"] if kw["warmup"] is not None else 2 * (kw["concurrency"] or 0)
    api: Api = "chat" if kw["api"] == "chat" else "completions"
    config = FixedLengthConfig(
        isl=kw["isl"], osl=kw["osl"], api=api, num_prompts=kw["num_prompts"], num_warmups=warmup,
        range_ratio=kw["range_ratio"], seed=kw["seed"], tokenizer=kw["tokenizer"],
        ignore_eos=not kw["no_ignore_eos"],
    )
    workload = FixedLengthWorkload(config)
    options = _options(kw, kind="fixed", warmup=warmup, rate=kw["request_rate"], arrival=kw["arrival"])
    _run("fixed", workload, kw, options, api=api)


@bench.command("agentic")
@_common
@option("traces", required=True)
@click.option("--concurrency", type=_AT_LEAST_ONE, required=True, help="Live session trees (lanes).")
@option("duration", required=True, help=f"{describe(RunOptions, 'duration_s')} At least 900 for a submission.")
def agentic(**kw: Any) -> None:
    """AgentX multi-turn agentic trace replay with subagents (closed loop over live session trees)."""
    from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload

    if kw["api"] is not None:  # refused, never dropped (`--api completions` was)
        raise ConfigError(f"--api {kw['api']} does not apply to the agentic replay: it sends its conversations to "
                          "the chat API", fix="drop --api")
    workload = AgenticWorkload(AgenticConfig(**_given(source=kw["traces"], seed=kw["seed"], tokenizer=kw["tokenizer"],
                                                      concurrency=kw["concurrency"])))
    options = _options(kw, kind="agentic", warmup=0, rate=None, arrival="poisson")
    _run("agentic", workload, kw, options, api="chat")


@bench.command("replay")
@_common
@option("traces", required=True, type=PathValue(exists=True, dir_okay=False, path_type=Path),
        help="Mooncake timestamped trace (JSONL).")
@click.option("--speedup", type=FINITE_POSITIVE, default=1.0, show_default=True,
              help="Replay the timeline this many times faster.")
@option("duration", help=f"{describe(RunOptions, 'duration_s')} Default: the whole trace.")
def replay(**kw: Any) -> None:
    """Open-loop replay of a Mooncake timestamped trace."""
    from llmsweep.workload.mooncake import MooncakeConfig, MooncakeWorkload

    workload = MooncakeWorkload(MooncakeConfig(**_given(source=str(kw["traces"]), speedup=kw["speedup"],
                                                        seed=kw["seed"], tokenizer=kw["tokenizer"], api=kw["api"])))
    options = _options(kw, kind="replay", warmup=0, rate=None, arrival="poisson")
    _run("replay", workload, kw, options, api=workload.config.api)


def _given(**values: Any) -> dict[str, Any]:
    """The options given (an option left out keeps the workload config's default)."""
    return {k: v for k, v in values.items() if v is not None}


# Each bench subcommand drives one scenario; its gate profile decides the failure ratio and the gates.
_SCENARIOS = {"fixed": ScenarioId.FIXED_SEQ_LEN, "agentic": ScenarioId.AGENTIC_CODING,
              "replay": ScenarioId.MOONCAKE_REPLAY}


def _options(kw: dict[str, Any], *, kind: str, warmup: int, rate: float | None, arrival: str) -> Any:
    from llmsweep.client import RunOptions
    from llmsweep.workload.scenario import get_scenario

    ratio = kw["max_failure_ratio"]
    if ratio is None:
        ratio = get_scenario(_SCENARIOS[kind]).gate.max_error_ratio
    options = RunOptions(
        concurrency=kw.get("concurrency") if rate is None else None,
        request_rate=rate,
        arrival=arrival,  # type: ignore[arg-type]
        duration_s=kw.get("duration"),
        num_requests=kw.get("num_prompts"),  # `bench fixed`: the prompts it plans (the gates' planned count)
        grace_s=kw["grace"],
        warmup_requests=warmup,
        timeout_s=kw["timeout"],
        stall_timeout_s=kw["stall_timeout"],
        max_failure_ratio=ratio,
        seed=kw["seed"],
        gpus=kw["gpus"] or 1,  # the server's own count, when it reports one, replaces this in `_run`
        require_metrics_prefix=kw["require_metrics_prefix"],
        workers=kw["workers"],  # None: the client chooses from the load and the cores (client.runner.resolve_workers)
    )
    return options


API_KEY_ENV = "OPENAI_API_KEY"
"""Where `bench` reads the API key of a server that wants one (as vLLM's `bench serve` and the OpenAI clients do): on
the command line a key would show in `ps` and in shell history."""


def _endpoint(kw: dict[str, Any], api: Api) -> Any:
    from llmsweep.client import Endpoint

    metrics_url = kw["metrics_url"]
    key = os.environ.get(API_KEY_ENV, "").strip()
    if key:
        click.echo(f"sending ${API_KEY_ENV} as the API key (Authorization: Bearer)", err=True)
    return Endpoint(
        base_url=kw["url"], model=kw["model"], api=api,
        send_ignore_eos=not kw["no_ignore_eos"], send_stream_options=not kw["no_stream_options"],
        metrics_url="" if metrics_url == "none" else metrics_url,
        headers={"Authorization": f"Bearer {key}"} if key else {},
    )


def _run(kind: str, workload: Workload, kw: dict[str, Any], options: Any, *, api: Api) -> None:
    """Run `workload` against the endpoint the options name; `api`: the route its requests take."""
    from llmsweep.client import run_benchmark
    from llmsweep.client.probe import require_endpoint

    out = kw["out_dir"] or default_out(kind)
    _check_out(out, force=kw["force"], claimed=False)  # before the probe: a folder that cannot take the run, at once
    endpoint = _endpoint(kw, api)
    # Before any load: nothing listening (or a server still loading), or a model the server does not list, is exit 2
    # within seconds, not a window of connection errors ending in an all-zero table or a bare count of HTTP errors.
    probe = require_endpoint(endpoint.base_url, model=endpoint.model, headers=endpoint.headers, api=api)
    for note in probe.notes:
        click.echo(note, err=True)
    gpus, gpus_prov = probe.gpu_count(kw["gpus"])
    if (disagree := probe.gpus_disagree(kw["gpus"])) is not None:
        click.echo(disagree, err=True)
    if gpus_prov["gpus_known"] and kw["gpus"] is None:
        click.echo(f"GPUs serving the endpoint: {gpus} ({gpus_prov['gpus_from']})", err=True)
    # What served the load, as the server says itself (the simulator's /version: `engine: sim`), recorded as `run
    # --live` records it: a real engine's results are measured, the simulator's simulated, both in wall-clock time.
    from llmsweep.metrics.model import WALL

    source = probe.source
    if probe.simulated:
        click.echo(f"the endpoint is the simulator ({probe.root}/version): results say source: {source}", err=True)
    _say_tokenizer(workload, simulated=probe.simulated)
    options = options.model_copy(update={"gpus": gpus})
    from llmsweep.workload.scenario import get_scenario

    gates = get_scenario(_SCENARIOS[kind]).gate.config(
        planned_duration_s=options.duration_s, require_metrics_prefix=options.require_metrics_prefix,
        max_error_ratio=options.max_failure_ratio,
        planned_requests=options.num_requests if options.duration_s is None else None)
    from llmsweep.execute.signals import stop_on_signal, watching_pauses

    # SIGINT/SIGTERM stop the run instead of killing it: in-flight requests are recorded as cancelled and the summary
    # is written, its stop reason "interrupted by SIG…" (an invalid run); the exit status is then 130 or 143. A stop
    # of this process (Ctrl-Z) that a SIGCONT ended makes the measurement invalid, as `run` judges a job.
    from llmsweep.folderlock import claim

    try:
        # --out is this bench's alone from here to its summary: a second bench (or `run`) given the same folder is
        # refused, not let through to mix its records in, and `summarize` leaves it alone while it runs. Checked again
        # under the claim: another bench may have claimed and filled the folder since the check above.
        with claim(out, "llmsweep bench", fix=_BUSY_FIX), stop_on_signal() as stop, _progress(options) as bar, \
                watching_pauses() as pauses:
            _check_out(out, force=kw["force"], claimed=True)
            result = run_benchmark(workload, endpoint, options, out,
                                   provenance={"kind": kind, **gpus_prov, "source": source, "clock": WALL},
                                   gates=gates, on_progress=bar.update, stop_requested=stop.reason, source=source)
    except OSError as exc:
        from llmsweep.execute.lifecycle import out_unwritable

        # A full disk (or a read-only remount) under --out: one error and its fix, as `run` says it, not a traceback
        # from wherever the client was writing (its records, its /metrics scrapes).
        full = out_unwritable(exc, "the measurement", "run the bench again with --force", kept=str(out))
        if full is None:
            from llmsweep.client.records import OutputWriteError

            if isinstance(exc, OutputWriteError):  # its records could not be kept (a file-size limit, an I/O error)
                from llmsweep.errors import ResultError

                raise ResultError(f"{exc.reason()}; what was written before is in {out}",
                                  fix="fix what stopped the write (a file-size limit: `ulimit -f`; a disk error: the "
                                      "system log), then run the bench again with --force") from None
            raise
        raise full from None
    from llmsweep.execute.readback import judge_paused

    paused = judge_paused(out, tuple(pauses), again="run the bench again with --force")
    summary = result.summary if paused is None else paused
    _print_summary(summary, out, as_json=kw["as_json"])
    _print_first_errors(result, endpoint.api)
    if stop.exit_code is not None:
        click.echo(f"{stop.reason()}: the records and the summary so far are in {out}", err=True)
        raise click.exceptions.Exit(stop.exit_code)
    if result.gate_failed or paused is not None:
        raise click.exceptions.Exit(1)


_BUSY_FIX = "wait for it to finish, or pass a new folder to --out"


def default_out(kind: str) -> Path:
    """`results/bench-<kind>-<time>-<random>`: two benches started in the same second (a loop of `&`) get a folder
    each; the time alone was shared, and one bench's records were summarised as the other's."""
    import uuid

    return Path("results") / f"bench-{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _check_out(out: Path, *, force: bool, claimed: bool) -> None:
    """Refuse an `--out` whose files a run would replace (before any load): a folder a live bench or run holds
    (`folderlock`), another command's folder (a run of `llmsweep run`, one of its jobs, a `predict --out` point)
    always, a bench measurement unless `--force`. The run deletes a folder's records.jsonl, server_metrics.jsonl,
    summary.json and run.json first, so the measurement there was lost without a word, and a job folder got a bench's
    records beside its job.json. `claimed`: this bench holds the folder now (checked again under its claim; only then
is the --force replacement said)."""
    from llmsweep.client.files import RUN_FILE, SUMMARY_FILE
    from llmsweep.folderlock import refuse_held
    from llmsweep.results.rundir import FOLDER_KINDS, out_kind, refuse_inside_other_folder

    refuse_unwritable(out, folder=True)  # the run makes it only after the endpoint probe
    if not out.exists():
        refuse_inside_other_folder(out, "a bench's records, summary and run.json")
        return
    if not claimed:
        refuse_held(out, fix=_BUSY_FIX)
    kind = out_kind(out)  # (a bench killed before its first record, only the run.json of its start, is a bench)
    if kind in ("run", "job", "predicted"):
        raise ConfigError(f"--out {out} is {FOLDER_KINDS[kind]}: a bench there would replace its files with another "
                          "measurement's",
                          fix="pass a new folder to --out")
    refuse_inside_other_folder(out, "a bench's records, summary and run.json")  # (what the folder is, said above)
    holds = [name for name in (RECORDS_FILE, SUMMARY_FILE, RUN_FILE) if (out / name).exists()]
    if holds and not force:
        raise ConfigError(f"--out {out} already holds a measurement ({', '.join(holds)}); nothing was sent",
                          fix="pass a new folder to --out, or --force to replace that measurement")
    if holds and claimed:
        click.echo(f"--force: replacing the measurement in {out}", err=True)


def _say_tokenizer(workload: Any, *, simulated: bool) -> None:
    """One stderr line when prompt lengths are counted with the built-in word tokenizer: against a real model's
    endpoint they are then words, not the model's tokens (the server's prompt_tokens differ); the simulator counts
    the same tokens."""
    from llmsweep.workload.tokenizer import WordTokenizer

    if not isinstance(getattr(workload, "tokenizer", None), WordTokenizer):
        return
    why = ("the simulator counts prompt tokens the same way" if simulated
           else "prompt lengths are words, not the model's tokens; pass --tokenizer for the model's")
    click.echo(f"tokenizer: built-in words ({why})", err=True)


FIRST_ERROR_CHARS = 400
"""How much of an error's first message the end of a run prints (records.jsonl holds all of it)."""


def _print_first_errors(result: Any, api: str) -> None:
    """After a run with errors: each error class's first message (an HTTP error's text), not only their counts; and
    when no request succeeded and the first was a plain 404 (the route, not the model: a model the server does not
    serve is said by the probe), the other API's route to try."""
    from llmsweep.client.runner import first_errors

    errors = {cls: msg for cls, msg in first_errors(result.workers).items() if cls != "cancelled"}
    for cls, message in errors.items():
        text = " ".join(message.split())
        if len(text) > FIRST_ERROR_CHARS:
            text = text[:FIRST_ERROR_CHARS] + "…"
        click.echo(f"first {cls} error: {text}", err=True)
    if errors:
        click.echo(f"(every request's error is in {result.records_path})", err=True)
    route = {"completions": ("/v1/completions", "chat"), "chat": ("/v1/chat/completions", "completions")}.get(api)
    if (route is not None and not result.summary.requests.successful
            and (errors.get("http") or "").startswith("HTTP 404") and "model" not in errors["http"].lower()):
        click.echo(f"hint: the server answers {route[0]} with 404: it may serve the other API only; try --api "
                   f"{route[1]}", err=True)


def _progress(options: Any, stream: Any = None) -> _ProgressBar | _ProgressLines:
    """The bench's progress on stderr: a live bar under a terminal, timestamped lines otherwise (a log, CI, a pipe),
    as `run` shows its own."""
    from rich.console import Console

    console = Console(stderr=True) if stream is None else Console(file=stream)
    return _ProgressBar(options, console) if console.is_terminal else _ProgressLines(options, stream)


class _ProgressLines:
    """Not a terminal: a timestamped line on stderr when the run changes phase (warming up, measuring, draining) and
    every `interval_s` while one lasts, then the last counters when it ends. A bar there was drawn once, at the end: a
    bench in a log or CI said nothing for its whole window."""

    def __init__(self, options: Any, stream: Any = None, interval_s: float = 30.0) -> None:
        self.options = options
        self.stream = stream
        self.interval_s = interval_s
        self.last: Any = None  # the latest Progress
        self.said_phase: str | None = None
        self.said_at = 0.0
        self.drain_from: float | None = None
        self.drain_inflight = 0
        self.grace = 0.0

    def __enter__(self) -> _ProgressLines:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.last is not None:  # where the run ended: its last counters (and the drain's, after the window)
            self._write(self.last)

    def _write(self, p: Any) -> None:
        import sys

        print(f"[{time.strftime('%H:%M:%S')}] {self._line(p)}", file=self.stream or sys.stderr, flush=True)

    def _line(self, p: Any) -> str:
        if p.phase == "warming":
            line = f"bench: warming up: done {p.warmup_finished} in-flight {p.inflight}"
        else:
            line = (f"bench: done {p.profiling_finished} failed {p.failed} in-flight {p.inflight} "
                    f"tok {p.profiling_output_tokens}")
            if p.duration_s and p.profiling_elapsed_s is not None:
                line += f", window {min(p.profiling_elapsed_s, p.duration_s):.0f}/{p.duration_s:g} s"
            elif p.target_requests:
                line += f", {p.profiling_finished}/{p.target_requests} requests"
        if p.stop_reason:
            line += f" [stopping: {p.stop_reason}]"
        if self.drain_from is not None:
            left = f"{p.inflight} in flight" if p.inflight else "none in flight"
            line += (f"\n[{time.strftime('%H:%M:%S')}] draining: {left} (of {self.drain_inflight} when sending "
                     f"stopped; grace {self.grace:g} s), waited {p.elapsed_s - self.drain_from:.0f} s")
        return line

    def update(self, p: Any) -> None:
        self.last = p
        if p.phase == "draining" and self.drain_from is None and p.inflight:
            # as the bar's drain line: the grace after the window, none after a stop (the requests are cancelled)
            self.grace = self.options.grace_s if p.stop_reason in (None, DURATION_REACHED) else 0.0
            self.drain_from, self.drain_inflight = p.elapsed_s, p.inflight
        now = time.monotonic()
        if p.phase != self.said_phase or now - self.said_at >= self.interval_s:
            self.said_phase, self.said_at = p.phase, now
            self._write(p)


class _ProgressBar:
    """A rich progress bar on stderr: requests toward the target, or seconds toward the deadline; once the window has
    ended (or the run stops), a second line for the drain: the requests still in flight and the grace they get."""

    def __init__(self, options: Any, console: Any) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.options = options
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(), console=console, transient=False,
        )
        total = options.duration_s or options.num_requests
        self.task = self.progress.add_task("bench", total=total, stats="")
        self.drain: Any = None  # the drain line's task, from the first update that says `draining`
        self.drain_from = self.grace = 0.0
        self.drain_inflight = 0

    def __enter__(self) -> _ProgressBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, p: Any) -> None:
        # the window's requests, as the summary counts them; the warm-up's apart (`client.runner.Progress`)
        done = p.profiling_elapsed_s if self.options.duration_s else (
            p.profiling_finished if p.target_requests else None)
        if p.phase == "warming":
            stats = f"warming up: done {p.warmup_finished} in-flight {p.inflight}"
        else:
            stats = (f"done {p.profiling_finished} failed {p.failed} in-flight {p.inflight} "
                     f"tok {p.profiling_output_tokens}")
        if p.stop_reason:
            stats += f" [stopping: {p.stop_reason}]"
        self.progress.update(self.task, completed=done or 0, stats=stats)
        if p.phase != "draining":
            return
        if self.drain is None:
            if not p.inflight:
                return  # nothing to wait for: the run ends now
            # after the window in-flight requests get the grace period; a stop (failure ratio, signal) cancels them
            # (draining without a stop reason: the window is over, the client has yet to say so)
            self.grace = self.options.grace_s if p.stop_reason in (None, DURATION_REACHED) else 0.0
            self.drain = self.progress.add_task("draining", total=self.grace or None, stats="")
            self.drain_from, self.drain_inflight = p.elapsed_s, p.inflight
        left = f"{p.inflight} in flight" if p.inflight else "none in flight"
        self.progress.update(self.drain, completed=p.elapsed_s - self.drain_from, stats=(
            f"{left} (of {self.drain_inflight} when sending stopped; grace {self.grace:g} s)"))


def _fmt(v: Any, scale: float = 1.0, digits: int = 2) -> str:
    return "-" if v is None else f"{v * scale:,.{digits}f}"


def _print_summary(summary: Summary, out: Path, *, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary.dump(), indent=2))
        return
    from llmsweep.cli.tables import Column, plain, print_tables, table_console
    from llmsweep.metrics import registry

    console = table_console()
    req, tput = summary.requests, summary.throughput
    stats = ("mean", "p50", "p90", "p99", "p99.9")
    rows = []
    for metric in (registry.TTFT, registry.TPOT, registry.ITL, registry.E2EL):  # labels from the metric table
        block = metric.stats_of(summary)  # no sample (every request failed) is no figure: `-`, not 0.00
        rows.append([f"{metric.label} ms", *(_fmt(block.stat(c), 1e3) for c in stats)])
    inter = registry.INTERACTIVITY
    rows.append([f"{inter.label} {inter.unit}", *(_fmt(summary.interactivity.stat(c)) for c in stats)])
    # laid out as every table is (`cli.tables`): a number is never cut (`3,663.…` in a narrow terminal); the
    # statistics that do not fit go into a continuation table beside the metric
    print_tables(plain(f"llmsweep bench — {out}"), [Column("metric", kind="key", justify="left"),
                                                      *(Column(c) for c in stats)],
                 [[plain(cell) for cell in row] for row in rows], console=console)
    health = summary.client_health
    spec = summary.server_metrics.spec_decode
    al = spec.acceptance_length if spec is not None else None
    # A GPU count nobody stated or read is no GPU count: the figure is the whole endpoint's, and says so.
    known = summary.provenance.gpus_known is not False
    per_gpu = tput.per_gpu
    if not known:
        tokens = (f"{_fmt(tput.output_tps)} output, {_fmt(tput.total_tps)} total tok/s/endpoint "
                  "(GPUs unknown: pass --gpus for per GPU)")
    else:  # per GPU, as `run`'s table, then the endpoint's output: one unit per figure
        tokens = (f"{_fmt(per_gpu.output_tps)} output, {_fmt(per_gpu.total_tps)} total tok/s/GPU "
                  f"({tput.gpus} GPU{'s' if tput.gpus != 1 else ''}; {_fmt(tput.output_tps)} output tok/s in all)")
    lines = [
        f"requests: {req.successful} ok, {req.failed} failed, {req.cancelled} cancelled, "
        f"{req.warmup} warmup" + (f" ({req.warmup_cancelled} cancelled)" if req.warmup_cancelled else "")
        + f"  errors: {req.error_categories or '-'}",
        f"throughput: {_fmt(tput.request_rps)} req/s, {tokens} over {_fmt(tput.duration_s)} s" if req.successful
        else "throughput: - (no request succeeded)",
        f"cache hit: theoretical {_fmt(summary.cache.theoretical_hit_rate)}, "
        f"observed {_fmt(summary.cache.observed_hit_rate)}"
        + (f"   realised acceptance length {al:.3f}" if al else ""),
        # no lag sample (every request cancelled before it was sent) is no figure: `-`, as in the latency table
        f"client: {_fmt(health.cpu_s_total)} CPU-s, lag p99 "
        f"{_fmt(health.schedule_lag_s.p99 if health.schedule_lag_s.count else None, 1e3)} ms"
        # the server closed a pooled connection as a request went out on it (its keep-alive timeout): sent again
        + (f", {health.requests_retried} request{'s' if health.requests_retried != 1 else ''} sent again on a new "
           "connection (the server closed its idle one as it arrived)" if health.requests_retried else "")
        + ("  [red]SATURATED: " + "; ".join(health.saturation_reasons) + "[/]" if health.saturated else ""),
    ]
    if summary.eval is not None:
        ev = summary.eval
        score = "-" if ev.score is None else f"{ev.score:.4f}"
        lines.append(f"eval ({ev.mode}): {ev.task} {ev.score_name or 'score'} {score} → {ev.verdict} "
                     f"({ev.harness} {ev.harness_version or '?'}, {ev.runs[0].n_samples if ev.runs else '-'} samples)")
    for line in lines:
        console.print(line)
    from llmsweep.cli.verdicts import verdict_cell

    v = summary.validity
    # the reasons are why the verdict is what it is; a warning is not (summary.json keeps them apart too)
    console.print(f"validity: {verdict_cell(v.verdict)}" + (f" — {'; '.join(v.reasons)}" if v.reasons else ""))
    if v.warnings:
        console.print(f"warnings: {'; '.join(v.warnings)}")


def _refuse_run_folder(path: Path) -> None:
    """A run folder given to `summarize`, which takes one job's folder, is named as a run (as `compare` names a job
    folder given for a run: `rundir.load_run`), with a few of its job folders and how many it holds."""
    from llmsweep.results.rundir import FOLDER_KINDS, folder_kind, is_job_dir

    if folder_kind(path) != "run" or not (path / "jobs").is_dir():
        return
    jobs = sorted(str(d) for d in (path / "jobs").iterdir() if is_job_dir(d))
    if not jobs:
        raise ConfigError(f"{path} is {FOLDER_KINDS['run']} that holds no job folder (jobs/ is empty), not a job "
                          "folder: summarize recomputes one job's summary.json; nothing was written",
                          fix="pass a job folder, RUN/jobs/<job id>, of a run whose jobs ran")
    more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
    raise ConfigError(f"{path} is {FOLDER_KINDS['run']} ({count_of(len(jobs), 'job folder')} under jobs/), not a job "
                      "folder: summarize recomputes one job's summary.json; nothing was written",
                      fix=f"pass one of its job folders: {', '.join(jobs[:3])}{more}")


@click.command("summarize")
@click.argument("run_dir", metavar="DIR", type=PathValue(exists=True, file_okay=False, path_type=Path))
@json_option("the summary (summary.json)")
def summarize(run_dir: Path, as_json: bool) -> None:
    """Recompute DIR/summary.json from records.jsonl and run.json (+ server_metrics.jsonl, job.json): DIR is one
    measurement's folder, a job folder of `llmsweep run` (RUN/jobs/<job id>; a run folder is refused, naming them),
    a `bench` output folder or a point folder of `predict --out`.

    run.json says what served the records (the summary's source) and the gates they are judged by: a folder without
    one is refused (exit 2) and its summary.json left as it is. Every gate `llmsweep run` applied is applied again
    from what the folder recorded, read-back checks included, so a job folder gets the verdict `run` gave it. A packed
    slice (fewer records than the client started, fewer /metrics scrapes than its summary read) is re-judged from the
    figures its summary.json measured over the run's window, and says so among the warnings. A folder a bench still
    runs in is refused (exit 2), nothing written: its records are not all there, and its run.json says "unfinished".
    """
    from llmsweep.evals.results import EVAL_DIR, EVAL_FILE
    from llmsweep.execute.readback import summarise_job
    from llmsweep.folderlock import holder

    if (held := holder(run_dir)) is not None:
        raise ConfigError(f"{run_dir} is still being written: {held.who}{held.pid_note} is running there, so its "
                          "records are not all there yet; nothing was written",
                          fix="wait for it to finish (it writes summary.json when it ends; Ctrl-C stops it with the "
                              "summary so far), then summarize the folder")

    if not (run_dir / RECORDS_FILE).exists() and not (run_dir / EVAL_DIR / EVAL_FILE).exists():  # eval-only: none
        _refuse_run_folder(run_dir)
        raise ConfigError(f"{run_dir} has no records.jsonl",
                          fix="point at a folder `llmsweep bench` or `predict --out` wrote, or a job folder of `run`")
    summary = summarise_job(run_dir)
    _print_summary(summary, run_dir, as_json=as_json)
    if summary.validity.verdict == "invalid":
        raise click.exceptions.Exit(1)
