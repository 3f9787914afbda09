"""Suite-wide settings.

CPU runs use fp32 compute here: the trainer tests assert exact agreement (identical samples of stock verl and
our trainer, rollout vs actor log-probs within 1e-3, replays equal to the run), which holds in fp32; bf16
compute, the default on CPUs with bf16 instructions (``verl_ext.cpu.cpu_precision``), differs by ~0.05 in
log-prob. The SFT test runs its job in bf16 (``tests/test_sft_on_cpu.py``).
"""

import os

from verl_ext.cpu import PRECISION_ENV

os.environ.setdefault(PRECISION_ENV, "fp32")
