"""Both engines behind one keyed interface, with state that can be snapshotted without pickle.

The operator hands an engine batches of events (with their keys and
timestamps) that the watermark has released, and tells it when event time
moves.  A snapshot is plain data: JSON-able metadata, numeric numpy arrays
and Arrow tables of the events live partial matches still hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.match import Match, Timeout
from cep.matcher import choose_engine
from cep.pattern import Pattern


@dataclass
class Snapshot:
    """An engine's state as data: ``meta`` (JSON), ``arrays`` (numeric), ``rows`` (events)."""

    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    rows: list[Any] = field(default_factory=list)


class KeyedEngine:
    """What the operator needs from an engine.

    >>> import numpy as np
    >>> from datetime import timedelta
    >>> from cep import Pattern, col
    >>> p = (Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
    ...      .within(timedelta(seconds=1)))
    >>> engine = make_engine(p, "numba")
    >>> engine.process(["k", "k"], np.array([1, 2]), [{"v": 1}, {"v": 1}]), engine.partial_matches
    ([], 2)
    >>> [(type(m).__name__, m.timestamp) for m in engine.advance(5000)]
    [('Timeout', 1001), ('Timeout', 1002)]
    """

    name = "?"

    def process(self, keys: Sequence[Any], times: np.ndarray, events: Sequence[Any]) -> list[Match]:
        """Match events the watermark released, in (time, arrival) order, with their keys and
        timestamps; return the matches (with ``.key`` set) they complete."""
        raise NotImplementedError

    def advance(self, timestamp: int) -> list[Match]:
        """Move event time to ``timestamp``: windows that end by then time out (returned as
        :class:`~cep.Timeout` when the engine was made with ``timeouts=True``) and trailing
        ``not_followed_by`` matches complete."""
        raise NotImplementedError

    @property
    def partial_matches(self) -> int:
        """How many partial matches all keys hold (what ``limit_partial_matches`` caps)."""
        raise NotImplementedError

    def next_deadline(self) -> int | None:
        """The earliest event time at which advancing time can fire a timeout (None: never),
        for callers that schedule their own timers (Spark's group timeouts)."""
        raise NotImplementedError

    def snapshot(self) -> Snapshot:
        """The state now, serialised at once (:meth:`capture` then its function).

        >>> from cep import Pattern
        >>> make_engine(Pattern.begin("a").next("b"), "reference").snapshot().meta["engine"]
        'reference'
        """
        return self.capture()()

    def capture(self) -> Callable[[], Snapshot]:
        """Take the state at this instant, cheaply; the returned function serialises it later
        (on a background thread) while processing goes on."""
        raise NotImplementedError

    def restore(self, snap: Snapshot) -> None:
        """Replace the state with a :meth:`snapshot` of an engine for the same pattern.

        >>> import numpy as np
        >>> from cep import Pattern
        >>> p = Pattern.begin("a").next("b")
        >>> first = make_engine(p, "reference")
        >>> first.process(["k"], np.array([1]), ["x"])
        []
        >>> second = make_engine(p, "reference")
        >>> second.restore(first.snapshot())
        >>> [dict(m) for m in second.process(["k"], np.array([2]), ["y"])]
        [{'a': ['x'], 'b': ['y']}]
        """
        raise NotImplementedError


def make_engine(pattern: Pattern, engine: str = "auto", *, timeouts: bool = True) -> KeyedEngine:
    """The keyed engine for ``pattern``: ``"auto"`` picks numba when every condition is an
    expression, else the reference engine (as :func:`cep.match` does).

    >>> from cep import Pattern, col
    >>> make_engine(Pattern.begin("a").where(col("v") > 1)).name
    'numba'
    >>> make_engine(Pattern.begin("a").where(lambda e: e > 1)).name
    'reference'
    """
    chosen, reason = choose_engine(pattern, engine)
    if chosen == "numba":
        return NumbaKeyed(pattern, timeouts=timeouts, reason=reason)
    return ReferenceKeyed(pattern, timeouts=timeouts, reason=reason)


# ------------------------------------------------------------------ reference
class ReferenceKeyed(KeyedEngine):
    """One reference-engine run per key; the oracle, and the engine for Python conditions."""

    name = "reference"

    def __init__(self, pattern: Pattern, *, timeouts: bool = True, reason: str = "") -> None:
        from cep.nfa.compiler import compile_pattern

        self.pattern = pattern
        self.nfa = compile_pattern(pattern)
        self.timeouts = timeouts
        self.reason = reason
        self.runs: dict[Any, Any] = {}
        self.times: dict[Any, int] = {}

    def _run(self, key: Any) -> Any:
        from cep.nfa.reference import ReferenceEngine

        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = ReferenceEngine(self.nfa)
        return run

    def _advance_key(self, key: Any, ts: int) -> list[Match]:
        last = self.times.get(key)
        if last is not None and ts <= last:
            return []
        self.times[key] = ts
        matches, timeouts = self._run(key).advance_time(ts)
        out: list[Match] = [m._with_key(key) for m in matches]
        if self.timeouts:
            out += [t._with_key(key) for t in timeouts]
        return out

    def process(self, keys: Sequence[Any], times: np.ndarray, events: Sequence[Any]) -> list[Match]:
        order: dict[Any, list[int]] = {}
        for i, k in enumerate(keys):
            order.setdefault(k, []).append(i)
        out: list[Match] = []
        for k, idx in order.items():
            idx.sort(key=lambda i: int(times[i]))  # stable: ties keep arrival order
            run = self._run(k)
            for i in idx:
                ts = int(times[i])
                out += self._advance_key(k, ts)
                out += [m._with_key(k) for m in run.process(events[i], ts)]
        return out

    def advance(self, timestamp: int) -> list[Match]:
        out: list[Match] = []
        for k in list(self.runs):
            out += self._advance_key(k, timestamp)
        return out

    def process_one(self, key: Any, ts: int, event: Any) -> list[Match]:
        """Like :meth:`process` for one event; a failing condition leaves the state as it was."""
        out = self._advance_key(key, ts)
        return out + [m._with_key(key) for m in self._run(key).process(event, ts)]

    @property
    def partial_matches(self) -> int:
        return sum(r.partial_match_count for r in self.runs.values())

    def next_deadline(self) -> int | None:
        dues = [d for d in (r.next_deadline() for r in self.runs.values()) if d is not None]
        return min(dues) if dues else None

    def capture(self) -> Callable[[], Snapshot]:
        from cep.runtime.reference_state import capture

        return capture(self)

    def restore(self, snap: Snapshot) -> None:
        from cep.runtime.reference_state import load

        load(self, snap)


