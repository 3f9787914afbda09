#!/usr/bin/env bash
# Real verl GRPO training on the CPU: `python -m verl.trainer.main_ppo` (v1 trainer, Ray,
# TransferQueue) with the embedded SmolLM2 model, the `hf` rollout backend and the project's
# reward function, on a tiny Countdown set, with the shared small-CPU preset
# (verl_ext/config/preset/cpu_small.yaml). Two steps by default; prints per-step metrics and wall time,
# and saves the actor in Hugging Face format at the last step so weights can be compared.
#
#   scripts/cpu_grpo_smoke.sh [extra Hydra overrides...]
#
# Environment (all optional):
#   PYTHON            interpreter                       (default: .venv/bin/python, else python3)
#   SMOKE_OUT         output directory                  (default: /tmp/verl_ext_cpu_smoke)
#   SMOKE_NUM_LAYERS  truncate the embedded model to N decoder layers; 0 = full model (default: 4)
#   SMOKE_MODEL_PATH  use this HF checkpoint instead of the embedded model
#   SMOKE_STEPS       training steps                    (default: 2)
#   SMOKE_PROMPTS     prompts per step                  (default: 4)
#   SMOKE_N           rollouts per prompt               (default: 4)
#   SMOKE_RESPONSE    max response tokens               (default: 48)
#   SMOKE_THREADS     torch threads per process         (default: all cores)
#   VERL_EXT_CACHE    converted-model cache root        (default: ~/.cache/verl_ext)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
OUT="${SMOKE_OUT:-/tmp/verl_ext_cpu_smoke}"
NUM_LAYERS="${SMOKE_NUM_LAYERS:-4}"
STEPS="${SMOKE_STEPS:-2}"
PROMPTS="${SMOKE_PROMPTS:-4}"
N="${SMOKE_N:-4}"
RESPONSE="${SMOKE_RESPONSE:-48}"
THREADS="${SMOKE_THREADS:-}"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export RAY_DEDUP_LOGS=0 RAY_USAGE_STATS_ENABLED=0 RAY_DISABLE_DOCKER_CPU_WARNING=1

t0=$(date +%s.%N)
mkdir -p "$OUT"
rm -rf "$OUT/ckpt" "$OUT/metrics.jsonl"

# 1. Model: the embedded SmolLM2 (converted once, cached), optionally truncated.
if [[ -n "${SMOKE_MODEL_PATH:-}" ]]; then
  MODEL="$SMOKE_MODEL_PATH"
elif [[ "$NUM_LAYERS" == "0" ]]; then
  MODEL="$("$PYTHON" -m verl_ext.models.embedded)"
else
  MODEL="$("$PYTHON" -m verl_ext.models.embedded --num-layers "$NUM_LAYERS")"
fi
echo "[smoke] model: $MODEL"

# 2. Data: a few Countdown prompts (data_prep.embedded_datasets when present, else a built-in generator).
"$PYTHON" - "$OUT/data" "$((PROMPTS * STEPS))" <<'PY'
import random, sys
from data_prep.schema import make_row, write_rows

out, n = sys.argv[1], max(int(sys.argv[2]), 4)
try:
    from data_prep.embedded_datasets import countdown
    rows = countdown(train_size=n, test_size=4, seed=0)
    source = "data_prep.embedded_datasets.countdown"
except Exception as e:  # missing or changed: the smoke test is about training, not this generator
    print(f"[smoke] data_prep.embedded_datasets.countdown unusable ({e!r}); using the built-in generator")
    rng = random.Random(0)
    rows = {}
    for split, size in (("train", n), ("test", 4)):
        rows[split] = []
        for i in range(size):
            nums = [rng.randint(1, 20) for _ in range(3)]
            target = nums[0] + nums[1] * nums[2]
            q = (f"Using the numbers {nums}, create an equation that equals {target}. Use + - * / and each "
                 "number once. Give the final answer in <answer> </answer> tags, e.g. <answer> (1 + 2) / 3 </answer>.")
            rows[split].append(make_row(data_source="countdown", question=q, ability="math", index=i, split=split,
                                        ground_truth={"target": target, "numbers": nums}))
    source = "built-in generator"
for split, r in rows.items():
    write_rows(r, f"{out}/{split}.parquet")
print(f"[smoke] data: {len(rows['train'])} train / {len(rows['test'])} test rows from {source} -> {out}")
PY

# 3. CPU mode: environment for this process + Hydra overrides for every Ray process.
THREAD_ARGS=()
[[ -n "$THREADS" ]] && THREAD_ARGS=(--num-threads "$THREADS")
eval "$("$PYTHON" -m verl_ext.cpu "${THREAD_ARGS[@]}" env)"
mapfile -t CPU_OVERRIDES < <("$PYTHON" -m verl_ext.cpu "${THREAD_ARGS[@]}" overrides)
export VERL_FILE_LOGGER_PATH="$OUT/metrics.jsonl"

t1=$(date +%s.%N)
"$PYTHON" -m verl.trainer.main_ppo --config-dir "$ROOT/verl_ext/config" \
  "${CPU_OVERRIDES[@]}" \
  +preset=cpu_small \
  data.train_files="$OUT/data/train.parquet" \
  data.val_files="$OUT/data/test.parquet" \
  data.train_batch_size="$PROMPTS" \
  data.max_response_length="$RESPONSE" \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-5 \
  actor_rollout_ref.actor.optim.weight_decay=0.0 \
  actor_rollout_ref.actor.entropy_coeff=0.001 \
  actor_rollout_ref.actor.checkpoint.save_contents='[hf_model]' \
  actor_rollout_ref.rollout.n="$N" \
  actor_rollout_ref.rollout.calculate_log_probs=True \
  trainer.project_name=verl_ext_cpu_smoke \
  trainer.experiment_name=grpo \
  trainer.total_epochs=100 \
  trainer.total_training_steps="$STEPS" \
  trainer.save_freq="$STEPS" \
  trainer.default_local_dir="$OUT/ckpt" \
  trainer.resume_mode=disable \
  "$@"
t2=$(date +%s.%N)

"$PYTHON" - "$OUT/metrics.jsonl" "$t0" "$t1" "$t2" <<'PY'
import json, sys
path, t0, t1, t2 = sys.argv[1], *map(float, sys.argv[2:])
records = [json.loads(line) for line in open(path) if line.strip()]
steps = [r for r in records if "timing_s/step" in r["data"]]  # step 0 holds only validation metrics
keys = ("timing_s/step", "timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor",
        "response_length/mean", "critic/score/mean", "actor/pg_loss", "actor/grad_norm",
        "training/rollout_probs_diff_max")
for s in steps:
    d = s["data"]
    print(f"[smoke] step {s['step']}: " + ", ".join(f"{k}={d[k]:.4g}" for k in keys if k in d))
print(f"[smoke] wall time: total {t2 - t0:.1f} s (main_ppo {t2 - t1:.1f} s, setup {t1 - t0:.1f} s); "
      f"{len(steps)} training steps logged")
PY
