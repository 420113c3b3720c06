"""The eval's context length and answer budget, lm-eval's exact command, a local GSM8K-format task file, and how
lm-eval's results file is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.evals.context import eval_concurrencies, eval_context_length, eval_max_tokens
from llmsweep.evals.harness import BOOTSTRAP, EvalSettings, build_command, check_harness, read_results
from llmsweep.evals.tasks import task_file
from llmsweep.metrics.model import EvalRun
from llmsweep.plan import Job, full_sweep
from llmsweep.plan.matrix import EvalOptions
from llmsweep.spec import loads_recipes


def _job(isl: int, osl: int, model_path: str | None = None) -> Job:
    path = f"    model-path: {model_path}\n" if model_path else ""
    text = ("k:\n  image: vllm/vllm-openai:v0.26.0\n  model: meta-llama/Llama-3.1-8B-Instruct\n  model-prefix: "
            "llama3.1-8b\n  runner: h200\n  precision: bf16\n  framework: vllm\n  multinode: false\n  scenarios:\n"
            f"    fixed-seq-len:\n    - isl: {isl}\n      osl: {osl}\n      search-space:\n"
            "      - { tp: 1, conc-list: [16, 64] }\n  serve:\n    engine: { name: vllm, version: 0.26.0 }\n" + path)
    jobs = full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes, evals=EvalOptions(all_evals=True))
    return next(j for j in jobs if j.conc == 64)


def test_8k1k_runs_at_9472_tokens_with_5376_to_answer() -> None:
    job = _job(8192, 1024)
    assert eval_context_length(job) == 9472 and eval_max_tokens(9472) == 5376
    assert eval_concurrencies(job) == [64]
    assert eval_max_tokens(3000) == 1500 and eval_max_tokens(400_000) == 16_384


def test_an_answer_budget_must_leave_the_eval_context_room_for_the_prompt(tmp_path: Path) -> None:
    from llmsweep.evals.context import max_tokens_refusal

    job = _job(8192, 1024)
    assert max_tokens_refusal(job, None) is None and max_tokens_refusal(job, 9471) is None
    assert "does not fit the eval's context of 9,472 tokens" in (max_tokens_refusal(job, 9472) or "")
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    capped = _job(8192, 1024, str(tmp_path))  # the context the model serves at most
    assert "does not fit the eval's context of 8,192 tokens" in (max_tokens_refusal(capped, 9000) or "")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig"])
def test_the_context_is_capped_at_the_models_native_maximum(tmp_path: Path, encoding: str) -> None:
    # utf-8-sig: a config.json an editor saved with a byte-order mark had been read as no config (the catalog's
    # context, or none: the eval asked 9,472 tokens of an 8,192-token model)
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}), encoding=encoding)
    assert eval_context_length(_job(8192, 1024, str(tmp_path))) == 8192


def test_lm_eval_command_is_inferencex_invocation(tmp_path: Path) -> None:
    task = task_file("gsm8k", None, tmp_path)
    argv = build_command("/venv/bin/python", task, base_url="http://127.0.0.1:8000/", model="m", conc=64,
                         context=9472, max_tokens=5376, out=tmp_path / "o", limit=None)
    assert argv[:7] == ["/venv/bin/python", "-c", BOOTSTRAP, "--model", "local-chat-completions",
                        "--apply_chat_template", "--model_args"]
    assert argv[7] == ("model=m,base_url=http://127.0.0.1:8000/v1/chat/completions,api_key=EMPTY,eos_string=</s>,"
                       "max_retries=5,num_concurrent=64,timeout=1800,tokenized_requests=False,max_length=9472")
    assert argv[8:10] == ["--gen_kwargs", "max_tokens=5376,temperature=0,top_p=1"]
    assert "--log_samples" in argv and "--limit" not in argv and task.num_fewshot == 5
    assert task.dataset == "openai/gsm8k"


def test_a_local_gsm8k_file_replaces_the_hub_dataset(tmp_path: Path) -> None:
    data = tmp_path / "gsm.jsonl"
    data.write_text(json.dumps({"question": "1+1?", "answer": "1+1=2\n#### 2"}) + "\n")
    task = task_file("gsm8k", data, tmp_path / "task")
    text = task.path.read_text()
    assert task.path.parent == tmp_path / "task" and task.dataset == str(data)
    assert "dataset_path: json" in text and f'test: "{data}"' in text and "openai/gsm8k" not in text
    assert "num_fewshot: 5" in text and "strict-match" in text
    from llmsweep.errors import ConfigError

    with pytest.raises(ConfigError, match="not a file"):
        task_file("gsm8k", tmp_path / "missing.jsonl", tmp_path / "t2")
    with pytest.raises(ConfigError, match="gpqa_diamond_cot_n_shot"):
        task_file("mmlu", None, tmp_path)


def test_results_file_metrics_with_stderr_and_sample_counts(tmp_path: Path) -> None:
    path = tmp_path / "o" / "m" / "results_1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"results": {"gsm8k": {
        "alias": "gsm8k", "exact_match,strict-match": 0.75, "exact_match_stderr,strict-match": 0.04,
        "exact_match,flexible-extract": 0.8, "exact_match_stderr,flexible-extract": "N/A"}},
        "n-samples": {"gsm8k": {"original": 1319, "effective": 100}}, "lm_eval_version": "0.4.13"}))
    run, version = read_results(path, EvalRun(conc=8, status="failed"), tmp_path)
    assert version == "0.4.13" and run.status == "completed" and run.n_samples == 100
    assert [(m.name, m.value, m.stderr) for m in run.metrics] == [
        ("exact_match,strict-match", 0.75, 0.04), ("exact_match,flexible-extract", 0.8, None)]
    assert run.results_file == "o/m/results_1.json"


def test_without_lm_eval_the_reason_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)
    assert "LLMSWEEP_LM_EVAL" in (check_harness(EvalSettings()) or "")
    assert "not an executable" in (check_harness(EvalSettings(python=str(tmp_path / "nope"))) or "")


def test_a_speculative_run_eval_row_is_refused_on_the_simulator_with_why(tmp_path: Path) -> None:
    from llmsweep.evals.harness import refusal

    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    ok = EvalSettings(python=str(python))
    why = refusal("mtp", run_eval=True, eval_only=False, simulated=True, settings=ok)
    assert why is not None and "simulator" in why and "--no-evals" in why and "--evals-only" in why
    assert refusal("mtp", run_eval=True, eval_only=True, simulated=True, settings=ok) is None  # eval-only: runs
    assert refusal("mtp", run_eval=True, eval_only=False, simulated=False, settings=ok) is None  # a real engine
    assert refusal("none", run_eval=True, eval_only=False, simulated=True, settings=ok) is None
    assert refusal("mtp", run_eval=False, eval_only=False, simulated=True, settings=EvalSettings()) is None


def test_a_multinode_row_evaluates_at_its_eval_conc_or_every_conc_when_batched() -> None:
    job = _job(8192, 1024)
    multi = job.model_copy(update={"multinode": True, "conc": [4, 16, 64], "eval_conc": 16})
    assert eval_concurrencies(multi) == [16]
    batched = multi.model_copy(update={"eval_conc": None, "eval_all_concs": True})
    assert eval_concurrencies(batched) == [4, 16, 64]


def test_an_lm_eval_that_fails_is_a_failed_run_with_its_exit_status_and_log_tail(tmp_path: Path) -> None:
    from llmsweep.evals.harness import run_once

    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'Traceback: connection refused' >&2\nexit 3\n")
    broken.chmod(0o755)
    run, version = run_once([str(broken), "-m", "lm_eval"], tmp_path / "eval" / "conc8", conc=8, job_dir=tmp_path,
                            offline=True)
    assert run.status == "failed" and version is None and run.conc == 8
    assert run.error is not None and "exited 3" in run.error and "connection refused" in run.error
    assert "eval/conc8/lm_eval.log" in run.error


def test_a_local_dataset_the_task_can_run_on_passes_its_check(tmp_path: Path) -> None:
    from llmsweep.errors import DatasetError
    from llmsweep.evals.tasks import INPUTS, check_dataset, known_tasks

    assert sorted(INPUTS) == known_tasks()  # every packaged task says what a local file of it holds
    rows = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}.\n#### {i + 1}"} for i in range(6)]
    lines = tmp_path / "gsm8k.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")  # a blank line is no row
    check_dataset("gsm8k", lines)
    array = tmp_path / "gsm8k.json"  # one JSON array, which lm-eval's `json` loader reads too
    array.write_text(json.dumps(rows))
    check_dataset("gsm8k", array)
    gpqa = tmp_path / "gpqa.jsonl"
    gpqa.write_text(json.dumps({"Question": "Which?", "Correct Answer": "a", "Incorrect Answer 1": "b",
                                "Incorrect Answer 2": "c", "Incorrect Answer 3": "d"}) + "\n")
    check_dataset("gpqa_diamond_cot_n_shot", gpqa)  # zero-shot: one row is enough
    with pytest.raises(DatasetError, match=r"gsm8k.jsonl:1: the row lacks 'Question'"):
        check_dataset("gpqa_diamond_cot_n_shot", lines)


def test_an_eval_dataset_row_holding_a_unicode_line_separator_reads_and_later_lines_keep_their_numbers(
        tmp_path: Path) -> None:
    """JSON lines end at "\\n" only (lm-eval's reader agrees): a question holding U+2028, U+2029 or U+0085 was split
    by str.splitlines() and refused as not JSON, at a line number the file does not have."""
    from llmsweep.errors import DatasetError
    from llmsweep.evals.tasks import check_dataset

    rows = [{"question": f"What is {i} + 1?{c}(see above)", "answer": f"{i} + 1 = {i + 1}.\n#### {i + 1}"}
            for i, c in enumerate("\u2028\u2029\u0085" * 2)]
    path = tmp_path / "gsm8k.jsonl"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    check_dataset("gsm8k", path)
    path.write_text(text.replace("\n", "\r\n"), encoding="utf-8")  # (Windows line ends read as well)
    check_dataset("gsm8k", path)
    path.write_text(text + json.dumps({"question": "q"}) + "\n", encoding="utf-8")  # line 7 lacks its answer
    with pytest.raises(DatasetError, match=r"gsm8k\.jsonl:7: the row lacks 'answer'"):
        check_dataset("gsm8k", path)


def test_a_bad_row_of_a_json_array_eval_dataset_is_named_by_its_place_in_the_array(tmp_path: Path) -> None:
    """Every row of a one-JSON-array file was named `FILE:1`, whichever was bad: it is named by its place."""
    from llmsweep.errors import DatasetError
    from llmsweep.evals.tasks import check_dataset

    rows: list[object] = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}.\n#### {i + 1}"}
                          for i in range(8)]
    path = tmp_path / "arr.json"
    for bad, said in (({"question": "q"}, "the row lacks 'answer'"), ([1, 2], "a row is list, not an object"),
                      ({"question": "q", "answer": "no number"}, "'answer' does not")):
        path.write_text(json.dumps([*rows[:3], bad, *rows[3:]], indent=1))  # the bad row fourth, at index 3
        with pytest.raises(DatasetError) as err:
            check_dataset("gsm8k", path)
        assert err.value.message.startswith(f"eval dataset {path}: row 4 (index 3): {said}"), err.value.message


def test_lm_evals_answers_are_heard_while_it_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An eval of minutes said nothing of how far it was: the runtime's report (answers parsed, requests its run
    sends) is read while lm-eval runs and handed on (the progress display's `evaluating · 3/6 answers`)."""
    from llmsweep.evals import harness

    monkeypatch.setattr(harness, "PROGRESS_POLL_S", 0.05)
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\n"
                    "echo '{\"answers\": 1, \"from_reasoning\": 0, \"requests\": 6}' > \"$LLMSWEEP_LM_EVAL_REPORT\"\n"
                    "sleep 0.5\n"
                    "echo '{\"answers\": 6, \"from_reasoning\": 2, \"requests\": 6}' > \"$LLMSWEEP_LM_EVAL_REPORT\"\n"
                    "sleep 0.5\n"
                    "mkdir -p m && echo '{\"results\": {\"gsm8k\": {\"exact_match,strict-match\": 0.5}}}' "
                    "> m/results_1.json\n")
    fake.chmod(0o755)
    heard: list[tuple[int, int | None]] = []
    run, _ = harness.run_once([str(fake)], tmp_path / "eval" / "conc4", conc=4, job_dir=tmp_path, offline=True,
                              on_progress=lambda done, of: heard.append((done, of)))
    assert run.status == "completed" and run.reasoning_answers == 2, run.error
    assert heard[0] == (1, 6) and heard[-1] == (6, 6) and len(heard) == len(set(heard)), heard  # each change once


