#!/usr/bin/env bash
# ADS, qwen2.5-math-1.5b (recipes/ads/qwen2.5-math-1.5b.yaml). Environment: scripts/ads/common.sh.
#   scripts/ads/qwen2.5-math-1.5b.sh [grpo|dapo|gspo [ads|ads_no_inter|ads_no_intra|uniform|dots]] [Hydra overrides...]
# e.g. scripts/ads/qwen2.5-math-1.5b.sh gspo ads_no_inter   (GSPO + ADS without the inter-cluster distribution: one cluster, B = 128)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ads_train qwen2.5-math-1.5b "$@"
