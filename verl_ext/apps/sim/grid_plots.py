"""PNG plots of a simulated grid: evaluation curves per study (mean over seeds, band = min..max), the ρ / λ
sweeps, ETR over steps, and CoBA's task-transition matrices; each says it is simulated, with its seeds and steps."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from eval.metrics import PASS_RATE_BINS  # noqa: E402
from verl_ext.apps.sim.report import Records, curve, per_seed  # noqa: E402

SWEEP_MARKERS = (" rho=", " lambda=", " noise=", " proxy=")


def sim_note(runs: dict[str, dict[int, dict]]) -> str:
    """The subtitle of a plot of ``runs`` (setting -> seed -> record): simulated, its seeds and steps."""
    seeds = sorted({len(by_seed) for by_seed in runs.values()})
    steps = sorted({len(r["etr"]) for by_seed in runs.values() for r in by_seed.values()})
    return (f"simulated (a model's prediction, no training): {'/'.join(map(str, seeds))} seeds, "
            f"{'/'.join(map(str, steps))} steps")


def _save(fig, path: Path, note: str) -> Path:
    fig.suptitle(note, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def curves(name: str, runs: dict[str, dict[int, dict]], metric: str, out: Path, prefix: str) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for setting, by_seed in runs.items():
        if any(m in setting for m in SWEEP_MARKERS):
            continue
        steps = np.asarray(by_seed[min(by_seed)]["eval_steps"])
        ys = np.array([curve(r, metric) for r in by_seed.values()])
        line, = ax.plot(steps, ys.mean(0), label=setting)
        ax.fill_between(steps, ys.min(0), ys.max(0), color=line.get_color(), alpha=0.15)
    ax.set(title=f"{name}: held-out {metric} (simulation, mean over seeds)", xlabel="step", ylabel=metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out / f"{prefix}{name}_curves.png", sim_note(runs))


def sweeps(runs: dict[str, dict[int, dict]], metric: str, out: Path, prefix: str) -> Path:
    """Final and AUC metric against ρ and against λ (BOTS; the full grid)."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, (param, key) in zip(axes, (("ρ", "rho"), ("λ", "lambda"))):
        pts = sorted((float(s.split("=")[1]), s) for s in runs if f" {key}=" in s)
        x = [v for v, _ in pts]
        for label, statistic in (("final", "final"), ("AUC", "auc")):
            y = np.array([per_seed(runs[s], metric, statistic) for _, s in pts])
            ax.errorbar(x, y.mean(1), yerr=y.std(1), marker="o", capsize=3, label=label)
        ax.set(xscale="symlog", xlabel=param, ylabel=metric, title=f"BOTS {param} sweep")
        ax.set_xscale("symlog", linthresh=0.05)
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(fig, out / f"{prefix}bots_sweeps.png", sim_note(runs))


def etr(name: str, runs: dict[str, dict[int, dict]], out: Path, prefix: str) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    for setting, by_seed in runs.items():
        if any(m in setting for m in SWEEP_MARKERS):
            continue
        ys = np.array([r["etr"] for r in by_seed.values()]).mean(0)
        ax.plot(np.arange(1, len(ys) + 1), ys, label=setting)
    ax.set(title=f"{name}: effective task ratio of the selected batch", xlabel="step", ylabel="ETR", ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out / f"{prefix}{name}_etr.png", sim_note(runs))


def transitions(runs: dict[str, dict[int, dict]], settings: tuple[str, ...], out: Path, prefix: str) -> Path:
    fig, axes = plt.subplots(1, len(settings), figsize=(3.6 * len(settings), 3.6), squeeze=False)
    for ax, setting in zip(axes[0], settings):
        counts = np.sum([np.asarray(r["transitions"]) for r in runs[setting].values()], axis=0)
        with np.errstate(invalid="ignore"):
            frac = counts / counts.sum(axis=1, keepdims=True)
        ax.imshow(np.nan_to_num(frac), vmin=0, vmax=1, cmap="viridis")
        for (i, j), v in np.ndenumerate(frac):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
        ax.set_xticks(range(len(PASS_RATE_BINS)), PASS_RATE_BINS, rotation=45, fontsize=7)
        ax.set_yticks(range(len(PASS_RATE_BINS)), PASS_RATE_BINS, fontsize=7)
        ax.set(title=setting, xlabel="final pass rate", ylabel="initial pass rate")
    return _save(fig, out / f"{prefix}coba_transitions.png", sim_note({s: runs[s] for s in settings}))


def all_plots(records: Records, metrics: dict[str, str], out: Path, prefix: str = "") -> list[Path]:
    """Every plot of one world's records, named ``<prefix><plot>.png``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [curves(name, runs, metrics[name], out, prefix) for name, runs in records.items()]
    paths += [etr(name, records[name], out, prefix) for name in ("bots", "ads", "progress", "composition")
              if name in records]
    if "bots" in records and any(" rho=" in s for s in records["bots"]):
        paths.append(sweeps(records["bots"], metrics["bots"], out, prefix))
    if "coba" in records:
        shown = tuple(s for s in ("grpo", "knapsack", "coba") if s in records["coba"])
        paths.append(transitions(records["coba"], shown, out, prefix))
    return paths
