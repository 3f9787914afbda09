"""MATH levels 3-5 (``DigitalLearningGmbH/MATH-lighteval``, the CBS paper's second training source).

Published format (dataset card): config ``default``, splits ``train`` (7,500) and ``test`` (5,000),
columns ``problem``, ``level`` ("Level 1".."Level 5"; a few rows "Level ?"), ``type`` (subject) and
``solution`` (worked solution ending in ``\\boxed{answer}``). The reference answer is the content of
the solution's last ``\\boxed{}`` / ``\\fbox{}``; a solution without one is bad input.

Filters (counted): ``level_1_2`` (levels 1 and 2), ``level_unknown`` (no numeric level).
"""

from __future__ import annotations

import re

from data_prep.embedded_datasets import MATH_INSTRUCTION
from data_prep.schema import make_row
from data_prep.sources._common import Hub, finish, read_source, report_counts
from verl_ext.rewards.math import last_boxed

HUB = Hub("DigitalLearningGmbH/MATH-lighteval", config="default")
LEVELS = (3, 4, 5)
_LEVEL_RE = re.compile(r"Level (\d)")


def convert(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """MATH problems of levels 3-5 with the boxed answer of their solution as ground truth."""
    rows: list[dict] = []
    counts = {"kept": 0, "level_1_2": 0, "level_unknown": 0}
    for rec in read_source(input_path, HUB, split, "math_lvl3to5"):
        found = _LEVEL_RE.fullmatch(rec.text("level"))
        if found is None:
            counts["level_unknown"] += 1
            continue
        level = int(found.group(1))
        if level not in LEVELS:
            counts["level_1_2"] += 1
            continue
        answer = last_boxed(rec.text("solution"))
        if not answer or not answer.strip():
            raise rec.fail("solution", "no \\boxed{} answer in the solution")
        rows.append(make_row(
            data_source="math_lvl3to5", question=f"{rec.text('problem')}\n\n{MATH_INSTRUCTION}", ability="math",
            ground_truth=answer.strip(), index=len(rows), split=split, dataset=HUB.repo, level=level,
            subject=rec.text("type"), source_row=rec.row,
        ))
    counts["kept"] = len(rows)
    report_counts("math_lvl3to5", counts, report)
    return finish(rows, input_path, HUB)
