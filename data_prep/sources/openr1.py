"""OpenR1-Math-220k (``open-r1/OpenR1-Math-220k``, config ``default``) filtered as in the ADS paper.

Published format (dataset card, config ``default``: 93,733 rows in ``data/train-0000k-of-00010.parquet``):
``problem``, ``solution``, ``answer``, ``problem_type``, ``question_type``, ``source``, ``uuid``, and per
DeepSeek-R1 generation the aligned lists ``generations``, ``is_reasoning_complete``,
``correctness_math_verify``, ``correctness_llama``, ``finish_reasons``; plus ``correctness_count``,
``messages``.

Filtering (ADS §4.1, "following the filtering procedure of Yan et al." = LUFFY): starting from the
default split, generations longer than 8192 tokens or marked incorrect by Math-Verify are removed, and a
prompt is kept iff one generation survives. As in LUFFY's ``prepare_filter_dataset.py`` a surviving
generation must also have ``is_reasoning_complete``. Counted filters: ``no_verified_generation`` (no
generation both Math-Verify-correct and complete) and ``too_long`` (such generations exist, all over
``max_tokens``). Token lengths use ``count_tokens`` or the ``tokenizer`` (default LUFFY's Qwen2.5-Math
tokenizer via ``transformers``), loaded only when a generation has more UTF-8 bytes than ``max_tokens``:
a byte-level BPE token covers at least one byte, so shorter texts need no tokenizer. The paper then
draws 11.5k prompts at random from the 46k pool: ``sample_size=11500`` does that (seeded; counted as
``not_sampled``); the default keeps the whole pool.

Each row keeps the source's reference solution (``solution``, NuminaMath's worked solution) as
``extra_info.solution`` (a prompt of the filtered pool without one is counted as ``no_solution`` and left
out, before sampling) and, as ``extra_info.target``, the first of its generations that passed the filter
(the DeepSeek-R1 reasoning trace LUFFY's data calls ``target``; which one when several pass: [decision]).
The ADS preprocessing reads the trace, as the authors' src/compute_difficulty.py (Richard-zrx/ADS) reads
``target`` (``python -m data_prep.ads_clusters --solution-field extra_info.target``: embedding and
difficulty of prompt + trace); ``extra_info.solution`` is the paper-reading alternative. The paper's 11.5k
subset as a file (what ``scripts/ads/prepare_data.sh`` runs; ``python -m data_prep openr1_math`` writes the
whole filtered pool):

    python -m data_prep.sources.openr1 --out DIR [--input FILE] [--sample-size 11500] [--seed 42] \
        [--name openr1_math_11k]   ->  DIR/NAME/train.parquet
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path

from data_prep.embedded_datasets import MATH_INSTRUCTION
from data_prep.schema import make_row
from data_prep.sources._common import Hub, Record, claim_id, finish, read_source, report_counts

HUB = Hub("open-r1/OpenR1-Math-220k", config="default", split="train", globs=("**/*.parquet",))
MAX_TOKENS = 8192
DEFAULT_TOKENIZER = "Qwen/Qwen2.5-Math-7B"
FLAGS = ("correctness_math_verify", "is_reasoning_complete")


def tokenizer_counter(name: str) -> Callable[[str], int]:
    """Token count with a Hugging Face tokenizer (name or local path)."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as e:
        raise RuntimeError(
            f"the OpenR1 length filter needs the {name} tokenizer ({type(e).__name__}: {e}); "
            f"pass tokenizer=<local tokenizer folder> or count_tokens=<callable>"
        ) from e
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def _verified(rec: Record) -> list[str]:
    """Generations that Math-Verify marked correct and whose reasoning is complete."""
    generations = rec.require("generations")
    flags = [rec.require(f) for f in FLAGS]
    if not isinstance(generations, list) or any(not isinstance(f, list) or len(f) != len(generations) for f in flags):
        raise rec.fail("generations", f"generations and {', '.join(FLAGS)} must be lists of equal length")
    rows = zip(generations, *flags, strict=True)
    return [g for g, ok, done in rows if ok is True and done is True and isinstance(g, str)]


