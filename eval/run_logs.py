"""Reading a run directory's logs for :mod:`eval.tables` and :mod:`eval.plots`.

A run directory holds the trainer's records (:mod:`verl_ext.trainer.records`: ``metrics/*.jsonl``,
``data_selection/step_<N>.json``) and, once evaluated, the evaluator's ``eval/curve.jsonl`` and
``eval/step_<N>/<benchmark>/samples.jsonl``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cached_property
from pathlib import Path

import numpy as np

from eval.metrics import task_pass_rates

VAL_CORE = re.compile(r"^val-core/(?P<source>.+)/(?P<var>[^/]+)/mean@(?P<n>\d+)$")


def parse_runs(specs: list[str]) -> dict[str, Path]:
    """``["random=out/r", ...]`` → ``{"random": Path("out/r")}`` (order kept; a missing directory fails)."""
    runs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--runs takes NAME=RUN_DIR, got {spec!r}")
        if not Path(path).is_dir():
            raise SystemExit(f"run {name!r}: {path} is not a directory")
        runs[name] = Path(path)
    return runs


class Run:
    """One run directory's logs, each read once on first use."""

    def __init__(self, name: str, path: str | Path):
        self.name, self.path = name, Path(path)

    @cached_property
    def metrics(self) -> dict[int, dict]:
        from verl_ext.trainer import records  # imports verl: only when training logs are read

        return records.read_metrics(self.path)

    @cached_property
    def dumps(self) -> dict[int, dict]:
        from verl_ext.trainer import records

        return records.read_dumps(self.path)

    @cached_property
    def curve(self) -> dict[str, dict[int, dict]]:
        """``{benchmark: {step: record}}``, each record with at least ``accuracy``: the evaluator's
        ``eval/curve.jsonl``, or else verl's validation metrics ``val-core/<source>/<var>/mean@N``
        (``acc`` preferred over ``reward``, the largest N) as ``{"accuracy": value}``."""
        path = self.path / "eval" / "curve.jsonl"
        out: dict[str, dict[int, dict]] = defaultdict(dict)
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    out[rec["benchmark"]][int(rec["step"])] = rec
            return dict(out)
        best: dict[tuple[int, str], tuple[tuple[bool, int], float]] = {}
        for step, metrics in self.metrics.items():
            for key, value in metrics.items():
                m = VAL_CORE.match(key)
                if m and m["var"] in ("acc", "reward"):
                    rank = (m["var"] == "acc", int(m["n"]))
                    if (step, m["source"]) not in best or rank > best[step, m["source"]][0]:
                        best[step, m["source"]] = (rank, float(value))
        for (step, source), (_, value) in sorted(best.items()):
            out[source][step] = {"accuracy": value}
        return dict(out)

    def final_step(self) -> int | None:
        """The last evaluated step (in ``curve`` or as an ``eval/step_<N>/`` folder)."""
        steps = {s for curve in self.curve.values() for s in curve}
        steps |= {int(p.name[len("step_"):]) for p in (self.path / "eval").glob("step_*") if p.is_dir()}
        return max(steps, default=None)

    def sample_benchmarks(self, step: int) -> list[str]:
        return sorted(p.parent.name for p in (self.path / "eval" / f"step_{step}").glob("*/samples.jsonl"))

    def samples(self, step: int, benchmark: str) -> list[dict]:
        path = self.path / "eval" / f"step_{step}" / benchmark / "samples.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @cached_property
    def task_pass_rates(self) -> dict[int, dict[int, float]]:
        """``{step: {task: pass rate}}`` from the dumps: mean success (reward ≥ 1) of the task's rollouts."""
        return {step: dict(zip(np.unique(d["rollout_task"]).tolist(),
                               task_pass_rates(d["rollout_task"], d["rollout_reward"]).tolist()))
                for step, d in sorted(self.dumps.items())}

    def first_last_pass_rates(self) -> tuple[np.ndarray, np.ndarray]:
        """Per task visited at least twice: its pass rate at its first and at its last visit."""
        first: dict[int, float] = {}
        last: dict[int, float] = {}
        visits: dict[int, int] = defaultdict(int)
        for rates in self.task_pass_rates.values():
            for task, rate in rates.items():
                first.setdefault(task, rate)
                last[task] = rate
                visits[task] += 1
        tasks = [t for t in first if visits[t] >= 2]
        return np.array([first[t] for t in tasks]), np.array([last[t] for t in tasks])
