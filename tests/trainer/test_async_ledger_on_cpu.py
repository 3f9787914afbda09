"""The three axes on verl 0.9.1's own asynchronous replay buffer, in process.

verl's ``ReplayBufferAsync`` (eviction of stale and failed groups, refills, oldest-first sampling) and verl's own
submission path (``prepare_step`` -> ``_add_batch_to_generate`` -> ``_submit_batch_to_rollout``, the warm-up batches,
``_add_prompts_to_generate`` refills, ``_reissue_inflight_prompts`` on resume) run unchanged against a dict-backed
stand-in for TransferQueue's kv API; a stand-in generator finishes prompts out of order (a harder task takes longer)
while the buffer polls. The trainer's own methods choose every prompt (``_next_train_batch``) and learn from what a
sample trained (``_read_rollouts`` -> ``_learn_and_filter``); only the workers (old log-probs, advantages, update) are
left out, as verl's ``fit`` would call them between the sample and the next step."""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import verl.trainer.ppo.v1.replay_buffer as verl_buffer
import verl.trainer.ppo.v1.trainer_base as verl_base
from verl.utils import tensordict_utils as tu

import verl_ext.trainer.mode as ours
import verl_ext.trainer.replay as replay
from verl_ext.axes import StepResults
from verl_ext.trainer.build_axes import build_axes, rollout_budget, task_pool
from verl_ext.trainer.inflight import BUCKETS
from verl_ext.trainer.startup_checks import check_pool_size, prompts_in_flight
from verl_ext.trainer.tq_rows import as_list

TASKS, BATCH, N, LENGTH = 24, 4, 3, 4


class FakeTQ:
    """TransferQueue's kv calls as verl and the trainer make them, over dicts: partition -> key -> (tags, row)."""

    def __init__(self, world: "World"):
        self.parts: dict[str, dict[str, tuple[dict, dict]]] = {}
        self.world = world

    def kv_list(self, partition_id=None):
        self.world.tick(self)  # generation goes on while the buffer polls
        parts = self.parts if partition_id is None else {partition_id: self.parts.get(partition_id, {})}
        return {p: {k: dict(tag) for k, (tag, _) in items.items()} for p, items in parts.items()}

    def kv_clear(self, keys, partition_id):
        for key in keys:
            self.parts.get(partition_id, {}).pop(key, None)

    def kv_batch_put(self, keys, partition_id, tags=None, fields=None):
        part = self.parts.setdefault(partition_id, {})
        columns = {} if fields is None else {name: as_list(fields.get(name)) if not isinstance(fields.get(name),
                                             torch.Tensor) else fields.get(name) for name in fields.keys()}
        for i, key in enumerate(keys):
            tag, row = part.get(key, ({}, {}))
            part[key] = ({**tag, **(tags[i] if tags is not None else {})},
                         {**row, **{name: col[i] for name, col in columns.items()}})

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        rows = [self.parts[partition_id][k][1] for k in keys]
        names = select_fields or list(rows[0])
        return tu.get_tensordict({name: torch.stack([r[name] for r in rows]) if isinstance(rows[0][name], torch.Tensor)
                                  else np.array([r[name] for r in rows], dtype=object) for name in names})


