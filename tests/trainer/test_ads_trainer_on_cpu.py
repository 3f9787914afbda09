"""ADS through the real trainer with a variable number of prompts per step: 9 scenario tasks in three clusters of
sizes 4, 3 and 2 (easy / hard / coin rewards, independent of the text), 2 clusters per step with mini-clusters of
B = 3, so a step serves 6 prompts, or 5 when the 2-task cluster is drawn, of the batch of 6
(data.train_batch_size). Each step generates 4 rollouts for every chosen prompt (the run's budget scaled to the
prompts chosen), verl waits for exactly those prompts, and a fresh selector replayed on the run's recorded rewards
chooses exactly what the run chose. The rollout filter is DOTS+RR's replay (``replay_fifo``): informative rollouts of
earlier steps join the actor update."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer.test_axes_trainer_on_cpu import REWARD, common_overrides, run
from verl_ext.axes import StepResults, TaskPool, build_selector
from verl_ext.trainer import records

STEPS, SEED, N = 4, 2, 4
CLUSTERS = [0, 0, 0, 0, 1, 1, 1, 2, 2]
RANKS = [0, 1, 2, 3, 0, 1, 2, 0, 1]
KINDS = ["easy", "easy", "coin", "hard", "coin", "coin", "hard", "easy", "coin"]
SELECTOR = {"name": "ads", "clusters_per_step": 2, "mini_cluster_size": 3, "epoch_steps": 0}


def _rows():
    from data_prep.schema import make_row

    return [make_row(data_source="scenario", question=f"Say the number {i}.", ability="test", ground_truth=str(i),
                     index=200 + i, split="train", kind=kind, cluster_id=c, rank_in_cluster=r)
            for i, (kind, c, r) in enumerate(zip(KINDS, CLUSTERS, RANKS))]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from data_prep.schema import write_rows

    root = tmp_path_factory.mktemp("ads")
    rows = _rows()
    write_rows(rows, root / "train.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    data = {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"), "reward": str(root / "reward.py")}
    overrides = common_overrides(data, root / "run", STEPS, tasks=6, n=N, mini=3) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={root}/run/coin_counts.json",
        f"data.seed={SEED}", "rollout_filter=replay_fifo", "rollout_filter.fraction=0.25",
        *(f"selector.{k}={v}" if k != "name" else f"selector={v}" for k, v in SELECTOR.items()),
    ]
    run("verl_ext.main", overrides, root / "run.log")
    return root / "run"


def test_steps_serve_the_chosen_prompts_only(run_dir):
    dumps = records.read_dumps(run_dir)
    assert sorted(dumps) == list(range(1, STEPS + 1))
    sizes = {len(d["tasks"]) for d in dumps.values()}
    assert sizes <= {5, 6} and 5 in sizes  # the 2-task cluster was drawn at least once
    for d in dumps.values():
        assert d["counts"] == [N] * len(d["tasks"])  # budget 24 scaled to the prompts chosen
        assert sorted(d["rollout_task"]) == sorted(t for t in d["tasks"] for _ in range(N))
        fresh = N * len(d["tasks"])
        trained = sorted({p for p in d["actor_update"]["pos"] if p >= 0})
        assert trained == list(range(fresh + len(d["replayed"])))  # every fresh rollout plus the replayed ones
    replayed = [(step, rid) for step, d in dumps.items() for rid in d["replayed"]]
    assert replayed and all(rid >> 32 < step for step, rid in replayed)  # from earlier steps


def test_a_replayed_selector_chooses_what_the_run_chose(run_dir):
    pool = TaskPool(np.array([200 + i for i in range(len(KINDS))]),
                    {"cluster_id": np.array(CLUSTERS, dtype=float), "rank_in_cluster": np.array(RANKS, dtype=float),
                     "kind": np.array(KINDS, dtype=object)})
    selector = build_selector(SELECTOR, pool, SEED)
    for step, d in sorted(records.read_dumps(run_dir).items()):
        assert selector.select(step, 6).tolist() == d["tasks"], step
        selector.update(step, StepResults.from_rewards(d["rollout_task"], d["rollout_reward"]))


def test_the_logged_cluster_distribution_is_plotted(run_dir, tmp_path):
    from eval.plots import CLUSTER_PREFIX, cluster_probs
    from eval.run_logs import Run

    run = Run("ads", run_dir)
    for step in range(1, STEPS + 1):
        probs = [run.metrics[step][f"{CLUSTER_PREFIX}{c}"] for c in (0, 1, 2)]
        assert sum(probs) == pytest.approx(1.0) and min(probs) > 0
    (path,) = cluster_probs({"ads": run}, tmp_path)
    assert path.stat().st_size > 0
