"""``cep.match``: run a pattern over a bounded collection (lists, pandas, Arrow, files).

The whole input is one batch of :class:`~cep.nfa.events.Events` for the engine (through
the :class:`~cep.nfa.engine.Engine` interface, like every other caller); then event time
moves past the last event, so trailing ``not_followed_by`` matches complete and windows
expire."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Literal, overload

from cep.durations import MAX_TIMESTAMP
from cep.errors import CEPError, InputError, MissingFieldError
from cep.expr import Expr
from cep.keys import key_spec
from cep.matches import Match, Timeout
from cep.measures import check_measure_stages
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, Cap
from cep.nfa.distinct import distinct_inverse
from cep.nfa.engine import EngineName, absent_message, fields_absent, make_engine
from cep.nfa.events import (
    Events,
    Keys,
    arrow_schema,
    checked_frame,
    column_keys,
    table_dicts,
    without_views,
)
from cep.nfa.found import MATCH, TIMEOUT, Found
from cep.pattern import Pattern
from cep.runtime.files import file_format, read_whole
from cep.time_columns import times_of_column
from cep.times import check_unit, to_epoch_millis

Field = str | Sequence[str] | Callable[[Any], Any] | None


@overload
def match(
    events: Any, pattern: Pattern, *, key: Field = ..., time: Field = ...,
    timeouts: Literal[False] = ..., engine: EngineName = ..., time_unit: str | None = ...,
    max_partial_matches: int | None = ..., on_overflow: str = ...,
    output: Literal["matches"] = ..., measures: None = ...,
) -> list[Match]: ...


@overload
def match(
    events: Any, pattern: Pattern, *, key: Field = ..., time: Field = ...,
    timeouts: Literal[True], engine: EngineName = ..., time_unit: str | None = ...,
    max_partial_matches: int | None = ..., on_overflow: str = ...,
    output: Literal["matches"] = ..., measures: None = ...,
) -> tuple[list[Match], list[Timeout]]: ...


@overload
def match(
    events: Any, pattern: Pattern, *, key: Field = ..., time: Field = ...,
    timeouts: bool = ..., engine: EngineName = ..., time_unit: str | None = ...,
    max_partial_matches: int | None = ..., on_overflow: str = ...,
    output: Literal["arrow", "pandas"], measures: Mapping[str, Expr] | None = ...,
) -> Any: ...


def match(
    events: Any,
    pattern: Pattern,
    *,
    key: Field = None,
    time: Field = None,
    timeouts: bool = False,
    engine: EngineName = "auto",
    time_unit: str | None = None,
    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
    on_overflow: str = "fail",
    output: Literal["matches", "arrow", "pandas"] = "matches",
    measures: Mapping[str, Expr] | None = None,
) -> Any:
    """Find every match of ``pattern`` in a bounded collection of events.

    ``events`` is a list of dicts (or objects), a pandas DataFrame, a pyarrow
    Table, RecordBatch, RecordBatchReader or Dataset, or the path of a Parquet,
    CSV or JSONL file (also ``.gz``/``.zst`` compressed, or a directory of such
    files), or a list of such paths.  Events are grouped by ``key`` (a field name,
    a list of field names for a composite key - ``m.key`` is then a tuple - or a
    function; None = one group), ordered by ``time`` (a field holding integer
    times, datetimes or ISO-8601 strings, or a function; None = position in the
    input), stably for ties, and matched key by key.  At the end
    time moves past the last event, so trailing ``not_followed_by`` matches
    complete and windows expire.

    Integer times are epoch milliseconds unless ``time_unit`` says ``"s"``,
    ``"us"`` or ``"ns"``; integers that look like another unit (epoch seconds such
    as ``1709251200``) are refused with :class:`~cep.TimeUnitError` rather
    than read wrongly - pass ``time_unit="ms"`` if they really are milliseconds.

    No key holds more than ``max_partial_matches`` partial matches after an event
    (10,000 by default; None: no cap): a pattern that branches without end fails
    with :class:`~cep.TooManyPartialMatches` naming the key and the stages, unless
    ``on_overflow`` is ``"drop_oldest"`` or ``"drop_newest"`` (see
    :meth:`cep.runtime.Job.limit_partial_matches`).

    Returns the matches, key by key in order of first appearance, each with
    ``.key`` set; with ``timeouts=True`` returns ``(matches, timeouts)``.

    ``output="arrow"`` (a pyarrow Table) or ``"pandas"`` (a DataFrame) returns them as a
    table instead, one row per match (and per timeout, with ``timeouts=True``), in the
    same order, with the columns of Spark's ``match_batch``: the key fields, ``kind``,
    ``match_id``, ``start``, ``end``, ``timeout_at``, one column per stage holding the
    list of events it took, and one per measure of ``measures`` (see
    :mod:`cep.runtime.tables`).  The table is built from the input's columns with Arrow,
    without a Python object per event.

    >>> rows = [{"card": 1, "ts": 1, "amount": 2}, {"card": 1, "ts": 2, "amount": 900}]
    >>> p = Pattern.begin("small").where(lambda e: e["amount"] < 5).next("big")
    >>> [m["big"][0]["amount"] for m in match(rows, p, key="card", time="ts")]
    [900]
    >>> table = match(rows, p, key="card", time="ts", output="arrow")
    >>> table.select(["card", "kind", "start", "end", "big"]).to_pylist()
    [{'card': 1, 'kind': 'match', 'start': 1, 'end': 2, 'big': [{'card': 1, 'ts': 2, 'amount': 900}]}]
    """
    if not isinstance(pattern, Pattern):
        raise InputError(
            f"the second argument must be a Pattern, got {type(pattern).__name__} "
            "(call cep.match(events, pattern, ...))"
        )
    check_unit(time_unit)
    if time is not None and not isinstance(time, str) and not callable(time):
        raise InputError(f"time {time!r}: give a field name or a function (of an event, "
                         "giving its time)")
    if time_unit is not None and time is None:
        raise InputError("time_unit says how to read the time field: give time= too (without "
                         "it, an event's time is its position in the input)")
    if measures is not None and not isinstance(measures, Mapping):
        raise InputError(f"measures are given by name, {{name: expression}}, got "
                         f"{type(measures).__name__}")
    if output not in OUTPUTS:
        raise InputError(f"output must be one of {', '.join(map(repr, OUTPUTS))}, got {output!r}")
    if measures and output == "matches":
        raise InputError("measures are columns of a table: pass output='arrow' or 'pandas' "
                         "(or compute them from a Match with cep.measures.measure)")
    key = key_spec(key)
    if output != "matches":
        from cep.runtime.tables import check_output_names, stage_columns

        check_output_names(key, stage_columns(pattern), list(measures or ()))
        check_measure_stages(pattern, measures or {})
    runner = make_engine(pattern, engine, timeouts=timeouts,
                         cap=Cap(max_partial_matches, on_overflow))
    events = _events(events, key, time, time_unit)
    if not len(events):
        # what an event would have found wrong with the pattern, said all the same (a
        # table or frame without rows still has columns)
        from cep.nfa.bytecode import assumed_schema, check_types, compilable_reason

        if compilable_reason(pattern) is None:  # what a batch would check first
            check_types(pattern, assumed_schema(pattern))
        schema = arrow_schema(events.rows)
        if schema is not None and len(schema.names):
            absent = fields_absent(pattern, events, measures if output != "matches" else None)
            if absent:
                raise MissingFieldError(absent_message(absent, "the input"))
        if output != "matches":
            return _table(Found.none(), events, pattern, key, time, measures, output)
        return ([], []) if timeouts else []
    absent = fields_absent(pattern, events, measures if output != "matches" else None)
    if absent:
        raise MissingFieldError(absent_message(absent, "the input"))
    step = runner.process(events)
    if step.refused:  # a condition raised: cep.match has no side output, so it fails
        raise next(iter(step.refused.values()))
    found = Found.concat([Found.of_matches(step.found),
                          Found.of_matches(runner.advance(MAX_TIMESTAMP))])
    found = found.take(_key_order(found, events.keys))
    if output != "matches":
        return _table(found, events, pattern, key, time, measures, output)
    objects = found.matches()
    if not found.count(TIMEOUT):
        return (objects, []) if timeouts else objects
    is_match = (found.kind == MATCH).tolist()
    all_matches = [m for m, yes in zip(objects, is_match, strict=True) if yes]
    if timeouts:
        return all_matches, [t for t, yes in zip(objects, is_match, strict=True) if not yes]
    return all_matches


#: what cep.match can return
OUTPUTS = ("matches", "arrow", "pandas")


def _table(found: Found, events: Events, pattern: Pattern, key: Field, time: Field,
           measures: Mapping[str, Expr] | None, output: str) -> Any:
    """The outputs as a table (see :mod:`cep.runtime.tables`), Arrow or pandas."""
    from cep.runtime.tables import match_table, pandas_frame, stage_columns

    like = arrow_schema(events.rows)
    if like is None and not len(found) and len(events):
        # no match of Python events: the columns' types are the input's, not null (a
        # table with a match has its events' types); only when nothing matched, since it
        # reads every event
        like = _rows_schema(events)
    table = match_table(found, key=key, stages=stage_columns(pattern), measures=measures,
                        timestamps=_stamped(events, time), like=like)
    return pandas_frame(table) if output == "pandas" else table


def _rows_schema(events: Events) -> Any:
    """The Arrow schema of Python events as a table of them would have it (None when they
    cannot be one: objects without named fields, values Arrow cannot type)."""
    import pyarrow as pa

    from cep.runtime.tables import events_table, fields_of

    rows = [fields_of(e) for e in events.objects()]
    if not all(isinstance(r, Mapping) for r in rows):
        return None
    try:
        return events_table(rows).schema
    except (CEPError, pa.ArrowException):
        return None


def _stamped(events: Events, time: Field) -> bool:
    """Are the events' times points in time (timestamps, dates, text), not numbers?  The
    table's times are then timestamps too (as the first event's says, for Python events
    or a function giving the time)."""
    import pyarrow as pa

    if callable(time) and len(events):
        # what the function gives: the same event always gives the same time
        value = time(events.objects([0])[0])
        return isinstance(value, str) or hasattr(value, "isoformat")
    if not isinstance(time, str) or not (len(events) or events.is_table or events.is_frame):
        return False
    rows = events.rows
    kind = None
    if events.is_table and time in rows.column_names:
        kind = rows.schema.field(time).type
    elif events.is_frame and time in rows.columns:
        kind = pa.Array.from_pandas(rows[time].iloc[:1]).type
    if events.is_table or events.is_frame:
        return kind is not None and bool(
            pa.types.is_timestamp(kind) or pa.types.is_date(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind))
    first = events.objects([0])[0]
    value = first.get(time) if isinstance(first, dict) else getattr(first, time, None)
    return isinstance(value, str) or hasattr(value, "isoformat")


def _key_order(found: Found, keys: Keys) -> Any:
    """Positions putting ``found`` key by key in order of each key's first event (stable
    within a key): the order cep.match returns, as objects or as a table."""
    import numpy as np

    rank = {k: i for i, k in enumerate(keys.unique().values)}
    used, inverse = distinct_inverse(found.keys.codes)
    ranks = np.array([rank.get(found.keys.values[c], len(rank)) for c in used.tolist()],
                     np.int64)
    return np.argsort(ranks[inverse], kind="stable")


def _events(events: Any, key: Field, time: Field, unit: str | None) -> Events:
    """The input as one batch: Arrow tables and pandas frames as they are (keys and times
    read a column at a time), anything else as Python objects."""
    table, frame, rows, source = _open(events)
    data = table if table is not None else frame if frame is not None else rows
    n = table.num_rows if table is not None else len(frame) if frame is not None else len(rows)
    if n == 0:  # a table or frame keeps its columns: a table of no match has their types
        return Events.of(data if rows is None else rows)
    keys, times = _keys_and_times(table, frame, rows, source, key, time, n, unit)
    return Events.of(data, keys, times)


def _open(events: Any) -> tuple[Any, Any, list[Any] | None, str | None]:
    """(arrow table, pandas frame, rows, source) - exactly one of the first three is set."""
    paths = _paths(events)
    if paths is not None:
        sizes: list[tuple[str, int]] = []
        read = read_inputs(paths, sizes)
        source = _Files(", ".join(str(p) for p in paths), sizes)
        return (None, None, read, source) if isinstance(read, list) else (read, None, None, source)
    module = type(events).__module__
    if module.startswith("pandas") and hasattr(events, "columns"):
        return None, checked_frame(events), None, None
    if module.startswith("pandas"):  # a Series: its values are the events
        return None, None, list(events), None
    if module.startswith("pyarrow"):
        return _arrow_table(events), None, None, None
    rows, source = _rows(events)
    return None, None, rows, source


def _paths(events: Any) -> list[Path] | None:
    """The files ``events`` names (a path, a list of paths), or None if it is data."""
    if isinstance(events, (str, PathLike)):
        return [Path(events)]
    if isinstance(events, (list, tuple)) and events and all(
            isinstance(e, (str, PathLike)) for e in events):
        paths = [Path(e) for e in events]
        # strings can be events too: a list of them names files only if every one does
        if all(not isinstance(e, str) for e in events) or all(
                file_format(p) is not None or p.exists() for p in paths):
            return paths
    return None


def _arrow_table(data: Any) -> Any:
    """A pyarrow Table from a Table, RecordBatch, RecordBatchReader or Dataset."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return without_views(data)
    if isinstance(data, pa.RecordBatch):
        return without_views(pa.Table.from_batches([data]))
    if isinstance(data, pa.RecordBatchReader):
        return without_views(data.read_all())
    to_table = getattr(data, "to_table", None)  # pyarrow.dataset.Dataset and Scanner
    if callable(to_table):
        return without_views(to_table())
    raise InputError(
        f"cannot read events from {type(data).__name__}: pass a pyarrow Table, RecordBatch, "
        "RecordBatchReader or Dataset")


