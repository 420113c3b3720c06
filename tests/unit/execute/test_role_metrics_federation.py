"""The federated `/metrics` of a role-by-role deployment (`execute.roles.FederatedMetrics`), over loopback: every
worker's samples, labelled with its role and index, parsed back by the client's scrape parser as written; a worker
that does not answer fails the scrape (named), never a partial deployment."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from support.loopback import serving

from llmsweep.client.scrape import parse_exposition
from llmsweep.execute.roles import FederatedMetrics, MetricsTarget

PAGE = """# HELP sglang:num_running_reqs running
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 3.0
# HELP sglang:prompt_tokens prompt tokens
# TYPE sglang:prompt_tokens counter
sglang:prompt_tokens_total{model_name="m"} 120.0
# HELP sglang:e2e_request_latency_seconds latency
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 2.0
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 2.0
sglang:e2e_request_latency_seconds_sum{model_name="m"} 1.5
sglang:e2e_request_latency_seconds_count{model_name="m"} 2.0
"""


class _Page(BaseHTTPRequestHandler):
    page = PAGE
    """The exposition it serves (a subclass serves another)."""

    def do_GET(self) -> None:
        data = self.page.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def worker() -> Iterator[str]:
    with serving(_Page) as url:
        yield f"{url}/metrics"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


def test_every_workers_samples_come_back_labelled_with_its_role_and_index(worker: str) -> None:
    fed = FederatedMetrics([MetricsTarget("prefill", 0, worker), MetricsTarget("prefill", 1, worker),
                            MetricsTarget("decode", 0, worker)], "sglang:")
    try:
        samples = parse_exposition(get(fed.url))
    finally:
        fed.stop()
    alone = parse_exposition(PAGE)  # what scraping one worker keeps, names as written (buckets dropped)
    assert len(samples) == 3 * len(alone)
    for role, index in (("prefill", "0"), ("prefill", "1"), ("decode", "0")):
        mine = [[n, {k: v for k, v in labels.items() if k not in ("role", "worker")}, value]
                for n, labels, value in samples if (labels["role"], labels["worker"]) == (role, index)]
        assert mine == alone
    assert fed.prefix == "sglang:"


def test_a_worker_that_does_not_answer_fails_the_scrape_and_is_named(worker: str) -> None:
    gone = f"http://127.0.0.1:{closed_port()}/metrics"
    fed = FederatedMetrics([MetricsTarget("prefill", 0, worker), MetricsTarget("decode", 0, gone)], "sglang:")
    try:
        with pytest.raises(urllib.error.HTTPError) as raised:
            get(fed.url)
        assert raised.value.code == 502
        assert f"decode worker 0 ({gone})" in raised.value.read().decode()
    finally:
        fed.stop()


def test_workers_are_read_direct_past_a_proxy_the_host_sets(worker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A login node with HTTP_PROXY set: the workers are on the allocation's nodes, which NO_PROXY rarely lists."""
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{closed_port()}")  # nothing listens there
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    fed = FederatedMetrics([MetricsTarget("decode", 0, worker)], "sglang:")
    try:
        status, body = fed.page()
    finally:
        fed.stop()
    assert status == 200, body


def test_a_workers_own_role_and_worker_labels_are_kept_as_exported_labels_not_overwritten() -> None:
    """Two series of one worker that differ only in a label the federation adds stay two series (Prometheus's
    `exported_<label>`); overwritten, they came back as one name and label set twice."""
    page = ('# TYPE llmsweep:x counter\nllmsweep:x_total{worker="a",role="r"} 1.0\n'
            'llmsweep:x_total{worker="b",role="r"} 2.0\n')

    class Labelled(_Page):
        pass

    Labelled.page = page

    with serving(Labelled) as url:
        fed = FederatedMetrics([MetricsTarget("decode", 1, f"{url}/metrics")], None)
        try:
            samples = parse_exposition(get(fed.url))
        finally:
            fed.stop()
    assert samples == [
        ["llmsweep:x_total", {"exported_worker": "a", "exported_role": "r", "role": "decode", "worker": "1"}, 1.0],
        ["llmsweep:x_total", {"exported_worker": "b", "exported_role": "r", "role": "decode", "worker": "1"}, 2.0]]


