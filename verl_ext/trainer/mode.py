"""Trainer modes ``verl_ext`` (verl 0.9.1's synchronous v1 trainer), ``verl_ext_colocate_async`` and
``verl_ext_separate_async`` (verl's asynchronous ones) with the three data-selection axes.

Only small methods of verl's trainers are overridden (``trainer/ppo/v1/trainer_base.py``, TB), once for all three
modes (:class:`DataSelectionMixin`):

=====================================  ==================================================================
``_build_replay_buffer``               verl's buffer for verl's mode (TB compares the mode with ``"sync"``),
                                       reporting each sample's groups and each eviction
                                       (:mod:`verl_ext.trainer.buffers`)
``_init_dataloader``                   builds the task pool (``extra_info``) and the three components;
                                       ``data_selection.val_n``: validation samples per prompt by data source;
                                       training rows capped at ``data.max_response_length`` when the rollout
                                       serves longer validation (:mod:`verl_ext.trainer.generation_length`)
``_next_train_batch``                  every submitted prompt: the step's batch, and in the async modes verl's
                                       warm-up batches and refills of k prompts (a budget scaled to k); tasks
                                       in flight (:mod:`verl_ext.trainer.inflight`) are not chosen again. Sync:
                                       the selector's measurement-only tasks rolled out and scored first
                                       (:mod:`verl_ext.trainer.measurement`), then selector -> stable indices (at
                                       most ``data.train_batch_size``; fewer scale the step's rollout budget),
                                       allocator -> per-prompt ``__rollout_n__``
``_step_once``                         waits for the prompts this step submitted (verl: ``train_batch_size``)
``_balance_batch`` /                   pad to the mini-batch plan of the real rollouts (micro-batch
``_get_required_batch_multiple``       multiples per rank, padding spread; :mod:`verl_ext.trainer.batching`)
``_compute_advantage``                 the step's data selection, after verl's advantages: the rollouts read
                                       (``_read_rollouts``), ``update`` of selector and allocator, rollout
                                       filter ``select`` (a replaying filter: stored rollouts re-inserted
                                       under fresh keys, this step's kept in the replay store),
                                       ``data_selection/*`` metrics (``_learn_and_filter``)
``_update_critic`` / ``_update_actor`` the filtered and replayed rollouts only (none: the actor update is
                                       skipped), mini-batches of the plan, per-sample clip fraction /
                                       entropy -> ``filter.observe_update``; before it, one no-grad pass
                                       recomputes the replayed rows' old log-probs (``decoupled``
                                       correction) and/or their entropy (a filter that needs it, with an
                                       update that computes none)
``_save_checkpoint`` / ``_load_checkpoint``  component state in ``global_step_N/data_selection.pt``, the
                                       replay store in ``global_step_N/replay_store.pt``
``on_init_end``                        installs the per-sample loss; per-run metrics file
``_compute_metrics``                   writes the per-step record (``data_selection.dump_steps``)
=====================================  ==================================================================

The filter cuts the batch at the actor update: verl computes old log-probs, advantages (grouped by
``uid``, so unequal group sizes are fine), the critic update and the logged metrics on every
rollout of the step; the actor learns from the kept ones plus the replayed ones
(:mod:`verl_ext.trainer.replay`), which keep their generation-time advantages and either their stored
old log-probs (``replay_correction="stored"``) or the current policy's with the weight π_old / μ
(``"decoupled"``), and are cleared from TransferQueue right after the update.

Asynchronous modes: a trained group is looked up in the in-flight ledger (task, submit step, rollouts) and reaches the
selector and allocator with its age (``StepResults.submit_step`` / ``weight_version``; each component's
``stale_evidence`` rule); a group verl evicts (stale beyond ``trainer.v1.sampler.max_off_policy_threshold``, or failed)
leaves the ledger as no observation (``_on_evicted``), its share per task difficulty logged under
``data_selection/async/``; stored rollouts a replaying filter could replay beyond that threshold expire first
(``ReplayStore.expired`` -> ``RolloutFilter.expire``). Not supported (refused before Ray starts,
:func:`verl_ext.trainer.startup_checks.check_supported`): ``parameter_sync_step > 1`` outside separate_async, sync
refills, DAPO ``algorithm.filter_groups`` (use a rollout filter), a custom sampler, distillation, a critic whose
``ppo_mini_batch_size`` differs from the actor's; in the async modes, components without a stale-evidence rule.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
import transfer_queue as tq
from tensordict import TensorDict
from transfer_queue import KVBatchMeta

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.dataset.rl_dataset import collate_fn
from verl.utils.debug import marked_timer

from verl_ext.axes import RolloutView, StepResults
from verl_ext.axes.base import step_budget
from verl_ext.axes.views import rollout_ids
from verl_ext.trainer import per_sample, records
from verl_ext.trainer.batching import (
    MiniBatchPlan, fixed_micro_batch_size, mini_batch_tokens, plan_mini_batches, real_rows_per_row, spread_padding,
)
from verl_ext.trainer.buffers import reporting
from verl_ext.trainer.build_axes import build_axes, rollout_budget, task_pool
from verl_ext.trainer.generation_length import training_cap, with_generation_cap
from verl_ext.trainer.inflight import EvictionBias, InFlightLedger
from verl_ext.trainer.measurement import measurement_metrics, measurement_rollouts
from verl_ext.trainer.replay import (
    ReplayStore, Replayed, recompute_replayed, remeasures_entropy, sync_replay, zero_trainer_fields,
)
from verl_ext.trainer.startup_checks import ASYNC_MODES, TRAINER_MODE, check_pool_size, check_supported
from verl_ext.trainer.step_metrics import selection_metrics
from verl_ext.trainer.tq_rows import as_list, rollout_rewards, token_mean

logger = logging.getLogger(__name__)

ASYNC_PREFIX = "data_selection/async/"


@dataclass
class _Step:
    """What the trainer learns about the current step, from selection to the actor update."""

    tasks: np.ndarray  # per trained group (prompt), in submission order
    counts: np.ndarray  # its allocated rollouts
    uids: list[str] = field(default_factory=list)  # its prompt uid
    submit_step: np.ndarray | None = None  # the step it was submitted at
    measurement: StepResults | None = None  # the selector's measurement-only rollouts, scored before selecting
    keys: list[str] = field(default_factory=list)  # real rollouts, RolloutView order
    view: RolloutView | None = None
    old_log_prob: np.ndarray | None = None  # per rollout, mean over response tokens
    rollout_log_prob: np.ndarray | None = None  # per rollout, the rollout engine's, mean over response tokens
    format_valid: np.ndarray | None = None  # per rollout, the reward's well-formed-answer flag (None: not reported)
    kept: np.ndarray | None = None
    replayed: Replayed = field(default_factory=Replayed)  # stored rollouts of earlier steps trained on here too
    clipfrac: np.ndarray | None = None
    entropy: np.ndarray | None = None
    plan: MiniBatchPlan | None = None  # of the actor update
    update_rows: int = 0  # rows the actor loss saw (padding included, summed over ppo_epochs)
    update: dict = field(default_factory=dict)  # per row the loss saw: position (-1: padding), divisor, tokens, ...
    results: StepResults | None = None  # what the selector and the allocator learn from

    @property
    def row_keys(self) -> list[str]:
        """Keys of the rows the actor may train on: this step's rollouts, then the replayed ones (the row
        position ``sample_pos`` of a replayed rollout ``j`` is ``len(keys) + j``)."""
        return self.keys + self.replayed.keys

    @property
    def row_ids(self) -> np.ndarray:
        return np.concatenate([self.view.rollout_id, self.replayed.ids])

    @property
    def row_lengths(self) -> np.ndarray:
        return np.concatenate([self.view.response_length, self.replayed.lengths])


def _cat(parts: list, name: str) -> np.ndarray | None:
    """The field ``name`` of ``parts`` joined (None where any part has None)."""
    values = [getattr(p, name) for p in parts]
    return None if any(v is None for v in values) else np.concatenate(values)


def _joined(parts: list, **fixed):
    """Dataclass instances of one class, their array fields joined (:func:`_cat`); ``fixed``: the fields taken as
    given."""
    return type(parts[0])(**{f.name: fixed[f.name] if f.name in fixed else _cat(parts, f.name)
                             for f in dataclasses.fields(parts[0])})


def merged_sync(steps: list[_Step]) -> _Step:
    """The local updates of one weight sync (``parameter_sync_step`` > 1: verl samples and updates the actor that many
    times per step, TB:549-556) as one step: groups and rollouts in update order, group ids and kept positions
    offset by the updates before. The actor-side records (plan, per-row update) stay per update."""
    if len(steps) == 1:
        return steps[0]
    views = [s.view for s in steps]
    rollouts = np.cumsum([0] + [len(v) for v in views])[:-1]
    groups = np.cumsum([0] + [int(v.group.max()) + 1 if len(v) else 0 for v in views])[:-1]
    view = _joined(views, max_response_length=views[0].max_response_length,
                   group=np.concatenate([v.group + g for v, g in zip(views, groups)]))
    return _Step(_cat(steps, "tasks"), _cat(steps, "counts"), [u for s in steps for u in s.uids],
                 _cat(steps, "submit_step"), keys=[k for s in steps for k in s.keys], view=view,
                 old_log_prob=_cat(steps, "old_log_prob"), rollout_log_prob=_cat(steps, "rollout_log_prob"),
                 format_valid=_cat(steps, "format_valid"),
                 kept=np.concatenate([s.kept + r for s, r in zip(steps, rollouts)]).astype(np.int64),
                 replayed=_joined([s.replayed for s in steps], keys=[k for s in steps for k in s.replayed.keys],
                                  tags=[t for s in steps for t in s.replayed.tags]),
                 results=_joined([s.results for s in steps]))


def _dump(step: _Step) -> dict:
    """The per-step record (``data_selection.dump_steps``, read by :func:`verl_ext.trainer.records.read_dumps`)."""
    return {**_rollouts_record(step), **_update_record(step)}


def _rollouts_record(step: _Step) -> dict:
    """What the step chose and generated."""
    v = step.view
    return {
        "tasks": step.tasks.tolist(), "counts": step.counts.tolist(), "submit_step": step.submit_step.tolist(),
        "rollout_task": v.task_index.tolist(), "rollout_group": v.group.tolist(),
        "rollout_reward": v.reward.tolist(), "rollout_advantage": v.advantage.tolist(),
        "rollout_format_valid": None if step.format_valid is None else step.format_valid.tolist(),
        "rollout_length": v.response_length.tolist(),
        "rollout_entropy": None if v.entropy is None else v.entropy.tolist(),
        "rollout_id": v.rollout_id.tolist(),
        "rollout_old_log_prob": None if step.old_log_prob is None else step.old_log_prob.tolist(),
        "rollout_log_prob": None if step.rollout_log_prob is None else step.rollout_log_prob.tolist(),
        "rollout_weight_version": None if step.results.weight_version is None  # oldest, newest
        else step.results.weight_version.tolist(),
        "max_response_length": v.max_response_length,
        "measurement": None if step.measurement is None else {  # scored before selecting, never trained on
            "rollout_task": step.measurement.task_index.tolist(),
            "rollout_reward": step.measurement.reward.tolist()},
    }


def _update_record(step: _Step) -> dict:
    """What the filter passed to an actor update and what the update did with it."""
    return {
        "kept": step.kept.tolist(),
        "replayed": step.replayed.ids.tolist(),  # rollout ids; row position len(rollout_task) + j
        "actor_mini_batches": None if step.plan is None else {
            "rows": step.plan.rows, "num": step.plan.num_mini_batches, "size": step.plan.mini_batch_size},
        "actor_update_rows": step.update_rows,
        "actor_update": step.update,
        "clipfrac": None if step.clipfrac is None else step.clipfrac.tolist(),
        "entropy": None if step.entropy is None else step.entropy.tolist(),
    }


def _format_flags(extra_fields, order: np.ndarray) -> np.ndarray | None:
    """Per rollout (in ``order``), the reward's well-formed-answer flag (:func:`verl_ext.rewards.format_valid`)
    from verl's ``extra_fields.reward_extra_info``; None unless every rollout reports one."""
    from verl_ext.rewards import format_valid

    flags = []
    for value in as_list(extra_fields):
        fields = getattr(value, "data", value)
        info = fields.get("reward_extra_info", {}) if isinstance(fields, dict) else {}
        flags.append(format_valid(info))
    if not flags or any(f is None for f in flags):
        return None
    return np.array(flags, dtype=bool)[order]


