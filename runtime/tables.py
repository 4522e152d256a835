"""Matches as a table: one row per match or timeout, built a column at a time.

The schema (Spark's ``match_stream`` / ``match_batch`` output and ``cep.match(...,
output="arrow")`` alike):

- the key: one column per key field, named after it (``key`` for a key function, none
  without a key), of the input column's type (JSON text for keys of several types: a
  function's tuples, a CSV column of numbers holding a word);
- ``kind``: ``"match"`` or ``"timeout"``; ``rule`` when a named rule found it, and
  ``version`` when it belongs to a rule set (:mod:`cep.rules`);
- ``match_id``: the same match gets the same id in every run, engine and place
  (:mod:`cep.runtime.match_ids`);
- ``start``, ``end``: the times of the first and last event; ``timeout_at``: when a
  timeout's window passed (null for a match) - integers, or UTC timestamps when the
  events' times are timestamps;
- one column per stage (the NOT stages have none): the list of events it took, structs of
  the input's columns, taken with Arrow from the input (never a Python object per event);
  a word among a column's numbers is null there (see :mod:`cep.nfa.stray_text`); a table
  of no output has the same columns;
- one column per measure;
- for the side outputs (``kind`` ``"late"`` or ``"dead_letter"``, see :func:`side_rows`):
  ``reason``, ``position`` (where the event was read, when known) and ``event``.

>>> import numpy as np
>>> import pyarrow as pa
>>> from cep.nfa.events import Keys
>>> from cep.nfa.found import MATCH
>>> found = Found(["a", "b"], kind=np.array([MATCH]), keys=Keys.of_values(["c1"]),
...               start=np.array([1]), end=np.array([3]), expiry=np.array([3]),
...               offsets=np.array([0, 2]), stage=np.array([0, 1]),
...               rows=pa.table({"v": [1, 5]}))
>>> table = match_table(found, key="card", stages=["a", "b"])
>>> table.column_names
['card', 'kind', 'match_id', 'start', 'end', 'timeout_at', 'a', 'b']
>>> table.select(["card", "kind", "a", "b"]).to_pylist()
[{'card': 'c1', 'kind': 'match', 'a': [{'v': 1}], 'b': [{'v': 5}]}]
"""

from __future__ import annotations

import json
import operator
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cep.errors import CEPError, InputError, MalformedPatternError, MeasureError
from cep.expr import Expr
from cep.matches import Match
from cep.measures import MeasureWarning, measure
from cep.nfa.distinct import distinct_inverse
from cep.nfa.events import (
    EntryRefs,
    Events,
    count_rows,
    in_entry_order,
    pool_refs,
    row_objects,
    take_rows,
)
from cep.nfa.found import KIND_NAMES, TIMEOUT, Found, key_column
from cep.nfa.stray_text import PREFIX, split_column, without_stray_text
from cep.pattern import Pattern
from cep.runtime.match_ids import event_hashes, key_hashes, match_ids, stage_hash
from cep.runtime.measure_columns import measure_column
from cep.runtime.records import (
    JSON_COLUMNS,
    json_columns,
    json_line,
    json_text,
    records_table,
    to_json,
)

#: the columns every table has after the key
FIXED = ("kind", "match_id", "start", "end", "timeout_at")
#: the columns of the side outputs after the stages and measures
SIDE = ("reason", "position", "event")
#: the kinds of side rows
LATE, DEAD_LETTER = "late", "dead_letter"
#: kind codes of side rows in their ids (matches and timeouts are 0 and 1)
_SIDE_CODES = {LATE: 2, DEAD_LETTER: 3}

KeyNames = str | Sequence[str] | Callable[[Any], Any] | None


def key_names(key: KeyNames) -> list[str]:
    """The key's columns: its field names, ``["key"]`` for a function, none without a key.

    >>> key_names("card"), key_names(("card", "merchant")), key_names(len), key_names(None)
    (['card'], ['card', 'merchant'], ['key'], [])
    """
    if key is None:
        return []
    if isinstance(key, str):
        return [key]
    if callable(key):
        return ["key"]
    return list(key)


def stage_columns(pattern: Pattern) -> list[str]:
    """The stages that get a column: all but the NOT stages.

    >>> stage_columns(Pattern.begin("a").not_next("x").next("b"))
    ['a', 'b']
    """
    return [s.name for s in pattern.iter_stages() if not s.consuming.negated]


def check_output_names(key: KeyNames, stages: Sequence[str], measures: Sequence[str] = (),
                       *, named: bool = False, side: bool = False) -> None:
    """Refuse a key field, stage or measure named like another column of the output (the
    fixed ones, ``rule`` and ``version`` for ``named`` rules, the side outputs' with
    ``side``): one column would silently overwrite the other.  A stage named ``start``,
    say, would put its events where the match's start time goes.

    >>> check_output_names("card", ["a", "b"], ["total"])
    >>> check_output_names("card", ["start", "b"])
    Traceback (most recent call last):
    ...
    cep.errors.MalformedPatternError: stage 'start' would clash with the output column of that name (output columns: card, kind, match_id, start, end, timeout_at); rename it
    """
    fixed = [*FIXED, *(("rule", "version") if named else ()), *(SIDE if side else ())]
    taken = [*key_names(key), *fixed]
    for name in key_names(key):
        if name in fixed:
            raise InputError(f"key field {name!r} would clash with the output column of that "
                             f"name: key by a function of the event (key=lambda e: e[{name!r}]) "
                             "or rename the field")
    for what, names in (("stage", stages), ("measure", measures)):
        for name in names:
            if name in taken:
                raise MalformedPatternError(
                    f"{what} {name!r} would clash with the output column of that name "
                    f"(output columns: {', '.join(taken)}); rename it")
            taken.append(name)


