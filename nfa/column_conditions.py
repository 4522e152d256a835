"""Conditions that read only the current event, evaluated a column at a time with numpy.

The kernel (:mod:`cep.nfa.kernel`) reads, per event, whether such a condition holds
from a row of booleans this module fills for a whole batch.  The semantics are the
kernel's (:func:`cep.nfa.kernel.eval_cond`, ``_unary``, ``_binary``): truth values are
floats, 1 true, 0 false, NaN unknown (null), SQL's three-valued logic.

Written with numpy rather than compiled with numba: the compiled version, loops the
compiler vectorised, cost 2.5 s of the kernel's first compile (a quarter of it), for a
pass that takes a few milliseconds per million events either way.

>>> import numpy as np
>>> from cep.nfa import kernel as k
>>> prog = np.array([[k.OP_COL, 0, 0, 0], [k.OP_CONST, 0, 0, 0], [k.OP_LT, 0, 0, 0]])
>>> out = np.empty(3, np.bool_)
>>> eval_columns(0, np.array([[1.0, 9.0, np.nan]]), 3, prog, np.array([5.0]),
...              np.array([0, 3]), out)
>>> out.tolist()
[True, False, False]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from cep.nfa import kernel as k

#: the comparison ops and their numpy functions (NaN on either side: unknown)
_COMPARE = {k.OP_EQ: np.equal, k.OP_NE: np.not_equal, k.OP_LT: np.less,
            k.OP_LE: np.less_equal, k.OP_GT: np.greater, k.OP_GE: np.greater_equal}
_AND, _OR = (k.OP_AND3, k.OP_BAND), (k.OP_OR3, k.OP_BOR)
#: each comparison's opposite, true where it is false (NaN makes both false)
_OPPOSITE = {k.OP_EQ: k.OP_NE, k.OP_NE: k.OP_EQ, k.OP_LT: k.OP_GE, k.OP_GE: k.OP_LT,
             k.OP_GT: k.OP_LE, k.OP_LE: k.OP_GT}


def eval_columns(cid: int, C: np.ndarray, n: int, prog: np.ndarray, consts: np.ndarray,
                 cstart: np.ndarray, out: np.ndarray) -> None:
    """Whether condition ``cid`` holds (is true: not false, not unknown) for each of the
    first ``n`` events of the columns ``C``, into ``out[:n]``."""
    lo, hi = int(cstart[cid]), int(cstart[cid + 1])
    ops = prog[lo:hi]
    if (len(ops) == 3 and ops[0, 0] == k.OP_COL and ops[1, 0] == k.OP_CONST
            and int(ops[2, 0]) in _COMPARE):
        # a field against a constant, the usual condition
        with np.errstate(invalid="ignore"):
            out[:n] = _compared(int(ops[2, 0]), C[ops[0, 1], :n], consts[ops[1, 1]])
        return
    with np.errstate(all="ignore"):
        holds = _holds(ops, C, n, consts)
        if holds is not None:
            out[:n] = holds
            return
        top = _evaluate(ops, C, n, consts)
    np.equal(top, 1.0, out=out[:n])


def condition_key(ops: np.ndarray, lo: int, column: Callable[[int], Hashable],
                  constants: Sequence[Any]) -> tuple[Any, ...]:
    """What a condition's ops (``prog[lo:hi]``) compute, apart from one program's
    numbering: each column as ``column(index)`` names what it holds, each constant by its
    value and type, short cuts relative to the condition's start.  Conditions with equal
    keys hold for the same events of the same batch: the rules of a job evaluate each
    once (a hundred rules, 233 conditions over the event, 57 of them distinct).

    >>> prog = np.array([[k.OP_COL, 0, 0, 0], [k.OP_CONST, 1, 0, 0], [k.OP_LT, 0, 0, 0]])
    >>> condition_key(prog, 0, ["amount"].__getitem__, [9.0, 5.0])
    ((0, 'amount', 0, 0), (1, ('float', 5.0), 0, 0), (10, 0, 0, 0))
    """
    key = []
    for op, a, width, null_in in ops.tolist():
        if op == k.OP_COL:
            a = column(a)
        elif op == k.OP_CONST:
            a = _typed(constants[a])
        elif op == k.OP_ISIN:
            a = tuple(_typed(v) for v in constants[a:a + width])
        elif op in (k.OP_SKIP_IF_FALSE, k.OP_SKIP_IF_TRUE):
            a -= lo
        key.append((op, a, width, null_in))
    return tuple(key)


def _typed(value: Any) -> tuple[str, Any]:
    return type(value).__name__, value


def _holds(ops: np.ndarray, C: np.ndarray, n: int, consts: np.ndarray) -> Any:
    """Whether the condition holds, its truth values kept as two boolean arrays, true and
    false (unknown: neither), which three-valued logic's ops take and give exactly: an AND
    is true where both are and false where either is, a NOT swaps them, a comparison is
    true where it compares true and false where its opposite does (NaN compares neither).
    One or two boolean passes per op, where floats 1/0/NaN take three or four.  None for
    a condition using a number as a truth value (the caller evaluates it as floats)."""
    stack: list[tuple[bool, Any]] = []  # (a truth value, as (true, false)?  the value)
    for op, a, width, null_in in ops.tolist():
        if op == k.OP_COL:
            stack.append((False, C[a, :n]))
        elif op == k.OP_CONST:
            stack.append((False, np.float64(consts[a])))
        elif op == k.OP_SLOT:
            stack.append((False, np.float64(np.nan)))
        elif op == k.OP_TRUE:
            stack.append((True, (np.True_, np.False_)))
        elif op in (k.OP_SKIP_IF_FALSE, k.OP_SKIP_IF_TRUE):
            continue
        elif op in _COMPARE or op in _AND or op in _OR or op not in _UNARY_OPS:
            (yb, y), (xb, x) = stack.pop(), stack.pop()
            if op in _COMPARE:
                if xb or yb:
                    return None
                stack.append((True, (_compared(op, x, y), _compared(_OPPOSITE[op], x, y))))
            elif op in _AND or op in _OR:
                if not (xb and yb):
                    return None
                (xt, xf), (yt, yf) = x, y
                stack.append((True, (xt & yt, xf | yf) if op in _AND else (xt | yt, xf & yf)))
            else:  # arithmetic
                if xb or yb:
                    return None
                stack.append((False, _binary(op, x, y)))
        else:
            xb, x = stack.pop()
            truth = _truth_of(op, xb, x, a, width, null_in, consts)
            if truth is None:
                return None
            stack.append(truth)
    top_is_truth, top = stack[0]
    return np.broadcast_to(top[0] if top_is_truth else top == 1.0, (n,))


def _truth_of(op: int, is_truth: bool, x: Any, a: int, width: int, null_in: int,
              consts: np.ndarray) -> tuple[bool, Any] | None:
    """A one-operand op of :func:`_holds` (``x`` a truth value as (true, false), or a
    number); None where it takes a number as a truth value."""
    if op == k.OP_MATH:
        return None if is_truth else (False, _math(x, a))
    if is_truth:
        xt, xf = x
        if op in (k.OP_NOT3, k.OP_BNOT):
            return True, (xf, xt)
        if op == k.OP_IS_TRUE:
            return True, (xt, ~xt)
        if op == k.OP_ISNULL:  # a truth value that is unknown
            known = xt | xf
            return True, (~known, known)
        return None
    if op == k.OP_ISNULL:
        null = np.isnan(x)
        return True, (null, ~null)
    if op == k.OP_TRUTH:
        return True, ((x != 0.0) & ~np.isnan(x), x == 0.0)
    if op == k.OP_ISIN:
        hit = np.isin(x, consts[a:a + width])
        # no hit in a list holding NULL is unknown
        miss = np.zeros_like(hit) if null_in else ~hit & ~np.isnan(x)
        return True, (hit, miss)
    if op == k.OP_IS_TRUE:
        hit = x == 1.0
        return True, (hit, ~hit)
    return None  # NOT of a number


def _compared(op: int, x: Any, y: Any) -> Any:
    """Whether ``x op y`` holds: NaN (null) on either side compares false in numpy, which
    is what "holds" wants of unknown, but for ``!=``, which numpy finds true."""
    if op == k.OP_NE:
        return (x != y) & ~np.isnan(x) & ~np.isnan(y)
    return _COMPARE[op](x, y)


def _evaluate(ops: np.ndarray, C: np.ndarray, n: int, consts: np.ndarray) -> Any:
    """The bytecode's value over the events: an array of n floats (or a float, broadcast)."""
    stack: list[Any] = []
    for op, a, width, null_in in ops.tolist():
        if op == k.OP_COL:
            stack.append(C[a, :n])
        elif op == k.OP_CONST:
            stack.append(np.float64(consts[a]))
        elif op == k.OP_TRUE:
            stack.append(np.float64(1.0))
        elif op == k.OP_SLOT:  # no slot in a condition of the event alone: unknown
            stack.append(np.float64(np.nan))
        elif op in (k.OP_SKIP_IF_FALSE, k.OP_SKIP_IF_TRUE):
            continue  # both operands are evaluated over the batch
        elif op in _UNARY_OPS:
            stack.append(_UNARY_OPS[op](stack.pop(), a, width, null_in, consts))
        else:
            y = stack.pop()
            stack.append(_binary(op, stack.pop(), y))
    return np.broadcast_to(stack[0], (n,))


