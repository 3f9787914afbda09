"""A command that moved tells its user the new place instead of failing with "No module named"."""

import subprocess
import sys

from tests.recipes.recipes import ROOT


def test_the_gpu_check_names_its_new_place():
    proc = subprocess.run([sys.executable, "-m", "verl_ext.apps.check_gpu", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 1 and "python -m verl_ext.apps.gpu.check_gpu" in proc.stderr, proc.stderr
    moved = subprocess.run([sys.executable, "-m", "verl_ext.apps.gpu.check_gpu", "--help"], capture_output=True,
                           text=True, timeout=60, cwd=ROOT)
    assert moved.returncode == 0 and "usage:" in moved.stdout
