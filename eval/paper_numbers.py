"""The papers' own headline numbers, printed by :mod:`eval.tables` beside ours.

Copied from the papers' headline results (BOTS §4.4 and App. F; "Contextual Rollout Bandits" Table 2 and App. E.2;
CoBA-RL (Yao et al.) Tables 1 and 3; ADS (Xu et al., arXiv 2606.22305) Tables 1-4) and, for the progress
paper (Yan, "Progress-Aware Prompt Sampling", CS224R), from its Tables 1-3 and 6-9 (each value as printed there,
one table per evaluation protocol), nothing else: a cell they do not give stays missing.
``PAPER_NUMBERS[paper][setting][table]`` is a
:class:`Reference`; its rows are keyed by :func:`method_key` of a method name (name a run like the key
to get the paper's row beside it) and its columns by the column names of the table in ``eval.tables``.
A value is a number in the paper's units, a string printed as the paper prints it (``"−"``: the
baseline's target was never reached; ``"> 0.8"``), or ``(estimate, ci_low, ci_high)``.
The first setting of a paper is the default of ``eval.tables --setting``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Value = float | str | tuple[float, float, float]


@dataclass(frozen=True)
class Reference:
    citation: str
    rows: dict[str, dict[str, Value]]
    notes: tuple[str, ...] = field(default=())


def method_key(name: str) -> str:
    """``"BOTS-DOTS"`` → ``"bots_dots"``: how a run's name is matched to a paper row."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


_BOTS = "[paper] BOTS §4.4 (headline numbers)"
_CBS = "[paper] Contextual Rollout Bandits (CBS) Table 2: six-benchmark average"
_COBA = "[paper] CoBA-RL (Yao et al.): avg@16"
_ADS = "[paper] ADS (Xu et al., arXiv 2606.22305)"
_P004 = "[paper] Yan, Progress-Aware Prompt Sampling (CS224R)"
_HELD_OUT = f"{_P004}: the 200 held-out prompts × 16 samples"
_OFFICIAL = f"{_P004}, App. B: the official 50-prompt test split of asingh15/countdown_tasks_3to4 × 16 samples"


def _ttb_bsf(*values: Value) -> dict[str, Value]:
    return dict(zip(("TTB50", "TTB75", "TTB100", "BSF25", "BSF50", "BSF100"), values))


def _means(column: str, **methods: float) -> dict[str, dict[str, Value]]:
    return {method_key(m): {column: v} for m, v in methods.items()}


def _countdown(*printed: str) -> dict[str, Value]:
    """Avg. score, pass@1/4/8/16 and zero-success as the paper prints them (a table without the last: fewer)."""
    return dict(zip(("avg score", "pass@1", "pass@4", "pass@8", "pass@16", "zero-success"), printed))


# ADS Tables 1-4 print the benchmarks in this order, then their average
_ADS_COLUMNS = ("MATH-500", "AIME25", "AIME24", "Minerva", "AMC23", "GPQA-D", "MMLU-Pro")


def _ads(metric: str, printed: str) -> dict[str, Value]:
    """One ADS table row as printed (``"55.04±0.08 3.47±0.43 ... 21.57"``): each benchmark's cell, ``"55.04 ± 0.08"``
    where the paper gives a standard deviation (Table 1), else the number; the last value is ``"<metric> mean"``."""
    cells = printed.split()
    if len(cells) != len(_ADS_COLUMNS) + 1:
        raise ValueError(f"an ADS row has {len(_ADS_COLUMNS)} benchmarks and the average, got {printed!r}")
    row: dict[str, Value] = {c: " ± ".join(v.split("±")) if "±" in v else float(v)
                             for c, v in zip(_ADS_COLUMNS, cells)}
    return row | {f"{metric} mean": float(cells[-1])}


def _ads_rows(metric: str, printed: dict[str, str]) -> dict[str, dict[str, Value]]:
    return {method_key(m): _ads(metric, row) for m, row in printed.items()}


def _paired(score: Value, pass1: Value, wlt_score: str, wlt_pass1: str) -> dict[str, Value]:
    return {"Δ avg score": score, "Δ pass@1": pass1, "W/L/T avg score": wlt_score, "W/L/T pass@1": wlt_pass1}


