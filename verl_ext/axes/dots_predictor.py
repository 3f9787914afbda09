"""DOTS's adaptive-difficulty predictor as the authors built it: a trained adapter (two projections) with scaled
dot-product attention over measured reference prompts, then a trained calibration head (Sun et al. 2025, arXiv
2506.05316; ASTRAL-Group/data-efficient-llm-rl @ 59df918: ``rl_training/verl/verl/trainer/ppo/teacher_utils.py``
= TU, ``adaptive_difficulty_prediction/train.py`` = TR, run by ``adaptive_difficulty_prediction/run_bash/run_train.sh``).

**Model** [authors' code] (TU:14-31, 91-171; the run's ``num_layers=3``, ``hidden_size=896``,
``scaling=group_logit_temp``, ``top_k=None``, ``tau=1``): ``q = P_q(z_q)``, ``r_j = P_r(z_j)`` with
``P = LayerNorm → (Linear → GELU → Dropout 0.1) x (L−1) → Linear → LayerNorm``; the base prediction is
``b = Σ_j softmax_j(q·r_j / √H) p_j`` over the reference prompts' measured pass rates ``p``; the calibration head maps
the reference set's mean and (unbiased) standard deviation of ``p`` through ``Linear(2,10) → ReLU → Linear(10,2)`` to
``T = clamp(softplus(t), 0.01, 10)`` and ``β = tanh(s)``, and predicts ``σ(logit(clamp(b, 1e-4, 1−1e-4)) / T + β)``.
It predicts a **pass rate** (not ``1 − pass rate``): the head is not symmetric under ``p → 1 − p``.

**Training** [authors' code]: offline, before RL, and frozen during it (TU:219-228 loads a checkpoint and calls
``eval()``). Data: a pass-rate table of several policies over the same prompts (``data_deepscaler_10240_train.pkl``
for queries, ``..._ref.pkl`` for reference candidates) and frozen prompt embeddings (mean-pooled last hidden states
of Qwen2.5-Math-1.5B-Instruct, TU:58-88). Each batch of 256 (policy, query) pairs draws 256 reference candidates at
random; every query attends to them with its own policy's pass rates; loss BCE against its pass rate; Adam, lr 1e-3,
20 epochs, linear schedule with ``min(100, total/10)`` warm-up steps, seed 1 (TR:40-188, run_train.sh).
At RL time the per-round linear recalibration on the reference set (TU:256-269) follows: :mod:`verl_ext.axes.dots`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn
from tqdm import tqdm


@dataclass(frozen=True)
class AdapterShape:
    """Sizes of the adapter [authors' code: run_train.sh / final_ds_teacher_replay.sh]."""

    input_size: int  # embedding dimension D
    hidden_size: int = 896
    num_layers: int = 3
    dropout: float = 0.1


def projection(shape: AdapterShape) -> nn.Sequential:
    """TU:14-31: LayerNorm, then num_layers Linear layers (GELU and dropout between them), then LayerNorm."""
    layers: list[nn.Module] = [nn.LayerNorm(shape.input_size)]
    for i in range(shape.num_layers):
        layers.append(nn.Linear(shape.input_size if i == 0 else shape.hidden_size, shape.hidden_size))
        if i < shape.num_layers - 1:
            layers += [nn.GELU(), nn.Dropout(shape.dropout)]
    layers.append(nn.LayerNorm(shape.hidden_size))
    return nn.Sequential(*layers)


class DifficultyAdapter(nn.Module):
    """Predicted pass rates of queries from reference prompts' measured pass rates (TU:91-171)."""

    def __init__(self, shape: AdapterShape):
        super().__init__()
        if shape.input_size < 1 or shape.hidden_size < 1 or shape.num_layers < 1:
            raise ValueError(f"DOTS adapter: sizes must be >= 1, got {shape}")
        self.shape = shape
        self.query_proj, self.ref_proj = projection(shape), projection(shape)
        self.head = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 2))

    def forward(self, query: torch.Tensor, ref: torch.Tensor, ref_pass: torch.Tensor) -> torch.Tensor:
        """``query`` [B, D], ``ref`` [K, D], ``ref_pass`` [B, K] (each query's reference pass rates) -> [B]."""
        q, r = self.query_proj(query), self.ref_proj(ref)
        weights = torch.softmax(q @ r.T / math.sqrt(r.shape[-1]), dim=-1)
        base = (weights * ref_pass).sum(-1)
        stats = torch.stack([ref_pass.mean(-1), ref_pass.std(-1)], dim=-1)
        t, s = self.head(stats).unbind(-1)
        temp = nn.functional.softplus(t).clamp(1e-2, 10.0)
        return torch.sigmoid(torch.logit(base.clamp(1e-4, 1 - 1e-4)) / temp + torch.tanh(s))