def match_table(found: Found, *, key: KeyNames, stages: Sequence[str],
                measures: Mapping[str, Expr] | None = None, timestamps: bool = False,
                any_events: bool = False, like: Any = None, lenient: bool = False) -> Any:
    """The outputs ``found`` holds as a pyarrow Table (see the module docstring), in their
    order; ``stages`` are the pattern's stages that get a column, ``timestamps`` makes the
    times UTC timestamps (milliseconds).  Python events must be mappings of one type per
    field unless ``any_events`` (a sink's records: objects become their fields, fields of
    mixed types JSON text, see :func:`cep.runtime.records.records_table`); ``like``, the
    schema of the input they were rows of, gives their fields its types (a timestamp's
    unit, an integer's width), as an engine that holds the rows themselves keeps them.
    A measure that cannot be computed over a match raises a MeasureError, or with
    ``lenient`` (a job's output: a match is never lost to its measure) is null there and
    warned of (a :class:`~cep.measures.MeasureWarning`)."""
    import pyarrow as pa

    n = len(found)
    if not n and like is not None:  # no outputs: the input's columns all the same
        rows = without_stray_text(like.empty_table())
    else:
        # events held by reference are taken from their batches stage by stage, once
        rows = None if found.by_reference else _rows_table(found, any_events, like)
    # the distinct keys of these outputs (an engine's key values are every key it has seen)
    used, inverse = distinct_inverse(found.keys.codes)
    distinct = _picked(found.keys.values, used)
    key_columns = _key_columns(distinct, inverse, key, like)
    columns: dict[str, Any] = {name: column for name, column, _ in key_columns}
    columns["kind"] = pa.array(KIND_NAMES, pa.string()).take(pa.array(found.kind))
    if found.rule is not None:
        columns["rule"] = pa.repeat(pa.scalar(found.rule, pa.string()), n)
    if found.version is not None:
        columns["version"] = pa.repeat(pa.scalar(found.version, pa.int64()), n)
    columns["match_id"] = _ids(found, rows, key_hashes(distinct, bool(key_names(key)[1:]))[
        inverse] if n else np.empty(0, np.uint64))
    time_type = pa.timestamp("ms", tz="UTC") if timestamps else pa.int64()
    columns["start"] = pa.array(found.start).cast(time_type)
    columns["end"] = pa.array(found.end).cast(time_type)
    columns["timeout_at"] = pa.array(np.where(found.kind == TIMEOUT, found.expiry, 0),
                                     mask=found.kind != TIMEOUT).cast(time_type)
    lists = dict(_stage_columns(found, rows, stages))
    columns.update(lists)
    if measures:
        columns.update(_measure_columns(found, measures, lists, lenient))
    as_json = [name for name, _, is_json in key_columns if is_json]
    table = pa.table(columns)
    return table.replace_schema_metadata({JSON_COLUMNS: json.dumps(as_json).encode()}
                                         ) if as_json else table


def _picked(values: list[Any], at: np.ndarray) -> list[Any]:
    """``values[i]`` for each ``i`` of ``at``, in C (``itemgetter``): a rule set's outputs
    hold every rule's key values, hundreds of thousands, of which an epoch's outputs use a
    few thousand (copying them all into a numpy array to gather was 7 ms a table).

    >>> _picked(["a", (1, 2), None], np.array([1, 1, 2]))
    [(1, 2), (1, 2), None]
    """
    if len(at) < 2:
        return [values[i] for i in at.tolist()]
    return list(operator.itemgetter(*at.tolist())(values))


