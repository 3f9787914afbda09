"""DOTS: difficulty-targeted online data selection (Sun et al. 2025, arXiv 2506.05316), the selector half of
the "DOTS+RR" baseline of ADS, checked against the authors' code (ASTRAL-Group/data-efficient-llm-rl @ 59df918,
``rl_training/verl/verl/trainer/ppo/ray_trainer.py`` = RT, ``.../ppo/teacher_utils.py`` = TU).

Tags: **[paper]** the DOTS paper, **[authors' code]** their code where the paper is silent (RT / TU lines),
**[decision]** chosen here.

* **Adaptive difficulty [paper]** ``d_q = 1 − pass rate`` over the prompt's rollouts (the code works with the pass
  rate itself; the linear calibration and the distance to 0.5 make the two equivalent). Pass rate =
  ``StepResults.per_task()`` (successes = reward ≥ 1).
* **Prediction** ``d̂_q`` from the measured reference prompts ``R`` (all of them: top_k null), two predictors:
  ``predictor=adapter`` [authors' code] the authors' trained adapter and calibration head
  (:mod:`verl_ext.axes.dots_predictor`, TU:91-171), trained offline on a multi-policy pass-rate table and frozen,
  read from ``predictor_file`` (its input: the raw prompt embeddings, e.g. mean-pooled LLM hidden states);
  ``predictor=attention`` [decision] no training: ``d̂_q = Σ_{j∈R} a_qj d_j``, ``a_qj = softmax_j(s(z_q, z_j) / τ_a)``
  over fixed vectors ``z`` read from the data (``python -m data_prep.ads_clusters`` writes the clustered PCA space
  as ``OUT_STEM.embeddings.npy``: ``embedding_file``; or an ``extra_info`` list column), cosine with τ_a = 0.1
  (``similarity=dot`` for an adapter's outputs). [decision] ``attention`` stays the default while no predictor file
  exists for the recipes' data (training one needs pass rates of several policies on the training prompts).
* **Linear recalibration [authors' code]** (TU:256-269, ``calibrate=true``): each round a least-squares line
  ``d ≈ a d̂ + c`` is fitted on the reference prompts' own predictions (each attends to the whole reference set,
  itself included) and applied to every prediction, unclipped. With one distinct prediction the line is flat at
  the mean (scikit-learn's LinearRegression there).
* **Selection [paper]** utility ``−|d̂_q − target|``, target 0.5; ``temperature > 0`` draws without replacement
  from ``softmax(−|d̂ − target| / temperature)`` (Gumbel top-k: no underflow), τ = 1e-3 [authors' code]
  (RT:899-909); ``temperature = 0`` takes the closest.
* **Reference set and rounds**, two protocols. ``protocol=measured`` [authors' code] (RT:813-925): a round starts
  with ``reference_size`` prompts (theirs: 256) drawn uniformly from the pool and rolled out with the current policy
  **for measurement only** (:meth:`DotsSelector.measurement`, then :meth:`DotsSelector.measure` with their scored
  rollouts); every prompt of the pool is predicted and ``round_steps x`` the per-step count is drawn and shuffled in
  the same round, then served over ``round_steps`` steps (their ``mu = 2``): ``batch_size`` prompts per step in the
  first round (their ``B``), ``⌊fresh_fraction x batch_size⌋`` after it (``σ B``; the replay filter fills the rest).
  The training rollouts never change the keys. The trainer generates and scores the measurement prompts before
  ``select``, never trains on them and logs them apart (:mod:`verl_ext.trainer.measurement`). ``protocol=in_batch``
  [decision] (default, no extra generation): the reference prompts are part of the step's batch and train too:
  ``select`` returns ``reference_size`` reference prompts, re-drawn every step, followed by
  ``batch_size − reference_size`` targeted ones (disjoint), the targeted part of step ``t`` predicted from the
  reference measured at step ``t − 1`` (one step stale), uniform at the first step. ``attend_to=batch`` uses every
  prompt measured at the previous step as a key (off by default: targeted prompts are a biased sample).
  ``reference_size`` defaults to 32, a quarter of ADS's 128 prompts.

Not the same as ``selector=bots_dots`` (:mod:`verl_ext.axes.bots`): that is BOTS's *proxy* for a
DOTS-like setting — a Beta posterior per task fed only by implicit evidence interpolated between a weak and a
strong model's offline pass-rate columns, with no embeddings and no reference set.

**DOTS+RR** = this selector with the replaying rollout filter ``replay_fifo`` (:mod:`verl_ext.axes.replay_fifo`,
the authors' group buffer) through the rollout-filter replay interface: ``selector=dots rollout_filter=replay_fifo``.
The selector learns only from the step's fresh rollouts (:meth:`update`), never from replayed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from verl_ext.axes.base import TaskSelector, require_finite
from verl_ext.axes.dots_predictor import load_adapter, predict_pass_rate
from verl_ext.axes.views import StepResults, TaskPool

SIMILARITIES = ("cosine", "dot")
PREDICTORS = ("attention", "adapter")
PROTOCOLS = ("in_batch", "measured")
ATTEND_TO = ("reference", "batch")


@dataclass(frozen=True)
class DotsSelectorConfig:
    """DOTS (arXiv 2506.05316); see the module docstring for what is the paper's and what is decided here."""

    name: str = "dots"
    reference_size: int = 32  # |R|: reference prompts re-drawn each step, part of the batch
    target: float = 0.5  # adaptive difficulty aimed at
    temperature: float = 0.001  # 0 = the prompts closest to target; > 0 = softmax(-|d̂ - target| / temperature) draws
    calibrate: bool = True  # the authors' per-round least-squares line from the reference set's own predictions
    predictor: str = "attention"  # attention (fixed embeddings, no training) | adapter (the authors' trained model)
    predictor_file: Optional[str] = None  # predictor=adapter: dots_predictor.save_adapter's file
    attention_temperature: float = 0.1  # τ_a of the attention softmax over similarities
    similarity: str = "cosine"  # cosine | dot
    attend_to: str = "reference"  # keys of the attention: the last reference set, or the whole last batch
    protocol: str = "in_batch"  # in_batch (reference trains, one step stale) | measured (the authors' rounds)
    round_steps: int = 2  # protocol=measured: steps one selection serves (the authors' mu)
    fresh_fraction: float = 0.5  # protocol=measured: share of batch_size selected per step after the first round (σ)
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
        if self.predictor not in PREDICTORS:
            raise ValueError(f"selector=dots: predictor={self.predictor!r}; choose from {list(PREDICTORS)}")
        if (self.predictor == "adapter") != (self.predictor_file is not None):
            raise ValueError(f"selector=dots: predictor_file={self.predictor_file!r} is required with, and only with, "
                             f"predictor=adapter (got predictor={self.predictor!r}); train one with "
                             "verl_ext.axes.dots_predictor.train_adapter + save_adapter")
        if self.predictor == "adapter" and self.reference_size < 2:
            raise ValueError("selector=dots: predictor=adapter reads the reference pass rates' standard deviation: "
                             f"reference_size={self.reference_size} must be >= 2")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"selector=dots: protocol={self.protocol!r}; choose from {list(PROTOCOLS)}")
        if self.round_steps < 1 or not 0.0 < self.fresh_fraction <= 1.0:
            raise ValueError(f"selector=dots: round_steps={self.round_steps} must be >= 1 and "
                             f"fresh_fraction={self.fresh_fraction} in (0, 1]")
        if self.similarity not in SIMILARITIES:
            raise ValueError(f"selector=dots: similarity={self.similarity!r}; choose from {list(SIMILARITIES)}")
        if self.attend_to not in ATTEND_TO:
            raise ValueError(f"selector=dots: attend_to={self.attend_to!r}; choose from {list(ATTEND_TO)}")

    def fresh_per_step(self, batch_size: int) -> int:
        """protocol=measured: the tasks a step serves after the first round, the authors' ``σ B``."""
        return max(1, int(self.fresh_fraction * batch_size + 1e-9))


