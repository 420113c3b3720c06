"""Write plausible run directories without an engine: the report and results tests read them as real runs.

Each point gets raw per-request records from a small seeded latency model (per-user speed falls with concurrency,
TTFT grows with it), Prometheus-style server scrapes, and a `summary.json` computed by the real
`llmsweep.metrics.summarise` from those records — so everything downstream reads exactly what a real run writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.metrics.model import Summary, Verdict
from llmsweep.results.identity import gpus_of, identity_from_job
from llmsweep.results.rundir import RunDir, load_run


@dataclass(frozen=True, slots=True)
class SyntheticPoint:
    """One job to fabricate. `speed` scales per-user decode speed (an engine/hardware efficiency knob)."""

    job: dict[str, Any]
    speed: float = 1.0
    error_rate: float = 0.0
    requests: int = 60
    invalid_reason: str | None = None
    """Force an invalid verdict with this reason (e.g. a read-back mismatch the gates cannot see)."""
    provenance: dict[str, Any] | None = None
    """More of the summary's provenance, as a run records it (`launch`, `options`, `clock`: its configuration)."""


def synthetic_job(
    *,
    model: str = "Qwen/Qwen3.5-397B-A17B-FP8",
    hardware: str = "mi300x",
    framework: str = "sglang",
    precision: str = "fp8",
    tp: int = 8,
    ep: int = 1,
    conc: int = 4,
    spec: str = "none",
    offload: str = "none",
    scenario: str = "agentic-coding",
    isl: int | None = None,
    osl: int | None = None,
    image: str = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730",
    job_id: str | None = None,
) -> dict[str, Any]:
    """A job.json document in the plan room's shape (InferenceX keys plus llmsweep fields)."""
    prefix = model.rsplit("/", 1)[-1].split("-")[0].lower()
    exp = f"{prefix}_tp{tp}_conc{conc}_kv{offload}_spec-{spec}_{framework}_{hardware}"
    job: dict[str, Any] = {
        "id": job_id or exp, "image": image, "model": model, "model-prefix": prefix, "precision": precision,
        "framework": framework, "runner": f"cluster:{hardware}-synthetic", "tp": tp, "pp": 1, "dcp-size": 1,
        "pcp-size": 1, "ep": ep, "dp-attn": False, "spec-decoding": spec, "conc": conc, "kv-offloading": offload,
        "exp-name": exp, "recipe-key": f"{prefix}-{framework}-{hardware}", "multinode": False,
        "recipe-fingerprint": hashlib.sha256(
            f"{prefix}-{framework}-{hardware}-{tp}-{spec}-{image}".encode()
        ).hexdigest(),
        "runner-label": f"cluster:{hardware}-synthetic", "sku": hardware, "engine": framework, "gpus": tp,
        "scenario": scenario,
    }
    if scenario == "fixed-seq-len":
        job.update({"isl": isl or 1024, "osl": osl or 1024})
    return job


def _records(point: SyntheticPoint, rng: np.random.Generator, t0: float) -> list[dict[str, Any]]:
    job = point.job
    conc = int(job.get("conc", 1))
    tp = int(job.get("tp", 1))
    fixed = job.get("scenario") == "fixed-seq-len"
    base_tps = 90.0 * point.speed * (tp / 8) ** 0.3 * (1.5 if job.get("spec-decoding", "none") != "none" else 1.0)
    itl_mean = (1 + conc / 12) / base_tps
    per_lane = max(2, math.ceil(point.requests / conc))
    out: list[dict[str, Any]] = []
    n = 0
    for lane in range(conc):
        t = t0 + lane * 0.01
        for turn in range(per_lane + 1):
            phase = "warmup" if turn == 0 else "profiling"
            isl = int(job.get("isl") or rng.lognormal(math.log(12000), 0.5)) if not fixed else int(job["isl"])
            osl = int(job["osl"]) if fixed else max(2, int(rng.lognormal(math.log(300), 0.6)))
            sent = t + float(rng.uniform(0, 0.002))
            rec: dict[str, Any] = {
                "id": f"r{n:06d}", "lane": lane, "turn": turn, "phase": phase, "scheduled_at": t, "sent_at": sent,
                "prompt_tokens": isl, "cached_tokens": int(isl * 0.6) if not fixed else 0, "chunk_times": [],
                "chunk_tokens": [], "worker": 0,
            }
            n += 1
            if phase == "profiling" and rng.random() < point.error_rate:
                rec.update({"status": 500, "error_class": "http", "error": "HTTP 500", "end_at": sent + 0.05,
                            "completion_tokens": None, "first_token_at": None})
                out.append(rec)
                t = sent + 0.05
                continue
            ttft = (0.08 + isl / 60000 * (1 + conc / 16)) * float(rng.lognormal(0, 0.25))
            itl = itl_mean * float(rng.lognormal(0, 0.15))
            first = sent + ttft
            step = 16
            times = [first + itl * min(k, osl - 1) for k in range(0, osl, step)]
            if (osl - 1) % step:
                times.append(first + itl * (osl - 1))
            tokens = [min(step, osl - k) for k in range(0, osl, step)]
            tokens += [0] * (len(times) - len(tokens))
            end = times[-1] + 0.001
            rec.update({"status": 200, "error_class": None, "first_token_at": first, "end_at": end,
                        "chunk_times": times, "chunk_tokens": tokens, "completion_tokens": osl, "max_tokens": osl})
            out.append(rec)
            t = end + (0.0 if fixed else float(rng.exponential(0.3)))
    return out


