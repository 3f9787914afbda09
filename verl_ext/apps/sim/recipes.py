"""What a launcher's command composes, read without starting Hydra on the whole trainer config: the recipe's chain
of files (``recipes/GROUP/SETTING.yaml`` and its defaults), the objective's preset (``+objective=``), the recipe's
rows for the command's choices (:func:`verl_ext.launch.recipe_tables.rows`, which ``python -m verl_ext.main`` inserts:
``recipe.objectives``, ``recipe.schedulers``, ``recipe.selectors.CHOICE`` with its replay filter and ``with`` leaves)
and the ``AXIS=CHOICE`` the launcher passes; each axis component composed from ``verl_ext/config/<axis>/<name>.yaml``
with the recipe's and the rows' field overrides. ``tests/apps/sim`` checks it against the full composition of the launch
path (Hydra, through :func:`verl_ext.launch.recipe_tables.table_overrides`), which is too slow for a grid of ~40 settings.

Precedence as Hydra applies it: the trainer's defaults < the recipe's files < the objective preset (composed after
``+GROUP=SETTING``) < the rows < the command's extra overrides.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from verl_ext.cpu import project_root
from verl_ext.launch.recipe_tables import rows

AXES = ("selector", "allocator", "rollout_filter")
TRAINER_DEFAULTS = {"selector": "uniform", "allocator": "fixed", "rollout_filter": "keep_all"}  # verl_ext_trainer.yaml
VERL_DEFAULTS = {"algorithm.adv_estimator": "gae", "algorithm.norm_adv_by_std_in_grpo": True,
                 "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
                 "data_selection.prefilters": []}  # verl/trainer/config/ppo_trainer.yaml, verl_ext_trainer.yaml
DATA_PATHS = ("embedding_file", "predictor_file")  # files of real data: the simulator gives columns instead
# settings that need such a file: the simulator keeps the preset's own (DOTS: the attention predictor over the world's
# embedding columns instead of the authors' adapter, which is trained on real pass rates)
DATA_BOUND = {("predictor", "adapter")}


def _real_data(key: str, value) -> bool:
    return key in DATA_PATHS or (key, str(value)) in DATA_BOUND


def _chain(path: Path, absolute: Path) -> list[Path]:
    """The files a config's defaults list names (relative ones beside it, ``/x`` under ``absolute``), then itself."""
    if not path.is_file():
        raise ValueError(f"no config {path}")
    files = []
    for entry in (yaml.safe_load(path.read_text()) or {}).get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            where = absolute / entry[1:] if entry.startswith("/") else path.parent / entry
            files += _chain(where.with_name(where.name + ".yaml"), absolute)
    return files + [path]


def _merged(path: Path, absolute: Path) -> dict:
    """The files of :func:`_chain` merged in order, as a plain dict (interpolations kept)."""
    return OmegaConf.to_container(OmegaConf.merge(*(OmegaConf.load(p) for p in _chain(path, absolute))))


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
    prefilters: tuple


def _root() -> Path:
    return Path(project_root())


@lru_cache(maxsize=None)
def _preset(axis: str, name: str) -> dict:
    config = _root() / "verl_ext" / "config" / axis
    if not (config / f"{name}.yaml").is_file():
        raise ValueError(f"unknown {axis} {name!r} (verl_ext/config/{axis}: "
                         f"{' '.join(sorted(p.stem for p in config.glob('*.yaml')))})")
    return {k: v for k, v in _merged(config / f"{name}.yaml", config).items() if k != "defaults"}


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
    for file in _chain(path, config):
        for entry in (yaml.safe_load(file.read_text()) or {}).get("defaults") or []:
            if isinstance(entry, dict):
                for key, name in entry.items():
                    if key.startswith("override /") and key[len("override /"):] in AXES:
                        choices[key[len("override /"):]] = name
    return _merged(path, config), choices


@lru_cache(maxsize=None)
def _objective(name: str) -> dict:
    config = _root() / "verl_ext" / "config"
    return _merged(config / "objective" / f"{name}.yaml", config)


def axis_override(line: str) -> tuple[str | None, str | None, str]:
    """A Hydra override ``key=value`` as ``(axis, field, value)``: ``selector=bots`` is ``("selector", None,
    "bots")``, ``selector.tau=0.5`` is ``("selector", "tau", "0.5")``, any other key ``(None, key, value)``."""
    key, _, value = line.partition("=")
    head, _, rest = key.partition(".")
    if key in AXES:
        return key, None, value
    return (head, rest, value) if head in AXES else (None, key, value)


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
    layers = [recipe] if objective is None else [recipe, _objective(objective)]
    choices[axis] = choice
    fields: dict[str, list[str]] = {a: [f"{k}={v}" for k, v in _leaves(_get(layers[0], a) or {})] for a in AXES}
    filter_name = component("rollout_filter", choices["rollout_filter"], tuple(fields["rollout_filter"]))["name"]
    lines = rows(recipe.get("recipe") or {}, objective, choices["selector"], filter_name)
    scalars: dict = {}
    for line in [*lines, *extra]:
        axis, key, value = axis_override(line)
        if axis is None:
            scalars[key] = _value(value)
        elif key is None:
            choices[axis] = value
            fields[axis] = []  # a new preset: the recipe's fields of the old one do not apply
        elif not _real_data(key, value):
            fields[axis].append(f"{key}={value}")

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
        prefilters=tuple(str(p.get("name")) for p in value("data_selection.prefilters") or []))


def _leaves(node: dict, prefix: str = ""):
    for key, value in node.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        elif not _real_data(key, value):
            yield f"{prefix}{key}", "null" if value is None else value
