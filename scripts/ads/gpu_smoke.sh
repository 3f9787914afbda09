#!/usr/bin/env bash
# ADS on one GPU in about five minutes (an estimate: not yet run on a GPU), to prove the install and the method
# before a paper run: recipes/ads/gpu_smoke.yaml = the paper setting qwen3-4b-base (the objectives with KL in the
# reward, all-wrong groups dropped, the selectors' settings) at smoke sizes, the same chain as
# scripts/ads/qwen3-4b-base.sh, by default GRPO + ADS:
#   1. 256 + 32 embedded arithmetic tasks (python -m data_prep arithmetic; nothing downloaded but the model),
#   2. their clusters and difficulty ranks from the policy (python -m data_prep.ads_clusters --model MODEL_PATH
#      --clusters 8 on the GPU, worked answers as reference solutions), 3. 3 steps of 2 clusters x 8 prompts x 8
#      rollouts up to 512 tokens, vLLM rollout, one validation and one checkpoint after the last step (python -m
#      verl_ext.main), 4. the per-step table, the prompts chosen, and the keys to read (scripts/smoke.sh).
#   scripts/ads/gpu_smoke.sh [grpo|dapo|gspo [ads|ads_no_inter|ads_no_intra|uniform|dots]] [Hydra overrides...]
# Environment: scripts/smoke.sh (MODEL_PATH default Qwen/Qwen2.5-0.5B-Instruct, DATA_DIR default data/ads_smoke,
# OUT_DIR default outputs/ads_smoke, GPUS_PER_NODE default 1, FORCE=1, DRY_RUN=1).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ROOT/scripts/smoke.sh"
smoke_setup ads

case "$(leading_names "$@")" in  # default GRPO + ADS
  0) set -- grpo ads "$@" ;;
  1) set -- "$1" ads "${@:2}" ;;
esac

if smoke_needs "$DATA_DIR/arithmetic_ads/train.parquet"; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size 256 --test-size 32
  execute "$PYTHON" -m data_prep.ads_clusters --input "$DATA_DIR/arithmetic/train.parquet" \
    --out "$DATA_DIR/arithmetic_ads/train.parquet" --model "$MODEL_PATH" --solution-field worked --clusters 8 \
    --pca-dims 16 --seed 42 --max-length 1024 --device cuda --dtype bf16
fi
EXPERIMENT_NAME="${EXPERIMENT_NAME:-gpu_smoke-$1-$2}"
smoke_train ads_train selector "$@"
