#!/usr/bin/env bash
# Take down what start_slurm_multinode.sh started: each daemon by the PID in its own pid file (never by name), then
# the namespaces, veth pairs and the bridge. munged is shared with the single-node cluster and left running.
set -u
for f in /run/slurm-mn/slurmd-*.pid /run/slurm-mn/slurmctld.pid; do
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "stop_slurm_multinode: stopped $(basename "$f" .pid) (pid $pid)"
  fi
  rm -f "$f"
done
for ns in $(ip netns list 2>/dev/null | awk '/^llmsmn[0-9]+/{print $1}'); do
  ip link del "${ns}h" 2>/dev/null || true
  ip netns del "$ns" && echo "stop_slurm_multinode: removed namespace $ns"
done
ip link del llmsmn-br 2>/dev/null || true
exit 0