def test_the_runtime_reports_its_counts_whole_and_at_most_every_second(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    from llmsweep.evals import lm_eval_runtime as rt

    report = tmp_path / "report.json"
    monkeypatch.setenv(rt.REPORT_ENV, str(report))
    monkeypatch.setattr(rt, "COUNTS", {"answers": 0, "from_reasoning": 0, "requests": 6})
    monkeypatch.setattr(rt, "_LAST_REPORT", [0.0])
    rt._scored_outputs({"choices": [{"message": {"content": "", "reasoning_content": "#### 4"}}]})
    rt._report(final=False)
    assert json.loads(report.read_text()) == {"answers": 1, "from_reasoning": 1, "requests": 6}
    rt._scored_outputs({"choices": [{"message": {"content": "#### 5"}}]})
    rt._report(final=False)  # within a second of the last: not written
    assert json.loads(report.read_text())["answers"] == 1
    rt._report()  # at exit: always
    assert json.loads(report.read_text()) == {"answers": 2, "from_reasoning": 1, "requests": 6}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no staging file left


def _failing_lm_eval(tmp_path: Path, log: str) -> str:
    (tmp_path / "said.txt").write_text(log)
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'said.txt'}\nexit 1\n")
    fake.chmod(0o755)
    return str(fake)


def test_a_hub_dataset_lm_eval_cannot_fetch_is_said_with_the_fix(tmp_path: Path) -> None:
    """Offline, lm-eval's raw `ConnectionError: Couldn't reach 'openai/gsm8k' on the Hub` named no way out."""
    from llmsweep.evals.harness import Asked, run_once

    log = ("Traceback (most recent call last):\n  File \"datasets/load.py\", line 1115\n"
           "ConnectionError: Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)\n")
    asked = Asked(task="gsm8k", dataset="openai/gsm8k", local=False, context=9472, max_tokens=5376)
    run, _ = run_once([_failing_lm_eval(tmp_path, log)], tmp_path / "eval" / "conc16", conc=16, job_dir=tmp_path,
                      offline=False, asked=asked)
    assert run.error is not None and run.error.startswith("lm-eval exited 1 (log eval/conc16/lm_eval.log): ")
    assert "gsm8k from the Hugging Face hub (openai/gsm8k), could not be fetched" in run.error
    assert "--eval-dataset FILE" in run.error and "HF_HUB_OFFLINE=1 where a cached copy" in run.error


