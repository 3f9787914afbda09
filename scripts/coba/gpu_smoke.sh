#!/usr/bin/env bash
# CoBA-RL on one GPU in about five minutes (an estimate: not yet run on a GPU), to prove the install and the method
# before a paper run: recipes/coba/gpu_smoke.yaml = the paper setting qwen3-1.7b-base (allocator coba, DAPO's
# clip-higher, G = 16) at smoke sizes, the same chain as scripts/coba/qwen3-1.7b-base.sh:
#   1. 256 + 32 embedded arithmetic tasks (python -m data_prep arithmetic; nothing downloaded but the model),
#   2. 3 steps of 16 prompts and a budget of 16 x 16 rollouts up to 512 tokens, vLLM rollout, one validation and
#      one checkpoint after the last step (python -m verl_ext.main), 3. the per-step table, the rollouts per task,
#      and the keys to read (scripts/smoke.sh).
#   scripts/coba/gpu_smoke.sh [allocator=grpo|knapsack|...] [Hydra overrides...]
# Environment: scripts/smoke.sh (MODEL_PATH default Qwen/Qwen2.5-0.5B-Instruct, DATA_DIR default data/coba_smoke,
# OUT_DIR default outputs/coba_smoke, GPUS_PER_NODE default 1, FORCE=1, DRY_RUN=1).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ROOT/scripts/smoke.sh"
smoke_setup coba

if smoke_needs "$DATA_DIR/arithmetic/train.parquet"; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size 256 --test-size 32
fi
EXPERIMENT_NAME="${EXPERIMENT_NAME:-gpu_smoke-$(override_value allocator coba "$@")}"
smoke_train coba_train allocator "$@"
