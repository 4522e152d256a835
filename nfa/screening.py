"""Screening events against the column types a pattern reads: which rows of a batch hold a
field whose value does not fit (text where the pattern compares numbers, say), each with
the reason, found a column at a time.  Such a row is refused whole (the runtime makes it a
dead letter) instead of failing the batch.  The numba engine screens against the types
it was compiled for; the reference engine, running expressions, against the types the
pattern implies (:func:`cep.nfa.bytecode.schema_from_pattern`): both then refuse the
same events for the same reason.

>>> from cep.nfa.events import Events
>>> misfits(Events.of([{"v": "text"}, {"v": 3}]), {"v": "numeric"}, ["v"])
{0: "field 'v' is 'text': the pattern needs a number"}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

from cep.errors import CEPError
from cep.expr import BOOLEAN, NUMERIC, STRING, value_of
from cep.nfa.events import Events
from cep.nfa.stray_text import stray_text
from cep.nfa.table_names import has_column


def misfits(events: Events, schema: Mapping[str, str], names: list[str]) -> dict[int, str]:
    """The rows of ``events`` (by position) whose fields ``names`` do not fit ``schema``
    (field -> numeric, string or boolean), each with the reason."""
    if not len(events) or not names:
        return {}
    if events.is_table:
        return _screen_table(events.rows, schema, names)
    if events.is_frame:
        return _screen_frame(events, schema, names)
    return _screen_objects(events.objects(), schema, names)


def beyond_float64(events: Events, schema: Mapping[str, str], names: list[str]
                   ) -> dict[int, str]:
    """The rows of ``events`` whose integer (or decimal) in a field ``names`` reads as a
    number is beyond 2**53, each with the reason: float64, the numba engine's numbers,
    cannot tell such a value from its neighbours (the reference engine reads it exactly).

    >>> beyond_float64(Events.of([{"v": 2**62 + 1}, {"v": 3}]), {"v": "numeric"}, ["v"])[0][:40]
    "field 'v' is 4611686018427387905, beyond"
    """
    bad: dict[int, str] = {}
    for name in names:
        if schema.get(name, NUMERIC) != NUMERIC:
            continue
        # the rules of one job screen the same rows: found once (Events.cache)
        big = events.cache.get(("beyond 2**53", name))
        if big is None:
            big = events.cache[("beyond 2**53", name)] = _big_integers(events.column(name))
        for i, v in big:
            bad.setdefault(i, f"field {name!r} is {v}, {BEYOND_FLOAT64}")
    return bad


#: why an integer beyond 2**53 is refused (the numba engine's reason)
BEYOND_FLOAT64 = ("beyond 2**53: the numba engine compares numbers as float64, which cannot "
                  "tell it from its neighbours (use engine='reference', or give it as text)")


def _big_integers(values: Any) -> list[tuple[int, Any]]:
    """(row, value) of the integers and decimals beyond 2**53 among a column's values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    module = type(values).__module__
    if module.startswith("pyarrow"):
        kind = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
        if not ((pa.types.is_integer(kind) and kind.bit_width == 64) or (
                pa.types.is_decimal(kind) and kind.precision - kind.scale > 15)):
            return []
        floats = pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    else:
        array = values.to_numpy() if module.startswith("pandas") else _as_array(values)
        if array.dtype.kind in "iu" and array.dtype.itemsize == 8:
            floats = array.astype(np.float64)
        elif array.dtype == object:
            ints = [(i, v) for i, v in enumerate(array.tolist())
                    if type(v) is int or isinstance(v, Decimal)]
            return [(i, v) for i, v in ints if abs(v) > _EXACT]
        else:
            return []
    with np.errstate(invalid="ignore"):
        rows = np.flatnonzero(np.abs(floats) > _EXACT)
    if not len(rows):
        return []
    picked = values.take(pa.array(rows)).to_pylist() if module.startswith("pyarrow") else [
        array[i].item() if hasattr(array[i], "item") else array[i] for i in rows.tolist()]
    return list(zip(rows.tolist(), picked, strict=True))


def _as_array(values: Any) -> np.ndarray:
    """Python values as a numpy array; of objects when they are no one shape (a JSON list
    among numbers: numpy refuses such a list, and it is the screening's to refuse)."""
    try:
        return np.asarray(values)
    except ValueError:
        return np.fromiter(values, dtype=object, count=len(values))


#: the largest magnitude below which float64 holds every integer
_EXACT = 2**53


