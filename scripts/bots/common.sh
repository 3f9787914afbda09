# Sourced by the BOTS launchers: `bots_train SETTING [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +bots=SETTING <paths, cluster size> "$@"
# Every hyperparameter lives in recipes/bots/SETTING.yaml; the environment gives only paths and hardware:
#   PYTHON           interpreter                               (default: .venv/bin/python, else python3)
#   DATA_DIR         scripts/bots/prepare_data.sh output       (default: data/bots)
#   OUT_DIR          checkpoints + metrics, one folder per run (default: outputs/bots)
#   MODEL_PATH       local copy of the model                   (default: the recipe's hub id)
#   EXPERIMENT_NAME  run name and folder                       (default: SETTING-SELECTOR, e.g. qwen2.5-7b_math-random)
#   NNODES           nodes; > 1 joins the Ray cluster at RAY_ADDRESS (default: 1; scripts/ray_cluster.sh)
#   GPUS_PER_NODE    (default: 8)
#   CPU=1            CPU mode (python -m verl_ext.main --cpu); NNODES / GPUS_PER_NODE are then not passed
#   DRY_RUN=1        print the command instead of running it
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

abspath() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }

execute() {  # run the command, or print it (shell-quoted) with DRY_RUN=1
  if [[ "${DRY_RUN:-0}" == 1 ]]; then printf '%q ' "$@"; echo; else "$@"; fi
}

# The selector group chosen by the overrides (the last selector=X wins, as in Hydra), default bots.
selector_choice() {
  local choice=bots arg
  for arg in "$@"; do [[ "$arg" == selector=* ]] && choice="${arg#selector=}"; done
  echo "$choice"
}

bots_train() {
  local setting="$1"; shift
  local data_dir out_dir name
  data_dir="$(abspath "${DATA_DIR:-$ROOT/data/bots}")"
  out_dir="$(abspath "${OUT_DIR:-$ROOT/outputs/bots}")"
  name="${EXPERIMENT_NAME:-$setting-$(selector_choice "$@")}"
  local cmd=("$PYTHON" -m verl_ext.main)
  [[ "${CPU:-0}" == 1 ]] && cmd+=(--cpu)
  cmd+=(--config-dir "$ROOT/recipes" "+bots=$setting" "recipe.data_dir=$data_dir"
        "trainer.experiment_name=$name" "trainer.default_local_dir=$out_dir/$name")
  [[ -n "${MODEL_PATH:-}" ]] && cmd+=("actor_rollout_ref.model.path=$MODEL_PATH")
  if [[ "${CPU:-0}" != 1 ]]; then
    local nnodes="${NNODES:-1}"
    cmd+=("trainer.nnodes=$nnodes" "trainer.n_gpus_per_node=${GPUS_PER_NODE:-8}")
    if (( nnodes > 1 )); then
      [[ -n "${RAY_ADDRESS:-}" ]] || { echo "NNODES=$nnodes needs RAY_ADDRESS (a running cluster: scripts/ray_cluster.sh)" >&2; return 2; }
      export RAY_ADDRESS  # ray.init() in verl joins it
    fi
  fi
  execute "${cmd[@]}" "$@"
}
