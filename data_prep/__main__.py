"""Command line: ``python -m data_prep NAME --out DIR`` writes verl RL parquet files.

Embedded datasets (offline): ``countdown``, ``arithmetic``, ``gsm``, ``logic``, ``humaneval`` ->
``DIR/NAME/{train,test}.parquet``. Real datasets (``python -m data_prep --list``) load from the hub,
or from a local copy in the source's own format with ``--input FILE`` -> ``DIR/NAME/SPLIT.parquet``
(evaluation sets default to split ``test``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data_prep import embedded_datasets
from data_prep.schema import write_rows


def _sources() -> dict:
    from data_prep.sources import REGISTRY

    return REGISTRY


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="dataset name")
    parser.add_argument("--out", default="data", help="output directory (default: data)")
    parser.add_argument("--list", action="store_true", help="list dataset names and exit")
    parser.add_argument("--input", help="real datasets: local file in the source's own format")
    parser.add_argument("--split", help="real datasets: split to convert (default: the converter's own)")
    parser.add_argument("--train-size", type=int, help="embedded datasets: train rows")
    parser.add_argument("--test-size", type=int, help="embedded datasets: held-out rows")
    parser.add_argument("--seed", type=int, default=0, help="embedded datasets: seed")
    args = parser.parse_args(argv)

    if args.list or not args.name:
        print("embedded:", " ".join(sorted(embedded_datasets.GENERATORS)))
        print("real:    ", " ".join(sorted(_sources())))
        return 0 if args.list else 2
    if args.name in embedded_datasets.GENERATORS:
        sizes = {k: v for k, v in (("train_size", args.train_size), ("test_size", args.test_size)) if v is not None}
        kwargs = {"seed": args.seed} | ({} if args.name == "humaneval" else sizes)
        paths = embedded_datasets.build(args.name, args.out, **kwargs)
    else:
        sources = _sources()
        if args.name not in sources:
            parser.error(f"unknown dataset {args.name!r}; see --list")
        split_kwargs = {} if args.split is None else {"split": args.split}
        rows = sources[args.name](args.input, **split_kwargs)
        split = rows[0]["extra_info"]["split"] if rows else (args.split or "train")
        paths = {split: write_rows(rows, Path(args.out) / args.name / f"{split}.parquet", source=args.input)}
    for split, path in paths.items():
        print(f"{split}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
