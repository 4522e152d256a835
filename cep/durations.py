"""Durations and timestamps as cep uses them: integer milliseconds."""

from __future__ import annotations

from datetime import timedelta

from cep.errors import MalformedPatternError

#: Java's Long.MAX_VALUE: "end of time", used to flush every pending match.
MAX_TIMESTAMP = 2**63 - 1


def to_millis(value: timedelta | int, what: str) -> int:
    """Convert ``timedelta`` or integer milliseconds to integer milliseconds.

    >>> to_millis(timedelta(seconds=2), "within")
    2000
    """
    if isinstance(value, bool):
        raise MalformedPatternError(f"{what}: expected a timedelta or int milliseconds, got {value!r}")
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    if isinstance(value, int):
        return value
    raise MalformedPatternError(
        f"{what}: expected a timedelta or int milliseconds, got {type(value).__name__} {value!r}"
    )


#: the units a duration may be written in, in milliseconds
DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                  "d": 86_400_000}


def parse_duration(text: str, *, default_unit: str | None = "ms") -> int:
    """``250ms``, ``5s``, ``10m``, ``1.5h``, ``1d`` -> milliseconds.  A bare number is in
    ``default_unit``; with ``default_unit=None`` it is refused (only ``0`` needs no unit),
    as the command line does: ``5`` could mean 5 ms or 5 s.

    >>> parse_duration("5s"), parse_duration("250"), parse_duration("0", default_unit=None)
    (5000, 250, 0)
    >>> parse_duration("5", default_unit=None)
    Traceback (most recent call last):
    ...
    cep.errors.InputError: duration '5' has no unit: write 5ms, 5s, 5m, 5h or 5d
    """
    import re

    from cep.errors import InputError

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d)?\s*", text)
    if not m:
        raise InputError(f"cannot read duration {text!r}: use e.g. 500ms, 5s, 10m, 2h, 1d")
    number, unit = m.group(1), m.group(2) or default_unit
    if unit is None:
        if float(number) == 0:
            return 0
        raise InputError(f"duration {text!r} has no unit: write {number}ms, {number}s, "
                         f"{number}m, {number}h or {number}d")
    return int(float(number) * DURATION_UNITS[unit])
