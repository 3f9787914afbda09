"""GURU (``LLM360/guru-RL-92k``) math, code and logic, with the reference pass rates kept.

Published format (checked against the hub file listing and LLM360/Reasoning360
``data_preprocess/``): one parquet file per source under ``train/``, in verl's columns
``data_source`` (``math__*``, ``codegen__*``, ``logic__*``), ``prompt`` (chat list),
``reward_model{style, ground_truth}``, ``extra_info`` plus the top-level reference columns
``qwen2.5_7b_pass_rate`` (Qwen2.5-7B-Instruct) -> ``extra_info.weak_pass_rate`` and
``qwen3_30b_pass_rate`` (Qwen3-30B-A3B) -> ``extra_info.strong_pass_rate``.

Ground truths: math = answer string; logic = a string (graph puzzles) or a list (ordering puzzles:
names; ARC/BARC: a grid), lists are written as JSON text; code = a JSON string, either
``{"inputs", "outputs"}`` (stdin/stdout, kept) or ``{"functional": script}``, a self-checking script
whose asserts call the solution (LeetCode2k: ``def check(candidate) ... check(Solution().f)``;
TACO / PrimeIntellect: ``_deep_eq(f(*i), o)`` loops; LiveCodeBench: ``assert Solution().f(...)``).
A functional script becomes HumanEval style: ``test`` = the script followed by a no-op
``check(candidate)`` (the asserts run as the test code executes), ``entry_point`` = the name the
script calls (a function, or ``Solution`` for LeetCode-style classes), ``prefix`` = LeetCode2k's
``extra_info.prefix`` (imports, ListNode/TreeNode) that goes before the solution.

Filter: logic excludes the zebra puzzles (``logic__zebra_puzzle*``, as in the BOTS paper), counted.

Evaluation sets (the BOTS paper evaluates "following GURU", App. B.2): GURU's own validation files in
``online_eval/``, in the same columns, without pass rates. **[decision]** ``online_eval/`` (the files
GURU validates on during training, as verl's ``val_files`` do here) rather than ``offline_eval/``
(its leaderboard files; convert one with ``--input FILE``). Files are matched by pattern because the
hub renamed some (``simulation__arcagi1_200`` became ``logic__arcagi1_200``); a prompt met twice is
counted as ``duplicate_prompt`` and kept once.

* ``guru_livecodebench``: ``codegen__livecodebench_279`` (DeepCoder's ``lcbv5`` test split, problems
  from 2024-08 on: after every LiveCodeBench problem in GURU's training file, which comes from the
  releases before; ``python -m data_prep.overlap`` checks it);
* ``guru_ordering_puzzles``: ``logic__ordering_puzzle_dataset_100``;
* ``guru_arc_agi``: ``logic__arcagi1_200`` (ARC-AGI-1 evaluation tasks; training has the public
  training tasks).

Their ``data_source`` is the benchmark's name (``livecodebench``, ``ordering_puzzles``, ``arc_agi``),
the name validation metrics and ``eval.tables`` use; GURU's own is kept as ``extra_info.dataset``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data_prep.embedded_datasets import LOGIC_INSTRUCTION, MATH_INSTRUCTION
from data_prep.schema import make_row
from data_prep.sources._common import (
    LEETCODE_IMPORTS,
    PROGRAM_INSTRUCTION,
    Hub,
    Record,
    finish,
    humaneval_truth,
    read_source,
    report_counts,
    stdio_truth,
    with_instruction,
)

REPO = "LLM360/guru-RL-92k"
WEAK, STRONG = "qwen2.5_7b_pass_rate", "qwen3_30b_pass_rate"
MATH_FILES = ("train/math__combined_54.4k.parquet",)
CODE_FILES = (
    "train/codegen__leetcode2k_1.3k.parquet",
    "train/codegen__livecodebench_440.parquet",
    "train/codegen__primeintellect_7.5k.parquet",
    "train/codegen__taco_8.8k.parquet",
)
LOGIC_FILES = (
    "train/logic__arcagi1_111.parquet",
    "train/logic__arcagi2_190.parquet",
    "train/logic__barc_1.6k.parquet",
    "train/logic__graph_logical_1.2k.parquet",
    "train/logic__ordering_puzzle_1.9k.parquet",
    "train/logic__zebra_puzzle_1.3k.parquet",
)
ZEBRA = "logic__zebra_puzzle"
GURU_MATH_SUFFIX = " Please output the final answer within \\boxed{}."
TRUTH = "reward_model.ground_truth"
_ENTRY_POINTS = (  # the name the solution must define: a function, or the class Solution
    re.compile(r"^check\(\s*([A-Za-z_]\w*)", re.MULTILINE),  # LeetCode2k: check(Solution().f)
    re.compile(r"_deep_eq\(\s*([A-Za-z_]\w*)"),  # TACO, PrimeIntellect: _deep_eq(f(*i), o)
    re.compile(r"assert\s+(Solution)\(\)\."),  # LiveCodeBench: assert Solution().f(...)
)
_NO_OP_CHECK = "\n\n\ndef check(candidate):  # the asserts above ran when this test code executed\n    pass\n"


def _math(rec: Record, question: str, truth) -> tuple[str, str]:
    if not isinstance(truth, str) or not truth.strip():
        raise rec.fail(TRUTH, f"math answer must be a non-empty string, got {truth!r}")
    return f"{question.removesuffix(GURU_MATH_SUFFIX).strip()}\n\n{MATH_INSTRUCTION}", truth.strip()


def _logic(rec: Record, question: str, truth) -> tuple[str, str]:
    if not isinstance(truth, (str, list)) or not truth:
        raise rec.fail(TRUTH, f"logic answer must be a string or a list, got {truth!r}")
    text = truth.strip() if isinstance(truth, str) else json.dumps(truth)
    return with_instruction(question, "<answer>", LOGIC_INSTRUCTION), text


def _code(rec: Record, question: str, truth) -> tuple[str, str]:
    try:
        tests = json.loads(truth) if isinstance(truth, str) else None
    except json.JSONDecodeError as e:
        raise rec.fail(TRUTH, f"invalid JSON: {e}") from e
    if not isinstance(tests, dict):
        raise rec.fail(TRUTH, "code tests must be a JSON object string")
    prompt = with_instruction(question, "```python", PROGRAM_INSTRUCTION)
    if "inputs" in tests and "outputs" in tests:
        return prompt, stdio_truth(rec, tests["inputs"], tests["outputs"])
    script = tests.get("functional")
    if not isinstance(script, str) or not script.strip():
        raise rec.fail(TRUTH, f"unknown code test format (keys {sorted(tests)})")
    entry = next((found[-1] for pattern in _ENTRY_POINTS if (found := pattern.findall(script))), None)
    if entry is None:
        raise rec.fail(TRUTH, "cannot find the function under test in the functional test script")
    # LeetCode2k ships its prefix; LiveCodeBench's Solution classes use List etc. unimported too.
    prefix = rec.get("extra_info", "prefix") or (LEETCODE_IMPORTS if entry == "Solution" else "")
    return prompt, humaneval_truth(script.rstrip() + _NO_OP_CHECK, entry, prefix)


def _rate(rec: Record, column: str) -> float:
    value = rec.require(column)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1
    if not ok:
        raise rec.fail(column, f"pass rate must be a number in [0, 1], got {value!r}")
    return float(value)


def _convert(
    name: str,
    prefix: str,
    ability: str,
    files: tuple[str, ...],
    build: Callable[[Record, str, object], tuple[str, str]],
    input_path: str | None,
    split: str,
    report: dict | None,
) -> list[dict]:
    hub = Hub(REPO, split="train", files=files, globs=(f"{prefix}*.parquet", f"train/{prefix}*.parquet"))
    rows: list[dict] = []
    counts = {"kept": 0} | ({"zebra_puzzle": 0} if prefix == "logic__" else {})
    for rec in read_source(input_path, hub, split, name):
        source = rec.text("data_source")
        if not source.startswith(prefix):
            raise rec.fail("data_source", f"expected a {prefix}* source, got {source!r}")
        if source.startswith(ZEBRA):
            counts["zebra_puzzle"] += 1
            continue
        system, question = rec.chat()
        prompt, truth = build(rec, question, rec.get("reward_model", "ground_truth"))
        level = {k: v for k in ("difficulty", "level") if (v := rec.get("extra_info", k)) is not None}
        rows.append(make_row(
            data_source=source, question=prompt, system=system, ability=ability, ground_truth=truth,
            index=len(rows), split=split, dataset=source, weak_pass_rate=_rate(rec, WEAK),
            strong_pass_rate=_rate(rec, STRONG), source_file=Path(rec.source).name, source_row=rec.row,
            **level,
        ))
    counts["kept"] = len(rows)
    report_counts(name, counts, report)
    return finish(rows, input_path, hub)


def convert_math(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """GURU math (``math__*``, 54.4k); the GURU boxed instruction is replaced by ours."""
    return _convert("guru_math", "math__", "math", MATH_FILES, _math, input_path, split, report)


def convert_code(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """GURU code (``codegen__*``: LeetCode2k, LiveCodeBench, PrimeIntellect, TACO; 18.1k)."""
    return _convert("guru_code", "codegen__", "code", CODE_FILES, _code, input_path, split, report)


def convert_logic(input_path: str | None = None, split: str = "train", *, report: dict | None = None) -> list[dict]:
    """GURU logic (``logic__*``) without the zebra puzzles (5.0k)."""
    return _convert("guru_logic", "logic__", "logic", LOGIC_FILES, _logic, input_path, split, report)


@dataclass(frozen=True)
class _Benchmark:
    """One GURU evaluation file: where it is, what its rows must be, how they convert."""

    name: str  # converter and data_source name
    pattern: str  # file name pattern inside EVAL_FOLDER
    source: re.Pattern  # GURU data_source values it holds
    ability: str
    build: Callable[[Record, str, object], tuple[str, str]]


EVAL_FOLDER = "online_eval"
_BENCHMARKS = {
    "livecodebench": _Benchmark("livecodebench", "codegen__livecodebench_*.parquet",
                                re.compile(r"codegen__livecodebench"), "code", _code),
    "ordering_puzzles": _Benchmark("ordering_puzzles", "logic__ordering_puzzle_dataset_*.parquet",
                                   re.compile(r"logic__ordering_puzzle"), "logic", _logic),
    "arc_agi": _Benchmark("arc_agi", "*__arcagi1_*.parquet", re.compile(r"(logic|simulation)__arcagi1"), "logic",
                          _logic),
}


def _convert_eval(bench: _Benchmark, input_path: str | None, split: str, report: dict | None) -> list[dict]:
    name = f"guru_{bench.name}"
    in_folder = f"{EVAL_FOLDER}/{bench.pattern}"
    hub = Hub(REPO, split="train", files=(in_folder,), globs=(bench.pattern, in_folder),
              note="or the same benchmark's file in offline_eval/")
    rows: list[dict] = []
    seen: set[str] = set()
    counts = {"kept": 0, "duplicate_prompt": 0}
    for rec in read_source(input_path, hub, split, name):
        source = rec.text("data_source")
        if not bench.source.match(source):
            raise rec.fail("data_source", f"expected a {bench.source.pattern}* source, got {source!r}")
        system, question = rec.chat()
        prompt, truth = bench.build(rec, question, rec.get("reward_model", "ground_truth"))
        if prompt in seen:
            counts["duplicate_prompt"] += 1
            continue
        seen.add(prompt)
        rows.append(make_row(
            data_source=bench.name, question=prompt, system=system, ability=bench.ability, ground_truth=truth,
            index=len(rows), split=split, dataset=source, source_file=Path(rec.source).name, source_row=rec.row,
        ))
    counts["kept"] = len(rows)
    report_counts(name, counts, report)
    return finish(rows, input_path, hub)


def convert_livecodebench(input_path: str | None = None, split: str = "test", *,
                          report: dict | None = None) -> list[dict]:
    """GURU's LiveCodeBench validation subset (279 problems from 2024-08 on)."""
    return _convert_eval(_BENCHMARKS["livecodebench"], input_path, split, report)


def convert_ordering_puzzles(input_path: str | None = None, split: str = "test", *,
                             report: dict | None = None) -> list[dict]:
    """GURU's ordering-puzzle validation set."""
    return _convert_eval(_BENCHMARKS["ordering_puzzles"], input_path, split, report)


def convert_arc_agi(input_path: str | None = None, split: str = "test", *, report: dict | None = None) -> list[dict]:
    """GURU's ARC-AGI(-1) validation set."""
    return _convert_eval(_BENCHMARKS["arc_agi"], input_path, split, report)