def _rows_table(found: Found, any_events: bool, like: Any = None) -> Any:
    """The events of ``found`` as an Arrow table (Python events: see :func:`events_table`;
    objects that are not mappings cannot be a table unless ``any_events``).  NaN is null
    in them, as everywhere in cep (see :func:`_without_nan`)."""
    import pyarrow as pa

    rows = found.rows
    if hasattr(rows, "num_rows"):
        return _without_nan(rows)
    if type(rows).__module__.startswith("pandas"):
        try:
            return pa.Table.from_pandas(rows, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass  # a column of mixed values: read as Python objects, as the events are
    events = [fields_of(e) for e in row_objects(rows, None)]
    if any_events:
        fields = [e if isinstance(e, Mapping) else to_json(e) for e in events]
        events = [f if isinstance(f, Mapping) else {"value": f} for f in fields]
    elif not all(isinstance(e, Mapping) for e in events):
        kind = next(type(e).__name__ for e in events if not isinstance(e, Mapping))
        raise InputError(f"matches as a table need events with named fields (dicts, "
                         f"dataclasses, named tuples, a pandas frame, an Arrow table); these "
                         f"are {kind} objects: ask for Match objects instead")
    if like is not None:
        events = _text_apart(events, like)
    table = events_table(events, as_json=any_events, like=like)
    return table if like is None else _as_input_types(table, events, like)


def fields_of(event: Any) -> Any:
    """A dataclass's or named tuple's fields as a dict (conditions read them by name as a
    dict's: they have named fields); anything else as it is.

    >>> from collections import namedtuple
    >>> fields_of(namedtuple("Tx", "card amount")("c1", 5.0))
    {'card': 'c1', 'amount': 5.0}
    """
    if isinstance(event, Mapping):
        return event
    fields = getattr(type(event), "__dataclass_fields__", None)
    if fields is not None and not isinstance(event, type):
        return {name: getattr(event, name) for name in fields}
    if isinstance(event, tuple) and hasattr(event, "_asdict"):
        return event._asdict()
    return event


def _text_apart(events: list[Any], like: Any) -> list[Any]:
    """``events`` (dicts made of rows of an input of schema ``like``) with the text of a
    column of numbers in its companion again (:mod:`cep.nfa.stray_text`), as the rows held
    it: one type per column, and the same match ids as an engine taking the rows gives.

    >>> import pyarrow as pa
    >>> like = pa.schema([("v", pa.float64()), (PREFIX + "v", pa.string())])
    >>> _text_apart([{"v": 1.5}, {"v": "n/a"}], like)
    [{'v': 1.5}, {'v': None, '__cep_text:v': 'n/a'}]
    """
    import pyarrow as pa

    # a field the input holds as numbers or true/false: text there can only be a word
    # among them, whether this input's batch had a companion column or not
    fields = [f.name for f in like if not f.name.startswith(PREFIX) and (
        pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
        or pa.types.is_boolean(f.type) or pa.types.is_decimal(f.type))]
    if not fields:
        return events
    out = []
    for event in events:
        if isinstance(event, Mapping) and any(isinstance(event.get(f), str) for f in fields):
            event = dict(event)
            for f in fields:
                if isinstance(event.get(f), str):
                    event[PREFIX + f] = event[f]
                    event[f] = None
        out.append(event)
    return out


def events_table(events: Sequence[Mapping[str, Any]], as_json: bool = False,
                 like: Any = None) -> Any:
    """Events (dicts) as an Arrow table: a column per field any of them has, in order of
    first appearance (null where an event lacks it: Arrow's own ``from_pylist`` reads the
    fields of the first event only); NaN, ``pd.NA`` and ``NaT`` are null, as a pandas
    frame's missing values are.  A field of numbers (or true/false) with text among them
    is a column of them and the text beside it (:mod:`cep.nfa.stray_text`), as a CSV
    column's; one of values of no one type is JSON text with ``as_json`` (see
    :func:`cep.runtime.records.records_table`), else an InputError.  ``like``: the schema
    of the input the events were rows of; a field Arrow cannot type from its values alone
    takes the input's type (an unsigned integer beyond int64's range).

    >>> events_table([{"v": 1.5}, {"v": float("nan"), "note": "x"}]).to_pylist()
    [{'v': 1.5, 'note': None}, {'v': None, 'note': 'x'}]
    """
    import pyarrow as pa

    columns: dict[str, Any] = {}
    for name in dict.fromkeys(k for e in events for k in e):
        values = [e.get(name) for e in events]
        try:
            columns[name] = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                OverflowError) as err:
            typed = _as_type_of(values, like, name)
            if typed is not None:
                columns[name] = typed
                continue
            split = split_column(values, numbers=True)
            if split is not None:  # numbers with text among them: as a CSV column's
                columns[name], columns[PREFIX + name] = split
                continue
            if not as_json:
                raise InputError(f"the matched events do not make a table: field {name!r}: "
                                 f"{err}") from err
            return records_table([dict(e) for e in events])
    if not columns:  # events without fields: a table of no columns, one row each
        return pa.table({"_": pa.nulls(len(events))}).drop_columns(["_"])
    return pa.table(columns)


def _as_type_of(values: list[Any], like: Any, name: str) -> Any:
    """``values`` as an Arrow array of field ``name``'s type in the schema ``like``; None
    when there is no such field or they do not fit it."""
    import pyarrow as pa

    at = like.get_field_index(name) if like is not None else -1
    if at < 0:
        return None
    try:
        return pa.array(values, like.field(at).type, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError,
            TypeError, ValueError):
        return None


