"""The reference engine: FlinkCEP's NFA semantics in plain Python; the oracle for all others.

Partial matches ("computations") point at the tail of their event path in a
persistent linked list: a branch shares its prefix with its parent and nothing
is ever copied.  A path node no partial match can reach is freed by Python's
reference counting, which is the node store's reclamation here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cep.errors import CEPError, ConditionError
from cep.matches import Match, Timeout
from cep.nfa.capacity import NO_CAP, Cap, over_cap
from cep.nfa.model import NFA, Action, State, Transition
from cep.nfa.priority_queue import PriorityQueue

EventId = tuple[int, int]
_LAST = (2**63 - 1, 2**31 - 1)


class OverCap(CEPError):
    """A run went over its cap with the ``fail`` policy: how many partial matches it held
    and the stages they wait in (the engine adds the key:
    :func:`~cep.nfa.capacity.too_many`)."""

    def __init__(self, count: int, stages: list[str]) -> None:
        super().__init__(f"{count} partial matches")
        self.count, self.stages = count, stages


class PathNode:
    """One taken event: the event, its time and id, the stage that took it, and the node before."""

    __slots__ = ("event", "ts", "eid", "stage", "parent")

    def __init__(
        self, event: Any, ts: int, eid: EventId, stage: str, parent: PathNode | None
    ) -> None:
        self.event = event
        self.ts = ts
        self.eid = eid
        self.stage = stage
        self.parent = parent


class Computation:
    """A partial match: where it is in the NFA and what it has taken."""

    __slots__ = ("state", "node", "start_ts", "prev_ts", "start_id")

    def __init__(
        self,
        state: State,
        node: PathNode | None,
        start_ts: int,
        prev_ts: int,
        start_id: EventId | None,
    ) -> None:
        self.state = state
        self.node = node
        self.start_ts = start_ts
        self.prev_ts = prev_ts
        self.start_id = start_id

    def __repr__(self) -> str:
        return f"Computation({self.state.name}, start={self.start_id})"


def _order(c: Computation) -> EventId:
    # FlinkCEP orders partial matches by their first event (timestamp, then arrival)
    return c.start_id if c.start_id is not None else _LAST


def path_of(node: PathNode | None) -> list[PathNode]:
    out: list[PathNode] = []
    while node is not None:
        out.append(node)
        node = node.parent
    out.reverse()
    return out


def group_by_stage(nodes: Sequence[PathNode]) -> dict[str, list[PathNode]]:
    grouped: dict[str, list[PathNode]] = {}
    for n in nodes:
        grouped.setdefault(n.stage, []).append(n)
    return grouped


class _Context:
    """What an iterative condition sees: the partial match so far and the event's time."""

    __slots__ = ("_node", "timestamp", "_events")

    def __init__(self, node: PathNode | None, timestamp: int) -> None:
        self._node = node
        self.timestamp = timestamp
        self._events: dict[str, list[Any]] | None = None

    def events(self, stage: str) -> list[Any]:
        if self._events is None:
            self._events = _events_by_stage(path_of(self._node))
        return list(self._events.get(stage, ()))

    def previous_event(self) -> Any:
        """The event the partial match took last (None before its first event)."""
        return None if self._node is None else self._node.event

    # FlinkCEP spelling
    def get_events_for_pattern(self, stage: str) -> list[Any]:
        return self.events(stage)

    getEventsForPattern = get_events_for_pattern


