"""ADS: adaptive data scheduling (Xu et al., arXiv 2606.22305, §3) over offline semantic clusters.

Per cluster ``k`` (``K`` = the distinct ids of ``extra_info.<cluster_column>``): a success rate ``r_k``
(0.5 at start, carried when not sampled), a draw probability ``p_k`` (1/K at start) and a boundary
mini-cluster ``M_k``: ``min(B, |C_k|)`` positions in the cluster's difficulty order
(``extra_info.<rank_column>`` ascending, 0 = easiest), the easiest ones at start. A step draws
``clusters_per_step`` clusters without replacement (successive draws, each renormalised over the clusters
not yet drawn) with probabilities ``p`` and serves every member of
their mini-clusters. After reward, ``ρ_a`` is prompt ``a``'s pass rate (``StepResults.success``),
``r_k`` the mean ``ρ`` over the cluster's prompts in the step; members of ``M_k`` outside the band
``[0.5 - ε, 0.5 + ε]`` move one position easier (``ρ`` low) or harder (``ρ`` high) by
:func:`walk_boundary`; then ``p ← (1 - α) p + α r / Σr``, renormalised.

Decisions:

* **[decision] epoch**: steps are counted by calls to :meth:`AdsSelector.select`. The epoch has
  ``epoch_steps`` selects (null: ``max(1, ⌊|D| / (clusters_per_step · B)⌋)``, ``|D|`` = training
  tasks; 0: never reset). The next select first resets ``p`` uniform, ``r = 0.5`` and every ``M_k``
  to its easiest positions, and starts the next epoch; the RNG is not reset.
* **[decision] batch**: ``select`` returns the drawn clusters' mini-clusters in draw order, each in
  difficulty order: ``Σ min(B, |C_k|)`` tasks, fewer than ``clusters_per_step · B`` when a drawn
  cluster is smaller than ``B``. ``clusters_per_step · B`` above the trainer's batch size is an error.
* **[decision] update**: prompts of a cluster in the results count for ``r_k`` whether or not they are
  in ``M_k``; only ``M_k``'s members move, and a member without results stays. ``p̂`` is uniform
  when every ``r`` is 0.
* **[decision] ablations** (presets): ``inter_cluster=false`` is one cluster over the whole data
  (``p = [1]``). Its order is ``extra_info.<global_order_column>`` ascending, ties by dataset position
  (the preset: ``difficulty``, the preprocessing's NLL, i.e. the paper's whole-data difficulty sort);
  with ``global_order_column=null`` it is each task's quantile in its own
  cluster, ``(position in the cluster's order + 0.5) / |C_k|``, ties by dataset position, which
  interleaves the clusters' orders.
  ``intra_cluster=false`` serves ``min(B, |C_k|)`` members drawn uniformly without replacement from
  each drawn cluster (fresh every step); ``r`` and ``p`` adapt as usual, no boundary is kept.
* Columns read: with ``inter_cluster``, ``cluster_column`` (integers) and, when ``intra_cluster``,
  ``rank_column`` (finite, distinct within a cluster; gaps allowed, so a filtered file works).
  Without: ``global_order_column``, or (null) both for the quantile order; none if ``intra_cluster``
  is off too. ``cluster_size`` is not read: sizes are counted in the training data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from verl_ext.axes.base import TaskSelector, require_finite
from verl_ext.axes.views import StepResults, TaskPool

BAND_TOLERANCE = 1e-9  # the band is closed: ρ = 0.5 ± ε (up to rounding) stays
PER_CLUSTER_METRICS_UP_TO = 64  # log cluster_prob/<cluster id> for every cluster when K is at most this


@dataclass(frozen=True)
class AdsSelectorConfig:
    """ADS (§3.2-3.4, Eq. 4-7; defaults §4.1, Table 6); field comments give the paper's symbols."""

    name: str = "ads"
    clusters_per_step: int = 4  # clusters drawn per step, without replacement
    mini_cluster_size: int = 32  # B
    epsilon: float = 0.17  # ε: half-width of the policy-boundary band around 0.5
    alpha: float = 0.3  # α: smoothing of p towards r / Σr
    initial_success: float = 0.5  # r_k at start and after an epoch reset
    epoch_steps: Optional[int] = None  # selects per epoch; None = ⌊|D| / (clusters_per_step · B)⌋, 0 = never
    inter_cluster: bool = True  # False: one cluster over the whole data (ablation w/o inter-cluster)
    intra_cluster: bool = True  # False: random members of each drawn cluster (ablation w/o intra-cluster)
    cluster_column: str = "cluster_id"
    rank_column: str = "rank_in_cluster"  # 0 = easiest in its cluster
    global_order_column: Optional[str] = None  # inter_cluster=False: ascending = easier; None = rank quantile

    def __post_init__(self):
        if self.clusters_per_step < 1 or self.mini_cluster_size < 1:
            raise ValueError("selector=ads: clusters_per_step and mini_cluster_size must be >= 1")
        for key, hi in (("epsilon", 0.5), ("alpha", 1.0), ("initial_success", 1.0)):
            if not 0.0 <= getattr(self, key) <= hi:
                raise ValueError(f"selector=ads: {key}={getattr(self, key)} must lie in [0, {hi}]")
        if self.epoch_steps is not None and self.epoch_steps < 0:
            raise ValueError(f"selector=ads: epoch_steps={self.epoch_steps} must be >= 0 (or null)")
        if not self.inter_cluster and self.clusters_per_step != 1:
            raise ValueError("selector=ads: inter_cluster=false is one cluster over the whole data; "
                             f"clusters_per_step={self.clusters_per_step} must be 1")
        if self.inter_cluster and self.global_order_column is not None:
            raise ValueError("selector=ads: global_order_column is read only with inter_cluster=false")


