"""Sources: where events come from, in columnar batches, with offsets a checkpoint can resume from.

Every source has one or more partitions; each partition yields :class:`Chunk` batches
(Arrow tables for files and in-memory tables or frames, Python objects for lists of
them) and knows its offset (how many records it has emitted), so a restarted job skips
exactly what the checkpoint covered.  Files are read by :mod:`cep.runtime.files`: a
record that cannot be read at all travels in the chunk as a :class:`Malformed` record,
a dead letter, and the rest of its batch stays columns.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cep.errors import InputError
from cep.nfa.events import (
    checked_frame,
    count_rows,
    object_array,
    row_objects,
    take_rows,
    without_views,
)
from cep.nfa.stray_text import stray_text
from cep.runtime.files import (
    FileBatch,
    file_format,
    list_files,
    read_batches,
    read_file,
    unparsable_rows_key,
    unreadable_key,
)
from cep.runtime.files import (
    Malformed as Malformed,  # a name of this module too: chunks carry them
)

__all__ = ["Chunk", "DirectorySource", "FileSource", "IterableSource", "Malformed",
           "SortedFileSource", "Source", "unparsable_rows_key"]


@dataclass
class Chunk:
    """A batch of records from one partition: the good rows as columns (a pyarrow Table, a
    pandas DataFrame) or Python objects, where each came from, the records that could not
    be read, and the partition's offset after the batch.

    A row's position (as dead letters and late events report it) is ``<origin>:<n>``: its
    origin (the partition, or one of ``origins`` picked by ``origin_of``) and its number
    there (``row_numbers``).

    >>> chunk = next(IterableSource(["a", "b"]).read({}))
    >>> chunk.events, chunk.positions, chunk.end_offset
    (['a', 'b'], ['memory-0:0', 'memory-0:1'], 2)
    """

    partition: str
    #: the good rows: a pyarrow Table, a pandas DataFrame, or a list/ndarray of objects
    rows: Any
    #: int64, one per row: its number in its origin
    row_numbers: np.ndarray
    #: the partition's offset after this chunk (what a checkpoint stores to resume)
    end_offset: int
    #: the partition whose watermark these events advance (default: ``partition``)
    stream: str | None = None
    #: further offsets the chunk moves, by name (a CSV file's unparsable rows, counted
    #: apart from its rows: see :func:`unparsable_rows_key`)
    other_offsets: dict[str, int] | None = None
    #: records that could not be read: (position, record)
    malformed: list[tuple[str, Malformed]] = field(default_factory=list)
    #: the origins rows come from when not all from ``partition`` (with ``origin_of``)
    origins: list[str] | None = None
    #: int32, one per row: the index of its origin in ``origins``
    origin_of: np.ndarray | None = None
    #: the stream ends with this chunk: its watermark no longer holds the job's back (a
    #: file read side by side with others that has been read to its end)
    last: bool = False

    def __len__(self) -> int:
        """Records in the chunk, good and malformed (what it moves the offsets by)."""
        return count_rows(self.rows) + len(self.malformed)

    @property
    def events(self) -> list[Any]:
        """The good rows as Python objects, then the malformed records (a Python object per
        record: for row-by-row consumers and tests)."""
        return row_objects(self.rows, None) + [m for _, m in self.malformed]

    @property
    def positions(self) -> list[str]:
        """The position of each of :attr:`events`."""
        numbers = self.row_numbers.tolist()
        if self.origin_of is None:
            rows = [f"{self.partition}:{n}" for n in numbers]
        else:
            assert self.origins is not None
            rows = [f"{self.origins[o]}:{n}"
                    for o, n in zip(self.origin_of.tolist(), numbers, strict=True)]
        return rows + [where for where, _ in self.malformed]


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
    """Events from memory, one partition per argument: a list (or any iterable) of dicts or
    objects, a pandas DataFrame, or a pyarrow Table (or RecordBatch); tables and frames
    are handed on a slice at a time, as columns, never a Python object per row.

    >>> import pyarrow as pa
    >>> chunk = next(IterableSource(pa.table({"v": [1, 2, 3]}), batch_size=2).read({}))
    >>> type(chunk.rows).__name__, chunk.positions
    ('Table', ['memory-0:0', 'memory-0:1'])
    """

    def __init__(self, *data: Any, batch_size: int = 1024) -> None:
        self._data = [_in_memory(d) for d in data] or [np.empty(0, object)]
        self.batch_size = _positive_batch(batch_size)

    def partitions(self) -> list[str]:
        return [f"memory-{i}" for i in range(len(self._data))]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        # a batch of each partition in turn: the one that has given the fewest records
        # next (the first of those), decided by the offsets alone, so that a job resumed
        # in the middle of a round reads on in the order the job before it did (as
        # FileSource does; an ended partition here goes on holding the watermark, as a
        # stream that has gone quiet)
        turns = [(offsets.get(p, 0), i) for i, p in enumerate(self.partitions())]
        heapq.heapify(turns)
        names = self.partitions()
        while turns:
            start, i = turns[0]
            data = self._data[i]
            n = count_rows(data)
            if start >= n:
                heapq.heappop(turns)
                continue
            stop = min(start + self.batch_size, n)
            rows = (data[start:stop] if isinstance(data, np.ndarray)
                    else take_rows(data, np.arange(start, stop)) if _is_frame(data)
                    else data.slice(start, stop - start))
            heapq.heapreplace(turns, (stop, i))
            yield Chunk(names[i], rows, np.arange(start, stop, dtype=np.int64), stop)


def _in_memory(data: Any) -> Any:
    """One partition of an :class:`IterableSource`: a table or frame as it is, anything
    else as an object array."""
    module = type(data).__module__
    if module.startswith("pyarrow"):
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            return without_views(pa.Table.from_batches([data]))
        if isinstance(data, pa.Table):
            return without_views(data)
    if _is_frame(data):
        return checked_frame(data)
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise InputError(f"IterableSource takes iterables of events, pandas frames or Arrow "
                         f"tables; got {type(data).__name__}")
    return object_array(list(data))


def _is_frame(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "iloc")


class FileSource(Source):
    """Parquet, CSV and JSONL files (or directories of them), also compressed (``.gz``,
    ``.zst``, ``.bz2``, ``.lz4``); one partition per file, read in Arrow batches by
    :func:`cep.runtime.files.read_batches`.

    The offset of a partition is the number of records emitted from it.  A JSONL line that
    cannot be read (not UTF-8, not JSON, nested too deeply, not an object) and a CSV row
    with the wrong number of fields are :class:`Malformed` records: dead letters, and the
    file goes on.

    The files are read side by side, a batch of each in turn, each with a watermark of its
    own (the job's is the least): files that each hold a stream over the same time (one
    per region, per card network).  ``in_order=True`` reads them one after another, in
    name order, as one stream with one watermark: history split into files by time (one
    per day), which side by side would hold the watermark at the first file's progress
    (its later days all waiting, and a rule change seen meanwhile applied to them).

    >>> _ = Path("two.csv").write_text("card,ts\\n1,1000\\n1,2000,9\\n2,3000\\n")
    >>> chunk = next(FileSource("two.csv").read({}))
    >>> chunk.rows.num_rows, chunk.positions
    (2, ['two.csv:0', 'two.csv:2', 'two.csv:line 3'])
    """

    #: the one stream of files read one after another (``in_order``)
    IN_ORDER = "files in order"

    def __init__(self, *paths: str | os.PathLike[str], batch_size: int = 65536,
                 in_order: bool = False) -> None:
        self.files = list_files(paths)
        self.batch_size = _positive_batch(batch_size)
        self.in_order = in_order

    def partitions(self) -> list[str]:
        return [str(f) for f in self.files]

    def streams(self) -> list[str]:
        return [self.IN_ORDER] if self.in_order else self.partitions()

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        if self.in_order:
            for f in self.files:
                for chunk in self._batches(f, offsets):
                    chunk.stream = self.IN_ORDER
                    yield chunk
            return
        # the file that has given the fewest records goes next (the first of those in
        # name order): a batch of each in turn, decided by the offsets alone, so that a
        # job resumed from a checkpoint taken in the middle of a round reads the files in
        # the order the job before it did
        turns = [(offsets.get(str(f), 0), i, str(f), self._batches(f, offsets))
                 for i, f in enumerate(self.files)]
        heapq.heapify(turns)
        while turns:
            done, i, name, batches = turns[0]
            chunk = next(batches, None)
            if chunk is None:  # read to its end: its watermark lets go of the others'
                heapq.heappop(turns)
                if turns:
                    yield Chunk(name, object_array([]), np.empty(0, np.int64), done, last=True)
                continue
            heapq.heapreplace(turns, (chunk.end_offset, i, name, batches))
            yield chunk

    def _batches(self, path: Path, offsets: dict[str, int]) -> Iterator[Chunk]:
        """The file's chunks; a file that cannot be read (empty, not what its suffix says,
        cut off inside its Parquet footer...) is one dead letter naming it and why, and the
        other files go on: one bad file never stops a job."""
        if offsets.get(unreadable_key(path)):
            return  # found unreadable before this job resumed: its dead letter is out
        done = offsets.get(str(path), 0)
        try:
            for batch in read_batches(path, skip=done,
                                      skip_unparsable=offsets.get(unparsable_rows_key(path), 0),
                                      batch_size=self.batch_size):
                chunk = _chunk(batch)
                done = chunk.end_offset
                yield chunk
        except (InputError, OSError) as err:
            yield _unreadable(str(path), done, err)


def _unreadable(path: str, done: int, err: Exception) -> Chunk:
    """A chunk of one dead letter: the file ``path`` could not be read (after ``done``
    records) for ``err``."""
    # the error names the file and says it cannot be read
    reason = f"{err}{f' (after {done:,} records of it)' if done else ''}"
    # the dead letter counts under its own offset (the offsets add up to the records read)
    return Chunk(path, object_array([]), np.empty(0, np.int64), done,
                 other_offsets={unreadable_key(path): 1},
                 malformed=[(f"{path}:file", Malformed("", reason))])


def _chunk(batch: FileBatch) -> Chunk:
    """A file's batch as a chunk of its partition."""
    rows = batch.table if batch.table is not None else object_array(batch.objects or [])
    return Chunk(batch.partition, rows, batch.rows, batch.end_offset,
                 other_offsets=batch.other_offsets,
                 malformed=[(f"{batch.partition}:{label}", m) for label, m in batch.malformed])