def _keys_and_times(
    table: Any, frame: Any, rows: list[Any] | None, source: str | None,
    key: Field, time: Field, n: int, unit: str | None,
) -> tuple[Keys, Any]:
    """Vectorised for named columns of tables and frames; row by row otherwise (or on error)."""
    import numpy as np

    fields = [*(key if isinstance(key, tuple) else (key,)), time]
    columns = None
    if all(isinstance(f, str) or f is None for f in fields):
        wanted = [f for f in fields if f is not None]
        if table is not None and set(wanted) <= set(table.column_names):
            columns = {f: table.column(f) for f in wanted}
        elif frame is not None and set(wanted) <= set(frame.columns):
            columns = {f: frame[f] for f in wanted}
    if columns is not None:
        fast = _fast_keys_and_times(columns, key, time, n, unit)
        if fast is not None:
            return fast
    if rows is None:
        rows = table_dicts(table) if table is not None else frame.to_dict("records")
    keys = Keys.of_values([_key_of(r, key, i, source) for i, r in enumerate(rows)])
    times = np.array(
        [
            _timestamp(_field(r, time, "time", i, source), time, i, source, unit)
            if time is not None else i
            for i, r in enumerate(rows)
        ],
        dtype=np.int64,
    )
    return keys, times


def _fast_keys_and_times(
    columns: dict[str, Any], key: Field, time: Field, n: int, unit: str | None
) -> tuple[Keys, Any] | None:
    """Keys and times a column at a time; None when a value is null or unreadable (the row
    by row path then names the first offending row and its field)."""
    import numpy as np

    if isinstance(key, tuple):
        parts = [_column_keys(columns[f]) for f in key]
        if any(part is None for part in parts):
            return None
        keys = Keys.composite(parts)  # type: ignore[arg-type]
    elif key is not None:
        found = _column_keys(columns[key])
        if found is None:
            return None
        keys = found
    else:
        keys = Keys.none(n)  # one group, whose key is None on every input
    if time is None:
        return keys, np.arange(n, dtype=np.int64)
    read = times_of_column(columns[time], unit, str(time))
    if read.bad.any():
        return None
    return keys, read.millis


