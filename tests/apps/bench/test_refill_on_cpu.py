"""The async refill bench (verl_ext/apps/bench/refill.py): it times the trainer's choice for a refill of k prompts
(tasks in flight excluded, the budget scaled to k) beside the step's own selection, and reports the share of the
reference step against the 0.1 % target."""

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
    refills = [(k, e, t) for k, e, t in chosen if e is not None]
    assert {k for k, *_ in refills} == {1, 8} and all(len(e) == 2 * bench.BATCH for _, e, _ in refills)
    assert all(len(t) == k and not np.isin(t, e).any() for k, e, t in refills)
    table = bench.report(rows)
    assert "| 3,000 | 8 |" in table and "within target" in table
