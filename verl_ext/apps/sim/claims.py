"""What the model predicts for each paper's main claims, under the assumptions of each world preset: the paired
difference (by seed) of the method and its baseline with a 95% t interval. Verdict per world: *no difference* (the
interval inside ±``MARGIN``: equivalence), *holds* (entirely on the claimed side), *does not hold* (entirely on
the other), *inconclusive* (otherwise). A claim is *robust* only when its verdict is the same in every world run.
Claims checked at several values of a parameter (the full grid's sweeps) take every value as a case.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval.metrics import Delta
from verl_ext.apps.sim.report import Records, delta

MARGIN = 0.005  # [decision] |Δ| below this (accuracy, score or rate) is no difference
VERDICTS = ("holds", "does not hold", "no difference", "inconclusive")


@dataclass(frozen=True)
class Claim:
    paper: str
    text: str
    study: str
    method: str
    baseline: str
    statistic: str = "auc"  # auc | final | a per-step series (etr, degenerate, ...): its mean over steps
    sign: int = 1  # +1: the method is claimed higher; -1: lower
    variants: tuple[tuple[str, str, str], ...] = ()  # (label, method, baseline) of a sweep (full grid)
    metric: str | None = None  # held-out metric compared; None: the study's


def _sweep(key: str, symbol: str) -> tuple:
    return tuple((f"{symbol}={v}", f"bots {key}={v}", f"bots {key}=0") for v in ("0.05", "0.2", "0.5", "1"))


CLAIMS = (
    Claim("BOTS", "BOTS's held-out curve lies above random selection's (Δ AUC; TTB / BSF in tables.md)", "bots",
          "bots", "random"),
    Claim("BOTS", "BOTS beats BOTS-MoPPS (explicit evidence only, no forgetting)", "bots", "bots", "bots_mopps"),
    Claim("BOTS", "BOTS beats BOTS-DOTS (implicit only, greedy)", "bots", "bots", "bots_dots"),
    Claim("BOTS", "offline easy→hard beats random", "bots", "offline", "random"),
    Claim("BOTS", "BOTS's batches have a higher effective task ratio than random's", "bots", "bots", "random", "etr"),
    Claim("BOTS", "implicit evidence helps (ρ > 0 vs ρ = 0)", "bots", "bots", "bots rho=0",
          variants=_sweep("rho", "ρ")),
    Claim("BOTS", "forgetting helps (λ > 0 vs λ = 0)", "bots", "bots", "bots lambda=0",
          variants=_sweep("lambda", "λ")),
    Claim("CBS", "CBS* (30% of the step's rollouts) beats the objective alone", "cbs", "cbs_star", "keep_all",
          "final", variants=(("noise 0", "cbs_star noise=0", "keep_all noise=0"),
                             ("noise 0.3", "cbs_star noise=0.3", "keep_all noise=0.3"))),
    Claim("CBS", "CBS (replay buffer) beats the objective alone", "cbs", "cbs", "keep_all", "final",
          variants=(("noise 0", "cbs noise=0", "keep_all noise=0"), ("noise 0.3", "cbs noise=0.3",
                                                                        "keep_all noise=0.3"))),
    Claim("CBS", "the learned scheduler beats a random subset of the same size (CBS)", "cbs", "cbs", "cbs_random",
          "final"),
    Claim("CBS", "the learned scheduler beats a random subset of the same size (CBS*)", "cbs", "cbs_star",
          "cbs_star random", "final"),
    Claim("CBS", "the EMA of the round reward helps", "cbs", "cbs", "cbs_no_ema", "final"),
    Claim("CBS", "the entropy term helps", "cbs", "cbs", "cbs_no_entropy", "final"),
    Claim("CoBA-RL", "CoBA beats uniform GRPO budgets", "coba", "coba", "grpo", "final"),
    Claim("CoBA-RL", "CoBA beats Knapsack-RL", "coba", "coba", "knapsack", "final"),
    Claim("CoBA-RL", "Knapsack-RL beats uniform budgets", "coba", "knapsack", "grpo", "final"),
    Claim("CoBA-RL", "the failure-driven schedule beats static exploit", "coba", "coba", "static_exploit", "final"),
    Claim("CoBA-RL", "the failure-driven schedule beats static explore", "coba", "coba", "static_explore", "final"),
    Claim("CoBA-RL", "the failure-driven schedule beats linear decay", "coba", "coba", "linear_decay", "final"),
    Claim("CoBA-RL", "the failure-driven schedule beats explore→exploit", "coba", "coba", "explore_to_exploit",
          "final"),
    Claim("ADS", "ADS beats uniform GRPO", "ads", "ads", "uniform", "final",
          variants=tuple((f"estimate noise {q}", f"ads proxy={q}", "uniform") for q in ("2.5", "5"))),
    Claim("ADS", "ADS beats DOTS+RR (the recipe's: measured references, 64 fresh prompts + replay)", "ads", "ads",
          "dots+rr", "final"),
    Claim("ADS", "DOTS+RR beats uniform GRPO", "ads", "dots+rr", "uniform", "final"),
    Claim("ADS", "control: DOTS+RR beats replay alone (uniform, the same fresh prompts + replay)", "ads", "dots+rr",
          "uniform+rr", "final"),
    Claim("ADS", "control: DOTS's selection alone (no replay, every prompt fresh) beats uniform", "ads",
          "dots alone", "uniform", "final"),
    Claim("ADS", "inter-cluster scheduling helps (vs w/o inter)", "ads", "ads", "ads_no_inter", "final"),
    Claim("ADS", "intra-cluster boundary walk helps (vs w/o intra)", "ads", "ads", "ads_no_intra", "final"),
    Claim("Progress", "negative result: conservative bucket sampling scores below uniform", "progress",
          "conservative", "uniform", "final", sign=-1),
    Claim("Progress", "negative result: conservative's avg@16 is below uniform's", "progress", "conservative",
          "uniform", "final", sign=-1, metric="accuracy"),
    Claim("Progress", "negative result: bucket_uniform scores below uniform", "progress", "bucket_uniform",
          "uniform", "final", sign=-1),
    Claim("Progress", "negative result: empirical scores below uniform", "progress", "empirical", "uniform", "final",
          sign=-1),
    Claim("Progress", "control: bucket sampling beats random partitions of the same sizes", "progress", "empirical",
          "random_buckets", "final"),
    Claim("Progress", "the adaptive samplers have more degenerate groups than uniform (conservative)", "progress",
          "conservative", "uniform", "degenerate"),
)


def verdict(d: Delta, sign: int, margin: float = MARGIN) -> str:
    low, high = sorted((sign * d.low, sign * d.high))
    if -margin < low and high < margin:
        return "no difference"
    return "holds" if low > 0 else "does not hold" if high < 0 else "inconclusive"


def cases(claim: Claim, runs: dict) -> list[tuple[str, str, str]]:
    """The (label, method, baseline) pairs of a claim that the grid ran."""
    main = ("", claim.method, claim.baseline)
    found = [c for c in (main, *claim.variants) if c[1] in runs and c[2] in runs]
    if len(found) > 1 and main in found:
        found[found.index(main)] = ("default", main[1], main[2])
    return found


def check(claim: Claim, records: Records, metric: str, alpha: float = 0.05) -> tuple[str, str]:
    """(verdict, evidence) in one world; a sweep whose cases disagree: ``depends (...)``."""
    runs = records[claim.study]
    found = cases(claim, runs)
    if not found:
        return "not run", ""
    seen = []
    for label, method, base in found:
        d = delta(runs[method], runs[base], claim.metric or metric, claim.statistic, alpha)
        seen.append((label, d, verdict(d, claim.sign)))
    evidence = "; ".join(f"{label + ': ' if label else ''}{d}" for label, d, _ in seen)
    verdicts = {v for _, _, v in seen}
    if len(verdicts) == 1:
        return verdicts.pop(), evidence
    return "depends (" + ", ".join(f"{label}: {v}" for label, _, v in seen) + ")", evidence


def comparisons(by_world: dict[str, Records]) -> int:
    """Intervals the claims table computes (for the multiplicity note)."""
    return sum(len(cases(c, records[c.study])) for records in by_world.values() for c in CLAIMS
               if c.study in records)


def claims_markdown(by_world: dict[str, Records], metrics: dict[str, str]) -> str:
    """One row per claim: the verdict and evidence in each world, and whether it is robust (the same in all);
    a verdict that changes with Bonferroni-adjusted intervals (over every comparison of the table) is marked †."""
    worlds = list(by_world)
    k = max(comparisons(by_world), 1)
    lines = ["| paper | claim | Δ | " + " | ".join(f"`{w}`" for w in worlds) + " | across worlds |",
             "|---|---|---|" + "---|" * (len(worlds) + 1)]
    for claim in CLAIMS:
        if not any(claim.study in r and cases(claim, r[claim.study]) for r in by_world.values()):
            continue
        cells, seen = [], []
        for w in worlds:
            if claim.study not in by_world[w]:
                cells.append("not run")
                continue
            v, evidence = check(claim, by_world[w], metrics[claim.study])
            strict, _ = check(claim, by_world[w], metrics[claim.study], alpha=0.05 / k)
            seen.append(v)
            cells.append(f"**{v}**{'†' if strict != v else ''} {evidence}")
        robust = f"robust: {seen[0]}" if len(set(seen)) == 1 and len(seen) == len(worlds) else "depends on the world"
        what = claim.statistic if claim.statistic in ("auc", "final") else f"mean {claim.statistic} over steps"
        lines.append(f"| {claim.paper} | {claim.text} | {what} | " + " | ".join(cells) + f" | {robust} |")
    note = (f"\n\n{k} paired intervals (95% t, over seeds) in this table. Under no effect at all about 5% of them, "
            f"{0.05 * k:.1f}, would still exclude 0: a single verdict is weak evidence. † marks a verdict that "
            f"changes when every interval is widened to Bonferroni's 1 − 0.05/{k}. |Δ| < {MARGIN} on both ends of "
            "the interval reads *no difference*.")
    return "\n".join(lines) + note
