"""``cep.match``: run a pattern over a bounded collection (lists, pandas, Arrow, files)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, Literal, overload

from cep.durations import MAX_TIMESTAMP
from cep.errors import InputError
from cep.match import Match, Timeout
from cep.matcher import Engine, Matcher, choose_engine
from cep.pattern import Pattern

Field = str | Callable[[Any], Any] | None
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@overload
def match(
    events: Any, pattern: Pattern, *, key: Field = ..., time: Field = ...,
    timeouts: Literal[False] = ..., engine: Engine = ...,
) -> list[Match]: ...


@overload
def match(
    events: Any, pattern: Pattern, *, key: Field = ..., time: Field = ...,
    timeouts: Literal[True], engine: Engine = ...,
) -> tuple[list[Match], list[Timeout]]: ...


def match(
    events: Any,
    pattern: Pattern,
    *,
    key: Field = None,
    time: Field = None,
    timeouts: bool = False,
    engine: Engine = "auto",
) -> list[Match] | tuple[list[Match], list[Timeout]]:
    """Find every match of ``pattern`` in a bounded collection of events.

    ``events`` is a list of dicts (or objects), a pandas DataFrame, a pyarrow
    Table, or the path of a Parquet, CSV or JSONL file.  Events are grouped by
    ``key`` (a field name or a function; None = one group), ordered by ``time``
    (a field holding integer milliseconds, datetimes or ISO-8601 strings, or a
    function; None = position in the input), stably for ties, and fed to one
    :class:`Matcher` per key.  At the end time moves past the last event, so
    trailing ``not_followed_by`` matches complete and windows expire.

    Returns the matches, key by key in order of first appearance, each with
    ``.key`` set; with ``timeouts=True`` returns ``(matches, timeouts)``.

    >>> rows = [{"card": 1, "ts": 1, "amount": 2}, {"card": 1, "ts": 2, "amount": 900}]
    >>> p = Pattern.begin("small").where(lambda e: e["amount"] < 5).next("big")
    >>> [m["big"][0]["amount"] for m in match(rows, p, key="card", time="ts")]
    [900]
    """
    if not isinstance(pattern, Pattern):
        raise InputError(
            f"the second argument must be a Pattern, got {type(pattern).__name__} "
            "(call cep.match(events, pattern, ...))"
        )
    chosen, _ = choose_engine(pattern, engine)
    if chosen == "numba":
        found = _match_columnar(events, pattern, key, time, timeouts)
    else:
        found = _match_rows(events, pattern, key, time)
    all_matches = [m for m in found if not isinstance(m, Timeout)]
    if timeouts:
        return all_matches, [t for t in found if isinstance(t, Timeout)]
    return all_matches


def _match_rows(events: Any, pattern: Pattern, key: Field, time: Field) -> list[Match]:
    """One reference-engine Matcher per key, fed like FlinkCEP's operator feeds its NFA."""
    rows, source = _rows(events)
    by_key: dict[Any, list[tuple[int, Any]]] = {}
    for i, row in enumerate(rows):
        k = _key(_field(row, key, "key", i, source), key, i, source) if key is not None else None
        ts = _timestamp(_field(row, time, "time", i, source), time, i, source) if time is not None else i
        try:
            bucket = by_key.setdefault(k, [])
        except TypeError as err:
            raise InputError(f"{_where(i, source)}: key {k!r} is not hashable") from err
        bucket.append((ts, row))
    found: list[Match] = []
    for k, items in by_key.items():
        items.sort(key=lambda item: item[0])  # stable: ties keep input order
        matcher = Matcher(pattern, engine="reference")
        last_ts: int | None = None
        for ts, row in items:
            if ts != last_ts:
                done, expired = matcher.advance_time(ts)
                found.extend(m._with_key(k) for m in [*done, *expired])
                last_ts = ts
            found.extend(m._with_key(k) for m in matcher.process(row, ts))
        done, expired = matcher.advance_time(MAX_TIMESTAMP)
        found.extend(m._with_key(k) for m in [*done, *expired])
    return found


