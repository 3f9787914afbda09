#!/usr/bin/env bash
# The CoBA-RL comparison grid for one setting, one run after the other, each in OUT_DIR/SETTING-NAME:
#   scripts/coba/grid.sh SETTING [Hydra overrides for every run...]
#   allocators   : grpo (symmetric clip 0.2) knapsack coba (Table 1); BASELINES=1 adds static_exploit static_explore linear_decay
#                  explore_to_exploit (Tables 2-3) and coba_official; ALLOCATORS="..." sets the list
#   SWEEP=budget : each allocator at B_total in 2048 4096 8192 (Figure 6; BUDGETS="..."), named
#                  ALLOCATOR-bB_TOTAL. Every allocator gets rollout.n = B_total / M: GRPO needs B_total = M n,
#                  and all keep GRPO's optimizer steps per training step (mini-batch = ppo_mini_batch_size x n
#                  rollouts). The recipe's own B_total = M x 16 is the plain run, not repeated.
#   SWEEP=kappa  : allocator=coba at kappa in 7 15 21 (Figure 8; kappa 11 is the plain coba run)
# A rerun resumes each run from its last checkpoint (trainer.resume_mode=auto), so finished runs end at once.
# Environment: scripts/coba/common.sh (DRY_RUN=1 prints the commands).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

setting="${1:?usage: scripts/coba/grid.sh SETTING [Hydra overrides...]}"; shift
overrides=("$@")
[[ -f "$ROOT/recipes/coba/$setting.yaml" ]] || { echo "no recipe recipes/coba/$setting.yaml" >&2; exit 2; }

allocators="${ALLOCATORS:-grpo knapsack coba}"
[[ "${BASELINES:-0}" == 1 ]] && allocators+=" static_exploit static_explore linear_decay explore_to_exploit coba_official"

run() {  # run NAME allocator=ALLOCATOR OVERRIDES...
  local name="$1" allocator="${2#allocator=}"; shift
  # The paper applies clip-higher (0.2 / 0.28, the recipes' default) to Knapsack-RL and CoBA-RL only:
  # its GRPO baseline clips symmetrically at 0.2. Overrides given to the grid still win.
  local clip=()
  [[ "$allocator" == grpo ]] && clip=(actor_rollout_ref.actor.clip_ratio_high=0.2)
  echo "[grid] $setting-$name" >&2
  EXPERIMENT_NAME="$setting-$name" coba_train "$setting" "$1" "${clip[@]}" "${@:2}"
}

# KEY as python -m verl_ext.main composes the setting with the grid's overrides: Hydra prints KEY's package (as
# YAML, where a key like n is quoted), as scripts/cbs/common.sh reads the rollout filter's.
recipe_value() {  # recipe_value KEY
  local value
  value="$("$PYTHON" -m verl_ext.main --config-dir "$ROOT/recipes" "+coba=$setting" "${overrides[@]}" \
    --cfg job --resolve --package "${1%.*}" | sed -n "s/^'\{0,1\}${1##*.}'\{0,1\}: //p")" || exit
  [[ -n "$value" ]] || { echo "recipes/coba/$setting.yaml sets no $1" >&2; exit 2; }
  echo "$value"
}

case "${SWEEP:-}" in
  "")
    for allocator in $allocators; do run "$allocator" "allocator=$allocator" "$@"; done ;;
  budget)
    tasks="$(recipe_value data.train_batch_size)"
    rollouts="$(recipe_value actor_rollout_ref.rollout.n)"
    default_budget=$(( tasks * rollouts ))
    for budget in ${BUDGETS:-2048 4096 8192}; do
      (( budget % tasks == 0 )) || { echo "B_total $budget is not a multiple of $tasks tasks per step" >&2; exit 2; }
      for allocator in $allocators; do
        if (( budget == default_budget )); then
          run "$allocator" "allocator=$allocator" "$@"
        else
          run "$allocator-b$budget" "allocator=$allocator" "actor_rollout_ref.rollout.n=$(( budget / tasks ))" \
            "data_selection.rollout_budget=$budget" "$@"
        fi
      done
    done ;;
  kappa)
    for kappa in 7 15 21; do run "coba-kappa$kappa" allocator=coba "allocator.kappa=$kappa" "$@"; done ;;
  *)
    echo "SWEEP must be budget or kappa (or unset for the allocator grid), got '$SWEEP'" >&2; exit 2 ;;
esac
