"""verl SFT parquet files (a ``messages`` column, verl's ``MultiTurnSFTDataset``) from RL rows.

A row's SFT example is its RL prompt followed by one assistant answer in the verifier's format, so a
model fine-tuned on it answers the RL task the way the reward reads it. Answers come from

* :func:`worked_solution`, checked by the verifier: arithmetic: the embedded expression and its value in
  ``\\boxed{}``; Countdown (``countdown``, ``countdown_tasks_3to4``, ...): ``<think>EXPR = TARGET</think>
  <answer>EXPR</answer>`` with the row's ``extra_info.solution`` (the embedded set) or, without one, the
  expression :func:`data_prep.countdown_solver.solve` finds (None if the task has no solution);
* or any (row, response) pairs, e.g. a policy's verifier-filtered samples (self-training):
  :func:`sft_row` takes the response as given.

``python -m data_prep.sft_messages NAME --out DIR [--train-size N --test-size M --seed S]`` writes
``DIR/NAME_sft/{train,test}.parquet`` from the embedded dataset ``NAME`` (arithmetic, arithmetic_easy,
countdown).

``python -m data_prep.sft_messages --from-rl FILE.parquet --out OUT.parquet [--limit N]`` writes the SFT file of any RL
file of the data contract (its first N rows), e.g. the Countdown SFT data of Yan, "Progress-Aware Prompt Sampling",
CS224R, §3.4 from ``python -m data_prep countdown_tasks_3to4 ...``. Unsolvable Countdown rows are skipped, counted
and reported: printed and in ``OUT.json`` (``rows``, ``written``, ``unsolvable``, the first unsolvable rows and
their ``extra_info.index``). A row of a data_source without worked solutions is an error naming the file, the row
and the field.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from tqdm import tqdm

from data_prep import embedded_datasets
from data_prep.countdown_solver import solve
from data_prep.schema import DataError, iter_records, validate_rows

SFT_COLUMNS = ("messages", "data_source", "index")
UNSOLVABLE_LISTED = 10  # unsolvable rows named in the --from-rl summary


def sft_row(row: dict, response: str) -> dict:
    """The SFT example of RL ``row``: its prompt messages, then ``response`` as the assistant turn."""
    if not isinstance(response, str) or not response.strip():
        raise ValueError(f"empty response for task {row['extra_info']['index']}")
    messages = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
    return {"messages": [*messages, {"role": "assistant", "content": response}],
            "data_source": row["data_source"], "index": int(row["extra_info"]["index"])}


def _is_countdown(data_source: str) -> bool:
    """Whether the verifier scores ``data_source`` as Countdown (``countdown``, ``countdown_tasks_3to4``, ...)."""
    from verl_ext.rewards.data_sources import domain_of

    try:
        return domain_of(data_source) == "countdown"
    except KeyError:
        return False


def worked_solution(row: dict, source: str | Path | None = None, position: int | None = None) -> str | None:
    """An answer to ``row`` in the verifier's format, checked with the project's reward (see the module's
    docstring); None for a Countdown task without a solution.

    Raises :class:`DataError` naming ``source`` (default: the task), ``position`` and the field at fault.
    """
    from verl_ext.rewards import compute_score
    from verl_ext.rewards.countdown import parse_ground_truth, safe_eval

    info, truth = row["extra_info"], row["reward_model"]["ground_truth"]

    def fail(field: str, problem: str) -> DataError:
        return DataError(source or f"task {info['index']}", position, field, problem)

    if row["data_source"] == "arithmetic":
        field = "extra_info.expression"
        if "expression" not in info:
            raise fail(field, "missing")
        value = safe_eval(info["expression"])  # the Countdown verifier's evaluator: numbers, + - * /, parentheses
        value = int(value) if value.is_integer() else value
        if str(value) != str(truth).strip():
            raise fail(field, f"task {info['index']}: {info['expression']} is {value}, not the ground truth {truth!r}")
        answer = f"{info['expression']} = {truth}. The answer is \\boxed{{{truth}}}."
    elif _is_countdown(row["data_source"]):
        field = "extra_info.solution"
        try:
            target, numbers = parse_ground_truth(truth)
        except (KeyError, TypeError, ValueError):
            raise fail("reward_model.ground_truth",
                       f'expected {{"target": int, "numbers": [int, ...]}}, got {truth!r}') from None
        expression = info.get("solution") or solve(numbers, target)
        if expression is None:
            return None
        answer = f"<think>{expression} = {target}</think> <answer>{expression}</answer>"
    else:
        raise fail("data_source", f"no worked solutions for data_source {row['data_source']!r} "
                                  "(arithmetic, or a Countdown one: countdown, countdown_tasks_3to4, ...)")
    if compute_score(row["data_source"], answer, truth, info)["score"] != 1.0:
        raise fail(field, f"the worked solution of task {info['index']} does not score 1: {answer!r}")
    return answer


def write_sft(rows: list[dict], path: str | Path) -> Path:
    """Write SFT rows (:func:`sft_row`) as parquet; every row must have a non-empty assistant answer."""
    import pandas as pd

    path = Path(path)
    for r, row in enumerate(rows):
        messages = row.get("messages")
        if not messages or messages[-1].get("role") != "assistant" or not str(messages[-1].get("content", "")).strip():
            raise DataError(path, r, "messages", "the last message must be a non-empty assistant answer")
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(SFT_COLUMNS)).to_parquet(path, index=False)
    return path


def build(name: str, out_dir: str | Path, **kwargs) -> dict[str, Path]:
    """SFT files of the embedded dataset ``name`` with worked solutions: ``<out_dir>/<name>_sft/<split>.parquet``."""
    splits = embedded_datasets.GENERATORS[name](**kwargs)
    out = Path(out_dir) / f"{name}_sft"
    return {split: write_sft([sft_row(r, worked_solution(r)) for r in rows], out / f"{split}.parquet")
            for split, rows in splits.items()}


def build_from_rl(path: str | Path, out: str | Path, limit: int | None = None) -> dict:
    """SFT file ``out`` of the RL file ``path`` (its first ``limit`` rows) with :func:`worked_solution` answers,
    and its summary ``out`` with suffix ``.json``, which is returned; unsolvable rows are skipped and counted."""
    path, out = Path(path), Path(out)
    if not path.is_file():
        raise DataError(path, None, "<file>", "no such file")
    rows = list(itertools.islice(iter_records(path), limit))
    validate_rows(rows, path)
    examples, unsolvable = [], []
    for r, row in enumerate(tqdm(rows, desc=f"solving {path.name}", unit="row", leave=False)):
        answer = worked_solution(row, path, r)
        if answer is None:
            unsolvable.append(r)
        else:
            examples.append(sft_row(row, answer))
    if not examples:
        raise DataError(path, None, "reward_model.ground_truth", f"none of its {len(rows)} rows has a solution")
    write_sft(examples, out)
    listed = unsolvable[:UNSOLVABLE_LISTED]
    summary = {"input": str(path), "output": str(out), "rows": len(rows), "written": len(examples),
               "unsolvable": len(unsolvable), "unsolvable_rows": listed,
               "unsolvable_indices": [int(rows[r]["extra_info"]["index"]) for r in listed]}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.sft_messages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("name", nargs="?", choices=("arithmetic", "arithmetic_easy", "countdown"),
                        help="an embedded dataset")
    source.add_argument("--from-rl", metavar="FILE", help="an RL parquet file of the data contract")
    parser.add_argument("--out", help="NAME: a directory (default: data); --from-rl: the .parquet file to write")
    parser.add_argument("--limit", type=int, help="--from-rl: only the first N rows")
    parser.add_argument("--train-size", type=int, help="default: the embedded dataset's own")
    parser.add_argument("--test-size", type=int, help="default: the embedded dataset's own")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.from_rl is None:
        if args.limit is not None:
            parser.error("--limit applies to --from-rl only")
        sizes = {k: v for k, v in (("train_size", args.train_size), ("test_size", args.test_size)) if v is not None}
        for split, path in build(args.name, args.out or "data", seed=args.seed, **sizes).items():
            print(f"{split}: {path}")
        return 0
    if args.out is None or Path(args.out).suffix != ".parquet":
        parser.error("--from-rl needs --out OUT.parquet")
    if args.train_size is not None or args.test_size is not None:
        parser.error("--train-size / --test-size apply to an embedded dataset only")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    summary = build_from_rl(args.from_rl, args.out, args.limit)
    print(f"{summary['output']}: {summary['written']} of {summary['rows']} rows written; "
          f"{summary['unsolvable']} unsolvable, skipped (rows {summary['unsolvable_rows']}"
          f"{', ...' if summary['unsolvable'] > len(summary['unsolvable_rows']) else ''}); "
          f"summary: {Path(summary['output']).with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
