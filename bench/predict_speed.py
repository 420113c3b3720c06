"""How fast the virtual-time predictor is: the fast path against the reference path, in the same run.

The fast path (what `predict` and `run` in virtual time use) advances event to event (coalesced decode steps) and
encodes agentic prompts from their token shapes; the reference path steps token by token and encodes prompts from
their synthesised text. Both give the same records (tests/unit/sim/test_coalesce.py, test_fast_prompts.py).

Run: `.venv/bin/python bench/predict_speed.py [--workload agentx|toy] [--duration 3600] [--concurrency 16]
[--compare-window 300] [--scrape-interval 1] [--block-size 64] [--profile]`. Prints, for one AgentX-like point:

- both paths on the same `--compare-window` virtual seconds: CPU seconds of each, the ratio reference / fast, the
  largest relative difference of the headline metrics (throughput, TTFT/TPOT percentiles, cache hit rate) and
  whether the records are identical;
- both paths on the full `--duration` (default one hour; `--no-reference` skips the reference): CPU and wall time
  and the ratio (the issue's target: <= 0.5 s CPU for the fast path);
- the fast path once more with a timer per part: request and step counts, throughput and prefix-cache hit rate, and
  where the CPU went (engine core, prefix lookup, prompt encoding, server-metric scrapes, the rest).

`--block-size N` serves the point at another KV and prefix-hash block than the simulator's 64 tokens (what serving an
engine's own page would cost: vLLM's 16, SGLang's 1; docs/simulator.md, "The KV block and the engines' own pages").

`--matrix RECIPE [--config-keys K ...] [--limit N] [--processes N]` instead times `llmsweep predict --json` over a
recipe's keys, called in this process (as the CLI runs them: a scrape per virtual second; its points on `--processes`
worker processes, default predict's own: the usable CPUs), per key and in total, and extrapolates the CPU and the wall
time per job-hour of measured (profiling-window) virtual time to `--job-hours` (default 1800, both InferenceX master
files). `--step` runs either mode on the reference path only (in this process: `--matrix --step` predicts with
`--processes 1`).

`--against REV [--repeats N]` judges a change to the fast path on a shared machine: this tree's `src` and git
revision REV's (`git archive`) predict the same point (the options above) one process at a time, N rounds (default
5) with the order alternating, and the bench prints the minimum and median CPU seconds of each tree, their ratio, and
whether the two trees' records and scrapes are identical (e.g. `--against HEAD~1`). Two runs of the same code one
after the other can differ by 30 % on a loaded 2-core container; interleaved rounds see the same slow spells.

CPU time is `time.process_time()` of this process (one core), plus, in `--matrix`, the CPU of the worker processes it
waited for (`RUSAGE_CHILDREN`); wall time is shown too because the machine may be shared (compare the two to see the
load, or the parallelism).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import hashlib
import io
import json
import os
import pstats
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from llmsweep.metrics import summarise
from llmsweep.sim.config import SpecDecodeConfig
from llmsweep.sim.core import EngineCore
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.predict import Predictor
from llmsweep.sim.synthetic import AgentWorkload
from llmsweep.workload.base import Workload


class _Clock:
    """CPU seconds spent inside wrapped functions, exclusive: a wrapped call inside another counts for its own label
    only (a label wrapping itself counts once)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._stack: list[str] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._stack
            if stack and stack[-1] == label:
                return fn(*args, **kwargs)
            stack.append(label)
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = time.process_time() - t
                stack.pop()
                self.spent[label] = self.spent.get(label, 0.0) + dt
                if stack:
                    self.spent[stack[-1]] = self.spent.get(stack[-1], 0.0) - dt

        setattr(owner, name, timed)


def _headline(records: list[dict[str, Any]], scrapes: list[dict[str, Any]]) -> dict[str, float]:
    s = summarise(records, gpus=1, server_metrics=scrapes, source="predicted")
    lat = s.latency
    return {"output_tps": s.throughput.output_tps, "ttft_p50": lat.ttft.p50, "ttft_p90": lat.ttft.p90,
            "tpot_p50": lat.tpot.p50, "tpot_p90": lat.tpot.p90, "hit_rate": s.cache.observed_hit_rate or 0.0}


