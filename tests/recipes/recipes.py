"""Shared by the recipe tests: compose a recipe as the launchers do, and run the checks training runs."""

import contextlib
import functools
import hashlib
import os
import pickle
from pathlib import Path

from hydra import compose, initialize_config_dir

from verl_ext.launch.composition import CONFIG_DIR, CONFIG_NAME, searchpath
from verl_ext.cpu import project_root
from verl_ext.launch.recipe_tables import group_choices

ROOT = Path(project_root())
RECIPES, SCRIPTS = ROOT / "recipes", ROOT / "scripts"


def compose_recipe(group: str, setting: str, *overrides: str, recipes: Path = RECIPES):
    """What ``python -m verl_ext.main --config-dir recipes +GROUP=SETTING OVERRIDES`` composes, with the
    start-up check of the recipe's keys (typos, mandatory ``???`` values)."""
    from verl_ext.launch.recipe_keys import check_recipe_keys

    with cached_compositions(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(CONFIG_NAME, overrides=[searchpath(recipes), f"+{group}={setting}", *overrides])
    files, choices = _recipe_parts(recipes, f"+{group}={setting}", *group_choices(recipes, overrides))
    check_recipe_keys(_base(choices), files, overrides)
    return cfg


@functools.cache
def _recipe_parts(recipes: Path, *choices: str) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """:func:`verl_ext.launch.recipe_keys.composed_recipe` for the recipe and the group choices (the rest of a
    command line does not change them)."""
    from verl_ext.launch.recipe_keys import composed_recipe

    with cached_compositions(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        files, base = composed_recipe(CONFIG_NAME, [searchpath(recipes), *choices], [recipes])
    return tuple(files), tuple(base)


@functools.cache
def _base(choices: tuple[str, ...]):
    """The config composed with the axes' choices alone (what a recipe's keys are checked against; read only)."""
    with cached_compositions(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(CONFIG_NAME, overrides=list(choices))


@contextlib.contextmanager
def cached_compositions():
    """Hydra's three slow steps done once per test session instead of once per composition, each keyed by what
    decides its result: reading a config file (the file and its modification time, for tests that edit a copied
    recipe), building the defaults list (the config name, the command line's group choices, the search path; the
    files it lists unchanged) and merging a defaults list into one config (the files in order, each with its
    package). The command line's values are applied after the merge, as usual. Every hit is a fresh copy,
    unpickled (5x faster than a deep copy; a composition moves the loaded nodes into its result). Under pytest-xdist
    the workers share what they computed through :data:`SHARED` (:func:`_get`)."""
    from hydra._internal import config_loader_impl
    from hydra._internal.config_repository import ConfigRepository

    patches = [(ConfigRepository, "load_config", _load_config_cached),
               (config_loader_impl, "create_defaults_list", _defaults_list_cached),
               (config_loader_impl.ConfigLoaderImpl, "_compose_config_from_defaults_list", _merge_defaults_cached)]
    patched = [(owner, name) for owner, name, cached in patches if getattr(owner, name) is not cached]
    for owner, name, cached in patches:
        if (owner, name) in patched:
            _ORIGINAL[name] = getattr(owner, name)
            setattr(owner, name, cached)
    try:
        yield
    finally:
        for owner, name in patched:
            setattr(owner, name, _ORIGINAL[name])


_ORIGINAL: dict = {}
_CACHE: dict = {}
SHARED: Path | None = None  # an existing folder the xdist workers of one run share (tests/conftest.py), else None


def _get(key) -> bytes | None:
    """A cached pickle: this process's, else one another worker of the run wrote to :data:`SHARED`."""
    if key not in _CACHE and SHARED is not None:
        path = _shared_path(key)
        if path.is_file():
            _CACHE[key] = path.read_bytes()
    return _CACHE.get(key)


def _put(key, blob: bytes) -> None:
    _CACHE[key] = blob
    if SHARED is not None:
        path = _shared_path(key)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        tmp.replace(path)  # atomic: a worker reads a whole pickle or none


def _shared_path(key) -> Path:
    return SHARED / hashlib.sha256(repr(key).encode()).hexdigest()


def _file_key(repository, config_path: str):
    from hydra.core.object_type import ObjectType

    source = repository._find_object_source(config_path=config_path, object_type=ObjectType.CONFIG)
    if source is None:
        return None
    modified = os.stat(f"{source.path}/{config_path}.yaml").st_mtime_ns if source.scheme() == "file" else None
    return source.path, config_path, modified


def _cached(key, compute):
    blob = _get(key)
    if blob is None:
        blob = pickle.dumps(compute())
        _put(key, blob)
    return pickle.loads(blob)


def _load_config_cached(self, config_path: str):
    key = _file_key(self, config_path)
    if key is None:
        return _ORIGINAL["load_config"](self, config_path)
    return _cached(("load", key), lambda: _ORIGINAL["load_config"](self, config_path))


def _defaults_list_cached(repo, config_name, overrides_list, prepend_hydra, skip_missing):
    from hydra._internal.defaults_list import DefaultsList, Overrides

    build = lambda: _ORIGINAL["create_defaults_list"](repo, config_name, overrides_list, prepend_hydra,  # noqa: E731
                                                      skip_missing)
    repository = getattr(repo, "delegate", repo)
    overrides = Overrides(repo=repo, overrides_list=overrides_list)  # as Hydra splits them: choices, config values
    values = {id(o) for o in overrides.config_overrides}
    key = ("defaults", config_name, tuple(o.input_line for o in overrides_list if id(o) not in values),
           prepend_hydra, skip_missing, tuple(source.path for source in repository.get_sources()))
    blob = _get(key)
    if blob is not None:
        defaults, tree, known_choices, files = pickle.loads(blob)
        if files == tuple(_file_key(repository, d.config_path) for d in defaults):
            overrides.known_choices = known_choices  # what the build records while it walks the tree
            return DefaultsList(defaults=defaults, config_overrides=overrides.config_overrides, defaults_tree=tree,
                                overrides=overrides)
    built = build()
    files = tuple(_file_key(repository, d.config_path) for d in built.defaults)
    _put(key, pickle.dumps((built.defaults, built.defaults_tree, built.overrides.known_choices, files)))
    return built


def _merge_defaults_cached(self, defaults, repo):
    repository = getattr(repo, "delegate", repo)  # Hydra wraps the repository in a per-composition cache
    files = tuple((_file_key(repository, d.config_path), d.package, d.primary) for d in defaults)
    merge = lambda: _ORIGINAL["_compose_config_from_defaults_list"](self, defaults, repo)  # noqa: E731
    return merge() if any(f[0] is None for f in files) else _cached(("merge", files), merge)


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
    import subprocess

    environ = {k: v for k, v in os.environ.items()
               if k not in LAUNCHER_ENV and not k.endswith(("_INPUT", "_MODEL"))}
    return subprocess.run(["bash", str(SCRIPTS / group / script), *args], capture_output=True, text=True,
                          timeout=timeout, env={**environ, "DRY_RUN": "1", **env}, cwd=ROOT)


def commands(proc) -> list[list[str]]:
    """The commands a ``DRY_RUN=1`` launcher printed (:func:`launch`), one word list per line, shell-unquoted; a
    ``python -m verl_ext.main`` command as it runs, the recipe's rows inserted (:func:`verl_ext.launch.main.recipe_argv`)."""
    import shlex

    from verl_ext.launch.main import recipe_argv

    assert proc.returncode == 0, proc.stderr
    lines = [shlex.split(line) for line in proc.stdout.splitlines()]
    with cached_compositions():
        return [w[:3] + recipe_argv(w[3:]) if w[1:3] == ["-m", "verl_ext.main"] else w for w in lines]


def rollout_budget(cfg) -> int:
    from verl_ext.trainer.build_axes import rollout_budget as budget

    return budget(cfg)
