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

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import numpy as np

from cep.errors import CEPError, MalformedPatternError
from cep.expr import BOOLEAN, NUMERIC, STRING, value_of
from cep.matches import Match
from cep.nfa.capacity import DEFAULT_CAP, Cap
from cep.nfa.columnar import ColumnarEngine, schema_of_arrow, schema_of_rows
from cep.nfa.engine import Engine, Snapshot, Step
from cep.nfa.events import Events


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
    def _ready(self, events: Events) -> ColumnarEngine:
        if self.core is None:
            schema = schema_of_events(events, self.pattern)
            try:
                self.core = self.blank(schema)
            except MalformedPatternError as err:
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
        core = self._ready(events)
        typed = [name for name in core.program.fields() if name not in core.null_only]
        if events.is_table:
            return _screen_table(events.rows, core.schema, typed)
        if events.is_frame:
            return _screen_frame(events, core.schema, typed)
        return _screen_objects(events.objects(), core.schema, typed)

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


# -------------------------------------------------------------- screening
def _screen_table(table: Any, schema: Mapping[str, str], names: list[str]) -> dict[int, str]:
    """Rows of an Arrow table whose fields do not fit: a column of the wrong type misfits in
    every row where it is not null (a column is one type); a missing column is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bad: dict[int, str] = {}
    for name in names:
        if name not in table.column_names:
            continue  # null in every row
        column = table.column(name)
        t = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if pa.types.is_null(t) or _fits(t, schema.get(name, NUMERIC)):
            continue
        valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(valid)
        if not len(rows):
            continue
        values = column.take(pa.array(rows)).to_pylist()
        for i, v in zip(rows.tolist(), values, strict=True):
            bad.setdefault(i, _misfit(name, v, schema.get(name, NUMERIC)))
    return bad


def _screen_frame(events: Events, schema: Mapping[str, str], names: list[str]
                  ) -> dict[int, str]:
    """Rows of a pandas frame whose fields do not fit: a column Arrow can type is screened
    as a table's; only a column of mixed Python values is looked at value by value."""
    import pyarrow as pa

    typed: dict[str, Any] = {}
    mixed: list[str] = []
    for name in names:
        if name not in events.rows.columns:
            continue  # null in every row
        try:
            typed[name] = pa.Array.from_pandas(events.rows[name])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            mixed.append(name)
    bad = _screen_table(pa.table(typed), schema, list(typed)) if typed else {}
    if mixed:
        for i, reason in _screen_objects(events.objects(), schema, mixed).items():
            bad.setdefault(i, reason)
    return bad


def _fits(t: Any, kind: str) -> bool:
    import pyarrow as pa

    if kind == STRING:
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_boolean(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)
            or pa.types.is_duration(t))


def _screen_objects(events: list[Any], schema: Mapping[str, str],
                    names: list[str]) -> dict[int, str]:
    """Python events whose fields do not fit, checked a column at a time: when every value
    of a column has the expected Python type (the usual case) no event is looked at twice."""
    fine = {NUMERIC: {int, float}, STRING: {str}, BOOLEAN: {bool}}
    suspects: set[int] = set()
    for name in names:
        allowed = fine.get(schema.get(name, NUMERIC), set()) | {type(None)}
        values = [value_of(e, name) for e in events]
        types = {type(v) for v in values}
        if not types <= allowed:
            suspects.update(i for i, v in enumerate(values) if type(v) not in allowed)
        if int in types and schema.get(name, NUMERIC) == NUMERIC:
            try:
                np.array(values, dtype=np.float64)
            except (OverflowError, TypeError, ValueError):
                # an integer beyond float64 (or another misfit, already suspected)
                suspects.update(i for i, v in enumerate(values) if type(v) is int
                                and not -_FLOAT_LIMIT < v < _FLOAT_LIMIT)
    bad: dict[int, str] = {}
    for i in sorted(suspects):
        try:
            check_fields(events[i], schema, names)
        except CEPError as err:
            bad[i] = str(err)
    return bad


#: integers at or beyond this have no float64 value (the numba engine reads numbers so)
_FLOAT_LIMIT = 2**1024


def _misfit(name: str, value: Any, kind: str) -> str:
    need = {NUMERIC: "a number", STRING: "a string", BOOLEAN: "true/false"}.get(kind, kind)
    return f"field {name!r} is {value!r}: the pattern needs {need}"


def check_fields(event: Any, schema: Mapping[str, str], names: list[str]) -> None:
    """Raise a CEPError naming the field if ``event`` does not fit the column types.

    >>> check_fields({"v": "x"}, {"v": "numeric"}, ["v"])
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: field 'v' is 'x': the pattern needs a number
    """
    for name in names:
        value = value_of(event, name)
        kind = schema.get(name)
        vtype = type(value)
        if vtype is float and kind == NUMERIC:
            continue  # the common cases first
        if vtype is int and kind == NUMERIC and -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
            continue
        if vtype is str and kind == STRING:
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if kind == NUMERIC:
            # times are numbers to expressions: epoch milliseconds, durations milliseconds
            ok = isinstance(value, (int, float, np.number, date, timedelta, np.datetime64,
                                    np.timedelta64)) and not isinstance(value, (bool, np.bool_))
            if not ok:
                raise CEPError(_misfit(name, value, NUMERIC))
            if isinstance(value, int) and not -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
                raise CEPError(f"field {name!r} is an integer of {len(str(abs(value)))} digits, "
                               "beyond the range of a number the pattern can compare (float64)")
        elif kind == STRING and not isinstance(value, str):
            raise CEPError(_misfit(name, value, STRING))
        elif kind == BOOLEAN and not isinstance(value, (bool, np.bool_)):
            raise CEPError(_misfit(name, value, BOOLEAN))
