"""The five papers' tables from run logs, with the papers' own numbers beside ours.

    python -m eval.tables PAPER --runs NAME=RUN_DIR [NAME=RUN_DIR ...] [--format markdown|latex]
        [--out FILE] [--setting SETTING] [--step N] [--baseline NAME]

PAPER: ``bots``, ``cbs``, ``coba``, ``ads`` or ``progress``. A run named like a paper row
(:func:`eval.paper_numbers.method_key`, e.g. ``bots_dots``, ``grpo+cbs*``, ``static_exploit``) gets the
paper's numbers (``--setting``: which model; default the paper's first) in a ``(paper)`` column beside
ours; the paper's other rows are listed with our cells missing. A missing value prints as "—", never
filled in. Evaluation scores come from ``RUN_DIR/eval`` (the evaluator), else from verl's ``val-core``
validation metrics (:attr:`eval.run_logs.Run.curve`); final-score tables use each run's last evaluated
step unless ``--step`` is given.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from eval.metrics import (PASS_RATE_BINS, aggregate_curves, best_so_far, countdown_format_diagnostics,
                          degenerate_rate_summary, etr_over_steps,
                          pass_at_k, paired_bootstrap_ci, paired_wins_losses_ties, time_to_baseline,
                          transition_matrix, zero_success_rate, all_success_rate)
from eval.paper_numbers import PAPER_NUMBERS, Reference, method_key
from eval.run_logs import Run, parse_runs

MISSING = "—"
NOT_REACHED = "−"  # TTB: the method never reaches the baseline's target (the paper's sign)
AGGREGATED = "aggregated"
TTB_Q = (50, 75, 100)
BSF_B = (25, 50, 100)
# display name -> benchmark (the evaluator's / verl's data_source name)
CBS_BENCHMARKS = {"AIME24": "aime24", "AIME25": "aime25", "AMC23": "amc23", "MATH500": "math500",
                  "Minerva": "minerva", "Olympiad": "olympiadbench"}
COBA_BENCHMARKS = {"AIME24": "aime24", "AIME25": "aime25", "AMC23": "amc23", "MATH500": "math500",
                   "Olympiad": "olympiadbench"}
COBA_BASELINES = ("static_exploit", "static_explore", "linear_decay", "explore_to_exploit", "coba")
ADS_BENCHMARKS = {"MATH-500": "math500", "AIME24": "aime24", "AIME25": "aime25", "Minerva": "minerva",
                  "AMC23": "amc23", "GPQA-D": "gpqa_diamond", "MMLU-Pro": "mmlu_pro"}
PASS_KS = (1, 4, 8, 16)
# progress: benchmark (scripts/progress/evaluate.sh's names) -> the paper's evaluation protocol it reproduces
PROGRESS_PROTOCOLS = {"countdown": "the 200 held-out prompts (Tables 1-3, 9)",
                      "countdown_official": "the official 50-prompt test split (App. B, Tables 6, 8)"}
FORMAT_FLAGS = ("missing answer", "multiple answers", "multiple think", "too long", "parse failure")


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def fmt(value: Any, digits: int) -> str:
    """A cell: "—" for None/NaN, strings as they are, ``(estimate, low, high)`` as ``est [low, high]``."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return f"{fmt(value[0], digits)} [{fmt(value[1], digits)}, {fmt(value[2], digits)}]"
    return MISSING if np.isnan(value) else f"{value:.{digits}f}"


def comparison(title: str, ours: dict[str, dict[str, Any]], columns: list[str], ref: Reference | None,
               digits: int, notes: list[str] = ()) -> Table:
    """Rows: our runs, then the paper's rows that no run matches; beside each of our columns that the
    paper reports, a ``(paper)`` column."""
    paper_rows = ref.rows if ref else {}
    paper_columns = {c for row in paper_rows.values() for c in row}
    header = ["method"]
    for c in columns:
        header += [c] + ([f"{c} (paper)"] if c in paper_columns else [])
    ours_keys = {method_key(n) for n in ours}
    rows = []
    for name in [*ours, *(k for k in paper_rows if k not in ours_keys)]:
        mine, theirs = ours.get(name, {}), paper_rows.get(method_key(name), {})
        row = [name]
        for c in columns:
            row += [fmt(mine.get(c), digits)] + ([fmt(theirs.get(c), digits)] if c in paper_columns else [])
        rows.append(row)
    return Table(title, header, rows, [*notes, *([f"paper: {ref.citation}", *ref.notes] if ref else [])])


