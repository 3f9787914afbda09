"""The async selection bench (verl_ext/apps/bench/refill.py): it times the trainer's choice for a refill of k prompts
(tasks in flight excluded, the budget scaled to k) beside the step's own selection, and reports a step's whole
selection (its batch and its refills) against the 0.1 % per-step target."""

import numpy as np

from verl_ext.apps.bench import refill as bench


def test_rows_time_each_refill_size_beside_the_steps_selection(monkeypatch):
    chosen = []
    select = bench.BotsSelector.select

    def watched(self, step, k, exclude=None):
        tasks = select(self, step, k, exclude=exclude)
        chosen.append((k, None if exclude is None else np.asarray(exclude), tasks))
        return tasks

    monkeypatch.setattr(bench.BotsSelector, "select", watched)
    rows = bench.run(sizes=(3000,), refills=(1, 8), repeats=1)
    assert [(r["tasks"], r["refill"]) for r in rows] == [(3000, 1), (3000, 8)]
    assert all(r["refill_ms"] > 0 and r["step_select_ms"] > 0 and r["within_target"] for r in rows)
    target_ms = bench.TARGET_SHARE * bench.REFERENCE_STEP_S * 1e3
    for r in rows:  # the per-step budget: the step's batch plus as many refills as fit, and not one more
        fit = r["refills_within_target"]
        assert r["step_select_ms"] + fit * r["refill_ms"] <= target_ms < r["step_select_ms"] + (fit + 1) * r["refill_ms"]
        assert r["step_with_one_refill_share"] == bench.of_reference_step((r["step_select_ms"] + r["refill_ms"]) / 1e3)
    refills = [(k, e, t) for k, e, t in chosen if e is not None]
    assert {k for k, *_ in refills} == {1, 8} and all(len(e) == 2 * bench.BATCH for _, e, _ in refills)
    assert all(len(t) == k and not np.isin(t, e).any() for k, e, t in refills)
    table = bench.report(rows)
    assert "| 3,000 | 8 |" in table and "within target" in table