def test_an_answer_budget_the_server_refuses_is_said_with_the_budget_that_fits(tmp_path: Path) -> None:
    """`--eval-max-tokens 9400` on a 9,472-token context: each request was refused (400) and the run ended on
    aiohttp's `400, message='Bad Request'`, without saying prompt + budget exceed the context."""
    from llmsweep.evals.harness import Asked, run_once

    refused = ('WARNING [models.api_models:521] API request failed! Status code: 400, Response text: {{"error": '
               '{{"message": "This model\'s maximum context length is 9472 tokens. However, you requested {t} tokens '
               '({p} in the messages, 9400 in the completion). Please reduce the length of the messages or '
               'completion.", "type": "BadRequestError", "code": 400}}}}. Retrying...\n')
    log = (refused.format(t=9710, p=310) + refused.format(t=9708, p=308)
           + "aiohttp.client_exceptions.ClientResponseError: 400, message='Bad Request', url='http://x'\n")
    asked = Asked(task="gsm8k", dataset="/data/adds.jsonl", local=True, context=9472, max_tokens=9400)
    run, _ = run_once([_failing_lm_eval(tmp_path, log)], tmp_path / "o", conc=16, job_dir=tmp_path, offline=True,
                      asked=asked)
    assert run.error is not None
    assert ("the server refused lm-eval's requests: prompt + the answer budget of 9,400 tokens exceed the eval's "
            "context of 9,472 tokens") in run.error
    assert "lower --eval-max-tokens to at most 9,162 (the context less the longest prompt it refused, 310" in run.error
    assert "or drop --eval-max-tokens for the default, 5,376, which leaves 4,096 tokens" in run.error
    # a failure llmsweep cannot explain keeps lm-eval's own last lines
    (elsewhere := tmp_path / "other").mkdir()
    other, _ = run_once([_failing_lm_eval(elsewhere, "KeyError: 'doc'\n")], tmp_path / "p", conc=16,
                        job_dir=tmp_path, offline=True, asked=asked)
    assert other.error is not None and other.error.endswith("KeyError: 'doc'")


