"""An eval against a server with a reasoning parser: answers left in the reasoning field are scored, as InferenceX
scores them, and the chat history goes out as plain text (`evals/lm_eval_runtime.py`).

The server is a stand-in for SGLang's `--reasoning-parser` and vLLM's reasoning outputs, over loopback: it solves the
arithmetic word problem it is asked (tests/support/arith_eval.py) and splits its reply three ways, by the answer's
value: the answer in `content` with a wrong number in `reasoning_content` (content must win), `content: ""` with the
answer in `reasoning_content` (SGLang), `content: null` with the answer in `reasoning` (vLLM's newer spelling). Real
lm-eval 0.4.13 (`LLMSWEEP_LM_EVAL`) scores it through `harness.build_command` and `harness.run_once`, as `run` does:
only a harness that reads the reasoning field can score every answer right.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from support.arith_eval import write_arith
from support.loopback import serving

from llmsweep.evals.harness import REPORT_FILE, build_command, run_once
from llmsweep.evals.tasks import task_file

LM_EVAL = os.environ.get("LLMSWEEP_LM_EVAL")
pytestmark = pytest.mark.skipif(not LM_EVAL or not Path(LM_EVAL).is_file(),
                                reason="needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")

QUESTION = re.compile(r"has (\d+) \w+\. \w+ (gets|gives away) (\d+)")
MODEL = "reasoner"


def _answer(text: str) -> int:
    """The last problem in the prompt (the few-shot examples come before the question)."""
    a, verb, b = QUESTION.findall(text)[-1]
    return int(a) + int(b) if verb == "gets" else int(a) - int(b)


def reply(value: int) -> dict[str, Any]:
    """The assistant message for an answer of `value`, split as the module doc says."""
    worked = f"Working it out step by step, the result is {value}.\n#### {value}"
    if value % 3 == 0:
        return {"role": "assistant", "content": worked, "reasoning_content": "A first guess.\n#### 999"}
    if value % 3 == 1:
        return {"role": "assistant", "content": "", "reasoning_content": worked}
    return {"role": "assistant", "content": None, "reasoning": worked}


class _Handler(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append(body)
        last = body["messages"][-1]["content"]
        value = _answer(last) if isinstance(last, str) else -1
        data = json.dumps({"id": "r", "object": "chat.completion", "model": MODEL, "choices": [
            {"index": 0, "message": reply(value), "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    with serving(type("Handler", (_Handler,), {"received": received})) as url:
        yield url, received


def test_answers_in_the_reasoning_field_are_scored_and_counted(server: tuple[str, list[dict[str, Any]]],
                                                              tmp_path: Path) -> None:
    url, received = server
    data = write_arith(tmp_path / "arith.jsonl", 9)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    values = [int(r["answer"].rsplit("#### ", 1)[1]) for r in rows]
    assert {v % 3 for v in values} == {0, 1, 2}, values  # all three reply shapes are exercised
    task = task_file("gsm8k", data, tmp_path / "task")
    out = tmp_path / "eval"
    assert LM_EVAL is not None
    argv = build_command(LM_EVAL, task, base_url=url, model=MODEL, conc=3, context=4096, max_tokens=256,
                         out=out, limit=None)
    run, version = run_once(argv, out, conc=3, job_dir=tmp_path, offline=True)
    assert run.status == "completed", run.error
    assert version == "0.4.13"
    scores = {m.name: m.value for m in run.metrics}
    assert scores["exact_match,strict-match"] == 1.0, scores
    assert run.n_samples == len(rows)
    assert run.reasoning_answers == sum(v % 3 != 0 for v in values)
    assert json.loads((out / REPORT_FILE).read_text()) == {"answers": len(rows),
                                                            "from_reasoning": run.reasoning_answers,
                                                            "requests": len(rows)}  # as `evaluating` shows them
    # The chat history goes out as InferenceX's runtime sends it: plain-text contents, no {"type": "text"} parts.
    assert len(received) == len(rows)
    for body in received:
        assert body["model"] == MODEL and body["temperature"] == 0
        assert all(isinstance(m["content"], str) for m in body["messages"]), body["messages"]
