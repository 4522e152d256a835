"""The numba engine behind the :class:`~cep.nfa.engine.Engine` interface.

A :class:`~cep.nfa.columnar.ColumnarEngine` is compiled for the column types of the
fields the pattern reads; they are known once the first batch arrives, so the engine
is made then (and kept per schema, so :meth:`NumbaEngine.fresh` engines share the
compiled tables).  Events whose fields do not fit those types are found by
:meth:`NumbaEngine.screen` a column at a time, before they are buffered.

>>> import numpy as np
>>> from datetime import timedelta
>>> from cep import Pattern, col
>>> from cep.nfa.events import Events, Keys
>>> p = (Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
...      .within(timedelta(seconds=1)))
>>> engine = NumbaEngine(p)
>>> step = engine.process(Events.of([{"v": 1}, {"v": 1}], Keys.of_values(["k", "k"]),
...                                 np.array([1, 2])))
>>> len(step.found), engine.partial_matches
(0, 2)
>>> [(type(m).__name__, m.timestamp) for m in engine.advance(5000)]
[('Timeout', 1001), ('Timeout', 1002)]
>>> engine.screen(Events.of([{"v": "text"}, {"v": 3}]))
{0: "field 'v' is 'text': the pattern needs a number"}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cep.errors import MalformedPatternError
from cep.expr import NUMERIC
from cep.matches import Match
from cep.nfa.capacity import DEFAULT_CAP, Cap
from cep.nfa.columnar import ColumnarEngine, schema_of_arrow, schema_of_rows
from cep.nfa.engine import Engine, Snapshot, Step
from cep.nfa.events import Events
from cep.nfa.screening import beyond_float64, misfits


class NumbaEngine(Engine):
    """Keyed numba engine; see :class:`~cep.nfa.engine.Engine` for what each method does."""

    name = "numba"

    def __init__(self, pattern: Any, *, timeouts: bool = True, reason: str = "",
                 schema: Mapping[str, str] | None = None, cap: Cap = DEFAULT_CAP) -> None:
        self.pattern = pattern
        self.timeouts = timeouts
        self.reason = reason
        self.cap = cap
        #: compiled engines by column types, shared with :meth:`fresh` engines
        self._templates: dict[tuple[tuple[str, str], ...], ColumnarEngine] = {}
        #: False once :meth:`stop_starting` was called
        self.starting = True
        #: the engine that holds the state (None until the first batch gives the types)
        self.core: ColumnarEngine | None = None if schema is None else self.blank(schema)

    def blank(self, schema: Mapping[str, str]) -> ColumnarEngine:
        """A stateless columnar engine for ``schema``; compiled once per schema."""
        key = tuple(sorted(schema.items()))
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = ColumnarEngine(
                self.pattern, schema, timeouts=self.timeouts, cap=self.cap)
        core = template.fresh()
        if not self.starting:
            core.stop_starting()
        return core

    def fresh(self) -> NumbaEngine:
        new = NumbaEngine(self.pattern, timeouts=self.timeouts, reason=self.reason,
                          cap=self.cap)
        new._templates = self._templates
        if self.core is not None:
            new.core = new.blank(self.core.schema)
        return new

    # ---------------------------------------------------------------- input
    def _ready(self, events: Events, fit: bool = False) -> ColumnarEngine:
        """The engine compiled for the column types of the first events it sees; with
        ``fit`` (screening: rows that do not fit are refused one by one), for the types
        the pattern implies where the first events' columns have others."""
        if self.core is None:
            schema = schema_of_events(events, self.pattern)
            try:
                self.core = self.blank(schema)
            except MalformedPatternError as err:
                fitted = _as_implied(schema, self.pattern) if fit else None
                if fitted is not None:
                    # a column of another type than the pattern needs (text where it
                    # compares numbers, in a first file or batch): compiled for what the
                    # pattern needs, the rows that do not fit are refused one by one, as
                    # later batches' are (screen), and a batch that fits can still come
                    try:
                        self.core = self.blank(fitted)
                        return self.core
                    except MalformedPatternError:
                        pass
                if not events.is_table:
                    raise
                # the input's column types decide the pattern's: say what they are
                kinds = ", ".join(f"{name}: {kind}" for name, kind in schema.items())
                raise type(err)(f"{err} (the input's columns the pattern reads: {kinds})"
                                ) from err
        return self.core

    def screen(self, events: Events) -> dict[int, str]:
        if not len(events):
            return {}
        core = self._ready(events, fit=True)
        typed = [name for name in core.program.fields() if name not in core.null_only]
        bad = misfits(events, core.schema, typed)
        for i, reason in beyond_float64(events, core.schema, typed).items():
            bad.setdefault(i, reason)
        return bad

    # ------------------------------------------------------------- matching
    def process(self, events: Events) -> Step:
        if not len(events):
            return Step()
        core = self._ready(events)
        return Step(core.process(events))

    def advance(self, time: int) -> Sequence[Match]:
        return [] if self.core is None else self.core.advance(time)

    def next_deadline(self) -> int | None:
        return None if self.core is None else self.core.next_deadline()

    def stop_starting(self) -> None:
        self.starting = False
        if self.core is not None:
            self.core.stop_starting()

    @property
    def partial_matches(self) -> int:
        return 0 if self.core is None else self.core.partial_matches

    @property
    def keys_with_state(self) -> int:
        return 0 if self.core is None else self.core.keys_with_state

    def take_dropped(self) -> int:
        return 0 if self.core is None else self.core.take_dropped()

    def state_bytes(self) -> int:
        return 0 if self.core is None else self.core.state_bytes()

    # ---------------------------------------------------------------- state
    def capture(self) -> Callable[[], Snapshot]:
        from cep.nfa.numba_state import capture

        return capture(self)

    def restore(self, snap: Snapshot) -> None:
        from cep.nfa.numba_state import load

        load(self, snap)


def _as_implied(schema: dict[str, str], pattern: Any) -> dict[str, str] | None:
    """``schema`` with the types ``pattern`` implies where they differ (None: none do)."""
    from cep.nfa.bytecode import schema_from_pattern

    implied = schema_from_pattern(pattern)
    fitted = {name: implied.get(name, kind) for name, kind in schema.items()}
    return fitted if fitted != schema else None


def schema_of_events(events: Events, pattern: Any) -> dict[str, str]:
    """Column types of the fields ``pattern`` reads: from the Arrow types when the rows are a
    table (a column Arrow could only type as null takes the type the pattern implies), from
    the first non-null values of Python events otherwise.

    >>> import pyarrow as pa
    >>> from cep import Pattern, col
    >>> p = Pattern.begin("a").where(col("s") == "x").next("b").where(col("v") > 1)
    >>> schema_of_events(Events.of(pa.table({"s": [None], "v": [2]})), p)
    {'s': 'string', 'v': 'numeric'}
    """
    if not events.is_table:
        return schema_of_rows(events.objects(), pattern)
    from cep.nfa.bytecode import referenced_columns, schema_from_pattern

    found = schema_of_arrow(events.rows.schema)
    implied = schema_from_pattern(pattern)
    return {name: found.get(name, implied.get(name, NUMERIC))
            for name in referenced_columns(pattern)}