# --------------------------------------------------------------------------- final scores
def final_scores(runs: dict[str, Run], benchmarks: dict[str, str], value: Callable[[dict], Any],
                 mean_column: str | None, step: int | None) -> tuple[dict[str, dict[str, Any]], str]:
    """``{run: {benchmark label: value(record) × 100}}`` at ``step`` (default: the run's last evaluated
    step), with the mean over the benchmarks in ``mean_column`` when every one is present; and a note
    naming the steps used."""
    out, used = {}, []
    for name, run in runs.items():
        at = run.final_step() if step is None else step
        used.append(f"{name}: {MISSING if at is None else at}")
        cells = {}
        for label, bench in benchmarks.items():
            rec = run.curve.get(bench, {}).get(at)
            v = None if rec is None else value(rec)
            cells[label] = None if v is None else 100 * float(v)
        if mean_column and all(cells[label] is not None for label in benchmarks):
            cells[mean_column] = float(np.mean([cells[label] for label in benchmarks]))
        out[name] = cells
    return out, "ours: evaluation step " + ", ".join(used)


def pass_at(k: int) -> Callable[[dict], Any]:
    return lambda rec: rec.get("pass@k", {}).get(str(k))


def accuracy(rec: dict) -> Any:
    return rec.get("accuracy")


# --------------------------------------------------------------------------- papers
BOTS_DOMAINS = {  # BOTS paper §4.1, App. B.2: "aggregated" = mean over the domain's benchmarks
    "math": ("math500", "aime24"),
    "code": ("humaneval", "mbpp", "livecodebench"),
    "logic": ("ordering_puzzles", "arc_agi"),
}


def bots_domain(logged: set[str], domain: str | None) -> str | None:
    """``domain`` if given, else the one BOTS domain whose benchmarks the runs logged (``None``: none)."""
    if domain is not None:
        if domain not in BOTS_DOMAINS:
            raise ValueError(f"--domain must be one of {sorted(BOTS_DOMAINS)}, got {domain!r}")
        return domain
    found = [d for d, benches in BOTS_DOMAINS.items() if logged & set(benches)]
    if len(found) > 1:
        raise ValueError(f"the runs logged benchmarks of several BOTS domains {found}: pass --domain")
    return found[0] if found else None


def bots_tables(runs: dict[str, Run], refs: dict[str, Reference], args: argparse.Namespace) -> list[Table]:
    base = runs.get(args.baseline)
    logged = sorted({b for run in runs.values() for b in run.curve})
    domain = bots_domain(set(logged), getattr(args, "domain", None))
    benchmarks = list(BOTS_DOMAINS[domain]) if domain else []

    def curve(run: Run, scope: str) -> tuple[np.ndarray, np.ndarray] | None:
        if scope != AGGREGATED:
            points = sorted(run.curve.get(scope, {}).items())
            if not points:
                return None
            return np.array([s for s, _ in points]), np.array([r["accuracy"] for _, r in points])
        if not benchmarks or any(b not in run.curve for b in benchmarks):
            return None
        try:
            return aggregate_curves({b: {s: r["accuracy"] for s, r in run.curve[b].items()} for b in benchmarks})
        except ValueError:  # no step evaluated on every benchmark
            return None

    notes = [f"ours: accuracy curves vs the run {args.baseline!r}; {NOT_REACHED}: the target is never reached "
             "(or the baseline never improves, TTB undefined); aggregated = mean over the " +
             (f"{domain} benchmarks {', '.join(benchmarks)} (missing if a run lacks one)" if domain
              else "domain's benchmarks (none of math500, aime24, humaneval, mbpp, livecodebench, ordering_puzzles, "
                   "arc_agi evaluated)")]
    if base is None:
        notes.append(f"no run named {args.baseline!r}: TTB and BSF need it (--baseline)")
    columns = [f"TTB{q}" for q in TTB_Q] + [f"BSF{b}" for b in BSF_B]
    tables = []
    for scope in [*logged, AGGREGATED]:
        baseline = curve(base, scope) if base else None
        ours = {}
        for name, run in runs.items():
            if run is base:
                continue
            method = curve(run, scope)
            if method is None or baseline is None:
                ours[name] = {}
                continue
            ttb = {f"TTB{q}": time_to_baseline(*method, *baseline, q / 100) for q in TTB_Q}
            ours[name] = {**{k: NOT_REACHED if np.isnan(v) else v for k, v in ttb.items()},
                          **{f"BSF{b}": best_so_far(*method, *baseline, b / 100) for b in BSF_B}}
        tables.append(comparison(f"BOTS: time-to-baseline and best-so-far vs {args.baseline}, {scope}", ours,
                                 columns, refs.get("aggregated") if scope == AGGREGATED else None, 2, notes))
    etr = {}
    for name, run in runs.items():
        _, values = etr_over_steps(run.path)
        etr[name] = {"ETR mean": float(values.mean()) if len(values) else None,
                     "ETR last": float(values[-1]) if len(values) else None, "steps": str(len(values))}
    tables.append(comparison("BOTS: effective task ratio over training", etr, ["ETR mean", "ETR last", "steps"],
                             refs.get("etr"), 3, ["ours: fraction of a step's selected tasks whose training pass "
                                                  "rate lies in (0, 1); mean over the logged steps and last step"]))
    return tables


