"""Collect a golden acceptance-length curve on a served model: InferenceX's `speedbench-al.yml`, as llmsweep parts.

Per (thinking mode, draft length K) cell: render the recipe's job with that K and thinking mode through its engine
adapter (real verification: nothing pins the acceptance), start a fresh server through the executor's launcher, wait
until it is ready, scrape `/metrics`, send the prompt set at concurrency 1 with the curve's sampling and chat-template
kwargs of that thinking mode through llmsweep's client, scrape again, and stop the server. The cell's AL is
``1 + Δaccepted / Δdrafts`` (vLLM's counters; other engines through their metrics reader); a server that does not
start, or drafts nothing, leaves the cell unmeasured (InferenceX writes `N/A`; here it is left out of the body and
named in the header). The curve file is InferenceX's golden-AL YAML, its provenance stated in the header (see
:func:`llmsweep.catalog.golden.format_curve`), and reads back through `llmsweep al` and the planner.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep import __version__
from llmsweep.alcollect.merge import BEFORE_MEASURING, COMPARED, Collected, differences
from llmsweep.alcollect.merge import merge as merge_curves
from llmsweep.alcollect.modes import MODES
from llmsweep.alcollect.prompts import PromptSet
from llmsweep.alcollect.settings import CellResult, CollectResult, CollectSettings
from llmsweep.catalog.golden import (
    CurveHeader,
    ThinkingMode,
    format_curve,
    load_curve,
    normalise_method,
    packaged_curve_ids,
    read_curve_header,
)
from llmsweep.direct import DIRECT
from llmsweep.engine_ids import SIM, acceptance_knobs
from llmsweep.engines import runs_on_simulator
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError, DatasetError, LaunchError, LlmsweepError
from llmsweep.execute import signals
from llmsweep.execute.base import ServerLauncher
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.signals import stop_then_raise, watching_pauses
from llmsweep.plan.job import Job
from llmsweep.words import count_of, noun
from llmsweep.workload.base import LaneProgram, RequestIdentity, RequestSpec, Send, Workload

if TYPE_CHECKING:
    from llmsweep.client.runner import Progress
    from llmsweep.metrics.model import Requests, SpecDecode

log = logging.getLogger(__name__)

Event = Callable[[str], None]
CONCURRENCY = 1
"""InferenceX collects at concurrency 1 (`--max-concurrency 1`): one request drafts at a time, as in its curves."""
CELL_FILE = "cell.json"
CELL_NAME = re.compile(rf"^(?:{'|'.join(MODES)})-k\d+$")
"""A cell's folder in the evidence folder: `<mode>-k<K>` (:func:`cell_folder`)."""
CLIENT_DIR = "client"
"""A cell's client folder: its load's records, run.json and summary.json."""
COLLECTOR_FILE = "collector.json"


def _quiet(_: str) -> None:
    return None


# ------------------------------------------------------------------------------------------------------- workload


class PromptWorkloadConfig(BaseModel):
    """The prompt set as the client sends it: chat, one user turn each, the curve's sampling, no ignore_eos."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["golden-al-prompts"] = "golden-al-prompts"
    prompts: list[str]
    max_tokens: int
    extra_body: dict[str, Any] = Field(default_factory=dict)


class PromptWorkload(Workload):
    """Each prompt once, in order, across the lanes (one lane at concurrency 1)."""

    name = "golden-al-prompts"

    def __init__(self, config: PromptWorkloadConfig) -> None:
        self.config = config
        self._next = 0
        self._lock = threading.Lock()

    def _take(self) -> int | None:
        with self._lock:
            if self._next >= len(self.config.prompts):
                return None
            self._next += 1
            return self._next - 1

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        while (index := self._take()) is not None:
            yield self._program(index, lane)

    def _program(self, index: int, lane: int) -> LaneProgram:
        spec = RequestSpec(api="chat", max_tokens=self.config.max_tokens, ignore_eos=False,
                           messages=({"role": "user", "content": self.config.prompts[index]},),
                           identity=RequestIdentity(lane=lane, request_index=index),
                           extra_body=dict(self.config.extra_body))
        yield Send(spec)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "prompts": len(self.config.prompts), "max_tokens": self.config.max_tokens,
                "extra_body": self.config.extra_body}


# ------------------------------------------------------------------------------------------------------- the job


def collection_job(jobs: list[Job], *, simulate: bool) -> Job:
    """The one speculative, single-server job of the recipe whose server the collection relaunches per cell."""
    from llmsweep.engines import launch_fingerprint, launch_refusal

    spec_jobs = [j for j in jobs if j.runnable and j.spec_decoding != "none" and j.serve is not None
                 and j.serve.spec_decoding is not None and not j.multinode and launch_refusal(j) is None
                 and not j.eval_only]
    if not spec_jobs:
        raise ConfigError(
            "the recipe has no runnable single-server job with speculative decoding",
            fix="give it a `serve.spec-decoding` block (method, num-steps) and a search-space entry with "
            "`spec-decoding: mtp` (InferenceX's spelling of every draft method)",
        )
    launches = {launch_fingerprint(_cell_job(j, 1, "thinking_off"), simulate=simulate): j for j in spec_jobs}
    if len(launches) > 1:
        raise _several_servers(list(launches.values()), simulate=simulate)
    job = spec_jobs[0]
    assert job.serve is not None and job.serve.spec_decoding is not None
    method = job.serve.spec_decoding.method
    if normalise_method(method) is None:
        raise ConfigError(f"draft method {method!r} has no golden-curve family",
                          fix="use mtp, eagle3, dspark, ngram or draft_model")
    return job


SEARCH_SPACE_FIELDS = ("recipe-key", "tp", "pp", "ep", "dp-attn", "dcp-size", "pcp-size", "conc", "max-model-len",
                       "kv-offloading", "kv-offload-backend")
"""The job fields a recipe's search space (or, for recipe-key, --config-keys) chooses: the ones to narrow."""


def _flags(argv: tuple[str, ...]) -> dict[str, str]:
    """A server command line's flags -> their values ('' for a switch), the command before the first flag left out."""
    out: dict[str, str] = {}
    for i, token in enumerate(argv):
        if token.startswith("--"):
            flag, eq, value = token.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[flag] = value if eq else ("" if not nxt or nxt.startswith("--") else nxt)
    return out


