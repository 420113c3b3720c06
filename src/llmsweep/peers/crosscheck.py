"""Side by side: llmsweep's client and aiperf on the same server, the same prompts, the same concurrency.

At each concurrency the two clients take turns (llmsweep, then aiperf), and the whole list of levels is walked
`repeats` times, so a drift of the server over time falls on both clients and a cross-check cut short by a deadline
keeps whole repeats of every level. Every run draws its own prompts (the seed advances per run) with the
same lengths, so no run reads another's prompts from the prefix cache, and each run sends its own warm-ups first.

Each figure is reported three ways: llmsweep's own, aiperf's own (its JSON export), and aiperf's records summarised
by llmsweep. The difference between the clients then splits into a *definition* part (aiperf's own against its
records under our definitions) and a *measurement* part (its records against ours under one set of definitions).
The measurement part is judged against the between-run 95 % band of the repeats (`results.bands`, the band
`llmsweep compare` calls regressions with): inside it the clients agree; outside it they differ.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llmsweep import atomic
from llmsweep.client import Endpoint, RunOptions, run_benchmark, summarise_dir
from llmsweep.errors import ConfigError, DatasetError, LlmsweepError
from llmsweep.execute.readback import judge_paused
from llmsweep.execute.signals import stop_then_raise, watching_pauses
from llmsweep.jsonline import read_json_text
from llmsweep.metrics.model import RunSource, Summary
from llmsweep.metrics.registry import SCHEDULE_LAG, figure
from llmsweep.peers.aiperf import (
    AiperfRun,
    aiperf_argv,
    import_aiperf_dir,
    read_aiperf_figures,
    read_aiperf_server_latency,
    run_aiperf,
    write_aiperf_dataset,
)
from llmsweep.results.bands import between_run_band
from llmsweep.words import count_of
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

log = logging.getLogger(__name__)

Client = Literal["llmsweep", "aiperf"]
RESULT_FILE = "crosscheck.json"
TABLE_FILE = "crosscheck.md"


AIPERF_START_STOP_S = 120.0
"""Seconds a cross-check allows aiperf for starting (its services, the tokenizer) and exiting, on top of its
requests' timeouts (`CrossCheckConfig.deadline`)."""