def test_an_offline_switch_without_a_cached_hub_dataset_refuses_the_eval_before_any_server(tmp_path: Path) -> None:
    from llmsweep.evals.harness import hub_refusal, refusal

    home = tmp_path / "hf"
    offline = {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    why = hub_refusal(EvalSettings(), offline)
    assert why is not None and "gsm8k from the Hugging Face hub (openai/gsm8k), cannot be loaded" in why
    assert "HF_HUB_OFFLINE keeps lm-eval off the hub and no copy of it is cached" in why and "--eval-dataset" in why
    assert hub_refusal(EvalSettings(dataset=tmp_path / "a.jsonl"), offline) is None  # a local file: nothing to fetch
    assert hub_refusal(EvalSettings(), {"HF_HOME": str(home)}) is None  # no switch: lm-eval finds out (and is told)
    (home / "hub" / "datasets--openai--gsm8k").mkdir(parents=True)
    assert hub_refusal(EvalSettings(), offline) is None  # a cached copy: lm-eval reads it offline
    (home / "hub" / "datasets--openai--gsm8k").rmdir()
    assert hub_refusal(EvalSettings(), {**offline, "HF_DATASETS_CACHE": str(tmp_path / "ds")}) is not None
    (tmp_path / "ds" / "openai___gsm8k").mkdir(parents=True)
    assert hub_refusal(EvalSettings(), {**offline, "HF_DATASETS_CACHE": str(tmp_path / "ds")}) is None
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    import os
    from unittest import mock

    with mock.patch.dict(os.environ, offline):
        assert "cannot be loaded" in (refusal("none", run_eval=True, eval_only=True, simulated=True,
                                              settings=EvalSettings(python=str(python))) or "")
        assert refusal("none", run_eval=True, eval_only=True, simulated=True, settings=EvalSettings(),
                       harness_provided=True) is None  # the place it runs has lm-eval and its own hub