def _column_keys(values: Any) -> Keys | None:
    """The keys of an Arrow or pandas column, or None when one is null (or the column is
    read row by row): the row-by-row path then names the row."""
    found = column_keys(values)
    if found is None or found[1].any():
        return None
    return found[0]


def _rows(events: Any) -> tuple[list[Any], str | None]:
    paths = _paths(events)
    if paths is not None:
        read = read_inputs(paths)
        return (read if isinstance(read, list) else table_dicts(read)), ", ".join(map(str, paths))
    module = type(events).__module__
    if module.startswith("pandas"):
        return events.to_dict("records"), None
    if module.startswith("pyarrow"):
        return _arrow_table(events).to_pylist(), None
    if isinstance(events, Iterable):
        return list(events), None
    raise InputError(
        f"cannot read events from {type(events).__name__}: pass a list of dicts, a pandas "
        "DataFrame, a pyarrow Table or Dataset, or Parquet/CSV/JSONL paths"
    )


class _Files(str):
    """Where events read from several files came from: the files' names (as text), and
    each file with how many rows it gave, so that a row is named in its own file."""

    sizes: list[tuple[str, int]]

    def __new__(cls, names: str, sizes: list[tuple[str, int]]) -> _Files:
        files = super().__new__(cls, names)
        files.sizes = sizes
        return files

    def place(self, i: int) -> str:
        """Row ``i`` of the rows of all the files, in its file.

        >>> files = _Files("d", [("d/1.jsonl", 3), ("d/2.jsonl", 2)])
        >>> files.place(1), files.place(4)
        ('d/1.jsonl: row 1', 'd/2.jsonl: row 1')
        """
        for name, size in self.sizes:
            if i < size:
                return f"{name}: row {i}"
            i -= size
        return f"{self}: row {i}"


