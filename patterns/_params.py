"""Checks of library pattern parameters; a bad one is a MalformedPatternError naming it."""

from __future__ import annotations

from cep import MalformedPatternError


def need_count(value: int, low: int, name: str) -> None:
    """``value`` must be a whole number (not a bool) of at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise MalformedPatternError(f"{name} must be a whole number >= {low}, got {value!r}")


def need(ok: bool, message: str) -> None:
    if not ok:
        raise MalformedPatternError(message)