def _without_nan(rows: Any) -> Any:
    """An Arrow table with NaN null in its floating-point columns: NaN is a missing value
    in cep (conditions read it as null, pandas and Spark's pandas functions make it null),
    so an output holds null wherever an input held either, whichever way it came in.

    Inside structs and lists too (an Arrow input's nested NaN stayed NaN on the numba
    engine while the reference engine's events made it null: two ids for one match).

    >>> import pyarrow as pa
    >>> _without_nan(pa.table({"v": [1.0, float("nan")]})).column("v").to_pylist()
    [1.0, None]
    >>> nested = pa.table({"m": [{"s": float("nan"), "xs": [1.0, float("nan")]}]})
    >>> _without_nan(nested).column("m").to_pylist()
    [{'s': None, 'xs': [1.0, None]}]
    """
    import pyarrow as pa

    for i, column in enumerate(rows.columns):
        if _holds_floats(column.type):
            chunks = [_nan_null(chunk) for chunk in column.chunks]
            if any(new is not old for new, old in zip(chunks, column.chunks, strict=True)):
                rows = rows.set_column(i, rows.field(i), pa.chunked_array(chunks, column.type))
    return rows


def _holds_floats(kind: Any) -> bool:
    """Is ``kind`` a floating-point type, or a struct or list holding one?"""
    import pyarrow as pa

    if pa.types.is_floating(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_holds_floats(kind.field(j).type) for j in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _holds_floats(kind.value_type)
    return False


def _nan_null(array: Any) -> Any:
    """``array`` with NaN null at any depth (structs and lists); itself when it has none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_floating(kind):
        nan = pc.is_nan(array)
        return pc.if_else(nan, pa.scalar(None, kind), array) if pc.any(nan).as_py() else array
    if pa.types.is_struct(kind) and _holds_floats(kind):
        fields = array.flatten()  # each child as this array's slice sees it
        new = [_nan_null(f) for f in fields]
        if all(n is f for n, f in zip(new, fields, strict=True)):
            return array
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(new, fields=list(kind), mask=mask)
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _holds_floats(kind):
        values = array.values
        new_values = _nan_null(values)
        if new_values is values:
            return array
        build = pa.ListArray if pa.types.is_list(kind) else pa.LargeListArray
        return build.from_arrays(array.offsets, new_values, type=kind,
                                 mask=array.is_null() if array.null_count else None)
    return array


def _as_input_types(table: Any, events: Sequence[Mapping[str, Any]], like: Any) -> Any:
    """``table`` (Arrow's reading of ``events``, Python objects that were rows of an input
    of schema ``like``) with each column of the input's type where that loses nothing: an
    int32 field int32 again, a nanosecond time read anew from its values (Arrow reads a
    pandas Timestamp as microseconds, dropping the nanoseconds).  A column whose values
    do not fit (a fraction where the input had integers: Arrow would cut it) keeps
    Arrow's type.

    >>> import pyarrow as pa
    >>> import pandas as pd
    >>> like = pa.schema([("t", pa.timestamp("ns")), ("n", pa.int32()), ("x", pa.int64())])
    >>> events = [{"t": pd.Timestamp(1), "n": 5, "x": 0.5}]
    >>> _as_input_types(pa.Table.from_pylist(events), events, like).to_pylist()
    [{'t': Timestamp('1970-01-01 00:00:00.000000001'), 'n': 5, 'x': 0.5}]
    """
    import pyarrow as pa

    as_json = set(json_columns(table))  # values of mixed types, kept as JSON text
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        at = like.get_field_index(name)
        want = like.field(at).type if at >= 0 and name not in as_json else None
        if want is not None and want != column.type and not pa.types.is_nested(want):
            try:
                if pa.types.is_temporal(want):  # from the values: a cast keeps the loss
                    column = pa.array([e.get(name) for e in events], want, from_pandas=True)
                else:
                    column = column.cast(want, safe=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                    OverflowError, TypeError, ValueError):
                pass
        columns.append(column)
    return pa.table(columns, names=table.column_names, metadata=table.schema.metadata)


def _key_columns(distinct: list[Any], inverse: np.ndarray, key: KeyNames, like: Any = None
                 ) -> list[tuple[str, Any, bool]]:
    """The key's columns, from the distinct key values and each output's place among them,
    and whether each is JSON text (values of no one Arrow type: a function's tuples, a
    column of numbers with words among them); of the input's type (``like``, its schema)
    where they fit it: an int32 key stays int32, and a table of no output has its key's
    type all the same."""
    import pyarrow as pa

    names = key_names(key)
    if not names:
        return []
    take = pa.array(inverse)
    if len(names) == 1:
        values = [distinct]
    else:
        values = [[None if v is None else v[p] for v in distinct] for p in range(len(names))]
    out = []
    for name, part in zip(names, values, strict=True):
        # a key column of numbers holding words (a CSV's): JSON text in every table, not
        # only in those whose keys happen to mix them
        column, is_json = key_column(part, like is not None and PREFIX + name in like.names)
        column = column.take(take)
        at = -1 if like is None or is_json else like.get_field_index(name)
        if at >= 0 and column.type != like.field(at).type and not pa.types.is_nested(
                like.field(at).type):
            try:
                column = column.cast(like.field(at).type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass  # values of another type than the input's column (a key function's)
        out.append((name, column, is_json))
    return out


def _ids(found: Found, rows: Any, keys: np.ndarray) -> Any:
    """Each output's match id (see cep.runtime.match_ids); ``keys``: its key's hash;
    ``rows``: the entries' events as a table, None when ``found`` holds references."""
    stage_codes = np.array([stage_hash(s) for s in found.stages] or [0], np.uint64)
    if rows is None:
        assert found.refs is not None
        events = _entry_hashes(found.refs)
    else:
        events = event_hashes(rows) if count_rows(rows) else np.empty(0, np.uint64)
    order = _canonical_entries(found)
    return match_ids(found.kind, keys, found.start, found.end, found.offsets,
                     stage_codes[found.stage[order]], events[order])


def _canonical_entries(found: Found) -> np.ndarray:
    """The entries of each output grouped by stage, stages in the order they first took
    an event, each stage's events in take order: as a Match holds them, whatever order an
    engine listed them in (a looping group's stages interleave)."""
    n = len(found)
    if not n:
        return np.empty(0, np.int64)
    lengths = found.offsets[1:] - found.offsets[:-1]
    output = np.repeat(np.arange(n, dtype=np.int64), lengths)
    entry = np.arange(len(found.stage), dtype=np.int64)
    # each (output, stage)'s first entry ranks the stage within its output
    width = len(found.stages) or 1
    pair = output * width + found.stage
    first = np.full(n * width, len(entry), np.int64)
    np.minimum.at(first, pair, entry)
    rank = first[pair]
    # entries already grouped so (no looping group: the usual case) need no sort
    if (rank[1:] >= rank[:-1]).all():
        return entry
    return np.lexsort((entry, rank, output))


def _entry_hashes(refs: EntryRefs) -> np.ndarray:
    """The hash of each entry's event, read from its batch: a batch's rows are hashed
    once for every rule and table once they have asked for half of them (the rules of a
    job take the events of their matches from the same batches), else only the rows
    asked for."""
    out = np.zeros(len(refs), np.uint64)
    for src, entries in refs.groups():
        at = refs.at[entries]
        whole = src.cache.get(_HASHES)
        if whole is None:
            asked = src.cache.get(_ASKED, 0) + len(at)
            src.cache[_ASKED] = asked
            if 2 * asked >= count_rows(src.rows):
                whole = src.cache[_HASHES] = event_hashes(src.rows)
        if whole is not None:
            out[entries] = whole[at]
            continue
        used, inverse = distinct_inverse(at)
        out[entries] = event_hashes(take_rows(src.rows, used))[inverse]
    return out


def pooled(founds: Sequence[Found]) -> list[Found]:
    """The outputs, those holding their events by reference moved onto one batch of the
    distinct events they hold (taken once from each batch they are in, hashed once): the
    tables made of them then take their events from one place, in one call each.  A
    checkpoint writer's file sink pools an epoch's outputs of every rule (their events
    come from the same batches).  Outputs are left as they are when fewer than two hold
    references or their batches' columns do not join.

    >>> import pyarrow as pa
    >>> from cep.nfa.events import Events, Keys
    >>> batch = Events.of(pa.table({"v": [1, 2, 3]}))
    >>> one = Found(["a"], kind=np.zeros(1), keys=Keys.of_values(["k"]), start=np.zeros(1),
    ...             end=np.zeros(1), expiry=np.zeros(1), offsets=np.array([0, 1]),
    ...             stage=np.zeros(1), refs=EntryRefs([batch], np.array([0]), np.array([2])))
    >>> both = pooled([one, one.take(np.array([0]))])
    >>> both[1].refs.sources[0].rows.column("v").to_pylist(), both[1].rows.column("v").to_pylist()
    ([3], [3])
    """
    held = [f for f in founds if f.by_reference and f.refs is not None and len(f.refs)]
    if len(held) < 2:
        return list(founds)
    shared = pool_refs([f.refs for f in held if f.refs is not None], whole=True)
    if shared is None:
        return list(founds)
    table, positions = shared
    pool = Events.of(table.combine_chunks())
    pool.cache[_HASHES] = (event_hashes(pool.rows) if pool.rows.num_columns
                           else np.zeros(pool.rows.num_rows, np.uint64))
    moved = {id(f): Found(f.stages, kind=f.kind, keys=f.keys, start=f.start, end=f.end,
                          expiry=f.expiry, offsets=f.offsets, stage=f.stage,
                          refs=EntryRefs([pool], np.zeros(len(at), np.int64), at),
                          rule=f.rule, version=f.version, like=f.like)
             for f, at in zip(held, positions, strict=True)}
    return [moved.get(id(f), f) for f in founds]


#: keys of a batch's cache: its rows' event hashes, and how many rows tables asked for
_HASHES, _ASKED = "event_hashes", "event_hashes_asked"


def _stage_columns(found: Found, rows: Any, stages: Sequence[str]) -> list[tuple[str, Any]]:
    """Per stage, the list of events it took (structs of the rows' columns); ``rows``:
    the entries' events as a table, None when ``found`` holds references.

    The entries are put in stage order and taken in one go (from each batch they are in,
    when held by reference), each stage's list then a slice of them: every Arrow call
    made on a checkpoint writer's thread waits for the job's thread to let go of the GIL
    when it comes back, so their number counts more than their size."""
    import pyarrow as pa

    n = len(found)
    output = np.repeat(np.arange(n, dtype=np.int64), found.offsets[1:] - found.offsets[:-1])
    codes = [found.stages.index(name) if name in found.stages else -1 for name in stages]
    # a stage the pattern lists twice takes its entries twice
    picked = [np.flatnonzero(found.stage == c) if c >= 0 else np.empty(0, np.int64)
              for c in codes]
    order = np.concatenate(picked) if picked else np.empty(0, np.int64)
    if rows is not None:
        values = _structs(rows).take(pa.array(order))
    else:
        assert found.refs is not None
        values = _taken_structs(found.refs.take(order))
        if values is None:  # the batches' columns differ: join them as rows do
            return _stage_columns(found, _rows_table(found, True), stages)
    out, start = [], 0
    for name, mine in zip(stages, picked, strict=True):
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(np.bincount(output[mine], minlength=n), out=offsets[1:])
        out.append((name, pa.ListArray.from_arrays(pa.array(offsets),
                                                   values.slice(start, len(mine)))))
        start += len(mine)
    return out


def _structs(rows: Any) -> Any:
    """A table's rows as one struct array of its columns.  A value a column of numbers
    could not hold (a word among a CSV column's numbers, kept beside it: see
    :mod:`cep.nfa.stray_text`) is null here, as Arrow columns have one type: output
    tables of every batch then have the same schema (the rules that read the column made
    such rows dead letters, which quote the word; Python objects hold it)."""
    import pyarrow as pa

    rows = without_stray_text(rows)
    chunks = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in rows.columns]
    return (pa.StructArray.from_arrays(chunks, names=rows.column_names) if rows.num_columns
            else pa.nulls(rows.num_rows, pa.struct([])))


