"""A user's selector from a file or a module (``selector=custom``): loading, errors, config validation, the guide's
example and its behaviour, its state through the trainer's checkpoint functions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from verl_ext.axes import StepResults, TaskPool, build_selector, make_config
from verl_ext.trainer import records

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "recipes" / "own_method" / "epsilon_greedy.py"


def custom(epsilon=0.0, path=str(EXAMPLE), cls="EpsilonGreedy", **extra):
    return {"name": "custom", "path": path, "cls": cls, "config": {"epsilon": epsilon, **extra}}


def test_the_guide_shows_the_example_verbatim():
    readme = (EXAMPLE.parent / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    assert block == EXAMPLE.read_text() and len(EXAMPLE.read_text().splitlines()) < 40


def test_loads_from_a_file_and_from_a_module(tmp_path, monkeypatch):
    pool = TaskPool(np.arange(10, 16))
    assert type(build_selector(custom(), pool, 0)).__name__ == "EpsilonGreedy"
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text(EXAMPLE.read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    selector = build_selector(custom(path="my_pkg"), pool, 0)
    assert type(selector).__module__ == "my_pkg" and selector.name == "custom EpsilonGreedy"


def test_errors_name_the_axis_path_and_class(tmp_path):
    pool = TaskPool(np.arange(4))
    cases = [(custom(path=str(tmp_path / "none.py")), "no file"),
             (custom(cls="Nope"), r"no class Nope there; its classes: \['EpsilonGreedy', 'EpsilonGreedyConfig'\]"),
             (custom(cls="EpsilonGreedyConfig"), "not a subclass of verl_ext.axes.base.TaskSelector"),
             (custom(eps=1), r"unknown keys \['eps'\] in selector.config; valid keys are \['epsilon'\]"),
             (custom(path="no_such_module_here"), "importing module no_such_module_here failed")]
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    cases.append((custom(path=str(broken)), "importing .*broken.py failed: RuntimeError: boom"))
    noconf = tmp_path / "noconf.py"
    noconf.write_text("from verl_ext.axes.base import TaskSelector\nclass S(TaskSelector):\n    def select(self, *a): pass\n")
    cases.append((custom(path=str(noconf), cls="S"), "S.config_class must name its config dataclass"))
    for cfg, message in cases:
        with pytest.raises(ValueError, match=message) as e:
            build_selector(cfg, pool, 0)
        assert "selector=custom" in str(e.value)
    with pytest.raises(ValueError, match=r"unknown keys \['epsilon'\]; valid keys are"):
        make_config("selector", {"name": "custom", "path": str(EXAMPLE), "cls": "EpsilonGreedy", "epsilon": 1})


def test_epsilon_greedy_picks_pass_rates_nearest_half_or_random_and_round_trips_its_state():
    pool = TaskPool(np.arange(100, 110))
    greedy = build_selector(custom(0.0), pool, 0)
    rewards = {100: [1, 1], 101: [0, 0], 102: [1, 0], 103: [1, 1], 104: [0, 0], 105: [1, 1], 106: [0, 0],
               107: [1, 1], 108: [0, 0], 109: [1, 1]}
    greedy.update(1, StepResults.from_rewards(np.repeat(list(rewards), 2), sum(rewards.values(), [])))
    assert greedy.select(2, 1).tolist() == [102]  # the only task at 0.5
    assert 102 not in greedy.select(2, 1, exclude=np.array([102]))
    with pytest.raises(ValueError, match="non-finite reward"):
        greedy.update(2, StepResults.from_rewards([100], [np.nan]))
    explore = build_selector(custom(1.0), pool, 0)
    explore.update(1, StepResults.from_rewards(np.repeat(list(rewards), 2), sum(rewards.values(), [])))
    picks = [explore.select(s, 1)[0] for s in range(200)]
    assert np.mean(np.array(picks) == 102) < 0.3  # random, not greedy
    share = build_selector(custom(0.2), TaskPool(np.arange(1000)), 0)  # every task seen; 100 of them at 0.5
    share.update(1, StepResults.from_rewards(np.repeat(np.arange(1000), 2), np.tile([1.0, 0.0], 1000) *
                                             np.repeat(np.arange(1000) < 100, 2) + np.repeat(np.arange(1000) >= 550, 2)))
    off = [np.mean(share.select(s, 20) >= 100) for s in range(300)]  # off-greedy picks: 20 % of the slots x 0.9
    assert 0.15 < np.mean(off) < 0.21, np.mean(off)
    state = explore.state_dict()
    again = build_selector(custom(1.0), pool, 7)
    again.load_state_dict(state)
    assert [again.select(s, 3).tolist() for s in range(5)] == [explore.select(s, 3).tolist() for s in range(5)]


def test_its_state_is_saved_and_restored_with_the_checkpoint(tmp_path):
    from verl_ext.trainer.build_axes import Axes

    pool = TaskPool(np.arange(6))
    def axes(seed):
        return Axes(build_selector(custom(0.5), pool, seed), *[
            __import__("verl_ext.axes", fromlist=["x"]).build_allocator({"name": "fixed"}, seed),
            __import__("verl_ext.axes", fromlist=["x"]).build_filter({"name": "keep_all"}, seed)])
    run = axes(0)
    run.selector.update(1, StepResults.from_rewards([0, 0, 1], [1.0, 0.0, 1.0]))
    run.selector.select(1, 2)
    records.save_state(tmp_path / "global_step_1", {"axes": run.state_dict()})
    resumed = axes(3)
    resumed.load_state_dict(records.load_state(tmp_path / "global_step_1")["axes"])
    assert resumed.selector.rollouts.tolist() == [2, 1, 0, 0, 0, 0]
    assert resumed.selector.select(2, 3).tolist() == run.selector.select(2, 3).tolist()
