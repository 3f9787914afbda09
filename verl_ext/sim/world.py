"""The simulated task world: tasks with a latent skill, an embedding near their skill's centre and a difficulty,
plus the offline columns the selectors read (``TaskPool`` columns, as ``data_prep`` writes them for real data).

* skill ``z_i`` uniform over ``skills``; embedding ``e_i = normalise(c_z + spread * noise)`` in ``dim`` dimensions;
* difficulty ``d_i ~ N(difficulty_mean + δ_z, difficulty_std)`` (logits), ``δ_k ~ N(0, skill_offset_std)``;
* reference pass rates (BOTS): ``sigmoid(ability - d_i + N(0, reference_noise))`` of a weak and a strong model;
* offline difficulty estimate (ADS's NLL, Countdown's buckets): ``d_i + N(0, proxy_noise)``;
* ADS clusters: K-Means of the embeddings (``data_prep.ads_clusters.cluster``), ranks by the estimate;
* Countdown-like buckets: {first, second half of the skills} x 4 quantile bins of the estimate with unequal
  frequencies (8 buckets, like {3, 4 numbers} x 4 target bins).

Held-out tasks come from the same generator (same skills) and are never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from verl_ext.axes.types import TaskPool

BUCKET_EDGES = (0.15, 0.4, 0.7)  # quantiles of the difficulty estimate: unequal bucket sizes, like Countdown's


@dataclass(frozen=True)
class WorldConfig:
    tasks: int = 50_000
    held_out: int = 2_000
    skills: int = 16
    dim: int = 32
    spread: float = 0.6  # norm of the embedding's noise around its unit skill centre
    difficulty_mean: float = 2.0
    difficulty_std: float = 5.0
    skill_offset_std: float = 2.0
    weak_ability: float = -1.0  # logits of the reference models (the policy starts at 0)
    strong_ability: float = 2.0
    reference_noise: float = 0.7
    proxy_noise: float = 0.7
    ads_clusters: int = 64


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class World:
    """Tasks ``0..tasks-1`` (training, ``extra_info.index`` = position) and ``held_out`` evaluation tasks."""

    def __init__(self, config: WorldConfig, seed: int):
        self.config, self.seed = config, seed
        rng = np.random.default_rng([seed, 0])
        c, n = config, config.tasks + config.held_out
        self.centres = _unit(rng.normal(size=(c.skills, c.dim)))
        self.skill = rng.integers(0, c.skills, size=n)
        noise = rng.normal(size=(n, c.dim)) * c.spread / np.sqrt(c.dim)  # norm ~ spread; the centre's is 1
        self.embedding = _unit(self.centres[self.skill] + noise)
        offset = rng.normal(0.0, c.skill_offset_std, size=c.skills)
        self.difficulty = rng.normal(c.difficulty_mean, c.difficulty_std, size=n) + offset[self.skill]
        self.estimate = self.difficulty + rng.normal(0.0, c.proxy_noise, size=n)
        self.weak = sigmoid(c.weak_ability - self.difficulty + rng.normal(0.0, c.reference_noise, size=n))
        self.strong = sigmoid(c.strong_ability - self.difficulty + rng.normal(0.0, c.reference_noise, size=n))
        self.train = np.arange(c.tasks)
        self.test = np.arange(c.tasks, n)

    @cached_property
    def ads_columns(self) -> dict[str, np.ndarray]:
        """``cluster_id``, ``rank_in_cluster``, ``cluster_size`` as ``python -m data_prep.ads_clusters`` writes them."""
        from data_prep.ads.clustering import cluster, rank_in_clusters

        train = self.train
        labels = cluster(self.embedding[train], self.config.ads_clusters, pca_dims=self.config.dim, seed=self.seed,
                         n_init=1)["labels"]
        rank, size = rank_in_clusters(labels, self.estimate[train])
        return {"cluster_id": labels.astype(np.float64), "rank_in_cluster": rank.astype(np.float64),
                "cluster_size": size.astype(np.float64)}

    def buckets(self) -> np.ndarray:
        """Countdown-like bucket 0..7 of every training task."""
        est = self.estimate[self.train]
        level = np.searchsorted(np.quantile(est, BUCKET_EDGES), est)
        half = (self.skill[self.train] >= self.config.skills // 2).astype(np.int64)
        return half * 4 + level

    def pool(self, columns: tuple[str, ...] = ()) -> TaskPool:
        """The training tasks with the named column families: ``bots`` (weak / strong pass rates), ``ads``
        (clusters, ranks, ``difficulty`` estimate), ``dots`` (``embedding``), ``progress`` (``bucket``)."""
        train, cols = self.train, {}
        for family in columns:
            if family == "bots":
                cols.update(weak_pass_rate=self.weak[train], strong_pass_rate=self.strong[train])
            elif family == "ads":
                cols.update(self.ads_columns, difficulty=self.estimate[train])
            elif family == "dots":
                emb = np.empty(len(train), dtype=object)
                emb[:] = list(self.embedding[train])
                cols["embedding"] = emb
            elif family == "progress":
                cols["bucket"] = self.buckets().astype(np.float64)
            else:
                raise ValueError(f"unknown column family {family!r}; choose from bots, ads, dots, progress")
        return TaskPool(train.astype(np.int64), cols)
