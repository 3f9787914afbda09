"""Suite-wide settings.

CPU runs use fp32 compute here: the trainer tests assert exact agreement (identical samples of stock verl and
our trainer, rollout vs actor log-probs within 1e-3, replays equal to the run), which holds in fp32; bf16
compute, the default on CPUs with bf16 instructions (``verl_ext.cpu.cpu_precision``), differs by ~0.05 in
log-prob. The SFT test runs its job in bf16 (``tests/trainer/test_sft_on_cpu.py``).
"""

import os

from verl_ext.cpu import PRECISION_ENV

os.environ.setdefault(PRECISION_ENV, "fp32")

# `make test` runs the suite on two pytest-xdist workers with --dist loadgroup. The modules that start Ray, vLLM
# or a training subprocess share one group, so they run one after the other on one worker (a private Ray
# instance each, module-scoped runs shared by their tests, test_dp2 reading test_axes's run); every other module
# is a group of its own, so its module fixtures are built once, on the other worker, alongside those runs.
SERIAL_GROUP = "runs"
RUN_MODULES = {
    "tests/test_demo_on_cpu.py", "tests/test_bench_generation_on_cpu.py",
    *(f"tests/trainer/test_{name}_on_cpu.py" for name in (
        "ads_trainer", "axes_trainer", "bots_coba_vllm_trainer", "cbs_replay_trainer", "cbs_trainer",
        "default_matches_stock_verl", "dp2_trainer", "progress_chain", "sft", "skip_update_trainer", "warm_start")),
}


def pytest_collection_modifyitems(config, items):
    import pytest

    root = config.rootpath
    for item in items:
        module = item.path.relative_to(root).as_posix()
        item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP if module in RUN_MODULES else module))
