"""Task selectors that need no learning: uniform (verl's own shuffled order) and sequential (a fixed
curriculum order, e.g. easy -> hard)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from verl_ext.axes.base import TaskSelector


@dataclass(frozen=True)
class UniformSelectorConfig:
    """Uniform sampling without replacement, epoch by epoch, in exactly the order verl's shuffled
    dataloader (torchdata ``RandomSampler`` seeded with ``data.seed``, ``drop_last``) would serve."""

    name: str = "uniform"


class UniformSelector(TaskSelector):
    stale_evidence = "not read: uniform selection learns nothing from results"

    def __init__(self, config: UniformSelectorConfig, pool, seed: int):
        super().__init__(config, pool, seed)
        self._generator = torch.Generator().manual_seed(seed)
        self._perm: np.ndarray = np.empty(0, dtype=np.int64)
        self._cursor = 0
        self._generator_state = self._generator.get_state()

    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        """The next ``batch_size`` tasks of the epoch's permutation; a task in flight (``exclude``) when its turn
        comes is served right after them, within the same epoch [decision: each task still once per epoch]."""
        free = self.available(exclude, batch_size)
        left = self._perm[self._cursor:]
        if len(left) < batch_size or (free is not None and free[left].sum() < batch_size):
            # new epoch; the tail is dropped (drop_last)
            self._generator_state = self._generator.get_state()
            self._perm = torch.randperm(len(self.pool), generator=self._generator).numpy()
            self._cursor = 0
            left = self._perm
        if free is not None and not free[left[:batch_size]].all():
            ok = free[left]
            chosen = left[ok][:batch_size]
            waiting = left[~ok & (np.cumsum(ok) <= batch_size)]  # in flight when their turn came: next in line
            rest = left[len(chosen) + len(waiting):]
            self._perm = np.concatenate([self._perm[:self._cursor], chosen, waiting, rest])
        positions = self._perm[self._cursor : self._cursor + batch_size]
        self._cursor += batch_size
        return self.pool.index[positions]

    def state_dict(self) -> dict:
        return {"generator_state": self._generator_state.numpy().tobytes(), "cursor": self._cursor,
                "epoch_started": len(self._perm) > 0, "perm": self._perm.copy()}

    def load_state_dict(self, state: dict) -> None:
        saved = torch.frombuffer(bytearray(state["generator_state"]), dtype=torch.uint8)
        self._generator.set_state(saved)
        self._generator_state = saved.clone()
        if state["epoch_started"]:  # replay the epoch's permutation from the generator state it began with
            self._perm = torch.randperm(len(self.pool), generator=self._generator).numpy()
            if "perm" in state:  # as reordered around tasks in flight
                self._perm = np.asarray(state["perm"], dtype=np.int64)
        else:
            self._perm = np.empty(0, dtype=np.int64)
        self._cursor = state["cursor"]


@dataclass(frozen=True)
class SequentialSelectorConfig:
    """Serve tasks in a fixed order, cycling: dataset order, or sorted by ``extra_info`` columns
    (``sort_by=[weak_pass_rate, strong_pass_rate]``, ``descending=true`` gives BOTS's offline easy -> hard)."""

    name: str = "sequential"
    sort_by: tuple[str, ...] = ()
    descending: bool = True


class SequentialSelector(TaskSelector):
    stale_evidence = "not read: a fixed order learns nothing from results"

    def __init__(self, config: SequentialSelectorConfig, pool, seed: int):
        super().__init__(config, pool, seed)
        if config.sort_by:
            keys = [np.asarray(pool.column(c), dtype=np.float64) for c in config.sort_by]
            for c, k in zip(config.sort_by, keys):
                if np.isnan(k).any():
                    raise ValueError(f"extra_info.{c} has NaN values; sequential ordering needs every task's value")
            # np.lexsort sorts by the LAST key first; stable, so ties keep dataset order
            signed = [-k if config.descending else k for k in keys]
            self._order = np.lexsort(tuple(reversed(signed)))
        else:
            self._order = np.arange(len(pool))
        self._cursor = 0

    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        """The next ``batch_size`` tasks of the order, cycling; a task in flight (``exclude``) when its turn comes is
        skipped until the next cycle [decision: the curriculum's order is kept]."""
        n = len(self._order)
        if exclude is None or len(exclude) == 0:
            positions = self._order[(self._cursor + np.arange(batch_size)) % n]
            self._cursor = (self._cursor + batch_size) % n
            return self.pool.index[positions]
        free = self.available(exclude, batch_size)
        ahead = self._order[(self._cursor + np.arange(n)) % n]
        taken = np.flatnonzero(free[ahead])[:batch_size]
        self._cursor = (self._cursor + int(taken[-1]) + 1) % n
        return self.pool.index[ahead[taken]]

    def state_dict(self) -> dict:
        return {"cursor": self._cursor}

    def load_state_dict(self, state: dict) -> None:
        self._cursor = int(state["cursor"])
