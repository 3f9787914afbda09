#!/usr/bin/env bash
# Train and validation parquet files of the ADS recipes, with data_prep, into DATA_DIR/NAME/SPLIT.parquet
# (the paths recipes/ads/_common.yaml reads through recipe.data_dir):
#   1. openr1_math_11k/train: OpenR1-Math-220k filtered as in the paper (Math-Verify-correct, complete, at most
#      8192 tokens: the 46k pool), then 11,500 prompts drawn with seed 42, each with its reference solution
#      (python -m data_prep.sources.openr1; data_prep/sources/openr1.py)
#   2. math500, aime24, aime25, minerva, amc23, gpqa_diamond, mmlu_pro /test (python -m data_prep NAME)
#   3. the train / validation overlap check on the 11.5k file (python -m data_prep.overlap; stops listing
#      overlaps, report in DATA_DIR/overlap_openr1_math_11k.json; ALLOW_OVERLAP=1 goes on). It runs before the
#      clustering: a prompt removed afterwards would leave every clustered file stale
#   4. openr1_ads_SETTING/train for each SETTING in SETTINGS (default: every recipe in recipes/ads but
#      cpu_embedded and gpu_smoke): the 11.5k rows with cluster_id, rank_in_cluster, cluster_size, difficulty from the
#      setting's own base policy on prompt + DeepSeek-R1 trace cut at 4,096 tokens, as the authors' code
#      (python -m data_prep.ads_clusters: K = 64, PCA 128, seed 42, bf16 on the GPU;
#      resumable, cached next to the output). The policy is the recipe's actor_rollout_ref.model.path, or a local
#      copy given as <SETTING>_MODEL (upper case, - and . as _, e.g. QWEN3_4B_BASE_MODEL=/models/qwen3-4b-base);
#      a recipe with recipe.long_context (Qwen2.5-Math-1.5B) first gets its policy written as DATA_DIR/models/...:
#      recipe.base_model (or <SETTING>_MODEL) with the longer context (python -m data_prep.long_context)
#   5. only with DOTS_PREDICTOR=1 (sampling several policies on the 11.5k prompts costs GPU hours): DOTS's trained
#      predictor per setting (selector.predictor=adapter). Each of DOTS_POLICIES (>= 2 models, space-separated paths or
#      hub ids) measures its pass rate on every prompt, DOTS_N samples (default 8) of at most DOTS_MAX_NEW_TOKENS
#      (default 8192) at temperature 1 (python -m data_prep.reference_pass_rates, two columns a call, only missing
#      values computed: resumable) into openr1_math_11k/dots_pass_rates.parquet as extra_info.pass_rate_<MODEL> (the
#      model's name, other characters as _: a policy added later costs only its own pass rates); then
#      python -m data_prep.dots_predictor trains the authors' adapter on that table over the setting's step-4 embeddings
#      (train.embeddings.npy, the recipes' selector.embedding_file) into openr1_ads_SETTING/dots_predictor.pt (+ .json)
# OpenR1 and the benchmarks load from the Hugging Face hub, or from a local copy in the source's own format given as
# <NAME>_INPUT (e.g. OPENR1_MATH_INPUT=/dl/openr1/default, MATH500_INPUT=/dl/math500/test.jsonl). Existing files are
# kept (FORCE=1 rebuilds). Environment: DATA_DIR (default data/ads), PYTHON, SETTINGS, DRY_RUN=1, DOTS_PREDICTOR=1,
# DOTS_POLICIES, DOTS_N, DOTS_MAX_NEW_TOKENS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="$(abspath "${DATA_DIR:-$ROOT/data/ads}")"
train="$data_dir/openr1_math_11k/train.parquet"
if [[ -f "$train" && "${FORCE:-0}" != 1 ]]; then
  echo "exists: $train"
else
  cmd=("$PYTHON" -m data_prep.sources.openr1 --out "$data_dir" --sample-size 11500 --seed 42)
  [[ -n "${OPENR1_MATH_INPUT:-}" ]] && cmd+=(--input "$OPENR1_MATH_INPUT")
  execute "${cmd[@]}"
fi
benchmarks=(math500 aime24 aime25 minerva amc23 gpqa_diamond mmlu_pro)
for bench in "${benchmarks[@]}"; do prepare_dataset "$data_dir" "$bench" test; done
check_overlap "$data_dir" openr1_math_11k/train "${benchmarks[@]/%//test}"

