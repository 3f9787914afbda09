"""The simulation grid, built from the recipes: each study is a recipe at paper scale (``STUDY_RECIPES``), each
setting what that recipe's launcher composes for one choice of its axis (:func:`verl_ext.apps.sim.recipes.recipe_run`:
the recipe's overrides, the objective's advantage and loss aggregation, the batch, rollouts per prompt and the
actor's mini-batch included), plus the controls a method's added mechanism needs (a random subset of the same
size, replay alone, the same budget without selection). The default grid holds every paper method, baseline,
ablation and control; ``full=True`` adds the parameter sweeps and the composition study.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from functools import lru_cache

from verl_ext.apps.sim.learner import LearnerConfig
from verl_ext.apps.sim.loop import Scenario, Setting, run
from verl_ext.apps.sim.recipes import RecipeRun, component, recipe_run
from verl_ext.apps.sim.world import PRESETS, Preset, World, WorldConfig

SWEEP = (0.0, 0.05, 0.2, 0.5, 1.0)  # ρ and λ besides the default 0.1
NOISE_SWEEP = (0.0, 0.3)  # spurious-rollout rates besides the learner's default 0.1 (the CBS study)
PROXY_SWEEP = (2.5, 5.0)  # noise of the offline difficulty estimate besides the world's default 0.7 (the ADS study)
# Training pools of the papers whose pool is much smaller than N = 50k (relative to N): what a task's history
# (CoBA's previous visit, CBS's replay of a task, ADS's clusters) sees depends on how often tasks come back.
POOL = {"coba": 17_000 / 50_000, "cbs": 21_700 / 50_000, "ads": 11_500 / 50_000}  # DAPO-Math-17k; + MATH L3-5; OpenR1
# study -> (recipe group, setting, objective as its launcher takes it or None, the axis the study varies)
STUDY_RECIPES = {
    "bots": ("bots", "qwen2.5-1.5b-instruct_math", None, "selector"),
    "coba": ("coba", "qwen3-4b-base", None, "allocator"),
    "cbs": ("cbs", "qwen3-4b-base", "grpo", "rollout_filter"),
    "ads": ("ads", "qwen2.5-math-1.5b", "grpo", "selector"),
    "progress": ("progress", "qwen2.5-0.5b_countdown", "rloo", "selector"),
}
# [decision] steps per study (the recipes' 100-800 scaled to what the CPU grid affords; --steps-scale multiplies)
STEPS = {"bots": 200, "coba": 200, "cbs": 300, "ads": 200, "progress": 200}
SEEDS = {"bots": 16, "coba": 16, "progress": 16, "cbs": 8, "ads": 8, "composition": 8}  # 16 where a run is cheap


@dataclass(frozen=True)
class Study:
    """A scenario, its settings and the setting every other is compared with."""

    scenario: Scenario
    settings: tuple[Setting, ...]
    baseline: str
    paper: str
    recipe: str
    seeds: int = 8
    metric: str = "accuracy"  # accuracy (held-out avg@k) | score (mean verifier score) | pass_at_k
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


def sel(name: str, **kw) -> dict:
    """``selector=<name>`` as Hydra composes it, with field overrides (tests, ad-hoc settings)."""
    return component("selector", name, tuple(f"{k}={v}" for k, v in sorted(kw.items())))


def filt(name: str, **kw) -> dict:
    return component("rollout_filter", name, tuple(f"{k}={v}" for k, v in sorted(kw.items())))


def advantage_of(r: RecipeRun) -> str:
    if r.prefilters:
        raise ValueError(f"the simulator does not model prefilters {list(r.prefilters)} (DAPO's dynamic sampling)")
    if r.adv_estimator == "rloo":
        return "rloo"
    if r.adv_estimator == "grpo":
        return "grpo" if r.norm_adv_by_std else "grpo_centred"
    raise ValueError(f"algorithm.adv_estimator={r.adv_estimator!r}: the simulator models grpo and rloo")


def custom_settings(items: list[str]) -> dict[str, tuple[str, ...]]:
    """``["mine=selector=custom,selector.path=f.py,selector.cls=C,+selector.config.epsilon=0.2"]`` -> ``{"mine": (
    "selector=custom", "selector.path=/abs/f.py", ...)}``: a setting of the user's, Hydra overrides as the trainer takes
    them (:func:`verl_ext.axes.plugins.spec_overrides`)."""
    from verl_ext.axes.plugins import spec_overrides

    out = {}
    for item in items:
        name, sep, rest = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError("no NAME=")
            out[name] = spec_overrides(rest)
        except ValueError as e:
            raise ValueError(f"--custom {item!r}: expected NAME=AXIS=CHOICE,KEY=VALUE,... ({e})") from e
    return out


def studies(steps: float = 1.0, tasks: int = 50_000, world_set: dict | None = None,
            learner_set: dict | None = None, full: bool = False,
            custom: dict[str, tuple[str, ...]] | None = None) -> dict[str, Study]:
    """Every study; ``steps`` scales the step counts, ``tasks`` sets N (the CI's short grid), ``world_set`` /
    ``learner_set`` override the model's parameters (:func:`overrides`), ``full`` adds the sweeps and the
    composition study, ``custom`` (:func:`custom_settings`) adds each of the user's settings to every study that varies
    its axis, beside that study's baseline."""
    world, learner = WorldConfig(**{"tasks": tasks, **(world_set or {})}), LearnerConfig(**(learner_set or {}))
    from eval.evaluate import PRESETS as EVAL

    def scenario(name: str, **kw) -> Scenario:
        group, setting, objective, axis = STUDY_RECIPES[name]
        r = recipe_run(group, setting, objective, axis, TRAINER_DEFAULT[axis])
        n = max(2, round(STEPS[name] * steps))
        pool = replace(world, tasks=round(tasks * POOL[name])) if name in POOL else world
        return Scenario(name, r.batch, r.rollouts, n, mini_batch=r.mini_batch * r.rollouts,
                        advantage=advantage_of(r), aggregation=r.loss_agg_mode, world=pool, learner=learner,
                        eval_every=max(1, n // 20), eval_samples=EVAL[name]["k"], **kw)

    def make(study: str, label: str, choice: str, *extra: str, **kw) -> Setting:
        group, setting, objective, axis = STUDY_RECIPES[study]
        r = recipe_run(group, setting, objective, axis, choice, tuple(extra))
        if r.batch != scenarios[study].batch:
            kw.setdefault("batch", r.batch)
        return Setting(label, r.selector, r.allocator, r.rollout_filter, **kw)

    scenarios = {"bots": scenario("bots", columns=("bots",)), "coba": scenario("coba"), "cbs": scenario("cbs"),
                 "ads": scenario("ads", columns=("ads", "dots")),
                 "progress": scenario("progress", scores="countdown", columns=("progress",))}
    bots = [make("bots", name, name) for name in ("random", "offline", "bots_mopps", "bots_dots", "bots")]
    coba_names = ("coba", "coba_official", "knapsack") + (
        ("static_exploit", "static_explore", "linear_decay", "explore_to_exploit") if full else ())
    coba = [make("coba", "grpo", "grpo")] + [
        make("coba", name, name, *([f"allocator.total_steps={scenarios['coba'].steps}"]
                                   if name == "linear_decay" else [])) for name in coba_names]
    cbs = [make("cbs", "keep_all", "keep_all"), make("cbs", "cbs_star", "cbs_star"),
           make("cbs", "cbs_star random", "cbs_star", "rollout_filter.random_scores=true"),
           make("cbs", "cbs", "cbs")] + [make("cbs", name, name) for name in ("cbs_random", "cbs_no_ema",
                                                                               "cbs_no_entropy")]
    ads = [make("ads", name, name) for name in ("uniform", "ads", "ads_no_inter", "ads_no_intra")]
    dots_rr = recipe_run("ads", *STUDY_RECIPES["ads"][1:3], "selector", "dots").rollout_filter
    fresh = round(scenarios["ads"].batch * recipe_run("ads", *STUDY_RECIPES["ads"][1:3], "selector",
                                                      "dots").selector["fresh_fraction"])
    ads += [make("ads", "dots+rr", "dots"),  # the recipe's DOTS+RR
            make("ads", "dots alone", "dots", "rollout_filter=drop_all_wrong", "selector.fresh_fraction=1.0"),
            make("ads", "uniform+rr", "uniform", f"rollout_filter={dots_rr['name']}",  # replay alone, DOTS+RR's
                 *(f"rollout_filter.{k}={v}" for k, v in dots_rr.items() if k != "name"), batch=fresh)]  # budget
    progress = [make("progress", name, name) for name in (
        "uniform", "bucket_uniform", "empirical", "conservative", "density_ratio", "random_buckets", "prompt_utility")]
    if full:
        bots += [make("bots", f"bots rho={r:g}", "bots", f"selector.implicit_weight={r}") for r in SWEEP]
        bots += [make("bots", f"bots lambda={v:g}", "bots", f"selector.forgetting={v}") for v in SWEEP]
        cbs += [make("cbs", f"{name} noise={q:g}", name, learner={"noise_rate": q})
                for q in NOISE_SWEEP for name in ("keep_all", "cbs_star", "cbs")]
        ads += [make("ads", f"ads proxy={q:g}", "ads", world={"proxy_noise": q}) for q in PROXY_SWEEP]
    for name, (choice, *extra) in (custom or {}).items():
        axis, _, value = choice.partition("=")
        for study, settings in (("bots", bots), ("coba", coba), ("cbs", cbs), ("ads", ads), ("progress", progress)):
            if STUDY_RECIPES[study][3] == axis:
                settings.append(make(study, name, value, *extra))
    out = {
        "bots": Study(scenarios["bots"], tuple(bots), "random", "BOTS", "bots/" + STUDY_RECIPES["bots"][1]),
        "coba": Study(scenarios["coba"], tuple(coba), "grpo", "CoBA-RL", "coba/" + STUDY_RECIPES["coba"][1]),
        "cbs": Study(scenarios["cbs"], tuple(cbs), "keep_all", "CBS", "cbs/" + STUDY_RECIPES["cbs"][1]),
        "ads": Study(scenarios["ads"], tuple(ads), "uniform", "ADS", "ads/" + STUDY_RECIPES["ads"][1]),
        "progress": Study(scenarios["progress"], tuple(progress), "uniform", "Progress-aware sampling (Yan)",
                          "progress/" + STUDY_RECIPES["progress"][1], metric="score", also=("accuracy", "pass_at_k")),
    }
    if full:
        compose = [make("bots", "random", "random"), make("bots", "bots", "bots"),
                   make("bots", "coba", "random", "allocator=coba"),
                   make("bots", "cbs_star", "random", "rollout_filter=cbs_star"),
                   make("bots", "bots+coba", "bots", "allocator=coba"),
                   make("bots", "bots+coba+cbs_star", "bots", "allocator=coba", "rollout_filter=cbs_star")]
        out["composition"] = Study(replace(scenarios["bots"], name="composition"), tuple(compose), "random",
                                   "composition (no paper)", "bots/" + STUDY_RECIPES["bots"][1] + " + overrides")
    return {k: replace(v, seeds=SEEDS[k]) for k, v in out.items()}


TRAINER_DEFAULT = {"selector": "uniform", "allocator": "fixed", "rollout_filter": "keep_all"}


def in_world(scenario: Scenario, preset: Preset) -> Scenario:
    """The scenario in a world preset (its overrides under the run's ``--set`` ones, which win)."""
    world = replace(WorldConfig(), **preset.world)
    world = replace(world, **{k: getattr(scenario.world, k) for k in WorldConfig.__dataclass_fields__
                              if getattr(scenario.world, k) != getattr(WorldConfig(), k)})
    learner = replace(LearnerConfig(), **preset.learner)
    learner = replace(learner, **{k: getattr(scenario.learner, k) for k in LearnerConfig.__dataclass_fields__
                                  if getattr(scenario.learner, k) != getattr(LearnerConfig(), k)})
    return replace(scenario, world=world, learner=learner)


@lru_cache(maxsize=16)
def _world(config: WorldConfig, seed: int) -> World:
    return World(config, seed)


def run_one(job: tuple[str, Study, str, int]) -> tuple[str, str, str, int, dict]:
    """One (world, study, setting, seed), on one torch thread (workers run side by side); the record gets the
    run's CPU seconds (``cpu_s``, with its world's construction when this process had not built it yet)."""
    from verl_ext.axes.cbs_scheduler import one_thread

    world_name, study, name, seed = job
    setting = next(s for s in study.settings if s.name == name)
    scenario = in_world(study.scenario, PRESETS[world_name])
    world = _world(replace(scenario.world, **setting.world), seed)
    with one_thread():
        start = time.process_time()
        record = run(scenario, setting, seed, world)
    return world_name, study.scenario.name, name, seed, {**record, "cpu_s": time.process_time() - start}


def default_workers() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))
