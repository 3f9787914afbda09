"""Every paper setting with ``+async=colocate`` and ``+async=separate`` (verl's colocate_async and separate_async with
the three axes): it composes, and the start-up check either accepts it or refuses the one component that has
no rule for stale evidence, naming the reason and the nearest setting that works. No training here
(tests/trainer/test_async_trainer_on_cpu.py)."""

from __future__ import annotations

import pytest

from tests.recipes.recipes import RECIPES, compose_recipe
from verl_ext.trainer.startup_checks import ASYNC_REFUSED, check_supported

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

SETTINGS = sorted((d.name, f.stem) for d in RECIPES.iterdir() if d.is_dir()
                  for f in d.glob("*.yaml") if not f.stem.startswith("_"))
REFUSED = {"ads": "selector=ads"}  # the recipes whose own method cannot run async


@pytest.mark.parametrize("variant", ["colocate", "separate"])
@pytest.mark.parametrize(("group", "setting"), SETTINGS, ids=[f"{g}/{s}" for g, s in SETTINGS])
def test_paper_settings_run_async_or_say_why_not(group, setting, variant):
    cfg = compose_recipe(group, setting, "recipe.data_dir=/data", "actor_rollout_ref.model.path=/m",
                         f"+async={variant}")
    assert cfg.trainer.v1.trainer_mode == f"verl_ext_{variant}_async"
    assert cfg.trainer.v1.sampler.max_off_policy_threshold == 2
    if variant == "separate":  # a standalone rollout pool, one weight sync and one mini-batch a step
        assert not cfg.actor_rollout_ref.hybrid_engine and cfg.actor_rollout_ref.rollout.nnodes == 1
        assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == cfg.data.train_batch_size
    if not any(cfg[axis].name == name for axis, name in ASYNC_REFUSED):
        check_supported(cfg)
        return
    with pytest.raises(ValueError, match="nearest: ") as err:
        check_supported(cfg)
    assert REFUSED.get(group) in str(err.value)


def test_replaying_filters_run_async():
    """CBS's replay and DOTS+RR's buffer (with BOTS: DOTS itself is refused) hold their rows within the threshold."""
    base = ("cbs", "cpu_embedded", "recipe.data_dir=/data", "actor_rollout_ref.model.path=/m", "+async=colocate")
    for rollout_filter in ("cbs_star", "cbs", "replay_fifo"):
        check_supported(compose_recipe(*base, f"rollout_filter={rollout_filter}"))
