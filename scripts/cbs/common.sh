# Sourced by the CBS launchers: `cbs_train SETTING [OBJECTIVE [FILTER]] [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +cbs=SETTING <paths, cluster size> +objective=OBJECTIVE \
#     rollout_filter=FILTER <the recipe's settings for both> "$@"
# OBJECTIVE: grpo (default) | dapo | gspo (verl_ext/config/objective); FILTER: keep_all (default, the objective
# alone) | cbs_star (CBS*) | cbs (CBS) | cbs_random | cbs_no_ema | cbs_no_entropy (verl_ext/config/rollout_filter).
# The settings for both come from recipes/cbs/SETTING.yaml (and _common.yaml): the leaves of
# recipe.objectives.OBJECTIVE (DAPO: data.train_batch_size=384 trainer.total_training_steps=200) and, as
# rollout_filter.*, those of recipe.schedulers.OBJECTIVE.NAME, NAME being the filter's `name` (cbs_star, or cbs for
# cbs and its ablations): entropy_threshold and epsilon_min per objective (paper Table 4). They come before the
# user's overrides, which win. Choose the objective and the filter here, not as +objective= / rollout_filter=
# overrides (those would skip their settings: refused).
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/cbs), OUT_DIR (default outputs/cbs), MODEL_PATH,
# EXPERIMENT_NAME (default SETTING-OBJECTIVE-FILTER, e.g. qwen3-4b-base-dapo-cbs), NNODES, GPUS_PER_NODE,
# RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

# How many of the arguments are leading names (OBJECTIVE, FILTER; at most 2) rather than Hydra overrides.
cbs_positionals() {
  local n=0
  while (( n < 2 && $# )) && [[ "$1" =~ ^[A-Za-z0-9_]+$ ]]; do n=$((n + 1)); shift; done
  echo "$n"
}

# The overrides recipes/cbs/SETTING.yaml gives OBJECTIVE and FILTER, one per line (exit 2: unknown name).
# `cbs_recipe_overrides SETTING OBJECTIVE FILTER --value KEY` prints the filter's effective KEY instead.
cbs_recipe_overrides() {  # cbs_recipe_overrides SETTING OBJECTIVE FILTER [--value KEY]
  "$PYTHON" - "$ROOT" "$@" <<'EOF'
import sys
from pathlib import Path

import yaml
from omegaconf import OmegaConf

root, setting, objective, name = Path(sys.argv[1]), *sys.argv[2:5]
value_of = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--value" else None


def chain(path, absolute):
    """The files a config's defaults list names (relative ones beside it, /x under `absolute`), then itself."""
    if not path.is_file():
        sys.exit(f"no config {path}")
    data = yaml.safe_load(path.read_text()) or {}
    files = []
    for entry in data.get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            where = absolute / entry[1:] if entry.startswith("/") else path.parent / entry
            files += chain(where.with_name(where.name + ".yaml"), absolute)
    return files + [path]


def merged(path, absolute):
    return OmegaConf.merge(*(OmegaConf.load(p) for p in chain(path, absolute)))


def leaves(node, prefix=""):
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        elif not isinstance(value, dict):
            yield f"{prefix}{key}", value


def text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


config = root / "verl_ext" / "config"
for group, choice in (("objective", objective), ("rollout_filter", name)):
    if not (config / group / f"{choice}.yaml").is_file():
        known = " ".join(sorted(p.stem for p in (config / group).glob("*.yaml")))
        sys.exit(f"unknown {group} {choice!r} (verl_ext/config/{group}: {known})")
recipe = OmegaConf.to_container(merged(root / "recipes" / "cbs" / f"{setting}.yaml", config).get("recipe", {}))
if objective not in recipe.get("objectives", {}):
    sys.exit(f"recipes/cbs/{setting}.yaml has no recipe.objectives.{objective}")
filter_config = OmegaConf.to_container(merged(config / "rollout_filter" / f"{name}.yaml", config / "rollout_filter"))
scheduler = (recipe.get("schedulers", {}).get(objective) or {}).get(filter_config["name"]) or {}
if value_of is not None:
    print(scheduler.get(value_of, filter_config.get(value_of)))
    sys.exit(0)
for key, value in leaves(recipe["objectives"][objective] or {}):
    print(f"{key}={text(value)}")
for key, value in leaves(scheduler):
    print(f"rollout_filter.{key}={text(value)}")
EOF
}

cbs_train() {  # cbs_train SETTING [OBJECTIVE [FILTER]] [Hydra overrides...]
  local setting="$1"; shift
  local objective=grpo filter=keep_all arg extra
  case "$(cbs_positionals "$@")" in
    1) objective="$1"; shift ;;
    2) objective="$1" filter="$2"; shift 2 ;;
  esac
  for arg in "$@"; do
    case "$arg" in
      objective=*|+objective=*|++objective=*|rollout_filter=*|+rollout_filter=*|++rollout_filter=*)
        echo "choose the objective and the filter as the launcher's first two arguments (they bring their" \
             "settings from recipes/cbs), not as '$arg'" >&2
        return 2 ;;
    esac
  done
  extra="$(cbs_recipe_overrides "$setting" "$objective" "$filter")" || return 2
  local more=()
  [[ -n "$extra" ]] && mapfile -t more <<<"$extra"
  EXPERIMENT_NAME="${EXPERIMENT_NAME:-$setting-$objective-$filter}" \
    recipe_train cbs "$setting" "+objective=$objective" "rollout_filter=$filter" "${more[@]}" "$@"
}

# One training file from several data_prep files, in order: extra_info.index renumbered 0..N-1 (the task key must
# be unique over the whole training set; each source numbers its rows from 0), the source's own kept as
# extra_info.source_index; a prompt already in an earlier file is dropped (counted). Kept if present (FORCE=1).
merge_train() {  # merge_train OUT IN...
  local out="$1"; shift
  if [[ -f "$out" && "${FORCE:-0}" != 1 ]]; then
    echo "exists: $out"
    return 0
  fi
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '%q ' "$PYTHON" -m data_prep.merge --out "$out" "$@"; echo
    return 0
  fi
  "$PYTHON" -m data_prep.merge --out "$out" "$@"
}
