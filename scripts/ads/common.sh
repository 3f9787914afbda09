# Sourced by the ADS launchers: `ads_train SETTING [OBJECTIVE [SELECTOR]] [Hydra overrides...]` runs
#   python -m verl_ext.main --config-dir recipes +ads=SETTING <paths, cluster size> +objective=OBJECTIVE \
#     selector=SELECTOR "$@"   (verl_ext.main adds the recipe's settings for both: verl_ext/launch/recipe_tables.py)
# OBJECTIVE: grpo (default) | dapo | gspo (verl_ext/config/objective); SELECTOR: ads (default) | ads_no_inter |
# ads_no_intra | uniform (the objective alone) | dots (DOTS+RR: recipe.selectors.dots brings its replay filter and its fresh batch).
# python -m verl_ext.main adds the settings for both from recipes/ads/SETTING.yaml (and _common.yaml): the leaves of
# recipe.objectives.OBJECTIVE (algorithm.use_kl_in_reward=true, the code's KL in the reward, which the objective
# presets turn off; DAPO: data_selection.prefilters=[], no dynamic sampling) and, as selector.*, those of
# recipe.selectors.SELECTOR. They come before the user's overrides, which win. The rollout filter is the recipe's
# (drop_all_wrong) except under dots (replay_fifo, 64 fresh prompts: recipe.selectors.dots). Choose the objective and the selector here, not as +objective= / selector=
# overrides (those would skip their settings: refused).
# Environment (scripts/common.sh): PYTHON, DATA_DIR (default data/ads), OUT_DIR (default outputs/ads), MODEL_PATH,
# EXPERIMENT_NAME (default SETTING-OBJECTIVE-SELECTOR, e.g. qwen3-4b-base-dapo-ads), NNODES, GPUS_PER_NODE,
# RAY_ADDRESS, CPU=1, DRY_RUN=1.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

ads_train() {  # ads_train SETTING [OBJECTIVE [SELECTOR]] [Hydra overrides...]
  objective_train ads selector ads "$@"
}