def test_the_routers_retried_legs_reach_the_summary_naming_the_worker_beside_the_abandoned() -> None:
    """llmsweep's router sends a leg again, once, on a new connection when the pooled one it went out on was closed
    before any of the worker's answer came, and counts it in its `/version` (`retried`, by pool and worker URL): the
    federation reads it as a labelled counter, and the router role's metrics say how many in the window, by worker,
    beside `abandoned` (nothing said how often a worker closed connections the router still held)."""
    from llmsweep.execute.roles import ROUTER_COUNTERS, federate, version_exposition
    from llmsweep.metrics.model import RoleMetrics
    from llmsweep.metrics.roles import deployment_blocks

    router = MetricsTarget("router", 0, "http://router/version", counters=ROUTER_COUNTERS)
    closing, other = "http://10.0.0.2:8000", "http://10.0.0.3:8000"

    def scrape(t: float, retried: dict[str, dict[str, int]]) -> dict[str, Any]:
        doc = {"refused_no_handle": 0, "abandoned": {}, "retried": retried, "routed": 9}
        return {"t": t, "samples": parse_exposition(federate([(router, version_exposition(doc, ROUTER_COUNTERS))]))}

    scrapes = [scrape(0.0, {"prefill": {closing: 2}}),  # before the window: not its
               scrape(5.0, {"prefill": {closing: 5}, "decode": {other: 1}})]
    provenance = {"topology": {"disaggregated": True, "roles": {"router": {"kind": "router", "workers": 1}}}}
    said = deployment_blocks(provenance, scrapes, 1.0, 6.0)["roles"]["router"]["metrics"]
    metrics = RoleMetrics.model_validate(said)
    assert metrics.retried == {f"prefill worker {closing}": 3.0, f"decode worker {other}": 1.0}
    assert metrics.abandoned is None
    quiet = [scrape(0.0, {}), scrape(5.0, {})]
    assert deployment_blocks(provenance, quiet, 1.0, 6.0)["roles"]["router"]["metrics"]["retried"] is None


def test_the_routers_abandoned_requests_reach_the_summary_naming_the_worker_they_waited_on() -> None:
    """llmsweep's router counts, in its `/version`, the requests a client gave up on while a worker had sent nothing
    of its answer (`abandoned`, by pool and worker URL); the federation reads them as a labelled counter beside the
    workers' metrics, and the router role's metrics in the summary say how many in the window, by worker, as the
    router's errors name it (`decode worker URL`)."""
    from llmsweep.execute.roles import ROUTER_COUNTERS, federate, version_exposition
    from llmsweep.metrics.model import RoleMetrics
    from llmsweep.metrics.roles import deployment_blocks

    router = MetricsTarget("router", 0, "http://router/version", counters=ROUTER_COUNTERS)
    hung, slow = "http://10.0.0.2:8000", "http://10.0.0.3:8000"

    def scrape(t: float, abandoned: dict[str, dict[str, int]]) -> dict[str, Any]:
        page = version_exposition({"refused_no_handle": 0, "abandoned": abandoned, "routed": 9}, ROUTER_COUNTERS)
        return {"t": t, "samples": parse_exposition(federate([(router, page)]))}

    scrapes = [scrape(0.0, {"decode": {slow: 1}}),  # before the window: not its
               scrape(5.0, {"decode": {slow: 1, hung: 3}, "prefill": {slow: 1}})]
    provenance = {"topology": {"disaggregated": True, "roles": {"router": {"kind": "router", "workers": 1}}}}
    metrics = RoleMetrics.model_validate(deployment_blocks(provenance, scrapes, 1.0, 6.0)["roles"]["router"]["metrics"])
    assert metrics.abandoned == {f"decode worker {hung}": 3.0, f"prefill worker {slow}": 1.0}
    assert metrics.refused_no_kv == 0.0
    quiet = [scrape(0.0, {}), scrape(5.0, {})]  # a router that counted none: nothing said, nothing invented
    assert deployment_blocks(provenance, quiet, 1.0, 6.0)["roles"]["router"]["metrics"]["abandoned"] is None