def _match_columnar(
    events: Any, pattern: Pattern, key: Field, time: Field, timeouts: bool
) -> list[Match]:
    """The numba engine over the whole input as one batch, keys in order of first appearance."""

    from nfa.bytecode import referenced_columns
    from nfa.columnar import (
        Batch,
        ColumnarEngine,
        schema_of_arrow,
        schema_of_pandas,
        schema_of_values,
    )

    table, frame, rows, source = _open(events)
    if (table is not None and table.num_rows == 0) or (frame is not None and len(frame) == 0) or (
        rows is not None and not rows
    ):
        return []
    if table is not None:
        batch, schema = Batch.of_arrow(table), schema_of_arrow(table.schema)
        n = table.num_rows
    elif frame is not None:
        batch, schema = Batch.of_pandas(frame), schema_of_pandas(frame)
        n = len(frame)
    else:
        assert rows is not None
        batch, n = Batch.of_events(rows), len(rows)
        schema = schema_of_values(_sample(rows, referenced_columns(pattern)))
    keys, times = _keys_and_times(table, frame, rows, source, key, time, n)
    engine = ColumnarEngine(pattern, schema, timeouts=timeouts)
    found = engine.process(batch, keys, times)
    found += engine.advance(MAX_TIMESTAMP)
    return engine.in_key_order(found)


def _sample(rows: list[Any], names: list[str]) -> dict[str, Any]:
    sample: dict[str, Any] = {}
    for name in names:
        for i, row in enumerate(rows):
            try:
                value = _field(row, name, "condition", i, None)
            except InputError:
                raise InputError(f"row {i}: missing field {name!r}, which the pattern reads") from None
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                sample[name] = value
                break
        else:
            sample[name] = 0.0  # always null: any type reads it as null; call it numeric
    return sample


def _open(events: Any) -> tuple[Any, Any, list[Any] | None, str | None]:
    """(arrow table, pandas frame, rows, source) — exactly one of the first three is set."""
    if isinstance(events, (str, PathLike)):
        path = Path(events)
        return _read_table(path), None, None, str(path)
    module = type(events).__module__
    if module.startswith("pandas"):
        return None, events, None, None
    if module.startswith("pyarrow"):
        return events, None, None, None
    rows, source = _rows(events)
    return None, None, rows, source


def _keys_and_times(
    table: Any, frame: Any, rows: list[Any] | None, source: str | None,
    key: Field, time: Field, n: int,
) -> tuple[Any, Any]:
    """Vectorised for named columns of tables and frames; row by row otherwise (or on error)."""
    import numpy as np

    columns = None
    if table is not None and all(isinstance(f, str) or f is None for f in (key, time)):
        names = set(table.column_names)
        if all(f is None or f in names for f in (key, time)):
            columns = {f: table.column(f) for f in (key, time) if f is not None}
    elif frame is not None and all(isinstance(f, str) or f is None for f in (key, time)):
        if all(f is None or f in frame.columns for f in (key, time)):
            columns = {f: frame[f] for f in (key, time) if f is not None}
    if columns is not None:
        fast = _fast_keys_and_times(columns, key, time, n)
        if fast is not None:
            return fast
    if rows is None:
        rows = table.to_pylist() if table is not None else frame.to_dict("records")
    keys = [
        _key(_field(r, key, "key", i, source), key, i, source) if key is not None else None
        for i, r in enumerate(rows)
    ]
    times = np.array(
        [
            _timestamp(_field(r, time, "time", i, source), time, i, source) if time is not None else i
            for i, r in enumerate(rows)
        ],
        dtype=np.int64,
    )
    return keys, times