def in_files(message: str, names: str, sizes: list[tuple[str, int]]) -> str:
    """An error ``message`` about the rows of the files ``names`` (each file with how many
    rows it gave, as :func:`read_inputs` says), its row named in its own file.

    >>> in_files("row 4: key field 'user' is null", "d", [("d/1.jsonl", 3), ("d/2.jsonl", 2)])
    "d/2.jsonl: row 1: key field 'user' is null"
    """
    import re

    row = re.match(r"row (\d+): ", message)
    if row is None or len(sizes) < 2:
        return f"{names}: {message}"
    return f"{_Files(names, sizes).place(int(row.group(1)))}: {message[row.end():]}"


def read_inputs(paths: list[Path], sizes: list[tuple[str, int]] | None = None) -> Any:
    """Every file named (a directory: its files, in its subdirectories too, in name order)
    as one Arrow table, or a list of dicts when their columns cannot be one table (see
    :func:`cep.runtime.files.read_whole`); ``sizes`` gets each file's name and rows.
    ``cep.match`` is strict: a record that cannot be read is an
    :class:`~cep.errors.InputError` naming it, not a dead letter.

    >>> import tempfile
    >>> bad = Path(tempfile.mkdtemp()) / "m.jsonl"
    >>> _ = bad.write_text('{"card": 1}\\n{"card": \\n')
    >>> read_inputs([bad])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    cep.errors.InputError: .../m.jsonl:1: not JSON: Expecting value (line 2, column 10)
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and file_format(p))
            if not inside:
                raise InputError(f"{path}: no .parquet, .csv or .jsonl files in the directory")
            files += inside
        elif not path.exists():
            raise InputError(f"{path}: no such file")
        else:
            files.append(path)
    rows, malformed = read_whole(files, sizes)
    if malformed:
        where, record = malformed[0]
        more = f" (and {len(malformed) - 1:,} more unreadable records)" if len(malformed) > 1 else ""
        raise InputError(f"{where}: {record.reason}{more}")
    return rows


def _where(i: int, source: str | None) -> str:
    if i < 0:
        return "event"
    if isinstance(source, _Files) and len(source.sizes) > 1:
        return source.place(i)
    return f"{source}: row {i}" if source else f"row {i}"


def _field(row: Any, field: Field, role: str, i: int, source: str | None) -> Any:
    if callable(field):
        try:
            return field(row)
        except Exception as err:
            raise InputError(f"{_where(i, source)}: the {role} function raised {err!r}") from err
    assert isinstance(field, str)
    if isinstance(row, dict):
        if field not in row:
            raise InputError(
                f"{_where(i, source)}: missing {role} field {field!r} (fields: {sorted(row)})"
            )
        return row[field]
    if not hasattr(row, field):
        raise InputError(f"{_where(i, source)}: event has no {role} field {field!r}: {row!r}")
    return getattr(row, field)


def _key_of(row: Any, key: Field, i: int, source: str | None) -> Any:
    """The key of one row: None without a key, a tuple for a composite key."""
    if key is None:
        return None
    if isinstance(key, tuple):
        return tuple(_key(_field(row, f, "key", i, source), f, i, source) for f in key)
    k = _key(_field(row, key, "key", i, source), key, i, source)
    try:
        hash(k)
    except TypeError as err:
        raise InputError(f"{_where(i, source)}: key {k!r} is not hashable") from err
    return k


def _key(value: Any, field: Field, i: int, source: str | None) -> Any:
    name = field if isinstance(field, str) else "key"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise InputError(f"{_where(i, source)}: key field {name!r} is null")
    return value


def _timestamp(value: Any, field: Field, i: int, source: str | None, unit: str | None = None
               ) -> int:
    """Integer milliseconds from ints (in ``unit``), whole floats, datetimes, ISO strings."""
    name = field if isinstance(field, str) else "time"
    return to_epoch_millis(value, unit, name, _where(i, source) if i >= 0 or source else "")
