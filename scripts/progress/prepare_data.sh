#!/usr/bin/env bash
# Data of the progress recipes, into DATA_DIR (the paths recipes/progress/_common.yaml reads through
# recipe.data_dir):
#   1. countdown_tasks_3to4/train: Countdown-Tasks-3to4 (Jiayi-Pan's copy of the paper's asingh15/countdown_tasks_3to4,
#      same format: 3 or 4 numbers, a target), each row with its bucket (extra_info.bucket: {3, 4 numbers} x target
#      {<25, 25-49, 50-74, >=75}; python -m data_prep countdown_tasks_3to4, from the hub or COUNTDOWN_TASKS_3TO4_INPUT)
#   2. the splits (python -m data_prep.countdown_split, seed 0; repeated tasks kept once, so no held-out task is
#      trained on): countdown/test = the 200 held-out evaluation prompts [paper: 200; the draw: decision],
#      countdown_sft_prompts/{train,test} = SFT_SIZE (default 10000) + 200 prompts for the SFT warm start [decision],
#      countdown/train = the RL pool, TRAIN_SIZE (default 4000) of the other tasks [decision, inferred: the paper
#      gives no pool size; its RFT sampled 32 completions "per training prompt" and kept 62,636 verifier-correct
#      ones, at the uniform run's final training reward 0.49 about 62,636 / (32 x 0.49) = 4,000 prompts; a pool
#      this size revisits each prompt ~3 times in 100 x 128 draws, which prompt_utility's per-prompt estimates
#      need; TRAIN_SIZE=0 takes every remaining task, ~490k]; countdown/split.json: counts, bucket frequencies
#   3. countdown_sft/{train,test}: the SFT data, those prompts with solver-made answers in the verifier's format
#      (<think>...</think> <answer>...</answer>; python -m data_prep.sft --from-rl)
# Existing files are kept (FORCE=1 rebuilds). Environment: DATA_DIR (default data/progress), PYTHON, SFT_SIZE,
# TRAIN_SIZE, DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/progress}")"
prepare_dataset "$data_dir" countdown_tasks_3to4 train

if [[ -f "$data_dir/countdown/train.parquet" && "${FORCE:-0}" != 1 ]]; then
  echo "exists: $data_dir/countdown/train.parquet"
else
  execute "$PYTHON" -m data_prep.countdown_split --input "$data_dir/countdown_tasks_3to4/train.parquet" \
    --out "$data_dir" --test-size 200 --sft-size "${SFT_SIZE:-10000}" --sft-test-size 200 \
    --train-size "${TRAIN_SIZE:-4000}" --seed 0
fi

for split in train test; do
  out="$data_dir/countdown_sft/$split.parquet"
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
  else
    execute "$PYTHON" -m data_prep.sft --from-rl "$data_dir/countdown_sft_prompts/$split.parquet" --out "$out"
  fi
done
