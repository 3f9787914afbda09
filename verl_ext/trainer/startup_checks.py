"""Checks ``python -m verl_ext.main`` runs on the composed config before Ray starts (no Ray, no GPU).

* :func:`check_supported` - what the trainer modes ``verl_ext`` (sync), ``verl_ext_colocate_async`` and
  ``verl_ext_separate_async`` cannot run: verl's own mode names, ``parameter_sync_step > 1`` outside separate_async,
  a custom sampler, in the async modes a component with no stale-evidence rule (:data:`ASYNC_REFUSED`), sync refills (``sync_refill_failed_groups``),
  verl's DAPO ``algorithm.filter_groups`` (filter with ``rollout_filter=``), distillation, and a critic
  whose mini-batch differs from the actor's, a rollout length above ``data.max_response_length`` without the
  agent loop that caps training generation (:mod:`verl_ext.trainer.generation_length`); inside Ray (the trainer's
  constructor), also
  :func:`check_ray_cpus`.
* :func:`check_ray_cpus` - the Ray nodes' free logical CPUs hold verl's placement groups (else verl waits forever).
* :func:`check_validation_files` - local validation parquet files exist and have the columns verl reads.
* :func:`check_pool_size` - in the asynchronous modes, the training pool holds the prompts kept in flight (run by the
  trainer once it has read the pool, before its workers start).

A recipe's keys are checked before any of these, without importing verl (:mod:`verl_ext.launch.recipe_keys`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

from omegaconf import ListConfig

TRAINER_MODE = "verl_ext"
ASYNC_MODES = {"colocate_async": "verl_ext_colocate_async", "separate_async": "verl_ext_separate_async"}  # verl's: ours


# ------------------------------------------------------------------ unsupported settings
def verl_mode(mode: str) -> str:
    """verl's trainer mode under one of ours: ``sync``, or the async mode it extends."""
    return "sync" if mode == TRAINER_MODE else {ours: theirs for theirs, ours in ASYNC_MODES.items()}.get(mode, mode)


def check_supported(config) -> None:
    v1 = config.trainer.v1
    problems = []
    mode, modes = v1.trainer_mode, (TRAINER_MODE, *ASYNC_MODES.values())
    if mode not in modes:
        hint = f"; {ASYNC_MODES[mode]} is verl's {mode} with the three axes" if mode in ASYNC_MODES else ""
        problems.append(f"trainer.v1.trainer_mode={mode} (verl_ext.main runs {', '.join(modes)}{hint})")
    sync_step = int((v1.get(verl_mode(mode)) or {}).get("parameter_sync_step", 1))
    mini = config.actor_rollout_ref.actor.ppo_mini_batch_size
    if sync_step != 1 and verl_mode(mode) != "separate_async":
        problems.append(f"trainer.v1.{verl_mode(mode)}.parameter_sync_step={sync_step} (several actor updates per "
                        "weight sync: separate_async only, +async=separate)")
    elif sync_step != 1:
        problems += local_update_problems(config, sync_step)
    if verl_mode(mode) == "separate_async" and config.data.train_batch_size != sync_step * mini:
        problems.append(f"data.train_batch_size={config.data.train_batch_size} != trainer.v1.separate_async."
                        f"parameter_sync_step={sync_step} x actor_rollout_ref.actor.ppo_mini_batch_size={mini} (verl "
                        "asserts it, trainer_separate_async.py:59; +async=separate sets the mini-batch to the batch: "
                        "with parameter_sync_step k set it to the batch / k)")
    if ((v1.get("sampler") or {}).get("custom_sampler") or {}).get("path"):
        problems.append("trainer.v1.sampler.custom_sampler (the trainer's own buffer reports which prompt groups "
                        "each sample trains and evicts)")
    if mode in ASYNC_MODES.values():
        problems += async_problems(config)
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


# components with no rule for stale evidence (their stale_evidence is None): why, and the nearest setting that works
ASYNC_REFUSED = {
    ("selector", "ads"): "ADS draws whole mini-clusters per step (§3.2) and cannot refill k prompts or skip tasks in "
                         "flight; nearest: selector=bots or selector=progress",
    ("selector", "dots"): "DOTS predicts from the reference set of the batch it selected, which asynchronous training "
                          "trains steps later and in parts; nearest: selector=bots_dots (BOTS with ρ = 1, the "
                          "posterior mean)",
}


