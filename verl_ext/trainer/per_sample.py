"""Per-sample statistics from the actor update (stock verl reports batch means only).

The one change to the update is the loss function installed in the actor workers
(``set_loss_fn``, ``workers/engine_workers.py:530``): :func:`per_sample_ppo_loss` calls verl's own
``ppo_loss`` unchanged and, for rows carrying a ``sample_pos`` field, appends plain lists
``per_sample/*`` to the metrics. Plain lists travel through verl's metric plumbing untouched
(micro-batches appended, dp ranks gathered, mini-batches appended) and reach the trainer, which pops
them (:func:`pop_per_sample`) before verl reduces the rest. Per row, at the last update epoch:

* ``clipfrac``: share of the row's response tokens whose clip is active under the rule of the active
  ``policy_loss.loss_mode`` (read as verl does, ``workers/utils/losses.py:101``), the per-row version
  of verl's batch metrics (``trainer/ppo/core_algos.py``):

  - ``vanilla``: standard clip (``actor/pg_clipfrac``, l.1353) or dual clip for negative advantages
    (``actor/pg_clipfrac_lower``, l.1357); the two are disjoint, so the batch share is their sum;
  - ``gspo``: clip of the sequence-level ratio (``actor/pg_clipfrac``, l.1583-1610);
  - other modes: NaN (:func:`check_clip_rule` refuses them up front);
* ``log_prob`` / ``old_log_prob``: mean over response tokens of the current / old log-probs the loss saw;
* ``ratio``: mean token importance ratio (vanilla, clamped as verl) or the sequence ratio (gspo);
  NaN for other modes;
* ``entropy``: mean token entropy under the policy being updated, when the update computes entropy
  (``entropy_coeff != 0`` or ``actor.calculate_entropy``); otherwise the trainer uses the
  old-log-prob pass (same weights before the first optimizer step), which it re-runs on the replayed rows
  when the rollout filter needs entropy (``RolloutFilter.needs_entropy``).

The loss also sets the ``seq-mean-*`` divisor to the real rows of the mini-batch (``mb_real_rows``,
see :mod:`verl_ext.trainer.batching`) and reports verl's token count of the row's mini-batch
(``per_sample/mb_tokens``, with the divisor it used, ``per_sample/divisor``), with which the trainer
checks that verl laid the rows out as planned.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from verl.utils import tensordict_utils as tu
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import no_padding_2_padding

POS, CLIPFRAC, ENTROPY = "per_sample/pos", "per_sample/clipfrac", "per_sample/entropy"
LOG_PROB, OLD_LOG_PROB, RATIO = "per_sample/log_prob", "per_sample/old_log_prob", "per_sample/ratio"
MB_TOKENS = "per_sample/mb_tokens"  # verl's batch_num_tokens of the row's mini-batch (all ranks)
DIVISOR = "per_sample/divisor"  # the seq-mean divisor (global_batch_size) the row's loss used
SAMPLE_POS, MB_REAL_ROWS = "sample_pos", "mb_real_rows"
KEYS = (POS, CLIPFRAC, ENTROPY, LOG_PROB, OLD_LOG_PROB, RATIO, MB_TOKENS, DIVISOR)


def check_clip_rule(loss_mode: str) -> None:
    """Raise ``ValueError`` unless per-sample clip fractions are known for ``loss_mode``."""
    if loss_mode not in CLIP_RULES:
        raise ValueError(f"per-sample clip fractions are not available for policy_loss.loss_mode={loss_mode!r}; "
                         f"supported loss modes: {', '.join(CLIP_RULES)}")


def per_sample_ppo_loss(config, model_output, data, dp_group=None):
    """verl's ``ppo_loss`` plus per-sample statistics (plain lists) in its metrics."""
    keys = data.keys()
    if MB_REAL_ROWS in keys:
        tu.assign_non_tensor(data, global_batch_size=int(data[MB_REAL_ROWS][0]))
    loss, metrics = ppo_loss(config, model_output, data, dp_group)
    if SAMPLE_POS in keys:
        metrics.update(_per_sample(config, model_output, data))
    return loss, metrics


def _clip_range(config) -> tuple[float, float]:
    low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    return low, high


def _row_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, values, 0.0).sum(-1) / mask.sum(-1).clamp(min=1)


