"""The scraper stamps when a scrape went out and when its answer was in: a slow `/metrics` (a federation reading
several workers) reads its values between the two, and the window's base depends on which."""

from __future__ import annotations

import asyncio
import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from support.loopback import serving

from llmsweep.client.scrape import MetricsScraper

DELAY_S = 0.2


class _SlowMetrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(DELAY_S)
        body = b"# TYPE x_total counter\nx_total 1.0\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_each_scrape_records_when_it_was_answered(tmp_path: Path) -> None:
    out = tmp_path / "server_metrics.jsonl"

    async def scrape() -> None:
        scraper = MetricsScraper(f"{url}/metrics", out, interval_s=0.05)
        scraper.start()
        await asyncio.sleep(0.3)
        await scraper.stop()

    with serving(_SlowMetrics) as url:
        asyncio.run(scrape())
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and all("samples" in line for line in lines), lines
    for line in lines:
        assert line["answered"] - line["t"] >= DELAY_S * 0.9, line