def _point(args: argparse.Namespace, config: EngineConfig, make: Callable[[], Workload], duration: float, *,
           fast: bool, clock: _Clock | None = None, profile: bool = False
           ) -> tuple[Predictor, list[dict[str, Any]], float, float]:
    """One prediction: `fast` = event to event with shaped prompts (the default path), else the reference path
    (step by step, prompts encoded from their text)."""
    core: EngineCore = build_core(config, coalesce=fast)
    predictor = Predictor(core, scrape_interval=args.scrape_interval or None, shapes=fast)
    if clock is not None:
        clock.wrap(core.pool, "lookup_array", "prefix lookup")
        clock.wrap(core, "begin_step", "engine core")
        clock.wrap(core, "end_step", "engine core")
        clock.wrap(predictor.encoder, "encode", "prompt encoding")
        clock.wrap(predictor.encoder, "shaped", "prompt encoding")
        clock.wrap(predictor, "scrape", "metric scrapes")
    workload = make()
    profiler = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    records = predictor.run(workload, concurrency=args.concurrency, duration=duration)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    return predictor, records, time.perf_counter() - t0, time.process_time() - c0


def _setup(args: argparse.Namespace, *, say: Callable[[str], None] = print
           ) -> tuple[EngineConfig, Callable[[], Workload], SpecDecodeConfig | None]:
    """The point's engine and a maker of its workload (the AgentX corpus built first: not counted)."""
    spec = None if args.no_spec else SpecDecodeConfig(method="mtp", k=3, acceptance_length=3.39)
    config = EngineConfig(model=args.model, hardware=args.hardware, tp=args.tp, ep=args.tp, precision=args.precision,
                          spec=spec, dram_gb=args.dram_gb, block_size=args.block_size)
    make: Callable[[], Workload]
    if args.workload == "agentx":
        from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
        from llmsweep.workload.traces.synth import SynthProfile

        t_build = time.perf_counter()
        agentic = AgenticConfig(synthetic=SynthProfile(traces=64, max_isl=args.max_isl),
                                concurrency=args.concurrency, run_id="bench")
        AgenticWorkload(agentic)  # builds and caches the corpus
        # the collection the build has made due (the corpus's ~240k objects promoted to the oldest generation) would
        # otherwise run when the first point re-enables collection at its end: ~0.2 s of the build charged to it
        gc.collect()
        say(f"corpus built in {time.perf_counter() - t_build:.2f} s (not counted below)")

        def make() -> Workload:
            return AgenticWorkload(agentic)
    else:
        def make() -> Workload:
            return AgentWorkload(system_tokens=20000, turns=60, tool_tokens=1500, osl=600, think_s=3.0)
    return config, make, spec


def emit(args: argparse.Namespace) -> None:
    """`--emit`: the fast path once over `--duration`, as one JSON line (what `--against` reads from each tree): CPU
    seconds of the prediction alone, and a digest of its records and scrapes."""
    config, make, _ = _setup(args, say=lambda _: None)
    predictor, records, _, cpu = _point(args, config, make, args.duration, fast=True)
    digest = hashlib.md5(json.dumps([records, predictor.scrapes], sort_keys=True).encode()).hexdigest()
    print(json.dumps({"cpu": cpu, "digest": digest, "requests": len(records),
                      "steps": predictor.core.counters.steps}))


