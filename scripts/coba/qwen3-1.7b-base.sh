#!/usr/bin/env bash
# CoBA-RL, qwen3-1.7b-base (recipes/coba/qwen3-1.7b-base.yaml). Environment: scripts/coba/common.sh.
#   scripts/coba/qwen3-1.7b-base.sh [allocator=grpo|knapsack|static_exploit|...] [Hydra overrides...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
coba_train qwen3-1.7b-base "$@"