def _values_text(values: list[str | None]) -> str:
    shown = list(dict.fromkeys("(absent)" if v is None else (v or "(set)") for v in values))
    return " / ".join(shown)


def launch_differences(specs: list[LaunchSpec]) -> list[str]:
    """What differs between rendered servers, as 'WHAT V1 / V2 / …' (each distinct value once, in job order): their
    flags, environment variables and other launch fields (image, GPUs), a flag one server lacks as '(absent)'."""
    flags = [_flags(s.argv) for s in specs]
    out: list[str] = []
    for flag in dict.fromkeys(f for fl in flags for f in fl):
        values = [fl.get(flag) for fl in flags]
        if len(set(values)) > 1:
            out.append(f"{flag} {_values_text(values)}")
    for name in dict.fromkeys(k for s in specs for k in s.env):
        values = [s.env.get(name) for s in specs]
        if len(set(values)) > 1:
            out.append(f"env {name} {_values_text(values)}")
    dumps = [s.model_dump(mode="json", exclude={"argv", "env"}) for s in specs]
    for key in dumps[0]:
        values = [json.dumps(d.get(key), sort_keys=True) for d in dumps]
        if len(set(values)) > 1:
            out.append(f"{key} {_values_text(values)}")
    return out


def _field_text(value: Any) -> str:
    if value is None:
        return "(unset)"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _several_servers(jobs: list[Job], *, simulate: bool) -> ConfigError:
    """Why a recipe renders more than one server for a collection: the launches' differences, the search-space
    fields that chose them, and how to narrow to one (a collection relaunches one server per cell)."""
    from llmsweep.engines import render

    specs = [render(_cell_job(j, 1, "thinking_off"), simulate=simulate) for j in jobs]
    differ = launch_differences(specs) or ["nothing but the launch's hash"]
    entries = [j.model_dump(mode="json", by_alias=True) for j in jobs]
    fields = {f: [_field_text(e.get(f)) for e in entries] for f in SEARCH_SPACE_FIELDS}
    chosen = {f: list(dict.fromkeys(v)) for f, v in fields.items() if len(set(v)) > 1}
    names = ", ".join(j.exp_name for j in jobs)
    how = [f"{f} {' / '.join(v)}" for f, v in chosen.items() if f != "recipe-key"]
    fixes = []
    if "recipe-key" in chosen:
        fixes.append(f"name one recipe with --config-keys (one of {', '.join(chosen['recipe-key'])})")
    if how:
        narrow = "; ".join(how)
        conc = " (conc-list: [1]: the collection runs at concurrency 1 whatever the job's conc)" \
            if "conc" in chosen else ""
        fixes.append(f"collect from a copy of the recipe whose search space holds one entry with one value of each "
                     f"of {', '.join(f for f in chosen if f != 'recipe-key')}{conc}")
    else:
        narrow = ""
        fixes.append("collect from a copy of the recipe whose search space holds one entry")
    return ConfigError(
        f"the recipe renders {len(jobs)} different servers ({names}), a collection relaunches one: their launches "
        f"differ by {'; '.join(differ)}" + (f", chosen by the search space's {narrow}" if narrow else ""),
        fix=", or ".join(fixes))


def _cell_job(job: Job, k: int, mode: ThinkingMode) -> Job:
    """The job with draft length K and the thinking mode, measuring real acceptance (nothing pinned).

    A chain draft (top-k 1, SGLang's EAGLE family) verifies K + 1 tokens: the recipe's `num-draft-tokens`, its own
    K's + 1, is dropped so that each cell launches with its K's (SGLang overrides a contradicting count, and the
    cell's server command would state a launch that did not run). A tree's (top-k above 1) is the recipe's."""
    assert job.serve is not None and job.serve.spec_decoding is not None
    update: dict[str, Any] = {"num_steps": k, "thinking": "on" if mode == "thinking_on" else "off",
                              "acceptance_length": None}
    if (job.serve.spec_decoding.topk or 1) == 1:
        update["num_draft_tokens"] = None
    sd = job.serve.spec_decoding.model_copy(update=update)
    return job.model_copy(update={"serve": job.serve.model_copy(update={"spec_decoding": sd}), "acceptance": None})


def refuse_unmodelled(job: Job, settings: CollectSettings) -> None:
    """Under `--simulate`: refuse, before any server starts, a collection whose cells the simulator cannot model.

    The check is `run --simulate`'s and `predict`'s (:func:`llmsweep.execute.virtual.engine_config` of the simulated
    launch), made on each cell's launch; its :class:`~llmsweep.execute.virtual.NotModelled` says the reason and its
    fix once (the cells it holds for named where not all of them), exit 2. Without it each cell's `sim serve` would
    start and exit on the same reason, and the collection end as a failed run."""
    from llmsweep.engine_ids import MAX_SPEC_K
    from llmsweep.engines import render
    from llmsweep.execute.virtual import NotModelled, engine_config

    if beyond := [k for k in settings.ks if k > MAX_SPEC_K]:  # the -k asked for, not the recipe's serve.args
        raise NotModelled(f"-k {' '.join(map(str, beyond))}: the simulator models 1 to {MAX_SPEC_K} draft tokens per "
                          "step; no server was started",
                          fix=f"collect K <= {MAX_SPEC_K} with --simulate (a real engine takes what it supports)")
    refused: dict[tuple[str, str | None], list[str]] = {}
    for mode in settings.thinking:
        for k in settings.ks:
            try:
                engine_config(render(_cell_job(job, k, mode), simulate=True))
            except NotModelled as exc:
                refused.setdefault((exc.message, exc.fix), []).append(f"{mode} K={k}")
    if not refused:
        return
    (message, fix), cells = next(iter(refused.items()))
    where = "" if len(cells) == len(settings.thinking) * len(settings.ks) else f" (cells {', '.join(cells)})"
    raise NotModelled(f"{message}{where}; no server was started", fix=fix)


