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
    """Parquet, CSV and JSONL files (or directories of them); one partition per file.

    Files are read in batches with pyarrow; the offset of a partition is the
    number of rows emitted from it.
    """

    def __init__(self, *paths: str | os.PathLike[str], batch_size: int = 65536) -> None:
        files: list[Path] = []
        for p in paths:
            path = Path(p)
            if path.is_dir():
                files.extend(sorted(f for f in path.iterdir() if _readable(f)))
            elif path.exists():
                files.append(path)
            else:
                raise InputError(f"{path}: no such file or directory")
        if not files:
            raise InputError(f"no Parquet, CSV or JSONL files in {[str(p) for p in paths]}")
        self.files = files
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
        if path.suffix.lower() in (".jsonl", ".ndjson"):
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


def _json_lines(path: Path, skip: int, batch_size: int) -> Iterator[Chunk]:
    """JSONL line by line: one bad line is one malformed record, not a failed file."""
    import json

    with open(path, encoding="utf-8", errors="replace") as f:
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


def _readable(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in (".parquet", ".pq", ".csv", ".jsonl", ".ndjson")


def _record_batches(path: Path, batch_size: int) -> Iterator[Any]:
    """Record batches of at most ``batch_size`` rows, whatever the reader's own block size."""
    for batch in _reader_batches(path, batch_size):
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)


def _reader_batches(path: Path, batch_size: int) -> Iterator[Any]:
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size)
        elif suffix == ".csv":
            import pyarrow.csv as pcsv

            reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=1 << 22))
            yield from reader
        elif suffix in (".jsonl", ".ndjson"):
            import pyarrow.json as pjson

            yield from pjson.read_json(path).to_batches(max_chunksize=batch_size)
        else:
            raise InputError(f"{path}: unknown file type {suffix!r} (use .parquet, .csv or .jsonl)")
    except InputError:
        raise
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err


def _positive_batch(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of events >= 1, got {batch_size!r}")
    return batch_size
