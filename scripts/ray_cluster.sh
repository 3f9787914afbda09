#!/usr/bin/env bash
# A Ray cluster for multi-node training (verl's ray.init() joins it through RAY_ADDRESS):
#   node 0:   scripts/ray_cluster.sh head            -> prints the RAY_ADDRESS to use
#   node k>0: HEAD_ADDR=<node 0 ip> scripts/ray_cluster.sh worker
#   any node: scripts/ray_cluster.sh stop | status
# then on node 0: NNODES=<n> RAY_ADDRESS=auto scripts/bots/<setting>.sh
# Environment: RAY_PORT (default 6379), GPUS_PER_NODE (default 8), RAY (default: ray next to the venv python).
# Every node needs the same checkout, environment, data and model paths (a shared file system).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RAY="${RAY:-$( [[ -x "$ROOT/.venv/bin/ray" ]] && echo "$ROOT/.venv/bin/ray" || echo ray )}"
PORT="${RAY_PORT:-6379}"
GPUS="${GPUS_PER_NODE:-8}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the workers import verl_ext

case "${1:-}" in
  head)
    "$RAY" start --head --port="$PORT" --num-gpus="$GPUS" --dashboard-host=0.0.0.0
    echo "RAY_ADDRESS=$(hostname -I | awk '{print $1}'):$PORT (or RAY_ADDRESS=auto on this node)" ;;
  worker)
    "$RAY" start --address="${HEAD_ADDR:?HEAD_ADDR=<head node ip> is required}:$PORT" --num-gpus="$GPUS" ;;
  stop) "$RAY" stop ;;
  status) "$RAY" status ;;
  *) echo "usage: scripts/ray_cluster.sh head|worker|stop|status" >&2; exit 2 ;;
esac
