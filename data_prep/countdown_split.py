"""Held-out, SFT and RL splits of one Countdown parquet file (``scripts/progress/prepare_data.sh``).

    python -m data_prep.countdown_split --input DATA/asingh15_countdown_tasks_3to4/train.parquet --out DATA \\
        [--test-size 200] [--sft-size 10000] [--sft-test-size 200] [--train-size 0] [--seed 0] \\
        [--exclude DATA/asingh15_countdown_tasks_3to4/test.parquet]

The paper (Yan, "Progress-Aware Prompt Sampling", CS224R, §4) evaluates on 200 prompts held out from the Countdown
training tasks and trains on the rest (its data, asingh15/countdown_tasks_3to4, also has a 50-task test split: the
"official" evaluation, App. B).
Writes, as verl RL parquet files (``extra_info.index`` renumbered 0..n-1 in each file, the source's kept as
``extra_info.source_index``, ``extra_info.split`` set):

* ``DATA/countdown/test.parquet``: the held-out evaluation prompts (``--test-size``);
* ``DATA/countdown_sft_prompts/{train,test}.parquet``: the prompts of the SFT warm start and its validation
  (answers: ``python -m data_prep.sft_messages --from-rl``);
* ``DATA/countdown/train.parquet``: the RL pool, ``--train-size`` of the other tasks (0: all of them), in source
  order;
* ``DATA/countdown/split.json``: counts, repeated tasks dropped and the bucket frequencies of each file.

A task is its target and the multiset of its numbers: a task repeated in the source (the same numbers, in any
order) is kept once, at its first row, so no held-out task is trained on under another order of its numbers
(exact decontamination: the template-based n-gram check of ``data_prep.overlap`` cannot see Countdown's numbers).
The draw is seeded: ``--seed`` shuffles the unique tasks once and the splits take consecutive slices of it.
``--exclude`` drops every task of another Countdown file (the paper's official 50-prompt test split) from all
outputs, in any order of its numbers, before the draw.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

from data_prep.schema import DataError, read_rows, write_rows

OUTPUTS = (("test", "countdown", "test"), ("sft_test", "countdown_sft_prompts", "test"),
           ("sft", "countdown_sft_prompts", "train"), ("train", "countdown", "train"))
TaskKey = tuple[int, tuple[int, ...]]  # target, sorted numbers


def task_key(row: dict, path: Path, r: int) -> TaskKey:
    truth = row["reward_model"]["ground_truth"]
    if isinstance(truth, str):
        truth = json.loads(truth)
    try:
        return int(truth["target"]), tuple(sorted(int(n) for n in truth["numbers"]))
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(path, r, "reward_model.ground_truth", f"not a Countdown task ({e}): {truth!r}") from None


def renumbered(row: dict, index: int, split: str) -> dict:
    info = row["extra_info"]
    return {**row, "extra_info": {**info, "source_index": info["index"], "index": index, "split": split}}


def split_rows(rows: list[dict], path: Path, *, test_size: int, sft_size: int, sft_test_size: int,
               train_size: int = 0, seed: int,
               exclude: frozenset[TaskKey] = frozenset()) -> tuple[dict[str, list[dict]], int]:
    """``({"test", "sft_test", "sft", "train": rows}, tasks dropped)``; each file renumbered.

    Dropped: a task's repeats, and every row of a task in ``exclude`` (:func:`task_key` values)."""
    unique, seen = [], set(exclude)
    for r, row in enumerate(rows):
        key = task_key(row, path, r)
        if key not in seen:
            seen.add(key)
            unique.append(row)
    held = test_size + sft_test_size + sft_size
    if held + max(train_size, 1) > len(unique):
        raise SystemExit(f"{path}: {len(unique)} unique tasks, not enough for {test_size} held-out + "
                         f"{sft_test_size + sft_size} SFT prompts and a training pool of {max(train_size, 1)}")
    order = list(range(len(unique)))
    random.Random(seed).shuffle(order)
    cuts = {"test": order[:test_size], "sft_test": order[test_size:test_size + sft_test_size],
            "sft": order[test_size + sft_test_size:held],
            "train": order[held:held + train_size] if train_size else order[held:]}
    out = {}
    for name, _, split in OUTPUTS:
        out[name] = [renumbered(unique[i], n, split) for n, i in enumerate(sorted(cuts[name]))]
    return out, len(rows) - len(unique)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.countdown_split", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, type=Path, help="verl RL parquet of Countdown tasks")
    parser.add_argument("--out", required=True, type=Path, help="data directory")
    parser.add_argument("--test-size", type=int, default=200, help="held-out evaluation prompts (default 200)")
    parser.add_argument("--sft-size", type=int, default=10000, help="SFT prompts (default 10000)")
    parser.add_argument("--sft-test-size", type=int, default=200, help="SFT validation prompts (default 200)")
    parser.add_argument("--train-size", type=int, default=0, help="RL pool (default 0: every other task)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exclude", type=Path, help="verl RL parquet of Countdown tasks to leave out of every output")
    args = parser.parse_args(argv)
    if min(args.test_size, args.sft_size, args.sft_test_size, args.train_size) < 0:
        parser.error("sizes must be >= 0")
    exclude = frozenset(task_key(row, args.exclude, r) for r, row in enumerate(read_rows(args.exclude))) \
        if args.exclude else frozenset()
    rows = read_rows(args.input)
    splits, dropped = split_rows(rows, args.input, test_size=args.test_size, sft_size=args.sft_size,
                                 sft_test_size=args.sft_test_size, train_size=args.train_size, seed=args.seed,
                                 exclude=exclude)
    excluded = sum(task_key(row, args.input, r) in exclude for r, row in enumerate(rows))
    report = {"input": str(args.input), "seed": args.seed, "repeated_tasks_dropped": dropped - excluded,
              "exclude": str(args.exclude) if args.exclude else None, "excluded_rows": excluded, "files": {}}
    for name, folder, split in OUTPUTS:
        path = write_rows(splits[name], args.out / folder / f"{split}.parquet", source=args.input)
        buckets = Counter(r["extra_info"].get("bucket") for r in splits[name])
        report["files"][str(path)] = {"rows": len(splits[name]),
                                      "buckets": {str(b): c for b, c in sorted(buckets.items(), key=str)}}
        print(f"{name}: {path} ({len(splits[name])} rows)")
    (args.out / "countdown" / "split.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"repeated tasks dropped: {dropped - excluded}, rows of excluded tasks dropped: {excluded}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
