#!/usr/bin/env bash
# `make test`: the e2e modules (Ray, vLLM, training runs; one at a time, in one pytest process) and all other tests
# (a second pytest process, `make test-fast`'s selection) run side by side. A trainer run keeps ~1.3 of the 2 cores
# busy on average (Ray and worker start-up is mostly one process importing at a time), so the other tests fill the
# gap. No test outside e2e starts Ray or vLLM, so the two never share a cluster. The other tests compute on one
# thread (OMP_NUM_THREADS=1: their tensors are tiny, and OpenMP threads spinning on cores the trainer's processes
# need slow both). Their output is printed after the e2e part; the exit status is non-zero when either part fails.
#   PYTHON=.venv/bin/python bash scripts/run_tests.sh [pytest arguments for both parts]
set -euo pipefail
PYTHON="${PYTHON:-python}"
log="$(mktemp -t verl_ext_tests.XXXXXX)"
other=""
cleanup() {
  [[ -n "$other" ]] && kill "$other" 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT

OMP_NUM_THREADS=1 "$PYTHON" -m pytest tests -m "not e2e" -p no:cacheprovider "$@" >"$log" 2>&1 &
other=$!
e2e=0
"$PYTHON" -m pytest tests -m e2e "$@" || e2e=$?
rest=0
wait "$other" || rest=$?
other=""
echo "==================== the other tests (run beside the e2e ones) ===================="
cat "$log"
echo "e2e part: exit $e2e; other tests: exit $rest"
(( e2e == 0 && rest == 0 ))
