# Sourced by the BOTS launchers: `bots_train SETTING [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +bots=SETTING <paths, cluster size> "$@"
# Every hyperparameter lives in recipes/bots/SETTING.yaml. Environment (scripts/common.sh): PYTHON, DATA_DIR
# (default data/bots), OUT_DIR (default outputs/bots), MODEL_PATH, EXPERIMENT_NAME (default SETTING-SELECTOR,
# e.g. qwen2.5-7b_math-random), NNODES, GPUS_PER_NODE, RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

selector_choice() { override_value selector bots "$@"; }  # the selector the overrides choose, default bots

bots_train() {
  local setting="$1"; shift
  EXPERIMENT_NAME="${EXPERIMENT_NAME:-$setting-$(selector_choice "$@")}" recipe_train bots "$setting" "$@"
}
