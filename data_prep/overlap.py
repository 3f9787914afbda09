"""Train / evaluation overlap: evaluation prompts whose text is largely contained in one training prompt.

A contamination check by word n-grams (default 13, the length GPT-3's decontamination used). Each
prompt (the text of its messages, lower-cased, split into words) becomes a set of hashed n-grams.
Ignored: a file's template, the n-grams in at least half of the prompts of one file (instructions a
converter appends), and phrasing common to at least ``common_prompts`` prompts of all files together.
An evaluation prompt overlaps a training prompt when at least ``min_fraction`` of its remaining n-grams
occur in that training prompt, or at least ``min_shared`` of them do (a long shared passage: the same
problem under other instructions). Prompts with no n-gram left (fewer than n words outside the template)
cannot be judged: they are counted, never passed silently.

    python -m data_prep.overlap --train data/bots/guru_code/train.parquet \\
        --eval data/bots/mbpp/test.parquet data/bots/guru_livecodebench/test.parquet

prints every overlap (both files, rows and ``extra_info.index``) and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data_prep.schema import DataError

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Prompt:
    """One row's prompt text and where it came from."""

    file: str
    row: int
    index: int | None  # extra_info.index
    text: str


@dataclass(frozen=True)
class Overlap:
    eval: Prompt
    train: Prompt
    fraction: float  # of the evaluation prompt's n-grams found in the training prompt
    shared: int


@dataclass(frozen=True)
class OverlapReport:
    overlaps: list[Overlap]
    unchecked: list[Prompt]  # evaluation prompts without an n-gram to compare
    n_train: int
    n_eval: int


