#!/usr/bin/env bash
# Our SFT warm start of the progress recipe, the offline path [decision] (the recipe's policy is the paper's public
# checkpoint asingh15/qwen-sft-countdown-defaultproj, trained by the course on Asap7772/cog_behav_all_strategies):
# recipe.base_model (Qwen2.5-0.5B) fine-tuned with verl's SFT trainer (python -m verl_ext.sft) on
# DATA_DIR/countdown_sft (scripts/progress/prepare_data.sh: 10,000 Countdown prompts with solver-made
# <think>...</think> <answer>...</answer> answers, disjoint from the RL pool and the evaluation prompts), then its
# last step's Hugging Face weights linked as DATA_DIR/models/qwen2.5-0.5b-countdown-sft: train from it with
# MODEL_PATH=DATA_DIR/models/qwen2.5-0.5b-countdown-sft scripts/progress/qwen2.5-0.5b_countdown.sh ...
#   scripts/progress/sft.sh [Hydra overrides of verl's sft_trainer_engine...]
# Settings, all [decision] (the paper gives none): 2 epochs, batch 64 sequences, lr 1e-5 (AdamW, verl's: constant,
# no warm-up, weight decay 0.01, grad clip 1.0), sequences up to 1,024 tokens (prompt + answer), validation loss on
# the 200 SFT test prompts once per epoch; only the Hugging Face weights are saved (the last step).
# An existing link is kept (FORCE=1 trains again). Environment (scripts/common.sh): PYTHON, DATA_DIR (default
# data/progress), OUT_DIR (default outputs/progress; the run in OUT_DIR/sft-qwen2.5-0.5b_countdown), BASE_MODEL (a
# local copy of recipe.base_model), GPUS_PER_NODE (default 8), CPU=1 (python -m verl_ext.sft --cpu), DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/progress}")"
out_dir="$(abspath "${OUT_DIR:-$ROOT/outputs/progress}")"
setting="$PROGRESS_SETTING"
base_model="${BASE_MODEL:-$("$PYTHON" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["recipe"]["base_model"])' \
  "$ROOT/recipes/progress/$setting.yaml")}"
link="$data_dir/models/qwen2.5-0.5b-countdown-sft"
run="$out_dir/sft-$setting"
if [[ -e "$link" && "${FORCE:-0}" != 1 ]]; then
  echo "exists: $link"
  exit 0
fi

cmd=("$PYTHON" -m verl_ext.sft)
[[ "${CPU:-0}" == 1 ]] && cmd+=(--cpu)
cmd+=("model.path=$base_model"
      "data.train_files=$data_dir/countdown_sft/train.parquet" "data.val_files=$data_dir/countdown_sft/test.parquet"
      data.train_batch_size=64 data.micro_batch_size_per_gpu=8 data.max_length=1024 data.truncation=error
      optim.lr=1e-5 trainer.total_epochs=2 trainer.test_freq=after_each_epoch 'checkpoint.save_contents=[hf_model]'
      trainer.resume_mode=disable trainer.project_name=progress "trainer.experiment_name=sft-$setting"
      "trainer.default_local_dir=$run")
[[ "${CPU:-0}" == 1 ]] || cmd+=("trainer.n_gpus_per_node=${GPUS_PER_NODE:-8}")
execute "${cmd[@]}" "$@"

if [[ "${DRY_RUN:-0}" == 1 ]]; then
  last="$run/global_step_LAST/huggingface"  # the run's last step, found after training
else
  last="$(ls -d "$run"/global_step_*/huggingface 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$last" ]] || { echo "no $run/global_step_*/huggingface: the SFT run saved no weights" >&2; exit 1; }
  mkdir -p "$(dirname "$link")"
fi
execute ln -sfn "$last" "$link"