class CrossCheckConfig(BaseModel):
    """What to compare: one endpoint, fixed lengths, a list of concurrencies."""

    model_config = ConfigDict(extra="forbid")

    endpoint: Endpoint
    isl: int = Field(ge=1, description="Input tokens per request (content; the chat template adds its own).")
    osl: int = Field(ge=1, description="Output tokens per request (max_tokens; ignore_eos keeps it exact).")
    concurrencies: list[int] = Field(min_length=1, description="Closed-loop concurrency levels, in order.")
    prompts_per_concurrency: int = Field(default=4, ge=1, description="Measured requests per unit of concurrency.")
    min_prompts: int = Field(default=16, ge=1, description="At least this many measured requests per run.")
    warmups_per_concurrency: int = Field(default=2, ge=0, description="Warm-up requests per unit of concurrency.")
    repeats: int = Field(default=2, ge=1, description="Runs of each client per level (2+ gives the between-run band).")
    tokenizer: str = Field(description="Tokenizer directory both clients count with (the served model's).")
    aiperf: str = Field(default="aiperf", description="aiperf executable.")
    timeout_s: float = Field(default=600.0, gt=0, description="Per-request timeout, both clients.")
    run_deadline_s: float | None = Field(default=None, gt=0, description="Stop one aiperf run after this long; None: "
                                         "the longest a run that keeps making progress can take (`deadline`).")
    seed: int = Field(default=0, description="First prompt seed; each run adds its position.")
    gpus: int | None = Field(default=None, ge=1, description="GPUs behind the endpoint; None: as the server reports "
                             "(`/version`, `/get_server_info`), else unknown (per-GPU figures are the endpoint's).")

    def prompts(self, concurrency: int) -> int:
        return max(self.min_prompts, self.prompts_per_concurrency * concurrency)

    def warmups(self, concurrency: int) -> int:
        return self.warmups_per_concurrency * concurrency

    def deadline(self, concurrency: int) -> float:
        """Seconds one aiperf run at `concurrency` may take before it is stopped and recorded as such:
        `run_deadline_s`, else the longest a run can take while every request ends by its timeout — its warm-up and
        measured requests in rounds of `concurrency`, one more round, and `AIPERF_START_STOP_S` for the process's
        start and exit. A client hung at start-up or shutdown (its services never exiting) is stopped; a run still
        making progress never is."""
        if self.run_deadline_s is not None:
            return self.run_deadline_s
        rounds = -(-(self.prompts(concurrency) + self.warmups(concurrency)) // concurrency) + 1
        return rounds * self.timeout_s + AIPERF_START_STOP_S


@dataclass(slots=True)
class ClientRun:
    """One run of one client at one concurrency: its directory, our summary of it, and what the client itself said."""

    client: Client
    concurrency: int
    repeat: int
    seed: int
    out_dir: str
    """Relative to the cross-check directory."""
    summary: Summary | None = None
    own: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    """The server's own latency over the run (`server_metrics.latency`), for llmsweep's runs from its scrapes, for
    aiperf's from the scrapes aiperf made."""
    cpu_s: float | None = None
    wall_s: float | None = None
    error: str | None = None
    paused: bool = False
    """llmsweep was stopped (Ctrl-Z, SIGSTOP) and continued while the run measured: its timings include the pause
    (`readback.judge_paused`; `error` says how long), so it is compared with nothing."""
    interrupted: bool = False
    """A signal (Ctrl-C, SIGTERM) stopped the cross-check during this run: what it measured before the stop is its
    summary (invalid: `run stopped early`), shown with its counts and verdict and compared with nothing."""

    @property
    def ok(self) -> bool:
        return (self.summary is not None and self.summary.requests.successful > 0 and not self.paused
                and not self.interrupted)

    @property
    def problem(self) -> str | None:
        """Why the run is compared with nothing (its `error`, else that no request succeeded); None when it is not."""
        if self.error:
            return self.error
        return None if self.ok else "no successful request"


@dataclass(frozen=True, slots=True)
class Figure:
    """A compared figure: how it is read from a summary, where it sits in aiperf's own figures (`read_aiperf_figures`
    puts them under our names), in the server's latency block (means only), and its display scale."""

    label: str
    unit: str
    of: Callable[[Summary], float]
    path: tuple[str, ...]
    scale: float = 1.0
    server: str | None = None


FIGURES: tuple[Figure, ...] = (
    Figure("TTFT p50", "ms", lambda s: s.latency.ttft.p50, ("latency", "ttft", "p50"), 1e3),
    Figure("TTFT mean", "ms", lambda s: s.latency.ttft.mean, ("latency", "ttft", "mean"), 1e3, "ttft_mean_s"),
    Figure("TPOT p50", "ms", lambda s: s.latency.tpot.p50, ("latency", "tpot", "p50"), 1e3),
    Figure("TPOT mean", "ms", lambda s: s.latency.tpot.mean, ("latency", "tpot", "mean"), 1e3, "tpot_mean_s"),
    Figure("ITL mean", "ms", lambda s: s.latency.itl.mean, ("latency", "itl", "mean"), 1e3, "itl_mean_s"),
    Figure("E2EL mean", "ms", lambda s: s.latency.e2el.mean, ("latency", "e2el", "mean"), 1e3, "e2el_mean_s"),
    Figure("output tok/s", "tok/s", lambda s: s.throughput.output_tps, ("throughput", "output_tps")),
    Figure("requests/s", "req/s", lambda s: s.throughput.request_rps, ("throughput", "request_rps")),
)


@dataclass(slots=True)
class Row:
    """One figure at one concurrency. Percentages are relative to llmsweep's value (or aiperf's, for the split)."""

    concurrency: int
    figure: str
    unit: str
    llmsweep: float | None
    aiperf_own: float | None
    aiperf_ours: float | None
    difference_pct: float | None
    definition_pct: float | None
    measurement_pct: float | None
    band_pct: float | None
    verdict: str
    server_llmsweep: float | None = None
    """The server's own figure during llmsweep's runs (means only), and during aiperf's."""
    server_aiperf: float | None = None
    server_pct: float | None = None
    """How much the server itself differed between the two clients' runs: the part of `measurement_pct` that is
    not the clients'."""


@dataclass(slots=True)
class CrossCheck:
    """The runs of a cross-check; its rows and per-level counts are always derived from them."""

    config: dict[str, Any]
    runs: list[ClientRun] = field(default_factory=list)
    interrupted: str | None = None
    """The signal that stopped the cross-check (`SIGINT`), None while it runs and once it ran to its end; the runs
    it never started are said as not run."""

    @property
    def rows(self) -> list[Row]:
        return compare(self.runs, self.config.get("concurrencies", ()))

    @property
    def levels(self) -> list[dict[str, Any]]:
        return levels(self.runs, self.config.get("concurrencies", ()), self.config.get("repeats", 0))

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "interrupted": self.interrupted, "levels": self.levels,
                "rows": [asdict(r) for r in self.rows],
                "runs": [{**asdict(r), "summary": r.summary.dump() if r.summary is not None else None}
                         for r in self.runs]}


