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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cep.errors import CEPError
from cep.gcpause import paused_gc
from cep.nfa.found import Found
from cep.runtime.records import (
    JSON_COLUMNS,
    json_columns,
    json_line,
    records_table,
    table_rows,
)
from cep.runtime.tables import SIDE, as_json_text, match_table, pooled, write_parquet

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class MatchBatch:
    """Matches or timeouts of one rule as its engine found them (columns, see
    :class:`~cep.nfa.found.Found`), with the key and the stages their table names: made
    into the table (:func:`~cep.runtime.tables.match_table`) when a sink asks for it, a
    file sink on the thread that writes its checkpoint epoch."""

    found: Found
    key: Any
    stages: list[str]
    #: the rule's measures (a rule of a rule set may have some), a column each
    measures: Mapping[str, Any] | None = None

    @cached_property
    def table(self) -> pa.Table:
        """The rows of the output schema (see :mod:`cep.runtime.tables`), made once for
        every sink that asks."""
        return match_table(self.found, key=self.key, stages=self.stages,
                           measures=self.measures, any_events=True, like=self.found.like,
                           lenient=True)

    @property
    def layout(self) -> tuple[Any, ...]:
        """What batches that make one table share: the rule and version, the key and the
        stages."""
        return (self.found.rule, self.found.version, repr(self.key), tuple(self.stages))


def _tables(pending: list[Any]) -> list[Any]:
    """The pending parts with the match batches of each rule (and layout) made one table,
    where the rule's first batch was: a table per rule and epoch, not per batch, their
    events pooled (see :func:`~cep.runtime.tables.pooled`).  Rules of the same columns
    whose tables come one after another (a job's variants of one pattern) are made one
    table, with the same rows in the same order: a table costs a few milliseconds of
    calls whatever its size, and a job of a hundred rules makes hundreds per epoch."""
    batches = [part for part in pending if isinstance(part, MatchBatch)]
    shared = dict(zip(map(id, batches), pooled([b.found for b in batches]), strict=True))
    groups: dict[tuple[Any, ...], list[MatchBatch]] = {}
    for part in batches:
        groups.setdefault(part.layout, []).append(part)
    out: list[Any] = []
    for part in pending:
        if not isinstance(part, MatchBatch):
            out.append(part)
        elif (run := groups.pop(part.layout, None)) is not None:
            run = [MatchBatch(shared[id(b)], b.key, b.stages, b.measures) for b in run]
            if out and isinstance(out[-1], _Runs) and _joinable(out[-1].runs[0][0], run[0]):
                out[-1].runs.append(run)
            else:
                out.append(_Runs([run]))
    return [_table(part.runs) if isinstance(part, _Runs) else part for part in out]


@dataclass
class _Runs:
    """Rules' runs of match batches that make one table (see :func:`_tables`)."""

    runs: list[list[MatchBatch]]


def _joinable(a: MatchBatch, b: MatchBatch) -> bool:
    """Do the rules' tables have the same columns (one table can hold both)?"""
    return (not a.measures and not b.measures and repr(a.key) == repr(b.key)
            and a.stages == b.stages and (a.found.rule is None) == (b.found.rule is None)
            and (a.found.version is None) == (b.found.version is None))


def _table(runs: list[list[MatchBatch]]) -> Any:
    """One table of the rules' runs of batches, one run after another, each row naming
    its rule (and version)."""
    import pyarrow as pa

    first = runs[0][0]
    parts = [[b.found for b in run] for run in runs]
    found = Found.concat([f for part in parts for f in part])
    table = MatchBatch(found, first.key, first.stages, first.measures).table
    if len(runs) == 1 or found.rule is not None and all(
            run[0].found.version == found.version for run in runs):
        return table
    sizes = np.array([sum(len(f) for f in part) for part in parts], np.int64)
    which = pa.array(np.repeat(np.arange(len(runs), dtype=np.int32), sizes))
    at = table.column_names.index("kind") + 1
    for name, kind, values in (("rule", pa.string(), [run[0].found.rule for run in runs]),
                               ("version", pa.int64(), [run[0].found.version for run in runs])):
        if values[0] is None:
            continue
        column = pa.array(values, kind).take(which)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, column)
        else:
            table = table.add_column(at, name, column)
        at += 1
    return table


class Sink:
    """Receives records (dicts); transactional sinks commit per checkpoint epoch."""

    transactional = False
    #: may the work :meth:`detach` returns run while an earlier epoch's is still running
    #: (it writes files of its own epoch only)?  Else it runs after the earlier epoch's
    #: checkpoint is written.
    overlapping = False

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
        """Receive matches or timeouts as a table (see :func:`cep.runtime.tables.match_table`);
        a sink of records gets its rows as records (see :func:`cep.runtime.records.table_rows`)."""
        self.write(table_rows(table))

    def write_matches(self, batch: MatchBatch) -> None:
        """Receive matches or timeouts as the engines found them; by default as a table
        (:meth:`write_table`)."""
        self.write_table(batch.table)

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


