"""``make bench`` on a machine without the vLLM environment: the target does not build it, the generation bench
measures HF only and the bench's last line names what it skipped and how to get it; with the environment both
backends run as before (``verl_ext/apps/bench/__main__.py``, ``generation.py``). The measurements are stubbed: what
is checked is which backends run, with which interpreter, and what is printed."""

import json
import subprocess
from types import SimpleNamespace

import pytest

from verl_ext.apps.bench import __main__ as bench
from verl_ext.apps.bench import generation
from verl_ext.cpu import project_root, vllm_rollout


def _measured(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    row = {"backend": cmd[cmd.index("--measure") + 1], "samples": 16, "tokens": 100, "start_s": 1.0,
           "generate_s": 2.0, "tokens_per_s": 50.0}
    return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(row) + "\n", stderr="")


@pytest.mark.parametrize("has_venv", [False, True])
def test_generation_bench_runs_vllm_only_with_its_environment(has_venv, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(vllm_rollout.importlib.util, "find_spec", lambda name: None)  # this interpreter has no vLLM
    vllm_python = vllm_rollout.project_venv_python(tmp_path / "project")
    if has_venv:
        vllm_python.parent.mkdir(parents=True)
        vllm_python.touch()
    monkeypatch.setattr(vllm_rollout, "project_venv_python", lambda root: vllm_python)
    commands: list[list[str]] = []
    monkeypatch.setattr(generation, "subprocess", SimpleNamespace(run=lambda cmd, **kw: commands.append(cmd)
                                                                  or _measured(cmd)))

    assert bench.main(["generation", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    [row] = json.loads((tmp_path / "out" / "generation.json").read_text())["rows"]
    if has_venv:
        assert [(c[0], c[c.index("--measure") + 1]) for c in commands] == [(generation.sys.executable, "hf"),
                                                                           (str(vllm_python), "vllm")]
        assert row["hf_over_vllm_generate"] == 1.0 and "skipped" not in out
    else:
        assert [c[c.index("--measure") + 1] for c in commands] == ["hf"]
        assert "vllm_generate_s" not in row and "| 4 x 4 x 64 | hf |" in out
        assert out.strip().splitlines()[-1] == ("skipped: generation's vllm backend (no vLLM here and no .venv-vllm; "
                                                "`make vllm-env` builds it, then `make bench` runs it)")


def test_make_bench_does_not_build_the_vllm_environment(tmp_path):
    dry = subprocess.run(["make", "-n", "bench", f"VLLM_VENV={tmp_path / 'no-venv-vllm'}"], cwd=project_root(),
                         capture_output=True, text=True, check=True).stdout
    assert "-m verl_ext.apps.bench" in dry and "install_vllm_cpu.sh" not in dry