def _taken_structs(refs: EntryRefs) -> Any:
    """The events of ``refs`` as structs, taken from each batch (its struct array made
    once, in its cache); None when the batches' columns differ (or there are none)."""
    import pyarrow as pa

    if not refs.sources:
        return None
    groups = refs.groups()
    parts = []
    for src, entries in groups or [(refs.sources[0], np.empty(0, np.int64))]:
        structs = src.cache.get(_STRUCTS)
        if structs is None:
            # a batch's rows as they came in: NaN null here (_rows_table's already are)
            structs = src.cache[_STRUCTS] = _structs(_without_nan(src.rows))
        parts.append(structs.take(pa.array(refs.at[entries])))
    if len(parts) == 1:
        return parts[0]
    if any(p.type != parts[0].type for p in parts):
        return None
    joined = pa.concat_arrays(parts)
    back = in_entry_order(groups)
    return joined if back is None else joined.take(pa.array(back))


#: key of a batch's cache: its rows as one struct array
_STRUCTS = "structs"


def _measure_columns(found: Found, measures: Mapping[str, Expr], lists: Mapping[str, Any],
                     lenient: bool = False) -> list[tuple[str, Any]]:
    """The measures: those of one stage's field read from its column of events
    (:mod:`cep.runtime.measure_columns`); the others computed over each match's Match
    object (evaluated in Python).  One that cannot be computed over a match raises a
    MeasureError, or ``lenient`` (a job's output) is null there, with a warning."""
    import pyarrow as pa

    fast = {name: column for name, expr in measures.items()
            if (column := measure_column(expr, lists)) is not None}
    rest = {name: expr for name, expr in measures.items() if name not in fast}
    values = []
    failed: dict[str, list[Any]] = {}  # measure -> [matches it failed on, the first error]
    for m in (found if rest else ()):
        try:
            values.append(measure(m, rest))
        except MeasureError:
            if not lenient:
                raise
            values.append(_each_or_null(m, rest, failed))
    if failed:
        _warn_failed(found, failed)
    out = []
    for name in measures:
        if name in fast:
            out.append((name, fast[name]))
            continue
        column = [v[name] for v in values]
        try:
            out.append((name, pa.array(column, from_pandas=True)))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            out.append((name, pa.array([None if v is None else str(v) for v in column],
                                       pa.string())))
    return out


