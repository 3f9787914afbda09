#!/usr/bin/env bash
# The BOTS comparison grid for one setting, one run after the other, each in OUT_DIR/SETTING-NAME:
#   scripts/bots/grid.sh SETTING [Hydra overrides for every run...]
#   SWEEP unset  : selectors random offline bots_mopps bots_dots bots (SELECTORS="..." for a subset)
#   SWEEP=rho    : selector.implicit_weight in 0 0.05 0.2 0.5 1.0 at lambda = 0.1
#   SWEEP=lambda : selector.forgetting in 0 0.05 0.2 0.5 1.0 at rho = 0.1
#   SWEEP=sampling: posterior mean instead of the Thompson draw
# (the default point rho = lambda = 0.1 with sampling is the grid's `bots` run). A rerun resumes each
# run from its last checkpoint (trainer.resume_mode=auto), so finished runs end at once.
# Environment: scripts/bots/common.sh (DRY_RUN=1 prints the commands).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

setting="${1:?usage: scripts/bots/grid.sh SETTING [Hydra overrides...]}"; shift
[[ -f "$ROOT/recipes/bots/$setting.yaml" ]] || { echo "no recipe recipes/bots/$setting.yaml" >&2; exit 2; }

run() {  # run NAME OVERRIDES...
  local name="$1"; shift
  echo "[grid] $setting-$name" >&2
  EXPERIMENT_NAME="$setting-$name" bots_train "$setting" "$@"
}

case "${SWEEP:-}" in
  "")
    for selector in ${SELECTORS:-random offline bots_mopps bots_dots bots}; do run "$selector" "selector=$selector" "$@"; done ;;
  rho)
    for rho in 0 0.05 0.2 0.5 1.0; do
      run "rho$rho" selector=bots "selector.implicit_weight=$rho" selector.forgetting=0.1 "$@"
    done ;;
  lambda)
    for lambda in 0 0.05 0.2 0.5 1.0; do
      run "lambda$lambda" selector=bots selector.forgetting="$lambda" selector.implicit_weight=0.1 "$@"
    done ;;
  sampling)
    run no_sampling selector=bots selector.posterior_sampling=false "$@" ;;
  *)
    echo "SWEEP must be rho, lambda or sampling (or unset for the selector grid), got '$SWEEP'" >&2; exit 2 ;;
esac
