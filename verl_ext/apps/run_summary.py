"""What a finished run did, for the console: the per-step table (:func:`verl_ext.apps.demo.print_steps`), then per step
what one axis chose and its own scalars (``data_selection/<axis>/*``). Used by ``scripts/*/cpu_embedded.sh``:

    python -m verl_ext.apps.run_summary RUN_DIR --axis selector|allocator|rollout_filter
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verl_ext.apps.demo import print_steps
from verl_ext.trainer import records

AXES = ("selector", "allocator", "rollout_filter")


def axis_line(axis: str, step: int, dump: dict, metrics: dict) -> str:
    prefix = f"data_selection/{axis}/"
    own = {k[len(prefix):]: float(f"{v:.4g}") for k, v in metrics.items() if k.startswith(prefix)}
    if axis == "rollout_filter":
        replayed = len(dump.get("replayed") or [])
        return (f"step {step}: kept {len(dump['kept'])} of its {len(dump['rollout_reward'])} rollouts, replayed "
                f"{replayed} (actor update rows: {dump.get('actor_update_rows')}), rollout_filter {own}")
    if axis == "allocator":
        return f"step {step}: tasks {dump['tasks']} rollouts {dump['counts']} allocator {own}"
    return f"step {step}: tasks {dump['tasks']} selector {own}"


def summarise(run: str | Path, axis: str) -> list[str]:
    """Print the step table and one line per step for ``axis``; returns those lines."""
    if axis not in AXES:
        raise ValueError(f"axis must be one of {AXES}, got {axis!r}")
    print_steps(run)
    metrics, dumps = records.read_metrics(run), records.read_dumps(run)
    lines = [axis_line(axis, s, dumps[s], metrics.get(s, {})) for s in sorted(dumps)]
    print("\n".join(lines))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.run_summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="the run's trainer.default_local_dir")
    parser.add_argument("--axis", choices=AXES, default="selector")
    args = parser.parse_args(argv)
    summarise(args.run, args.axis)
    return 0


if __name__ == "__main__":
    sys.exit(main())
