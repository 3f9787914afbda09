"""The in-flight ledger: every prompt the trainer submitted for generation and has not yet trained on or seen
evicted, by verl's prompt ``uid`` -> (task, submit step, rollouts, submission order). Framework-free.

Synchronous training empties it every step (a step trains what it submitted). In verl's asynchronous modes a
prompt can be trained steps after its submission (``trainer.v1.sampler.max_off_policy_threshold``), evicted as stale
or failed, and re-issued after a resume: the ledger, saved with the checkpoint, tells which task each trained group
belongs to, keeps a task in flight from being chosen again, and lets an evicted group reach the selector as no
observation (:meth:`InFlightLedger.evict`) rather than as failures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

import numpy as np


@dataclass(frozen=True)
class Submissions:
    """Ledger entries, one per prompt ``uid``, in the order asked for."""

    uid: list[str]
    task: np.ndarray  # int64: stable task index (extra_info.index)
    step: np.ndarray  # int64: the step the prompt was submitted at
    n: np.ndarray  # int64: rollouts allocated to it
    order: np.ndarray  # int64: submission sequence number over the run (a step's selection order, then refills)


class InFlightLedger:
    def __init__(self):
        self._entries: dict[str, tuple[int, int, int, int]] = {}  # uid -> (task, step, n, order)
        self._next = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, uid: str) -> bool:
        return uid in self._entries

    def submit(self, uids: Iterable[str], tasks: np.ndarray, counts: np.ndarray, step: int) -> None:
        uids = list(uids)
        if not len(uids) == len(tasks) == len(counts):
            raise ValueError(f"step {step}: {len(uids)} uids for {len(tasks)} tasks and {len(counts)} counts")
        repeated = [u for u in uids if u in self._entries] + [u for u, c in Counter(uids).items() if c > 1]
        if repeated:
            raise ValueError(f"step {step}: prompt uids submitted twice: {sorted(set(repeated))[:3]}")
        for uid, task, n in zip(uids, np.asarray(tasks).tolist(), np.asarray(counts).tolist()):
            self._entries[uid] = (int(task), int(step), int(n), self._next)
            self._next += 1

    def tasks(self) -> np.ndarray:
        """Stable indices of the tasks in flight (sorted, each once)."""
        return np.unique(np.fromiter((e[0] for e in self._entries.values()), dtype=np.int64, count=len(self)))

    def submission_rank(self, uids: Iterable[str]) -> list[int]:
        """Per uid its submission sequence number; -1 for one not in flight (e.g. a measurement rollout)."""
        return [self._entries[u][3] if u in self._entries else -1 for u in uids]

    def peek(self, uids: Iterable[str], step: int) -> Submissions:
        """The entries of ``uids`` (each must be in flight), left in the ledger."""
        uids = list(uids)
        unknown = [u for u in uids if u not in self._entries]
        if unknown:
            raise KeyError(f"step {step}: {len(unknown)} prompt uids were never submitted or are no longer in flight, "
                           f"e.g. {unknown[:3]}")
        rows = np.array([self._entries[u] for u in uids], dtype=np.int64).reshape(len(uids), 4)
        return Submissions(uids, rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3])

    def resolve(self, uids: Iterable[str], step: int) -> Submissions:
        """The entries of ``uids``, trained at ``step`` or evicted: removed from the ledger."""
        out = self.peek(uids, step)
        for uid in out.uid:
            del self._entries[uid]
        return out

    def reissue(self, uids: Iterable[str], step: int) -> None:
        """verl restarted the generation of ``uids`` at ``step`` after a resume (``_reissue_inflight_prompts``, TB:910)
        and tagged them with that step: their evidence is generated from then on, so their submit step becomes it."""
        for uid in self.peek(uids, step).uid:  # each must be in flight
            task, _, n, order = self._entries[uid]
            self._entries[uid] = (task, int(step), n, order)

    def state_dict(self) -> dict:
        uids = list(self._entries)
        rows = np.array([self._entries[u] for u in uids], dtype=np.int64).reshape(len(uids), 4)
        return {"uid": uids, "entries": rows, "next": self._next}

    def load_state_dict(self, state: dict) -> None:
        rows = np.asarray(state["entries"], dtype=np.int64).reshape(len(state["uid"]), 4)
        self._entries = {u: tuple(int(v) for v in row) for u, row in zip(state["uid"], rows)}
        self._next = int(state["next"])


# difficulty of a task: its reference pass rate (a pool column, fixed over the run), else its pass rate in its latest
# trained group
BUCKETS = ("unseen", "hard", "medium", "easy")  # no rate known; < 1/3; 1/3 to 2/3; > 2/3


class EvictionBias:
    """Submissions and evictions per task difficulty (:data:`BUCKETS`): whether dropping stale groups starves hard
    tasks (slow, long generations finish last and age first; tinker-cookbook PR #822)."""

    def __init__(self):
        self.reference: dict[int, float] = {}  # task -> reference pass rate (data_selection.difficulty_column)
        self.last_pass_rate: dict[int, float] = {}
        self.submitted = np.zeros(len(BUCKETS), dtype=np.int64)
        self.evicted: dict[str, np.ndarray] = {}  # reason -> per bucket
        self.step_evicted: dict[str, int] = {}  # reason -> groups, since the last metrics()

    def bucket(self, tasks: np.ndarray) -> np.ndarray:
        known = self.reference or self.last_pass_rate
        rate = np.array([known.get(int(t), np.nan) for t in tasks], dtype=np.float64)
        return np.where(np.isnan(rate), 0, np.where(rate < 1 / 3, 1, np.where(rate <= 2 / 3, 2, 3)))

    def on_submit(self, tasks: np.ndarray) -> None:
        self.submitted += np.bincount(self.bucket(tasks), minlength=len(BUCKETS))

    def on_evict(self, reason: str, tasks: np.ndarray) -> None:
        counts = self.evicted.setdefault(reason, np.zeros(len(BUCKETS), dtype=np.int64))
        counts += np.bincount(self.bucket(tasks), minlength=len(BUCKETS))
        self.step_evicted[reason] = self.step_evicted.get(reason, 0) + len(tasks)

    def on_trained(self, tasks: np.ndarray, pass_rate: np.ndarray) -> None:
        self.last_pass_rate.update(zip(np.asarray(tasks).tolist(), np.asarray(pass_rate, dtype=float).tolist()))

    def metrics(self, prefix: str) -> dict[str, float]:
        """Groups evicted since the last call per reason, and per bucket the run's share of submitted prompts evicted
        (any reason)."""
        out = {f"{prefix}evicted/{reason}": float(n) for reason, n in self.step_evicted.items()}
        self.step_evicted = {}
        evicted = sum(self.evicted.values(), np.zeros(len(BUCKETS), dtype=np.int64))
        for b, name in enumerate(BUCKETS):
            if self.submitted[b]:
                out[f"{prefix}evicted_share/{name}"] = float(evicted[b] / self.submitted[b])
        return out

    def state_dict(self) -> dict:
        return {"last_pass_rate": dict(self.last_pass_rate), "submitted": self.submitted.copy(),
                "evicted": {k: v.copy() for k, v in self.evicted.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.last_pass_rate = {int(k): float(v) for k, v in state["last_pass_rate"].items()}
        self.submitted = np.asarray(state["submitted"], dtype=np.int64).copy()
        self.evicted = {k: np.asarray(v, dtype=np.int64).copy() for k, v in state["evicted"].items()}
