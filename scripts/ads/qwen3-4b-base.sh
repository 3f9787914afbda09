#!/usr/bin/env bash
# ADS, qwen3-4b-base (recipes/ads/qwen3-4b-base.yaml). Environment: scripts/ads/common.sh.
#   scripts/ads/qwen3-4b-base.sh [grpo|dapo|gspo [ads|ads_no_inter|ads_no_intra|uniform|dots]] [Hydra overrides...]
# e.g. scripts/ads/qwen3-4b-base.sh dapo ads   (DAPO's loss + ADS: 128 prompts x 8 rollouts, KL in the reward, all-wrong groups dropped)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ads_train qwen3-4b-base "$@"
