"""The one interface every caller drives an engine through.

``cep.match``, :class:`~cep.nfa.matcher.Matcher`, the runtime's operator and the Spark
group function all hand an engine :class:`~cep.nfa.events.Events` (rows, keys, times),
move its event time forward, ask when it next needs time to move, cap its partial
matches, and snapshot or restore it.  Two engines implement it: the reference engine
(:mod:`cep.nfa.reference_engine`, any condition, the oracle) and the numba engine
(:mod:`cep.nfa.numba_engine`, expression conditions, compiled).  Each owns its state
format; nobody reads an engine's private fields.

>>> import numpy as np
>>> from cep import Pattern, col
>>> from cep.nfa.events import Events, Keys
>>> p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
>>> engine = make_engine(p, "numba")
>>> step = engine.process(Events.of([{"v": 1}, {"v": 2}], Keys.none(2), np.array([1, 2])))
>>> [dict(m) for m in step.found]
[{'a': [{'v': 1}], 'b': [{'v': 2}]}]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from cep.errors import CEPError
from cep.matches import Match
from cep.nfa.capacity import DEFAULT_CAP, Cap
from cep.nfa.events import EntryRefs, Events, is_table, row_objects

EngineName = Literal["auto", "reference", "numba"]
ENGINES = ("auto", "reference", "numba")


@dataclass
class Snapshot:
    """An engine's state as data: ``meta`` (JSON), ``arrays`` (numeric), ``rows`` (events:
    a list of Python objects, or an Arrow table when the engine held its events as Arrow
    columns, so that a checkpoint writes them as they are, without a Python object each).

    >>> Snapshot({"engine": "reference"}).arrays
    {}
    """

    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    #: may be :class:`~cep.nfa.events.EntryRefs` from an engine's
    #: :meth:`Engine.capture` (see :meth:`held`)
    rows: Any = field(default_factory=list)

    def held(self) -> Snapshot:
        """This snapshot with its events taken when it holds them by reference (a table,
        or a list of dicts when the batches' columns do not join).

        >>> Snapshot(rows=["x"]).held().rows
        ['x']
        """
        if not isinstance(self.rows, EntryRefs):
            return self
        rows = self.rows.taken() if len(self.rows) else []
        return Snapshot(self.meta, self.arrays, rows if is_table(rows) else row_objects(rows))


@dataclass
class Step:
    """What one batch did: the matches (and timeouts, when tracked) it completed, key by
    key in order of each key's first event in the batch (a list, or the engine's columns:
    :class:`~cep.nfa.found.Found`), and the events that could not be matched (a condition
    raised), by position in the batch, with the error."""

    found: Sequence[Match] = field(default_factory=list)
    refused: dict[int, CEPError] = field(default_factory=dict)


class Engine(Protocol):
    """What every engine does; see the module docstring."""

    #: ``"reference"`` or ``"numba"``
    name: str
    #: why this engine was chosen (``engine="auto"`` explains itself)
    reason: str
    #: partial matches a key may hold after each event, and what happens beyond
    #: (:mod:`cep.nfa.capacity`)
    cap: Cap

    def screen(self, events: Events) -> dict[int, str]:
        """Events whose fields the engine cannot read (a number where it compares text...),
        by position, with the reason; checked when events arrive, before they wait."""
        ...

    def process(self, events: Events) -> Step:
        """Match a batch of events (any order: each key's events are taken in (time,
        arrival) order); event time of each key moves to each event's time first."""
        ...

    def advance(self, time: int) -> Sequence[Match]:
        """Move every key's event time to ``time``: windows that end by then time out (as
        :class:`~cep.Timeout`, when tracked) and trailing ``not_followed_by`` matches
        complete."""
        ...

    def next_deadline(self) -> int | None:
        """The earliest event time at which advancing can fire something (None: never)."""
        ...

    def stop_starting(self) -> None:
        """Begin no new partial match from now on (a rule version drained after a change):
        the partial matches held go on, and may still complete or time out."""
        ...

    @property
    def partial_matches(self) -> int:
        """Live partial matches (and completed ones held for a skip strategy), all keys."""
        ...

    @property
    def keys_with_state(self) -> int:
        """Keys holding anything; a key with nothing pending holds no state at all."""
        ...

    def take_dropped(self) -> int:
        """Partial matches the cap dropped since the last call."""
        ...

    def state_bytes(self) -> int:
        """About how many bytes the state takes in memory (events it may still take too)."""
        ...

    def capture(self) -> Callable[[], Snapshot]:
        """Freeze the state now, cheaply; the returned function serialises it later (on
        another thread) while processing goes on (its events may be held by reference:
        see :meth:`Snapshot.held`)."""
        ...

    def snapshot(self) -> Snapshot:
        """The state now, serialised (what :meth:`capture`'s function gives, at once, its
        events taken)."""
        return self.capture()().held()

    def restore(self, snap: Snapshot) -> None:
        """Replace the state with a snapshot of an engine for the same pattern."""
        ...

    def fresh(self) -> Engine:
        """An engine with no state that shares this one's compiled tables (cheap)."""
        ...


