#!/usr/bin/env bash
# The paper's evaluation of the progress runs, then its tables:
#   1. each RLOO run of the grid (OUT_DIR/SETTING-rloo-SELECTOR, SELECTORS as scripts/progress/grid.sh) at its last
#      checkpoint on the 200 held-out prompts (benchmark "countdown", as verl_ext.apps.rft names it) and on the official
#      50-prompt test split of asingh15/countdown_tasks_3to4 (benchmark "countdown_official", the paper's App. B)
#      x 16 samples, temperature 0.6, top-k 20, top-p 0.95, 1,024 tokens (python -m eval.evaluate --preset
#      progress; samples in RUN/eval/step_N/BENCHMARK/samples.jsonl, resumable);
#      runs not trained yet are skipped (named on stderr)
#   2. python -m eval.tables progress over those runs and the RFT runs scripts/progress/rft.sh evaluated
#      (rft_naive / rft_clean = OUT_DIR/SETTING-rft_FILTER/sft): average score, pass@k, zero- / all-success, the
#      paired bootstrap CI of each run minus uniform, format diagnostics, degenerate-batch rates; the paper's numbers
#      beside ours; written to OUT_DIR/tables.md as well
#   scripts/progress/evaluate.sh [eval.evaluate flags...]     e.g. --backend hf --batch-size 64
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/progress), OUT_DIR (default outputs/progress),
# SELECTORS, DRY_RUN=1 (every run taken as trained to its last step, 100).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/progress}")"
out_dir="$(abspath "${OUT_DIR:-$ROOT/outputs/progress}")"
setting="$PROGRESS_SETTING"
runs=()
for selector in ${SELECTORS:-$PROGRESS_SELECTORS}; do
  run="$out_dir/$setting-rloo-$selector"
  if [[ -f "$run/latest_checkpointed_iteration.txt" ]]; then
    step="$(last_step "$run")"
  elif [[ "${DRY_RUN:-0}" == 1 ]]; then
    step=100
  else
    echo "skipped: $run (no checkpoint)" >&2
    continue
  fi
  execute "$PYTHON" -m eval.evaluate --run "$run" --steps "$step" --benchmarks "countdown=$data_dir/countdown/test.parquet" \
    "countdown_official=$data_dir/asingh15_countdown_tasks_3to4/test.parquet" --preset progress "$@"
  runs+=("$selector=$run")
done
for filter in naive clean; do
  run="$out_dir/$setting-rft_$filter/sft"
  if [[ -d "$run/eval" || "${DRY_RUN:-0}" == 1 ]]; then runs+=("rft_$filter=$run"); fi
done
(( ${#runs[@]} )) || { echo "no run to tabulate in $out_dir" >&2; exit 2; }
execute "$PYTHON" -m eval.tables progress --runs "${runs[@]}" --out "$out_dir/tables.md"
[[ "${DRY_RUN:-0}" == 1 ]] || cat "$out_dir/tables.md"
