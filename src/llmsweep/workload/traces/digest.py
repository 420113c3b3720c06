"""A stable fingerprint of a trace corpus: what a run replayed, so a later replay can prove it replays the same.

The digest is sha256 over a canonical serialisation of what replay reads from each trace, in corpus order: its id
and block size; for every entry in file order, a subagent's identity and recorded end, and every request's start,
recorded duration, input and output token counts and prefix-block hash ids. It does not depend on how the traces
were stored (JSON key order, whitespace, unknown fields), only on what they hold, so the same corpus read from a file or
regenerated from a synthetic profile gives the same digest, and any change to what a replay would send changes it.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import numpy as np

from llmsweep.workload.traces.schema import SubagentEntry, Trace, TraceRequest

DIGEST_PREFIX = "sha256:"


def _text(h: hashlib._Hash, value: str) -> None:
    raw = value.encode()
    h.update(struct.pack("<I", len(raw)))
    h.update(raw)


def _request(h: hashlib._Hash, req: TraceRequest) -> None:
    # floats as exact IEEE doubles: a regenerated corpus digests alike only when every timing is bit-identical
    h.update(struct.pack("<cddqqI", b"r", req.t, req.api_time, req.in_tokens, req.out, len(req.hash_ids)))
    h.update(np.asarray(req.hash_ids, dtype="<i8").tobytes())


def corpus_digest(traces: Iterable[Trace]) -> str:
    """`sha256:<hex>` of the corpus as replay sees it (see the module docstring for what it covers)."""
    h = hashlib.sha256(b"llmsweep-traces-v1")
    for trace in traces:
        h.update(b"T")
        _text(h, trace.id)
        h.update(struct.pack("<I", trace.block_size))
        for entry in trace.requests:
            if isinstance(entry, SubagentEntry):
                h.update(b"S")
                _text(h, entry.agent_id)
                h.update(struct.pack("<dI", entry.end, len(entry.requests)))
                for req in entry.requests:
                    _request(h, req)
            else:
                _request(h, entry)
    return DIGEST_PREFIX + h.hexdigest()
