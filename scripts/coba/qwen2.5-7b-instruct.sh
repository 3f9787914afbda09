#!/usr/bin/env bash
# CoBA-RL, qwen2.5-7b-instruct (recipes/coba/qwen2.5-7b-instruct.yaml). Environment: scripts/coba/common.sh.
#   scripts/coba/qwen2.5-7b-instruct.sh [allocator=grpo|knapsack|static_exploit|...] [Hydra overrides...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
coba_train qwen2.5-7b-instruct "$@"
