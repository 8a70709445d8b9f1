#!/usr/bin/env bash
# A real multi-node Slurm cluster on this one machine, for tests and demos (see
# /work/shared/notes/slurm-on-one-machine.md and docs/slurm.md).
#
#   scripts/slurm-cluster.sh start DIR [--nodes N] [--port-base P] [--constrain-devices]
#   scripts/slurm-cluster.sh stop DIR
#
# start: as root, writes slurm.conf, gres.conf and topology.conf into DIR (created if missing), starts
# munged only when none answers `munge -n | unmunge`, then slurmctld and one slurmd per virtual node
# n0..n{N-1} (NodeHostname=localhost, a port each), writes DIR/env (`SLURM_CONF=DIR/slurm.conf`, source it
# or export it) and waits until sinfo shows every node idle. Two leaves under one spine: the first
# ceil(N/2) nodes on leaf l0, the rest on l1, spine s0. Each node has Gres=gpu:2 (empty device files).
# --constrain-devices: the two GPUs are character devices (DIR/dev/gpu0 = 1,5 like /dev/zero, gpu1 = 1,7
# like /dev/full), and slurmd confines every step to the GPUs it asked for (proctrack/cgroup, task/cgroup,
# cgroup.conf ConstrainDevices=yes, cgroup v1; the node cgroups are /sys/fs/cgroup/*/slurm_<node>, so one
# such cluster at a time per host). Refused (exit 3, "cannot constrain devices here") where this host has no
# writable cgroup v1 devices controller or cannot make device nodes.
# stop: cancels the cluster's jobs, stops the daemons this script started (pid files in DIR), then kills
# any process still holding a file under DIR (slurmstepd and tasks survive their slurmd). Never touches
# /etc/slurm or a munged it did not start.
set -euo pipefail

die() { echo "slurm-cluster: $*" >&2; exit 1; }
log() { echo "slurm-cluster: $*" >&2; }

# wait_until DEADLINE_SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.5 s until it succeeds.
wait_until() {
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || { log "timed out after ${limit}s waiting for $what"; return 1; }
    sleep 0.5
  done
}

