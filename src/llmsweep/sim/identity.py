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
_ADAPTER = _SIM_CODE.parent / "engines" / "sim.py"
"""How a job becomes the simulator's launch and its acceptance estimate."""


@functools.cache
def simulator_digest() -> str:
    """16 hex over the simulator's source files and every catalog file it may read (packaged, then the user's
    directories, in the order they are layered); computed once per process."""
    from llmsweep.catalog.sources import catalog_dirs

    files = [*sorted(_SIM_CODE.glob("*.py")), _ADAPTER]
    for directory in catalog_dirs():
        files += sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:  # a catalog file that cannot be read now: the catalog load says why, not this digest
            h.update(b"?")
        h.update(b"\0")
    return h.hexdigest()[:16]
