"""``python -m verl_ext.apps.sim.calibration``: the simulator against the real CPU trainer on the demo's setting.

The real side is :mod:`verl_ext.apps.study` for uniform GRPO and BOTS + CoBA-RL (the demo's method) on the demo's
setting (the ``arithmetic_easy`` pool, the warm-started embedded policy, 6 tasks x 24 rollouts per step), ``--seeds``
trainer seeds (``data.seed``: the selection's and verl's RNG; the policy and the pool stay the demo's) x ``--steps``
steps, no held-out evaluation; finished runs under ``OUT/real`` are kept. The simulated side runs the same components and sizes on
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

from verl_ext.apps import study
from verl_ext.apps.inputs import TASK
from eval.metrics import t_interval

# the study's metrics the simulator records too (the mean rollouts per task is budget / tasks in both)
METRICS = {k: study.METRICS[k] for k in ("etr", "degenerate", "observed_p", "counts_std")}
Series = study.Series


def methods() -> dict[str, tuple[str, ...]]:
    return {m: study.METHODS[m] for m in ("uniform", "bots+coba")}


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
                study.band(ax, runs[method], key, f"{method} ({side})", style)
        ax.set(title=label, xlabel="step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    seeds = lambda series: "/".join(map(str, sorted({len(runs) for runs in series.values()})))  # noqa: E731
    steps = sorted({len(run["etr"]) for runs in real.values() for run in runs.values()})
    fig.suptitle(f"real: CPU trainer, {seeds(real)} seeds; sim: simulated, {seeds(sim)} seeds; "
                 f"{'/'.join(map(str, steps))} steps (line: mean, band: min-max)", fontsize=9)
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


def real_runs(out: Path, steps: int, seeds: list[int], train: bool) -> tuple[Series, Path]:
    """:func:`methods` x ``seeds`` through the study under ``out/real`` (the unfinished ones trained unless ``train``
    is false): their series of :data:`METRICS` and the pool file with reference pass rates."""
    args, _ = study.parse_args(["--steps", str(steps), "--eval-tasks", "0", "--seeds", ",".join(map(str, seeds))])
    data = study.inputs(out, args)
    if train:
        study.train_all(out / "real", methods(), seeds, args, [], data)
    series, _, _ = study.read_runs(out / "real", list(methods()), seeds)
    return {m: {s: {k: v[k] for k in METRICS} for s, v in runs.items()} for m, runs in series.items()}, data.pool_ref


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
    real, pool_ref = real_runs(out, args.steps, list(range(args.seeds)), train=not args.compare_only)
    from verl_ext.apps import demo

    d, _ = demo.parse_args([])
    sim = simulate(read_pool(pool_ref), d.tasks, d.budget, args.steps, list(range(args.sim_seeds)),
                   floor=0.5 / d.ref_n)
    note = (f"The demo's setting ({d.tasks} tasks x {d.budget} rollouts per step, pool of {d.pool} `{TASK}` "
            f"tasks, the warm-started embedded policy): {args.steps} steps, real CPU trainer {args.seeds} seeds, "
            f"simulator {args.sim_seeds} seeds on the world fitted to the pool (`{pool_ref.name}`).")
    print(write(real, sim, out, note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