port_free() { ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

pick_port_base() {
  local base
  for base in 17100 17200 17300 17400 17500 17600 17700 17800; do
    local ok=1 p
    for ((p = base; p < base + NODES + 1; p++)); do port_free "$p" || { ok=0; break; }; done
    [ $ok -eq 1 ] && { echo "$base"; return 0; }
  done
  die "no free port range found"
}

# A failed start stops whatever it had started before exiting.
abort_start() {
  log "$*"
  stop >&2 || true
  exit 1
}

munge_answers() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

write_config() {
  local ctld_port=$PORT_BASE first_port=$((PORT_BASE + 1)) last_port=$((PORT_BASE + NODES))
  local last=$((NODES - 1)) half=$(((NODES + 1) / 2))
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/dev" "$DIR/log" "$DIR/run"
  local proctrack=proctrack/linuxproc task=task/none
  if [ "$CONSTRAIN" -eq 1 ]; then
    rm -f "$DIR/dev/gpu0" "$DIR/dev/gpu1"
    mknod "$DIR/dev/gpu0" c 1 5 && mknod "$DIR/dev/gpu1" c 1 7 || return 1
    proctrack=proctrack/cgroup task=task/cgroup
    printf '%s\n' "CgroupPlugin=cgroup/v1" "CgroupMountpoint=/sys/fs/cgroup" "ConstrainDevices=yes" \
      "ConstrainCores=no" "ConstrainRAMSpace=no" >"$DIR/cgroup.conf"
  else
    : >"$DIR/dev/gpu0"
    : >"$DIR/dev/gpu1"
  fi
  cat >"$DIR/slurm.conf" <<EOF
# Written by scripts/slurm-cluster.sh: a local test cluster, $NODES virtual nodes on this machine.
ClusterName=shepherdtest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=$proctrack
TaskPlugin=$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=30
MessageTimeout=20
KillWait=5
InactiveLimit=0
MinJobAge=60
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
TopologyPlugin=topology/tree
NodeName=n[0-$last] NodeHostname=localhost Port=[$first_port-$last_port] CPUs=2 RealMemory=1024 Gres=gpu:2 Feature=fakegpu,x86
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$DIR/gres.conf"
  local i
  for ((i = 0; i < NODES; i++)); do
    echo "NodeName=n$i Name=gpu File=$DIR/dev/gpu[0-1]" >>"$DIR/gres.conf"
  done
  local leaf0 leaf1
  leaf0=$(seq -s, -f 'n%g' 0 $((half - 1)))
  {
    echo "SwitchName=l0 Nodes=$leaf0"
    if [ "$half" -lt "$NODES" ]; then
      leaf1=$(seq -s, -f 'n%g' "$half" "$last")
      echo "SwitchName=l1 Nodes=$leaf1"
      echo "SwitchName=s0 Switches=l0,l1"
    else
      echo "SwitchName=s0 Switches=l0"
    fi
  } >"$DIR/topology.conf"
  echo "SLURM_CONF=$DIR/slurm.conf" >"$DIR/env"
}

all_idle() {
  local states
  states=$(sinfo -N -h -o '%N %T' 2>/dev/null) || return 1
  [ "$(echo "$states" | grep -c ' idle$')" -eq "$NODES" ]
}

start() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (slurmd runs jobs as any user)"
  for c in munge unmunge munged slurmctld slurmd sinfo ss; do
    command -v "$c" >/dev/null || die "$c not found (install slurm-wlm slurmd slurmctld slurm-client munge)"
  done
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  chmod 0755 "$DIR"
  [ -e "$DIR/run/slurmctld.pid" ] && die "$DIR already holds a cluster (stop it first)"
  if [ "$CONSTRAIN" -eq 1 ] && ! { [ -d /sys/fs/cgroup/devices ] && [ -w /sys/fs/cgroup/devices/devices.allow ]; }; then
    echo "slurm-cluster: cannot constrain devices here: no writable cgroup v1 devices controller at /sys/fs/cgroup/devices" >&2
    exit 3
  fi
  PORT_BASE=${PORT_BASE:-$(pick_port_base)}
  if ! write_config; then
    echo "slurm-cluster: cannot constrain devices here: mknod of the fake GPUs failed" >&2
    exit 3
  fi
  export SLURM_CONF="$DIR/slurm.conf"

  if munge_answers; then
    log "using the munged that already answers"
  else
    mkdir -p /run/munge "$DIR/munge"
    chmod 0755 /run/munge
    chmod 0700 "$DIR/munge"
    head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
    chmod 0400 "$DIR/munge/munge.key"
    munged --force -S /run/munge/munge.socket.2 --key-file "$DIR/munge/munge.key" \
      --pid-file "$DIR/run/munged.pid" --log-file "$DIR/log/munged.log" --seed-file "$DIR/munge/seed"
    wait_until 20 "munged to answer" munge_answers || abort_start "munged did not start (see $DIR/log/munged.log)"
  fi

  slurmctld -f "$SLURM_CONF" -c -i || abort_start "slurmctld did not start (see $DIR/log/slurmctld.log)"
  wait_until 60 "slurmctld to answer" scontrol -o ping ||
    abort_start "slurmctld did not answer (see $DIR/log/slurmctld.log)"
  local i
  for ((i = 0; i < NODES; i++)); do
    mkdir -p "$DIR/spool/n$i"
    slurmd -f "$SLURM_CONF" -N "n$i" || abort_start "slurmd n$i did not start (see $DIR/log/slurmd-n$i.log)"
  done
  if ! wait_until 120 "every node idle" all_idle; then
    sinfo -N >&2 || true
    abort_start "nodes not idle (see $DIR/log)"
  fi
  log "up: $NODES nodes, ports $PORT_BASE-$((PORT_BASE + NODES)); SLURM_CONF=$SLURM_CONF"
}