class ReferenceRun:
    """One key's NFA run (FlinkCEP's NFA): feed events with :meth:`process`, move time with
    :meth:`advance_time`; :class:`~cep.nfa.reference_engine.ReferenceEngine` keeps one per key."""

    def __init__(self, nfa: NFA, cap: Cap = NO_CAP) -> None:
        self.nfa = nfa
        #: at most ``cap.per_key`` partial matches after an event; beyond it, fail
        #: (:class:`OverCap`) or drop the oldest or newest by first event
        self.cap = cap
        #: partial matches the cap dropped
        self.dropped = 0
        #: False: the start state takes no event, so no new partial match begins (a rule
        #: version being drained after a change); those held go on
        self.starting = True
        self._seq = 0
        self.partial: PriorityQueue[Computation] = PriorityQueue(_order)
        self.partial.add(Computation(nfa.start, None, -1, -1, None))
        self.completed: PriorityQueue[Computation] = PriorityQueue(_order)

    # ---------------------------------------------------------------- API
    def process(self, event: Any, timestamp: int) -> list[Match]:
        eid = (timestamp, self._seq)
        self._seq += 1
        new_partial: PriorityQueue[Computation] = PriorityQueue(_order)
        potential: PriorityQueue[Computation] = PriorityQueue(_order)
        for comp in self.partial:
            retained: list[Computation] = []
            stopped = False
            for nxt in self._next(comp, event, timestamp, eid):
                if nxt.state.is_final:
                    potential.add(nxt)
                elif nxt.state.is_stop:
                    stopped = True
                else:
                    retained.append(nxt)
            if not stopped:
                new_partial.add_all(retained)
        result: list[Match] = []
        self._emit(potential, new_partial, result)
        if self.cap.per_key is not None and len(new_partial) > self.cap.per_key:
            self._hold_to_cap(new_partial, result)
        self.partial = new_partial
        return result

    @property
    def idle(self) -> bool:
        """Nothing but the start state: the run is as a run that never saw an event."""
        partial = self.partial
        return (not self.completed and len(partial) == 1
                and partial.peek().state.is_start)  # type: ignore[union-attr]

    def advance_time(self, timestamp: int) -> tuple[list[Match], list[Timeout]]:
        nfa = self.nfa
        timeouts: list[Timeout] = []
        new_partial: PriorityQueue[Computation] = PriorityQueue(_order)
        potential: PriorityQueue[Computation] = PriorityQueue(_order)
        for comp in self.partial:
            if comp.state.is_start:
                new_partial.add(comp)
                continue
            gap = nfa.windows.get(comp.state.name, 0)
            gap_expired = gap > 0 and timestamp - comp.prev_ts >= gap
            span_expired = nfa.window > 0 and timestamp - comp.start_ts >= nfa.window
            if not (gap_expired or span_expired):
                new_partial.add(comp)
            elif comp.state.is_pending:
                # a trailing not_followed_by whose window passed: the match is complete
                potential.add(comp)
            else:
                expiry = comp.prev_ts + gap if gap_expired else comp.start_ts + nfa.window
                timeouts.append(_timeout(comp.node, expiry))
        result: list[Match] = []
        self._emit(potential, new_partial, result)
        self.partial = new_partial
        return result, timeouts

    def next_deadline(self) -> int | None:
        """The earliest event time at which a live partial match's window closes (None when
        none can)."""
        nfa = self.nfa
        due: int | None = None
        for comp in self.partial:
            if comp.state.is_start:
                continue
            gap = nfa.windows.get(comp.state.name, 0)
            for t in (comp.prev_ts + gap if gap > 0 else None,
                      comp.start_ts + nfa.window if nfa.window > 0 else None):
                if t is not None and (due is None or t < due):
                    due = t
        return due

    def state(self) -> tuple[int, list[Computation], list[Computation]]:
        """(events seen, partial matches, completed matches held for a skip strategy), in the
        queues' own order: computations never change once made, so this freezes the run."""
        return self._seq, self.partial.heap(), self.completed.heap()

    def load_state(self, seq: int, partial: list[Computation], completed: list[Computation]
                   ) -> None:
        """Continue from :meth:`state`."""
        self._seq = seq
        self.partial = PriorityQueue.from_heap(_order, partial)
        self.completed = PriorityQueue.from_heap(_order, completed)

    @property
    def partial_match_count(self) -> int:
        """Live partial matches, not counting the ever-present start state."""
        return sum(1 for c in self.partial if not c.state.is_start) + len(self.completed)

    # ----------------------------------------------------------- internals
    def _hold_to_cap(self, partial: PriorityQueue[Computation], result: list[Match]) -> None:
        """No more than ``cap`` partial matches after an event (the kernel's ``_over_cap``)."""
        cap = self.cap
        assert cap.per_key is not None
        items = partial.heap()
        doomed = over_cap(items, lambda c: c.start_id, cap.per_key,
                          newest=cap.on_overflow == "drop_newest")
        if not doomed:
            return
        if cap.on_overflow == "fail":
            live = [c for c in items if c.start_id is not None]
            raise OverCap(len(live), [c.state.stage for c in live])
        keep = {id(items[i]) for i in range(len(items)) if i not in doomed}
        partial.remove_where(lambda c: id(c) not in keep)
        self.dropped += len(doomed)
        if self.nfa.skip.is_skip and len(self.completed):
            # completed matches that waited for a dropped one may leave now
            self._emit(PriorityQueue(_order), partial, result)

    def _emit(
        self,
        potential: PriorityQueue[Computation],
        partial: PriorityQueue[Computation],
        result: list[Match],
    ) -> None:
        skip = self.nfa.skip
        completed = self.completed
        completed.add_all(potential)
        while (earliest := completed.peek()) is not None:
            if skip.is_skip:
                # matches leave in start order: wait for earlier-started partial matches
                first_partial = partial.peek()
                if first_partial is not None and not _order(earliest) <= _order(first_partial):
                    break
            completed.poll()
            nodes = path_of(earliest.node)
            if skip.is_skip:
                ids = {k: [n.eid for n in v] for k, v in group_by_stage(nodes).items()}
                pruning = skip.pruning_id(ids)
                if pruning is not None:
                    def doomed(c: Computation, p: EventId = pruning) -> bool:
                        return c.start_id is not None and skip.should_prune(c.start_id, p)

                    partial.remove_where(doomed)
                    completed.remove_where(doomed)
            result.append(_match(nodes))

    def _next(
        self, comp: Computation, event: Any, ts: int, eid: EventId
    ) -> list[Computation]:
        if not self.starting and comp.state.is_start:
            return [comp]
        ctx = _Context(comp.node, ts)
        edges: list[Transition] = []
        stack = [comp.state]
        while stack:
            state = stack.pop()
            for t in state.transitions:
                if t.condition is None or self._check(t, event, ctx):
                    if t.action is Action.PROCEED:
                        stack.append(t.target)
                    else:
                        edges.append(t)
        out: list[Computation] = []
        at_start = comp.state.is_start
        for t in edges:
            if t.action is Action.IGNORE:
                if not at_start:
                    out.append(
                        Computation(t.target, comp.node, comp.start_ts, comp.prev_ts, comp.start_id)
                    )
                continue
            node = PathNode(event, ts, eid, t.source.stage, comp.node)
            if at_start:
                start_ts, start_id = ts, eid
            else:
                start_ts, start_id = comp.start_ts, comp.start_id
            out.append(Computation(t.target, node, start_ts, ts, start_id))
            final = self._final_after_proceed(t.target, event, ctx)
            if final is not None:
                out.append(Computation(final, node, start_ts, ts, start_id))
        if at_start:
            out.append(Computation(comp.state, None, -1, -1, None))
        return out

    def _final_after_proceed(self, state: State, event: Any, ctx: _Context) -> State | None:
        stack = [state]
        while stack:
            current = stack.pop()
            for t in current.transitions:
                if t.action is Action.PROCEED and (
                    t.condition is None or self._check(t, event, ctx)
                ):
                    if t.target.is_final:
                        return t.target
                    stack.append(t.target)
        return None

    @staticmethod
    def _check(t: Transition, event: Any, ctx: _Context) -> bool:
        assert t.condition is not None
        try:
            return t.condition.test(event, ctx)
        except CEPError:
            raise
        except Exception as err:  # a user condition failed: say where and on what
            raise ConditionError(
                f"condition of stage {t.source.stage!r} raised {type(err).__name__}: {err} "
                f"(event: {event!r}, timestamp: {ctx.timestamp})"
            ) from err


def _events_by_stage(nodes: list[PathNode]) -> dict[str, list[Any]]:
    return {k: [n.event for n in v] for k, v in group_by_stage(nodes).items()}


def _match(nodes: list[PathNode]) -> Match:
    m = Match(_events_by_stage(nodes), nodes[0].ts, nodes[-1].ts)
    m._last = nodes[-1].event  # its stages do not say which came last
    return m


def _timeout(node: PathNode | None, expiry: int) -> Timeout:
    nodes = path_of(node)
    grouped = _events_by_stage(nodes)
    start = nodes[0].ts if nodes else expiry
    end = nodes[-1].ts if nodes else expiry
    t = Timeout(grouped, start, end, expiry)
    if nodes:
        t._last = nodes[-1].event
    return t
