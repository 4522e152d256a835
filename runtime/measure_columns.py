"""Measures read from a table's stage columns: ``count``, ``first``, ``last``, ``sum``,
``avg``, ``min`` and ``max`` of one stage (and field), a column at a time, with the values
:func:`cep.measures.measure` gives over each match.

A stage column is a list per match of the events the stage took (structs of the input's
columns, see :mod:`cep.runtime.tables`).  ``count`` is the lists' lengths; ``first`` and
``last`` take one event's field; the aggregates run over each list's values in order,
skipping nulls (NaN is null, as expressions read it): a sum over nothing is 0, the others
null; sums add left to right, as the expression does, so floats round alike.  A measure of
another form, or over a field of a type expressions convert (decimals, durations, text
that would be added), is left to the per-match path (None here).

>>> import pyarrow as pa
>>> from cep import count, first, sum
>>> small = pa.array([[{"v": 1.0}, {"v": 2.5}], []], pa.list_(pa.struct([("v", pa.float64())])))
>>> [measure_column(m, {"small": small}).to_pylist()
...  for m in (count("small"), first("small", "v"), sum("small", "v"))]
[[2, 0], [1.0, None], [3.5, 0.0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from cep.expr import Aggregate, Expr, StageRef
from cep.nfa.jit_cache import cacheable

#: numba caches compiled code on disk when it can (see cep.nfa.jit_cache)
CACHE = cacheable(__file__)

#: aggregate codes of the kernel
SUM, MIN, MAX = 0, 1, 2


@njit(cache=CACHE, nogil=True)
def _segments(values, valid, offsets, op):
    """Per list (``offsets[j]:offsets[j + 1]``), the sum, min or max of its valid values,
    left to right, and how many there were."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, values.dtype)
    seen = np.zeros(n, np.int64)
    for j in range(n):
        for i in range(offsets[j], offsets[j + 1]):
            if not valid[i]:
                continue
            v = values[i]
            if seen[j] == 0:
                out[j] = v
            elif op == SUM:
                out[j] = out[j] + v
            elif op == MIN:
                if v < out[j]:
                    out[j] = v
            elif v > out[j]:
                out[j] = v
            seen[j] += 1
    return out, seen


def measure_column(expr: Expr, lists: Mapping[str, Any]) -> Any:
    """``expr`` over each row's events of its stage, as an Arrow array; None when it is not
    a measure of one stage's field that a column gives as the per-match path does."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stage = getattr(expr, "stage", None)
    if stage not in lists:
        return None
    column = lists[stage]
    if isinstance(expr, Aggregate) and expr.func == "count":
        return pc.list_value_length(column).fill_null(0).cast(pa.int64())
    field = _field(column, getattr(expr, "field", None))
    if field is None:
        return None
    offsets = column.offsets.to_numpy().astype(np.int64)
    kind = field.type
    if isinstance(expr, StageRef) and expr.kind in ("first", "last"):
        return _one(field, offsets, expr.kind == "first")
    if not isinstance(expr, Aggregate) or pa.types.is_boolean(kind) or (
            expr.func in ("sum", "avg") and not _numeric(kind)):
        return None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return None  # text compares in Python as code points: left to that path
    valid = ~_nulls(field)
    as_int = pa.types.is_integer(kind) or pa.types.is_timestamp(kind)
    values = (field.cast(pa.int64()) if as_int else field.cast(pa.float64())).fill_null(0)
    numbers = values.to_numpy(zero_copy_only=False)
    op = {"sum": SUM, "avg": SUM, "min": MIN, "max": MAX}[expr.func]
    out, seen = _segments(numbers, valid, offsets, op)
    if expr.func == "sum":
        return pa.array(out)  # over nothing: 0
    if expr.func == "avg":
        return pa.array(out / np.maximum(seen, 1), mask=seen == 0)
    return pa.array(out, mask=seen == 0).cast(kind)


def _field(column: Any, name: str | None) -> Any:
    """The values of field ``name`` of every event in the lists (None: no such field, or a
    type expressions convert before they compute with it)."""
    import pyarrow as pa

    events = column.values
    if name is None or not pa.types.is_struct(events.type):
        return None
    at = events.type.get_field_index(name)
    if at < 0:
        return None
    field = events.field(at)
    kind = field.type
    if (_numeric(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_boolean(kind) or pa.types.is_timestamp(kind)):
        return field
    return None


def _numeric(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def _nulls(field: Any) -> np.ndarray:
    """Which values expressions read as null: nulls, and NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    null = field.is_null()
    if pa.types.is_floating(field.type):
        null = pc.or_(null, pc.fill_null(pc.is_nan(field), False))
    return null.to_numpy(zero_copy_only=False)


def _one(field: Any, offsets: np.ndarray, first: bool) -> Any:
    """Each list's first (or last) event's value of the field; null for an empty list."""
    import pyarrow as pa
    import pyarrow.compute as pc

    empty = offsets[1:] == offsets[:-1]
    if len(field) == 0:
        return pa.nulls(len(empty), field.type)
    at = offsets[:-1] if first else offsets[1:] - 1
    taken = field.take(pa.array(np.where(empty, 0, at)))
    return pc.if_else(pa.array(empty | _nulls(taken)), pa.scalar(None, field.type), taken)
