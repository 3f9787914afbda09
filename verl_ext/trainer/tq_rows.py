"""Rows read back from TransferQueue (``tq.kv_batch_get``) as Python and NumPy values, per rollout."""

from __future__ import annotations

import numpy as np
import torch


def as_list(value) -> list:
    """A fetched per-row field as a list: a tensor or a ``NonTensorStack`` (``tolist``), or any sequence."""
    return value.tolist() if hasattr(value, "tolist") else list(value)


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """Per row, the mean of ``values`` over its response tokens (``mask``), float64."""
    return ((values.float() * mask).sum(-1) / mask.sum(-1).clamp(min=1)).numpy().astype(np.float64)


def rollout_rewards(rm_scores: torch.Tensor) -> np.ndarray:
    """Per row, the rollout's reward: its token-level ``rm_scores`` summed (verl puts the score on the last token)."""
    return rm_scores.float().sum(-1).numpy().astype(np.float64)
