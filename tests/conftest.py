"""Suite-wide settings.

CPU runs use fp32 compute here: the trainer tests assert exact agreement (identical samples of stock verl and
our trainer, rollout vs actor log-probs within 1e-3, replays equal to the run), which holds in fp32; bf16
compute, the default on CPUs with bf16 instructions (``verl_ext.cpu.cpu_precision``), differs by ~0.05 in
log-prob. The SFT test runs its job in bf16 (``tests/trainer/test_sft_on_cpu.py``).
"""

import os

from verl_ext.cpu import PRECISION_ENV

os.environ.setdefault(PRECISION_ENV, "fp32")

# `make test` runs the suite on two pytest-xdist workers with --dist loadgroup. The modules marked e2e (they start
# Ray, vLLM or a training run) share one group, so they run one after the other on one worker (a private Ray
# instance each, module-scoped runs shared by their tests, test_dp2 reading test_axes's run); every other module
# is a group of its own, so its module fixtures are built once, on the other worker, alongside those runs.
E2E_GROUP = "e2e"


def pytest_collection_modifyitems(config, items):
    import pytest

    root = config.rootpath
    for item in items:
        group = E2E_GROUP if item.get_closest_marker("e2e") else item.path.relative_to(root).as_posix()
        item.add_marker(pytest.mark.xdist_group(group))
