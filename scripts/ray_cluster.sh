#!/usr/bin/env bash
# A Ray cluster for multi-node training (verl's ray.init() joins it through RAY_ADDRESS):
#   node 0:   scripts/ray_cluster.sh head              -> prints the export lines for the driver and the workers
#   node k>0: HEAD_ADDR=<node 0 ip> scripts/ray_cluster.sh worker
#   any node: scripts/ray_cluster.sh stop | status
# then on node 0: export the printed RAY_ADDRESS and RAY_AUTH_MODE, and NNODES=<n> scripts/<group>/<launcher>.sh
# Every node needs the same checkout, environment, data and model paths (a shared file system).
#
# stdout carries only `export NAME=VALUE` lines (eval-able); Ray's own messages go to stderr.
# Environment:
#   RAY_PORT        the head's GCS port (default 6379)
#   HEAD_ADDR       worker: the head node's IP (127.0.0.1 when the nodes share a host)
#   NODE_IP         passed as ray start --node-ip-address, and the head's printed address (default: Ray's choice;
#                   printed: hostname -I's first)
#   RAY_AUTH_MODE   token (default) | disabled. token: the head creates ~/.ray/auth_token when missing; every
#                   worker node and the driver need the same token (copy the file, or RAY_AUTH_TOKEN /
#                   RAY_AUTH_TOKEN_PATH) and RAY_AUTH_MODE=token. Ray 2.60 left unset turns token auth on at the
#                   head when a token file exists but not at `ray start --address`: workers then fail with
#                   InvalidAuthToken, so the mode is always passed explicitly here.
#   RAY_TEMP_DIR    Ray's temp dir (default /tmp/ray); one per node when several nodes share a host. Keep it
#                   short: Ray's socket paths under it must stay within 107 characters.
#   NODE_PORT_BASE  if set, every other port of this node is taken from BASE on (node manager BASE, object
#                   manager +1, dashboard agent +2/+3, metrics +4, runtime-env agent +5, client server +6,
#                   dashboard +7, workers +10..+10+WORKER_PORTS-1 (default 100)); needed when nodes share a host
#   NUM_CPUS        logical CPUs Ray schedules on (default: the core count; CPU=1: 16). verl asks 3 per actor
#                   rank on its node (single_controller/ray/base.py:146-160) besides 1-CPU helper actors
#   GPUS_PER_NODE   GPUs of this node (default 8; CPU=1: 1 logical GPU per actor rank)
#   OBJECT_STORE_BYTES  object store size (default: Ray's, 30% of memory)
#   CPU=1           CPU mode (python -m verl_ext.main --cpu): logical GPUs, NUM_CPUS, no dashboard, and
#                   OMP_NUM_THREADS (default: nproc) exported to the node's processes: the cores this node's
#                   actor ranks share; split them when several nodes share a host (2 nodes on 4 cores: 2 each)
#   DASHBOARD_HOST  where the head's dashboard listens (default 0.0.0.0)
#   START_TIMEOUT_S how long `ray start` may take (default 120; a worker waits that long for an unreachable head)
#   RAY             the ray executable (default: ray next to the venv python)
#   HOLD=1          head / worker: stay in the foreground once the node runs (the export lines printed first) and
#                   stop the node on TERM, INT, HUP or USR1 (also one that arrives while it starts), or exit 1 when
#                   its processes end: how a Slurm job step holds a node (scripts/slurm/ray_job.sbatch), since
#                   `ray start` leaves its daemons outside the step's process tree
# Before starting, the node's ports (the head's RAY_PORT, and NODE_PORT_BASE's block when set) must be free: a port in
# use is refused by name.
# `stop` ends this node's processes only (those of the session started in RAY_TEMP_DIR, their process groups
# and children), not other Ray instances of the machine as `ray stop` would; TERM, then KILL after 3 s
# (gcs_server and raylet outlast TERM).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RAY="${RAY:-$( [[ -x "$ROOT/.venv/bin/ray" ]] && echo "$ROOT/.venv/bin/ray" || echo ray )}"
PORT="${RAY_PORT:-6379}"
TEMP_DIR="$(realpath -m "${RAY_TEMP_DIR:-/tmp/ray}")"
START_TIMEOUT_S="${START_TIMEOUT_S:-120}"
STATE="$TEMP_DIR/ray_cluster_session"  # the session dir of the node started here
CPU_MODE="${CPU:-0}"
if [[ "$CPU_MODE" == 1 ]]; then
  GPUS="${GPUS_PER_NODE:-1}" CPUS="${NUM_CPUS:-16}"
