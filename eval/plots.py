"""Training and evaluation plots of several runs (PNG, matplotlib Agg).

    python -m eval.plots --runs NAME=RUN_DIR [NAME=RUN_DIR ...] --out DIR [--baseline LABEL:etr=V,degenerate=V ...]

Writes into DIR, each only when some run has the data (otherwise it says what it skipped):

* ``eval_<benchmark>.png``, ``eval_aggregated.png``: evaluation accuracy over steps, a line per run
  (:attr:`eval.run_logs.Run.curve`; aggregated = mean over the benchmarks every run evaluated), with any
  :class:`Interval` of the caller's as an error bar;
* ``etr.png``, ``degenerate.png``: effective task ratio and degenerate-group rate over steps, with any
  ``--baseline`` of theirs as a dashed line (e.g. what a uniform draw would give: ``verl_ext.apps.demo``);
* ``rollouts_per_task.png``: per run, the fraction of selected tasks per rollout-count bin over steps
  (from the step dumps' counts);
* ``cluster_probs.png``: per run, ``data_selection/selector/cluster_prob/*`` over steps (ADS);
* ``selected_pass_rate.png``: per run, the fraction of the step's selected tasks per pass-rate bin
  (their pass rate in that step's rollouts) over steps, as a heat map.

Every title carries :attr:`PlotsConfig.subtitle` (what a reader needs: seeds, machine, steps). :func:`run` is the
typed entry point (the demo calls it); ``main`` is its command line.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from eval.metrics import (PASS_RATE_BINS, aggregate_curves, degenerate_rate_over_steps, etr_over_steps,  # noqa: E402
                          pass_rate_bin)
from eval.run_logs import Run, parse_runs  # noqa: E402

CLUSTER_PREFIX = "data_selection/selector/cluster_prob/"


@dataclass(frozen=True)
class Interval:
    """An interval on a run's evaluation curve: at ``step`` of ``benchmark``, accuracy ``low`` to ``high``."""

    benchmark: str
    step: int
    low: float
    high: float
    label: str


@dataclass(frozen=True)
class PlotsConfig:
    """The runs (name -> run folder), the PNGs' folder, dashed baselines per plot (``{"etr" | "degenerate": {label:
    value}}``), the subtitle of every plot and intervals on the evaluation curves (run name -> :class:`Interval`)."""

    runs: Mapping[str, str | Path]
    out: Path
    baselines: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    subtitle: str = ""
    intervals: Mapping[str, Interval] = field(default_factory=dict)


def titled(title: str, subtitle: str) -> str:
    """``title`` with ``subtitle`` wrapped below it."""
    return title + ("\n" + textwrap.fill(subtitle, 80) if subtitle else "")


