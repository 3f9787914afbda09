#!/usr/bin/env bash
# Progress-aware sampling on one GPU in about five minutes (an estimate: not yet run on a GPU), to prove the install
# and the method before a paper run: recipes/progress/gpu_smoke.yaml = the paper setting qwen2.5-0.5b_countdown
# (RLOO with the capped importance weight, the selectors' settings, the paper's validation sampling) at smoke
# sizes, the same chain as scripts/progress/qwen2.5-0.5b_countdown.sh, by default with the conservative selector:
#   1. 320 embedded Countdown tasks with their buckets (python -m data_prep countdown; nothing downloaded but the
#      model), split as the paper data is (python -m data_prep.countdown_split: 32 held-out, 256 in the RL pool,
#      no SFT prompts; bucket counts in DATA_DIR/countdown/split.json), 2. 3 RLOO steps of 16 prompts x 8 rollouts
#      up to 512 tokens, vLLM rollout, one validation and one checkpoint after the last step (python -m
#      verl_ext.main), 3. the per-step table, the prompts chosen, and the keys to read (scripts/smoke.sh).
# The policy is Qwen2.5-0.5B-Instruct, not the recipe's Countdown SFT checkpoint: MODEL_PATH=asingh15/qwen-sft-
# countdown-defaultproj (the paper's) or DATA_DIR/models/qwen2.5-0.5b-countdown-sft (ours, scripts/progress/sft.sh)
# runs from it instead.
#   scripts/progress/gpu_smoke.sh [uniform|bucket_uniform|empirical|conservative|density_ratio|random_buckets|
#     prompt_utility] [Hydra overrides...]
# Environment: scripts/smoke.sh (MODEL_PATH default Qwen/Qwen2.5-0.5B-Instruct, DATA_DIR default data/progress_smoke,
# OUT_DIR default outputs/progress_smoke, GPUS_PER_NODE default 1, FORCE=1, DRY_RUN=1).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ROOT/scripts/smoke.sh"
smoke_setup progress

selector=conservative
(( $# )) && [[ "$(leading_names "$@")" == 1 ]] && selector="$1"

if smoke_needs "$DATA_DIR/countdown/train.parquet"; then
  execute "$PYTHON" -m data_prep countdown --out "$DATA_DIR/source" --train-size 320 --test-size 0
  execute "$PYTHON" -m data_prep.countdown_split --input "$DATA_DIR/source/countdown/train.parquet" \
    --out "$DATA_DIR" --test-size 32 --sft-size 0 --sft-test-size 0 --train-size 256 --seed 0
fi
EXPERIMENT_NAME="${EXPERIMENT_NAME:-gpu_smoke-rloo-$selector}"
smoke_train progress_train selector "$@"
