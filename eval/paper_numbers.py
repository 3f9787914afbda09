"""The papers' own headline numbers, printed by :mod:`eval.tables` beside ours.

Copied from ``shared/SPEC.md`` ("Headline numbers" / "Metrics and headline numbers" of §1-§5), nothing
else: a cell the SPEC does not give stays missing. ``PAPER_NUMBERS[paper][setting][table]`` is a
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


_BOTS = "BOTS, shared/papers/000 (SPEC.md §1 headline numbers)"
_CBS = "CBS, shared/papers/001 (SPEC.md §2 headline numbers): six-benchmark average"
_COBA = "CoBA-RL, shared/papers/002 (SPEC.md §3 metrics and headline numbers): avg@16"
_ADS = "ADS, shared/papers/003 (SPEC.md §4 metrics and headline numbers): Mean@16 average"
_PROGRESS = "Progress-aware Countdown sampling, shared/papers/004 (SPEC.md §5 headline numbers): 200 prompts × 16"


def _ttb_bsf(*values: Value) -> dict[str, Value]:
    return dict(zip(("TTB50", "TTB75", "TTB100", "BSF25", "BSF50", "BSF100"), values))


def _means(column: str, **methods: float) -> dict[str, dict[str, Value]]:
    return {method_key(m): {column: v} for m, v in methods.items()}


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
        "Qwen2.5-0.5B Countdown SFT": {
            "summary": Reference(f"{_PROGRESS}, Qwen2.5-0.5B Countdown SFT", {
                "uniform": {"avg score": 0.5092, "pass@1": 0.4694, "pass@16": 0.6650},
                "bucket_uniform": {"avg score": 0.4402, "pass@1": 0.3853, "pass@16": 0.630},
                "empirical": {"avg score": 0.4696, "pass@1": 0.4153, "pass@16": 0.605},
                "conservative": {"avg score": 0.4847, "pass@1": 0.4356, "pass@16": 0.620},
                "rft_naive": {"avg score": 0.5110, "pass@1": 0.4813},
            }),
            "vs_uniform": Reference(f"{_PROGRESS}; paired bootstrap 95% CI over prompts", {
                "conservative": {"Δ avg score": (-0.0245, -0.0446, -0.0049), "Δ pass@1": (-0.0338, -0.0553, -0.0125)},
            }),
            "degenerate": Reference(f"{_PROGRESS}; fraction of all-equal reward groups over training steps", {
                "uniform": {"degenerate-batch rate": 0.270},
            }, notes=("paper: adaptive samplers 0.308–0.355 (range over the adaptive variants)",)),
        },
    },
}