def predict_pass_rate(model: DifficultyAdapter, query: np.ndarray, ref: np.ndarray, ref_pass: np.ndarray,
                      chunk: int = 4096) -> np.ndarray:
    """Frozen-model (``eval``) pass-rate predictions of ``query`` [N, D] from one reference set ``ref`` [K, D] with
    measured pass rates ``ref_pass`` [K] (K >= 2: the head reads their standard deviation)."""
    if len(ref) < 2:
        raise ValueError(f"DOTS adapter: needs >= 2 reference prompts (their pass-rate std), got {len(ref)}")
    model.eval()
    ref_t = torch.as_tensor(ref, dtype=torch.float32)
    with torch.no_grad():
        out = [model(torch.as_tensor(query[i:i + chunk], dtype=torch.float32), ref_t,
                     torch.as_tensor(ref_pass, dtype=torch.float32).expand(min(chunk, len(query) - i), -1))
               for i in range(0, len(query), chunk)]
    return torch.cat(out).double().numpy() if out else np.zeros(0)


def train_adapter(embedding: np.ndarray, pass_rate: np.ndarray, query_rows: np.ndarray, ref_rows: np.ndarray,
                  shape: AdapterShape | None = None, ref_size: int = 256, batch_size: int = 256, epochs: int = 20,
                  lr: float = 1e-3, warmup_steps: int = 100, seed: int = 1) -> DifficultyAdapter:
    """The authors' offline training (TR:40-188): ``embedding`` [N, D] frozen prompt embeddings, ``pass_rate``
    [P, N] measured pass rates of P policies (NaN: not measured; rows of ``query_rows`` / ``ref_rows`` must be
    measured), queries ``query_rows`` and reference candidates ``ref_rows`` (disjoint prompt rows)."""
    embedding, pass_rate = np.asarray(embedding, np.float32), np.asarray(pass_rate, np.float64)
    query_rows, ref_rows = np.asarray(query_rows, np.int64), np.asarray(ref_rows, np.int64)
    if embedding.ndim != 2 or pass_rate.ndim != 2 or pass_rate.shape[1] != len(embedding):
        raise ValueError(f"DOTS adapter training: embedding [N, D] and pass_rate [P, N], got {embedding.shape} "
                         f"and {pass_rate.shape}")
    if not 2 <= ref_size <= len(ref_rows) or np.intersect1d(query_rows, ref_rows).size or not len(query_rows):
        raise ValueError(f"DOTS adapter training: need queries and >= ref_size={ref_size} >= 2 reference "
                         f"candidates, disjoint ({len(query_rows)} queries, {len(ref_rows)} candidates)")
    used = pass_rate[:, np.concatenate([query_rows, ref_rows])]
    if not np.all(np.isfinite(used)) or used.min() < 0 or used.max() > 1:
        raise ValueError("DOTS adapter training: pass rates of the query and reference rows must lie in [0, 1]")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = DifficultyAdapter(shape or AdapterShape(embedding.shape[1]))
    policy, row = (a.ravel() for a in np.meshgrid(np.arange(len(pass_rate)), query_rows, indexing="ij"))
    steps_per_epoch = math.ceil(len(row) / batch_size)
    total = steps_per_epoch * epochs
    warmup = min(warmup_steps, total // 10)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(  # transformers' get_linear_schedule_with_warmup
        optimizer, lambda s: s / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    emb = torch.as_tensor(embedding)
    model.train()
    for _ in tqdm(range(epochs), desc="DOTS adapter training", unit="epoch"):
        order = rng.permutation(len(row))
        for start in range(0, len(row), batch_size):
            pick = order[start:start + batch_size]
            refs = rng.choice(ref_rows, size=ref_size, replace=False)
            p, q = policy[pick], row[pick]
            ref_pass = torch.as_tensor(pass_rate[p[:, None], refs[None, :]], dtype=torch.float32)
            target = torch.as_tensor(pass_rate[p, q], dtype=torch.float32)
            loss = nn.functional.binary_cross_entropy(model(emb[q], emb[refs], ref_pass), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    return model.eval()


def save_adapter(model: DifficultyAdapter, path: str) -> None:
    torch.save({"shape": asdict(model.shape), "state_dict": model.state_dict()}, path)


def load_adapter(path: str) -> DifficultyAdapter:
    """A model written by :func:`save_adapter` (not the authors' checkpoint format)."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        model = DifficultyAdapter(AdapterShape(**saved["shape"]))
        model.load_state_dict(saved["state_dict"])
    except (OSError, KeyError, TypeError, RuntimeError) as e:
        raise ValueError(f"selector=dots: cannot load the predictor {path!r}: {e}. python -m data_prep.dots_predictor "
                         "trains and writes one (the ADS recipes': scripts/ads/prepare_data.sh with DOTS_PREDICTOR=1); "
                         "without one: selector.predictor=attention selector.predictor_file=null") from e
    return model.eval()
