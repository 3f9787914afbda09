#!/usr/bin/env bash
# CoBA-RL end to end on this CPU with nothing downloaded (recipes/coba/cpu_embedded.yaml):
#   1. a pool of embedded arithmetic tasks (data_prep), 2. a few training steps with allocator=coba
#   (python -m verl_ext.main --cpu), 3. the per-step table (reward, timings), rollouts per task, allocator scalars.
#   scripts/coba/cpu_embedded.sh [Hydra overrides...]   e.g. trainer.total_training_steps=2 allocator=knapsack
# Environment: scripts/coba/common.sh (DATA_DIR default data/coba_cpu, OUT_DIR default outputs/coba_cpu, DRY_RUN=1), and
#   NUM_LAYERS  truncate the policy to its first N layers (faster, meaningless text; default: full model)
#   POOL        training tasks (default 6: from step 2 on, tasks seen before share batches with unseen ones)
#   FORCE=1     rebuild the tasks (kept from an earlier run otherwise)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATA_DIR="$(abspath "${DATA_DIR:-$ROOT/data/coba_cpu}")" OUT_DIR="$(abspath "${OUT_DIR:-$ROOT/outputs/coba_cpu}")" CPU=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if [[ ! -f "$DATA_DIR/arithmetic/train.parquet" || "${FORCE:-0}" == 1 ]]; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size "${POOL:-6}" --test-size 8
fi
MODEL_PATH="$(embedded_model_path "${NUM_LAYERS:-}")"
EXPERIMENT_NAME="${EXPERIMENT_NAME:-cpu_embedded-$(override_value allocator coba "$@")}"
cpu_embedded_train coba_train allocator "$@"
