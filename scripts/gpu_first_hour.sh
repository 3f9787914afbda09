#!/usr/bin/env bash
# A first measurement on a bare GPU machine: python + torch (CUDA) + transformers and this repository, no vLLM /
# verl / Ray / Hydra, no network, nothing installed but the wheelhouse, into WORK. Under 10 minutes on one H100/H200 (BUDGET_S, default 540 s):
#   0. where verl is not installed, the wheelhouse (WHEELHOUSE, default .gpu-wheelhouse: `make gpu-wheelhouse` on a
#      machine with the network, carried beside the checkout: verl and the transformers a GPU user gets) installed into
#      $WORK/site and put first on every step's path, so the whole table is of one stack (its header says which);
#   1. the actor update on CUDA in bf16 for every attention backend (python -m verl_ext.apps.gpu.check_gpu --no-vllm):
#      log-probs and gradients against eager attention on the padded batch;
#   2. verl 0.9.1's own actor (python -m verl_ext.apps.gpu.verl_actor: ActorRolloutRefWorker, role actor, without Ray)
#      built from a recipe's config (VERL_RECIPE, default bots/qwen2.5-1.5b-instruct_math) with its token budget,
#      a few trainer steps per backend (VERL_BACKENDS, default the recipes' sdpa, then flex_attention, which gets
#      what sdpa left of the step's time: its first step compiles), each backend under its own time guard; Ray from
#      the import stub scripts/bare_gpu/ray_import_stub (only where no Ray is installed);
#   3. the actor's step pattern (python -m verl_ext.apps.gpu.attention_bench --steps): eval forward, then train forward +
#      backward, new micro-batch sizes each step, for the recipes' backend and sdpa: what compilation costs in the
#      first step and whether later steps compile again;
#   4. with the time left only: the attention bench (python -m verl_ext.apps.gpu.attention_bench): forward + backward
#      of a Qwen2.5-1.5B-shaped model, random weights, on packed micro-batches of 8k / 16k / 32k tokens, per backend;
#   5. one Markdown table of all: $OUT/results.md (and $OUT/results.json, the raw JSON, one log.txt beside them).
# Each step has its own time limit and writes what it has, so a step that fails or hangs leaves the others' rows.
# Steps 1-3 each get at least their minimum (MIN_UPDATE_S, MIN_VERL_S, STEPS_S) even when the setup and the steps
# before them use their whole limits (a BUDGET_S too small for that is refused); PLAN_ONLY=1 prints that worst-case
# split and runs nothing. $OUT receives at most 8 files, none
# in a folder (what a GPU machine's output folder gives back); the wheelhouse's install and verl's work folder
# (checkpoint of random weights, config, logs) go to WORK (default: a temporary folder, removed at the end).
#
#   scripts/gpu_first_hour.sh                      # on the GPU machine, from anywhere
#   MODEL_PATH=/models/Qwen2.5-1.5B scripts/gpu_first_hour.sh   # its weights in steps 1-2, its shape in 3-4
#   DEVICE=cpu SIZE=tiny scripts/gpu_first_hour.sh # the dry run on a CPU (tiny model; not a measurement)
# Environment: OUT (default: the repository's outputs/gpu_first_hour), WORK, BUDGET_S, VERL_S (step 2's cap, default
# 270 s on a GPU), PYTHON (default python3), HF_HUB_OFFLINE (default 1: hub kernels are skipped; set 0 where the
# hub is reachable).
set -uo pipefail

[[ -n ${MODEL_PATH:-} ]] && { MODEL_PATH=$(cd "$MODEL_PATH" && pwd) || exit 1; }  # paths given: from here
[[ -n ${OUT:-} && -z ${PLAN_ONLY:-} ]] && { mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1; }
[[ -n ${WORK:-} && -z ${PLAN_ONLY:-} ]] && { mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd) || exit 1; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
if [[ $DEVICE == cpu ]]; then SIZE=${SIZE:-tiny}; CPU_FLAG=(--cpu); REPEATS=1; STEPS=2; STEP_TOKENS=256
  STEPS_S=60; MIN_UPDATE_S=40; MIN_VERL_S=90; VERL_S=${VERL_S:-150}; VERL_BACKENDS=${VERL_BACKENDS:-sdpa sdpa_padded flex_attention}
else SIZE=${SIZE:-1.5b}; CPU_FLAG=(); REPEATS=3; STEPS=6; STEP_TOKENS=8192; STEPS_S=150; MIN_UPDATE_S=60
  MIN_VERL_S=150; VERL_S=${VERL_S:-270}; VERL_BACKENDS=${VERL_BACKENDS:-sdpa flex_attention}; fi
