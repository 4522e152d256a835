"""Events waiting for the watermark, held as columnar chunks.

An event above the watermark when it arrives waits here; when the watermark reaches
it, it is released with every other waiting event at or below the watermark as one
batch, in arrival order (the engines order each key's events by time, ties by
arrival).  A chunk keeps the rows as they came (Arrow columns, a pandas frame or
Python objects), their times, their arrival numbers, where each came from
(partition, row) and one key per key field of the job, so memory follows what
waits, never the length of the input, and no Python object is made per event.

>>> import numpy as np
>>> from cep.nfa.events import Keys
>>> buffer = WatermarkBuffer()
>>> buffer.add(Waiting.of(np.array(["a", "b", "c"], object), np.array([5, 1, 9]), [Keys.none(3)]))
>>> released = buffer.release(5)
>>> released.times.tolist(), len(buffer), buffer.min_time()
([5, 1], 1, 9)
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.errors import CheckpointError
from cep.keys import decode_key, encode_keys
from cep.nfa.events import (
    Events,
    Keys,
    concat_rows,
    object_array,
    one_chunk,
    rows_bytes,
    slice_rows,
    take_rows,
)

#: names of the columns a checkpoint adds to the waiting rows
_CONTROL = ("__cep_ts", "__cep_seq", "__cep_part", "__cep_row")
_KEY = "__cep_key{}"
#: schema metadata: how the rows were held, and the key values of each key column
_ROWS = b"cep.rows"
_KEYS = b"cep.keys"


@dataclass
class Waiting:
    """Rows with their times, arrival numbers, origin and keys (see the module docstring).

    ``refused`` marks, per rule, rows that rule cannot read (its engine's screening):
    they stay for the other rules.
    """

    rows: Any
    times: np.ndarray
    seq: np.ndarray
    part: np.ndarray
    row: np.ndarray
    keys: list[Keys]
    refused: dict[int, np.ndarray] | None = None
    #: the cache of the batches made of these rows (see Events.cache)
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def of(rows: Any, times: Any, keys: list[Keys], seq: Any = None, part: Any = None,
           row: Any = None) -> Waiting:
        """A chunk; arrival numbers, partitions and rows default to 0, 1, 2..., 0, 0...."""
        times = np.asarray(times, np.int64)
        n = len(times)
        count = np.arange(n, dtype=np.int64)
        return Waiting(rows, times, count if seq is None else np.asarray(seq, np.int64),
                       np.zeros(n, np.int32) if part is None else np.asarray(part, np.int32),
                       count if row is None else np.asarray(row, np.int64), keys)

    def __len__(self) -> int:
        return len(self.times)

    def take(self, idx: np.ndarray) -> Waiting:
        """The rows at ``idx``, in that order."""
        refused = None if self.refused is None else {
            r: mask[idx] for r, mask in self.refused.items()}
        return Waiting(take_rows(self.rows, idx), self.times[idx], self.seq[idx], self.part[idx],
                       self.row[idx], [k.take(idx) for k in self.keys], refused)

    def slice(self, start: int, stop: int) -> Waiting:
        """The rows ``start:stop`` (no copy of the columns)."""
        cut = slice(start, stop)
        refused = None if self.refused is None else {
            r: mask[cut] for r, mask in self.refused.items()}
        return Waiting(slice_rows(self.rows, start, stop), self.times[cut], self.seq[cut],
                       self.part[cut], self.row[cut],
                       [Keys(k.codes[cut], k.values) for k in self.keys], refused)

    @staticmethod
    def concat(parts: Sequence[Waiting]) -> Waiting:
        """Chunks one after another."""
        if len(parts) == 1:
            return parts[0]
        rows = concat_rows([p.rows for p in parts])
        refused = None
        if any(p.refused for p in parts):
            rules = {r for p in parts for r in (p.refused or {})}
            refused = {r: np.concatenate([
                (p.refused or {}).get(r, np.zeros(len(p), np.bool_)) for p in parts])
                for r in rules}
        return Waiting(rows, np.concatenate([p.times for p in parts]),
                       np.concatenate([p.seq for p in parts]),
                       np.concatenate([p.part for p in parts]),
                       np.concatenate([p.row for p in parts]),
                       [Keys.concat([p.keys[i] for p in parts]) for i in range(len(parts[0].keys))],
                       refused)

    def events(self, key: int, rule: int | None = None) -> tuple[Events, np.ndarray]:
        """The batch an engine gets: the rows with key field ``key``'s keys, without the
        rows ``rule`` refused; and the positions (in this chunk) of the rows it holds."""
        events = Events(self.rows, self.keys[key], self.times, self.cache)
        mask = None if rule is None or not self.refused else self.refused.get(rule)
        if mask is None or not mask.any():
            every = self.cache.get(_EVERY_ROW)
            if every is None:  # made once for the rules of a job (each a page-faulting copy)
                every = self.cache[_EVERY_ROW] = np.arange(len(self), dtype=np.int64)
            return events, every
        kept = np.flatnonzero(~mask)
        return events.take(kept), kept


#: key of a chunk's cache (see :meth:`Waiting.events`): the positions of all its rows (a
#: tuple, so no column name can take it)
_EVERY_ROW = ("every row",)


class WatermarkBuffer:
    """Chunks of events waiting for the watermark (see the module docstring)."""

    def __init__(self) -> None:
        self.chunks: list[Waiting] = []
        self._mins: list[int] = []

    def __len__(self) -> int:
        return sum(len(c) for c in self.chunks)

    def add(self, chunk: Waiting) -> None:
        """Hold ``chunk`` (rows above the watermark) until the watermark reaches them."""
        if len(chunk):
            self.chunks.append(chunk)
            self._mins.append(int(chunk.times.min()))

    def nbytes(self) -> int:
        """About how many bytes the waiting rows take (with their times and arrival numbers)."""
        return sum(rows_bytes(c.rows) + 28 * len(c) for c in self.chunks)

    def min_time(self) -> int | None:
        """The earliest time waiting (None: nothing waits)."""
        return min(self._mins) if self._mins else None

    def release(self, watermark: int) -> Waiting | None:
        """Every waiting row at or below ``watermark``, in arrival order (None: none)."""
        out: list[Waiting] = []
        chunks: list[Waiting] = []
        mins: list[int] = []
        for chunk, low in zip(self.chunks, self._mins, strict=True):
            if low > watermark:  # nothing of this chunk is due: not even looked at
                chunks.append(chunk)
                mins.append(low)
                continue
            due = chunk.times <= watermark
            if due.all():
                out.append(chunk)
                continue
            first_kept = int(np.argmin(due))
            if not due[first_kept:].any():  # events in time order: the due ones lead
                out.append(chunk.slice(0, first_kept))
                rest = chunk.slice(first_kept, len(chunk))
            else:
                out.append(chunk.take(np.flatnonzero(due)))
                rest = chunk.take(np.flatnonzero(~due))
            chunks.append(rest)
            mins.append(int(rest.times.min()))
        self.chunks, self._mins = chunks, mins
        if not out:
            return None
        released = Waiting.concat(out)
        # the engines take their matches' events from it: in one piece once, not joined
        # again at every take (see one_chunk)
        released.rows = one_chunk(released.rows)
        return released

    def everything(self) -> Waiting | None:
        """All waiting rows in arrival order, as one chunk (for a checkpoint); the buffer
        keeps them.  Chunks are held in arrival order and a release keeps the order of what
        stays, so joining them is enough."""
        if not self.chunks:
            return None
        return Waiting.concat(self.chunks)

    def replace(self, chunks: list[Waiting]) -> None:
        """Hold ``chunks`` instead of the chunks held: the same rows, with other keys or
        refusal marks (a rule added or removed while they wait)."""
        assert [len(c) for c in chunks] == [len(c) for c in self.chunks]
        self.chunks = list(chunks)

    def restore(self, chunk: Waiting | None) -> None:
        """Hold exactly ``chunk`` (a job resuming from a checkpoint)."""
        self.chunks, self._mins = [], []
        if chunk is not None:
            self.add(chunk)


# ------------------------------------------------------------- checkpoints
def to_ipc(chunk: Waiting | None) -> bytes:
    """A chunk as an Arrow IPC file: its rows' columns plus ``__cep_*`` control columns
    (times, arrival numbers, origin, key codes), the key values and how the rows were held
    in the schema metadata.  Empty bytes for no chunk.

    >>> chunk = Waiting.of(np.array([{"v": 1}, {"v": 2}], object), [5, 6], [Keys.of_values(["k", "j"])])
    >>> back = from_ipc(to_ipc(chunk))
    >>> list(back.rows), back.times.tolist(), back.keys[0].values
    ([{'v': 1}, {'v': 2}], [5, 6], ['k', 'j'])
    """
    import pyarrow as pa

    if chunk is None or not len(chunk):
        return b""
    rows, held = _rows_table(chunk.rows)
    control = {
        "__cep_ts": pa.array(chunk.times, pa.int64()),
        "__cep_seq": pa.array(chunk.seq, pa.int64()),
        "__cep_part": pa.array(chunk.part, pa.int32()),
        "__cep_row": pa.array(chunk.row, pa.int64()),
    }
    keys_of = [keys.used() for keys in chunk.keys]  # not every key of the batch it came in
    for i, keys in enumerate(keys_of):
        control[_KEY.format(i)] = pa.array(keys.codes, pa.int64())
    for r, mask in (chunk.refused or {}).items():
        control[f"__cep_refused{r}"] = pa.array(mask, pa.bool_())
    table = rows
    for name, values in control.items():
        table = table.append_column(name, values)
    keys_meta = [encode_keys(k.values) for k in keys_of]
    table = table.replace_schema_metadata({
        _ROWS: held.encode(), _KEYS: json.dumps(keys_meta).encode()})
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def from_ipc(data: bytes) -> Waiting | None:
    """The chunk :func:`to_ipc` wrote; a :class:`~cep.errors.CheckpointError` when the bytes
    are not such a file."""
    import pyarrow as pa

    if not data:
        return None
    try:
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
        meta = table.schema.metadata or {}
        held = meta[_ROWS].decode()
        keys_meta = json.loads(meta[_KEYS])
        control = {name: table.column(name).to_numpy() for name in table.column_names
                   if name.startswith("__cep_")}
        rows = table.drop_columns([n for n in table.column_names if n.startswith("__cep_")])
        keys = [Keys(np.asarray(control[_KEY.format(i)], np.int64),
                     [decode_key(v) for v in values]) for i, values in enumerate(keys_meta)]
        refused = {int(n[len("__cep_refused"):]): np.asarray(v, np.bool_)
                   for n, v in control.items() if n.startswith("__cep_refused")}
        return Waiting(_rows_back(rows, held), np.asarray(control["__cep_ts"], np.int64),
                       np.asarray(control["__cep_seq"], np.int64),
                       np.asarray(control["__cep_part"], np.int32),
                       np.asarray(control["__cep_row"], np.int64), keys, refused or None)
    except (pa.ArrowInvalid, OSError, KeyError, ValueError, TypeError) as err:
        raise CheckpointError(f"the events waiting for the watermark cannot be read ({err})"
                              ) from err


def _rows_table(rows: Any) -> tuple[Any, str]:
    """Rows as an Arrow table, and how to turn them back (``table``, ``frame``, ``dicts``,
    ``values`` or ``json``)."""
    import pyarrow as pa

    from cep.jsonvalue import exact_table, to_json

    if type(rows).__module__.startswith("pyarrow"):
        return rows, "table"
    if type(rows).__module__.startswith("pandas"):
        try:
            return pa.Table.from_pandas(rows, preserve_index=False), "frame"
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            rows = object_array(rows.to_dict("records"))
    items = list(rows)
    table = exact_table(items)
    if table is not None:
        return table, "dicts" if all(type(r) is dict for r in items) else "values"
    # columns would change a value (1 among floats, a missing field): tagged JSON
    try:
        texts = [to_json(r) for r in items]
    except Exception as err:
        raise CheckpointError(f"cannot checkpoint the events waiting for the watermark: "
                              f"{err}") from None
    return pa.table({"json": pa.array(texts, pa.string())}), "json"


def _rows_back(table: Any, held: str) -> Any:
    from cep.jsonvalue import from_json

    if held == "table":
        return table
    if held == "frame":
        return table.to_pandas()
    if held == "dicts":
        values = table.to_pylist()
    elif held == "values":
        values = table.column("value").to_pylist()
    else:
        values = [from_json(t) for t in table.column("json").to_pylist()]
    return object_array(values)
