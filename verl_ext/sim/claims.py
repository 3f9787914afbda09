"""Each paper's main claims as checks on the simulated grid: the direction of a paired difference (by seed) and
its 95% bootstrap CI. Verdict: *holds* (CI entirely on the claimed side), *does not hold* (entirely on the other),
*inconclusive* (CI spans 0); a claim checked at several values of a parameter that gets different verdicts
*depends on* that parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.sim.report import Delta, Records, delta


@dataclass(frozen=True)
class Claim:
    paper: str
    text: str
    study: str
    method: str
    baseline: str
    statistic: str = "auc"  # auc | final
    sign: int = 1  # +1: the method is claimed better; -1: worse
    variants: tuple[tuple[str, str, str], ...] = ()  # (label, method, baseline) of a parameter sweep
    metric: str | None = None  # held-out metric compared; None: the study's


CLAIMS = (
    Claim("BOTS", "BOTS learns faster than random selection (TTB < 1, BSF > 1)", "bots", "bots", "random"),
    Claim("BOTS", "BOTS beats BOTS-MoPPS (explicit evidence only, no forgetting)", "bots", "bots", "bots_mopps"),
    Claim("BOTS", "BOTS beats BOTS-DOTS (implicit only, greedy)", "bots", "bots", "bots_dots"),
    Claim("BOTS", "offline easy→hard beats random", "bots", "offline", "random"),
    Claim("BOTS", "implicit evidence helps (ρ > 0 vs ρ = 0, λ = 0.1)", "bots", "bots", "bots rho=0",
          variants=tuple((f"ρ={r}", f"bots rho={r}" if r != "0.1" else "bots", "bots rho=0")
                         for r in ("0.05", "0.1", "0.2", "0.5", "1"))),
    Claim("BOTS", "forgetting helps (λ > 0 vs λ = 0, ρ = 0.1)", "bots", "bots", "bots lambda=0",
          variants=tuple((f"λ={v}", f"bots lambda={v}" if v != "0.1" else "bots", "bots lambda=0")
                         for v in ("0.05", "0.1", "0.2", "0.5", "1"))),
    Claim("CBS", "CBS* (30% of the step's rollouts) beats the objective alone", "cbs", "cbs_star", "keep_all",
          "final", variants=(("noise 0", "cbs_star noise=0", "keep_all noise=0"), ("noise 0.1", "cbs_star", "keep_all"),
                             ("noise 0.3", "cbs_star noise=0.3", "keep_all noise=0.3"))),
    Claim("CBS", "CBS (replay buffer) beats the objective alone", "cbs", "cbs", "keep_all", "final",
          variants=(("noise 0", "cbs noise=0", "keep_all noise=0"), ("noise 0.1", "cbs", "keep_all"),
                    ("noise 0.3", "cbs noise=0.3", "keep_all noise=0.3"))),
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
          variants=tuple((f"estimate noise {q}", "ads" if q == "0.7" else f"ads proxy={q}", "uniform")
                         for q in ("0.7", "2.5", "5"))),
    Claim("ADS", "ADS beats DOTS+RR", "ads", "ads", "dots+rr", "final"),
    Claim("ADS", "inter-cluster scheduling helps (vs w/o inter)", "ads", "ads", "ads_no_inter", "final"),
    Claim("ADS", "intra-cluster boundary walk helps (vs w/o intra)", "ads", "ads", "ads_no_intra", "final"),
    Claim("Progress", "negative result: conservative bucket sampling scores below uniform", "progress",
          "conservative", "uniform", "final", sign=-1),
    Claim("Progress", "negative result: conservative's pass@1 is below uniform's", "progress", "conservative",
          "uniform", "final", sign=-1, metric="accuracy"),
    Claim("Progress", "negative result: bucket_uniform scores below uniform", "progress", "bucket_uniform",
          "uniform", "final", sign=-1),
    Claim("Progress", "negative result: empirical scores below uniform", "progress", "empirical", "uniform", "final",
          sign=-1),
)


def verdict(d: Delta, sign: int) -> str:
    low, high = sorted((sign * d.low, sign * d.high))
    return "holds" if low > 0 else "does not hold" if high < 0 else "inconclusive"


def check(claim: Claim, records: Records, metric: str) -> tuple[str, str]:
    """(verdict, evidence): the differences and CIs behind it."""
    runs = records[claim.study]
    cases = claim.variants or (("", claim.method, claim.baseline),)
    seen = []
    for label, method, base in cases:
        if method not in runs or base not in runs:
            return "not run", f"`{method}` or `{base}` missing from the grid"
        d = delta(runs[method], runs[base], claim.metric or metric, claim.statistic)
        seen.append((label, d, verdict(d, claim.sign)))
    verdicts = {v for _, _, v in seen}
    evidence = "; ".join(f"{label + ': ' if label else ''}Δ {claim.statistic} {d}" for label, d, _ in seen)
    if len(verdicts) == 1:
        return verdicts.pop(), evidence
    param = {"cbs": "the spurious-rollout rate", "ads": "the difficulty estimate's noise"}.get(
        claim.study, claim.variants[0][0].split("=")[0])
    by = ", ".join(f"{v} at {label}" for label, _, v in seen)
    return f"depends on {param} ({by})", evidence


def etr_note(records: Records) -> str:
    """BOTS's ETR claim (BOTS > 0.8; random and MoPPS < 0.4) with the simulated values."""
    etr = {name: np.mean([np.mean(r["etr"]) for r in records["bots"][name].values()])
           for name in ("bots", "random", "bots_mopps") if name in records.get("bots", {})}
    if len(etr) < 3:
        return ""
    ok = etr["bots"] > 0.8 and etr["random"] < 0.4 and etr["bots_mopps"] < 0.4
    return (f"| BOTS | ETR: BOTS > 0.8, random and MoPPS < 0.4 | {'holds' if ok else 'does not hold'} | "
            f"BOTS {etr['bots']:.2f}, random {etr['random']:.2f}, MoPPS {etr['bots_mopps']:.2f} |")