def _binary(op: int, x: Any, y: Any) -> Any:
    unknown = np.isnan(x) | np.isnan(y)
    if op in _COMPARE:
        return np.where(unknown, np.nan, _COMPARE[op](x, y))
    if op in _AND:
        return np.where((x == 0.0) | (y == 0.0), 0.0, np.where(unknown, np.nan, 1.0))
    if op in _OR:
        return np.where((x == 1.0) | (y == 1.0), 1.0, np.where(unknown, np.nan, 0.0))
    if op == k.OP_ADD:
        return x + y
    if op == k.OP_SUB:
        return x - y
    if op == k.OP_MUL:
        return x * y
    if op == k.OP_DIV:
        return np.where((y == 0.0) | unknown, np.nan, x / y)
    if op == k.OP_AVG:
        return np.where(y == 0.0, np.nan, x / y)
    if op == k.OP_COALESCE:
        return np.where(np.isnan(x), y, x)
    raise ValueError(f"op {op} is not a two-operand op")


def _not(v: Any, *_: Any) -> Any:
    return 1.0 - v  # NaN stays NaN


def _isnull(v: Any, *_: Any) -> Any:
    return np.isnan(v).astype(np.float64)


def _truth(v: Any, *_: Any) -> Any:
    return np.where(np.isnan(v), np.nan, (v != 0.0).astype(np.float64))


