"""``python -m verl_ext.apps.sim.calibration``: the simulator against the real CPU trainer on the demo's setting.

The real side runs ``make demo``'s training (:mod:`verl_ext.apps.demo`: the ``arithmetic_easy`` pool, the warm-started
embedded policy, 6 tasks x 24 rollouts per step) through ``python -m verl_ext.main --cpu`` for uniform GRPO and for
BOTS + CoBA-RL (the demo's method), ``--seeds`` trainer seeds (``data.seed``: the selection's and verl's RNG; the
policy and the pool stay the demo's) x ``--steps`` steps. The simulated side runs the same components and sizes on
a world fitted to that pool (:meth:`verl_ext.apps.sim.world.World.fitted`: each task's difficulty from the warm start's
measured pass rate, ``data_prep.reference_pass_rates``, which is also BOTS's strong reference) over
``--sim-seeds`` seeds. Per step it compares the mechanism metrics both log: ETR, degenerate-group rate, the
selected tasks' pass rate in their rollouts and the spread of rollouts per task (CoBA's; their mean is fixed);
their means over steps with 95% t intervals over seeds (``agree`` when the two intervals overlap). Writes
``OUT/calibration.md``, ``OUT/calibration.png`` and ``OUT/calibration.json``; ``--compare-only`` re-reads the real
runs under ``OUT/real`` instead of training.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from eval.metrics import degenerate_group_rate, effective_task_ratio, task_pass_rates
from verl_ext.apps.sim.report import t_interval

METHODS = {"uniform": ("selector=uniform", "allocator=fixed")}  # and "bots+coba": the demo's METHOD
METRICS = {"etr": "ETR", "degenerate": "degenerate-group rate", "observed_p": "selected tasks' pass rate",
           "counts_std": "rollouts per task, s.d. across the step's tasks"}  # their mean is budget / tasks
Series = dict[str, dict[int, dict[str, list[float]]]]  # method -> seed -> metric -> per step


def methods() -> dict[str, tuple[str, ...]]:
    from verl_ext.apps.demo import METHOD

    return {**METHODS, "bots+coba": METHOD}


def series_of_dumps(dumps: dict[int, dict]) -> dict[str, list[float]]:
    """Per step (sorted) of a real run's step dumps (``verl_ext.trainer.records.read_dumps``): the metrics the
    simulator records for the same step."""
    out: dict[str, list[float]] = {k: [] for k in METRICS}
    for step in sorted(dumps):
        tasks, reward = np.asarray(dumps[step]["rollout_task"]), np.asarray(dumps[step]["rollout_reward"])
        rates = task_pass_rates(tasks, reward)
        out["etr"].append(effective_task_ratio(rates))
        out["degenerate"].append(degenerate_group_rate(tasks, reward))
        out["observed_p"].append(float(rates.mean()))
        out["counts_std"].append(float(np.std(dumps[step]["counts"])))
    return out


def axis_configs(overrides: tuple[str, ...]) -> dict[str, dict]:
    """The three components the trainer's defaults and ``overrides`` (``axis=name`` / ``axis.field=value``) give."""
    from verl_ext.apps.sim.recipes import AXES, TRAINER_DEFAULTS, axis_override, component

    names, fields = dict(TRAINER_DEFAULTS), {a: [] for a in AXES}
    for item in overrides:
        axis, key, value = axis_override(item)
        if axis is None:
            raise ValueError(f"{item!r}: only selector / allocator / rollout_filter overrides are simulated")
        if key is None:
            names[axis] = value
        else:
            fields[axis].append(f"{key}={value}")
    return {a: component(a, names[a], tuple(fields[a])) for a in AXES}


def simulate(pool: dict[str, np.ndarray], tasks: int, budget: int, steps: int, seeds: list[int],
             floor: float) -> Series:
    """Each method on the world fitted to ``pool`` (``index``, ``weak``, ``strong`` arrays)."""
    from verl_ext.apps.sim.loop import Scenario, Setting, run
    from verl_ext.apps.sim.world import World, WorldConfig

    if budget % tasks:
        raise ValueError(f"budget {budget} is not a multiple of {tasks} tasks: rollouts per prompt must be whole")
    config = WorldConfig(held_out=500)
    scenario = Scenario("calibration", tasks, budget // tasks, steps, mini_batch=budget, columns=("bots",),
                        eval_every=steps, eval_samples=10, world=config)
    out: Series = {}
    for name, overrides in methods().items():
        setting = Setting(name, **axis_configs(overrides))
        out[name] = {}
        for seed in seeds:
            world = World.fitted(config, seed, pool["index"], pool["strong"], pool["weak"], pool["strong"], floor)
            record = run(scenario, setting, seed, world)
            out[name][seed] = {k: record[k] for k in METRICS}
    return out


def summary(values: dict[int, list[float]]) -> tuple[float, float, float]:
    """Mean over steps per seed -> (mean, low, high) over seeds (95% t)."""
    d = t_interval(np.array([np.mean(v) for v in values.values()]))
    return d.mean, d.low, d.high


