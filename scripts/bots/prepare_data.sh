#!/usr/bin/env bash
# Train and validation parquet files of one BOTS domain, with data_prep, into DATA_DIR/NAME/SPLIT.parquet
# (the paths the recipes read through recipe.data_dir):
#   scripts/bots/prepare_data.sh math|code|logic
#   math : guru_math/train (GURU, with weak/strong pass rates) + math500/test, aime24/test
#   code : guru_code/train + humaneval/{train,test} (together all 164) + mbpp/test, livecodebench/test
#   logic: guru_logic/train (zebra puzzles excluded); data_prep has no converter for the paper's logic
#          benchmarks: put them yourself at ordering_puzzles/test.parquet and arc_agi/test.parquet
#          (verl schema, data_source ordering_puzzles / arc_agi, README "Data"); exits 1 while they are missing
# Sources load from the Hugging Face hub, or from a local copy in the source's own format given as
# <NAME>_INPUT (e.g. GURU_MATH_INPUT=/dl/math__combined_54.4k.parquet, MATH500_INPUT=/dl/test.jsonl).
# Existing files are kept (FORCE=1 rebuilds). Environment: DATA_DIR (default data/bots), PYTHON, DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

domain="${1:?usage: scripts/bots/prepare_data.sh math|code|logic}"
data_dir="$(abspath "${DATA_DIR:-$ROOT/data/bots}")"

prep() { prepare_dataset "$data_dir" "$@"; }  # prep NAME SPLIT

case "$domain" in
  math)  prep guru_math train; prep math500 test; prep aime24 test ;;
  code)  prep guru_code train; prep humaneval test; prep mbpp test; prep livecodebench test ;;
  logic)
    prep guru_logic train
    missing=()
    for bench in ordering_puzzles arc_agi; do
      [[ -f "$data_dir/$bench/test.parquet" ]] || missing+=("$data_dir/$bench/test.parquet")
    done
    if (( ${#missing[@]} )) && [[ "${DRY_RUN:-0}" != 1 ]]; then
      printf 'missing logic validation set (no converter yet; provide it in the verl schema, README "Data"): %s\n' \
        "${missing[@]}" >&2
      exit 1
    fi ;;
  *) echo "domain must be math, code or logic, got '$domain'" >&2; exit 2 ;;
esac
