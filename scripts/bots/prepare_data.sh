#!/usr/bin/env bash
# Train and validation parquet files of one BOTS domain, with data_prep, into DATA_DIR/NAME/SPLIT.parquet
# (the paths the recipes read through recipe.data_dir), then the train / validation overlap check:
#   scripts/bots/prepare_data.sh math|code|logic
#   math : guru_math/train (GURU, with weak/strong pass rates) + math500/test, aime24/test
#   code : guru_code/train + humaneval/{train,test} (together all 164) + mbpp/test + guru_livecodebench/test
#          (GURU's LiveCodeBench subset: problems after those GURU trains on)
#   logic: guru_logic/train (zebra puzzles excluded) + guru_ordering_puzzles/test + guru_arc_agi/test
# Sources load from the Hugging Face hub, or from a local copy in the source's own format given as
# <NAME>_INPUT (e.g. GURU_MATH_INPUT=/dl/math__combined_54.4k.parquet, MATH500_INPUT=/dl/test.jsonl; a whole
# GURU download folder works for every guru_* name). Existing files are kept (FORCE=1 rebuilds).
# Overlap: python -m data_prep.overlap stops the script listing evaluation prompts found in training prompts
# (report in DATA_DIR/overlap_<train>.json; prompts under 13 words are counted as unchecked); ALLOW_OVERLAP=1
# goes on. Environment: DATA_DIR (default data/bots), PYTHON, DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

domain="${1:?usage: scripts/bots/prepare_data.sh math|code|logic}"
data_dir="$(abspath "${DATA_DIR:-$ROOT/data/bots}")"

prep() { prepare_dataset "$data_dir" "$@"; }  # prep NAME SPLIT

case "$domain" in
  math)
    prep guru_math train; prep math500 test; prep aime24 test
    check_overlap "$data_dir" guru_math/train math500/test aime24/test ;;
  code)
    prep guru_code train; prep humaneval test; prep mbpp test; prep guru_livecodebench test
    check_overlap "$data_dir" guru_code/train humaneval/train humaneval/test mbpp/test guru_livecodebench/test ;;
  logic)
    prep guru_logic train; prep guru_ordering_puzzles test; prep guru_arc_agi test
    check_overlap "$data_dir" guru_logic/train guru_ordering_puzzles/test guru_arc_agi/test ;;
  *) echo "domain must be math, code or logic, got '$domain'" >&2; exit 2 ;;
esac