def cbs_tables(runs: dict[str, Run], refs: dict[str, Reference], args: argparse.Namespace) -> list[Table]:
    ours, used = final_scores(runs, CBS_BENCHMARKS, accuracy, "average", args.step)
    return [comparison("CBS: six-benchmark average", ours, [*CBS_BENCHMARKS, "average"], refs.get("average"), 2,
                       [used + "; accuracy × 100, mean over each benchmark's samples (paper: AIME24/25 and AMC23 "
                        "avg@32, MATH500, Minerva and Olympiad avg@4)"])]


def coba_tables(runs: dict[str, Run], refs: dict[str, Reference], args: argparse.Namespace) -> list[Table]:
    ours, used = final_scores(runs, COBA_BENCHMARKS, accuracy, "mean", args.step)
    columns = [*COBA_BENCHMARKS, "mean"]
    notes = [used + "; avg@16 × 100"]
    baselines = {n: v for n, v in ours.items() if method_key(n) in COBA_BASELINES}
    undumped = [name for name, run in runs.items() if not run.dumps]
    main_notes = notes + ([f"no task transitions (no step dumps): {', '.join(undumped)}"] if undumped else [])
    tables = [comparison("CoBA-RL: main results (avg@16)", ours, columns, refs.get("main"), 2, main_notes),
              comparison("CoBA-RL: static and heuristic baselines (avg@16)", baselines, columns, refs.get("baselines"),
                         2, notes + [f"runs named {', '.join(COBA_BASELINES)}"])]
    for name, run in ((n, r) for n, r in runs.items() if n not in undumped):
        initial, final = run.first_last_pass_rates()
        fractions, counts = transition_matrix(initial, final)
        rows = [[label, *(fmt(100 * f, 1) for f in fractions[i]), str(counts[i].sum())]
                for i, label in enumerate(PASS_RATE_BINS)]
        tables.append(Table(f"CoBA-RL: task transitions, {name} (% of each initial bin)",
                            ["initial \\ final", *PASS_RATE_BINS, "tasks"], rows,
                            [f"ours: {len(initial)} training tasks visited at least twice; pass rate at the first "
                             "visit (row) and at the last visit (column), from the step dumps",
                             "paper: CoBA-RL Figure 7 (Qwen2.5-7B-Instruct; a heat map, a few cells quoted in its "
                             "text)"]))
    return tables


def ads_tables(runs: dict[str, Run], refs: dict[str, Reference], args: argparse.Namespace) -> list[Table]:
    means, used = final_scores(runs, ADS_BENCHMARKS, accuracy, "Mean@16 mean", args.step)
    stds, _ = final_scores(runs, ADS_BENCHMARKS, lambda r: r.get("accuracy_std_over_repeats"), None, args.step)
    for name, cells in means.items():
        for label in ADS_BENCHMARKS:
            if cells[label] is not None and stds[name][label] is not None and not np.isnan(stds[name][label]):
                cells[label] = f"{cells[label]:.2f} ± {stds[name][label]:.2f}"
    passes, _ = final_scores(runs, ADS_BENCHMARKS, pass_at(16), "Pass@16 mean", args.step)
    return [comparison("ADS: Mean@16 (± std over evaluation repeats)", means, [*ADS_BENCHMARKS, "Mean@16 mean"],
                       refs.get("mean"), 2, [used + "; × 100"]),
            comparison("ADS: Pass@16", passes, [*ADS_BENCHMARKS, "Pass@16 mean"], refs.get("pass16"), 2,
                       [used + "; × 100; unbiased pass@16"])]


