"""The async selection bench (verl_ext/apps/bench/refill.py): it times the trainer's choice for a refill of k prompts
(tasks in flight excluded, the budget scaled to k) beside the step's own selection (the warm-up window excluded), and reports a step's whole
selection (its batch and its refills) against the 0.1 % per-step target."""

import numpy as np

from verl_ext.apps.bench import refill as bench


def test_rows_time_each_refill_size_beside_the_steps_selection(monkeypatch):
    chosen = []
    select = bench.BotsSelector.select

    def watched(self, step, k, exclude=None):
        tasks = select(self, step, k, exclude=exclude)
        chosen.append((k, np.asarray(exclude), tasks))
        return tasks

    monkeypatch.setattr(bench.BotsSelector, "select", watched)
    rows = bench.run(sizes=(3000,), refills=(1, 8), repeats=1)
    assert [(r["tasks"], r["refill"]) for r in rows] == [(3000, 1), (3000, 8)]
    assert all(r["refill_ms"] > 0 and r["step_select_ms"] > 0 and r["within_target"] for r in rows)
    target_ms = bench.TARGET_SHARE * bench.REFERENCE_STEP_S * 1e3
    for r in rows:  # the per-step budget: the step's batch plus as many refills as fit, and not one more
        fit = r["refills_within_target"]
        assert r["step_select_ms"] + fit * r["refill_ms"] <= target_ms < r["step_select_ms"] + (fit + 1) * r["refill_ms"]
    # the step's batch is chosen with the warm-up window in flight, each refill with the window and the step's batch
    assert {(k, len(e)) for k, e, _ in chosen} == {(bench.BATCH, bench.BATCH), (1, 2 * bench.BATCH),
                                                   (8, 2 * bench.BATCH)}
    window = next(e for k, e, _ in chosen if k == bench.BATCH)
    assert all(np.isin(window, e).all() for k, e, _ in chosen if k != bench.BATCH)
    assert all(len(t) == k and not np.isin(t, e).any() for k, e, t in chosen)
    table = bench.report(rows)
    assert "| 3,000 | 8 |" in table and "within target" in table