def read_prompts(path: str | Path) -> list[Prompt]:
    """The prompts of a verl RL parquet file (only its ``prompt`` and ``extra_info`` columns are read)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    columns = set(pq.read_schema(path).names)
    if "prompt" not in columns:
        raise DataError(path, None, "prompt", "missing column")
    table = pq.read_table(path, columns=[c for c in ("prompt", "extra_info") if c in columns])
    infos = table.column("extra_info").to_pylist() if "extra_info" in columns else [None] * table.num_rows
    prompts = []
    for row, (messages, info) in enumerate(zip(table.column("prompt").to_pylist(), infos, strict=True)):
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise DataError(path, row, "prompt", "not a list of chat messages")
        text = "\n".join(str(m.get("content") or "") for m in messages)
        prompts.append(Prompt(str(path), row, (info or {}).get("index"), text))
    return prompts


def ngram_hashes(text: str, n: int) -> np.ndarray:
    """The distinct word n-grams of ``text`` (lower-cased), as 64-bit hashes; empty below n words."""
    words = _WORD.findall(text.lower())
    grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}
    digest = (int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little") for g in grams)
    return np.fromiter(digest, dtype=np.uint64, count=len(grams))


def _ignored(groups: dict[str, list[np.ndarray]], common_prompts: int) -> np.ndarray:
    """Hashes of each file's template (in >= half its prompts, >= 2) and of phrasing common to all files."""
    ignored = []
    for sets in groups.values():
        if len(sets) >= 2:
            values, counts = np.unique(np.concatenate(sets), return_counts=True)
            ignored.append(values[counts >= max(2, (len(sets) + 1) // 2)])
    values, counts = np.unique(np.concatenate([s for sets in groups.values() for s in sets]), return_counts=True)
    ignored.append(values[counts >= common_prompts])
    return np.unique(np.concatenate(ignored))


def find_overlaps(train: Sequence[Prompt], evals: Sequence[Prompt], *, n: int = 13, min_fraction: float = 0.5,
                  min_shared: int = 50, common_prompts: int = 20) -> OverlapReport:
    """Each evaluation prompt against its best-matching training prompt (see the module docstring)."""
    if n < 1 or not 0 < min_fraction <= 1 or min_shared < 1 or common_prompts < 2:
        raise ValueError(f"need n >= 1, 0 < min_fraction <= 1, min_shared >= 1, common_prompts >= 2; got {n}, "
                         f"{min_fraction}, {min_shared}, {common_prompts}")
    everything = [*train, *evals]
    hashes = [ngram_hashes(p.text, n) for p in tqdm(everything, desc="n-grams", unit="prompt")]
    groups: dict[str, list[np.ndarray]] = {}
    for p, h in zip(everything, hashes):
        groups.setdefault(p.file, []).append(h)
    ignored = _ignored(groups, common_prompts) if hashes else np.empty(0, np.uint64)
    kept = [h[~np.isin(h, ignored)] for h in hashes]  # train's first, then the evaluation prompts'

    train_sets = kept[:len(train)]
    lengths = np.array([len(s) for s in train_sets], dtype=np.int64)
    owner = np.repeat(np.arange(len(train)), lengths)
    flat = np.concatenate(train_sets) if train_sets else np.empty(0, np.uint64)
    order = np.argsort(flat, kind="stable")
    flat, owner = flat[order], owner[order]

    overlaps, unchecked = [], []
    for p, grams in zip(evals, kept[len(train):]):
        if not len(grams):
            unchecked.append(p)
            continue
        lo, hi = np.searchsorted(flat, grams, "left"), np.searchsorted(flat, grams, "right")
        counts = hi - lo
        total = int(counts.sum())
        if not total:
            continue
        starts = np.repeat(lo, counts) + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        docs, shared = np.unique(owner[starts], return_counts=True)
        best = int(shared.argmax())
        fraction = float(shared[best]) / len(grams)
        if fraction >= min_fraction or shared[best] >= min_shared:
            overlaps.append(Overlap(p, train[int(docs[best])], fraction, int(shared[best])))
    return OverlapReport(overlaps, unchecked, len(train), len(evals))


def _beginning(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.overlap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", nargs="+", required=True, help="training parquet files")
    parser.add_argument("--eval", nargs="+", required=True, help="evaluation parquet files")
    parser.add_argument("--n", type=int, default=13, help="words per n-gram (default 13)")
    parser.add_argument("--min-fraction", type=float, default=0.5,
                        help="share of an evaluation prompt's n-grams in one training prompt (default 0.5)")
    parser.add_argument("--min-shared", type=int, default=50,
                        help="or this many of its n-grams in one training prompt (default 50)")
    parser.add_argument("--common-prompts", type=int, default=20,
                        help="n-grams in this many prompts are common phrasing, ignored (default 20)")
    parser.add_argument("--json", help="also write the overlaps and unchecked prompts to this JSON file")
    args = parser.parse_args(argv)

    train = [p for f in args.train for p in read_prompts(f)]
    evals = [p for f in args.eval for p in read_prompts(f)]
    report = find_overlaps(train, evals, n=args.n, min_fraction=args.min_fraction, min_shared=args.min_shared,
                           common_prompts=args.common_prompts)
    for o in report.overlaps:
        print(f"OVERLAP {o.fraction:.0%} ({o.shared} {args.n}-grams): eval {o.eval.file} row {o.eval.row} "
              f"(index {o.eval.index}) ~ train {o.train.file} row {o.train.row} (index {o.train.index})\n"
              f"  eval:  {_beginning(o.eval.text)}\n  train: {_beginning(o.train.text)}")
    print(f"{report.n_eval} evaluation prompts against {report.n_train} training prompts: "
          f"{len(report.overlaps)} overlap (>= {args.min_fraction:.0%} or >= {args.min_shared} of their "
          f"{args.n}-grams in one training prompt), {len(report.unchecked)} too short to check (< {args.n} words "
          "outside the template)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "overlaps": [asdict(o) for o in report.overlaps], "unchecked": [asdict(p) for p in report.unchecked],
            "n_train": report.n_train, "n_eval": report.n_eval}, indent=1))
    return 1 if report.overlaps else 0


if __name__ == "__main__":
    sys.exit(main())