def prompt_stats(samples: list[dict]) -> dict[int, tuple[int, int, float]]:
    """``{prompt index: (samples, successes, mean score)}`` over all samples and evaluation repeats."""
    scores, successes = defaultdict(list), defaultdict(int)
    for s in samples:
        scores[s["index"]].append(float(s["score"]))
        successes[s["index"]] += bool(s["success"])
    return {i: (len(v), successes[i], float(np.mean(v))) for i, v in scores.items()}


def progress_tables(runs: dict[str, Run], refs: dict[str, Reference], args: argparse.Namespace) -> list[Table]:
    steps = {name: run.final_step() if args.step is None else args.step for name, run in runs.items()}
    benchmarks = sorted({b for name, run in runs.items() if steps[name] is not None
                         for b in run.sample_benchmarks(steps[name])})
    used = "ours: evaluation step " + ", ".join(f"{n}: {MISSING if s is None else s}" for n, s in steps.items())
    tables = []
    for bench in benchmarks or ["(no evaluation samples)"]:
        protocol = [f"paper: {PROGRESS_PROTOCOLS[bench]}" if bench in PROGRESS_PROTOCOLS else
                    f"paper: no numbers for a benchmark named {bench!r} (its protocols: "
                    + "; ".join(f"{b} = {p}" for b, p in PROGRESS_PROTOCOLS.items()) + ")"]
        samples = {n: run.samples(steps[n], bench) if steps[n] is not None else [] for n, run in runs.items()}
        stats = {n: prompt_stats(s) for n, s in samples.items()}
        summary = {}
        for name, st in stats.items():
            if not st:
                summary[name] = {}
                continue
            n, c, score = (np.array(x) for x in zip(*st.values()))
            summary[name] = {"avg score": float(score.mean()), "zero-success": zero_success_rate(c),
                             "all-success": all_success_rate(n, c), "prompts": str(len(n)),
                             **{f"pass@{k}": float(pass_at_k(n, c, k).mean()) for k in PASS_KS if k <= n.min()}}
        tables.append(comparison(f"Progress: {bench}", summary, ["avg score", *(f"pass@{k}" for k in PASS_KS),
                                                                  "zero-success", "all-success", "prompts"],
                                 refs.get(bench), 4,
                                 [used + "; avg score includes the 0.1 format scores", *protocol]))
        base = stats.get(args.baseline, {})
        paired = {}
        for name, st in stats.items():
            if name == args.baseline:
                continue
            common = sorted(set(st) & set(base))
            if not common:
                paired[name] = {}
                continue
            a, b = (np.array([[d[i][2], pass_at_k(d[i][0], d[i][1], 1)] for i in common]) for d in (st, base))
            diff, low, high = paired_bootstrap_ci(a, b)
            wlt = ["/".join(map(str, paired_wins_losses_ties(a[:, j], b[:, j]))) for j in (0, 1)]
            paired[name] = {"Δ avg score": (diff[0], low[0], high[0]), "Δ pass@1": (diff[1], low[1], high[1]),
                            "W/L/T avg score": wlt[0], "W/L/T pass@1": wlt[1], "prompts": str(len(common))}
        tables.append(comparison(f"Progress: {bench}, paired difference to {args.baseline} per prompt", paired,
                                 ["Δ avg score", "Δ pass@1", "W/L/T avg score", "W/L/T pass@1", "prompts"],
                                 refs.get(f"{bench}/vs_{args.baseline}"), 4,
                                 ["ours: mean over the prompts both runs evaluated, 95% paired bootstrap CI "
                                  "(20,000 resamples of prompts); wins / losses / ties per prompt", *protocol] +
                                 ([] if base else [f"no samples of a run named {args.baseline!r} (--baseline)"])))
        fmt_rates = {name: dict(zip(FORMAT_FLAGS, countdown_format_diagnostics(s).values())) if s else {}
                     for name, s in samples.items()}
        tables.append(comparison(f"Progress: {bench}, format diagnostics (fraction of completions)", fmt_rates,
                                 list(FORMAT_FLAGS), refs.get(f"{bench}/format"), 4,
                                 ["ours: the evaluator's per-sample flags", *protocol]))
    degenerate = {}
    for name, run in runs.items():
        m = degenerate_rate_summary(run.path)
        degenerate[name] = {"degenerate-batch rate": m.mean, "s.e.": m.se, "steps": str(m.n)}
    tables.append(comparison("Progress: degenerate-batch rate over training", degenerate,
                             ["degenerate-batch rate", "s.e.", "steps"], refs.get("degenerate"), 3,
                             ["ours: fraction of a step's rollout groups whose rewards are all equal; mean ± s.e. "
                              "over the logged training steps"]))
    return tables


