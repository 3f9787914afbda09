"""scripts/gpu_first_hour.sh's time split and output folder against the GPU machine's rules: at most 8 files come back
from its output folder, each at most 16 MiB, at most 2 folders deep; every measuring step gets its minimum even when
the steps before it use their whole limits (the script's ``PLAN_ONLY=1``, for the GPU's numbers and the CPU's)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.recipes.recipes import ROOT

MAX_FILES, MAX_BYTES, MAX_FOLDERS = 8, 16 * 2**20, 2  # what comes back from a GPU machine's $OUT


def return_problems(out: Path) -> list[str]:
    """What would not come back from ``out`` under the GPU machine's rules (empty: all of it does)."""
    files = sorted(p for p in out.rglob("*") if p.is_file() or p.is_symlink())
    problems = [f"{len(files)} files (at most {MAX_FILES})"] if len(files) > MAX_FILES else []
    for path in files:
        rel = path.relative_to(out)
        if len(rel.parts) - 1 > MAX_FOLDERS:
            problems.append(f"{rel}: {len(rel.parts) - 1} folders deep (at most {MAX_FOLDERS})")
        if path.is_symlink():
            problems.append(f"{rel}: a link")
        elif path.stat().st_size > MAX_BYTES:
            problems.append(f"{rel}: {path.stat().st_size} bytes (at most {MAX_BYTES})")
    return problems


def test_return_problems_names_a_ninth_file_a_third_folder_and_a_big_file(tmp_path):
    for i in range(8):
        (tmp_path / f"f{i}.json").write_text("{}")
    assert return_problems(tmp_path) == []
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "ok.txt").write_text("x")
    assert return_problems(tmp_path) == ["9 files (at most 8)"]
    (tmp_path / "a" / "b" / "ok.txt").unlink()
    (tmp_path / "a" / "b" / "c").mkdir()
    (tmp_path / "a" / "b" / "c" / "deep.txt").write_text("x")
    (tmp_path / "f0.json").write_bytes(b"0" * (MAX_BYTES + 1))
    assert return_problems(tmp_path) == ["9 files (at most 8)", "a/b/c/deep.txt: 3 folders deep (at most 2)",
                                         f"f0.json: {MAX_BYTES + 1} bytes (at most {MAX_BYTES})"]


KILL_S, TABLE_S = 10, 15  # timeout's --kill-after per step; the table at the end
GPU_MINIMUMS = {"update": 60, "verl": 150, "steps": 150, "bench": 60}  # scripts/README.md's, in seconds


def plan(**env: str) -> subprocess.CompletedProcess:
    """``PLAN_ONLY=1 scripts/gpu_first_hour.sh`` (nothing runs)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("BUDGET_S", "VERL_S", "DEVICE", "OUT", "WORK")}
    return subprocess.run(["bash", "scripts/gpu_first_hour.sh"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**environ, "PLAN_ONLY": "1", **env})


def split(**env: str) -> tuple[dict[str, int], dict[str, int], int]:
    """(each part's worst-case limit, the minimums, the budget); the worst case charges each step its limit and the
    kill margin, and leaves the table its time."""
    proc = plan(**env)
    assert proc.returncode == 0, proc.stderr
    head, *lines = proc.stdout.splitlines()
    budget = int(re.search(r"split of (\d+) s", head)[1])
    minimums = {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", head.partition("minimums: ")[2])}
    limits = {k: int(v) for k, v in (re.fullmatch(r"plan: (\w+) (\d+) s", line).groups() for line in lines)}
    limits.pop("total")
    worst = limits["setup"] + sum(v + KILL_S for k, v in limits.items() if k != "setup" and v > 0)
    assert worst <= budget - TABLE_S, (limits, budget)
    return limits, minimums, budget


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_every_measuring_step_gets_its_minimum_in_the_worst_case(device):
    limits, minimums, budget = split(DEVICE=device)
    assert list(limits) == ["setup", "update", "verl_actor", "steps", "bench"]  # the bench last, with what is left
    assert limits["update"] >= minimums["update"] and limits["verl_actor"] >= minimums["verl"]
    assert limits["steps"] >= minimums["steps"]
    assert budget == 540
    if device == "cuda":
        assert minimums == GPU_MINIMUMS


def test_the_smallest_budget_keeps_the_minimums_and_a_smaller_one_is_refused():
    limits, minimums, _ = split(BUDGET_S="435")
    assert [limits[k] for k in ("update", "verl_actor", "steps")] == [60, 150, 150] and limits["bench"] < 60
    refused = plan(BUDGET_S="434")
    assert refused.returncode == 2 and "below the 435 s that setup and the minimums" in refused.stderr
    low = plan(VERL_S="100")
    assert low.returncode == 2 and "VERL_S=100 is below step 2's minimum, 150 s" in low.stderr
