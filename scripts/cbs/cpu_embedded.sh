#!/usr/bin/env bash
# CBS end to end on this CPU with nothing downloaded (recipes/cbs/cpu_embedded.yaml):
#   1. a pool of embedded arithmetic tasks (data_prep), 2. a few training steps, by default GRPO + CBS*
#   (rollout_filter=cbs_star; python -m verl_ext.main --cpu), 3. the per-step table (reward, timings), the
#   rollouts each step kept for the actor update and the filter's own scalars.
#   scripts/cbs/cpu_embedded.sh [grpo|dapo|gspo [cbs_star|cbs|keep_all|...]] [Hydra overrides...]
#   e.g. scripts/cbs/cpu_embedded.sh grpo cbs trainer.total_training_steps=2   (CBS: a buffer of 32 rollouts)
# Environment: scripts/cbs/common.sh (DATA_DIR default data/cbs_cpu, OUT_DIR default outputs/cbs_cpu, DRY_RUN=1), and
#   NUM_LAYERS  truncate the policy to its first N layers (faster, meaningless text; default: full model)
#   POOL        training tasks (default 12: three steps of 4 without repeats)
#   FORCE=1     rebuild the tasks (kept from an earlier run otherwise)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATA_DIR="$(abspath "${DATA_DIR:-$ROOT/data/cbs_cpu}")" OUT_DIR="$(abspath "${OUT_DIR:-$ROOT/outputs/cbs_cpu}")" CPU=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

case "$(leading_names "$@")" in  # default GRPO + CBS*
  0) set -- grpo cbs_star "$@" ;;
  1) set -- "$1" cbs_star "${@:2}" ;;
esac
objective="$1" filter="$2"

if [[ ! -f "$DATA_DIR/arithmetic/train.parquet" || "${FORCE:-0}" == 1 ]]; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size "${POOL:-12}" --test-size 8
fi
MODEL_PATH="$(embedded_model_path "${NUM_LAYERS:-}")"
EXPERIMENT_NAME="${EXPERIMENT_NAME:-cpu_embedded-$objective-$filter}"
cpu_embedded_train cbs_train rollout_filter "$@"
