#!/usr/bin/env bash
# Progress-aware sampling end to end on this CPU with nothing downloaded (recipes/progress/cpu_embedded.yaml):
#   1. a pool of embedded Countdown tasks with their buckets and 8 held-out ones (python -m data_prep countdown),
#   2. the policy: the embedded SmolLM2-135M-Instruct after a short SFT on worked embedded Countdown answers (python
#      -m verl_ext.apps.warm_start --task countdown: cached, the CPU stand-in for the paper's SFT checkpoint;
#      WARM_START=0 takes the embedded model as it is), 3. three RLOO steps of 4 prompts x 4 rollouts, by default
#      with the conservative selector (python -m verl_ext.main --cpu), 4. the per-step table (reward, timings).
#   scripts/progress/cpu_embedded.sh [uniform|bucket_uniform|empirical|conservative|density_ratio|random_buckets|
#     prompt_utility] [Hydra overrides...]
#   e.g. scripts/progress/cpu_embedded.sh prompt_utility trainer.total_training_steps=2
# Environment: scripts/progress/common.sh (DATA_DIR default data/progress_cpu, OUT_DIR default outputs/progress_cpu,
# DRY_RUN=1), and
#   NUM_LAYERS  truncate the policy to its first N layers (faster, meaningless text; default: full model)
#   POOL        training tasks (default 64: every bucket represented)
#   WARM_START  1 (default): the warm-started policy; 0: the embedded model
#   FORCE=1     rebuild the tasks (kept from an earlier run otherwise)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATA_DIR="$(abspath "${DATA_DIR:-$ROOT/data/progress_cpu}")" OUT_DIR="$(abspath "${OUT_DIR:-$ROOT/outputs/progress_cpu}")" CPU=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

selector=conservative
(( $# )) && [[ "$(leading_names "$@")" == 1 ]] && selector="$1"

if [[ ! -f "$DATA_DIR/countdown/train.parquet" || "${FORCE:-0}" == 1 ]]; then
  execute "$PYTHON" -m data_prep countdown --out "$DATA_DIR" --train-size "${POOL:-64}" --test-size 8
fi
if [[ "${WARM_START:-1}" == 1 ]]; then
  warm=("$PYTHON" -m verl_ext.apps.warm_start --task countdown ${NUM_LAYERS:+--num-layers "$NUM_LAYERS"})
  if [[ "${DRY_RUN:-0}" == 1 ]]; then  # the directory it prints, without building it
    execute "${warm[@]}"
    MODEL_PATH="$("$PYTHON" -c 'import sys; from verl_ext.models.embedded import cache_root
from verl_ext.apps.warm_start import WarmStartConfig
print(cache_root() / "models" / WarmStartConfig(task="countdown", num_layers=int(sys.argv[1]) if sys.argv[1] else None).name())' \
      "${NUM_LAYERS:-}")"
  else
    MODEL_PATH="$("${warm[@]}" | tee /dev/stderr | tail -n 1)"
  fi
else
  MODEL_PATH="$(embedded_model_path "${NUM_LAYERS:-}")"
fi
EXPERIMENT_NAME="${EXPERIMENT_NAME:-cpu_embedded-rloo-$selector}"
cpu_embedded_train progress_train selector "$@"
