"""``python -m verl_ext.apps.bench --run DIR`` (verl_ext/apps/bench/step_share.py): each component's median share of a
trainer run's step from metrics files in the trainer's format (a resumed run's file wins for a step logged twice)."""

import json

import pytest

from verl_ext.apps.bench import step_share
from verl_ext.apps.bench.__main__ import main


def _write_metrics(path, steps):
    path.write_text("".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in steps.items()))


def test_run_reports_each_components_median_share_of_the_step(tmp_path, capsys):
    metrics = tmp_path / "run" / "metrics"
    metrics.mkdir(parents=True)
    step = {1: 10.0, 2: 20.0, 3: 40.0}
    _write_metrics(metrics / "from_step_000000.100.jsonl",
                   {s: {"timing_s/step": t, "timing_s/selector": 0.01 * t, "timing_s/allocator": 0.002,
                        "actor/pg_loss": 0.1} for s, t in step.items()})
    _write_metrics(metrics / "from_step_000002.200.jsonl",  # resumed after step 2: step 3 again
                   {3: {"timing_s/step": 30.0, "timing_s/selector": 0.9, "timing_s/allocator": 0.002},
                    4: {"timing_s/step": 50.0, "timing_s/selector": 0.5, "timing_s/allocator": 0.002}})
    assert main(["--run", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    rows = {r["component"]: r for r in json.loads((tmp_path / "out" / "run_share.json").read_text())["rows"]}
    assert sorted(rows) == ["allocator", "selector"]  # no timing_s/rollout_filter logged
    sel, alloc = rows["selector"], rows["allocator"]
    assert sel["steps"] == 4 and sel["median_step_s"] == pytest.approx(25.0)  # steps 10, 20, 30, 50
    assert sel["median_share"] == pytest.approx(0.01)  # shares 1 %, 1 %, 3 %, 1 %
    assert sel["median_s"] == pytest.approx((0.2 + 0.5) / 2)
    assert alloc["median_share"] == pytest.approx((0.002 / 20 + 0.002 / 30) / 2)
    out = capsys.readouterr().out
    assert "| selector | 4 | 350.00 | 25.0 | 1.0000 % |" in out
    assert not (tmp_path / "out" / "bots.json").exists()  # --run alone runs no benchmark


def test_run_without_step_times_is_an_error(tmp_path):
    (tmp_path / "metrics").mkdir()
    _write_metrics(tmp_path / "metrics" / "from_step_000000.1.jsonl", {1: {"actor/pg_loss": 0.1}})
    with pytest.raises(ValueError, match="no step with timing_s/step"):
        step_share.run_shares(tmp_path)


def test_reference_step_is_the_ads_papers_155_s():
    assert step_share.REFERENCE_STEP_S == pytest.approx(155.0)
    assert "ADS (Xu et al., arXiv 2606.22305) App. B Table 5" in step_share.REFERENCE_STEP_SOURCE
    assert step_share.of_reference_step(1.55) == pytest.approx(0.01)
