"""DOTS: difficulty-targeted online data selection (Sun et al. 2025, arXiv 2506.05316), the selector half of
the "DOTS+RR" baseline of ADS (SPEC.md §4).

Method (tags as in SPEC.md: **[paper]** stated in the paper, **[decision]** reconstructed or chosen here):

* **Adaptive difficulty [paper]** of prompt ``q`` under the current policy: ``d_q = 1 − pass rate`` over its
  ``G`` rollouts (the paper writes ``d_q = (1/G) Σ_i (1 − r_i)``; here ``pass rate = StepResults.per_task()``,
  successes = reward ≥ 1, identical for binary rewards).
* **Attention-based prediction [paper]**: only a small *reference set* ``R`` is rolled out to measure
  ``d_j``; every other prompt's difficulty is the attention-weighted average of the reference difficulties,
  ``d̂_q = Σ_{j∈R} a_qj d_j``, ``a_qj = exp(s(z_q, z_j)/τ_a) / Σ_{k∈R} exp(s(z_q, z_k)/τ_a)``.
  [decision] The paper's embeddings come from a frozen LLM encoder with a small adapter trained offline and a
  scaled dot product (plus a calibration step); this project's preprocessing stores no embedding model, so
  ``z`` is a fixed vector per prompt read from the data (an ``extra_info`` list column, default
  ``embedding``, or a ``.npy`` file whose row ``i`` is the prompt with ``extra_info.index == i``), the
  similarity ``s`` is cosine (``similarity=cosine``, default) or the plain dot product
  (``similarity=dot``, e.g. for an adapter's outputs stored in the column), and there is no adapter and no
  calibration. ``attention_temperature`` τ_a = 0.1 by default [decision].
* **Difficulty-targeted selection [paper]**: prompts of moderate difficulty (``d̂ ≈ 0.5``) carry the largest
  GRPO gradient signal. Utility ``−|d̂_q − target|``; ``temperature = 0`` takes the prompts closest to
  ``target``, ``temperature > 0`` draws without replacement from ``softmax(−|d̂ − target| / temperature)``
  (Gumbel top-k). [decision] default ``temperature = 0.1`` (the paper samples around 0.5; its exact
  temperature is not reproduced here).
* **Reference set [paper]**: re-drawn uniformly at random every step. [decision] Its rollouts are part of
  the step's batch (they train too, as in the paper, where reference rollouts are not wasted): ``select``
  returns ``reference_size`` reference prompts followed by ``batch_size − reference_size`` targeted prompts,
  disjoint, exactly ``batch_size`` in all. Because verl rolls the whole batch out at once, the targeted part
  of step ``t`` is predicted from the reference measurements of step ``t − 1`` (one step stale; the paper
  rolls the reference set out first and predicts in the same step); at the first step nothing has been
  measured and the targeted part is uniform at random. With ``attend_to=batch`` every prompt measured at the
  previous step (reference + targeted) serves as a key [decision; off by default: the targeted prompts are a
  biased sample]. The paper's reference set has 256 prompts for its larger batches; ``reference_size``
  defaults to 32 here (a quarter of the ADS rollout batch of 128) [decision].

Not the same as ``selector=bots_dots`` (SPEC.md §1, :mod:`verl_ext.axes.bots`): that is BOTS's *proxy* for a
DOTS-like setting — a Beta posterior per task fed only by implicit evidence interpolated between a weak and a
strong model's offline pass-rate columns, with no embeddings and no reference set. This selector is the
DOTS paper's own estimator: online reference rollouts + embedding-similarity attention.

**DOTS+RR** = this selector composed with a replaying rollout filter (rollout replay, "RR": recent rollouts
are reused so that only part of each batch is freshly generated), through the rollout-filter replay
interface (:meth:`RolloutFilter.replay` / :meth:`RolloutFilter.stored`, see :class:`verl_ext.axes.cbs.CbsFilter`):
``selector=dots rollout_filter=<replay filter>``. The selector needs nothing from the filter: it learns only
from the step's fresh rollouts (:meth:`update`), never from replayed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from verl_ext.axes.base import TaskSelector
from verl_ext.axes.types import StepResults, TaskPool

SIMILARITIES = ("cosine", "dot")
ATTEND_TO = ("reference", "batch")


@dataclass(frozen=True)
class DotsSelectorConfig:
    """DOTS (arXiv 2506.05316); see the module docstring for what is the paper's and what is decided here."""

    name: str = "dots"
    reference_size: int = 32  # |R|: reference prompts re-drawn each step, part of the batch
    target: float = 0.5  # adaptive difficulty aimed at
    temperature: float = 0.1  # 0 = the prompts closest to target; > 0 = softmax(-|d̂ - target| / temperature) draws
    attention_temperature: float = 0.1  # τ_a of the attention softmax over similarities
    similarity: str = "cosine"  # cosine | dot
    attend_to: str = "reference"  # keys of the attention: the last reference set, or the whole last batch
    embedding_column: str = "embedding"  # extra_info list column of the prompt embedding
    embedding_file: Optional[str] = None  # .npy [max index + 1, D], row i = extra_info.index i; overrides the column

    def __post_init__(self):
        if self.reference_size < 1:
            raise ValueError(f"selector=dots: reference_size={self.reference_size} must be >= 1")
        if not 0.0 <= self.target <= 1.0:
            raise ValueError(f"selector=dots: target={self.target} must lie in [0, 1]")
        if self.temperature < 0.0:
            raise ValueError(f"selector=dots: temperature={self.temperature} must be >= 0")
        if self.attention_temperature <= 0.0:
            raise ValueError(f"selector=dots: attention_temperature={self.attention_temperature} must be > 0")
        if self.similarity not in SIMILARITIES:
            raise ValueError(f"selector=dots: similarity={self.similarity!r}; choose from {list(SIMILARITIES)}")
        if self.attend_to not in ATTEND_TO:
            raise ValueError(f"selector=dots: attend_to={self.attend_to!r}; choose from {list(ATTEND_TO)}")


