"""Prometheus scraper: polls the server's `/metrics` about three times a second into `server_metrics.jsonl`.

Each line is one scrape: `{"t": unix, "answered": unix, "samples": [[name, {labels}, value], ...]}` (histogram
buckets and `_created` samples are dropped: they are large and no summary uses them), or `{"t": unix, "error": "..."}`.
`t` is when the request went out, `answered` when the whole answer was in: the server read its values somewhere
between the two (a federated endpoint over several workers takes tens of milliseconds), so a scrape is a window's
base only if it was answered by the window's start (`metrics.server.ServerWindow`). Parsing
uses `prometheus_client.parser` in a thread so the event loop keeps stamping times.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from llmsweep.client.clock import now_unix
from llmsweep.client.records import OutputWriteError, write_output

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)



def scrape_line(scrape: Mapping[str, Any]) -> bytes:
    """One line of `server_metrics.jsonl` (newline included), whoever scraped: the client, or the predictor in virtual
    time. `json`, not orjson: an exposition may hold NaN, which orjson would write as null."""
    return (json.dumps(scrape, separators=(",", ":")) + "\n").encode()


def parse_exposition(text: str) -> list[list[Any]]:
    """Samples of a Prometheus text exposition as `[name, labels, value]`, without buckets and `_created`."""
    samples: list[list[Any]] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_bucket") or s.name.endswith("_created"):
                continue
            value = float(s.value)
            if value != value or value in (float("inf"), float("-inf")):
                continue
            samples.append([s.name, dict(s.labels), value])
    return samples


MARK_TIMEOUT_S = 2.0
"""How long the profiling start waits for its base scrape (`MetricsScraper.scrape_now`)."""
SCRAPE_TIMEOUT_MIN_S = 2.0
"""The least time one scrape waits for the whole answer (:func:`scrape_timeout_s`). An endpoint that gathers its page
from others (a deployment's federated `/metrics`, `execute.roles.FederatedMetrics`) gives up on them before this, so
that its error naming the one that did not answer reaches the client instead of the client hanging up first."""


def scrape_timeout_s(interval_s: float) -> float:
    """How long one scrape waits for the whole answer: three intervals, and at least `SCRAPE_TIMEOUT_MIN_S`."""
    return max(interval_s * 3, SCRAPE_TIMEOUT_MIN_S)


class MetricsScraper:
    """Background task scraping one URL until stopped; every scrape (or failure) becomes one JSON line."""

    def __init__(self, url: str, out_path: Path, *, interval_s: float = 1 / 3) -> None:
        self.url = url
        self.out_path = Path(out_path)
        self.interval_s = interval_s
        self.scrapes = 0
        self.failures = 0
        self.write_error: OutputWriteError | None = None
        """Writing a scrape into `out_path` failed (a full disk): the scraper stopped then; the run stops on it
        (`runner`) and raises it."""
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._kick = asyncio.Event()
        self._waiters: list[asyncio.Event] = []

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def scrape_now(self, timeout_s: float = MARK_TIMEOUT_S) -> bool:
        """One scrape that starts now, written before this returns: a window's base taken at its very start (the
        profiling start, after the warm-up drained; a scrape a third of a second earlier would count the warm-up's
        last requests into the window). False when the scraper is not running or no scrape came within
        `timeout_s` (the load must not wait on a slow endpoint; the window then has the scrape before)."""
        if self._task is None or self._task.done():
            return False
        done = asyncio.Event()
        self._waiters.append(done)
        self._kick.set()
        try:
            await asyncio.wait_for(done.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _loop(self) -> None:
        import aiohttp  # here: encoding and parsing scrapes (virtual time, the readers) needs no HTTP stack

        fd = os.open(self.out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        timeout = aiohttp.ClientTimeout(total=scrape_timeout_s(self.interval_s))
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                while True:
                    waiting, self._waiters = self._waiters, []  # a scrape that starts after they asked
                    self._kick.clear()
                    await self._scrape_once(session, fd)
                    for done in waiting:
                        done.set()
                    if self.write_error is not None:  # nothing more can be kept: no one waits for a scrape
                        for done in self._waiters:
                            done.set()
                        return
                    if self._waiters:
                        continue  # asked while that scrape was in flight: one more, at once
                    stop, kick = asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(self._kick.wait())
                    await asyncio.wait((stop, kick), timeout=self.interval_s, return_when=asyncio.FIRST_COMPLETED)
                    stop.cancel()
                    kick.cancel()
                    if self._stop.is_set():
                        await self._scrape_once(session, fd)  # one last scrape brackets the end of the run
                        for done in self._waiters:
                            done.set()
                        return
        finally:
            os.close(fd)

    async def _scrape_once(self, session: aiohttp.ClientSession, fd: int) -> None:
        import aiohttp

        t = now_unix()
        line: dict[str, Any]
        try:
            async with session.get(self.url) as resp:
                text = await resp.text(errors="replace")
                answered = now_unix()
                if resp.status != 200:
                    raise aiohttp.ClientResponseError(resp.request_info, (), status=resp.status, message=text[:200])
            samples = await asyncio.to_thread(parse_exposition, text)
            line = {"t": t, "answered": answered, "samples": samples}
            self.scrapes += 1
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            if self.failures == 0:
                log.warning("scraping %s failed: %s (server metrics may be missing)", self.url,
                            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            self.failures += 1
            line = {"t": t, "error": f"{type(exc).__name__}: {exc}"[:300]}
        try:
            write_output(fd, scrape_line(line), self.out_path)
        except OutputWriteError as exc:
            self.write_error = exc
            log.error("%s", exc.reason())
