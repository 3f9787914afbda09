"""A command that moved tells its user the new place instead of failing with "No module named"."""

import runpy
import sys

import pytest


@pytest.mark.filterwarnings("ignore:.*found in sys.modules after import of package:RuntimeWarning")
@pytest.mark.parametrize("old, new", [("verl_ext.apps.check_gpu", "verl_ext.apps.gpu.check_gpu"),
                                      ("verl_ext.apps.verl_actor", "verl_ext.apps.gpu.verl_actor"),
                                      ("verl_ext.apps.bench.attention", "verl_ext.apps.gpu.attention_bench")])
def test_a_moved_gpu_tool_names_its_new_place(old, new, monkeypatch, capsys):
    """As ``python -m OLD --help`` runs it (runpy): it exits with a message naming the new module (Python prints it and
    exits 1); ``python -m NEW --help`` prints its usage."""
    monkeypatch.setattr(sys, "argv", [old, "--help"])
    with pytest.raises(SystemExit) as stub:
        runpy.run_module(old, run_name="__main__")
    assert isinstance(stub.value.code, str) and f"python -m {new}" in stub.value.code, stub.value.code
    with pytest.raises(SystemExit) as moved:
        runpy.run_module(new, run_name="__main__")
    assert moved.value.code == 0 and "usage:" in capsys.readouterr().out
