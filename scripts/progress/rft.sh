#!/usr/bin/env bash
# Verifier-filtered self-training (RFT; Yan, "Progress-Aware Prompt Sampling", CS224R, §3.4) from the uniform RLOO
# run's last checkpoint, one command (python -m verl_ext.apps.rft): K = 32 samples per training prompt (eval.evaluate, preset
# progress), filtered (data_prep.rft_filter), one epoch of verl's SFT trainer from that checkpoint, then the result
# evaluated on the 200 held-out prompts (preset progress):
#   naive: verifier-correct completions, at most 2 per prompt, 30 % original SFT data, lr 1e-5   [paper]
#   clean: the shortest format-clean correct completion per prompt, 50 % SFT data, lr 5e-6       [paper]
#   scripts/progress/rft.sh naive|clean [python -m verl_ext.apps.rft flags...] [-- Hydra overrides of the SFT...]
# e.g. scripts/progress/rft.sh naive -- optim.lr=2e-5
# The weights land in OUT/sft/global_step_N/huggingface and the evaluation in OUT/sft/eval, OUT =
# OUT_DIR/qwen2.5-0.5b_countdown-rft_FILTER: `python -m eval.tables progress --runs rft_naive=OUT/sft ...`.
# Training prompts sampled: the first RFT_PROMPTS (default 4000) of the RL pool, i.e. all of the default pool
# (scripts/progress/prepare_data.sh: its 62,636 verifier-correct completions of 32 samples at the uniform run's
# final training reward 0.49 make ~4,000 prompts [decision]). The SFT mix: the paper's "original SFT data", the
# course's Asap7772/cog_behav_all_strategies on which its checkpoint (the recipe's policy) was trained
# (DATA_DIR/cog_behav_all_strategies/train.parquet, prepare_data.sh step 4) [paper; the data set: authors' code];
# SFT_MIX=DATA_DIR/countdown_sft/train.parquet when the RLOO runs started from our SFT (sft.sh).
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/progress), OUT_DIR (default outputs/progress),
#   RUN    the RLOO run sampled from (default OUT_DIR/qwen2.5-0.5b_countdown-rloo-uniform)
#   STEP   its checkpoint (default: its last, latest_checkpointed_iteration.txt)
#   SFT_MIX  the SFT parquet mixed in (default: the course's, above)
#   GPUS_PER_NODE (SFT processes, default 8), CPU=1 (--cpu), RFT_PROMPTS, DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

filter="${1:-}"
case "$filter" in
  naive|clean) shift ;;
  *) echo "usage: scripts/progress/rft.sh naive|clean [verl_ext.apps.rft flags...] [-- SFT overrides...]" >&2; exit 2 ;;
esac
flags=() overrides=() seen=0
for arg in "$@"; do
  if (( seen )); then overrides+=("$arg"); elif [[ "$arg" == -- ]]; then seen=1; else flags+=("$arg"); fi
done

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/progress}")"
out_dir="$(abspath "${OUT_DIR:-$ROOT/outputs/progress}")"
run="$(abspath "${RUN:-$out_dir/$PROGRESS_SETTING-rloo-uniform}")"
if [[ -z "${STEP:-}" && "${DRY_RUN:-0}" == 1 && ! -f "$run/latest_checkpointed_iteration.txt" ]]; then
  step=100  # not trained yet: the recipe's last step (trainer.total_training_steps), where the run will end
else
  step="${STEP:-$(last_step "$run")}" || exit 2
fi

cmd=("$PYTHON" -m verl_ext.apps.rft --model "$run/global_step_$step/actor"
     --train "$data_dir/countdown/train.parquet" --sft "${SFT_MIX:-$data_dir/cog_behav_all_strategies/train.parquet}"
     --test "$data_dir/countdown/test.parquet" --filter "$filter" --out "$out_dir/$PROGRESS_SETTING-rft_$filter"
     --k 32 --train-limit "${RFT_PROMPTS:-4000}" --test-limit 200 --seed 0)
[[ "${CPU:-0}" == 1 ]] && cmd+=(--cpu) || overrides=("trainer.n_gpus_per_node=${GPUS_PER_NODE:-8}" "${overrides[@]}")
cmd+=("${flags[@]}")
(( ${#overrides[@]} )) && cmd+=(-- "${overrides[@]}")
execute "${cmd[@]}"
