"""The calibration's comparison code (verl_ext/apps/sim/calibration.py) on recorded-shape input: real runs' step dumps
as the trainer writes them, the simulator on a world fitted to a small pool; no trainer run here."""

import numpy as np
import pytest

from verl_ext.apps import study
from verl_ext.apps.sim import calibration


def test_a_real_runs_dumps_give_the_simulators_per_step_metrics():
    def dump(task, group, reward, counts):
        return {"rollout_task": task, "rollout_group": group, "rollout_reward": reward, "counts": counts,
                "rollout_advantage": [0.0] * 4, "rollout_id": [0] * 4, "kept": [0, 1, 2, 3], "replayed": []}

    dumps = {2: dump([7, 7, 9, 9], [0, 0, 1, 1], [1.0, 0.0, 1.0, 1.0], [2, 2]),
             1: dump([3, 3, 3, 5], [0, 0, 0, 1], [0.0, 0.0, 0.0, 1.0], [3, 1])}
    series = study.series_of_dumps(dumps)
    assert set(calibration.METRICS) <= set(series)
    assert series["etr"] == [0.0, 0.5]  # step 1: task 3 never solved, task 5 always; step 2: task 7 half
    assert series["degenerate"] == [1.0, 0.5]
    assert series["observed_p"] == [0.5, 0.75]
    assert series["counts_std"] == [1.0, 0.0]  # step 1: 3 and 1 rollouts


def test_the_simulated_side_runs_the_demos_components_and_the_table_says_where_it_differs(tmp_path):
    rng = np.random.default_rng(0)
    pool = {"index": np.arange(24) * 5 + 11, "weak": rng.uniform(0, 0.5, 24), "strong": rng.uniform(0, 1, 24)}
    sim = calibration.simulate(pool, tasks=6, budget=24, steps=3, seeds=[0, 1, 2, 3], floor=0.125)
    assert set(sim) == {"uniform", "bots+coba"}
    assert all(len(v["etr"]) == 3 for runs in sim.values() for v in runs.values())
    assert all(v["counts_std"] == [0.0, 0.0, 0.0] for v in sim["uniform"].values())  # 4 rollouts each
    real = {m: {s: {**v, "etr": [0.0, 0.0, 0.0]} for s, v in runs.items()} for m, runs in sim.items()}
    table = calibration.write(real, sim, tmp_path, "note")
    etr_rows = [line for line in table.splitlines() if "| ETR |" in line]
    same_rows = [line for line in table.splitlines() if "rollouts per task" in line and "uniform" in line]
    assert len(etr_rows) == 2 and all(r.endswith("| differ |") for r in etr_rows)
    assert same_rows[0].endswith("| agree |")
    assert (tmp_path / "calibration.png").stat().st_size > 1000 and "note" in (tmp_path / "calibration.md").read_text()


def test_only_the_axes_are_simulated():
    assert calibration.axis_configs(("selector=bots", "selector.implicit_weight=0.5"))["selector"][
        "implicit_weight"] == 0.5
    with pytest.raises(ValueError, match="only selector"):
        calibration.axis_configs(("actor_rollout_ref.actor.optim.lr=1e-5",))
