#!/usr/bin/env bash
# BOTS end to end on this CPU with nothing downloaded (recipes/bots/cpu_embedded.yaml):
#   1. embedded arithmetic tasks (data_prep), 2. their reference pass rates from the embedded model
#   (weak: its first 2 layers, strong: all of it), 3. a few training steps with selector=bots
#   (python -m verl_ext.main --cpu), 4. the per-step table (reward, ETR, timings).
#   scripts/bots/cpu_embedded.sh [Hydra overrides...]   e.g. trainer.total_training_steps=2 selector=random
# Environment: common.sh (DATA_DIR default data/bots_cpu, OUT_DIR default outputs/bots_cpu, DRY_RUN=1), and
#   NUM_LAYERS  truncate the policy to its first N layers (faster, meaningless text; default: full model)
#   POOL, REF_N training tasks (default 32) and reference samples per task and model (default 4)
#   FORCE=1     rebuild the tasks and pass rates (kept from an earlier run otherwise)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATA_DIR="$(abspath "${DATA_DIR:-$ROOT/data/bots_cpu}")" OUT_DIR="${OUT_DIR:-$ROOT/outputs/bots_cpu}" CPU=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if [[ ! -f "$DATA_DIR/arithmetic/train_ref.parquet" || "${FORCE:-0}" == 1 ]]; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size "${POOL:-32}" --test-size 8
  execute "$PYTHON" -m data_prep.reference_pass_rates --input "$DATA_DIR/arithmetic/train.parquet" \
    --out "$DATA_DIR/arithmetic/train_ref.parquet" --weak-model embedded:2 --strong-model embedded \
    --n "${REF_N:-4}" --max-new-tokens 64 --backend hf
  echo "cpu_embedded: tasks and reference pass rates in $SECONDS s" >&2
fi
MODEL_PATH="$(embedded_model_path "${NUM_LAYERS:-}")"
EXPERIMENT_NAME="${EXPERIMENT_NAME:-cpu_embedded-$(selector_choice "$@")}"
cpu_embedded_train bots_train selector "$@"
