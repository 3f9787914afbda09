"""The CPU mode's pieces: platform, plugin registration, shims, and the Hydra overrides against verl's config."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.cpu import (
    COMPUTE_PROCESSES_ENV,
    ENV_PREFIX,
    PLUGIN_MODULE,
    PRECISION_ENV,
    cpu_env,
    cpu_overrides,
    cpu_precision,
    main_ppo_command,
    project_root,
    separate_async_settings,
    split_hydra_flags,
)
from verl_ext.cpu.shims import _dedupe_backend

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


def _run_python(code: str, env_extra: dict[str, str], clear: tuple[str, ...] = ()) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in clear}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project_root(), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_env_and_overrides_shape():
    env = cpu_env({"VERL_USE_EXTERNAL_MODULES": "other.mod", "PYTHONPATH": "/x"}, num_threads=3)
    assert env["VERL_PLATFORM"] == "cpu" and env["OMP_NUM_THREADS"] == "3"
    assert "RAY_prestart_worker_first_driver" not in env  # the driver's alone: not forwarded to the workers
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"{PLUGIN_MODULE},other.mod"
    assert env["PYTHONPATH"] == f"{project_root()}{os.pathsep}/x"
    ov = cpu_overrides({"VERL_USE_EXTERNAL_MODULES": "other.mod"})
    assert "actor_rollout_ref.rollout.name=hf" in ov and "trainer.device=cpu" in ov
    # a comma inside a value must be quoted for Hydra
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES='{PLUGIN_MODULE},other.mod'" in ov
    argv, full_env = main_ppo_command(["trainer.total_training_steps=1"], base={"PATH": "/bin"})
    assert argv[1:3] == ["-m", "verl.trainer.main_ppo"] and argv[-1] == "trainer.total_training_steps=1"
    assert full_env["PATH"] == "/bin" and full_env["VERL_PLATFORM"] == "cpu"
    assert full_env["RAY_prestart_worker_first_driver"] == "0"  # no idle workers no actor can use
    assert full_env["RAY_LD_PRELOAD_ON_WORKERS"] == "1"  # the actor keeps Ray's jemalloc
    assert not any("RAY_prestart" in o for o in argv)
    with pytest.raises(ValueError):
        cpu_overrides(precision="fp16")


def test_cli_env_and_overrides():
    out = subprocess.run([sys.executable, "-m", "verl_ext.cpu", "env"], capture_output=True, text=True,
                         timeout=60, cwd=project_root(), check=True).stdout
    assert "export VERL_PLATFORM=cpu" in out
    lines = subprocess.run([sys.executable, "-m", "verl_ext.cpu", "overrides"], capture_output=True, text=True,
                           timeout=60, cwd=project_root(), check=True).stdout.splitlines()
    assert lines == cpu_overrides()


def test_hydra_flags_go_first():
    assert split_hydra_flags(["--cfg", "job", "a=1", "b=2"]) == (["--cfg", "job"], ["a=1", "b=2"])
    assert split_hydra_flags(["--config-name=x", "a=1"]) == (["--config-name=x"], ["a=1"])
    argv, _ = main_ppo_command(["--cfg", "job", "a=1"])
    assert argv[3:5] == ["--cfg", "job"] and argv[-1] == "a=1"


@pytest.mark.e2e  # a fresh interpreter importing verl: `make test` runs it beside the trainer runs
@pytest.mark.beside
def test_cli_run_composes_verl_config():
    proc = subprocess.run([sys.executable, "-m", "verl_ext.cpu", "run", "--cfg", "job",
                           "actor_rollout_ref.model.path=/some/model", "trainer.total_training_steps=3"],
                          capture_output=True, text=True, timeout=300, cwd=project_root())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "device: cpu" in proc.stdout and "path: /some/model" in proc.stdout
    assert "total_training_steps: 3" in proc.stdout and "VERL_PLATFORM: cpu" in proc.stdout


def test_dedupe_backend():
    assert _dedupe_backend("cpu:gloo,cpu:gloo") == "cpu:gloo"
    assert _dedupe_backend(None) == "cpu:gloo"
    assert _dedupe_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,cuda:nccl"


def test_overrides_compose_with_verl_config():
    """Every key the preset sets exists in (or may be added to) verl 0.9.1's ppo_trainer config."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            cfg = compose("ppo_trainer", overrides=[*cpu_overrides(), "actor_rollout_ref.model.path=/m"])
            two_ranks = compose("ppo_trainer", overrides=[*cpu_overrides(), "trainer.n_gpus_per_node=2"])
            fp32 = compose("ppo_trainer", overrides=cpu_overrides({PRECISION_ENV: "fp32"}))
            bf16 = compose("ppo_trainer", overrides=cpu_overrides(precision="bf16"))
            joined = compose("ppo_trainer", overrides=[*cpu_overrides({"RAY_ADDRESS": "10.0.0.1:6379"}),
                                                       "trainer.nnodes=2"])
    finally:
        GlobalHydra.instance().clear()
    assert cfg.trainer.device == "cpu" and cfg.actor_rollout_ref.rollout.name == "hf"
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp2"
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == cpu_precision()  # this CPU's rule
    for chosen, dtype in ((fp32, "fp32"), (bf16, "bf16")):
        assert chosen.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == dtype
        assert chosen.actor_rollout_ref.ref.fsdp_config.mixed_precision.param_dtype == dtype
    env_vars = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env_vars.VERL_PLATFORM == "cpu" and env_vars.VERL_USE_EXTERNAL_MODULES == PLUGIN_MODULE
    assert cfg.ray_kwargs.ray_init.num_gpus == 1
    assert two_ranks.ray_kwargs.ray_init.num_gpus == 2  # one logical GPU per actor rank, whatever the order
    ray_init = joined.ray_kwargs.ray_init
    assert (ray_init.address, ray_init.num_cpus, ray_init.num_gpus, joined.trainer.nnodes) == ("10.0.0.1:6379", None,
                                                                                              None, 2)


