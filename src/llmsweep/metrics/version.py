"""The version of llmsweep's measurement definitions: what a stored result's numbers mean.

A stored result is reused instead of run (`llmsweep run --reuse`) only when it was measured under the same
definitions. Bump :data:`MEASUREMENT_VERSION` whenever a change alters what a number measures without touching the
metric table — a metric's computation in `metrics.summary` / `metrics.accumulate` (a percentile method, TPOT's
definition, what counts as the profile window), the client's timing (when a request's send, first token or last
chunk is stamped), or a validity gate. The declarative part of the metric table (names, units, stored statistics,
samples) is hashed into :func:`measurement_identity` by itself, so adding or redefining a metric there needs no bump.
"""

from __future__ import annotations

import hashlib
import json

MEASUREMENT_VERSION = 7
"""1: the metric table and client timing of llmsweep 0.x (TPOT per request excluding the first token, E2EL to the
last content chunk, per-GPU throughput over last end − first send).
2: stream integrity judged: a stream that ended incomplete is a `truncated` failure (it was a success), short outputs
and warm-up failures are gated.
3: the acceptance read-back allows the realised AL's sampling error (max(0.10, 3 × SE)) and calls a point too short
to judge inconclusive, at most smoke (a fixed 0.10 failed correct short points by chance).
4: the whole-request timeout bounds a stream still flowing (a stream longer than it was a success), and a warm-up
request cancelled by a stop is no warm-up failure.
5: an agentic run whose root primer failed is stopped there and invalid (AgentX aborts it); it went on and could be
valid.
6: server counters over the window are summed scrape to scrape (a reset counts from zero, a series born after the
base scrape from 0; it was last − base, floored at 0), and a record whose times no request can have is left out of
every figure and invalidates the point (`requests.implausible`; its tokens counted, or it crashed the summary); the
client judges more responses failures: `finish_reason: error` (truncated), an SSE `event: error` (http), a reset
before `[DONE]` on a body read to the close (connection), a redirect (not followed); and agentic replay joins a
subagent at the first parent turn that starts after it ended (AIPerf's tiered joins: it ran in the background for
good when the next turn did not wait for it), replays a subagent's overlapping requests in parallel, and has the first
profiling turn wait for a subagent whose joining turn the warm-up replayed.
7: a stream without a content chunk is a `protocol` failure whatever its usage says (it was a success with no
latency), a usage count that is no count (a string, negative, fractional) or output text with a lone surrogate fails
its request as `protocol` (the chunks were counted instead), a usage count above max_tokens is not taken as the output's
size and such long outputs are gated as short ones are, an event-stream line past 8 MiB fails its request at once,
and a point with successful requests but no latency sample is invalid; an answer the model ended at once
(`finish_reason: stop`, no output text) is an `empty_output` failure, not `protocol`."""


def metric_table_digest() -> str:
    """16 hex of the metric table's declarative part: name, unit, stored column and statistics, per-request sample."""
    from llmsweep.metrics.registry import all_metrics

    rows = [[m.name, m.unit, m.column, list(m.stats), None if m.sample is None else [m.sample.column, m.sample.kind]]
            for m in all_metrics()]
    blob = json.dumps(sorted(rows, key=lambda r: str(r[0])), separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def measurement_identity() -> str:
    """What a result's numbers mean: the measurement version and the metric table's digest."""
    return f"m{MEASUREMENT_VERSION}-{metric_table_digest()}"
