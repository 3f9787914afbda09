"""Merge verl RL parquet files into one training file with unique task keys.

``python -m data_prep.merge --out OUT.parquet IN.parquet [IN.parquet ...]``: rows in file order; a prompt already
seen in an earlier row (same messages) is dropped and counted; ``extra_info.index`` is renumbered 0..n-1 (every
converter numbers its own rows from 0, and the trainer keys per-task state on the index) and the original is kept
as ``extra_info.source_index``. Used for CBS's DAPO-Math-17k + MATH levels 3-5 (``scripts/cbs/prepare_data.sh``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data_prep.schema import read_rows, write_rows


def merge_rows(paths: list[str | Path]) -> tuple[list[dict], list[dict]]:
    """The merged rows and, per input file, ``{"path", "kept", "dropped"}``."""
    rows: list[dict] = []
    report, seen = [], set()
    for path in paths:
        kept = dropped = 0
        for row in read_rows(path):
            prompt = tuple((m["role"], m["content"]) for m in row["prompt"])
            if prompt in seen:
                dropped += 1
                continue
            seen.add(prompt)
            row["extra_info"] = {**row["extra_info"], "source_index": row["extra_info"]["index"], "index": len(rows)}
            rows.append(row)
            kept += 1
        report.append({"path": str(path), "kept": kept, "dropped": dropped})
    return rows, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.merge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="verl RL parquet files, in priority order")
    parser.add_argument("--out", required=True, help="output parquet file")
    args = parser.parse_args(argv)
    rows, report = merge_rows(args.inputs)
    for r in report:
        print(f"{r['path']}: {r['kept']} rows kept, {r['dropped']} dropped (prompt already in an earlier row)")
    print(f"train: {write_rows(rows, args.out)} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