def test_separate_async_gets_the_cpu_checkpoint_engine_and_logical_gpus_for_its_rollout_pool():
    from tests.recipes.recipes import compose_recipe

    base = ("bots", "cpu_embedded", "actor_rollout_ref.model.path=/m", "trainer.n_gpus_per_node=1",
            "++ray_kwargs.ray_init.num_gpus=1")
    sync = compose_recipe(*base)
    assert separate_async_settings(sync) == [] and sync.actor_rollout_ref.rollout.checkpoint_engine.backend == "naive"
    cfg = compose_recipe(*base, "+async=separate", "actor_rollout_ref.rollout.n_gpus_per_node=2")
    assert len(separate_async_settings(cfg)) == 3
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars[COMPUTE_PROCESSES_ENV] == "3"  # 1 training + 2 rollout ranks
    engine = cfg.actor_rollout_ref.rollout.checkpoint_engine
    assert (engine.backend, engine.custom_backend_module) == ("gloo", "verl_ext.cpu.checkpoint_engine")
    assert cfg.ray_kwargs.ray_init.num_gpus == 3  # one training rank, two rollout ranks
    assert separate_async_settings(cfg) == []  # applied once
    joined = compose_recipe(*base, "+async=separate", "++ray_kwargs.ray_init.num_gpus=null")
    assert len(separate_async_settings(joined)) == 2 and joined.ray_kwargs.ray_init.num_gpus is None  # nodes declare


def test_processes_computing_at_once_split_the_cores(monkeypatch):
    import torch

    from verl_ext.cpu.shims import _share_cores

    threads = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    try:
        monkeypatch.setenv(COMPUTE_PROCESSES_ENV, "2")  # separate_async: the trainer rank and a rollout rank
        _share_cores(1)
        assert torch.get_num_threads() == 2
        monkeypatch.delenv(COMPUTE_PROCESSES_ENV)
        _share_cores(4)  # four actor ranks on the host
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_ray_address_joins_a_cluster_whose_nodes_bring_resources_and_threads():
    local = cpu_overrides({})
    assert {"++ray_kwargs.ray_init.address=local", "++ray_kwargs.ray_init.num_cpus=16"} <= set(local)
    assert cpu_overrides({"RAY_ADDRESS": "local"}) == local == cpu_overrides({"RAY_ADDRESS": "h:1"}, ray_address="")
    joined = cpu_overrides({"RAY_ADDRESS": " 10.0.0.1:6379 "})
    assert cpu_overrides({}, ray_address="10.0.0.1:6379") == joined
    ray_init = [o for o in joined if o.startswith("++ray_kwargs.ray_init.") and "runtime_env" not in o]
    assert ray_init == ["++ray_kwargs.ray_init.num_cpus=null", "++ray_kwargs.ray_init.num_gpus=null",
                        "++ray_kwargs.ray_init.address='10.0.0.1:6379'", "++ray_kwargs.ray_init.include_dashboard=False"]
    # every node's own OMP_NUM_THREADS (set at `ray start`), not the driver's; the rest of the preset is unchanged
    omp = f"{ENV_PREFIX}OMP_NUM_THREADS='{os.cpu_count()}'"
    assert omp in local and not any("OMP_NUM_THREADS" in o for o in joined)
    rest = lambda ov: [o for o in ov if not any(k in o for k in ("ray_init.num_", "ray_init.address", "OMP_"))]  # noqa: E731
    assert rest(local) == rest(joined)


def test_cpu_launcher_passes_nodes_and_ranks_only_when_given():
    from tests.recipes.recipes import commands, launch

    def words(**env):
        return commands(launch("bots", "cpu_embedded.sh", CPU="1", DATA_DIR="/d", OUT_DIR="/o", **env))[-1]

    one = words()
    assert not any(w.startswith(("trainer.nnodes=", "trainer.n_gpus_per_node=")) for w in one)  # preset, recipe
    two = words(NNODES="2", RAY_ADDRESS="10.0.0.1:6379", GPUS_PER_NODE="2")
    assert "--cpu" in two and two[-2:] == ["trainer.nnodes=2", "trainer.n_gpus_per_node=2"]
    refused = launch("bots", "cpu_embedded.sh", CPU="1", DATA_DIR="/d", OUT_DIR="/o", NNODES="2")
    assert refused.returncode == 2 and "RAY_ADDRESS" in refused.stderr


