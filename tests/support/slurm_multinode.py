"""The REAL multi-node Slurm the tests run role-by-role deployments on (scripts/ci/start_slurm_multinode.sh: one
slurmd per network namespace, each node its own address on a bridge, its controller on its own config)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmsweep.words import count_of

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
        pytest.skip(f"the multi-node Slurm has {count_of(len(up), 'usable node')}; {NODES_NEEDED} needed")
    addresses = {}
    for node in up:
        fields = dict(t.split("=", 1) for t in slurm("scontrol", "show", "node", "-o", node).split() if "=" in t)
        addresses[node] = fields["NodeAddr"]
    return addresses


def node_netns(node: str) -> Path:
    """The network namespace node `node` runs in (its slurmd's, from `SlurmdPidFile`); skips the test when it cannot
    be entered here (not root, or no such file)."""
    conf = dict(line.split("=", 1) for line in MN_CONF.read_text().splitlines() if "=" in line and
                not line.lstrip().startswith("#"))
    pid_file = Path(conf.get("SlurmdPidFile", "").replace("%n", node))
    try:
        netns = Path(f"/proc/{int(pid_file.read_text().strip())}/ns/net")
        os.stat(netns)
    except (OSError, ValueError):
        pytest.skip(f"the network namespace of node {node} cannot be entered here (its slurmd's, {pid_file})")
    if os.geteuid() != 0:
        pytest.skip("entering a node's network namespace (nsenter) needs root")
    return netns


def hold_port(node: str, address: str, port: int) -> subprocess.Popen[str]:
    """A process that listens on `address:port` inside node `node`'s network namespace, outside Slurm (a job of
    Slurm's own would share the node, which a role-by-role deployment's allocation never does: `--exclusive`);
    returns once it listens. The caller terminates it."""
    hold = (f"import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            f"s.bind(('{address}', {port})); s.listen(); print('bound', flush=True); time.sleep(300)")
    blocker = subprocess.Popen(["nsenter", f"--net={node_netns(node)}", sys.executable, "-c", hold],
                               stdout=subprocess.PIPE, text=True)
    assert blocker.stdout is not None and blocker.stdout.readline().strip() == "bound"
    return blocker
