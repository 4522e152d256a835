"""Sinks: where matches, timeouts, late events and dead letters go.

File sinks are transactional: records of one checkpoint epoch are written to a
pending file, which becomes visible (renamed to its final name) only when the
checkpoint that covers it is complete.  After a crash, pending files of epochs
the last checkpoint covers are committed and the others deleted, so the
committed files hold every record exactly once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cep.errors import CEPError
from cep.gcpause import paused_gc
from cep.nfa.found import JSON_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa


def json_text(value: Any) -> str:
    """``value`` as JSON text, keys sorted, what :func:`to_json` makes of it encoded: one
    call of the C encoder for a whole record, Python only for the values JSON lacks.

    >>> from datetime import datetime
    >>> json_text({"b": (1, 2), "a": datetime(2024, 3, 1, 9, 30)})
    '{"a": "2024-03-01T09:30:00", "b": [1, 2]}'
    """
    try:
        return json.dumps(value, sort_keys=True, default=_json_default)
    except (TypeError, ValueError):  # keys that are not text (or of mixed types)
        return json.dumps(to_json(value), sort_keys=True)


def _json_default(value: Any) -> Any:
    """What :func:`to_json` makes of a value the JSON encoder does not know."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "__dict__"):
        return vars(value)
    return str(value)


def to_json(value: Any) -> Any:
    """Plain JSON for records: datetimes as ISO strings, other objects as their str()."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return to_json(value.item())
    if hasattr(value, "__dict__"):
        return to_json(vars(value))
    return str(value)


class Sink:
    """Receives records (dicts); transactional sinks commit per checkpoint epoch."""

    transactional = False
    #: does the sink take matches and timeouts as Arrow tables (:meth:`write_table`)?
    columnar = False

    def write(self, records: list[dict[str, Any]]) -> None:
        """Receive a batch of records; a transactional sink holds them until
        :meth:`prepare` and :meth:`commit` of their epoch.

        >>> sink = ListSink()
        >>> sink.write([{"type": "match", "key": 1}])
        >>> sink.records
        [{'type': 'match', 'key': 1}]
        """
        raise NotImplementedError

    def write_table(self, table: pa.Table) -> None:
        """Receive matches or timeouts as a table (see :meth:`cep.nfa.found.Found.table`);
        a sink of records gets them as records (see :func:`table_records`)."""
        self.write(table_records(table))

    def prepare(self, epoch: int) -> None:
        """Make the epoch's records durable but invisible."""

    def detach(self, epoch: int) -> Callable[[], None]:
        """At a checkpoint's barrier: take the epoch's records out of the sink and return
        what makes them durable (:meth:`prepare`'s work), to be run off the processing
        thread before the checkpoint is written.  By default the sink prepares at once
        and nothing is left to run later.

        >>> sink = ListSink()
        >>> finish = sink.detach(1); finish()
        """
        self.prepare(epoch)
        return _nothing

    def commit(self, epoch: int) -> None:
        """Make the epoch's records visible (the checkpoint covering them is complete)."""

    def recover(self, committed_epoch: int) -> None:
        """After a restart: commit pending epochs <= ``committed_epoch``, drop the others."""

    def close(self) -> None:
        """End of a run."""


def _nothing() -> None:
    """Nothing left to do."""