def with_validation_n(dataframe, val_n: dict[str, int], default: int):
    """The validation rows (a ``datasets.Dataset``) with verl's per-prompt sample count ``__rollout_n__``:
    ``val_n[data_source]``, ``default`` (``val_kwargs.n``) for the sources it does not name. verl 0.9.1 validates
    with one n unless the batch carries this column (TB:1055-1057; ``agent_loop_tq.py:115`` pops it per prompt)."""
    sources = list(dataframe["data_source"])
    unknown = sorted(set(val_n) - set(sources))
    if unknown:
        raise ValueError(f"data_selection.val_n names data sources {unknown} that no validation file has; "
                         f"theirs: {sorted(set(sources))}")
    bad = {k: v for k, v in val_n.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ValueError(f"data_selection.val_n: samples per prompt must be integers >= 1, got {bad}")
    return dataframe.add_column("__rollout_n__", [val_n.get(s, default) for s in sources])


class DataSelectionMixin:
    """The overrides (module docstring), over one of verl's v1 trainers (``VERL_MODE``)."""

    VERL_MODE = "sync"

    def __init__(self, config):
        check_supported(config)  # verl_ext.main ran it before Ray; here for verl's own entry point too
        self.ledger = InFlightLedger()  # every submitted prompt until trained or evicted
        self.eviction_bias = EvictionBias()
        self._chosen = 0  # prompts chosen by the step's own _next_train_batch (a selector may choose fewer)
        self._refills = 0  # choices of the step beyond its own batch (refills of evicted groups, async modes)
        self._measurement: StepResults | None = None
        self.timing_raw: dict = {}  # verl's fit() makes one per step; the async warm-up chooses prompts before it
        super().__init__(config)
        self._step: _Step | None = None
        self._sync: list[_Step] = []  # the step's local updates so far (parameter_sync_step of them, TB:549)
        self._expired = 0  # stored rollouts expired in them
        self._plan: MiniBatchPlan | None = None
        self._dp_size = 1
        self._micro = fixed_micro_batch_size(config, self.use_reference_policy, self.use_critic)
        self._rows_to_balance = 0
        self.replay_store = ReplayStore()

    # ------------------------------------------------------------------ setup
    def _build_replay_buffer(self):
        # verl compares the mode name with "sync" (TB:153 buffer class, 731 refill, 902/912/1004 TQ checkpoints, 1499
        # prompt payloads) and reads trainer.v1.<mode> (TB:130); TB:129 just read our name: report verl's from here on
        self.trainer_mode = self.VERL_MODE
        self.parameter_sync_step = self.config.trainer.v1.get(self.trainer_mode, {}).get("parameter_sync_step", 1)
        buffer = reporting(super()._build_replay_buffer(), self._on_evicted, self.ledger.submission_rank)
        buffer.poll_interval = float(self.config.data_selection.get("sample_poll_interval", buffer.poll_interval))
        return buffer

    def _init_dataloader(self):
        super()._init_dataloader()
        self.task_pool = task_pool(list(self.train_dataset.dataframe["extra_info"]))
        check_pool_size(self.config, len(self.task_pool))
        self.axes = build_axes(self.config, self.task_pool)
        self.rollout_budget = rollout_budget(self.config)
        column = self.config.data_selection.get("difficulty_column")
        if column and column in self.task_pool.columns:
            self.eviction_bias.reference = dict(zip(self.task_pool.index.tolist(),
                                                    np.asarray(self.task_pool.column(column), dtype=float).tolist()))
        self.run_dir = os.path.abspath(self.config.trainer.default_local_dir)
        cap = training_cap(self.config)
        if cap is not None:  # validation generates to the rollout's (longer) length
            self.train_dataset.dataframe = with_generation_cap(self.train_dataset.dataframe, cap)
        val_n = self.config.data_selection.get("val_n") or {}
        if val_n:
            self.val_dataset.dataframe = with_validation_n(
                self.val_dataset.dataframe, dict(val_n), int(self.config.actor_rollout_ref.rollout.val_kwargs.n))

    def on_init_end(self):
        actor_config = omega_conf_to_dataclass(self.config.actor_rollout_ref.actor)
        self.actor_rollout_wg.set_loss_fn(partial(per_sample.per_sample_ppo_loss, config=actor_config))
        path = records.metrics_path(self.run_dir, self.global_steps)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.environ["VERL_FILE_LOGGER_PATH"] = str(path)  # read by verl's FileLogger when fit() starts
        super().on_init_end()

    # ------------------------------------------------------------------ before generation
    def _next_train_batch(self, num_prompts: int | None = None):
        """Every prompt submitted for generation: the step's batch (``num_prompts`` None) and, in the async modes,
        verl's warm-up batches and refills of evicted groups; tasks in flight are not chosen again."""
        size = int(self.config.data.train_batch_size)
        step_batch = num_prompts is None
        wanted = size if step_batch else int(num_prompts)
        if self.trainer_mode == "sync" and wanted != size:
            raise RuntimeError(f"{TRAINER_MODE}: refilling {num_prompts} prompts is not supported")
        step = self.global_steps
        measurement = None
        if self.trainer_mode == "sync":
            measured = np.asarray(self.axes.selector.measurement(step), dtype=np.int64)
            if len(measured):  # rolled out, scored and dropped before the selection (DOTS's reference set)
                with marked_timer("measurement", self.timing_raw):
                    measurement = measurement_rollouts(self, measured, int(self.config.actor_rollout_ref.rollout.n))
                self.axes.selector.measure(step, measurement)
        # in flight, or trained by this sync's earlier local updates and not yet learned from (at its last update)
        pending = [s.tasks for s in self._sync]
        if len(self.ledger):
            pending.append(self.ledger.tasks())
        in_flight = np.unique(np.concatenate(pending)) if pending else None
        with marked_timer("selector", self.timing_raw):
            tasks = np.asarray(self.axes.selector.select(step, wanted, exclude=in_flight), dtype=np.int64)
        allowed = (1, size) if self.trainer_mode == "sync" else (wanted, wanted)  # verl refills exactly k (TB:1514)
        if not allowed[0] <= len(tasks) <= allowed[1]:
            raise RuntimeError(f"step {step}: the selector chose {len(tasks)} tasks; {allowed[0]} to {allowed[1]} "
                               "are allowed")
        budget = step_budget(self.rollout_budget, len(tasks), size)
        with marked_timer("allocator", self.timing_raw):
            counts = np.asarray(self.axes.allocator.allocate(step, tasks, budget), dtype=np.int64)
        if len(counts) != len(tasks) or counts.sum() != budget or counts.min() < 1:
            raise RuntimeError(f"step {step}: counts {counts.tolist()} for {len(tasks)} tasks and a budget of "
                               f"{budget} rollouts")
        batch_dict = collate_fn([self.train_dataset[int(p)] for p in self.task_pool.positions(tasks)])
        batch_dict["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(tasks))], dtype=object)
        batch_dict["__rollout_n__"] = [int(c) for c in counts]  # AgentLoopWorkerTQ._run_prompt pops it
        batch = tu.get_tensordict(batch_dict)
        tu.assign_non_tensor_data(batch, "global_steps", step)
        self.ledger.submit(batch_dict["uid"], tasks, counts, step)
        self.eviction_bias.on_submit(tasks)
        if step_batch:
            self._chosen, self._measurement = len(tasks), measurement
        else:
            self._refills += 1  # the warm-up's calls come before prepare_step resets it
        return batch

    def prepare_step(self):
        self._refills, self._sync, self._expired = 0, [], 0
        return super().prepare_step()

    def _reissue_inflight_prompts(self, partition_id: str = "train") -> int:
        """On a resume verl restarts the prompts that were generating at the save, tagged with the resumed step
        (TB:910-946); the ledger re-stamps them with it (:meth:`InFlightLedger.reissue`), as verl's tags and dumps
        do, so the threshold counts from the restart (their lag comes from the weights that generate them)."""
        uids = []
        if self.trainer_mode != "sync":  # verl's own choice of what to restart (TB:918-922)
            tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
            uids = [k for k, t in tags.items() if t.get("is_prompt", False) and t.get("status") in ("pending", "running")]
        reissued = super()._reissue_inflight_prompts(partition_id)
        if reissued != len(uids):
            raise RuntimeError(f"step {self.global_steps}: verl re-issued {reissued} prompts, {len(uids)} were in flight")
        if uids:
            self.ledger.reissue(uids, self.global_steps)
        return reissued

    def _step_once(self, metrics, timing_raw, sample_batch_size):
        if self.trainer_mode == "sync":  # TB:539 waits for data.train_batch_size groups; a selector may choose fewer (ADS)
            sample_batch_size = self._chosen
        return super()._step_once(metrics, timing_raw, sample_batch_size)

    def _on_evicted(self, reasons: dict[str, set[str]]) -> None:
        """Groups verl's buffer evicted (stale beyond ``max_off_policy_threshold``, or failed) before refilling: no
        observation for the selector or the allocator; their tasks leave the ledger, so they may be chosen again."""
        for reason, uids in reasons.items():
            if uids:
                gone = self.ledger.resolve(sorted(uids), self.global_steps)
                self.eviction_bias.on_evict(reason, gone.task)

    # ------------------------------------------------------------------ batch accounting
    def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        self._rows_to_balance = sum(not t.get("is_padding", False) for t in batch.tags)
        batch = super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
        if self._plan.num_mini_batches > 1:
            is_padding = np.array([t.get("is_padding", False) for t in batch.tags], dtype=bool)
            batch.reorder(spread_padding(is_padding, self._plan.mini_batch_size, self._dp_size).tolist())
        return batch

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        config = self.config.actor_rollout_ref
        target = int(config.actor.ppo_mini_batch_size) * int(config.rollout.n)
        self._plan = plan_mini_batches(self._rows_to_balance, target, dp_size, self._micro)
        self._dp_size = dp_size
        return self._plan.padded_size

    @contextmanager
    def _mini_batches(self, worker_group, method: str, on_metrics=None):
        """Call ``worker_group.<method>`` with the plan's mini-batch size; ``on_metrics`` sees the output."""
        original, size = getattr(worker_group, method), self._plan.mini_batch_size

        def call(batch):
            batch.extra_info.update(global_batch_size=size, mini_batch_size=size)
            out = original(batch)
            if on_metrics is not None:
                on_metrics(out["metrics"])
            return out

        # TB:1806-1818 / 1829-1860 set the mini-batch size to ppo_mini_batch_size * rollout.n and call the worker group
        # at once, with no hook between: the call itself is swapped for the duration of verl's update.
        setattr(worker_group, method, call)
        try:
            yield
        finally:
            setattr(worker_group, method, original)

    # ------------------------------------------------------------------ after reward
    def _compute_advantage(self, batch, metrics):
        # the step's data selection runs here: verl's last pass over every scored rollout before the updates (TB:1743)
        batch = super()._compute_advantage(batch, metrics)
        results = self._read_rollouts(batch)
        self._learn_and_filter(batch, results, metrics)
        return batch

    def _read_rollouts(self, batch: KVBatchMeta) -> StepResults:
        """The step's scored rollouts (padding left out) in canonical order: ``RolloutView`` and per-rollout records
        into ``self._step``, the selector's and allocator's ``StepResults`` returned."""
        sampled = self.ledger.resolve(self.replay_buffer.sampled, self.global_steps)  # the groups this sample took
        by_order = np.argsort(sampled.order, kind="stable")
        step = self._step = _Step(sampled.task[by_order], sampled.n[by_order], [sampled.uid[i] for i in by_order],
                                  sampled.step[by_order], measurement=self._measurement)
        self._measurement = None
        numbered = sum(len(s.keys) for s in self._sync)  # by the step's earlier local updates
        self._sync.append(step)
        if len(self._sync) > self.parameter_sync_step:
            raise RuntimeError(f"step {self.global_steps}: local update {len(self._sync)} of a weight sync of "
                               f"{self.parameter_sync_step}")
        real = [(k, t) for k, t in zip(batch.keys, batch.tags) if not t.get("is_padding", False)]
        keys = [k for k, _ in real]
        token_fields = ["rm_scores", "advantages", "response_mask"] + [
            f for f in ("old_log_probs", "entropy", "rollout_log_probs") if f in (batch.fields or ())]
        extra = ["extra_fields"] if "extra_fields" in (batch.fields or ()) else []
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id,
                               select_fields=["index", "responses", *token_fields, *extra])
        order = self._canonical_order(keys, data["responses"])
        step.keys = [keys[i] for i in order]
        index = np.array(as_list(data["index"]), dtype=np.int64)[order]
        valid = _format_flags(data["extra_fields"], order) if extra else None
        dense = data.select(*token_fields).to_padded_tensor()[torch.from_numpy(order)]
        mask = dense["response_mask"].float()
        length = mask.sum(-1)
        reward = rollout_rewards(dense["rm_scores"])
        advantage = token_mean(dense["advantages"], mask)
        group = np.unique([k.rsplit("_", 2)[0] for k in step.keys], return_inverse=True)[1]
        results = StepResults.from_rewards(index, reward)
        submit_of = dict(zip(step.uids, step.submit_step.tolist()))
        tag_of = dict(real)
        versions = [(tag_of[k].get("min_global_steps"), tag_of[k].get("max_global_steps")) for k in step.keys]
        results = StepResults(results.task_index, results.reward, results.success, valid,
                              np.array([submit_of[k.rsplit("_", 2)[0]] for k in step.keys], dtype=np.int64),
                              None if any(v is None for pair in versions for v in pair)
                              else np.array(versions, dtype=np.int64).reshape(len(keys), 2))
        lag = results.lag(self.global_steps)
        if self.trainer_mode == "sync" and lag.any():
            raise RuntimeError(f"step {self.global_steps}: synchronous rollouts from weights {int(lag.max())} "
                               "updates old")
        stats = results.per_task()
        self.eviction_bias.on_trained(stats.index, stats.pass_rate)
        step.format_valid = valid
        entropy = token_mean(dense["entropy"], mask) if "entropy" in token_fields else None
        if "old_log_probs" in token_fields:
            step.old_log_prob = token_mean(dense["old_log_probs"], mask)
        if "rollout_log_probs" in token_fields:
            step.rollout_log_prob = token_mean(dense["rollout_log_probs"], mask)
        step.view = RolloutView(index, group.astype(np.int64), reward, advantage, length.numpy().astype(np.int64),
                                entropy, int(self.config.data.max_response_length),
                                rollout_ids(self.global_steps, len(step.keys), numbered), lag)
        step.results = results
        return results

    def _learn_and_filter(self, batch: KVBatchMeta, results: StepResults, metrics: dict) -> None:
        """The rollout filter picks the rows of this actor update (a replaying one also the stored rollouts that train
        again). Selector and allocator learn once per step, as they choose once per step: at its last local update
        (one but with ``parameter_sync_step`` > 1), from the results of all of them; then ``data_selection/*``
        metrics of the step."""
        step, last = self._step, len(self._sync) == self.parameter_sync_step
        if last:
            learned = _joined([s.results for s in self._sync]) if len(self._sync) > 1 else results
            with marked_timer("selector", self.timing_raw):
                self.axes.selector.update(self.global_steps, learned)
            with marked_timer("allocator", self.timing_raw):
                self.axes.allocator.update(self.global_steps, learned)
        threshold = self.config.trainer.v1.sampler.get("max_off_policy_threshold")
        if self.axes.rollout_filter.replays and self.trainer_mode != "sync" and threshold is not None:
            expired = self.replay_store.expired(self.global_steps, int(threshold))
            self.axes.rollout_filter.expire(self.global_steps, expired)
            self._expired += len(expired)
        with marked_timer("rollout_filter", self.timing_raw):
            kept = np.asarray(self.axes.rollout_filter.filter_step(self.global_steps, step.view), dtype=np.int64)
        if len(kept) and (len(np.unique(kept)) != len(kept) or kept.min() < 0 or kept.max() >= len(step.keys)):
            raise RuntimeError(f"rollout filter returned positions {kept.tolist()} for {len(step.keys)} rollouts")
        step.kept = np.sort(kept)
        if self.axes.rollout_filter.replays:
            with marked_timer("replay_store", self.timing_raw):
                step.replayed = sync_replay(self.replay_store, self.axes.rollout_filter, batch, step.keys,
                                            step.view.rollout_id)
        metrics["data_selection/actor_update_skipped"] = float(len(kept) + len(step.replayed.ids) == 0)
        if not last:  # verl averages a metric over the local updates that report it (v1/utils.py MetricsAggregator)
            return
        sync = merged_sync(self._sync)
        if self.axes.rollout_filter.replays:
            metrics["data_selection/replay/stored"] = float(len(self.replay_store))
            metrics["data_selection/replay/replayed"] = float(len(sync.replayed.ids))
            if self.trainer_mode != "sync" and threshold is not None:
                metrics["data_selection/replay/expired"] = float(self._expired)
        if step.measurement is not None:
            metrics.update(measurement_metrics(step.measurement))
        metrics.update(selection_metrics(sync.results, sync.view, sync.counts, sync.kept, {
            "selector": self.axes.selector.metrics(), "allocator": self.axes.allocator.metrics(),
            "rollout_filter": self.axes.rollout_filter.metrics()}))
        if self.trainer_mode != "sync":
            lag = sync.results.lag(self.global_steps)
            metrics.update({ASYNC_PREFIX + "lag_mean": float(lag.mean()), ASYNC_PREFIX + "lag_max": float(lag.max()),
                            ASYNC_PREFIX + "submit_age_mean": float(np.mean(self.global_steps
                                                                            - sync.results.submit_step)),
                            ASYNC_PREFIX + "in_flight": float(len(self.ledger)),
                            ASYNC_PREFIX + "refills": float(self._refills),
                            **self.eviction_bias.metrics(ASYNC_PREFIX)})

    def _canonical_order(self, keys: list[str], responses: torch.Tensor) -> np.ndarray:
        """The order of ``keys`` by prompt (in submission order: a step's selection order), then by response tokens:
        positions, hence rollout ids and every filter decision, depend neither on the order in which generations
        finished nor on which sample slot a response landed in (a seeded rollout reproduces a prompt's responses, not
        their slots)."""
        task_of = {u: i for i, u in enumerate(self._step.uids)}
        tokens = [r.numpy().tobytes() for r in (responses.unbind() if responses.is_nested else responses)]
        rank = sorted(range(len(keys)), key=lambda i: (task_of[keys[i].rsplit("_", 2)[0]], tokens[i], keys[i]))
        return np.array(rank, dtype=np.int64)

    # ------------------------------------------------------------------ updates
    def _update_critic(self, batch, metrics):
        with self._mini_batches(self.critic_wg, "train_mini_batch"):
            return super()._update_critic(batch, metrics)

    def _update_actor(self, batch, metrics):
        step = self._step
        rows = np.concatenate([step.kept, len(step.keys) + np.arange(len(step.replayed.keys))]).astype(np.int64)
        if len(rows) == 0:  # the filter kept nothing: no update rather than one on rollouts it rejected
            step.clipfrac = step.entropy = np.zeros(0)
            self.axes.rollout_filter.observe_update(self.global_steps, np.zeros(0, dtype=np.int64), step.entropy,
                                                    step.clipfrac)
            return batch
        try:
            return self._update_actor_rows(batch, metrics, rows)
        finally:
            if step.replayed.keys:
                tq.kv_clear(keys=step.replayed.keys, partition_id=batch.partition_id)

    def _update_actor_rows(self, batch, metrics, rows: np.ndarray):
        step = self._step
        train, extra_keys, extra_tags = batch, [], []
        replayed = step.replayed.keys
        if len(rows) < len(step.keys) or replayed:
            kept = batch.select_keys([step.keys[i] for i in step.kept])
            kept = KVBatchMeta(keys=kept.keys + replayed, tags=kept.tags + step.replayed.tags,
                               partition_id=batch.partition_id, fields=batch.fields, extra_info=batch.extra_info)
            train = self._balance_batch(kept, metrics={})
            known = set(step.row_keys)
            extra = [(k, t) for k, t in zip(train.keys, train.tags) if k not in known]
            extra_keys, extra_tags = [k for k, _ in extra], [t for _, t in extra]
            zero_trainer_fields(train, extra_keys)
            decouple = self.axes.rollout_filter.replay_correction == "decoupled"
            entropy = remeasures_entropy(self.axes.rollout_filter, self.config.actor_rollout_ref.actor, batch.fields)
            if replayed and (decouple or entropy):
                with marked_timer("replay_correction" if decouple else "replay_entropy", self.timing_raw):
                    metrics.update(recompute_replayed(
                        self.actor_rollout_wg, train, replayed, decouple=decouple, entropy=entropy,
                        dp_size=self._dp_size, temperature=self.config.actor_rollout_ref.rollout.temperature))
        train = self._tag_rows(train)
        step.plan = self._plan

        stats: dict = {}
        collect = lambda m: stats.update(per_sample.pop_per_sample(m))  # noqa: E731
        with self._mini_batches(self.actor_rollout_wg, "update_actor", collect):
            super()._update_actor(train, metrics)

        step.update_rows = len(stats.get(per_sample.POS, []))
        step.update = {k.split("/")[-1]: stats[k] for k in (
            per_sample.POS, per_sample.DIVISOR, per_sample.MB_TOKENS, per_sample.LOG_PROB, per_sample.OLD_LOG_PROB,
            per_sample.RATIO, per_sample.CLIPFRAC) if k in stats}
        self._check_layout(train, stats)
        step.clipfrac, step.entropy = per_sample.per_position(stats, rows)
        if step.entropy is None and "entropy" in (batch.fields or ()):
            # the update computed no entropy (entropy_coeff 0): the old-log-prob pass's (replays: re-measured above
            # when the filter needs entropy, else stored); neither runs in rollout-correction bypass mode with
            # entropy_coeff 0 (RLOO): None
            step.entropy = self._old_entropy(batch.partition_id, [step.row_keys[i] for i in rows])
        with marked_timer("rollout_filter", self.timing_raw):
            self.axes.rollout_filter.observe_update(self.global_steps, step.row_ids[rows], step.entropy, step.clipfrac)
        if not extra_keys:
            return batch
        return KVBatchMeta(keys=batch.keys + extra_keys, tags=batch.tags + extra_tags, partition_id=batch.partition_id,
                           fields=batch.fields, extra_info=batch.extra_info)

    def _tag_rows(self, batch: KVBatchMeta) -> KVBatchMeta:
        """Write ``sample_pos`` (RolloutView position, -1 for padding) and ``mb_real_rows`` per row."""
        pos_of = {k: i for i, k in enumerate(self._step.row_keys)}
        sample_pos = torch.tensor([pos_of.get(k, -1) for k in batch.keys], dtype=torch.int64)
        fields = {per_sample.SAMPLE_POS: sample_pos}
        is_padding = (sample_pos < 0).numpy()
        actor = self.config.actor_rollout_ref.actor
        if not actor.shuffle:
            fields[per_sample.MB_REAL_ROWS] = torch.from_numpy(
                real_rows_per_row(is_padding, self._plan.mini_batch_size, self._dp_size))
        elif is_padding.any() and str(actor.loss_agg_mode).startswith("seq-mean"):
            raise ValueError("seq-mean-* losses with padded mini-batches need actor.shuffle=False "
                             "(the real rows per mini-batch must be known)")
        meta = tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict(fields, batch_size=len(batch)))
        batch.fields = meta.fields  # the workers fetch only the listed fields
        return batch

    def _check_layout(self, batch: KVBatchMeta, stats: dict) -> None:
        """Every trained row sat in the mini-batch the plan assigns it (verl's ``batch_num_tokens`` of
        the row's mini-batch equals the plan's count): the ``mb_real_rows`` divisors are then right."""
        if self.config.actor_rollout_ref.actor.shuffle or per_sample.MB_TOKENS not in stats:
            return
        pos_of = {k: i for i, k in enumerate(self._step.row_keys)}
        length = self._step.row_lengths
        tokens = np.array([length[pos_of[k]] if k in pos_of else 0 for k in batch.keys], dtype=np.int64)
        expected = mini_batch_tokens(tokens, self._plan.mini_batch_size, self._dp_size)
        reported = dict(zip(stats[per_sample.POS], stats[per_sample.MB_TOKENS]))
        wrong = [(k, reported.get(pos_of[k]), int(e)) for k, e in zip(batch.keys, expected)
                 if k in pos_of and reported.get(pos_of[k]) != e]
        if wrong:
            raise RuntimeError(f"step {self.global_steps}: verl split the actor batch differently from the "
                               f"mini-batch plan {self._plan} (dp={self._dp_size}); (key, verl's mini-batch tokens, "
                               f"planned) {wrong[:4]}")

    def _old_entropy(self, partition_id: str, keys: list[str]) -> np.ndarray:
        dense = tq.kv_batch_get(keys=keys, partition_id=partition_id,
                                select_fields=["entropy", "response_mask"]).to_padded_tensor()
        return token_mean(dense["entropy"], dense["response_mask"].float())

    # ------------------------------------------------------------------ records and state
    def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        if self.config.data_selection.get("dump_steps", True) and self._sync and self._sync[-1].view is not None:
            if len(self._sync) == 1:
                record = _dump(self._sync[0])
            else:  # the step's groups at the top level, the actor side per local update
                merged = merged_sync(self._sync)
                record = {**_rollouts_record(merged), "kept": merged.kept.tolist(),
                          "replayed": merged.replayed.ids.tolist(),
                          "actor_update_rows": sum(s.update_rows for s in self._sync),
                          "local_updates": [{"rollouts": len(s.keys), **_update_record(s)} for s in self._sync]}
            records.write_dump(self.run_dir, global_steps, record)

    def _save_checkpoint(self):
        # written first, so latest_checkpointed_iteration.txt never names a folder without it
        step_dir = os.path.join(self.run_dir, f"global_step_{self.global_steps}")
        if self.axes.rollout_filter.replays:
            os.makedirs(step_dir, exist_ok=True)
            self.replay_store.save(step_dir)
        records.save_state(step_dir, {"global_steps": self.global_steps, "axes": self.axes.state_dict(),
                                      "ledger": self.ledger.state_dict(), "eviction_bias": self.eviction_bias.state_dict()})
        super()._save_checkpoint()

    def _load_checkpoint(self):
        super()._load_checkpoint()
        if self.global_steps > 0:
            if self.config.trainer.resume_mode == "resume_path":
                step_dir = os.path.abspath(self.config.trainer.resume_from_path)
            else:
                step_dir = os.path.join(self.run_dir, f"global_step_{self.global_steps}")
            state = records.load_state(step_dir)
            self.axes.load_state_dict(state["axes"])
            if "ledger" in state:  # the prompts in flight at the save: verl re-issues them (TB:912), unchosen again
                self.ledger.load_state_dict(state["ledger"])
                self.eviction_bias.load_state_dict(state["eviction_bias"])
            if self.axes.rollout_filter.replays:
                self.replay_store.load(step_dir)
            logger.info("restored data-selection state of step %d from %s", state["global_steps"], step_dir)