def _screen_table(table: Any, schema: Mapping[str, str], names: list[str]) -> dict[int, str]:
    """Rows of an Arrow table whose fields do not fit: a column of the wrong type misfits in
    every row where it is not null (a column is one type); a missing column is null; the
    text a column of numbers held (:mod:`cep.nfa.stray_text`) misfits in its rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bad: dict[int, str] = {}
    for name in names:
        stray = stray_text(table, name)
        kind = schema.get(name, NUMERIC)
        if stray is not None and kind != STRING:
            # text among numbers (CSV): null in the column, kept apart; a pattern reading
            # the field as text reads it there (and refuses the numbers, below)
            for i, text in zip(stray[0].tolist(), stray[1], strict=True):
                bad.setdefault(i, _misfit(name, text, kind))
        if not has_column(table, name):
            continue  # null in every row
        column = table.column(name)
        t = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if pa.types.is_null(t) or _fits(t, schema.get(name, NUMERIC)):
            continue
        valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(valid)
        if not len(rows):
            continue
        values = column.take(pa.array(rows)).to_pylist()
        for i, v in zip(rows.tolist(), values, strict=True):
            bad.setdefault(i, _misfit(name, v, schema.get(name, NUMERIC)))
    return bad


def _screen_frame(events: Events, schema: Mapping[str, str], names: list[str]
                  ) -> dict[int, str]:
    """Rows of a pandas frame whose fields do not fit: a column Arrow can type is screened
    as a table's; only a column of mixed Python values is looked at value by value."""
    import pyarrow as pa

    typed: dict[str, Any] = {}
    mixed: list[str] = []
    for name in names:
        if name not in events.rows.columns:
            continue  # null in every row
        try:
            typed[name] = pa.Array.from_pandas(events.rows[name])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            mixed.append(name)
    bad = _screen_table(pa.table(typed), schema, list(typed)) if typed else {}
    if mixed:
        for i, reason in _screen_objects(events.objects(), schema, mixed).items():
            bad.setdefault(i, reason)
    return bad


def _fits(t: Any, kind: str) -> bool:
    import pyarrow as pa

    if kind == STRING:
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    if kind == BOOLEAN:
        return pa.types.is_boolean(t)
    # true/false is no number (as for Python values, see check_fields)
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t))


def _screen_objects(events: list[Any], schema: Mapping[str, str],
                    names: list[str]) -> dict[int, str]:
    """Python events whose fields do not fit, checked a column at a time: when every value
    of a column has the expected Python type (the usual case) no event is looked at twice."""
    fine = {NUMERIC: {int, float}, STRING: {str}, BOOLEAN: {bool}}
    suspects: set[int] = set()
    for name in names:
        allowed = fine.get(schema.get(name, NUMERIC), set()) | {type(None)}
        values = [value_of(e, name) for e in events]
        types = {type(v) for v in values}
        if not types <= allowed:
            suspects.update(i for i, v in enumerate(values) if type(v) not in allowed)
        if int in types and schema.get(name, NUMERIC) == NUMERIC:
            try:
                np.array(values, dtype=np.float64)
            except (OverflowError, TypeError, ValueError):
                # an integer beyond float64 (or another misfit, already suspected)
                suspects.update(i for i, v in enumerate(values) if type(v) is int
                                and not -_FLOAT_LIMIT < v < _FLOAT_LIMIT)
    bad: dict[int, str] = {}
    for i in sorted(suspects):
        try:
            check_fields(events[i], schema, names)
        except CEPError as err:
            bad[i] = str(err)
    return bad


#: integers at or beyond this have no float64 value (the numba engine reads numbers so)
_FLOAT_LIMIT = 2**1024


def _misfit(name: str, value: Any, kind: str) -> str:
    need = {NUMERIC: "a number", STRING: "a string", BOOLEAN: "true/false"}.get(kind, kind)
    return f"field {name!r} is {value!r}: the pattern needs {need}"


def check_fields(event: Any, schema: Mapping[str, str], names: list[str]) -> None:
    """Raise a CEPError naming the field if ``event`` does not fit the column types.

    >>> check_fields({"v": "x"}, {"v": "numeric"}, ["v"])
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: field 'v' is 'x': the pattern needs a number
    """
    for name in names:
        value = value_of(event, name)
        kind = schema.get(name)
        vtype = type(value)
        if vtype is float and kind == NUMERIC:
            continue  # the common cases first
        if vtype is int and kind == NUMERIC and -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
            continue
        if vtype is str and kind == STRING:
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if kind == NUMERIC:
            # times are numbers to expressions: epoch milliseconds, durations milliseconds
            # (a decimal too: an Arrow decimal column is a column of numbers)
            ok = isinstance(value, (int, float, Decimal, np.number, date, timedelta,
                                    np.datetime64, np.timedelta64)) and not isinstance(
                value, (bool, np.bool_))
            if not ok:
                raise CEPError(_misfit(name, value, NUMERIC))
            if isinstance(value, int) and not -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
                raise CEPError(f"field {name!r} is an integer of {len(str(abs(value)))} digits, "
                               "beyond the range of a number the pattern can compare (float64)")
        elif kind == STRING and not isinstance(value, str):
            raise CEPError(_misfit(name, value, STRING))
        elif kind == BOOLEAN and not isinstance(value, (bool, np.bool_)):
            raise CEPError(_misfit(name, value, BOOLEAN))
