"""Tables, plots and the "claims in simulation" of a simulated grid, every metric through :mod:`eval.metrics`.

Per study: final held-out metric (mean ± std over seeds) and its difference from the study's baseline with a 95%
paired bootstrap CI over seeds (a seed fixes the world and the starting policy of every setting), the same for
the mean over the evaluation curve (AUC: speed and level together), TTB / BSF on the seed-mean curves, ETR and
degenerate-group rate over training steps, the filter's kept fraction and each component's milliseconds per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.metrics import (
    PASS_RATE_BINS, best_so_far, mean_se, paired_bootstrap_ci, time_to_baseline,
)
from eval.tables import fmt

Records = dict[str, dict[str, dict[int, dict]]]  # study -> setting -> seed -> run record
TTB_Q, BSF_B = (0.5, 0.75, 1.0), (0.25, 0.5, 1.0)


def curve(record: dict, metric: str) -> np.ndarray:
    return np.asarray(record[metric], dtype=np.float64)


def seed_matrix(runs: dict[int, dict], metric: str, reduce) -> np.ndarray:
    """Per seed (sorted), ``reduce`` of the run's evaluation curve."""
    return np.array([reduce(curve(runs[s], metric)) for s in sorted(runs)])


@dataclass(frozen=True)
class Delta:
    mean: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}]"


def delta(runs: dict[int, dict], base: dict[int, dict], metric: str, statistic: str) -> Delta:
    """Paired (by seed) difference of ``final`` or ``auc`` of the evaluation curve, with its bootstrap CI."""
    reduce = (lambda c: c[-1]) if statistic == "final" else np.mean
    seeds = sorted(set(runs) & set(base))
    a = seed_matrix({s: runs[s] for s in seeds}, metric, reduce)
    b = seed_matrix({s: base[s] for s in seeds}, metric, reduce)
    ci = paired_bootstrap_ci(a, b, resamples=20_000, seed=0)
    return Delta(float(ci.diff), float(ci.low), float(ci.high))


def mean_curve(runs: dict[int, dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    first = runs[min(runs)]
    return np.asarray(first["eval_steps"]), np.mean([curve(r, metric) for r in runs.values()], axis=0)


def study_table(name: str, study, records: dict[str, dict[int, dict]]) -> str:
    metric, base = study.metric, records[study.baseline]
    b_steps, b_curve = mean_curve(base, metric)
    head = ["setting", f"final {metric}", "Δ final [95% CI]", "Δ AUC [95% CI]"] \
        + [f"Δ final {m} [95% CI]" for m in study.also] + [f"TTB{int(q * 100)}" for q in TTB_Q] \
        + [f"BSF{int(b * 100)}" for b in BSF_B] + ["ETR", "degenerate", "kept", "ms/step sel/alloc/filter"]
    lines = [f"### {name}: {study.paper} — {study.scenario.batch} prompts x {study.scenario.rollouts} rollouts, "
             f"{study.scenario.steps} steps, {study.scenario.world.tasks:,} tasks, {len(base)} seeds; baseline "
             f"`{study.baseline}`", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for setting, runs in records.items():
        steps, c = mean_curve(runs, metric)
        finals = seed_matrix(runs, metric, lambda x: x[-1])
        same = setting == study.baseline
        ttb = [time_to_baseline(steps, c, b_steps, b_curve, q) for q in TTB_Q]
        bsf = [best_so_far(steps, c, b_steps, b_curve, b) for b in BSF_B]
        etr = mean_se([np.mean(r["etr"]) for r in runs.values()])
        deg = mean_se([np.mean(r["degenerate"]) for r in runs.values()])
        ms = {k: np.mean([r["ms_per_step"][k] for r in runs.values()])
              for k in ("selector", "allocator", "rollout_filter")}
        cells = [f"`{setting}`", f"{finals.mean():.4f} ± {finals.std(ddof=1) if len(finals) > 1 else 0:.4f}",
                 "—" if same else str(delta(runs, base, metric, "final")),
                 "—" if same else str(delta(runs, base, metric, "auc"))]
        cells += ["—" if same else str(delta(runs, base, m, "final")) for m in study.also]
        cells += [fmt(v, 2) for v in ttb] + [fmt(v, 2) for v in bsf]
        cells += [f"{etr.mean:.3f}", f"{deg.mean:.3f}",
                  f"{np.mean([np.mean(r['kept_fraction']) for r in runs.values()]):.2f}",
                  f"{ms['selector']:.2f} / {ms['allocator']:.2f} / {ms['rollout_filter']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def transitions_table(records: dict[str, dict[int, dict]], settings: tuple[str, ...]) -> str:
    """Row-normalised task transitions (initial -> final empirical pass-rate bin), counts summed over seeds."""
    lines = ["| setting | initial bin | " + " | ".join(PASS_RATE_BINS) + " |", "|" + "---|" * (2 + len(PASS_RATE_BINS))]
    for setting in settings:
        counts = np.sum([np.asarray(r["transitions"]) for r in records[setting].values()], axis=0)
        with np.errstate(invalid="ignore"):
            frac = counts / counts.sum(axis=1, keepdims=True)
        for i, label in enumerate(PASS_RATE_BINS):
            lines.append(f"| `{setting}` | {label} | " + " | ".join(fmt(v, 2) for v in frac[i]) + " |")
    return "\n".join(lines)
