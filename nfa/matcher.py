"""One key's matcher: FlinkCEP's NFA-level API (``process`` / ``advance_time``), on either
engine, through the :class:`~cep.nfa.engine.Engine` interface like every other caller."""

from __future__ import annotations

from typing import Any

from cep.errors import CEPError, InputError
from cep.matches import Match, Timeout
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, Cap
from cep.nfa.compiler import compile_pattern
from cep.nfa.engine import EngineName, make_engine
from cep.nfa.events import Events
from cep.pattern import Pattern


class Matcher:
    """Runs one pattern over one key's events, fed in the order given.

    ``process(event, timestamp)`` returns the matches the event completes.
    ``advance_time(timestamp)`` says no event older than ``timestamp`` will
    come: partial matches whose window passed become timeouts, trailing
    ``not_followed_by`` matches complete, and both are returned.  ``process``
    moves time to the event's timestamp first, so windows hold even if you
    never call ``advance_time``; timeouts found that way are returned by the
    next ``advance_time`` call.

    ``engine`` is ``"reference"`` (any condition), ``"numba"`` (expression
    conditions only) or ``"auto"`` (numba when it can; ``explain()`` says why).
    ``max_partial_matches`` and ``on_overflow`` cap the partial matches as
    :func:`cep.match` does.

    >>> m = Matcher(Pattern.begin("a").where(lambda e: e == "x").next("b"))
    >>> m.process("x", 1), [dict(r) for r in m.process("y", 2)]
    ([], [{'a': ['x'], 'b': ['y']}])
    """

    def __init__(self, pattern: Pattern, engine: EngineName = "auto", *,
                 max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
                 on_overflow: str = "fail") -> None:
        if not isinstance(pattern, Pattern):
            raise CEPError(f"Matcher needs a Pattern, got {type(pattern).__name__}")
        self.pattern = pattern
        self.nfa = compile_pattern(pattern)
        self._engine = make_engine(pattern, engine, cap=Cap(max_partial_matches, on_overflow))
        self.engine, self.engine_reason = self._engine.name, self._engine.reason
        self._timeouts: list[Timeout] = []
        self._time: int | None = None  # the latest time an event or advance_time brought

    def process(self, event: Any, timestamp: int) -> list[Match]:
        """Feed one event; return the matches it completes (and any released by time).

        Events come in time order: a timestamp before the time already reached is an
        :class:`~cep.InputError` (FlinkCEP's NFA, too, is fed in order by its operator).

        >>> m = Matcher(Pattern.begin("a").next("b"))
        >>> m.process("x", 10)
        []
        >>> m.process("y", 5)
        Traceback (most recent call last):
        ...
        cep.errors.InputError: timestamp 5 is before 10, the time this Matcher has reached ...
        """
        ts = self._moved_to(timestamp)
        step = self._engine.process(Events.one(event, None, ts))  # a Matcher has no key
        if step.refused:
            raise step.refused[0]
        return self._split(step.found)

    def advance_time(self, timestamp: int) -> tuple[list[Match], list[Timeout]]:
        """Move event time to ``timestamp``; return completed matches and timeouts.  Moving
        to a time already passed does nothing."""
        ts = _check_ts(timestamp)
        if self._time is None or ts > self._time:
            self._time = ts
        matches = self._split(self._engine.advance(ts))
        timeouts, self._timeouts = self._timeouts, []
        return matches, timeouts

    processElement = process
    advanceTime = advance_time

    def _moved_to(self, timestamp: Any) -> int:
        ts = _check_ts(timestamp)
        if self._time is not None and ts < self._time:
            raise InputError(
                f"timestamp {ts} is before {self._time}, the time this Matcher has reached "
                "(an earlier event or advance_time): a Matcher takes one key's events in time "
                "order, so this one could only give wrong matches; sort the events first, or "
                "use cep.match or the runtime (runtime.Job), which order events by time and "
                "send late ones to a side output")
        self._time = ts
        return ts

    @property
    def partial_matches(self) -> int:
        """How many partial matches are alive (a measure of this key's state)."""
        return self._engine.partial_matches

    def explain(self) -> str:
        """The compiled NFA and which engine runs it, and why."""
        from cep.nfa.explain import describe

        return f"engine: {self.engine} ({self.engine_reason})\n{describe(self.nfa)}"

    def _split(self, out: list[Match]) -> list[Match]:
        matches = []
        for m in out:
            if isinstance(m, Timeout):
                self._timeouts.append(m)
            else:
                matches.append(m)
        return matches


def _check_ts(timestamp: Any) -> int:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        try:
            import numpy as np

            if isinstance(timestamp, np.integer):
                return int(timestamp)
        except ImportError:  # pragma: no cover
            pass
        raise CEPError(f"timestamps are integer milliseconds, got {timestamp!r}")
    if not -(2**63) <= timestamp < 2**63:
        raise CEPError(f"timestamps are integer milliseconds within int64, got {timestamp}")
    return timestamp
