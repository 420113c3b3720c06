"""The dashboard's data: one JSON document embedded in the page, built from a run directory.

Only artifacts are read, and only named fields are copied (run.json and provenance through allow/deny lists), so an
environment dump that slipped into an artifact never reaches the page.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from llmsweep.client.files import RECORDS_FILE, SERVER_METRICS_FILE
from llmsweep.execute.failure_text import failure_gist
from llmsweep.metrics.model import source_words
from llmsweep.metrics.registry import HOT_BY_NAME, HOT_COLUMNS, MODELLED_MARK
from llmsweep.option_spellings import flag as _flag
from llmsweep.report.timeseries import MAX_REQUESTS, load_request_series, load_server_series
from llmsweep.results.frontier import (
    X_AXES,
    Y_METRIC,
    compute_frontiers,
    name_series,
    no_frontier_why,
    series_label,
    series_labels,
    y_direction,
)
from llmsweep.results.point import ResultPoint, stood_on
from llmsweep.results.repeats import Repeats, combine_repeats
from llmsweep.results.rundir import JobArtifacts, RecordedOutcome, RunDir, read_outcome, recorded_outcomes
from llmsweep.sim_warnings import WarningKind, warning_kind
from llmsweep.words import count_of, noun

_OUT = _flag("out")
_STORE = _flag("store")
_RESUME = _flag("resume")


log = logging.getLogger(__name__)

PAYLOAD_VERSION = 2
Y_METRICS = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "tokens_per_joule",
             "joules_per_output_token", "usd_per_mtok_output")
"""Y choices (InferenceX: token throughput per chip, total/output/input; tokens per joule and energy per output token
where power was sampled; cost per million output tokens at the catalog's assumed price); each gets its own
north-star frontiers, with the metric table's direction (energy and cost per token: lower is better)."""
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#393b79", "#ad494a")
RUN_FIELDS = ("run_id", "started", "finished", "recipe_files", "llmsweep_version", "executor", "seed", "host")
_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
"""A key's words: split at anything not a letter or digit and at camelCase (`HF_TOKEN`, `apiKey`, `x-api-key`)."""
_SECRET_WORDS = frozenset({"env", "envs", "environ", "environment", "password", "passwd", "passphrase", "oauth",
                           "authorization", "bearer", "cookie", "cookies", "apikey", "accesskey", "privatekey",
                           "credential", "credentials", "creds", "secret", "secrets"})
"""A word that makes a key a secret or an environment dump wherever it stands in it."""
_KEY_OF = frozenset({"api", "secret", "access", "private", "signing", "encryption"})
"""The words before `key` that make it a secret's (`api_key`, `secret_key`); `recipe_key`, `reuse_key` are not."""
_COUNTED = frozenset({"per", "output", "input", "first", "last", "next", "draft", "prompt", "completion",
                      "generated", "decode", "prefill", "new", "total", "max", "min", "num", "avg", "mean", "cached"})
"""The words before a final `token` that make it a unit of text, not a credential (`cpu_us_per_output_token`,
`time_to_first_token`): `HF_TOKEN`, `auth_token`, `github_token` and `token` alone stay secrets."""


def secretish(key: str) -> bool:
    """Whether a key names a secret or an environment dump, by its whole words (never a part of one: `tokenizer`,
    `num-draft-tokens` and `author` are not secrets): an environment (`env`, `environment`), a password, a credential,
    a cookie, an auth header, an API or secret key (`api_key`, `apiKey`), or a token that is a credential (`HF_TOKEN`,
    `access_token`; a final `token` after a word that counts text, `per_output_token`, is a unit)."""
    words = [w.lower() for w in _SEGMENT.findall(key)]
    if any(w in _SECRET_WORDS or w.startswith(("passw", "secret", "credential"))
           or (w.startswith("auth") and w not in ("author", "authors")) for w in words):
        return True
    if any(w == "key" and n and words[n - 1] in _KEY_OF for n, w in enumerate(words)):
        return True
    if words and words[-1] != "token" and words[-1].endswith("token"):  # one word: `hftoken`, `apitoken`
        return True
    return bool(words) and words[-1] == "token" and (len(words) == 1 or words[-2] not in _COUNTED)


def scrub(doc: Any) -> Any:
    """Drop keys that look like secrets or environment dumps (`secretish`), recursively (values are never
    inspected)."""
    if isinstance(doc, Mapping):
        return {k: scrub(v) for k, v in doc.items() if not secretish(str(k))}
    if isinstance(doc, list):
        return [scrub(v) for v in doc]
    return doc


def point_payload(p: ResultPoint, sk: str, frontiers: Mapping[str, Mapping[str, Sequence[str]]], *,
                  reused_as: str | None = None, warnings: Sequence[str] = (),
                  repeats: Repeats | None = None) -> dict[str, Any]:
    """One point of the page. `reused_as`: the job of this run that `run --reuse` stood on `p`, a stored result of
    an earlier run: the point keeps that run's id, verdict and figures as the store holds them, and says where it
    came from (`reused`); None for a point this run measured. `warnings`: its job's outcome warnings
    (`JobOutcome.warnings`), shown beside its verdict. `repeats`: the results `p` combines (`run --repeats`): `p`'s
    figures are their mean, and the point says so (`repeats`: count, jobs, spread); None for a single result."""
    return {
        "id": p.result_id, "job_id": reused_as or p.job_id, "run_id": p.run_id, "series": sk, "source": p.source,
        # its power figures measured or modelled, each marked where it is shown (`MetricDef.power`)
        "power_source": p.power_source,
        # the assumed price its cost figures were figured at (`MetricDef.assumed`), said beside them in its drill-down
        "price": p.cost.price_words() if p.cost is not None and any(
            p.metric(c.name) is not None for c in HOT_COLUMNS if c.metric.assumed) else None,
        "in_view": p.run_in_view,  # the run the point is drawn as part of: the run's own, or an overlay's (`--with`)
        "clock": clock_of(p), "origin": p.origin,
        "reused": None if reused_as is None else {"run_id": p.run_id, "job_id": p.job_id, "result_id": p.result_id,
                                                  "verdict": p.verdict},
        "verdict": p.verdict, "valid": p.valid, "reasons": list(p.reasons),
        "reason": repeats_reason(p, repeats) if repeats is not None and repeats.n > 1
        else verdict_reason(p.verdict, p.reasons), "causes": causes(p, repeats),
        "warnings": list(warnings), "gpus": p.gpus, "served_on": served_on(p),
        "identity": p.identity.shown(), "topology": p.identity.topology(),
        # as stored: the page, summary.md and the PNGs round a value once, where they show it (as the CLI does)
        "metrics": {**{c.name: p.metric(c.name) for c in HOT_COLUMNS}, "conc": p.identity.conc},
        "requests": {"finished": p.num_requests, "successful": p.num_successful},
        "frontier": {axis: p.result_id in by_series.get(sk, ()) for axis, by_series in frontiers.items()},
        "eval": _eval_mark(p),
        "repeats": repeats.as_dict() if repeats is not None else None,
        "spread": spread_bounds(p, repeats),
    }


def served_on(p: ResultPoint) -> str:
    """What served the point, as its drill-down says it: `CPU` where its server ran on no GPU (`hardware.gpus` 0: a
    real engine's CPU rehearsal, whose per-GPU figures still divide by the job's GPUs), else `1 GPU` / `8 GPUs`: the
    GPUs it recorded, or, where it records none (an imported row), the count its per-GPU figures divide by."""
    served = p.served_gpus
    if served == 0:
        return "CPU"
    return count_of(p.gpus if served is None else served, "GPU")


def tag_key(points: Sequence[Mapping[str, Any]]) -> str:
    """What a point's label (`c16 · n48`, `c16 · n45/48` where some failed) counts, as the page's key and the PNGs'
    title say it: the PNGs said `n = requests`, and beside a mean of repeats (`run --repeats`) `n` reads as one
    window's requests while it counts every repeat's, the throughput beside it being one window's mean."""
    words = "c = concurrency, n = successful requests measured (ok/finished if some failed)"
    return words + ("; a mean's n sums its repeats" if any(p.get("repeats") for p in points) else "")


REPEATS_SPREAD = "± 1 SD of the repeats"
"""What the bars of a point that is the mean of its repeats span, on the page and in the PNGs alike (their keys say it
in these words): from the mean less to the mean plus the repeats' sample standard deviation (`Repeats.spread`), the
`sd` its tooltip and drill-down state. `spread_bounds` computes them once, for both."""


def spread_bounds(p: ResultPoint, repeats: Repeats | None) -> dict[str, list[float]] | None:
    """metric -> [mean - sd, mean + sd] (`REPEATS_SPREAD`) for each metric the page and the PNGs can plot (the x axes
    and the y choices) that the repeats give a spread of; None for a single result. A mean drawn without its spread
    (the PNGs ringed it, the page drew it as a single result) hid whether two points differ by more than their
    repeats do."""
    if repeats is None or repeats.n < 2:
        return None
    out = {}
    for metric in dict.fromkeys([*(a.key for a in X_AXES), *Y_METRICS]):
        mean, sd = p.metric(metric), repeats.spread(metric)
        if mean is not None and sd is not None and math.isfinite(mean):
            out[metric] = [mean - sd, mean + sd]
    return out


def causes(p: ResultPoint, repeats: Repeats | None) -> list[str]:
    """Why a point is not valid, as its verdict's banner groups it (`verdict_groups`): its gates' reasons; for the
    mean of its repeats (`run --repeats`), the reasons of the repeats that are not valid, each said once, without
    the repeat and job that `reasons` name (`repeat 1 of 2 (JOB) is smoke: …`), so nine points whose eighteen
    repeats ran too short for one cause are one banner line, not eighteen. A repeat of another verdict than the
    point's says its own (`a repeat is smoke: …` under an invalid point). Empty for a valid point."""
    if p.verdict == "valid":
        return []
    if repeats is None or repeats.n < 2:
        return list(p.reasons) or [verdict_reason(p.verdict, p.reasons)]
    said = [r if m.verdict == p.verdict else f"a repeat is {m.verdict}: {r}"
            for m in repeats.members if m.verdict != "valid" for r in m.reasons or ["no reason recorded"]]
    return list(dict.fromkeys(said))


def repeats_reason(p: ResultPoint, repeats: Repeats) -> str:
    """The one-line reason of a point that is the mean of its repeats (`run --repeats`), as its table row and tooltip
    show it: each cause once with how many repeats it holds for (`2 of 2 repeats: smoke run: profile window 200 s is
    shorter than 900 s`), causes that differ only in their numbers as one with their range (`group_reasons`), a
    repeat of another verdict than the point's naming it (`1 of 2 repeats smoke: …`). Each repeat's own reasons,
    its job named, stay in `reasons` (the drill-down lists them, the table cell's tooltip says them): restated per
    repeat, job ids and all, they made the cell of a two-repeat point twelve lines long. Empty for a valid point."""
    if p.verdict == "valid":
        return ""
    items = [(("" if m.verdict == p.verdict else f" {m.verdict}") + f": {r}", m.result_id)
             for m in repeats.members if m.verdict != "valid" for r in m.reasons or ["no reason recorded"]]
    return "; ".join(f"{g['count']} of {repeats.n} repeats{g['reason']}" for g in group_reasons(items))


def clock_of(p: ResultPoint) -> str | None:
    """The clock `p` was timed on (`Provenance.clock`: virtual or wall), None where its summary does not say."""
    return p.summary.provenance.clock if p.summary is not None else None


def _eval_mark(p: ResultPoint) -> dict[str, Any] | None:
    """What a throughput point shows of the eval its job ran after it (None: the job ran none)."""
    block = p.eval
    if block is None:
        return None
    return {"task": block.task, "verdict": block.verdict, "score": block.score,
            "reason": "; ".join(block.reasons)}  # every check that failed, not the first alone


def eval_payload(p: ResultPoint, series_label: str) -> dict[str, Any]:
    """One row of the evaluation view: the eval of an eval-only or a run-eval job."""
    block = p.eval
    assert block is not None
    return {
        "id": p.result_id, "job_id": p.job_id, "series": series_label, "conc": p.identity.conc, "mode": block.mode,
        "task": block.task, "score": block.score, "score_name": block.score_name,
        "score_stderr": block.score_stderr, "n_samples": block.runs[0].n_samples if block.runs else None,
        "eval_concs": [r.conc for r in block.runs], "verdict": block.verdict, "reasons": list(block.reasons),
        "checks": [{"metric": c.metric, "score": c.score, "threshold": c.threshold, "ok": c.ok,
                    "from": c.threshold_from} for c in block.checks],
        "dataset": block.dataset, "limit": block.limit, "harness": f"{block.harness} {block.harness_version or '?'}",
        "context_length": block.context_length, "max_tokens": block.max_tokens,
        "acceptance_length": block.acceptance_length, "source": p.source, "clock": clock_of(p),
        "command": " ".join(block.runs[0].command) if block.runs else "",
    }


PAGE_REQUEST_BUDGET = 60_000
"""Timeline rows across the whole page (~25 bytes each): a 200-point sweep still opens quickly."""


def request_budget(n_points: int) -> int:
    """Per-point request budget: 1500 for small runs, shrinking with the point count, never below 200."""
    return max(200, min(MAX_REQUESTS, PAGE_REQUEST_BUDGET // max(n_points, 1)))


def detail_payload(p: ResultPoint, *, max_requests: int = MAX_REQUESTS) -> dict[str, Any]:
    """Drill-down data of one point: raw-derived series, exact server command, validity and provenance."""
    out: dict[str, Any] = {
        "server_command": None,
        "validity": scrub(p.summary.validity.model_dump(mode="json") if p.summary is not None
                          else {"verdict": p.verdict, "reasons": list(p.reasons)}),
        "provenance": scrub(p.provenance),
        "client_health": scrub(p.summary.client_health.model_dump(mode="json") if p.summary is not None else {}),
        "job": scrub(p.job), "timeline": [], "ttft": [], "throughput": [], "inflight": [], "kv_usage": [],
        "cache_hit": [], "requests_total": 0, "requests_shown": 0, "records_skipped": 0, "records_note": None,
        "counted": requests_counted(p),
        "kv_pool_tokens": pool_tokens(p),
    }
    if p.artifact_dir is None:
        return out
    cmd = p.artifact_dir / "server_command.txt"
    if cmd.is_file():
        out["server_command"] = cmd.read_text(encoding="utf-8", errors="replace")[:20000]
    req = load_request_series(p.artifact_dir / RECORDS_FILE, max_requests=max_requests)
    t0 = req.t0 if req else 0.0
    if req:
        out.update(timeline=req.timeline, ttft=req.ttft, throughput=req.throughput, inflight=req.inflight,
                   requests_total=req.total, requests_shown=req.shown, records_skipped=req.skipped,
                   records_note=records_note(req.total, req.skipped))
    srv = load_server_series(p.artifact_dir / SERVER_METRICS_FILE, t0)
    out.update(kv_usage=srv.kv_usage, cache_hit=srv.cache_hit)
    return out


def pool_tokens(p: ResultPoint) -> float | None:
    """The GPU KV pool the point's engines reported (`KvCache.pool_tokens`), which the drill-down's KV chart names."""
    kv = p.summary.server_metrics.kv_cache if p.summary is not None else None
    return kv.pool_tokens if kv is not None else None


def requests_counted(p: ResultPoint) -> dict[str, int] | None:
    """What the summary of the result whose records the drill-down draws counts of them: `measured` (the successful
    profiling requests, a point's `n` and its badge's count), `failed`, `cancelled` and `warmup`. For a point that is
    the mean of its repeats that is its first repeat's (the drill-down's timeline is that result's), where its badge
    and `n` sum every repeat's: the drill-down says both. None without a summary (an imported row)."""
    if p.summary is None:
        return None
    r = p.summary.requests
    return {"measured": r.successful, "failed": r.failed, "cancelled": r.cancelled, "warmup": r.warmup}


def own_point(point: Mapping[str, Any], run_id: str) -> bool:
    """Whether a page point is the run's (`run_id`): one it measured, in whole or in part, or one `run --reuse` stood
    its job on; not a point of another run drawn beside it (`--with`), whatever run measured that one's results."""
    in_view = point.get("in_view")
    return in_view == run_id if in_view is not None else bool(point.get("reused")) or point["run_id"] == run_id


def records_note(read: int, skipped: int) -> str | None:
    """What the drill-down says of a records.jsonl with lines that are not JSON (`skipped`; `read`: the requests
    read from the others): incomplete where some were read, unreadable where none was; None for a whole file."""
    if not skipped:
        return None
    if not read:
        return (f"{RECORDS_FILE} is unreadable: none of its {count_of(skipped, 'line')} is JSON (corrupt?), so these "
                "charts have no request data; the point's figures are its summary's.")
    return (f"{RECORDS_FILE} is incomplete: {count_of(skipped, 'line')} not JSON (cut short?) "
            f"{noun(skipped, 'was', 'were')} skipped, so these charts "
            "miss requests the point measured.")


def verdict_reason(verdict: str, reasons: Sequence[str]) -> str:
    """The one-line reason shown beside a verdict: the gates' reasons, or a note that an unclean verdict has none."""
    return "; ".join(reasons) or ("" if verdict == "valid" else "no reason recorded")


VERDICT_KINDS = ("invalid", "eval-failed", "smoke", "refused", "failed", "reused", "simulated-only", "not-modelled",
                 "catalog-estimates", "engine-version", "context-served", "no-gpu", "timeout-not-applied")
"""The kinds that get a banner each, in page order: results excluded from frontiers, evals that did not pass (an
eval-only job's only result, or a run-eval row's eval beside its throughput verdict), results too short to publish,
jobs refused before they ran, jobs that ran and produced no result, jobs `run --reuse` stood on stored results of
earlier runs (drawn as those runs stored them, marked reused; listed without a point when the store does not hold
them), results the simulator produced for jobs a real engine would refuse (engine rules softened under the
simulator), results that predict their jobs without modelling all they set, results the simulator modelled with
catalog figures the catalog marks as estimates, results of a real engine served
on another version than declared, with another context than launched or on no GPU, and virtual-time results
whose requests outlasted `--request-timeout` (`sim_warnings.WarningKind`)."""
WARNING_BANNER = {WarningKind.ENGINE_REFUSES: "simulated-only", WarningKind.NOT_MODELLED: "not-modelled",
                  WarningKind.CATALOG_ESTIMATES: "catalog-estimates", WarningKind.ENGINE_VERSION: "engine-version",
                  WarningKind.CONTEXT_SERVED: "context-served", WarningKind.NO_GPU: "no-gpu",
                  WarningKind.TIMEOUT_NOT_APPLIED: "timeout-not-applied"}
"""The banner each kind of outcome warning (`sim_warnings`) is said under."""


def reused_reason(source: Mapping[str, Any], *, job: bool = True) -> str:
    """What a reused job says (banner, table, summary.md): the stored result it stands on, as run.json records it.
    `job=False`: without the job of that run, as a banner line that groups every job reused from one run says it
    (each line held its job id, so nine reused jobs made nine ×1 lines)."""
    return (f"reused the {source.get('verdict', 'stored')} result of run {source.get('run_id')}"
            + (f" (job {source.get('job_id')})" if job else ""))


def reused_jobs(point: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The jobs behind a page point that `run --reuse` stood on stored results of other runs: every repeat of it so
    reused (`repeats.reused`: a point the run measured in part, or not at all), or the point itself where it is one
    reused result (`reused`), each with the stored result's run, job, result id and verdict (`as`: the job of the
    run in view)."""
    repeats = point.get("repeats")
    if repeats:
        return list(repeats.get("reused") or ())
    return [{**point["reused"], "as": point["job_id"]}] if point.get("reused") else []


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w]|\.\d)")


def _span(values: Sequence[str]) -> str:
    nums = sorted({float(v) for v in values})
    text = {float(v): v for v in values}
    return text[nums[0]] if len(nums) == 1 else f"{text[nums[0]]}–{text[nums[-1]]}"


def group_reasons(items: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """Group (reason, id) pairs whose reasons are identical, or differ only in their numbers.

    A group reads as its reason with each number that varies written as its range (`profile window 1–2 s is shorter
    than 900 s`), its count and its ids; groups come most frequent first, so nine jobs that failed the same way make
    one line, not nine.
    """
    groups: dict[tuple[str, ...], list[tuple[list[str], str]]] = {}
    for reason, ident in items:
        parts = _NUMBER.split(reason)
        groups.setdefault(tuple(parts), []).append((_NUMBER.findall(reason), ident))
    out = []
    for key, members in groups.items():
        text = key[0]
        for slot, part in enumerate(key[1:]):
            text += _span([nums[slot] for nums, _ in members]) + part
        ids = list(dict.fromkeys(ident for _, ident in members))
        out.append({"reason": text, "count": len(ids), "ids": ids})
    return sorted(out, key=lambda g: (-g["count"], g["reason"]))


def no_result_entries(run: RunDir, have: set[str], unread: str = "no results store was read") -> list[dict[str, str]]:
    """Every expected job without a result, in the plan's order: its status and reason, from its `outcome.json` or
    from `run.json` (a refused job has no folder; `run` records its refusal there). A job `run --reuse` stood on a
    stored result is in `have` when that result is drawn; otherwise it is listed as reused, `unread` saying why its
    stored result is not drawn."""
    recorded = recorded_outcomes(run)
    folders = {j.job_id: j for j in run.jobs}
    ids = [j.job_id for j in run.jobs if j.job_id not in have]
    ids += [jid for jid in run.missing_job_ids if jid not in folders and jid not in have]
    ids += [jid for jid in recorded if jid not in folders and jid not in have and jid not in ids]
    planned = {jid: n for n, jid in enumerate(run.expected_job_ids)}
    ids.sort(key=lambda jid: planned.get(jid, len(planned)))  # the plan's order (by arm, then concurrency)
    out = []
    reused = run.reused
    for jid in ids:
        if (source := reused.get(jid)) is not None:
            why = (f"not drawn: {unread} (`llmsweep report {run.path} {_STORE} STORE` draws it from the store that "
                   f"holds run {source.get('run_id')})")
            said = reused_reason(source)
            out.append({"job_id": jid, "status": "reused", "kind": "reused", "reason": f"{said}, {why}",
                        "gist": f"{reused_reason(source, job=False)}, {why}"})
            continue
        art = folders.get(jid)
        folder = art.dir if art is not None else run.path / "jobs" / jid
        # The job folder's own outcome.json first (the executor's last word), else what run.json recorded.
        own = read_outcome(art.outcome, f"{art.dir}/outcome.json") if art is not None and art.outcome else None
        rec = own or recorded.get(jid)
        if art is not None and art.unread:  # a summary set aside (no job.json beside it): why, whatever it says
            status, reason = "unreadable", art.unread
        elif art is not None and art.unjudged:  # a summary no outcome closed as done (`job_files.unjudged`)
            status, reason = str((art.outcome or {}).get("status") or "unjudged"), art.unjudged
        elif rec is not None and art is not None and rec.status in SUMMARY_VERDICTS:
            status, reason = "no summary", _summary_gone(run, art, rec, "outcome.json" if own else "run.json")
        elif rec is not None and rec.status in SUMMARY_VERDICTS:  # run.json's verdict, its job folder gone since
            status, reason = "no job folder", (
                f"run.json says {rec.status} but its job folder {folder} is missing (fix: restore the folder from a "
                f"copy of the run, or `llmsweep run RECIPE {_OUT} {run.path} {_RESUME}` runs the job again)")
        elif rec is not None:
            status, reason = rec.status, "; ".join(rec.reasons) or "no reason recorded"
        elif art is not None:
            status, reason = "failed", "no summary.json in its job folder"
        else:
            status, reason = NEVER_RAN, "planned, but no job folder: the run stopped before it, or is still going"
        entry = {"job_id": jid, "status": status, "kind": "refused" if status == "refused" else "failed",
                 "reason": reason}
        if str(folder) in reason:  # one banner line for the jobs of one cause: the folder said
            reason = reason.replace(str(folder), "JOBDIR")  # once, as JOBDIR, in the gist
        if (gist := failure_gist(reason)) != entry["reason"]:  # one line, the same for every job of one cause
            entry["gist"] = gist
        out.append(entry)
    return out


NEVER_RAN = "missing"
"""The status of an expected job with no folder and no recorded outcome: planned, never run (not yet, or the run
stopped before it). Counted `missing`, apart from the jobs refused before running and those that ran (or began to)
and left no result (`run_counts`)."""

SUMMARY_VERDICTS = ("valid", "smoke", "invalid")
"""The outcomes a job reaches only by writing its summary: one of them without a summary.json lost the file since."""


def _summary_gone(run: RunDir, art: JobArtifacts, rec: RecordedOutcome, said_by: str) -> str:
    """Why a job whose outcome is a verdict has no result: its summary.json went missing after the run wrote it; the
    fix rebuilds it from the job's records, or runs the job again when those are gone too."""
    if art.records_path.is_file():
        fix = f"`llmsweep summarize {art.dir}` rebuilds it from {RECORDS_FILE}"
    else:
        fix = f"{RECORDS_FILE} is gone too: `llmsweep run RECIPE {_OUT} {run.path} {_RESUME}` runs the job again"
    return f"{said_by} says {rec.status} but summary.json is missing (fix: {fix})"


def verdict_groups(points: Sequence[dict[str, Any]], missing: Sequence[dict[str, str]],
                   warnings: Mapping[str, Sequence[str]] | None = None,
                   evals: Sequence[dict[str, Any]] = (), run_id: str | None = None) -> dict[str, Any]:
    """Per verdict kind, its points or jobs and their reasons grouped (what each banner of the page says).
    `warnings`: point id -> its job's outcome warnings (`JobOutcome.warnings`): it goes under `simulated-only` for
    the engine rules the simulator ran it despite, under `not-modelled` for what the simulator does not model, under
    `catalog-estimates` for the catalog estimates it was modelled with (`WARNING_BANNER`: each kind's banner).
    Only the run's points are said (`run_id`, `own_point`; None: every point is the run's): a point of another run
    drawn beside them (`--with`) is that run's business (`overlay_verdicts`). `reused` counts the jobs `run --reuse`
    stood on stored results (`reused_jobs`), each repeat of a point so reused one."""
    items: dict[str, list[tuple[str, str]]] = {k: [] for k in VERDICT_KINDS}
    counts = dict.fromkeys(VERDICT_KINDS, 0)
    for p in points:
        if run_id is not None and not own_point(p, run_id):  # an overlay's (`--with`): its own run's banners
            continue
        said = (warnings or {}).get(p["id"]) or ()
        for banner in dict.fromkeys(WARNING_BANNER[warning_kind(w)] for w in said):
            counts[banner] += 1
        for w in said:
            items[WARNING_BANNER[warning_kind(w)]].append((w, p["id"]))
        for source in reused_jobs(p):
            counts["reused"] += 1
            items["reused"].append((reused_reason(source, job=False), p["id"]))
        kind = "smoke" if p["verdict"] == "smoke" else "invalid" if not p["valid"] else None
        if kind is None:
            continue
        counts[kind] += 1
        items[kind] += [(r, p["id"]) for r in p.get("causes") or p["reasons"] or [p["reason"]]]
    drawn = {p["job_id"]: p["id"] for p in points if run_id is None or own_point(p, run_id)}
    for e in evals:  # one line per eval, by its point where one is drawn (series and conc); an eval-only job by id
        if e["verdict"] != "valid":  # a smoke eval passed on too few samples: said as smoke, not as a failure
            kind = "smoke" if e["verdict"] == "smoke" else "eval-failed"
            counts[kind] += 1
            items[kind].append(("; ".join(e["reasons"]) or "no reason recorded",
                                drawn.get(e["job_id"], e["job_id"])))
    full: dict[str, str] = {}
    for m in missing:  # jobs that failed for one cause group on its gist (the log's name and the port differ)
        counts[m["kind"]] += 1
        items[m["kind"]].append((m.get("gist") or m["reason"], m["job_id"]))
        full.setdefault(m["job_id"], m["reason"])
    grouped = {k: group_reasons(items[k]) for k in VERDICT_KINDS}
    for g in grouped["refused"] + grouped["failed"]:
        if len(g["ids"]) == 1 and g["ids"][0] in full:  # one job: its own gist, its folder named (not `JOBDIR`)
            g["reason"] = failure_gist(full[g["ids"][0]])
        if (said := full.get(g["ids"][0], g["reason"])) != g["reason"]:
            g["detail"] = said  # the whole reason of one of them (the server log's tail), shown on request
    return {k: {"count": counts[k], "reasons": grouped[k]} for k in VERDICT_KINDS if counts[k]}


def overlay_verdicts(points: Sequence[dict[str, Any]], run_id: str) -> dict[str, Any]:
    """The invalid and smoke points of the runs drawn beside run `run_id` (`--with`), grouped as `verdict_groups`
    groups the run's own: shown apart, as those runs' (never counted as the run's)."""
    theirs = [p for p in points if not own_point(p, run_id)]
    return {k: v for k, v in verdict_groups(theirs, []).items() if k in ("invalid", "smoke")}


def power_unrecorded(points: Iterable[ResultPoint], run: RunDir | None = None) -> list[dict[str, Any]]:
    """The run's points whose GPU power was not recorded because no backend could sample where they ran, grouped by
    the reason their summary's power block gives (`error`: why, and how to get it); `run --power-backend off` samples
    nothing by request (its block holds the assumed cost alone, reason `not_sampled`) and is not listed, and a point
    that required power says so in its verdict instead. A point `run --reuse` stood `run` on, whose stored result
    recorded no power while `run` samples it (`power.integrate.reused_without_power`), is listed too: it has no
    power as a point of a run that could not sample has none."""
    from llmsweep.power.integrate import reused_without_power

    samples = run is not None and run.meta.get("power_backend") != "off"
    items = []
    for p in points:
        power = p.summary.power if p.summary is not None else None
        if samples and run is not None and p.reused_by is not None and p.reused_by.run_id == run.run_id \
                and p.summary is not None and (why := reused_without_power(power, p.run_id)) is not None:
            items.append((why, p.result_id))
        elif power is not None and power.unrecorded:
            items.append((power.unrecorded, p.result_id))  # the page's point ids: its banner names their concs
    return group_reasons(items)


def empty_message(n_points: int, missing: Sequence[dict[str, str]]) -> str | None:
    """What the page says instead of a chart when the run has no point at all; None when it has one."""
    if n_points:
        return None
    if not missing:
        return "This run has no result and no recorded job: nothing was planned into it, or it has not started yet."
    refused = sum(1 for m in missing if m["kind"] == "refused")
    reused = sum(1 for m in missing if m["kind"] == "reused")
    failed = len(missing) - refused - reused
    bits = [f"{n} {what}" for n, what in ((refused, "refused"), (failed, "without a result"),
                                          (reused, "reused from earlier runs")) if n]
    # where the reasons are is each view's to say (below on the page and in summary.md; not on a PNG or the CLI)
    return f"No result in this run: {count_of(len(missing), 'expected job')}, {' and '.join(bits)}."


def run_counts(run_id: str, drawn: Sequence[dict[str, Any]], series: Sequence[dict[str, Any]],
               evals: Sequence[dict[str, Any]], missing: Sequence[dict[str, str]]) -> dict[str, Any]:
    """What the run holds, counted once for the page's header, summary.md and `report`'s own line: its throughput
    points (drawn; with those `--reuse` stood jobs on) in their series, how many are invalid or smoke, its evals
    (an eval-only job's result is its eval, never a point) and how many did not pass, the jobs without a result, and
    the sources of them all; and apart, the points of other runs drawn beside them (`--with`) in their series."""
    points = [p for p in drawn if own_point(p, run_id)]
    return {
        "points": len(points), "series": sum(1 for s in series if not s["overlay"]),
        "overlaid": len(drawn) - len(points), "overlaid_series": sum(1 for s in series if s["overlay"]),
        "invalid": sum(1 for p in points if not p["valid"]),
        "smoke": sum(1 for p in points if p["verdict"] == "smoke"),
        # the results `--reuse` stood the run's jobs on, drawn: a point wholly reused, or repeats of a point
        "reused_drawn": sum(len(reused_jobs(p)) for p in points),
        # points that are the mean of their repeats (`run --repeats`), and the results they combine
        "repeated": sum(1 for p in points if p.get("repeats")),
        "repeat_results": sum(p["repeats"]["n"] for p in points if p.get("repeats")),
        "evals": len(evals), "evals_failed": sum(1 for e in evals if e["verdict"] not in ("valid", "smoke")),
        # the jobs without a result, apart as the page's banners say them (`without_result` says them in words):
        # refused before running; failed (ran or began to, and left no result: interrupted, a launch that failed, a
        # summary that does not read — those counted again in `unreadable`); missing (planned, never run)
        "refused": sum(1 for m in missing if m["kind"] == "refused"),
        "failed": sum(1 for m in missing if m["kind"] == "failed" and m["status"] != NEVER_RAN),
        "unreadable": sum(1 for m in missing if m["status"] == "unreadable"),
        "missing": sum(1 for m in missing if m["status"] == NEVER_RAN),
        "sources": sorted({p["source"] for p in points} | {e["source"] for e in evals}),
        # what the figures are: `simulated, virtual time` (the simulator's core) or `…, wall-clock time`
        "source_words": sorted({source_words(r["source"], r.get("clock")) for r in [*points, *evals]}),
    }


def without_result(counts: Mapping[str, Any]) -> list[str]:
    """The run's jobs without a result in words, as summary.md's count line and `report`'s own line say them (counted
    once, `run_counts`): `2 refused`, `1 failed (1 unreadable)`, `3 missing`; refused and failed only when there are
    some, missing always (`0 missing`: every planned job ran or was refused)."""
    unreadable = f" ({counts['unreadable']} unreadable)" if counts.get("unreadable") else ""
    return ([f"{counts['refused']} refused"] if counts["refused"] else []) + (
        [f"{counts['failed']} failed{unreadable}"] if counts["failed"] else []) + [f"{counts['missing']} missing"]


def headline(counts: Mapping[str, Any]) -> str:
    """The run's one-line count (the page's header, summary.md): `12 points in 3 series · source: simulated`; a run
    whose results are evals says so (`1 eval, 1 did not pass (no throughput point)`) rather than `0 points`."""
    bits = []
    if counts["points"] or not counts["evals"]:
        said = [f"{counts['repeated']} of them the mean of their repeats: {counts['repeat_results']} results"
                ] if counts.get("repeated") else []
        if counts["reused_drawn"]:  # results `--reuse` stood the run's jobs on: points, or repeats of points
            said.append(f"{counts['reused_drawn']} reused from earlier runs")
        n = counts["points"]
        bits.append(f"{n} point{'' if n == 1 else 's'} in {counts['series']} series"
                    + (f" ({', '.join(said)})" if said else ""))
    if counts["evals"]:
        failed = f", {counts['evals_failed']} did not pass" if counts["evals_failed"] else ""
        bits.append(f"{counts['evals']} eval{'s' if counts['evals'] != 1 else ''}{failed}"
                    + ("" if counts["points"] else " (no throughput point: the run's results are evals)"))
    bits.append(f"source: {'; '.join(counts['source_words']) or '–'}")
    if counts["overlaid"]:  # drawn beside the run's own, never counted as its points
        bits.append(f"+{count_of(counts['overlaid'], 'point')} of other runs overlaid in {counts['overlaid_series']} "
                    "series")
    return " · ".join(bits)


def frontier_gaps(points: Sequence[ResultPoint], keys: Mapping[str, str],
                  frontiers_by_y: Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]
                  ) -> dict[str, dict[str, dict[str, str]]]:
    """y metric -> x axis -> series key -> why the series has no frontier on those axes
    (`results.frontier.no_frontier_why`), for each series without one: a series of smoke points says so in its legend
    entry (page and PNGs) and in summary.md, where a frontier had been drawn through them. `keys`: result id ->
    series key."""
    members: dict[str, list[ResultPoint]] = {}
    for p in points:
        members.setdefault(keys[p.result_id], []).append(p)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for y, by_axis in frontiers_by_y.items():
        for axis in X_AXES:
            fronts = by_axis.get(axis.key, {})
            why = {sk: no_frontier_why(mine, axis, y) for sk, mine in members.items() if not fronts.get(sk)}
            if why:
                out.setdefault(y, {})[axis.key] = why
    return out


def coinciding_series(points: Sequence[Mapping[str, Any]], series: Sequence[Mapping[str, Any]],
                      y_metrics: Sequence[str] = Y_METRICS) -> dict[str, dict[str, dict[str, str]]]:
    """y metric -> x axis -> series key -> what its legend entry says of the points it shares, value for value, with
    other series on those axes (`coincides with <series> at all 4 of its points (identical values; drawn under
    it)`); only series that share one. Two arms whose points come out identical (the quickstart's GPU-resident and
    HiCache arms can) drew one series exactly over the other, which then looked absent. The points stay where
    their values put them (an offset would misstate a measurement on both axes); the legend says which series lies
    under which, in the order the page and the PNGs draw them (`series`: later over earlier)."""
    rank = {s["key"]: n for n, s in enumerate(series)}
    label = {s["key"]: s["label"] for s in series}
    out: dict[str, dict[str, dict[str, str]]] = {}
    for y in y_metrics:
        for axis in X_AXES:
            spots: dict[str, list[tuple[float, float]]] = {}
            for p in points:
                xv, yv = p["metrics"].get(axis.key), p["metrics"].get(y)
                if xv is not None and yv is not None and p["series"] in rank:
                    spots.setdefault(p["series"], []).append((xv, yv))
            notes: dict[str, str] = {}
            for sk, mine in spots.items():
                said = []
                for other in sorted(spots, key=rank.__getitem__):
                    theirs = set(spots[other])
                    shared = sum(1 for xy in mine if xy in theirs) if other != sk else 0
                    if shared:
                        n = len(mine)
                        at = "its point" if n == 1 else f"all {n} of its points" if shared == n else \
                            f"{shared} of its {n} points"
                        said.append(f"coincides with {label[other]} at {at} (identical values; drawn "
                                    f"{'under' if rank[sk] < rank[other] else 'over'} it)")
                if said:
                    notes[sk] = "; ".join(said)
            if notes:
                out.setdefault(y, {})[axis.key] = notes
    return out


def overlay_points(run_id: str, drawn: Sequence[Repeats],
                   overlay: Sequence[ResultPoint]) -> tuple[list[Repeats], list[str]]:
    """The points of the runs drawn beside `run_id` (`--with`), each run's repeats combined on its own (as its own
    dashboard draws them), and what the page says of those not drawn. `drawn`: the run's own points. An overlay's
    point is left out only when it is wholly a point already drawn (the same results: a result the overlay run
    stood a job on whole, or a run given twice); a point that shares only some results with one drawn (a repeat the
    overlay stood on one of the run's results) is drawn, the mean of all its repeats. An overlay's point read as
    the run's own (the run itself given to `--with`) and eval-only results are not overlaid."""
    seen: dict[frozenset[str], str] = {}
    ids: dict[str, str] = {}
    for r in drawn:
        seen[frozenset(m.result_id for m in r.members)] = ids[r.point.result_id] = run_id
    kept, notes = [], []
    # each result once per run it is read as part of (a run given twice to --with is one overlay)
    unique = {(p.run_in_view, p.result_id): p for p in overlay if p.run_in_view != run_id and not p.eval_only}
    for r in combine_repeats(unique.values()):
        p, key = r.point, frozenset(m.result_id for m in r.members)
        what = f"run {p.run_in_view}'s point {p.job_in_view} (conc {p.identity.conc})"
        if (owner := seen.get(key)) is not None:
            notes.append(f"{what} is not drawn again: it is the same result{'s' if r.n > 1 else ''} as run "
                         f"{owner}'s point drawn here")
        elif (owner := ids.get(p.result_id)) is not None:
            notes.append(f"{what} is not drawn: it shares result id {p.result_id} with run {owner}'s point drawn "
                         f"here but combines other results (fix: `llmsweep report {p.run_in_view}` draws it)")
        else:
            seen[key] = ids[p.result_id] = p.run_in_view
            kept.append(r)
    return kept, notes


def build_payload(run: RunDir, points: Sequence[ResultPoint], *, overlay: Sequence[ResultPoint] = (),
                  mix_sources: bool = False, details: bool = True, reused: Mapping[str, ResultPoint] | None = None,
                  reused_unread: str = "no results store was read") -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data.

    `overlay` holds points of other runs (e.g. imported published InferenceX rows) drawn as their own series, tagged
    with their run id, so they are compared by eye but never merged into this run's frontiers.
    `reused` (this run's job id -> the stored result `run --reuse` stood it on, `Store.reused_points`): drawn in
    this run's series and frontiers, since the run stands for them, each with the verdict and figures its own run
    stored and marked as reused from that run. A reused job without one is listed, `reused_unread` saying why.
    """
    # read as this run's points: each a repeat of the run's own point where the run measured other repeats of it
    stood = stood_on(run.run_id, {job: p for job, p in (reused or {}).items() if job in run.reused})
    ran = {p.job_id for p in points} | set(stood)
    points = [*points, *(p for p in stood.values() if p.run_id != run.run_id)]
    evals = [eval_payload(p, series_label(p, mix_sources=mix_sources)) for p in points if p.eval is not None]
    points = [p for p in points if not p.eval_only]  # an accuracy score has no place on a throughput plot
    # a point measured N times (`run --repeats`) is one point, the mean of its repeats: its frontiers never pick the
    # luckiest repeat. The run's own first; then each overlay's, combined on its own as its own dashboard combines
    # them (a result it shares with the run, e.g. one it stood a repeat on, stays one of its repeats)
    combined = combine_repeats(points)
    overlay_repeats, overlay_notes = overlay_points(run.run_id, combined, overlay)
    repeats = {r.point.result_id: r for r in (*combined, *overlay_repeats)}
    tagged = [(r.point, "") for r in combined] + [(r.point, r.point.run_in_view) for r in overlay_repeats]
    everything = [p for p, _ in tagged]
    # two images, or two configurations of one point, are two series, labelled by what tells them apart
    names = name_series(everything, mix_sources=mix_sources, tags={p.result_id: tag for p, tag in tagged})
    keys = names.keys
    frontiers_by_y = {y: compute_frontiers(everything, y_metric=y, series_of=keys) for y in Y_METRICS}
    frontiers = frontiers_by_y[Y_METRIC]
    series: dict[str, dict[str, Any]] = {}
    labels = series_labels(everything, keys, names.labels)
    for p, tag in tagged:
        sk = keys[p.result_id]
        if sk not in series:
            i = p.identity
            series[sk] = {"key": sk, "label": labels[sk],
                          "source": p.source,
                          "run": tag or run.run_id, "overlay": bool(tag),
                          "attrs": {"model": i.model, "hardware": i.hardware, "engine": i.engine,
                                    "precision": i.precision, "scenario": i.scenario, "spec": i.spec,
                                    "offload": i.offload}}
    # Table order: series by label (this run's before overlays), then concurrency as a number, then job id.
    order = {sk: n for n, sk in enumerate(sorted(series, key=lambda k: (series[k]["overlay"], series[k]["label"])))}
    everything.sort(key=lambda p: (order[keys[p.result_id]], p.identity.conc, p.job_id))
    for sk, n in order.items():
        series[sk]["color"] = PALETTE[n % len(PALETTE)]
    warned = {o.job_id: o.warnings for o in recorded_outcomes(run).values() if o.warnings}

    def warnings_of(p: ResultPoint) -> Sequence[str]:
        """The warnings of this run's jobs behind `p`: its own, or those `--reuse` stood on stored results (under
        another run's ids), every repeat's once each; an overlay's are its own run's business."""
        if p.run_in_view != run.run_id:
            return ()
        return list(dict.fromkeys(w for m in repeats[p.result_id].members for w in warned.get(m.job_in_view, ())))

    def reused_as(p: ResultPoint) -> str | None:
        """This run's job `--reuse` stood on `p`, where `p` is a stored result of another run (None: a point the run
        measured, in whole or in part, or an overlay's)."""
        return p.reused_by.job_id if p.reused_by is not None and p.reused_by.run_id == run.run_id else None

    points_out = [point_payload(p, keys[p.result_id], frontiers, reused_as=reused_as(p),
                                warnings=warnings_of(p), repeats=repeats[p.result_id]) for p in everything]
    missing = no_result_entries(run, ran, reused_unread)
    series_out = sorted(series.values(), key=lambda s: order[s["key"]])
    counts = run_counts(run.run_id, points_out, series_out, evals, missing)
    return {
        "version": PAYLOAD_VERSION,
        "run": {**{k: scrub(run.meta[k]) for k in RUN_FIELDS if k in run.meta}, "run_id": run.run_id},
        "axes": [asdict(a) for a in X_AXES],
        "y": {"key": Y_METRIC, "label": HOT_BY_NAME[Y_METRIC].label, "unit": HOT_BY_NAME[Y_METRIC].unit},
        "y_axes": [{"key": y, "label": HOT_BY_NAME[y].label, "unit": HOT_BY_NAME[y].unit,
                    "direction": y_direction(y)} for y in Y_METRICS],
        "metrics": [{"key": m.name, "label": m.label, "unit": m.unit, "polarity": m.polarity, "power": m.metric.power,
                     "assumed": m.metric.assumed} for m in HOT_COLUMNS],
        "series": series_out,
        "points": points_out,
        "evals": evals,
        "frontiers": frontiers,
        "frontiers_by_y": frontiers_by_y,
        "tag_key": tag_key(points_out),  # what a point's label counts, on the page and in the PNGs
        "repeats_spread": REPEATS_SPREAD,  # what the bars of a mean of repeats span (`spread`), in both keys' words
        "modelled_mark": MODELLED_MARK,  # after a power figure the simulator modelled, as `results show` marks it
        "no_frontier": frontier_gaps(everything, keys, frontiers_by_y),
        "coincident": coinciding_series(points_out, series_out),
        "missing": missing,
        "power_unrecorded": power_unrecorded(points, run),
        # the run's own points' banners (and Invalid / Smoke sections); the overlays' apart, said as theirs
        "verdicts": verdict_groups(points_out, missing, {p["id"]: p["warnings"] for p in points_out}, evals,
                                   run_id=run.run_id),
        "overlay_verdicts": overlay_verdicts(points_out, run.run_id),
        # the run's own results (and those `--reuse` stood on), not other runs' drawn beside them (`--with`)
        "empty": empty_message(counts["points"] + counts["evals"], missing),
        "counts": counts,
        "headline": headline(counts),
        "sources": sorted({*counts["sources"], *(p["source"] for p in points_out)}),  # overlays' too
        "mix_sources": mix_sources,
        "overlays": sorted({tag for _, tag in tagged if tag}),
        "overlay_notes": overlay_notes,
        "details": ({p.result_id: detail_payload(p, max_requests=request_budget(len(everything))) for p in everything}
                    if details else {}),
    }