def _refuse_pins(spec: LaunchSpec) -> None:
    """A collection measures real verification: a launch that pins acceptance (synthetic) would measure the pin."""
    if spec.engine == SIM.id:
        return  # the simulator drafts nothing: its acceptance is its model's (an estimate), said in the curve
    knobs = acceptance_knobs(simulated=False)
    text = " ".join([*spec.argv, *spec.env])
    found = [k for k in (*knobs.env, *knobs.args, *knobs.speculative_config_keys) if k in text]
    if found:
        raise ConfigError(
            f"the {spec.engine} launch pins a synthetic acceptance length ({', '.join(sorted(set(found)))}): a golden "
            "curve must be measured with real verification",
            fix="remove the synthetic-acceptance knobs from the recipe's serve args/env",
        )


# ------------------------------------------------------------------------------------------------------- provenance


def _served_precision(job: Job, simulated: bool) -> str:
    """What the weights are, read from the model directory where there is one (`engines.weights`: llmsweep's
    import/synth records, a quantisation, else config.json's dtype); otherwise the format the model id names
    (amd/Qwen3.5-397B-A17B-MXFP4 at precision `fp4`: mxfp4, `catalog.precision.served_format`, as a curve is matched to
    a recipe), else the recipe's precision, said to be so."""
    from llmsweep.engines.sglang import model_path
    from llmsweep.engines.weights import read_weights

    if simulated:
        return _unread_precision(job, "; simulated engine, no weights")
    weights = read_weights(Path(model_path(job)), why="the curve's precision is read from it; no server was started")
    return weights.said(job.precision) if weights is not None else _unread_precision(job)


def _unread_precision(job: Job, note: str = "") -> str:
    """The served precision where no weights state it, and whence: the format the model id names (``mxfp4 (model id
    amd/Qwen3.5-397B-A17B-MXFP4; recipe precision fp4)``), else the recipe's (``fp8 (recipe)``); `note` closes it."""
    from llmsweep.catalog.precision import served_format

    served = served_format(job.model, job.precision)
    if served == job.precision.strip().lower():
        return f"{job.precision} (recipe{note})"
    return f"{served} (model id {job.model}; recipe precision {job.precision}{note})"


def refuse_unearned_precision(job: Job, precision: str | None, *, simulate: bool) -> None:
    """`--precision` states the served precision in the header (and names the file where the family is packaged);
    one of another family than the job serves (read from the model directory, else the recipe's) would label the
    cells with a precision they were not measured at, and the curve would win for recipes of that precision.
    Refused before any server starts; where either side names no known format, it cannot be told and is kept."""
    from llmsweep.catalog.precision import families_agree, weight_format

    if not precision:
        return
    served = _served_precision(job, simulate)
    given, read = _precision_token(precision), _precision_token(served)
    if weight_format(given) is None or weight_format(read) is None:
        return
    if not families_agree(given, read):  # `fp4` may be either NVFP4 or MXFP4; those two are not one another
        raise ConfigError(
            f"--precision {precision} is not what the job serves: {served}; the curve would label cells measured "
            f"at {read} as {given}, and stand in for {given} recipes; no server was started",
            fix=f"drop --precision (the header states the precision served), or collect from a recipe that serves "
            f"{given} (its precision and checkpoint)")


def refuse_unreadable_records(job: Job, *, simulate: bool) -> None:
    """The model directory's records the curve's `precision:` is read from, read now: one that does not parse is
    refused (ConfigError, exit 2, naming it) before anything is made or claimed, not after measuring every cell."""
    _served_precision(job, runs_on_simulator(job.engine, simulate=simulate))


def default_checkpoint(job: Job) -> str:
    """The curve body's model key: the served checkpoint's name, lower-case, without its organisation."""
    return job.model.rstrip("/").rsplit("/", 1)[-1].lower()


def _scrape(spec: LaunchSpec, base_url: str, out: Path) -> dict[str, Any]:
    """One `/metrics` scrape, kept as text beside the cell and returned as the summariser's scrape record."""
    from llmsweep.client.scrape import parse_exposition

    if not spec.metrics_path:
        raise ConfigError(f"the {spec.engine} launch exposes no metrics endpoint: acceptance cannot be read back",
                          fix="serve an engine whose adapter names a metrics path")
    t = time.time()
    with DIRECT.open(f"{base_url.rstrip('/')}{spec.metrics_path}", timeout=30) as resp:  # its server: no proxy
        text = resp.read().decode("utf-8", errors="replace")
    out.write_text(text, encoding="utf-8")
    samples = parse_exposition(text)
    if spec.metrics_prefix:  # the launched engine's own names (the simulator also serves the other engine's)
        samples = [s for s in samples if str(s[0]).startswith(spec.metrics_prefix)]
    return {"t": t, "samples": samples}


# ------------------------------------------------------------------------------------------------------- cells


CELL_PROGRESS_S = 30.0
"""How often a cell's load says how far it is (a cell of 80 prompts of 4,096 tokens runs for minutes on a GPU)."""


def _cell_progress(cell: str, event: Event) -> Callable[[Progress], None]:
    """The client's progress as a line every CELL_PROGRESS_S (the first at once): a cell had said nothing between its
    server's start and its result."""
    said = [-CELL_PROGRESS_S]

    def on_progress(p: Progress) -> None:
        now = time.monotonic()
        if now - said[0] < CELL_PROGRESS_S:
            return
        said[0] = now
        of = f"/{p.target_requests}" if p.target_requests else ""
        event(f"{cell}: {p.profiling_finished}{of} {noun(p.target_requests or p.profiling_finished, 'request')} done, "
              f"{p.failed} failed, {p.inflight} in flight, {count_of(p.profiling_output_tokens, 'token')} out")

    return on_progress


