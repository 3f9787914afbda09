# Sourced by the CBS launchers: `cbs_train SETTING [OBJECTIVE [FILTER]] [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +cbs=SETTING <paths, cluster size> +objective=OBJECTIVE \
#     rollout_filter=FILTER "$@"   (verl_ext.main adds the recipe's settings for both: verl_ext/launch/recipe_tables.py)
# OBJECTIVE: grpo (default) | dapo | gspo (verl_ext/config/objective); FILTER: keep_all (default, the objective
# alone) | cbs_star (CBS*) | cbs (CBS) | cbs_random | cbs_no_ema | cbs_no_entropy (verl_ext/config/rollout_filter).
# python -m verl_ext.main adds the settings for both from recipes/cbs/SETTING.yaml (and _common.yaml): the leaves of
# recipe.objectives.OBJECTIVE (DAPO: data.train_batch_size=384 trainer.total_training_steps=200) and, as
# rollout_filter.*, those of recipe.schedulers.OBJECTIVE.NAME, NAME being the filter's `name` (cbs_star, or cbs for
# cbs and its ablations): entropy_threshold and epsilon_min per objective (paper Table 4) (verl_ext/launch/recipe_tables.py).
# They come before the user's overrides, which win. Choose the objective and the filter here, not as +objective= / rollout_filter=
# overrides (those would skip their settings: refused).
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/cbs), OUT_DIR (default outputs/cbs), MODEL_PATH,
# EXPERIMENT_NAME (default SETTING-OBJECTIVE-FILTER, e.g. qwen3-4b-base-dapo-cbs), NNODES, GPUS_PER_NODE,
# RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

# The rollout filter's KEY as python -m verl_ext.main composes recipes/cbs/SETTING.yaml with OBJECTIVE and FILTER
# (its scheduler row included): Hydra prints the rollout_filter package (--cfg job --package rollout_filter).
cbs_filter_value() {  # cbs_filter_value SETTING OBJECTIVE FILTER KEY
  "$PYTHON" -m verl_ext.main --config-dir "$ROOT/recipes" "+cbs=$1" "+objective=$2" "rollout_filter=$3" \
    --cfg job --package rollout_filter | sed -n "s/^$4: //p"
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
