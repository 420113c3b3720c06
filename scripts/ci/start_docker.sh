#!/usr/bin/env bash
# Start a Docker daemon for CI, without systemd (Debian's docker.io: dockerd, containerd, runc, docker-init).
#
# Why: the docker executor is tested against a real daemon (tests/e2e/test_docker_daemon.py), not only by the
# `docker run` line it renders. The daemon keeps to what a CI container allows: vfs storage (no overlay mounts),
# no bridge and no iptables rules (the executor runs every container on the host's network). Nothing is pulled:
# the tests import their image from an empty root file system.
# Idempotent: a daemon that already answers and runs containers is left alone. Needs root. Exits 1, saying why,
# when no daemon comes up or one cannot run a container here (the tests then skip).
#
# Environment knobs:
#   DOCKER_CI_WAIT_S  seconds to wait for the daemon to answer (default 30).
#   DOCKER_CI_LOG     the daemon's log (default /var/log/dockerd-ci.log).
set -euo pipefail

WAIT_S=${DOCKER_CI_WAIT_S:-30}
LOG=${DOCKER_CI_LOG:-/var/log/dockerd-ci.log}

if ! command -v dockerd >/dev/null 2>&1; then
  echo "start_docker: dockerd is not installed; fix: apt-get install -y docker.io" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then
  echo "start_docker: must run as root (the daemon creates namespaces and /var/lib/docker)" >&2
  exit 2
fi
# A daemon that answers but cannot start a container here (no namespaces, no cgroups) is stopped again, so the tests
# skip rather than fail on the machine: the probe runs /bin/true from the host's folders in an imported empty image.
probe() {
  local empty mounts=() dir
  empty=$(mktemp -d)
  tar -C "$empty" -c . | docker import - llmsweep-ci/probe:1 >/dev/null || return 1
  rmdir "$empty"
  for dir in /usr /bin /lib /lib64; do [ -d "$dir" ] && mounts+=(-v "$dir:$dir:ro"); done
  docker run --rm --network=host "${mounts[@]}" llmsweep-ci/probe:1 /bin/true
}

if docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; then  # (a package's own start, or a second call)
  if ! said=$(probe 2>&1); then
    echo "start_docker: a daemon answers but cannot run a container here: $said" >&2
    exit 1
  fi
  echo "start_docker: a daemon already answers and runs containers (server $(docker info --format '{{.ServerVersion}}'))"
  exit 0
fi

start=$(date +%s%N)
nohup dockerd --storage-driver=vfs --iptables=false --ip6tables=false --bridge=none >"$LOG" 2>&1 &
pid=$!
for _ in $(seq $(( WAIT_S * 10 ))); do
  if docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; then
    if ! said=$(probe 2>&1); then
      echo "start_docker: dockerd answers but cannot run a container here: $said" >&2
      kill "$pid" 2>/dev/null || true
      exit 1
    fi
    echo "start_docker: dockerd $(docker info --format '{{.ServerVersion}}') up and running containers in" \
      "$(( ($(date +%s%N) - start) / 1000000 )) ms (log $LOG)"
    exit 0
  fi
  sleep 0.1
done
echo "start_docker: dockerd did not answer within ${WAIT_S} s; its log ($LOG) ends:" >&2
tail -20 "$LOG" >&2 || true
kill "$pid" 2>/dev/null || true
exit 1
