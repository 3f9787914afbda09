#!/usr/bin/env bash
# `make test`: three things side by side on a 2-core machine.
#   1. the e2e modules (Ray, vLLM, training runs; one at a time, in one pytest process), those marked `vllm` last;
#   2. all other tests (a second pytest process, `make test-fast`'s selection);
#   3. the vLLM environment (VLLM_ENV_BUILD, e.g. `make vllm-env`: ~2.5 min on a fresh machine, nothing once built),
#      which only the `vllm` modules need.
# A trainer run keeps ~1.3 of the 2 cores busy on average (Ray and worker start-up is mostly one process importing at
# a time), so the other tests and the build fill the gap, at a lower priority (nice 10: the e2e part is the longest
# path; run beside it at the same priority, the first e2e module took 325 s instead of 122). No test outside e2e starts
# Ray or vLLM, so two clusters never run at once. The other tests compute on one thread (OMP_NUM_THREADS=1: their tensors are tiny, and OpenMP threads
# spinning on cores the trainer's processes need slow both). Their output is printed after the e2e part; the exit
# status is non-zero when any part fails (pytest's 5, nothing selected, counts as passed: `-k` may leave a part empty).
#   PYTHON=.venv/bin/python VLLM_ENV_BUILD="make vllm-env" bash scripts/run_tests.sh [pytest arguments for every part]
set -euo pipefail
PYTHON="${PYTHON:-python}"
other_log="$(mktemp -t verl_ext_tests.XXXXXX)"
build_log="$(mktemp -t verl_ext_vllm_env.XXXXXX)"
other="" build=""
cleanup() {
  for pid in $other $build; do kill "$pid" 2>/dev/null || true; done
  rm -f "$other_log" "$build_log"
}
trap cleanup EXIT

passed() { (( $1 == 0 || $1 == 5 )); }

if [[ -n "${VLLM_ENV_BUILD:-}" ]]; then
  nice -n 10 bash -c "$VLLM_ENV_BUILD" >"$build_log" 2>&1 &
  build=$!
fi
OMP_NUM_THREADS=1 nice -n 10 "$PYTHON" -m pytest tests -m "not e2e" -p no:cacheprovider "$@" >"$other_log" 2>&1 &
other=$!

e2e=0
"$PYTHON" -m pytest tests -m "e2e and not vllm" "$@" || e2e=$?
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

rest=0
wait "$other" || rest=$?
other=""
echo "==================== the other tests (run beside the e2e ones) ===================="
cat "$other_log"
echo "e2e part: exit $e2e; vllm part: exit $vllm; other tests: exit $rest"
passed "$e2e" && passed "$vllm" && passed "$rest"