# ---------------------------------------------------------------------- numba
class NumbaKeyed(KeyedEngine):
    """The columnar engine: each released batch is one kernel call over all its keys."""

    name = "numba"

    def __init__(self, pattern: Pattern, *, timeouts: bool = True, reason: str = "") -> None:
        self.pattern = pattern
        self.timeouts = timeouts
        self.reason = reason
        self.engine: Any = None
        self._templates: dict[tuple[tuple[str, str], ...], Any] = {}

    def blank(self, schema: dict[str, str]) -> Any:
        """A stateless columnar engine for ``schema``; compiled once per schema."""
        from cep.nfa.columnar import ColumnarEngine

        key = tuple(sorted(schema.items()))
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = ColumnarEngine(
                self.pattern, schema, timeouts=self.timeouts)
        return template.fresh()

    def next_deadline(self) -> int | None:
        return None if self.engine is None else self.engine.next_deadline()

    def check(self, event: Any) -> None:
        """Raise a CEPError if ``event``'s fields do not fit the engine's column types."""
        from cep.runtime.operator import check_fields

        engine = self._ready([event])
        check_fields(event, engine.schema, self._typed_columns(engine))

    def check_batch(self, events: Sequence[Any]) -> dict[int, str]:
        """Positions of events whose fields do not fit the column types, with the reason.

        Checks a column at a time: when every value of a column has the expected Python
        type (the usual case) no event is looked at twice."""
        from cep.errors import CEPError
        from cep.expr import field_of
        from cep.runtime.operator import check_fields

        if not events:
            return {}
        engine = self._ready(events[:1])
        fine = {"numeric": {int, float}, "string": {str}, "boolean": {bool}}
        suspects: set[int] = set()
        typed = self._typed_columns(engine)
        for name in typed:
            allowed = fine.get(engine.schema.get(name, "numeric"), set()) | {type(None)}
            try:
                values = [e[name] for e in events] if all(type(e) is dict for e in events) else [
                    field_of(e, name) for e in events]
            except KeyError:
                suspects.update(range(len(events)))
                continue
            types = {type(v) for v in values}
            if not types <= allowed:
                suspects.update(i for i, v in enumerate(values) if type(v) not in allowed)
            if int in types and engine.schema.get(name, "numeric") == "numeric":
                try:
                    np.array(values, dtype=np.float64)
                except (OverflowError, TypeError, ValueError):
                    # an integer beyond float64 (or another misfit, already suspected)
                    suspects.update(i for i, v in enumerate(values) if type(v) is int
                                    and not -(2**1024) < v < 2**1024)
        bad: dict[int, str] = {}
        for i in sorted(suspects):
            try:
                check_fields(events[i], engine.schema, typed)
            except CEPError as err:
                bad[i] = str(err)
        return bad

    @staticmethod
    def _typed_columns(engine: Any) -> list[str]:
        """The columns whose values must fit a type (not those only tested for null)."""
        return [name for name in engine.program.fields() if name not in engine.null_only]

    def _ready(self, events: Sequence[Any]) -> Any:
        if self.engine is None:
            from cep.nfa.columnar import ColumnarEngine, schema_of_rows

            schema = schema_of_rows(events, self.pattern)
            self.engine = ColumnarEngine(self.pattern, schema, timeouts=self.timeouts)
        return self.engine

    def process(self, keys: Sequence[Any], times: np.ndarray, events: Sequence[Any]) -> list[Match]:
        from cep.nfa.columnar import Batch

        if not len(events):
            return []
        engine = self._ready(events)
        found = engine.process(Batch.of_events(list(events)), _keys_array(keys), times)
        return engine.in_key_order(found)

    def advance(self, timestamp: int) -> list[Match]:
        if self.engine is None:
            return []
        return self.engine.advance(timestamp)

    @property
    def partial_matches(self) -> int:
        return 0 if self.engine is None else self.engine.partial_matches

    def capture(self) -> Callable[[], Snapshot]:
        from cep.runtime.numba_state import capture

        return capture(self)

    def restore(self, snap: Snapshot) -> None:
        from cep.runtime.numba_state import load

        load(self, snap)


def _keys_array(keys: Sequence[Any]) -> np.ndarray:
    # fromiter keeps tuples (composite keys) as single objects
    return np.fromiter(keys, dtype=object, count=len(keys))


__all__ = ["KeyedEngine", "NumbaKeyed", "ReferenceKeyed", "Snapshot", "Timeout", "make_engine"]