def against(args: argparse.Namespace, forwarded: list[str]) -> None:
    """`--against REV`: this tree's `src` and REV's (`git archive`) predict the same point in turn, one process at a
    time, `--repeats` rounds (which goes first alternates), so both see the same slow spells of a shared machine:
    the minimum and median CPU seconds of each, their ratios, and whether the records and scrapes are identical."""
    import statistics
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="predict-speed-") as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", args.against, "src"],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            raise SystemExit(f"--against {args.against}: git archive failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        trees = {"this tree": root / "src", args.against: Path(tmp) / "src"}
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
        command = [sys.executable, str(Path(__file__).resolve()), *forwarded, "--emit"]
        for round_ in range(args.repeats):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for label in order:
                env = {**os.environ, "PYTHONPATH": str(trees[label])}
                done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{label}: the point failed:\n{done.stderr[-2000:]}")
                runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1}/{args.repeats}: " + ", ".join(
                f"{label} {runs[label][-1]['cpu']:.2f} s" for label in trees), flush=True)
    print(f"{args.duration:.0f} virtual s, fast path, CPU seconds over {args.repeats} interleaved rounds:")
    mins = {label: min(r["cpu"] for r in rs) for label, rs in runs.items()}
    meds = {label: statistics.median(r["cpu"] for r in rs) for label, rs in runs.items()}
    for label in trees:
        print(f"  {label:>12}: min {mins[label]:.3f}  median {meds[label]:.3f}  "
              f"({runs[label][0]['requests']} requests, {runs[label][0]['steps']} steps)")
    digests = {r["digest"] for rs in runs.values() for r in rs}
    print(f"  ratio {args.against} / this tree: {mins[args.against] / max(mins['this tree'], 1e-9):.3f}x at the "
          f"minimum, {meds[args.against] / max(meds['this tree'], 1e-9):.3f}x at the median; records and scrapes "
          f"identical: {'yes' if len(digests) == 1 else 'no'}")


def point(args: argparse.Namespace) -> None:
    config, make, spec = _setup(args)
    print(f"model={args.model} hw={args.hardware} tp={args.tp} conc={args.concurrency} "
          f"spec={'off' if spec is None else 'mtp k=3 al=3.39'} scrape every {args.scrape_interval or 'never'} s")
    if args.compare_window > 0 and not args.step:
        ref_pred, ref_rec, ref_wall, ref_cpu = _point(args, config, make, args.compare_window, fast=False)
        fast_pred, fast_rec, fast_wall, fast_cpu = _point(args, config, make, args.compare_window, fast=True)
        a, b = _headline(ref_rec, ref_pred.scrapes), _headline(fast_rec, fast_pred.scrapes)
        worst = max(abs(b[k] - v) / abs(v) if v else abs(b[k]) for k, v in a.items())
        print(f"{args.compare_window:.0f} virtual s, both paths: reference {ref_cpu:.2f} s CPU "
              f"({ref_wall:.2f} s wall), "
              f"fast {fast_cpu:.2f} s CPU ({fast_wall:.2f} s wall): ratio {ref_cpu / max(fast_cpu, 1e-9):.1f}x; "
              f"headline metrics differ by at most {worst:.2e} (relative); records identical: {ref_rec == fast_rec}; "
              f"{ref_pred.core.counters.steps} steps in both")
    path = "reference" if args.step else "fast"
    if not args.step and not args.no_reference:
        _, _, ref_wall, ref_cpu = _point(args, config, make, args.duration, fast=False)
        _, _, wall, cpu = _point(args, config, make, args.duration, fast=True)
        print(f"{args.duration:.0f} s window: reference path {ref_cpu:.2f} s CPU ({ref_wall:.2f} s wall), fast path "
              f"{cpu:.2f} s CPU ({wall:.2f} s wall): ratio {ref_cpu / max(cpu, 1e-9):.1f}x (target: <= 0.5 s CPU)")
    clock = _Clock()
    predictor, records, wall, cpu = _point(args, config, make, args.duration, fast=not args.step, clock=clock,
                                           profile=args.profile)
    core = predictor.core
    c = core.counters
    ok = [r for r in records if r["status"] == 200]
    out = sum(r["completion_tokens"] for r in ok)
    isl = sum(r["prompt_tokens"] for r in ok) / max(len(ok), 1)
    hit = (c.device_hit_tokens + c.host_hit_tokens) / max(c.prefix_query_tokens, 1)
    vs = predictor.stats.virtual_seconds
    print(f"{path} path, {args.duration:.0f} s window, timed by part: {wall:.2f} s wall, {cpu:.2f} s CPU (one core; "
          f"the timers add some): {len(records)} requests, {c.steps} steps, {vs:.0f} virtual s")
    spent = dict(clock.spent)
    spent["rest (lane programs, records, predictor loop)"] = cpu - sum(spent.values())
    print("  CPU by part: " + ", ".join(f"{k} {v:.2f} s" for k, v in spent.items()))
    print(f"  mean ISL {isl:,.0f} tokens, output {out / max(vs, 1e-9):,.0f} tok/s, prefix hit {hit:.3f}, "
          f"preemptions {c.preemptions}, KV pool {core.capacity_tokens:,} tokens")


