# Sourced by the progress launchers: `progress_train SETTING [SELECTOR] [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +progress=SETTING <paths> +objective=rloo \
#     selector=SELECTOR "$@"   (verl_ext.main adds the recipe's settings for it: verl_ext/launch/recipe_tables.py)
# The objective is RLOO for every run (the paper's: Yan, "Progress-Aware Prompt Sampling", CS224R, §3.1); SELECTOR:
# conservative (default) | uniform | bucket_uniform | empirical | density_ratio | random_buckets | prompt_utility
# (verl_ext/config/selector). The selector's settings come from recipe.selectors.SELECTOR of
# recipes/progress/SETTING.yaml (and _common.yaml) and come before the user's overrides, which win. Choose the
# selector as the first argument, not as a selector= override (that would skip its settings: refused); +objective= is
# refused too.
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/progress), OUT_DIR (default outputs/progress),
# MODEL_PATH (default: the recipe's, the paper's SFT checkpoint asingh15/qwen-sft-countdown-defaultproj from the hub;
# offline: DATA_DIR/models/qwen2.5-0.5b-countdown-sft, which scripts/progress/sft.sh links), EXPERIMENT_NAME (default
# SETTING-rloo-SELECTOR, e.g. qwen2.5-0.5b_countdown-rloo-uniform), NNODES, GPUS_PER_NODE, RAY_ADDRESS, CPU=1,
# DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

PROGRESS_SETTING=qwen2.5-0.5b_countdown  # the paper's setting (scripts/progress/rft.sh, sft.sh)
# uniform and every progress-aware variant of Yan §3.2-3.3, in the paper's order (scripts/progress/grid.sh)
PROGRESS_SELECTORS="uniform bucket_uniform empirical conservative density_ratio random_buckets prompt_utility"

progress_train() {  # progress_train SETTING [SELECTOR] [Hydra overrides...]
  local setting="$1" arg; shift
  if (( $(leading_names "$@") > 1 )); then
    echo "one selector name, then Hydra overrides (the objective is RLOO for every run), got '$1 $2'" >&2
    return 2
  fi
  for arg in "$@"; do
    case "$arg" in
      objective=*|+objective=*|++objective=*)
        echo "the objective is RLOO for every progress run (+objective=rloo is added), not '$arg'" >&2
        return 2 ;;
    esac
  done
  local choice=conservative
  (( $# )) && [[ "$(leading_names "$@")" == 1 ]] && choice="$1"
  if [[ " $PROGRESS_SELECTORS progress " != *" $choice "* ]]; then
    echo "unknown progress selector '$choice' (uniform and the paper's variants: $PROGRESS_SELECTORS)" >&2
    return 2
  fi
  objective_train progress selector conservative "$setting" rloo "$@"
}

# The last checkpointed step of a run (verl's latest_checkpointed_iteration.txt), else exit 2 naming the run.
last_step() {  # last_step RUN_DIR
  local file="$1/latest_checkpointed_iteration.txt"
  [[ -f "$file" ]] || { echo "no checkpoint in $1 (no $file): train it first, or give RUN / STEP" >&2; return 2; }
  tr -d '[:space:]' <"$file"
}
