#!/usr/bin/env bash
# `make test`: two lanes and a build side by side on a 2-core machine.
#   lane 1: the e2e modules (Ray, vLLM, training runs; one at a time, in one pytest process), those marked `vllm` last;
#   lane 2: all tests outside e2e (`make test-fast`'s selection), then the e2e modules and tests marked `beside`;
#   build:  the vLLM environment (VLLM_ENV_BUILD, e.g. `make vllm-env`: ~2.5 min on a fresh machine, nothing once
#           built), which only the `vllm` modules need.
# A trainer run keeps ~1.1 of the 2 cores busy while it starts (~40 s a run: verl's processes start and import one
# after another) and both while it trains, so lane 2 and the build fill the gaps, at a lower priority (nice 10: lane 1
# ends with the `vllm` modules and is the longest path; run beside it at the same priority, the first e2e module took
# 325 s instead of 122). Two 3-step runs side by side took 90 s (nice 0) and 108 s (nice 10) against 72 s alone; beside
# the light tests a lane-1 module ran about as fast as alone (2026-11-28; not on 2026-12-02's machine: Ray's workers
# run at +15, below them, tests/README.md), beside a lane-2 trainer run ~1.5x slower (the progress
# chain's SFT 2.4x). This split measured 32:04 from a fresh clone against 34:31 with one e2e lane; moving the vllm module
# to lane 2 and default-vs-stock to lane 1 measured 34:37; with one thread (below) and the lighter router, 25:38 to
# 31:31 in four runs of one commit; with one trainer run fewer and three small modules moved to lane 2, 27:34,
# 27:49 and 27:16 (tests/README.md).
# Everything but the vLLM part computes on one thread (OMP_NUM_THREADS=1, and VERL_EXT_CPU_THREADS=1 for the CPU
# mode's processes, verl_ext/cpu/__init__.py): the tensors are tiny and the two cores shared, so a second OpenMP thread
# only spins and waits for a core (a 3-step trainer run 74.7 s on one thread vs 76.3 s on two alone, with 10 CPU-s
# less; 88 vs 97 s beside a busy process; the SFT test's run 25 vs 34 s alone). Every Ray cluster is private (its own
# ports and session), so a lane-2 run and a lane-1 run do not meet. Lane 2's output is printed after lane 1's; the exit
# status is non-zero when any part fails (pytest's 5, nothing selected, counts as passed: `-k` may leave a part empty).
#   PYTHON=.venv/bin/python VLLM_ENV_BUILD="make vllm-env" bash scripts/run_tests.sh [pytest arguments for every part]
set -euo pipefail
PYTHON="${PYTHON:-python}"
# Ray starts its workers at niceness +15 (RAY_worker_niceness), so a lane-1 trainer's workers run at 15 and lane 2's
# at 19, below lane 2's light tests (10). Tried 2026-12-02 with RAY_worker_niceness=0 (lane 1's workers at 0, lane
# 2's at 10): lane 1 27:38 instead of 28:15, lane 2 31:29 instead of 26:25, the suite 3 min longer; kept at Ray's.
lane2_log="$(mktemp -t verl_ext_tests.XXXXXX)"
lane2_status="$(mktemp -t verl_ext_tests_status.XXXXXX)"
build_log="$(mktemp -t verl_ext_vllm_env.XXXXXX)"
lane2="" build=""
cleanup() {
  for pid in $lane2 $build; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  rm -f "$lane2_log" "$lane2_status" "$build_log"
}
trap cleanup EXIT

passed() { (( $1 == 0 || $1 == 5 )); }

# the build and lane 2 each in its own process group (set -m), so that the clean-up ends whatever they started
set -m
if [[ -n "${VLLM_ENV_BUILD:-}" ]]; then
  nice -n 10 bash -c "$VLLM_ENV_BUILD" >"$build_log" 2>&1 &
  build=$!
fi
LANE2_STATUS="$lane2_status" OMP_NUM_THREADS=1 VERL_EXT_CPU_THREADS=1 nice -n 10 bash -c '
  rest=0 beside=0
  echo "==================== the tests outside e2e ===================="
  "$0" -m pytest tests -m "not e2e" -p no:cacheprovider "$@" || rest=$?
  echo "==================== the e2e modules and tests marked beside ===================="
  "$0" -m pytest tests -m "e2e and beside" -p no:cacheprovider "$@" || beside=$?
  echo "$rest $beside" >"$LANE2_STATUS"
' "$PYTHON" "$@" >"$lane2_log" 2>&1 &
lane2=$!
set +m

e2e=0
OMP_NUM_THREADS=1 VERL_EXT_CPU_THREADS=1 "$PYTHON" -m pytest tests -m "e2e and not vllm and not beside" "$@" || e2e=$?
env_built=0
if [[ -n "$build" ]]; then
  wait "$build" || env_built=$?
  build=""
  if (( env_built )); then
    echo "==================== building the vLLM environment failed (exit $env_built) ===================="
    cat "$build_log"
  else
    echo "vLLM environment: $(tail -n 1 "$build_log")"
  fi
fi
vllm=$env_built
if (( env_built == 0 )); then
  VERL_EXT_REQUIRE_VLLM=1 "$PYTHON" -m pytest tests -m "e2e and vllm" -p no:cacheprovider "$@" || vllm=$?
fi

wait "$lane2" || true
lane2=""
echo "==================== lane 2 (run beside lane 1) ===================="
cat "$lane2_log"
read -r rest beside <"$lane2_status" || { rest=1; beside=1; }
echo "e2e lane 1: exit $e2e; vllm part: exit $vllm; tests outside e2e: exit $rest; e2e lane 2 (beside): exit $beside"
passed "$e2e" && passed "$vllm" && passed "$rest" && passed "$beside"
