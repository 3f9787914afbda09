"""Math evaluation sets: AIME24, AIME25, AMC23, MATH500, Minerva, OlympiadBench.

Published formats (dataset cards / loaders that read them):

* ``HuggingFaceH4/aime_2024``: split ``train`` (30), parquet: ``id`` (int), ``problem``, ``solution``,
  ``answer`` (text), ``url``, ``year``.
* ``math-ai/aime25``: split ``test`` (30), ``test.jsonl``: ``id``, ``problem``, ``answer``.
* ``math-ai/amc23``: split ``test`` (40), parquet: ``id``, ``question``, ``answer`` (a float, e.g. 27.0),
  ``url``.
* ``HuggingFaceH4/MATH-500``: split ``test`` (500), ``test.jsonl``: ``problem``, ``solution``,
  ``answer``, ``subject``, ``level`` (int), ``unique_id``.
* ``math-ai/minervamath``: split ``test`` (272), ``test.jsonl``: ``question``, ``answer``.
* ``Hothan/OlympiadBench``, config ``OE_TO_maths_en_COMP`` (open-ended, text-only, English competition
  math; 674), split ``train``: ``id``, ``question``, optional ``context``, ``final_answer`` (a list of
  LaTeX strings like ``"$\\frac{1}{2}$"``), ``is_multiple_answer``, ``unit``, ``answer_type``, ... The
  ground truth is the answers without their ``$`` delimiters, joined by ", " when there are several.

Every row keeps its source id (``source_id``, duplicates are bad input) and level/subject fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from data_prep.embedded_datasets import MATH_INSTRUCTION
from data_prep.schema import make_row
from data_prep.sources._common import Converter, Hub, Record, answer_text, claim_id, finish, read_source, report_counts


@dataclass(frozen=True)
class Bench:
    data_source: str
    hub: Hub
    question: str = "problem"
    answer: str = "answer"
    id: str | None = "id"
    extra: tuple[str, ...] = ()  # source columns copied into extra_info
    question_of: Callable[[Record, str], str] | None = None
    answer_of: Callable[[Record, str], str] | None = None


def _olympiad_question(rec: Record, column: str) -> str:
    context = rec.get("context")
    question = rec.text(column)
    return f"{context.strip()}\n\n{question}" if isinstance(context, str) and context.strip() else question


def _olympiad_answer(rec: Record, column: str) -> str:
    answers = rec.require(column)
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip("$ ") for a in answers):
        raise rec.fail(column, f"expected a non-empty list of answers, got {answers!r}")
    return ", ".join(a.strip().strip("$").strip() for a in answers)


def _convert(bench: Bench, input_path: str | None, split: str, report: dict | None) -> list[dict]:
    rows: list[dict] = []
    seen: dict = {}
    for rec in read_source(input_path, bench.hub, split, bench.data_source):
        question = (bench.question_of or Record.text)(rec, bench.question)
        answer = (bench.answer_of or answer_text)(rec, bench.answer)
        extra = {k: rec.get(k) for k in bench.extra if rec.get(k) is not None}
        source_id = claim_id(seen, rec, bench.id) if bench.id else rec.row
        rows.append(make_row(
            data_source=bench.data_source, question=f"{question}\n\n{MATH_INSTRUCTION}", ability="math",
            ground_truth=answer, index=len(rows), split=split, dataset=bench.hub.repo, source_id=source_id, **extra,
        ))
    report_counts(bench.data_source, {"kept": len(rows)}, report)
    return finish(rows, input_path, bench.hub)


def _converter(bench: Bench) -> Converter:
    def convert(input_path: str | None = None, split: str = "test", *, report: dict | None = None) -> list[dict]:
        return _convert(bench, input_path, split, report)

    convert.__name__ = f"convert_{bench.data_source}"
    convert.__doc__ = f"{bench.hub.repo} -> verl rows (data_source {bench.data_source!r})."
    return convert


aime24 = _converter(Bench("aime24", Hub("HuggingFaceH4/aime_2024", split="train"), extra=("year", "url")))
aime25 = _converter(Bench("aime25", Hub("math-ai/aime25", split="test")))
amc23 = _converter(Bench("amc23", Hub("math-ai/amc23", split="test"), question="question", extra=("url",)))
math500 = _converter(Bench("math500", Hub("HuggingFaceH4/MATH-500", split="test"), id="unique_id",
                           extra=("level", "subject")))
minerva = _converter(Bench("minerva", Hub("math-ai/minervamath", split="test"), question="question", id=None))
olympiadbench = _converter(Bench(
    "olympiadbench", Hub("Hothan/OlympiadBench", config="OE_TO_maths_en_COMP", split="train"),
    question="question", answer="final_answer", extra=("subfield", "difficulty", "unit", "answer_type"),
    question_of=_olympiad_question, answer_of=_olympiad_answer,
))
