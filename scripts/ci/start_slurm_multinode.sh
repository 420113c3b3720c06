#!/usr/bin/env bash
# Start a multi-node Slurm test cluster on one machine: N slurmd nodes, each in a network namespace of its own
# (own address on a bridge), and a controller of their own. Needs root and the packages start_slurm.sh needs, plus
# iproute2 (`ip`).
#
# Why: the Slurm executor places the roles of a disaggregated job (prefill and decode workers, a router) as srun steps
# on different nodes of one allocation; a test must see them land on different nodes and talk over the nodes'
# addresses, not over loopback. A network namespace gives each slurmd its own address (and its own port 6818), so
# the controller reaches each node at its NodeAddr, and a step on node 1 binds node 1's address.
#
# It coexists with the single-node cluster of start_slurm.sh: a separate cluster (`llmsweep-mn`) with its own
# configuration (/etc/slurm-mn/slurm.conf), controller port, state and pid files, sharing only munged. Point Slurm
# commands at it with SLURM_CONF=/etc/slurm-mn/slurm.conf (the tests do). Idempotent: what is already up is left
# alone. scripts/ci/stop_slurm_multinode.sh takes it down.
#
# Environment knobs:
#   SLURM_MN_NODES   nodes (default 3: enough for prefill, decode and a router on the prefill node, plus one spare)
#   SLURM_MN_CPUS    CPUs each node advertises (default 4; config_overrides lets a 2-core box run a few steps)
#   SLURM_MN_SUBNET  first three octets of the bridge's /24 (default 10.201.0); the host is .1, node K is .(10+K)
#   SLURM_MN_WAIT_S  seconds to wait for every node to become idle (default 60)
set -euo pipefail

for bin in munged slurmctld slurmd sinfo ip; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
    echo "start_slurm_multinode: '$bin' is not installed;" \
         "fix: apt-get install -y slurmctld slurmd slurm-client munge iproute2" >&2
    exit 2
  fi
done
if [ "$(id -u)" != 0 ]; then
  echo "start_slurm_multinode: must run as root (it creates network namespaces and starts daemons)" >&2
  exit 2
fi

START_NS=$(date +%s%N)
N=${SLURM_MN_NODES:-3}
CPUS=${SLURM_MN_CPUS:-4}
NET=${SLURM_MN_SUBNET:-10.201.0}
WAIT_S=${SLURM_MN_WAIT_S:-60}
BRIDGE=llmsmn-br
HOST_ADDR="$NET.1"
ETC=/etc/slurm-mn
CONF_FILE=$ETC/slurm.conf
CTLD_PORT=6819
MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 / (N + 1) ))   # MiB per node
[ "$MEM" -gt 512 ] || MEM=512
CTL=$(hostname -s)

running() {  # running <pidfile> <comm>
  local pidfile=$1 comm=$2 pid
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$comm" ]
}

# --- munge: shared with the single-node cluster (one key, one socket; a unix socket crosses network namespaces) ---
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
running /run/munge/munged.pid munged || runuser -u munge -- /usr/sbin/munged --force
for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done

# --- network: a bridge with the host's address, one namespace per node joined to it by a veth pair ---
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
  ip addr add "$HOST_ADDR/24" dev "$BRIDGE"
fi
ip link set "$BRIDGE" up
# Bridged frames must not go through the host's iptables FORWARD chain (a Docker host drops them there).
if [ -w /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
  echo 0 > /proc/sys/net/bridge/bridge-nf-call-iptables
fi
NODES=()
for k in $(seq 0 $((N - 1))); do
  ns=llmsmn$k veth=llmsmn${k}h addr="$NET.$((10 + k))"
  NODES+=("mn$k")
  if ! ip netns list | grep -qw "$ns"; then ip netns add "$ns"; fi
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$BRIDGE"
    ip -n "$ns" addr add "$addr/24" dev eth0
  fi
  ip link set "$veth" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
done

# --- Slurm: its own controller (port 6819) and one slurmd per namespace, all reading $CONF_FILE ---
mkdir -p "$ETC" /var/spool/slurmctld-mn /var/log/slurm-mn /run/slurm-mn
NODE_LINES=""
for k in $(seq 0 $((N - 1))); do
  NODE_LINES+="NodeName=mn$k NodeAddr=$NET.$((10 + k)) NodeHostname=mn$k CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"$'\n'
  mkdir -p "/var/spool/slurmd-mn/mn$k"
done
CONF=$(cat <<CONF
# Written by llmsweep scripts/ci/start_slurm_multinode.sh: $N nodes, each slurmd in network namespace llmsmnK.
ClusterName=llmsweep-mn
SlurmctldHost=${CTL}(${HOST_ADDR})
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
StateSaveLocation=/var/spool/slurmctld-mn
SlurmdSpoolDir=/var/spool/slurmd-mn/%n
SlurmctldPidFile=/run/slurm-mn/slurmctld.pid
SlurmdPidFile=/run/slurm-mn/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm-mn/slurmctld.log
SlurmdLogFile=/var/log/slurm-mn/slurmd-%n.log
SlurmctldPort=${CTLD_PORT}
SlurmdPort=6818
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
Waittime=0
${NODE_LINES}PartitionName=multinode Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
)
if running /run/slurm-mn/slurmctld.pid slurmctld && ! printf '%s\n' "$CONF" | cmp -s - "$CONF_FILE"; then
  echo "start_slurm_multinode: the cluster runs with a different $CONF_FILE; leaving it alone" \
       "(run scripts/ci/stop_slurm_multinode.sh first to reconfigure)" >&2
else
  printf '%s\n' "$CONF" > "$CONF_FILE"
fi
export SLURM_CONF=$CONF_FILE
if running /run/slurm-mn/slurmctld.pid slurmctld; then
  echo "start_slurm_multinode: slurmctld already running"
else
  /usr/sbin/slurmctld -f "$CONF_FILE"
fi
for k in $(seq 0 $((N - 1))); do
  if running "/run/slurm-mn/slurmd-mn$k.pid" slurmd; then
    echo "start_slurm_multinode: slurmd mn$k already running"
  else
    # nsenter, not `ip netns exec`: that remounts /sys without /sys/fs/cgroup, which slurmd needs
    nsenter --net="/run/netns/llmsmn$k" /usr/sbin/slurmd -f "$CONF_FILE" -N "mn$k"
  fi
done

deadline=$(( $(date +%s) + WAIT_S ))
until [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -c -E '^(idle|mixed|allocated)$')" -ge "$N" ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "start_slurm_multinode: not every node is idle after ${WAIT_S}s; see /var/log/slurm-mn/" >&2
    sinfo -N -l >&2 || true
    exit 1
  fi
  sleep 0.2
done
sinfo -N
echo "start_slurm_multinode: ${N} $([ "$N" = 1 ] && echo node || echo nodes) up in $(( ($(date +%s%N) - START_NS) / 1000000 )) ms;" \
     "use SLURM_CONF=$CONF_FILE"
