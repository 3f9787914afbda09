# Sourced by the recipe launchers (scripts/<group>/common.sh): `recipe_train GROUP SETTING [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +GROUP=SETTING <paths, cluster size> "$@"
# Every hyperparameter lives in recipes/GROUP/SETTING.yaml; the environment gives only paths and hardware:
#   PYTHON           interpreter                               (default: .venv/bin/python, else python3)
#   DATA_DIR         scripts/GROUP/prepare_data.sh output      (default: data/GROUP)
#   OUT_DIR          checkpoints + metrics, one folder per run (default: outputs/GROUP)
#   MODEL_PATH       local copy of the model                   (default: the recipe's hub id)
#   EXPERIMENT_NAME  run name and folder                       (default: the group's, else SETTING)
#   NNODES           nodes; > 1 joins the Ray cluster at RAY_ADDRESS (default: 1; scripts/ray_cluster.sh)
#   GPUS_PER_NODE    (default: 8; with CPU=1: the recipe's, actor ranks per node)
#   CPU=1            CPU mode (python -m verl_ext.main --cpu): a private one-node Ray instance, or with NNODES > 1 the
#                    cluster at RAY_ADDRESS (nodes started by CPU=1 scripts/ray_cluster.sh)
#   DRY_RUN=1        print the command instead of running it
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

abspath() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }

execute() {  # run the command, or print it (shell-quoted) with DRY_RUN=1
  if [[ "${DRY_RUN:-0}" == 1 ]]; then printf '%q ' "$@"; echo; else "$@"; fi
}

# The value the overrides give KEY (the last KEY=X wins, as in Hydra), else DEFAULT; e.g. the selector chosen.
override_value() {  # override_value KEY DEFAULT OVERRIDES...
  local key="$1" value="$2" arg
  shift 2
  for arg in "$@"; do [[ "$arg" == "$key="* ]] && value="${arg#"$key="}"; done
  echo "$value"
}

# Where python -m verl_ext.models.embedded puts the embedded policy; with DRY_RUN=1 without converting it.
embedded_model_path() {  # embedded_model_path [NUM_LAYERS]
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    "$PYTHON" -c 'import sys; from verl_ext.models.embedded import cache_root, model_name
print(cache_root() / "models" / model_name(int(sys.argv[1]) if sys.argv[1] else None))' "${1:-}"
  else
    "$PYTHON" -m verl_ext.models.embedded ${1:+--num-layers "$1"}
  fi
}

