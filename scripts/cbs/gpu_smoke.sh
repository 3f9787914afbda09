#!/usr/bin/env bash
# CBS on one GPU in about five minutes (an estimate: not yet run on a GPU), to prove the install and the method
# before a paper run: recipes/cbs/gpu_smoke.yaml = the paper setting qwen3-1.7b-base (the objective's and the
# filter's Table 4 settings) at smoke sizes, the same chain as scripts/cbs/qwen3-1.7b-base.sh, by default GRPO + CBS*:
#   1. 256 + 32 embedded arithmetic tasks (python -m data_prep arithmetic; nothing downloaded but the model),
#   2. 3 steps of 16 prompts x 8 rollouts up to 512 tokens (DAPO: 48 generated), vLLM rollout, one validation and
#      one checkpoint after the last step (python -m verl_ext.main), 3. the per-step table, the rollouts each step
#      kept, and the keys to read (scripts/smoke.sh).
#   scripts/cbs/gpu_smoke.sh [grpo|dapo|gspo [cbs_star|cbs|keep_all|cbs_random|cbs_no_ema|cbs_no_entropy]] \
#     [Hydra overrides...]
# Environment: scripts/smoke.sh (MODEL_PATH default Qwen/Qwen2.5-0.5B-Instruct, DATA_DIR default data/cbs_smoke,
# OUT_DIR default outputs/cbs_smoke, GPUS_PER_NODE default 1, FORCE=1, DRY_RUN=1).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ROOT/scripts/smoke.sh"
smoke_setup cbs

case "$(leading_names "$@")" in  # default GRPO + CBS*
  0) set -- grpo cbs_star "$@" ;;
  1) set -- "$1" cbs_star "${@:2}" ;;
esac

if smoke_needs "$DATA_DIR/arithmetic/train.parquet"; then
  execute "$PYTHON" -m data_prep arithmetic --out "$DATA_DIR" --train-size 256 --test-size 32
fi
EXPERIMENT_NAME="${EXPERIMENT_NAME:-gpu_smoke-$1-$2}"
smoke_train cbs_train rollout_filter "$@"
