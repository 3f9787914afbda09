"""The CoBA bench (verl_ext/apps/bench/coba.py): the vectorised greedy on the whole gain table gives the heap's counts,
ties included; the report gives both ratios (table and heap against the allocator)."""

import numpy as np
import pytest

from verl_ext.axes.budget_solvers import geometric_allocate, geometric_gain, heap_allocate
from verl_ext.axes.coba import CobaAllocatorConfig, coba_gains
from verl_ext.apps.bench import coba as bench


@pytest.mark.parametrize(("m", "low", "high", "total"), [(40, 2, 128, 640), (40, 2, 128, 40 * 120), (300, 1, 9, 1500)])
def test_table_greedy_gives_the_heap_counts(m, low, high, total):
    c = CobaAllocatorConfig()
    rng = np.random.default_rng(m + total)
    p = np.clip(rng.binomial(16, rng.random(m)) / 16, c.p_min, c.p_max)  # observed k/16: many equal gains
    s, r = coba_gains(p, c.kappa - 2.0, 2.0, c.tau)
    heap = heap_allocate(geometric_gain(s.tolist(), r.tolist()), m, low, high, total)
    table = bench.table_greedy(s, r, low, high, total)
    assert table.sum() == total and table.tolist() == heap.tolist()
    assert geometric_allocate(s, r, low, high, total).tolist() == heap.tolist()


def test_report_gives_both_ratios_and_the_step_share():
    rows = bench.run(sizes=((64, 1024),), repeats=1)
    [r] = rows
    assert r["identical"] and r["table_identical"] and r["dp_same_value"]
    assert r["table_over_fast"] > 0 and r["heap_over_fast"] > 0 and r["share_of_reference_step"] > 0
    table = bench.report(rows)
    assert "table / fast" in table and "heap / fast" in table and "| yes | yes |" in table