# ---------------------------------------------------------------------------------------------------- running
def _workload(cfg: CrossCheckConfig, concurrency: int, seed: int) -> FixedLengthWorkload:
    return FixedLengthWorkload(FixedLengthConfig(
        isl=cfg.isl, osl=cfg.osl, api="chat", num_prompts=cfg.prompts(concurrency),
        num_warmups=cfg.warmups(concurrency), seed=seed, tokenizer=cfg.tokenizer,
        ignore_eos=cfg.endpoint.send_ignore_eos,
    ))


@dataclass(frozen=True, slots=True)
class _Served:
    """What served the cross-check, as the server says before any load: `source`, and the GPU count per-GPU figures
    divide by with where it came from (`gpus_known`, `gpus_from`, as `bench` records them)."""

    source: RunSource
    gpus: int
    provenance: dict[str, Any]
    notes: tuple[str, ...] = ()
    """What to say before any load, as `bench` says it: a `--model` the server does not list but took, a `--gpus`
    the server's own count contradicts."""


def _served(cfg: CrossCheckConfig) -> _Served:
    """What the server says of itself before any load: its source, and its GPU count (`EndpointProbe.gpu_count`).
    The probe `bench` makes (`client.probe.require_endpoint`): nothing answering at the URL, a server still loading
    or one that does not serve `--model` is a ConfigError (exit 2) within seconds, before either client runs."""
    from llmsweep.client.probe import require_endpoint

    probe = require_endpoint(cfg.endpoint.base_url, model=cfg.endpoint.model, headers=cfg.endpoint.headers,
                             api=cfg.endpoint.api)
    disagree = probe.gpus_disagree(cfg.gpus)
    return _Served(probe.source, *probe.gpu_count(cfg.gpus),
                   notes=(*probe.notes, *((disagree,) if disagree is not None else ())))


def _run_llmsweep(cfg: CrossCheckConfig, run: ClientRun, out: Path, served: _Served) -> None:
    workload = _workload(cfg, run.concurrency, run.seed)
    options = RunOptions(
        concurrency=run.concurrency, num_requests=cfg.prompts(run.concurrency),
        warmup_requests=cfg.warmups(run.concurrency), timeout_s=cfg.timeout_s, seed=run.seed, gpus=served.gpus,
    )
    with stop_then_raise() as stop:  # a signal stops the load at the client's next poll, then unwinds
        result = run_benchmark(workload, cfg.endpoint, options, out,
                               provenance={"kind": "crosscheck", **served.provenance},
                               stop_requested=stop.reason, source=served.source)
        # kept before the signal is raised (as the block ends): an interrupted run's summary is what it measured
        run.summary = result.summary
        _read_back(run, out)
        run.cpu_s = result.summary.client_health.cpu_s_total
        prov = result.summary.provenance
        if prov.started_at and prov.finished_at:
            run.wall_s = prov.finished_at - prov.started_at


