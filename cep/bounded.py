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
from cep.matcher import Engine, Matcher
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
    rows, source = _rows(events)
    by_key: dict[Any, list[tuple[int, int, Any]]] = {}
    for i, row in enumerate(rows):
        k = _key(_field(row, key, "key", i, source), key, i, source) if key is not None else None
        ts = _timestamp(_field(row, time, "time", i, source), time, i, source) if time is not None else i
        try:
            bucket = by_key.setdefault(k, [])
        except TypeError as err:
            raise InputError(f"{_where(i, source)}: key {k!r} is not hashable") from err
        bucket.append((ts, i, row))

    all_matches: list[Match] = []
    all_timeouts: list[Timeout] = []
    for k, items in by_key.items():
        items.sort(key=lambda item: item[0])  # stable: ties keep input order
        matcher = Matcher(pattern, engine=engine)
        last_ts: int | None = None
        for ts, _, row in items:
            if ts != last_ts:
                done, expired = matcher.advance_time(ts)
                all_matches.extend(m._with_key(k) for m in done)
                all_timeouts.extend(t._with_key(k) for t in expired)  # type: ignore[misc]
                last_ts = ts
            all_matches.extend(m._with_key(k) for m in matcher.process(row, ts))
        done, expired = matcher.advance_time(MAX_TIMESTAMP)
        all_matches.extend(m._with_key(k) for m in done)
        all_timeouts.extend(t._with_key(k) for t in expired)  # type: ignore[misc]
    if timeouts:
        return all_matches, all_timeouts
    return all_matches


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
    if not path.exists():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        if suffix == ".csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path).to_pylist()
        if suffix in (".jsonl", ".ndjson", ".json"):
            import pyarrow.json as pjson

            return pjson.read_json(path).to_pylist()
    except InputError:
        raise
    except Exception as err:
        raise InputError(f"{path}: cannot read {suffix[1:]} file: {err}") from err
    raise InputError(f"{path}: unknown file type {suffix!r} (use .parquet, .csv or .jsonl)")


def _where(i: int, source: str | None) -> str:
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
        try:
            parsed = datetime.fromisoformat(value.strip())
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
