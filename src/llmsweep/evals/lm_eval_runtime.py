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

When `LLMSWEEP_LM_EVAL_REPORT` names a file, the process writes there at exit how many answers it parsed and how many
of them came from the reasoning field (`harness.run_once` reads it into the eval run).
"""

from __future__ import annotations

import atexit
import json
import os
from typing import Any

REPORT_ENV = "LLMSWEEP_LM_EVAL_REPORT"
"""(Spelled again in `llmsweep.evals.harness`, which cannot be imported here.)"""
REASONING_KEYS = ("reasoning_content", "reasoning")
COUNTS = {"answers": 0, "from_reasoning": 0}


def scored_message(message: dict[str, Any]) -> dict[str, Any]:
    """`message` as lm-eval should score it: unchanged when its content is a non-empty string (or when it has no
    reasoning text), else with its reasoning text as the content."""
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return message
    for key in REASONING_KEYS:
        reasoning = message.get(key)
        if isinstance(reasoning, str) and reasoning.strip():
            COUNTS["from_reasoning"] += 1
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
                    COUNTS["answers"] += 1
                    choice = {**choice, "message": scored_message(message)}
                fixed.append(choice)
            doc = {**doc, "choices": fixed}
        out.append(doc)
    return out[0] if single else out


def install() -> None:
    """Apply both changes of the module doc to the imported lm-eval."""
    import lm_eval.tasks.manager as manager
    from lm_eval.models.openai_completions import LocalChatCompletion

    init = manager.TaskManager.__init__

    def task_manager_init(self: Any, *args: Any, include_defaults: bool = False, **kwargs: Any) -> None:
        init(self, *args, include_defaults=include_defaults, **kwargs)

    manager.TaskManager.__init__ = task_manager_init
    parse = LocalChatCompletion.parse_generations

    def parse_generations(self: Any, outputs: Any, **kwargs: Any) -> Any:
        return parse(self, _scored_outputs(outputs), **kwargs)

    LocalChatCompletion.parse_generations = parse_generations


def _report() -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(COUNTS, f)


if __name__ == "__main__":
    install()
    atexit.register(_report)
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
