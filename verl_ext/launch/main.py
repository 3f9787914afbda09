"""``python -m verl_ext.main [--cpu] [Hydra overrides]``: train with trainer mode ``verl_ext``.

The config is ``verl_ext/config/verl_ext_trainer.yaml``: verl 0.9.1's ``ppo_trainer`` plus the
groups ``selector=``, ``allocator=``, ``rollout_filter=`` and the section ``data_selection``. The
axis configs are checked (unknown keys, infeasible budgets) before Ray starts; then verl's own
``validate_config`` and ``run_ppo(config, TaskRunnerV1)`` run as in ``verl.trainer.main_ppo``.

``--cpu`` is the CPU preset: the process re-executes itself with :func:`verl_ext.cpu.cpu_env` in its
environment (verl picks its platform at import, before any config exists) and
:func:`verl_ext.cpu.cpu_overrides` before the user's overrides (which therefore win). With
``actor_rollout_ref.rollout.name=vllm`` the preset's rollout part is verl's vLLM rollout
(:mod:`verl_ext.cpu.vllm_rollout`), run by an interpreter that has vLLM (``.venv-vllm``).

A recipe's per-objective and per-choice rows (``recipe.objectives`` / ``schedulers`` / ``selectors``,
:mod:`verl_ext.launch.recipe_tables`) are inserted after the command line's choices (:func:`recipe_argv`), so the user's
later overrides win and ``--cfg job`` prints what trains.

Every run also logs to verl's ``file`` logger (added to ``trainer.logger`` when missing): the per-step
metrics, validation included, go to ``<trainer.default_local_dir>/metrics/from_step_<S>.<time>.jsonl``,
one file per run (see :mod:`verl_ext.trainer.records`).

Before Ray starts, one line names the actor's attention backend, its micro-batch token budgets and whether a GPU
measured that pair (:func:`verl_ext.models.attention.attention_line`).
"""

from __future__ import annotations

import os
import sys

import hydra

from verl_ext.cpu import join_unique, project_root
from verl_ext.launch.composition import CONFIG_DIR, CONFIG_NAME
from verl_ext.launch.version_check import check_verl_version

TRAINER_MODULE = "verl_ext.trainer"  # registers trainer mode verl_ext when imported
CPU_FLAG = "--cpu"


def export_trainer_module(config) -> None:
    """Import :data:`TRAINER_MODULE` in every Ray process (``VERL_USE_EXTERNAL_MODULES``, last, after
    e.g. the CPU plugin) and put the project on their ``PYTHONPATH``: in this process's environment,
    which a local Ray cluster inherits, and in ``ray_kwargs.ray_init.runtime_env.env_vars``."""
    from omegaconf import OmegaConf, open_dict

    env_vars = config.ray_kwargs.ray_init.get("runtime_env", {}).get("env_vars")
    env_vars = OmegaConf.to_container(env_vars) if env_vars else {}
    modules = join_unique([env_vars.get("VERL_USE_EXTERNAL_MODULES"), os.environ.get("VERL_USE_EXTERNAL_MODULES"),
                           TRAINER_MODULE], ",")
    path = join_unique([project_root(), env_vars.get("PYTHONPATH"), os.environ.get("PYTHONPATH")], os.pathsep)
    os.environ.update(VERL_USE_EXTERNAL_MODULES=modules, PYTHONPATH=path)
    with open_dict(config):
        config.ray_kwargs.ray_init.runtime_env.env_vars = {**env_vars, "VERL_USE_EXTERNAL_MODULES": modules,
                                                           "PYTHONPATH": path}


def log_to_file(config) -> None:
    """Add verl's ``file`` logger to ``trainer.logger``: every run writes its per-step metrics (validation
    curves included) to ``<trainer.default_local_dir>/metrics/*.jsonl``, whatever else it logs to."""
    from omegaconf import open_dict

    loggers = config.trainer.logger
    loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
    if "file" not in loggers:
        with open_dict(config):
            config.trainer.logger = [*loggers, "file"]


def run(config) -> None:
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from verl_ext.models.attention import attention_line
    from verl_ext.trainer.build_axes import validate_axes, validate_training_data
    from verl_ext.cpu import is_cpu_mode, separate_async_settings
    from verl_ext.trainer.startup_checks import check_supported, check_validation_files

    for change in separate_async_settings(config) if is_cpu_mode() else []:
        print(f"verl_ext.main: CPU mode: {change}", flush=True)
    check_supported(config)
    validate_axes(config)
    validate_training_data(config)
    check_validation_files(config)
    log_to_file(config)
    if not config.trainer.use_v1:
        raise ValueError("verl_ext needs verl's v1 trainer (trainer.use_v1=true)")
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    print(f"verl_ext.main: {attention_line(config)}", flush=True)
    export_trainer_module(config)
    from verl_ext.cpu import vllm_rollout

    with vllm_rollout.shm_cleanup(enabled=is_cpu_mode() and config.actor_rollout_ref.rollout.name == "vllm"):
        run_ppo(config, task_runner_class=TaskRunnerV1)


@hydra.main(config_path=str(CONFIG_DIR), config_name=CONFIG_NAME, version_base=None)
def _hydra_main(config) -> None:
    from verl_ext.launch.recipe_keys import check_hydra_recipes

    check_hydra_recipes(config)  # needs the running app: which recipe files were composed
    run(config)


def cpu_argv(args: list[str]) -> list[str]:
    """The re-executed command line for ``--cpu``: the user's leading Hydra flags (``--config-dir``,
    ``--config-name``, ``--cfg``), then the CPU preset, then the user's overrides (which win)."""
    from verl_ext.cpu import cpu_overrides, split_hydra_flags, vllm_rollout

    flags, overrides = split_hydra_flags([a for a in args if a != CPU_FLAG])
    rollout = vllm_rollout.requested_rollout(overrides)
    python = vllm_rollout.python_with_vllm(project_root()) if rollout == "vllm" else sys.executable
    return [python, "-m", "verl_ext.main", *flags, *cpu_overrides(rollout=rollout), *overrides]


def recipe_argv(args: list[str]) -> list[str]:
    """The command line with the rows of the recipe its ``--config-dir`` holds (:func:`verl_ext.launch.recipe_tables.
    with_tables`) after the choices they are keyed by."""
    from hydra._internal.utils import get_args_parser  # the parser @hydra.main reads sys.argv with

    from verl_ext.launch.recipe_tables import with_tables

    config_dir = get_args_parser().parse_known_args(args)[0].config_dir
    return with_tables(config_dir, args)


def main() -> None:
    check_verl_version()
    if CPU_FLAG in sys.argv[1:]:
        from verl_ext.cpu import DRIVER_ENV, cpu_env

        argv = cpu_argv(sys.argv[1:])
        sys.stdout.flush()
        os.execvpe(argv[0], argv, {**os.environ, **cpu_env(), **DRIVER_ENV})
    from verl_ext.launch.composition import with_searchpath

    try:
        sys.argv[1:] = with_searchpath(recipe_argv(sys.argv[1:]))
    except ValueError as e:  # a choice the recipe has no row for
        print(f"verl_ext.main: {e}", file=sys.stderr)
        sys.exit(2)
    _hydra_main()


if __name__ == "__main__":
    main()
