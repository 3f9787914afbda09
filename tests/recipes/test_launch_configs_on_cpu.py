"""The launchers' composed trainer configs are the recorded ones (tests/fixtures/launch_configs.json):
a change to the launch path (scripts/, verl_ext.main's composition) that changes what a launcher trains fails here.
This test recomposes, per method, a paper setting's launcher (bare; on CPU=1 and a cluster), cpu_embedded.sh and
gpu_smoke.sh with each objective and each choice (:data:`TESTED`, 43 commands); ``python -m
tests.recipes.launch_configs`` compares all 270 (every setting, every grid sweep: minutes)."""

import difflib
import functools
import json

import pytest
from tests.recipes.launch_configs import (
    CHOICES, FIXTURE, INVOCATIONS, SETTINGS, composed_yaml, digest, invocation_key, kept_path, training_commands,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")



def _tested(script: str, args: tuple[str, ...], env: dict[str, str]) -> bool:
    """A paper setting bare and on CPU=1 + a cluster, cpu_embedded bare, gpu_smoke with each non-default name."""
    group, name = script.split("/")
    if name == f"{SETTINGS[group][0]}.sh":
        return not args and (not env or "CPU" in env and "NNODES" in env)
    if name == "gpu_smoke.sh":
        return bool(args) and args != ("trainer.total_training_steps=2",) and args != CHOICES[group][0][:1]
    return name == "cpu_embedded.sh" and not args


TESTED = [inv for inv in INVOCATIONS if _tested(*inv)]


@functools.cache
def _stored() -> dict[str, str]:
    return json.loads(FIXTURE.read_text())


def test_fixture_records_every_invocation():
    recorded = {key.split(" #")[0] for key in _stored()}
    assert recorded == {invocation_key(*inv) for inv in INVOCATIONS}


@pytest.mark.parametrize("invocation", TESTED, ids=lambda inv: invocation_key(*inv))
def test_launcher_composes_the_recorded_config(invocation):
    key = invocation_key(*invocation)
    (words,) = training_commands(*invocation)
    text = composed_yaml(words, invocation[2])
    if digest(text) != _stored()[key]:
        kept = kept_path(key)
        diff = "\n".join(difflib.unified_diff(kept.read_text().splitlines(), text.splitlines(), lineterm="", n=1)) \
            if kept.is_file() else f"(no recorded YAML for {key})"
        pytest.fail(f"{key}: composed config differs from the recorded one\n{diff}")