def walk_boundary(positions: np.ndarray, move: np.ndarray, size: int) -> np.ndarray:
    """New mini-cluster (sorted positions in ``[0, size)``) after each member at ``positions`` stays
    (``move`` 0), goes easier (-1) or harder (+1).

    **[authors' code]** (Richard-zrx/ADS, verl/verl/experimental/dataset/ads_sampler.py,
    ``_update_mini_positions`` / ``_nearest_free``; the paper's Eq. 6-7 do not say how collisions
    resolve): stayers hold their positions first; then movers to easier in ascending position order,
    then movers to harder in descending order, each taking the free position nearest to its neighbour
    ``s + move`` (clamped into the cluster), searching outward at distance 1, 2, ... and trying the
    requested direction before the other. So a mover whose neighbour is taken tries the slot two away,
    then its own slot (e.g. a too-easy member at 3 beside stayers 4, 5 stays at 3). The result holds
    ``len(positions)`` distinct positions and equals Eq. 7 whenever Eq. 6 maps the members to distinct,
    existing positions.
    """
    positions, move = np.asarray(positions, dtype=np.int64), np.asarray(move)
    claimed = np.zeros(size, dtype=bool)
    claimed[positions[move == 0]] = True
    out = [positions[move == 0]]
    for s in np.sort(positions[move < 0]):
        out.append([_claim_nearest(claimed, int(s), -1)])
    for s in np.sort(positions[move > 0])[::-1]:
        out.append([_claim_nearest(claimed, int(s), +1)])
    return np.sort(np.concatenate(out).astype(np.int64))


def _claim_nearest(claimed: np.ndarray, s: int, direction: int) -> int:
    """Claim the unclaimed position nearest to ``s + direction`` (clamped), ties to ``direction``'s side.

    There always is one: fewer members than positions have claimed so far, and distances up to
    ``size - 1`` reach every position.
    """
    size = len(claimed)
    target = min(max(s + direction, 0), size - 1)
    candidates = (target + side * direction * r for r in range(size) for side in ((1,) if r == 0 else (1, -1)))
    p = next(c for c in candidates if 0 <= c < size and not claimed[c])
    claimed[p] = True
    return p


def _numeric(pool: TaskPool, column: str, role: str) -> np.ndarray:
    if column not in pool.columns:
        raise ValueError(f"selector=ads needs the {role} column extra_info.{column}, which the training data lacks "
                         f"(have: {sorted(pool.columns)}); `python -m data_prep.ads_clusters` writes cluster_id, "
                         "rank_in_cluster, cluster_size and difficulty (with --prefix, prefixed: set "
                         "selector.cluster_column / rank_column / global_order_column)")
    try:
        values = np.asarray(pool.columns[column], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"selector=ads: extra_info.{column} ({role}) is not numeric: {e}") from e
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        examples = ", ".join(f"index {pool.index[p]} (row {p})" for p in bad[:5])
        raise ValueError(f"selector=ads: extra_info.{column} ({role}) is missing or not finite for {len(bad)} of "
                         f"{len(values)} training tasks, e.g. {examples}")
    return values


