"""What a launcher's command composes, read without starting Hydra on the whole trainer config: the recipe's chain
of files (``recipes/GROUP/SETTING.yaml`` and its defaults), the objective's preset (``+objective=``), the
launcher's overrides (``verl_ext.recipe_overrides``: ``recipe.objectives`` and ``recipe.selectors.CHOICE``, its
replay filter and its ``with`` leaves included) and the ``AXIS=CHOICE`` the launcher passes; each axis component
composed by Hydra from ``verl_ext/config/<axis>/<name>.yaml`` with the recipe's and the launcher's field overrides.
``tests/sim`` checks it against the full composition (``tests/recipes/recipes.py:compose_recipe``) and
``recipe_overrides.settings`` (which reads the files again on every call: too slow for a grid of ~40 settings).

Precedence as Hydra applies it: the trainer's defaults < the recipe's files < the objective preset (composed after
``+GROUP=SETTING``) < the launcher's overrides.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from verl_ext.cpu import project_root
from verl_ext.recipe_overrides import chain, leaves, merged, text

AXES = ("selector", "allocator", "rollout_filter")
TRAINER_DEFAULTS = {"selector": "uniform", "allocator": "fixed", "rollout_filter": "keep_all"}  # verl_ext_trainer.yaml
VERL_DEFAULTS = {"algorithm.adv_estimator": "gae", "algorithm.norm_adv_by_std_in_grpo": True,
                 "actor_rollout_ref.actor.loss_agg_mode": "token-mean", "actor_rollout_ref.rollout.val_kwargs.n": 1,
                 "data_selection.prefilters": []}  # verl/trainer/config/ppo_trainer.yaml, verl_ext_trainer.yaml
DATA_PATHS = ("embedding_file", "predictor_file")  # files of real data: the simulator gives columns instead


@dataclass(frozen=True)
class RecipeRun:
    """The values of a composed recipe the simulator runs."""

    selector: dict
    allocator: dict
    rollout_filter: dict
    batch: int  # data.train_batch_size
    rollouts: int  # actor_rollout_ref.rollout.n
    mini_batch: int  # actor.ppo_mini_batch_size, prompts
    steps: int  # trainer.total_training_steps
    adv_estimator: str
    norm_adv_by_std: bool
    loss_agg_mode: str
    val_n: int
    prefilters: tuple


def _root() -> Path:
    return Path(project_root())


@lru_cache(maxsize=None)
def _preset(axis: str, name: str) -> dict:
    config = _root() / "verl_ext" / "config" / axis
    if not (config / f"{name}.yaml").is_file():
        raise ValueError(f"unknown {axis} {name!r} (verl_ext/config/{axis}: "
                         f"{' '.join(sorted(p.stem for p in config.glob('*.yaml')))})")
    return {k: v for k, v in merged(config / f"{name}.yaml", config).items() if k != "defaults"}


@lru_cache(maxsize=None)
def component(axis: str, name: str, overrides: tuple[str, ...] = ()) -> dict:
    """``<axis>=<name>``: the preset merged with its defaults, then ``overrides`` (``key=value``, values as YAML)."""
    base = OmegaConf.create(_preset(axis, name))
    return OmegaConf.to_container(OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides))), resolve=True)


@lru_cache(maxsize=None)
def _recipe(group: str, setting: str) -> tuple[dict, dict]:
    """(the recipe's merged files, the axis choices its defaults lists override)."""
    config = _root() / "verl_ext" / "config"
    path = _root() / "recipes" / group / f"{setting}.yaml"
    choices = {}
    for file in chain(path, config):
        for entry in (yaml.safe_load(file.read_text()) or {}).get("defaults") or []:
            if isinstance(entry, dict):
                for key, name in entry.items():
                    if key.startswith("override /") and key[len("override /"):] in AXES:
                        choices[key[len("override /"):]] = name
    return merged(path, config), choices


@lru_cache(maxsize=None)
def _objective(name: str) -> dict:
    config = _root() / "verl_ext" / "config"
    return merged(config / "objective" / f"{name}.yaml", config)


def launcher_lines(recipe: dict, objective: str, axis: str, choice: str) -> list[str]:
    """The overrides ``python -m verl_ext.recipe_overrides`` prints (``settings``), from an already merged recipe:
    ``recipe.objectives.OBJECTIVE``'s leaves, then the component's own settings (a selector's companion filter and
    ``with`` leaves first)."""
    own_recipe = recipe.get("recipe", {})
    if objective not in own_recipe.get("objectives", {}):
        raise ValueError(f"the recipe has no recipe.objectives.{objective}")
    if axis == "rollout_filter":
        own = ((own_recipe.get("schedulers") or {}).get(objective) or {}).get(_preset(axis, choice)["name"]) or {}
    else:
        own = dict((own_recipe.get("selectors") or {}).get(choice) or {})
    lines = [f"{k}={text(v)}" for k, v in leaves(own_recipe["objectives"][objective] or {})]
    companion = dict(own.pop("rollout_filter", None) or {}) if axis == "selector" else {}
    if companion:
        lines.append(f"rollout_filter={companion.pop('name')}")
        lines += [f"rollout_filter.{k}={text(v)}" for k, v in leaves(companion)]
    lines += [f"{k}={text(v)}" for k, v in leaves((own.pop("with", None) or {}) if axis == "selector" else {})]
    return lines + [f"{axis}.{k}={text(v)}" for k, v in leaves(own)]


def _get(tree: dict, key: str):
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _value(raw: str):
    return yaml.safe_load(raw)


@lru_cache(maxsize=None)
def recipe_run(group: str, setting: str, objective: str | None, axis: str, choice: str,
               extra: tuple[str, ...] = ()) -> RecipeRun:
    """What ``scripts/GROUP`` launches for ``SETTING [OBJECTIVE] CHOICE`` (``objective`` None: a group whose
    launcher passes ``AXIS=CHOICE`` alone, BOTS and CoBA), then ``extra`` Hydra overrides (``key=value``)."""
    recipe, overridden = _recipe(group, setting)
    choices = {**TRAINER_DEFAULTS, **overridden}
    layers, lines = [recipe], []
    if objective is not None:
        layers.append(_objective(objective))
        lines = launcher_lines(recipe, objective, axis, choice)
    choices[axis] = choice
    fields: dict[str, list[str]] = {a: [f"{k}={v}" for k, v in _leaves(_get(layers[0], a) or {})] for a in AXES}
    scalars: dict = {}
    for line in [*lines, *extra]:
        key, _, value = line.partition("=")
        head, _, rest = key.partition(".")
        if key in AXES:
            choices[key] = value
            fields[key] = []  # a new preset: the recipe's fields of the old one do not apply
        elif head in AXES:
            if rest not in DATA_PATHS:
                fields[head].append(f"{rest}={value}")
        else:
            scalars[key] = _value(value)

    def value(key: str):
        if key in scalars:
            return scalars[key]
        for layer in reversed(layers):
            found = _get(layer, key)
            if found is not None:
                return found
        return VERL_DEFAULTS.get(key)

    built = {a: component(a, choices[a], tuple(fields[a])) for a in AXES}
    return RecipeRun(
        built["selector"], built["allocator"], built["rollout_filter"],
        batch=int(value("data.train_batch_size")), rollouts=int(value("actor_rollout_ref.rollout.n")),
        mini_batch=int(value("actor_rollout_ref.actor.ppo_mini_batch_size")),
        steps=int(value("trainer.total_training_steps")), adv_estimator=str(value("algorithm.adv_estimator")),
        norm_adv_by_std=bool(value("algorithm.norm_adv_by_std_in_grpo")),
        loss_agg_mode=str(value("actor_rollout_ref.actor.loss_agg_mode")),
        val_n=int(value("actor_rollout_ref.rollout.val_kwargs.n")),
        prefilters=tuple(str(p.get("name")) for p in value("data_selection.prefilters") or []))


def _leaves(node: dict, prefix: str = ""):
    for key, value in node.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        elif key not in DATA_PATHS:
            yield f"{prefix}{key}", "null" if value is None else value
