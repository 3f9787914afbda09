"""Code evaluation sets: MBPP and LiveCodeBench.

* ``google-research-datasets/mbpp``, config ``full``, split ``test`` (500), parquet: ``task_id``,
  ``text``, ``code`` (reference), ``test_list`` (3 asserts), ``test_setup_code``,
  ``challenge_test_list``. Ground truth, HumanEval style: ``test`` = the setup code and
  ``def check(candidate)`` holding every assert (``test_list`` + ``challenge_test_list``) with the
  function under test replaced by ``candidate``; ``entry_point`` = that function, the ``def`` of the
  reference ``code`` that the asserts call. The prompt shows ``test_list`` (the standard MBPP prompt).
* ``livecodebench/code_generation_lite``, files ``test.jsonl`` .. ``test6.jsonl`` (release_v1 .. v6;
  the hub's loading script is gone, the files are read as JSON lines): ``question_title``,
  ``question_content``, ``platform``, ``question_id``, ``contest_id``, ``contest_date``,
  ``starter_code``, ``difficulty``, ``public_test_cases`` (JSON text: ``[{input, output, testtype}]``),
  ``private_test_cases`` (JSON text, or base64 of zlib of a pickled JSON string, as in the official
  ``lcb_runner``; unpickled with a loader that refuses every class, so only plain strings load) and
  ``metadata`` (JSON text with ``func_name``). Tests are public + private, as in the official
  evaluation. ``stdin`` problems -> ``{"inputs", "outputs"}``. ``functional`` (LeetCode) problems are
  converted, not skipped: each input line is a JSON argument and the output is JSON (as
  ``lcb_runner.grade_call_based`` reads them); ``entry_point`` = ``Solution`` and the test is
  ``check(candidate)`` asserting ``candidate().<func_name>(*args) == expected`` for every case;
  ``prefix`` = the usual imports (the starter code uses ``List`` etc. unimported). The report counts
  each kind. Every release v1-v6 (~1,055 problems): it contains the LiveCodeBench problems of GURU's
  training file, so the BOTS code recipes validate on ``guru_livecodebench`` instead.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib

from data_prep.schema import make_row
from data_prep.sources._common import (
    LEETCODE_IMPORTS,
    PROGRAM_INSTRUCTION,
    Hub,
    Record,
    claim_id,
    finish,
    humaneval_truth,
    read_source,
    report_counts,
    stdio_truth,
)

MBPP = Hub("google-research-datasets/mbpp", config="full", split="test")
LCB = Hub(
    "livecodebench/code_generation_lite", split="train", globs=("test*.jsonl",),
    files=tuple(f"test{n}.jsonl" for n in ("", 2, 3, 4, 5, 6)),
)
_DEF_RE = re.compile(r"^def\s+(\w+)\s*\(", re.MULTILINE)
_CALL_CHECK = '''import json


_CASES = {cases!r}


def check(candidate):
    method = getattr(candidate(), {method!r})
    for arguments, expected in _CASES:
        args = [json.loads(line) for line in arguments.split("\\n")]
        assert method(*args) == json.loads(expected)
'''


def _call(name: str) -> str:
    """Regex of a call of the plain function ``name`` (not ``obj.name(``)."""
    return rf"(?<![\w.]){name}\s*\("


def mbpp(input_path: str | None = None, split: str = "test", *, report: dict | None = None) -> list[dict]:
    """MBPP (full) as HumanEval-style ``check(candidate)`` tests."""
    rows: list[dict] = []
    seen: dict = {}
    for rec in read_source(input_path, MBPP, split, "mbpp"):
        task_id = claim_id(seen, rec, "task_id")
        shown, challenge = rec.require("test_list"), rec.get("challenge_test_list") or []
        asserts = shown + challenge if isinstance(shown, list) and isinstance(challenge, list) else None
        if not asserts or not all(isinstance(a, str) and a.strip() for a in asserts):
            raise rec.fail("test_list", "expected a non-empty list of assert statements")
        called = (name for name in _DEF_RE.findall(rec.text("code")) if re.search(_call(name), shown[0]))
        entry = next(called, None)
        if entry is None:
            raise rec.fail("code", "no function of the reference code is called by the first test")
        body = "\n".join("    " + re.sub(_call(entry), "candidate(", a.strip()) for a in asserts)
        setup = (rec.get("test_setup_code") or "").strip()
        test = f"{setup}\n\n\ndef check(candidate):\n{body}\n".lstrip()
        question = f"{rec.text('text')}\nYour code should pass these tests:\n\n" + "\n".join(shown)
        rows.append(make_row(
            data_source="mbpp", question=f"{question}\n\n{PROGRAM_INSTRUCTION}", ability="code",
            ground_truth=humaneval_truth(test, entry), index=len(rows), split=split, dataset=MBPP.repo,
            source_id=task_id,
        ))
    report_counts("mbpp", {"kept": len(rows)}, report)
    return finish(rows, input_path, MBPP)


class _TextOnly(pickle.Unpickler):
    """Unpickles plain values only: any class or function reference is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")


def _test_cases(rec: Record, field: str) -> list[dict]:
    text = rec.require(field)
    try:
        cases = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        try:
            packed = zlib.decompress(base64.b64decode(str(text).encode("utf-8")))
            cases = json.loads(_TextOnly(io.BytesIO(packed)).load())
        except Exception as e:
            raise rec.fail(field, f"neither JSON nor LiveCodeBench's compressed test format: {e}") from e
    keys = {"input", "output", "testtype"}
    if not isinstance(cases, list) or not all(isinstance(c, dict) and keys <= c.keys() for c in cases):
        raise rec.fail(field, "expected a list of {input, output, testtype} test cases")
    return cases


def _func_name(rec: Record) -> str | None:
    metadata = rec.require("metadata")
    try:
        metadata = json.loads(metadata) if isinstance(metadata, str) else metadata
    except json.JSONDecodeError as e:
        raise rec.fail("metadata", f"invalid JSON: {e}") from e
    return metadata.get("func_name") if isinstance(metadata, dict) else None


def _question(rec: Record, starter: str) -> str:
    content = rec.text("question_content")
    if starter:
        return f"{content}\n\nUse this starter code:\n```python\n{starter}\n```\n\n{PROGRAM_INSTRUCTION}"
    return (f"{content}\n\nRead the input from stdin and write the answer to stdout (do not test on the sample "
            f"inputs yourself).\n\n{PROGRAM_INSTRUCTION}")


def livecodebench(input_path: str | None = None, split: str = "test", *, report: dict | None = None) -> list[dict]:
    """LiveCodeBench code generation; stdin problems as stdin/stdout tests, LeetCode ones as HumanEval."""
    rows: list[dict] = []
    seen: dict = {}
    counts = {"kept": 0, "stdin": 0, "functional": 0}
    for rec in read_source(input_path, LCB, split, "livecodebench"):
        question_id = claim_id(seen, rec, "question_id")
        cases = _test_cases(rec, "public_test_cases") + _test_cases(rec, "private_test_cases")
        kinds = {c["testtype"] for c in cases}
        if len(kinds) != 1 or not kinds <= {"stdin", "functional"}:
            raise rec.fail("public_test_cases", f"expected one test type, stdin or functional, got {sorted(kinds)}")
        kind = kinds.pop()
        starter = (rec.get("starter_code") or "").strip()
        if kind == "stdin":
            truth = stdio_truth(rec, [c["input"] for c in cases], [c["output"] for c in cases])
        else:
            func_name = _func_name(rec)
            if not func_name:
                raise rec.fail("metadata", "functional tests need metadata.func_name")
            check = _CALL_CHECK.format(cases=[(c["input"], c["output"]) for c in cases], method=func_name)
            truth = humaneval_truth(check, "Solution", LEETCODE_IMPORTS)
        counts[kind] += 1
        rows.append(make_row(
            data_source="livecodebench", question=_question(rec, starter), ability="code", ground_truth=truth,
            index=len(rows), split=split, dataset=LCB.repo, source_id=question_id, platform=rec.get("platform"),
            difficulty=rec.get("difficulty"), contest_date=rec.get("contest_date"), test_type=kind,
        ))
    counts["kept"] = len(rows)
    report_counts("livecodebench", counts, report)
    return finish(rows, input_path, LCB)