def _run_cell(job: Job, mode: ThinkingMode, k: int, settings: CollectSettings, prompts: PromptSet, cell_dir: Path,
              launcher: ServerLauncher, simulate: bool, event: Event) -> CellResult:
    from llmsweep.client import Endpoint, RunOptions, run_benchmark
    from llmsweep.client.probe import probe_endpoint
    from llmsweep.engines import launch_port, launched_job, render
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import (
        PORT_RACES,
        command_text,
        lost_port_race,
        observe_runtime,
        write_pid_file,
    )
    from llmsweep.execute.preflight import preflight
    from llmsweep.execute.ready import wait_ready
    from llmsweep.metrics.model import ServerMetrics
    from llmsweep.metrics.server import summarise_server

    started = time.monotonic()
    cell = CellResult(thinking=mode, k=k, status="failed", directory=str(cell_dir))
    cell_dir.mkdir(parents=True, exist_ok=True)
    _write_collector(cell_dir)
    cjob = _cell_job(job, k, mode)
    handle: ServerHandle | None = None
    try:
        rendered = render(cjob, simulate=simulate, port=launch_port(cjob))
        _refuse_pins(rendered)
        for attempt in range(PORT_RACES + 1):
            spec = preflight(rendered, gpus=rendered.engine != SIM.id)
            spec = art.write_launch_files(spec, cell_dir)
            launcher.prepare(spec, log_dir=cell_dir, event=event)  # (an image pulled before the start-up clock)
            event(f"{mode} K={k}: launching {spec.engine} on port {spec.port}")
            log_path = cell_dir / (art.SERVER_LOG if not attempt else f"server.{attempt + 1}.log")
            with signals.shielded():  # a signal now waits until the server is recorded: its handle and its pid file
                handle = launcher.launch(spec, log_path=log_path)
                cell.launched = True
                write_pid_file(cell_dir / art.PID_FILE, handle, spec)
            (cell_dir / art.COMMAND_FILE).write_text(command_text(spec, launcher, handle.command))
            art.write_json(cell_dir / art.JOB_FILE, launched_job(cjob).to_json())
            try:
                ready = wait_ready(handle, timeout_s=settings.startup_timeout_s, poll_s=0.25)
                break
            except LaunchError as exc:
                # a port picked free for it taken first (`lost_port_race`): launched again at once on a fresh one
                # (a port the recipe pins would be taken again)
                if attempt == PORT_RACES or rendered.port != 0 or handle.returncode is None \
                        or not lost_port_race(exc):
                    raise
                with signals.shielded():
                    handle.stop(grace_s=settings.stop_grace_s)
                    if handle.gone():
                        (cell_dir / art.PID_FILE).unlink(missing_ok=True)
                    else:  # not stoppable: kept on record beside the next launch's, for a later sweep
                        art.keep_pid_file(cell_dir, attempt + 1)
                handle = None
                event(f"{mode} K={k}: the server exited while starting: a port picked for it was taken before it "
                      "bound it; relaunching on a port picked afresh")
        assert handle is not None  # the loop ends with a ready server or raises
        observed = observe_runtime(handle, spec)
        cell.engine_version, cell.gpu_names = observed.get("engine_version"), observed.get("gpu_names")
        sent = len(prompts.prompts)
        event(f"{mode} K={k}: ready in {ready.seconds:.1f} s; {sent} prompt{'' if sent == 1 else 's'} at concurrency "
              f"{CONCURRENCY}, max_tokens {settings.output_len}")
        extra: dict[str, Any] = dict(settings.sampling_of(mode).params())
        kwargs = settings.chat_template_kwargs.get(mode) or {}
        if kwargs:
            extra["chat_template_kwargs"] = kwargs
        workload = PromptWorkload(PromptWorkloadConfig(prompts=[p.turns[0] for p in prompts.prompts],
                                                       max_tokens=settings.output_len, extra_body=extra))
        endpoint = Endpoint(base_url=handle.base_url, model=spec.served_model_name or cjob.workload.served_model_name,
                            api="chat", send_ignore_eos="ignore_eos" not in spec.rejected_request_fields,
                            send_stream_options="stream_options" not in spec.rejected_request_fields,
                            metrics_url=f"{handle.base_url.rstrip('/')}{spec.metrics_path}")
        options = RunOptions(concurrency=CONCURRENCY, num_requests=len(prompts.prompts),
                             timeout_s=settings.request_timeout_s, max_failure_ratio=1.0,
                             require_metrics_prefix=spec.metrics_prefix)
        probe = probe_endpoint(handle.base_url)  # what served the cell, as the server says (as `bench`)
        source = probe.source
        cell.simulated = spec.engine == SIM.id or probe.simulated
        # a stop of this process (Ctrl-Z, `kill -STOP`) from the first scrape to the last is judged below
        with watching_pauses() as pauses:
            before = _scrape(spec, handle.base_url, cell_dir / "metrics_before.txt")
            with stop_then_raise() as stop:  # a signal stops the load at the client's next poll, then unwinds
                bench = run_benchmark(workload, endpoint, options, cell_dir / CLIENT_DIR,
                                      provenance={"golden_al_cell": {"thinking": mode, "k": k}},
                                      stop_requested=stop.reason, source=source,
                                      on_progress=_cell_progress(f"{mode} K={k}", event))
            after = _scrape(spec, handle.base_url, cell_dir / "metrics_after.txt")
        server = ServerMetrics.model_validate(summarise_server([before, after], start=None, end=None))
        sd = server.spec_decode
        requests = bench.summary.requests
        cell.requests_ok, cell.requests_failed = requests.successful, requests.failed
        cell.output_tokens = bench.summary.tokens.output_total
        # The verification steps: vLLM's (and TRT's, ATOM's) drafts; SGLang counts verify calls and no drafts, its
        # reader computing AL from generated tokens, requests and verify calls (sglang_acceptance_length).
        steps = (sd.drafts or sd.verify_steps) if sd else None
        cell.accepted_tokens = sd.accepted_tokens if sd else None
        cell.drafts, cell.method = steps, sd.method if sd else None
        cell.draft_coverage = draft_coverage(sd.drafts if sd else None, cell.accepted_tokens, cell.output_tokens)
        cell.reason = unmeasured_reason(requests, sd, steps, server.adapter, settings.output_len)
        if cell.reason is None and sd is not None:
            cell.status, cell.acceptance_length = "measured", sd.acceptance_length
        _unpaused_or_invalid(cell, pauses)
    except LlmsweepError as exc:
        cell.reason = str(exc).splitlines()[0]
    except OSError as exc:  # a scrape or a file that failed
        cell.reason = f"{type(exc).__name__}: {exc}"
    finally:
        if handle is not None:
            with signals.shielded():  # a second signal hurries the stop, never cuts it short
                handle.stop(grace_s=settings.stop_grace_s)
                if handle.gone():
                    (cell_dir / art.PID_FILE).unlink(missing_ok=True)
    cell.seconds = round(time.monotonic() - started, 1)
    art.write_json(cell_dir / CELL_FILE, cell.model_dump(mode="json"))
    if cell.status == "measured":
        counts = (f"accepted {cell.accepted_tokens:.0f} / drafts {cell.drafts:.0f}" if cell.accepted_tokens is not None
                  else f"{cell.drafts:.0f} verify steps, {cell.method}")
        covered = f", {cell.draft_coverage:.0%} of them from steps that drafted" \
            if cell.draft_coverage is not None else ""
        event(f"{mode} K={k}: AL {cell.acceptance_length:.3f} ({counts}, {cell.requests_ok} requests, "
              f"{cell.output_tokens} tokens{covered}) in {cell.seconds:.0f} s")
        if (low := low_coverage(cell)) is not None:
            event(f"warning: {mode} K={k}: {low}")
    else:
        event(f"{mode} K={k}: not measured — {cell.reason}")
    return cell


