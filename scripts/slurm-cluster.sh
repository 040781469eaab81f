#!/usr/bin/env bash
# A private Slurm cluster on this machine, for the Slurm executor's tests; no systemd, no /etc.
#
#   scripts/slurm-cluster.sh up DIR [NODES] [GPUS]   # default 1 node, 2 fake GPUs per node
#   scripts/slurm-cluster.sh down DIR
#
# `up` installs the Debian packages when they are missing (root only), then starts munged
# (own key and socket), slurmctld and one slurmd per simulated node (nodeK on 127.0.0.(K+1),
# its own port), everything under DIR. Each node's GPUs are fake character devices
# (`mknod PATH c 1 3`, the numbers of /dev/null) that nothing ever opens: Slurm only needs
# device files to hand out GPU indexes. It prints `export SLURM_CONF=...` on stdout (the
# one line a caller evaluates) once every node is idle. Running `up` again on a running
# cluster with the same shape only prints the line; another shape restarts it.
# `down` stops the daemons by the pids recorded under DIR (never by name), then waits.
# Why these settings: ../shared/docs/slurm-notes.md (no cgroups, no accounting database,
# jobcomp/filetxt for finished jobs, batch_sched_delay=0 so a trivial job takes ~1 s).
# Ports are derived from DIR, so several clusters (one per test session) can run at once.
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"  # the daemons live there; a non-root PATH may lack it

usage() { echo "usage: $0 up DIR [NODES] [GPUS] | down DIR" >&2; exit 2; }
die() { echo "slurm-cluster: $*" >&2; exit "${2:-3}"; }

install_packages() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
    && command -v sbatch >/dev/null && command -v munged >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "Slurm is not installed and only root can install it"
  echo "slurm-cluster: installing slurmctld slurmd slurm-client munge" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
    --no-install-recommends slurmctld slurmd slurm-client munge >&2 \
    || die "apt-get install of the Slurm packages failed"
}

alive() {  # the pid file names a live process
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

# Stop every daemon recorded under DIR/run by its pid: TERM to all at once (each takes
# 1-2 s to exit, so one by one was 7 s for two nodes), up to 15 s, then KILL. Pid files
# are removed. Never by process name: other sessions may run clusters of their own.
down() {
  local dir=$1 f pid pids=() i
  for f in "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    [ -e "$f" ] || continue
    if alive "$f"; then pid=$(cat "$f"); kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); fi
  done
  for i in $(seq 150); do
    local left=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [ $left = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  rm -f "$dir"/run/*.pid
  return 0
}

# A free TCP port range of NODES+1 ports, from a hash of DIR so parallel clusters differ.
pick_port() {
  local dir=$1 n=$2 base p ok
  base=$(( 20000 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 20000 ))
  for _ in $(seq 50); do
    ok=1
    for p in $(seq "$base" $(( base + n ))); do
      if ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then ok=0; break; fi
    done
    [ $ok = 1 ] && { echo "$base"; return; }
    base=$(( base + n + 7 ))
  done
  die "no free port range found"
}

write_conf() {
  local dir=$1 nodes=$2 gpus=$3 port=$4 k addr g
  cat > "$dir/etc/slurm.conf" <<EOF
# Written by scripts/slurm-cluster.sh: a private test cluster (nodes=$nodes gpus=$gpus).
ClusterName=harnesstest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge-socket/munge.socket.2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
KillWait=30
MinJobAge=300
SlurmdTimeout=30
EOF
  : > "$dir/etc/gres.conf.tmp"
  echo "AutoDetect=off" >> "$dir/etc/gres.conf.tmp"
  for k in $(seq "$nodes"); do
    addr="127.0.0.$(( k + 1 ))"
    echo "NodeName=node$k NodeAddr=$addr Port=$(( port + k )) CPUs=4 RealMemory=1000" \
      "Gres=gpu:gfx1100:$gpus State=UNKNOWN" >> "$dir/etc/slurm.conf"
    mkdir -p "$dir/spool/node$k" "$dir/dev/node$k"
    for g in $(seq 0 $(( gpus - 1 ))); do
      [ -c "$dir/dev/node$k/renderD$(( 128 + g ))" ] \
        || mknod "$dir/dev/node$k/renderD$(( 128 + g ))" c 1 3
      echo "NodeName=node$k Name=gpu Type=gfx1100 File=$dir/dev/node$k/renderD$(( 128 + g ))" \
        "Flags=amd_gpu_env" >> "$dir/etc/gres.conf.tmp"
    done
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" \
    >> "$dir/etc/slurm.conf"
  mv "$dir/etc/gres.conf.tmp" "$dir/etc/gres.conf"
}

start_munge() {
  local dir=$1 i
  mkdir -p "$dir/munge" "$dir/munge-socket"
  chmod 700 "$dir/munge"; chmod 755 "$dir/munge-socket"  # munged refuses a closed socket dir
  [ -s "$dir/munge/munge.key" ] || { head -c 1024 /dev/urandom > "$dir/munge/munge.key"; }
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge-socket/munge.socket.2" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" || die "munged did not start (see $dir/log/munged.log)"
  for i in $(seq 50); do [ -S "$dir/munge-socket/munge.socket.2" ] && return 0; sleep 0.1; done
  die "munged made no socket"
}

wait_idle() {  # every node up (idle, or busy with jobs), 30 s at most
  local dir=$1 nodes=$2 i
  for i in $(seq 300); do
    [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -cE '^(idle|mixed|allocated)$' || true)" \
      = "$nodes" ] && return 0
    sleep 0.1
  done
  die "nodes not up after 30 s: $(sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' '); logs: $dir/log"
}

up() {
  local dir=$1 nodes=$2 gpus=$3 shape port k
  [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 64 ] \
    || die "NODES must be 1..64, not '$nodes'" 2
  [[ "$gpus" =~ ^[0-9]+$ ]] && [ "$gpus" -ge 1 ] && [ "$gpus" -le 16 ] \
    || die "GPUS must be 1..16, not '$gpus'" 2
  install_packages
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)
  export SLURM_CONF="$dir/etc/slurm.conf"
  shape="nodes=$nodes gpus=$gpus"
  if [ -f "$dir/shape" ] && [ "$(cat "$dir/shape")" = "$shape" ] \
     && alive "$dir/run/munged.pid" && alive "$dir/run/slurmctld.pid"; then
    local all=1
    for k in $(seq "$nodes"); do alive "$dir/run/slurmd-node$k.pid" || all=0; done
    if [ $all = 1 ]; then wait_idle "$dir" "$nodes"; echo "export SLURM_CONF=$SLURM_CONF"; return; fi
  fi
  down "$dir"
  rm -rf "$dir/state" "$dir/spool" "$dir/etc"
  mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/dev"
  port=$(pick_port "$dir" "$nodes")
  write_conf "$dir" "$nodes" "$gpus" "$port"
  echo "$shape" > "$dir/shape"
  start_munge "$dir"
  slurmctld -f "$SLURM_CONF" || die "slurmctld did not start (see $dir/log/slurmctld.log)"
  for k in $(seq "$nodes"); do
    slurmd -f "$SLURM_CONF" -N "node$k" || die "slurmd node$k did not start (see $dir/log)"
  done
  wait_idle "$dir" "$nodes"
  echo "export SLURM_CONF=$SLURM_CONF"
}

[ $# -ge 2 ] || usage
case "$1" in
  up) [ $# -le 4 ] || usage; up "$2" "${3:-1}" "${4:-2}" ;;
  down) [ $# -eq 2 ] || usage; [ -d "$2" ] || exit 0; down "$(cd "$2" && pwd -P)" ;;
  *) usage ;;
esac
