"""Whole columns of event times as epoch milliseconds, read with vectorised operations.

The column counterpart of :func:`cep.times.to_epoch_millis`: integers (in a unit),
floats, Arrow / numpy / pandas timestamps and dates, and text (integer digits, ISO-8601
such as ``2024-03-01T09:30:00Z`` or ``2024-03-01 09:30:00.250``, or a user's ``strptime``
format) become int64 epoch milliseconds through pyarrow.compute and numpy.  A value that
is no time is *marked*, not raised, so a caller can send its row to a dead-letter output
and go on with the rest of the batch.  Only the values Arrow's parser refuses are looked at
one by one, by the function that reads a single value, so a column and a value are read
alike and fail with the same message.

>>> import pyarrow as pa
>>> col = times_of_column(pa.array(["2024-03-01T00:00:00Z", "soon", None]), None, "ts")
>>> col.millis.tolist(), col.bad.tolist()
([1709251200000, 0, 0], [False, True, True])
>>> col.reason(1)
"time field 'ts' is 'soon': not an ISO-8601 timestamp or integer milliseconds"
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from cep.errors import InputError
from cep.times import MAX_MILLIS, TIME_UNITS, ambiguous_times, check_unit, to_epoch_millis

#: text that is an integer time written out (CSV without types, JSON strings)
_DIGITS = r"^\s*-?\d+\s*$"
#: ISO-8601 text that names its zone (Z or an offset): Arrow parses it only as a zoned time
_ZONED = r"\d\d:\d\d(:\d\d(\.\d+)?)?\s*(Z|z|[+-]\d\d(:?\d\d)?)\s*$"
#: Arrow units in milliseconds, as (numerator, denominator)
_ARROW_UNITS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


@dataclass(frozen=True)
class TimeColumn:
    """Epoch milliseconds of a column's values; ``bad`` marks the values that are no time
    (``millis`` is 0 there) and :meth:`reason` says why, in the words of
    :func:`cep.times.to_epoch_millis`."""

    millis: np.ndarray
    bad: np.ndarray
    values: Any
    unit: str | None
    field: str
    fmt: str | None = None

    def reason(self, i: int, where: str = "") -> str:
        """Why value ``i`` is no time; ``where`` (e.g. ``"row 3"``) prefixes the message."""
        value = _value_at(self.values, i)
        label = f"{where}: time field {self.field!r}" if where else f"time field {self.field!r}"
        if self.fmt is not None and isinstance(value, str):
            return f"{label} is {value!r}: does not match the format {self.fmt!r}"
        try:
            to_epoch_millis(value, self.unit, self.field, where)
        except InputError as err:
            return str(err)
        return f"{label} is {value!r}: not a time cep can read"  # pragma: no cover

    def error(self, i: int, where: str = "") -> InputError:
        """The error for value ``i`` (a :class:`~cep.TimeUnitError` for a unit mix-up)."""
        value = _value_at(self.values, i)
        if self.fmt is None or not isinstance(value, str):
            try:
                to_epoch_millis(value, self.unit, self.field, where)
            except InputError as err:
                return err
        return InputError(self.reason(i, where))

    def first_bad(self) -> int | None:
        """The position of the first value that is no time, or None when all are.

        >>> times_of_column(np.array([5, 6]), None, "ts").first_bad() is None
        True
        """
        if not self.bad.any():
            return None
        return int(np.argmax(self.bad))


def times_of_column(values: Any, unit: str | None, field: str, fmt: str | None = None
                    ) -> TimeColumn:
    """Read a column of event times (pyarrow Array or ChunkedArray, pandas Series, numpy
    array or list): integers and digit text in ``unit`` (None: milliseconds, refusing values
    that look like seconds or microseconds), whole-millisecond floats, timestamps and dates
    (no zone: UTC), ISO-8601 text, or text in the ``strptime`` format ``fmt``.

    >>> times_of_column(np.array([1709251200, 1709251260]), "s", "ts").millis.tolist()
    [1709251200000, 1709251260000]
    >>> times_of_column(["2024-03-01 00:00:00.250"], None, "ts").millis.tolist()
    [1709251200250]
    >>> times_of_column(["01/03/2024 09:30"], None, "ts", fmt="%d/%m/%Y %H:%M").millis.tolist()
    [1709285400000]
    """
    check_unit(unit)
    arr = _as_arrow(values)
    if arr is None:  # Python values of mixed types: one at a time
        return _by_value(list(values), unit, field, fmt)
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    kind = arr.type
    n = len(arr)
    null = pc.is_null(arr, nan_is_null=pa.types.is_floating(kind)).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        numbers = _numbers_of(arr)
        millis, bad = numbers_to_millis(numbers, unit)
    elif pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        millis, bad = _stamps_to_millis(arr)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        millis, bad = _text_to_millis(arr, unit, field, fmt)
    else:  # booleans, nulls, lists, structs, bytes: no times
        millis, bad = np.zeros(n, np.int64), np.ones(n, np.bool_)
    bad = bad | null
    millis = np.where(bad, 0, millis).astype(np.int64)
    return TimeColumn(millis, bad, arr, unit, field, fmt)


def numbers_to_millis(values: np.ndarray, unit: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(epoch milliseconds, bad) of a numeric column in ``unit``: vectorised
    :func:`cep.times.to_epoch_millis` for numbers (NaN, fractions of a millisecond, values
    out of range and, with no unit, values that look like another unit are bad).

    >>> numbers_to_millis(np.array([1709251200123456]), "us")[0].tolist()
    [1709251200123]
    """
    bad = np.zeros(len(values), np.bool_)
    if values.dtype.kind == "f":
        bad |= ~np.isfinite(values)
        values = np.where(bad, 0.0, values)
    if unit is None:
        bad |= ambiguous_times(values)
        unit = "ms"
    num, den = TIME_UNITS[unit]
    if values.dtype.kind == "f":
        scaled = values * num / den
        if den == 1:
            bad |= scaled != np.floor(scaled)
        scaled = np.floor(scaled)
        bad |= np.abs(scaled) > MAX_MILLIS
        millis = np.where(bad, 0, scaled).astype(np.int64)
    else:
        ints = values.astype(np.int64)
        # range first: multiplying by the unit could overflow int64
        bad |= np.abs(ints) > (MAX_MILLIS // num if num > 1 else MAX_MILLIS * den)
        safe = np.where(bad, 0, ints)
        millis = safe * num // den
    return np.where(bad, 0, millis).astype(np.int64), bad


def _numbers_of(arr: Any) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(arr.type):
        return arr.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    return pc.cast(arr, pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)


def _stamps_to_millis(arr: Any) -> tuple[np.ndarray, np.ndarray]:
    """Arrow timestamps (any unit, any zone: they count from the epoch in UTC) and dates."""
    import pyarrow as pa

    kind = arr.type
    if pa.types.is_date32(kind):
        days = arr.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
        return days.astype(np.int64) * 86_400_000, np.zeros(len(arr), np.bool_)
    if pa.types.is_date64(kind):
        return arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.zeros(
            len(arr), np.bool_)
    ticks = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    num, den = _ARROW_UNITS[kind.unit]
    millis = ticks // den if den > 1 else ticks * num  # floor: times before 1970 round down
    return millis, np.abs(millis) > MAX_MILLIS


def _text_to_millis(arr: Any, unit: str | None, field: str, fmt: str | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(arr)
    millis = np.zeros(n, np.int64)
    bad = np.zeros(n, np.bool_)
    digits = pc.fill_null(pc.match_substring_regex(arr, _DIGITS), False).to_numpy(
        zero_copy_only=False)
    if digits.any():
        where = np.flatnonzero(digits)
        text = pc.utf8_trim_whitespace(arr.take(pa.array(where)))
        try:
            numbers = text.cast(pa.int64()).to_numpy(zero_copy_only=False)
            millis[where], bad[where] = numbers_to_millis(numbers, unit)
        except pa.ArrowInvalid:  # beyond int64: no time in any unit
            bad[where] = True
    rest = np.flatnonzero(~digits)
    if not len(rest):
        return millis, bad
    text = arr.take(pa.array(rest))
    if fmt is not None:
        parsed = pc.strptime(text, format=fmt, unit="us", error_is_null=True)
        failed = parsed.is_null().to_numpy(zero_copy_only=False)
        ticks = parsed.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        millis[rest] = ticks // 1000
        for j in np.flatnonzero(failed).tolist():  # Python's strptime knows %f, Arrow's not
            value = text[j].as_py()
            if value is None:
                bad[rest[j]] = True
                continue
            try:
                millis[rest[j]] = to_epoch_millis(datetime.strptime(value, fmt), None, field)
            except (ValueError, InputError):
                bad[rest[j]] = True
        return millis, bad
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONED), False).to_numpy(
        zero_copy_only=False)
    for mask, stamp in ((zoned, pa.timestamp("us", "UTC")), (~zoned, pa.timestamp("us"))):
        part = np.flatnonzero(mask)
        if not len(part):
            continue
        values, failed = _parse_iso(text.take(pa.array(part)), stamp)
        millis[rest[part]] = values
        for j in np.flatnonzero(failed).tolist():  # forms Arrow refuses (7-9 decimals, ...)
            try:
                millis[rest[part[j]]] = to_epoch_millis(text[int(part[j])].as_py(), unit, field)
            except InputError:
                bad[rest[part[j]]] = True
    return millis, bad


