"""Where verl_ext's trainer config is, and the Hydra search path that reaches verl's own config.

``verl_ext_trainer.yaml`` extends verl's ``ppo_trainer`` and names verl's config folder as
``pkg://verl.trainer.config``; Hydra finds a ``pkg://`` folder by importing the package, which imports verl and
torch (~4 s) before a config exists. :func:`searchpath` names the same folder by its file path, found without
importing verl: ``python -m verl_ext.main`` and the recipe tables compose with it, so ``--cfg job`` and a launcher's
``DRY_RUN`` answer in about a second.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"  # verl_ext_trainer.yaml and its groups
CONFIG_NAME = "verl_ext_trainer"
VERL_CONFIG = ("verl", "trainer", "config")  # the package of verl's ppo_trainer.yaml
SEARCHPATH = "hydra.searchpath"


@functools.cache
def verl_config_source() -> str:
    """verl's config folder as a Hydra config source: ``file://`` + its path when verl is installed as files (found
    with :func:`importlib.util.find_spec`, which imports nothing of verl), else ``pkg://verl.trainer.config``."""
    spec = importlib.util.find_spec(VERL_CONFIG[0])
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location, *VERL_CONFIG[1:])
        if (folder / "ppo_trainer.yaml").is_file():
            return f"file://{folder}"
    return "pkg://" + ".".join(VERL_CONFIG)


def searchpath(*config_dirs: str | os.PathLike) -> str:
    """The ``hydra.searchpath=`` override: verl's config folder (:func:`verl_config_source`), then ``config_dirs``
    (e.g. ``recipes/``, what ``--config-dir`` adds on the command line)."""
    return f"{SEARCHPATH}=[" + ",".join([verl_config_source(), *(f"file://{d}" for d in config_dirs)]) + "]"


def override_key(override: str) -> str:
    """The key a Hydra override sets, adds or deletes: ``++a.b=1``, ``+a.b=1``, ``~a.b`` and ``a.b=1`` are ``a.b``."""
    return override.lstrip("+~").split("=", 1)[0]


def with_searchpath(args: Sequence[str]) -> list[str]:
    """A command line with :func:`searchpath` before its first override (Hydra reads the overrides as one run of
    words), unless it sets ``hydra.searchpath`` itself (then it is unchanged: the user's wins)."""
    from verl_ext.cpu import split_hydra_flags

    flags, overrides = split_hydra_flags(args)
    if any(override_key(o) == SEARCHPATH for o in overrides):
        return list(args)
    return [*flags, searchpath(), *overrides]