def load_embeddings(pool: TaskPool, config: DotsSelectorConfig) -> np.ndarray:
    """``[N, D]`` float embeddings of the pool's tasks (dataset order), checked finite; L2-normalised for cosine."""
    hint = ("python -m data_prep.ads_clusters does not store embedding vectors: write them as an extra_info list "
            "column (selector.embedding_column) or a .npy file aligned with extra_info.index (selector.embedding_file)")
    if config.embedding_file is not None:
        try:
            table = np.load(config.embedding_file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ValueError(f"selector=dots: cannot read embedding_file {config.embedding_file!r}: {e}; {hint}") from e
        if table.ndim != 2:
            raise ValueError(f"selector=dots: embedding_file {config.embedding_file!r} has shape {table.shape}, "
                             "expected [max extra_info.index + 1, D]")
        if len(pool) and (pool.index.min() < 0 or pool.index.max() >= len(table)):
            raise ValueError(f"selector=dots: embedding_file {config.embedding_file!r} has {len(table)} rows but the "
                             f"training data has extra_info.index up to {int(pool.index.max())} (row i = index i)")
        emb, source = np.asarray(table[pool.index], dtype=np.float64), f"embedding_file {config.embedding_file!r}"
    else:
        column = config.embedding_column
        if column not in pool.columns:
            raise ValueError(f"selector=dots needs prompt embeddings in extra_info.{column}, which the training data "
                             f"lacks (have: {sorted(pool.columns)}); {hint}")
        values, source = pool.columns[column], f"extra_info.{column}"
        try:
            emb = np.asarray(np.stack([np.asarray(v, dtype=np.float64) for v in values]) if values.dtype == object
                             else values, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"selector=dots: {source} is not a numeric vector per task of one length: {e}") from e
        if emb.ndim != 2:
            raise ValueError(f"selector=dots: {source} must hold one vector per task, got shape {emb.shape}")
    bad = np.flatnonzero(~np.all(np.isfinite(emb), axis=1))
    if len(bad):
        raise ValueError(f"selector=dots: {source} is not finite for {len(bad)} tasks, e.g. extra_info.index "
                         f"{pool.index[bad[:5]].tolist()}")
    if config.similarity == "cosine":
        norm = np.linalg.norm(emb, axis=1, keepdims=True)
        if np.any(norm == 0):
            raise ValueError(f"selector=dots: {source} has zero vectors (cosine similarity undefined), e.g. "
                             f"extra_info.index {pool.index[np.flatnonzero(norm[:, 0] == 0)[:5]].tolist()}")
        emb = emb / norm
    return emb


def attention_predict(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, temperature: float) -> np.ndarray:
    """``d̂ = softmax(queries · keysᵀ / temperature) · values`` row by row (numerically stable)."""
    logits = queries @ keys.T
    logits /= temperature
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    return (logits @ values) / logits.sum(axis=1)


class DotsSelector(TaskSelector):
    CHUNK = 8192  # queries per attention block (memory: CHUNK x |keys|)

    def __init__(self, config: DotsSelectorConfig, pool: TaskPool, seed: int):
        super().__init__(config, pool, seed)
        self.embedding = load_embeddings(pool, config)
        self.rng = np.random.default_rng(seed)
        self.key_positions = np.zeros(0, dtype=np.int64)  # tasks measured at the last update
        self.key_difficulty = np.zeros(0, dtype=np.float64)  # their adaptive difficulty 1 - pass rate
        self.reference = np.zeros(0, dtype=np.int64)  # positions of the last drawn reference set
        self.targeted = np.zeros(0, dtype=np.int64)  # positions of the last targeted prompts
        self.targeted_prediction = np.zeros(0, dtype=np.float64)  # their d̂ at selection (NaN: none)
        self._metrics: dict[str, float] = {}

    # ---------------------------------------------------------------- prediction
    def predict(self, positions: Optional[np.ndarray] = None) -> np.ndarray:
        """``d̂`` of the tasks at ``positions`` (all when None) from the last measured keys; NaN before any."""
        emb = self.embedding if positions is None else self.embedding[positions]
        if len(self.key_positions) == 0:
            return np.full(len(emb), np.nan)
        keys = self.embedding[self.key_positions]
        temp = self.config.attention_temperature
        return np.concatenate([attention_predict(emb[i:i + self.CHUNK], keys, self.key_difficulty, temp)
                               for i in range(0, len(emb), self.CHUNK)]) if len(emb) else np.zeros(0)

    # ---------------------------------------------------------------- selection
    def select(self, step: int, batch_size: int) -> np.ndarray:
        cfg, n = self.config, len(self.pool)
        if not 0 < batch_size <= n:
            raise ValueError(f"selector=dots: batch of {batch_size} tasks from a pool of {n}")
        if cfg.reference_size >= batch_size:
            raise ValueError(f"selector=dots: reference_size={cfg.reference_size} must be smaller than the batch of "
                             f"{batch_size} tasks (the reference prompts are part of it)")
        reference = self.rng.choice(n, size=cfg.reference_size, replace=False)
        rest = np.setdiff1d(np.arange(n), reference)  # ascending: deterministic
        k = batch_size - cfg.reference_size
        d_hat = self.predict(rest)
        if len(self.key_positions) == 0:  # nothing measured yet: uniform
            pick = self.rng.choice(len(rest), size=k, replace=False)
        else:
            distance = np.abs(d_hat - cfg.target)
            if cfg.temperature > 0:  # Gumbel top-k = k draws without replacement from softmax(-distance / T)
                keys = distance / cfg.temperature - self.rng.gumbel(size=len(rest))
            else:  # ties (e.g. duplicate embeddings) broken uniformly at random
                keys = distance + 0.0
                order = self.rng.permutation(len(rest))
                keys = keys[order]
            top = np.argpartition(keys, k - 1)[:k]
            top = top[np.argsort(keys[top], kind="stable")]  # best first
            pick = top if cfg.temperature > 0 else order[top]
        self.reference, self.targeted = reference, rest[pick]
        self.targeted_prediction = d_hat[pick]
        metrics = {"reference_size": float(len(reference)), "targeted_size": float(k)}
        if len(self.key_positions):
            metrics.update(predicted_difficulty_targeted_mean=float(np.mean(self.targeted_prediction)),
                           predicted_difficulty_pool_mean=float(np.mean(d_hat)),
                           predicted_moderate_fraction=float(np.mean(np.abs(d_hat - 0.5) < 0.25)))
        self._metrics = metrics
        return self.pool.index[np.concatenate([reference, self.targeted])]

    # ---------------------------------------------------------------- update
    def update(self, step: int, results: StepResults) -> None:
        stats = results.per_task()
        positions = self.pool.positions(stats.index)
        difficulty = 1.0 - stats.pass_rate
        metrics = {}
        if len(self.targeted):  # how good was the prediction for the targeted prompts measured now
            measured = dict(zip(positions.tolist(), difficulty.tolist()))
            pairs = [(measured[p], d) for p, d in zip(self.targeted.tolist(), self.targeted_prediction.tolist())
                     if p in measured and np.isfinite(d)]
            if pairs:
                observed, predicted = np.array(pairs).T
                metrics.update(prediction_abs_error=float(np.mean(np.abs(observed - predicted))),
                               targeted_difficulty_mean=float(observed.mean()))
        keep = np.ones(len(positions), bool) if self.config.attend_to == "batch" else np.isin(positions, self.reference)
        if np.any(keep):  # else (no reference prompt scored): keep the previous keys
            self.key_positions, self.key_difficulty = positions[keep], difficulty[keep].astype(np.float64)
            metrics.update(reference_difficulty_mean=float(self.key_difficulty.mean()),
                           reference_measured=float(keep.sum()))
        self._metrics.update(metrics)

    # ---------------------------------------------------------------- records and state
    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"index": self.pool.index.copy(), "key_positions": self.key_positions.copy(),
                "key_difficulty": self.key_difficulty.copy(), "reference": self.reference.copy(),
                "targeted": self.targeted.copy(), "targeted_prediction": self.targeted_prediction.copy(),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        if not np.array_equal(np.asarray(state["index"]), self.pool.index):
            raise ValueError("selector=dots: the checkpoint's task pool differs from the training data "
                             "(extra_info.index); resume with the same train_files")
        self.key_positions = np.array(state["key_positions"], dtype=np.int64)
        self.key_difficulty = np.array(state["key_difficulty"], dtype=np.float64)
        self.reference = np.array(state["reference"], dtype=np.int64)
        self.targeted = np.array(state["targeted"], dtype=np.int64)
        self.targeted_prediction = np.array(state["targeted_prediction"], dtype=np.float64)
        self.rng.bit_generator.state = state["rng"]
