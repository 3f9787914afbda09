"""A component's share of a training step: of a stated reference step time, or measured in a trainer run.

Reference step: the only per-step wall time the five papers state. ADS (Xu et al., arXiv 2606.22305), Appendix
B, Table 5: the offline stage of Qwen2.5-Math-1.5B took 15.5 min, "≈ 6" RL training steps (verl, 128 prompts x 8
rollouts, max 8192 tokens), so one step ≈ 930 s / 6 = 155 s.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

import verl_ext

REFERENCE_STEP_S = 15.5 * 60 / 6
REFERENCE_STEP_SOURCE = ("ADS (Xu et al., arXiv 2606.22305) App. B Table 5: Qwen2.5-Math-1.5B offline stage 15.5 min "
                         "≈ 6 RL steps (128 prompts x 8 rollouts, max 8192 tokens) -> ≈ 155 s per step")
COMPONENTS = ("selector", "allocator", "rollout_filter")


def of_reference_step(seconds: float) -> float:
    """``seconds`` as a fraction of :data:`REFERENCE_STEP_S`."""
    return seconds / REFERENCE_STEP_S


def read_metrics(run_dir: str | os.PathLike) -> dict[int, dict]:
    """``verl_ext.trainer.records.read_metrics``, loaded from its file: importing the ``verl_ext.trainer``
    package imports verl (~9 s)."""
    spec = importlib.util.spec_from_file_location("verl_ext_records", Path(verl_ext.__file__).parent / "trainer"
                                                  / "records.py")
    records = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(records)
    return records.read_metrics(run_dir)


def run_shares(run_dir: str | os.PathLike) -> list[dict]:
    """Per component logged by the run (``timing_s/<component>``): median seconds and median share of
    ``timing_s/step`` over the steps that log both."""
    steps = [m for _, m in sorted(read_metrics(run_dir).items()) if m.get("timing_s/step", 0) > 0]
    if not steps:
        raise ValueError(f"{run_dir}: no step with timing_s/step in metrics/from_step_*.jsonl")
    rows = []
    for name in COMPONENTS:
        timed = [(m[f"timing_s/{name}"], m["timing_s/step"]) for m in steps if f"timing_s/{name}" in m]
        if timed:
            seconds, step = np.array(timed).T
            rows.append({"component": name, "steps": len(timed), "median_s": float(np.median(seconds)),
                         "median_step_s": float(np.median(step)), "median_share": float(np.median(seconds / step))})
    return rows


def report_run(run_dir: str | os.PathLike, rows: list[dict]) -> str:
    lines = [f"Measured share of a step in {run_dir} (timing_s/<component> / timing_s/step, median over steps)",
             "| component | steps | median ms | median step s | median share |", "|:---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['component']} | {r['steps']} | {1e3 * r['median_s']:.2f} | {r['median_step_s']:.1f} | "
                     f"{100 * r['median_share']:.4f} % |")
    return "\n".join(lines)