def _each_or_null(match: Match, measures: Mapping[str, Expr], failed: dict[str, list[Any]]
                  ) -> dict[str, Any]:
    """Each measure over ``match`` on its own, null where it fails (counted in ``failed``)."""
    out: dict[str, Any] = {}
    for name, expr in measures.items():
        try:
            out[name] = measure(match, {name: expr})[name]
        except MeasureError as err:
            out[name] = None
            entry = failed.setdefault(name, [0, err])
            entry[0] += 1
    return out


#: (rule, version, measure) a job warned of: once per process, not per epoch
_WARNED: set[tuple[Any, ...]] = set()
_WARNED_LOCK = threading.Lock()


def _warn_failed(found: Found, failed: dict[str, list[Any]]) -> None:
    """A MeasureWarning per measure that failed over some of ``found``'s matches (once per
    rule, version and measure)."""
    for name, (count, err) in failed.items():
        with _WARNED_LOCK:
            if (found.rule, found.version, name) in _WARNED:
                continue
            _WARNED.add((found.rule, found.version, name))
        rule = "" if found.rule is None else f"rule {found.rule!r} (version {found.version}): "
        warnings.warn(f"{rule}{err}: null in {count} of {len(found)} matches (and in any "
                      "later match it fails on)", MeasureWarning, stacklevel=2)


