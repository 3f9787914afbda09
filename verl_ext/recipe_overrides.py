"""A recipe's per-objective and per-choice settings read from its YAML files directly (no Hydra), for the simulator.

:func:`settings` gives, for ``recipes/GROUP/SETTING.yaml`` (with the files its defaults list names), the leaves of
``recipe.objectives.OBJECTIVE`` and the component's rows (``recipe.schedulers`` / ``recipe.selectors``) as the
overrides :mod:`verl_ext.recipe_tables` inserts for ``python -m verl_ext.main``, plus the chosen component's merged
preset. Training reads the tables from Hydra's composition (:mod:`verl_ext.recipe_tables`); this reader remains for
:mod:`verl_ext.sim.recipes` (a grid of ~40 settings, where composing each through Hydra is too slow) and its test.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import OmegaConf

from verl_ext.recipe_tables import leaves, rows, text  # noqa: F401 - leaves, text: verl_ext.sim.recipes



def chain(path: Path, absolute: Path) -> list[Path]:
    """The files a config's defaults list names (relative ones beside it, ``/x`` under ``absolute``), then itself."""
    if not path.is_file():
        raise SystemExit(f"no config {path}")
    files = []
    for entry in (yaml.safe_load(path.read_text()) or {}).get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            where = absolute / entry[1:] if entry.startswith("/") else path.parent / entry
            files += chain(where.with_name(where.name + ".yaml"), absolute)
    return files + [path]


def merged(path: Path, absolute: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.merge(*(OmegaConf.load(p) for p in chain(path, absolute))))


def settings(root: Path, group: str, setting: str, objective: str, axis: str, choice: str) -> tuple[list[str], dict]:
    """(the overrides, the chosen component's merged preset)."""
    config = root / "verl_ext" / "config"
    for kind, name in (("objective", objective), (axis, choice)):
        if not (config / kind / f"{name}.yaml").is_file():
            known = " ".join(sorted(p.stem for p in (config / kind).glob("*.yaml")))
            raise SystemExit(f"unknown {kind} {name!r} (verl_ext/config/{kind}: {known})")
    recipe = merged(root / "recipes" / group / f"{setting}.yaml", config).get("recipe", {})
    if objective not in recipe.get("objectives", {}):
        raise SystemExit(f"recipes/{group}/{setting}.yaml has no recipe.objectives.{objective}")
    preset = merged(config / axis / f"{choice}.yaml", config / axis)
    if axis == "rollout_filter":
        lines = rows(recipe, objective, None, preset["name"])
        own = ((recipe.get("schedulers") or {}).get(objective) or {}).get(preset["name"]) or {}
    else:
        lines = rows(recipe, objective, choice, None)
        own = {k: v for k, v in ((recipe.get("selectors") or {}).get(choice) or {}).items()
               if k not in ("rollout_filter", "with")}
    return lines, {**preset, **own}
