"""``python -m verl_ext.apps.sim`` (``make simulate``): every study of the grid in every world preset over seeds, in
worker processes with a progress bar; writes ``OUT/results.json`` (every run's record), ``OUT/tables.md``,
``OUT/claims.md`` (byte-identical for the same arguments), ``OUT/timings.json`` (wall time, components' ms per
step) and ``OUT/*.png``."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from contextlib import nullcontext
from pathlib import Path

from tqdm import tqdm

from verl_ext.apps.sim.claims import claims_markdown
from verl_ext.apps.sim.grid import custom_settings, default_workers, overrides, run_one, studies
from verl_ext.apps.sim.learner import Learner, LearnerConfig
from verl_ext.apps.sim.grid_plots import all_plots
from verl_ext.apps.sim.report import delta, study_table, transitions_table
from verl_ext.apps.sim.world import PRESETS, World, WorldConfig, properties


def composition_summary(runs, metric: str) -> str:
    """BOTS + CoBA + CBS* against each component alone and the baseline."""
    lines = ["| setting | vs | Δ final [95% t] | Δ AUC [95% t] |", "|---|---|---|---|"]
    for method in ("bots+coba+cbs_star", "bots+coba"):
        for base in ("random", "bots", "coba", "cbs_star", "bots+coba"):
            if method != base and method in runs and base in runs:
                lines.append(f"| `{method}` | `{base}` | {delta(runs[method], runs[base], metric, 'final')} | "
                             f"{delta(runs[method], runs[base], metric, 'auc')} |")
    return "\n".join(lines)


def worlds_table(worlds: list[str], tasks: int, seed: int) -> str:
    """What each preset assumes and what that makes of one of its worlds (seed ``seed``, N = ``tasks``)."""
    lines = ["| world | assumption | tasks starting at p < 0.05 or > 0.95 | corr. of the reference rates' logits "
             "with the starting policy's | corr. of the difficulty estimate | mean transfer weight on a task's "
             "own skill |", "|---|---|---|---|---|---|"]
    for name in worlds:
        preset = PRESETS[name]
        world = World(WorldConfig(tasks=tasks, **preset.world), seed)
        p = properties(world, Learner(world, LearnerConfig(**preset.learner)).own_skill_weight())
        lines.append(f"| `{name}` | {preset.assumption} | {p['extreme_share']:.2f} | {p['reference_corr']:.2f} | "
                     f"{p['estimate_corr']:.2f} | {p['own_skill_weight']:.2f} |")
    return "\n".join(lines)


def simulate(grid, worlds: list[str], seeds: dict[str, list[int]], workers: int) -> tuple[dict, dict, float]:
    """Every (world, study, setting, seed) in ``workers`` processes; (records, each run's components' ms per step
    and CPU seconds, minutes)."""
    jobs = [(w, grid[k], s.name, seed) for k in grid for seed in seeds[k] for w in worlds for s in grid[k].settings]
    by_scenario = {study.scenario.name: key for key, study in grid.items()}
    records = {w: {k: {s.name: {} for s in study.settings} for k, study in grid.items()} for w in worlds}
    timing = {w: {k: {} for k in grid} for w in worlds}
    t0 = time.time()
    # a (study, seed, world)'s settings one after another: a worker builds its world once (World's caches)
    with mp.get_context("spawn").Pool(workers) if workers > 1 else nullcontext() as pool:
        done = pool.imap_unordered(run_one, jobs) if pool else map(run_one, jobs)  # one worker: this process
        for world, scenario, setting, seed, record in tqdm(done, total=len(jobs), desc="simulated runs"):
            ms = {"ms_per_step": record.pop("ms_per_step"), "cpu_s": record.pop("cpu_s")}
            records[world][by_scenario[scenario]][setting][seed] = record
            timing[world][by_scenario[scenario]].setdefault(setting, []).append(ms)
    records = {w: {k: {s: dict(sorted(runs.items())) for s, runs in by.items()} for k, by in r.items()}
               for w, r in records.items()}  # seeds in order, whichever run finished first
    return records, timing, (time.time() - t0) / 60


def load(path: Path) -> tuple[dict, dict, str, dict]:
    """(records, the studies as they were run, header, grid arguments) of a results.json."""
    saved = json.loads(path.read_text())
    g = saved["grid"]
    run_as = studies(g["steps_scale"], g["tasks"], **g["set"], full=g["full"],
                     custom={k: tuple(v) for k, v in g.get("custom", {}).items()})
    saved_records = saved["records"]
    worlds = [w for w in PRESETS if w in saved_records]
    studies_run = [k for k in run_as if k in saved_records[worlds[0]]]
    records = {w: {k: {s.name: dict(sorted((int(seed), r) for seed, r in saved_records[w][k][s.name].items()))
                       for s in run_as[k].settings} for k in studies_run}
               for w in worlds}  # worlds, studies and settings in the grid's order, seeds in order
    return records, {k: run_as[k] for k in studies_run}, saved["header"], g


def render(records: dict, grid: dict, header: str, tasks: int, seed: int, out: Path) -> None:
    worlds = list(records)
    metrics = {k: study.metric for k, study in grid.items()}
    tables = [header, "## Worlds\n\n" + worlds_table(worlds, tasks, seed)]
    for w in worlds:
        tables.append(f"## World `{w}`")
        tables += [study_table(k, study, records[w][k]) for k, study in grid.items()]
        if "coba" in records[w]:
            shown = tuple(s for s in ("grpo", "knapsack", "coba") if s in records[w]["coba"])
            tables.append("### coba: task transitions\n\n" + transitions_table(records[w]["coba"], shown))
        if "composition" in records[w]:
            tables.append("### composition: BOTS + CoBA + CBS* against each alone\n\n"
                          + composition_summary(records[w]["composition"], metrics["composition"]))
    (out / "tables.md").write_text("\n\n".join(tables) + "\n")
    (out / "claims.md").write_text(header + "\n\n" + claims_markdown(records, metrics) + "\n")
    plots = [p for w in worlds for p in all_plots(records[w], metrics, out, prefix=f"{w}_")]
    print((out / "claims.md").read_text())
    print(f"wrote {out / 'tables.md'}, {out / 'claims.md'}, {out / 'results.json'} and {len(plots)} plots")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.sim", description=__doc__)
    parser.add_argument("--studies", nargs="*", help="studies to run (default: all)")
    parser.add_argument("--worlds", nargs="*", help=f"world presets (default: all of {list(PRESETS)})")
    parser.add_argument("--seeds", type=int, help="seeds of every study (default: 16 where a run is cheap, else 8)")
    parser.add_argument("--seed-offset", type=int, default=0, help="the first seed")
    parser.add_argument("--tasks", type=int, default=50_000, help="training tasks N")
    parser.add_argument("--steps-scale", type=float, default=0.5, help="multiplies every study's steps")
    parser.add_argument("--full", action="store_true", help="add the parameter sweeps and the composition study")
    parser.add_argument("--set", nargs="*", default=[], metavar="SECTION.FIELD=VALUE",
                        help="model parameters for every study and world, e.g. learner.lr=0.1 world.held_out=500")
    parser.add_argument("--custom", action="append", default=[], metavar="NAME=AXIS=custom,KEY=VALUE,...",
                        help="your own component beside each study of its axis, as the trainer takes it, e.g. "
                             "mine=selector=custom,selector.path=recipes/own_method/epsilon_greedy.py,"
                             "selector.cls=EpsilonGreedy,+selector.config.epsilon=0.2 (repeatable)")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--out", default="outputs/sim")
    parser.add_argument("--from-results", metavar="JSON", help="re-render the tables, claims and plots of a results.json")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_results:
        records, grid, header, g = load(Path(args.from_results))
        render(records, grid, header, g["tasks"], g["seed_offset"], out)
        return 0
    try:
        model, custom = overrides(args.set), custom_settings(args.custom)
        grid = studies(args.steps_scale, args.tasks, model["world"], model["learner"], full=args.full, custom=custom)
    except ValueError as e:
        parser.error(str(e))
    chosen, worlds = args.studies or list(grid), args.worlds or list(PRESETS)
    for kind, asked, known in (("studies", chosen, grid), ("worlds", worlds, PRESETS)):
        if set(asked) - set(known):
            parser.error(f"unknown {kind} {sorted(set(asked) - set(known))}; choose from {sorted(known)}")
    if args.seeds is not None and args.seeds < 2:
        parser.error("--seeds must be at least 2 (paired intervals)")
    grid = {k: grid[k] for k in chosen}
    seeds = {k: list(range(args.seed_offset, args.seed_offset + (args.seeds or study.seeds)))
             for k, study in grid.items()}
    records, timing, minutes = simulate(grid, worlds, seeds, args.workers)
    runs = sum(len(by_seed) for w in records.values() for study in w.values() for by_seed in study.values())
    header = (f"Simulated grid: {runs} runs (worlds {', '.join(worlds)}; seeds "
              + ", ".join(f"{k} {len(v)}" for k, v in seeds.items()) + f" from {args.seed_offset}; "
              f"N = {args.tasks:,}, steps x {args.steps_scale:g}{', full grid' if args.full else ''}; "
              f"model: {' '.join(args.set) or 'the defaults'}).")
    (out / "results.json").write_text(json.dumps({
        "records": records, "header": header, "grid": {
            "steps_scale": args.steps_scale, "tasks": args.tasks, "full": args.full, "seed_offset": args.seed_offset,
            "custom": custom,
            "set": {"world_set": model["world"], "learner_set": model["learner"]}}}, sort_keys=True))
    cpu = sum(t["cpu_s"] for w in timing.values() for k in w.values() for ts in k.values() for t in ts)
    (out / "timings.json").write_text(json.dumps({"minutes": minutes, "workers": args.workers, "cpu_minutes": cpu / 60,
                                                  "runs": timing}, indent=1, sort_keys=True))
    render(records, grid, header, args.tasks, args.seed_offset, out)
    print(f"{runs} runs in {minutes:.1f} min on {args.workers} worker(s), {cpu / 60:.1f} CPU min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
