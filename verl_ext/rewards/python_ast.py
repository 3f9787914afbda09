"""``ast.parse`` for the verifiers, one parse at a time.

CPython 3.11's AST constructor keeps its recursion depth in state every thread shares; a thread switch inside it
(e.g. a garbage collection running a ``__del__``) makes a concurrent parse raise ``SystemError: AST constructor
recursion depth mismatch`` (seen on 3.11.7; python/cpython#106905 is of that family). verl's reward managers score
in an executor's threads (``run_in_executor``), so the code and Countdown verifiers parse under one lock."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)``, serialised across threads."""
    with _LOCK:
        return ast.parse(source, mode=mode)
