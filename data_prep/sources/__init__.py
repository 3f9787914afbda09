"""Converters from published hub datasets to verl RL rows, by command-line name.

A converter is ``convert(input_path: str | None, split: str = ..., *, report: dict | None = None)
-> list[dict]`` returning validated rows (:mod:`data_prep.schema`). With ``input_path=None`` it loads
the source with ``datasets.load_dataset``; when that fails (offline, gated) it raises ``RuntimeError``
saying what to download and to pass it with ``--input PATH``. Otherwise it reads the local copy in the
source's own published format (a file, or a folder for sources published as several files). ``split``
labels the rows (``extra_info.split``; training sets default to "train", evaluation sets to "test");
only MATH levels 3-5 and asingh15's Countdown (train / test) also load the hub split of that name, every other
source has one fixed hub split.
Kept and filtered row counts go to the log and, when given, to ``report``.
"""

from __future__ import annotations

from data_prep.sources import (asingh15_countdown, code_evals, countdown, dapo, guru, math_evals, math_lighteval,
                               multiple_choice, openr1)
from data_prep.sources._common import Converter

REGISTRY: dict[str, Converter] = {
    # training sets
    "guru_math": guru.convert_math,
    "guru_code": guru.convert_code,
    "guru_logic": guru.convert_logic,
    "dapo_math": dapo.convert,
    "math_lvl3to5": math_lighteval.convert,
    "openr1_math": openr1.convert,
    "countdown_tasks_3to4": countdown.convert,
    "asingh15_countdown_tasks_3to4": asingh15_countdown.convert,  # train, and test: the paper's 50 prompts
    # evaluation sets
    "aime24": math_evals.aime24,
    "aime25": math_evals.aime25,
    "amc23": math_evals.amc23,
    "math500": math_evals.math500,
    "minerva": math_evals.minerva,
    "olympiadbench": math_evals.olympiadbench,
    "gpqa_diamond": multiple_choice.gpqa_diamond,
    "mmlu_pro": multiple_choice.mmlu_pro,
    "mbpp": code_evals.mbpp,
    "livecodebench": code_evals.livecodebench,
    "guru_livecodebench": guru.convert_livecodebench,
    "guru_ordering_puzzles": guru.convert_ordering_puzzles,
    "guru_arc_agi": guru.convert_arc_agi,
}
