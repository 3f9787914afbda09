"""A recipe's keys, checked before Ray or verl is imported (``python -m verl_ext.main`` runs it first).

A typo in a recipe composes silently (Hydra adds the key) and a ``???`` a recipe declares, merged onto verl's
default, keeps the default. :func:`check_recipe_keys` refuses both: every key a recipe file sets exists in the
config composed without the recipe (with the axes' choices alone), and every ``???`` it declares is given on the
command line.

Keys a recipe may add: anything under a mapping the base declares empty (``override_config: {}``,
``engine_kwargs``, ``reward_kwargs``, ...) or ``null`` (free-form places), and the top-level section
``recipe`` (the recipe's own variables, e.g. ``recipe.data_dir``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from omegaconf import DictConfig, ListConfig

from verl_ext.launch.composition import CONFIG_DIR, SEARCHPATH, override_key

RECIPE_SECTION = "recipe"
MISSING = "???"


def _leaves(node, prefix: str = "") -> Iterable[tuple[str, object]]:
    """``(dotted key, value)`` of every leaf of a plain YAML mapping (lists are leaves)."""
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def recipe_values(path: str | os.PathLike) -> dict[str, object]:
    """The keys a recipe file sets (its ``defaults`` list aside), dotted, with their values."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: a recipe is a YAML mapping")
    return dict(_leaves({k: v for k, v in data.items() if k != "defaults"}))


AXES = ("selector", "allocator", "rollout_filter")  # the groups of verl_ext_trainer.yaml's defaults list


def _config_file(config_path: str, dirs: Iterable[Path]) -> Path | None:
    return next((d / f"{config_path}.yaml" for d in dirs if (d / f"{config_path}.yaml").is_file()), None)


def composed_recipe(config_name: str, overrides: Iterable[str], recipe_dirs: Iterable[Path]) -> tuple[list[Path],
                                                                                                    list[str]]:
    """From the defaults tree Hydra composes for ``overrides`` (the running app's, or :func:`hydra.initialize`'s
    search path): the recipe's files (each group option found in ``recipe_dirs`` and the configs its defaults
    list brings in, such as ``_common`` or ``/preset/cpu_small``, includes first) and the axes' choices
    (``selector=ads``) to compose the config without them."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    recipe_dirs = [Path(d) for d in recipe_dirs]
    tree = GlobalHydra.instance().config_loader().compute_defaults_list(
        config_name, list(overrides), RunMode.RUN).defaults_tree
    primary = next(c for c in tree.children if not getattr(c, "node", c).get_config_path().startswith("hydra/"))

    def node(entry):  # a tree entry is a DefaultsTreeNode (with children) or a leaf InputDefault
        return getattr(entry, "node", entry)

    def included(entry) -> list[Path]:
        children = [c for c in getattr(entry, "children", None) or [] if not node(c).is_self()]
        own = _config_file(node(entry).get_config_path(), [*recipe_dirs, CONFIG_DIR])
        return [f for c in children for f in included(c)] + ([own] if own else [])

    files, choices = [], []
    for entry in primary.children or []:
        default = node(entry)
        if _config_file(default.get_config_path(), recipe_dirs) is not None:
            files += included(entry)
        elif default.get_group_path() in AXES:
            choices.append(f"{default.get_group_path()}={default.get_name()}")
    return files, choices


def check_hydra_recipes(config) -> None:
    """:func:`check_recipe_keys` for the running Hydra app (``python -m verl_ext.main``): the recipe files of
    ``--config-dir`` its defaults tree holds, against the config composed with the axes' choices alone."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    dirs = [Path(s.path) for s in hc.runtime.config_sources if s.provider == "command-line" and s.schema == "file"]
    search = [o for o in hc.overrides.hydra if override_key(o) == SEARCHPATH]  # the run's, for the same files
    files, choices = composed_recipe(hc.job.config_name, [*search, *hc.overrides.task], dirs)
    if files:
        check_recipe_keys(compose(config_name=hc.job.config_name, overrides=[*search, *choices]), files,
                          hc.overrides.task)


def _unknown(base, key: str) -> tuple[str, list[str]] | None:
    """``None`` if ``key`` exists in ``base`` or lies in a free-form place; else (first unknown part, close
    names among its siblings)."""
    node, parts = base, key.split(".")
    if parts[0] == RECIPE_SECTION and RECIPE_SECTION not in base:
        return None
    for i, part in enumerate(parts):
        if node is None or (isinstance(node, DictConfig) and len(node) == 0):
            return None  # free-form mapping: anything below is the user's
        if not isinstance(node, DictConfig):
            return ".".join(parts[:i]), []  # a value where the recipe expects a section
        child = node._get_node(part, validate_access=False)  # not `in`: it says False for a ??? value
        if child is None:
            return ".".join(parts[: i + 1]), difflib.get_close_matches(part, [str(k) for k in node.keys()], n=3)
        node = child if isinstance(child, (DictConfig, ListConfig)) else child._value()
    return None


def check_recipe_keys(base, recipe_files: Iterable[str | os.PathLike], command_line: Iterable[str] = ()) -> None:
    """Every key the recipe files set exists in ``base`` (the config composed without them), and every
    ``???`` they declare is set by an override in ``command_line``."""
    given = {override_key(o) for o in command_line if "=" in o}
    errors = []
    for path in recipe_files:
        for key, value in recipe_values(path).items():
            unknown = _unknown(base, key)
            if unknown is not None:
                part, close = unknown
                hint = f" (did you mean {' / '.join(close)}?)" if close else ""
                errors.append(f"{path}: '{key}' is not a config key: '{part}' does not exist{hint}")
            elif value == MISSING and key not in given:
                errors.append(f"{path}: '{key}' is mandatory (???): pass {key}=... on the command line")
    if errors:
        raise ValueError("recipe config errors:\n  " + "\n  ".join(errors))
