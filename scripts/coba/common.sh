# Sourced by the CoBA-RL launchers: `coba_train SETTING [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +coba=SETTING <paths, cluster size> "$@"
# Every hyperparameter lives in recipes/coba/SETTING.yaml. Environment (scripts/common.sh): PYTHON, DATA_DIR
# (default data/coba), OUT_DIR (default outputs/coba), MODEL_PATH, EXPERIMENT_NAME (default SETTING-ALLOCATOR,
# e.g. qwen3-4b-base-knapsack), NNODES, GPUS_PER_NODE, RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

coba_train() {
  local setting="$1"; shift
  EXPERIMENT_NAME="${EXPERIMENT_NAME:-$setting-$(override_value allocator coba "$@")}" recipe_train coba "$setting" "$@"
}
