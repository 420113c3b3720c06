"""aiperf (ai-dynamo/aiperf, 0.13) as a peer client: the same prompts in, its per-request export back as our records.

Three pieces, each usable on its own:

* `write_aiperf_dataset` turns a fixed-length workload into aiperf's `single_turn` JSONL (`text`, `output_length`,
  `extra`), warm-ups first, from the very bodies llmsweep's transport would send: with
  `--dataset-sampling-strategy sequential` aiperf sends entry *i* as llmsweep would send request *i*.
* `aiperf_argv` / `run_aiperf` render and run `aiperf profile` against an `Endpoint`, in its own session so a timeout
  stops aiperf's whole process tree.
* `read_aiperf_records` maps `profile_export.jsonl` onto `RequestRecord` (absolute unix times from
  `request_start_ns`, the first token at start + TTFT, one chunk time per inter-chunk gap, server usage, errors by
  class), so `metrics.summarise` computes both clients' figures with one set of definitions;
  `read_aiperf_figures` reads what aiperf itself reports (`profile_export_aiperf.json`), converted to seconds, and
  `read_aiperf_server_latency` what the server reported over aiperf's run (`server_metrics_export.json`).

aiperf's names differ from ours: its `inter_token_latency` is a per-request mean gap after the first token — our
TPOT —, its `inter_chunk_latency` is our ITL and its `request_latency` our E2EL (both end at the last content chunk).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsweep.client.config import Endpoint, RunOptions
from llmsweep.client.files import RECORDS_FILE
from llmsweep.client.folder import run_json, summarise_dir, write_run_json
from llmsweep.client.records import ErrorClass, RecordWriter, RequestRecord
from llmsweep.client.transport import build_body
from llmsweep.errors import ConfigError, DatasetError, EndpointError, LaunchError
from llmsweep.execute.process import start_process
from llmsweep.jsonline import open_json_text, read_json_text
from llmsweep.metrics.gates import GateConfig
from llmsweep.metrics.model import MEASURED, RunSource, Summary
from llmsweep.metrics.server import latency_from_totals
from llmsweep.words import count_of
from llmsweep.workload.fixed import FixedLengthWorkload

log = logging.getLogger(__name__)

SUPPORTED_VERSION = "0.13."
"""The aiperf release whose exports this reader follows (the cross-check's peer)."""
RECORDS_EXPORT = "profile_export.jsonl"
FIGURES_EXPORT = "profile_export_aiperf.json"
SERVER_EXPORT = "server_metrics_export.json"
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""aiperf 0.13 treats a local tokenizer path as a hub repo id when these are set (HFValidationError)."""
_OVERFLOW_PATTERNS = RunOptions().context_overflow_patterns
"""The error texts our client calls a context overflow, applied to aiperf's errors too."""
_BODY_FIELDS = ("model", "stream", "max_tokens", "messages", "stream_options")
"""Body fields aiperf sets itself (it always asks for usage); everything else goes to a line's `extra`."""


@dataclass(frozen=True, slots=True)
class AiperfRun:
    """One `aiperf profile` invocation: closed loop at `concurrency`, `warmups` then `requests` from `dataset`."""

    endpoint: Endpoint
    dataset: Path
    artifact_dir: Path
    concurrency: int
    requests: int
    warmups: int
    tokenizer: str
    executable: str = "aiperf"
    timeout_s: float = 600.0


@dataclass(frozen=True, slots=True)
class AiperfOutcome:
    """How the aiperf process ended; `cpu_s` is the CPU time of its whole process tree."""

    returncode: int | None
    wall_s: float
    cpu_s: float
    timed_out: bool
    log_path: Path


# ---------------------------------------------------------------------------------------------------- dataset
def write_aiperf_dataset(workload: FixedLengthWorkload, path: Path, endpoint: Endpoint) -> list[int]:
    """Write every request of `workload` (warm-ups first) as aiperf `single_turn` lines, each from the body llmsweep
    would send to `endpoint` (so `ignore_eos` and engine fields follow the endpoint's switches); return each
    `max_tokens`."""
    cfg = workload.config
    if cfg.api != "chat":
        raise ConfigError(
            "aiperf replays llmsweep prompts as chat text only (completions prompts are token ids)",
            fix="use api=chat for a cross-check",
        )
    total = cfg.total_requests
    if total is None:
        raise ConfigError("an aiperf dataset needs a request count", fix="set num_prompts on the fixed workload")
    path.parent.mkdir(parents=True, exist_ok=True)
    max_tokens: list[int] = []
    with path.open("w") as fh:
        for index in range(total):
            body = json.loads(build_body(workload.request(index), endpoint))
            messages = body["messages"]
            if len(messages) != 1 or messages[0].get("role") != "user":
                raise DatasetError(f"request {index} is not one user message", fix="use the fixed-length workload")
            line: dict[str, Any] = {"text": messages[0]["content"], "output_length": body["max_tokens"]}
            if extra := {k: v for k, v in body.items() if k not in _BODY_FIELDS}:
                line["extra"] = extra
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
            max_tokens.append(body["max_tokens"])
    return max_tokens


# ---------------------------------------------------------------------------------------------------- running
def aiperf_argv(run: AiperfRun) -> list[str]:
    """`aiperf profile` for `run`: server token counts, `max_tokens` (as llmsweep sends it), no UI."""
    return [
        run.executable, "profile",
        "--model", run.endpoint.model,
        "--url", run.endpoint.root,
        "--endpoint-type", run.endpoint.api,
        "--streaming",
        "--input-file", str(run.dataset),
        "--custom-dataset-type", "single_turn",
        "--dataset-sampling-strategy", "sequential",
        "--concurrency", str(run.concurrency),
        "--request-count", str(run.requests),
        # aiperf 0.13 refuses a count of 0 (it must be > 0): no warm-ups is no flag
        *(("--warmup-request-count", str(run.warmups)) if run.warmups else ()),
        "--tokenizer", run.tokenizer,
        "--use-server-token-count",
        "--use-legacy-max-tokens",
        "--request-timeout-seconds", f"{run.timeout_s:g}",
        "--ui-type", "none",
        "--artifact-dir", str(run.artifact_dir),
    ]


def run_aiperf(run: AiperfRun, *, deadline_s: float | None = None) -> AiperfOutcome:
    """Run aiperf to completion (or until `deadline_s`, then stop its process tree); output goes to `aiperf.log`."""
    run.artifact_dir.mkdir(parents=True, exist_ok=True)
    log_path = run.artifact_dir.parent / "aiperf.log"
    env = {k: v for k, v in os.environ.items() if k not in _OFFLINE_VARS}
    env.setdefault("PYTHONUNBUFFERED", "1")
    cpu0 = _children_cpu()
    t0 = time.monotonic()
    try:
        proc = start_process(aiperf_argv(run), log_path=log_path, env=env)
    except LaunchError as exc:  # the executable is missing
        raise EndpointError(  # the message only: LaunchError's fix is about engines
            f"cannot start aiperf ({run.executable}): {exc.message}",
            fix="install aiperf (pip install aiperf==0.13.0) or pass its path with --aiperf",
        ) from exc
    timed_out = False
    try:
        rc: int | None = proc.wait(timeout_s=deadline_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        rc = proc.stop(grace_s=10.0)
    except BaseException:  # Ctrl-C or a signal: aiperf runs in its own session and would outlive us
        proc.stop(grace_s=5.0)
        raise
    return AiperfOutcome(rc, time.monotonic() - t0, _children_cpu() - cpu0, timed_out, log_path)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------------------------------- reading back
_TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}
"""Milliseconds per unit of a time figure; aiperf 0.13 writes every latency in ms and says so in its `unit`."""
_TIMES = frozenset({"time_to_first_token", "time_to_first_output_token", "inter_chunk_latency",
                    "inter_token_latency", "request_latency", "benchmark_duration"})


class _ExportError(ValueError):
    """A field of an aiperf export that cannot be read as aiperf 0.13 writes it (`read_aiperf_records` adds where)."""


def _to_ms(name: str, unit: Any) -> float:
    """The factor that turns `name`'s values in `unit` into milliseconds (1 for anything but a time figure)."""
    if name not in _TIMES or unit is None:
        return 1.0
    if unit not in _TIME_UNITS:
        raise _ExportError(f"{name} is in unknown unit {unit!r} (expected one of {', '.join(_TIME_UNITS)})")
    return _TIME_UNITS[unit]


def _value(metrics: dict[str, Any], name: str) -> Any:
    """A per-request metric's value, a time figure in milliseconds whatever unit the export states."""
    entry = metrics.get(name)
    if not isinstance(entry, dict):
        return None
    value, scale = entry.get("value"), _to_ms(name, entry.get("unit"))
    if value is None or scale == 1.0:
        return value
    if isinstance(value, list):
        return [v * scale for v in value]
    return value * scale


def _error_class(error: dict[str, Any], cancelled: bool) -> ErrorClass:
    if cancelled:
        return "cancelled"
    code = error.get("code")
    text = f"{error.get('type') or ''} {error.get('message') or ''}".lower()
    if any(p.lower() in text for p in _OVERFLOW_PATTERNS):
        return "context_overflow"
    if isinstance(code, int) and 400 <= code < 600:
        return "http"
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if "connect" in text or "connection" in text or "disconnect" in text:
        return "connection"
    return "protocol"


def _record(
    line: Any, workers: dict[str, int], max_tokens: Sequence[int] | None, warmups: int
) -> RequestRecord:
    if not isinstance(line, dict):
        raise _ExportError(f"a line is a JSON {type(line).__name__}, not an object with metadata and metrics")
    meta = line.get("metadata") or {}
    metrics = line.get("metrics") or {}
    if not isinstance(meta, dict) or not isinstance(metrics, dict):
        raise _ExportError("metadata and metrics must be JSON objects")
    phase = "warmup" if _is_warmup(meta) else "profiling"
    position = int(meta.get("session_num") or 0) + (0 if phase == "warmup" else warmups)
    start_ns, end_ns = meta.get("request_start_ns"), meta.get("request_end_ns")
    sent = start_ns / 1e9 if start_ns is not None else None
    record = RequestRecord(
        id=str(meta.get("x_request_id") or f"aiperf-{phase}-{position}"),
        phase=phase,
        session=str(meta.get("conversation_id") or ""),
        request_index=position,
        scheduled_at=meta["credit_issued_ns"] / 1e9 if meta.get("credit_issued_ns") is not None else sent,
        sent_at=sent,
        end_at=end_ns / 1e9 if end_ns is not None else None,
        worker=workers.setdefault(str(meta.get("worker_id") or ""), len(workers)),
        max_tokens=max_tokens[position] if max_tokens is not None and position < len(max_tokens) else None,
    )
    error = line.get("error") or {}
    if error or meta.get("was_cancelled"):
        record.error_class = _error_class(error, bool(meta.get("was_cancelled")))
        record.status = error["code"] if isinstance(error.get("code"), int) else None
        record.error = str(error.get("message") or error.get("type") or "cancelled")[:500]
        return record
    record.status = 200
    if start_ns is None or end_ns is None:  # a success that cannot be timed is no measurement: never counted as one
        missing = " and ".join(k for k in ("request_start_ns", "request_end_ns") if meta.get(k) is None)
        record.error_class, record.error = "protocol", f"aiperf recorded no {missing}"
        return record
    # The first chunk of any content, reasoning included: what llmsweep's client stamps, what AgentX reports as ttft
    # (agentx-spec §3: AIPerf `time_to_first_token`), and where aiperf's inter-chunk gaps start. Its first *output*
    # token skips reasoning: anchored there, TTFT and every chunk came late by the reasoning time, the last after the
    # request ended.
    ttft_ms = _value(metrics, "time_to_first_token")
    if ttft_ms is None:
        ttft_ms = _value(metrics, "time_to_first_output_token")
    if sent is not None and ttft_ms is not None:
        first = sent + ttft_ms / 1e3
        record.first_token_at = first
        times, t = [first], first
        for gap_ms in _value(metrics, "inter_chunk_latency") or ():
            t += gap_ms / 1e3
            times.append(t)
        record.chunk_times = times
    record.prompt_tokens = _int(_value(metrics, "usage_prompt_tokens") or _value(metrics, "input_sequence_length"))
    record.completion_tokens = _int(
        _value(metrics, "usage_completion_tokens") or _value(metrics, "output_sequence_length")
    )
    record.cached_tokens = _int(_value(metrics, "usage_prompt_cache_read_tokens"))
    if record.completion_tokens is None:
        record.error_class, record.error = "protocol", "aiperf recorded no output token count"
    return record


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def aiperf_warmups(artifact_dir: Path) -> int:
    """The warm-up requests aiperf's `profile_export.jsonl` labels as such (`benchmark_phase: warmup`: aiperf marks
    each record's phase itself). A line that cannot be read counts as none here; `read_aiperf_records` names it."""
    labelled = 0
    with open_json_text(_find(artifact_dir, RECORDS_EXPORT), errors="replace") as fh:
        for raw in fh:
            try:
                meta = json.loads(raw).get("metadata") if raw.strip() else None
            except (ValueError, AttributeError):
                continue
            labelled += isinstance(meta, dict) and _is_warmup(meta)
    return labelled


def _is_warmup(meta: dict[str, Any]) -> bool:
    """Whether aiperf labelled a record's request warm-up (its `benchmark_phase`)."""
    return meta.get("benchmark_phase") == "warmup"


def read_aiperf_records(
    artifact_dir: Path, *, max_tokens: Sequence[int] | None = None, warmups: int | None = None
) -> Iterator[RequestRecord]:
    """Our records from aiperf's `profile_export.jsonl`. `max_tokens` (per dataset position, warm-ups first, as
    `write_aiperf_dataset` returns) lets the output-length gate check what each request asked for. aiperf numbers
    its profiling requests from 0 again after the warm-ups: each is placed `warmups` further on (None: as many as
    the export labels warm-up, `aiperf_warmups`), at its position in the dataset."""
    path = _find(artifact_dir, RECORDS_EXPORT)
    if warmups is None:
        warmups = aiperf_warmups(artifact_dir)
    workers: dict[str, int] = {}
    lines = 0
    with open_json_text(path, errors="replace") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise DatasetError(
                    f"{path}:{number}: not JSON ({exc.args[0][:80]})", fix="re-run aiperf; the export is damaged"
                ) from exc
            try:
                record = _record(line, workers, max_tokens, warmups)
            except (_ExportError, TypeError, ValueError, KeyError) as exc:  # a field of another shape or type
                raise DatasetError(
                    f"{path}:{number}: not an aiperf 0.13 record ({exc})",
                    fix="point at an aiperf 0.13 --artifact-dir, or re-run aiperf; the export is damaged",
                ) from exc
            lines += 1
            yield record
    if not lines:
        raise DatasetError(f"{path} holds no request",
                           fix="re-run aiperf; it writes one line per request it sent (an empty export measured "
                               "nothing)")


_FIGURES: dict[str, tuple[str, float]] = {
    "ttft": ("time_to_first_token", 1e-3),
    "tpot": ("inter_token_latency", 1e-3),
    "itl": ("inter_chunk_latency", 1e-3),
    "e2el": ("request_latency", 1e-3),
}


def read_aiperf_figures(artifact_dir: Path) -> dict[str, Any]:
    """aiperf's own aggregates under our names, seconds for latencies: what its console and JSON report."""
    path = _find(artifact_dir, FIGURES_EXPORT)
    try:
        data = json.loads(read_json_text(path, errors="replace"))
    except ValueError as exc:
        raise DatasetError(f"{path}: not JSON ({exc})", fix="re-run aiperf; the export is damaged") from exc
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: a JSON {type(data).__name__}, not aiperf's aggregate object",
                           fix="point at an aiperf 0.13 --artifact-dir")

    def stat(name: str, key: str) -> float | None:
        entry = data.get(name)
        value = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        try:
            return value * _to_ms(name, entry.get("unit")) if isinstance(entry, dict) else None
        except _ExportError as exc:
            raise DatasetError(f"{path}: {exc}",
                               fix="point at an aiperf 0.13 --artifact-dir (latencies in ms)") from exc

    latency = {
        ours: {k: (None if (v := stat(theirs, src)) is None else v * scale)
               for k, src in (("mean", "avg"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))}
        for ours, (theirs, scale) in _FIGURES.items()
    }
    errors = sum(int(e.get("count") or 0) for e in data.get("error_summary") or [] if isinstance(e, dict))
    return {
        "aiperf_version": data.get("aiperf_version"),
        "latency": latency,
        "throughput": {
            "output_tps": stat("output_token_throughput", "avg"),
            "request_rps": stat("request_throughput", "avg"),
            "duration_s": None if (d := stat("benchmark_duration", "avg")) is None else d * 1e-3,  # aiperf: sec
        },
        "tokens": {
            "input_mean": stat("input_sequence_length", "avg"),
            "output_mean": stat("output_sequence_length", "avg"),
        },
        "requests": {"successful": _int(stat("request_count", "avg")), "failed": errors},
    }


