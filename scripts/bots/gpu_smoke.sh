#!/usr/bin/env bash
# BOTS on one GPU in about five minutes (an estimate: not yet run on a GPU), to prove the install and the method
# before a paper run: recipes/bots/gpu_smoke.yaml = the paper setting qwen2.5-1.5b-instruct_math (selector bots,
# its objective and optimiser) at smoke sizes, the same chain as scripts/bots/qwen2.5-1.5b-instruct_math.sh:
#   1. 256 + 32 embedded arithmetic tasks (python -m data_prep arithmetic; nothing downloaded but the model),
#   2. their reference pass rates (python -m data_prep.reference_pass_rates, weak and strong model both MODEL_PATH,
#      4 samples each, vLLM), 3. 3 steps of 16 prompts x 16 rollouts up to 512 tokens, vLLM rollout, one
#      validation and one checkpoint after the last step (python -m verl_ext.main), 4. the per-step table and the
#      keys to read (scripts/smoke.sh).
#   scripts/bots/gpu_smoke.sh [selector=random|offline|bots_mopps|bots_dots] [Hydra overrides...]
# Environment: scripts/smoke.sh (MODEL_PATH default Qwen/Qwen2.5-0.5B-Instruct, DATA_DIR default data/bots_smoke,
# OUT_DIR default outputs/bots_smoke, GPUS_PER_NODE default 1, FORCE=1, DRY_RUN=1).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ROOT/scripts/smoke.sh"
smoke_setup bots

if smoke_needs "$DATA_DIR/arithmetic/train_ref.parquet"; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size 256 --test-size 32
  execute "$PYTHON" -m data_prep.reference_pass_rates --input "$DATA_DIR/arithmetic/train.parquet" \
    --out "$DATA_DIR/arithmetic/train_ref.parquet" --weak-model "$MODEL_PATH" --strong-model "$MODEL_PATH" \
    --n 4 --max-new-tokens 512
fi
EXPERIMENT_NAME="${EXPERIMENT_NAME:-gpu_smoke-$(selector_choice "$@")}"
smoke_train bots_train selector "$@"
