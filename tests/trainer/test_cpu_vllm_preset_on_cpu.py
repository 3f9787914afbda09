"""The vLLM part of the CPU preset (``verl_ext.cpu.vllm_rollout``) without starting anything: which rollout the
command line asks for, the interpreter a ``--cpu`` launch re-executes with, the overrides composing onto verl's
config, and the shared-memory clean-up (real segments in ``/dev/shm``). The run itself:
``test_bots_coba_vllm_trainer_on_cpu.py``."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from verl_ext.cpu import cpu_overrides, main_ppo_command, project_root, vllm_rollout
from verl_ext.launch.main import cpu_argv

ROOT = Path(project_root())


def test_requested_rollout_is_the_last_name_override():
    assert vllm_rollout.requested_rollout(["a=1"]) == "hf"
    assert vllm_rollout.requested_rollout(["actor_rollout_ref.rollout.name=vllm"]) == "vllm"
    assert vllm_rollout.requested_rollout(["actor_rollout_ref.rollout.name=vllm",
                                           "++actor_rollout_ref.rollout.name='hf'"]) == "hf"
    assert vllm_rollout.requested_rollout(["actor_rollout_ref.rollout.name_x=vllm"]) == "hf"


def test_cpu_launch_runs_vllm_from_an_interpreter_that_has_it(monkeypatch, tmp_path):
    monkeypatch.setattr(vllm_rollout.importlib.util, "find_spec", lambda name: None)  # this interpreter has no vLLM
    vllm_python = vllm_rollout.project_venv_python(tmp_path / "project")  # the project's .venv-vllm, made here:
    vllm_python.parent.mkdir(parents=True)  # make test-fast needs none
    vllm_python.touch()
    in_project = vllm_rollout.project_venv_python
    monkeypatch.setattr(vllm_rollout, "project_venv_python", lambda root: vllm_python)
    argv = cpu_argv(["--cpu", "actor_rollout_ref.rollout.name=vllm", "trainer.total_training_steps=1"])
    assert argv[0] == str(vllm_python)
    assert argv[-2:] == ["actor_rollout_ref.rollout.name=vllm", "trainer.total_training_steps=1"]  # the user's win
    assert f"++actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls={vllm_rollout.WORKER_EXTENSION}" in argv
    assert "actor_rollout_ref.rollout.name=hf" not in argv
    assert cpu_argv(["--cpu", "a=1"])[0] == sys.executable
    stock, _ = main_ppo_command(["actor_rollout_ref.rollout.name=vllm"])
    assert stock[0] == str(vllm_python) and "actor_rollout_ref.rollout.enforce_eager=True" in stock

    # no vLLM here and no .venv-vllm: a message that says what to run
    monkeypatch.setattr(vllm_rollout, "project_venv_python", in_project)
    with pytest.raises(SystemExit, match="make vllm-env"):
        vllm_rollout.python_with_vllm(tmp_path)
    with pytest.raises(ValueError, match="hf or vllm"):
        cpu_overrides(rollout="sglang")


def test_vllm_overrides_compose_onto_verls_config():
    search = "hydra.searchpath=[pkg://verl.trainer.config]"
    with initialize_config_dir(config_dir=str(ROOT / "verl_ext" / "config"), version_base=None):
        cfg = compose("verl_ext_trainer", overrides=[search, *cpu_overrides(rollout="vllm")])
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.name == "vllm" and rollout.mode == "async"
    assert rollout.enable_sleep_mode is False and rollout.free_cache_engine is False and rollout.enforce_eager is True
    assert rollout.engine_kwargs.vllm.worker_extension_cls == vllm_rollout.WORKER_EXTENSION
    assert rollout.engine_kwargs.vllm.kv_cache_memory_bytes == vllm_rollout.KV_CACHE_BYTES
    module, _, cls = vllm_rollout.WORKER_EXTENSION.rpartition(".")
    source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
    assert f"class {cls}(" in source


# A process that creates a segment and leaves it (as vLLM's, killed at Ray's shutdown, do), after loading the
# prefix hook the way vLLM loads it in its processes: the entry point pyproject.toml registers. Prints the name.
LEAK = """import pkgutil, tomllib
from multiprocessing import resource_tracker, shared_memory

hooks = tomllib.load(open("pyproject.toml", "rb"))["project"]["entry-points"]["vllm.general_plugins"]
pkgutil.resolve_name(hooks["verl_ext_shm_prefix"])()
shm = shared_memory.SharedMemory(create=True, size=4096)
resource_tracker.unregister(shm._name, "shared_memory")
print(shm.name)
"""


def _leak(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", LEAK], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def _leak_here() -> str:
    shm = shared_memory.SharedMemory(create=True, size=4096)
    resource_tracker.unregister(shm._name, "shared_memory")
    shm.close()
    return shm.name


def test_shm_cleanup_removes_the_runs_own_segments_and_no_one_elses():
    outside = {k: v for k, v in os.environ.items() if k != vllm_rollout.SHM_PREFIX_ENV}  # another program's
    foreign: list[str] = []
    try:
        for fails in (False, True):
            with contextlib.suppress(RuntimeError), vllm_rollout.shm_cleanup() as run_env:
                assert os.environ[vllm_rollout.SHM_PREFIX_ENV] == run_env[vllm_rollout.SHM_PREFIX_ENV]
                own = [_leak_here(), _leak(dict(os.environ))]  # the run's driver and a process it started
                foreign.append(_leak(outside))  # created while the run runs, by a process outside it
                assert all(name.startswith(run_env[vllm_rollout.SHM_PREFIX_ENV]) for name in own)
                assert {*own, foreign[-1]} <= vllm_rollout.shm_segments()
                if fails:
                    raise RuntimeError("the run failed")
            assert not set(own) & vllm_rollout.shm_segments(), fails
            assert set(foreign) <= vllm_rollout.shm_segments(), fails
        assert vllm_rollout.SHM_PREFIX_ENV not in os.environ  # and this process names its segments as before
        foreign.append(_leak_here())
        assert foreign[-1].startswith(vllm_rollout.SHM_PREFIX) and "verl_ext" not in foreign[-1]
    finally:
        for name in foreign:
            (vllm_rollout.SHM_DIR / name).unlink(missing_ok=True)
    with vllm_rollout.shm_cleanup(enabled=False) as run_env:
        assert run_env == {} and vllm_rollout.SHM_PREFIX_ENV not in os.environ
