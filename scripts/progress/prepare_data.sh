#!/usr/bin/env bash
# Data of the progress recipes, into DATA_DIR (the paths recipes/progress/_common.yaml reads through
# recipe.data_dir):
#   1. asingh15_countdown_tasks_3to4/{train,test}: the paper's Countdown data, asingh15/countdown_tasks_3to4 (train
#      ~490k tasks; test = the official 50-prompt evaluation of the paper's App. B), each row with its bucket
#      (extra_info.bucket: {3, 4 numbers} x target {<25, 25-49, 50-74, >=75}) and the published chat-templated
#      prompt (python -m data_prep asingh15_countdown_tasks_3to4 --split SPLIT, from the hub or from local copies
#      COUNTDOWN_TRAIN_INPUT / COUNTDOWN_TEST_INPUT)
#   2. the splits of its training tasks (python -m data_prep.countdown_split, seed 0; repeated tasks kept once and
#      the official test tasks left out, so no evaluation task is trained on): countdown/test = the 200 held-out
#      evaluation prompts [paper: 200; the draw: decision], countdown_sft_prompts/{train,test} = SFT_SIZE (default
#      10000) + 200 prompts for our SFT warm start [decision], countdown/train = the RL pool, TRAIN_SIZE (default
#      4000) of the other tasks [decision, inferred: the paper gives no pool size; its RFT sampled 32 completions
#      "per training prompt" and kept 62,636 verifier-correct ones, at the uniform run's final training reward 0.49
#      about 62,636 / (32 x 0.49) = 4,000 prompts; a pool this size revisits each prompt ~3 times in 100 x 128
#      draws, which prompt_utility's per-prompt estimates need; TRAIN_SIZE=0 takes every remaining task, ~490k];
#      countdown/split.json: counts, bucket frequencies
#   3. countdown_sft/{train,test}: our SFT data (scripts/progress/sft.sh, the offline path), those prompts with
#      solver-made answers in the verifier's format (<think>...</think> <answer>...</answer>; python -m data_prep.sft_messages
#      --from-rl)
#   4. cog_behav_all_strategies/{train,test}: the course's SFT data, Asap7772/cog_behav_all_strategies, on which the
#      paper's checkpoint was trained, as verl SFT rows: the "original SFT data" of the paper's RFT mix
#      (scripts/progress/rft.sh) (python -m data_prep.cog_behav_sft --split SPLIT, from the hub or from local copies
#      COG_BEHAV_TRAIN_INPUT / COG_BEHAV_TEST_INPUT; the verifier's outcomes counted in SPLIT.json)
# Existing files are kept (FORCE=1 rebuilds). Environment: DATA_DIR (default data/progress), PYTHON,
# COUNTDOWN_TRAIN_INPUT, COUNTDOWN_TEST_INPUT, COG_BEHAV_TRAIN_INPUT, COG_BEHAV_TEST_INPUT, SFT_SIZE, TRAIN_SIZE,
# DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/progress}")"
source_dir="$data_dir/asingh15_countdown_tasks_3to4"
for split in train test; do
  input_var="COUNTDOWN_$(tr 'a-z' 'A-Z' <<<"$split")_INPUT"
  if [[ -f "$source_dir/$split.parquet" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $source_dir/$split.parquet"
  else
    cmd=("$PYTHON" -m data_prep asingh15_countdown_tasks_3to4 --split "$split" --out "$data_dir")
    [[ -n "${!input_var:-}" ]] && cmd+=(--input "${!input_var}")
    execute "${cmd[@]}"
  fi
done

if [[ -f "$data_dir/countdown/train.parquet" && "${FORCE:-0}" != 1 ]]; then
  echo "exists: $data_dir/countdown/train.parquet"
else
  execute "$PYTHON" -m data_prep.countdown_split --input "$source_dir/train.parquet" \
    --exclude "$source_dir/test.parquet" --out "$data_dir" --test-size 200 --sft-size "${SFT_SIZE:-10000}" \
    --sft-test-size 200 --train-size "${TRAIN_SIZE:-4000}" --seed 0
fi

for split in train test; do
  out="$data_dir/countdown_sft/$split.parquet"
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
  else
    execute "$PYTHON" -m data_prep.sft_messages --from-rl "$data_dir/countdown_sft_prompts/$split.parquet" --out "$out"
  fi
done

for split in train test; do
  input_var="COG_BEHAV_$(tr 'a-z' 'A-Z' <<<"$split")_INPUT"
  out="$data_dir/cog_behav_all_strategies/$split.parquet"
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
  else
    cmd=("$PYTHON" -m data_prep.cog_behav_sft --split "$split" --out "$out")
    [[ -n "${!input_var:-}" ]] && cmd+=(--input "${!input_var}")
    execute "${cmd[@]}"
  fi
done
