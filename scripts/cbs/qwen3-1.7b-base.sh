#!/usr/bin/env bash
# CBS, qwen3-1.7b-base (recipes/cbs/qwen3-1.7b-base.yaml). Environment: scripts/cbs/common.sh.
#   scripts/cbs/qwen3-1.7b-base.sh [grpo|dapo|gspo [keep_all|cbs_star|cbs|cbs_random|cbs_no_ema|cbs_no_entropy]] [Hydra overrides...]
# e.g. scripts/cbs/qwen3-1.7b-base.sh dapo cbs   (DAPO + CBS: 384 prompts x 8 rollouts, 200 steps, DAPO's scheduler settings)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cbs_train qwen3-1.7b-base "$@"