def _written_format(path: Path) -> str | None:
    """The format of the part files already in ``path`` when they have one (a directory a
    job wrote, opened again by its name alone to read it)."""
    formats = {p.name.rsplit(".", 1)[-1] for p in path.glob("part-*.*")
               if not p.name.endswith((".pending", ".tmp"))}
    return formats.pop() if len(formats) == 1 else None


class FileSink(Sink):
    """Exactly-once files: ``<path>/part-<epoch>.<format>``, one per checkpoint epoch
    that has records.

    ``format`` is ``jsonl``, ``parquet`` or ``csv`` (by default the path's suffix, else
    the format of the part files already there, else ``jsonl``); the records are rows of the output
    schema (:mod:`cep.runtime.tables`).  Parquet and CSV columns are typed (``start`` and
    ``end`` are int64, a key column a string or a number, ...); in Parquet a stage is a
    list of structs, in CSV JSON text; a side output's ``event`` is JSON text, which
    :meth:`read` decodes again for Parquet.  In Parquet, rules whose rows have other
    columns (other stages, another key) go to files of their own in the epoch
    (``part-<epoch>.1.parquet``, ...): one file holding all would give every row every
    rule's columns, mostly null, and cost several times as much to write.
    """

    transactional = True
    overlapping = True

    def __init__(self, path: str | os.PathLike[str], format: str | None = None) -> None:
        self.path = Path(path)
        fmt = format or (self.path.suffix[1:] if self.path.suffix else
                         _written_format(self.path) or "jsonl")
        if fmt not in ("jsonl", "parquet", "csv"):
            raise CEPError(f"sink {self.path}: unknown format {fmt!r} (use jsonl, parquet or csv)")
        self.format = fmt
        if self.path.suffix:
            self.path = self.path.with_suffix("")
        self.path.mkdir(parents=True, exist_ok=True)
        #: what waits for the epoch's end: lists of records and tables, in arrival order
        self._pending: list[list[dict[str, Any]] | pa.Table | MatchBatch] = []

    def _name(self, epoch: int, index: int = 0) -> Path:
        """The ``index``-th file of ``epoch`` (Parquet epochs can have several)."""
        more = f".{index}" if index else ""
        return self.path / f"part-{epoch:09d}{more}.{self.format}"

    def write(self, records: list[dict[str, Any]]) -> None:
        if records:
            self._pending.append(list(records))

    def write_table(self, table: pa.Table) -> None:
        if table.num_rows:
            self._pending.append(table)

    def write_matches(self, batch: MatchBatch) -> None:
        if len(batch.found):
            self._pending.append(batch)  # a table at the epoch's end, off the job's thread

    def prepare(self, epoch: int) -> None:
        self.detach(epoch)()

    def detach(self, epoch: int) -> Callable[[], None]:
        """The epoch's records leave the sink now; encoding them and writing the pending
        file is the returned function's work (a job runs it on its checkpoint writer)."""
        records, self._pending = self._pending, []

        def write() -> None:
            if not records:  # an epoch without records has no file (and costs no fsync)
                return
            with paused_gc():  # a string or value per field of every record: many objects
                files = self._encode_files(records)
            for index, data in enumerate(files):
                final = self._name(epoch, index)
                pending = final.with_name(final.name + ".pending")
                tmp = final.with_name(final.name + ".tmp")
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, pending)

        return write

    def commit(self, epoch: int) -> None:
        for pending in self.path.glob(f"part-{epoch:09d}.*.pending"):
            os.replace(pending, pending.with_name(pending.name[: -len(".pending")]))

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
        return sorted(self.path.glob(f"part-*.{self.format}"), key=_part_order)

    def read(self) -> list[dict[str, Any]]:
        """Every committed record, in order."""
        out: list[dict[str, Any]] = []
        for p in self.files():
            out.extend(read_records(p))
        return out

    def _encode_files(self, pending: list[Any]) -> list[bytes]:
        """The epoch's files: one, or for Parquet one per set of columns the rows have."""
        parts = _tables(pending)
        groups = _by_columns(parts) if self.format == "parquet" else []
        if len(groups) < 2:
            return [self._encode(parts)]
        import io

        out = []
        for group in groups:
            buf = io.BytesIO()
            table = _joined(group)
            write_parquet(table, buf, **_parquet_options(table))
            out.append(buf.getvalue())
        return out

    def _encode(self, pending: list[Any]) -> bytes:
        """One file of the parts (:func:`_tables` made the match batches tables)."""
        import io

        if self.format == "jsonl":
            return "".join(json_line(r) + "\n" for part in pending for r in (
                part if isinstance(part, list) else table_rows(part))).encode()
        table = _joined(pending)
        buf = io.BytesIO()
        if self.format == "parquet":
            write_parquet(table, buf, **_parquet_options(table))
        else:
            import pyarrow.csv as pcsv

            if table.num_columns:
                pcsv.write_csv(_flat(table), buf)
        return buf.getvalue()