def _run_aiperf(cfg: CrossCheckConfig, run: ClientRun, out: Path, served: _Served) -> None:
    workload = _workload(cfg, run.concurrency, run.seed)
    dataset = out / "dataset.jsonl"
    max_tokens = write_aiperf_dataset(workload, dataset, cfg.endpoint)
    spec = AiperfRun(
        endpoint=cfg.endpoint, dataset=dataset, artifact_dir=out / "artifacts", concurrency=run.concurrency,
        requests=cfg.prompts(run.concurrency), warmups=cfg.warmups(run.concurrency), tokenizer=cfg.tokenizer,
        executable=cfg.aiperf, timeout_s=cfg.timeout_s,
    )
    (out / "command.txt").write_text(" ".join(aiperf_argv(spec)) + "\n")
    deadline = cfg.deadline(run.concurrency)
    outcome = run_aiperf(spec, deadline_s=deadline)
    run.cpu_s, run.wall_s = outcome.cpu_s, outcome.wall_s
    if outcome.timed_out:
        run.error = (f"aiperf ran past {deadline:g} s and was stopped" + (
            "" if cfg.run_deadline_s is not None else
            f" (the longest a run of {spec.requests + spec.warmups} requests at concurrency {run.concurrency} with "
            f"a {cfg.timeout_s:g} s request timeout can take; --run-deadline sets another)"))
    elif outcome.returncode:
        run.error = f"aiperf exited {outcome.returncode} (see {outcome.log_path})"
    try:
        run.summary = import_aiperf_dir(
            spec.artifact_dir, out, max_tokens=max_tokens, gpus=served.gpus,  # the warm-ups the export labels
            provenance={"command": aiperf_argv(spec), "returncode": outcome.returncode, "cpu_s": outcome.cpu_s,
                        **served.provenance},
            source=served.source,
        )
        _read_back(run, out)
    except DatasetError as exc:
        run.error = (run.error + "; " if run.error else "") + exc.message


def _read_back(run: ClientRun, folder: Path) -> None:
    """What the client itself reported (aiperf's own figures) and what the server reported over the run: llmsweep's
    scrapes are in its summary, aiperf's in its artifacts."""
    if run.client == "llmsweep":
        latency = run.summary.server_metrics.latency if run.summary is not None else None
        run.server = latency.model_dump() if latency is not None else None
    else:
        run.own = read_aiperf_figures(folder / "artifacts")
        run.server = read_aiperf_server_latency(folder / "artifacts")


BUSY_FIX = "wait for it to finish, or pass a new folder to --out"
"""How to go on when a live process (another cross-check, a `bench`, a `run`) holds the cross-check's folder."""


def run_crosscheck(cfg: CrossCheckConfig, out: Path, *, on_run: Callable[[ClientRun], None] | None = None,
                   claimed: Callable[[], None] | None = None, say: Callable[[str], None] | None = None) -> CrossCheck:
    """Run every level, both clients in turn; write `crosscheck.json` and `crosscheck.md` under `out`. Every run's
    summary says what served it (`source`) and on how many GPUs, as the server says itself before any load
    (`client.probe`, whose notes go to `say`). An endpoint where nothing answers (or that is still loading, or does
    not serve the model) and an aiperf that cannot be started are refused before any load (ConfigError): every run
    would fail, one client's after the other's had run.

    A signal (Ctrl-C, SIGTERM) stops the run in progress (`on_run` is told of it too), writes the cross-check with
    that run's summary as far as it measured and the runs not started said as not run, and is raised again.

    `out` is this cross-check's alone from the first load to the last write (`folderlock.claim`, as `bench` and `run`
    claim --out): another cross-check, bench or run given it meanwhile is refused (ConfigError, exit 2) naming this
    one, and this one is refused where a live process holds it, whatever --force says (two loads' runs under one
    cross-check's labels). `claimed` is called once the claim is held: the caller's check of what `out` holds, made
    again there (another cross-check may have written it since the caller first looked)."""
    from llmsweep.folderlock import claim

    if shutil.which(cfg.aiperf) is None:
        raise ConfigError(f"aiperf executable {cfg.aiperf!r} not found (or not executable)",
                          fix="install aiperf (pip install aiperf==0.13.0) or pass its path with --aiperf")
    served = _served(cfg)
    for note in served.notes:
        if say is not None:
            say(note)
    with claim(out, "llmsweep peer crosscheck", fix=BUSY_FIX):
        if claimed is not None:
            claimed()
        return _run_claimed(cfg, out, served, on_run)