LOW_COVERAGE = 0.5
"""A cell whose drafted steps gave less than this share of its output tokens is said to (`low_coverage`)."""


def draft_coverage(drafts: float | None, accepted: float | None, output_tokens: int) -> float | None:
    """The share of the output tokens that came from steps that drafted: each such step gives its accepted tokens and
    the one it verifies, so (drafts + accepted) / output tokens, at most 1; None where the engine counts no accepted
    tokens or no draft (SGLang counts verify calls: every step verifies), or nothing was generated."""
    if drafts is None or accepted is None or output_tokens <= 0:
        return None
    return min(1.0, (drafts + accepted) / output_tokens)


def coverage_note(cell: CellResult) -> str | None:
    """The curve header's note of a measured cell's draft coverage (`M K=k: draft coverage …`), a low one said so
    (`low_coverage`); None where it is not known."""
    if cell.draft_coverage is None or cell.accepted_tokens is None or cell.drafts is None:
        return None
    drafted = min(cell.output_tokens, round(cell.drafts + cell.accepted_tokens))
    said = (f"{cell.thinking} K={cell.k}: draft coverage {cell.draft_coverage:.0%} ({drafted:,} of "
            f"{cell.output_tokens:,} {noun(cell.output_tokens, 'output token')} from steps that drafted)")
    low = low_coverage(cell)
    return said if low is None else f"{said}; {low}"


def low_coverage(cell: CellResult) -> str | None:
    """What to say of a cell whose drafted steps gave less than `LOW_COVERAGE` of its output: its AL, that of the
    drafted steps (InferenceX's definition, kept), is not what a step gives over the run — output tokens per decode
    step, output / (output − accepted): each step gives one token and a drafted one its accepted ones too."""
    if cell.draft_coverage is None or cell.draft_coverage >= LOW_COVERAGE or cell.accepted_tokens is None:
        return None
    steps = cell.output_tokens - cell.accepted_tokens
    per_step = f" ({cell.output_tokens / steps:.2f} tokens per decode step over the run)" if steps > 0 else ""
    al = f"AL {cell.acceptance_length:.2f}" if cell.acceptance_length is not None else "AL"
    return (f"only {cell.draft_coverage:.0%} of its output came from steps that drafted (below {LOW_COVERAGE:.0%}): "
            f"its {al} holds for those steps alone, not for every step{per_step}")


def unmeasured_reason(requests: Requests, sd: SpecDecode | None, steps: float | None, adapter: str | None,
                      output_len: int) -> str | None:
    """Why a cell's run gives no golden acceptance length (None: it gives `sd.acceptance_length`): no request
    answered, nothing drafted, only a gauge to read, or more of its requests failed than the error gate a benchmark
    point is judged by (`metrics.gates.FIXED_MAX_ERROR_RATIO`): its AL would then stand for part of the prompt set
    the curve's `dataset` line names (a cell with 1 of 24 prompts answered had counted as measured)."""
    from llmsweep.metrics.gates import FIXED_MAX_ERROR_RATIO

    if requests.successful == 0 and requests.failed:  # why nothing was drafted: every request was refused
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(requests.error_categories.items()))
        reason = f"no request succeeded ({requests.failed} failed: {kinds or 'see client/records.jsonl'})"
        if requests.context_overflow:
            reason += (f"; the prompts and --output-len {output_len} exceed the server's context length: lower "
                       "--output-len")
        return reason
    if sd is None or not steps or sd.acceptance_length is None:
        return (f"the server drafted nothing over the run ({adapter or 'no'} metrics reader, {requests.successful} "
                "requests answered)")
    if (sd.method or "").startswith("mean of"):  # a gauge the reader fell back to, not counter deltas
        return f"the server's counters give no acceptance length over the run (reader: {sd.method})"
    if requests.successful == 0:
        return "no request succeeded"
    finished = requests.successful + requests.failed
    if requests.failed > FIXED_MAX_ERROR_RATIO * finished:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(requests.error_categories.items()))
        return (f"{requests.failed} of {finished} requests failed ({kinds or 'see client/records.jsonl'}), more than "
                f"the {FIXED_MAX_ERROR_RATIO:.0%} a benchmark point may lose: its AL would stand for part of the "
                "prompt set; collect it again")
    return None


def _unpaused_or_invalid(cell: CellResult, pauses: Sequence[float]) -> None:
    """A cell measured while this process was stopped (Ctrl-Z, `kill -STOP`) and continued (`pauses`: how long each
    stop lasted) judged invalid as `run` judges a job (`readback.judge_paused`): its client folder's summary says why
    (`llmsweep summarize` agrees), and the cell is left out of the curve with that reason, to be collected again."""
    from llmsweep.execute.readback import judge_paused

    if cell.directory is None:  # (a cell not run: nothing was measured)
        return
    judged = judge_paused(Path(cell.directory) / CLIENT_DIR, tuple(pauses),
                          again="the cell is left out of the curve: collect it again")
    if judged is not None and cell.status == "measured":  # (one not measured already says why)
        cell.status, cell.reason = "failed", judged.validity.reasons[0]