POOL_TOKENS = 1_048_576
"""The GPU KV pool the fabricated engine reports (vLLM's `cache_config_info`, SGLang's `max_total_num_tokens`)."""


def _scrapes(point: SyntheticPoint, records: list[dict[str, Any]], rng: np.random.Generator) -> list[dict[str, Any]]:
    """Server scrapes every 0.5 s: KV usage follows in-flight requests, prefix-cache counters accumulate."""
    vllm = point.job.get("framework") == "vllm"
    starts = np.array([r["sent_at"] for r in records])
    ends = np.array([r["end_at"] for r in records])
    prompts = np.array([r["prompt_tokens"] for r in records], dtype=float)
    cached = np.array([r.get("cached_tokens") or 0 for r in records], dtype=float)
    out = []
    for t in np.arange(starts.min() - 0.5, ends.max() + 1.0, 0.5):
        inflight = int(((starts <= t) & (ends > t)).sum())
        done = ends <= t
        usage = min(0.98, inflight * 0.07 + float(rng.uniform(0, 0.02)))
        if vllm:
            samples = [["vllm:kv_cache_usage_perc", {}, usage], ["vllm:num_requests_running", {}, inflight],
                       ["vllm:prefix_cache_hits_total", {}, float(cached[done].sum())],
                       ["vllm:prefix_cache_queries_total", {}, float(prompts[done].sum())],
                       ["vllm:cache_config_info", {"engine": "0", "block_size": "16",
                                                   "num_gpu_blocks": str(POOL_TOKENS // 16)}, 1.0]]
        else:
            samples = [["sglang:token_usage", {}, usage], ["sglang:num_running_reqs", {}, inflight],
                       ["sglang:cached_tokens_total", {"cache_source": "device"}, float(cached[done].sum())],
                       ["sglang:prompt_tokens_total", {}, float(prompts[done].sum())],
                       ["sglang:max_total_num_tokens", {"tp_rank": "0"}, float(POOL_TOKENS)]]
        out.append({"t": float(t), "samples": samples})
    return out


def _write_jsonl(path: Path, docs: Sequence[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps(doc, separators=(",", ":")) + "\n")


def write_synthetic_run(root: Path, points: Sequence[SyntheticPoint], *, run_id: str = "synthetic-run",
                        seed: int = 0, source: str = "simulated", t0: float = 1_790_000_000.0,
                        expected_extra: Sequence[str] = (), closed: bool = True) -> RunDir:
    """Write `root/run.json` and `root/jobs/<id>/…` for every point; `expected_extra` names jobs that never ran.
    `closed`: each job's `outcome.json` closes it with its summary's verdict, as `run` does once the job's checks are
    made; False leaves the summaries unjudged, as a run killed between the client's summary and the job's verdict."""
    from llmsweep.metrics import GateConfig, summarise  # the metrics room's summariser: same numbers as a real run

    root.mkdir(parents=True, exist_ok=True)
    ids = []
    for k, point in enumerate(points):
        rng = np.random.default_rng([seed, k])
        job_id = str(point.job["id"])
        ids.append(job_id)
        d = root / "jobs" / job_id
        d.mkdir(parents=True, exist_ok=True)
        records = _records(point, rng, t0)
        _write_jsonl(d / "records.jsonl", records)
        _write_jsonl(d / "server_metrics.jsonl", _scrapes(point, records, rng))
        (d / "job.json").write_text(json.dumps(point.job, indent=1), encoding="utf-8")
        (d / "server_command.txt").write_text(
            f"python -m {point.job['framework']}.launch_server --model-path {point.job['model']} "
            f"--tp {point.job['tp']} --port 30000\n", encoding="utf-8")
        (d / "server.log").write_text("server ready\n", encoding="utf-8")
        gpus = gpus_of(point.job, identity_from_job(point.job))
        summary = summarise(d / "records.jsonl", gpus=gpus, server_metrics=d / "server_metrics.jsonl", source=source,
                            provenance={"seed": seed, "image": point.job["image"], "engine_version": "0.0-synthetic",
                                        "recipe_fingerprint": point.job.get("recipe-fingerprint"),
                                        "hardware": point.job.get("sku"), **(point.provenance or {})},
                            gates=GateConfig(min_submission_s=0))
        if point.invalid_reason:
            summary.validity.verdict = "invalid"
            summary.validity.reasons.append(point.invalid_reason)
        (d / "summary.json").write_text(json.dumps(summary.dump(), indent=1), encoding="utf-8")
        if closed:
            (d / "outcome.json").write_text(json.dumps(
                {"job_id": job_id, "exp_name": point.job.get("exp-name", job_id), "status": summary.validity.verdict,
                 "reasons": list(summary.validity.reasons)}, indent=1), encoding="utf-8")
    meta = {"run_id": run_id, "started": "2026-11-29T12:00:00Z", "recipe_files": ["recipes/synthetic.yaml"],
            "llmsweep_version": "synthetic", "executor": "synthetic", "expected_job_ids": [*ids, *expected_extra]}
    (root / "run.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return load_run(root)


def write_two_configurations_run(root: Path, run_id: str = "mixk") -> RunDir:
    """A run that measured one point (fixed-length, conc 8) under two recipe keys, as `mixk` does: `dsr1-mtp3` at
    concs 1 and 8, `dsr1-mtp1` at concs 8 and 16, each job's summary recording its launch and load (its
    configuration, `ResultPoint.configuration`)."""
    points = []
    for key, concs in (("dsr1-mtp3", (1, 8)), ("dsr1-mtp1", (8, 16))):
        for c in concs:
            job = synthetic_job(conc=c, scenario="fixed-seq-len", job_id=f"{key}-conc{c}")
            job.update({"recipe-key": key, "recipe-fingerprint": hashlib.sha256(key.encode()).hexdigest()})
            points.append(SyntheticPoint(job, speed=1.0 if key.endswith("3") else 0.7, requests=40, provenance={
                "launch": {"fingerprint": f"launch-{key}-{c}"}, "clock": "wall",
                "options": {"concurrency": c, "duration_s": 600.0}}))
    return write_synthetic_run(root, points, run_id=run_id)


def write_repeated_run(root: Path, concs: Sequence[int] = (1, 4), repeats: int = 2,
                       run_id: str = "repeated") -> RunDir:
    """`run --repeats N` of one series at `concs`: job `J-conc<c>` and its repeats `J-conc<c>-repeat<k>`, each
    recording one launch and load (one configuration, `ResultPoint.configuration`: repeats of one point)."""
    options: dict[str, Any] = {"duration_s": 200.0}
    prov = {"launch": {"fingerprint": "launch-a"}, "clock": "virtual", "options": options}
    return write_synthetic_run(root, [
        SyntheticPoint(synthetic_job(conc=c, job_id=f"J-conc{c}{'' if k == 1 else f'-repeat{k}'}"), requests=20,
                       provenance={**prov, "options": {**options, "concurrency": c}})
        for c in concs for k in range(1, repeats + 1)], run_id=run_id)


def write_coinciding_run(root: Path) -> RunDir:
    """Two arms of one series identity, GPU-resident (`none-conc<c>` at 1, 4, 16) and DRAM offload (`dram-conc<c>` at
    4, 16), whose conc 4 and 16 points came out identical, as the quickstart's GPU-resident and HiCache arms can:
    the offload arm's summaries are the GPU-resident arm's."""
    points = [SyntheticPoint(synthetic_job(conc=c, offload=o, job_id=f"{o}-conc{c}"), requests=20)
              for o, concs in (("none", (1, 4, 16)), ("dram", (4, 16))) for c in concs]
    run = write_synthetic_run(root, points)
    for c in (4, 16):
        shutil.copy(run.path / "jobs" / f"none-conc{c}" / "summary.json", run.path / "jobs" / f"dram-conc{c}")
    return load_run(run.path)


SMOKE_WHY = "smoke run: profile window 120 s is shorter than 900 s"


def set_verdict(run: RunDir, job_id: str, verdict: Verdict, reasons: Sequence[str]) -> None:
    """Rewrite one job's summary (and its outcome) with another verdict, as the gates would have written it."""
    folder = run.path / "jobs" / job_id
    summary = Summary.load(folder / "summary.json")
    summary.validity.verdict = verdict
    summary.validity.reasons = list(reasons)
    (folder / "summary.json").write_text(json.dumps(summary.dump()), encoding="utf-8")
    outcome = folder / "outcome.json"
    if outcome.is_file():
        doc = json.loads(outcome.read_text(encoding="utf-8"))
        doc.update(status=verdict, reasons=list(reasons))
        outcome.write_text(json.dumps(doc), encoding="utf-8")


def write_smoke_series_run(root: Path) -> RunDir:
    """Two series at conc 1, 4 and 16: sglang's points all smoke (`SMOKE_WHY`), vllm's valid but its conc 16."""
    run = write_synthetic_run(root, [SyntheticPoint(synthetic_job(conc=c, framework=fw, job_id=f"{fw}-conc{c}"),
                                                    requests=20) for fw in ("sglang", "vllm") for c in (1, 4, 16)])
    for job in ("sglang-conc1", "sglang-conc4", "sglang-conc16", "vllm-conc16"):
        set_verdict(run, job, "smoke", [SMOKE_WHY])
    return load_run(run.path)


def write_reusing_run(root: Path, store: Path, *, reused_concs: Sequence[int] = (1, 4, 16),
                      measured_concs: Sequence[int] = (8,)) -> RunDir:
    """Two runs of one sweep, as `run --reuse` leaves them: `earlier-run` measured `reused_concs` and is stored in
    `store`; `reusing-run` (returned) measured `measured_concs` and records in its run.json (`reused`) that it stood
    its other jobs on the earlier run's stored results."""
    from llmsweep.results.store import Store

    earlier = write_synthetic_run(root / "earlier", [SyntheticPoint(synthetic_job(conc=c), requests=40)
                                                     for c in reused_concs], run_id="earlier-run", seed=1)
    with Store(store) as opened:
        opened.ingest_run(earlier.path)
        stored = opened.results("earlier-run")
    run = write_synthetic_run(root / "reusing", [SyntheticPoint(synthetic_job(conc=c), requests=40)
                                                 for c in measured_concs],
                              run_id="reusing-run", expected_extra=[p.job_id for p in stored])
    meta = json.loads((run.path / "run.json").read_text(encoding="utf-8"))
    meta["reused"] = {p.job_id: {"run_id": p.run_id, "job_id": p.job_id, "result_id": p.result_id,
                                 "verdict": p.verdict, "reuse_key": f"key-{p.job_id}"} for p in stored}
    (run.path / "run.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return load_run(run.path)


def run_of_failures(root: Path, run_id: str, reasons: dict[str, str], status: str = "failed") -> RunDir:
    """A run whose jobs (id -> reason) each left a folder with the executor's outcome and no summary."""
    for jid, why in reasons.items():
        (root / "jobs" / jid).mkdir(parents=True)
        (root / "jobs" / jid / "job.json").write_text(json.dumps(synthetic_job(conc=1, job_id=jid)))
        (root / "jobs" / jid / "outcome.json").write_text(json.dumps(
            {"job_id": jid, "exp_name": "x", "status": status, "reasons": [why]}))
    (root / "run.json").write_text(json.dumps({"run_id": run_id, "expected_job_ids": list(reasons)}))
    return load_run(root)
