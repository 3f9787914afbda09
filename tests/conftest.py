"""Suite-wide settings.

CPU runs use fp32 compute here: the trainer tests assert exact agreement (identical samples of stock verl and
our trainer, rollout vs actor log-probs within 1e-3, replays equal to the run), which holds in fp32; bf16
compute, the default on CPUs with bf16 instructions (``verl_ext.cpu.cpu_precision``), differs by ~0.05 in
log-prob. The SFT test's job takes the launcher's own choice, as a user's would (``tests/test_sft_on_cpu.py``).
"""

import os

import pytest

from verl_ext.cpu import PRECISION_ENV

os.environ.setdefault(PRECISION_ENV, "fp32")


@pytest.fixture(scope="session", autouse=True)
def shared_compositions(tmp_path_factory):
    """The xdist workers of one run share their cached recipe compositions (:mod:`tests.recipes.recipes`) in the run's
    temporary folder (the parent of each worker's ``popen-gwN``, which pytest removes with old runs)."""
    from tests.recipes import recipes

    if os.environ.get("PYTEST_XDIST_WORKER"):
        recipes.SHARED = tmp_path_factory.getbasetemp().parent / "recipe_compositions"
        recipes.SHARED.mkdir(exist_ok=True)