PAPER_NUMBERS: dict[str, dict[str, dict[str, Reference]]] = {
    "bots": {
        "Qwen2.5-1.5B-Instruct, math": {
            "aggregated": Reference(f"{_BOTS}, Qwen2.5-1.5B-Instruct, math, aggregated; vs random", {
                "bots": _ttb_bsf(0.89, 0.56, 0.64, 1.12, 1.07, 1.05),
                "bots_dots": _ttb_bsf(0.83, 0.75, 0.81, 1.11, 1.09, 1.08),
                "bots_mopps": _ttb_bsf(1.78, 1.32, "−", 0.90, 0.90, 0.99),
                "offline": _ttb_bsf(0.96, 0.51, 0.78, 1.16, 1.12, 1.01),
            }),
            "etr": Reference(f"{_BOTS}, Qwen2.5-1.5B-Instruct, math", {
                "bots": {"ETR mean": "> 0.8"}, "random": {"ETR mean": "< 0.4"}, "bots_mopps": {"ETR mean": "< 0.4"},
            }),
        },
        "7B, math": {
            "etr": Reference(f"{_BOTS}, 7B, math", {"bots": {"ETR mean": "> 0.9"}}),
        },
        "7B, logic": {
            "aggregated": Reference(f"{_BOTS}, 7B, logic, aggregated; vs random", {"bots": {"TTB100": 0.50}}),
        },
    },
    "cbs": {
        "Qwen3-1.7B-Base": {"average": Reference(f"{_CBS}, Qwen3-1.7B-Base", _means(
            "average", grpo=28.91, **{"grpo+cbs": 30.17, "grpo+cbs*": 31.08, "dapo": 25.92, "dapo+cbs": 30.00}))},
        "Qwen3-4B-Base": {"average": Reference(f"{_CBS}, Qwen3-4B-Base; ablations on DAPO", _means(
            "average", grpo=41.23, **{"grpo+cbs": 42.41, "dapo": 41.33, "dapo+cbs": 43.93,
                                      "dapo+cbs_wo_ema": 40.49, "dapo+cbs_wo_entropy": 40.94,
                                      "dapo+random_subset": 39.67}))},
        "Qwen3-8B-Base": {"average": Reference(f"{_CBS}, Qwen3-8B-Base", _means(
            "average", grpo=44.32, **{"grpo+cbs": 46.46}))},
    },
    "coba": {
        "Qwen2.5-7B-Instruct": {
            "main": Reference(f"{_COBA}, Qwen2.5-7B-Instruct (paper Table 1)",
                              _means("mean", grpo=42.24, knapsack=45.39, coba=46.78)),
            "baselines": Reference(f"{_COBA}, Qwen2.5-7B-Instruct (paper Tables 2-3)", _means(
                "mean", static_exploit=44.22, static_explore=45.21, linear_decay=45.39, explore_to_exploit=44.50,
                coba=46.78)),
        },
        "Qwen3-4B-Base": {"main": Reference(f"{_COBA}, Qwen3-4B-Base (paper Table 1)",
                                            _means("mean", grpo=44.72, knapsack=46.66, coba=49.46))},
        "Qwen3-1.7B-Base": {"main": Reference(f"{_COBA}, Qwen3-1.7B-Base (paper Table 1)",
                                              _means("mean", grpo=31.61, knapsack=32.56, coba=35.75))},
    },
    "ads": {  # Table 1 (Mean@16 and Pass@16, ± std over 3 evaluation runs); Mean@16 only: Table 2 (DAPO / GSPO),
        # Table 3 (ads_cross_policy: clusters from the other policy of the pair), Table 4 (ablations; its
        # "Uniform Sampling" row is Table 1's GRPO); Table 2's OPD rows train another model and are left out
        "Qwen2.5-Math-1.5B": {
            "mean": Reference(f"{_ADS} Tables 1-4, Qwen2.5-Math-1.5B: Mean@16", _ads_rows("Mean@16", {
                "base":
                    "38.46±0.29 1.74±0.10 2.64±0.40 8.90±0.48 22.45±1.69 12.58±0.26 10.33±0.19 13.87",
                "grpo":
                    "55.04±0.08 3.47±0.43 5.63±1.03 13.63±0.13 35.68±0.60 20.14±0.53 17.37±0.13 21.57",
                "dots_rr":
                    "61.68±0.15 6.88±0.00 8.75±0.34 14.79±0.05 44.89±1.18 20.78±0.88 19.12±0.31 25.27",
                "ads":
                    "63.47±0.30 7.08±0.34 9.44±1.13 17.20±0.22 45.89±1.74 27.28±0.84 25.96±0.08 28.05",
                "ads_wo_inter":
                    "61.78 5.07 9.65 16.28 44.84 26.16 25.75 27.08",
                "ads_wo_intra":
                    "62.19 5.62 9.65 16.12 43.80 26.31 24.89 26.94",
                "dapo":
                    "65.05 7.85 11.53 16.68 47.87 23.71 23.82 28.07",
                "dapo+ads":
                    "66.62 9.31 10.21 17.75 49.01 26.73 26.59 29.46",
                "gspo":
                    "62.53 7.08 9.59 14.92 45.41 21.83 20.42 25.97",
                "gspo+ads":
                    "65.61 9.37 10.00 15.85 48.91 24.43 24.88 28.44",
                "ads_cross_policy":
                    "63.72 7.02 10.56 16.83 46.56 26.14 27.09 28.27",  # OLMo3's
            })),
            "pass16": Reference(f"{_ADS} Table 1, Qwen2.5-Math-1.5B: Pass@16", _ads_rows("Pass@16", {
                "base":
                    "80.60±0.57 13.33±0.00 24.45±5.66 28.80±0.62 80.83±2.36 80.13±1.95 59.13±1.09 52.47",
                "grpo":
                    "82.87±0.90 20.00±4.71 34.44±4.16 31.86±0.92 79.17±4.25 87.03±1.26 69.80±0.57 57.88",
                "dots_rr":
                    "83.33±0.90 33.33±2.72 33.33±0.00 32.36±0.52 83.33±3.12 77.61±1.86 68.33±0.57 58.80",
                "ads":
                    "84.80±0.43 30.00±4.71 32.22±5.66 33.21±0.17 87.50±5.40 89.39±0.41 74.73±0.68 61.69",
            })),
        },
        "Qwen3-4B-Base": {
            "mean": Reference(f"{_ADS} Table 1, Qwen3-4B-Base: Mean@16", _ads_rows("Mean@16", {
                "base":
                    "32.15±0.79 4.23±0.49 5.83±0.90 10.27±0.20 23.70±0.71 9.69±0.23 10.49±0.27 13.77",
                "grpo":
                    "61.49±0.05 11.32±0.64 12.22±0.78 18.40±0.10 53.65±0.27 16.11±0.65 20.04±0.49 27.60",
                "dots_rr":
                    "63.85±0.18 9.31±0.43 14.09±0.55 21.35±0.12 52.91±0.29 10.89±0.12 12.76±0.14 26.45",
                "ads":
                    "67.13±0.08 11.53±0.49 12.50±1.03 20.89±0.10 54.89±0.39 20.69±0.45 20.96±0.20 29.80",
            })),
            "pass16": Reference(f"{_ADS} Table 1, Qwen3-4B-Base: Pass@16", _ads_rows("Pass@16", {
                "base":
                    "79.87±0.84 27.78±3.14 27.78±3.14 35.05±0.62 78.33±2.36 62.79±1.72 59.93±1.09 53.08",
                "grpo":
                    "84.73±0.94 37.78±1.57 31.11±3.14 39.58±0.62 89.17±3.12 69.70±2.18 65.47±1.18 59.65",
                "dots_rr":
                    "84.00±0.43 30.00±4.71 34.45±3.14 40.19±0.17 89.17±2.36 59.09±0.41 57.27±0.34 56.31",
                "ads":
                    "84.73±0.19 37.78±1.57 33.33±0.00 40.69±0.91 89.17±1.18 71.55±0.86 63.80±0.75 60.15",
            })),
        },
        "OLMo3-7B-SFT": {
            "mean": Reference(f"{_ADS} Tables 1 and 3, OLMo3-7B-SFT: Mean@16", _ads_rows("Mean@16", {
                "base":
                    "54.71±0.21 5.42±0.29 4.31±0.10 16.37±0.16 34.90±0.97 11.53±0.64 6.64±0.09 19.13",
                "grpo":
                    "59.35±0.19 5.56±0.49 6.67±0.45 17.21±0.26 40.47±2.27 16.56±0.44 10.83±0.15 22.38",
                "dots_rr":
                    "64.23±0.04 18.47±0.39 15.28±1.61 17.16±0.08 49.22±0.97 13.34±0.09 9.20±0.08 26.70",
                "ads":
                    "67.56±0.16 18.96±0.30 18.33±1.94 18.58±0.17 55.57±1.25 17.84±0.11 13.56±0.15 30.06",
                "ads_cross_policy":
                    "65.84 18.19 16.32 18.89 51.62 18.50 14.02 29.05",  # Qwen's
            })),
            "pass16": Reference(f"{_ADS} Table 1, OLMo3-7B-SFT: Pass@16", _ads_rows("Pass@16", {
                "base":
                    "82.67±0.34 27.78±3.14 24.44±4.16 37.13±1.08 80.83±1.18 56.91±1.72 43.00±1.23 50.39",
                "grpo":
                    "84.27±0.74 24.44±1.57 33.33±2.72 37.38±1.21 84.17±4.71 69.53±1.32 52.60±0.65 55.10",
                "dots_rr":
                    "86.27±0.09 44.45±3.14 50.00±4.71 34.68±1.48 85.83±3.12 63.47±2.27 51.87±0.66 59.51",
                "ads":
                    "88.20±0.71 45.55±3.14 54.45±3.14 37.50±0.79 95.00±0.00 69.36±1.04 59.53±0.41 64.23",
            })),
        },
    },
    "progress": {
        # keyed by the evaluator's benchmark name (scripts/progress/evaluate.sh), each with its own protocol
        "Qwen2.5-0.5B Countdown SFT": {
            "countdown": Reference(f"{_HELD_OUT} (abstract; Tables 1 and 3)", {
                "uniform": _countdown("0.5092", "0.4694", "0.5981", "0.6295", "0.6650", "0.3350"),
                "bucket_uniform": _countdown("0.4402", "0.3853", "0.572", "0.607", "0.630", "0.370"),
                "empirical": _countdown("0.4696", "0.4153", "0.564", "0.588", "0.605", "0.395"),
                "conservative": _countdown("0.4847", "0.4356", "0.572", "0.598", "0.620", "0.380"),
                "density_ratio": _countdown("0.426", "0.364", "0.538", "0.577", "0.610", "0.390"),
                "rft_naive": _countdown("0.5110", "0.4813", "0.6042", "0.6325", "0.6600", "0.3400"),
                "rft_clean": _countdown("0.5016", "0.4600", "0.5971", "0.6268", "0.6550", "0.3450"),
            }),
            "countdown/vs_uniform": Reference(f"{_HELD_OUT}, Table 2: paired bootstrap 95% CI over prompts", {
                "bucket_uniform": _paired((-0.0690, -0.0900, -0.0484), (-0.0841, -0.1066, -0.0619),
                                          "73/106/21", "25/100/75"),
                "empirical": _paired((-0.0396, -0.0595, -0.0206), (-0.0541, -0.0753, -0.0334), "83/89/28", "31/86/83"),
                "conservative": _paired((-0.0245, -0.0446, -0.0049), (-0.0338, -0.0553, -0.0125),
                                        "100/81/19", "50/76/74"),
                "density_ratio": _paired((-0.0832, -0.1063, -0.0612), (-0.1056, -0.1300, -0.0822),
                                         "77/99/24", "18/101/81"),
            }),
            "countdown/format": Reference(f"{_HELD_OUT}, Table 9 (the RFT follow-up)", {
                "uniform": {"missing answer": "0.1325", "too long": "0.3837", "parse failure": "0.2897",
                            "multiple answers": "0.7031"},
                "rft_naive": {"missing answer": "0.2216", "too long": "0.5563", "parse failure": "0.3441",
                              "multiple answers": "0.6338"},
            }),
            "countdown_official": Reference(f"{_OFFICIAL}, Table 6", {
                "uniform": _countdown("0.583", "0.56", "0.70", "0.72", "0.74"),
                "bucket_uniform": _countdown("0.507", "0.32", "0.66", "0.72", "0.74"),
                "empirical": _countdown("0.530", "0.54", "0.68", "0.72", "0.76"),
                "prompt_utility": _countdown("0.451", "0.36", "0.62", "0.68", "0.70"),
                "random_buckets": _countdown("0.497", "0.42", "0.68", "0.68", "0.68"),
            }),
            "countdown_official/format": Reference(f"{_OFFICIAL}, Table 8 (the late sampler follow-ups)", {
                "uniform": {"missing answer": "0.0988", "multiple answers": "0.7563", "multiple think": "0.8875",
                            "too long": "1.0000"},
                "prompt_utility": {"missing answer": "0.0000", "multiple answers": "0.9938", "multiple think": "0.9863",
                                   "too long": "1.0000"},
                "random_buckets": {"missing answer": "0.0000", "multiple answers": "0.9863", "multiple think": "0.9575",
                                   "too long": "1.0000"},
            }),
            "degenerate": Reference(f"{_P004}, Table 7: fraction of all-equal reward groups, mean ± s.e. over the 100 "
                                    "training steps", {
                                        "uniform": {"degenerate-batch rate": "0.270", "s.e.": "0.0079"},
                                        "bucket_uniform": {"degenerate-batch rate": "0.338", "s.e.": "0.0105"},
                                        "empirical": {"degenerate-batch rate": "0.308", "s.e.": "0.0105"},
                                        "conservative": {"degenerate-batch rate": "0.346", "s.e.": "0.0113"},
                                        "density_ratio": {"degenerate-batch rate": "0.354", "s.e.": "0.0115"},
                                    }),
        },
    },
}
