"""Output rows as Python values: JSON text of any value, Arrow tables of rows whose fields
agree on no one type, and rows read back from such tables.

A record is one row of the output schema (:mod:`cep.runtime.tables`) as a dict.  Matches
and timeouts are tables from the start; late events and dead letters are few and their
events can be anything (a line that is not CSV, a field of the wrong type), so they are
made as records and become a table here: a typed column where the values agree on a
type, JSON text where they are nested or mixed, the JSON columns named in the schema's
metadata so that :func:`table_rows` decodes them again.

>>> table = records_table([{"kind": "late", "event": {"v": 1}}, {"kind": "late", "event": "x"}])
>>> table.schema.field("event").type, table_rows(table)[0]["event"]
(DataType(string), {'v': 1})
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

#: table schema metadata: the columns holding JSON text (values of no one Arrow type)
JSON_COLUMNS = b"cep.json_columns"


def json_text(value: Any) -> str:
    """``value`` as JSON text, keys sorted, what :func:`to_json` makes of it encoded: one
    call of the C encoder for a whole record, Python only for the values JSON lacks.
    Strict JSON (RFC 8259): an infinite float is null, as NaN is.

    >>> from datetime import datetime
    >>> json_text({"b": (1, 2), "a": datetime(2024, 3, 1, 9, 30), "c": float("inf")})
    '{"a": "2024-03-01T09:30:00", "b": [1, 2], "c": null}'
    """
    try:
        return json.dumps(value, sort_keys=True, default=_json_default, allow_nan=False)
    except (TypeError, ValueError):  # keys that are not text, a float that is not finite
        return json.dumps(to_json(value), sort_keys=True, allow_nan=False)


def json_line(row: Any, ascii_only: bool = True) -> str:
    """A record as one line of strict JSON, its fields in order (times as ISO-8601 text,
    see :func:`to_json`); ``ascii_only`` escapes other characters.

    >>> json_line({"kind": "late", "event": {"v": 1, "w": float("-inf"), "b": b"ok"}})
    '{"kind": "late", "event": {"v": 1, "w": null, "b": "b2s="}}'
    """
    try:
        return json.dumps(row, default=_json_default, ensure_ascii=ascii_only,
                          allow_nan=False)
    except (TypeError, ValueError):  # keys that are not text, a float that is not finite
        return json.dumps(to_json(row), ensure_ascii=ascii_only, allow_nan=False)


def _json_default(value: Any) -> Any:
    """What :func:`to_json` makes of a value the JSON encoder does not know."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return iso_duration(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _base64(value)
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "__dict__"):
        return vars(value)
    return str(value)


def _base64(value: bytes | bytearray | memoryview) -> str:
    """Bytes as JSON holds them, as Spark's JSON writer does: base64 text."""
    import base64

    return base64.b64encode(bytes(value)).decode("ascii")


def iso_duration(value: timedelta) -> str:
    """A duration as ISO-8601 text, as pandas and Arrow's CSV writer give it (a pandas
    Timedelta's nanoseconds kept).

    >>> iso_duration(timedelta(seconds=1.5))
    'P0DT0H0M1.5S'
    """
    import pandas as pd

    return str(pd.Timedelta(value).isoformat())


def to_json(value: Any) -> Any:
    """Plain JSON for records: datetimes as ISO strings, durations as ISO-8601 durations,
    bytes as base64, a float that is not finite null (NaN is null everywhere in cep, and
    JSON has no infinity), other objects as their str().

    >>> to_json({"at": date(2024, 3, 1), "n": (1, 2), "x": float("inf"), "b": b"ok"})
    {'at': '2024-03-01', 'n': [1, 2], 'x': None, 'b': 'b2s='}
    """
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return iso_duration(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _base64(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return to_json(value.item())
    if hasattr(value, "__dict__"):
        return to_json(vars(value))
    return str(value)


def records_table(records: Sequence[dict[str, Any]]) -> Any:
    """Records as an Arrow table, columns in the order they first appear: a typed column
    per field (int64, double, bool, string, ...) where its values agree on a type; JSON text
    where they are nested or of mixed types, listed under :data:`JSON_COLUMNS`."""
    import pyarrow as pa

    arrays: dict[str, Any] = {}
    as_json: list[str] = []
    for c in dict.fromkeys(k for r in records for k in r):
        values = [r.get(c) for r in records]
        if c not in ALWAYS_JSON and not any(isinstance(v, (dict, list, tuple)) for v in values):
            try:
                arrays[c] = pa.array([_json_default(v) if _foreign(v) else v for v in values])
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                pass  # mixed types (say 1 and "a"): JSON keeps each value's own type
        as_json.append(c)
        arrays[c] = pa.array([None if v is None else json_text(v) for v in values], pa.string())
    return pa.table(arrays).replace_schema_metadata({JSON_COLUMNS: json.dumps(as_json).encode()})


#: columns of records that are JSON text in every table, whatever their values: the event
#: of a late event or dead letter, an object or a line that was not JSON (a JSON string
#: then), so its encoding in a part file does not depend on which records share it
ALWAYS_JSON = frozenset({"event"})


def _foreign(value: Any) -> bool:
    """Is ``value`` of a kind JSON has no type for (to_json turns it into one)?"""
    return not (value is None or isinstance(value, (str, int, float, bool)))


def json_columns(table: Any) -> list[str]:
    """The columns of ``table`` that hold JSON text (see :data:`JSON_COLUMNS`).

    >>> json_columns(records_table([{"a": 1, "b": [1]}]))
    ['b']
    """
    return list(json.loads((table.schema.metadata or {}).get(JSON_COLUMNS, b"[]")))


def table_rows(table: Any) -> list[dict[str, Any]]:
    """The rows of an output table as dicts, JSON text columns decoded.

    >>> import pyarrow as pa
    >>> table_rows(pa.table({"kind": ["match"], "a": [[{"v": 1}]]}))
    [{'kind': 'match', 'a': [{'v': 1}]}]
    """
    from cep.gcpause import paused_gc

    decode = json_columns(table)
    with paused_gc():  # a dict per row and event: many objects
        rows = table.to_pylist()
        for c in decode:
            for row in rows:
                if row.get(c) is not None:
                    row[c] = json.loads(row[c])
    return rows