def curve_file_name(job: Job, variant: str | None = None, *, precision: str | None = None,
                    simulate: bool = False) -> str:
    """``<prefix>_<method>[_<variant>].yaml``: the name keys the curve's family and method (`catalog.golden`), the
    method as its curve family (SGLang's ``eagle``/``nextn`` for native MTP name an ``_mtp`` curve).

    The name never takes a packaged curve's: a user curve of that name would replace the packaged one whole (every
    cell the collection did not measure lost). Where ``<prefix>_<method>`` is packaged (InferenceX's ``qwen3.5_mtp``)
    the variant defaults to the served precision (``precision``, else what the header will state: read from the
    model directory, else the format the model id names, else the recipe's), ``qwen3.5_mtp_fp8.yaml``, the curve
    that wins for a recipe serving that precision; a ``variant`` that names a packaged curve is refused."""
    assert job.serve is not None and job.serve.spec_decoding is not None
    prefix = job.model_prefix.lower()
    if "_" in prefix:
        raise ConfigError(f"model prefix {prefix!r} contains '_': the curve file name keys prefix and method",
                          fix="give the recipe a model-prefix without underscores")
    method = job.serve.spec_decoding.method
    family = normalise_method(method)
    if family is None:
        raise ConfigError(f"draft method {method!r} has no golden-curve family",
                          fix="use mtp, eagle3, dspark, ngram or draft_model")
    stem = f"{prefix}_{family}" + (f"_{variant}" if variant else "")
    packaged = packaged_curve_ids()
    if stem in packaged and not variant:
        stem += "_" + _precision_token(precision or _served_precision(job, simulate))
    if stem in packaged:
        raise ConfigError(f"{stem}.yaml is the name of a packaged golden curve: a collected curve of that name would "
                          "replace it, and every cell this collection does not measure would be lost",
                          fix="pass another --variant (e.g. the precision served, or the hardware)")
    return stem + ".yaml"


def _precision_token(text: str) -> str:
    """The precision as a file-name word: ``fp8 (config.json of /m)`` -> ``fp8``."""
    word = re.sub(r"[^a-z0-9.]", "", (text.split() or ["unknown"])[0].lower())
    return word or "unknown"


def refuse_host(job: Job, mode: ThinkingMode, k: int, *, simulate: bool) -> None:
    """Refuse, before any cell, a collection this host can start no server for: the checks a cell's launch makes of
    the host (`execute.preflight`: the GPUs it needs, the tool that lists them) for the first cell. Every cell runs on
    the same host with the same GPUs, so one that fails there fails for each (the collection had tried every cell,
    each saying the same). A cell the renderer refuses is left to its own attempt (its reason may be its K's)."""
    from llmsweep.engines import launch_port, render
    from llmsweep.execute.preflight import preflight

    cjob = _cell_job(job, k, mode)
    try:
        rendered = render(cjob, simulate=simulate, port=launch_port(cjob))
    except LlmsweepError:
        return
    try:
        preflight(rendered, gpus=rendered.engine != SIM.id)
    except LaunchError as exc:
        raise ConfigError(f"no cell can start a server on this host: {exc.message}; no server was started",
                          fix=exc.fix or "run the collection on a host with the GPUs the recipe needs, or pass "
                          "--simulate") from exc


def collect_curve(job: Job, settings: CollectSettings, prompts: PromptSet, run_dir: Path, out: Path, *,
                  launcher: ServerLauncher, simulate: bool = False, event: Event = _quiet,
                  merge: bool = False) -> CollectResult:
    """Measure every (thinking, K) cell on a fresh server each and write the curve file `out` (its stem is the
    curve id: see :func:`curve_file_name`). Returns every cell; the file holds only the measured ones.

    `merge`: `out` is an existing curve `llmsweep al collect` wrote, to complete: what the collection will measure is
    compared with its header before any server starts (and the servers' hardware and engine after), a difference is
    refused (:class:`ConfigError`, naming each field), and `out` is rewritten with the union of the cells
    (:func:`llmsweep.alcollect.merge.merge`). Cells refused after measuring are kept in ``<out>.unmerged``."""
    from llmsweep.execute.executor import terminate_as_interrupt

    assert job.serve is not None and job.serve.spec_decoding is not None
    # the simulator runs the cells under --simulate and where the recipe's engine is the simulator's (`serve.engine:
    # {name: sim}`): either way the curve is a modelled AL, labelled so whatever option was given
    simulate = runs_on_simulator(job.engine, simulate=simulate)
    method = job.serve.spec_decoding.method
    prefix = job.model_prefix.lower()
    stem = out.stem
    checkpoint = settings.checkpoint or default_checkpoint(job)
    dataset = prompts.describe(len(prompts.prompts))
    if simulate:
        refuse_unmodelled(job, settings)
    refuse_unearned_precision(job, settings.precision, simulate=simulate)
    existing = read_merge_target(out) if merge else None
    # what the curve will state, read now (the weights' records): one that cannot be read is refused before a server
    # the precision of the weights launched with, read once: a server that turns out to be the simulator (its
    # /version) labels the curve simulated, and leaves the weights the launch named what they were
    precision = settings.precision or _served_precision(job, simulate)
    planned = _header(job, settings, run_dir, [], simulate, dataset, set(settings.thinking), checkpoint, precision)
    if existing is not None:  # refuse before a server starts what can be known now
        _refuse_unless_comparable(out, existing, Collected(model_prefix=prefix, header=planned, values={}),
                                  BEFORE_MEASURING)
    refuse_unwritable_outputs(out, run_dir, merge=merge)  # (the CLI checked before fetching prompts; an API caller)
    if settings.thinking and settings.ks:
        refuse_host(job, settings.thinking[0], settings.ks[0], simulate=simulate)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # (changed since the check: the folder above removed, a mount made read-only)
        raise ConfigError(f"the evidence folder {run_dir} cannot be made ({exc.strerror}); no server was started",
                          fix="pass another --run-dir (or --out), a folder you can write") from exc
    _stop_left_servers(out, run_dir, event)
    cells: list[CellResult] = []
    total = len(settings.thinking) * len(settings.ks)
    plan = [(mode, k) for mode in settings.thinking for k in settings.ks]
    try:
        with terminate_as_interrupt():
            for mode, k in plan:
                event(f"[{len(cells) + 1}/{total}] {mode} K={k}")
                cells.append(_run_cell(job, mode, k, settings, prompts, cell_folder(run_dir, mode, k), launcher,
                                       simulate, event))
    except KeyboardInterrupt as exc:  # the cell's server was stopped on the way out; keep what was measured
        signals.consumed(exc)  # writing up: a second signal hurries that, never interrupts it
        why = signals.interrupted_by(signals.first_signal(exc))
        event(f"{why}: {len(cells)} of {total} cells ran; writing the curve of the measured ones")
        for m, k in plan[len(cells):]:  # the cell it stopped (its folder made) was interrupted; those after, not run
            folder = cell_folder(run_dir, m, k)
            begun = folder.is_dir()
            cells.append(CellResult(thinking=m, k=k, status="interrupted" if begun else "not run",
                                    directory=str(folder) if begun else None, reason=why))
    measured = [c for c in cells if c.status == "measured"]
    # earned from what served the cells, never only from the plan: a cell whose server was the simulator (its launch,
    # or its /version) makes the curve a simulated one
    simulated = simulate or any(c.simulated for c in cells)
    engine = _engine_text(job, cells, simulated)
    result = CollectResult(curve_file=None, curve_id=stem, model_prefix=prefix, method=method, checkpoint=checkpoint,
                           dataset=dataset, engine=engine, simulated=simulated, cells=cells)
    if not measured:
        return result
    values: dict[ThinkingMode, dict[int, float]] = {}
    for c in measured:
        values.setdefault(c.thinking, {})[c.k] = round(float(c.acceptance_length or 0.0), 2)
    header = _header(job, settings, run_dir, cells, simulated, dataset, set(values), checkpoint, precision)
    if existing is not None:
        collected = Collected(model_prefix=prefix, header=header, values=values)
        try:
            _refuse_unless_comparable(out, existing, collected)
        except ConfigError as exc:
            aside = out.with_suffix(".unmerged")
            aside.write_text(format_curve(header, values), encoding="utf-8")
            raise ConfigError(f"{exc.message}; this collection's cells are in {aside}",
                              fix=f"{exc.fix}; to keep them as a curve of their own, rename {aside.name} to "
                              f"{prefix}_{normalise_method(method)}_<variant>.yaml") from exc
        merged = merge_curves(existing, collected)
        header, values = merged.header, merged.values
        result.merged_into, result.replaced = str(out), merged.replaced
    try:
        _write_curve(out, header, values, prefix, method)
    except OSError as exc:  # (a disk that filled, a folder removed while measuring): the cells' evidence stays
        raise DatasetError(f"{out}: the curve could not be written ({exc}); the measured cells "
                           f"({', '.join(f'{c.thinking} K={c.k}' for c in measured)}) are in {run_dir}/<mode>-k<K>/"
                           f"{CELL_FILE}",
                           fix=f"free or fix {out.parent}, then collect those cells again (--merge-into where "
                           "the curve exists)") from exc
    result.curve_file = str(out)
    return result