def _solution(rec: Record) -> str | None:
    """The reference solution (``solution``), stripped; None when missing or empty."""
    value = rec.get("solution")
    return value.strip() if isinstance(value, str) and value.strip() else None


def convert(
    input_path: str | None = None,
    split: str = "train",
    *,
    max_tokens: int = MAX_TOKENS,
    tokenizer: str = DEFAULT_TOKENIZER,
    count_tokens: Callable[[str], int] | None = None,
    sample_size: int | None = None,
    seed: int = 42,
    report: dict | None = None,
) -> list[dict]:
    """The filtered OpenR1 pool (or a seeded sample of it), index 0..n-1 in source order."""
    counter = count_tokens

    def short_enough(text: str) -> bool:
        nonlocal counter
        if len(text.encode("utf-8")) <= max_tokens:
            return True
        counter = counter or tokenizer_counter(tokenizer)
        return counter(text) <= max_tokens

    rows: list[dict] = []
    seen: dict = {}
    counts = {"kept": 0, "no_verified_generation": 0, "too_long": 0, "no_solution": 0, "not_sampled": 0}
    for rec in read_source(input_path, HUB, split, "openr1_math"):
        uuid = claim_id(seen, rec, "uuid")
        verified = _verified(rec)
        if not verified:
            counts["no_verified_generation"] += 1
        elif (target := next((g for g in verified if short_enough(g)), None)) is None:
            counts["too_long"] += 1
        elif not (solution := _solution(rec)):
            counts["no_solution"] += 1
        else:
            rows.append(make_row(
                data_source="openr1_math", question=f"{rec.text('problem')}\n\n{MATH_INSTRUCTION}", ability="math",
                ground_truth=rec.text("answer"), index=len(rows), split=split, dataset=HUB.repo, source_id=uuid,
                solution=solution, target=target.strip(), problem_type=rec.get("problem_type"), question_type=rec.get("question_type"),
                origin=rec.get("source"), source_file=Path(rec.source).name, source_row=rec.row,
            ))
    if sample_size is not None and sample_size < len(rows):
        chosen = sorted(random.Random(seed).sample(range(len(rows)), sample_size))
        counts["not_sampled"] = len(rows) - sample_size
        rows = [rows[i] for i in chosen]
        for i, row in enumerate(rows):
            row["extra_info"]["index"] = i
    counts["kept"] = len(rows)
    report_counts("openr1_math", counts, report)
    return finish(rows, input_path, HUB)


PAPER_SAMPLE_SIZE = 11500  # ADS §4.1: "We randomly sample 11.5k prompts from this filtered pool"


def main(argv: list[str] | None = None) -> int:
    """The filtered pool's seeded sample (default the paper's 11.5k) as ``OUT/NAME/train.parquet``."""
    from data_prep.schema import write_rows

    parser = argparse.ArgumentParser(prog="python -m data_prep.sources.openr1",
                                     description="OpenR1-Math filtered as in the ADS paper, then sampled")
    parser.add_argument("--out", default="data", help="output directory (default: data)")
    parser.add_argument("--input", help="local copy of the source (default: the hub)")
    parser.add_argument("--sample-size", type=int, default=PAPER_SAMPLE_SIZE,
                        help=f"prompts drawn from the filtered pool (default {PAPER_SAMPLE_SIZE}; 0: the whole pool)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    parser.add_argument("--name", default="openr1_math_11k", help="output folder name under --out")
    args = parser.parse_args(argv)
    rows = convert(args.input, max_tokens=args.max_tokens, tokenizer=args.tokenizer,
                   sample_size=args.sample_size or None, seed=args.seed)
    path = write_rows(rows, Path(args.out) / args.name / "train.parquet", source=args.input)
    print(f"train: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
