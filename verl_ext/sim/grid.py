"""The simulation grid: one scenario per paper (its batch, rollouts per prompt, advantage and rewards at N = 50k
tasks) with that paper's method, baselines and ablations, plus the composition study. Every component config is
composed by Hydra from ``verl_ext/config/<axis>/<name>.yaml`` exactly as ``selector=<name>`` gives it to the
trainer, then overridden field by field for the sweeps.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from verl_ext.sim.learner import LearnerConfig
from verl_ext.sim.loop import Scenario, Setting, run
from verl_ext.sim.world import World, WorldConfig

SWEEP = (0.0, 0.05, 0.2, 0.5, 1.0)  # ρ and λ besides the default 0.1 (SPEC §1)
NOISE_SWEEP = (0.0, 0.3)  # spurious-rollout rates besides the learner's default 0.1 (the CBS study)
PROXY_SWEEP = (2.5, 5.0)  # noise of the offline difficulty estimate besides the world's default 0.7 (the ADS study)
# Training pools of the papers whose pool is much smaller than N = 50k (relative to N): what a task's history
# (CoBA's previous visit, CBS's replay of a task, ADS's clusters) sees depends on how often tasks come back.
POOL = {"coba": 17_000 / 50_000, "cbs": 21_700 / 50_000, "ads": 11_500 / 50_000}  # DAPO-Math-17k; + MATH L3-5; OpenR1


@lru_cache(maxsize=None)
def _compose(axis: str, name: str, overrides: tuple[str, ...]) -> dict:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import verl_ext

    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config" / axis), version_base=None):
        return OmegaConf.to_container(compose(name, overrides=list(overrides)), resolve=True)


def component(axis: str, name: str, **overrides) -> dict:
    """The ``<axis>=<name>`` group as the trainer gets it, with ``overrides`` (Hydra ``key=value``)."""
    return dict(_compose(axis, name, tuple(f"{k}={v}" for k, v in sorted(overrides.items()))))


def sel(name: str, **kw) -> dict:
    return component("selector", name, **kw)


def alloc(name: str, **kw) -> dict:
    return component("allocator", name, **kw)


def filt(name: str, **kw) -> dict:
    return component("rollout_filter", name, **kw)


@dataclass(frozen=True)
class Study:
    """A scenario, its settings and the setting every other is compared with."""

    scenario: Scenario
    settings: tuple[Setting, ...]
    baseline: str
    paper: str
    metric: str = "accuracy"  # accuracy (held-out pass@1) | score (mean verifier score) | pass16
    also: tuple[str, ...] = ()  # further held-out metrics the table compares


def overrides(assignments: list[str]) -> dict[str, dict]:
    """``["learner.lr=1", "world.difficulty_std=3"]`` -> ``{"world": {...}, "learner": {...}}``, typed by the fields."""
    out: dict[str, dict] = {"world": {}, "learner": {}}
    fields = {"world": WorldConfig.__dataclass_fields__, "learner": LearnerConfig.__dataclass_fields__}
    for item in assignments:
        key, sep, value = item.partition("=")
        section, _, name = key.partition(".")
        if not sep or section not in fields or name not in fields[section]:
            raise ValueError(f"--set {item!r}: expected world.<field>=<value> or learner.<field>=<value>; fields: "
                             f"world {sorted(fields['world'])}, learner {sorted(fields['learner'])}")
        kind = type(fields[section][name].default)
        out[section][name] = kind(float(value)) if kind in (int, float) else kind(value)
    return out


def studies(steps: float = 1.0, tasks: int = 50_000, world_set: dict | None = None,
            learner_set: dict | None = None) -> dict[str, Study]:
    """Every study; ``steps`` scales the scenarios' step counts, ``tasks`` sets N (the CI's short grid),
    ``world_set`` / ``learner_set`` override the model's parameters (:func:`overrides`)."""
    world, learner = WorldConfig(**{"tasks": tasks, **(world_set or {})}), LearnerConfig(**(learner_set or {}))

    def scenario(name, batch, rollouts, n_steps, **kw) -> Scenario:
        n = max(2, round(n_steps * steps))
        pool = replace(world, tasks=round(tasks * POOL[name])) if name in POOL else world
        return Scenario(name, batch, rollouts, n, world=pool, learner=learner, eval_every=max(1, n // 20), **kw)

    bots = scenario("bots", 256, 16, 200, columns=("bots",))
    bots_settings = [Setting("random", sel("random")), Setting("offline", sel("offline")),
                     Setting("bots_mopps", sel("bots_mopps")), Setting("bots_dots", sel("bots_dots")),
                     Setting("bots", sel("bots"))]
    bots_settings += [Setting(f"bots rho={r:g}", sel("bots", implicit_weight=r)) for r in SWEEP]
    bots_settings += [Setting(f"bots lambda={v:g}", sel("bots", forgetting=v)) for v in SWEEP]

    coba = scenario("coba", 512, 16, 200)
    coba_settings = [Setting("grpo", allocator=alloc("grpo"))] + [
        Setting(name, allocator=alloc(name, **({"total_steps": coba.steps} if name == "linear_decay" else {})))
        for name in ("coba", "coba_official", "knapsack", "static_exploit", "static_explore", "linear_decay",
                     "explore_to_exploit")]

    cbs = scenario("cbs", 128, 8, 300)
    cbs_settings = [Setting("keep_all", rollout_filter=filt("keep_all")),
                    Setting("cbs_star", rollout_filter=filt("cbs_star")),
                    Setting("cbs_star random", rollout_filter=filt("cbs_star", random_scores=True)),
                    Setting("cbs", rollout_filter=filt("cbs"))]
    cbs_settings += [Setting(name, rollout_filter=filt(name))
                     for name in ("cbs_random", "cbs_no_ema", "cbs_no_entropy")]
    cbs_settings += [Setting(f"{name} noise={q:g}", rollout_filter=filt(name), learner={"noise_rate": q})
                     for q in NOISE_SWEEP for name in ("keep_all", "cbs_star", "cbs")]

    ads = scenario("ads", 128, 8, 200, columns=("ads", "dots"))
    ads_settings = [Setting("uniform", sel("uniform")), Setting("ads", sel("ads")),
                    Setting("ads_no_inter", sel("ads_no_inter")), Setting("ads_no_intra", sel("ads_no_intra")),
                    Setting("dots+rr", sel("dots"), rollout_filter=filt("replay_fifo"))]
    ads_settings += [Setting(f"ads proxy={q:g}", sel("ads"), world={"proxy_noise": q}) for q in PROXY_SWEEP]

    progress = scenario("progress", 128, 8, 200, advantage="rloo", scores="countdown", columns=("progress",))
    progress_settings = [Setting(name, sel(name)) for name in (
        "uniform", "bucket_uniform", "empirical", "conservative", "density_ratio", "random_buckets", "prompt_utility")]

    compose = replace(bots, name="composition")
    compose_settings = [
        Setting("random", sel("random")), Setting("bots", sel("bots")), Setting("coba", allocator=alloc("coba")),
        Setting("cbs_star", rollout_filter=filt("cbs_star")),
        Setting("bots+coba", sel("bots"), alloc("coba")),
        Setting("bots+coba+cbs_star", sel("bots"), alloc("coba"), filt("cbs_star"))]

    return {
        "bots": Study(bots, tuple(bots_settings), "random", "BOTS (papers/000)"),
        "coba": Study(coba, tuple(coba_settings), "grpo", "CoBA-RL (papers/002)"),
        "cbs": Study(cbs, tuple(cbs_settings), "keep_all", "CBS (papers/001)"),
        "ads": Study(ads, tuple(ads_settings), "uniform", "ADS (papers/003)"),
        "progress": Study(progress, tuple(progress_settings), "uniform", "Progress-aware sampling (papers/004)",
                          metric="score", also=("accuracy", "pass16")),
        "composition": Study(compose, tuple(compose_settings), "random", "composition (no paper)"),
    }


@lru_cache(maxsize=16)
def _world(config: WorldConfig, seed: int) -> World:
    return World(config, seed)


def run_one(job: tuple[Study, str, int]) -> tuple[str, str, int, dict]:
    """One (study, setting, seed), on one torch thread (workers run side by side)."""
    from verl_ext.axes.cbs_scheduler import one_thread

    study, name, seed = job
    setting = next(s for s in study.settings if s.name == name)
    world = _world(replace(study.scenario.world, **setting.world), seed)
    with one_thread():
        return study.scenario.name, name, seed, run(study.scenario, setting, seed, world)


def default_workers() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))
