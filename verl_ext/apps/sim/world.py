"""The simulated task world: tasks with a latent skill, an embedding near their skill's centre and a difficulty,
plus the offline columns the selectors read (``TaskPool`` columns, as ``data_prep`` writes them for real data).

* skill ``z_i`` uniform over ``skills``; embedding ``e_i = normalise(c_z + spread * noise)`` in ``dim`` dimensions;
* difficulty ``d_i ~ N(difficulty_mean + δ_z, difficulty_std)`` (logits), ``δ_k ~ N(0, skill_offset_std)``;
* reference pass rates (BOTS): ``sigmoid(ability - d_i + β_z + N(0, reference_noise))`` of a weak and a strong
  model, ``β_k ~ N(0, reference_skill_bias)`` (skills the reference models find easier or harder than the policy);
* offline difficulty estimate (ADS's NLL, Countdown's buckets): ``d_i + N(0, proxy_noise)``;
* ADS clusters: K-Means of the embeddings (``data_prep.ads.clustering.cluster``), ranks by the estimate;
* Countdown-like buckets: {first, second half of the skills} x 4 quantile bins of the estimate with unequal
  frequencies (8 buckets, like {3, 4 numbers} x 4 target bins).

Training tasks carry stable indices that are not their positions (``World.index``: a seeded permutation, spaced 3
apart), as ``extra_info.index`` of a shuffled or filtered dataset, so every component's index mapping is exercised.
Held-out tasks come from the same generator (same skills) and are never trained on.

:data:`PRESETS` are the worlds a verdict must hold in: each changes one core assumption of ``base``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import numpy as np

from verl_ext.axes.views import TaskPool

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
    reference_skill_bias: float = 0.0
    proxy_noise: float = 0.7
    ads_clusters: int = 64


@dataclass(frozen=True)
class Preset:
    """A world: ``WorldConfig`` and ``LearnerConfig`` overrides of the defaults, and the assumption it changes."""

    name: str
    assumption: str
    world: dict = field(default_factory=dict)
    learner: dict = field(default_factory=dict)


# [decision] each preset changes one assumption of base; their measured properties: tables.md "worlds".
PRESETS = {p.name: p for p in (
    Preset("base", "near one-hot transfer (temperature 0.1), starting pass rates spread wide (difficulty std 5 "
                   "logits), informative reference rates and difficulty estimate (noise 0.7 logits)"),
    Preset("broad_transfer", "what a task teaches spreads over neighbouring skills (transfer temperature 1)",
           learner={"transfer_temperature": 1.0}),
    Preset("narrow_spread", "most tasks start at intermediate pass rates (difficulty std 1.5, skill offsets 0.5)",
           world={"difficulty_std": 1.5, "skill_offset_std": 0.5}),
    Preset("noisy_reference", "offline signals correlate about 0.5 with the starting policy (reference rates: "
                              "noise 7.9 and per-skill bias 5 logits; difficulty estimate: noise 9.3)",
           world={"reference_noise": 7.9, "reference_skill_bias": 5.0, "proxy_noise": 9.3}),
)}


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class World:
    """Training tasks at positions ``0..tasks-1`` (stable index ``index[position]``) and ``held_out`` evaluation
    tasks after them."""

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
        bias = rng.normal(0.0, c.reference_skill_bias, size=c.skills)[self.skill]
        self.weak = sigmoid(c.weak_ability - self.difficulty + bias + rng.normal(0.0, c.reference_noise, size=n))
        self.strong = sigmoid(c.strong_ability - self.difficulty + bias + rng.normal(0.0, c.reference_noise, size=n))
        self.train = np.arange(c.tasks)
        self.test = np.arange(c.tasks, n)
        self.index = np.random.default_rng([seed, 5]).permutation(c.tasks).astype(np.int64) * 3 + 7

    @classmethod
    def fitted(cls, config: WorldConfig, seed: int, index: np.ndarray, start: np.ndarray, weak: np.ndarray,
               strong: np.ndarray, floor: float) -> "World":
        """A world whose training tasks are a real pool: stable indices ``index``, difficulty ``-logit(start)`` (the
        starting policy's measured pass rates, clipped to ``[floor, 1 - floor]``), the measured reference rates as
        BOTS's columns and the difficulty as the estimate; held-out tasks drawn from the pool's difficulties.
        Skills and embeddings stay generated (the pool has none)."""
        world = cls(replace(config, tasks=len(index)), seed)
        d = -logit(np.clip(np.asarray(start, dtype=np.float64), floor, 1 - floor))
        rng = np.random.default_rng([seed, 6])
        world.difficulty = np.concatenate([d, rng.choice(d, world.config.held_out)])
        world.estimate = world.difficulty.copy()
        world.weak = np.concatenate([np.asarray(weak, dtype=np.float64), np.full(world.config.held_out, np.nan)])
        world.strong = np.concatenate([np.asarray(strong, dtype=np.float64), np.full(world.config.held_out, np.nan)])
        world.index = np.asarray(index, dtype=np.int64)
        return world

    @cached_property
    def ads_columns(self) -> dict[str, np.ndarray]:
        """``cluster_id``, ``rank_in_cluster``, ``cluster_size`` as ``python -m data_prep.ads_clusters`` writes them."""
        from data_prep.ads.clustering import rank_in_clusters

        c = self.config
        labels = _clusters(self.seed, (c.tasks, c.held_out, c.skills, c.dim, c.spread, c.ads_clusters), self)
        rank, size = rank_in_clusters(labels, self.estimate[self.train])
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
        return TaskPool(self.index, cols)


@lru_cache(maxsize=8)
def _clusters(seed: int, key: tuple, world: "World") -> np.ndarray:
    """K-Means labels of a world's training embeddings, shared by the worlds whose embeddings are the same (``key``:
    the fields they depend on; the presets change none of them)."""
    from data_prep.ads.clustering import cluster

    return cluster(world.embedding[world.train], world.config.ads_clusters, pca_dims=world.config.dim, seed=seed,
                   n_init=1)["labels"]


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def properties(world: World, own_skill_weight: float) -> dict[str, float]:
    """What a preset assumes, measured on one of its worlds: the share of training tasks the starting policy
    (logit ``-d``) solves with p < 0.05 or p > 0.95, the correlation of the weak reference rate's and the
    difficulty estimate's logits with the starting logits, and the transfer's mean weight on a task's own skill."""
    start = -world.difficulty[world.train]
    p = sigmoid(start)
    return {"extreme_share": float(np.mean((p < 0.05) | (p > 0.95))),
            "reference_corr": float(np.corrcoef(logit(world.weak[world.train]), start)[0, 1]),
            "estimate_corr": float(np.corrcoef(-world.estimate[world.train], start)[0, 1]),
            "own_skill_weight": own_skill_weight}
