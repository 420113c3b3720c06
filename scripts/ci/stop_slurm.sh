#!/usr/bin/env bash
# Stop the daemons started by start_slurm.sh, each by the PID in its own pid file (never by name), and wait until
# they are gone so a following start_slurm.sh does not race a dying daemon for its port.
set -u
for f in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "stop_slurm: stopped $(basename "$f" .pid) (pid $pid)"
  fi
  rm -f "$f"
done
exit 0