# --------------------------------------------------------------- side rows
def side_rows(kind: str, events: Sequence[Any], *, key: KeyNames, keys: Sequence[Any],
              times: Sequence[int | None], reasons: Sequence[str],
              positions: Sequence[str | None], rules: Sequence[str | None] | None = None,
              versions: Sequence[int | None] | None = None) -> list[dict[str, Any]]:
    """Late events or dead letters as rows of the output schema: the key's columns,
    ``kind``, ``rule`` (when a rule refused it) and its ``version`` (of a rule set), ``match_id``, ``start`` and ``end`` (the
    event's time, when it could be read), ``timeout_at`` (null), ``reason``, ``position``
    and the ``event`` itself, as it came.  Side outputs are rare and their events can be
    anything (a line that is not CSV), so they are rows of Python values; the id hashes
    the kind, key, time and the event's fields as a match's does.

    >>> side_rows("late", [{"card": "c1", "v": 2}], key="card", keys=["c1"], times=[5],
    ...           reasons=["event time 5 is at or below the watermark 9"], positions=["f:3"])[0]
    ... # doctest: +ELLIPSIS
    {'card': 'c1', 'kind': 'late', 'match_id': '...', 'start': 5, 'end': 5, 'timeout_at': None, 'reason': 'event time 5 is at or below the watermark 9', 'position': 'f:3', 'event': {'card': 'c1', 'v': 2}}
    """
    n = len(events)
    names = key_names(key)
    composite = len(names) > 1
    ids = _side_ids(kind, events, keys, times, composite) if n else []
    out = []
    for i in range(n):
        k = keys[i]
        row: dict[str, Any] = (dict(zip(names, k if isinstance(k, tuple) else (None,) * len(
            names), strict=True)) if composite else {names[0]: k} if names else {})
        row["kind"] = kind
        if rules is not None and rules[i] is not None:
            row["rule"] = rules[i]
            if versions is not None and versions[i] is not None:
                row["version"] = versions[i]
        row.update(match_id=ids[i], start=times[i], end=times[i], timeout_at=None,
                   reason=reasons[i], position=positions[i], event=events[i])
        out.append(row)
    return out


def _side_ids(kind: str, events: Sequence[Any], keys: Sequence[Any],
              times: Sequence[int | None], composite: bool) -> list[str]:
    """Ids of side rows: a match's id of one entry, the event, under the kind's name."""
    n = len(events)
    fields = [dict(e) if isinstance(e, Mapping) else {"": e} for e in events]
    table = records_table(fields)
    hashes = event_hashes(table) if table.num_columns else np.zeros(n, np.uint64)
    time = np.array([0 if t is None else t for t in times], np.int64)
    ids = match_ids(np.full(n, _SIDE_CODES[kind], np.int64), key_hashes(list(keys), composite),
                    time, time, np.arange(n + 1, dtype=np.int64),
                    np.full(n, stage_hash(kind), np.uint64), hashes)
    return ids.to_pylist()


# ------------------------------------------------------------------ writing
#: the file formats a table of matches is written as, by suffix
WRITERS = (".parquet", ".csv", ".jsonl", ".json")


def pandas_frame(table: Any) -> Any:
    """A table of matches as a pandas DataFrame, as Arrow converts it but for two things
    Arrow gets wrong for this data: an integer column with nulls (``timeout_at`` of
    matches, a missing key) is pandas' nullable integer, not float; and times of
    nanoseconds inside the stages' events are timestamps, not integers (Arrow turns
    nested nanosecond times into numbers; they are made microseconds when that loses
    nothing, else read value by value).

    >>> import pyarrow as pa
    >>> t = pa.table({"timeout_at": pa.array([None, 5], pa.int64()), "a": pa.array(
    ...     [[{"ts": 2_000_000}], []], pa.list_(pa.struct([("ts", pa.timestamp("ns"))])))})
    >>> frame = pandas_frame(t)
    >>> str(frame["timeout_at"].dtype), frame["timeout_at"].tolist()[1]
    ('Int64', 5)
    >>> list(frame["a"][0])
    [{'ts': datetime.datetime(1970, 1, 1, 0, 0, 0, 2000)}]
    """
    import pandas as pd
    import pyarrow as pa

    frame = table.to_pandas()
    for i, field in enumerate(table.schema):
        column = table.column(i)
        # timeout_at is null for matches: nullable whether a table holds one or not
        if pa.types.is_integer(field.type) and (column.null_count or field.name == "timeout_at"):
            signed = "" if pa.types.is_signed_integer(field.type) else "U"
            frame[field.name] = pd.array(column.to_pylist(),
                                         dtype=f"{signed}Int{field.type.bit_width}")
        elif pa.types.is_nested(field.type) and (micros := _micros(field.type)) != field.type:
            try:
                fixed = column.cast(micros, safe=True).to_pandas()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # finer than microseconds
                fixed = pd.Series(column.to_pylist(), dtype=object)
            frame[field.name] = fixed.values
    return frame


