#!/usr/bin/env bash
# The paper's sampler comparison for one setting (default qwen2.5-0.5b_countdown), one run after the other, each
# RLOO with one selector in OUT_DIR/SETTING-rloo-SELECTOR:
#   scripts/progress/grid.sh [SETTING] [Hydra overrides for every run...]
#   SELECTORS (default: uniform bucket_uniform empirical conservative density_ratio random_buckets prompt_utility):
#   the uniform baseline and every variant of Yan, "Progress-Aware Prompt Sampling", CS224R, §3.2-3.3 (Table 1 and the
#   late follow-ups of Table 6)
# Each run is `scripts/progress/SETTING.sh SELECTOR [...]` (scripts/progress/common.sh: the selector's settings
# from the recipe). A rerun resumes each run from its last checkpoint (trainer.resume_mode=auto), so finished runs
# end at once. Environment: scripts/progress/common.sh (DRY_RUN=1 prints the commands).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

setting="$PROGRESS_SETTING"
if (( $# )) && [[ "$1" != *=* ]]; then setting="$1"; shift; fi
[[ -f "$ROOT/recipes/progress/$setting.yaml" && "$setting" != _* ]] || {
  echo "no recipe recipes/progress/$setting.yaml" >&2; exit 2; }

for selector in ${SELECTORS:-$PROGRESS_SELECTORS}; do
  echo "[grid] $setting-rloo-$selector" >&2
  EXPERIMENT_NAME="$setting-rloo-$selector" progress_train "$setting" "$selector" "$@"
done
