"""``python -m verl_ext.apps.bench --component SPEC``: a user's component timed per step beside its axis's default."""

import json

import pytest

from verl_ext.apps.bench import __main__ as bench
from verl_ext.apps.bench import component

SLOW = '''
import time
from dataclasses import dataclass
from verl_ext.axes.selectors import UniformSelector


@dataclass(frozen=True)
class SlowConfig:
    pause_ms: float = 5.0


class Slow(UniformSelector):
    config_class = SlowConfig

    def select(self, step, batch_size, exclude=None):
        time.sleep(self.config.pause_ms / 1e3)
        return super().select(step, batch_size, exclude)
'''


def test_a_users_component_is_timed_per_step_beside_the_default(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    spec = f"selector=custom,selector.path={tmp_path / 'slow.py'},selector.cls=Slow,+selector.config.pause_ms=20"
    assert component.component_config(spec) == ("selector", {"name": "custom", "path": str(tmp_path / "slow.py"),
                                                             "cls": "Slow", "config": {"pause_ms": 20}})
    (row,) = component.run(spec, sizes=(1_000,), batch=8, rollouts=2, steps=3)
    assert row["ms"] >= 20 > row["default_ms"] and row["over_default"] > 1  # its own select, not the default's
    assert bench.main(["--out", str(tmp_path), "--component", "allocator=coba"]) == 0
    saved = json.loads((tmp_path / "component.json").read_text())["rows"]
    assert [r["axis"] for r in saved] == ["allocator", "allocator"] and all(r["ms"] > 0 for r in saved)
    with pytest.raises(ValueError, match="expected AXIS=NAME"):
        component.component_config("selector=custom,allocator.max_n=8")
