"""DAPO-Math-17k (``BytedTsinghua-SIA/DAPO-Math-17k``).

Published format (checked against verl recipes and github.com/BytedTsinghua-SIA/DAPO/issues/36 and volcengine/verl/issues/3065):
``data/dapo-math-17k.parquet`` in verl columns: ``data_source`` = ``math_dapo``, ``prompt`` = one user
message "Solve the following math problem step by step. The last line ... Answer: $Answer ...
\\n\\n{problem}\\n\\nRemember to put your answer on its own line after "Answer:".",
``reward_model{ground_truth, style}`` (an integer as text), ``extra_info{index}`` (a UUID).

The file holds ~17k distinct prompts each repeated ~100 times (1.79M rows) by accident; the filter
``duplicate_prompt`` keeps the first occurrence of each problem text and counts the rest. The DAPO
"Answer:" template is replaced by our boxed math instruction; the UUID is kept as ``source_id``.
"""

from __future__ import annotations

from data_prep.embedded_datasets import MATH_INSTRUCTION
from data_prep.schema import make_row
from data_prep.sources._common import Hub, Record, finish, read_source, report_counts

HUB = Hub("BytedTsinghua-SIA/DAPO-Math-17k", split="train", note="data/dapo-math-17k.parquet")
HEAD = "Solve the following math problem step by step."
TAIL = '\n\nRemember to put your answer on its own line after "Answer:"'


def problem_text(rec: Record) -> str:
    """The bare problem inside DAPO's "Answer:" prompt template."""
    _, content = rec.chat()
    head, sep, body = content.partition("\n\n")
    if not head.startswith(HEAD) or not sep or TAIL not in body:
        raise rec.fail("prompt", "does not follow the DAPO prompt template")
    problem = body.split(TAIL, 1)[0].strip()
    if not problem:
        raise rec.fail("prompt", "empty problem")
    return problem


def convert(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """Deduplicated DAPO-Math-17k rows (index 0..n-1 in first-occurrence order)."""
    rows: list[dict] = []
    seen: set[str] = set()
    counts = {"kept": 0, "duplicate_prompt": 0}
    for rec in read_source(input_path, HUB, split, "dapo_math"):
        problem = problem_text(rec)
        if problem in seen:
            counts["duplicate_prompt"] += 1
            continue
        seen.add(problem)
        rows.append(make_row(
            data_source="dapo_math", question=f"{problem}\n\n{MATH_INSTRUCTION}", ability="math",
            ground_truth=rec.text("reward_model", "ground_truth"), index=len(rows), split=split,
            dataset=HUB.repo, source_id=str(rec.require("extra_info", "index")), source_row=rec.row,
        ))
    counts["kept"] = len(rows)
    report_counts("dapo_math", counts, report)
    return finish(rows, input_path, HUB)
