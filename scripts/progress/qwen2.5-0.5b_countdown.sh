#!/usr/bin/env bash
# Progress-aware sampling, qwen2.5-0.5b_countdown (recipes/progress/qwen2.5-0.5b_countdown.yaml): RLOO from the
# paper's Countdown SFT checkpoint (asingh15/qwen-sft-countdown-defaultproj; ours, offline: scripts/progress/sft.sh,
# then MODEL_PATH=DATA_DIR/models/qwen2.5-0.5b-countdown-sft), 100 steps of 128 prompts x 8. Environment:
# scripts/progress/common.sh.
#   scripts/progress/qwen2.5-0.5b_countdown.sh [uniform|bucket_uniform|empirical|conservative|density_ratio|
#     random_buckets|prompt_utility] [Hydra overrides...]
# e.g. scripts/progress/qwen2.5-0.5b_countdown.sh uniform   (the uniform RLOO baseline, the RFT generator)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
progress_train qwen2.5-0.5b_countdown "$@"
