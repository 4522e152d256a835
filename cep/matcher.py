"""One key's matcher: FlinkCEP's NFA-level API, on either engine."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from cep.errors import CEPError, InputError
from cep.match import Match, Timeout
from cep.pattern import Pattern

Engine = Literal["auto", "reference", "numba"]
ENGINES = ("auto", "reference", "numba")


class _Run(Protocol):
    def process(self, event: Any, ts: int) -> list[Match]: ...

    def advance(self, ts: int) -> list[Match]: ...

    @property
    def partial_matches(self) -> int: ...


def choose_engine(pattern: Pattern, engine: str) -> tuple[str, str]:
    """(engine to use, why): ``auto`` takes numba when every condition is an expression."""
    if engine not in ENGINES:
        raise CEPError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    from cep.nfa.bytecode import compilable_reason

    reason = compilable_reason(pattern)
    numba_ok = _numba_available()
    if engine == "reference":
        return "reference", "reference engine requested"
    if engine == "numba":
        if reason is not None:
            raise CEPError(f"engine='numba' cannot run this pattern: {reason}")
        if not numba_ok:
            raise CEPError("engine='numba' needs the numba package: pip install numba")
        return "numba", "numba engine requested"
    if reason is not None:
        return "reference", f"auto: {reason}"
    if not numba_ok:
        return "reference", "auto: numba is not installed"
    return "numba", "auto: every condition is an expression"


def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


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

    >>> m = Matcher(Pattern.begin("a").where(lambda e: e == "x").next("b"))
    >>> m.process("x", 1), [dict(r) for r in m.process("y", 2)]
    ([], [{'a': ['x'], 'b': ['y']}])
    """

    def __init__(self, pattern: Pattern, engine: Engine = "auto") -> None:
        from cep.nfa.compiler import compile_pattern

        if not isinstance(pattern, Pattern):
            raise CEPError(f"Matcher needs a Pattern, got {type(pattern).__name__}")
        self.pattern = pattern
        self.nfa = compile_pattern(pattern)
        self.engine, self.engine_reason = choose_engine(pattern, engine)
        self._run: _Run = (
            _ReferenceRun(self.nfa) if self.engine == "reference" else _NumbaRun(pattern, self.nfa)
        )
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
        out = self._run.process(event, ts)
        return self._split(out)

    def advance_time(self, timestamp: int) -> tuple[list[Match], list[Timeout]]:
        """Move event time to ``timestamp``; return completed matches and timeouts.  Moving
        to a time already passed does nothing."""
        ts = _check_ts(timestamp)
        if self._time is None or ts > self._time:
            self._time = ts
        matches = self._split(self._run.advance(ts))
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
        return self._run.partial_matches

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


class _ReferenceRun:
    def __init__(self, nfa: Any) -> None:
        from cep.nfa.reference import ReferenceEngine

        self._engine = ReferenceEngine(nfa)
        self._time: int | None = None

    def process(self, event: Any, ts: int) -> list[Match]:
        return self.advance(ts) + self._engine.process(event, ts)

    def advance(self, ts: int) -> list[Match]:
        if self._time is not None and ts <= self._time:
            return []
        self._time = ts
        matches, timeouts = self._engine.advance_time(ts)
        return [*matches, *timeouts]

    @property
    def partial_matches(self) -> int:
        return self._engine.partial_match_count


class _NumbaRun:
    """The columnar engine driven one event at a time, for one key."""

    def __init__(self, pattern: Pattern, nfa: Any) -> None:
        self.pattern = pattern
        self.nfa = nfa
        self._engine: Any = None

    def _ready(self, event: Any) -> Any:
        if self._engine is None:
            from cep.nfa.columnar import ColumnarEngine, schema_of_rows

            schema = schema_of_rows([event], self.pattern)
            self._engine = ColumnarEngine(self.pattern, schema, self.nfa)
        return self._engine

    def process(self, event: Any, ts: int) -> list[Match]:
        from cep.nfa.columnar import Batch

        engine = self._ready(event)
        return engine.process(Batch.of_events([event]), [None], [ts])  # a Matcher has no key

    def advance(self, ts: int) -> list[Match]:
        if self._engine is None:
            return []
        return self._engine.advance(ts)

    @property
    def partial_matches(self) -> int:
        return 0 if self._engine is None else self._engine.partial_matches


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
