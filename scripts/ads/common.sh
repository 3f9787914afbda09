# Sourced by the ADS launchers: `ads_train SETTING [OBJECTIVE [SELECTOR]] [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +ads=SETTING <paths, cluster size> +objective=OBJECTIVE \
#     selector=SELECTOR <the recipe's settings for both> "$@"
# OBJECTIVE: grpo (default) | dapo | gspo (verl_ext/config/objective); SELECTOR: ads (default) | ads_no_inter |
# ads_no_intra | uniform (the objective alone) | dots (DOTS+RR, once verl_ext/config/selector/dots.yaml exists).
# The settings for both come from recipes/ads/SETTING.yaml (and _common.yaml): the leaves of
# recipe.objectives.OBJECTIVE (algorithm.use_kl_in_reward=true, the code's KL in the reward, which the objective
# presets turn off; DAPO: data_selection.prefilters=[], no dynamic sampling) and, as selector.*, those of
# recipe.selectors.SELECTOR. They come before the user's overrides, which win. The rollout filter is the recipe's
# (drop_degenerate, drop=all_wrong). Choose the objective and the selector here, not as +objective= / selector=
# overrides (those would skip their settings: refused).
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/ads), OUT_DIR (default outputs/ads), MODEL_PATH,
# EXPERIMENT_NAME (default SETTING-OBJECTIVE-SELECTOR, e.g. qwen3-4b-base-dapo-ads), NNODES, GPUS_PER_NODE,
# RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

# How many of the arguments are leading names (OBJECTIVE, SELECTOR; at most 2) rather than Hydra overrides.
ads_positionals() {
  local n=0
  while (( n < 2 && $# )) && [[ "$1" =~ ^[A-Za-z0-9_]+$ ]]; do n=$((n + 1)); shift; done
  echo "$n"
}

# The overrides recipes/ads/SETTING.yaml gives OBJECTIVE and SELECTOR, one per line (exit 2: unknown name).
ads_recipe_overrides() {  # ads_recipe_overrides SETTING OBJECTIVE SELECTOR
  "$PYTHON" - "$ROOT" "$@" <<'EOF2'
import sys
from pathlib import Path

import yaml
from omegaconf import OmegaConf

root, setting, objective, selector = Path(sys.argv[1]), *sys.argv[2:5]


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


def leaves(node, prefix=""):
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        elif not isinstance(value, dict):
            yield f"{prefix}{key}", value


def text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(text(v) for v in value) + "]"
    return "null" if value is None else str(value)


config = root / "verl_ext" / "config"
for group, choice in (("objective", objective), ("selector", selector)):
    if not (config / group / f"{choice}.yaml").is_file():
        known = " ".join(sorted(p.stem for p in (config / group).glob("*.yaml")))
        sys.exit(f"unknown {group} {choice!r} (verl_ext/config/{group}: {known})")
files = chain(root / "recipes" / "ads" / f"{setting}.yaml", config)
recipe = OmegaConf.to_container(OmegaConf.merge(*(OmegaConf.load(p) for p in files)).get("recipe", {}))
if objective not in recipe.get("objectives", {}):
    sys.exit(f"recipes/ads/{setting}.yaml has no recipe.objectives.{objective}")
for key, value in leaves(recipe["objectives"][objective] or {}):
    print(f"{key}={text(value)}")
for key, value in leaves(recipe.get("selectors", {}).get(selector) or {}):
    print(f"selector.{key}={text(value)}")
EOF2
}

ads_train() {  # ads_train SETTING [OBJECTIVE [SELECTOR]] [Hydra overrides...]
  local setting="$1"; shift
  local objective=grpo selector=ads arg extra
  case "$(ads_positionals "$@")" in
    1) objective="$1"; shift ;;
    2) objective="$1" selector="$2"; shift 2 ;;
  esac
  for arg in "$@"; do
    case "$arg" in
      objective=*|+objective=*|++objective=*|selector=*|+selector=*|++selector=*)
        echo "choose the objective and the selector as the launcher's first two arguments (they bring their" \
             "settings from recipes/ads), not as '$arg'" >&2
        return 2 ;;
    esac
  done
  extra="$(ads_recipe_overrides "$setting" "$objective" "$selector")" || return 2
  local more=()
  [[ -n "$extra" ]] && mapfile -t more <<<"$extra"
  EXPERIMENT_NAME="${EXPERIMENT_NAME:-$setting-$objective-$selector}" \
    recipe_train ads "$setting" "+objective=$objective" "selector=$selector" "${more[@]}" "$@"
}
