"""Tables of a simulated grid, every metric through :mod:`eval.metrics`.

Per world and study: final held-out metric (mean ± std over seeds) and its difference from the study's baseline
with a 95% paired t interval over seeds (a seed fixes the world, the starting policy and the evaluation draws of
every setting), the same for the mean over the evaluation curve (AUC: speed and level together), TTB / BSF on the
seed-mean curves, ETR and degenerate-group rate over training steps, the filter's kept fraction, replayed and
measured rollouts per step.
"""

from __future__ import annotations

import numpy as np

from eval.metrics import PASS_RATE_BINS, Delta, best_so_far, mean_se, t_interval, time_to_baseline
from eval.tables import fmt

Records = dict[str, dict[str, dict[int, dict]]]  # study -> setting -> seed -> run record
TTB_Q, BSF_B = (0.5, 0.75, 1.0), (0.25, 0.5, 1.0)
REDUCE = {"final": lambda c: c[-1], "auc": np.mean}  # of an evaluation curve
STEP_SERIES = ("etr", "degenerate", "selected_p", "rollouts_per_task")  # statistics of a per-step series: its mean


def curve(record: dict, metric: str) -> np.ndarray:
    return np.asarray(record[metric], dtype=np.float64)


def per_seed(runs: dict[int, dict], metric: str, statistic: str) -> np.ndarray:
    """Per seed (sorted): ``final`` / ``auc`` of the evaluation curve of ``metric``, or the mean over training steps
    of a per-step series (``statistic`` in :data:`STEP_SERIES`; ``metric`` unused)."""
    if statistic in STEP_SERIES:
        return np.array([np.mean(runs[s][statistic]) for s in sorted(runs)])
    return np.array([REDUCE[statistic](curve(runs[s], metric)) for s in sorted(runs)])


def delta(runs: dict[int, dict], base: dict[int, dict], metric: str, statistic: str, alpha: float = 0.05) -> Delta:
    """Paired (by seed) difference of a statistic (:func:`per_seed`) with its t interval."""
    seeds = sorted(set(runs) & set(base))
    a = per_seed({s: runs[s] for s in seeds}, metric, statistic)
    b = per_seed({s: base[s] for s in seeds}, metric, statistic)
    return t_interval(a - b, alpha)


def mean_curve(runs: dict[int, dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    first = runs[min(runs)]
    return np.asarray(first["eval_steps"]), np.mean([curve(r, metric) for r in runs.values()], axis=0)


def study_table(name: str, study, records: dict[str, dict[int, dict]]) -> str:
    metric, base = study.metric, records[study.baseline]
    b_steps, b_curve = mean_curve(base, metric)
    sc = study.scenario
    head = ["setting", f"final {metric}", "Δ final [95% t]", "Δ AUC [95% t]"] \
        + [f"Δ final {m} [95% t]" for m in study.also] + [f"TTB{int(q * 100)}" for q in TTB_Q] \
        + [f"BSF{int(b * 100)}" for b in BSF_B] + ["ETR", "degenerate", "kept", "replayed / step", "measured / step"]
    lines = [f"### {name}: {study.paper} — `recipes/{study.recipe}`: {sc.batch} prompts x {sc.rollouts} rollouts, "
             f"mini-batch {sc.mini_batch} rollouts, {sc.advantage} advantage, {sc.aggregation}; {sc.steps} steps, "
             f"{sc.world.tasks:,} tasks, {len(base)} seeds, avg@{sc.eval_samples}; baseline `{study.baseline}`", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for setting, runs in records.items():
        steps, c = mean_curve(runs, metric)
        finals = per_seed(runs, metric, "final")
        same = setting == study.baseline
        ttb = [time_to_baseline(steps, c, b_steps, b_curve, q) for q in TTB_Q]
        bsf = [best_so_far(steps, c, b_steps, b_curve, b) for b in BSF_B]
        etr = mean_se([np.mean(r["etr"]) for r in runs.values()])
        deg = mean_se([np.mean(r["degenerate"]) for r in runs.values()])
        cells = [f"`{setting}`", f"{finals.mean():.4f} ± {finals.std(ddof=1) if len(finals) > 1 else 0:.4f}",
                 "—" if same else str(delta(runs, base, metric, "final")),
                 "—" if same else str(delta(runs, base, metric, "auc"))]
        cells += ["—" if same else str(delta(runs, base, m, "final")) for m in study.also]
        cells += [fmt(v, 2) for v in ttb] + [fmt(v, 2) for v in bsf]
        cells += [f"{etr.mean:.3f}", f"{deg.mean:.3f}",
                  f"{np.mean([np.mean(r['kept_fraction']) for r in runs.values()]):.2f}",
                  f"{np.mean([np.mean(r['replayed']) for r in runs.values()]):.0f}",
                  f"{np.mean([np.mean(r['measured']) for r in runs.values()]):.0f}"]
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
