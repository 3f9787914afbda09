"""A rollout filter that keeps nothing skips the actor update, through the real trainer path: with
``rollout_filter=drop_degenerate`` step 1 serves a coin task (mixed rewards) and an easy one, step 2 an easy and
a hard one (every group degenerate). Step 2 logs ``data_selection/actor_update_skipped = 1``, trains on no row and
leaves the weights exactly as step 1 saved them; step 1 trained."""

from __future__ import annotations

import pytest

from pathlib import Path

from tests.trainer.scenario import REWARD, common_overrides, hf_weights, model_path, run
from verl_ext.trainer import records

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

ROWS = [(200, "coin", 0), (201, "easy", 1), (202, "easy", 2), (203, "hard", 3)]  # index, kind, rank


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from data_prep.schema import make_row, write_rows

    root = tmp_path_factory.mktemp("skip_update")
    rows = [make_row(data_source="scenario", question=f"Say the number {i}.", ability="test", ground_truth=str(i),
                     index=index, split="train", kind=kind, rank=rank) for i, (index, kind, rank) in enumerate(ROWS)]
    data = {"train": str(write_rows(rows, root / "train.parquet")), "test": str(write_rows(rows[:1], root / "test.parquet")),
            "reward": str(root / "reward.py")}
    (root / "reward.py").write_text(REWARD)
    overrides = common_overrides(data, root / "run", 2, tasks=2, n=4, mini=2) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={root}/run/coin_counts.json",
        "selector=sequential", "selector.sort_by=[rank]", "selector.descending=false",
        "rollout_filter=drop_degenerate", "trainer.save_freq=1",
    ]
    run("verl_ext.main", overrides, root / "run.log")
    return root / "run"


def test_a_step_whose_filter_keeps_nothing_skips_the_update(run_dir):
    dumps, metrics = records.read_dumps(run_dir), records.read_metrics(run_dir)
    assert dumps[1]["tasks"] == [200, 201] and dumps[2]["tasks"] == [202, 203]
    assert len(dumps[1]["kept"]) == 4 and dumps[1]["actor_update_rows"] >= 4
    assert dumps[2]["kept"] == [] and dumps[2]["actor_update_rows"] == 0
    assert metrics[1]["data_selection/actor_update_skipped"] == 0.0
    assert metrics[2]["data_selection/actor_update_skipped"] == 1.0
    assert metrics[2]["data_selection/filter_kept_fraction"] == 0.0
    base = hf_weights(run_dir / "global_step_1" / "actor" / "huggingface")
    after = hf_weights(run_dir / "global_step_2" / "actor" / "huggingface")
    assert base.keys() == after.keys() and all((base[k] == after[k]).all() for k in base)
    initial = hf_weights(Path(model_path()))  # step 1 did train
    assert any(not (initial[k] == base[k]).all() for k in base if k in initial)