def _fast_keys_and_times(columns: dict[str, Any], key: Field, time: Field, n: int) -> Any:
    import numpy as np
    import pandas as pd

    def series(values: Any) -> Any:
        if type(values).__module__.startswith("pyarrow"):
            return values.to_pandas()
        return values

    if key is not None:
        keys = series(columns[key])
        if keys.isna().any():
            return None  # the row-by-row path names the offending row
        keys = keys.to_numpy()
    else:
        keys = np.zeros(n, np.int64)
    if time is None:
        return keys, np.arange(n, dtype=np.int64)
    values = series(columns[time])
    if values.isna().any():
        return None
    kind = values.dtype.kind
    if kind in "iu":
        return keys, values.to_numpy(np.int64)
    if kind == "f":
        floats = values.to_numpy(np.float64)
        if not np.all(np.floor(floats) == floats):
            return None
        return keys, floats.astype(np.int64)
    if kind == "M":
        # whatever the unit (s, ms, us, ns), as epoch milliseconds
        stamps = pd.to_datetime(values, utc=True).dt.as_unit("ms")
        return keys, stamps.astype("int64").to_numpy(np.int64)
    return None


def _rows(events: Any) -> tuple[list[Any], str | None]:
    if isinstance(events, (str, PathLike)):
        path = Path(events)
        return _read_file(path), str(path)
    module = type(events).__module__
    if module.startswith("pandas"):
        return events.to_dict("records"), None
    if module.startswith("pyarrow"):
        return events.to_pylist(), None
    if isinstance(events, Iterable):
        return list(events), None
    raise InputError(
        f"cannot read events from {type(events).__name__}: pass a list of dicts, a pandas "
        "DataFrame, a pyarrow Table or a Parquet/CSV/JSONL path"
    )


def _read_file(path: Path) -> list[dict[str, Any]]:
    return _read_table(path).to_pylist()


def _read_table(path: Path) -> Any:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path)
        if suffix == ".csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path)
        if suffix in (".jsonl", ".ndjson", ".json"):
            import pyarrow.json as pjson

            return pjson.read_json(path)
    except InputError:
        raise
    except Exception as err:
        raise InputError(f"{path}: cannot read {suffix[1:]} file: {err}") from err
    raise InputError(f"{path}: unknown file type {suffix!r} (use .parquet, .csv or .jsonl)")


def _where(i: int, source: str | None) -> str:
    if i < 0:
        return "event"
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


def _key(value: Any, field: Field, i: int, source: str | None) -> Any:
    name = field if isinstance(field, str) else "key"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise InputError(f"{_where(i, source)}: key field {name!r} is null")
    return value


def _timestamp(value: Any, field: Field, i: int, source: str | None) -> int:
    """Integer milliseconds from ints, whole floats, datetimes, numpy datetimes, ISO strings."""
    name = field if isinstance(field, str) else "time"
    where = f"{_where(i, source)}: time field {name!r}"
    if value is None:
        raise InputError(f"{where} is null")
    if isinstance(value, bool):
        raise InputError(f"{where} is a bool ({value!r}), not a timestamp")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise InputError(f"{where} is {value!r}")
        if not value.is_integer():
            raise InputError(f"{where} is {value!r}: timestamps are whole milliseconds")
        return int(value)
    if isinstance(value, datetime):
        if value != value:  # pandas NaT
            raise InputError(f"{where} is NaT")
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        delta = aware - _EPOCH
        return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)  # integer milliseconds written as text (CSV)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(
                f"{where} is {value!r}: not an ISO-8601 timestamp or integer milliseconds"
            ) from None
        return _timestamp(parsed, field, i, source)
    try:
        import numpy as np

        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return _timestamp(float(value), field, i, source)
        if isinstance(value, np.datetime64):
            if np.isnat(value):
                raise InputError(f"{where} is NaT")
            return int(value.astype("datetime64[ms]").astype(np.int64))
    except ImportError:  # pragma: no cover
        pass
    if type(value).__name__ == "NaTType":
        raise InputError(f"{where} is NaT")
    raise InputError(f"{where} is {value!r} ({type(value).__name__}): not a timestamp")
