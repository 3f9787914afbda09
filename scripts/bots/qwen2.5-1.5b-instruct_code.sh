#!/usr/bin/env bash
# BOTS, qwen2.5-1.5b-instruct_code (recipes/bots/qwen2.5-1.5b-instruct_code.yaml). Environment: scripts/bots/common.sh.
#   scripts/bots/qwen2.5-1.5b-instruct_code.sh [selector=random|offline|bots_mopps|bots_dots] [Hydra overrides...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bots_train qwen2.5-1.5b-instruct_code "$@"
