"""``python -m verl_ext.bench [NAME ...] [--out DIR]``: run benchmarks, print Markdown tables and write
``<out>/<name>.json``."""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from verl_ext.bench import bots, cbs, coba, progress

BENCHMARKS = {"bots": (bots.run, bots.report), "cbs": (cbs.run, cbs.report), "coba": (coba.run, coba.report),
              "progress": (progress.run, progress.report)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {sorted(BENCHMARKS)})")
    parser.add_argument("--out", default="outputs/bench", help="directory of the JSON results")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; choose from {sorted(BENCHMARKS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.names or sorted(BENCHMARKS):
        run, report = BENCHMARKS[name]
        rows = run()
        print(report(rows), flush=True)
        (out / f"{name}.json").write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                                      "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