def _components(config) -> list[tuple[str, str, type | None]]:
    """``(axis, name, class)`` of every configured component, the prefilters among the rollout filters; a user's
    (``name=custom``) loaded to read its class attributes, an unknown name None."""
    from verl_ext.axes import REGISTRY, component_class

    sections = [("selector", config.selector), ("allocator", config.allocator),
                ("rollout_filter", config.rollout_filter)]
    sections += [("rollout_filter", f) for f in (config.data_selection.get("prefilters") or [])]
    return [(axis, section["name"], component_class(axis, section) if section["name"] == "custom"
             else REGISTRY[axis].get(section["name"], (None, None))[1]) for axis, section in sections]


def async_problems(config) -> list[str]:
    """What an asynchronous mode cannot run: a component that states no rule for stale evidence (``ASYNC_REFUSED``
    says why), measurement rollouts (a selector's reference set rolled out before it selects)."""
    problems = []
    for axis, name, component in _components(config):
        if component is not None and component.stale_evidence is None:
            reason = ASYNC_REFUSED.get((axis, name), "it states no rule for evidence older than the policy")
            problems.append(f"{axis}={name} in trainer.v1.trainer_mode={config.trainer.v1.trainer_mode}: {reason}")
    return problems


def local_update_problems(config, sync_step: int) -> list[str]:
    """What several actor updates per weight sync cannot run: a replaying rollout filter. Its buffer would replay rows
    of the sync's earlier updates, scored against the current weights while verl scores the fresh rows against the
    sync's (``trainer_separate_async.py:187-211``) [decision: refused until a replay buffer states a rule per local
    update]."""
    return [f"rollout_filter={name} with parameter_sync_step={sync_step}: a replaying filter would replay rows of the "
            "sync's earlier updates against other weights than its fresh rows'; nearest: parameter_sync_step=1, or a "
            "filter that does not replay (cbs_star for cbs)"
            for axis, name, component in _components(config)
            if axis == "rollout_filter" and component is not None and component.replays]


def attention_problems(config) -> list[str]:
    """The actor's (and reference's, which copies the actor's model config) attention backend against its Ulysses
    sequence-parallel size (:func:`verl_ext.models.attention.config_problems`)."""
    from verl_ext.models.attention import actor_backend, config_problems

    backend = actor_backend(config)
    problems = []
    for role in ("actor", "ref"):
        section = config.actor_rollout_ref[role]
        sp = max(int(section.get("ulysses_sequence_parallel_size") or 1),
                 int((section.get("fsdp_config") or {}).get("ulysses_sequence_parallel_size") or 1))
        problems += [f"actor_rollout_ref.{role}: {p}" for p in config_problems(backend, ulysses_sequence_parallel_size=sp)]
    return problems


def prompts_in_flight(config) -> int:
    """The most prompts an asynchronous mode keeps in flight: verl's warm-up window
    (``trainer.v1.<mode>.num_warmup_batches`` x ``data.train_batch_size``, floored to whole ``data.gen_batch_size``
    chunks, TB:636-638), plus the step's batch that ``prepare_step`` submits before it samples (TB:1525); a refill
    replaces groups already gone. 0 in the synchronous mode."""
    mode = verl_mode(config.trainer.v1.trainer_mode)
    if mode == "sync":
        return 0
    batch = int(config.data.train_batch_size)
    chunk = int(config.data.get("gen_batch_size") or batch)
    return batch + max(0, math.floor(_warmup_batches(config, mode) * batch / chunk)) * chunk


def _warmup_batches(config, mode: str) -> float:
    return float((config.trainer.v1.get(mode) or {}).get("num_warmup_batches", 0) or 0)


def check_pool_size(config, tasks: int) -> None:
    """In the asynchronous modes the selector never chooses a task still in flight, so the pool must hold
    :func:`prompts_in_flight` tasks; with fewer, the first step would find too few to choose from. Run when the
    trainer has read the pool, before the workers start."""
    need = prompts_in_flight(config)
    if tasks < need:
        mode = verl_mode(config.trainer.v1.trainer_mode)
        raise ValueError(
            f"the training pool has {tasks} tasks, but trainer.v1.trainer_mode={config.trainer.v1.trainer_mode} keeps "
            f"up to {need} prompts in flight (data.train_batch_size={config.data.train_batch_size} plus the warm-up "
            f"window of trainer.v1.{mode}.num_warmup_batches={_warmup_batches(config, mode):g} batches) "
            "and never chooses a task twice at once: use more tasks, a smaller batch or fewer warm-up batches")


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