def compare_markdown(real: Series, sim: Series) -> str:
    lines = ["| method | metric | real trainer (mean over steps, 95% t over seeds) | simulator | |",
             "|---|---|---|---|---|"]
    for method in real:
        for key, label in METRICS.items():
            r = summary({s: v[key] for s, v in real[method].items()})
            m = summary({s: v[key] for s, v in sim[method].items()})
            agree = "agree" if r[1] <= m[2] and m[1] <= r[2] else "differ"
            lines.append(f"| `{method}` | {label} | {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}] ({len(real[method])} seeds) | "
                         f"{m[0]:.3f} [{m[1]:.3f}, {m[2]:.3f}] ({len(sim[method])} seeds) | {agree} |")
    return "\n".join(lines)


def plot(real: Series, sim: Series, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.5))
    for ax, (key, label) in zip(axes, METRICS.items()):
        for method in real:
            for side, runs, style in (("real", real, "-"), ("sim", sim, "--")):
                y = np.array([v[key] for v in runs[method].values()])
                steps = np.arange(1, y.shape[1] + 1)
                line, = ax.plot(steps, y.mean(0), style, label=f"{method} ({side})")
                ax.fill_between(steps, y.min(0), y.max(0), color=line.get_color(), alpha=0.12)
        ax.set(title=label, xlabel="step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(real: Series, sim: Series, out: Path, note: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    table = compare_markdown(real, sim)
    (out / "calibration.md").write_text(f"{note}\n\n{table}\n")
    (out / "calibration.json").write_text(json.dumps({"real": real, "sim": sim}, sort_keys=True))
    plot(real, sim, out / "calibration.png")
    return table


def real_runs(out: Path, steps: int, seeds: list[int], train: bool) -> Series:
    """The demo's training per method and seed under ``out/real`` (trained unless ``train`` is false)."""
    from verl_ext.apps import demo
    from verl_ext.trainer.records import read_dumps

    inputs = demo_inputs(out) if train else None
    series: Series = {}
    for name, overrides in methods().items():
        series[name] = {}
        for seed in seeds:
            run_out = out / "real" / name / f"seed_{seed}"
            if train:
                args, _ = demo.parse_args(["--steps", str(steps), "--seed", str(seed), "--eval-tasks", "0"])
                code, _ = demo.train(run_out, *inputs, args, [], method=overrides)
                if code != 0:
                    raise SystemExit(f"the trainer failed for {name} seed {seed} (log: {run_out / 'trainer.log'})")
            series[name][seed] = series_of_dumps(read_dumps(run_out / "run"))
    return series


def demo_inputs(out: Path) -> tuple[str, Path, Path]:
    """(the demo's warm start, its pool with reference pass rates, held-out file), built once (cached)."""
    from verl_ext.apps import demo
    from verl_ext.apps.warm_start import WarmStartConfig, warm_start_path

    args, _ = demo.parse_args([])
    warm = warm_start_path(WarmStartConfig(task=demo.TASK, steps=demo.WARM_START_STEPS, seed=0, eval_tasks=0))
    pool_file, heldout = demo.prepare_pool(out, args.pool, 1, 0)
    return warm, demo.reference_pass_rates(pool_file, "embedded", warm, args.ref_n, args.response_length, 0), heldout


def read_pool(pool_ref: Path) -> dict[str, np.ndarray]:
    from data_prep.schema import read_rows

    rows = read_rows(pool_ref)
    return {k: np.array([r["extra_info"][c] for r in rows]) for k, c in (
        ("index", "index"), ("weak", "weak_pass_rate"), ("strong", "strong_pass_rate"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.sim.calibration", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="real trainer seeds")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sim-seeds", type=int, default=16)
    parser.add_argument("--out", default="outputs/sim_calibration")
    parser.add_argument("--compare-only", action="store_true", help="read the real runs under OUT/real")
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.sim_seeds < 2:
        parser.error("--seeds and --sim-seeds must be at least 2 (t intervals)")
    out = Path(args.out).resolve()
    real = real_runs(out, args.steps, list(range(args.seeds)), train=not args.compare_only)
    from verl_ext.apps import demo

    d, _ = demo.parse_args([])
    _, pool_ref, _ = demo_inputs(out)
    sim = simulate(read_pool(pool_ref), d.tasks, d.budget, args.steps, list(range(args.sim_seeds)),
                   floor=0.5 / d.ref_n)
    note = (f"The demo's setting ({d.tasks} tasks x {d.budget} rollouts per step, pool of {d.pool} `{demo.TASK}` "
            f"tasks, the warm-started embedded policy): {args.steps} steps, real CPU trainer {args.seeds} seeds, "
            f"simulator {args.sim_seeds} seeds on the world fitted to the pool (`{pool_ref.name}`).")
    print(write(real, sim, out, note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
