"""``python -m verl_ext.sim`` (``make simulate``): the simulated grid of every study over seeds, in worker
processes with a progress bar; writes ``OUT/results.json`` (every run's record), ``OUT/tables.md``,
``OUT/claims.md`` and ``OUT/*.png``."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from contextlib import nullcontext
from pathlib import Path

from tqdm import tqdm

from verl_ext.sim.claims import claims_markdown, compare_markdown
from verl_ext.sim.grid import default_workers, overrides, run_one, studies
from verl_ext.sim.plots import all_plots
from verl_ext.sim.report import delta, study_table, transitions_table


def composition_summary(records, metric: str) -> str:
    """BOTS + CoBA + CBS* against each component alone and the baseline."""
    runs = records["composition"]
    lines = ["| setting | vs | Δ final [95% CI] | Δ AUC [95% CI] |", "|---|---|---|---|"]
    for method in ("bots+coba+cbs_star", "bots+coba"):
        for base in ("random", "bots", "coba", "cbs_star", "bots+coba"):
            if method != base and method in runs and base in runs:
                lines.append(f"| `{method}` | `{base}` | {delta(runs[method], runs[base], metric, 'final')} | "
                             f"{delta(runs[method], runs[base], metric, 'auc')} |")
    return "\n".join(lines)


def simulate(grid, seeds: int, workers: int) -> tuple[dict, float]:
    """Every (study, setting, seed) in ``workers`` processes; (records, minutes)."""
    jobs = [(study, s.name, seed) for seed in range(seeds) for study in grid.values() for s in study.settings]
    jobs.sort(key=lambda j: -j[0].scenario.steps * j[0].scenario.batch)  # long runs first: workers end together
    by_scenario = {study.scenario.name: key for key, study in grid.items()}
    records = {k: {s.name: {} for s in study.settings} for k, study in grid.items()}
    t0 = time.time()
    with mp.get_context("spawn").Pool(workers) if workers > 1 else nullcontext() as pool:
        done = pool.imap_unordered(run_one, jobs) if pool else map(run_one, jobs)  # one worker: this process
        for scenario, setting, seed, record in tqdm(done, total=len(jobs), desc="simulated runs"):
            records[by_scenario[scenario]][setting][seed] = record
    return records, (time.time() - t0) / 60


def load(path: Path) -> tuple[dict, dict, str]:
    """(records, the studies as they were run, header) of a results.json."""
    saved = json.loads(path.read_text())
    run_as = studies(saved["grid"]["steps_scale"], saved["grid"]["tasks"], **saved["grid"]["set"])
    records = {k: {s: {int(seed): r for seed, r in runs.items()} for s, runs in by_setting.items()}
               for k, by_setting in saved["records"].items()}
    return records, {k: run_as[k] for k in records}, saved["header"]


def model_of(header: str) -> str:
    """The model variant a results header states."""
    return header.split("model: ", 1)[1].split(")", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.sim", description=__doc__)
    parser.add_argument("--studies", nargs="*", help="studies to run (default: all)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=50_000, help="training tasks N")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiplies every scenario's steps")
    parser.add_argument("--set", nargs="*", default=[], metavar="SECTION.FIELD=VALUE",
                        help="model parameters for every study, e.g. learner.normaliser=trained world.difficulty_std=3")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--out", default="outputs/sim")
    parser.add_argument("--compare", nargs="+", metavar="DIR",
                        help="OUT/claims_compare.md: the claims' verdicts in each DIR's results.json side by side")
    parser.add_argument("--from-results", metavar="JSON",
                        help="re-render the tables, claims and plots of a results.json")
    args = parser.parse_args(argv)
    try:
        model = overrides(args.set)
    except ValueError as e:
        parser.error(str(e))
    grid = studies(args.steps_scale, args.tasks, model["world"], model["learner"])
    chosen = args.studies or list(grid)
    unknown = sorted(set(chosen) - set(grid))
    if unknown:
        parser.error(f"unknown studies {unknown}; choose from {sorted(grid)}")
    grid = {k: grid[k] for k in chosen}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.compare:
        variants = {}
        for directory in args.compare:
            records, run_as, header = load(Path(directory) / "results.json")
            variants[model_of(header)] = (records, {k: study.metric for k, study in run_as.items()})
        table = compare_markdown(variants)
        (out / "claims_compare.md").write_text(table + "\n")
        print(table)
        return 0
    if args.from_results:
        records, run_as, header = load(Path(args.from_results))
        records = {k: v for k, v in records.items() if k in chosen}
        grid = {k: run_as[k] for k in records}
    else:
        records, minutes = simulate(grid, args.seeds, args.workers)
        runs = sum(len(by_seed) for study in records.values() for by_seed in study.values())
        changed = " ".join(args.set) or "the defaults"
        header = (f"Simulated grid: {runs} runs ({args.seeds} seeds, N = {args.tasks:,}, steps x {args.steps_scale:g}, "
                  f"model: {changed}) in {minutes:.1f} min on {args.workers} worker(s).")
        (out / "results.json").write_text(json.dumps({
            "records": records, "header": header, "grid": {
                "steps_scale": args.steps_scale, "tasks": args.tasks,
                "set": {"world_set": model["world"], "learner_set": model["learner"]}}}))
    metrics = {k: study.metric for k, study in grid.items()}
    tables = [header] + [study_table(k, study, records[k]) for k, study in grid.items()]
    if "coba" in records:
        tables.append("### coba: task transitions\n\n"
                      + transitions_table(records["coba"], ("grpo", "knapsack", "coba")))
    if "composition" in records:
        tables.append("### composition: BOTS + CoBA + CBS* against each alone\n\n"
                      + composition_summary(records, metrics["composition"]))
    (out / "tables.md").write_text("\n\n".join(tables) + "\n")
    (out / "claims.md").write_text(header + "\n\n" + claims_markdown(records, metrics) + "\n")
    plots = all_plots(records, metrics, out)
    print((out / "claims.md").read_text())
    print(f"wrote {out / 'tables.md'}, {out / 'claims.md'}, {out / 'results.json'} and {len(plots)} plots")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
