#!/usr/bin/env bash
# `make test`: two lanes side by side on a 2-core machine.
#   lane 1: the e2e modules not marked `beside` (Ray, training runs; one at a time, in one pytest process);
#   lane 2: the vLLM environment's build (VLLM_ENV_BUILD, e.g. `make vllm-env`: ~2.5 min on a fresh machine, nothing
#           once built) beside all tests outside e2e (`make test-fast`'s selection), then the e2e modules marked
#           `beside`, then those marked `vllm` (they need that environment).
# Measured on a 2-core machine (issue 35): a trainer run keeps ~1.1 of the 2 cores busy while it starts (~40 s a run:
# verl's processes start and import one after another) and both while it trains. Beside the tests outside e2e (one
# thread each, nice 10) the lane-1 modules ran about as fast as alone; two trainer lanes side by side each ran ~1.5x
# slower than alone (~1.33x the throughput of one lane; the progress chain's SFT runs 2.4x slower). Lane 2 runs at
# nice 10 (at the same priority the first e2e module took 325 s instead of 122).
# The tests outside e2e compute on one thread (OMP_NUM_THREADS=1: their tensors are tiny, and OpenMP threads spinning
# on cores the trainer's processes need slow both). Every Ray cluster is private (its own ports and session), so runs
# of the two lanes do not meet. Lane 2's output is printed after lane 1's; the exit status is non-zero when any part
# fails (pytest's 5, nothing selected, counts as passed: `-k` may leave a part empty).
#   PYTHON=.venv/bin/python VLLM_ENV_BUILD="make vllm-env" bash scripts/run_tests.sh [pytest arguments for every part]
set -euo pipefail
PYTHON="${PYTHON:-python}"
lane2_log="$(mktemp -t verl_ext_tests.XXXXXX)"
lane2_status="$(mktemp -t verl_ext_tests_status.XXXXXX)"
lane2=""
cleanup() {
  [[ -n "$lane2" ]] && { kill -- "-$lane2" 2>/dev/null || kill "$lane2" 2>/dev/null || true; }
  rm -f "$lane2_log" "$lane2_status"
}
trap cleanup EXIT

passed() { (( $1 == 0 || $1 == 5 )); }

# lane 2 in its own process group (set -m), so that the clean-up ends whatever it started
set -m
LANE2_STATUS="$lane2_status" VLLM_ENV_BUILD="${VLLM_ENV_BUILD:-}" nice -n 10 bash -c '
  set -u
  build="" rest=0 beside=0 vllm=0 built=0
  build_log="$(mktemp -t verl_ext_vllm_env.XXXXXX)"
  if [[ -n "$VLLM_ENV_BUILD" ]]; then
    bash -c "$VLLM_ENV_BUILD" >"$build_log" 2>&1 &
    build=$!
  fi
  echo "==================== the tests outside e2e ===================="
  OMP_NUM_THREADS=1 "$0" -m pytest tests -m "not e2e" -p no:cacheprovider "$@" || rest=$?
  echo "==================== the e2e modules marked beside ===================="
  "$0" -m pytest tests -m "e2e and beside" -p no:cacheprovider "$@" || beside=$?
  if [[ -n "$build" ]]; then
    wait "$build" || built=$?
    if (( built )); then
      echo "==================== building the vLLM environment failed (exit $built) ===================="
      cat "$build_log"
    else
      echo "vLLM environment: $(tail -n 1 "$build_log")"
    fi
  fi
  rm -f "$build_log"
  vllm=$built
  if (( built == 0 )); then
    echo "==================== the e2e modules marked vllm ===================="
    VERL_EXT_REQUIRE_VLLM=1 "$0" -m pytest tests -m "e2e and vllm" -p no:cacheprovider "$@" || vllm=$?
  fi
  echo "$rest $beside $vllm" >"$LANE2_STATUS"
' "$PYTHON" "$@" >"$lane2_log" 2>&1 &
lane2=$!
set +m

e2e=0
"$PYTHON" -m pytest tests -m "e2e and not vllm and not beside" "$@" || e2e=$?

wait "$lane2" || true
lane2=""
echo "==================== lane 2 (run beside lane 1) ===================="
cat "$lane2_log"
read -r rest beside vllm <"$lane2_status" || { rest=1; beside=1; vllm=1; }
echo "e2e lane 1: exit $e2e; tests outside e2e: exit $rest; e2e beside: exit $beside; vllm part: exit $vllm"
passed "$e2e" && passed "$rest" && passed "$beside" && passed "$vllm"
