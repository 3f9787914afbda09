"""The demo run whose console and held-out picture the landing page shows (``verl_ext/apps/demo_run/``): its numbers
come back from its committed held-out samples, and its verdict is the one the console prints today."""

import json
from pathlib import Path

from verl_ext.apps import demo

RUN = Path(__file__).resolve().parents[2] / "verl_ext" / "apps" / "demo_run"
README = Path(__file__).resolve().parents[2] / "README.md"


def test_a_ci_ending_at_zero_up_to_float_noise_contains_zero():
    # that run's CI [1.7e-18, +0.097]: the bootstrap's 2.5 % quantile of means of 0/1 differences, exactly 0
    assert demo.heldout_verdict(1.734723475976807e-18, 0.097) == "no change detectable: the CI contains 0"
    assert demo.heldout_verdict(-0.097, -1e-18) == "no change detectable: the CI contains 0"
    assert demo.heldout_verdict(0.003, 0.1) == "improved" and demo.heldout_verdict(-0.1, -0.003) == "got worse"


def test_the_landing_pages_demo_numbers_come_from_the_committed_run():
    change = demo.heldout_change(RUN / "heldout_before.jsonl", RUN / "heldout_after.jsonl")
    assert change == json.loads((RUN / "summary.json").read_text())["heldout"]
    line = (f"warm start {change['before']:.3f} -> after 5 RL steps {change['after']:.3f};\nchange "
            f"{change['delta']:+.3f}, 95% paired bootstrap CI [{change['low']:+.3f}, {change['high']:+.3f}]: "
            f"{demo.heldout_verdict(change['low'], change['high'])}")
    numbers = line.replace("\n", " ").split("]: ")[0] + "]: "  # the run printed them, with the verdict of its day
    assert line in README.read_text() and numbers in (RUN / "console.txt").read_text()
