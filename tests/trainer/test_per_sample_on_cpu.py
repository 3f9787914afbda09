"""Per-sample statistics of the installed actor loss against verl's own policy losses (no Ray)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.utils import tensordict_utils as tu
from verl.workers.config import ActorConfig, PolicyLossConfig
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import no_padding_2_padding
from verl_ext.trainer import per_sample


def _config(loss_mode: str, **clip) -> ActorConfig:
    return ActorConfig(strategy="fsdp2", rollout_n=1, ppo_micro_batch_size_per_gpu=1, loss_agg_mode="token-mean",
                       entropy_coeff=0.0, use_kl_loss=False, policy_loss=PolicyLossConfig(loss_mode=loss_mode), **clip)


def _micro_batch(mask, adv, old, new, sample_pos):
    """A worker-side micro-batch as verl's loss sees it: jagged rows, prompts of 3 tokens, no padding."""

    def jagged(rows, dtype=torch.float32):
        return torch.nested.as_nested_tensor([torch.as_tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)

    td = TensorDict({"prompts": jagged([[1, 1, 1]] * len(mask), torch.int64),
                     "responses": jagged([[5] * len(m) for m in mask], torch.int64),
                     "response_mask": jagged(mask, torch.int64), "old_log_probs": jagged(old),
                     "advantages": jagged(adv), per_sample.SAMPLE_POS: torch.as_tensor(sample_pos)},
                    batch_size=len(mask))
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=int(sum(map(sum, mask))), global_batch_size=len(mask))
    # model log-probs over prompt + response tokens; the response's come shifted by one position
    flat = [v for lp in new for v in [-7.0, -7.0, *lp, -7.0]]
    return td, {"log_probs": torch.tensor(flat)}


def _random_batch(gen: torch.Generator, rows: int, row_shift: float, token_noise: float):
    """Rows of random length with holes in the mask, one empty (padding) row, per-token advantages."""
    lengths = torch.randint(1, 12, (rows,), generator=gen).tolist()
    mask, adv, old, new = [], [], [], []
    for i, n in enumerate(lengths):
        m = (torch.rand(n, generator=gen) > 0.2).long()
        m[0] = 1
        if i == rows - 1:
            m.zero_()
        o = -torch.rand(n, generator=gen) * 3
        shift = torch.randn(1, generator=gen) * row_shift
        mask.append(m.tolist())
        adv.append(torch.randn(n, generator=gen).tolist())
        old.append(o.tolist())
        new.append((o + shift + torch.randn(n, generator=gen) * token_noise).tolist())
    return mask, adv, old, new


def _verl_clipfrac(config, mode, data, output, rows=slice(None)) -> tuple[float, float]:
    """verl's ``pg_clipfrac`` and ``pg_clipfrac_lower`` on the padded tensors ``ppo_loss`` builds."""
    log_prob = no_padding_2_padding(output["log_probs"], data)
    fields = data.select("response_mask", "old_log_probs", "advantages").to_padded_tensor()
    _, metrics = get_policy_loss_fn(mode)(
        old_log_prob=fields["old_log_probs"][rows], log_prob=log_prob[rows], advantages=fields["advantages"][rows],
        response_mask=fields["response_mask"].bool()[rows], loss_agg_mode="token-mean", config=config)
    return metrics["actor/pg_clipfrac"], metrics["actor/pg_clipfrac_lower"]


@pytest.mark.parametrize("mode, clip, row_shift, token_noise", [
    ("vanilla", dict(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0), 0.0, 1.0),
    ("vanilla", dict(clip_ratio=0.25, clip_ratio_low=None, clip_ratio_high=None, clip_ratio_c=2.0), 0.0, 1.0),
    ("gspo", dict(clip_ratio_low=3e-4, clip_ratio_high=4e-4), 5e-4, 1e-3),
    ("gspo", dict(clip_ratio=0.2, clip_ratio_low=None, clip_ratio_high=None), 0.3, 0.5),
])
def test_clip_fraction_is_verls_rule_row_by_row(mode, clip, row_shift, token_noise):
    config = _config(mode, **clip)
    gen = torch.Generator().manual_seed(0)
    mask, adv, old, new = _random_batch(gen, 24, row_shift, token_noise)
    data, output = _micro_batch(mask, adv, old, new, sample_pos=list(range(24)))
    _, metrics = per_sample.per_sample_ppo_loss(config, output, data)

    tokens = np.array([sum(m) for m in mask], dtype=np.float64)
    clipfrac = np.array(metrics[per_sample.CLIPFRAC])
    standard, lower = _verl_clipfrac(config, mode, data, output)
    assert 0.05 < standard < 0.95  # the inputs exercise the clip ...
    if mode == "vanilla":
        assert lower > 0.01  # ... and the dual clip
    # token-weighted over the batch: verl's batch metric (the two vanilla clips never hit the same token)
    assert (clipfrac * tokens).sum() / tokens.sum() == pytest.approx(standard + lower, abs=1e-6)
    for row in range(len(mask) - 1):  # and row by row
        assert clipfrac[row] == pytest.approx(sum(_verl_clipfrac(config, mode, data, output, slice(row, row + 1))),
                                              abs=1e-6)
    assert clipfrac[-1] == 0.0  # a row without response tokens


