"""The progress-selector cost benchmark (verl_ext/bench/progress.py) on a small pool: every variant runs, timings and
ratios to uniform are finite and positive, the report has a row per variant, ``python -m verl_ext.bench`` knows it."""

import math

from verl_ext.bench import progress as bench
from verl_ext.bench.__main__ import BENCHMARKS


def test_bench_times_every_variant_against_uniform():
    rows = bench.run(sizes=(200, 300), batch_size=16, rollouts=4, steps=3, warmup=1)
    assert [(r["tasks"], r["selector"]) for r in rows] == [(n, s) for n in (200, 300) for s in bench.SELECTORS]
    for r in rows:
        for key in ("step_ms", "select_ms", "update_ms", "over_uniform"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["selector"], key, r[key])
        assert r["step_ms"] == r["select_ms"] + r["update_ms"]
    assert all(r["over_uniform"] == 1.0 for r in rows if r["selector"] == "uniform")
    table = bench.report(rows)
    assert table.count("\n| 200 | ") == len(bench.SELECTORS) and "prompt_utility" in table
    assert BENCHMARKS["progress"] == (bench.run, bench.report)


def test_bench_composes_the_presets_of_the_config_group():
    configs = bench.selector_configs()
    assert configs["uniform"] == {"name": "uniform"} and configs["prompt_utility"]["name"] == "prompt_utility"
    assert (configs["conservative"]["prior"], configs["conservative"]["cap"]) == ("data", 0.18)
    assert configs["random_buckets"]["random_buckets"] == 16 and configs["density_ratio"]["ratio_clip"] == [0.5, 1.5]
