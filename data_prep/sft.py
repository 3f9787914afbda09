"""verl SFT parquet files (a ``messages`` column, verl's ``MultiTurnSFTDataset``) from RL rows.

A row's SFT example is its RL prompt followed by one assistant answer in the verifier's format, so a
model fine-tuned on it answers the RL task the way the reward reads it. Answers come from

* :func:`worked_solution`: the embedded tasks' own solutions (arithmetic: the expression and its value
  in ``\\boxed{}``; Countdown: the generator's expression in ``<answer>``), checked by the verifier;
* or any (row, response) pairs, e.g. a policy's verifier-filtered samples (self-training):
  :func:`sft_row` takes the response as given.

``python -m data_prep.sft NAME --out DIR [--train-size N --test-size M --seed S]`` writes
``DIR/NAME_sft/{train,test}.parquet`` from the embedded dataset ``NAME`` (arithmetic, arithmetic_easy,
countdown).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data_prep import embedded
from data_prep.schema import DataError

SFT_COLUMNS = ("messages", "data_source", "index")


def sft_row(row: dict, response: str) -> dict:
    """The SFT example of RL ``row``: its prompt messages, then ``response`` as the assistant turn."""
    if not isinstance(response, str) or not response.strip():
        raise ValueError(f"empty response for task {row['extra_info']['index']}")
    messages = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
    return {"messages": [*messages, {"role": "assistant", "content": response}],
            "data_source": row["data_source"], "index": int(row["extra_info"]["index"])}


def worked_solution(row: dict) -> str:
    """An answer to an embedded task in the verifier's format, checked with the project's reward."""
    from verl_ext.rewards import compute_score
    from verl_ext.rewards.countdown import safe_eval

    info, truth = row["extra_info"], row["reward_model"]["ground_truth"]
    if row["data_source"] == "arithmetic":
        value = safe_eval(info["expression"])  # the Countdown verifier's evaluator: numbers, + - * /, parentheses
        value = int(value) if value.is_integer() else value
        if str(value) != str(truth).strip():
            raise ValueError(f"task {info['index']}: {info['expression']} is {value}, not the ground truth {truth!r}")
        answer = f"{info['expression']} = {truth}. The answer is \\boxed{{{truth}}}."
    elif row["data_source"] == "countdown":
        answer = f"<think>{info['solution']} = {truth['target']}</think> <answer>{info['solution']}</answer>"
    else:
        raise ValueError(f"no worked solutions for data_source {row['data_source']!r} (arithmetic, countdown)")
    if compute_score(row["data_source"], answer, truth, info)["score"] != 1.0:
        raise ValueError(f"the worked solution of task {info['index']} does not score 1: {answer!r}")
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
    splits = embedded.GENERATORS[name](**kwargs)
    out = Path(out_dir) / f"{name}_sft"
    return {split: write_sft([sft_row(r, worked_solution(r)) for r in rows], out / f"{split}.parquet")
            for split, rows in splits.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.sft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=("arithmetic", "arithmetic_easy", "countdown"))
    parser.add_argument("--out", default="data")
    parser.add_argument("--train-size", type=int, help="default: the embedded dataset's own")
    parser.add_argument("--test-size", type=int, help="default: the embedded dataset's own")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = {k: v for k, v in (("train_size", args.train_size), ("test_size", args.test_size)) if v is not None}
    for split, path in build(args.name, args.out, seed=args.seed, **sizes).items():
        print(f"{split}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