class CallbackSink(Sink):
    """Calls ``fn(record)`` for every record as it is produced (not transactional)."""

    def __init__(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        self.fn = fn

    def write(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.fn(r)


class ListSink(Sink):
    """Collects records in ``.records`` (tests, notebooks)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)


class FileSink(Sink):
    """Exactly-once files: ``<path>/part-<epoch>.<format>``, one per checkpoint epoch.

    ``format`` is ``jsonl``, ``parquet`` or ``csv``.  Parquet and CSV columns are typed
    (``start`` and ``end`` are int64, ``key`` is a string or a number, ...); nested values
    (a match's ``events``, a late ``event``, a composite key) are JSON text, which
    :meth:`read` decodes again for Parquet.
    """

    transactional = True
    columnar = True

    def __init__(self, path: str | os.PathLike[str], format: str | None = None) -> None:
        self.path = Path(path)
        fmt = format or (self.path.suffix[1:] if self.path.suffix else "jsonl")
        if fmt not in ("jsonl", "parquet", "csv"):
            raise CEPError(f"sink {self.path}: unknown format {fmt!r} (use jsonl, parquet or csv)")
        self.format = fmt
        if self.path.suffix:
            self.path = self.path.with_suffix("")
        self.path.mkdir(parents=True, exist_ok=True)
        #: what waits for the epoch's end: lists of records and tables, in arrival order
        self._pending: list[list[dict[str, Any]] | pa.Table] = []

    def _name(self, epoch: int) -> Path:
        return self.path / f"part-{epoch:09d}.{self.format}"

    def write(self, records: list[dict[str, Any]]) -> None:
        if records:
            self._pending.append(list(records))

    def write_table(self, table: pa.Table) -> None:
        if table.num_rows:
            self._pending.append(table)

    def prepare(self, epoch: int) -> None:
        self.detach(epoch)()

    def detach(self, epoch: int) -> Callable[[], None]:
        """The epoch's records leave the sink now; encoding them and writing the pending
        file is the returned function's work (a job runs it on its checkpoint writer)."""
        records, self._pending = self._pending, []

        def write() -> None:
            final = self._name(epoch)
            pending = final.with_name(final.name + ".pending")
            tmp = final.with_name(final.name + ".tmp")
            with paused_gc():  # a string or value per field of every record: many objects
                data = self._encode(records)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, pending)

        return write

    def commit(self, epoch: int) -> None:
        final = self._name(epoch)
        pending = final.with_name(final.name + ".pending")
        if pending.exists():
            os.replace(pending, final)

    def recover(self, committed_epoch: int) -> None:
        self._pending = []
        for p in self.path.glob("part-*.pending"):
            epoch = int(p.name.split("-")[1].split(".")[0])
            if epoch <= committed_epoch:
                os.replace(p, p.with_name(p.name[: -len(".pending")]))
            else:
                p.unlink()
        for p in self.path.glob("part-*.tmp"):
            p.unlink()
        for p in self.path.glob(f"part-*.{self.format}"):
            if int(p.name.split("-")[1].split(".")[0]) > committed_epoch:
                p.unlink()  # written by an attempt after the last checkpoint

    def files(self) -> list[Path]:
        """The committed files, in epoch order (pending ones are not listed).

        >>> sink = FileSink("committed/matches.jsonl")
        >>> sink.write([{"type": "match"}]); sink.prepare(1)
        >>> sink.files()
        []
        >>> sink.commit(1); [f.name for f in sink.files()]
        ['part-000000001.jsonl']
        """
        return sorted(self.path.glob(f"part-*.{self.format}"))

    def read(self) -> list[dict[str, Any]]:
        """Every committed record, in order."""
        out: list[dict[str, Any]] = []
        for p in self.files():
            out.extend(read_records(p))
        return out

    def _encode(self, pending: list[list[dict[str, Any]] | pa.Table]) -> bytes:
        import io

        table = _native(pending) if self.format == "parquet" else None
        if table is None:
            records = [r for part in pending for r in (
                part if isinstance(part, list) else table_records(part))]
            if self.format == "jsonl":
                return "".join(json_text(r) + "\n" for r in records).encode()
            table = _table(records)
        buf = io.BytesIO()
        if self.format == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, buf)
        else:
            import pyarrow.csv as pcsv

            if table.num_columns:
                pcsv.write_csv(table, buf)
        return buf.getvalue()


def _native(pending: list[list[dict[str, Any]] | pa.Table]) -> pa.Table | None:
    """The pending tables as one, when all are tables of schemas Arrow can join (a
    Parquet part file then holds the matched events as nested columns); else None."""
    import pyarrow as pa

    if not pending or not all(isinstance(p, pa.Table) for p in pending):
        return None
    tables: list[pa.Table] = pending  # type: ignore[assignment]
    json_columns = {t.schema.metadata.get(JSON_COLUMNS) if t.schema.metadata else None
                    for t in tables}
    if len(json_columns) > 1:
        return None  # a key column of JSON text in some tables only
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def table_records(table: pa.Table) -> list[dict[str, Any]]:
    """Records of a table of matches or timeouts (see :meth:`cep.nfa.found.Found.table`)
    or of a sink file: as :func:`~cep.runtime.job.match_record` makes them, JSON text
    columns decoded, each match's ``events`` holding the stages that took events.

    >>> import numpy as np
    >>> import pyarrow as pa
    >>> from cep.nfa.events import Keys
    >>> from cep.nfa.found import Found
    >>> found = Found(["a", "b"], kind=np.array([0]), keys=Keys.of_values(["x"]),
    ...               start=np.array([1]), end=np.array([1]), expiry=np.array([1]),
    ...               offsets=np.array([0, 1]), stage=np.array([0]), rows=pa.table({"v": [1]}))
    >>> table_records(found.table())
    [{'type': 'match', 'key': 'x', 'start': 1, 'end': 1, 'events': {'a': [{'v': 1}]}}]
    """
    import pyarrow as pa

    decode = json.loads((table.schema.metadata or {}).get(JSON_COLUMNS, b"[]"))
    # matched events as nested columns: a field per stage of the pattern, those of stages
    # that took nothing empty (or null); a match's record lists the stages that took events
    nested = "events" in table.column_names and pa.types.is_struct(table.schema.field(
        "events").type)
    with paused_gc():  # a dict per record and event: many objects
        rows = _dicts({name: (_stage_lists(table.column(name))
                              if name == "events" and nested else table.column(name).to_pylist())
                       for name in table.column_names}, table.num_rows)
        for row in rows:
            for c in decode:
                if row.get(c) is not None:
                    row[c] = json.loads(row[c])
            if nested:
                for c in ("timeout", "rule"):
                    if c in row and row[c] is None:
                        del row[c]
    return rows


def _dicts(columns: dict[str, list[Any]], n: int) -> list[dict[str, Any]]:
    """Rows as dicts from lists of values, column by column (Arrow makes a column's values
    far faster than a nested row's)."""
    names = list(columns)
    if not names:
        return [{} for _ in range(n)]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns.values(),
                                                                       strict=True)]


