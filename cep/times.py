"""Event times as cep uses them: integer epoch milliseconds, read from whatever the input holds.

One place turns a time value (int, float, datetime, numpy/pandas datetime, ISO-8601 or
digit text) or a whole numeric column into epoch milliseconds.  Integers are
milliseconds unless a ``time_unit`` says otherwise; integers that only make sense in
another unit (epoch *seconds* such as ``1709251200``, or micro-/nanoseconds) are refused
with a message that names the field and the unit to give, because reading them as
milliseconds would give wrong matches with no error (four charges a day apart, read as
seconds-as-milliseconds, fall inside a 10-minute window).

>>> to_epoch_millis(1709251200, "s", "ts")
1709251200000
>>> to_epoch_millis("2024-03-01T00:00:00Z", None, "ts")
1709251200000
>>> to_epoch_millis(1709251200, None, "ts")
Traceback (most recent call last):
...
cep.errors.TimeUnitError: time field 'ts' is 1709251200, which looks like epoch seconds (2024-03-01T00:00:00Z) ...
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from cep.errors import InputError, TimeUnitError

#: what one unit is worth in milliseconds (as numerator, denominator: exact integer math)
TIME_UNITS: dict[str, tuple[int, int]] = {
    "s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}

#: integers in [SECONDS_LIKE_LOW, SECONDS_LIKE_HIGH) read as milliseconds fall between
#: 1970-01-12 and 1973-03-03; read as seconds, between 2001-09-09 and the year 5138
SECONDS_LIKE_LOW = 10**9
SECONDS_LIKE_HIGH = 10**11
#: integers at or above this are after the year 5138 as milliseconds: micro- or nanoseconds
SUBMILLI_LIKE = 10**14
#: the last millisecond of the year 9999, the latest time cep accepts (and the earliest, negated)
MAX_MILLIS = 253_402_300_799_999

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_unit(unit: str | None) -> str | None:
    """``unit`` if it is one cep knows (``s``, ``ms``, ``us``, ``ns``) or None.

    >>> check_unit("s")
    's'
    """
    if unit is not None and unit not in TIME_UNITS:
        raise InputError(
            f"unknown time unit {unit!r}: use one of {', '.join(TIME_UNITS)} "
            "(the unit of integer times; datetimes and ISO-8601 text need none)")
    return unit


def iso_time(ms: float) -> str:
    """Epoch milliseconds as ISO-8601 UTC text, for messages.

    >>> iso_time(1709251200000)
    '2024-03-01T00:00:00Z'
    """
    try:
        when = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return "out of range"
    text = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return text.replace(".000Z", "Z")


def _ambiguous(value: float, where: str) -> InputError:
    magnitude = abs(value)
    shown = int(value) if float(value).is_integer() else value
    if magnitude >= SUBMILLI_LIKE:
        if magnitude / 1_000_000 > MAX_MILLIS:
            # not a unit mix-up: a poison value, refused on its own
            return InputError(f"{where} is {shown}: not a time between the years 0001 and 9999 "
                              "in any unit (s, ms, us, ns)")
        guess = "us" if magnitude < 10**17 else "ns"
        scale = 1000 if guess == "us" else 1_000_000
        return TimeUnitError(
            f"{where} is {shown}, which as milliseconds would be {iso_time(value)}; it looks like "
            f"epoch {'microseconds' if guess == 'us' else 'nanoseconds'} "
            f"({iso_time(value / scale)}): give time_unit={guess!r} (CLI: --time-unit {guess}), "
            "or time_unit='ms' if these really are milliseconds")
    return TimeUnitError(
        f"{where} is {shown}, which looks like epoch seconds ({iso_time(value * 1000)}) but would be "
        f"read as milliseconds ({iso_time(value)}): give time_unit='s' (CLI: --time-unit s), or "
        "time_unit='ms' if these really are milliseconds")


def is_ambiguous(value: float) -> bool:
    """True when an integer time with no unit given looks like seconds or sub-milliseconds.

    >>> is_ambiguous(1709251200), is_ambiguous(1709251200000), is_ambiguous(42)
    (True, False, False)
    """
    magnitude = abs(value)
    return SECONDS_LIKE_LOW <= magnitude < SECONDS_LIKE_HIGH or magnitude >= SUBMILLI_LIKE


def ambiguous_times(values: np.ndarray) -> np.ndarray:
    """Which of the integer times (a numeric column) look like another unit than ms.

    >>> ambiguous_times(np.array([1709251200, 1709251200000])).tolist()
    [True, False]
    """
    magnitude = np.abs(values)
    return ((magnitude >= SECONDS_LIKE_LOW) & (magnitude < SECONDS_LIKE_HIGH)) | (
        magnitude >= SUBMILLI_LIKE)


def ambiguity(value: float, field: str) -> InputError:
    """The error for an integer time of ``field`` that looks like another unit than ms."""
    return _ambiguous(value, f"time field {field!r}")


def _scaled(number: int | float, unit: str | None, where: str) -> int:
    """Epoch milliseconds of a number in ``unit`` (None: milliseconds, ambiguity refused)."""
    if unit is None:
        if is_ambiguous(number):
            raise _ambiguous(number, where)
        unit = "ms"
    num, den = TIME_UNITS[unit]
    if isinstance(number, float):
        ms_float = number * num / den
        if den == 1 and not ms_float.is_integer():
            raise InputError(f"{where} is {number!r}: not a whole number of milliseconds")
        ms = math.floor(ms_float)
    else:
        ms = number * num // den
    if abs(ms) > MAX_MILLIS:
        raise InputError(f"{where} is {number!r}: outside the years 0001-9999 in {unit}")
    return ms


def to_epoch_millis(value: Any, unit: str | None, field: str, where: str = "") -> int:
    """Epoch milliseconds of one time value; ``where`` (e.g. ``"row 3"``) prefixes errors.

    Integers and numeric text are in ``unit`` (None: milliseconds, refusing values that
    look like another unit); floats must be whole milliseconds; datetimes without a zone
    are UTC; a date is its midnight, UTC (as an Arrow or pandas column of dates reads);
    ISO-8601 text is parsed.

    >>> to_epoch_millis(datetime(2024, 3, 1, tzinfo=UTC), None, "ts")
    1709251200000
    >>> to_epoch_millis(1709251200123456, "us", "ts")
    1709251200123
    """
    label = f"{where}: time field {field!r}" if where else f"time field {field!r}"
    if value is None:
        raise InputError(f"{label} is null")
    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise InputError(f"{label} is a bool ({value!r}), not a timestamp")
    if isinstance(value, (int, np.integer)):
        return _scaled(int(value), unit, label)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            raise InputError(f"{label} is {value!r}")
        return _scaled(int(number) if number.is_integer() and abs(number) < 2**63 else number,
                       unit, label)
    if isinstance(value, datetime):
        if value != value:  # pandas NaT
            raise InputError(f"{label} is NaT")
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        delta = aware - _EPOCH
        return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
    if isinstance(value, date):
        return to_epoch_millis(datetime(value.year, value.month, value.day, tzinfo=UTC),
                               unit, field, where)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return _scaled(int(text), unit, label)  # integer times written as text (CSV)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(
                f"{label} is {value!r}: not an ISO-8601 timestamp or integer "
                f"{'milliseconds' if unit is None else unit}") from None
        return to_epoch_millis(parsed, unit, field, where)
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise InputError(f"{label} is NaT")
        return int(value.astype("datetime64[ms]").astype(np.int64))
    if type(value).__name__ == "NaTType":
        raise InputError(f"{label} is NaT")
    raise InputError(f"{label} is {value!r} ({type(value).__name__}): not a timestamp")


_MS = timedelta(milliseconds=1)


def time_value_millis(value: Any) -> int | None:
    """How expressions read a time value: a datetime or date as epoch milliseconds (one
    without a zone is UTC; a date is its midnight, UTC), a duration as milliseconds, both
    rounded down to the millisecond; None for NaT and for anything that is not a time.

    >>> time_value_millis(datetime(2024, 3, 1, 0, 0, 1))
    1709251201000
    >>> time_value_millis(timedelta(minutes=5)), time_value_millis(np.datetime64("NaT"))
    (300000, None)
    """
    if isinstance(value, datetime):
        if value != value:  # pandas NaT
            return None
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return (aware - _EPOCH) // _MS
    if isinstance(value, timedelta):
        return None if value != value else value // _MS
    if isinstance(value, date):
        return (value - _EPOCH.date()).days * 86_400_000
    if isinstance(value, (np.datetime64, np.timedelta64)):
        if np.isnat(value):
            return None
        unit = "datetime64[ms]" if isinstance(value, np.datetime64) else "timedelta64[ms]"
        return int(value.astype(unit).astype(np.int64))
    return None


def millis_to_datetime(ms: int) -> datetime:
    """The UTC datetime of epoch milliseconds ``ms`` (what a datetime literal prints as).

    >>> millis_to_datetime(1709251200000).isoformat()
    '2024-03-01T00:00:00+00:00'
    """
    return _EPOCH + timedelta(milliseconds=ms)
