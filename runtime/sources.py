"""Sources: where events come from, in batches, with offsets a checkpoint can resume from.

Every source has one or more partitions; each partition yields batches of
``(event, position)`` and knows its offset (how many events it has emitted),
so a restarted job skips exactly what the checkpoint covered.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

from cep.errors import InputError
from cep.gcpause import paused_gc

# the file layer's readers of bad records, shared: one reason for one fault everywhere
from cep.runtime.files import (
    _BOM,
    MAX_NESTING,
    _csv_bool,
    _csv_parse_options,
    _malformed,
    _nested_deeper,
    _parquet_file,
    _unparsable,
    unparsable_rows_key,
)
from cep.runtime.files import (
    Malformed as Malformed,  # a name of this module too: sources yield them
)


@dataclass
class Chunk:
    """A batch of events from one partition, their positions (``<partition>:<row>``, as
    dead letters and late events report them) and the partition's offset after it.

    >>> next(IterableSource(["a", "b"]).read({}))
    Chunk(partition='memory-0', events=['a', 'b'], positions=['memory-0:0', 'memory-0:1'], end_offset=2, stream=None, other_offsets=None)
    """

    partition: str
    events: list[Any]
    positions: list[str]
    end_offset: int
    #: the partition whose watermark these events advance (default: ``partition``)
    stream: str | None = None
    #: further offsets the chunk moves, by name (a CSV file's unparsable rows, counted
    #: apart from its rows: see :func:`unparsable_rows_key`)
    other_offsets: dict[str, int] | None = None


class Source:
    """A set of partitions read in turn, batch by batch."""

    bounded = True

    def partitions(self) -> list[str]:
        """The names of the partitions (offsets in a checkpoint are kept per name).

        >>> IterableSource([1, 2], [3]).partitions()
        ['memory-0', 'memory-1']
        """
        raise NotImplementedError

    def streams(self) -> list[str]:
        """The partitions that each have a watermark (by default every partition)."""
        return self.partitions()

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        """Chunks from every partition, starting after ``offsets``; ends when bounded input ends."""
        raise NotImplementedError


class IterableSource(Source):
    """Events from memory: one partition per iterable."""

    def __init__(self, *iterables: Iterable[Any], batch_size: int = 1024) -> None:
        self._data = [list(it) for it in iterables] or [[]]
        self.batch_size = _positive_batch(batch_size)

    def partitions(self) -> list[str]:
        return [f"memory-{i}" for i in range(len(self._data))]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        cursors = {p: offsets.get(p, 0) for p in self.partitions()}
        live = True
        while live:
            live = False
            for p, data in zip(self.partitions(), self._data, strict=True):
                start = cursors[p]
                if start >= len(data):
                    continue
                live = True
                stop = min(start + self.batch_size, len(data))
                yield Chunk(p, data[start:stop], [f"{p}:{i}" for i in range(start, stop)], stop)
                cursors[p] = stop


class FileSource(Source):
    """Parquet, CSV and JSONL files (or directories of them), also ``.gz`` or ``.zst``
    compressed; one partition per file.

    Files are read in batches with pyarrow; the offset of a partition is the
    number of rows emitted from it.  A JSONL line that cannot be read (not UTF-8, not
    JSON, nested too deeply, not an object) and a CSV row with the wrong number of
    fields are :class:`Malformed` records: dead letters, and the file goes on.
    """

    def __init__(self, *paths: str | os.PathLike[str], batch_size: int = 65536) -> None:
        self.files = _list_files(paths)
        self.batch_size = _positive_batch(batch_size)

    def partitions(self) -> list[str]:
        return [str(f) for f in self.files]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        iters = {str(f): self._batches(f, offsets) for f in self.files}
        while iters:
            for name in list(iters):
                chunk = next(iters[name], None)
                if chunk is None:
                    del iters[name]
                else:
                    yield chunk

    def _batches(self, path: Path, offsets: dict[str, int]) -> Iterator[Chunk]:
        skip = offsets.get(str(path), 0)
        if _format(path) == "json":
            yield from _json_lines(path, skip, self.batch_size)
            return
        if _format(path) == "csv":
            yield from _csv_chunks(path, skip, offsets.get(unparsable_rows_key(path), 0),
                                   self.batch_size)
            return
        offset = 0
        for batch in _record_batches(path, self.batch_size):
            n = batch.num_rows
            if offset + n <= skip:
                offset += n
                continue
            start = max(0, skip - offset)
            first = offset + start
            offset += n
            with paused_gc():  # a dict per event: no cycles, many objects
                rows = batch.slice(start).to_pylist()
                positions = [f"{path}:{i}" for i in range(first, first + len(rows))]
            yield Chunk(str(path), rows, positions, offset)


class DirectorySource(FileSource):
    """A directory watched for new files (streaming); files are read once, in name order."""

    bounded = False

    def __init__(self, path: str | os.PathLike[str], *, poll_seconds: float = 1.0,
                 batch_size: int = 65536, stop_after_idle: float | None = None) -> None:
        self.directory = Path(path)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.batch_size = _positive_batch(batch_size)
        self.poll_seconds = poll_seconds
        self.stop_after_idle = stop_after_idle
        self.files = []

    def partitions(self) -> list[str]:
        return [str(f) for f in sorted(self.directory.iterdir()) if _readable(f)]

    def streams(self) -> list[str]:
        return [str(self.directory)]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        done: set[str] = set()
        idle_since = time.monotonic()
        while True:
            fresh = [Path(p) for p in self.partitions() if p not in done]
            for f in fresh:
                for chunk in self._batches(f, offsets):
                    # files arrive one after another: one stream, one watermark
                    chunk.stream = str(self.directory)
                    yield chunk
                done.add(str(f))
                idle_since = time.monotonic()
            if self.stop_after_idle is not None and time.monotonic() - idle_since >= self.stop_after_idle:
                return
            time.sleep(self.poll_seconds)


#: the sort key of a row without a usable time: first (it becomes a dead letter at once)
_UNUSABLE = -(2**63)


class SortedFileSource(Source):
    """Bounded history read whole, sorted by event time and replayed in that order.

    For files that are not in time order (a shuffled export, files that overlap in
    time): read through a :class:`FileSource`, most of their events would arrive
    behind the watermark and be late.  This source reads every file first (Parquet and
    CSV as Arrow tables, JSONL as Python objects), sorts the rows by the ``time`` field
    (integers in ``time_unit``, as :meth:`Job.timestamps <runtime.Job.timestamps>` reads
    them; datetimes; ISO-8601 text), stably, so rows with equal times keep their order
    in the input (files in the order given, rows in file order), and emits them in
    batches from one partition.  It needs memory for the whole input.  Rows whose time
    cannot be read come first and become dead letters; positions still name the file
    and row each event came from.  Reading the same files again gives the same order,
    so a checkpoint's offset resumes it.

    >>> import json
    >>> rows = [{"ts": 3000, "v": "c"}, {"ts": 1000, "v": "a"}, {"ts": 2000, "v": "b"},
    ...         {"ts": 1000, "v": "a2"}]
    >>> _ = Path("shuffled.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> chunk = next(SortedFileSource("shuffled.jsonl", time="ts").read({}))
    >>> [e["v"] for e in chunk.events], chunk.positions[:2]
    (['a', 'a2', 'b', 'c'], ['shuffled.jsonl:1', 'shuffled.jsonl:3'])
    """

    def __init__(self, *paths: str | os.PathLike[str], time: str, time_unit: str | None = None,
                 batch_size: int = 65536) -> None:
        import hashlib

        from cep.times import check_unit

        if not isinstance(time, str):
            raise InputError(f"SortedFileSource sorts by a time field: give its name, not "
                             f"{type(time).__name__}")
        self.files = _list_files(paths)
        self.time = time
        self.time_unit = check_unit(time_unit)
        self.batch_size = _positive_batch(batch_size)
        names = "\0".join(str(f) for f in self.files)
        self._name = f"sorted:{hashlib.sha256(names.encode()).hexdigest()[:16]}"

    def partitions(self) -> list[str]:
        return [self._name]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        import numpy as np
        import pyarrow as pa

        segments, segment_of, row_of = self._load()
        origin = self._where
        for lo in range(offsets.get(self._name, 0), len(segment_of), self.batch_size):
            hi = min(lo + self.batch_size, len(segment_of))
            segs, rows = segment_of[lo:hi], row_of[lo:hi]
            events: list[Any] = [None] * (hi - lo)
            with paused_gc():  # a dict per event: no cycles, many objects
                for s in np.unique(segs).tolist():
                    where = np.flatnonzero(segs == s)
                    data, picked = segments[s], rows[where]
                    values = ([data[i] for i in picked.tolist()] if isinstance(data, list)
                              else data.take(pa.array(picked)).to_pylist())
                    if len(where) == len(events):
                        events = values
                    else:
                        for j, v in zip(where.tolist(), values, strict=True):
                            events[j] = v
                positions = [f"{origin[s][0]}:{r if origin[s][1] is None else origin[s][1][r]}"
                             for s, r in zip(segs.tolist(), rows.tolist(), strict=True)]
            yield Chunk(self._name, events, positions, hi)

    def _load(self) -> tuple[list[Any], Any, Any]:
        """Every file's rows (segments), and for each row in time order its segment and row."""
        import numpy as np

        segments: list[Any] = []
        keys = []
        #: each segment's file and, when its rows are not the file's rows, their labels
        self._where: list[tuple[Path, list[str] | None]] = []
        for f in self.files:
            if _format(f) == "json":
                events: list[Any] = []
                for chunk in _json_lines(f, 0, 65536):
                    events.extend(chunk.events)
                segments.append(events)
                keys.append(self._keys([e.get(self.time) if isinstance(e, dict) else None
                                        for e in events]) if events else np.empty(0, np.int64))
                self._where.append((f, None))
            else:
                table, unparsable = _read_table(f)
                segments.append(table)
                keys.append(self._table_keys(table))
                self._where.append((f, None))
                if unparsable:  # rows with the wrong number of fields: dead letters, first
                    segments.append([_unparsable(row) for row in unparsable])
                    keys.append(np.full(len(unparsable), _UNUSABLE, dtype=np.int64))
                    self._where.append((f, [f"line {row.number}" for row in unparsable]))
        lengths = [len(k) for k in keys]
        key = np.concatenate(keys) if keys else np.empty(0, np.int64)
        order = np.argsort(key, kind="stable")  # ties keep arrival order
        segment_of = np.repeat(np.arange(len(segments), dtype=np.int32), lengths)[order]
        row_of = np.concatenate([np.arange(n, dtype=np.int64) for n in lengths])[order]
        return segments, segment_of, row_of

    def _keys(self, values: Any) -> Any:
        """Epoch milliseconds of a column of times (``_UNUSABLE`` where it is no time)."""
        import numpy as np

        from cep.time_columns import times_of_column

        column = times_of_column(values, self.time_unit, self.time)
        return np.where(column.bad, _UNUSABLE, column.millis).astype(np.int64)

    def _table_keys(self, table: Any) -> Any:
        import numpy as np

        if self.time not in table.column_names:
            return np.full(table.num_rows, _UNUSABLE, dtype=np.int64)
        return self._keys(table.column(self.time))


def _read_table(path: Path) -> tuple[Any, list[Any]]:
    """A whole Parquet or CSV file (optionally compressed) as one Arrow table, and the CSV
    rows that could not be parsed (pyarrow's ``InvalidRow``, in file order)."""
    unparsable: list[Any] = []
    try:
        if _format(path) == "parquet":
            return _parquet_file(path).read(), unparsable
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(str(path), parse_options=_csv_parse_options(unparsable))
        if unparsable:  # read in parallel, rows have no line numbers: read again in turn
            unparsable = []
            table = pcsv.read_csv(str(path), read_options=pcsv.ReadOptions(use_threads=False),
                                  parse_options=_csv_parse_options(unparsable))
        return table, unparsable
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err


#: bytes pyarrow reads of a CSV file at a time; it infers column types from the first block
_CSV_BLOCK = 1 << 22


def _csv_chunks(path: Path, skip: int, skip_unparsable: int, batch_size: int) -> Iterator[Chunk]:
    """A CSV file in chunks of at most ``batch_size`` rows, after the first ``skip`` rows.

    A row with the wrong number of fields is a :class:`Malformed` record (position
    ``<file>:line <n>``), counted under :func:`unparsable_rows_key` apart from the rows:
    the first ``skip_unparsable`` of them were emitted before.  pyarrow reads a column
    as the type its first block suggests; when a later value is not of that type (text
    among numbers), the file is read again from the start with that column as text,
    each value converted back to the type where it can be (so ``"x"`` stays text, and
    a rule that needs a number makes that row a dead letter), skipping what was emitted.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    name, bad_key = str(path), unparsable_rows_key(path)
    as_text: dict[str, Any] = {}  # column -> the type first inferred, read as text since
    while True:
        unparsable: list[Any] = []  # in file order: blocks are parsed one after another
        reader = None
        try:
            reader = pcsv.open_csv(
                name, read_options=pcsv.ReadOptions(block_size=_CSV_BLOCK, use_threads=False),
                parse_options=_csv_parse_options(unparsable),
                convert_options=pcsv.ConvertOptions(
                    column_types={c: pa.string() for c in as_text}))
            offset = 0  # rows of the file passed so far
            for batch in reader:
                for start in range(0, batch.num_rows, batch_size):
                    part = batch.slice(start, batch_size)
                    first, offset = offset, offset + part.num_rows
                    fresh = unparsable[skip_unparsable:]
                    if offset <= skip and not fresh:
                        continue
                    with paused_gc():  # a dict per event: no cycles, many objects
                        rows = part.slice(max(0, skip - first)).to_pylist() if offset > skip else []
                        if as_text:
                            _convert_text(rows, as_text)
                        positions = [f"{path}:{i}" for i in range(max(first, skip), offset)]
                    if fresh:
                        rows += [_unparsable(row) for row in fresh]
                        positions += [f"{path}:line {row.number}" for row in fresh]
                        skip_unparsable = len(unparsable)
                    skip = max(skip, offset)
                    yield Chunk(name, rows, positions, skip, other_offsets={bad_key: skip_unparsable})
            fresh = unparsable[skip_unparsable:]
            if fresh:
                yield Chunk(name, [_unparsable(row) for row in fresh],
                            [f"{path}:line {row.number}" for row in fresh], skip,
                            other_offsets={bad_key: len(unparsable)})
            return
        except pa.ArrowInvalid as err:
            column = re.search(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error", str(err))
            names = reader.schema.names if reader is not None else []
            if column is None or int(column.group(1)) >= len(names) or (
                    names[int(column.group(1))] in as_text):
                raise InputError(f"{path}: cannot read: {err}") from err
            field = reader.schema.field(int(column.group(1)))  # type: ignore[union-attr]
            as_text[field.name] = field.type
        except InputError:
            raise
        except Exception as err:
            raise InputError(f"{path}: cannot read: {err}") from err


def _convert_text(rows: list[dict[str, Any]], as_text: dict[str, Any]) -> None:
    """Values of columns read as text back to the type pyarrow first inferred for them,
    where they have one (a value that is not of that type stays text)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    nulls = set(pcsv.ConvertOptions().null_values)
    convert: dict[str, Callable[[str], Any]] = {}
    for column, kind in as_text.items():
        if pa.types.is_integer(kind):
            convert[column] = int
        elif pa.types.is_floating(kind):
            convert[column] = float
        elif pa.types.is_boolean(kind):
            convert[column] = _csv_bool
    for row in rows:
        for column in as_text:
            value = row.get(column)
            if value is None or value in nulls:
                row[column] = None
            elif column in convert:
                try:
                    row[column] = convert[column](value)
                except ValueError:
                    pass


def _json_lines(path: Path, skip: int, batch_size: int) -> Iterator[Chunk]:
    """JSONL line by line: one bad line is one malformed record, not a failed file.

    A record is a line that is not blank; the offset counts records, good or bad, so a
    checkpoint taken after a bad line resumes after it.  A line that is not UTF-8, not
    JSON, nested too deeply or not a JSON object is a :class:`Malformed` record whose
    reason names its line.  A UTF-8 byte-order mark at the start of the file is skipped.

    >>> _ = Path("bad.jsonl").write_bytes(b'\\xef\\xbb\\xbf{"v": 1}\\n[1, 2]\\n\\n{"v": \\xff}\\n{"v": 4}\\n')
    >>> chunk = next(_json_lines(Path("bad.jsonl"), 0, 100))
    >>> [e if isinstance(e, dict) else e.reason for e in chunk.events]
    [{'v': 1}, 'a JSON array, not an object (line 2)', 'not UTF-8: byte 0xff at column 7 (line 4)', {'v': 4}]
    >>> chunk.positions[-1], chunk.end_offset
    ('bad.jsonl:3', 4)
    """
    import json

    loads = json.loads
    with _open_binary(path) as f:
        first = f.readline()
        lines = chain([first[len(_BOM):] if first.startswith(_BOM) else first], f)
        records = ((number, line) for number, line in enumerate(lines, 1) if line.strip())
        n = sum(1 for _ in islice(records, skip))
        prefix = f"{path}:"
        while block := list(islice(records, batch_size)):
            events: list[Any] = []
            with paused_gc():  # a dict per event: no cycles, many objects
                for number, line in block:
                    try:
                        value = loads(line.decode())
                    except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError
                        value = _malformed(line, number)
                    else:
                        # MAX_NESTING levels take twice as many bytes: short lines pass at once
                        if type(value) is not dict or (len(line) > 2 * MAX_NESTING and (
                                _nested_deeper(line, value))):
                            value = _malformed(line, number)
                    events.append(value)
                # the record index, as for the other formats
                positions = [f"{prefix}{i}" for i in range(n, n + len(block))]
            n += len(block)
            yield Chunk(str(path), events, positions, n)


#: compressed files a source reads (decompressed by pyarrow as they are read)
COMPRESSED = (".gz", ".zst")


def _format(path: Path) -> str | None:
    """``parquet``, ``csv`` or ``json`` (JSON lines) for the files a source reads, else None:
    ``.parquet``/``.pq``, ``.csv``, ``.jsonl``/``.ndjson``, each optionally ``.gz``/``.zst``.

    >>> _format(Path("day1.csv.zst")), _format(Path("notes.txt")), _format(Path("x.json"))
    ('csv', None, None)
    """
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    return {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "json",
            ".ndjson": "json"}.get(last)


def _readable(path: Path) -> bool:
    return path.is_file() and _format(path) is not None


def _list_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files named: each path as given, a directory's readable files in name order."""
    files: list[Path] = []
    given = [Path(p) for p in paths]
    for path in given:
        if path.is_dir():
            files.extend(sorted(f for f in path.iterdir() if _readable(f)))
        elif path.exists():
            files.append(path)
        else:
            raise InputError(f"{path}: no such file or directory")
    if not files:
        raise InputError(f"no Parquet, CSV or JSONL files in {[str(p) for p in given]}")
    return files


def _compressed(path: Path) -> bool:
    return path.suffix.lower() in COMPRESSED


def _open_binary(path: Path) -> Any:
    """A binary file object over ``path`` that iterates by lines, decompressing
    ``.gz``/``.zst`` on the fly."""
    if not _compressed(path):
        return open(path, "rb")
    import io

    import pyarrow as pa

    return io.BufferedReader(pa.input_stream(str(path), compression="detect"))


def _record_batches(path: Path, batch_size: int) -> Iterator[Any]:
    """Record batches of at most ``batch_size`` rows, whatever the reader's own block size."""
    for batch in _reader_batches(path, batch_size):
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)


def _reader_batches(path: Path, batch_size: int) -> Iterator[Any]:
    fmt = _format(path)
    try:
        if fmt == "parquet":
            yield from _parquet_file(path).iter_batches(batch_size=batch_size)
        else:  # CSV and JSONL have readers of their own (_csv_chunks, _json_lines)
            raise InputError(f"{path}: unknown file type {path.suffix!r} (use .parquet, .csv or "
                             ".jsonl, optionally .gz or .zst compressed)")
    except InputError:
        raise
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err


def _positive_batch(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of events >= 1, got {batch_size!r}")
    return batch_size