# fixed rows: 3 response tokens (the second masked out), 2 tokens, and a padding row
FIXED = dict(mask=[[1, 0, 1], [1, 1], [0]], adv=[[1.0] * 3, [-1.0] * 2, [0.0]],
             old=[[-1.0, -9.0, -2.0], [-1.0, -0.5], [0.0]], new=[[-0.5, -3.0, -2.5], [-1.5, -0.5], [0.0]],
             sample_pos=[7, 3, -1])


@pytest.mark.parametrize("mode", ["vanilla", "gspo", "gpg"])
def test_log_probs_and_ratio_per_row(mode):
    config = _config(mode)
    data, output = _micro_batch(**FIXED)
    reference, _ = ppo_loss(config, *reversed(_micro_batch(**FIXED)))
    loss, metrics = per_sample.per_sample_ppo_loss(config, output, data)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)  # the loss itself is verl's
    assert metrics[per_sample.POS] == [7, 3, -1]
    assert metrics[per_sample.LOG_PROB] == pytest.approx([-1.5, -1.0, 0.0])
    assert metrics[per_sample.OLD_LOG_PROB] == pytest.approx([-1.5, -0.75, 0.0])
    token_ratio = [(math.exp(0.5) + math.exp(-0.5)) / 2, (math.exp(-0.5) + 1.0) / 2, 0.0]  # padding row: 0
    seq_ratio = [1.0, math.exp(-0.25), 1.0]  # padding row: exp(0)
    if mode == "vanilla":
        assert metrics[per_sample.RATIO] == pytest.approx(token_ratio)
        # row 0: ratio e^.5 with A > 0 clipped, e^-.5 with A > 0 not; row 1: e^-.5 with A < 0 clipped
        assert metrics[per_sample.CLIPFRAC] == pytest.approx([0.5, 0.5, 0.0])
    elif mode == "gspo":
        assert metrics[per_sample.RATIO] == pytest.approx(seq_ratio)
        assert metrics[per_sample.CLIPFRAC] == pytest.approx([0.0, 1.0, 0.0])  # e^-.25 < 0.8 with A < 0
    else:  # no clip rule known: NaN rather than a guess
        assert all(math.isnan(v) for v in metrics[per_sample.CLIPFRAC] + metrics[per_sample.RATIO])


def test_check_clip_rule():
    assert per_sample.CLIP_RULES == ("vanilla", "gspo")
    for mode in per_sample.CLIP_RULES:
        per_sample.check_clip_rule(mode)
    with pytest.raises(ValueError, match=r"'gpg'.*vanilla, gspo"):
        per_sample.check_clip_rule("gpg")


def test_new_lists_are_popped_and_looked_up_by_position():
    metrics = {"actor/pg_loss": [0.1], per_sample.POS: [[3, -1], [0, 3]], per_sample.CLIPFRAC: [[0.1, 0.0], [0.2, 0.4]],
               per_sample.LOG_PROB: [[-1.0, 0.0], [-2.0, -3.0]], per_sample.OLD_LOG_PROB: [[-1.5, 0.0], [-2.5, -1.0]],
               per_sample.RATIO: [[1.1, 0.0], [0.9, float("nan")]]}
    stats = per_sample.pop_per_sample(metrics)
    assert metrics == {"actor/pg_loss": [0.1]}
    assert per_sample.per_position_field(stats, per_sample.LOG_PROB, [0, 3]).tolist() == [-2.0, -3.0]  # last epoch
    assert per_sample.per_position_field(stats, per_sample.OLD_LOG_PROB, np.array([3])).tolist() == [-1.0]
    assert np.isnan(per_sample.per_position_field(stats, per_sample.RATIO, [3])).all()
    assert per_sample.per_position_field(stats, per_sample.ENTROPY, [0]) is None
    with pytest.raises(RuntimeError, match="no per-sample"):
        per_sample.per_position_field(stats, per_sample.RATIO, [0, 5])
    clipfrac, entropy = per_sample.per_position(stats, iter([3, 0]))
    assert clipfrac.tolist() == [0.4, 0.2] and entropy is None