def _run_claimed(cfg: CrossCheckConfig, out: Path, served: _Served,
                 on_run: Callable[[ClientRun], None] | None) -> CrossCheck:
    check = CrossCheck(config={**cfg.model_dump(mode="json"), "gpus": served.gpus, **served.provenance})
    position = 0
    running: ClientRun | None = None  # the run in progress, until the cross-check holds it
    try:
        for repeat in range(cfg.repeats):  # every level once before any twice: a run cut short keeps whole repeats
            for concurrency in cfg.concurrencies:
                for client in ("llmsweep", "aiperf"):
                    run = running = ClientRun(client=client, concurrency=concurrency, repeat=repeat,
                                              seed=cfg.seed + position, out_dir=f"c{concurrency}/{client}-{repeat}")
                    position += 1
                    (out / run.out_dir).mkdir(parents=True, exist_ok=True)
                    try:
                        with watching_pauses() as pauses:
                            (_run_llmsweep if client == "llmsweep" else _run_aiperf)(cfg, run, out / run.out_dir,
                                                                                     served)
                        _unpaused_or_invalid(run, out / run.out_dir, pauses)
                    except Exception as exc:  # a failed run is a row with its reason, never a lost cross-check
                        log.exception("%s at concurrency %d failed", client, concurrency)
                        run.error = f"{type(exc).__name__}: {exc}"
                    check.runs.append(run)
                    running = None
                    write_crosscheck(check, out)  # after every run: a cross-check stopped half way keeps its table
                    if on_run is not None:
                        on_run(run)
    except KeyboardInterrupt as exc:  # a signal: what the run in progress measured is kept and said, the rest not run
        check.interrupted = signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
        if running is not None:
            _stopped(running, check.interrupted)
            check.runs.append(running)
        write_crosscheck(check, out)
        if running is not None and on_run is not None:
            on_run(running)
        raise
    return check


def _stopped(run: ClientRun, signal_name: str) -> None:
    """A run a signal stopped: its error says so, and what its summary (if it wrote one) counted and judged."""
    run.interrupted = True
    said = f"interrupted by {signal_name}"
    if run.summary is None:
        run.error = said + (" before it measured anything" if run.client == "llmsweep" else
                            ": aiperf was stopped, and nothing of its run is read back")
        return
    req, validity = run.summary.requests, run.summary.validity
    counts = ", ".join([f"{count_of(req.successful, 'request')} ok",
                        *([f"{req.failed} failed"] if req.failed else []),
                        *([f"{req.cancelled} cancelled"] if req.cancelled else [])])
    why = f" ({validity.reasons[0]})" if validity.reasons else ""
    run.error = f"{said}: {counts}; its summary is {validity.verdict}{why}, compared with nothing"


def _unpaused_or_invalid(run: ClientRun, folder: Path, pauses: Sequence[float]) -> None:
    """A run during which this process was stopped (Ctrl-Z, `kill -STOP`) and continued (`pauses`: how long each stop
    lasted) judged invalid as `run` and `bench` judge one (`readback.judge_paused`): the server answered on through
    the pause, and llmsweep's clocks (or aiperf's, stopped with it by a Ctrl-Z) counted it. It is compared with
    nothing, and the cross-check exits 1."""
    judged = judge_paused(folder, tuple(pauses), again="run the cross-check again into a fresh --out")
    if judged is None:
        return
    run.summary, run.paused = judged, True
    why = judged.validity.reasons[0]
    run.error = why if run.error is None else f"{run.error}; {why}"


