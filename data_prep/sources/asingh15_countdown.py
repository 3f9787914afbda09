"""The paper's Countdown data: ``asingh15/countdown_tasks_3to4`` (the CS224R course pipeline's copy).

Yan, "Progress-Aware Prompt Sampling", CS224R, §4: "All experiments use the asingh15/countdown_tasks_3to4 Countdown
dataset". Published format, as the course's starter code reads it [authors' code]: splits ``train`` (~490k tasks)
and ``test`` (50 tasks, the paper's "official 50-prompt evaluation", App. B); columns ``prompt`` (one string,
already in Qwen2.5's chat template: system "You are a helpful assistant.", the TinyZero Countdown question as the
user turn, then ``<|im_start|>assistant\\n``), ``ground_truth`` (``{"numbers": [...], "target": int}``; read by
``rloo_trainer/rloo_dataset.py``), and ``target`` / ``nums`` (read by ``evaluation/countdown_eval.py``; both files
in github.com/nicolasbejar/CS224R_project, the course's starter code).

The chat-templated string is split back into its system and user messages, so verl's chat template rebuilds
the same string for a Qwen2.5 tokenizer (the SFT checkpoint saw exactly this prompt). Rows keep source
order (``extra_info.index``), carry the bucket of the embedded Countdown set (:func:`countdown_bucket`), and
the ``test`` split gets its own ``data_source`` so that verl's validation reports it apart from the 200
held-out prompts drawn from ``train``.
"""

from __future__ import annotations

import re

from data_prep.embedded_datasets import countdown_bucket
from data_prep.schema import make_row
from data_prep.sources._common import Hub, Record, finish, read_source, report_counts

HUB = Hub("asingh15/countdown_tasks_3to4", note="splits 'train' and 'test', one parquet file each")
SPLITS = ("train", "test")
DATA_SOURCES = {"train": "countdown_tasks_3to4", "test": "countdown_tasks_3to4_test"}
CHAT_PROMPT = re.compile(
    r"<\|im_start\|>system\n(?P<system>.*?)<\|im_end\|>\n<\|im_start\|>user\n(?P<user>.*?)<\|im_end\|>\n"
    r"<\|im_start\|>assistant\n", re.DOTALL)


def _integer(rec: Record, field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise rec.fail(field, f"not an integer: {value!r}")
    return int(value)


def _task(rec: Record) -> tuple[int, list[int]]:
    """(target, numbers) from ``ground_truth`` and/or ``target`` + ``nums``; where both are given they agree."""
    found = []
    truth = rec.get("ground_truth")
    if truth is not None:
        if not isinstance(truth, dict):
            raise rec.fail("ground_truth", f"expected {{'numbers': [...], 'target': int}}, got {truth!r}")
        found.append(("ground_truth", rec.require("ground_truth", "target"), rec.require("ground_truth", "numbers")))
    if rec.get("target") is not None or rec.get("nums") is not None:
        found.append(("target/nums", rec.require("target"), rec.require("nums")))
    if not found:
        raise rec.fail("ground_truth", "missing, and no target / nums columns either")
    tasks = []
    for field, target, nums in found:
        if not isinstance(nums, list) or len(nums) not in (3, 4):
            raise rec.fail(field, f"expected a list of 3 or 4 integers, got {nums!r}")
        tasks.append((_integer(rec, field, target), [_integer(rec, field, n) for n in nums]))
    if any(t != tasks[0] for t in tasks):
        raise rec.fail("ground_truth", f"disagrees with target / nums: {tasks}")
    return tasks[0]


def _messages(rec: Record, target: int) -> tuple[str, str]:
    """(system, user) of the chat-templated ``prompt`` string."""
    prompt = rec.require("prompt")
    match = CHAT_PROMPT.fullmatch(prompt) if isinstance(prompt, str) else None
    if match is None:
        raise rec.fail("prompt", "expected one Qwen2.5 chat-templated string '<|im_start|>system\\n...<|im_end|>\\n"
                                 f"<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n', got {prompt!r:.200}")
    system, user = match["system"], match["user"].strip()
    if f"equals {target}" not in user:
        raise rec.fail("prompt", f"does not ask for the row's target {target}: {user!r:.200}")
    return system, user


def convert(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """Countdown rows of ``split`` ("train" or "test") in source order, with the published prompt."""
    if split not in SPLITS:
        raise ValueError(f"{HUB.repo} has splits {SPLITS}, not {split!r}")
    rows: list[dict] = []
    for rec in read_source(input_path, HUB, split, f"countdown {split}"):
        target, numbers = _task(rec)
        system, user = _messages(rec, target)
        rows.append(make_row(
            data_source=DATA_SOURCES[split], question=user, system=system, ability="math",
            ground_truth={"target": target, "numbers": numbers}, index=len(rows), split=split, dataset=HUB.repo,
            num_count=len(numbers), target=target, bucket=countdown_bucket(len(numbers), target),
        ))
    report_counts(f"countdown {split}", {"kept": len(rows)}, report)
    return finish(rows, input_path, HUB)