def load_embeddings(pool: TaskPool, config: DotsSelectorConfig) -> np.ndarray:
    """``[N, D]`` float embeddings of the pool's tasks (dataset order), checked finite; L2-normalised for the cosine
    attention (the adapter takes them raw, as the authors' model does)."""
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
    if config.predictor == "attention" and config.similarity == "cosine":
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
        self.adapter = load_adapter(config.predictor_file) if config.predictor == "adapter" else None
        if self.adapter is not None and self.adapter.shape.input_size != self.embedding.shape[1]:
            raise ValueError(f"selector=dots: predictor_file {config.predictor_file!r} takes "
                             f"{self.adapter.shape.input_size}-d embeddings, the data has {self.embedding.shape[1]}-d")
        self.rng = np.random.default_rng(seed)
        self.key_positions = np.zeros(0, dtype=np.int64)  # tasks measured at the last update
        self.key_difficulty = np.zeros(0, dtype=np.float64)  # their adaptive difficulty 1 - pass rate
        self.reference = np.zeros(0, dtype=np.int64)  # positions of the last drawn reference set
        self.targeted = np.zeros(0, dtype=np.int64)  # positions of the last targeted prompts
        self.targeted_prediction = np.zeros(0, dtype=np.float64)  # their d̂ at selection (NaN: none)
        self.line = np.array([1.0, 0.0])  # (a, c) of the calibration d ≈ a d̂ + c
        self.queue = np.zeros(0, dtype=np.int64)  # protocol=measured: positions still to serve this round
        self.round_prediction = np.zeros(0, dtype=np.float64)  # their d̂ at the round's selection
        self.per_step = 0  # protocol=measured: prompts served per step this round
        self.rounds = 0  # protocol=measured: selections made
        self.measured = False  # protocol=measured: a reference set measured since the last selection
        self._metrics: dict[str, float] = {}

    # ---------------------------------------------------------------- prediction
    def predict(self, positions: Optional[np.ndarray] = None) -> np.ndarray:
        """Calibrated ``d̂`` of the tasks at ``positions`` (all when None) from the last measured keys; NaN before."""
        a, c = self.line
        return a * self._attend(positions) + c

    def _attend(self, positions: Optional[np.ndarray]) -> np.ndarray:
        emb = self.embedding if positions is None else self.embedding[positions]
        if len(self.key_positions) == 0:
            return np.full(len(emb), np.nan)
        keys = self.embedding[self.key_positions]
        if self.adapter is not None:  # it predicts pass rates
            return 1.0 - predict_pass_rate(self.adapter, emb, keys, 1.0 - self.key_difficulty, self.CHUNK)
        temp = self.config.attention_temperature
        return np.concatenate([attention_predict(emb[i:i + self.CHUNK], keys, self.key_difficulty, temp)
                               for i in range(0, len(emb), self.CHUNK)]) if len(emb) else np.zeros(0)

    def _fit_line(self) -> None:
        """Least squares ``key_difficulty ≈ a d̂ + c`` on the keys' own (self-inclusive) predictions."""
        x, y = self._attend(self.key_positions), self.key_difficulty
        var = np.var(x)
        a = float(np.mean((x - x.mean()) * (y - y.mean())) / var) if var > 1e-12 else 0.0
        self.line = np.array([a, float(y.mean() - a * x.mean())])

    # ---------------------------------------------------------------- selection
    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        free = self.available(exclude, batch_size)
        if self.config.protocol == "measured":
            if free is not None:
                raise ValueError("selector=dots protocol=measured serves rounds chosen in advance and cannot skip "
                                 "tasks in flight; use protocol=in_batch")
            return self._serve_round(batch_size)
        return self._select_in_batch(batch_size, free)

    def _draw(self, d_hat: np.ndarray, k: int) -> np.ndarray:
        """``k`` positions into ``d_hat`` near ``target``, best first: Gumbel top-k draws, or the closest."""
        cfg = self.config
        distance = np.abs(d_hat - cfg.target)
        if cfg.temperature > 0:  # Gumbel top-k = k draws without replacement from softmax(-distance / T)
            keys, order = distance / cfg.temperature - self.rng.gumbel(size=len(d_hat)), None
        else:  # ties (e.g. duplicate embeddings) broken uniformly at random
            order = self.rng.permutation(len(d_hat))
            keys = distance[order]
        top = np.argpartition(keys, k - 1)[:k]
        top = top[np.argsort(keys[top], kind="stable")]
        return top if order is None else order[top]

    def _select_in_batch(self, batch_size: int, free: Optional[np.ndarray] = None) -> np.ndarray:
        cfg, n = self.config, len(self.pool)
        if cfg.reference_size >= batch_size:
            raise ValueError(f"selector=dots: reference_size={cfg.reference_size} must be smaller than the batch of "
                             f"{batch_size} tasks (the reference prompts are part of it)")
        candidates = np.arange(n) if free is None else np.flatnonzero(free)
        reference = candidates[self.rng.choice(len(candidates), size=cfg.reference_size, replace=False)]
        rest = np.setdiff1d(candidates, reference)  # ascending: deterministic
        k = batch_size - cfg.reference_size
        d_hat = self.predict(rest)
        if len(self.key_positions) == 0:  # nothing measured yet: uniform
            pick = self.rng.choice(len(rest), size=k, replace=False)
        else:
            pick = self._draw(d_hat, k)
        self.reference, self.targeted = reference, rest[pick]
        self.targeted_prediction = d_hat[pick]
        metrics = {"reference_size": float(len(reference)), "targeted_size": float(k)}
        if len(self.key_positions):
            metrics.update(self._prediction_metrics(d_hat, self.targeted_prediction))
        self._metrics = metrics
        return self.pool.index[np.concatenate([reference, self.targeted])]

    @staticmethod
    def _prediction_metrics(d_hat: np.ndarray, chosen: np.ndarray) -> dict[str, float]:
        """Predicted difficulty of the chosen prompts and of the whole candidate set."""
        return {"predicted_difficulty_targeted_mean": float(np.mean(chosen)),
                "predicted_difficulty_pool_mean": float(np.mean(d_hat)),
                "predicted_moderate_fraction": float(np.mean(np.abs(d_hat - 0.5) < 0.25))}

    # ---------------------------------------------------------------- protocol=measured (the authors' rounds)
    def measurement(self, step: int) -> np.ndarray:
        """Stable indices of the reference prompts to roll out **for measurement only** before this step's
        :meth:`select` (RT:813-884: when a round starts, ``reference_size`` prompts drawn uniformly from the pool);
        none while the round's selection is still being served, or with ``protocol=in_batch``."""
        cfg, n = self.config, len(self.pool)
        if cfg.protocol != "measured" or len(self.queue):
            return np.zeros(0, dtype=np.int64)
        if cfg.reference_size > n:
            raise ValueError(f"selector=dots: reference_size={cfg.reference_size} exceeds the pool of {n} tasks")
        self.reference = self.rng.choice(n, size=cfg.reference_size, replace=False)
        return self.pool.index[self.reference]

    def measure(self, step: int, results: StepResults) -> None:
        """The reference prompts' measurement rollouts (never trained on): the attention keys and calibration."""
        if self.config.protocol != "measured":
            raise RuntimeError("selector=dots: measure() is for protocol=measured")
        require_finite(f"selector={self.config.name}", step, reward=results.reward)
        stats = results.per_task()
        positions = self.pool.positions(stats.index)
        if not np.all(np.isin(positions, self.reference)):
            raise ValueError(f"selector=dots: measure() got tasks outside this round's reference set, e.g. "
                             f"{self.pool.index[positions[~np.isin(positions, self.reference)][:5]].tolist()}")
        self._metrics = self._set_keys(positions, 1.0 - stats.pass_rate)
        self.measured = True

    def _serve_round(self, batch_size: int) -> np.ndarray:
        """A new round (RT:886-925): predict every prompt from the measured reference set, draw ``round_steps x``
        the per-step count (``batch_size`` in the first round, ``⌊fresh_fraction x batch_size⌋`` after: the
        authors' ``mu B`` then ``mu σ B``), shuffle; each step serves the next per-step slice."""
        cfg = self.config
        metrics = {}
        if not len(self.queue):
            metrics = dict(self._metrics)  # measure()'s, of this step
            if not self.measured:
                raise RuntimeError("selector=dots protocol=measured: roll the prompts of measurement(step) out and "
                                   "pass their results to measure(step, results) before select")
            self.per_step = batch_size if self.rounds == 0 else cfg.fresh_per_step(batch_size)
            total = self.per_step * cfg.round_steps
            if total > len(self.pool):
                raise ValueError(f"selector=dots: a round selects {total} tasks from a pool of {len(self.pool)}")
            d_hat = self.predict()
            self.queue = self.rng.permutation(self._draw(d_hat, total))
            self.round_prediction = d_hat[self.queue]
            self.rounds += 1
            self.measured = False
            metrics.update(self._prediction_metrics(d_hat, self.round_prediction), round_selected=float(total))
        self.targeted, self.targeted_prediction = self.queue[:self.per_step], self.round_prediction[:self.per_step]
        self.queue, self.round_prediction = self.queue[self.per_step:], self.round_prediction[self.per_step:]
        self._metrics = {**metrics, "targeted_size": float(len(self.targeted)), "round_left": float(len(self.queue))}
        return self.pool.index[self.targeted]

    # ---------------------------------------------------------------- update
    def update(self, step: int, results: StepResults) -> None:
        require_finite(f"selector={self.config.name}", step, reward=results.reward)
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
        if self.config.protocol == "in_batch":  # measured: only the measurement rollouts set the keys (measure)
            keep = (np.ones(len(positions), bool) if self.config.attend_to == "batch"
                    else np.isin(positions, self.reference))
            if np.any(keep):  # else (no reference prompt scored): keep the previous keys
                metrics.update(self._set_keys(positions[keep], difficulty[keep]))
        self._metrics.update(metrics)

    def _set_keys(self, positions: np.ndarray, difficulty: np.ndarray) -> dict[str, float]:
        """Measured prompts become the attention keys; the calibration line is refitted on them."""
        self.key_positions, self.key_difficulty = positions, np.asarray(difficulty, dtype=np.float64)
        if self.config.calibrate:
            self._fit_line()
        return {"reference_difficulty_mean": float(self.key_difficulty.mean()),
                "reference_measured": float(len(positions)), "calibration_slope": float(self.line[0]),
                "calibration_intercept": float(self.line[1])}

    # ---------------------------------------------------------------- records and state
    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"index": self.pool.index.copy(), "key_positions": self.key_positions.copy(),
                "key_difficulty": self.key_difficulty.copy(), "reference": self.reference.copy(),
                "targeted": self.targeted.copy(), "targeted_prediction": self.targeted_prediction.copy(),
                "line": self.line.copy(), "queue": self.queue.copy(), "round_prediction": self.round_prediction.copy(),
                "per_step": self.per_step, "rounds": self.rounds, "measured": self.measured,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.check_task_pool(state)
        self.key_positions = np.array(state["key_positions"], dtype=np.int64)
        self.key_difficulty = np.array(state["key_difficulty"], dtype=np.float64)
        self.reference = np.array(state["reference"], dtype=np.int64)
        self.targeted = np.array(state["targeted"], dtype=np.int64)
        self.targeted_prediction = np.array(state["targeted_prediction"], dtype=np.float64)
        self.line = np.array(state["line"], dtype=np.float64)
        self.queue = np.array(state["queue"], dtype=np.int64)
        self.round_prediction = np.array(state["round_prediction"], dtype=np.float64)
        self.per_step, self.rounds, self.measured = int(state["per_step"]), int(state["rounds"]), bool(state["measured"])
        self.rng.bit_generator.state = state["rng"]
