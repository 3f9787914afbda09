"""An exact Countdown solver: an expression over the given numbers, each used once, equal to the target.

Depth-first search over combining two of the remaining values with ``+ - * /`` (exact: integers, and
:class:`fractions.Fraction` where a division leaves a remainder), memoised on the multiset of remaining
values. The expression is written with the fewest parentheses, ``*`` and ``/`` tight and ``+`` / ``-``
spaced as the embedded Countdown solutions are (``6/(1 - 3/4)``), so that the verifier
(``verl_ext.rewards.countdown``) scores it 1.0. The same input always gives the same expression.
"""

from __future__ import annotations

import operator
from fractions import Fraction
from functools import lru_cache


def _divide(a: int | Fraction, b: int | Fraction) -> int | Fraction:
    """``a / b`` exactly: an int when it divides (int arithmetic is far faster than Fraction's)."""
    if type(a) is int and type(b) is int and a % b == 0:
        return a // b
    q = Fraction(a) / b
    return q.numerator if q.denominator == 1 else q


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _divide}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_ATOM = 3

Move = tuple[int, int, str]  # values[i] op values[j] over the remaining values, sorted


def solve(numbers: list[int], target: int) -> str | None:
    """An expression using every number of ``numbers`` exactly once that equals ``target``; None if none exists."""
    if not numbers:
        return None
    moves = _moves(tuple(sorted(int(n) for n in numbers)), int(target))
    if moves is None:
        return None
    items = [(int(n), str(int(n)), _ATOM) for n in numbers]  # (value, expression, precedence)
    for i, j, op in moves:
        items.sort(key=lambda item: item[0])
        items = [it for k, it in enumerate(items) if k not in (i, j)] + [_combine(items[i], items[j], op)]
    return items[0][1]


@lru_cache(maxsize=1 << 16)
def _moves(values: tuple[int | Fraction, ...], target: int) -> tuple[Move, ...] | None:
    """The moves that reduce the sorted ``values`` to ``target``, or None."""
    if len(values) == 1:
        return () if values[0] == target else None
    for i in range(len(values)):
        for j in range(len(values)):
            if i == j:
                continue
            rest = [v for k, v in enumerate(values) if k not in (i, j)]
            for op in ("+", "*", "-", "/") if i < j else ("-", "/"):  # + and * once per pair
                if op == "/" and values[j] == 0:
                    continue
                value = _OPS[op](values[i], values[j])
                if not rest:  # the last move: no call, no cache entry
                    found = () if value == target else None
                else:
                    found = _moves(tuple(sorted([*rest, value])), target)
                if found is not None:
                    return ((i, j, op), *found)
    return None


def _combine(left: tuple, right: tuple, op: str) -> tuple:
    """``left op right`` with parentheses only where precedence (and ``-`` / ``/`` on the right) needs them."""
    prec = _PRECEDENCE[op]
    a = left[1] if left[2] >= prec else f"({left[1]})"
    b = right[1] if right[2] > prec or (right[2] == prec and op in "+*") else f"({right[1]})"
    return _OPS[op](left[0], right[0]), f"{a} {op} {b}" if prec == 1 else f"{a}{op}{b}", prec
