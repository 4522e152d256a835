"""Match ids: the same match gets the same id in every run, engine and place.

An id is 20 hex digits (80 bits) of a hash over what makes a match itself: its kind
(match or timeout), its key, its start and end, and, in order, each event it took with
the stage that took it.  An event is the set of its non-null fields (name and value; NaN
is null, as pandas and Spark's pandas functions make it), so an event read from Parquet,
from a pandas frame, from Python dicts or by Spark hashes alike.  Values are compared as MATCH_RECOGNIZE users think of them, not as one reader
typed them: a float holding a whole number is that integer (pandas turns integers with
nulls into floats), a timestamp or a date is its epoch milliseconds (as event times are),
text is its UTF-8 bytes; nested values hash their JSON text.

Everything is computed a column at a time (numpy and small numba kernels over Arrow
buffers), never a Python object per event.

>>> import pyarrow as pa
>>> rows = pa.table({"v": [1, 2]})
>>> ids = match_ids(kind=np.array([0]), key=np.zeros(1, np.uint64), start=np.array([1]),
...                 end=np.array([2]), offsets=np.array([0, 2]),
...                 stage=np.array([stage_hash("a"), stage_hash("b")], np.uint64),
...                 event=event_hashes(rows))
>>> ids.to_pylist() == match_ids(np.array([0]), np.zeros(1, np.uint64), np.array([1]),
...     np.array([2]), np.array([0, 2]), np.array([stage_hash("a"), stage_hash("b")],
...     np.uint64), event_hashes(pa.table({"v": [1.0, 2.0]}))).to_pylist()
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from cep.nfa.jit_cache import cacheable
from cep.nfa.stray_text import PREFIX
from cep.runtime.records import json_columns

#: numba caches compiled code on disk when it can (see cep.nfa.jit_cache)
CACHE = cacheable(__file__)

#: what a value is, mixed into its hash so 1 and "1" and true differ
TAG_INT, TAG_FLOAT, TAG_TEXT, TAG_BOOL, TAG_JSON = 1, 2, 3, 4, 5
#: the two 64-bit lanes of an id start from these (an id is 80 bits of the two)
SEED_A, SEED_B = np.uint64(0x243F6A8885A308D3), np.uint64(0x13198A2E03707344)
#: hex digits an id has
ID_DIGITS = 20
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)
#: floats that hold a whole number in this range hash as that integer
_INT_RANGE = 2.0**63


# ------------------------------------------------------------------ kernels
@njit(cache=CACHE, inline="always")
def _mix(x):
    """splitmix64's finaliser: every input bit moves every output bit."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@njit(cache=CACHE, nogil=True)
def _mix_all(x, tag):
    out = np.empty(len(x), np.uint64)
    t = np.uint64(tag) * _GOLDEN
    for i in range(len(x)):
        out[i] = _mix(x[i] ^ t)
    return out


@njit(cache=CACHE, nogil=True)
def _bytes_hashes(offsets, data):
    """FNV-1a of each value's bytes (value i is data[offsets[i]:offsets[i + 1]])."""
    n = len(offsets) - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        h = _FNV_OFFSET
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * _FNV_PRIME
        out[i] = h
    return out


@njit(cache=CACHE, nogil=True)
def _combine(kind, key, start, end, offsets, stage, event, seed):
    """One lane of each output's id: its kind, key, start, end, then each entry's stage
    and event, in order."""
    n = len(kind)
    out = np.empty(n, np.uint64)
    for j in range(n):
        h = seed
        h = _mix(h + np.uint64(kind[j]) * _GOLDEN)
        h = _mix(h + key[j] * _GOLDEN)
        h = _mix(h + np.uint64(start[j]) * _GOLDEN)
        h = _mix(h + np.uint64(end[j]) * _GOLDEN)
        for q in range(offsets[j], offsets[j + 1]):
            h = _mix(h + stage[q] * _GOLDEN)
            h = _mix(h + event[q] * _GOLDEN)
        out[j] = h
    return out


# ------------------------------------------------------------------- values
def text_hash(text: str) -> np.uint64:
    """The hash of a name (a stage's, a field's) as the kernels make it.

    >>> bool(text_hash("amount") == text_hash("amount") != text_hash("amounts"))
    True
    """
    data = np.frombuffer(text.encode(), np.uint8)
    raw = _bytes_hashes(np.array([0, len(data)], np.int64), data)
    return np.uint64(_mix_all(raw, TAG_TEXT)[0])


def stage_hash(name: str) -> np.uint64:
    """The hash a stage's name puts into the ids of the matches it took events for."""
    return text_hash(name)


