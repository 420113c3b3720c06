"""A write of the client's own output fails (a full disk, a quota, a file-size limit): the run stops at once — in-flight
requests cancelled, nothing more sent — and `run_benchmark` raises `OutputWriteError` with the errno's words and the
file. It went on sending the whole window (every planned prompt, or the duration) into records it could not keep, and
failed only at the end. No root needed: the client runs in a child process under a file-size limit (RLIMIT_FSIZE:
a write past it fails with EFBIG; Python ignores SIGXFSZ), or writes to /dev/full (ENOSPC)."""

from __future__ import annotations

import asyncio
import errno
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, StreamServer, run_in_subprocess

from llmsweep.client.records import OutputWriteError
from llmsweep.client.scrape import MetricsScraper

_LIMIT = 48 * 1024
"""The child's file-size limit: a few dozen records of 64 tokens (~1.3 KB each), reached in about a second."""

_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from support.workloads import SimpleWorkload
from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.client.records import OutputWriteError

out, where = Path(sys.argv[1]), sys.argv[3]
try:
    run_benchmark(SimpleWorkload(max_tokens=64), Endpoint(base_url=sys.argv[2], model="m"),
                  RunOptions(concurrency=1, duration_s=300, warmup_requests=0, record_process=where == "helper",
                             scrape_interval_s=0.005 if where == "scrapes" else 1 / 3),
                  out)
except OutputWriteError as exc:
    print(json.dumps({"errno": exc.errno, "file": exc.filename, "reason": exc.reason()}))
    sys.exit(3)
print(json.dumps({"finished": True}))
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (_LIMIT, _LIMIT))


@pytest.mark.parametrize("where", ["loop", "helper", "scrapes"],
                         ids=["records-in-loop", "records-helper", "server-metrics"])
def test_a_failed_write_of_the_clients_output_stops_the_run_at_once_with_the_errno(tmp_path: Path,
                                                                                  where: str) -> None:
    """Its records (written in the event loop, or by the record helper process) or its scrapes of /metrics (many a
    second, against a server slow to answer requests: `server_metrics.jsonl` reaches the limit first)."""
    config = ServerConfig(ttft_s=2.0) if where == "scrapes" else ServerConfig(itl_s=0.0005)
    server, url = run_in_subprocess(config)
    tests = str(Path(__file__).resolve().parents[1])
    try:
        # a 300-s window at concurrency 1: without the stop it ran the whole window (the timeout below ends it)
        child = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "b"), url, where, tests],
                               capture_output=True, text=True, timeout=120, preexec_fn=_limited)
    finally:
        server.kill()
        server.wait()
    assert child.returncode == 3, child.stdout + child.stderr[-3000:]
    said = json.loads(child.stdout.splitlines()[-1])
    assert said["errno"] == errno.EFBIG
    assert Path(said["file"]).name == ("server_metrics.jsonl" if where == "scrapes" else "records.jsonl"), said
    assert said["reason"] == (f"the client could not write {said['file']}: File too large (EFBIG); the run stopped "
                              "at once"), said
    assert "Traceback" not in child.stderr, child.stderr[-3000:]
    # run.json (small: under the limit) says why the run ended, and that it stopped sending then: what was sent is
    # what was recorded, give or take the request in flight, the one whose record failed and any finished but not yet
    # parsed (a handful; the 300-s window would have sent thousands)
    run = json.loads((tmp_path / "b" / "run.json").read_text())
    assert run["client"]["stop_reason"] == said["reason"]
    (worker,) = run["client"]["workers"]
    records = sum(1 for line in (tmp_path / "b" / "records.jsonl").read_bytes().splitlines() if line.endswith(b"}"))
    assert (records > 0 or where == "scrapes") and worker["started"] < records + 10, (worker["started"], records)
    assert worker["record_helper"] is (where == "helper")
    assert not (tmp_path / "b" / "summary.json").exists()  # no summary of records that are not the run's


def test_a_failed_write_of_a_scrape_stops_the_scraper_and_says_which_file(tmp_path: Path) -> None:
    """The /metrics scraper writes `server_metrics.jsonl`; a write that fails (here /dev/full: ENOSPC) ends its
    loop with the error kept for the run to stop on (`runner`), and a scrape asked for after it returns at once."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")

    async def scrape(url: str) -> tuple[OutputWriteError | None, bool]:
        scraper = MetricsScraper(url + "/metrics", Path("/dev/full"), interval_s=0.05)
        scraper.start()
        assert scraper._task is not None
        await asyncio.wait_for(asyncio.shield(scraper._task), 10)  # it ends on its own, on the failed write
        late = await scraper.scrape_now(timeout_s=5)
        await scraper.stop()
        return scraper.write_error, late

    with StreamServer(ServerConfig()) as srv:
        error, late = asyncio.run(scrape(srv.url))
    assert error is not None and error.errno == errno.ENOSPC and error.filename == "/dev/full"
    assert error.reason() == ("the client could not write /dev/full: No space left on device (ENOSPC); the run "
                              "stopped at once")
    assert late is False
