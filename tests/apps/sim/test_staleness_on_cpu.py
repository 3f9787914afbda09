"""The simulator's asynchronous mode (verl_ext/apps/sim/staleness.py): with no queue it is the synchronous
loop, record for record; with one, rollouts train later the deeper the queue, verl's eviction drops the slowest
(hard) groups first, a component with no stale-evidence rule is refused, and the study writes its table and plot."""

import json

import numpy as np
import pytest

from verl_ext.apps.sim import staleness
from verl_ext.apps.sim.loop import Scenario, Setting, run
from verl_ext.apps.sim.world import WorldConfig

SC = Scenario(name="t", batch=32, rollouts=8, steps=16, columns=("bots",), eval_every=8,
              world=WorldConfig(tasks=1_500, held_out=200))


@pytest.mark.parametrize("setting", [Setting("uniform"), Setting("bots+coba", {"name": "bots"}, {"name": "coba"})])
def test_no_queue_is_the_synchronous_loop(setting):
    sync, asynchronous = run(SC, setting, 0), staleness.run_async(SC, setting, 0, depth=0)
    for key in sync:
        if key != "ms_per_step":
            assert asynchronous[key] == sync[key], key
    assert asynchronous["lag_mean"] == [0.0] * SC.steps and sum(asynchronous["evicted"]) == 0


def test_a_deeper_queue_trains_later_and_evicts_the_slow_hard_groups_first():
    setting = Setting("uniform")
    lags = [np.mean(staleness.run_async(SC, setting, 0, depth=d)["lag_mean"]) for d in (1, 2, 4)]
    assert 0 < lags[0] < lags[1] < lags[2]
    records = [staleness.run_async(SC, setting, seed, depth=2) for seed in range(4)]
    submitted = np.sum([r["submitted"] for r in records], axis=0)
    evicted = np.sum([r["evicted"] for r in records], axis=0)
    assert evicted.sum() > 0
    hard, easy = (evicted / submitted)[[0, 2]]
    assert hard > easy
    relaxed = staleness.run_async(SC, setting, 0, depth=2, threshold=50)
    assert sum(relaxed["evicted"]) == 0  # nothing exceeds a loose threshold
    overlapping = staleness.run_async(SC, setting, 0, depth=2, overlap=True)
    assert np.mean(overlapping["lag_mean"]) > 0


def test_what_the_async_simulation_cannot_model_is_refused(monkeypatch):
    from verl_ext.axes.bots import BotsSelector

    with pytest.raises(ValueError, match="does not expire them"):  # replayed rows: the trainer expires them
        staleness.run_async(SC, Setting("cbs", rollout_filter={"name": "cbs"}), 0, depth=1)
    staleness.run_async(SC, Setting("cbs", rollout_filter={"name": "cbs"}), 0, depth=0)  # synchronous: fine
    monkeypatch.setattr(BotsSelector, "stale_evidence", None)
    with pytest.raises(ValueError, match="no rule for stale evidence"):
        staleness.run_async(SC, Setting("bots", {"name": "bots"}), 0, depth=1)


def test_the_study_writes_its_table_json_and_plot(tmp_path):
    assert staleness.main(["--out", str(tmp_path), "--seeds", "2", "--steps", "6", "--tasks", "600", "--batch", "16",
                           "--worlds", "base", "--depths", "0,2"]) == 0
    rows = json.loads((tmp_path / "staleness.json").read_text())
    assert len(rows) == len(staleness.SETTINGS) * 2 * 2
    text = (tmp_path / "staleness.md").read_text()
    assert "Simulated" in text and "| base | `bots+coba` | 2 |" in text
    assert (tmp_path / "staleness.png").stat().st_size > 10_000
