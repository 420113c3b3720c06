#!/usr/bin/env bash
# Start a single-node Slurm (munge + slurmctld + slurmd) for CI, without systemd and without installing anything.
#
# Why: the Slurm executor is tested against real Slurm commands, not mocks. The packages come from the CI image
# (`apt-get install -y slurmctld slurmd slurm-client munge`); this script only configures and starts them.
# Idempotent: daemons already running are left alone, so calling it twice is safe. Needs root.
#
# Environment knobs:
#   SLURM_CI_CPUS   CPUs the node advertises (default: max(nproc, 4); more than the machine has is allowed through
#                   SlurmdParameters=config_overrides, so a 2-core CI box can still run a few small jobs at once).
#   SLURM_CI_WAIT_S seconds to wait for the node to become idle (default 60).
set -euo pipefail

for bin in munged slurmctld slurmd sinfo; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
    echo "start_slurm: '$bin' is not installed; fix: apt-get install -y slurmctld slurmd slurm-client munge" >&2
    exit 2
  fi
done
if [ "$(id -u)" != 0 ]; then
  echo "start_slurm: must run as root (it writes /etc/slurm and starts daemons)" >&2
  exit 2
fi

NODE=$(hostname -s)
NPROC=$(nproc)
CPUS=${SLURM_CI_CPUS:-$(( NPROC > 4 ? NPROC : 4 ))}
MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 1024 ))   # MiB, 1 GiB slack
[ "$MEM" -gt 512 ] || MEM=512
WAIT_S=${SLURM_CI_WAIT_S:-60}

# A daemon counts as running when its pid file names a live process with the expected command name.
running() {  # running <pidfile> <comm>
  local pidfile=$1 comm=$2 pid
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$comm" ]
}

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi

CONF=$(cat <<CONF
# Written by llmsweep scripts/ci/start_slurm.sh: one node at 127.0.0.1, no cgroups, no accounting.
ClusterName=llmsweep-ci
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
Waittime=0
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
)

if running /run/slurmctld.pid slurmctld && ! printf '%s\n' "$CONF" | cmp -s - /etc/slurm/slurm.conf; then
  echo "start_slurm: Slurm is running with a different /etc/slurm/slurm.conf; leaving it alone" \
       "(run scripts/ci/stop_slurm.sh first to reconfigure)" >&2
else
  printf '%s\n' "$CONF" > /etc/slurm/slurm.conf
fi

if running /run/munge/munged.pid munged; then
  echo "start_slurm: munged already running"
else
  runuser -u munge -- /usr/sbin/munged --force
fi
for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n | unmunge >/dev/null || { echo "start_slurm: munge does not answer; see /var/log/munge/munged.log" >&2; exit 1; }

if running /run/slurmctld.pid slurmctld; then echo "start_slurm: slurmctld already running"; else /usr/sbin/slurmctld; fi
if running /run/slurmd.pid slurmd; then echo "start_slurm: slurmd already running"; else /usr/sbin/slurmd; fi

deadline=$(( $(date +%s) + WAIT_S ))
until sinfo -h -o '%T' 2>/dev/null | grep -q -E '^(idle|mixed|allocated)'; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "start_slurm: node not idle after ${WAIT_S}s; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
    sinfo -N -l >&2 || true
    exit 1
  fi
  sleep 0.2
done
sinfo
