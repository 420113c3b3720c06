"""lm-eval's command line as `run` starts it: run by lm-eval's own interpreter (`harness.BOOTSTRAP`), never imported by
llmsweep — so it imports nothing of llmsweep and runs on any Python lm-eval supports.

Run as `__main__` it applies :func:`install`, then calls lm-eval's entry point (`lm_eval.__main__.cli_evaluate`) with
the process's arguments, unchanged. What it changes in lm-eval, and why:

- **No index of lm-eval's built-in tasks.** The task is always one of llmsweep's packaged files, passed by path, and
  lm-eval's task manager otherwise indexes its ~14,000 built-in task files before reading it (17 CPU-seconds a run
  on a 2-core AMD EPYC, 2026-12-02). Only the manager's `include_defaults` default changes.
- **An answer in the reasoning field is scored.** A server with a reasoning parser (SGLang's `--reasoning-parser`,
  vLLM's) splits a reply into `reasoning_content` (vLLM's newer spelling: `reasoning`) and `content`; a model that is
  still thinking when `max_tokens` ends it leaves `content` empty or null, and lm-eval's chat model would score an
  empty answer. As InferenceX's lm-eval runtime does, a choice whose `content` is empty is scored on its reasoning
  text instead; a non-empty `content` is always what is scored.

InferenceX's runtime also sends the chat history as one JSON string with plain-text contents (no `{"type": "text"}`
parts) when the tokenizer is not Hugging Face's. lm-eval 0.4.13, which llmsweep pins, already does so whenever
`tokenized_requests=False` (what `run` passes): `TemplateAPI.apply_chat_template` returns a `JsonChatStr` that the
chat model loads back verbatim. `tests/integration/test_eval_reasoning.py` checks both on the wire.

When `LLMSWEEP_LM_EVAL_REPORT` names a file, the process writes there how many answers it parsed, how many of them came
from the reasoning field and how many requests its run sends (`requests`, once lm-eval has built them): at most every
`REPORT_EVERY_S` while it runs (`harness.run_once` shows the answers as the eval's progress) and at exit
(`harness.run_once` reads it into the eval run). Each write replaces the file whole, so a reader never sees half of one.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from typing import Any

REPORT_ENV = "LLMSWEEP_LM_EVAL_REPORT"
"""(Spelled again in `llmsweep.evals.harness`, which cannot be imported here.)"""
REASONING_KEYS = ("reasoning_content", "reasoning")
COUNTS: dict[str, int | None] = {"answers": 0, "from_reasoning": 0, "requests": None}
REPORT_EVERY_S = 1.0
"""Least wall seconds between two reports while lm-eval runs (the last one, at exit, is always written)."""
_LAST_REPORT = [0.0]


def _count(key: str) -> None:
    COUNTS[key] = (COUNTS[key] or 0) + 1


def scored_message(message: dict[str, Any]) -> dict[str, Any]:
    """`message` as lm-eval should score it: unchanged when its content is a non-empty string (or when it has no
    reasoning text), else with its reasoning text as the content."""
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return message
    for key in REASONING_KEYS:
        reasoning = message.get(key)
        if isinstance(reasoning, str) and reasoning.strip():
            _count("from_reasoning")
            return {**message, "content": reasoning}
    return message


def _scored_outputs(outputs: Any) -> Any:
    """lm-eval's raw chat-completions responses with every choice's message passed through :func:`scored_message`;
    anything not shaped like a response is left for lm-eval to judge."""
    single = not isinstance(outputs, list)
    out = []
    for doc in [outputs] if single else outputs:
        choices = doc.get("choices") if isinstance(doc, dict) else None
        if isinstance(choices, list):
            fixed = []
            for choice in choices:
                message = choice.get("message") if isinstance(choice, dict) else None
                if isinstance(message, dict):
                    _count("answers")
                    choice = {**choice, "message": scored_message(message)}
                fixed.append(choice)
            doc = {**doc, "choices": fixed}
        out.append(doc)
    return out[0] if single else out


def install() -> None:
    """Apply both changes of the module doc to the imported lm-eval, and count its requests and answers as they go."""
    import lm_eval.tasks.manager as manager
    from lm_eval.models.openai_completions import LocalChatCompletion

    init = manager.TaskManager.__init__

    def task_manager_init(self: Any, *args: Any, include_defaults: bool = False, **kwargs: Any) -> None:
        init(self, *args, include_defaults=include_defaults, **kwargs)

    manager.TaskManager.__init__ = task_manager_init
    parse = LocalChatCompletion.parse_generations

    def parse_generations(self: Any, outputs: Any, **kwargs: Any) -> Any:
        parsed = parse(self, _scored_outputs(outputs), **kwargs)
        _report(final=False)
        return parsed

    LocalChatCompletion.parse_generations = parse_generations
    generate = LocalChatCompletion.generate_until

    def generate_until(self: Any, requests: Any, *args: Any, **kwargs: Any) -> Any:
        COUNTS["requests"] = (COUNTS["requests"] or 0) + len(requests)
        _report(final=False)
        return generate(self, requests, *args, **kwargs)

    LocalChatCompletion.generate_until = generate_until


def _report(final: bool = True) -> None:
    """Write the counts to the report file (`REPORT_ENV`), atomically; while running (not `final`) at most every
    `REPORT_EVERY_S`. A report that cannot be written is left unwritten: it never fails the eval."""
    path = os.environ.get(REPORT_ENV)
    now = time.monotonic()
    if not path or (not final and now - _LAST_REPORT[0] < REPORT_EVERY_S):
        return
    _LAST_REPORT[0] = now
    staging = f"{path}.{os.getpid()}.tmp"
    try:
        with open(staging, "w", encoding="utf-8") as f:
            json.dump(COUNTS, f)
        os.replace(staging, path)
    except OSError:
        pass


if __name__ == "__main__":
    install()
    atexit.register(_report)
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
