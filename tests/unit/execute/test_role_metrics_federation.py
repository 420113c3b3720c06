"""The federated `/metrics` of a role-by-role deployment (`execute.roles.FederatedMetrics`), over loopback: every
worker's samples, labelled with its role and index, parsed back by the client's scrape parser as written; a worker
that does not answer fails the scrape (named, in time for the client to hear it), never a partial deployment."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
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


@pytest.fixture
def hung() -> Iterator[str]:
    """A worker that takes the connection and never answers: a stopped process's port (SIGSTOP), whose kernel still
    completes the handshake and queues the request."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/metrics"


def test_a_hung_worker_is_named_in_a_502_the_clients_own_scrape_receives(worker: str, hung: str,
                                                                         tmp_path: Path) -> None:
    """A SIGSTOPped prefill worker of a live disaggregated run: the federation waited for it as long as the client's
    scrape waited for the federation, so the client always hung up first, logged only `TimeoutError`, and never heard
    which worker did not answer. The federation gives up first now, and its 502 names the worker."""
    import asyncio

    from llmsweep.client.scrape import MetricsScraper

    fed = FederatedMetrics([MetricsTarget("prefill", 0, worker), MetricsTarget("prefill", 1, hung),
                            MetricsTarget("decode", 0, worker)], "sglang:")
    path = tmp_path / "server_metrics.jsonl"

    async def scrape() -> None:  # the client as a run scrapes: its first scrape, and the last one as it stops
        scraper = MetricsScraper(fed.url, path)
        scraper.start()
        await scraper.stop()

    try:
        asyncio.run(scrape())
    finally:
        fed.stop()
    errors = [json.loads(line).get("error", "") for line in path.read_text().splitlines()]
    assert len(errors) == 2
    for error in errors:
        assert "502" in error and f"prefill worker 1 ({hung}): no answer within" in error, error


def test_a_client_that_hung_up_before_its_answer_is_no_traceback(hung: str, capfd: pytest.CaptureFixture[str],
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Each answer the federation wrote after its client had gone was a `BrokenPipeError` traceback on the run's
    stderr (70 of them in three minutes of a hung worker): now one line at debug level."""
    import logging
    import struct

    fed = FederatedMetrics([MetricsTarget("prefill", 0, hung)], None)
    caplog.set_level(logging.DEBUG, logger="llmsweep.execute.roles")
    try:
        with socket.create_connection(("127.0.0.1", int(fed.url.split(":")[2].split("/")[0]))) as gone:
            gone.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)  # the federation waits on the hung worker meanwhile
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # hang up: a reset
        with pytest.raises(urllib.error.HTTPError):  # a later scrape, answered once the first answer was written
            get(fed.url)
    finally:
        fed.stop()
    assert capfd.readouterr().err == ""
    assert [r.levelname for r in caplog.records if "hung up" in r.getMessage()] == ["DEBUG"]
