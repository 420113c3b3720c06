"""The synthetic corpus a measured run replayed, kept beside its evidence.

A synthetic corpus is a pure function of its profile and of the generator's code, and a run records only its digest
(`provenance.workload.corpus_digest`). Once the generator changes, the profile gives other traces, and `llmsweep sim
calibrate` must refuse to replay the run's points (it would fit other work under their name). So a run that measures
a real engine on a synthetic corpus writes that corpus, once, to ``RUN/traces/<digest>.jsonl.gz`` (the Weka
JSON lines `traces synth` writes, gzip-compressed: ~1.5 MB becomes ~0.2 MB; the loader reads it back to the same
digest), and calibration replays that file when it is there. Simulated runs keep nothing: calibration leaves their
points out.
"""

from __future__ import annotations

from pathlib import Path

from llmsweep.workload.traces.digest import DIGEST_PREFIX, replay_digest
from llmsweep.workload.traces.loader import GZIP_SUFFIX
from llmsweep.workload.traces.synth import SynthProfile, synthetic_corpus, write_jsonl

TRACES_DIR = "traces"
"""In a run folder: the synthetic corpora its measured agentic jobs replayed, one file per corpus digest."""


def kept_name(digest: str) -> str:
    """The file name of the corpus with `digest` (``sha256:<hex>``): its first 16 hex digits."""
    return f"{digest.removeprefix(DIGEST_PREFIX)[:16]}{GZIP_SUFFIX}"


def keep_synthetic(run_dir: Path, profile: SynthProfile) -> tuple[Path, bool]:
    """Write the corpus of `profile` to the run's traces folder unless it is there; returns its path and whether
    this call wrote it. The digest is the replay's (its playable traces'), so the file is found by what a summary
    records."""
    corpus = synthetic_corpus(profile)
    path = run_dir / TRACES_DIR / kept_name(replay_digest(corpus))
    if path.is_file():
        return path, False
    write_jsonl(list(corpus.traces), path)
    return path, True


def kept_corpus(job_dir: Path, digest: str) -> Path | None:
    """The corpus file kept with the run that holds job folder `job_dir` (``RUN/jobs/<id>``), for `digest`; None
    when the run kept none (a simulated run, or one older than this)."""
    path = job_dir.parent.parent / TRACES_DIR / kept_name(digest)
    return path if path.is_file() else None
