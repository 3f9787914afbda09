#!/usr/bin/env bash
# A first measurement on a bare GPU machine: python + torch (CUDA) + transformers and this repository, no vLLM /
# verl / Ray / Hydra, no network, nothing installed. Under 10 minutes on one H100/H200 (BUDGET_S, default 540 s):
#   1. the actor update on CUDA in bf16 for every attention backend (python -m verl_ext.apps.check_gpu --no-vllm):
#      log-probs and gradients against eager attention on the padded batch;
#   2. the attention bench (python -m verl_ext.apps.bench.attention): forward + backward of a Qwen2.5-1.5B-shaped
#      model, random weights, on packed micro-batches of 8k / 16k / 32k tokens, per backend;
#   3. the actor's step pattern (python -m verl_ext.apps.bench.attention --steps): eval forward, then train forward +
#      backward, new micro-batch sizes each step, for the recipes' backend and sdpa: what compilation costs in the
#      first step and whether later steps compile again;
#   4. one Markdown table of all: $OUT/results.md (and $OUT/results.json; logs and raw JSON beside them).
# Each step has its own time limit and writes what it has, so a step that fails or hangs leaves the others' rows.
#
#   scripts/gpu_first_hour.sh                      # on the GPU machine, from anywhere
#   MODEL_PATH=/models/Qwen2.5-1.5B scripts/gpu_first_hour.sh   # its weights in step 1, its shape in step 2
#   DEVICE=cpu SIZE=tiny scripts/gpu_first_hour.sh # the dry run on a CPU (tiny model; not a measurement)
# Environment: OUT (default: the repository's outputs/gpu_first_hour), BUDGET_S, PYTHON (default python3),
# HF_HUB_OFFLINE (default 1: hub kernels are skipped; set 0 where the hub is reachable).
set -uo pipefail

[[ -n ${MODEL_PATH:-} ]] && { MODEL_PATH=$(cd "$MODEL_PATH" && pwd) || exit 1; }  # paths given: from here
[[ -n ${OUT:-} ]] && { mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
if [[ $DEVICE == cpu ]]; then SIZE=${SIZE:-tiny}; CPU_FLAG=(--cpu); REPEATS=1; STEPS=2; STEP_TOKENS=256; STEPS_S=60
else SIZE=${SIZE:-1.5b}; CPU_FLAG=(); REPEATS=3; STEPS=6; STEP_TOKENS=8192; STEPS_S=150; fi
OUT=${OUT:-outputs/gpu_first_hour}
BUDGET_S=${BUDGET_S:-540}
MODEL_ARGS=()
[[ -n ${MODEL_PATH:-} ]] && MODEL_ARGS=(--model "$MODEL_PATH")
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the repository, not installed
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
rm -f "$OUT"/{update,bench,steps,results}.json "$OUT/results.md"

start=$SECONDS
left() { local l=$(( BUDGET_S - (SECONDS - start) )); echo $(( l > 1 ? l : 1 )); }  # timeout 0: none
limited() {  # limited SECONDS COMMAND...: coreutils' timeout where the machine has it
  local seconds=$1; shift
  if command -v timeout >/dev/null; then timeout --kill-after=10 "$seconds" "$@"; else "$@"; fi
}
echo "gpu_first_hour: device $DEVICE, model ${MODEL_PATH:-random weights ($SIZE shape)}, budget ${BUDGET_S} s, out $OUT"
"$PYTHON" -c 'import torch, transformers as t; print(f"torch {torch.__version__}, transformers {t.__version__}")' \
  || { echo "gpu_first_hour: torch and transformers must import" >&2; exit 1; }

# 1. actor update per backend: at most a third of the budget (flex_attention compiles on its first call)
limit=$(( $(left) / 3 + 1 ))
limited "$limit" "$PYTHON" -m verl_ext.apps.check_gpu --no-vllm ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} \
  ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --json "$OUT/update.json" 2>&1 | tee "$OUT/update.log"
update_rc=${PIPESTATUS[0]}
[[ $update_rc == 124 || $update_rc == 137 ]] && echo "gpu_first_hour: update check stopped at ${limit} s" >&2

# 2. attention bench: starts no measurement in its last 60 s, stopped STEPS_S + 15 s before the end of the budget
limit=$(( $(left) > STEPS_S + 16 ? $(left) - STEPS_S - 15 : 1 ))
limited "$limit" "$PYTHON" -m verl_ext.apps.bench.attention --device "$DEVICE" --size "$SIZE" --repeats "$REPEATS" \
  ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --budget-s $(( limit - 60 > 0 ? limit - 60 : 0 )) --json "$OUT/bench.json" \
  2>&1 | tee "$OUT/bench.log"
bench_rc=${PIPESTATUS[0]}
[[ $bench_rc == 124 || $bench_rc == 137 ]] && echo "gpu_first_hour: bench stopped at its ${limit} s limit" >&2

# 3. the actor's step pattern: flex attention's first step compiles (about a minute on one H200), later ones should not
limit=$(( $(left) > 16 ? $(left) - 15 : 1 ))
limited "$limit" "$PYTHON" -m verl_ext.apps.bench.attention --device "$DEVICE" --size "$SIZE" --steps "$STEPS" \
  --tokens "$STEP_TOKENS" --backends flex_attention sdpa ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} --json "$OUT/steps.json" \
  2>&1 | tee "$OUT/steps.log"
steps_rc=${PIPESTATUS[0]}
[[ $steps_rc == 124 || $steps_rc == 137 ]] && echo "gpu_first_hour: actor steps stopped at their ${limit} s limit" >&2

# 4. one table
"$PYTHON" -m verl_ext.apps.bench.attention --summary "$OUT" || exit 1
echo "gpu_first_hour: $(( SECONDS - start )) s; update check exit $update_rc, bench exit $bench_rc," \
  "actor steps exit $steps_rc; table: $OUT/results.md"
[[ $update_rc == 0 && $bench_rc == 0 && $steps_rc == 0 ]]