def _is_true(v: Any, *_: Any) -> Any:
    return (v == 1.0).astype(np.float64)


def _isin(v: Any, a: int, width: int, null_in: int, consts: np.ndarray) -> Any:
    hit = np.isin(v, consts[a:a + width])
    # x IN (..., NULL) is unknown on no other hit
    return np.where(np.isnan(v), np.nan, np.where(hit, 1.0, np.nan if null_in else 0.0))


def _math(v: Any, fn: int, *_: Any) -> Any:
    """cep.expr.MATH[fn] of ``v``; NaN (null) for anything not finite (as math_fn)."""
    r = _MATH[fn](np.asarray(v, np.float64))
    return np.where(np.isfinite(r), r, np.nan)


def _hour(v: np.ndarray) -> np.ndarray:  # hour of the day, UTC, of epoch milliseconds
    h = np.floor(v / 3600000.0)
    return h - np.floor(h / 24.0) * 24.0


def _weekday(v: np.ndarray) -> np.ndarray:  # ISO day of the week (Monday 1); 1970-01-01: Thu
    d = np.floor(v / 86400000.0) + 3.0
    return d - np.floor(d / 7.0) * 7.0 + 1.0


#: cep.expr.MATH's functions by number, as math_fn numbers them
_MATH = (
    lambda v: np.where(v >= 0.0, np.sqrt(v), np.nan),
    np.exp,
    lambda v: np.where(v > 0.0, np.log(v), np.nan),
    np.sin, np.cos, np.tan,
    lambda v: np.where((v >= -1.0) & (v <= 1.0), np.arcsin(v), np.nan),
    lambda v: np.where((v >= -1.0) & (v <= 1.0), np.arccos(v), np.nan),
    np.arctan, np.floor, np.ceil,
    lambda v: v * (np.pi / 180.0),
    lambda v: v * (180.0 / np.pi),
    np.abs, _hour, _weekday,
)

_UNARY_OPS = {k.OP_NOT3: _not, k.OP_BNOT: _not, k.OP_ISNULL: _isnull, k.OP_TRUTH: _truth,
              k.OP_IS_TRUE: _is_true, k.OP_ISIN: _isin, k.OP_MATH: _math}