MIN_BENCH_S=60  # the bench starts no measurement in its last 60 s: less than this left, it is skipped
VERL_RECIPE=${VERL_RECIPE:-bots/qwen2.5-1.5b-instruct_math}
WHEELHOUSE=${WHEELHOUSE:-.gpu-wheelhouse}
OUT=${OUT:-outputs/gpu_first_hour}
BUDGET_S=${BUDGET_S:-540}
MODEL_ARGS=()
[[ -n ${MODEL_PATH:-} ]] && MODEL_ARGS=(--model "$MODEL_PATH")
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the repository, not installed
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TOKENIZERS_PARALLELISM=false

start=$SECONDS
if [[ -n ${PLAN_ONLY:-} ]]; then  # the worst case: every step uses its whole limit
  used=0
  left() { echo $(( BUDGET_S - used )); }
else
  left() { local l=$(( BUDGET_S - (SECONDS - start) )); echo $(( l > 1 ? l : 1 )); }  # timeout 0: none
fi
# step limits: each leaves the later steps' minimums, KILL_S per step (timeout's --kill-after) and TABLE_S for the
# table; SETUP_S is what the install and the import checks before step 1 may take
KILL_S=10 TABLE_S=15 SETUP_S=30
after_update=$(( MIN_VERL_S + KILL_S + STEPS_S + KILL_S + TABLE_S ))
need=$(( SETUP_S + MIN_UPDATE_S + KILL_S + after_update ))
(( BUDGET_S >= need )) || { echo "gpu_first_hour: BUDGET_S=$BUDGET_S is below the ${need} s that setup and the" \
  "minimums of steps 1-3 need on $DEVICE" >&2; exit 2; }
(( VERL_S >= MIN_VERL_S )) || { echo "gpu_first_hour: VERL_S=$VERL_S is below step 2's minimum, $MIN_VERL_S s" >&2; exit 2; }
at_least() { echo $(( $1 > $2 ? $1 : $2 )); }
at_most() { echo $(( $1 < $2 ? $1 : $2 )); }
update_limit() { at_least "$(at_most $(( $(left) / 3 + 1 )) $(( $(left) - KILL_S - after_update )))" 1; }
verl_limit() { at_least "$(at_most "$VERL_S" $(( $(left) - KILL_S - STEPS_S - KILL_S - TABLE_S )))" 1; }
steps_limit() { at_least "$(at_most "$STEPS_S" $(( $(left) - KILL_S - TABLE_S )))" 1; }
bench_limit() { at_least $(( $(left) - KILL_S - TABLE_S )) 0; }
if [[ -n ${PLAN_ONLY:-} ]]; then
  echo "gpu_first_hour: the worst-case split of ${BUDGET_S} s on $DEVICE, each step charged its limit + ${KILL_S} s" \
    "(minimums: update $MIN_UPDATE_S, verl $MIN_VERL_S, steps $STEPS_S, bench $MIN_BENCH_S)"
  used=$SETUP_S; echo "plan: setup $SETUP_S s"
  for step in update verl_actor steps bench; do
    limit=$("${step%_actor}_limit"); echo "plan: $step $limit s"
    used=$(( used + limit + (limit > 0 ? KILL_S : 0) ))
  done
  echo "plan: total $used s"
  exit 0
fi
WORK=${WORK:-}
if [[ -z $WORK ]]; then WORK=$(mktemp -d -t gpu_first_hour.XXXXXX); trap 'rm -rf "$WORK"' EXIT; fi
mkdir -p "$OUT" "$WORK"
rm -f "$OUT"/{update,verl_actor,bench,steps,results}.json "$OUT"/{results,verl_actor}.md "$OUT/log.txt" \
  "$OUT"/{update,verl_actor,bench,steps}.log  # and an older layout's logs, site and work folder:
rm -rf "$OUT/site" "$OUT/verl_actor"
LOG=$OUT/log.txt  # every step's output, in one file
limited() {  # limited SECONDS COMMAND...: coreutils' timeout where the machine has it
  local seconds=$1; shift
  if command -v timeout >/dev/null; then timeout --kill-after=10 "$seconds" "$@"; else "$@"; fi
}
echo "gpu_first_hour: device $DEVICE, model ${MODEL_PATH:-random weights ($SIZE shape)}, budget ${BUDGET_S} s, out $OUT" \
  | tee "$LOG"
"$PYTHON" -c 'import torch, transformers as t; print(f"torch {torch.__version__}, transformers {t.__version__}")' \
  2>&1 | tee -a "$LOG"
[[ ${PIPESTATUS[0]} == 0 ]] || { echo "gpu_first_hour: torch and transformers must import" >&2; exit 1; }