def _stage_lists(column: Any) -> list[dict[str, list[Any]]]:
    """A table's ``events`` column (a struct of one list of events per stage) as a dict
    per match of the stages that took events, the events as dicts."""
    import pyarrow as pa

    events = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    out: list[dict[str, list[Any]]] = [{} for _ in range(len(events))]
    for i, field in enumerate(events.type):
        taken = events.field(i)
        lengths = taken.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
        ends = np.cumsum(lengths).tolist()
        flat = taken.flatten()
        if pa.types.is_struct(flat.type):
            values = _dicts({f.name: flat.field(j).to_pylist()
                             for j, f in enumerate(flat.type)}, len(flat))
        else:
            values = flat.to_pylist()
        start = 0
        for record, end in zip(out, ends, strict=True):
            if end > start:
                record[field.name] = values[start:end]
            start = end
    return out


def _table(records: list[dict[str, Any]]) -> pa.Table:
    """Records as an Arrow table: a typed column per field (int64, double, bool, string)
    where its values agree on a type; JSON text where they are nested or of mixed types,
    listed under :data:`JSON_COLUMNS` so :func:`read_records` can decode them."""
    import pyarrow as pa

    arrays: dict[str, pa.Array] = {}
    as_json: list[str] = []
    for c in sorted({k for r in records for k in r}):
        values = [r.get(c) for r in records]
        if not any(isinstance(v, (dict, list, tuple)) for v in values):
            try:
                arrays[c] = pa.array([_json_default(v) if _foreign(v) else v for v in values])
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                pass  # mixed types (say 1 and "a"): JSON keeps each value's own type
        as_json.append(c)
        arrays[c] = pa.array([None if v is None else json_text(v) for v in values], pa.string())
    return pa.table(arrays).replace_schema_metadata({JSON_COLUMNS: json.dumps(as_json).encode()})


def _foreign(value: Any) -> bool:
    """Is ``value`` of a kind JSON has no type for (to_json turns it into one)?"""
    return not (value is None or isinstance(value, (str, int, float, bool)))


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of one committed sink file, as written for JSONL and Parquet; from CSV,
    nested values stay JSON text and column types are what pyarrow infers."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return table_records(pq.read_table(path))
    import pyarrow.csv as pcsv

    if path.stat().st_size == 0:
        return []
    return pcsv.read_csv(path).to_pylist()