def _clip_vanilla(config, log_prob, old_log_prob, adv, mask):
    """Clipped tokens and row ratios of ``compute_policy_loss_vanilla`` (core_algos.py:1320-1359)."""
    low, high = _clip_range(config)
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0))
    loss1, loss2 = -adv * ratio, -adv * torch.clamp(ratio, 1 - low, 1 + high)
    dual = torch.gt(torch.maximum(loss1, loss2), -adv * config.get("clip_ratio_c", 3.0)) & (adv < 0)
    return torch.gt(loss2, loss1) | dual, _row_mean(ratio, mask)


def _clip_gspo(config, log_prob, old_log_prob, adv, mask):
    """Clipped tokens and row ratios of ``compute_policy_loss_gspo`` (core_algos.py:1575-1610)."""
    low, high = _clip_range(config)
    seq_lengths = torch.sum(mask, dim=-1).clamp(min=1)
    seq_log_ratio = torch.sum((log_prob - old_log_prob) * mask, dim=-1) / seq_lengths
    ratio = torch.exp(torch.clamp(log_prob - log_prob + seq_log_ratio.unsqueeze(-1), max=10.0))
    loss1, loss2 = -adv * ratio, -adv * torch.clamp(ratio, 1 - low, 1 + high)
    return torch.gt(loss2, loss1), torch.exp(torch.clamp(seq_log_ratio, max=10.0))


_CLIP_FNS = {"vanilla": _clip_vanilla, "gspo": _clip_gspo}
CLIP_RULES = tuple(_CLIP_FNS)  # loss modes whose clip rule is reproduced here


@torch.no_grad()
def _per_sample(config, model_output, data) -> dict[str, list]:
    log_prob = no_padding_2_padding(model_output["log_probs"], data).float()
    fields = data.select("response_mask", "old_log_probs", "advantages").to_padded_tensor()
    mask = fields["response_mask"].bool()
    old_log_prob = fields["old_log_probs"].float()
    adv = fields["advantages"].float()
    pos = data[SAMPLE_POS].reshape(-1).tolist()
    out = {POS: pos, LOG_PROB: _row_mean(log_prob, mask).tolist(),
           OLD_LOG_PROB: _row_mean(old_log_prob, mask).tolist()}
    clip_fn = _CLIP_FNS.get(config.policy_loss.get("loss_mode", "vanilla"))  # as ppo_loss reads it
    if clip_fn is None:
        out[CLIPFRAC] = out[RATIO] = [float("nan")] * len(pos)
    else:
        clipped, ratio = clip_fn(config, log_prob, old_log_prob, adv, mask)
        out[CLIPFRAC], out[RATIO] = _row_mean(clipped.float(), mask).tolist(), ratio.tolist()
    out[MB_TOKENS] = [int(data["batch_num_tokens"])] * len(pos)
    out[DIVISOR] = [int(data["global_batch_size"])] * len(pos)
    entropy = model_output.get("entropy", None)
    if entropy is not None:
        out[ENTROPY] = _row_mean(no_padding_2_padding(entropy, data).float(), mask).tolist()
    return out


def _flat(values) -> list:
    out: list = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flat(v))
        else:
            out.append(v)
    return out


def pop_per_sample(metrics: dict) -> dict[str, list]:
    """Remove the ``per_sample/*`` lists from an ``update_actor`` metrics dict (flattened)."""
    return {k: _flat(metrics.pop(k)) for k in KEYS if k in metrics}


def per_position_field(stats: dict[str, list], name: str, positions: Iterable[int]) -> np.ndarray | None:
    """Values of the per-sample key ``name`` for each of ``positions`` (``None`` if the update reported
    no such key); rows seen several times (``ppo_epochs > 1``) keep their last value."""
    if name not in stats:
        return None
    positions = [int(p) for p in positions]
    values = dict(zip(stats.get(POS, []), stats[name]))
    missing = sorted(set(positions) - set(values))
    if missing:
        raise RuntimeError(f"the actor update reported no per-sample statistics for positions {missing[:8]}")
    return np.array([values[p] for p in positions], dtype=np.float64)


def per_position(stats: dict[str, list], positions: Iterable[int]) -> tuple[np.ndarray, np.ndarray | None]:
    """Clip fraction and entropy (``None`` if the update computed none) for each of ``positions``;
    rows seen several times (``ppo_epochs > 1``) keep their last value."""
    positions = [int(p) for p in positions]
    clipfrac = per_position_field({CLIPFRAC: [], **stats}, CLIPFRAC, positions)
    return clipfrac, per_position_field(stats, ENTROPY, positions)
