"""The reference engine behind the :class:`~cep.nfa.engine.Engine` interface: one
:class:`~cep.nfa.reference.ReferenceRun` per key, any condition (Python callables too).

>>> import numpy as np
>>> from cep import Pattern
>>> from cep.nfa.events import Events, Keys
>>> engine = ReferenceEngine(Pattern.begin("a").where(lambda e: e == "x").next("b"))
>>> batch = Events.of(["x", "y", "x"], Keys.of_values([1, 1, 2]), np.array([1, 2, 3]))
>>> [(m.key, dict(m)) for m in engine.process(batch).found], engine.partial_matches
([(1, {'a': ['x'], 'b': ['y']})], 1)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from cep.errors import ConditionError
from cep.matches import Match
from cep.nfa.capacity import DEFAULT_CAP, Cap, too_many
from cep.nfa.compiler import compile_pattern
from cep.nfa.engine import Engine, Snapshot, Step
from cep.nfa.events import Events
from cep.nfa.reference import OverCap, ReferenceRun
from cep.nfa.screening import misfits


class ReferenceEngine(Engine):
    """Keyed reference engine; see :class:`~cep.nfa.engine.Engine` for what each method does."""

    name = "reference"

    def __init__(self, pattern: Any, *, timeouts: bool = True, reason: str = "",
                 nfa: Any = None, cap: Cap = DEFAULT_CAP) -> None:
        self.pattern = pattern
        self.nfa = nfa if nfa is not None else compile_pattern(pattern)
        self.timeouts = timeouts
        self.reason = reason
        self.cap = cap
        #: key -> its run, and the event time it has reached; a key whose run holds
        #: nothing is in neither (it is as a key never seen)
        self.runs: dict[Any, ReferenceRun] = {}
        self.times: dict[Any, int] = {}
        self._dropped = 0
        self._forgotten = 0  # keys forgotten since the dicts were last copied
        #: False once :meth:`stop_starting` was called
        self.starting = True

    def fresh(self) -> ReferenceEngine:
        return ReferenceEngine(self.pattern, timeouts=self.timeouts, reason=self.reason,
                               nfa=self.nfa, cap=self.cap)

    def screen(self, events: Events) -> dict[int, str]:
        names, schema = self._typed
        return misfits(events, schema, names) if names else {}

    @cached_property
    def _typed(self) -> tuple[list[str], dict[str, str]]:
        """The fields to screen and their types: those the pattern's expressions imply,
        when every condition is an expression (as the numba engine would refuse them, so
        both engines refuse the same events); none when a Python condition reads events
        as it likes."""
        from cep.nfa.bytecode import compilable_reason, null_tested_only, schema_from_pattern

        if compilable_reason(self.pattern) is not None:
            return [], {}
        schema = schema_from_pattern(self.pattern)
        untyped = null_tested_only(self.pattern)
        return [name for name in schema if name not in untyped], schema

    def process(self, events: Events) -> Step:
        step = Step()
        if not len(events):
            return step
        rows = events.objects()
        keys_in = events.keys.unique()  # group by key value, whatever code it came with
        codes = keys_in.codes
        times = events.times
        # keys in order of first appearance, each key's events by time (ties: arrival)
        order = np.lexsort((np.arange(len(codes)), times, _first_seen_rank(codes)))
        found = step.found
        keys = keys_in.values
        for i in order.tolist():
            key = keys[codes[i]]
            if not self.starting and key not in self.runs:
                continue  # draining: a key holding nothing begins nothing
            ts = int(times[i])
            found += self._advance_key(key, ts)
            run = self._run(key)
            try:
                found += [m._with_key(key) for m in run.process(rows[i], ts)]
            except ConditionError as err:  # the run's state is as before this event
                step.refused[i] = err
            except OverCap as over:
                assert self.cap.per_key is not None
                raise too_many(key, over.count, self.cap.per_key, over.stages) from None
            self._settle(key, run)
        return step

    def advance(self, time: int) -> list[Match]:
        out: list[Match] = []
        for key in list(self.runs):
            out += self._advance_key(key, time)
            self._settle(key, self.runs[key])
        return out

    def stop_starting(self) -> None:
        self.starting = False
        for run in self.runs.values():
            run.starting = False

    def next_deadline(self) -> int | None:
        dues = [d for d in (r.next_deadline() for r in self.runs.values()) if d is not None]
        return min(dues) if dues else None

    @property
    def partial_matches(self) -> int:
        return sum(r.partial_match_count for r in self.runs.values())

    @property
    def keys_with_state(self) -> int:
        return len(self.runs)

    def take_dropped(self) -> int:
        dropped, self._dropped = self._dropped, 0
        return dropped

    def state_bytes(self) -> int:
        from cep.nfa.reference_state import size_of

        return size_of(self)

    def capture(self) -> Callable[[], Snapshot]:
        from cep.nfa.reference_state import capture

        return capture(self)

    def restore(self, snap: Snapshot) -> None:
        from cep.nfa.reference_state import load

        load(self, snap)

    # ----------------------------------------------------------- internals
    def new_run(self) -> ReferenceRun:
        """A run of this engine's pattern under its cap, as for a key never seen."""
        run = ReferenceRun(self.nfa, self.cap)
        run.starting = self.starting
        return run

    def _run(self, key: Any) -> ReferenceRun:
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = self.new_run()
        return run

    def _settle(self, key: Any, run: ReferenceRun) -> None:
        """After ``key``'s run moved: count what its cap dropped, and forget the key if it
        holds nothing any more."""
        if run.dropped:
            self._dropped += run.dropped
            run.dropped = 0
        if run.idle:
            del self.runs[key]
            self.times.pop(key, None)
            self._forgotten += 1
            if self._forgotten > max(1024, 2 * len(self.runs)):
                # a dict keeps its size after deletions: copies are as small as their keys
                self.runs, self.times = dict(self.runs), dict(self.times)
                self._forgotten = 0

    def _advance_key(self, key: Any, ts: int) -> list[Match]:
        """Time of ``key`` to ``ts`` (once per distinct time, as FlinkCEP's operator does)."""
        last = self.times.get(key)
        if last is not None and ts <= last:
            return []
        self.times[key] = ts
        matches, timeouts = self._run(key).advance_time(ts)
        out: list[Match] = [m._with_key(key) for m in matches]
        if self.timeouts:
            out += [t._with_key(key) for t in timeouts]
        return out


def _first_seen_rank(codes: np.ndarray) -> np.ndarray:
    """For each event, the rank of its key by first appearance in the batch."""
    if not len(codes):
        return codes
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]
