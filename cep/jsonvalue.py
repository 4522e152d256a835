"""Python values as tagged JSON: how checkpoints hold what Arrow columns cannot.

Events are checkpointed as Arrow columns when they fit (dicts of one type per field);
events that do not - a field holding an int in one event and text in the next, an
integer beyond 64 bits, bytes, a tuple - are still plain data, and are held as JSON,
with the types JSON lacks tagged (``{"$cep": "tuple", "v": [...]}``), so they come back
exactly as they went in.  Loading never runs code: only these tags are understood.

>>> value = {"amount": 10**30, "key": ("c1", b"\\x00"), "at": datetime(2024, 3, 1)}
>>> from_json(to_json(value)) == value
True
"""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from cep.errors import CEPError

TAG = "$cep"


def to_json(value: Any) -> str:
    """``value`` (None, bools, numbers, text, bytes, dates and times, durations, decimals,
    lists, tuples, dicts, numpy scalars) as JSON text; anything else is a CEPError.

    >>> to_json(("a", 1))
    '{"$cep": "tuple", "v": ["a", 1]}'
    """
    return json.dumps(encode(value), allow_nan=True)


def from_json(text: str) -> Any:
    """The value :func:`to_json` wrote.

    >>> from_json('{"$cep": "bytes", "v": "AAE="}')
    b'\\x00\\x01'
    """
    return decode(json.loads(text))


def encode(value: Any) -> Any:
    """``value`` as JSON data (see :func:`to_json`).

    >>> encode({"d": date(2024, 3, 1)})
    {'d': {'$cep': 'date', 'v': '2024-03-01'}}
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {TAG: "tuple", "v": [encode(v) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and TAG not in value:
            return {k: encode(v) for k, v in value.items()}
        return {TAG: "dict", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)):
        return {TAG: "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, datetime):  # before date: a datetime is a date
        if value != value:  # pandas NaT
            return None
        return {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, date):
        return {TAG: "date", "v": value.isoformat()}
    if isinstance(value, time):
        return {TAG: "time", "v": value.isoformat()}
    if isinstance(value, timedelta):
        return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, Decimal):
        return {TAG: "decimal", "v": str(value)}
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return encode(item())
    if type(value).__name__ == "NAType":
        return None
    raise CEPError(f"{value!r} ({type(value).__name__}) is not plain data (numbers, text, "
                   "bytes, dates and times, lists, tuples, dicts), so it cannot be checkpointed")


_DECODERS = {
    "tuple": lambda v: tuple(decode(x) for x in v),
    "dict": lambda v: {decode(k): decode(x) for k, x in v},
    "bytes": lambda v: base64.b64decode(v),
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
    "timedelta": lambda v: timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "decimal": Decimal,
}


def decode(data: Any) -> Any:
    """The value :func:`encode` made of it.

    >>> decode({"$cep": "tuple", "v": ["a", {"$cep": "decimal", "v": "1.5"}]})
    ('a', Decimal('1.5'))
    """
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict):
        tag = data.get(TAG)
        if tag is None:
            return {k: decode(v) for k, v in data.items()}
        decoder = _DECODERS.get(tag)
        if decoder is None or set(data) != {TAG, "v"}:
            raise CEPError(f"unknown tagged value {data!r}")
        return decoder(data["v"])
    return data


def exact_table(rows: list[Any]) -> Any:
    """Python events as Arrow columns when the columns give every value back exactly: the
    same keys in every dict, each value of the same type (an int among floats would come
    back a float, a missing field a null); else None (hold them as tagged JSON).

    >>> exact_table([{"v": 1}, {"v": 2}]).num_rows
    2
    >>> exact_table([{"v": 1}, {"v": 2.5}]) is None, exact_table([{"v": 1}, {"w": 2}]) is None
    (True, True)
    """
    import pyarrow as pa

    dicts = all(type(r) is dict for r in rows)
    try:
        table = pa.Table.from_pylist(rows) if dicts else pa.table({"value": pa.array(rows)})
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError,
            OverflowError):
        return None
    back = table.to_pylist() if dicts else table.column("value").to_pylist()
    return table if all(_same(a, b) for a, b in zip(rows, back, strict=True)) else None


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)

