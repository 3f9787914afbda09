"""The course's SFT data, ``Asap7772/cog_behav_all_strategies``, as a verl SFT parquet file
(:mod:`data_prep.sft_messages`).

Yan, "Progress-Aware Prompt Sampling", CS224R, §4 starts every run from "the default Qwen2.5-0.5B Countdown SFT
checkpoint used in the course pipeline" (``asingh15/qwen-sft-countdown-defaultproj``), which the course trained on
this set; the paper's RFT mixes in this "original SFT data" (§4, Table 5). Published format [authors' code]:

* splits ``train`` and ``test``, columns ``query`` and ``completion``: the course's SFT starter code reads them
  (``sft_trainer/sft_dataset.py``: ``load_dataset(name, split=split)``, ``prompt_key='query'``,
  ``response_key='completion'``; github.com/nicolasbejar/CS224R_project, a copy of the course's starter code);
* ``query`` is TinyZero's Countdown question in its "A conversation between User and Assistant. ... User: Using the
  numbers [a, b, c], create an equation that equals T. ... Assistant: Let me solve this step by step." frame, the
  numbers as a Python list, and ``completion`` a reasoning trace with search (backtracking, verification, subgoals,
  backward chaining) written by Claude 3.5 Sonnet, ``<think>`` ... ``</think>`` then ``<answer>`` ... ``</answer>``
  (github.com/kanishkg/cognitive-behaviors: ``tasks/countdown.py`` ``CountDown.get_task`` writes the query,
  ``generate_cot_datasets/api_gen.py`` the ``{"query", "completion"}`` lines of the all-strategies set).

The course's SFT applies Qwen2.5's chat template to ``[user: query]`` and ``[user: query, assistant: completion]``,
which inserts Qwen2.5's default system message "You are a helpful assistant." (the system of the RL prompts of
``asingh15/countdown_tasks_3to4`` too). Each row here is ``[system: that message, user: query, assistant:
completion]``, the system written out so that any chat template rebuilds the course's string. Every row is kept, as
the course trained on every row; the verifier's judgement of each completion (correct, formatted but wrong, no
answer) is counted and written beside the output (``OUT.json``).

    python -m data_prep.cog_behav_sft --split train|test --out OUT.parquet [--input FILE]

``--input``: a local copy (the split's parquet file from the hub, or the generator's jsonl); without it the split is
loaded from the hub.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from data_prep.schema import DataError
from data_prep.sft_messages import write_sft
from data_prep.sources._common import Hub, Record, read_source

HUB = Hub("Asap7772/cog_behav_all_strategies", note="splits 'train' and 'test'")
SPLITS = ("train", "test")
DATA_SOURCE = "cog_behav_all_strategies"
SYSTEM = "You are a helpful assistant."  # Qwen2.5's default system message, which the course's SFT prompt carries
QUESTION = re.compile(r"User: Using the numbers \[(?P<numbers>[-\d,\s]+)\], create an equation that equals "
                      r"(?P<target>-?\d+)\.")
OUTCOMES = ("correct", "formatted_wrong", "no_answer")  # verifier score 1.0, 0.1, 0


def task(rec: Record) -> tuple[str, int, list[int]]:
    """(query, target, numbers) of a record; a query that is not the Countdown question is an error."""
    query = rec.require("query")
    match = QUESTION.search(query) if isinstance(query, str) else None
    if match is None:
        raise rec.fail("query", "expected the Countdown question 'User: Using the numbers [a, b, ...], create an "
                                f"equation that equals T.', got {query!r:.200}")
    numbers = [int(n) for n in re.split(r"[,\s]+", match["numbers"].strip())]
    if len(numbers) < 2:
        raise rec.fail("query", f"fewer than two numbers: {match['numbers']!r}")
    return query, int(match["target"]), numbers


def outcome(completion: str, target: int, numbers: list[int]) -> str:
    """The verifier's judgement of a completion (the reward the RL recipes use)."""
    from verl_ext.rewards import compute_score

    score = compute_score("countdown", completion, {"target": target, "numbers": numbers})["score"]
    return OUTCOMES[0] if score >= 1.0 else OUTCOMES[1] if score > 0 else OUTCOMES[2]


def convert(input_path: str | None, split: str = "train") -> tuple[list[dict], dict]:
    """SFT rows of ``split`` in source order, and counts: rows, verifier outcomes, numbers per task, target range."""
    if split not in SPLITS:
        raise ValueError(f"{HUB.repo} has splits {SPLITS}, not {split!r}")
    rows: list[dict] = []
    outcomes: Counter[str] = Counter({o: 0 for o in OUTCOMES})
    sizes: Counter[int] = Counter()
    targets: list[int] = []
    for rec in read_source(input_path, HUB, split, f"{HUB.repo} {split}"):
        query, target, numbers = task(rec)
        completion = rec.require("completion")
        if not isinstance(completion, str) or not completion.strip():
            raise rec.fail("completion", f"empty or not text: {completion!r:.200}")
        rows.append({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": query},
                                  {"role": "assistant", "content": completion}],
                     "data_source": DATA_SOURCE, "index": len(rows)})
        outcomes[outcome(completion, target, numbers)] += 1
        sizes[len(numbers)] += 1
        targets.append(target)
    if not rows:
        raise DataError(input_path or HUB.repo, None, "<file>", "no rows")
    counts = {"rows": len(rows), **outcomes, "numbers_per_task": {str(k): sizes[k] for k in sorted(sizes)},
              "target_min": min(targets), "target_max": max(targets)}
    return rows, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.cog_behav_sft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=SPLITS, default="train")
    parser.add_argument("--input", help="a local copy of the split (parquet or jsonl); default: the hub")
    parser.add_argument("--out", required=True, help="the SFT .parquet file to write")
    args = parser.parse_args(argv)
    if Path(args.out).suffix != ".parquet":
        parser.error("--out must be a .parquet file")
    rows, counts = convert(args.input, args.split)
    out = write_sft(rows, args.out)
    summary = {"input": args.input or f"hf://datasets/{HUB.repo}/{args.split}", "output": str(out), **counts}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