def _lines(path: Path, title: str, ylabel: str, series: dict[str, tuple[np.ndarray, np.ndarray]],
           baselines: Mapping[str, float] | None = None, subtitle: str = "",
           intervals: Mapping[str, Interval] | None = None) -> Path:
    """A line per run, with its interval (if any) as an error bar; each baseline a dashed horizontal line."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for name, (x, y) in series.items():
        line, = ax.plot(x, y, marker="o", markersize=3, label=name)
        band = (intervals or {}).get(name)
        if band is not None:
            at = float(y[list(x).index(band.step)])
            ax.errorbar([band.step], [at], yerr=[[at - band.low], [band.high - at]], color=line.get_color(),
                        capsize=5, linewidth=1.5, label=band.label)
    for (label, value), color in zip((baselines or {}).items(), ("0.4", "0.65", "0.25")):
        ax.axhline(value, linestyle="--", color=color, label=label)
    ax.set_title(titled(title, subtitle), fontsize=9)
    ax.set(xlabel="step", ylabel=ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _edges(steps: np.ndarray) -> np.ndarray:
    """Cell edges around each step for ``pcolormesh`` (steps may be uneven)."""
    if len(steps) == 1:
        return np.array([steps[0] - 0.5, steps[0] + 0.5])
    mid = (steps[1:] + steps[:-1]) / 2
    return np.concatenate([[2 * steps[0] - mid[0]], mid, [2 * steps[-1] - mid[-1]]])


def _heatmaps(path: Path, title: str, maps: dict[str, tuple[np.ndarray, np.ndarray]], labels: list[str],
              subtitle: str = "") -> Path:
    """One panel per run: ``(steps, fractions[bins, steps])``, bins labelled ``labels`` bottom-up."""
    fig, axes = plt.subplots(len(maps), 1, figsize=(7, 2 + 1.6 * len(maps)), squeeze=False)
    for ax, (name, (steps, frac)) in zip(axes[:, 0], maps.items()):
        mesh = ax.pcolormesh(_edges(steps.astype(float)), np.arange(len(labels) + 1), frac, vmin=0, vmax=1,
                             cmap="viridis")
        ax.set_yticks(np.arange(len(labels)) + 0.5, labels)
        ax.set(title=name, xlabel="step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.colorbar(mesh, ax=ax, label="fraction")
    fig.suptitle(titled(title, subtitle), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def eval_curves(runs: dict[str, Run], out: Path, subtitle: str = "",
                intervals: Mapping[str, Interval] | None = None) -> list[Path]:
    benchmarks = sorted({b for run in runs.values() for b in run.curve})
    written = []
    for bench in benchmarks:
        series = {}
        for name, run in runs.items():
            points = sorted(run.curve.get(bench, {}).items())
            if points:
                series[name] = (np.array([s for s, _ in points]), np.array([r["accuracy"] for _, r in points]))
        shown = {name: i for name, i in (intervals or {}).items() if i.benchmark == bench}
        written.append(_lines(out / f"eval_{bench}.png", f"evaluation: {bench}", "accuracy", series,
                              subtitle=subtitle, intervals=shown))
    aggregated = {}
    for name, run in runs.items():
        if benchmarks and all(b in run.curve for b in benchmarks):
            try:
                aggregated[name] = aggregate_curves({b: {s: r["accuracy"] for s, r in run.curve[b].items()}
                                                     for b in benchmarks})
            except ValueError:  # no step evaluated on every benchmark
                pass
    if aggregated:
        written.append(_lines(out / "eval_aggregated.png", "evaluation: mean over " + ", ".join(benchmarks),
                              "accuracy", aggregated, subtitle=subtitle))
    return written


def etr(runs: dict[str, Run], out: Path, baselines: Mapping[str, float] | None = None,
        subtitle: str = "") -> list[Path]:
    series = {name: etr_over_steps(run.path) for name, run in runs.items()}
    series = {name: s for name, s in series.items() if len(s[0])}
    return [_lines(out / "etr.png", "effective task ratio", "ETR", series, baselines, subtitle)] if series else []


def degenerate(runs: dict[str, Run], out: Path, baselines: Mapping[str, float] | None = None,
               subtitle: str = "") -> list[Path]:
    series = {name: degenerate_rate_over_steps(run.path) for name, run in runs.items()}
    series = {name: s for name, s in series.items() if len(s[0])}
    return ([_lines(out / "degenerate.png", "degenerate groups (all rewards equal)", "rate", series, baselines,
                    subtitle)] if series else [])


def rollouts_per_task(runs: dict[str, Run], out: Path, subtitle: str = "") -> list[Path]:
    from verl_ext.trainer.step_metrics import COUNT_BINS, count_histogram

    labels = [k.rsplit("/", 1)[1] for k in count_histogram(np.array(COUNT_BINS))]
    maps = {}
    for name, run in runs.items():
        if run.dumps:
            steps = np.array(sorted(run.dumps))
            hist = [list(count_histogram(np.array(run.dumps[s]["counts"])).values()) for s in steps]
            maps[name] = (steps, np.array(hist).T)
    return ([_heatmaps(out / "rollouts_per_task.png", "rollouts per selected task", maps, labels, subtitle)]
            if maps else [])


def cluster_probs(runs: dict[str, Run], out: Path, subtitle: str = "") -> list[Path]:
    panels = {}
    for name, run in runs.items():
        steps = sorted(s for s, m in run.metrics.items() if any(k.startswith(CLUSTER_PREFIX) for k in m))
        clusters = sorted({k[len(CLUSTER_PREFIX):] for s in steps for k in run.metrics[s]
                           if k.startswith(CLUSTER_PREFIX)}, key=lambda c: (len(c), c))  # "2" before "10"
        if steps:
            panels[name] = (np.array(steps), clusters, np.array(
                [[run.metrics[s].get(CLUSTER_PREFIX + c, np.nan) for s in steps] for c in clusters], dtype=float))
    if not panels:
        return []
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2 + 2 * len(panels)), squeeze=False)
    for ax, (name, (steps, clusters, probs)) in zip(axes[:, 0], panels.items()):
        ax.stackplot(steps, np.nan_to_num(probs), labels=clusters)
        ax.set(title=name, xlabel="step", ylabel="cluster probability", ylim=(0, 1))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(clusters) <= 12:
            ax.legend(fontsize="x-small", ncol=2, loc="upper right")
    if subtitle:
        fig.suptitle(textwrap.fill(subtitle, 80), fontsize=9)
    fig.tight_layout()
    path = out / "cluster_probs.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]


def selected_pass_rates(runs: dict[str, Run], out: Path, subtitle: str = "") -> list[Path]:
    maps = {}
    for name, run in runs.items():
        rates = run.task_pass_rates
        if rates:
            steps = np.array(sorted(rates))
            bins = [np.bincount(pass_rate_bin(list(rates[s].values())), minlength=len(PASS_RATE_BINS)) for s in steps]
            maps[name] = (steps, np.array([b / b.sum() for b in bins]).T)
    return ([_heatmaps(out / "selected_pass_rate.png", "pass rate of the selected tasks", maps, list(PASS_RATE_BINS),
                       subtitle)] if maps else [])


def parse_baselines(specs: list[str]) -> dict[str, dict[str, float]]:
    """``LABEL:etr=V,degenerate=V`` specs -> {plot: {label: value}}."""
    baselines: dict[str, dict[str, float]] = {"etr": {}, "degenerate": {}}
    for spec in specs:
        label, sep, values = spec.rpartition(":")
        try:
            pairs = [v.split("=", 1) for v in values.split(",")]
            parsed = {key: float(value) for key, value in pairs}
        except ValueError:
            parsed = {}
        if not sep or not label or not parsed or not set(parsed) <= set(baselines):
            raise SystemExit(f"--baseline {spec!r}: expected LABEL:etr=V,degenerate=V (either or both)")
        for key, value in parsed.items():
            baselines[key][label] = value
    return baselines


def run(config: PlotsConfig) -> list[Path]:
    """Write every plot some run has the data for into ``config.out`` (saying what it skipped); the PNGs written."""
    runs = {name: Run(name, Path(path)) for name, path in config.runs.items()}
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    sub = config.subtitle
    plots = {"evaluation curves": partial(eval_curves, subtitle=sub, intervals=config.intervals),
             "ETR": partial(etr, baselines=config.baselines.get("etr"), subtitle=sub),
             "degenerate groups": partial(degenerate, baselines=config.baselines.get("degenerate"), subtitle=sub),
             "rollouts per task": partial(rollouts_per_task, subtitle=sub),
             "cluster probabilities": partial(cluster_probs, subtitle=sub),
             "selected-task pass rates": partial(selected_pass_rates, subtitle=sub)}
    written = []
    for what, plot in plots.items():
        paths = plot(runs, out)
        for path in paths:
            print(f"wrote {path}")
        if not paths:
            print(f"skipped {what}: no run has the data")
        written += paths
    return written


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(prog="python -m eval.plots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, metavar="NAME=RUN_DIR")
    parser.add_argument("--out", required=True, help="folder for the PNGs (created)")
    parser.add_argument("--baseline", nargs="*", default=[], metavar="LABEL:etr=V,degenerate=V",
                        help="dashed reference lines on the ETR and degenerate-group plots")
    parser.add_argument("--subtitle", default="", help="under every title: what a reader needs (seeds, machine, "
                        "steps), e.g. \"3 seeds, 8 H200, 200 steps\"")
    args = parser.parse_args(argv)
    return run(PlotsConfig(runs=parse_runs(args.runs), out=Path(args.out), baselines=parse_baselines(args.baseline),
                           subtitle=args.subtitle))


if __name__ == "__main__":
    main()