def _read_whole(path: Path) -> FileBatch:
    """:func:`read_file`, or for a file that cannot be read no rows and one malformed record
    saying why (see :meth:`FileSource._batches`)."""
    try:
        return read_file(path)
    except (InputError, OSError) as err:
        return FileBatch(str(path), None, [], np.empty(0, np.int64),
                         [("file", Malformed("", str(err)))], 1)


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
        return [str(f) for f in sorted(self.directory.iterdir())
                if f.is_file() and file_format(f) is not None]

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
    behind the watermark and be late.  This source reads every file first (with
    :func:`cep.runtime.files.read_file`: Arrow tables, or Python dicts for a JSONL file
    whose values cannot be one table), sorts the rows by the ``time`` field (integers in
    ``time_unit``, as :meth:`Job.timestamps <runtime.Job.timestamps>` reads them;
    datetimes; ISO-8601 text, or text in the ``strptime`` ``time_format``), stably, so rows with equal times keep their order in the
    input (files in the order given, rows in file order), and emits them in batches from
    one partition.  It needs memory for the whole input.  Records that cannot be read come
    first, then rows whose time cannot be read (both become dead letters); positions still
    name the file and row each event came from.  Reading the same files again gives the
    same order, so a checkpoint's offset resumes it.

    >>> import json
    >>> rows = [{"ts": 3000, "v": "c"}, {"ts": 1000, "v": "a"}, {"ts": 2000, "v": "b"},
    ...         {"ts": 1000, "v": "a2"}]
    >>> _ = Path("shuffled.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> chunk = next(SortedFileSource("shuffled.jsonl", time="ts").read({}))
    >>> chunk.rows.column("v").to_pylist(), chunk.positions[:2]
    (['a', 'a2', 'b', 'c'], ['shuffled.jsonl:1', 'shuffled.jsonl:3'])
    """

    def __init__(self, *paths: str | os.PathLike[str], time: str, time_unit: str | None = None,
                 batch_size: int = 65536, time_format: str | None = None) -> None:
        import hashlib

        from cep.times import check_unit

        if not isinstance(time, str):
            raise InputError(f"SortedFileSource sorts by a time field: give its name, not "
                             f"{type(time).__name__}")
        self.files = list_files(paths)
        self.time = time
        self.time_unit = check_unit(time_unit)
        self.time_format = time_format
        self.batch_size = _positive_batch(batch_size)
        names = "\0".join(str(f) for f in self.files)
        self._name = f"sorted:{hashlib.sha256(names.encode()).hexdigest()[:16]}"

    def partitions(self) -> list[str]:
        return [self._name]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        rows, origin_of, numbers, malformed = self._load()
        origins = [str(f) for f in self.files]
        total = len(malformed) + len(numbers)
        for lo in range(offsets.get(self._name, 0), total, self.batch_size):
            hi = min(lo + self.batch_size, total)
            bad = malformed[lo:hi]
            first, last = max(lo - len(malformed), 0), max(hi - len(malformed), 0)
            picked = np.arange(first, last, dtype=np.int64)
            yield Chunk(self._name, take_rows(rows, picked), numbers[first:last], hi,
                        malformed=bad, origins=origins, origin_of=origin_of[first:last])

    def _load(self) -> tuple[Any, np.ndarray, np.ndarray, list[tuple[str, Malformed]]]:
        """Every file's rows in time order (a table, or objects when the files' columns
        cannot be one table), each row's file (index) and row number in it, and the
        records that could not be read, in file order."""
        import pyarrow as pa

        wholes = [_read_whole(f) for f in self.files]
        malformed = [(f"{w.partition}:{label}", m) for w in wholes for label, m in w.malformed]
        key = np.concatenate([self._sort_keys(w) for w in wholes])
        order = np.argsort(key, kind="stable")  # ties keep arrival order
        origin_of = np.repeat(np.arange(len(wholes), dtype=np.int32),
                              [w.num_rows for w in wholes])[order]
        numbers = np.concatenate([w.rows for w in wholes])[order]
        tables = [w.table for w in wholes]
        rows: Any = None
        if all(t is not None for t in tables):
            try:
                rows = (tables[0] if len(tables) == 1
                        else pa.concat_tables(tables, promote_options="default"))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                rows = None  # columns of different types (1 would become 1.0): objects
        if rows is None:
            rows = object_array([r for w in wholes for r in w.to_pylist()])
        return take_rows(rows, order), origin_of, numbers, malformed

    def _sort_keys(self, whole: FileBatch) -> np.ndarray:
        """Epoch milliseconds of a file's rows (``_UNUSABLE`` where there is no time)."""
        from cep.time_columns import times_of_column

        if whole.table is not None:
            if self.time not in whole.table.column_names:
                return np.full(whole.num_rows, _UNUSABLE, dtype=np.int64)
            values: Any = whole.table.column(self.time)
        else:
            values = [e.get(self.time) for e in whole.objects or []]
        if not len(values):
            return np.empty(0, np.int64)
        column = times_of_column(values, self.time_unit, self.time, self.time_format)
        keys = np.where(column.bad, _UNUSABLE, column.millis).astype(np.int64)
        stray = stray_text(whole.table, self.time)
        if stray is not None:  # times given as text among numbers: read as the job reads them
            rows, texts = stray
            text_times = times_of_column(texts, self.time_unit, self.time, self.time_format)
            keys[rows] = np.where(text_times.bad, _UNUSABLE, text_times.millis)
        return keys


