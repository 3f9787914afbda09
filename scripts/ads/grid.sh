#!/usr/bin/env bash
# The ADS grid for one setting, one run after the other, each in OUT_DIR/SETTING-NAME, NAME = OBJECTIVE-SELECTOR:
#   scripts/ads/grid.sh SETTING [Hydra overrides for every run...]
#   SWEEP unset      : OBJECTIVES (grpo) x SELECTORS (uniform dots ads): the paper's Table 1 rows GRPO, DOTS+RR,
#                      ADS (uniform: the GRPO baseline; dots: DOTS with its rollout replay, recipe.selectors.dots)
#   SWEEP=objectives : OBJECTIVES (dapo gspo) x SELECTORS (uniform ads): Table 2, run by the paper on
#                      Qwen2.5-Math-1.5B (DAPO / GSPO with and without ADS)
#   SWEEP=ablation   : OBJECTIVES (grpo) x SELECTORS (ads_no_inter ads_no_intra): the ablations (Qwen2.5-Math-1.5B);
#                      compare with the grid's grpo-ads run
# Each run is `scripts/ads/SETTING.sh OBJECTIVE SELECTOR [...]` (scripts/ads/common.sh: the objective's and the
# selector's settings from the recipe). A rerun resumes each run from its last checkpoint (trainer.resume_mode=auto),
# so finished runs end at once. Environment: scripts/ads/common.sh (DRY_RUN=1 prints the commands).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

setting="${1:?usage: scripts/ads/grid.sh SETTING [Hydra overrides...]}"; shift
[[ -f "$ROOT/recipes/ads/$setting.yaml" && "$setting" != _* ]] || { echo "no recipe recipes/ads/$setting.yaml" >&2; exit 2; }

run() {  # run OBJECTIVE SELECTOR OVERRIDES...
  echo "[grid] $setting-$1-$2" >&2
  EXPERIMENT_NAME="$setting-$1-$2" ads_train "$setting" "$@"
}

case "${SWEEP:-}" in
  "") objectives="${OBJECTIVES:-grpo}" selectors="${SELECTORS:-uniform dots ads}" ;;
  objectives) objectives="${OBJECTIVES:-dapo gspo}" selectors="${SELECTORS:-uniform ads}" ;;
  ablation) objectives="${OBJECTIVES:-grpo}" selectors="${SELECTORS:-ads_no_inter ads_no_intra}" ;;
  *) echo "SWEEP must be objectives or ablation (or unset for Table 1), got '$SWEEP'" >&2; exit 2 ;;
esac
for objective in $objectives; do
  for selector in $selectors; do run "$objective" "$selector" "$@"; done
done