# 0. the wheelhouse (verl, and the transformers and tokenizers a GPU user's make install-gpu gets) on every step's path,
#    where verl is not installed: one stack for the whole table
verl_rc=skipped
if ! "$PYTHON" -c 'import verl' 2>/dev/null; then
  if [[ -f $WHEELHOUSE/requirements.txt ]]; then
    rm -rf "$WORK/site"
    "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --find-links "$WHEELHOUSE" --target "$WORK/site" \
      -r "$WHEELHOUSE/requirements.txt" && export PYTHONPATH="$WORK/site:$PYTHONPATH" \
      || { echo "gpu_first_hour: installing $WHEELHOUSE failed; verl's actor step skipped" | tee -a "$LOG" >&2
           verl_rc=wheelhouse; }
  else
    echo "gpu_first_hour: no verl and no wheelhouse ($WHEELHOUSE): run 'make gpu-wheelhouse' where PyPI is" \
      "reachable and carry the folder; verl's actor step skipped" | tee -a "$LOG" >&2
    verl_rc=wheelhouse
  fi
fi
"$PYTHON" -c 'import transformers as t, tokenizers as k; print(f"every step: transformers {t.__version__}, tokenizers {k.__version__}")' \
  2>&1 | tee -a "$LOG"

# 1. actor update per backend: at most a third of the budget (flex_attention compiles on its first call)
limit=$(update_limit)
limited "$limit" "$PYTHON" -m verl_ext.apps.gpu.check_gpu --no-vllm ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} \
  ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --json "$OUT/update.json" 2>&1 | tee -a "$LOG"
update_rc=${PIPESTATUS[0]}
[[ $update_rc == 124 || $update_rc == 137 ]] && echo "gpu_first_hour: update check stopped at ${limit} s" | tee -a "$LOG" >&2

# 2. verl's actor: verl from the wheelhouse where it is not installed (step 0), Ray's import stub where Ray is not
verl_path=$PYTHONPATH
"$PYTHON" -c 'import ray' 2>/dev/null || verl_path="$PWD/scripts/bare_gpu/ray_import_stub:$verl_path"
if [[ $verl_rc == skipped ]]; then
  limit=$(verl_limit)
  PYTHONPATH=$verl_path limited "$limit" "$PYTHON" -m verl_ext.apps.gpu.verl_actor ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} \
    --recipe "$VERL_RECIPE" --backends $VERL_BACKENDS ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --budget-s $(( limit - 20 )) \
    --guard-s $(( limit - 20 )) --workdir "$WORK/verl_actor" \
    --json "$OUT/verl_actor.json" 2>&1 | tee -a "$LOG"
  verl_rc=${PIPESTATUS[0]}
  [[ $verl_rc == 124 || $verl_rc == 137 ]] && echo "gpu_first_hour: verl's actor stopped at its ${limit} s limit" | tee -a "$LOG" >&2
fi

# 3. the actor's step pattern: flex attention's first step compiles (about a minute on one H200), later ones should not
limit=$(steps_limit)
limited "$limit" "$PYTHON" -m verl_ext.apps.gpu.attention_bench --device "$DEVICE" --size "$SIZE" --steps "$STEPS" \
  --tokens "$STEP_TOKENS" --backends flex_attention sdpa ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --json "$OUT/steps.json" \
  2>&1 | tee -a "$LOG"
steps_rc=${PIPESTATUS[0]}
[[ $steps_rc == 124 || $steps_rc == 137 ]] && echo "gpu_first_hour: actor steps stopped at their ${limit} s limit" | tee -a "$LOG" >&2

# 4. attention bench, with the time left only: starts no measurement in its last 60 s
limit=$(bench_limit)
if (( limit <= MIN_BENCH_S )); then
  echo "gpu_first_hour: ${limit} s left: the attention bench is skipped" | tee -a "$LOG"; bench_rc=skipped
else
  limited "$limit" "$PYTHON" -m verl_ext.apps.gpu.attention_bench --device "$DEVICE" --size "$SIZE" \
    --repeats "$REPEATS" ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --budget-s $(( limit - 60 )) --json "$OUT/bench.json" \
    2>&1 | tee -a "$LOG"
  bench_rc=${PIPESTATUS[0]}
  [[ $bench_rc == 124 || $bench_rc == 137 ]] && echo "gpu_first_hour: bench stopped at its ${limit} s limit" \
    | tee -a "$LOG" >&2
fi

# 5. one table
"$PYTHON" -m verl_ext.apps.gpu.attention_bench --summary "$OUT" --device "$DEVICE" 2>&1 | tee -a "$LOG"
[[ ${PIPESTATUS[0]} == 0 ]] || exit 1
echo "gpu_first_hour: $(( SECONDS - start )) s; update check exit $update_rc, verl actor exit $verl_rc, bench exit" \
  "$bench_rc, actor steps exit $steps_rc; table: $OUT/results.md" | tee -a "$LOG"
[[ $update_rc == 0 && $verl_rc == 0 && ($bench_rc == 0 || $bench_rc == skipped) && $steps_rc == 0 ]]