if [[ -z "${SETTINGS:-}" ]]; then
  SETTINGS="$(cd "$ROOT/recipes/ads" && ls *.yaml | sed 's/\.yaml$//' | grep -v -e '^_' -e '^cpu_embedded$' -e '^gpu_smoke$' | tr '\n' ' ')"
fi
for setting in $SETTINGS; do
  [[ -f "$ROOT/recipes/ads/$setting.yaml" ]] || { echo "no recipe recipes/ads/$setting.yaml" >&2; exit 2; }
  out="$data_dir/openr1_ads_$setting/train.parquet"
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
    continue
  fi
  # the recipe's policy path, its base model and long-context change when it has one (recipe.long_context)
  mapfile -t policy < <("$PYTHON" -c 'import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
recipe, path = cfg.get("recipe") or {}, cfg["actor_rollout_ref"]["model"]["path"].replace("${recipe.data_dir}", sys.argv[2])
long = recipe.get("long_context") or {}
print(path, recipe.get("base_model", path), long.get("max_position_embeddings", ""), long.get("rope_theta", ""), sep="\n")' \
    "$ROOT/recipes/ads/$setting.yaml" "$data_dir")
  model_var="$(tr 'a-z.-' 'A-Z__' <<<"$setting")_MODEL"
  model="${!model_var:-${policy[1]}}"
  if [[ -n "${policy[2]}" ]]; then  # a local copy with the longer context (data_prep.long_context), then its clusters
    if [[ -d "${policy[0]}" && "${FORCE:-0}" != 1 ]]; then
      echo "exists: ${policy[0]}"
    else
      cmd=("$PYTHON" -m data_prep.long_context --model "$model" --out "${policy[0]}"
           --max-position-embeddings "${policy[2]}" --rope-theta "${policy[3]}")
      [[ "${FORCE:-0}" == 1 ]] && cmd+=(--overwrite)
      execute "${cmd[@]}"
    fi
    model="${policy[0]}"
  fi
  cmd=("$PYTHON" -m data_prep.ads_clusters --input "$train" --out "$out" --model "$model"
       --solution-field extra_info.target --clusters 64 --pca-dims 128 --seed 42 --n-init auto --max-length 4096
       --device cuda --dtype bf16)
  [[ "${FORCE:-0}" == 1 ]] && cmd+=(--overwrite)
  [[ "${DRY_RUN:-0}" == 1 ]] || mkdir -p "$(dirname "$out")"
  execute "${cmd[@]}"
done

[[ "${DOTS_PREDICTOR:-0}" == 1 ]] || exit 0
read -r -a dots_policies <<<"${DOTS_POLICIES:-}"
if (( ${#dots_policies[@]} < 2 )); then
  echo "DOTS_PREDICTOR=1 needs DOTS_POLICIES: two or more models whose pass rates train the predictor" >&2
  exit 2
fi
rates="$data_dir/openr1_math_11k/dots_pass_rates.parquet"
source_file="$train"
[[ -f "$rates" && "${FORCE:-0}" != 1 ]] && source_file="$rates"
columns=()
for policy in "${dots_policies[@]}"; do columns+=("pass_rate_$(tr -c 'A-Za-z0-9\n' '_' <<<"$policy")"); done
sampling=(--n "${DOTS_N:-8}" --temperature 1.0 --max-new-tokens "${DOTS_MAX_NEW_TOKENS:-8192}")
execute "$PYTHON" -m data_prep.reference_pass_rates --input "$source_file" --out "$rates" "${sampling[@]}" \
  --weak-model "${dots_policies[0]}" --weak-column "${columns[0]}" \
  --strong-model "${dots_policies[1]}" --strong-column "${columns[1]}"
for (( i = 2; i < ${#dots_policies[@]}; i++ )); do  # one model a call; the first column, present, is copied
  execute "$PYTHON" -m data_prep.reference_pass_rates --input "$rates" --out "$rates" "${sampling[@]}" \
    --weak-model "${dots_policies[$i]}" --weak-column "${columns[$i]}" --strong-column "${columns[0]}"
done
for setting in $SETTINGS; do
  out="$data_dir/openr1_ads_$setting/dots_predictor.pt"
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
    continue
  fi
  execute "$PYTHON" -m data_prep.dots_predictor --input "$rates" --out "$out" --pass-rate-columns "${columns[@]}" \
    --embeddings "$data_dir/openr1_ads_$setting/train.embeddings.npy"
done