# Sends SIG to the pid in FILE if that process still exists.
signal_pidfile() {
  local file=$1 sig=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null) || return 0
  [ -n "$pid" ] && kill "-$sig" "$pid" 2>/dev/null || true
}

pidfile_alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Pids of processes with an open file under DIR (this cluster's daemons and slurmstepds, whose logs are
# there) and all their descendants (the step tasks). The caller's own shell is never one of them.
holders() {
  local p link direct=()
  for p in /proc/[0-9]*; do
    for link in "$p"/fd/*; do
      case "$(readlink "$link" 2>/dev/null)" in
        "$DIR"/*) direct+=("${p#/proc/}"); break ;;
      esac
    done
  done
  [ ${#direct[@]} -eq 0 ] && return 0
  ps -e -o pid=,ppid= | awk -v roots="${direct[*]}" -v self="$$" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      for (p in parent) {
        q = p
        for (depth = 0; depth < 64 && q > 1; depth++) { if (q in keep) { if (p != self) print p; break } q = parent[q] }
      }
    }'
}

no_holders() { [ -z "$(holders)" ]; }

stop() {
  [ -d "$DIR" ] || die "no such directory: $DIR"
  DIR=$(cd "$DIR" && pwd)
  export SLURM_CONF="$DIR/slurm.conf"
  if pidfile_alive "$DIR/run/slurmctld.pid"; then
    scancel --quiet --full --signal=KILL --user=root 2>/dev/null || true
    scancel --quiet --user=root 2>/dev/null || true
  fi
  local f
  for f in "$DIR"/run/slurmd-*.pid "$DIR/run/slurmctld.pid"; do signal_pidfile "$f" TERM; done
  for f in "$DIR"/run/slurmd-*.pid "$DIR/run/slurmctld.pid"; do
    wait_until 15 "$(basename "$f" .pid) to exit" bash -c "! kill -0 \$(cat '$f' 2>/dev/null) 2>/dev/null" ||
      signal_pidfile "$f" KILL
  done
  local pids
  pids=$(holders)
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  wait_until 10 "step processes to exit" no_holders || log "processes still hold files under $DIR"
  if [ -f "$DIR/run/munged.pid" ]; then
    signal_pidfile "$DIR/run/munged.pid" TERM
    wait_until 10 "munged to exit" bash -c "! kill -0 \$(cat '$DIR/run/munged.pid' 2>/dev/null) 2>/dev/null" ||
      signal_pidfile "$DIR/run/munged.pid" KILL
    # Its socket and lock file stay behind otherwise; remove them unless another munged answers there now.
    munge_answers || rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  fi
  # A --constrain-devices cluster leaves its nodes' (empty) cgroups behind: remove them, deepest first.
  if [ -f "$DIR/cgroup.conf" ]; then
    local node
    for node in $(sed -n 's/^NodeName=\(n[0-9]*\) .*/\1/p' "$DIR/gres.conf" 2>/dev/null); do
      find /sys/fs/cgroup/*/slurm_"$node" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
  fi
  rm -f "$DIR"/run/*.pid
  log "stopped the cluster in $DIR"
}

cmd=${1:-}
DIR=${2:-}
[ -n "$cmd" ] && [ -n "$DIR" ] || { echo "usage: $0 start|stop DIR [--nodes N] [--port-base P] [--constrain-devices]" >&2; exit 2; }
shift 2
NODES=5
PORT_BASE=
CONSTRAIN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --port-base) PORT_BASE=$2; shift 2 ;;
    --constrain-devices) CONSTRAIN=1; shift ;;
    *) die "unknown option $1" ;;
  esac
done
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "--nodes wants a positive number"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) die "unknown command $cmd" ;;
esac
