#!/usr/bin/env bash
# Train and validation parquet files of the CBS recipes, with data_prep, into DATA_DIR/NAME/SPLIT.parquet
# (the paths recipes/cbs/_common.yaml reads through recipe.data_dir):
#   dapo_math/train (DAPO-Math-17k, deduplicated) + math_lvl3to5/train (MATH levels 3-5, MATH-lighteval's train
#   split), merged into dapo_math_lvl3to5/train (the training file: extra_info.index renumbered over both, a
#   prompt in both kept once; scripts/cbs/common.sh merge_train), and aime24, aime25, amc23, math500, minerva,
#   olympiadbench /test
# Sources load from the Hugging Face hub, or from a local copy in the source's own format given as
# <NAME>_INPUT (e.g. DAPO_MATH_INPUT=/dl/dapo-math-17k.parquet, MATH_LVL3TO5_INPUT=/dl/math-lighteval/train.parquet).
# Existing files are kept (FORCE=1 rebuilds). Then the train / validation overlap check on the merged file
# (python -m data_prep.overlap; stops listing overlaps, report in DATA_DIR/overlap_dapo_math_lvl3to5.json;
# ALLOW_OVERLAP=1 goes on). Environment: DATA_DIR (default data/cbs), PYTHON, DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/cbs}")"
sources=()
for name in dapo_math math_lvl3to5; do
  prepare_dataset "$data_dir" "$name" train
  sources+=("$data_dir/$name/train.parquet")
done
merge_train "$data_dir/dapo_math_lvl3to5/train.parquet" "${sources[@]}"
benchmarks=(aime24 aime25 amc23 math500 minerva olympiadbench)
for bench in "${benchmarks[@]}"; do prepare_dataset "$data_dir" "$bench" test; done
check_overlap "$data_dir" dapo_math_lvl3to5/train "${benchmarks[@]/%//test}"
