"""Countdown-Tasks-3to4 (``Jiayi-Pan/Countdown-Tasks-3to4``, TinyZero's Countdown data).

Published format (dataset card): one ``train`` split (~490k rows) of parquet with ``target`` (int)
and ``nums`` (list of 3 or 4 ints). Ground truth: ``{"target": int, "numbers": [int, ...]}``; the
prompt and the bucket (Yan, "Progress-Aware Prompt Sampling", CS224R, §3.2) are those of the embedded Countdown set.
"""

from __future__ import annotations

from data_prep.embedded_datasets import COUNTDOWN_TEMPLATE, countdown_bucket
from data_prep.schema import make_row
from data_prep.sources._common import Hub, Record, finish, read_source, report_counts

HUB = Hub("Jiayi-Pan/Countdown-Tasks-3to4", split="train")


def _integer(rec: Record, field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise rec.fail(field, f"not an integer: {value!r}")
    return int(value)


def convert(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """Countdown rows in source order."""
    rows: list[dict] = []
    for rec in read_source(input_path, HUB, split, "countdown"):
        target = _integer(rec, "target", rec.require("target"))
        nums = rec.require("nums")
        if not isinstance(nums, list) or len(nums) not in (3, 4):
            raise rec.fail("nums", f"expected a list of 3 or 4 integers, got {nums!r}")
        numbers = [_integer(rec, "nums", n) for n in nums]
        rows.append(make_row(
            data_source="countdown_tasks_3to4", question=COUNTDOWN_TEMPLATE.format(numbers=numbers, target=target),
            ability="math", ground_truth={"target": target, "numbers": numbers}, index=len(rows), split=split,
            dataset=HUB.repo, num_count=len(numbers), target=target, bucket=countdown_bucket(len(numbers), target),
        ))
    report_counts("countdown", {"kept": len(rows)}, report)
    return finish(rows, input_path, HUB)