PAPERS: dict[str, tuple[Callable[..., list[Table]], str | None]] = {
    "bots": (bots_tables, "random"), "cbs": (cbs_tables, None), "coba": (coba_tables, None),
    "ads": (ads_tables, None), "progress": (progress_tables, "uniform"),
}


# --------------------------------------------------------------------------- rendering
def markdown(table: Table) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("*", "\\*") for c in cells) + " |"

    rule = "|" + "|".join(["---"] + ["---:"] * (len(table.columns) - 1)) + "|"
    out = [f"### {table.title}", "", line(table.columns), rule, *map(line, table.rows)]
    return "\n".join(out + [""] + [f"- {n}" for n in table.notes])


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"$<$", ">": r"$>$",
          "—": "---", "–": "--", "−": "$-$", "±": r"$\pm$", "Δ": r"$\Delta$", "×": r"$\times$", "§": r"\S{}",
          "→": r"$\to$", "≥": r"$\geq$",
          "[": "{[}", "]": "{]}"}  # braced: a row starting with "[" would be read as an argument of "\\"


def latex_escape(text: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in text)


def latex(table: Table) -> str:
    def line(cells: list[str]) -> str:
        return " & ".join(latex_escape(c) for c in cells) + r" \\"

    out = [r"\begin{table}[ht]", r"\centering", rf"\caption{{{latex_escape(table.title)}}}",
           rf"\begin{{tabular}}{{l{'r' * (len(table.columns) - 1)}}}", r"\hline", line(table.columns), r"\hline",
           *(line(r) for r in table.rows), r"\hline", r"\end{tabular}"]
    out += [rf"{{\footnotesize {latex_escape(n)}\par}}" for n in table.notes]
    return "\n".join(out + [r"\end{table}"])


def render(paper: str, setting: str, tables: list[Table], form: str) -> str:
    if form == "latex":
        return "\n\n".join([f"% eval.tables {paper}: ours vs the paper ({setting})", *map(latex, tables)]) + "\n"
    return "\n\n".join([f"# {paper}: ours vs the paper ({setting})", *map(markdown, tables)]) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("paper", choices=list(PAPERS))
    parser.add_argument("--runs", nargs="+", required=True, metavar="NAME=RUN_DIR")
    parser.add_argument("--format", choices=("markdown", "latex"), default="markdown")
    parser.add_argument("--out", help="write here instead of stdout")
    parser.add_argument("--setting", help="the paper's setting (model) whose numbers are printed beside ours")
    parser.add_argument("--step", type=int, help="evaluation step of final-score tables (default: each run's last)")
    parser.add_argument("--baseline", help="run compared against (bots: random, progress: uniform)")
    parser.add_argument("--domain", choices=sorted(BOTS_DOMAINS),
                        help="bots: the domain whose benchmarks are aggregated (default: inferred from the runs)")
    args = parser.parse_args(argv)
    build, default_baseline = PAPERS[args.paper]
    args.baseline = args.baseline or default_baseline
    settings = PAPER_NUMBERS[args.paper]
    setting = args.setting or next(iter(settings))
    if setting not in settings:
        parser.error(f"--setting for {args.paper} is one of: {', '.join(map(repr, settings))}")
    runs = {name: Run(name, path) for name, path in parse_runs(args.runs).items()}
    text = render(args.paper, setting, build(runs, settings[setting], args), args.format)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
