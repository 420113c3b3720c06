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
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.workload.traces.schema import Corpus, SubagentEntry, Trace, TraceRequest

DIGEST_PREFIX = "sha256:"
FILE_DIGEST_PREFIX = "file-sha256:"
"""A trace file digested by its bytes (:func:`file_digest`: a Mooncake trace), not by what a replay reads of it."""


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


def playable_traces(traces: Iterable[Trace]) -> list[Trace]:
    """The traces a replay plays (and its corpus digest covers): those with a top-level request."""
    return [t for t in traces if t.main_requests]


def memo_digest(memo: dict[Hashable, Any], playable: list[Trace]) -> str:
    """The corpus digest of `playable` (a corpus's playable traces), once per corpus in its memo (`Corpus.memo`): the
    points of a sweep share it, and hashing every request's block ids took 0.66 CPU-s per point of the quickstart
    (measured 2026-12-02)."""
    digest: str | None = memo.get("digest")
    if digest is None:
        digest = memo["digest"] = corpus_digest(playable)
    return digest


def replay_digest(corpus: Corpus) -> str:
    """The digest a replay of `corpus` records (`AgenticWorkload.corpus_digest`: its playable traces'), memoised."""
    return memo_digest(corpus.memo, playable_traces(corpus.traces))


def file_digest(path: str | Path) -> str:
    """`file-sha256:<hex>` of a trace file's bytes as they are on disk (a gzip-compressed file: its compressed bytes):
    the corpus digest a Mooncake replay records (`MooncakeWorkload.corpus_digest`, `provenance.workload.corpus_digest`)
    and what `run --reuse` and a `--resume` compare it with (`changes.reuse.corpus_now`). It covers the whole file,
    whatever `max_rows` replays of it (the file is what the recipe names)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return FILE_DIGEST_PREFIX + h.hexdigest()