def _parquet_options(table: Any) -> dict[str, Any]:
    """How Parquet writes an output table: dictionaries and statistics for the flat
    columns (key, kind, rule, times...), not for the lists of events.  Their dictionaries
    cost a quarter of the writing for 7% smaller files (timeouts of four rules over 1M
    events: 63 -> 48 ms, 4.7 -> 5.0 MB); their statistics (a minimum and maximum per
    field of the input, per page) a tenth, and make the files 3% larger (an epoch of the
    100-rule benchmark's matches: 62 -> 56 ms).

    >>> import pyarrow as pa
    >>> _parquet_options(pa.table({"k": ["a"], "e": [[{"v": 1}]]}))
    {'use_dictionary': ['k'], 'write_statistics': ['k']}
    """
    import pyarrow as pa

    flat = [f.name for f in table.schema if not pa.types.is_nested(f.type)]
    return {"use_dictionary": flat, "write_statistics": flat}


def _part_order(path: Path) -> tuple[int, int]:
    """A part file's epoch and its index within the epoch (``part-000000003.2.parquet``)."""
    head, *more = path.name.split(".")
    return int(head.split("-")[1]), int(more[0]) if len(more) > 1 else 0


def _by_columns(parts: list[Any]) -> list[list[Any]]:
    """The epoch's tables and records grouped by the columns they hold, in order of each
    group's first part: what one Parquet file of the epoch holds."""
    groups: dict[tuple[str, ...], list[Any]] = {}
    for part in parts:
        names = (tuple(sorted({k for r in part for k in r})) if isinstance(part, list)
                 else tuple(sorted(part.column_names)))
        groups.setdefault(names, []).append(part)
    return list(groups.values())


def _joined(pending: list[list[dict[str, Any]] | pa.Table]) -> pa.Table:
    """The pending tables and records as one table: matches keep their stages as nested
    columns; a column JSON text in one part (see cep.runtime.records) is JSON text in all."""
    import pyarrow as pa

    tables = [records_table(p) if isinstance(p, list) else p for p in pending]
    as_json = sorted({c for t in tables for c in json_columns(t)})
    if as_json:
        tables = [as_json_text(t, as_json) for t in tables]
    try:
        table = pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        # columns of the same name and no common type: every part's records, as JSON allows
        table = records_table([r for t in tables for r in table_rows(t)])
        as_json = json_columns(table)
    # the side outputs' columns last, as in every output table (cep.runtime.tables)
    order = [c for c in table.column_names if c not in SIDE] + [
        c for c in SIDE if c in table.column_names]
    return table.select(order).replace_schema_metadata(
        {JSON_COLUMNS: json.dumps(as_json).encode()})


def _flat(table: pa.Table) -> pa.Table:
    """``table`` with its nested columns (a match's stages) as JSON text, for CSV; in a
    column of JSON text, a text value as the text itself, not a JSON string (CSV has no
    types: a key "c1" among keys 1 is written c1, as in a part file of text keys alone,
    and a line that was not JSON as it was, so a part file's CSV does not depend on
    which records share it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    as_json = json_columns(table)
    nested = [f.name for f in table.schema if pa.types.is_nested(f.type)]
    table = as_json_text(table, nested) if nested else table
    for name in as_json:
        column = table.column(name)
        quoted = pc.starts_with(column, '"').to_numpy(zero_copy_only=False)
        if quoted.any():
            values = column.to_pylist()
            for i in np.flatnonzero(quoted).tolist():
                values[i] = json.loads(values[i])
            table = table.set_column(table.column_names.index(name), name,
                                     pa.array(values, pa.string()))
    return table


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of one committed sink file, as written for JSONL and Parquet; from CSV,
    nested values stay JSON text and column types are what pyarrow infers."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return table_rows(pq.read_table(path))
    import pyarrow.csv as pcsv

    if path.stat().st_size == 0:
        return []
    from cep.runtime.files import csv_convert_options, integers_beyond_int64

    # as pyarrow writes them: a null is an empty field, an empty text a quoted ""
    table = pcsv.read_csv(path, convert_options=csv_convert_options())
    wide = integers_beyond_int64(table, {})  # 20-digit keys as text, not one float
    if wide:
        table = pcsv.read_csv(path, convert_options=csv_convert_options(wide))
    return table.to_pylist()
