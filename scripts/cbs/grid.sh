#!/usr/bin/env bash
# The CBS grid for one setting, one run after the other, each in OUT_DIR/SETTING-NAME:
#   scripts/cbs/grid.sh SETTING [Hydra overrides for every run...]
#   SWEEP unset    : OBJECTIVES (grpo dapo gspo) x FILTERS (keep_all cbs_star cbs): the paper's Table 2, named
#                    OBJECTIVE-FILTER (keep_all: the objective alone)
#   SWEEP=ablation : OBJECTIVES (dapo) x FILTERS (cbs_random cbs_no_ema cbs_no_entropy): the ablations, run by the
#                    paper on Qwen3-4B-Base (eval.paper_numbers gives DAPO's; App. E.2 prints all three
#                    objectives: OBJECTIVES="grpo dapo gspo"); compare with the grid's OBJECTIVE-cbs runs
#   SWEEP=buffer   : OBJECTIVES (grpo) + cbs with rollout_filter.buffer_size in BUFFERS (1024 2048 3072 4096 5120),
#                    the paper's sweep on Qwen3-4B-Base (App. E.3), named OBJECTIVE-cbs-bufferM; the recipe's own
#                    buffer (2048) is the grid's OBJECTIVE-cbs run, under that name, not repeated
# Each run is `scripts/cbs/SETTING.sh OBJECTIVE FILTER [...]` (scripts/cbs/common.sh: the objective's and the
# filter's settings from the recipe). A rerun resumes each run from its last checkpoint (trainer.resume_mode=auto),
# so finished runs end at once. Environment: scripts/cbs/common.sh (DRY_RUN=1 prints the commands).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

setting="${1:?usage: scripts/cbs/grid.sh SETTING [Hydra overrides...]}"; shift
[[ -f "$ROOT/recipes/cbs/$setting.yaml" && "$setting" != _* ]] || { echo "no recipe recipes/cbs/$setting.yaml" >&2; exit 2; }

run() {  # run NAME OBJECTIVE FILTER OVERRIDES...
  local name="$1"; shift
  echo "[grid] $setting-$name" >&2
  EXPERIMENT_NAME="$setting-$name" cbs_train "$setting" "$@"
}

case "${SWEEP:-}" in
  "")
    for objective in ${OBJECTIVES:-grpo dapo gspo}; do
      for filter in ${FILTERS:-keep_all cbs_star cbs}; do run "$objective-$filter" "$objective" "$filter" "$@"; done
    done ;;
  ablation)
    for objective in ${OBJECTIVES:-dapo}; do
      for filter in ${FILTERS:-cbs_random cbs_no_ema cbs_no_entropy}; do
        run "$objective-$filter" "$objective" "$filter" "$@"
      done
    done ;;
  buffer)
    for objective in ${OBJECTIVES:-grpo}; do
      default_buffer="$(cbs_filter_value "$setting" "$objective" cbs buffer_size)"
      for buffer in ${BUFFERS:-1024 2048 3072 4096 5120}; do
        if [[ "$buffer" == "$default_buffer" ]]; then
          run "$objective-cbs" "$objective" cbs "$@"
        else
          run "$objective-cbs-buffer$buffer" "$objective" cbs "rollout_filter.buffer_size=$buffer" "$@"
        fi
      done
    done ;;
  *)
    echo "SWEEP must be ablation or buffer (or unset for the objective x filter grid), got '$SWEEP'" >&2; exit 2 ;;
esac
