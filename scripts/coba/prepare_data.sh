#!/usr/bin/env bash
# Train and validation parquet files of the CoBA-RL recipes, with data_prep, into DATA_DIR/NAME/SPLIT.parquet
# (the paths recipes/coba/_common.yaml reads through recipe.data_dir):
#   dapo_math/train (DAPO-Math-17k, deduplicated) + aime24, aime25, amc23, math500, olympiadbench /test
# Sources load from the Hugging Face hub, or from a local copy in the source's own format given as
# <NAME>_INPUT (e.g. DAPO_MATH_INPUT=/dl/dapo-math-17k.parquet). Existing files are kept (FORCE=1 rebuilds).
# Then the train / validation overlap check (python -m data_prep.overlap; stops listing overlaps, report in
# DATA_DIR/overlap_dapo_math.json; ALLOW_OVERLAP=1 goes on). Environment: DATA_DIR (default data/coba),
# PYTHON, DRY_RUN=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/coba}")"
prepare_dataset "$data_dir" dapo_math train
benchmarks=(aime24 aime25 amc23 math500 olympiadbench)
for bench in "${benchmarks[@]}"; do prepare_dataset "$data_dir" "$bench" test; done
check_overlap "$data_dir" dapo_math/train "${benchmarks[@]/%//test}"
