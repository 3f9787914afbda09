#!/usr/bin/env bash
# ADS, olmo-3-7b-sft (recipes/ads/olmo-3-7b-sft.yaml). Environment: scripts/ads/common.sh.
#   scripts/ads/olmo-3-7b-sft.sh [grpo|dapo|gspo [ads|ads_no_inter|ads_no_intra|uniform|dots]] [Hydra overrides...]
# e.g. scripts/ads/olmo-3-7b-sft.sh grpo uniform   (the GRPO baseline: 128 prompts drawn uniformly)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ads_train olmo-3-7b-sft "$@"