def cell_folder(run_dir: Path, mode: str, k: int) -> Path:
    """Where the cell (thinking mode, K) of a collection keeps its evidence (`CELL_NAME` matches its name)."""
    return run_dir / f"{mode}-k{k}"


def _stop_left_servers(out: Path, run_dir: Path, event: Event) -> None:
    """Stop the servers an earlier collection of this curve left running when it was killed (SIGKILL, a lost node
    session: nothing ran its teardown), as `run --resume` does: their pid files stay in the cell folders of its
    evidence (this run's folder, or another `<curve>.runs*` beside the curve). A server started just before the
    collection was killed, its pid file not yet written, is found by the cell its environment marks
    (`process.SERVER_DIR_ENV`): every cell folder is looked at, with a pid file or not. Left running, they hold the
    GPUs (and the port) the next cell's server needs. A server whose collection is still running is left to it."""
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import stop_stale_servers

    folders = {run_dir, *(p for p in out.parent.glob(f"{out.stem}.runs*") if p.is_dir())}
    # only cell folders (`<mode>-k<K>`), and only servers marking the cell itself: an evidence folder (`--run-dir`)
    # may hold another live run or collection, whose servers are not this curve's leftovers
    cells = sorted(p for folder in folders if folder.is_dir() for p in folder.iterdir()
                   if p.is_dir() and CELL_NAME.match(p.name))
    for cell in cells:
        if _collector_alive(cell):
            continue
        stop_stale_servers(cell.parent, event, pid_files=f"{cell.name}/{art.PID_FILES}", unrecorded_at=cell)


def _write_collector(cell_dir: Path) -> None:
    """Which process runs the cell (pid and start time), so that a later collection tells a server this one
    still runs from one a killed collection left (:func:`_stop_left_servers`)."""
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.process import read_proc

    info = read_proc(os.getpid())
    art.write_json(cell_dir / COLLECTOR_FILE, {"pid": os.getpid(), "start_ticks": info.start_ticks if info else None})


def _collector_alive(cell_dir: Path) -> bool:
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.process import read_proc

    doc = art.read_json(cell_dir / COLLECTOR_FILE) or {}
    pid = int(doc.get("pid") or 0)
    if pid <= 1:
        return False
    info = read_proc(pid)
    return info is not None and info.start_ticks == doc.get("start_ticks")


def refuse_unwritable_outputs(out: Path, run_dir: Path, *, merge: bool) -> None:
    """Before any server starts: the curve file and the evidence folder can be written, by the check every output
    has (:func:`llmsweep.writable.refuse_unwritable`: its write probe and its wording, naming the option). Found only
    when the curve is written, every cell would have been measured (GPU hours) and the collection would end without
    its curve. A fresh curve is written into --out (a file beside it, then moved over it): that folder is checked; a
    `--merge-into` curve is the file the user named."""
    from llmsweep.writable import refuse_unwritable

    then = "no server was started"
    if out.is_dir():  # al collect's own: the curve's name (derived from the recipe) is taken by a folder
        flag = "--merge-into" if merge else "--out"
        raise ConfigError(f"{out} is a folder, not a curve file: the curve cannot be written; {then}",
                          fix=f"move the folder away, or pass another {flag}")
    if merge:
        refuse_unwritable(out, folder=False, option_name="--merge-into", then=then)
    else:
        refuse_unwritable(out.parent, folder=True, option_name="--out", then=then)
    refuse_unwritable(run_dir, folder=True, option_name="--run-dir", then=then)


