"""The REAL multi-node Slurm the tests run role-by-role deployments on (scripts/ci/start_slurm_multinode.sh: one
slurmd per network namespace, each node its own address on a bridge, its controller on its own config)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

MN_CONF = Path("/etc/slurm-mn/slurm.conf")
NODES_NEEDED = 3  # two prefill workers and one decode worker, each on a node of its own


def slurm(*argv: str) -> str:
    """A Slurm command against the multi-node cluster's controller; its stdout."""
    env = {**os.environ, "SLURM_CONF": str(MN_CONF)}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30, check=True).stdout


def cluster_nodes() -> dict[str, str]:
    """The cluster's usable nodes and their addresses (`NodeAddr`); skips the test when the cluster is not up."""
    if not MN_CONF.is_file():
        pytest.skip(f"no multi-node Slurm ({MN_CONF} missing; start it with scripts/ci/start_slurm_multinode.sh)")
    try:
        lines = slurm("sinfo", "-h", "-N", "-o", "%N %T").split("\n")
    except (subprocess.SubprocessError, OSError):
        pytest.skip("the multi-node Slurm controller does not answer (scripts/ci/start_slurm_multinode.sh)")
    up = [line.split()[0] for line in lines if len(line.split()) == 2 and line.split()[1] in ("idle", "mixed")]
    if len(up) < NODES_NEEDED:
        pytest.skip(f"the multi-node Slurm has {len(up)} usable node(s); {NODES_NEEDED} needed")
    addresses = {}
    for node in up:
        fields = dict(t.split("=", 1) for t in slurm("scontrol", "show", "node", "-o", node).split() if "=" in t)
        addresses[node] = fields["NodeAddr"]
    return addresses