class World:
    """A rollout engine: a prompt of task t finishes ``duration[t]`` polls after its (re)submission, each rollout
    succeeding with probability ``p[t]`` (seeded by task, its submission step and the session: a rerun draws the same
    rewards); rollouts carry the weight versions they were generated with."""

    def __init__(self, seed: int, duration: np.ndarray, p: np.ndarray, submit_step):
        self.duration, self.p, self.submit_step, self.seed = duration, p, submit_step, seed
        self.version = 0  # weights the engine serves
        self.running: dict[str, tuple[int, int, int, int]] = {}  # uid -> (task, n, polls left, start version)
        self.generated: list[tuple[str, int, int]] = []  # (uid, task, n) per submission

    def generate_sequences(self, batch):
        for uid, n, index in zip(as_list(batch["uid"]), as_list(batch["__rollout_n__"]), as_list(batch["index"])):
            self.running[uid] = (int(index), int(n), int(self.duration[int(index)]), self.version)
            self.generated.append((uid, int(index), int(n)))

    def tick(self, tq: FakeTQ) -> None:
        for uid, (task, n, left, start) in list(self.running.items()):
            if left > 0:
                self.running[uid] = (task, n, left - 1, start)
                continue
            del self.running[uid]
            rng = np.random.default_rng([self.seed, task, self.submit_step(uid)])
            success = rng.random(n) < self.p[task]
            keys = [f"{uid}_{s}_0" for s in range(n)]
            tags = [{"seq_len": 8, "min_global_steps": start, "max_global_steps": self.version}] * n
            tokens = torch.from_numpy(rng.integers(0, 1000, size=(n, LENGTH)))
            reward = torch.zeros(n, LENGTH)
            reward[:, -1] = torch.from_numpy(success.astype(np.float32))
            rows = {"index": [task] * n, "responses": tokens, "rm_scores": reward,
                    "advantages": reward - reward.mean(0, keepdim=True), "response_mask": torch.ones(n, LENGTH)}
            tq.kv_batch_put(keys, "train", tags=tags, fields=tu.get_tensordict(
                {k: np.array(v, dtype=object) if isinstance(v, list) else v for k, v in rows.items()}))
            tq.kv_batch_put([uid], "train", tags=[{"status": "finished"}])


class Dataset:
    """Rows as verl's RLHFDataset returns them (only what the submission path reads)."""

    def __getitem__(self, position: int) -> dict:
        return {"input_ids": torch.tensor([position]), "index": position, "raw_prompt": f"task {position}"}


def _config(mode: str, threshold: int, warmup: float, selector: str, strategy: str = "drop",
            rollout_filter: dict | None = None, chunk: int = 1, sync: int = 1):
    return OmegaConf.create({
        "data": {"train_batch_size": BATCH, "gen_batch_size": chunk, "max_response_length": LENGTH, "seed": 1},
        "actor_rollout_ref": {"rollout": {"n": N}},
        "algorithm": {},
        "skip": {"rollout_tq": {"enable": False}},
        "trainer": {"v1": {"trainer_mode": mode, "sampler": {"max_off_policy_threshold": threshold,
                                                             "max_off_policy_strategy": strategy, "sampler_kwargs": {}},
                           "colocate_async": {"num_warmup_batches": warmup},
                           "separate_async": {"num_warmup_batches": warmup, "parameter_sync_step": sync}, "sync": {}}},
        "selector": {"name": selector}, "allocator": {"name": "coba"},
        "rollout_filter": rollout_filter or {"name": "drop_degenerate"},
        "data_selection": {"rollout_budget": BATCH * N, "prefilters": [], "sample_poll_interval": 0.2},
    })