def _micros(kind: Any) -> Any:
    """``kind`` with every nanosecond time, duration or time of day in it in microseconds."""
    import pyarrow as pa

    if pa.types.is_timestamp(kind) and kind.unit == "ns":
        return pa.timestamp("us", kind.tz)
    if pa.types.is_duration(kind) and kind.unit == "ns":
        return pa.duration("us")
    if pa.types.is_time64(kind) and kind.unit == "ns":
        return pa.time64("us")
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_micros(f.type)) for f in kind])
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_micros(kind.value_type)))
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_micros(kind.value_type)))
    return kind


def json_lines(table: Any) -> Iterator[str]:
    """Each row as one line of JSON, columns in table order (times as ISO-8601 text).

    >>> import pyarrow as pa
    >>> list(json_lines(pa.table({"card": ["c1"], "a": [[{"v": 1}]]})))
    ['{"card": "c1", "a": [{"v": 1}]}']
    """
    for row in table.to_pylist():  # Python values: text is what was asked for
        yield json_line(row, ascii_only=False)


def _storable(table: Any) -> Any:
    """``table`` as Parquet can store it: a stage's events as structs of no field (an input
    with no columns, say an empty file) become lists of nulls, one per event.

    >>> import pyarrow as pa
    >>> t = pa.table({"a": pa.array([[{}]], pa.list_(pa.struct([])))})
    >>> _storable(t).column("a").type
    ListType(list<item: null>)
    """
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        if pa.types.is_list(field.type) and pa.types.is_struct(field.type.value_type) and (
                field.type.value_type.num_fields == 0):
            column = table.column(i).combine_chunks()
            lists = pa.ListArray.from_arrays(column.offsets, pa.nulls(len(column.values)),
                                             mask=column.is_null())
            table = table.set_column(i, field.name, lists)
    return table


def as_json_text(table: Any, names: list[str]) -> Any:
    """``table`` with the columns ``names`` as JSON text (those it has not already); the
    caller lists them under JSON_COLUMNS.

    >>> import pyarrow as pa
    >>> as_json_text(pa.table({"a": [[1, 2]]}), ["a"]).column("a").to_pylist()
    ['[1, 2]']
    """
    import pyarrow as pa

    done = set(json_columns(table))
    for name in names:
        if name in table.column_names and name not in done:
            i = table.column_names.index(name)
            text = pa.array([None if v is None else json_text(v)
                             for v in table.column(i).to_pylist()], pa.string())
            table = table.set_column(i, name, text)
    return table


def write_parquet(table: Any, where: Any, **options: Any) -> None:
    """Write ``table`` as Parquet to ``where`` (a path or a file object).  A column of a type
    Parquet cannot hold (an event's empty dict is a struct of no field) goes as JSON text,
    with the table's other nested columns, as CSV holds them (listed under JSON_COLUMNS,
    so reading it back decodes them): one odd event must not stop the file.

    >>> import io, pyarrow as pa
    >>> out = io.BytesIO()
    >>> write_parquet(pa.table({"a": [[{"x": {}}]]}), out)
    >>> import pyarrow.parquet as pq
    >>> pq.read_table(out).column("a").to_pylist()
    ['[{"x": {}}]']
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = _storable(table)
    try:
        pq.write_table(table, where, **options)
        return
    except pa.ArrowNotImplementedError:
        if hasattr(where, "seek"):
            where.seek(0)
            where.truncate()
    nested = [f.name for f in table.schema if pa.types.is_nested(f.type)]
    as_json = sorted(set(json_columns(table)) | set(nested))
    table = as_json_text(table, nested).replace_schema_metadata(
        {JSON_COLUMNS: json.dumps(as_json).encode()})
    pq.write_table(table, where, **{k: v for k, v in options.items() if k != "use_dictionary"})


def write_table(table: Any, path: str | Path) -> Path:
    """Write a table of matches to ``path``, as its suffix says: Parquet (nested columns
    kept), CSV (nested columns as JSON text) or JSON lines.

    >>> import pyarrow as pa, tempfile
    >>> out = Path(tempfile.mkdtemp()) / "m.csv"
    >>> _ = write_table(pa.table({"card": ["c1"], "a": [[{"v": 1}]]}), out)
    >>> out.read_text().splitlines()
    ['"card","a"', '"c1","[{""v"": 1}]"']
    """
    import pyarrow as pa

    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in WRITERS:
        raise InputError(f"cannot write matches to {out.name}: name a .parquet, .csv or "
                         ".jsonl file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".parquet":
            write_parquet(table, out)
        elif suffix == ".csv":
            import pyarrow.csv as pcsv

            flat = pa.table({name: _as_text(column) if pa.types.is_nested(column.type)
                             else column
                             for name, column in zip(table.column_names, table.columns,
                                                     strict=True)})
            pcsv.write_csv(flat, out)
        else:
            with out.open("w", encoding="utf-8") as f:
                for line in json_lines(table):
                    f.write(line + "\n")
    except OSError as err:
        raise CEPError(f"cannot write {out}: {err.strerror or err}") from err
    return out


def _as_text(column: Any) -> Any:
    import pyarrow as pa

    return pa.array([None if v is None else json_line(v) for v in column.to_pylist()],
                    pa.string())
