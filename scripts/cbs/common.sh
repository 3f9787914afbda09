# Sourced by the CBS launchers: `cbs_train SETTING [OBJECTIVE [FILTER]] [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +cbs=SETTING <paths, cluster size> +objective=OBJECTIVE \
#     rollout_filter=FILTER <the recipe's settings for both> "$@"
# OBJECTIVE: grpo (default) | dapo | gspo (verl_ext/config/objective); FILTER: keep_all (default, the objective
# alone) | cbs_star (CBS*) | cbs (CBS) | cbs_random | cbs_no_ema | cbs_no_entropy (verl_ext/config/rollout_filter).
# The settings for both come from recipes/cbs/SETTING.yaml (and _common.yaml): the leaves of
# recipe.objectives.OBJECTIVE (DAPO: data.train_batch_size=384 trainer.total_training_steps=200) and, as
# rollout_filter.*, those of recipe.schedulers.OBJECTIVE.NAME, NAME being the filter's `name` (cbs_star, or cbs for
# cbs and its ablations): entropy_threshold and epsilon_min per objective (paper Table 4). They come before the
# user's overrides, which win. Choose the objective and the filter here, not as +objective= / rollout_filter=
# overrides (those would skip their settings: refused).
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/cbs), OUT_DIR (default outputs/cbs), MODEL_PATH,
# EXPERIMENT_NAME (default SETTING-OBJECTIVE-FILTER, e.g. qwen3-4b-base-dapo-cbs), NNODES, GPUS_PER_NODE,
# RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

# The overrides recipes/cbs/SETTING.yaml gives OBJECTIVE and FILTER, one per line (exit 2: unknown name);
# `--value KEY` prints the rollout filter's effective KEY instead (python -m verl_ext.recipe_overrides).
cbs_recipe_overrides() {  # cbs_recipe_overrides SETTING OBJECTIVE FILTER [--value KEY]
  "$PYTHON" -m verl_ext.recipe_overrides cbs "$1" "$2" rollout_filter "$3" "${@:4}"
}

cbs_train() {  # cbs_train SETTING [OBJECTIVE [FILTER]] [Hydra overrides...]
  objective_train cbs rollout_filter keep_all "$@"
}

# One training file from several data_prep files, in order: extra_info.index renumbered 0..N-1 (the task key must
# be unique over the whole training set; each source numbers its rows from 0), the source's own kept as
# extra_info.source_index; a prompt already in an earlier file is dropped (counted). Kept if present (FORCE=1).
merge_train() {  # merge_train OUT IN...
  local out="$1"; shift
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
    return 0
  fi
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '%q ' "$PYTHON" -m data_prep.merge --out "$out" "$@"; echo
    return 0
  fi
  "$PYTHON" -m data_prep.merge --out "$out" "$@"
}