def read_aiperf_server_latency(artifact_dir: Path) -> dict[str, Any] | None:
    """The server's own latency over aiperf's profiling phase, from the `/metrics` aiperf scraped itself
    (`server_metrics_export.json`), in the shape of our `server_metrics.latency`; None when it scraped none."""
    try:
        data = json.loads(read_json_text(_find(artifact_dir, SERVER_EXPORT)))
    except (DatasetError, ValueError):
        return None
    totals: dict[str, tuple[float, float]] = {}
    for name, metric in (data.get("metrics") or {}).items():
        if not isinstance(metric, dict) or metric.get("type") != "histogram":
            continue
        stats = [series.get("stats") or {} for series in metric.get("series") or ()]
        if stats and all(isinstance(st.get("sum"), (int, float)) and isinstance(st.get("count"), (int, float))
                         for st in stats):
            totals[name] = (sum(st["sum"] for st in stats), sum(st["count"] for st in stats))
    return latency_from_totals(totals) if totals else None


def _find(artifact_dir: Path, name: str) -> Path:
    """aiperf writes its exports at the artifact root; accept the root or any folder above it."""
    direct = artifact_dir / name
    if direct.exists():
        return direct
    found = sorted(p for p in artifact_dir.rglob(name) if "phases" not in p.relative_to(artifact_dir).parts)
    if not found:
        raise DatasetError(
            f"{artifact_dir} holds no aiperf {name}",
            fix="point at an aiperf --artifact-dir (aiperf writes it when a run completes)",
        )
    if len(found) > 1:
        listed = ", ".join(str(p.parent) for p in found[:4]) + (", ..." if len(found) > 4 else "")
        raise DatasetError(f"{artifact_dir} holds {len(found)} aiperf runs ({listed})", fix="point at one of them")
    return found[0]


