# Sourced by scripts/<group>/gpu_smoke.sh after the group's common.sh: a method's one-GPU smoke run, its recipe
# recipes/<group>/gpu_smoke.yaml (a paper setting at small sizes) through the group's launcher function, the same
# chain as the paper runs. Environment (scripts/common.sh), with the smoke run's defaults:
#   MODEL_PATH     policy, also for the data preparation that needs a model (default Qwen/Qwen2.5-0.5B-Instruct)
#   DATA_DIR       small data, made by the script (default data/<group>_smoke; FORCE=1 rebuilds it)
#   OUT_DIR        checkpoints + metrics (default outputs/<group>_smoke)
#   GPUS_PER_NODE  (default 1), NNODES (default 1), EXPERIMENT_NAME, PYTHON, DRY_RUN=1 (print the commands)

SMOKE_MODEL=Qwen/Qwen2.5-0.5B-Instruct  # what every recipes/*/gpu_smoke.yaml names

smoke_setup() {  # smoke_setup GROUP: the defaults above, exported
  export MODEL_PATH="${MODEL_PATH:-$SMOKE_MODEL}" GPUS_PER_NODE="${GPUS_PER_NODE:-1}" PYTHONUNBUFFERED=1
  DATA_DIR="$(abspath "${DATA_DIR:-$ROOT/data/$1_smoke}")" OUT_DIR="$(abspath "${OUT_DIR:-$ROOT/outputs/$1_smoke}")"
  export DATA_DIR OUT_DIR
}

# True when FILE is missing or FORCE=1: the data preparation then runs (it is kept from an earlier run otherwise).
smoke_needs() {  # smoke_needs FILE
  [[ ! -f "$1" || "${FORCE:-0}" == 1 ]]
}

# TRAIN (the group's launcher function) on the gpu_smoke recipe, then what the run shows: the per-step table and
# AXIS's choices (python -m verl_ext.apps.run_summary), where the metrics and the checkpoint are and which keys to read.
# Exits 1 when this run (not an earlier one in the same folder) saved no checkpoint or logged no validation.
smoke_train() {  # smoke_train TRAIN AXIS [launcher arguments...]
  local train="$1" axis="$2"; shift 2
  export EXPERIMENT_NAME
  local run="$OUT_DIR/$EXPERIMENT_NAME" started step
  started="@$(date +%s.%N)"  # this run's files are newer (find -newermt)
  "$train" gpu_smoke "$@"
  [[ "${DRY_RUN:-0}" == 1 ]] && return 0
  "$PYTHON" -m verl_ext.apps.run_summary "$run" --axis "$axis"
  step="$(tr -d '[:space:]' 2>/dev/null <"$run/latest_checkpointed_iteration.txt")" || true
  if [[ -z "$step" || ! -d "$run/global_step_$step" ||
        -z "$(find "$run/latest_checkpointed_iteration.txt" -newermt "$started")" ]]; then
    echo "gpu_smoke: this run saved no checkpoint in $run (trainer.save_freq)" >&2
    return 1
  fi
  if [[ -z "$(find "$run/metrics" -name '*.jsonl' -newermt "$started" -exec grep -l '"val-core/' {} + 2>/dev/null)" ]]
  then
    echo "gpu_smoke: this run logged no validation metrics (val-core/...) in $run/metrics" >&2
    return 1
  fi
  cat <<EOF
gpu_smoke: $SECONDS s in all
  metrics:    $run/metrics/*.jsonl (verl's file logger: one {"step": N, "data": {...}} line per step)
  checkpoint: $run/global_step_$step
  keys: critic/score/mean (training reward), val-core/<data_source>/acc/mean@N (validation after the last step),
        data_selection/$axis/* (the method's own scalars), data_selection/effective_task_ratio,
        timing_s/gen, timing_s/update_actor, timing_s/step (seconds)
EOF
}