def degenerate_note(records: Records) -> str:
    """Progress's degenerate-batch claim (uniform 0.270 < adaptive 0.308-0.355)."""
    runs = records.get("progress", {})
    if "uniform" not in runs:
        return ""
    rate = {n: np.mean([np.mean(r["degenerate"]) for r in runs[n].values()]) for n in runs}
    adaptive = [n for n in ("bucket_uniform", "empirical", "conservative") if n in rate]
    ok = all(rate[n] > rate["uniform"] for n in adaptive)
    return (f"| Progress | degenerate-group rate: adaptive > uniform | {'holds' if ok else 'does not hold'} | "
            + ", ".join(f"{n} {rate[n]:.3f}" for n in ["uniform", *adaptive]) + " |")


def claims_markdown(records: Records, metrics: dict[str, str]) -> str:
    lines = ["| paper | claim | in simulation | evidence (paired over seeds, 95% CI) |", "|---|---|---|---|"]
    for claim in CLAIMS:
        if claim.study not in records:
            continue
        v, evidence = check(claim, records, metrics[claim.study])
        lines.append(f"| {claim.paper} | {claim.text} | {v} | {evidence} |")
    lines += [n for n in (etr_note(records), degenerate_note(records)) if n]
    return "\n".join(lines)


def compare_markdown(variants: dict[str, tuple[Records, dict[str, str]]]) -> str:
    """One row per claim, one verdict column per model variant (label -> its records and study metrics)."""
    labels = list(variants)
    lines = ["| paper | claim | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for claim in CLAIMS:
        cells = []
        for records, metrics in variants.values():
            cells.append(check(claim, records, metrics[claim.study])[0] if claim.study in records else "not run")
        lines.append(f"| {claim.paper} | {claim.text} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
