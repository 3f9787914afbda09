"""Per-sample clip fraction and entropy from the actor update (stock verl reports batch means only).

The one change to the update is the loss function installed in the actor workers
(``set_loss_fn``, ``workers/engine_workers.py:530``): :func:`per_sample_ppo_loss` calls verl's own
``ppo_loss`` unchanged and, for rows carrying a ``sample_pos`` field, appends plain lists
``per_sample/{pos,clipfrac,entropy}`` to the metrics. Plain lists travel through verl's metric
plumbing untouched (micro-batches appended, dp ranks gathered, mini-batches appended) and reach the
trainer, which pops them (:func:`pop_per_sample`) before verl reduces the rest.

* clip fraction: share of the row's response tokens where the PPO clip is active, the per-row
  version of verl's ``actor/pg_clipfrac`` (``core_algos.py:1353``) at the last update epoch;
* entropy: mean token entropy of the row under the policy being updated, when the update computes
  entropy (``entropy_coeff != 0`` or ``actor.calculate_entropy``); otherwise the trainer uses the
  old-log-prob pass (same weights before the first optimizer step).

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
MB_TOKENS = "per_sample/mb_tokens"  # verl's batch_num_tokens of the row's mini-batch (all ranks)
DIVISOR = "per_sample/divisor"  # the seq-mean divisor (global_batch_size) the row's loss used
SAMPLE_POS, MB_REAL_ROWS = "sample_pos", "mb_real_rows"


def per_sample_ppo_loss(config, model_output, data, dp_group=None):
    """verl's ``ppo_loss`` plus per-sample statistics (plain lists) in its metrics."""
    keys = data.keys()
    if MB_REAL_ROWS in keys:
        tu.assign_non_tensor(data, global_batch_size=int(data[MB_REAL_ROWS][0]))
    loss, metrics = ppo_loss(config, model_output, data, dp_group)
    if SAMPLE_POS in keys:
        metrics.update(_per_sample(config, model_output, data))
    return loss, metrics


@torch.no_grad()
def _per_sample(config, model_output, data) -> dict[str, list]:
    log_prob = no_padding_2_padding(model_output["log_probs"], data).float()
    fields = data.select("response_mask", "old_log_probs", "advantages").to_padded_tensor()
    mask = fields["response_mask"].bool()
    adv = fields["advantages"].float()
    ratio = torch.exp(torch.clamp(log_prob - fields["old_log_probs"].float(), -20.0, 20.0))
    low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    clipped = (-adv * torch.clamp(ratio, 1 - low, 1 + high)) > (-adv * ratio)
    tokens = mask.sum(-1).clamp(min=1)
    pos = data[SAMPLE_POS].reshape(-1).tolist()
    out = {
        POS: pos,
        CLIPFRAC: ((clipped & mask).sum(-1) / tokens).tolist(),
        MB_TOKENS: [int(data["batch_num_tokens"])] * len(pos),
        DIVISOR: [int(data["global_batch_size"])] * len(pos),
    }
    entropy = model_output.get("entropy", None)
    if entropy is not None:
        entropy = no_padding_2_padding(entropy, data).float()
        out[ENTROPY] = ((entropy * mask).sum(-1) / tokens).tolist()
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
    return {k: _flat(metrics.pop(k)) for k in (POS, CLIPFRAC, ENTROPY, MB_TOKENS, DIVISOR) if k in metrics}


def per_position(stats: dict[str, list], positions: Iterable[int]) -> tuple[np.ndarray, np.ndarray | None]:
    """Clip fraction and entropy (``None`` if the update computed none) for each of ``positions``;
    rows seen several times (``ppo_epochs > 1``) keep their last value."""
    positions = [int(p) for p in positions]
    clip = dict(zip(stats.get(POS, []), stats.get(CLIPFRAC, [])))
    missing = sorted(set(positions) - set(clip))
    if missing:
        raise RuntimeError(f"the actor update reported no per-sample statistics for positions {missing[:8]}")
    clipfrac = np.array([clip[p] for p in positions], dtype=np.float64)
    if ENTROPY not in stats:
        return clipfrac, None
    ent = dict(zip(stats[POS], stats[ENTROPY]))
    return clipfrac, np.array([ent[p] for p in positions], dtype=np.float64)
