"""verl's replay buffers (``trainer/ppo/v1/replay_buffer.py``), reporting to the trainer which prompt groups a sample
took and which it evicted, so that the in-flight ledger (:mod:`verl_ext.trainer.inflight`) resolves every submitted
prompt exactly once: trained, or evicted as stale / failed (no observation)."""

from __future__ import annotations

from typing import Callable, Optional

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync


class _Reporting:
    on_evicted: Optional[Callable[[dict[str, set[str]]], None]] = None  # {reason: prompt uids}, before the refill
    sampled: list[str] = []  # prompt uids of the last training sample
    rank: Optional[Callable[[list[str]], list[int]]] = None  # submission order of prompt uids (None: not ours)

    def _select_prompt_uids(self, partition_id, sampleable_keys, batch_size):
        """verl's choice, oldest submission step first (``replay_buffer.py:383-392``), with its ties (a step's batch,
        the warm-up, refills) broken by submission order instead of by the iteration order of a set of random uids:
        a rerun or a resumed run trains the same groups [decision]."""
        selected, partition, steps = super()._select_prompt_uids(partition_id, sampleable_keys, len(sampleable_keys))
        order = dict(zip(selected, self.rank(selected))) if self.rank is not None else {}
        selected.sort(key=lambda uid: (steps.get(uid, 0), order.get(uid, -1), uid))
        return selected[:batch_size], partition, steps

    def _evict_terminal_groups(self, global_steps, partition_id, eviction_reasons):
        out = super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)
        if partition_id == "train" and out[0] and self.on_evicted is not None:
            stale, filtered, failed, _ = eviction_reasons  # may overlap: verl evicts their union once
            self.on_evicted({"stale": set(stale), "filtered": set(filtered) - set(stale),
                             "failed": set(failed) - set(stale) - set(filtered)})
        return out

    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot):
        if partition_id == "train":
            self.sampled = list(selected_prompt_uids)
        return super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)


class ReportingReplayBuffer(_Reporting, ReplayBuffer):
    pass


class ReportingReplayBufferAsync(_Reporting, ReplayBufferAsync):
    pass


REPORTING = {ReplayBuffer: ReportingReplayBuffer, ReplayBufferAsync: ReportingReplayBufferAsync}


def reporting(buffer, on_evicted: Callable[[dict[str, set[str]]], None], rank: Callable[[list[str]], list[int]]):
    """``buffer`` (built by verl for the trainer mode) as its reporting subclass: they add no state to construct, so
    the instance keeps verl's own constructor arguments."""
    if type(buffer) not in REPORTING:
        raise ValueError(f"trainer.v1.sampler.custom_sampler ({type(buffer).__name__}) is not supported: the trainer "
                         "must see which prompt groups each sample trains and evicts")
    buffer.__class__ = REPORTING[type(buffer)]
    buffer.on_evicted, buffer.rank = on_evicted, rank
    buffer.sampled = []
    return buffer
