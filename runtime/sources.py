"""Sources: where events come from, in batches, with offsets a checkpoint can resume from.

Every source has one or more partitions; each partition yields batches of
``(event, position)`` and knows its offset (how many events it has emitted),
so a restarted job skips exactly what the checkpoint covered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from cep.errors import InputError
from cep.gcpause import paused_gc


@dataclass(frozen=True)
class Malformed:
    """A record that could not be read at all (e.g. a JSONL line that is not JSON)."""

    text: str
    reason: str


@dataclass
class Chunk:
    """A batch of events from one partition, their positions (``<partition>:<row>``, as
    dead letters and late events report them) and the partition's offset after it.

    >>> next(IterableSource(["a", "b"]).read({}))
    Chunk(partition='memory-0', events=['a', 'b'], positions=['memory-0:0', 'memory-0:1'], end_offset=2, stream=None)
    """

    partition: str
    events: list[Any]
    positions: list[str]
    end_offset: int
    #: the partition whose watermark these events advance (default: ``partition``)
    stream: str | None = None


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
    number of rows emitted from it.
    """

    def __init__(self, *paths: str | os.PathLike[str], batch_size: int = 65536) -> None:
        self.files = _list_files(paths)
        self.batch_size = _positive_batch(batch_size)

    def partitions(self) -> list[str]:
        return [str(f) for f in self.files]

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        iters = {str(f): self._batches(f, offsets.get(str(f), 0)) for f in self.files}
        while iters:
            for name in list(iters):
                chunk = next(iters[name], None)
                if chunk is None:
                    del iters[name]
                else:
                    yield chunk

    def _batches(self, path: Path, skip: int) -> Iterator[Chunk]:
        if _format(path) == "json":
            yield from _json_lines(path, skip, self.batch_size)
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
                for chunk in self._batches(f, offsets.get(str(f), 0)):
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
                positions = [f"{self.files[s]}:{r}"
                             for s, r in zip(segs.tolist(), rows.tolist(), strict=True)]
            yield Chunk(self._name, events, positions, hi)

    def _load(self) -> tuple[list[Any], Any, Any]:
        """Every file's rows (segments), and for each row in time order its segment and row."""
        import numpy as np

        segments: list[Any] = []
        keys = []
        for f in self.files:
            if _format(f) == "json":
                events: list[Any] = []
                for chunk in _json_lines(f, 0, 65536):
                    events.extend(chunk.events)
                segments.append(events)
                keys.append(self._keys([e.get(self.time) if isinstance(e, dict) else None
                                        for e in events]) if events else np.empty(0, np.int64))
            else:
                table = _read_table(f)
                segments.append(table)
                keys.append(self._table_keys(table))
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


def _read_table(path: Path) -> Any:
    """A whole Parquet or CSV file (optionally compressed) as one Arrow table."""
    try:
        if _format(path) == "parquet":
            return _parquet_file(path).read()
        import pyarrow.csv as pcsv

        return pcsv.read_csv(str(path))
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err


def _json_lines(path: Path, skip: int, batch_size: int) -> Iterator[Chunk]:
    """JSONL line by line: one bad line is one malformed record, not a failed file."""
    import json

    with _open_text(path) as f:
        records = (line for line in f if line.strip())
        n = sum(1 for _ in islice(records, skip))
        prefix = f"{path}:"
        while block := list(islice(records, batch_size)):
            events: list[Any] = []
            with paused_gc():  # a dict per event: no cycles, many objects
                for line in block:
                    try:
                        events.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        events.append(Malformed(line.rstrip("\n"), f"not JSON: {err}"))
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


def _open_text(path: Path) -> Any:
    """A text file object over ``path``, decompressing ``.gz``/``.zst`` on the fly."""
    if not _compressed(path):
        return open(path, encoding="utf-8", errors="replace")
    import io

    import pyarrow as pa

    return io.TextIOWrapper(pa.input_stream(str(path), compression="detect"),
                            encoding="utf-8", errors="replace")


def _record_batches(path: Path, batch_size: int) -> Iterator[Any]:
    """Record batches of at most ``batch_size`` rows, whatever the reader's own block size."""
    for batch in _reader_batches(path, batch_size):
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)


def _parquet_file(path: Path) -> Any:
    """A ParquetFile; a compressed one (``.parquet.gz``) is decompressed into memory first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if _compressed(path):
        with pa.input_stream(str(path), compression="detect") as f:
            return pq.ParquetFile(pa.BufferReader(f.read()))
    return pq.ParquetFile(path)


def _reader_batches(path: Path, batch_size: int) -> Iterator[Any]:
    fmt = _format(path)
    try:
        if fmt == "parquet":
            yield from _parquet_file(path).iter_batches(batch_size=batch_size)
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            # a string path: pyarrow decompresses .gz and .zst by the suffix
            reader = pcsv.open_csv(str(path), read_options=pcsv.ReadOptions(block_size=1 << 22))
            yield from reader
        elif fmt == "json":
            import pyarrow.json as pjson

            yield from pjson.read_json(str(path)).to_batches(max_chunksize=batch_size)
        else:
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
