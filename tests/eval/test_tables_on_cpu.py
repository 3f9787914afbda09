"""eval.tables and eval.plots on small run directories written in the trainer's and the evaluator's
formats: the rendered numbers against hand computation, missing cells, the papers' numbers, LaTeX
structure, PNGs."""

import json
import re

import numpy as np
import pytest

from eval import plots, tables
from verl_ext.trainer import records

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

STEPS = list(range(0, 101, 10))
COBA = ("aime24", "aime25", "amc23", "math500", "olympiadbench")


def random_curve(t, lo, hi):
    """The baseline: linear from lo at step 0 to hi at step 100."""
    return lo + (hi - lo) * min(t, 100) / 100


def write_metrics(run, per_step):
    path = records.metrics_path(run, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in per_step.items()))


def write_curve(run, rows):
    (run / "eval").mkdir(parents=True, exist_ok=True)
    (run / "eval" / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_samples(run, step, bench, successes, scores=None, **flags):
    """``successes[prompt]``: list of 0/1 per sample; score 1.0 on success, else 0.1 (or ``scores``)."""
    d = run / "eval" / f"step_{step}" / bench
    d.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, row in enumerate(successes):
        for j, ok in enumerate(row):
            lines.append(json.dumps({
                "benchmark": bench, "index": i, "sample": j, "repeat": 0, "success": bool(ok),
                "score": scores[i][j] if scores else (1.0 if ok else 0.1), "response": "<answer>1</answer>",
                "has_answer": flags.get("has_answer", True), "multiple_answers": False, "multiple_think": False,
                "parse_error": False, "too_long": flags.get("too_long", False)}))
    (d / "samples.jsonl").write_text("\n".join(lines) + "\n")


def curve_row(step, bench, acc, **extra):
    return {"step": step, "benchmark": bench, "mean_score": acc, "accuracy": acc, "accuracy_std_over_repeats": 0.0,
            "pass@k": {"1": acc}, "n_problems": 30, "k": 16, **extra}


def bots_curves(shift=0, flat=False):
    """math500 0.2 → 0.6 and aime24 0.0 → 0.2 over 100 steps, ``shift`` steps ahead (or flat at the start)."""
    return [curve_row(t, b, lo if flat else random_curve(t + shift, lo, hi))
            for t in STEPS for b, lo, hi in (("math500", 0.2, 0.6), ("aime24", 0.0, 0.2))]


def parse_markdown(text, title):
    """``{row name: {column: cell}}`` of the table titled ``title``."""
    block = text.split(f"### {title}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    header = [c.strip() for c in block[0].strip("|").split(" | ")]
    rows = {}
    for line in block[2:]:
        cells = [c.strip().replace("\\*", "*") for c in line.strip().strip("|").split(" | ")]
        rows[cells[0]] = dict(zip(header[1:], cells[1:]))
    return rows


def run_tables(paper, runs, tmp_path, *extra, form="markdown"):
    out = tmp_path / f"{paper}.{form}"
    tables.main([paper, "--runs", *(f"{n}={p}" for n, p in runs.items()), "--format", form, "--out", str(out),
                 *extra])
    return out.read_text()


def check_latex(text):
    """Balanced braces (escaped ones aside) and, in every tabular, as many cells per row as columns."""
    unescaped = re.sub(r"\\[{}]", "", text)
    depth = 0
    for ch in unescaped:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    assert not re.search(r"\\\\\s*\n\s*\[", text)  # "\\" then "[": LaTeX would read an optional argument
    assert text.count(r"\begin{table}") == text.count(r"\end{table}") == text.count(r"\begin{tabular}") > 0
    for spec, body in re.findall(r"\\begin\{tabular\}\{(\w+)\}\n(.*?)\\end\{tabular\}", text, re.S):
        rows = [r for r in body.splitlines() if r != r"\hline"]
        assert rows and all(r.endswith(r"\\") for r in rows)
        assert all(len(re.findall(r"(?<!\\)&", r)) == len(spec) - 1 for r in rows)


@pytest.fixture(scope="module")
def bots_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bots")
    runs = {n: root / n for n in ("random", "bots", "bots_mopps", "offline", "bots_dots")}
    write_curve(runs["random"], bots_curves())
    write_curve(runs["bots"], bots_curves(shift=20))  # the baseline 20 steps ahead
    write_curve(runs["bots_mopps"], bots_curves(flat=True))  # never improves
    # offline: no eval dir; verl's validation metrics in the training log, equal to the baseline's curve
    write_metrics(runs["offline"], {t: {"val-core/math500/acc/mean@4": random_curve(t, 0.2, 0.6),
                                        "val-core/math500/reward/mean@4": -1.0,
                                        "val-core/aime24/acc/mean@4": random_curve(t, 0.0, 0.2)} for t in STEPS})
    write_metrics(runs["bots"], {1: {"data_selection/effective_task_ratio": 0.5},
                                 2: {"data_selection/effective_task_ratio": 0.9}})
    runs["bots_dots"].mkdir()  # nothing logged
    return runs


def test_bots_ttb_bsf_etr(bots_runs, tmp_path):
    text = run_tables("bots", bots_runs, tmp_path)
    for scope in ("math500", "aime24", "aggregated"):
        t = parse_markdown(text, f"BOTS: time-to-baseline and best-so-far vs random, {scope}")
        # shifted by 20: Pq reached at 50q (baseline: 100q) - 20 steps
        assert [t["bots"][f"TTB{q}"] for q in (50, 75, 100)] == [f"{(q - 20) / q:.2f}" for q in (50, 75, 100)]
        # BSF25: max over steps <= 25 (0, 10, 20): the method's value at 20 is the baseline's at 40
        lo, hi = {"math500": (0.2, 0.6), "aime24": (0.0, 0.2), "aggregated": (0.1, 0.4)}[scope]
        assert t["bots"]["BSF25"] == f"{random_curve(40, lo, hi) / random_curve(20, lo, hi):.2f}"
        assert t["bots"]["BSF100"] == "1.00"
        assert [t["offline"][f"TTB{q}"] for q in (50, 75, 100)] == ["1.00"] * 3  # val-core fallback
        assert [t["bots_mopps"][f"TTB{q}"] for q in (50, 75, 100)] == [tables.NOT_REACHED] * 3
        assert {v for k, v in t["bots_dots"].items() if "paper" not in k} == {tables.MISSING}
        assert "random" not in t
    agg = parse_markdown(text, "BOTS: time-to-baseline and best-so-far vs random, aggregated")
    assert agg["bots"]["TTB50 (paper)"] == "0.89" and agg["bots_mopps"]["TTB100 (paper)"] == "−"
    assert agg["bots_mopps"]["BSF100"] == f"{0.1 / 0.4:.2f}"
    etr = parse_markdown(text, "BOTS: effective task ratio over training")
    assert etr["bots"] == {"ETR mean": "0.700", "ETR mean (paper)": "> 0.8", "ETR last": "0.900", "steps": "2"}
    assert etr["random"]["ETR mean"] == tables.MISSING and etr["random"]["ETR mean (paper)"] == "< 0.4"
    check_latex(run_tables("bots", bots_runs, tmp_path, form="latex"))


def test_bots_without_baseline_is_missing_not_invented(bots_runs, tmp_path):
    text = run_tables("bots", {"bots": bots_runs["bots"]}, tmp_path)
    t = parse_markdown(text, "BOTS: time-to-baseline and best-so-far vs random, aggregated")
    assert set(t["bots"]) >= {"TTB50", "TTB50 (paper)"} and t["bots"]["TTB50"] == tables.MISSING
    assert t["offline"]["TTB75 (paper)"] == "0.51" and t["offline"]["TTB75"] == tables.MISSING  # paper-only row
    assert "no run named 'random'" in text


def test_cbs_coba_ads_final_scores(tmp_path):
    runs = {n: tmp_path / n for n in ("grpo", "coba", "static_exploit")}
    accs = {"grpo": dict(zip(COBA, (0.10, 0.05, 0.40, 0.70, 0.30))),
            "coba": dict(zip(COBA, (0.20, 0.15, 0.50, 0.80, 0.35))),
            "static_exploit": dict(zip(COBA, (0.1, 0.1, 0.1, 0.1, 0.1)))}
    for name, acc in accs.items():
        write_curve(runs[name], [curve_row(0, b, 0.0) for b in COBA] +
                    [curve_row(50, b, a, **{"pass@k": {"16": min(1, 2 * a)}, "accuracy_std_over_repeats": 0.01})
                     for b, a in acc.items()])
    # transitions: task 0 p = 0 -> 1, task 1 p = 0.5 -> 0.5, task 2 only visited once (left out)
    for step, rewards in ((1, [0, 0, .5, 1, 0, 0]), (2, [1, 1, 1, 0])):
        records.write_dump(runs["coba"], step, {
            "tasks": [0, 1, 2][:len(rewards) // 2], "counts": [2] * (len(rewards) // 2),
            "rollout_task": [0, 0, 1, 1, 2, 2][:len(rewards)], "rollout_reward": rewards})
    text = run_tables("coba", runs, tmp_path)
    main = parse_markdown(text, "CoBA-RL: main results (avg@16)")
    for name, acc in accs.items():
        assert main[name]["AIME24"] == f"{100 * acc['aime24']:.2f}"
        assert main[name]["mean"] == f"{100 * np.mean(list(acc.values())):.2f}"
    assert main["coba"]["mean (paper)"] == "46.78" and main["knapsack"]["mean"] == tables.MISSING
    base = parse_markdown(text, "CoBA-RL: static and heuristic baselines (avg@16)")
    assert base["static_exploit"]["mean (paper)"] == "44.22" and "grpo" not in base
    trans = parse_markdown(text, "CoBA-RL: task transitions, coba (% of each initial bin)")
    assert trans["p = 0"]["p = 1"] == "100.0" and trans["p = 0"]["tasks"] == "1"
    assert trans["(0.2, 0.8)"]["(0.2, 0.8)"] == "100.0"
    assert trans["p = 1"]["p = 1"] == tables.MISSING and trans["p = 1"]["tasks"] == "0"
    assert "no task transitions (no step dumps): grpo, static_exploit" in text
    assert "ours: evaluation step grpo: 50, coba: 50, static_exploit: 50" in text
    early = parse_markdown(run_tables("coba", runs, tmp_path, "--step", "0", "--setting", "Qwen3-4B-Base"),
                           "CoBA-RL: main results (avg@16)")
    assert early["coba"]["mean"] == "0.00" and early["coba"]["mean (paper)"] == "49.46"
    check_latex(run_tables("coba", runs, tmp_path, form="latex"))

    cbs = parse_markdown(run_tables("cbs", {"grpo": runs["grpo"]}, tmp_path),
                         "CBS: six-benchmark average")
    assert cbs["grpo"]["MATH500"] == "70.00" and cbs["grpo"]["Minerva"] == tables.MISSING
    assert cbs["grpo"]["average"] == tables.MISSING and cbs["grpo"]["average (paper)"] == "28.91"
    assert cbs["grpo+cbs*"]["average (paper)"] == "31.08"

    ads = run_tables("ads", {"ads": runs["coba"]}, tmp_path)
    mean = parse_markdown(ads, "ADS: Mean@16 (± std over evaluation repeats)")
    assert mean["ads"]["MATH-500"] == "80.00 ± 1.00" and mean["ads"]["GPQA-D"] == tables.MISSING
    assert mean["ads"]["Mean@16 mean"] == tables.MISSING and mean["ads"]["Mean@16 mean (paper)"] == "28.05"
    # the paper prints AIME 25 before AIME 24: each cell lands under its own benchmark, Table 1's with its std
    assert mean["ads"]["AIME25 (paper)"] == "7.08 ± 0.34" and mean["ads"]["AIME24 (paper)"] == "9.44 ± 1.13"
    assert mean["ads_wo_inter"]["MMLU-Pro (paper)"] == "25.75" and mean["ads_wo_inter"]["MMLU-Pro"] == tables.MISSING
    passes = parse_markdown(ads, "ADS: Pass@16")
    assert passes["ads"]["AIME24"] == "40.00" and passes["ads"]["AIME24 (paper)"] == "32.22 ± 5.66"
    assert passes["ads"]["Pass@16 mean (paper)"] == "61.69" and passes["dots_rr"]["Pass@16 mean (paper)"] == "58.80"
    assert "dapo" not in passes  # Table 2 gives Mean@16 only
    olmo = run_tables("ads", {"ads": runs["coba"]}, tmp_path, "--setting", "OLMo3-7B-SFT")
    assert parse_markdown(olmo, "ADS: Pass@16")["grpo"]["Pass@16 mean (paper)"] == "55.10"
    assert parse_markdown(olmo, "ADS: Mean@16 (± std over evaluation repeats)")["ads_cross_policy"][
        "Mean@16 mean (paper)"] == "29.05"
    check_latex(run_tables("ads", {"ads": runs["coba"]}, tmp_path, form="latex"))


def test_ads_paper_rows_average_to_the_printed_average():
    """A transcription check: every ADS row's average column is the mean of its seven benchmarks as printed."""
    from eval.paper_numbers import PAPER_NUMBERS
    checked = 0
    for setting, refs in PAPER_NUMBERS["ads"].items():
        for ref in refs.values():
            for method, row in ref.rows.items():
                (average,) = (v for c, v in row.items() if c.endswith(" mean"))
                cells = [float(str(v).split(" ± ")[0]) for c, v in row.items() if c in tables.ADS_BENCHMARKS]
                assert len(cells) == 7 and abs(np.mean(cells) - average) < 0.006, (setting, method, cells, average)
                checked += 1
    assert checked == 32


@pytest.fixture(scope="module")
def progress_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    runs = {n: root / n for n in ("uniform", "conservative")}
    # uniform: prompt 0 all 16 right, prompt 1 none, prompt 2 8 of 16; conservative: 4 fewer right on each
    write_samples(runs["uniform"], 100, "countdown", [[1] * 16, [0] * 16, [1] * 8 + [0] * 8])
    write_samples(runs["conservative"], 100, "countdown", [[1] * 12 + [0] * 4, [0] * 16, [1] * 4 + [0] * 12],
                  has_answer=False, too_long=True)
    # the official 50-prompt split (its own protocol, Table 6) and a benchmark the paper has no numbers for
    for bench in ("countdown_official", "countdown_embedded"):
        write_samples(runs["uniform"], 100, bench, [[1] * 16, [1] * 8 + [0] * 8])
    write_metrics(runs["uniform"], {1: {"data_selection/degenerate_group_rate": 0.2},
                                    2: {"data_selection/degenerate_group_rate": 0.4}})
    return runs


def test_progress(progress_runs, tmp_path):
    text = run_tables("progress", progress_runs, tmp_path)
    s = parse_markdown(text, "Progress: countdown")
    # pass@1 = mean c/n; pass@16 with n = 16: 1 if any success; avg score: 1.0 right, 0.1 wrong
    assert s["uniform"]["pass@1"] == f"{(1 + 0 + 0.5) / 3:.4f}" and s["uniform"]["pass@16"] == f"{2 / 3:.4f}"
    assert s["uniform"]["avg score"] == f"{(1 + 0.1 + 0.55) / 3:.4f}"
    assert s["uniform"]["zero-success"] == s["uniform"]["all-success"] == f"{1 / 3:.4f}"
    # unbiased pass@4 of prompt 2 (8 of 16 right): 1 - C(8,4)/C(16,4)
    assert s["uniform"]["pass@4"] == f"{(1 + 0 + 1 - 70 / 1820) / 3:.4f}"
    # the 200 held-out prompts: Tables 1 and 3, as the paper prints them
    assert s["uniform"]["pass@1 (paper)"] == "0.4694" and s["rft_naive"]["avg score (paper)"] == "0.5110"
    assert s["conservative"]["pass@8 (paper)"] == "0.598" and s["uniform"]["zero-success (paper)"] == "0.3350"
    assert s["density_ratio"]["pass@1 (paper)"] == "0.364" and s["density_ratio"]["pass@1"] == tables.MISSING
    assert "prompt_utility" not in s  # a 50-prompt follow-up only
    d = parse_markdown(text, "Progress: countdown, paired difference to uniform per prompt")
    assert d["conservative"]["Δ pass@1"] == "-0.1667 [-0.2500, 0.0000]"  # -0.25, 0, -0.25 per prompt
    assert d["conservative"]["W/L/T pass@1"] == "0/2/1" and d["conservative"]["prompts"] == "3"
    # avg score per prompt: 0.775 vs 1.0, 0.1 vs 0.1, 0.325 vs 0.55
    assert d["conservative"]["W/L/T avg score"] == "0/2/1"
    assert d["conservative"]["Δ avg score (paper)"] == "-0.0245 [-0.0446, -0.0049]"
    assert d["conservative"]["W/L/T avg score (paper)"] == "100/81/19" and d["empirical"]["W/L/T pass@1 (paper)"] \
        == "31/86/83"
    f = parse_markdown(text, "Progress: countdown, format diagnostics (fraction of completions)")
    assert f["conservative"]["missing answer"] == f["conservative"]["too long"] == "1.0000"
    assert f["uniform"]["missing answer"] == "0.0000" and f["uniform"]["missing answer (paper)"] == "0.1325"
    assert f["rft_naive"]["parse failure (paper)"] == "0.3441"
    # the official 50-prompt split: Table 6 beside ours, never the 200-prompt numbers
    o = parse_markdown(text, "Progress: countdown_official")
    assert (o["uniform"]["avg score"], o["uniform"]["pass@1"]) == (f"{(1 + 0.55) / 2:.4f}", "0.7500")
    assert (o["uniform"]["avg score (paper)"], o["uniform"]["pass@1 (paper)"]) == ("0.583", "0.56")
    assert o["random_buckets"]["pass@16 (paper)"] == "0.68" and o["prompt_utility"]["pass@1 (paper)"] == "0.36"
    assert "zero-success (paper)" not in o["uniform"] and "rft_naive" not in o and "conservative" in o
    assert o["conservative"]["avg score"] == tables.MISSING  # not evaluated on this split
    od = parse_markdown(text, "Progress: countdown_official, paired difference to uniform per prompt")
    assert not any("(paper)" in c for c in od["conservative"])  # Table 2 is the 200-prompt protocol's
    of = parse_markdown(text, "Progress: countdown_official, format diagnostics (fraction of completions)")
    assert of["uniform"]["multiple answers (paper)"] == "0.7563" and "parse failure (paper)" not in of["uniform"]
    assert "paper: the official 50-prompt test split (App. B, Tables 6, 8)" in text
    e = parse_markdown(text, "Progress: countdown_embedded")
    assert set(e) == {"uniform", "conservative"} and not any("(paper)" in c for c in e["uniform"])
    assert "paper: no numbers for a benchmark named 'countdown_embedded'" in text
    g = parse_markdown(text, "Progress: degenerate-batch rate over training")
    assert g["uniform"] == {"degenerate-batch rate": "0.300", "degenerate-batch rate (paper)": "0.270",
                            "s.e.": "0.100", "s.e. (paper)": "0.0079", "steps": "2"}
    assert g["conservative"]["degenerate-batch rate"] == tables.MISSING
    assert g["density_ratio"]["degenerate-batch rate (paper)"] == "0.354"
    check_latex(run_tables("progress", progress_runs, tmp_path, form="latex"))


def test_plots(bots_runs, tmp_path, monkeypatch):
    run = bots_runs["bots"]
    for step, (tasks, counts, rewards) in {1: ([3, 4], [2, 4], [1, 0, 0, 0, 0, 0]),
                                           2: ([3, 5], [4, 2], [1, 1, 1, 1, 0, 1])}.items():
        rollout_task = [t for t, c in zip(tasks, counts) for _ in range(c)]
        records.write_dump(run, step, {"tasks": tasks, "counts": counts, "rollout_reward": rewards,
                                       "rollout_task": rollout_task, "rollout_group": rollout_task})
    ads = tmp_path / "ads"
    prob = "data_selection/selector/cluster_prob/"
    write_metrics(ads, {s: {prob + "0": p, prob + "1": 1 - p} for s, p in ((1, 0.5), (2, 0.7))})
    written = plots.main(["--runs", *(f"{n}={p}" for n, p in bots_runs.items()), f"ads={ads}",
                          "--out", str(tmp_path / "png"), "--baseline", "uniform:etr=0.4,degenerate=0.6"])
    assert {p.name for p in written} == {"eval_math500.png", "eval_aime24.png", "eval_aggregated.png", "etr.png",
                                         "degenerate.png", "rollouts_per_task.png", "cluster_probs.png",
                                         "selected_pass_rate.png"}
    assert plots.parse_baselines(["uniform (expected):etr=0.4", "b:degenerate=0.5,etr=0.1"]) == {
        "etr": {"uniform (expected)": 0.4, "b": 0.1}, "degenerate": {"b": 0.5}}
    for bad in ("etr=0.4", "u:etr", "u:loss=1", "u:etr=x"):
        with pytest.raises(SystemExit, match="expected LABEL:etr=V,degenerate=V"):
            plots.parse_baselines([bad])
    for p in written:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    assert plots.main(["--runs", f"empty={bots_runs['bots_dots']}", "--out", str(tmp_path / "none")]) == []
    subtitles, titled = [], plots.titled
    monkeypatch.setattr(plots, "titled", lambda title, subtitle: subtitles.append(subtitle) or titled(title, subtitle))
    again = plots.main(["--runs", *(f"{n}={p}" for n, p in bots_runs.items()), "--out", str(tmp_path / "sub"),
                        "--subtitle", "3 seeds, 8 H200, 200 steps"])
    assert again and len(subtitles) >= len(again) and set(subtitles) == {"3 seeds, 8 H200, 200 steps"}


def test_an_evaluation_plot_shows_its_interval_and_says_what_it_is(bots_runs, tmp_path, monkeypatch):
    """The typed entry point: the caller's interval is an error bar from ``low`` to ``high`` at its step, and every
    figure's title carries the subtitle."""
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    kept = []
    monkeypatch.setattr(plots.plt, "close", kept.append)  # keep the figures to read them
    interval = plots.Interval("math500", STEPS[-1], 0.55, 0.7, "95% CI of the change")
    subtitle = "one seed, CPU, 100 RL steps"
    written = plots.run(plots.PlotsConfig(runs={"bots": bots_runs["bots"]}, out=tmp_path, subtitle=subtitle,
                                          intervals={"bots": interval}))
    assert written and len(kept) == len(written)
    for fig in kept:
        titles = [ax.get_title() for ax in fig.axes] + [fig._suptitle.get_text() if fig._suptitle else ""]
        assert any(subtitle in t for t in titles), titles
    (ax,) = kept[[p.name for p in written].index("eval_math500.png")].axes
    (bar,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    (segment,) = bar.lines[2][0].get_segments()
    assert segment.tolist() == [[STEPS[-1], 0.55], [STEPS[-1], 0.7]]
    assert "95% CI of the change" in [t.get_text() for t in ax.get_legend().get_texts()]
    (other,) = kept[[p.name for p in written].index("eval_aime24.png")].axes
    assert not other.containers  # the interval is math500's only
    plt.close("all")


def test_bots_aggregate_is_the_domains_benchmarks_only(tmp_path):
    runs = {n: tmp_path / n for n in ("random", "bots", "partial")}
    # an extra benchmark (gsm8k) where bots is far behind: it must not move the aggregate
    extra = lambda shift: [curve_row(t, "gsm8k", random_curve(t - shift, 0.0, 0.9)) for t in STEPS]  # noqa: E731
    write_curve(runs["random"], bots_curves() + extra(0))
    write_curve(runs["bots"], bots_curves(shift=20) + extra(60))
    write_curve(runs["partial"], [r for r in bots_curves(shift=20) if r["benchmark"] == "math500"])  # no aime24
    text = run_tables("bots", runs, tmp_path)
    agg = parse_markdown(text, "BOTS: time-to-baseline and best-so-far vs random, aggregated")
    assert [agg["bots"][f"TTB{q}"] for q in (50, 75, 100)] == [f"{(q - 20) / q:.2f}" for q in (50, 75, 100)]
    assert {agg["partial"][c] for c in ("TTB50", "BSF100")} == {tables.MISSING}  # not a mean over fewer
    assert "gsm8k" in text and "math benchmarks math500, aime24" in text
    math500 = parse_markdown(text, "BOTS: time-to-baseline and best-so-far vs random, math500")
    assert math500["partial"]["TTB50"] == f"{(50 - 20) / 50:.2f}"  # per-benchmark tables still shown


def test_bots_domain_must_be_named_when_runs_span_domains(tmp_path):
    run = tmp_path / "random"
    write_curve(run, bots_curves() + [curve_row(t, "humaneval", 0.3) for t in STEPS])
    with pytest.raises(ValueError, match="several BOTS domains"):
        run_tables("bots", {"random": run}, tmp_path)
    text = run_tables("bots", {"random": run}, tmp_path, "--domain", "code")
    assert "code benchmarks humaneval, mbpp, livecodebench" in text