def import_aiperf_dir(
    artifact_dir: Path, out: Path, *, max_tokens: Sequence[int] | None = None, warmups: int | None = None,
    gpus: int | None = None, provenance: dict[str, Any] | None = None, source: RunSource = MEASURED,
) -> Summary:
    """aiperf artifacts → `out/records.jsonl` + `run.json` + `summary.json` (our definitions); returns the summary.

    `llmsweep summarize OUT` then recomputes the same summary, as for any run of our own client. `source`: what
    served aiperf's load (`peer crosscheck` probes the server; an import of someone's artifacts cannot tell). `gpus`:
    the GPUs behind the endpoint; None (the artifacts do not say) divides by 1 and records the count as unknown
    (`gpus_known: false`), so the figures read per endpoint, as `bench`'s against a server that reports none.
    The warm-ups are the requests the export labels warm-up (`aiperf_warmups`); `warmups`, the count the caller says
    the run sent (`peer import --num-warmups`), is checked against them: another count is refused (ConfigError),
    nothing written — relabelling measured requests would make a warm-up the run never sent, and the reverse.
    """
    # every line is read before OUT is touched: an export without a request (or no export), or one damaged at any
    # line, is refused with nothing written, never left as a partial records.jsonl (which a second import then
    # refused as results, and which under --force sat beside the summary.json of the import it replaced)
    records = list(read_aiperf_records(artifact_dir, max_tokens=max_tokens))
    labelled = sum(r.phase == "warmup" for r in records)
    if warmups is not None and warmups != labelled:
        raise ConfigError(
            f"--num-warmups {warmups}, but {_find(artifact_dir, RECORDS_EXPORT)} labels "
            f"{count_of(labelled, 'request')} as warm-up (aiperf marks each record's benchmark_phase); nothing was "
            "imported",
            fix=f"drop --num-warmups: the warm-ups are the {labelled} the export labels (aiperf's "
                "--warmup-request-count sets how many a run sends)")
    out.mkdir(parents=True, exist_ok=True)
    (out / RECORDS_FILE).unlink(missing_ok=True)
    with RecordWriter(out / RECORDS_FILE) as writer:
        for record in records:
            writer.write(record)
    try:  # aiperf writes no aggregate when every request failed; the records still say why
        version = read_aiperf_figures(artifact_dir)["aiperf_version"]
    except DatasetError:
        version = None
    if version is not None and not str(version).startswith(SUPPORTED_VERSION):
        log.warning("%s was written by aiperf %s; llmsweep reads aiperf %sx exports (fields may differ: check the "
                    "summary against aiperf's own figures)", artifact_dir, version, SUPPORTED_VERSION)
    known = ({"gpus_known": True, "gpus_from": "--gpus"} if gpus is not None else
             {"gpus_known": False, "gpus_from": "unknown: aiperf's artifacts do not say and --gpus was not given"})
    prov = {"kind": "aiperf-import", "client": "aiperf", "aiperf_version": version,
            "artifact_dir": str(artifact_dir), **known, **(provenance or {})}
    # the default gates, as for any folder of records (aiperf's run has none of ours); no client figures of ours
    write_run_json(out, run_json(provenance=prov, gates=GateConfig(), client={}, gpus=gpus or 1, source=source))
    return summarise_dir(out)