# One data_prep dataset into DIR/NAME/SPLIT.parquet, kept if present (FORCE=1 rebuilds); the source is
# the Hugging Face hub, or a local copy in the source's own format given as <NAME>_INPUT.
prepare_dataset() {  # prepare_dataset DIR NAME SPLIT
  local dir="$1" name="$2" split="$3" input_var
  input_var="$(tr 'a-z' 'A-Z' <<<"$name")_INPUT"
  if [[ -f "$dir/$name/$split.parquet" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $dir/$name/$split.parquet"
    return 0
  fi
  local cmd=("$PYTHON" -m data_prep "$name" --out "$dir")
  [[ -n "${!input_var:-}" ]] && cmd+=(--input "${!input_var}")
  execute "${cmd[@]}"
}

# Evaluation prompts must not be training prompts (python -m data_prep.overlap, word 13-grams): exits 1
# listing the overlaps; ALLOW_OVERLAP=1 reports them and goes on. Paths are relative to DIR, without .parquet.
check_overlap() {  # check_overlap DIR TRAIN EVAL...
  local dir="$1" train="$2" name
  shift 2
  local cmd=("$PYTHON" -m data_prep.overlap --train "$dir/$train.parquet" --eval)
  for name in "$@"; do cmd+=("$dir/$name.parquet"); done
  cmd+=(--json "$dir/overlap_${train%%/*}.json")
  execute "${cmd[@]}" && return 0
  if [[ "${ALLOW_OVERLAP:-0}" == 1 ]]; then
    echo "warning: evaluation prompts overlap training prompts (above; ALLOW_OVERLAP=1)" >&2
  else
    echo "evaluation prompts overlap training prompts (above; $dir/overlap_${train%%/*}.json): remove them from" \
         "one side, or set ALLOW_OVERLAP=1 to go on" >&2
    return 1
  fi
}

recipe_train() {
  local group="$1" setting="$2"; shift 2
  local data_dir out_dir name
  data_dir="$(abspath "${DATA_DIR:-$ROOT/data/$group}")"
  out_dir="$(abspath "${OUT_DIR:-$ROOT/outputs/$group}")"
  name="${EXPERIMENT_NAME:-$setting}"
  local cmd=("$PYTHON" -m verl_ext.main)
  [[ "${CPU:-0}" == 1 ]] && cmd+=(--cpu)
  cmd+=(--config-dir "$ROOT/recipes" "+$group=$setting" "recipe.data_dir=$data_dir"
        "trainer.experiment_name=$name" "trainer.default_local_dir=$out_dir/$name")
  [[ -n "${MODEL_PATH:-}" ]] && cmd+=("actor_rollout_ref.model.path=$MODEL_PATH")
  local nnodes="${NNODES:-1}"
  if [[ "${CPU:-0}" != 1 ]]; then
    cmd+=("trainer.nnodes=$nnodes" "trainer.n_gpus_per_node=${GPUS_PER_NODE:-8}")
  else  # the CPU preset's one node and the recipe's ranks unless given
    (( nnodes > 1 )) && cmd+=("trainer.nnodes=$nnodes")
    [[ -n "${GPUS_PER_NODE:-}" ]] && cmd+=("trainer.n_gpus_per_node=$GPUS_PER_NODE")
  fi
  if (( nnodes > 1 )); then
    [[ -n "${RAY_ADDRESS:-}" ]] || { echo "NNODES=$nnodes needs RAY_ADDRESS (a running cluster: scripts/ray_cluster.sh)" >&2; return 2; }
    export RAY_ADDRESS  # ray.init() in verl joins it (the CPU preset passes it as ray_init.address)
  fi
  execute "${cmd[@]}" "$@"
}

# How many of the arguments are leading names (at most 2: OBJECTIVE, CHOICE) rather than Hydra overrides.
leading_names() {
  local n=0
  while (( n < 2 && $# )) && [[ "$1" =~ ^[A-Za-z0-9_]+$ ]]; do n=$((n + 1)); shift; done
  echo "$n"
}

# objective_train GROUP AXIS DEFAULT_CHOICE SETTING [OBJECTIVE [CHOICE]] [Hydra overrides...]: recipe_train GROUP
# SETTING +objective=OBJECTIVE (default grpo) AXIS=CHOICE, then the user's overrides. python -m verl_ext.main adds the
# recipe's rows for both (recipe.objectives / schedulers / selectors, verl_ext/launch/recipe_tables.py) after the choices,
# so the user's overrides win. The objective and the choice are refused as overrides (they would come after the
# rows), unknown names exit 2. EXPERIMENT_NAME defaults to SETTING-OBJECTIVE-CHOICE.
objective_train() {
  local group="$1" axis="$2" choice="$3" setting="$4"; shift 4
  local objective=grpo arg kind name
  case "$(leading_names "$@")" in
    1) objective="$1"; shift ;;
    2) objective="$1" choice="$2"; shift 2 ;;
  esac
  for arg in "$@"; do
    case "$arg" in
      objective=*|+objective=*|++objective=*|"$axis"=*|"+$axis"=*|"++$axis"=*)
        echo "choose the objective and the ${axis//_/ } as the launcher's first two arguments (they bring their" \
             "settings from recipes/$group), not as '$arg'" >&2
        return 2 ;;
    esac
  done
  for kind in objective "$axis"; do
    [[ "$kind" == objective ]] && name="$objective" || name="$choice"
    if [[ ! -f "$ROOT/verl_ext/config/$kind/$name.yaml" ]]; then
      echo "unknown $kind '$name' (verl_ext/config/$kind: $(cd "$ROOT/verl_ext/config/$kind" && LC_ALL=C ls *.yaml | sed 's/\.yaml$//' | xargs))" >&2
      return 2
    fi
  done
  EXPERIMENT_NAME="${EXPERIMENT_NAME:-$setting-$objective-$choice}" \
    recipe_train "$group" "$setting" "+objective=$objective" "$axis=$choice" "$@"
}

# The end of every scripts/*/cpu_embedded.sh: TRAIN (the group's launcher function) on its cpu_embedded recipe with
# MODEL_PATH and EXPERIMENT_NAME, then the run's per-step table of AXIS (python -m verl_ext.apps.run_summary) and the
# script's wall time.
cpu_embedded_train() {  # cpu_embedded_train TRAIN AXIS [launcher arguments...]
  local train="$1" axis="$2"; shift 2
  export MODEL_PATH EXPERIMENT_NAME
  "$train" cpu_embedded "$@"
  [[ "${DRY_RUN:-0}" == 1 ]] && return 0
  "$PYTHON" -m verl_ext.apps.run_summary "$(abspath "$OUT_DIR")/$EXPERIMENT_NAME" --axis "$axis"
  echo "cpu_embedded: $SECONDS s in all"
}