PROBE = r"""
import json, os
import verl
from verl.utils.device import get_device_name, get_nccl_backend, get_resource_name, get_torch_device
import verl.utils.distributed as vdist
from verl.workers.rollout.base import get_rollout_class
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.utils.fsdp_utils import CPUOffloadPolicy
out = {"device": get_device_name(), "backend": get_nccl_backend(), "resource": get_resource_name(),
       "patched": hasattr(vdist.initialize_global_process_group_ray, "__wrapped__"),
       "pin_memory": CPUOffloadPolicy(pin_memory=True).pin_memory}
out["rollout"] = get_rollout_class("hf", "async").__name__
out["replica"] = RolloutReplicaRegistry.get("hf").__name__
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
out["sdpa"] = [ALL_ATTENTION_FUNCTIONS["sdpa"].__name__, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"].__name__]
if out["device"] == "cpu":
    import torch, torch.distributed as dist
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PROBE_PORT"])
    vdist.initialize_global_process_group_ray(timeout_second=None)
    out["pg_backend"] = str(dist.get_backend())
    t = torch.ones(2); dist.all_reduce(t); out["all_reduce"] = t.tolist()
    from verl.workers.engine import EngineRegistry
    out["engine"] = EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__
    dev = get_torch_device()
    dev.synchronize(); dev.empty_cache(); out["mem_free_gb"] = dev.mem_get_info()[0] / 2**30
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from verl.utils import fsdp_utils
    net = torch.nn.Linear(4, 4)
    fully_shard(net, mesh=init_device_mesh("cpu", (1,)))
    saved, _ = fsdp_utils.fsdp2_sharded_save_to_cpu(net)  # separate_async's pi_old
    with torch.no_grad():
        net.weight.add_(1.0)  # the optimizer step
    out["pi_old_kept"] = torch.equal(saved["weight"][0] + 1.0, net.weight.to_local())
    dist.destroy_process_group()
print(json.dumps(out))
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.e2e  # a fresh interpreter importing verl: `make test` runs it beside the trainer runs
@pytest.mark.beside
def test_plugin_in_cpu_mode():
    out = _run_python(PROBE, {**cpu_env(), "PROBE_PORT": str(_free_port())})
    assert out["device"] == "cpu" and out["backend"] == "gloo" and out["resource"] == "GPU"
    assert out["patched"] and not out["pin_memory"] and "gloo" in out["pg_backend"] and out["all_reduce"] == [1.0, 1.0]
    assert out["rollout"] == "HFServerAdapter" and out["replica"] == "HFReplica"
    assert out["engine"] == "FSDPEngineWithLMHead" and out["mem_free_gb"] > 0
    assert out["sdpa"] == ["sdpa_per_sequence_forward", "sdpa_per_sequence_mask"]  # shim 3: packed rows per sequence
    assert out["pi_old_kept"]  # shim 4: separate_async's saved pi_old is a copy, not the parameters the update changes


@pytest.mark.e2e  # a fresh interpreter importing verl: `make test` runs it beside the trainer runs
@pytest.mark.beside
def test_plugin_is_inert_without_verl_platform():
    """Registering on a GPU machine changes nothing: the platform is not auto-detected, nothing is patched."""
    out = _run_python(PROBE, {"VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE},
                      clear=("VERL_PLATFORM", "VERL_ENGINE_DEVICE", "VERL_ENGINE_VENDOR"))
    assert out["device"] != "cpu" and not out["patched"] and out["pin_memory"]
    assert out["rollout"] == "HFServerAdapter"  # the backend is available, but only if a config names it
    assert out["sdpa"] == ["sdpa_attention_forward", "sdpa_mask"]  # transformers' own


def test_device_module_covers_verl_calls():
    """Every ``get_torch_device().<name>`` verl 0.9.1 uses exists on the CPU platform's device module."""
    import verl

    from verl_ext.cpu.platform import PlatformCPU

    names = set()
    for path in Path(verl.__file__).parent.rglob("*.py"):
        names.update(re.findall(r"get_torch_device\(\)\.([A-Za-z_]\w*)", path.read_text(errors="ignore")))
    assert "empty_cache" in names
    module = PlatformCPU().device_module
    missing = sorted(n for n in names if not hasattr(module, n))
    assert not missing, missing
    assert module.current_device() == "cpu" and module.is_available()


def test_threads_come_from_the_argument_then_the_environment_then_the_cores():
    from verl_ext.cpu import THREADS_ENV

    assert cpu_env({})["OMP_NUM_THREADS"] == str(os.cpu_count())
    assert cpu_env({THREADS_ENV: "1"})["OMP_NUM_THREADS"] == "1"
    assert cpu_env({THREADS_ENV: "1"}, num_threads=3)["OMP_NUM_THREADS"] == "3"
    assert f"{ENV_PREFIX}OMP_NUM_THREADS='1'" in cpu_overrides({THREADS_ENV: " 1 "})
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match=f"{THREADS_ENV} must be a whole number of threads >= 1, got '{bad}'"):
            cpu_env({THREADS_ENV: bad})
