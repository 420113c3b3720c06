"""Request bodies follow the endpoint's switches; options reject contradictory modes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmsweep.client.config import Endpoint, RunOptions
from llmsweep.client.transport import build_body
from llmsweep.errors import ConfigError
from llmsweep.workload.base import RequestSpec


def _spec(**kw: object) -> RequestSpec:
    base: dict[str, object] = {"api": "chat", "max_tokens": 5, "messages": ({"role": "user", "content": "hi"},)}
    base.update(kw)
    return RequestSpec(**base)  # type: ignore[arg-type]


def test_body_streams_with_usage_max_tokens_and_ignore_eos_by_default() -> None:
    body = json.loads(build_body(_spec(), Endpoint(base_url="http://h", model="m")))
    assert body["stream"] is True and body["max_tokens"] == 5 and body["model"] == "m"
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_switches_drop_fields_servers_reject_with_422() -> None:
    ep = Endpoint(base_url="http://h", model="m", send_ignore_eos=False, send_stream_options=False)
    body = json.loads(build_body(_spec(), ep))
    assert "ignore_eos" not in body and "stream_options" not in body


def test_completions_sends_token_ids_as_a_list_and_merges_extra_body() -> None:
    spec = RequestSpec(api="completions", max_tokens=3, prompt=(1, 2, 3), extra_body={"temperature": 0})
    body = json.loads(build_body(spec, Endpoint(base_url="http://h", model="m")))
    assert body["prompt"] == [1, 2, 3] and body["temperature"] == 0


def test_endpoint_urls_accept_a_trailing_v1() -> None:
    ep = Endpoint(base_url="http://h:1/v1/", model="m")
    assert ep.url_for("chat") == "http://h:1/v1/chat/completions"
    assert ep.url_for("completions") == "http://h:1/v1/completions"
    assert ep.resolved_metrics_url() == "http://h:1/metrics"
    assert Endpoint(base_url="http://h", model="m", metrics_url="").resolved_metrics_url() is None


def test_concurrency_and_rate_together_are_rejected() -> None:
    with pytest.raises(ConfigError, match="both concurrency and request_rate"):
        RunOptions(concurrency=2, request_rate=1.0)


def test_records_leave_the_event_loop_at_high_planned_load_unless_told() -> None:
    """The record helper takes over parsing from 128 lanes (or 100 arrivals/s) per worker; an explicit choice wins."""
    assert not RunOptions(concurrency=64).records_off_loop
    assert RunOptions(concurrency=256).records_off_loop
    assert RunOptions(concurrency=256, workers=1).records_off_loop
    assert not RunOptions(concurrency=256, workers=4).records_off_loop  # 64 lanes each
    assert RunOptions(request_rate=150.0).records_off_loop
    assert not RunOptions(concurrency=256, record_process=False).records_off_loop
    assert RunOptions(concurrency=1, record_process=True).records_off_loop


def test_the_worker_count_is_chosen_from_the_load_and_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """One event loop per 256 lanes or 200 arrivals/s, a core left free; one on 2 cores; a given count stands; a
    workload that cannot go to worker processes keeps one."""
    from support.workloads import SimpleWorkload

    from llmsweep.client.runner import resolve_workers

    class Unpicklable(SimpleWorkload):
        def __init__(self) -> None:
            super().__init__()
            self.lock = __import__("threading").Lock()

    cases: list[tuple[int, dict[str, Any], int]] = [
        (2, {"concurrency": 1024}, 1), (8, {"concurrency": 64}, 1), (8, {"concurrency": 512}, 2),
        (8, {"concurrency": 4096}, 7), (8, {"request_rate": 450.0}, 3), (4, {"request_rate": 1000.0}, 3),
    ]
    for cores, load, expected in cases:
        monkeypatch.setattr("os.sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert resolve_workers(SimpleWorkload(), RunOptions(**load)).workers == expected, (cores, load)
    assert resolve_workers(SimpleWorkload(), RunOptions(concurrency=512, workers=1)).workers == 1
    assert resolve_workers(Unpicklable(), RunOptions(concurrency=512)).workers == 1