def load_crosscheck(out: Path, *, resummarise: bool = False) -> CrossCheck:
    """A cross-check directory read back, rows and levels recomputed from its runs. With `resummarise`, every run's
    summary is first recomputed from its raw files (records, scrapes, aiperf's exports), as after a change of the
    metric definitions; that needs the runs' whole `records.jsonl`, not a slice of it."""
    path = out / RESULT_FILE
    if not path.exists():
        raise DatasetError(f"{out} holds no {RESULT_FILE}", fix="point at the --out of `llmsweep peer crosscheck`")
    fix = "restore the file (it was cut short or edited) or re-run the cross-check into a fresh --out"
    try:
        data = json.loads(read_json_text(path, errors="replace"))
    except ValueError as exc:  # cut short (a kill while it was written) or not JSON
        raise DatasetError(f"{path}: not JSON ({exc})", fix=fix) from exc
    try:
        runs = [ClientRun(**{**r, "summary": Summary.from_doc(r["summary"]) if r.get("summary") else None})
                for r in data["runs"]]
        check = CrossCheck(config=data["config"], runs=runs, interrupted=data.get("interrupted"))
        markdown(check)  # every field the table reads is there
    except (TypeError, KeyError, AttributeError, ValueError, LlmsweepError) as exc:  # JSON, not a cross-check
        raise DatasetError(f"{path}: not a cross-check ({type(exc).__name__}: {str(exc)[:200]})", fix=fix) from exc
    for run in runs:
        if resummarise and run.summary is not None:
            run.summary = summarise_dir(out / run.out_dir)
            _read_back(run, out / run.out_dir)
    return check


def write_crosscheck(check: CrossCheck, out: Path) -> None:
    """Write `crosscheck.json` (runs, rows, levels) and `crosscheck.md` under `out`, each whole or not at all: they are
    rewritten after every run, and a cross-check killed while writing keeps the table of the runs before."""
    for name, text in ((RESULT_FILE, json.dumps(check.to_dict(), indent=2, allow_nan=False)),
                       (TABLE_FILE, markdown(check))):
        atomic.write_text(out / name, text)


# ---------------------------------------------------------------------------------------------------- comparing
def _of(summary: Summary | None, fig: Figure) -> float | None:
    """A figure of one of our summaries; zero is no measurement (an empty sample's statistics are zeros)."""
    value = fig.of(summary) if summary is not None else 0.0
    return value or None


def _get(data: dict[str, Any] | None, path: tuple[str, ...]) -> float | None:
    """A figure of aiperf's own export (`read_aiperf_figures`, a dict under our names) or the server's block."""
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return float(data) if isinstance(data, (int, float)) else None


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _pct(a: float | None, b: float | None) -> float | None:
    """(a - b) / b in percent."""
    return None if a is None or b is None or b == 0 else 100.0 * (a - b) / b


def compare(runs: list[ClientRun], planned: Sequence[int] = ()) -> list[Row]:
    """One row per (concurrency, figure) over the runs that measured something; a `planned` level no run reached
    (a cross-check interrupted before it) has rows that say `not run`."""
    rows: list[Row] = []
    for concurrency in dict.fromkeys([*planned, *(r.concurrency for r in runs)]):
        if not any(r.concurrency == concurrency for r in runs):
            rows += [Row(concurrency=concurrency, figure=fig.label, unit=fig.unit, llmsweep=None, aiperf_own=None,
                         aiperf_ours=None, difference_pct=None, definition_pct=None, measurement_pct=None,
                         band_pct=None, verdict=NOT_RUN) for fig in FIGURES]
            continue
        ours = [r for r in runs if r.concurrency == concurrency and r.client == "llmsweep" and r.ok]
        theirs = [r for r in runs if r.concurrency == concurrency and r.client == "aiperf" and r.ok]
        for fig in FIGURES:
            a = [v for r in ours if (v := _scaled(_of(r.summary, fig), fig.scale)) is not None]
            b_own = [_scaled(_get(r.own, fig.path), fig.scale) for r in theirs]
            b_ours = [v for r in theirs if (v := _scaled(_of(r.summary, fig), fig.scale)) is not None]
            llm, own, mine = _mean(a), _mean(b_own), _mean(b_ours)
            band = between_run_band(a, b_ours)
            band_pct = None if band is None or not llm else 100.0 * band.half_width / abs(llm)
            measurement = _pct(mine, llm)
            srv_a = _mean([_scaled(_get(r.server, (fig.server,)), fig.scale) for r in ours]) if fig.server else None
            srv_b = _mean([_scaled(_get(r.server, (fig.server,)), fig.scale) for r in theirs]) if fig.server else None
            rows.append(Row(
                concurrency=concurrency, figure=fig.label, unit=fig.unit, llmsweep=llm, aiperf_own=own,
                aiperf_ours=mine, difference_pct=_pct(own, llm), definition_pct=_pct(own, mine),
                measurement_pct=measurement, band_pct=band_pct, verdict=_verdict(measurement, band_pct),
                server_llmsweep=srv_a, server_aiperf=srv_b, server_pct=_pct(srv_b, srv_a),
            ))
    return rows


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _verdict(measurement: float | None, band: float | None) -> str:
    if measurement is None:
        return "not measured"
    if band is None:
        return "no repeats"
    return "agree" if abs(measurement) <= band else "differ"