@register_trainer(TRAINER_MODE)
class DataSelectionTrainer(DataSelectionMixin, PPOTrainerSync):
    """``trainer.v1.trainer_mode=verl_ext``: verl's synchronous trainer."""


@register_trainer(ASYNC_MODES["colocate_async"])
class DataSelectionColocateAsync(DataSelectionMixin, PPOTrainerColocateAsync):
    """``trainer.v1.trainer_mode=verl_ext_colocate_async``: verl's ``colocate_async`` (partial rollouts across weight
    updates, ``trainer.v1.colocate_async.num_warmup_batches`` batches generated ahead)."""

    VERL_MODE = "colocate_async"


@register_trainer(ASYNC_MODES["separate_async"])
class DataSelectionSeparateAsync(DataSelectionMixin, PPOTrainerSeparateAsync):
    """``trainer.v1.trainer_mode=verl_ext_separate_async``: verl's ``separate_async`` (a standalone rollout pool, weights
    synced through ``rollout.checkpoint_engine`` after every step; ``+async=separate``)."""

    VERL_MODE = "separate_async"

    def _setup(self):
        # verl 0.9.1 logs with logger.info(..., flush=True) when hybrid_engine=False (trainer_separate_async.py:181-185):
        # a TypeError at INFO level, so that module's logger stays at WARNING while verl sets up
        log = logging.getLogger(PPOTrainerSeparateAsync.__module__)
        level = log.level
        log.setLevel(max(level, logging.WARNING))
        try:
            super()._setup()
        finally:
            log.setLevel(level)