class ReadAhead:
    """The chunks of ``chunks`` read on a thread of their own, up to ``depth`` ahead of the
    consumer: reading and parsing files (pyarrow, which releases the GIL) overlap with
    matching.  The same chunks in the same order; an error of the reader is raised to the
    consumer where the chunk would have come; :meth:`close` stops the reader.

    >>> with ReadAhead(iter([1, 2, 3])) as chunks:
    ...     list(chunks)
    [1, 2, 3]
    """

    _END = object()

    def __init__(self, chunks: Iterator[Any], depth: int = 2) -> None:
        import queue
        import threading

        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(chunks,), daemon=True,
                                        name="cep-read-ahead")
        self._thread.start()

    def _read(self, chunks: Iterator[Any]) -> None:
        try:
            for chunk in chunks:
                if not self._put(chunk):
                    return
            self._put(self._END)
        except BaseException as err:  # handed to the consumer, raised there
            self._put(_Failed(err))

    def _put(self, item: Any) -> bool:
        import queue

        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    def close(self) -> None:
        """Stop the reader (the consumer stopped early).  A reader waiting inside the
        source (a watched directory polling for files) is left to end on its own: it is a
        daemon thread and hands nothing on any more."""
        self._stop.set()
        self._thread.join(timeout=5.0)

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


@dataclass(frozen=True)
class _Failed:
    error: BaseException


def _positive_batch(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of events >= 1, got {batch_size!r}")
    return batch_size
