"""Measures: values computed over a complete match, as in MATCH_RECOGNIZE's MEASURES clause.

A measure is an expression over the whole match (FINAL semantics):
``first(stage, field)`` / ``last(stage, field)`` read the stage's first and last
event, the aggregates run over everything the stage took, ``prev(field)`` and a
bare ``col(field)`` read the match's last event.

>>> from cep import Match, count, first, last
>>> m = Match({"small": [{"amount": 1}, {"amount": 2}], "big": [{"amount": 900}]}, start=1, end=3)
>>> measure(m, {"n": count("small"), "first": first("small", "amount"),
...             "jump": last("big", "amount") - first("small", "amount")})
{'n': 2, 'first': 1, 'jump': 899}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cep.errors import MalformedPatternError, MeasureError
from cep.expr import Aggregate, Col, Expr, StageRef, infer_type, value_of
from cep.matches import Match
from cep.pattern import Pattern
from cep.times import time_value_millis


class MeasureWarning(UserWarning):
    """A job could not compute a measure over some of its matches (arithmetic on a field
    the input holds as text, say): they are written with that measure null (see
    :class:`cep.MeasureError`)."""


class _WholeMatch:
    """The context an expression sees: every event of the match."""

    __slots__ = ("_match", "_last", "timestamp")

    def __init__(self, match: Match) -> None:
        self._match = match
        events = match.events()
        self._last = _last_taken(match) if events else None
        self.timestamp = match.end

    def events(self, stage: str) -> Sequence[Any]:
        return self._match[stage] if stage in self._match else []

    def previous_event(self) -> Any:
        return self._last


def _last_taken(match: Match) -> Any:
    """The event the match took last: as the engine that made the match says, else (a
    Match made by hand) the last stage's last event (stages are keyed in first-take order,
    which holds unless the pattern ends in a repeated group)."""
    last = getattr(match, "_last", _UNSET)
    if last is not _UNSET:
        return last
    last_stage = list(match)[-1]
    return match[last_stage][-1]


_UNSET = object()


def measure(match: Match, measures: Mapping[str, Expr]) -> dict[str, Any]:
    """Each measure's value over ``match`` (None = null).  A measure that passes a column
    through (see :func:`source_column`) gives the value as the input holds it: a datetime
    stays a datetime (expressions compute with it as epoch milliseconds).  A measure that
    cannot be computed (arithmetic on text) raises a :class:`~cep.MeasureError` naming it.

    >>> from datetime import datetime
    >>> from cep import Match, first
    >>> m = Match({"a": [{"ts": datetime(2024, 3, 1)}]}, start=0, end=0)
    >>> measure(m, {"at": first("a", "ts"), "ms": first("a", "ts") + 0})
    {'at': datetime.datetime(2024, 3, 1, 0, 0), 'ms': 1709251200000}
    """
    ctx = _WholeMatch(match)
    event = ctx.previous_event()
    out: dict[str, Any] = {}
    for name, expr in measures.items():
        try:
            value = expr.evaluate(event, ctx)
        except (TypeError, ValueError, ArithmeticError) as err:
            raise MeasureError(f"measure {name!r}: {err}") from None
        field = source_column(expr)
        if field is not None and value is not None:
            value = _as_input(expr, field, value, event, ctx)
        out[name] = value
    return out


def _as_input(expr: Expr, field: str, value: Any, event: Any, ctx: _WholeMatch) -> Any:
    """The input's own value behind ``value``, the value of a pass-through measure."""
    if isinstance(expr, Col):
        candidates = [event]
    elif isinstance(expr, StageRef) and expr.kind == "prev":
        candidates = [ctx.previous_event()]
    elif isinstance(expr, StageRef):
        events = ctx.events(expr.stage)
        candidates = [events[0] if expr.kind == "first" else events[-1]]
    else:  # min / max: the first event holding that value
        candidates = list(ctx.events(expr.stage))  # type: ignore[attr-defined]
    for e in candidates:
        raw = value_of(e, field)
        if time_value_millis(raw) == value:  # only times differ from what expressions see
            return raw
    return value


def unknown_stage(measure: Expr, pattern: Pattern) -> str | None:
    """Why ``measure`` cannot be computed over ``pattern``'s matches: it reads a stage the
    pattern does not have (it would be null or 0 in every match), else None.

    >>> from cep import count
    >>> unknown_stage(count("nope"), Pattern.begin("a").next("b"))
    "count('nope') reads stage 'nope', which the pattern does not have (its stages: a, b)"
    """
    stages = pattern.stage_names()
    for node in measure.walk():
        stage = node.stage if isinstance(node, (StageRef, Aggregate)) else None
        if stage is not None and stage not in stages:
            return (f"{measure!r} reads stage {stage!r}, which the pattern does not have (its "
                    f"stages: {', '.join(stages)})")
    return None


def check_measure_stages(pattern: Pattern, measures: Mapping[str, Any]) -> None:
    """Raise a MalformedPatternError naming the measure if one is not an expression or
    reads a stage the pattern does not have."""
    for name, expr in measures.items():
        if not isinstance(expr, Expr):
            raise MalformedPatternError(
                f"measure {name!r} is {type(expr).__name__}: measures are expressions "
                "(first/last/count/sum/avg/min/max/col/lit and arithmetic)"
            )
        reason = unknown_stage(expr, pattern)
        if reason is not None:
            raise MalformedPatternError(f"measure {name!r}: {reason}")


def check_measures(pattern: Pattern, measures: Mapping[str, Any], schema: Mapping[str, str]) -> None:
    """Raise a MalformedPatternError naming the measure if one is not an expression over the
    pattern's stages and the input's columns."""
    check_measure_stages(pattern, measures)
    stages = pattern.stage_names()
    for name, expr in measures.items():
        try:
            infer_type(expr, schema, stage=stages[-1], visible=stages)
        except MalformedPatternError as err:
            raise MalformedPatternError(f"measure {name!r}: {err}") from None


def source_column(expr: Expr) -> str | None:
    """The input column whose value a measure passes through unchanged, if it does
    (first/last/prev/min/max of a column, or the column itself): its type is that column's."""
    if isinstance(expr, StageRef):
        return expr.field
    if isinstance(expr, Col):
        return expr.name
    if isinstance(expr, Aggregate) and expr.func in ("min", "max"):
        return expr.field
    return None


def is_count(expr: Expr) -> bool:
    """Whether the measure is a ``count(stage)`` (an integer, never null).

    >>> from cep import count, sum
    >>> is_count(count("a")), is_count(sum("a", "amount"))
    (True, False)
    """
    return isinstance(expr, Aggregate) and expr.func == "count"


__all__ = ["MeasureWarning", "check_measure_stages", "check_measures", "measure", "unknown_stage"]
