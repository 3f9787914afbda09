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


def check_scripts(scripts) -> None:
    """``bash -n`` passes on every script; launchers (all but ``common.sh``) are executable and strict."""
    import os
    import subprocess

    for script in scripts:
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"
        if script.name != "common.sh":
            assert os.access(script, os.X_OK) and "set -euo pipefail" in script.read_text(), script