def choose_engine(pattern: Any, engine: str) -> tuple[str, str]:
    """(engine to use, why): ``auto`` takes numba when every condition is an expression.

    >>> from cep import Pattern, col
    >>> choose_engine(Pattern.begin("a").where(col("v") > 1), "auto")
    ('numba', 'auto: every condition is an expression')
    """
    if engine not in ENGINES:
        raise CEPError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    from cep.nfa.bytecode import compilable_reason, inexact_reason

    reason = compilable_reason(pattern) or inexact_reason(pattern)
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


def make_engine(pattern: Any, engine: str = "auto", *, timeouts: bool = True,
                schema: Mapping[str, str] | None = None, cap: Cap = DEFAULT_CAP) -> Engine:
    """The engine for ``pattern``: ``"auto"`` picks numba when every condition is an
    expression, else the reference engine; ``timeouts=False`` does not report timeouts.
    ``schema`` gives the numba engine its column types up front (else the first batch
    does).  ``cap`` bounds each key's partial matches (10,000 by default, failing beyond).

    >>> from cep import Pattern, col
    >>> make_engine(Pattern.begin("a").where(col("v") > 1)).name
    'numba'
    >>> make_engine(Pattern.begin("a").where(lambda e: e > 1)).name
    'reference'
    """
    chosen, reason = choose_engine(pattern, engine)
    if chosen == "numba":
        from cep.nfa.numba_engine import NumbaEngine

        return NumbaEngine(pattern, timeouts=timeouts, reason=reason, schema=schema, cap=cap)
    from cep.nfa.reference_engine import ReferenceEngine

    return ReferenceEngine(pattern, timeouts=timeouts, reason=reason, cap=cap)


class MeasureReader(str):
    """A measure's name among the readers of a field (:func:`fields_absent`), which are
    otherwise stages' names."""


def fields_absent(pattern: Any, events: Events, measures: Mapping[str, Any] | None = None
                  ) -> dict[str, list[str]]:
    """The fields the pattern's expressions (and ``measures``) read that no event of
    ``events`` holds, each with the stages (and measures) that read it: an event without a
    field reads null there, so a field absent from all of them is most likely misspelt
    (its conditions can never be true, its measures are null in every match).

    >>> from cep import Pattern, col, first
    >>> p = Pattern.begin("a").where(col("amout") > 1).next("b").where(col("v") == 2)
    >>> fields_absent(p, Events.of([{"amount": 5, "v": 2}]), {"z": first("a", "vv")})
    {'amout': ['a'], 'vv': ['z']}
    """
    from cep.expr import fields_read
    from cep.nfa.bytecode import referenced_columns, stages_reading

    readers = stages_reading(pattern)
    out = {name: readers.get(name, []) for name in referenced_columns(pattern)
           if not events.has_field(name)}
    for measure, expr in (measures or {}).items():
        for name in fields_read(expr):
            if not events.has_field(name):
                out.setdefault(name, []).append(MeasureReader(measure))
    return out


def absent_message(absent: Mapping[str, list[str]], where: str) -> str:
    """Why a run refuses (or warns about) fields absent from every event.

    >>> absent_message({"amout": ["a"]}, "the input")
    "field 'amout' (read by stage 'a') is absent from every event of the input: is it misspelt? (an event without a field reads null there)"
    >>> absent_message({"amout": ["a", MeasureReader("paid")]}, "the input")[:56]
    "field 'amout' (read by stage 'a' and measure 'paid') is "
    """
    parts = []
    for name, readers in absent.items():
        kinds = []
        for word, these in (
                ("stage", [r for r in readers if not isinstance(r, MeasureReader)]),
                ("measure", [r for r in readers if isinstance(r, MeasureReader)])):
            if these:
                kinds.append(f"{word}{'s' if len(these) > 1 else ''} "
                             f"{', '.join(repr(str(r)) for r in these)}")
        who = f" (read by {' and '.join(kinds)})" if kinds else ""
        parts.append(f"{name!r}{who}")
    many = len(parts) > 1
    return (f"field{'s' if many else ''} {', '.join(parts)} {'are' if many else 'is'} absent "
            f"from every event of {where}: is it misspelt? (an event without a field reads "
            "null there)")
