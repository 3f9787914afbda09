"""The progress-selector cost benchmark (verl_ext/apps/bench/progress.py) on a small pool: every variant runs, timings
and ratios to uniform and to the reference bucket sampler are finite and positive, the report has a row per variant,
``python -m verl_ext.apps.bench`` knows it; the reference computes each bucket preset's distribution and draws its
prompts."""

import math

import numpy as np
import pytest

from verl_ext.axes import build_selector
from verl_ext.axes.progress import bound_to_simplex
from verl_ext.apps.bench import progress as bench
from verl_ext.apps.bench.__main__ import BENCHMARKS

BUCKET_PRESETS = ("bucket_uniform", "empirical", "conservative", "density_ratio", "random_buckets")


def test_bench_times_every_variant_against_uniform():
    rows = bench.run(sizes=(200, 300), batch_size=16, rollouts=4, steps=3, warmup=1)
    assert [(r["tasks"], r["selector"]) for r in rows] == [(n, s) for n in (200, 300) for s in bench.SELECTORS]
    for r in rows:
        for key in ("step_ms", "select_ms", "update_ms", "over_uniform"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["selector"], key, r[key])
        assert r["step_ms"] == r["select_ms"] + r["update_ms"]
        if r["selector"] in BUCKET_PRESETS:
            assert math.isfinite(r["reference_over_selector"]) and r["reference_ms"] > 0, r["selector"]
        else:
            assert r["reference_ms"] is r["reference_over_selector"] is None
        assert r["share_of_reference_step"] == pytest.approx(r["step_ms"] / 1e3 / 155.0)
    assert all(r["over_uniform"] == 1.0 for r in rows if r["selector"] == "uniform")
    table = bench.report(rows)
    assert table.count("\n| 200 | ") == len(bench.SELECTORS) and "prompt_utility" in table
    assert "| / uniform | reference ms | reference / selector | % of step |" in table
    assert BENCHMARKS["progress"] == (bench.run, bench.report)


def test_bench_composes_the_presets_of_the_config_group():
    configs = bench.selector_configs()
    assert configs["uniform"] == {"name": "uniform"} and configs["prompt_utility"]["name"] == "prompt_utility"
    assert (configs["conservative"]["prior"], configs["conservative"]["cap"]) == ("data", 0.18)
    assert configs["random_buckets"]["random_buckets"] == 16 and configs["density_ratio"]["ratio_clip"] == [0.5, 1.5]


@pytest.mark.parametrize("name", BUCKET_PRESETS)
def test_reference_bucket_sampler_computes_the_presets_distribution_and_draws_its_prompts(name):
    config = bench.selector_configs((name,))[name]
    pool, rate = bench.countdown_pool(3000, seed=0)
    selector, reference = build_selector(config, pool, 0), bench.BucketSampler(config, pool.columns["bucket"], 0)
    draws = np.random.default_rng(1)
    for step in range(12):
        p = selector.distribution()
        np.testing.assert_allclose(reference.distribution(), p, rtol=1e-12, atol=1e-15)
        tasks = np.asarray(selector.select(step, 64))
        assert reference.select(64, p).tolist() == tasks.tolist()  # same seed: the same prompts, same order
        reward, results = bench.scored(tasks, rate, draws.random((64, 8)), draws.random((64, 8)))
        selector.update(step, results)
        reference.update(tasks, reward)
    assert reference.seen.all() and len(np.unique(p)) > 1  # every bucket observed, the utility moved P


def test_reference_bounds_are_the_exact_projection_when_both_sides_bind():
    """density_ratio: buckets over 1.5 P_data and under 0.5 P_data in the same distribution; the reference's
    bisection and the selector's exact projection agree and sum to 1 (clipping the violators and renormalising the
    rest, the rule the reference had before, gives bucket 1 0.1 and bucket 3 0.6 here: not the projection)."""
    config = bench.selector_configs(("density_ratio",))["density_ratio"] | {"epsilon": 0.0, "temperature": 0.05}
    reference = bench.BucketSampler(config, np.repeat(np.arange(4), [10, 20, 30, 40]), 0)
    p = np.array([0.69, 0.047, 0.0001, 0.2629])  # buckets 0 and 2 end at a bound, 1 and 3 inside
    q = reference._bounded(p)
    assert q[0] == pytest.approx(reference.upper[0]) and q[2] == pytest.approx(reference.lower[2])  # both sides
    assert q[1] == pytest.approx(0.10625, abs=1e-4) and q[3] == pytest.approx(0.59375, abs=1e-4)
    np.testing.assert_allclose(q, bound_to_simplex(p, reference.lower, reference.upper), rtol=1e-12, atol=1e-15)
    assert q.sum() == pytest.approx(1.0, abs=1e-12)