def read_merge_target(out: Path) -> Collected:
    """The curve `--merge-into` names, as its header states it; ConfigError (exit 2) where there is none."""
    if not out.is_file():
        raise ConfigError(f"{out}: no curve to merge into", fix="collect it first (without --merge-into)")
    header, curve = read_curve_header(out)
    return Collected(model_prefix=curve.model_prefix, header=header, values=curve.values)


def _refuse_unless_comparable(out: Path, existing: Collected, new: Collected,
                              fields: tuple[str, ...] | None = None) -> None:
    found = differences(existing, new, fields or COMPARED)
    if found:
        raise ConfigError(
            f"{out} was collected otherwise, so these cells cannot complete it: " + "; ".join(found),
            fix="collect with the curve's settings (--precision, --prompts/--num-prompts, --output-len, sampling, "
            "--chat-template-kwargs, the same engine and GPU), or into a curve of its own (--variant, without "
            "--merge-into)")


def _header(job: Job, settings: CollectSettings, run_dir: Path, cells: list[CellResult], simulate: bool,
            dataset: str, modes: set[ThinkingMode], checkpoint: str, precision: str) -> CurveHeader:
    """The provenance the curve of these cells states (before measuring: what the recipe and settings say), at the
    `precision:` the caller read (`--precision`, else :func:`_served_precision`)."""
    assert job.serve is not None and job.serve.spec_decoding is not None
    return CurveHeader(
        source=f"llmsweep al collect on {platform.node()} at {datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} "
               f"(evidence: {run_dir})",
        checkpoint=checkpoint, method=job.serve.spec_decoding.method, draft_model=job.serve.spec_decoding.draft_model,
        precision=precision, hardware=_hardware_text(job, cells, simulate), engine=_engine_text(job, cells, simulate),
        dataset=dataset, sampling={m: settings.sampling_of(m).params() for m in sorted(modes)},
        output_len=settings.output_len,
        chat_template_kwargs={m: settings.chat_template_kwargs.get(m) or {} for m in sorted(modes)},
        generator=f"llmsweep al collect (llmsweep {__version__})", simulated=simulate,
        notes=[*_launch_notes(run_dir, cells), *_al_method_notes(job, cells), *_unmeasured(cells),
               *(n for c in cells if c.status == "measured" and (n := coverage_note(c)) is not None), *settings.notes],
    )


def _write_curve(out: Path, header: CurveHeader, values: dict[ThinkingMode, dict[int, float]], prefix: str,
                 method: str) -> None:
    # Written beside the curve under its own name (`load_curve` keys a curve by its file name), read back, and only
    # then moved over it: a write cut short (a full disk) or a curve that does not load back leaves the curve that
    # was there — a `--merge-into` target's earlier cells — as it was (it was truncated, or moved to `.invalid`).
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.{os.getpid()}.staging"
    staging.mkdir(exist_ok=True)
    candidate = staging / out.name
    try:
        candidate.write_text(format_curve(header, values), encoding="utf-8")
        try:  # what `llmsweep al` will read: a curve that does not load back as this family is not left as one
            curve = load_curve(candidate)
            if (curve.model_prefix, curve.method) != (prefix, normalise_method(method)):
                raise ConfigError(f"{out.name} is keyed as {curve.model_prefix}/{curve.method}, not "
                                  f"{prefix}/{method}", fix="name the file <prefix>_<method>[_<variant>].yaml")
        except LlmsweepError as exc:
            candidate.replace(out.with_suffix(".invalid"))  # (the curve there, if any, untouched)
            raise DatasetError(f"the collected curve does not read back: {exc}",
                               fix="name the output after the recipe's model-prefix and method") from exc
        os.replace(candidate, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _engine_text(job: Job, cells: list[CellResult], simulated: bool) -> str:
    reported = next((c.engine_version for c in cells if c.engine_version), None)
    if simulated:
        sim = f"llmsweep simulator {reported or __version__}"
        if job.engine == SIM.id:  # the recipe's own engine (`serve.engine: {name: sim}`): it stands in for none
            return f"{sim} (the recipe's engine; no drafting: AL modelled)"
        return f"{sim} standing in for {job.engine} (no drafting: AL modelled)"
    if reported:
        return f"{job.engine} {reported} (reported by /version)"
    from llmsweep.engines import adapter_for
    from llmsweep.engines.base import tag_version

    _, version = adapter_for(job).image_and_version(job)  # the image's tag first; a stated version only without one
    where = "image tag" if tag_version(job.image) else "recipe"
    said = "the server reported no version" if any(c.launched for c in cells) else "no server started"
    return f"{job.engine} {version or 'unknown version'} ({where}; {said})"


def _hardware_text(job: Job, cells: list[CellResult], simulated: bool) -> str:
    if simulated:
        return f"simulated {job.sku or 'GPU'}"
    names = next((c.gpu_names for c in cells if c.gpu_names), None)
    if names:
        return f"{len(names)} x {names[0]} (nvidia-smi)"
    return f"{job.sku or job.runner} (runner label; not read from the host)"


def _launch_notes(run_dir: Path, cells: list[CellResult]) -> list[str]:
    notes = [f"concurrency {CONCURRENCY}, a fresh server per cell; launches in {run_dir}/<mode>-k<K>/"
             "server_command.txt"]
    for c in cells:
        command = Path(c.directory) / "server_command.txt" if c.directory else None
        if command is not None and command.is_file() and "--enforce-eager" in command.read_text():
            notes.append("served with --enforce-eager (no CUDA graphs): acceptance does not depend on it; "
                         "latencies of these runs are not representative")
            break
    return notes


def _al_method_notes(job: Job, cells: list[CellResult]) -> list[str]:
    """How the engine's counters gave the AL, where that is not the key line's 1 + accepted / drafts (SGLang: no
    accepted or drafts counters)."""
    methods = sorted({c.method for c in cells if c.status == "measured" and c.method and c.accepted_tokens is None})
    return [f"AL from {job.engine}'s counters: {m}" for m in methods]


def _unmeasured(cells: list[CellResult]) -> list[str]:
    """Header notes for the cells the body leaves out, and for measured cells some of whose requests failed."""
    return [f"not measured: {c.thinking} K={c.k} ({c.reason})" if c.status != "measured" else
            f"{c.thinking} K={c.k}: {c.requests_failed} of {c.requests_ok + c.requests_failed} requests failed"
            for c in cells if c.status != "measured" or c.requests_failed]
