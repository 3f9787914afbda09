"""``python -m verl_ext.apps.study``: data-selection methods against uniform GRPO in the real CPU trainer, by mechanism.

Each method (:data:`METHODS`, or ``name=override,override`` in ``--methods``) x ``--seeds`` trainer seeds (``data.seed``:
the selection's and verl's RNG) x ``--steps`` steps runs through ``python -m verl_ext.main --cpu``
(:func:`verl_ext.apps.demo.train`) on one pool and policy: the demo's warm start and its first ``--pool`` tasks with
reference pass rates (:mod:`verl_ext.apps.inputs`), built once and cached under ``OUT/data`` (seed 0 whatever the
trainer seeds). A run is kept once
finished (``OUT/runs/<method>/seed_<s>/done.json``, written after its training and held-out evaluation for the same
settings); an unfinished or changed one is trained again from scratch. Per run and step, from its step dumps
(:func:`series_of_dumps`): the mechanisms the papers claim. BOTS (§3.4) and DOTS (§3) aim the selected tasks' pass rate at
0.5, so fewer groups are degenerate (ETR, the degenerate-group rate); CoBA-RL (§2.3) and Knapsack-RL give rollouts where
the advantage is not zero (the share of the actor update's rows); CBS (§4.3) chooses the rows the update sees (the
kept fraction). Also the rollouts per task (mean, s.d.) and, at the end, held-out accuracy (``--eval-tasks`` x
``--eval-k``, the demo's protocol; 0 tasks: none). Per method and metric: the mean over steps per seed, then the mean
over seeds with a 95% t interval and the difference from ``uniform`` paired by seed with its t interval. Writes
``OUT/study.md``, ``OUT/study.json`` and ``OUT/<metric>.png`` (every method: mean over seeds per step, band min-max);
``--report-only`` re-reads the finished runs. Everything after ``--`` goes to every run as Hydra overrides.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from verl_ext.apps import demo
from verl_ext.apps.inputs import TASK, Inputs, embeddings, heldout_evaluation, prepare_inputs
from eval.metrics import t_interval

BASELINE = "uniform"
# name -> Hydra overrides at the demo's scale (6 tasks x 24 rollouts a step, pool 48: 10 steps visit a task ~1.3 times);
# {two_steps}: 2 x --budget rollouts, {reference}: --tasks // 3, {embeddings}: the pool's prompt embeddings (built
# only when a method names them)
METHODS: dict[str, tuple[str, ...]] = {
    "uniform": ("selector=uniform", "allocator=fixed"),
    "bots+coba": demo.METHOD,  # implicit_weight 0.5, adaptive (halved when the implicit estimates miss)
    "bots+coba_fixed_rho": demo.FIXED_RHO,  # implicit_weight 0.5 throughout
    "bots+coba_rho0.1": ("selector=bots", "selector.implicit_weight=0.1", *demo.METHOD[3:]),  # the authors' default
    # CoBA-RL alone, the demo's bounds; unseen tasks count as p = 0.5, so the first pass over the pool is uniform
    "coba": ("selector=uniform", "allocator=coba", "allocator.min_n=3", "allocator.max_n=8"),
    # min_seen 4: a task's p is trusted after one visit of budget / tasks rollouts (default 8: never within 10 steps)
    "knapsack": ("selector=uniform", "allocator=knapsack", "allocator.min_n=3", "allocator.max_n=8",
                 "allocator.min_seen=4"),
    # a buffer of two steps and the scheduler's warm-up cut to 1 step from epsilon0 0.5 (recipes/cbs/cpu_embedded.yaml):
    # with the paper's 50 warm-up rounds at epsilon 1, 10 steps train on-policy, i.e. uniform
    "cbs": ("selector=uniform", "allocator=fixed", "rollout_filter=cbs", "rollout_filter.buffer_size={two_steps}",
            "rollout_filter.warmup=1", "rollout_filter.epsilon0=0.5"),
    # a third of the batch is the random reference set (reference_size < train_batch_size); attention predictor
    # over the warm start's embeddings of the pool (no trained adapter at this scale, as recipes/ads/cpu_embedded.yaml)
    "dots": ("selector=dots", "allocator=fixed", "selector.reference_size={reference}",
             "selector.embedding_file={embeddings}"),
}
METRICS = {
    "etr": "ETR",  # effective task ratio: tasks with 0 < pass rate < 1
    "degenerate": "degenerate-group rate",
    "observed_p": "selected tasks' pass rate in their rollouts",
    "nonzero_advantage": "update rows with advantage != 0",
    "counts_mean": "rollouts per task, mean",
    "counts_std": "rollouts per task, s.d. across the step's tasks",
    "kept": "rollouts the filter kept",
    "reward": "mean training reward",
}
HELDOUT = "heldout"  # held-out accuracy after the last step: one value per run
MARKER = "done.json"
Series = dict[str, dict[int, dict[str, list[float]]]]  # method -> seed -> metric -> per step


def parse_methods(text: str) -> dict[str, tuple[str, ...]]:
    """``uniform,bots+coba,mine=selector=bots,allocator=coba`` -> ``{name: overrides}``: a name is a known method,
    ``name=key=value`` starts a custom one and each later ``key=value`` adds to it."""
    out: dict[str, list[str]] = {}
    custom = None
    for item in (t.strip() for t in text.split(",") if t.strip()):
        if "=" not in item:
            if item not in METHODS:
                raise ValueError(f"unknown method {item!r}; known: {', '.join(METHODS)} (or name=override,override)")
            out[item], custom = list(METHODS[item]), None
        elif "=" in item.split("=", 1)[1] and "." not in item.split("=", 1)[0]:
            custom, first = item.split("=", 1)
            out[custom] = [first]
        elif custom is None:
            raise ValueError(f"{item!r} follows no custom method (name=override,override)")
        else:
            out[custom].append(item)
    if not out:
        raise ValueError("no methods given")
    return {k: tuple(v) for k, v in out.items()}


def inputs(out: Path, args: argparse.Namespace) -> Inputs:
    """The demo's inputs under ``out/data``, built once, with seed 0 whatever the trainer seeds."""
    return prepare_inputs(out, args, 0)


