#!/usr/bin/env bash
# A real Slurm on one machine, to try scripts/slurm/ray_job.sbatch without a cluster (as root; Debian's slurm-wlm and
# munge, installed when missing): one slurmctld and NODES slurmd daemons on localhost, named n1..nNODES, each with
# CPUS_PER_NODE CPUs, everything (config, state, logs) in DIR.
#   DIR=/tmp/slurm scripts/slurm/one_host.sh start   -> prints `export SLURM_CONF=DIR/slurm.conf`
#   DIR=/tmp/slurm scripts/slurm/one_host.sh stop    -> ends this DIR's daemons (munged is left running)
# then, with that export: sbatch -N 2 scripts/slurm/ray_job.sbatch COMMAND...; sinfo -N; squeue; scancel JOB
# Environment: NODES (2), CPUS_PER_NODE (1), MEMORY_MB (4000 a node), PORT (the controller's port; the slurmd ports
# follow it: PORT+1..; default 17000), INSTALL (1: apt-get install slurm-wlm munge when sbatch is missing).
# Seen to work: Debian 12, slurm-wlm 22.05.8 (its slurmd takes -N NAME, so several run on one host).
set -euo pipefail

DIR="$(realpath -m "${DIR:?DIR=<a folder for the config, state and logs> is required}")"
NODES="${NODES:-2}" CPUS_PER_NODE="${CPUS_PER_NODE:-1}" MEMORY_MB="${MEMORY_MB:-4000}" PORT="${PORT:-17000}"
CONF="$DIR/slurm.conf"

die() { echo "one_host.sh: $*" >&2; exit 2; }

install() {
  command -v sbatch >/dev/null && command -v munged >/dev/null && return 0
  [[ "${INSTALL:-1}" == 1 ]] || die "sbatch or munged is missing (INSTALL=0): apt-get install slurm-wlm munge"
  (( EUID == 0 )) || die "sbatch or munged is missing and this is not root: apt-get install slurm-wlm munge"
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge)
  if ! "${apt[@]}" >&2; then  # the package lists may be missing or stale on a fresh machine
    apt-get update -q >&2 && "${apt[@]}" >&2 || die "apt-get could not install slurm-wlm and munge (above)"
  fi
}

write_conf() {
  local host i
  host="$(hostname -s)"
  mkdir -p "$DIR/state" "$DIR/log"
  cat >"$CONF" <<EOF
ClusterName=onehost
SlurmctldHost=$host
SlurmctldPort=$PORT
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=10
EOF
  for i in $(seq "$NODES"); do
    echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + i)) CPUs=$CPUS_PER_NODE" \
         "RealMemory=$MEMORY_MB State=UNKNOWN" >>"$CONF"
  done
  echo "PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
}

start() {
  local i
  install
  [[ -s "$DIR/slurmctld.pid" ]] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null && die "a slurmctld of $DIR runs: stop it first"
  write_conf
  if ! pgrep -x munged >/dev/null; then  # as root; its socket folder is made by the service, absent in a container
    mkdir -p -m 0755 /run/munge
    munged --force 2>/dev/null || die "munged did not start (munged --force as root)"
  fi
  export SLURM_CONF="$CONF"
  slurmctld -f "$CONF" -i  # -i: no state from an earlier start
  for i in $(seq "$NODES"); do slurmd -f "$CONF" -N "n$i"; done
  for i in $(seq 60); do  # the nodes register within seconds
    [[ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" == "$NODES" ]] && { echo "export SLURM_CONF=$CONF"; return 0; }
    sleep 0.5
  done
  sinfo -N >&2 || true
  die "the $NODES nodes were not idle after 30 s (logs: $DIR/log)"
}

stop() {
  local pids=() f
  for f in "$DIR"/slurmctld.pid "$DIR"/slurmd-*.pid; do
    [[ -s "$f" ]] && pids+=("$(cat "$f")")
  done
  (( ${#pids[@]} )) || { echo "no Slurm daemon of $DIR" >&2; return 0; }
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 40); do
    pids=($(for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && echo "$p"; done))
    (( ${#pids[@]} )) || { rm -f "$DIR"/*.pid; return 0; }
    sleep 0.25
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  rm -f "$DIR"/*.pid
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: DIR=... scripts/slurm/one_host.sh start|stop" >&2; exit 2 ;;
esac