LAG = figure(SCHEDULE_LAG, "p50")
"""The median schedule lag of a level's runs, keyed (`p50_schedule_lag`, in seconds) and headed as the metric table
says it: the key `--json` gives it under and the Markdown table's column."""


NOT_RUN = "not run"
"""What a level (or a client's runs at it) says where the cross-check stopped before it ran."""


def levels(runs: list[ClientRun], planned: Sequence[int] = (), repeats: int = 0) -> list[dict[str, Any]]:
    """Per concurrency and client: requests, failures, server-counted lengths, cache hits, client CPU and lag, and
    how many of the `repeats` runs of each `planned` level were never run (`not_run`: a cross-check stopped first)."""
    out: list[dict[str, Any]] = []
    for concurrency in dict.fromkeys([*planned, *(r.concurrency for r in runs)]):
        for client in ("llmsweep", "aiperf"):
            mine = [r for r in runs if r.concurrency == concurrency and r.client == client]
            done = [r.summary for r in mine if r.summary is not None]
            out.append({
                "concurrency": concurrency, "client": client, "runs": len(mine),
                "not_run": max(0, repeats - len(mine)) if concurrency in planned else 0,
                "errors": [p for r in mine if (p := r.problem)],
                "successful": sum(s.requests.successful for s in done),
                "failed": sum(s.requests.failed for s in done),
                "output_length_mismatch": sum(s.requests.output_length_mismatch for s in done),
                "isl_mean": _mean([s.tokens.input.mean for s in done]),
                "osl_mean": _mean([s.tokens.output.mean for s in done]),
                "cache_hit": _mean([s.cache.observed_hit_rate for s in done]),
                "client_cpu_s": _mean([r.cpu_s for r in mine]),
                "wall_s": _mean([r.wall_s for r in mine]),
                LAG.name: _mean([s.client_health.schedule_lag_s.p50 for s in done]),
            })
    return out


# ---------------------------------------------------------------------------------------------------- printing
def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _d(client: float | None, server: float | None) -> str:
    return "—" if client is None or server is None else f"{client - server:+,.2f}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def _said(level: dict[str, Any]) -> str:
    """A level's errors column: each run's problem, and the runs never run (`not run`, `1 of 2 runs not run`)."""
    said = list(level["errors"])
    if level["not_run"]:
        said.append(NOT_RUN if not level["runs"] else
                    f"{level['not_run']} of {count_of(level['runs'] + level['not_run'], 'run')} {NOT_RUN}")
    return "; ".join(said) or "—"


DEFINITIONS = """\
How the two clients define what they report (aiperf 0.13 names in brackets; read from its metric classes):

- TTFT: llmsweep from the request's send to its first non-empty content chunk; aiperf [time_to_first_token] from
  its request start (taken as the HTTP session opens) to the first response with data. aiperf's TTFT percentiles
  also count failed requests that had a first token; llmsweep's count successful requests only.
- TPOT: llmsweep per request (E2EL − TTFT) / (output tokens − 1); aiperf [inter_token_latency] the same window over
  (output tokens − the first chunk's tokens): equal when each chunk carries one token. ITL: pooled gaps between
  content chunks [inter_chunk_latency]. E2EL: both from the start to the last content chunk [request_latency].
- Throughput: llmsweep divides by (last end − first send) of the measured requests, the end being the stream's end
  (usage chunk included); aiperf by [benchmark_duration], its last response minus its first request start.
- "aiperf, our definitions" is aiperf's per-request export summarised by llmsweep: *definition* = aiperf's own
  figure against that; *measurement* = that against llmsweep's client. *Band* is the between-run 95 % band on the
  measurement difference from both clients' repeats (pooled run-to-run variance, Student t), as a share of
  llmsweep's value: inside it the clients *agree*, outside it they *differ*.
- *Server Δ* is how much the server's own figure (its latency histograms, Δsum / Δcount over each run) differed
  between aiperf's runs and llmsweep's: the part of a measurement difference the server, not the clients, made.
  "client − server" is what a client adds to the engine's own figure (HTTP, tokenisation, streaming, its loop).
"""


