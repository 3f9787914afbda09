"""A recipe's per-objective and per-choice tables, read from the config Hydra composes, as Hydra overrides.

A recipe (``recipes/GROUP/SETTING.yaml`` with its ``_common.yaml``) may hold, under ``recipe``:

* ``objectives.OBJECTIVE`` - config leaves for ``+objective=OBJECTIVE`` (ADS: the KL in the reward, which the
  objective presets turn off);
* ``schedulers.OBJECTIVE.NAME`` - ``rollout_filter.*`` for the rollout filter whose ``name`` is NAME (CBS
  Table 4, e_min and epsilon_min per objective);
* ``selectors.CHOICE`` - ``selector.*`` for ``selector=CHOICE``; its ``rollout_filter`` entry (``name`` and settings)
  is the filter the selector runs with (``rollout_filter=NAME`` then its settings: DOTS+RR's replay) and its
  ``with`` entry other config leaves it runs with (``data.train_batch_size``).

Hydra cannot pick a config leaf by another group's choice, so ``python -m verl_ext.main`` composes the recipe with
the command line's group choices once (:func:`table_overrides`) and inserts the chosen rows as overrides right
after the last of those choices (:func:`with_tables`): later overrides win, and ``--cfg job`` shows them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verl_ext.launch.composition import CONFIG_DIR, CONFIG_NAME, override_key, searchpath
from verl_ext.cpu import split_hydra_flags

CHOICES = ("objective", "selector", "rollout_filter")  # the groups the tables are keyed by


def leaves(node: Mapping, prefix: str = "") -> Iterable[tuple[str, object]]:
    """``(dotted key, value)`` of every leaf of a plain mapping (lists are leaves, empty mappings skipped)."""
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            yield from leaves(value, f"{prefix}{key}.")
        elif not isinstance(value, Mapping):
            yield f"{prefix}{key}", value


def text(value) -> str:
    """``value`` as Hydra's override grammar reads it back (interpolations kept)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(text(v) for v in value) + "]"
    return "null" if value is None else str(value)


def _overrides(node: Mapping | None, prefix: str = "") -> list[str]:
    return [f"{prefix}{key}={text(value)}" for key, value in leaves(node or {})]


def rows(recipe: Mapping, objective: str | None, selector: str | None, filter_name: str | None) -> list[str]:
    """The overrides of a recipe section's rows for the chosen objective, selector and filter (by its ``name``)."""
    out = []
    if objective is not None and "objectives" in recipe:
        if objective not in recipe["objectives"]:
            known = " ".join(sorted(recipe["objectives"]))
            raise ValueError(f"the recipe has no recipe.objectives.{objective} (it has: {known})")
        out += _overrides(recipe["objectives"][objective])
        out += _overrides(((recipe.get("schedulers") or {}).get(objective) or {}).get(filter_name), "rollout_filter.")
    own = dict((recipe.get("selectors") or {}).get(selector) or {})
    companion = own.pop("rollout_filter", None)
    if companion is not None:
        if not isinstance(companion, Mapping) or "name" not in companion:
            raise ValueError(f"recipe.selectors.{selector}.rollout_filter needs a name")
        companion = dict(companion)
        out += [f"rollout_filter={companion.pop('name')}", *_overrides(companion, "rollout_filter.")]
    return out + _overrides(own.pop("with", None)) + _overrides(own, "selector.")


def _groups(config_dir: Path) -> set[str]:
    """The top-level config groups of verl_ext's config and of ``config_dir`` (the recipes)."""
    return {p.name for d in (CONFIG_DIR, config_dir) for p in d.iterdir() if p.is_dir()}


def group_choices(config_dir: str | Path, overrides: Sequence[str]) -> tuple[str, ...]:
    """The command line's group choices (``+GROUP=SETTING``, ``selector=``): what decides the defaults list."""
    groups = _groups(Path(config_dir).resolve())
    return tuple(o for o in overrides if "=" in o and override_key(o) in groups)


def table_overrides(config_dir: str | Path, overrides: Sequence[str]) -> list[str]:
    """The rows the recipe reached through ``config_dir`` gives the command line's choices (see module docstring),
    read from the config Hydra composes with the command line's group choices (:func:`group_choices`)."""
    return list(_rows(Path(config_dir).resolve(), group_choices(config_dir, overrides)))


@functools.lru_cache(maxsize=256)  # per choices: the recipe tests expand hundreds of launcher commands
def _rows(config_dir: Path, choices: tuple[str, ...]) -> tuple[str, ...]:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(CONFIG_NAME, overrides=[searchpath(config_dir), *choices], return_hydra_config=True)
    recipe = cfg.get("recipe")
    if not isinstance(recipe, DictConfig):
        return ()
    chosen = cfg.hydra.runtime.choices
    return tuple(rows(OmegaConf.to_container(recipe, resolve=False), chosen.get("objective"), chosen.get("selector"),
                      str(cfg.rollout_filter.name)))


def with_tables(config_dir: str | Path | None, args: list[str]) -> list[str]:
    """The command line ``args`` with the recipe's rows inserted after the last choice of :data:`CHOICES` (else
    before the first override): the user's later overrides win."""
    if config_dir is None:
        return args
    extra = table_overrides(config_dir, args)
    first = len(split_hydra_flags(args)[0])
    chosen = [i for i in range(first, len(args)) if "=" in args[i] and args[i].split("=", 1)[0].lstrip("+") in CHOICES]
    at = chosen[-1] + 1 if chosen else first
    return [*args[:at], *extra, *args[at:]]