class Run:
    """One trainer (``cls``: the sync or the colocate-async mode) driven through verl's step order."""

    def __init__(self, cls, config, monkeypatch, duration, p, world_seed=0):
        self.trainer = trainer = object.__new__(cls)
        pool = task_pool([{"index": i, "weak_pass_rate": 0.0, "strong_pass_rate": float(p[i])} for i in range(len(p))])
        # the attributes DataSelectionMixin.__init__ sets before verl's constructor runs
        trainer.config, trainer.global_steps = config, 0
        trainer.ledger, trainer.eviction_bias = ours.InFlightLedger(), ours.EvictionBias()
        trainer._chosen, trainer._measurement, trainer._step, trainer.timing_raw, trainer._refills = 0, None, None, {}, 0
        trainer._restored_tq_prompt_count = 0
        trainer._sync, trainer._expired = [], 0
        trainer.current_mode = None  # separate_async: not lending the trainer's GPUs to generation
        trainer.trainer_mode = config.trainer.v1.trainer_mode
        trainer.task_pool, trainer.axes, trainer.rollout_budget = pool, build_axes(config, pool), rollout_budget(config)
        trainer.train_dataset = Dataset()
        trainer.replay_store = replay.ReplayStore()  # set after verl's constructor
        trainer.eviction_bias.reference = dict(enumerate(p.tolist()))  # data_selection.difficulty_column
        trainer.replay_buffer = trainer._build_replay_buffer()
        assert trainer.replay_buffer.poll_interval == 0.2  # data_selection.sample_poll_interval, not verl's fixed 2 s
        trainer.replay_buffer.poll_interval = 0.0
        self.world = World(world_seed, duration, p, lambda uid: int(trainer.ledger.peek([uid], 0).step[0]))
        trainer.agent_loop_manager = self.world
        self.tq = FakeTQ(self.world)
        for module in (verl_buffer, verl_base, ours, replay):
            monkeypatch.setattr(module, "tq", self.tq)
        self.chosen: list[tuple[int, list[int], list[int]]] = []  # (step, tasks, tasks in flight) per select call
        self.allocated: list[list[int]] = []  # the allocator's rollouts per task, per select call
        self.pending: list[list[int]] = []  # per select call: tasks the step's earlier local updates trained
        self.updates: list[tuple[int, list[str], StepResults]] = []  # (step, prompt uids, results) per update
        self.evicted: dict[str, set[str]] = {}
        self.metrics: list[dict] = []  # what _learn_and_filter logged, per step
        self.refills: list[int] = []  # select calls of each step after its own batch's
        self.replayed: list[tuple[int, list[dict]]] = []  # (step, tags of the stored rows replayed)
        self.view_lags: list[np.ndarray] = []  # the lag the rollout filter's view carries, per step
        self.select_pause = 0.0  # seconds each select call takes on top of its own work
        self.select_s: list[float] = []  # each select call's duration, as its caller saw it
        self.timed: list[tuple[float, float]] = []  # (the step's select calls, verl's timing_raw["selector"]) per step
        self._watch()

    def _watch(self):
        trainer, selector, allocator = self.trainer, self.trainer.axes.selector, self.trainer.axes.allocator
        select, update, evict, allocate = selector.select, selector.update, trainer._on_evicted, allocator.allocate

        def watched_select(step, size, exclude=None):
            t0 = time.perf_counter()
            tasks = select(step, size, exclude=exclude)
            time.sleep(self.select_pause)
            self.select_s.append(time.perf_counter() - t0)
            self.chosen.append((step, np.asarray(tasks).tolist(), trainer.ledger.tasks().tolist()))
            self.pending.append([t for s in trainer._sync for t in s.tasks.tolist()])
            return tasks

        def watched_update(step, results):
            self.updates.append((step, [u for s in trainer._sync for u in s.uids], results))
            return update(step, results)

        def watched_evict(reasons):
            for reason, uids in reasons.items():
                self.evicted.setdefault(reason, set()).update(uids)
            return evict(reasons)

        def watched_allocate(step, tasks, budget):
            counts = allocate(step, tasks, budget)
            self.allocated.append(np.asarray(counts).tolist())
            return counts

        selector.select, selector.update, allocator.allocate = watched_select, watched_update, watched_allocate
        trainer._on_evicted = trainer.replay_buffer.on_evicted = watched_evict

    def train(self, steps: range):
        trainer = self.trainer
        for step in steps:
            trainer.global_steps = step
            if step == 1 and trainer.trainer_mode != "sync":  # fit(): before its loop (TB:447-465)
                trainer._reissue_inflight_prompts()
                trainer._add_async_warmup_batches(trainer.config.trainer.v1[trainer.trainer_mode].num_warmup_batches)
            trainer.timing_raw = {}  # fit(): one per step (TB:470)
            start = len(self.select_s)
            trainer.prepare_step()
            calls = len(self.chosen)
            size = BATCH if trainer.trainer_mode != "sync" else trainer._chosen
            self.metrics.append({})
            for _ in range(trainer.parameter_sync_step):  # verl's local updates of one weight sync (TB:549-556)
                batch, _ = trainer.replay_buffer.sample(global_steps=step, partition_id="train",
                                                        batch_size=size // trainer.parameter_sync_step)
                results = trainer._read_rollouts(batch)
                local: dict = {}
                trainer._learn_and_filter(batch, results, local)
                self.metrics[-1].update(local)  # a step's metrics are its last update's (verl averages the others)
                self.replayed.append((step, list(trainer._step.replayed.tags)))
                self.view_lags.append(trainer._step.view.lag)
                self.tq.kv_clear(batch.keys, "train")  # TB:511
            self.refills.append(len(self.chosen) - calls)
            self.timed.append((sum(self.select_s[start:]), trainer.timing_raw["selector"]))
            self.world.version = step  # on_step_end: the engine serves the updated weights

    def checkpoint(self) -> dict:
        t = self.trainer
        return copy.deepcopy({"axes": t.axes.state_dict(), "ledger": t.ledger.state_dict(),
                              "bias": t.eviction_bias.state_dict(), "tq": self.tq.parts, "version": self.world.version,
                              "step": t.global_steps})

    def restore(self, state: dict):
        """A new process resuming: verl restores TransferQueue (TB:902-908), the trainer its own state."""
        t = self.trainer
        t.axes.load_state_dict(state["axes"])
        t.ledger.load_state_dict(state["ledger"])
        t.eviction_bias.load_state_dict(state["bias"])
        self.tq.parts = copy.deepcopy(state["tq"])
        self.world.version = state["version"]
        t.global_steps = state["step"]
        self._start_again()

    def restart(self):
        """What a resume does, without the save and the load: the engine's generations are lost with the process,
        then fit() starts again at the next step."""
        self.world.running.clear()
        self._start_again()

    def _start_again(self):
        t = self.trainer
        t.global_steps += 1  # TB:454
        t._restored_tq_prompt_count = sum(1 for tag, _ in self.tq.parts.get("train", {}).values()
                                          if tag.get("is_prompt"))  # TB:908
        t._reissue_inflight_prompts()  # TB:456
        t._add_async_warmup_batches(t.config.trainer.v1[t.trainer_mode].num_warmup_batches)  # on_train_begin, TB:465


def _world(seed: int = 0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, TASKS)
    duration = np.round(10 * (1 - p)).astype(int)  # hard tasks generate longest
    return duration, p


def test_every_prompt_is_chosen_trained_once_within_the_threshold_and_evictions_are_no_observation(monkeypatch):
    duration, p = _world()
    threshold = 2
    run = Run(ours.DataSelectionColocateAsync, _config("verl_ext_colocate_async", threshold, 1, "bots"), monkeypatch,
              duration, p)
    run.select_pause = 0.005  # a choice takes as long as 5 ms: each of a step's choices shows in its timing
    run.train(range(1, 13))
    generated = run.world.generated
    # every prompt verl generated was chosen by the selector, in its order, with the allocator's rollouts for it
    assert [(t, n) for _, t, n in generated] == [(t, n) for (_, tasks, _), counts in zip(run.chosen, run.allocated)
                                                 for t, n in zip(tasks, counts)]
    assert sum(n for *_, n in generated) == sum(len(tasks) for _, tasks, _ in run.chosen) * N
    # no task chosen while in flight
    assert all(not set(tasks) & set(in_flight) for _, tasks, in_flight in run.chosen)
    # each trained group reaches update once, with all its rollouts, within the threshold
    trained = [u for _, uids, _ in run.updates for u in uids]
    assert len(trained) == len(set(trained)) == 12 * BATCH
    task_of = {uid: t for uid, t, _ in generated}
    allocated = {uid: n for (uid, *_), n in zip(generated, (n for counts in run.allocated for n in counts))}
    for step, uids, results in run.updates:  # a task is in flight once, so its rows in an update are its group's
        assert sorted(results.task_index.tolist()) == sorted(task_of[u] for u in uids for _ in range(allocated[u]))
        assert np.all(step - results.submit_step + 1 <= threshold)
    lags = np.concatenate([r.lag(s) for s, _, r in run.updates])
    assert lags.max() >= 1  # evidence did arrive late: the test saw asynchrony
    assert np.array_equal(np.concatenate(run.view_lags), lags)  # the rollout filter sees each rollout's lag
    # stale groups were evicted, never reached update, and were replaced by chosen prompts
    assert run.evicted.get("stale")
    assert not run.evicted["stale"] & set(trained)
    assert len(generated) == 12 * BATCH + len(run.trainer.ledger) + sum(len(u) for u in run.evicted.values())
    # the eviction bias: hard (slow) tasks are evicted more often than easy ones
    bias = run.trainer.eviction_bias
    share = {b: bias.evicted["stale"][i] / bias.submitted[i] for i, b in enumerate(BUCKETS)
             if bias.submitted[i]}
    assert share["hard"] > share["easy"]
    # each step logs the refills it chose (its selection cost is its batch's plus theirs)
    assert [m["data_selection/async/refills"] for m in run.metrics] == run.refills and max(run.refills) > 0
    # ... and verl's timing_s/selector holds all of them: its own batch's choice, its refills' and the update
    assert all(calls <= timed for calls, timed in run.timed)


def _in_flight(run: Run) -> set[str]:
    return {uid for uid, (tag, _) in run.tq.parts["train"].items()
            if tag.get("is_prompt") and tag["status"] in ("pending", "running")}


def _ledger_agrees_with_verls_tags(run: Run) -> None:
    prompts = {uid: tag for uid, (tag, _) in run.tq.parts["train"].items() if tag.get("is_prompt")}
    assert set(prompts) == set(run.trainer.ledger.state_dict()["uid"])  # nothing in flight that verl does not hold
    steps = run.trainer.ledger.peek(list(prompts), run.trainer.global_steps).step.tolist()
    assert steps == [tag["global_steps"] for tag in prompts.values()]


def test_a_resume_restarts_what_was_generating_and_changes_nothing_else(monkeypatch):
    """With prompts generating at the save (the out-of-order durations), a resumed run makes exactly the choices and
    updates of the uninterrupted run whose generations in flight at that step start again (:meth:`Run.restart`):
    the checkpoint holds everything else. The restarted groups are not chosen again; no group is trained twice or
    lost; the ledger's submit steps are verl's tags. Against the run that never stopped, the later choices differ:
    the restarted groups finish later, so the evidence arrives in another order."""
    duration, p = _world()
    config = _config("verl_ext_colocate_async", 3, 1.5, "bots")
    first = Run(ours.DataSelectionColocateAsync, config, monkeypatch, duration, p)
    first.train(range(1, 5))
    state = first.checkpoint()
    generating = _in_flight(first)
    assert generating  # prompts generating at the save
    resumed = Run(ours.DataSelectionColocateAsync, config, monkeypatch, duration, p)
    resumed.restore(state)
    assert [uid for uid, *_ in resumed.world.generated] == sorted(generating, key=list(
        state["tq"]["train"]).index)  # re-issued, in verl's order
    assert not resumed.chosen  # the checkpoint's prompts fill the warm-up window: verl tops up nothing
    _ledger_agrees_with_verls_tags(resumed)
    resumed.train(range(5, 9))
    _ledger_agrees_with_verls_tags(resumed)
    restarted = {t for u, t, _ in first.world.generated if u in generating}
    assert restarted & set(resumed.chosen[0][2])  # chosen while the restarted groups were in flight ...
    assert all(not set(tasks) & set(in_flight) for _, tasks, in_flight in resumed.chosen)  # ... never one of them

    in_place = Run(ours.DataSelectionColocateAsync, config, monkeypatch, duration, p)
    in_place.train(range(1, 5))
    in_place.restart()
    in_place.train(range(5, 9))
    whole = Run(ours.DataSelectionColocateAsync, config, monkeypatch, duration, p)
    whole.train(range(1, 9))
    later = lambda run: [(s, tasks) for s, tasks, _ in run.chosen if s >= 5]  # noqa: E731
    trained = lambda run: [(s, r.task_index.tolist(), r.reward.tolist()) for s, _, r in run.updates if s >= 5]  # noqa: E731
    assert later(resumed) == later(in_place) and trained(resumed) == trained(in_place)
    assert later(resumed) != later(whole)

    # every group submitted before or after the save is trained once, evicted, or still in flight
    updates = [u for run in (first, resumed) for _, uids, _ in run.updates for u in uids]
    assert len(updates) == len(set(updates))
    evicted = set().union(*first.evicted.values(), *resumed.evicted.values())
    assert not evicted & set(updates)
    submitted = {u for u, *_ in first.world.generated + resumed.world.generated}
    assert submitted == set(updates) | evicted | set(resumed.trainer.ledger.state_dict()["uid"])


def test_a_resume_with_a_larger_warmup_window_tops_it_up_with_chosen_prompts_not_in_flight(monkeypatch):
    duration, p = _world()
    first = Run(ours.DataSelectionColocateAsync, _config("verl_ext_colocate_async", 4, 1, "bots"), monkeypatch,
                duration, p)
    first.train(range(1, 4))
    state = first.checkpoint()
    running = _in_flight(first)
    held = [uid for uid, (tag, _) in state["tq"]["train"].items() if tag.get("is_prompt")]
    assert running and len(held) == BATCH  # the checkpoint holds a one-batch window
    resumed = Run(ours.DataSelectionColocateAsync, _config("verl_ext_colocate_async", 4, 2, "bots"), monkeypatch,
                  duration, p)
    resumed.restore(state)
    reissued = resumed.world.generated[:len(running)]
    assert {uid for uid, *_ in reissued} == running  # restarted first, then verl fills the two-batch window ...
    topped_up = [t for _, tasks, _ in resumed.chosen for t in tasks]
    assert len(topped_up) == 2 * BATCH - len(held) == len(resumed.world.generated) - len(running)
    # ... with prompts the selector chose, none of a task the checkpoint holds in flight
    assert not set(topped_up) & {t for u, t, _ in first.world.generated if u in held}
    assert [t for _, t, _ in resumed.world.generated[len(running):]] == topped_up
    _ledger_agrees_with_verls_tags(resumed)
    resumed.train(range(4, 10))  # beyond the threshold of their restart
    trained = {u for _, uids, _ in resumed.updates for u in uids}
    assert running <= trained | resumed.evicted.get("stale", set())


def test_threshold_one_without_warmup_chooses_what_the_sync_trainer_chooses(monkeypatch):
    duration, p = _world()
    sync = Run(ours.DataSelectionTrainer, _config("verl_ext", 1, 0, "bots"), monkeypatch, duration, p)
    sync.train(range(1, 9))
    asynchronous = Run(ours.DataSelectionColocateAsync, _config("verl_ext_colocate_async", 1, 0, "bots"), monkeypatch,
                       duration, p)
    asynchronous.train(range(1, 9))
    assert [tasks for _, tasks, _ in asynchronous.chosen] == [tasks for _, tasks, _ in sync.chosen]
    assert not asynchronous.evicted
    assert all(not r.lag(s).any() for s, _, r in asynchronous.updates)


def test_replayed_rows_stay_within_the_off_policy_threshold(monkeypatch):
    """DOTS+RR's replay buffer in colocate_async: stored groups replay while young enough and expire (leave the buffer,
    never replayed) once the policy that would replay them is ``threshold`` updates past their weights."""
    duration, p = _world()
    threshold = 3
    fifo = {"name": "replay_fifo", "capacity": 8, "fresh_groups": BATCH, "fraction": 0.5, "first_round_steps": 0,
            "correction": "stored"}
    run = Run(ours.DataSelectionColocateAsync, _config("verl_ext_colocate_async", threshold, 1, "bots",
                                                       rollout_filter=fifo), monkeypatch, duration, p)
    run.train(range(1, 13))
    spans = [step - tag["min_global_steps"] for step, tags in run.replayed for tag in tags]
    assert spans and max(spans) <= threshold  # replays happened, none beyond the threshold
    assert max(spans) > 1  # rows of earlier weights did replay
    assert sum(m["data_selection/replay/expired"] for m in run.metrics) > 0  # and older ones expired
    stored = run.trainer.replay_store
    assert set(stored.ids().tolist()) == set(run.trainer.axes.rollout_filter.stored().tolist())
    assert all(12 - tag["min_global_steps"] <= threshold + 1 for tag in stored.tags.values())


@pytest.mark.parametrize("warmup, chunk, window", [(1, 1, BATCH), (1.5, 1, 6), (1.5, 4, BATCH)])
def test_a_pool_smaller_than_the_prompts_in_flight_is_refused_when_the_trainer_reads_it(monkeypatch, warmup, chunk,
                                                                                        window):
    """The selector never chooses a task in flight, so an async run needs the batch plus verl's warm-up window in
    tasks (1.5 batches of 4 in chunks of 4 prompts: one chunk): with that many it trains, with one fewer it would
    stop in its first step; the trainer refuses it as it reads the pool, before its workers start."""
    config = _config("verl_ext_colocate_async", 3, warmup, "bots", chunk=chunk)
    need = prompts_in_flight(config)
    assert need == BATCH + window
    duration, p = _world()
    Run(ours.DataSelectionColocateAsync, config, monkeypatch, duration[:need], p[:need]).train(range(1, 9))
    with pytest.raises(ValueError, match="in flight"):  # what the check saves a user from
        Run(ours.DataSelectionColocateAsync, config, monkeypatch, duration[:need - 1], p[:need - 1]).train(range(1, 9))
    check_pool_size(config, need)
    assert prompts_in_flight(_config("verl_ext", 1, warmup, "bots")) == 0
    bare = _config("verl_ext_colocate_async", 3, warmup, "bots", chunk=chunk)
    del bare.trainer.v1.colocate_async["num_warmup_batches"]  # verl's default: no warm-up window
    with pytest.raises(ValueError, match=rf"up to {BATCH} prompts .*num_warmup_batches=0 batches"):
        check_pool_size(bare, BATCH - 1)

    class Pool:  # what verl's _init_dataloader leaves: the training rows' extra_info
        dataframe = {"extra_info": [{"index": i} for i in range(need - 1)]}

    monkeypatch.setattr(verl_base.PPOTrainer, "_init_dataloader", lambda self: setattr(self, "train_dataset", Pool))
    trainer = object.__new__(ours.DataSelectionColocateAsync)
    trainer.config = config
    with pytest.raises(ValueError, match=rf"the training pool has {need - 1} tasks, .* up to {need} prompts in flight"):
        trainer._init_dataloader()


def test_the_ledger_refuses_a_prompt_submitted_twice_or_resolved_unknown_and_round_trips():
    ledger = ours.InFlightLedger()
    ledger.submit(["a", "b"], np.array([3, 5]), np.array([2, 4]), step=1)
    with pytest.raises(ValueError, match="submitted twice"):
        ledger.submit(["b"], np.array([7]), np.array([1]), step=2)
    with pytest.raises(ValueError, match="submitted twice"):
        ledger.submit(["c", "c"], np.array([7, 8]), np.array([1, 1]), step=2)
    ledger.submit(["c"], np.array([3]), np.array([1]), step=2)
    assert ledger.tasks().tolist() == [3, 5]
    copy_ = ours.InFlightLedger()
    copy_.load_state_dict(ledger.state_dict())
    gone = ledger.resolve(["c", "a"], step=3)
    assert gone.task.tolist() == [3, 3] and gone.step.tolist() == [2, 1] and gone.n.tolist() == [1, 2]
    assert gone.order.tolist() == [2, 0] and ledger.tasks().tolist() == [5]
    ledger.reissue(["b"], step=6)  # restarted after a resume: submitted at 6, same task, rollouts and order
    b = ledger.peek(["b"], step=6)
    assert (b.task.tolist(), b.step.tolist(), b.n.tolist(), b.order.tolist()) == ([5], [6], [4], [1])
    with pytest.raises(KeyError, match="no longer in flight"):
        ledger.reissue(["a"], step=6)
    with pytest.raises(KeyError, match="no longer in flight"):
        ledger.resolve(["a"], step=3)
    assert copy_.tasks().tolist() == [3, 5] and copy_.submission_rank(["c", "zz"]) == [2, -1]


def test_with_two_updates_a_weight_sync_the_filter_decides_each_and_selector_and_allocator_learn_once_from_both(
        monkeypatch):
    """verl's fully-async shape (``separate_async``, ``parameter_sync_step`` 2): each step samples and updates the actor
    twice on half its batch with one ``global_steps``. The rollout filter decides at each update, on that update's
    rollouts, with ids unique in the step; selector and allocator learn once a step, at its last update, from the
    groups of both, as they chose once a step, and a refill between the updates does not choose a task the first
    trained. A resume changes nothing else either way."""
    duration, p = _world()
    config = _config("verl_ext_separate_async", 2, 1.5, "bots", sync=2)
    need = prompts_in_flight(config)  # the smallest pool: a refill has to avoid what the first update trained
    duration, p = duration[:need], p[:need]
    run = Run(ours.DataSelectionSeparateAsync, config, monkeypatch, duration, p)
    decided, filter_step = [], run.trainer.axes.rollout_filter.filter_step

    def watched(step, view):
        decided.append((step, sorted(set(view.group.tolist())), view.rollout_id))
        return filter_step(step, view)

    run.trainer.axes.rollout_filter.filter_step = watched
    run.train(range(1, 9))
    assert [s for s, *_ in decided] == [s for s in range(1, 9) for _ in range(2)]
    assert all(len(groups) == BATCH // 2 for _, groups, _ in decided)  # each update: half the batch's groups
    for s in range(1, 9):
        ids = np.concatenate([i for t, _, i in decided if t == s])
        assert len(np.unique(ids)) == len(ids)
    assert [s for s, *_ in run.updates] == list(range(1, 9))  # once a step ...
    task_of = {uid: t for uid, t, _ in run.world.generated}
    allocated = {uid: n for (uid, *_), n in zip(run.world.generated, (n for c in run.allocated for n in c))}
    for (s, uids, results), first, second in zip(run.updates, decided[::2], decided[1::2]):
        assert len(uids) == len(set(uids)) == BATCH  # ... from the groups of both updates
        assert sorted(results.task_index.tolist()) == sorted(task_of[u] for u in uids for _ in range(allocated[u]))
    for (s, uids, _), m in zip(run.updates, run.metrics):  # the step's selection metrics are of both updates' groups
        assert m["data_selection/rollouts_per_task/mean"] == pytest.approx(np.mean([allocated[u] for u in uids]))
    # lag counts weight syncs: the filter sees at each update the lag the selector learns with
    assert np.array_equal(np.concatenate(run.view_lags), np.concatenate([r.lag(s) for s, _, r in run.updates]))
    assert max(lag.max() for lag in run.view_lags) >= 1
    # a refill between the two updates does not choose a task the first one trained: the selector has not learned
    # from it yet
    between = [(tasks, pending) for (_, tasks, _), pending in zip(run.chosen, run.pending) if pending]
    assert between and all(not set(tasks) & set(pending) for tasks, pending in between)
    record = ours.merged_sync(run.trainer._sync)  # the last step's record (the dump's top level)
    assert len(record.tasks) == BATCH and record.view.group.max() + 1 == BATCH
    assert record.kept.max() < len(record.view) and len(record.kept) == len(set(record.kept.tolist()))
    assert [m["data_selection/async/refills"] for m in run.metrics] == run.refills

    first = Run(ours.DataSelectionSeparateAsync, config, monkeypatch, duration, p)
    first.train(range(1, 5))
    state = first.checkpoint()
    assert _in_flight(first)  # generations to restart
    resumed = Run(ours.DataSelectionSeparateAsync, config, monkeypatch, duration, p)
    resumed.restore(state)
    resumed.train(range(5, 9))
    in_place = Run(ours.DataSelectionSeparateAsync, config, monkeypatch, duration, p)
    in_place.train(range(1, 5))
    in_place.restart()
    in_place.train(range(5, 9))
    assert [(s, t) for s, t, _ in resumed.chosen] == [(s, t) for s, t, _ in in_place.chosen if s >= 5]
    assert [r.reward.tolist() for *_, r in resumed.updates] == [r.reward.tolist() for *_, r in in_place.updates[4:]]
