#!/usr/bin/env bash
# ADS end to end on this CPU with nothing downloaded (recipes/ads/cpu_embedded.yaml):
#   1. a pool of 16 embedded arithmetic tasks (data_prep), 2. their clusters and difficulty ranks from the embedded
#   policy (python -m data_prep.ads_clusters --model embedded --clusters 4, worked answers as solutions),
#   3. a few training steps, by default GRPO + ADS (selector=ads: 2 clusters x 2 prompts per step; python -m
#   verl_ext.main --cpu), 4. the per-step table (reward, timings).
#   scripts/ads/cpu_embedded.sh [grpo|dapo|gspo [ads|ads_no_inter|ads_no_intra|uniform|dots]] [Hydra overrides...]
#   e.g. scripts/ads/cpu_embedded.sh grpo ads_no_intra trainer.total_training_steps=2
# Environment: scripts/ads/common.sh (DATA_DIR default data/ads_cpu, OUT_DIR default outputs/ads_cpu, DRY_RUN=1), and
#   NUM_LAYERS  truncate the policy to its first N layers (faster, meaningless text; default: full model)
#   FORCE=1     rebuild the tasks and their clusters (kept from an earlier run otherwise)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATA_DIR="$(abspath "${DATA_DIR:-$ROOT/data/ads_cpu}")" OUT_DIR="$(abspath "${OUT_DIR:-$ROOT/outputs/ads_cpu}")" CPU=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

case "$(leading_names "$@")" in  # default GRPO + ADS
  0) set -- grpo ads "$@" ;;
  1) set -- "$1" ads "${@:2}" ;;
esac
objective="$1" selector="$2"

if [[ ! -f "$DATA_DIR/arithmetic_ads/train.parquet" || "${FORCE:-0}" == 1 ]]; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size 16 --test-size 8
  execute "$PYTHON" -m data_prep.ads_clusters --input "$DATA_DIR/arithmetic/train.parquet" \
    --out "$DATA_DIR/arithmetic_ads/train.parquet" --model embedded${NUM_LAYERS:+:$NUM_LAYERS} \
    --solution-field worked --clusters 4 --pca-dims 2 --device cpu --overwrite
fi
MODEL_PATH="$(embedded_model_path "${NUM_LAYERS:-}")"
EXPERIMENT_NAME="${EXPERIMENT_NAME:-cpu_embedded-$objective-$selector}"
cpu_embedded_train ads_train selector "$@"
