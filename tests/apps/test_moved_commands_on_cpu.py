"""A command that moved tells its user the new place instead of failing with "No module named"."""

import subprocess
import sys

import pytest

from tests.recipes.recipes import ROOT


@pytest.mark.parametrize("old, new", [("verl_ext.apps.check_gpu", "verl_ext.apps.gpu.check_gpu"),
                                      ("verl_ext.apps.verl_actor", "verl_ext.apps.gpu.verl_actor"),
                                      ("verl_ext.apps.bench.attention", "verl_ext.apps.gpu.attention_bench")])
def test_a_moved_gpu_tool_names_its_new_place(old, new):
    proc = subprocess.run([sys.executable, "-m", old, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1 and f"python -m {new}" in proc.stderr, proc.stderr
    moved = subprocess.run([sys.executable, "-m", new, "--help"], capture_output=True, text=True, timeout=120,
                           cwd=ROOT)
    assert moved.returncode == 0 and "usage:" in moved.stdout, moved.stderr[-2000:]
