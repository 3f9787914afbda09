"""Train / evaluation overlap check (data_prep.overlap): synthetic prompts, then the converted fixtures."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from data_prep.overlap import Prompt, find_overlaps, read_prompts
from data_prep.schema import DataError, write_rows
from data_prep.sources import REGISTRY

HUB = Path(__file__).resolve().parents[1] / "fixtures" / "hub"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").split()
INSTRUCTION = "Think step by step and then reply with the final answer inside a box at the very end of your reply."


def problem(seed: int, length: int = 40) -> str:
    """A distinct pseudo-problem: words drawn by a fixed rule from the seed."""
    return " ".join(f"{WORDS[(seed * 7 + i * i) % len(WORDS)]}{(seed + i) % 5}" for i in range(length))


def prompts(file: str, texts: list[str]) -> list[Prompt]:
    return [Prompt(file, row, row, text) for row, text in enumerate(texts)]


def test_a_problem_under_other_instructions_overlaps_and_distinct_problems_do_not():
    train = prompts("train", [f"{problem(s)}\n\n{INSTRUCTION}" for s in range(6)])
    evals = prompts("eval", [f"Solve this.\n{problem(3)}\nAnswer in a code block.", f"{problem(11)}\n\n{INSTRUCTION}",
                             f"{problem(12)}\n\n{INSTRUCTION}"])
    report = find_overlaps(train, evals)
    assert [(o.eval.row, o.train.row) for o in report.overlaps] == [(0, 3)]
    assert report.overlaps[0].fraction > 0.5 and not report.unchecked
    assert (report.n_train, report.n_eval) == (6, 3)


def test_shared_instructions_alone_are_no_overlap():
    """Every prompt of both files ends in the same 20-word instruction: their template, ignored."""
    train = prompts("train", [f"{problem(s, 14)} {INSTRUCTION}" for s in range(4)])
    evals = prompts("eval", [f"{problem(s, 14)} {INSTRUCTION}" for s in range(20, 23)])
    report = find_overlaps(train, evals)
    assert report.overlaps == [] and report.unchecked == []


def test_common_phrasing_is_ignored_and_short_prompts_are_counted_unchecked():
    phrase = problem(99, 16)  # in 3 prompts (1 training + 2 of 5 evaluation): common at common_prompts=3
    train = prompts("train", [phrase + " " + problem(1, 13), problem(2)])
    evals = prompts("eval", [phrase + " " + problem(5, 13), "short prompt", phrase, problem(20), problem(21)])
    report = find_overlaps(train, evals, common_prompts=3)
    assert report.overlaps == []
    assert [p.text for p in report.unchecked] == ["short prompt", phrase]  # nothing of theirs left to compare
    flagged = find_overlaps(train, evals, common_prompts=20)  # the phrase is then content, not common
    assert [(o.eval.row, o.train.row) for o in flagged.overlaps] == [(2, 0)]


def test_a_long_shared_passage_overlaps_below_the_fraction():
    passage = problem(7, 80)  # 68 13-grams
    train = prompts("train", [passage, problem(8)])
    evals = prompts("eval", [passage + " " + problem(9, 200), problem(10)])
    report = find_overlaps(train, evals)
    assert [(o.eval.row, o.train.row, o.shared) for o in report.overlaps] == [(0, 0, 68)]
    assert report.overlaps[0].fraction < 0.5
    assert find_overlaps(train, evals, min_shared=69).overlaps == []


def test_bad_arguments_and_bad_files(tmp_path):
    with pytest.raises(ValueError, match="min_fraction"):
        find_overlaps([], [], min_fraction=0)
    pd.DataFrame({"question": ["q"]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DataError) as err:
        read_prompts(tmp_path / "bad.parquet")
    assert err.value.field == "prompt" and "bad.parquet" in str(err.value)
    with pytest.raises(FileNotFoundError):
        read_prompts(tmp_path / "missing.parquet")


def _converted(tmp_path: Path, name: str, fixture: str) -> Path:
    rows = REGISTRY[name](str(HUB / fixture))
    return write_rows(rows, tmp_path / name / f"{rows[0]['extra_info']['split']}.parquet")


def test_every_livecodebench_release_overlaps_guru_training_and_gurus_own_subset_does_not(tmp_path):
    """The BOTS code recipes' first validation set held GURU training problems; GURU's subset does not."""
    train = _converted(tmp_path, "guru_code", "guru")
    every_release = _converted(tmp_path, "livecodebench", "livecodebench_test.jsonl")
    guru_subset = _converted(tmp_path, "guru_livecodebench", "guru")

    def check(*evals: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "data_prep.overlap", "--train", str(train), "--eval",
                               *map(str, evals), "--json", str(tmp_path / "overlap.json")],
                              capture_output=True, text=True)

    proc = check(every_release, guru_subset)
    assert proc.returncode == 1, proc.stderr
    assert f"eval {every_release} row 1 (index 1) ~ train {train} row 1 (index 1)" in proc.stdout
    assert proc.stdout.count("OVERLAP") == 1  # only the release problem that GURU trains on
    clean = check(guru_subset)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "2 evaluation prompts against 4 training prompts: 0 overlap" in clean.stdout
