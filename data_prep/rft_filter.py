"""Verifier-filtered self-training data (RFT; Yan, "Progress-Aware Prompt Sampling", CS224R, §3.4): a policy's scored
samples of the training prompts, filtered, mixed with the original SFT data, as a verl SFT parquet file.

    python -m data_prep.rft_filter --samples EVAL/model/train/samples.jsonl --train data/countdown/train.parquet \\
        --sft data/countdown_sft/train.parquet --filter naive|clean --out data/rft_naive/train.parquet [--seed 0]

The samples are :mod:`eval.evaluate`'s records (``index``, ``sample``, ``score``, ``response`` and the
verifier's format flags), e.g. ``python -m eval.evaluate --run RUN --steps N --benchmarks train=TRAIN.parquet
--preset progress --k 32``: the evaluator's sampling. Filters:

* ``naive``: verifier-correct completions (score 1), at most 2 per prompt (the lowest sample numbers), mixed
  with the original SFT data so that SFT rows are 30 % of the result;
* ``clean``: verifier-correct completions with exactly one ``<answer>``, at most one ``<think>``, no parse
  error and not cut by the token limit, the shortest one per prompt (characters; ties: lowest sample number),
  SFT rows 50 % of the result.

Each filter also names the learning rate of the SFT epoch that follows (naive 1e-5, clean 5e-6):
``python -m verl_ext.apps.rft`` runs sampling, this filter, that epoch and the evaluation in one command.

[decision] "an X % SFT mix" = X % of the written rows are original SFT rows, drawn without replacement (seeded;
all of them when there are fewer); RFT rows come first in prompt order, the SFT rows after them (verl's SFT
trainer shuffles). A sample whose ``index`` is not in ``--train`` stops with the file, line and field.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_prep.schema import DataError, read_rows
from data_prep.sft_messages import sft_row, write_sft


@dataclass(frozen=True)
class RftFilter:
    per_prompt: int  # completions kept per prompt
    sft_share: float  # share of the written rows that are original SFT rows
    clean: bool  # format-clean completions only, the shortest first
    lr: float  # the SFT epoch's learning rate (python -m verl_ext.apps.rft)


FILTERS = {"naive": RftFilter(per_prompt=2, sft_share=0.3, clean=False, lr=1e-5),
           "clean": RftFilter(per_prompt=1, sft_share=0.5, clean=True, lr=5e-6)}
REQUIRED = ("index", "sample", "score", "response")
FLAGS = ("has_answer", "multiple_answers", "multiple_think", "parse_error", "too_long")


def read_samples(path: Path) -> list[dict]:
    """The records of ``samples.jsonl``; a malformed line or a missing field stops with file, line and field."""
    records = []
    with open(path) as f:
        for line_no, line in enumerate(f):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(path, line_no, "<line>", f"not JSON: {e}") from None
            for field in REQUIRED:
                if field not in record:
                    raise DataError(path, line_no, field, "missing")
            records.append(record)
    return records


def is_clean(record: dict) -> bool:
    """Exactly one ``<answer>``, no repeated ``<think>``, parsed, not cut by the token limit."""
    return (bool(record.get("has_answer")) and not record.get("multiple_answers") and not record.get("multiple_think")
            and not record.get("parse_error") and not record.get("too_long"))


def select(records: list[dict], flt: RftFilter) -> list[dict]:
    """The kept completions, by prompt index then rank (sample number, or length for ``clean``)."""
    by_prompt: dict[int, list[dict]] = {}
    for r in records:
        if r["score"] >= 1.0 and (not flt.clean or is_clean(r)):
            by_prompt.setdefault(int(r["index"]), []).append(r)
    kept = []
    for index in sorted(by_prompt):
        rank = (lambda r: (len(r["response"]), r["sample"])) if flt.clean else (lambda r: r["sample"])
        kept += sorted(by_prompt[index], key=rank)[: flt.per_prompt]
    return kept


def sft_mix_size(rft_rows: int, share: float, available: int) -> int:
    """SFT rows so that they are ``share`` of the mixture (at most ``available``)."""
    return min(available, int(round(share / (1 - share) * rft_rows))) if share < 1 else available


def build(samples: Path, train: Path, sft: Path, name: str, out: Path, seed: int = 0) -> dict:
    flt = FILTERS[name]
    records = read_samples(samples)
    rows = {int(r["extra_info"]["index"]): r for r in read_rows(train)}
    for line_no, record in enumerate(records):
        if int(record["index"]) not in rows:
            raise DataError(samples, line_no, "index", f"task {record['index']} is not in {train}")
    kept = select(records, flt)
    rft = [sft_row(rows[int(r["index"])], r["response"]) for r in kept]
    import pandas as pd

    original = pd.read_parquet(sft).to_dict("records")
    n_sft = sft_mix_size(len(rft), flt.sft_share, len(original))
    picked = np.random.default_rng(seed).choice(len(original), size=n_sft, replace=False) if n_sft else []
    mixed = rft + [{"messages": [dict(m) for m in original[i]["messages"]], "data_source": original[i]["data_source"],
                    "index": int(original[i]["index"])} for i in sorted(picked)]
    write_sft(mixed, out)
    correct = sum(r["score"] >= 1.0 for r in records)
    summary = {"filter": name, "samples": len(records), "correct": correct, "prompts_with_correct": len(
        {int(r["index"]) for r in records if r["score"] >= 1.0}), "rft_rows": len(rft),
        "rft_prompts": len({int(r["index"]) for r in kept}), "sft_rows": n_sft, "rows": len(mixed), "out": str(out)}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.rft_filter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=Path, required=True, help="eval.evaluate's samples.jsonl of the prompts")
    parser.add_argument("--train", type=Path, required=True, help="the RL parquet the samples were drawn from")
    parser.add_argument("--sft", type=Path, required=True, help="the original SFT parquet to mix in")
    parser.add_argument("--filter", choices=sorted(FILTERS), required=True)
    parser.add_argument("--out", type=Path, required=True, help="SFT parquet to write (+ a .json summary)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        summary = build(args.samples, args.train, args.sft, args.filter, args.out, args.seed)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {summary['rft_rows']} verified completions of {summary['rft_prompts']} prompts "
          f"({summary['correct']} correct of {summary['samples']} samples) + {summary['sft_rows']} SFT rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
