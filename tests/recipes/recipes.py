"""Shared by the recipe tests: compose a recipe as the launchers do, and run the checks training runs."""

import contextlib
import functools
from pathlib import Path

from hydra import compose, initialize_config_dir

from verl_ext.composition import CONFIG_DIR, CONFIG_NAME, searchpath
from verl_ext.cpu import project_root

ROOT = Path(project_root())
RECIPES, SCRIPTS = ROOT / "recipes", ROOT / "scripts"


def compose_recipe(group: str, setting: str, *overrides: str, recipes: Path = RECIPES):
    """What ``python -m verl_ext.main --config-dir recipes +GROUP=SETTING OVERRIDES`` composes, with the
    start-up check of the recipe's keys (typos, mandatory ``???`` values)."""
    from verl_ext.recipe_keys import check_recipe_keys

    with cached_config_files(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(CONFIG_NAME, overrides=[searchpath(recipes), f"+{group}={setting}", *overrides])
    groups = {p.name for d in (CONFIG_DIR, recipes) for p in d.iterdir() if p.is_dir()}
    chosen = tuple(o for o in overrides if "=" in o and o.split("=", 1)[0].lstrip("+~") in groups)
    files, choices = _recipe_parts(recipes, f"+{group}={setting}", *chosen)
    check_recipe_keys(_base(choices), files, overrides)
    return cfg


@functools.cache
def _recipe_parts(recipes: Path, *choices: str) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """:func:`verl_ext.recipe_keys.composed_recipe` for the recipe and the group choices (the rest of a
    command line does not change them)."""
    from verl_ext.recipe_keys import composed_recipe

    with cached_config_files(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        files, base = composed_recipe(CONFIG_NAME, [searchpath(recipes), *choices], [recipes])
    return tuple(files), tuple(base)


@functools.cache
def _base(choices: tuple[str, ...]):
    """The config composed with the axes' choices alone (what a recipe's keys are checked against; read only)."""
    with cached_config_files(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(CONFIG_NAME, overrides=list(choices))


@contextlib.contextmanager
def cached_config_files():
    """Hydra reads each config file once per test session instead of once per composition (most of a
    composition's time is parsing verl's YAML): every load returns a copy of the first, keyed by the file (and its
    modification time, for tests that edit a copied recipe)."""
    from hydra._internal.config_repository import ConfigRepository

    patched = ConfigRepository.load_config is not _load_config_cached
    if patched:
        _LOADS["load"] = ConfigRepository.load_config
        ConfigRepository.load_config = _load_config_cached
    try:
        yield
    finally:
        if patched:
            ConfigRepository.load_config = _LOADS["load"]


_LOADS: dict = {}


def _load_config_cached(self, config_path: str):
    import copy
    import os

    from hydra.core.object_type import ObjectType

    source = self._find_object_source(config_path=config_path, object_type=ObjectType.CONFIG)
    if source is None:
        return _LOADS["load"](self, config_path)
    modified = os.stat(f"{source.path}/{config_path}.yaml").st_mtime_ns if source.scheme() == "file" else None
    key = (source.path, config_path, modified)
    if key not in _LOADS:
        _LOADS[key] = _LOADS["load"](self, config_path)
    return copy.deepcopy(_LOADS[key])


def check_recipe(cfg) -> None:
    """The checks ``python -m verl_ext.main`` runs before Ray starts: the axes' and verl's own."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from verl_ext.trainer.build_axes import validate_axes
    from verl_ext.trainer.startup_checks import check_supported

    check_supported(cfg)
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


# Launcher settings a developer's shell may hold; a DRY_RUN test must not see them.
LAUNCHER_ENV = ("DATA_DIR", "OUT_DIR", "NNODES", "GPUS_PER_NODE", "RAY_ADDRESS", "MODEL_PATH", "EXPERIMENT_NAME", "SWEEP",
                "SETTINGS", "OBJECTIVES", "FILTERS", "SELECTORS", "BUFFERS", "BASELINES", "ALLOCATORS", "BUDGETS", "DOTS",
                "FORCE", "ALLOW_OVERLAP", "NUM_LAYERS", "POOL", "DOTS_PREDICTOR", "DOTS_POLICIES", "DOTS_N",
                "DOTS_MAX_NEW_TOKENS", "SFT_MIX")


def launch(group: str, script: str, *args: str, timeout: int = 120, **env: str):
    """``DRY_RUN=1 bash scripts/GROUP/SCRIPT ARGS`` in a clean launcher environment (``env`` added)."""
    import os
    import subprocess

    environ = {k: v for k, v in os.environ.items()
               if k not in LAUNCHER_ENV and not k.endswith(("_INPUT", "_MODEL"))}
    return subprocess.run(["bash", str(SCRIPTS / group / script), *args], capture_output=True, text=True,
                          timeout=timeout, env={**environ, "DRY_RUN": "1", **env}, cwd=ROOT)


def commands(proc) -> list[list[str]]:
    """The commands a ``DRY_RUN=1`` launcher printed (:func:`launch`), one word list per line, shell-unquoted; a
    ``python -m verl_ext.main`` command as it runs, the recipe's rows inserted (:func:`verl_ext.main.recipe_argv`)."""
    import shlex

    from verl_ext.main import recipe_argv

    assert proc.returncode == 0, proc.stderr
    lines = [shlex.split(line) for line in proc.stdout.splitlines()]
    with cached_config_files():
        return [w[:3] + recipe_argv(w[3:]) if w[1:3] == ["-m", "verl_ext.main"] else w for w in lines]


def rollout_budget(cfg) -> int:
    from verl_ext.trainer.build_axes import rollout_budget as budget

    return budget(cfg)
