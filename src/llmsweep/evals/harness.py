"""lm-eval, the harness: where it is, the exact command, one run, and what its results file says.

lm-eval lives in an environment of its own (its pins are not llmsweep's): `LLMSWEEP_LM_EVAL` (or `run --lm-eval`)
names a Python interpreter that has `lm-eval[api]==0.4.13` (`.ci/run` makes `.venv-lmeval`). The arguments are
InferenceX's: `lm_eval --model local-chat-completions --apply_chat_template` against the server's
`/v1/chat/completions`, greedy, `max_tokens` from the context, `num_concurrent` per run, `--log_samples`.

lm-eval's own command line is started through :data:`BOOTSTRAP` rather than `-m lm_eval`: it runs
`evals/lm_eval_runtime.py` in lm-eval's interpreter, which calls the same entry point (`lm_eval.__main__.
cli_evaluate`) with the same arguments after two changes to lm-eval, InferenceX's runtime patch among them: the task
manager leaves lm-eval's ~14,000 built-in task files unindexed (the task is always one of llmsweep's, by path), and
an answer a reasoning parser left in `reasoning_content` (`content` empty) is scored, as InferenceX scores it. The
runtime reports how many answers that was (:attr:`EvalRun.reasoning_answers`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.evals.tasks import DEFAULT_TASK, TaskFile, hub_dataset
from llmsweep.metrics.model import EvalMetric, EvalRun
from llmsweep.option_spellings import flag as _flag

ENV_VAR = "LLMSWEEP_LM_EVAL"
PINNED_VERSION = "0.4.13"
TIMEOUT_S = 1800
"""lm-eval's per-request timeout (`timeout=` of its model args), InferenceX's."""
RUN_TIMEOUT_S = 4 * 3600
"""A whole lm-eval run longer than this is stopped and failed (a hung harness must not hold the sweep forever)."""
LOG_FILE = "lm_eval.log"
RUNTIME = Path(__file__).with_name("lm_eval_runtime.py")
BOOTSTRAP = f"import runpy; runpy.run_path({str(RUNTIME)!r}, run_name='__main__')"
"""`python -c BOOTSTRAP ARGS...` runs `python -m lm_eval ARGS...` with llmsweep's lm-eval runtime (see the module doc).
`runpy.run_path` leaves `sys.path` and `sys.argv` as `-c` set them: the runtime's folder does not shadow lm-eval's
imports."""
REPORT_ENV = "LLMSWEEP_LM_EVAL_REPORT"
"""Where the runtime writes its counts, while lm-eval runs and at its exit (`lm_eval_runtime.REPORT_ENV`)."""
REPORT_FILE = "lm_eval_runtime.json"
PROGRESS_POLL_S = 1.0
"""Wall seconds between two reads of the runtime's report while lm-eval runs (`run_once`'s `on_progress`)."""

Progress = Callable[[int, "int | None"], None]
"""`run_once`'s `on_progress(answered, of)`: lm-eval's answers so far, of the requests its run sends (None until it
has built them)."""


@dataclass(frozen=True)
class Asked:
    """What a run of lm-eval asked of its data and its server, for the words of a failure (`explain_failure`)."""

    task: str
    dataset: str
    """The task's samples: its hub dataset id, or the local file (`--eval-dataset`)."""
    local: bool
    """`dataset` is a local file."""
    context: int
    """The eval's context length (lm-eval's `max_length`, the server's)."""
    max_tokens: int
    """The answer budget of every request."""