def cluster_orders(pool: TaskPool, config: AdsSelectorConfig) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(cluster ids [K], per cluster the dataset positions of its members, easiest first)``."""
    n = len(pool)
    if not config.inter_cluster and not config.intra_cluster:  # random members of the whole data: no order
        return np.array([0]), [np.arange(n)]
    if not config.inter_cluster and config.global_order_column is not None:
        key = _numeric(pool, config.global_order_column, "global difficulty order")
        return np.array([0]), [np.lexsort((np.arange(n), key))]
    ids = _numeric(pool, config.cluster_column, "cluster id")
    if np.any(ids != np.round(ids)):
        raise ValueError(f"selector=ads: extra_info.{config.cluster_column} (cluster id) must hold integers")
    cluster_ids, slot = np.unique(ids.astype(np.int64), return_inverse=True)
    if not config.intra_cluster and config.inter_cluster:  # random members: the order is never used
        return cluster_ids, [np.flatnonzero(slot == k) for k in range(len(cluster_ids))]
    rank = _numeric(pool, config.rank_column, "difficulty rank in the cluster")
    by_cluster = np.lexsort((rank, slot))  # cluster, then rank
    sorted_slot, sorted_rank = slot[by_cluster], rank[by_cluster]
    tie = np.flatnonzero((sorted_slot[1:] == sorted_slot[:-1]) & (sorted_rank[1:] == sorted_rank[:-1]))
    if len(tie):
        a, b = by_cluster[tie[0]], by_cluster[tie[0] + 1]
        raise ValueError(f"selector=ads: extra_info.{config.rank_column} repeats within a cluster ({len(tie)} ties), "
                         f"e.g. indices {pool.index[a]} and {pool.index[b]} both have rank {rank[a]:g} in cluster "
                         f"{cluster_ids[slot[a]]}; merged files need one clustering over the merged data")
    starts = np.searchsorted(sorted_slot, np.arange(len(cluster_ids) + 1))
    orders = [by_cluster[starts[k]:starts[k + 1]] for k in range(len(cluster_ids))]
    if config.inter_cluster:
        return cluster_ids, orders
    quantile = np.empty(n)
    for order in orders:
        quantile[order] = (np.arange(len(order)) + 0.5) / len(order)
    return np.array([0]), [np.lexsort((np.arange(n), quantile))]


class AdsSelector(TaskSelector):
    def __init__(self, config: AdsSelectorConfig, pool: TaskPool, seed: int):
        super().__init__(config, pool, seed)
        self.cluster_ids, self.orders = cluster_orders(pool, config)
        k = len(self.cluster_ids)
        if config.clusters_per_step > k:
            raise ValueError(f"selector=ads: clusters_per_step={config.clusters_per_step} exceeds the {k} clusters "
                             f"of extra_info.{config.cluster_column}")
        self.sizes = np.array([len(o) for o in self.orders])
        self.slot = np.empty(len(pool), dtype=np.int64)  # cluster slot of each dataset position
        self.rank = np.empty(len(pool), dtype=np.int64)  # its position in the cluster's order
        for c, order in enumerate(self.orders):
            self.slot[order], self.rank[order] = c, np.arange(len(order))
        batch = config.clusters_per_step * config.mini_cluster_size
        self.epoch_steps = max(1, len(pool) // batch) if config.epoch_steps is None else config.epoch_steps
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        self.epoch, self.epoch_step = 0, 0
        self.drawn = np.zeros(0, dtype=np.int64)  # slots drawn by the last select
        self._metrics: dict[str, float] = {}
        self._reset()

    def _reset(self) -> None:
        k = len(self.cluster_ids)
        self.p = np.full(k, 1.0 / k)
        self.r = np.full(k, self.config.initial_success)
        self.mini = [np.arange(min(self.config.mini_cluster_size, n)) for n in self.sizes]

    def members(self, slot: int) -> np.ndarray:
        """Stable indices of cluster ``slot``'s mini-cluster, easiest first."""
        return self.pool.index[self.orders[slot][self.mini[slot]]]

    # ---------------------------------------------------------------- selection
    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        cfg = self.config
        if exclude is not None and len(exclude):
            raise ValueError("selector=ads draws whole mini-clusters per step (§3.2) and cannot skip tasks in flight")
        wanted = cfg.clusters_per_step * cfg.mini_cluster_size
        if wanted > batch_size:
            raise ValueError(f"selector=ads: clusters_per_step x mini_cluster_size = {cfg.clusters_per_step} x "
                             f"{cfg.mini_cluster_size} = {wanted} prompts exceed the batch of {batch_size} tasks "
                             "(data.train_batch_size)")
        if self.epoch_steps and self.epoch_step == self.epoch_steps:
            self._reset()
            self.epoch, self.epoch_step = self.epoch + 1, 0
        p = self.p  # p_k of a never-drawn cluster with r_k = 0 underflows to 0 after ~2000 steps without a reset
        if np.count_nonzero(p) < cfg.clusters_per_step:
            p = (p + 1e-12) / (p + 1e-12).sum()
        self.drawn = self.rng.choice(len(p), size=cfg.clusters_per_step, replace=False, p=p)
        self.epoch_step += 1
        parts = []
        for c in self.drawn:
            if cfg.intra_cluster:
                chosen = self.mini[c]
            else:
                chosen = np.sort(self.rng.choice(self.sizes[c], size=len(self.mini[c]), replace=False))
            parts.append(self.orders[c][chosen])
        positions = np.concatenate(parts)
        self._metrics = {"epoch": float(self.epoch), "epoch_step": float(self.epoch_step),
                         "prompts": float(len(positions)), **self._p_metrics()}
        self._metrics |= {f"drawn/{j}": float(self.cluster_ids[c]) for j, c in enumerate(self.drawn)}
        if cfg.intra_cluster:  # where the drawn boundaries sit: mean position / cluster size
            self._metrics["boundary_quantile_mean"] = float(np.mean(
                [(self.mini[c].mean() + 0.5) / self.sizes[c] for c in self.drawn]))
        return self.pool.index[positions]

    # ---------------------------------------------------------------- update
    def update(self, step: int, results: StepResults) -> None:
        require_finite(f"selector={self.config.name}", step, reward=results.reward)
        cfg = self.config
        stats = results.per_task()
        positions = self.pool.positions(stats.index)
        rho, slot, rank = stats.pass_rate, self.slot[positions], self.rank[positions]
        k = len(self.cluster_ids)
        count = np.bincount(slot, minlength=k)
        seen = count > 0
        self.r[seen] = np.bincount(slot, weights=rho, minlength=k)[seen] / count[seen]
        lo, hi = 0.5 - cfg.epsilon - BAND_TOLERANCE, 0.5 + cfg.epsilon + BAND_TOLERANCE
        moved = 0
        if cfg.intra_cluster:
            for c in np.flatnonzero(seen):
                mini, mine = self.mini[c], slot == c
                move = np.zeros(len(mini), dtype=np.int64)
                at = np.searchsorted(mini, rank[mine])
                inside = (at < len(mini)) & (mini[np.minimum(at, len(mini) - 1)] == rank[mine])
                move[at[inside]] = np.where(rho[mine][inside] < lo, -1, np.where(rho[mine][inside] > hi, 1, 0))
                new = walk_boundary(mini, move, int(self.sizes[c]))
                moved += int(len(mini) - len(np.intersect1d(mini, new, assume_unique=True)))
                self.mini[c] = new
        total = self.r.sum()
        p_hat = self.r / total if total > 0 else np.full(k, 1.0 / k)
        p = (1.0 - cfg.alpha) * self.p + cfg.alpha * p_hat
        self.p = p / p.sum()
        self._metrics |= {"in_band_fraction": float(np.mean((rho >= lo) & (rho <= hi))) if len(rho) else 0.0,
                          "boundary_moved": float(moved), "success_mean": float(self.r.mean()),
                          "drawn_success_mean": float(self.r[self.drawn].mean()) if len(self.drawn) else 0.0,
                          **self._p_metrics()}

    # ---------------------------------------------------------------- records and state
    def _p_metrics(self) -> dict[str, float]:
        p = self.p[self.p > 0]
        out = {"p_entropy": float(-(p * np.log(p)).sum()), "p_max": float(self.p.max()), "p_min": float(self.p.min())}
        if len(self.p) <= PER_CLUSTER_METRICS_UP_TO:
            out |= {f"cluster_prob/{cid}": float(v) for cid, v in zip(self.cluster_ids, self.p)}
        return out

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"index": self.pool.index.copy(), "cluster_ids": self.cluster_ids.copy(), "p": self.p.copy(),
                "r": self.r.copy(), "mini": [m.copy() for m in self.mini], "epoch": self.epoch,
                "epoch_step": self.epoch_step, "drawn": self.drawn.copy(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        if not (np.array_equal(np.asarray(state["index"]), self.pool.index)
                and np.array_equal(np.asarray(state["cluster_ids"]), self.cluster_ids)):
            raise ValueError("selector=ads: the checkpoint's tasks or clusters differ from the training data "
                             "(extra_info.index / cluster column); resume with the same train_files and selector")
        mini = [np.asarray(m, dtype=np.int64) for m in state["mini"]]
        if [len(m) for m in mini] != [len(m) for m in self.mini] or any(
                len(m) and (m.min() < 0 or m.max() >= n) for m, n in zip(mini, self.sizes)):
            raise ValueError("selector=ads: the checkpoint's mini-clusters do not fit the clusters "
                             "(mini_cluster_size or the data changed)")
        self.p, self.r, self.mini = np.array(state["p"], dtype=np.float64), np.array(state["r"], dtype=np.float64), mini
        self.epoch, self.epoch_step = int(state["epoch"]), int(state["epoch_step"])
        self.drawn = np.asarray(state["drawn"], dtype=np.int64)
        self.rng.bit_generator.state = state["rng"]
