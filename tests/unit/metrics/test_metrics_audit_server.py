"""Audit of the server-metric read-back: counter resets and series born inside the window (expected values by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.metrics.server import summarise_server


def _scrape(t: float, *samples: tuple[str, dict[str, str], float]) -> dict[str, Any]:
    return {"t": t, "samples": [[name, labels, value] for name, labels, value in samples]}


def _vllm_spec(t: float, accepted: float, drafts: float) -> dict[str, Any]:
    return _scrape(t, ("vllm:spec_decode_num_accepted_tokens_total", {}, accepted),
                   ("vllm:spec_decode_num_drafts_total", {}, drafts))


def test_a_counter_reset_inside_the_window_counts_from_zero_as_prometheus_increase_does() -> None:
    """A worker restarted mid-window: its counters fall back to 0 and climb again. The increase over the window is
    (1200 - 1000) before the reset, 100 after it up to the first scrape, then 300 - 100: 500 accepted tokens over
    (1100 - 1000) + 50 + (150 - 50) = 250 drafts, AL = 1 + 500 / 250 = 3. Last minus base read 0 (and no AL)."""
    scrapes = [_vllm_spec(0.0, 1000, 1000), _vllm_spec(1.0, 1200, 1100), _vllm_spec(2.0, 100, 50),
               _vllm_spec(3.0, 300, 150)]
    spec = summarise_server(scrapes, start=0.5, end=3.0)["spec_decode"]
    assert spec["accepted_tokens"] == 500 and spec["drafts"] == 250
    assert spec["acceptance_length"] == pytest.approx(3.0)


def test_a_monotonic_counter_still_reads_last_minus_base() -> None:
    scrapes = [_vllm_spec(0.0, 10, 10), _vllm_spec(1.0, 30, 20), _vllm_spec(2.0, 70, 40), _vllm_spec(9.0, 999, 999)]
    spec = summarise_server(scrapes, start=0.5, end=2.0)["spec_decode"]
    assert (spec["accepted_tokens"], spec["drafts"]) == (60, 30)


def test_a_labelled_series_born_inside_the_window_counts_from_zero() -> None:
    """SGLang creates `cached_tokens_total{cache_source="host"}` at the first host-cache hit: the base scrape (before
    the window) had the device child but not the host one, so all 400 host tokens were read inside the window
    (reading the first value seen as the base lost 300 of them). Expected: prompt 3000 - 1000 = 2000, device
    300 - 100 = 200, host 400 - 0 = 400."""
    device, host = {"cache_source": "device"}, {"cache_source": "host"}
    scrapes = [
        _scrape(0.0, ("sglang:prompt_tokens_total", {}, 1000), ("sglang:cached_tokens_total", device, 100)),
        _scrape(1.0, ("sglang:prompt_tokens_total", {}, 2000), ("sglang:cached_tokens_total", device, 200),
                ("sglang:cached_tokens_total", host, 300)),
        _scrape(2.0, ("sglang:prompt_tokens_total", {}, 3000), ("sglang:cached_tokens_total", device, 300),
                ("sglang:cached_tokens_total", host, 400)),
    ]
    cache = summarise_server(scrapes, start=0.5, end=2.0)["cache"]
    assert cache["gpu_hit_rate"] == pytest.approx(200 / 2000)
    assert cache["cpu_hit_rate"] == pytest.approx(400 / 2000)
    assert cache["overall_hit_rate"] == pytest.approx(600 / 2000)


def test_without_a_scrape_before_the_window_a_series_first_value_is_its_base() -> None:
    """No scrape answered by the start: nothing says what the counter held then, so its first value in the window is
    the base (as before), not zero."""
    scrapes = [_scrape(1.0, ("vllm:prompt_tokens_total", {}, 5000)),
               _scrape(2.0, ("vllm:prompt_tokens_total", {}, 5600))]
    assert summarise_server(scrapes, start=0.5, end=2.0)["tokens"]["prompt_total"] == 600


def test_a_torn_last_scrape_is_skipped_and_the_window_closes_on_the_scrape_before(tmp_path: Path) -> None:
    path = tmp_path / "server_metrics.jsonl"
    whole = [_scrape(0.0, ("vllm:prompt_tokens_total", {}, 10)), _scrape(1.0, ("vllm:prompt_tokens_total", {}, 25))]
    path.write_text("".join(json.dumps(s) + "\n" for s in whole) + '{"t": 2.0, "samples": [["vllm:prompt_to')
    out = summarise_server(path, start=0.5, end=1.5)
    assert out["tokens"]["prompt_total"] == 15 and out["scrapes"] == 2


def test_a_damaged_scrape_line_inside_the_file_is_warned_about_and_one_without_its_time_does_not_crash(
        tmp_path: Path) -> None:
    """The base scrape's line damaged: the counters' base falls back to the warm-up scrape before it (10 -> 40 is
    read, not 25 -> 40), which only a warning can tell the reader. A scrape without `t` stopped the summary
    (KeyError)."""
    path = tmp_path / "server_metrics.jsonl"
    lines = [json.dumps(_scrape(0.0, ("vllm:prompt_tokens_total", {}, 10))),
             '{"t": 0.4, "samples": [["vllm:prompt_tokens_total", {}, 2#DAMAGED',
             json.dumps({"samples": [["vllm:prompt_tokens_total", {}, 30]]}),
             json.dumps(_scrape(1.0, ("vllm:prompt_tokens_total", {}, 40)))]
    path.write_text("\n".join(lines) + "\n")
    out = summarise_server(path, start=0.5, end=1.5)
    assert out["tokens"]["prompt_total"] == 30 and out["scrapes"] == 2
    assert any(w.startswith("2 lines of the /metrics scrapes are not readable scrapes") for w in out["warnings"])
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join([lines[0], lines[3]]) + '\n{"t": 2.0, "samp')
    assert summarise_server(torn, start=0.5, end=1.5)["warnings"] == []


def test_an_sglang_window_without_speculative_samples_names_no_acceptance_method() -> None:
    """A server that did not speculate exports no spec series: its block has no acceptance length, and no method
    either (it had named `mean of sglang:spec_accept_length` for a figure nothing gave). With the gauge, both."""
    plain = [_scrape(t, ("sglang:generation_tokens_total", {}, 100.0 * t)) for t in (0.0, 1.0, 2.0)]
    spec = summarise_server(plain, start=0.5, end=2.0)["spec_decode"]
    assert spec["acceptance_length"] is None and spec["method"] is None
    gauged = [_scrape(t, ("sglang:generation_tokens_total", {}, 100.0 * t), ("sglang:spec_accept_length", {}, 2.5))
              for t in (0.0, 1.0, 2.0)]
    spec = summarise_server(gauged, start=0.5, end=2.0)["spec_decode"]
    assert spec["acceptance_length"] == pytest.approx(2.5) and spec["method"] == "mean of sglang:spec_accept_length"