else
  GPUS="${GPUS_PER_NODE:-8}" CPUS="${NUM_CPUS:-}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the workers import verl_ext
export RAY_USAGE_STATS_ENABLED=0

die() { echo "ray_cluster.sh: $*" >&2; exit 2; }

auth_mode() {  # the explicit mode, exported for ray start / ray status
  export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"
  case "$RAY_AUTH_MODE" in
    token|disabled) ;;
    *) die "RAY_AUTH_MODE must be token or disabled, got '$RAY_AUTH_MODE'" ;;
  esac
}

has_token() { [[ -n "${RAY_AUTH_TOKEN:-}" || -s "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}" ]]; }

session_pids() {  # PIDs of the session in $STATE: its processes, their process groups, and their children
  local session pattern pgid own_pgid pids=() more
  [[ -s "$STATE" ]] || return 0
  session="$(cat "$STATE")"
  [[ "$session" == "$TEMP_DIR"/session_* ]] || return 0
  pattern="$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$session")"
  pids=($(pgrep -f -- "$pattern" || true))
  (( ${#pids[@]} )) || return 0  # nothing runs: no process groups or children to look for
  own_pgid="$(ps -o pgid= -p $$ | tr -d ' ')"
  for pgid in $(ps -o pgid= -p "$(IFS=,; echo "${pids[*]}")" | sort -u || true); do
    if [[ "$pgid" != "$own_pgid" ]] && (( pgid > 1 )); then pids+=($(pgrep -g "$pgid" || true)); fi
  done
  while :; do  # children (Ray's workers run in process groups of their own)
    more=($(pgrep -P "$(IFS=,; echo "${pids[*]}")" || true))
    more=($(comm -13 <(printf '%s\n' "${pids[@]}" | sort -u) <(printf '%s\n' "${more[@]}" | sort -u)))
    (( ${#more[@]} )) || break
    pids+=("${more[@]}")
  done
  printf '%s\n' "${pids[@]}" | sort -u | grep -vx -e "$$" -e 1 || true
}

alive() { local p; for p in "$@"; do if kill -0 "$p" 2>/dev/null; then echo "$p"; fi; done; }

stop_node() {
  local pids i
  # a signal right after ray start (HOLD=1) comes before start_node has noted the session: take the newest one
  if [[ "${HOLD:-0}" == 1 && ! -s "$STATE" && -e "$TEMP_DIR/session_latest" ]]; then
    readlink -f "$TEMP_DIR/session_latest" >"$STATE"
  fi
  pids=($(session_pids))
  if (( ${#pids[@]} == 0 )); then echo "no Ray node of ours in $TEMP_DIR" >&2; rm -f "$STATE"; return 0; fi
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for i in $(seq 6); do
    pids=($(alive "${pids[@]}"))
    (( ${#pids[@]} )) || break
    sleep 0.5
  done
  if (( ${#pids[@]} )); then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
  for i in $(seq 20); do  # KILL takes effect asynchronously
    pids=($(alive "${pids[@]}"))
    (( ${#pids[@]} )) || break
    sleep 0.25
  done
  (( ${#pids[@]} == 0 )) || die "still running after KILL: ${pids[*]}"
  rm -f "$STATE"
  echo "stopped the Ray node of $TEMP_DIR" >&2
}

in_use() {  # in_use PORT: something on this host accepts connections on PORT
  (exec 3<>"/dev/tcp/${NODE_IP:-127.0.0.1}/$1") 2>/dev/null
}

check_ports() {  # check_ports ROLE: refuse a port of this node that is taken, before ray start would fail on it
  local ports=() p
  [[ "$1" == head ]] && ports+=("$PORT")
  if [[ -n "${NODE_PORT_BASE:-}" ]]; then ports+=($(seq "$NODE_PORT_BASE" $((NODE_PORT_BASE + 7)))); fi
  for p in ${ports[@]+"${ports[@]}"}; do
    if in_use "$p"; then
      die "port $p on $(hostname) is in use (something listens on it): choose another RAY_PORT / NODE_PORT_BASE"
    fi
  done
}

start_node() {  # start_node ROLE RAY-START-ARGS...
  local role="$1"; shift
  if [[ -s "$STATE" && -n "$(session_pids)" ]]; then
    die "a Ray node already runs from $TEMP_DIR ($(cat "$STATE")): stop it first"
  fi
  check_ports "$role"
  local args=(--temp-dir="$TEMP_DIR" --num-gpus="$GPUS" --disable-usage-stats)
  [[ -n "$CPUS" ]] && args+=(--num-cpus="$CPUS")
  [[ -n "${NODE_IP:-}" ]] && args+=(--node-ip-address="$NODE_IP")
  [[ -n "${OBJECT_STORE_BYTES:-}" ]] && args+=(--object-store-memory="$OBJECT_STORE_BYTES")
  if [[ -n "${NODE_PORT_BASE:-}" ]]; then
    local b="$NODE_PORT_BASE"
    args+=(--node-manager-port=$b --object-manager-port=$((b + 1)) --dashboard-agent-grpc-port=$((b + 2))
           --dashboard-agent-listen-port=$((b + 3)) --metrics-export-port=$((b + 4))
           --runtime-env-agent-port=$((b + 5)) --min-worker-port=$((b + 10))
           --max-worker-port=$((b + 10 + ${WORKER_PORTS:-100} - 1)))
    [[ "$role" == head ]] && args+=(--ray-client-server-port=$((b + 6)) --dashboard-port=$((b + 7)))
  fi
  if [[ "$CPU_MODE" == 1 ]]; then
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
    export RAY_LD_PRELOAD_ON_WORKERS=1  # the workers keep Ray's jemalloc (verl_ext.cpu.DRIVER_ENV says why)
    [[ "$role" == head ]] && args+=(--include-dashboard=false)
  fi
  mkdir -p "$TEMP_DIR"
  # a session of its own: stop then finds the daemons by process group, apart from the caller's
  local started=0
  timeout -k 5 "$START_TIMEOUT_S" setsid --wait "$RAY" start "$@" "${args[@]}" </dev/null >&2 && started=1
  [[ -e "$TEMP_DIR/session_latest" ]] && readlink -f "$TEMP_DIR/session_latest" >"$STATE"
  if (( ! started )); then
    stop_node  # what the failed start left running
    die "ray start failed or ran past START_TIMEOUT_S=$START_TIMEOUT_S s (its messages above)"
  fi
}

holding() {  # with HOLD=1, from before ray start on: a signal stops whatever of the node runs
  [[ "${HOLD:-0}" == 1 ]] && trap 'stop_node; exit 0' TERM INT HUP USR1
  return 0
}

hold() {  # with HOLD=1: the node's processes stay this process's business until a signal or their end
  [[ "${HOLD:-0}" == 1 ]] || return 0
  set +e  # a signal also ends the sleep: its status must not end this shell before the trap has stopped the node
  while [[ -n "$(session_pids)" ]]; do sleep 2 & wait $!; done
  echo "ray_cluster.sh: the Ray node of $TEMP_DIR ended on its own" >&2
  exit 1
}

case "${1:-}" in
  head)
    holding
    auth_mode
    if [[ "$RAY_AUTH_MODE" == token ]] && ! has_token; then "$RAY" get-auth-token --generate >/dev/null; fi
    start_node head --head --port="$PORT" --dashboard-host="${DASHBOARD_HOST:-0.0.0.0}"
    ip="${NODE_IP:-$( (hostname -I 2>/dev/null || true) | awk '{print $1}')}"
    echo "export RAY_ADDRESS=${ip:-$(hostname)}:$PORT"
    echo "export RAY_AUTH_MODE=$RAY_AUTH_MODE"
    hold ;;
  worker)
    holding
    auth_mode
    if [[ "$RAY_AUTH_MODE" == token ]] && ! has_token; then
      die "RAY_AUTH_MODE=token needs the head's token on this node: copy its ~/.ray/auth_token here, or set" \
          "RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH (or start every node with RAY_AUTH_MODE=disabled)"
    fi
    start_node worker --address="${HEAD_ADDR:?HEAD_ADDR=<head node ip> is required}:$PORT"
    echo "export RAY_ADDRESS=$HEAD_ADDR:$PORT"
    echo "export RAY_AUTH_MODE=$RAY_AUTH_MODE"
    hold ;;
  stop) stop_node ;;
  status)
    auth_mode
    "$RAY" status --address="${HEAD_ADDR:-127.0.0.1}:$PORT" ;;
  *) echo "usage: scripts/ray_cluster.sh head|worker|stop|status" >&2; exit 2 ;;
esac
