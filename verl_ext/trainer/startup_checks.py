"""Checks ``python -m verl_ext.main`` runs on the composed config before Ray starts (no Ray, no GPU).

* :func:`check_supported` - what trainer mode ``verl_ext`` cannot run: another ``trainer.v1.trainer_mode``
  (the async modes), ``parameter_sync_step > 1``, prompt refills (``sync_refill_failed_groups``),
  verl's DAPO ``algorithm.filter_groups`` (filter with ``rollout_filter=``), distillation, and a critic
  whose mini-batch differs from the actor's, a rollout length above ``data.max_response_length`` without the
  agent loop that caps training generation (:mod:`verl_ext.trainer.generation_length`); inside Ray (the trainer's
  constructor), also
  :func:`check_ray_cpus`.
* :func:`check_ray_cpus` - the Ray nodes' free logical CPUs hold verl's placement groups (else verl waits forever).
* :func:`check_recipe_keys` - every key a recipe YAML sets exists in the config composed without it
  (a typo in a recipe composes silently otherwise: Hydra adds the key), and every ``???`` a recipe
  declares is given on the command line (``???`` merged onto verl's default keeps the default).
* :func:`check_validation_files` - local validation parquet files exist and have the columns verl reads.

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

TRAINER_MODE = "verl_ext"
RECIPE_SECTION = "recipe"
MISSING = "???"


# ------------------------------------------------------------------ unsupported settings
def check_supported(config) -> None:
    v1 = config.trainer.v1
    problems = []
    if v1.trainer_mode != TRAINER_MODE:
        problems.append(f"trainer.v1.trainer_mode={v1.trainer_mode} (verl_ext.main runs trainer mode {TRAINER_MODE}, "
                        "which is synchronous; the async modes are not supported)")
    sync_step = (v1.get(v1.trainer_mode) or {}).get("parameter_sync_step", 1)
    if int(sync_step) != 1:
        problems.append(f"trainer.v1.{v1.trainer_mode}.parameter_sync_step={sync_step} (one update per step only)")
    if (v1.get("sampler") or {}).get("sync_refill_failed_groups", False):
        problems.append("trainer.v1.sampler.sync_refill_failed_groups=true (prompts are not refilled; "
                        "the selector chooses every prompt of a step)")
    if ((config.algorithm.get("filter_groups") or {}).get("enable", False)):
        problems.append("algorithm.filter_groups.enable=true (filter rollouts with rollout_filter=)")
    from verl.trainer.distillation import is_distillation_enabled
    from verl.trainer.ppo.utils import need_critic

    if is_distillation_enabled(config.get("distillation")):
        problems.append("distillation.enabled=true")

    if need_critic(config) and config.critic.ppo_mini_batch_size != config.actor_rollout_ref.actor.ppo_mini_batch_size:
        problems.append("critic.ppo_mini_batch_size != actor_rollout_ref.actor.ppo_mini_batch_size (both follow "
                        "one mini-batch plan)")
    problems += attention_problems(config)
    from verl_ext.trainer.generation_length import check_generation_length

    problems += check_generation_length(config)
    if problems:
        raise ValueError("not supported by trainer mode verl_ext:\n  " + "\n  ".join(problems))
    check_ray_cpus(config)


def attention_problems(config) -> list[str]:
    """The actor's (and reference's, which copies the actor's model config) attention backend against its Ulysses
    sequence-parallel size (:func:`verl_ext.attention.config_problems`)."""
    from verl_ext.attention import backend_of, config_problems

    model = config.actor_rollout_ref.model
    attention = str((model.get("override_config") or {}).get("attn_implementation", "flash_attention_2"))
    backend = backend_of(attention, bool(model.get("use_remove_padding", True)))
    problems = []
    for role in ("actor", "ref"):
        section = config.actor_rollout_ref[role]
        sp = max(int(section.get("ulysses_sequence_parallel_size") or 1),
                 int((section.get("fsdp_config") or {}).get("ulysses_sequence_parallel_size") or 1))
        problems += [f"actor_rollout_ref.{role}: {p}" for p in config_problems(backend, ulysses_sequence_parallel_size=sp)]
    return problems


# ------------------------------------------------------------------ Ray resources
BUNDLE_CPUS = 3  # a rank's bundle: ResourcePoolManager.max_colocate_count (single_controller/ray/base.py:192, 146)


def placement_groups_that_fit(free_cpus: Iterable[float], ranks_per_node: int) -> int:
    """How many of verl's per-node placement groups (``ranks_per_node`` bundles of :data:`BUNDLE_CPUS` CPUs,
    STRICT_PACK: all on one node, ``single_controller/ray/base.py:146-158``) the nodes' free CPUs hold."""
    need = BUNDLE_CPUS * ranks_per_node
    return sum(int(cpus // need) for cpus in free_cpus)


def check_ray_cpus(config, free_cpus: Mapping[str, float] | None = None) -> None:
    """The free logical CPUs per node (default: the running Ray cluster's, after the helper actors such as
    TransferQueue's; nothing to check outside Ray) hold ``trainer.nnodes`` placement groups of
    ``trainer.n_gpus_per_node`` ranks; verl would otherwise wait for them forever without a message
    (``ray.get(pg.ready())``, ``single_controller/ray/base.py:160``)."""
    if free_cpus is None:
        import ray

        if not ray.is_initialized():
            return
        from ray._private.state import available_resources_per_node  # as verl does, ray/base.py:228

        free_cpus = {node: res.get("CPU", 0.0) for node, res in available_resources_per_node().items()}
    nnodes, ranks = int(config.trainer.nnodes), int(config.trainer.n_gpus_per_node)
    if placement_groups_that_fit(free_cpus.values(), ranks) < nnodes:
        free = ", ".join(f"{cpus:g}" for cpus in free_cpus.values())
        raise ValueError(
            f"too few logical CPUs for verl's placement groups: trainer.nnodes={nnodes} groups, each "
            f"{ranks} rank(s) x {BUNDLE_CPUS} CPUs = {BUNDLE_CPUS * ranks} on one node "
            f"(single_controller/ray/base.py:146-160), but the nodes have {free} CPUs free after the helper actors; "
            "verl would wait forever. Logical CPUs are scheduling slots, not cores: start each node with more "
            "(ray start --num-cpus, NUM_CPUS= scripts/ray_cluster.sh) or raise ray_kwargs.ray_init.num_cpus "
            "(a private Ray instance).")


# ------------------------------------------------------------------ recipe keys
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


CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"  # verl_ext_trainer.yaml and its groups
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
    files, choices = composed_recipe(hc.job.config_name, hc.overrides.task, dirs)
    if files:
        check_recipe_keys(compose(config_name=hc.job.config_name, overrides=choices), files, hc.overrides.task)


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
    given = {o.lstrip("+~").split("=", 1)[0] for o in command_line if "=" in o}
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


# ------------------------------------------------------------------ validation data
VAL_COLUMNS = ("prompt", "data_source", "reward_model", "extra_info")


def check_validation_files(config) -> None:
    """When validation runs (``trainer.test_freq > 0`` or ``val_before_train``), every local
    ``data.val_files`` parquet file exists, is readable and has verl's columns with ``extra_info.index``."""
    import pyarrow.parquet as pq

    trainer = config.trainer
    if not ((trainer.get("test_freq") or -1) > 0 or trainer.get("val_before_train", False)):
        return
    files = config.data.val_files
    for path in (list(files) if isinstance(files, (list, tuple, ListConfig)) else [files]):
        path = str(path)
        if "://" in path or not path.endswith(".parquet"):
            continue  # remote or other formats are checked when verl loads them
        if not os.path.isfile(path):
            raise FileNotFoundError(f"data.val_files: {path} does not exist (validation runs: trainer.test_freq="
                                    f"{trainer.get('test_freq')}, val_before_train={trainer.get('val_before_train')})")
        try:
            table = pq.read_table(path)
        except Exception as e:  # noqa: BLE001 - any reader error means the file is unusable
            raise ValueError(f"data.val_files: {path} is not a readable parquet file: {e}") from e
        missing = [c for c in VAL_COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(f"data.val_files: {path} has no column(s) {missing}")
        if table.num_rows == 0:
            raise ValueError(f"data.val_files: {path} has no rows")
        for row, info in enumerate(table.column("extra_info").to_pylist()):
            if not isinstance(info, dict) or info.get("index") is None:
                raise ValueError(f"data.val_files: {path} row {row}: extra_info.index is missing")