def _parse_iso(text: Any, stamp: Any) -> tuple[np.ndarray, np.ndarray]:
    """Arrow's ISO-8601 parse of ``text``; a failing slice is halved until the values Arrow
    refuses are alone (O(n log n) casts at worst, one cast when all parse)."""
    import pyarrow as pa

    n = len(text)
    millis = np.zeros(n, np.int64)
    failed = np.zeros(n, np.bool_)
    pending = [(0, n)]
    while pending:
        lo, hi = pending.pop()
        try:
            ticks = text.slice(lo, hi - lo).cast(stamp).cast(pa.int64()).fill_null(0)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            if hi - lo == 1:
                failed[lo] = True
            else:
                mid = (lo + hi) // 2
                pending += [(lo, mid), (mid, hi)]
            continue
        millis[lo:hi] = np.floor_divide(ticks.to_numpy(zero_copy_only=False), 1000)
    failed |= np.abs(millis) > MAX_MILLIS
    return millis, failed


def _as_arrow(values: Any) -> Any:
    """``values`` as one pyarrow Array, or None when they are Python values Arrow cannot type
    as one column (mixed types)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    module = type(values).__module__
    try:
        if module.startswith("pandas"):
            return pa.Array.from_pandas(values)
        if isinstance(values, np.ndarray) and values.dtype != object:
            return pa.array(values)
        return pa.array(list(values), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


def _by_value(values: list[Any], unit: str | None, field: str, fmt: str | None) -> TimeColumn:
    n = len(values)
    millis = np.zeros(n, np.int64)
    bad = np.zeros(n, np.bool_)
    for i, value in enumerate(values):
        try:
            if fmt is not None and isinstance(value, str):
                value = datetime.strptime(value, fmt).replace(tzinfo=UTC)
            millis[i] = to_epoch_millis(value, unit, field)
        except (InputError, ValueError):
            bad[i] = True
    return TimeColumn(millis, bad, values, unit, field, fmt)


def _value_at(values: Any, i: int) -> Any:
    if isinstance(values, list):
        return values[i]
    value = values[i]
    return value.as_py() if hasattr(value, "as_py") else value