def value_hashes(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """(hash, null) of each value of an Arrow column (Array or ChunkedArray); see the
    module docstring for which values hash alike.

    >>> import pyarrow as pa
    >>> h, null = value_hashes(pa.array([3, None, 3]))
    >>> bool(h[0] == h[2] == value_hashes(pa.array([3.0]))[0][0]), null.tolist()
    (True, [False, True, False])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    kind = column.type
    n = len(column)
    # NaN is a missing value (as in conditions, pandas and Spark's pandas functions): it
    # hashes as null does, so an event's id is the same whichever way it came in
    null = (pc.is_null(column, nan_is_null=True).to_numpy(zero_copy_only=False)
            if column.null_count or pa.types.is_floating(kind) else np.zeros(n, np.bool_))
    if pa.types.is_null(kind):
        return np.zeros(n, np.uint64), np.ones(n, np.bool_)
    if pa.types.is_boolean(kind):
        bits = column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint64)
        return _mix_all(bits, TAG_BOOL), null
    if pa.types.is_integer(kind):
        ints = column.cast(pa.int64(), safe=False).fill_null(0).to_numpy(zero_copy_only=False)
        return _mix_all(ints.view(np.uint64), TAG_INT), null
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return _float_hashes(pc.cast(column, pa.float64()).fill_null(0.0).to_numpy(
            zero_copy_only=False)), null
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        from cep.time_columns import times_of_column

        return _mix_all(times_of_column(column, None, "value").millis.view(np.uint64),
                        TAG_INT), null
    if pa.types.is_duration(kind) or pa.types.is_time(kind):
        # milliseconds, as times are, whatever the unit the column came in (a frame's
        # durations are nanoseconds, Python's timedelta microseconds)
        ticks = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        times, per = _TICKS_TO_MILLIS[kind.unit]
        millis = ticks.astype(np.int64) * times // per
        return _mix_all(millis.view(np.uint64), TAG_INT), null
    if (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        return _mix_all(_text_hashes(column), TAG_TEXT), null
    return _json_hashes(column), null


#: a tick of each time unit in milliseconds, as (times, per)
_TICKS_TO_MILLIS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def _float_hashes(values: np.ndarray) -> np.ndarray:
    whole = np.isfinite(values) & (np.floor(values) == values) & (np.abs(values) < _INT_RANGE)
    out = _mix_all(np.where(whole, values, 0).astype(np.int64).view(np.uint64), TAG_INT)
    if not whole.all():
        # -0.0 is 0 (whole); one NaN for all NaNs
        bits = np.where(np.isnan(values), np.nan, values).view(np.uint64)
        out = np.where(whole, out, _mix_all(bits, TAG_FLOAT))
    return out


def _text_hashes(column: Any) -> np.ndarray:
    """FNV-1a of each value's bytes, read from the Arrow buffers in place (a null's hash is
    of whatever bytes it spans: callers mask nulls)."""
    import pyarrow as pa

    wide = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    buffers = column.buffers()
    offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)[
        column.offset:column.offset + len(column) + 1].astype(np.int64)
    data = (np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None
            else np.empty(0, np.uint8))
    return _bytes_hashes(offsets, data)


def _json_hashes(column: Any) -> np.ndarray:
    """Nested values (lists, structs, maps): the hash of their JSON text, one by one - no
    Arrow kernel hashes them, and events rarely hold them."""
    texts = [json.dumps(_nan_none(v), sort_keys=True, separators=(",", ":"), default=str)
             for v in column.to_pylist()]
    import pyarrow as pa

    return _mix_all(_text_hashes(pa.array(texts, pa.large_string())), TAG_JSON)


def _nan_none(value: Any) -> Any:
    """``value`` with NaN None at any depth: NaN is a missing value, nested too.

    >>> _nan_none({"s": float("nan"), "xs": [1.0, float("nan")]})
    {'s': None, 'xs': [1.0, None]}
    """
    if isinstance(value, float):
        return None if value != value else value
    if isinstance(value, dict):
        return {k: _nan_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_none(v) for v in value]
    return value


# ------------------------------------------------------------------- events
def event_hashes(rows: Any) -> np.ndarray:
    """One hash per row of an Arrow table: its non-null fields, names and values, in no
    particular order (a column that is null in a row, or absent, is the same).

    >>> import pyarrow as pa
    >>> a = event_hashes(pa.table({"v": [1, 2], "w": ["x", None]}))
    >>> b = event_hashes(pa.table({"w": ["x", None], "v": [1.0, 2.0]}))
    >>> a.tolist() == b.tolist(), bool(a[0] != a[1])
    (True, True)
    """
    n = rows.num_rows
    total = np.zeros(n, np.uint64)
    # a field of values of mixed types (text for one event, an object for another) is JSON
    # text in a table of Python events: each value hashes as in a column of its own type,
    # so an event's hash does not depend on which events share its table
    as_json = set(json_columns(rows))
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        if column.null_count == n:
            continue  # adds nothing; events of many kinds in one table leave most fields null
        if name in as_json:
            hashes, null = _mixed_hashes([None if text is None else json.loads(text)
                                          for text in column.to_pylist()])
        else:
            hashes, null = value_hashes(column)
        # a column's stray text (cep.nfa.stray_text) is its value where the column is null:
        # the row hashes as the event a row-by-row reader gives
        field = _mix_all(hashes + text_hash(name.removeprefix(PREFIX)), 0)
        total += np.where(null, np.uint64(0), field)
    return _mix_all(total, 0)


def key_hashes(values: Sequence[Any], composite: bool) -> np.ndarray:
    """One hash per distinct key value (tuples for a composite key, part by part).

    >>> bool(key_hashes(["a"], False)[0] == key_hashes([("a",)], True)[0])
    True
    """
    if not composite:
        return _hash_parts([values], len(values))
    # no key at all (None: the dead letter of a record that could not be read) is null in
    # every part
    width = max((len(v) for v in values if v is not None), default=0)
    parts = [[v[p] if v is not None and p < len(v) else None for v in values]
             for p in range(width)]
    return _hash_parts(parts, len(values))


def _hash_parts(parts: list[list[Any]], n: int) -> np.ndarray:
    """Per value, the hash of its parts in order (each part's values as one column)."""
    import pyarrow as pa

    out = np.full(n, SEED_A, np.uint64)
    for part in parts:
        try:
            hashes, null = value_hashes(pa.array(part, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed types
            hashes, null = _mixed_hashes(part)
        out = _mix_all(out + np.where(null, np.uint64(0), hashes), 0)
    return out


def _mixed_hashes(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(hash, null) of values of several kinds (a key column of numbers holding a word):
    each value hashed as it is among values of its own kind, so a key's hash does not
    depend on which other keys share its batch (text, numbers, true/false apart; what
    Arrow cannot hold, an integer beyond 64 bits, as its JSON text).

    >>> a, _ = _mixed_hashes([7, "x"])
    >>> b, _ = value_hashes(__import__("pyarrow").array([7]))
    >>> bool(a[0] == b[0])
    True
    """
    import pyarrow as pa

    groups: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        kind = ("text" if isinstance(v, str) else "bool" if isinstance(v, (bool, np.bool_))
                else "number" if isinstance(v, (int, float, np.integer, np.floating))
                else "other")
        groups.setdefault(kind, []).append(i)
    hashes = np.zeros(len(values), np.uint64)
    null = np.zeros(len(values), np.bool_)
    for at in groups.values():
        part = [values[i] for i in at]
        try:
            column = pa.array(part, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            column = pa.array([None if v is None else json.dumps(v, default=str) for v in part],
                              pa.large_string())
        h, nl = value_hashes(column)
        hashes[at] = h
        null[at] = nl
    return hashes, null


# ---------------------------------------------------------------------- ids
def match_ids(kind: np.ndarray, key: np.ndarray, start: np.ndarray, end: np.ndarray,
              offsets: np.ndarray, stage: np.ndarray, event: np.ndarray) -> Any:
    """The ids (an Arrow string array) of outputs given column-wise: per output its kind
    code, key hash, start and end; per entry (output j's are offsets[j]:offsets[j + 1])
    the hash of its stage's name and of its event."""
    args = (np.asarray(kind, np.int64), np.asarray(key, np.uint64),
            np.asarray(start, np.int64), np.asarray(end, np.int64),
            np.asarray(offsets, np.int64), np.asarray(stage, np.uint64),
            np.asarray(event, np.uint64))
    return _hex(_combine(*args, SEED_A), _combine(*args, SEED_B))


def _hex(a: np.ndarray, b: np.ndarray) -> Any:
    """20 hex digits per id: lane a's 16, then lane b's top 4 (bytes.hex over the
    big-endian words: two C calls whatever the number of ids), as an Arrow string
    array made straight from the digits' buffer."""
    import pyarrow as pa

    n = len(a)
    digits = np.empty((n, ID_DIGITS), np.uint8)
    digits[:, :16] = np.frombuffer(a.astype(">u8").tobytes().hex().encode(), np.uint8
                                   ).reshape(n, 16)
    top = (b >> np.uint64(48)).astype(">u2")
    digits[:, 16:] = np.frombuffer(top.tobytes().hex().encode(), np.uint8).reshape(n, 4)
    offsets = np.arange(0, ID_DIGITS * (n + 1), ID_DIGITS, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits))
