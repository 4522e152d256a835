"""One key's matcher: FlinkCEP's NFA-level API."""

from __future__ import annotations

from typing import Any, Literal

from cep.errors import CEPError
from cep.match import Match, Timeout
from cep.pattern import Pattern

Engine = Literal["auto", "reference", "numba"]
ENGINES = ("auto", "reference", "numba")


class Matcher:
    """Runs one pattern over one key's events, fed in the order given.

    ``process(event, timestamp)`` returns the matches the event completes.
    ``advance_time(timestamp)`` says no event older than ``timestamp`` will
    come: partial matches whose window passed become timeouts, trailing
    ``not_followed_by`` matches complete, and both are returned.  ``process``
    moves time to the event's timestamp first, so windows hold even if you
    never call ``advance_time``; timeouts found that way are returned by the
    next ``advance_time`` call.

    >>> m = Matcher(Pattern.begin("a").where(lambda e: e == "x").next("b"))
    >>> m.process("x", 1), [dict(r) for r in m.process("y", 2)]
    ([], [{'a': ['x'], 'b': ['y']}])
    """

    def __init__(self, pattern: Pattern, engine: Engine = "auto") -> None:
        from nfa.compiler import compile_pattern
        from nfa.reference import ReferenceEngine

        if engine not in ENGINES:
            raise CEPError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
        if engine == "numba":
            raise CEPError(
                "engine='numba' is not available yet: use engine='reference' or 'auto'"
            )
        self.pattern = pattern
        self.nfa = compile_pattern(pattern)
        self.engine = "reference"
        self.engine_reason = (
            "reference engine requested" if engine == "reference"
            else "auto: the reference engine is the only engine built so far"
        )
        self._engine = ReferenceEngine(self.nfa)
        self._timeouts: list[Timeout] = []
        self._time: int | None = None

    def process(self, event: Any, timestamp: int) -> list[Match]:
        """Feed one event; return the matches it completes (and any released by time)."""
        ts = _check_ts(timestamp)
        released = self._advance(ts)
        return released + self._engine.process(event, ts)

    def advance_time(self, timestamp: int) -> tuple[list[Match], list[Timeout]]:
        """Move event time to ``timestamp``; return completed matches and timeouts."""
        ts = _check_ts(timestamp)
        matches = self._advance(ts)
        timeouts, self._timeouts = self._timeouts, []
        return matches, timeouts

    processElement = process
    advanceTime = advance_time

    @property
    def partial_matches(self) -> int:
        """How many partial matches are alive (a measure of this key's state)."""
        return self._engine.partial_match_count

    def explain(self) -> str:
        """The compiled NFA and which engine runs it, and why."""
        from nfa.explain import describe

        return f"engine: {self.engine} ({self.engine_reason})\n{describe(self.nfa)}"

    def _advance(self, ts: int) -> list[Match]:
        if self._time is not None and ts <= self._time:
            return []
        self._time = ts
        matches, timeouts = self._engine.advance_time(ts)
        self._timeouts.extend(timeouts)
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
    return timestamp
