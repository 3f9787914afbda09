"""The verifiers' ``ast.parse`` under threads (``verl_ext.rewards.python_ast``): with a thread switch forced inside the
AST constructor (a tiny switch interval and garbage collections running a ``__del__``), plain ``ast.parse`` from four
threads raises ``SystemError: AST constructor recursion depth mismatch`` on CPython 3.11; the verifiers' parse, the
code verifier and the Countdown verifier do not."""

from __future__ import annotations

import ast
import gc
import sys
import threading

import pytest

from verl_ext.rewards import code, countdown, python_ast

SOURCE = "\n".join(f"def f{i}(x):\n    return [(x + {i}) * (y - {i}) for y in range(x) if y % 2]" for i in range(5))


class _Finalised:
    def __del__(self):
        sum(range(50))  # Python code in the middle of a collection: the interpreter may switch threads here


def _hammer(call, threads=4, rounds=100) -> list[str]:
    """Run ``call()`` ``rounds`` times in each of ``threads`` threads with switches forced; the errors raised."""
    errors: list[str] = []

    def work():
        for _ in range(rounds):
            cycle = _Finalised()
            cycle.self = cycle  # freed only by the collector, whose __del__ runs mid-parse
            try:
                call()
            except Exception as e:  # noqa: BLE001 - any error a thread sees is the test's
                errors.append(f"{type(e).__name__}: {e}")

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)
    try:
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    return errors


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the race shown is CPython 3.11's")
def test_plain_ast_parse_races_under_these_conditions():
    assert any("recursion depth mismatch" in e for e in _hammer(lambda: ast.parse(SOURCE)))


def test_the_verifiers_parse_does_not_race():
    assert _hammer(lambda: python_ast.parse(SOURCE)) == []
    assert _hammer(lambda: code.extract_program(SOURCE)) == []
    expression = "((1 + 2) * (3 - 4)) / (5 + 6) - " * 4 + "1"
    assert countdown.safe_eval(expression) == pytest.approx(-5 / 11)  # X - X - X - X - 1, X = -3 / 11
    assert _hammer(lambda: countdown.safe_eval(expression)) == []