class EvalSettings(BaseModel):
    """How `run` evaluates eval jobs (not part of a job: the same row can be scored on another task or data)."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(default=DEFAULT_TASK, description="lm-eval task: gsm8k (5-shot) or gpqa_diamond_cot_n_shot.")
    dataset: Path | None = Field(default=None, description="A local JSON-lines file in the task's format instead "
                                 "of the Hugging Face dataset (offline runs).")
    limit: int | None = Field(default=None, ge=1, description="Score only the first N samples (lm-eval --limit).")
    python: str | None = Field(default=None, description=f"Python interpreter with lm-eval (default: ${ENV_VAR}).")
    max_tokens: int | None = Field(default=None, ge=1, description="Answer budget instead of the one the context "
                                   "implies (recorded in the result).")

    def interpreter(self) -> str | None:
        return self.python or os.environ.get(ENV_VAR) or None


def check_harness(settings: EvalSettings) -> str | None:
    """Why no eval can run here (None when lm-eval is at hand): a job that cannot run its eval is refused."""
    python = settings.interpreter()
    if not python:
        return (f"eval jobs need lm-eval: set {ENV_VAR} to a Python with lm-eval[api]=={PINNED_VERSION} (python3 -m "
                f"venv .venv-lmeval && .venv-lmeval/bin/pip install 'lm-eval[api]=={PINNED_VERSION}'), or pass "
                "--lm-eval PYTHON; --no-evals runs the throughput jobs alone")
    if not Path(python).is_file() or not os.access(python, os.X_OK):
        return (f"{ENV_VAR}/--lm-eval names {python}, which is not an executable file (fix: name the Python of a venv "
                f"with lm-eval[api]=={PINNED_VERSION})")
    return _imports_lm_eval(python)


@functools.cache
def _imports_lm_eval(python: str) -> str | None:
    """Why `python` cannot run lm-eval (None when it imports it): checked once per interpreter, before any server
    starts, so a job never launches a server for an eval that would die on `import lm_eval`."""
    try:
        proc = subprocess.run([python, "-c", "import lm_eval"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{ENV_VAR}/--lm-eval names {python}, which cannot be run ({exc})"
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return (f"{ENV_VAR}/--lm-eval names {python}, which cannot import lm_eval ({said}) (fix: install "
                f"'lm-eval[api]=={PINNED_VERSION}' into it, or name the Python of a venv that has it)")
    return None


OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
"""The switches that keep `datasets` (lm-eval's loader) off the Hugging Face hub."""


def _switched_on(value: str | None) -> bool:
    return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_cache_dirs(env: dict[str, str] | None = None) -> list[Path]:
    """Where `datasets` and `huggingface_hub` keep what they fetched, by their environment variables
    (`HF_DATASETS_CACHE`, `HF_HUB_CACHE`, under `HF_HOME`, by default `~/.cache/huggingface`)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HF_HOME") or Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface")
    return [Path(env.get("HF_DATASETS_CACHE") or home / "datasets"), Path(env.get("HF_HUB_CACHE") or home / "hub")]


def hub_dataset_cached(dataset: str, env: dict[str, str] | None = None) -> bool:
    """A copy of the hub dataset `dataset` (`openai/gsm8k`) is cached here: `datasets`' prepared copy
    (`openai___gsm8k`) or the hub's download (`datasets--openai--gsm8k`)."""
    datasets, hub = hub_cache_dirs(env)
    return ((datasets / dataset.replace("/", "___")).is_dir()
            or (hub / f"datasets--{dataset.replace('/', '--')}").is_dir())


def hub_refusal(settings: EvalSettings, env: dict[str, str] | None = None) -> str | None:
    """Why the eval's samples cannot be loaded here, before any server starts (None when they can, or when it cannot
    be told cheaply): the hub dataset of the task, with an offline switch set (`HF_HUB_OFFLINE`, `HF_DATASETS_OFFLINE`)
    and no cached copy of it. Without a switch, whether the hub answers is found by lm-eval (`explain_failure` says
    what to do then)."""
    if settings.dataset is not None:
        return None
    env = dict(os.environ) if env is None else env
    switched = [name for name in OFFLINE_VARS if _switched_on(env.get(name))]
    dataset = hub_dataset(settings.task)
    if not switched or dataset is None or hub_dataset_cached(dataset, env):
        return None
    where = " or ".join(str(d) for d in hub_cache_dirs(env))
    return (f"the eval's samples, {settings.task} from the Hugging Face hub ({dataset}), cannot be loaded: "
            f"{' and '.join(switched)} {'keeps' if len(switched) == 1 else 'keep'} lm-eval off the hub and no copy "
            f"of it is cached ({where}); pass "
            f"{_flag('eval_dataset')} FILE (a local JSON-lines file in the {settings.task} format), or unset "
            f"{' and '.join(switched)} where the hub can be reached (once: it is cached after)")


def refusal(job_spec_decoding: str, *, run_eval: bool, eval_only: bool, simulated: bool,
            settings: EvalSettings, pinned: bool = False, harness_provided: bool = False) -> str | None:
    """Why an eval job cannot run as planned (None when it can): no lm-eval at hand (unless `harness_provided`: the
    place the job runs installs it, as the CI workflow's runner job does), or a speculative `run-eval` row on the
    simulator that pins nothing (its throughput point needs real acceptance the simulator can only force, on the
    server its eval shares). A row that pins acceptance (`pinned`) runs: its point at the pin, its eval on a server
    relaunched without it (`execute.lifecycle.eval_launch`)."""
    if not (run_eval or eval_only):
        return None
    if simulated and run_eval and not eval_only and job_spec_decoding != "none" and not pinned:
        return ("a speculative run-eval row cannot run on the simulator: its throughput point needs an acceptance "
                "length the simulator can only force, and its eval on the same server needs real verification; run "
                "it on an engine, or --no-evals for the throughput point (--evals-only for the eval alone)")
    return None if harness_provided else check_harness(settings) or hub_refusal(settings)


def build_command(python: str, task: TaskFile, *, base_url: str, model: str, conc: int, context: int,
                  max_tokens: int, out: Path, limit: int | None) -> list[str]:
    """The exact lm-eval argv (InferenceX `run_lm_eval`'s arguments, started through :data:`BOOTSTRAP`)."""
    url = f"{base_url.rstrip('/')}/v1/chat/completions"
    model_args = ",".join([f"model={model}", f"base_url={url}", "api_key=EMPTY", "eos_string=</s>", "max_retries=5",
                           f"num_concurrent={conc}", f"timeout={TIMEOUT_S}", "tokenized_requests=False",
                           f"max_length={context}"])
    argv = [python, "-c", BOOTSTRAP, "--model", "local-chat-completions", "--apply_chat_template",
            "--model_args", model_args, "--gen_kwargs", f"max_tokens={max_tokens},temperature=0,top_p=1",
            "--tasks", str(task.path), "--output_path", str(out), "--log_samples"]
    if limit is not None:
        argv += ["--limit", str(limit)]
    return argv


def run_once(argv: list[str], out: Path, *, conc: int, job_dir: Path, offline: bool, asked: Asked | None = None,
             on_progress: Progress | None = None) -> tuple[EvalRun, str | None]:
    """Run lm-eval once; (the run as its results file says, the lm-eval version it reports). `on_progress` hears its
    answers as the runtime reports them (every `PROGRESS_POLL_S`); a failure lm-eval's log explains (`asked`: what
    the run asked, `explain_failure`) is said with its fix."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if offline:  # a local dataset: nothing to fetch, so no waiting on a hub that is not there
        env.update({"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    env.pop("PYTHONPATH", None)  # lm-eval's environment is its own
    report = out / REPORT_FILE
    report.unlink(missing_ok=True)
    env[REPORT_ENV] = str(report)
    started = time.monotonic()
    log_path = out / LOG_FILE
    try:
        with log_path.open("w", encoding="utf-8") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out)
            rc = _wait(proc, report, on_progress, started + RUN_TIMEOUT_S)
    except OSError as exc:
        return EvalRun(conc=conc, status="failed", command=argv, error=f"cannot start lm-eval ({argv[0]}): {exc}"), None
    seconds = round(time.monotonic() - started, 3)
    results = sorted(out.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    run = EvalRun(conc=conc, status="failed", command=argv, seconds=seconds)
    if rc != 0 or not results:
        text = log_path.read_text(encoding="utf-8", errors="replace")
        tail = " | ".join(text.strip().splitlines()[-3:])
        why = "timed out" if rc is None else f"exited {rc}" if rc != 0 else "wrote no results file"
        said = explain_failure(text, asked) if asked is not None else None
        where = f"(log {log_path.relative_to(job_dir)})"
        run.error = (f"lm-eval {why} {where}: {said}" if said is not None
                     else f"lm-eval {why} {where}: {tail[-400:]}")
        return run, None
    run.reasoning_answers = _reasoning_answers(report)
    return read_results(results[-1], run, job_dir)


def _wait(proc: subprocess.Popen[bytes], report: Path, on_progress: Progress | None, deadline: float) -> int | None:
    """lm-eval's exit status (None: stopped at `deadline`), reading the runtime's report for `on_progress` meanwhile.
    Anything that ends the wait early (a signal's KeyboardInterrupt) kills lm-eval first, as `subprocess.run` did."""
    said: tuple[int, int | None] | None = None
    try:
        while True:
            try:
                return proc.wait(timeout=max(0.0, min(PROGRESS_POLL_S, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    proc.kill()
                    proc.wait()
                    return None
            if on_progress is not None and (counts := _progress(report)) is not None and counts != said:
                said = counts
                on_progress(*counts)
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _progress(report: Path) -> tuple[int, int | None] | None:
    """(answers, requests) as the runtime last reported them; None before its first report."""
    try:
        counts = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(counts, dict) or not isinstance(answers := counts.get("answers"), int):
        return None
    requests = counts.get("requests")
    return answers, requests if isinstance(requests, int) and not isinstance(requests, bool) else None


_HUB_UNREACHABLE = re.compile(r"Couldn't reach '[^']*' on the Hub|OfflineModeIsEnabled|LocalEntryNotFoundError|"
                              r"(?:Max retries exceeded|Failed to resolve|NameResolutionError)[^\n]*huggingface\.co")
_REFUSED = re.compile(r"API request failed! Status code: 400, Response text: (.*?)\. Retrying")
_PROMPT_TOKENS = re.compile(r"(\d+) (?:tokens )?(?:in|from) the (?:input )?messages")


def explain_failure(log: str, asked: Asked) -> str | None:
    """What a failed lm-eval run's log says went wrong, in words that name the fix, where llmsweep knows the cause
    (None otherwise: the log's tail says it):

    - the task's hub dataset could not be fetched (no connection, or offline with no cached copy): a local file
      (`--eval-dataset`), or the hub once;
    - the server refused the requests (400) because prompt + answer budget exceed the eval's context: the budget
      (`--eval-max-tokens`) lowered to at most the context less the longest prompt (the server's own count of the
      prompts it refused, where it gives one)."""
    if not asked.local and _HUB_UNREACHABLE.search(log):
        return (f"the eval's samples, {asked.task} from the Hugging Face hub ({asked.dataset}), could not be fetched "
                f"(no connection to the hub, or offline with no cached copy) (fix: pass {_flag('eval_dataset')} FILE, "
                f"a local JSON-lines file in the {asked.task} format, or run once where the hub can be reached, or set "
                "HF_HUB_OFFLINE=1 where a cached copy of it exists)")
    refused = [_server_message(m) for m in _REFUSED.findall(log)]
    overflow = [m for m in refused if _is_overflow(m)]
    if not overflow:
        return None
    prompts = [int(n) for m in overflow for n in _PROMPT_TOKENS.findall(m)]
    from llmsweep.evals.context import eval_max_tokens

    budget = _flag("eval_max_tokens")
    longest = max(prompts) if prompts else None
    room = asked.context - longest if longest is not None else None
    at_most = (f"at most {room:,} (the context less the longest prompt it refused, {longest:,} tokens; a longer "
               "prompt may follow)") if room is not None and room > 0 else "at most the context less the longest prompt"
    default = eval_max_tokens(asked.context)
    instead = (f", or drop {budget} for the default, {default:,}, which leaves {asked.context - default:,} tokens for "
               "the prompt") if asked.max_tokens > default else ""
    return (f"the server refused lm-eval's requests: prompt + the answer budget of {asked.max_tokens:,} tokens exceed "
            f"the eval's context of {asked.context:,} tokens (server: {overflow[-1][:300]}) (fix: lower {budget} to "
            f"{at_most}{instead})")


def _server_message(text: str) -> str:
    """The server's message of a refused request (its JSON `message`, else the text as lm-eval logged it)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    if isinstance(doc, dict):
        error = doc.get("error")
        message = error.get("message") if isinstance(error, dict) else doc.get("message")
        if isinstance(message, str):
            return message
    return text


def _is_overflow(message: str) -> bool:
    """A refusal for a request longer than the server's context (the client's own patterns for it)."""
    from llmsweep.client.config import RunOptions

    low = message.lower()
    return any(p.lower() in low for p in RunOptions().context_overflow_patterns)


def _reasoning_answers(report: Path) -> int | None:
    """How many answers the runtime scored from the reasoning field (None when it wrote no report)."""
    try:
        counts = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = counts.get("from_reasoning") if isinstance(counts, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_results(path: Path, run: EvalRun, job_dir: Path) -> tuple[EvalRun, str | None]:
    """Fill `run` from lm-eval's results JSON: every metric of the task with its stderr, the sample counts."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        run.error = f"cannot read lm-eval's results {path}: {exc}"
        return run, None
    run.results_file = str(path.relative_to(job_dir))
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, dict) or not results:
        run.error = f"lm-eval's results {path} hold no task results"
        return run, doc.get("lm_eval_version") if isinstance(doc, dict) else None
    for task, values in results.items():
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            name, _, filt = key.partition(",")
            if name.endswith("_stderr") or not filt or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            stderr = values.get(f"{name}_stderr,{filt}")
            run.metrics.append(EvalMetric(name=key, value=float(value),
                                          stderr=float(stderr) if isinstance(stderr, (int, float)) else None))
        counts = (doc.get("n-samples") or {}).get(task) or {}
        run.n_samples = counts.get("effective")
        run.n_samples_original = counts.get("original")
    run.status = "completed"
    version = doc.get("lm_eval_version")
    return run, str(version) if version else None