def _stopped_note(check: CrossCheck) -> list[str]:
    """The paragraph of an interrupted cross-check: how many of its runs started, and what the stopped one shows."""
    if check.interrupted is None:
        return []
    ran = len(check.runs)
    planned = len(check.config.get("concurrencies", ())) * check.config.get("repeats", 0) * 2
    return [f"Interrupted by {check.interrupted}: {ran} of {count_of(planned, 'run')} started, {planned - ran} not "
            "run; a run the signal stopped is shown as far as it measured, with its verdict, and compared with "
            "nothing.", ""]


def markdown(check: CrossCheck) -> str:
    cfg = check.config
    lines = [
        f"# llmsweep vs aiperf — {cfg['endpoint']['base_url']} ({cfg['endpoint']['model']})",
        "",
        f"Fixed {cfg['isl']}/{cfg['osl']} chat requests, the same prompts for both clients (aiperf reads llmsweep's "
        f"prompts as a single_turn dataset), {count_of(cfg['repeats'], 'run')} of each client per level, alternating.",
        "",
        *_stopped_note(check),
        "| conc | figure | llmsweep | aiperf (own) | aiperf (our definitions) | difference | definition | "
        "measurement | 95 % band | verdict | server Δ |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in check.rows:
        lines.append(
            f"| {r.concurrency} | {r.figure} ({r.unit}) | {_f(r.llmsweep)} | {_f(r.aiperf_own)} | {_f(r.aiperf_ours)} "
            f"| {_p(r.difference_pct)} | {_p(r.definition_pct)} | {_p(r.measurement_pct)} | "
            f"{'—' if r.band_pct is None else f'±{r.band_pct:.1f} %'} | {r.verdict} | {_p(r.server_pct)} |"
        )
    served = [r for r in check.rows if r.server_llmsweep is not None or r.server_aiperf is not None]
    if served:
        lines += ["", "What the server itself measured (its latency histograms over each run, means):", "",
                  "| conc | figure | server, llmsweep's runs | server, aiperf's runs | server Δ | "
                  "llmsweep − server | aiperf − server |", "|---:|---|---:|---:|---:|---:|---:|"]
        for r in served:
            lines.append(
                f"| {r.concurrency} | {r.figure} ({r.unit}) | {_f(r.server_llmsweep)} | {_f(r.server_aiperf)} | "
                f"{_p(r.server_pct)} | {_d(r.llmsweep, r.server_llmsweep)} | {_d(r.aiperf_ours, r.server_aiperf)} |"
            )
    lines += ["", "| conc | client | requests ok / failed | OSL mismatches | ISL mean (server) | OSL mean | "
              f"prefix-cache hits | client CPU-s | wall s | {LAG.header} | errors |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for lv in check.levels:
        lines.append(
            f"| {lv['concurrency']} | {lv['client']} | {lv['successful']} / {lv['failed']} | "
            f"{lv['output_length_mismatch']} | {_f(lv['isl_mean'], 1)} | {_f(lv['osl_mean'], 1)} | "
            f"{_f(lv['cache_hit'], 3)} | {_f(lv['client_cpu_s'], 1)} | {_f(lv['wall_s'], 1)} | "
            f"{'—' if lv[LAG.name] is None else LAG.cell(lv[LAG.name])} | {_said(lv)} |"
        )
    return "\n".join(lines) + "\n\n" + DEFINITIONS