@contextlib.contextmanager
def _reference_path(enabled: bool) -> Iterator[None]:
    """Make every engine core and predictor built meanwhile (however the CLI builds them) take the reference path:
    step by step, prompts encoded from their text."""
    if not enabled:
        yield
        return
    core_init, predictor_init = EngineCore.__init__, Predictor.__init__

    def step_init(self: EngineCore, config: Any, timer: Any, *, coalesce: bool = True) -> None:
        core_init(self, config, timer, coalesce=False)

    def text_init(self: Predictor, *args: Any, **kwargs: Any) -> None:
        predictor_init(self, *args, **{**kwargs, "shapes": False})

    EngineCore.__init__ = step_init  # type: ignore[method-assign]
    Predictor.__init__ = text_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        EngineCore.__init__ = core_init  # type: ignore[method-assign]
        Predictor.__init__ = predictor_init  # type: ignore[method-assign]


def _cpu() -> float:
    """CPU seconds of this process and of the child processes it waited for (predict's workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def matrix(args: argparse.Namespace) -> None:
    import fnmatch

    import yaml

    from llmsweep.cli.main import main as cli_main

    with open(args.matrix) as f:
        keys = [k for k in yaml.safe_load(f) if not args.config_keys
                or any(fnmatch.fnmatchcase(k, pat) for pat in args.config_keys)]
    if args.limit:
        keys = keys[:args.limit]
    processes = args.processes
    if args.step:  # the reference path is patched into this process only
        if processes not in (0, 1):
            raise SystemExit("--matrix --step predicts in this process: drop --processes or pass --processes 1")
        processes = 1
    total_cpu = total_wall = virtual_total = 0.0
    points = 0
    failed: list[str] = []
    with _reference_path(args.step):
        for key in keys:
            argv = ["predict", args.matrix, "--config-keys", key, "--json"]
            if args.duration_override:
                argv += ["--duration", str(args.duration_override)]
            if args.traces:
                argv += ["--traces", args.traces]
            if args.max_requests:
                argv += ["--max-requests", str(args.max_requests)]
            if processes:
                argv += ["--processes", str(processes)]
            t0, c0 = time.perf_counter(), _cpu()
            buf = io.StringIO()
            code: int | str | None = 0
            try:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                    cli_main(argv)
            except SystemExit as exc:
                code = exc.code
            except Exception as exc:  # a bench: report and go on
                failed.append(f"{key}: {type(exc).__name__}: {exc}")
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            try:
                results = json.loads(buf.getvalue() or "[]")
            except json.JSONDecodeError:
                results = []
            # a point predict refused (the simulator cannot run it) has its reason instead of a summary
            summaries = [r["summary"] for r in results if isinstance(r.get("summary"), dict)]
            refused = len(results) - len(summaries)
            if code not in (0, None) and not (code == 1 and refused):  # exit 1 with refusals: they are listed
                failed.append(f"{key}: exit {code}")
            virtual = sum(s["throughput"]["duration_s"] or 0.0 for s in summaries)
            total_cpu, total_wall, virtual_total = total_cpu + cpu, total_wall + wall, virtual_total + virtual
            points += len(summaries)
            print(f"{key}: {len(summaries)} points" + (f" ({refused} refused)" if refused else "")
                  + f", {virtual:,.0f} virtual s measured, {cpu:.2f} s CPU, {wall:.2f} s wall", flush=True)
    hours = virtual_total / 3600
    rate = total_cpu / max(hours, 1e-9)
    wall_rate = total_wall / max(hours, 1e-9)
    print(f"total: {len(keys)} keys, {points} points, {hours:.2f} job-hours of measured virtual time, "
          f"{total_cpu:.1f} s CPU, {total_wall:.1f} s wall (--processes {processes or 'default'}); "
          f"{total_cpu / max(points, 1):.2f} s CPU per point, {rate:.1f} s CPU per job-hour -> {args.job_hours:.0f} "
          f"job-hours: {rate * args.job_hours / 60:.1f} CPU-minutes, {rate * args.job_hours / 120:.1f} min on 2 "
          f"cores; {wall_rate * args.job_hours / 60:.1f} min wall as measured here")
    for failure in failed:
        print(f"  failed: {failure}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--model", default="qwen3.5-397b-a17b")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--no-spec", action="store_true")
    ap.add_argument("--dram-gb", type=float, default=0.0)
    ap.add_argument("--block-size", type=int, default=int(EngineConfig.model_fields["block_size"].default),
                    help="the simulator's KV and prefix-hash block in tokens (its own 64; vLLM's default 16, "
                         "SGLang's page 1)")
    ap.add_argument("--workload", choices=["agentx", "toy"], default="agentx",
                    help="agentx: the real AgenticWorkload on the synthetic AgentX corpus; toy: sim.synthetic")
    ap.add_argument("--max-isl", type=int, default=1_000_000, help="agentx: corpus scale (largest prompt)")
    ap.add_argument("--scrape-interval", type=float, default=0.0,
                    help="virtual seconds between server-metric scrapes (predict's CLI: 1); 0 = none")
    ap.add_argument("--compare-window", type=float, default=300.0,
                    help="virtual seconds both paths run for the ratio (0 = skip)")
    ap.add_argument("--step", action="store_true",
                    help="time the reference path only (step by step, prompts from text)")
    ap.add_argument("--no-reference", action="store_true",
                    help="point: skip the reference path on the full window (its ratio)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--matrix", metavar="RECIPE", help="time `llmsweep predict` over this recipe's jobs instead")
    ap.add_argument("--config-keys", action="append", default=[], help="--matrix: only these keys (globs)")
    ap.add_argument("--limit", type=int, default=0, help="--matrix: at most this many recipe keys")
    ap.add_argument("--duration-override", type=float, default=0.0, help="--matrix: predict --duration")
    ap.add_argument("--max-requests", type=int, default=0, help="--matrix: predict --max-requests")
    ap.add_argument("--processes", type=int, default=0,
                    help="--matrix: predict --processes (0 = predict's default: the usable CPUs)")
    ap.add_argument("--traces", default="synthetic", help="--matrix: predict --traces ('' = the recipe's)")
    ap.add_argument("--job-hours", type=float, default=1800.0, help="--matrix: extrapolate to this many job-hours")
    ap.add_argument("--against", metavar="REV",
                    help="point: time the fast path of this tree and of git revision REV in turn (see `against`)")
    ap.add_argument("--repeats", type=int, default=5, help="--against: interleaved rounds")
    ap.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.matrix:
        matrix(args)
    elif args.emit:
        emit(args)
    elif args.against:
        against(args, _without(sys.argv[1:], {"--against": 1, "--repeats": 1}))
    else:
        point(args)


def _without(argv: list[str], options: dict[str, int]) -> list[str]:
    """`argv` less the given options (each with its number of values; `--opt=value` too)."""
    out: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = 0 if "=" in arg else options[name]
            continue
        out.append(arg)
    return out


if __name__ == "__main__":
    main()