def resolve(overrides: tuple[str, ...], data: Inputs, args: argparse.Namespace) -> tuple[str, ...]:
    """``overrides`` with their placeholders filled (see :data:`METHODS`)."""
    if not any("{" in o for o in overrides):
        return overrides
    fill = {"two_steps": 2 * args.budget, "reference": max(1, args.tasks // 3)}
    if any("{embeddings}" in o for o in overrides):
        fill["embeddings"] = embeddings(data)
    return tuple(o.format(**fill) for o in overrides)


# ---------------------------------------------------------------------------------------- runs
def run_dir(root: Path, method: str, seed: int) -> Path:
    return root / method / f"seed_{seed}"


def request(overrides: tuple[str, ...], extra: list[str], args: argparse.Namespace, data: Inputs) -> dict:
    """What makes a finished run the one asked for (its marker's content besides the results)."""
    keys = ("steps", "tasks", "budget", "pool", "lr", "response_length", "ref_n", "eval_tasks", "eval_k", "num_layers")
    return {"overrides": list(overrides), "extra": list(extra), **{k: getattr(args, k) for k in keys},
            "policy": data.warm, "pool_file": str(data.pool_ref)}


def read_marker(run: Path) -> dict | None:
    path = run / MARKER
    return json.loads(path.read_text()) if path.exists() else None


def heldout_accuracy(run: Path, data: Inputs, args: argparse.Namespace) -> float:
    """Mean success on the held-out tasks of the run's last checkpoint (``eval.evaluate``, the demo's protocol)."""
    from eval import evaluate

    evaluate.run(heldout_evaluation(data.heldout, args, run=run, steps=str(args.steps), base_model=data.warm))
    lines = (run / "eval" / f"step_{args.steps}" / TASK / "samples.jsonl").read_text().splitlines()
    return float(np.mean([json.loads(x)["success"] for x in lines if x.strip()]))


def train_all(root: Path, methods: dict[str, tuple[str, ...]], seeds: list[int], args: argparse.Namespace,
              extra: list[str], data: Inputs) -> None:
    """Train (and evaluate) every method x seed under ``root`` that is not finished with the same settings."""
    jobs = [(m, s) for m in methods for s in seeds]
    for i, (method, seed) in enumerate(jobs, 1):
        overrides = resolve(methods[method], data, args)
        out = run_dir(root, method, seed)
        want = request(overrides, extra, args, data)
        tag = f"[{i}/{len(jobs)}] {method} seed {seed}"
        marker = read_marker(out)
        if marker is not None and marker["request"] == want:
            print(f"{tag}: finished earlier, kept", flush=True)
            continue
        (out / MARKER).unlink(missing_ok=True)
        print(f"{tag}: training {args.steps} steps", flush=True)
        start = time.monotonic()
        seed_args = argparse.Namespace(**{**vars(args), "seed": seed})
        code, run = demo.train(out, data.warm, data.pool_ref, data.heldout, seed_args, extra, method=overrides)
        if code != 0:
            raise SystemExit(f"{tag}: the trainer failed (exit {code}; log: {out / 'trainer.log'})")
        accuracy = heldout_accuracy(run, data, seed_args) if args.eval_tasks > 0 else None
        (out / MARKER).write_text(json.dumps({"request": want, HELDOUT: accuracy,
                                              "seconds": time.monotonic() - start}, indent=1))
        if not args.keep_checkpoints:  # the last step's weights and optimiser, ~1 GB a run at the demo's scale
            for checkpoint in run.glob("global_step_*"):
                shutil.rmtree(checkpoint)
        print(f"{tag}: done in {time.monotonic() - start:.0f} s"
              + ("" if accuracy is None else f", held-out accuracy {accuracy:.3f}"), flush=True)


def series_of_dumps(dumps: dict[int, dict]) -> dict[str, list[float]]:
    """Per step (sorted) of a run's step dumps (``verl_ext.trainer.records.read_dumps``): :data:`METRICS`. The actor
    update's rows are the kept rollouts and the replayed ones (their generation-time advantage, from the dump of the
    step that made them); a step whose update was skipped has no non-zero-advantage row."""
    from eval.metrics import degenerate_group_rate, effective_task_ratio, task_pass_rates

    out: dict[str, list[float]] = {k: [] for k in METRICS}
    advantage_of: dict[int, float] = {}
    for step in sorted(dumps):
        d = dumps[step]
        tasks, reward = np.asarray(d["rollout_task"]), np.asarray(d["rollout_reward"], dtype=np.float64)
        advantage = np.asarray(d["rollout_advantage"], dtype=np.float64)
        advantage_of.update(zip(d["rollout_id"], advantage))
        rows = np.concatenate([advantage[np.asarray(d["kept"], dtype=np.int64)],
                               [advantage_of[i] for i in d["replayed"]]])
        rates = task_pass_rates(tasks, reward)
        out["etr"].append(effective_task_ratio(rates))
        out["degenerate"].append(degenerate_group_rate(d["rollout_group"], reward))
        out["observed_p"].append(float(rates.mean()))
        out["nonzero_advantage"].append(float(np.mean(np.abs(rows) > 1e-6)) if len(rows) else 0.0)
        out["counts_mean"].append(float(np.mean(d["counts"])))
        out["counts_std"].append(float(np.std(d["counts"])))
        out["kept"].append(len(d["kept"]) / len(tasks))
        out["reward"].append(float(reward.mean()))
    return out


def read_runs(root: Path, methods: list[str], seeds: list[int]) -> tuple[Series, dict[str, dict[int, float | None]],
                                                                          dict]:
    """The finished runs' series, held-out accuracies and (the first run's) request; refuses an unfinished one."""
    from verl_ext.trainer.records import read_dumps

    series: Series = {}
    heldout: dict[str, dict[int, float | None]] = {}
    first = None
    for method in methods:
        series[method], heldout[method] = {}, {}
        for seed in seeds:
            marker = read_marker(run_dir(root, method, seed))
            if marker is None:
                raise SystemExit(f"{method} seed {seed} has not finished under {root} (run without --report-only)")
            first = first or marker["request"]
            series[method][seed] = series_of_dumps(read_dumps(run_dir(root, method, seed) / "run"))
            heldout[method][seed] = marker[HELDOUT]
    return series, heldout, first


# ---------------------------------------------------------------------------------------- summary
def per_seed(series: Series, heldout: dict[str, dict[int, float | None]]) -> dict[str, dict[str, dict[int, float]]]:
    """method -> metric -> seed -> the mean over steps (held-out accuracy: the run's value, where measured)."""
    out = {m: {k: {s: float(np.mean(v[k])) for s, v in runs.items()} for k in METRICS} for m, runs in series.items()}
    for m, acc in heldout.items():
        if any(a is not None for a in acc.values()):
            out[m][HELDOUT] = {s: a for s, a in acc.items() if a is not None}
    return out


def summarize(values: dict[str, dict[str, dict[int, float]]], baseline: str = BASELINE) -> list[dict]:
    """Per method and metric: mean and 95% t interval over seeds (no interval from one seed); the difference from
    ``baseline`` paired by seed (``None`` for the baseline itself, when it is absent or fewer than 2 seeds are
    shared)."""
    rows = []
    for method, metrics in values.items():
        for key, by_seed in metrics.items():
            seeds = sorted(by_seed)
            x = np.array([by_seed[s] for s in seeds])
            d = t_interval(x) if len(x) >= 2 else None  # one seed: its mean, no interval
            row = {"method": method, "metric": key, "seeds": seeds, "mean": float(x.mean()),
                   "low": d and d.low, "high": d and d.high, "diff": None}
            base = values.get(baseline, {}).get(key, {}) if method != baseline else {}
            common = sorted(set(base) & set(by_seed))
            if len(common) >= 2:
                p = t_interval(np.array([by_seed[s] - base[s] for s in common]))
                row["diff"] = {"mean": p.mean, "low": p.low, "high": p.high, "seeds": common}
            rows.append(row)
    return rows


def markdown(rows: list[dict], baseline: str = BASELINE) -> str:
    label = {**METRICS, HELDOUT: "held-out accuracy after the last step"}
    lines = [f"| method | metric | mean over steps, then over seeds [95% t] | minus `{baseline}`, paired by seed "
             "[95% t] |", "|---|---|---|---|"]
    for r in rows:
        diff = "—" if r["diff"] is None else (f"{r['diff']['mean']:+.3f} [{r['diff']['low']:+.3f}, "
                                              f"{r['diff']['high']:+.3f}]")
        interval = "" if r["low"] is None else f" [{r['low']:.3f}, {r['high']:.3f}]"
        lines.append(f"| `{r['method']}` | {label[r['metric']]} | {r['mean']:.3f}{interval} "
                     f"({len(r['seeds'])} seed{'s' if len(r['seeds']) > 1 else ''}) | {diff} |")
    return "\n".join(lines)


def band(ax, runs: dict[int, dict[str, list[float]]], key: str, label: str, style: str = "-") -> None:
    """One method's per-step ``key``: the mean over seeds, with a band from their min to their max."""
    y = np.array([runs[s][key] for s in sorted(runs)])
    steps = np.arange(1, y.shape[1] + 1)
    line, = ax.plot(steps, y.mean(0), style, label=label)
    ax.fill_between(steps, y.min(0), y.max(0), color=line.get_color(), alpha=0.12)


def plot_subtitle(series: Series) -> str:
    """What a reader of the study's plots needs: the seeds, the machine and the steps."""
    seeds = sorted({len(runs) for runs in series.values()})
    steps = sorted({len(run["etr"]) for runs in series.values() for run in runs.values()})
    return (f"{'/'.join(map(str, seeds))} seed{'s' if seeds != [1] else ''} a method (line: mean, band: min-max), "
            f"CPU, {'/'.join(map(str, steps))} RL steps of the real trainer")


def plots(series: Series, out: Path) -> list[Path]:
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for key, label in METRICS.items():
        fig, ax = plt.subplots(figsize=(5, 4))
        for method, runs in series.items():
            band(ax, runs, key, method)
        ax.set_title(f"{label}\n{textwrap.fill(plot_subtitle(series), 70)}", fontsize=9)
        ax.set(xlabel="step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(out / f"{key}.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths


def write(out: Path, series: Series, heldout: dict[str, dict[int, float | None]], note: str) -> str:
    rows = summarize(per_seed(series, heldout))
    table = markdown(rows)
    missing = "" if BASELINE in series else f"\n\n`{BASELINE}` is not among the methods: no paired differences."
    (out / "study.md").write_text(f"{note}{missing}\n\n{table}\n")
    (out / "study.json").write_text(json.dumps({"note": note, "series": series, "heldout": heldout, "summary": rows},
                                               indent=1))
    plots(series, out)
    return table


def note(req: dict, methods: dict[str, tuple[str, ...]], seeds: list[int]) -> str:
    layers = "" if req["num_layers"] is None else f", truncated to {req['num_layers']} layers (meaningless text)"
    held = (f"held-out accuracy on {req['eval_tasks']} unseen tasks x {req['eval_k']} samples (T = 1.0) after the "
            "last step" if req["eval_tasks"] else "no held-out evaluation")
    return (f"Study: {', '.join(f'`{m}`' for m in methods)}; seeds {', '.join(map(str, seeds))} (`data.seed`); "
            f"{req['steps']} steps of {req['tasks']} tasks x {req['budget']} rollouts; pool: {req['pool']} "
            f"`{TASK}` tasks (`{Path(req['pool_file']).name}`, reference pass rates from {req['ref_n']} samples); "
            f"policy: `{Path(req['policy']).name}` (SmolLM2-135M-Instruct after the demo's SFT warm start{layers}); "
            f"{held}. These are CPU results on a 135M model, a few steps on a small pool: they show whether each "
            "mechanism acts, not the papers' gains at their scale. Methods: "
            + "; ".join(f"`{m}` = `{' '.join(o)}`" for m, o in methods.items())
            + (f"; every run: `{' '.join(req['extra'])}`." if req["extra"] else "."))


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_options(parser)
    parser.set_defaults(out="outputs/study", steps=10, eval_k=5)  # 21 runs by default: half the demo's held-out samples
    parser.add_argument("--methods", default=",".join(METHODS), help=f"known: {', '.join(METHODS)}; or "
                        "name=override,override")
    parser.add_argument("--seeds", default="0,1,2", help="trainer seeds, comma-separated (intervals need 2 or more)")
    parser.add_argument("--report-only", action="store_true", help="re-read the finished runs under OUT/runs")
    parser.add_argument("--keep-checkpoints", action="store_true", help="keep each run's last checkpoint (~1 GB; "
                        "by default removed once the run is evaluated: the report reads its step dumps)")
    args = parser.parse_args(own)
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not args.seeds:
        parser.error("--seeds: no seed given")
    try:
        args.methods = parse_methods(args.methods)
    except ValueError as e:
        parser.error(str(e))
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    out = Path(args.out).resolve()
    root = out / "runs"
    if not args.report_only:
        train_all(root, args.methods, args.seeds, args, extra, inputs(out, args))
    series, heldout, req = read_runs(root, list(args.methods), args.seeds)
    methods = {m: tuple(read_marker(run_dir(root, m, args.seeds[0]))["request"]["overrides"]) for m in args.methods}
    print(write(out, series, heldout, note(req, methods, args.seeds)))
    print(f"\n{out / 'study.md'}, {out / 'study.json'}, {len(METRICS)} plots under {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
