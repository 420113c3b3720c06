"""What a simulated result's numbers depend on beyond the job's launch: the simulator's code and the catalogs it reads.

A simulated job's launch (`llmsweep sim serve` and its flags) names the model, hardware and settings, not the
figures the simulator draws from them: a new hardware bandwidth, a calibration factor or a change to the step-time
model gives other numbers under the same launch. So a stored simulated result stands for a job (`run --reuse`) only
under the same :func:`simulator_digest`.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

_SIM_CODE = Path(__file__).resolve().parent
"""The simulator's package (`llmsweep.sim`): engine core, step-time model, KV pool, predictor, server."""
_PACKAGE = _SIM_CODE.parent
_LAUNCH_AND_DRIVE = (
    _PACKAGE / "engines" / "sim.py",  # how a job becomes the simulator's launch and its acceptance estimate
    _PACKAGE / "cli" / "sim.py",  # `sim serve` itself: a live role's links (its options are `sim.serve_args`'s)
    _PACKAGE / "execute" / "virtual.py",  # a job run on the core in virtual time: its window, scrapes and files
    _PACKAGE / "execute" / "virtual_disagg.py",  # the same for a disaggregated deployment's roles
    _PACKAGE / "power" / "virtual.py",  # the modelled power over virtual time
    _PACKAGE / "router.py",  # the live roles' router: which prefill and decode worker a request meets, cached tokens
    _PACKAGE / "http_app.py",  # the live servers' error bodies and stop grace
)
"""Code outside `llmsweep.sim` that decides a simulated job's figures under a given launch: a default of `sim serve`
(say `--max-running-requests`) that changes gives other numbers for every launch that does not set it."""


def simulator_files() -> list[Path]:
    """The files :func:`simulator_digest` covers: the simulator's code, then every catalog file it may read
    (packaged, then the user's directories, in the order they are layered)."""
    from llmsweep.catalog.sources import catalog_dirs

    files = [*sorted(_SIM_CODE.glob("*.py")), *_LAUNCH_AND_DRIVE]
    for directory in catalog_dirs():
        files += sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))
    return files


@functools.cache
def simulator_digest() -> str:
    """16 hex over :func:`simulator_files` (names and bytes); computed once per process."""
    files = simulator_files()
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:  # a catalog file that cannot be read now: the catalog load says why, not this digest
            h.update(b"?")
        h.update(b"\0")
    return h.hexdigest()[:16]
