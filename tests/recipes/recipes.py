"""Shared by the recipe tests: compose a recipe as the launchers do, and run the checks training runs."""

from pathlib import Path

from hydra import compose, initialize_config_dir

from verl_ext.cpu import project_root

ROOT = Path(project_root())
RECIPES, SCRIPTS = ROOT / "recipes", ROOT / "scripts"


def compose_recipe(group: str, setting: str, *overrides: str):
    """What ``python -m verl_ext.main --config-dir recipes +GROUP=SETTING OVERRIDES`` composes."""
    search = f"hydra.searchpath=[pkg://verl.trainer.config,file://{RECIPES}]"
    with initialize_config_dir(config_dir=str(ROOT / "verl_ext" / "config"), version_base=None):
        return compose("verl_ext_trainer", overrides=[search, f"+{group}={setting}", *overrides])


def check_recipe(cfg) -> None:
    """The checks ``python -m verl_ext.main`` runs before Ray starts: the axes' and verl's own."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from verl_ext.trainer.components import validate_axes

    validate_axes(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
