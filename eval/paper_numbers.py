"""The papers' own headline numbers, printed by :mod:`eval.tables` beside ours.

Copied from the papers' headline results (BOTS §4.4 and App. F; "Contextual Rollout Bandits" Table 2 and App. E.2;
CoBA-RL (Yao et al.) Tables 1 and 3; ADS (Xu et al., arXiv 2606.22305) Tables 1, 2 and 4) and, for the progress
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
_ADS = "[paper] ADS (Xu et al., arXiv 2606.22305): Mean@16 average"
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
    "ads": {
        "Qwen2.5-Math-1.5B": {"mean": Reference(
            f"{_ADS}, Qwen2.5-Math-1.5B (ablations and DAPO/GSPO on the same model)", _means(
                "Mean@16 mean", grpo=21.57, dots_rr=25.27, ads=28.05, ads_wo_inter=27.08, ads_wo_intra=26.94,
                dapo=28.07, gspo=25.97, **{"dapo+ads": 29.46, "gspo+ads": 28.44}))},
        "Qwen3-4B-Base": {"mean": Reference(f"{_ADS}, Qwen3-4B-Base",
                                            _means("Mean@16 mean", grpo=27.60, dots_rr=26.45, ads=29.80))},
        "OLMo3-7B-SFT": {"mean": Reference(f"{_ADS}, OLMo3-7B-SFT",
                                           _means("Mean@16 mean", grpo=22.38, dots_rr=26.70, ads=30.06))},
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
