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
