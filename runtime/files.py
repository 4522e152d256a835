"""Event files as Arrow tables: the file layer of the columnar runtime (and of ``cep.match``).

Parquet, CSV and JSON lines (``.jsonl``, ``.ndjson``, ``.json``), each optionally ``.gz``,
``.zst``, ``.bz2`` or ``.lz4`` compressed, are read in batches of typed Arrow columns:
:func:`read_batches` streams one file, :func:`read_file` reads one file whole and
:func:`read_whole` every file named as one table.

A batch carries what :class:`~cep.runtime.sources.FileSource` gives for the same rows:
each good row's position in its file (Parquet and CSV: its row index; JSON lines: its
record index, counting every non-blank line, good or bad), the file's offset after the
batch and, for CSV, the count of unparsable rows; so a checkpoint written by one resumes
with the other.  A record that cannot be read (a JSON line that is not UTF-8, not JSON,
nested too deeply or not an object; a CSV row with the wrong number of fields, a CSV line
that opens a quoted value it does not close) is a :class:`Malformed` record set apart
with the same reason the row-by-row reader gives, and the rest of its batch stays
columnar.

CSV text is read as pyarrow reads it, but for three things.  A quoted value may not hold
a line break: a line that leaves one open is that one malformed record, where pyarrow
would read the lines after it into the value.  An empty field is null in a text column
as in any other (quoted, ``""`` is an empty text).  A column pyarrow reads as text
though most of its values are numbers (one word among them is enough) is read as
numbers, the words staying text in their rows (so a pattern that reads the column as a
number makes those rows dead letters), whether the words come in the block pyarrow types
the column from or after it: the batch stays a table, each word null in the column and
kept beside it (:mod:`cep.nfa.stray_text`).  A column of integers in that block with a
fraction later is of floats from there on (2.5 is no word).

JSON lines are parsed by ``pyarrow.json`` a batch at a time; only a batch that fails is
looked at line by line, and only its failing lines are parsed by Python.  Values read as
Python's ``json`` module reads them: ISO-8601 text stays text (pyarrow would make it a
timestamp).  A field that is a number on most lines and text on a few is read as CSV's
words among numbers are (the lines holding text set apart, read by Python, the text kept
beside the column).  Whole numbers written as integers among floats (``5`` beside
``5.5``, as JavaScript writes 5.0) are floats in their batch, as pandas and Spark read
them.  A batch whose values cannot be one table without changing them (an integer of 16
digits or more among floats, which a float may not hold; a value pyarrow refuses but
Python reads, such as a lone surrogate escape; values of three kinds in one field) is
given as Python dicts (:attr:`FileBatch.objects`) instead; one whose field mixes numbers
or true/false with text on many lines is a table all the same
(:func:`cep.nfa.stray_text.table_of_dicts`).  A field missing from a line reads as null
in a table.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cep.errors import InputError
from cep.nfa.events import table_dicts
from cep.nfa.stray_text import PREFIX, table_of_dicts

if TYPE_CHECKING:
    import pyarrow as pa

#: a path as the functions here take it
PathLike = str | os.PathLike[str]

#: what a file's suffix says it holds (after a compression suffix is taken off)
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "json",
           ".ndjson": "json", ".json": "json"}
#: compression suffixes: the file is decompressed as it is read
COMPRESSIONS = (".gz", ".zst", ".bz2", ".lz4")


@dataclass(frozen=True)
class Malformed:
    """A record that could not be read at all (e.g. a JSONL line that is not JSON)."""

    text: str
    reason: str


def unparsable_rows_key(path: Path | str) -> str:
    """The offset under which a checkpoint counts the unparsable rows of the CSV file
    ``path`` (they become dead letters once; the file's own offset counts its rows).

    >>> unparsable_rows_key(Path("day1.csv"))
    'day1.csv#unparsable'
    """
    return f"{path}#unparsable"


def unreadable_key(path: Path | str) -> str:
    """The offset under which a checkpoint marks the file ``path`` as one that could not be
    read (its dead letter went out once; a resumed job does not read it again).

    >>> unreadable_key(Path("day2.parquet"))
    'day2.parquet#unreadable'
    """
    return f"{path}#unreadable"


@dataclass
class FileBatch:
    """Consecutive records of one file: the good rows as one Arrow table (or, when they
    cannot be one, as Python dicts), the position of each in the file, the records that
    could not be read, and the file's offset after them.

    >>> import pyarrow as pa
    >>> batch = FileBatch("cards.csv", pa.table({"v": [1, 2]}), None, np.array([0, 1]), [], 2)
    >>> batch.to_pylist(), batch.num_rows
    ([{'v': 1}, {'v': 2}], 2)
    """

    #: the file's path as given (the partition name FileSource gives it)
    partition: str
    #: the good rows, typed columns; None when ``objects`` holds them
    table: pa.Table | None
    #: the good rows as dicts, only when they cannot be one Arrow table
    objects: list[dict[str, Any]] | None
    #: int64, one per good row: its position in the file (``<file>:<n>`` names it)
    rows: np.ndarray
    #: the records that could not be read, in file order: (position label, record), the
    #: label being what follows ``<file>:`` in a position (``"12"``, ``"line 7"``)
    malformed: list[tuple[str, Malformed]]
    #: the file's offset after this batch (what a checkpoint stores to resume)
    end_offset: int
    #: further offsets the batch moves, by name (a CSV file's unparsable rows)
    other_offsets: dict[str, int] | None = None

    @property
    def num_rows(self) -> int:
        """How many good rows the batch holds."""
        return len(self.rows)

    def to_pylist(self) -> list[dict[str, Any]]:
        """The good rows as dicts (a dict per row: for tests and row-by-row consumers)."""
        if self.objects is not None:
            return self.objects
        return table_dicts(self.table) if self.table is not None else []


def file_format(path: PathLike) -> str | None:
    """``"parquet"``, ``"csv"`` or ``"json"`` (JSON lines) from the file's suffix, a
    compression suffix (``.gz``, ``.zst``, ``.bz2``, ``.lz4``) taken off first; None for any
    other file.  ``.jsonl``, ``.ndjson`` and ``.json`` all hold JSON lines.

    >>> file_format("day1.csv.zst"), file_format("x.json"), file_format("notes.txt")
    ('csv', 'json', None)
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    return FORMATS.get(suffixes[-1]) if suffixes else None


def list_files(paths: Iterable[PathLike]) -> list[Path]:
    """The files named: each path as given, a directory's readable files (those
    :func:`file_format` knows) in name order.

    >>> Path("days").mkdir()
    >>> for name in ("b.csv", "a.jsonl.gz", "notes.txt"):
    ...     _ = (Path("days") / name).write_text("")
    >>> [str(f) for f in list_files(["days", "days/notes.txt"])]
    ['days/a.jsonl.gz', 'days/b.csv', 'days/notes.txt']
    """
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


def read_batches(path: PathLike, *, skip: int = 0, skip_unparsable: int = 0,
                 batch_size: int = 65536) -> Iterator[FileBatch]:
    """The file in batches of at most ``batch_size`` records, after the first ``skip``.

    Batches are what :class:`~cep.runtime.sources.FileSource` reads as chunks: the same
    records, positions and offsets.  ``skip`` is the file's offset in a checkpoint
    (Parquet and CSV: rows; JSON lines: records, good or bad) and ``skip_unparsable``
    a CSV file's count of unparsable rows already seen (its offset under
    :func:`~cep.runtime.sources.unparsable_rows_key`).  The file is opened when the
    first batch is asked for; a file that cannot be read raises
    :class:`~cep.errors.InputError`.  Batches of one file can differ in schema (a column
    that is all null in one batch, a JSON field first met in a later batch).

    >>> _ = Path("cards.jsonl").write_text('{"v": 1}\\nnot json\\n{"v": 3}\\n')
    >>> batch = next(read_batches("cards.jsonl"))
    >>> batch.table.to_pylist(), batch.rows.tolist(), batch.end_offset
    ([{'v': 1}, {'v': 3}], [0, 2], 3)
    >>> [(label, m.reason) for label, m in batch.malformed]
    [('1', 'not JSON: Expecting value (line 2, column 1)')]
    """
    _check_batch_size(batch_size)
    return (_once_each(batch) for batch in _batches(Path(path), skip, skip_unparsable,
                                                     batch_size))


def _once_each(batch: FileBatch) -> FileBatch:
    """``batch``, unless its columns name a field twice (a CSV header ``ts,v,v``): which of
    the two an event's field is, nothing says, so the file cannot be read."""
    names = batch.table.column_names if batch.table is not None else []
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{batch.partition}: cannot read: its columns name "
                         f"{', '.join(map(repr, twice))} more than once")
    return batch


def read_file(path: PathLike) -> FileBatch:
    """One file whole, as one :class:`FileBatch` (for sorting or matching in memory).

    Parquet and CSV files are read as pyarrow reads a whole file (CSV column types are
    inferred from the whole file; a column of mostly numbers with words among them is
    numbers, each word null in it and kept beside it, see :mod:`cep.nfa.stray_text`); JSON
    lines as :func:`read_batches` reads them, the batches' tables joined (Python dicts for
    the whole file when one batch needs them or the batches' types disagree).

    >>> _ = Path("t.csv").write_text("card,amount\\n1,2.5\\n1,2,3\\n2,900\\n")
    >>> whole = read_file("t.csv")
    >>> whole.table.to_pylist(), [label for label, _ in whole.malformed]
    ([{'card': 1, 'amount': 2.5}, {'card': 2, 'amount': 900.0}], ['line 3'])
    """
    return _once_each(_read_file(Path(path)))


def _read_file(path: Path) -> FileBatch:
    fmt = _known_format(path)
    if fmt == "parquet":
        try:
            table = _parquet_file(path).read()
        except Exception as err:
            raise InputError(f"{path}: cannot read: {err}") from err
        return FileBatch(str(path), table, None, np.arange(table.num_rows, dtype=np.int64), [],
                         table.num_rows)
    if fmt == "csv":
        return _whole_csv(path)
    return _joined(path, _json_batches(path, 0, 65536))


def read_whole(paths: PathLike | Sequence[PathLike], sizes: list[tuple[str, int]] | None = None
               ) -> tuple[pa.Table | list[dict[str, Any]], list[tuple[str, Malformed]]]:
    """Every file named (a directory: its readable files, in name order) as one table, and
    the records that could not be read, each with its position (``<file>:<label>``);
    ``sizes``, when given, gets each file's path and how many of the rows it gave.

    The files' tables are joined with ``promote_options="permissive"`` (a column of
    integers in one file and floats in another becomes floats); when even that fails, or
    a file's rows cannot be one table (see :func:`read_file`), the rows are given as a
    list of dicts instead.

    >>> _ = Path("a.jsonl").write_text('{"card": 1, "amount": 2.5}\\n[]\\n')
    >>> _ = Path("b.csv").write_text("card,amount\\n2,900.0\\n")
    >>> table, bad = read_whole(["a.jsonl", "b.csv"])
    >>> table.to_pylist(), [(where, m.reason) for where, m in bad]
    ([{'card': 1, 'amount': 2.5}, {'card': 2, 'amount': 900.0}], [('a.jsonl:1', 'a JSON array, not an object (line 2)')])
    """
    import pyarrow as pa

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    wholes = [read_file(f) for f in list_files(paths)]
    if sizes is not None:
        sizes += [(w.partition, w.num_rows) for w in wholes]
    malformed = [(f"{w.partition}:{label}", m) for w in wholes for label, m in w.malformed]
    tables = [w.table for w in wholes]
    if all(t is not None for t in tables):
        if len(tables) == 1:
            return tables[0], malformed
        try:
            return pa.concat_tables(tables, promote_options="permissive"), malformed
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass  # columns that cannot be one type: rows as dicts
    from cep.gcpause import paused_gc

    with paused_gc():  # a dict per event: no cycles, many objects
        rows = [row for w in wholes for row in w.to_pylist()]
    return rows, malformed


# ------------------------------------------------------------------------------ common
def _readable(path: Path) -> bool:
    return path.is_file() and file_format(path) is not None


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of events >= 1, got {batch_size!r}")


def _known_format(path: Path) -> str:
    fmt = file_format(path)
    if fmt is None:
        raise InputError(f"{path}: unknown file type {path.suffix!r} (use .parquet, .csv or "
                         ".jsonl, optionally .gz or .zst compressed)")
    return fmt


def _compressed(path: Path) -> bool:
    return path.suffix.lower() in COMPRESSIONS


def _batches(path: Path, skip: int, skip_unparsable: int, batch_size: int
             ) -> Iterator[FileBatch]:
    fmt = _known_format(path)
    if fmt == "json":
        yield from _json_batches(path, skip, batch_size)
    elif fmt == "csv":
        yield from _csv_batches(path, skip, skip_unparsable, batch_size)
    else:
        yield from _parquet_batches(path, skip, batch_size)


def _joined(path: Path, batches: Iterable[FileBatch]) -> FileBatch:
    """The batches of one file as one (dicts for all rows when their tables cannot be one
    without changing a value: only null columns and missing columns are filled in)."""
    import pyarrow as pa

    parts = list(batches)
    rows = np.concatenate([b.rows for b in parts]) if parts else np.empty(0, np.int64)
    malformed = [m for b in parts for m in b.malformed]
    end = parts[-1].end_offset if parts else 0
    others = parts[-1].other_offsets if parts else None
    tables = [b.table for b in parts]
    if all(t is not None for t in tables):
        try:
            table = (pa.concat_tables(tables, promote_options="default") if tables
                     else pa.table({}))
            return FileBatch(str(path), table, None, rows, malformed, end, others)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    from cep.gcpause import paused_gc

    with paused_gc():  # a dict per event: no cycles, many objects
        objects = [row for b in parts for row in b.to_pylist()]
    return FileBatch(str(path), None, objects, rows, malformed, end, others)


# ----------------------------------------------------------------------------- Parquet
def _parquet_file(path: Path) -> Any:
    """A ParquetFile; a compressed one (``.parquet.gz``) is decompressed into memory first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if _compressed(path):
        with pa.input_stream(str(path), compression="detect") as f:
            return pq.ParquetFile(pa.BufferReader(f.read()))
    return pq.ParquetFile(path)


def _parquet_batches(path: Path, skip: int, batch_size: int) -> Iterator[FileBatch]:
    import pyarrow as pa

    name, offset = str(path), 0
    try:
        # batches as FileSource cuts them: the reader's, each cut to batch_size rows
        batches = (b.slice(start, batch_size)
                   for b in _parquet_file(path).iter_batches(batch_size=batch_size)
                   for start in range(0, b.num_rows, batch_size))
        for batch in batches:
            n = batch.num_rows
            if offset + n <= skip:
                offset += n
                continue
            start = max(0, skip - offset)
            first, offset = offset + start, offset + n
            yield FileBatch(name, pa.Table.from_batches([batch.slice(start)]), None,
                            np.arange(first, offset, dtype=np.int64), [], offset)
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err


# --------------------------------------------------------------------------------- CSV
#: bytes pyarrow reads of a CSV file at a time; it infers column types from the first block
#: (the same as FileSource's, so batches and the text-column rule line up)
_CSV_BLOCK = 1 << 22
#: bytes of a CSV file read at a time to be handed on a whole line at a time (_CsvLines)
_CSV_READ = 1 << 20


def _csv_batches(path: Path, skip: int, skip_unparsable: int, batch_size: int
                 ) -> Iterator[FileBatch]:
    """A CSV file in batches of at most ``batch_size`` rows, after the first ``skip`` rows.

    A row with the wrong number of fields, or a line that leaves a quoted value open (see
    :class:`_CsvLines`), is a malformed record (label ``line <n>``), counted under
    ``unparsable_rows_key`` apart from the rows: the first ``skip_unparsable`` of them
    were emitted before.  pyarrow reads a column as the type its first block suggests; a
    column it reads as text there though most of its values are numbers is read as
    numbers (:func:`_numbers_in_text`); when a later value is not of a column's type
    (text among numbers), the file is read again from the start with that column as
    text, skipping what was emitted.  Each batch's values of such a column are converted
    back to that type (see :func:`_typed`: ``"x"`` is null there and kept beside it, so a
    rule that needs a number makes that row a dead letter).  Batches are cut exactly where
    FileSource cuts its chunks.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    name, bad_key = str(path), unparsable_rows_key(path)
    as_text: dict[str, Any] = {}  # column -> the type its values are read as, text in the file
    # pyarrow reads the file itself until a block has a row it cannot parse or a value
    # holding a line break (an unclosed quote): then the file is read again from the
    # start through _CsvLines, which checks every line (in Python: a third slower)
    careful = _compressed(path)
    while True:
        unparsable: list[Any] = []  # in file order: blocks are parsed one after another
        reader = source = None
        retype = False
        try:
            source = _CsvLines(path) if careful else None
            reader = pcsv.open_csv(
                name if source is None else source,
                read_options=pcsv.ReadOptions(block_size=_CSV_BLOCK, use_threads=False),
                parse_options=_csv_parse_options(unparsable),
                convert_options=csv_convert_options(as_text))
            offset = 0  # rows of the file passed so far
            for n, batch in enumerate(reader):
                if source is None and (unparsable or _spans_lines(batch)):
                    careful = True  # nothing of this block was given: read again, checked
                    break
                if n == 0:  # the first block: what pyarrow typed its columns from
                    wide = integers_beyond_int64(batch, as_text)
                    if wide:  # read again, those columns as text
                        as_text.update(wide)
                        retype = True
                        break
                    as_text.update(_numbers_in_text(batch, as_text))
                for start in range(0, batch.num_rows, batch_size):
                    part = batch.slice(start, batch_size)
                    first, offset = offset, offset + part.num_rows
                    fresh = unparsable[skip_unparsable:]
                    if offset <= skip and not fresh:
                        continue
                    lo = max(first, skip)
                    good = part.slice(lo - first) if offset > skip else part.slice(0, 0)
                    table, objects = _typed(pa.Table.from_batches([good]), as_text)
                    malformed = [_unparsable(row, source) for row in fresh]
                    skip_unparsable += len(fresh)
                    rows = _past_unparsable(np.arange(lo, max(lo, offset), dtype=np.int64),
                                            unparsable)
                    skip = max(skip, offset)
                    yield FileBatch(name, table, objects, rows, malformed, skip,
                                    {bad_key: skip_unparsable})
            if retype:
                continue
            if source is None and (careful or unparsable):
                careful = True
                continue
            assert source is not None or not unparsable
            fresh = [_unparsable(row, source) for row in unparsable[skip_unparsable:]]
            # a compressed file that broke off: one more unparsable record says so
            cut = source.until_broken if source is not None else None
            broken = cut.broken(f"line {cut.lines + 1}") if cut is not None else None
            bad = len(unparsable)
            if broken is not None and skip_unparsable <= bad:
                fresh.append(broken)
                bad += 1
            if fresh:
                table, objects = _typed(reader.schema.empty_table(), as_text)
                yield FileBatch(name, table, objects, np.empty(0, np.int64), fresh, skip,
                                {bad_key: bad})
            return
        except pa.ArrowInvalid as err:
            column = re.search(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error", str(err))
            if source is None and column is None:
                # a quoted value ran on past its block (or the header's line): read again,
                # checked, which refuses the line or says what is wrong
                careful = True
                continue
            cut = source.until_broken if source is not None else None
            if cut is not None and cut.error is not None:
                raise InputError(f"{path}: cannot read: the file breaks off after line "
                                 f"{cut.lines} ({cut.error})") from err
            names = reader.schema.names if reader is not None else []
            if column is None or int(column.group(1)) >= len(names) or (
                    names[int(column.group(1))] in as_text):
                raise InputError(f"{path}: cannot read: {err}") from err
            field = reader.schema.field(int(column.group(1)))  # type: ignore[union-attr]
            # integers in the first block, a fraction later: the column is of floats from
            # here on (a word among integers keeps them integers)
            fraction = re.search(r"invalid value '([^']*)'", str(err))
            # (an integer beyond int64 is no fraction: it keeps the column of integers, and
            # its batch is read value by value, as Python's int reads it)
            as_text[field.name] = pa.float64() if pa.types.is_integer(field.type) and (
                fraction is not None and re.match(_TEXT_OF["float"], fraction.group(1))
                and not re.match(_TEXT_OF["int"], fraction.group(1))
            ) else field.type
        except InputError:
            raise
        except Exception as err:
            raise InputError(f"{path}: cannot read: {err}") from err
        finally:
            if source is not None:
                source.close()


def _whole_csv(path: Path) -> FileBatch:
    """A whole CSV file as pyarrow reads one (types inferred from all of it; a column of
    numbers with some text among them is numbers, as :func:`_numbers_in_text` says), as
    SortedFileSource and ``cep.match`` read CSV files; a compressed file that breaks off
    gives its whole lines and a record saying where it broke (see :class:`_UntilBroken`)."""
    table, malformed = _read_csv_whole(path, {})
    # integers beyond int64 read as floats: read again, those columns as text
    wide = integers_beyond_int64(table, {})
    if wide:
        table, malformed = _read_csv_whole(path, wide)
    typed, objects = _typed(table, {**wide, **_numbers_in_text(table, wide)})
    return FileBatch(str(path), typed, objects, np.arange(table.num_rows, dtype=np.int64),
                     malformed, table.num_rows, {unparsable_rows_key(path): len(malformed)})


def _read_csv_whole(path: Path, as_text: dict[str, Any]) -> tuple[Any, list[Any]]:
    """A whole CSV file as pyarrow reads it (``as_text`` columns as text) and the records
    it could not read (see :func:`_whole_csv`)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    def read(unparsable: list[Any]) -> tuple[Any, _CsvLines]:
        with _CsvLines(path) as source:
            table = pcsv.read_csv(source, read_options=pcsv.ReadOptions(use_threads=False),
                                  parse_options=_csv_parse_options(unparsable),
                                  convert_options=csv_convert_options(as_text))
        return table, source

    unparsable: list[Any] = []
    try:
        # pyarrow reads the file itself, in parallel; a row it cannot parse (whose line it
        # does not know so) or a value holding a line break (an unclosed quote) has the
        # file read again in turn through _CsvLines, which checks every line
        table = None
        if not _compressed(path):
            try:
                table = pcsv.read_csv(str(path), read_options=pcsv.ReadOptions(use_threads=True),
                                      parse_options=_csv_parse_options(unparsable),
                                      convert_options=csv_convert_options(as_text))
            except pa.ArrowInvalid:
                pass  # read again, checked: it says what is wrong
        if table is None or unparsable or _spans_lines(table):
            unparsable = []
            table, source = read(unparsable)
        else:
            source = None
    except InputError:
        raise
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err
    malformed = [_unparsable(row, source) for row in unparsable] if source is not None else []
    cut = source.until_broken if source is not None else None
    broken = cut.broken(f"line {cut.lines + 1}") if cut is not None else None
    if broken is not None:
        malformed.append(broken)
    return table, malformed


def _spans_lines(table: Any) -> bool:
    """Does a text value of ``table`` (a CSV block pyarrow read) hold a line break: a
    quoted value that ran on past its line?

    >>> import pyarrow as pa
    >>> _spans_lines(pa.table({"v": ["a", "b\\nc"]})), _spans_lines(pa.table({"v": [1]}))
    (True, False)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    return any(
        (pa.types.is_string(column.type) or pa.types.is_large_string(column.type))
        and pc.any(pc.match_substring(column, "\n")).as_py()
        for column in table.columns)


def _csv_parse_options(unparsable: list[Any]) -> Any:
    """Parse options that set rows with the wrong number of fields aside in ``unparsable``."""
    import pyarrow.csv as pcsv

    def handler(row: Any) -> str:
        unparsable.append(row)
        return "skip"

    return pcsv.ParseOptions(invalid_row_handler=handler)


def csv_convert_options(as_text: dict[str, Any] | None = None) -> Any:
    """Convert options of every CSV read (a CSV file sink's parts read back too), the
    ``as_text`` columns read as text.

    An empty field is null in a text column as in any other (an empty key is a missing
    key, ``is_null()`` holds on it, as for the same data in Parquet); quoted, ``""`` is
    an empty text.  Only the empty field: the words pyarrow reads as null (``NA``,
    ``null``, ``N/A``, ...) stay text in a column of text (a country code ``NA`` is
    Namibia); in a column of numbers they are null (they make pyarrow read it as text,
    and :func:`_numbers_in_text` and :func:`_typed` read it back as numbers).
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    return pcsv.ConvertOptions(column_types={c: pa.string() for c in as_text or ()},
                               null_values=[""], strings_can_be_null=True,
                               quoted_strings_can_be_null=False)


def _past_unparsable(good: np.ndarray, unparsable: list[Any]) -> np.ndarray:
    """The row numbers of good rows numbered ``good`` among the good ones, counting the
    unparsable rows before them too (a row after two bad lines is row 3, not 1, as a JSON
    line is numbered among all lines).  pyarrow numbers an unparsable row by its row in
    the file, the header being row 1; numbers it does not know leave ``good`` as it is.

    >>> class Bad:
    ...     def __init__(self, number): self.number = number
    >>> _past_unparsable(np.arange(3), [Bad(3), Bad(4)]).tolist()  # rows 1 and 2 bad
    [0, 3, 4]
    """
    numbers = np.array([row.number for row in unparsable], np.int64)
    if not len(numbers) or (numbers <= 1).any():
        return good
    # good rows before each unparsable one (its data row, less the bad rows before it)
    before = numbers - 2 - np.arange(len(numbers))
    return good + np.searchsorted(before, good, side="right")


def _unparsable(row: Any, source: _CsvLines) -> tuple[str, Malformed]:
    """A CSV row pyarrow could not parse as a malformed record, with its label."""
    refused = source.refused_line(row.text)
    if refused is not None:
        line, text = refused
        return f"line {line}", Malformed(text, f"not a CSV row: a quoted value is not closed "
                                         f"by the end of the line (line {line})")
    line = source.line(row.number)
    where = f" (line {line})" if line is not None else ""
    return f"line {line}", Malformed(
        row.text, f"not a CSV row: {row.actual_columns} fields where the header has "
        f"{row.expected_columns}{where}")


class _ByteStream:
    """What pyarrow's readers ask of a Python file object, for a reader whose ``read``
    keeps ``_position`` (the bytes handed on) and which can ``close``."""

    _position: int

    def read(self, size: int = -1) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def readinto(self, view: Any) -> int:
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


class _CsvLines(_ByteStream):
    """A CSV file as pyarrow's readers get it: whole lines, and none that leaves a quoted
    value open.  pyarrow would read the lines after such a line as the rest of the value
    (its ``newlines_in_values`` option only says where blocks may be cut), swallowing
    them up to the next quote or the end of the block.  Here a quoted value may not hold
    a line break: such a line is handed on as a row of one field too many, which pyarrow
    refuses alone, its first field naming the line in :attr:`refused` (its number in the
    file and its text: see :meth:`refused_line`).  pyarrow numbers rows without the blank
    lines it skips: :meth:`line` gives a row's line in the file.  A compressed file is
    read through :class:`_UntilBroken` (:attr:`until_broken`).  A file object for
    pyarrow's readers.

    >>> _ = Path("q.csv").write_text('k,note\\na,"oops\\n\\nb,"x, y"\\nc\\n')
    >>> stream = _CsvLines(Path("q.csv"))
    >>> stream.read()
    b'k,note\\n\\x00cep:0,,\\n\\nb,"x, y"\\nc\\n'
    >>> stream.refused_line("\\x00cep:0,,"), stream.line(4)  # pyarrow's row 4: "c"
    ((2, 'a,"oops'), 5)
    """

    #: how the first field of a refused line's row starts (a NUL byte, which text lacks)
    MARK = b"\x00cep:"

    def __init__(self, path: Path) -> None:
        self.path = path
        #: the compressed file's reader (None: a plain file)
        self.until_broken = _UntilBroken(path) if _compressed(path) else None
        self._inner: Any = self.until_broken if self.until_broken is not None else path.open("rb")
        #: the lines refused, in file order: (number in the file, text)
        self.refused: list[tuple[int, str]] = []
        self._lines = 0  # lines handed on
        self._header: tuple[int, bytes] | None = None  # the header's line and text
        self._blank: list[np.ndarray] = []  # the numbers of the blank lines handed on
        self._fields: int | None = None  # the header's number of fields, once needed
        self._held = b""  # the start of a line whose end has not been read yet
        self._ready: list[memoryview] = []  # checked whole lines, not yet handed on
        self._size = 0  # bytes in _ready
        self._ended = False
        self._position = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        # blocks of the size pyarrow asks for (it types columns from the first one)
        while (size is None or size < 0 or self._size < size) and not self._ended:
            self._more(max(size or 0, _CSV_READ))
        if size is None or size < 0 or size >= self._size:
            out, self._ready, self._size = b"".join(self._ready), [], 0
        else:
            parts, need = [], size
            while need:
                first = self._ready[0]
                if len(first) > need:
                    parts.append(first[:need])
                    self._ready[0] = first[need:]
                    need = 0
                else:
                    parts.append(self._ready.pop(0))
                    need -= len(first)
            out = b"".join(parts)
            self._size -= size
        self._position += len(out)
        return out

    def _more(self, size: int) -> None:
        data = self._inner.read(size)
        if not data:  # the end of the file: its last line may have no newline
            self._ended = True
            whole, self._held = self._held, b""
        else:
            cut = data.rfind(b"\n") + 1
            if cut:
                whole, self._held = b"".join((self._held, memoryview(data)[:cut])), data[cut:]
            else:
                whole, self._held = b"", self._held + data
        if whole:
            checked = memoryview(self._checked(whole))
            self._ready.append(checked)
            self._size += len(checked)

    def _checked(self, chunk: bytes) -> bytes:
        """Whole lines, each that leaves a quoted value open replaced by a row pyarrow
        refuses."""
        first = self._lines
        data = np.frombuffer(chunk, np.uint8)
        ends = np.flatnonzero(data == _LF)
        self._lines += len(ends) + (not chunk.endswith(b"\n"))
        # the blank lines (pyarrow skips them, and counts rows without them)
        width = np.diff(ends, prepend=-1)  # with the newline
        blank = width == 1
        if b"\r" in chunk:
            blank |= (width == 2) & (data[ends - 1] == _CR)
        if blank.any():
            self._blank.append(first + 1 + np.flatnonzero(blank))
        if self._header is None and (text := chunk.lstrip(b"\r\n")):
            # pyarrow skips blank lines before the header as it does after it
            end = text.find(b"\n")
            self._header = (first + chunk[:len(chunk) - len(text)].count(b"\n") + 1,
                            text[:end if end >= 0 else len(text)].rstrip(b"\r"))
        if b'"' not in chunk:
            return chunk
        if not chunk.endswith(b"\n"):
            ends = np.append(ends, len(data))
        starts = np.concatenate(([0], ends[:-1] + 1))
        unclosed = _unclosed_quotes(data, starts, ends)
        if not len(unclosed):
            return chunk
        parts, at = [], 0
        for i in unclosed.tolist():
            line = first + i + 1
            text = chunk[starts[i]:ends[i]].rstrip(b"\r").decode("utf-8", "replace")
            if self._header is not None and line == self._header[0]:
                raise InputError(f"{self.path}: cannot read: the header (line {line}) opens a "
                                 f"quoted value it does not close: {text!r}")
            parts += [chunk[at:starts[i]], b"%s%d" % (self.MARK, len(self.refused)),
                      b"," * self._header_fields()]
            self.refused.append((line, text))
            at = int(ends[i])
        parts.append(chunk[at:])
        return b"".join(parts)

    def line(self, row: int | None) -> int | None:
        """The line in the file of the row pyarrow numbers ``row``: pyarrow counts the
        lines it does not skip as blank."""
        if row is None or not self._blank:
            return row
        if len(self._blank) > 1:
            self._blank = [np.concatenate(self._blank)]
        blank, line = self._blank[0], row
        while (later := row + int(np.searchsorted(blank, line, "right"))) != line:
            line = later
        return line

    def refused_line(self, row: str | None) -> tuple[int, str] | None:
        """The line and text of a refused line, from the text of the row pyarrow made of
        it (None for any other row)."""
        mark = self.MARK.decode()
        if not row or not row.startswith(mark):
            return None
        number = row[len(mark):].split(",", 1)[0]
        return self.refused[int(number)] if number.isdigit() and int(number) < len(
            self.refused) else None

    def _header_fields(self) -> int:
        """How many fields the header has (as pyarrow reads it)."""
        if self._fields is None:
            import pyarrow as pa
            import pyarrow.csv as pcsv

            assert self._header is not None
            self._fields = pcsv.read_csv(
                pa.BufferReader(self._header[1] + b"\n"),
                read_options=pcsv.ReadOptions(autogenerate_column_names=True,
                                              use_threads=False)).num_columns
        return self._fields

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._inner.close()


_LF, _CR, _QUOTE, _COMMA = 0x0A, 0x0D, 0x22, 0x2C
#: the bytes a quote that opens a value comes after, by byte (a quote: of a doubled ``""``)
_OPENS_AFTER = np.isin(np.arange(256), [_COMMA, _LF, _QUOTE])
#: the bytes a quote that closes a value comes before
_CLOSES_BEFORE = np.isin(np.arange(256), [_COMMA, _LF, _CR, _QUOTE])
#: a CSV field as pyarrow parses one: quoted (``""`` a quote in it; after the closing
#: quote, text up to the next comma is kept as it is) or not (a quote in it is a quote)
_FIELD = r'(?:"(?:[^"]|"")*"(?:[^",\r\n][^,\r\n]*)?|(?:[^",\r\n][^,\r\n]*)?)'
#: a line in which every quoted value is closed (a lone CR ends a row, as in pyarrow)
_CLOSED_LINE = f"^{_FIELD}(?:[,\\r]{_FIELD})*\\n?$"


def _unclosed_quotes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indices of the lines (``data[starts[i]:ends[i]]``, ``ends`` at their newlines)
    that leave a quoted value open.

    Where each quote of a line opens a value at its start or closes one before a comma
    or the line's end (or is one of a doubled ``""``), quotes open and close values in
    turn, and a line leaves one open when its count of quotes is odd.  The other lines
    (a quote inside unquoted text, text after a closing quote) are matched against
    :data:`_CLOSED_LINE`, all at once.

    >>> lines = np.frombuffer(b'a,"b ""c"" d",e\\ne,"f\\n5" x,"y\\n', np.uint8)
    >>> _unclosed_quotes(lines, np.array([0, 16, 21]), np.array([15, 20, 28])).tolist()
    [1, 2]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    quotes = np.flatnonzero(data == _QUOTE)
    if not len(quotes):
        return np.empty(0, np.int64)
    upto = np.searchsorted(quotes, ends)  # the quotes before each line's end
    odd = np.diff(upto, prepend=0) % 2 == 1
    # a quote opens a value when the quotes before it in its line are even: its index in
    # the chunk, less one for each line of an odd count before it
    if odd.any():
        after_odd = np.bincount(upto[odd], minlength=len(quotes) + 1)[:len(quotes)]
        opening = (np.arange(len(quotes)) - np.cumsum(after_odd)) % 2 == 0
        opens, closes = quotes[opening], quotes[~opening]
    else:
        opens, closes = quotes[0::2], quotes[1::2]
    # the byte before an opening quote (a line's start reads as a comma), after a closing one
    before = data[opens - 1]
    before[:1] = np.where(opens[:1] == 0, _COMMA, before[:1])
    after = data[np.minimum(closes + 1, len(data) - 1)]
    after[-1:] = np.where(closes[-1:] == len(data) - 1, _LF, after[-1:])
    odd_one_out = np.concatenate((opens[~_OPENS_AFTER[before]], closes[~_CLOSES_BEFORE[after]]))
    if not len(odd_one_out):
        return np.flatnonzero(odd)
    unsure = np.unique(np.searchsorted(ends, odd_one_out))
    odd[unsure] = False
    offsets = np.append(starts, len(data)).astype(np.int64)
    lines = pa.Array.from_buffers(pa.large_binary(), len(starts), [
        None, pa.py_buffer(offsets), pa.py_buffer(data)]).take(pa.array(unsure))
    closed = pc.match_substring_regex(lines, _CLOSED_LINE).to_numpy(zero_copy_only=False)
    odd[unsure[~closed]] = True
    return np.flatnonzero(odd)


def _numbers_in_text(table: Any, as_text: dict[str, Any]) -> dict[str, Any]:
    """The columns of ``table`` (a CSV file's first block, or a whole file) that pyarrow
    read as text though most of their values are numbers (or true/false), and the type
    of those (int64, float64, bool), the columns of ``as_text`` left aside.  One word
    among numbers makes pyarrow read the whole column as text: read as numbers instead,
    the word stays text in its row, which becomes a dead letter only for a pattern that
    reads the column as a number, as when the word comes after the first block.  A
    column is judged by its first values first (of most columns of text, none is a
    number): only where most of those are numbers are all its values counted.

    >>> import pyarrow as pa
    >>> _numbers_in_text(pa.table({"amount": ["1.5", "abc", "2"], "card": ["c1", "c2", "7"],
    ...                            "n": ["1", None, "x"]}), {})
    {'amount': DataType(double)}
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    nulls = pa.array(pcsv.ConvertOptions().null_values, pa.string())

    def fitting(values: Any, category: str) -> int:
        return pc.sum(pc.match_substring_regex(values, _TEXT_OF[category])).as_py() or 0

    def kind(values: Any) -> Any:
        # the words pyarrow reads as null in numbers count as nulls, not as words
        count = len(values) - values.null_count - (
            pc.sum(pc.is_in(values, value_set=nulls)).as_py() or 0)
        numbers = fitting(values, "float")
        if 2 * numbers > count:
            return pa.int64() if fitting(values, "int") == numbers else pa.float64()
        return pa.bool_() if 2 * fitting(values, "bool") > count else None

    found: dict[str, Any] = {}
    for name, column in zip(table.schema.names, table.columns, strict=True):
        if name in as_text or not pa.types.is_string(column.type):
            continue
        if kind(column.slice(0, _FIRST_VALUES)) is not None and (
                (kind_of_all := kind(column)) is not None):
            found[name] = kind_of_all
    return found


def integers_beyond_int64(table: Any, as_text: dict[str, Any]) -> dict[str, Any]:
    """The columns of ``table`` (a CSV file's first block) pyarrow read as floats because
    they hold integers beyond int64 (account numbers of 20 digits), whole numbers all: read
    as floats, 12345678901234567890 and ...891 would be one number; as text they stay
    apart (a pattern reading them as numbers refuses them, as it would any number beyond
    2**53).  The columns of ``as_text`` left aside.

    >>> import pyarrow as pa
    >>> integers_beyond_int64(pa.table({"acct": [1.2345678901234567e19, 7.0],
    ...                                   "amount": [2.5e19, 0.5]}), {})
    {'acct': DataType(string)}
    """
    import pyarrow as pa

    found: dict[str, Any] = {}
    for name, column in zip(table.schema.names, table.columns, strict=True):
        if name in as_text or not pa.types.is_floating(column.type):
            continue
        values = column.to_numpy(zero_copy_only=False)
        finite = values[np.isfinite(values)]  # inf and nan are no integers of any size
        if (np.floor(finite) == finite).all() and (np.abs(finite) >= 2.0**63).any():
            found[name] = pa.string()
    return found


#: values of a CSV column looked at first to tell numbers in text from text
_FIRST_VALUES = 1024


#: text Python's int/float/bool reading of a CSV value accepts and Arrow's cast reads alike
#: (Arrow also reads hex digits, which Python's int() refuses: such a batch goes row by row)
_TEXT_OF = {"int": r"^\s*-?[0-9]+\s*$",
            "float": r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
                     r"|^\s*(?i:[+-]?(inf|infinity|nan))\s*$",
            "bool": r"^\s*(?i:true|false|1|0)\s*$"}


def _typed(table: pa.Table, as_text: dict[str, Any]
           ) -> tuple[pa.Table | None, list[dict[str, Any]] | None]:
    """A batch's columns read as text back to the types pyarrow first inferred for them:
    (table, None).  A value that is not of its column's type (a word among numbers) is null
    there and kept in the column's companion of text (:mod:`cep.nfa.stray_text`), so the
    batch stays columnar.  Only a number Arrow cannot hold in the column's type (an integer
    beyond int64) has the batch given as dicts, (None, dicts), converted value by value
    as the row-by-row reader converts them."""
    if not as_text:
        return table, None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    nulls = pa.array(pcsv.ConvertOptions().null_values, pa.string())
    converted = table
    for column, kind in as_text.items():
        i = converted.schema.get_field_index(column)
        text = converted.column(i)
        text = pc.if_else(pc.fill_null(pc.is_in(text, value_set=nulls), True),
                          pa.scalar(None, pa.string()), text)
        category = ("int" if pa.types.is_integer(kind) else "float" if pa.types.is_floating(kind)
                    else "bool" if pa.types.is_boolean(kind) else None)
        if category == "int" and pc.any(pc.and_not(
                pc.match_substring_regex(text, _TEXT_OF["float"]),
                pc.match_substring_regex(text, _TEXT_OF["int"]))).as_py():
            category, kind = "float", pa.float64()  # a fraction among integers: floats
        if category is not None:
            fits = pc.fill_null(pc.match_substring_regex(text, _TEXT_OF[category]), True)
            stray = None
            if not pc.all(fits, min_count=0).as_py():
                stray = pc.if_else(fits, pa.scalar(None, pa.string()), text)
                text = pc.if_else(fits, text, pa.scalar(None, pa.string()))
            try:  # " 7 " is 7, as Python's int() and pyarrow's own reading of numbers say
                text = pc.utf8_trim_whitespace(text).cast(kind)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None, _converted_rows(table, as_text)
            if stray is not None:
                converted = converted.append_column(PREFIX + column, stray)
        converted = converted.set_column(i, pa.field(column, text.type), text)
    return converted, None


def _converted_rows(table: pa.Table, as_text: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts, the text of ``as_text`` columns converted back to the
    type pyarrow first inferred for them where a value has one."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from cep.gcpause import paused_gc

    nulls = set(pcsv.ConvertOptions().null_values)
    convert: dict[str, Callable[[str], Any]] = {}
    for column, kind in as_text.items():
        if pa.types.is_integer(kind):
            convert[column] = int
        elif pa.types.is_floating(kind):
            convert[column] = float
        elif pa.types.is_boolean(kind):
            convert[column] = _csv_bool
    with paused_gc():  # a dict per event: no cycles, many objects
        rows = table.to_pylist()
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
    return rows


def _csv_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(text)


# -------------------------------------------------------------------------- JSON lines
#: the UTF-8 byte-order mark some tools write at the start of a text file
_BOM = b"\xef\xbb\xbf"
#: JSON deeper than this is a malformed record: events are flat records, and a deeper one
#: would exhaust Python's recursion later (pyarrow's parser crashes on far deeper ones)
MAX_NESTING = 100
#: bytes read from a JSON-lines file at a time (numpy finds the lines in them)
_READ = 1 << 23
#: pyarrow.json's block: the unit it parses in parallel (at least the longest line)
_JSON_BLOCK = 1 << 20
#: bytes.strip()'s whitespace: a line of nothing else is blank, not a record
_STRIPPED = np.zeros(256, np.bool_)
_STRIPPED[list(b" \t\n\r\x0b\x0c")] = True
#: JSON values after an object on one line (pyarrow makes each a row; Python refuses them)
_SEVERAL = re.compile(rb"\}[ \t\r\n]*(?:null[ \t\r\n]*)*\{")
#: pyarrow's report of where a parse failed
_ERROR_ROW = re.compile(r"in row (\d+)")
#: lines of a failing batch parsed at a time (at most) to find its failures one by one
_WINDOW = 4096
#: after this many failures in a batch, fewer lines than this per failure: Python reads the
#: rest of the batch's lines (a parse per failure would cost more)
_SPARSE = (16, 64)


class _NotColumnar(Exception):
    """The batch's good records cannot be one Arrow table with the values Python reads."""


@dataclass
class _Lines:
    """Records (non-blank lines) of a JSON-lines file, all in one buffer."""

    buf: bytes | bytearray
    #: where each record starts in ``buf`` and ends (after its line break, if any)
    starts: np.ndarray
    ends: np.ndarray
    #: each record's line number in the file, from 1
    numbers: np.ndarray
    #: the record index of the first
    first: int

    def line(self, i: int) -> bytes:
        return bytes(memoryview(self.buf)[self.starts[i]:self.ends[i]])

    def data(self, keep: np.ndarray) -> Any:
        """The bytes of records ``keep`` (ascending): a view when they lie together."""
        view = memoryview(self.buf)
        if not len(keep):
            return b""
        starts, ends = self.starts[keep], self.ends[keep]
        breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        if not len(breaks):
            return view[starts[0]:ends[-1]]
        lo = starts[np.concatenate(([0], breaks))].tolist()
        hi = ends[np.concatenate((breaks - 1, [len(keep) - 1]))].tolist()
        return b"".join(view[a:b] for a, b in zip(lo, hi, strict=True))


def _json_batches(path: Path, skip: int, batch_size: int) -> Iterator[FileBatch]:
    """JSON lines in batches of ``batch_size`` records (non-blank lines) after the first
    ``skip``, as FileSource cuts them."""
    name = str(path)
    reader = _JsonReader()
    try:
        stream = _open_stream(path)
    except Exception as err:
        raise InputError(f"{path}: cannot read: {err}") from err
    with stream:
        total: list[int] = []
        records = _records(stream, skip, batch_size, total)
        while True:
            try:
                lines = next(records, None)
            except InputError:
                raise
            except Exception as err:  # an I/O error
                raise InputError(f"{path}: cannot read: {err}") from err
            if lines is None:
                break
            yield _json_batch(name, lines, reader)
        # a compressed file that broke off: one record says so (counted, so a resume
        # after it does not say it again)
        broken = stream.broken(str(total[0])) if isinstance(stream, _UntilBroken) else None
        if broken is not None and skip <= total[0]:
            yield FileBatch(name, None, [], np.empty(0, np.int64), [broken], total[0] + 1)


def _open_stream(path: Path) -> Any:
    if _compressed(path):
        return _UntilBroken(path)
    return open(path, "rb")


#: bytes a compressed file is decompressed at a time (see _UntilBroken)
_BROKEN_READ = 1 << 16


def _gunzip() -> Any:
    """A decompressor of one gzip member."""
    import zlib

    return zlib.decompressobj(16 + zlib.MAX_WBITS)


class _Gunzipped:
    """A gzip file's bytes, decompressed a small read of the file at a time (members one
    after another, as gzip writes appended files); a truncated file or a damaged member
    raises once all that came before it has been read."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed by close())
        self._inflate = _gunzip()
        self._fresh = True  # the member has had no input yet

    def read(self, size: int) -> bytes:
        """What one small read of the file decompresses to (``size`` is not kept to: the
        reader, :class:`_UntilBroken`, takes what comes); empty at the end."""
        while True:
            raw = self._file.read(_BROKEN_READ // 8)
            if not raw:
                if not self._inflate.eof and not self._fresh:
                    raise EOFError("Truncated compressed stream")
                return b""
            out = self._inflated(raw)
            if out:
                return out

    def _inflated(self, raw: bytes) -> bytes:
        out = self._inflate.decompress(raw)
        self._fresh = False
        while self._inflate.eof and self._inflate.unused_data:  # the next member
            rest = self._inflate.unused_data
            self._inflate = _gunzip()
            out += self._inflate.decompress(rest)
        if self._inflate.eof:
            self._inflate = _gunzip()
            self._fresh = True
        return out

    def close(self) -> None:
        self._file.close()


class _UntilBroken(_ByteStream):
    """A compressed file read as far as it decompresses: a truncated or damaged stream ends
    where it breaks instead of failing the file, and :attr:`error` says why.  Only whole
    lines are passed on: the incomplete line at a break is held back (:attr:`partial`),
    since a CSV line cut short can parse as a row with a wrong last value.  :attr:`lines`
    counts the lines passed on.  A file object for pyarrow's readers and for
    :func:`_line_buffers`.

    >>> import gzip, random
    >>> draw = random.Random(7)
    >>> lines = b"".join(b"%d\\n" % draw.getrandbits(64) for _ in range(20000))
    >>> _ = Path("cut.csv.gz").write_bytes(gzip.compress(lines)[:-3000])  # a broken download
    >>> stream = _UntilBroken(Path("cut.csv.gz"))
    >>> read = b"".join(iter(lambda: stream.read(1 << 20), b""))
    >>> lines.startswith(read + stream.partial), read.endswith(b"\\n"), stream.error
    (True, True, 'Truncated compressed stream')
    """

    def __init__(self, path: Path) -> None:
        import pyarrow as pa

        # gzip through zlib, which hands back all it decompressed before a break (Arrow's
        # stream drops the whole read it failed in: hundreds of lines of a cut download)
        self._stream = (_Gunzipped(path) if path.suffix.lower() == ".gz"
                        else pa.input_stream(str(path), compression="detect"))
        self.error: str | None = None
        self.partial = b""
        self.lines = 0
        self._ready = b""  # whole lines read, not yet passed on
        self._held = b""  # the start of a line whose end has not been read yet
        self._ended = False
        self._position = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        while not self._ready and not self._ended:
            self._more()
        if size is None or size < 0:
            out, self._ready = self._ready, b""
        else:
            out, self._ready = self._ready[:size], self._ready[size:]
        self._position += len(out)
        return out

    def _more(self) -> None:
        try:
            # small reads: a break loses no more than what one read would have decompressed
            data = self._stream.read(_BROKEN_READ)
        except Exception as err:  # a truncated or damaged stream: it ends here
            self.error = str(err) or type(err).__name__
            self.partial, self._held, self._ended = self._held, b"", True
            return
        if not data:  # the end of the file: its last line may have no newline
            self._ended = True
            data, self._held = self._held, b""
        else:
            data = self._held + data
            cut = data.rfind(b"\n") + 1
            data, self._held = data[:cut], data[cut:]
        self.lines += data.count(b"\n")
        self._ready += data

    def close(self) -> None:
        self.closed = True
        self._stream.close()

    def broken(self, label: str) -> tuple[str, Malformed] | None:
        """The record that says where and why the file broke off (None: it did not)."""
        if self.error is None:
            return None
        text = self.partial.decode("utf-8", "replace").rstrip("\r\n")
        cut = f"; its last line, cut short, was {len(self.partial):,} bytes" if self.partial else ""
        return label, Malformed(text, f"the file breaks off after line {self.lines} "
                                f"({self.error}): what followed is lost{cut}")


def _line_buffers(stream: Any) -> Iterator[tuple[bytearray, np.ndarray]]:
    """The stream in buffers of whole lines: each buffer and where its lines end (just
    after their ``\\n``; the last line of the file may have none).  A UTF-8 byte-order mark
    at the start of the file is dropped."""
    tail = b""  # the start of a line whose end has not been read yet
    head = True
    while True:
        # read into a fresh buffer after the tail: the buffer is not copied to join them
        # (nor reused: batches keep views of it); a line longer than a read doubles it
        buf = bytearray(len(tail) + max(_READ, len(tail)))
        buf[:len(tail)] = tail
        size = len(tail) + _fill(stream, memoryview(buf)[len(tail):])
        del buf[size:]
        if head:
            head = False
            if buf.startswith(_BOM):
                del buf[:len(_BOM)]
                size -= len(_BOM)
        if size == len(tail):  # the end of the file
            if size:
                yield buf, np.array([size], np.int64)
            return
        breaks = np.flatnonzero(np.frombuffer(buf, np.uint8)[len(tail):] == 0x0A)
        if not len(breaks):
            tail = bytes(buf)
            continue
        ends = breaks + (len(tail) + 1)
        tail = bytes(buf[int(ends[-1]):])
        yield buf, ends


def _fill(stream: Any, view: memoryview) -> int:
    """Read into ``view`` until it is full or the stream ends; how many bytes were read."""
    done = 0
    while done < len(view):
        got = stream.readinto(view[done:])
        if not got:
            break
        done += got
    return done


def _records(stream: Any, skip: int, batch_size: int, total: list[int] | None = None
             ) -> Iterator[_Lines]:
    """Blocks of ``batch_size`` records (the last may be shorter) after the first ``skip``;
    at the end, ``total`` gets the number of records in the stream."""
    pieces: list[tuple[bytearray, np.ndarray, np.ndarray, np.ndarray]] = []
    pending = 0
    index = 0  # the record index of the first pending record
    number = 1  # the line number of the buffer's first line
    for buf, ends in _line_buffers(stream):
        starts = np.concatenate(([0], ends[:-1]))
        numbers = np.arange(number, number + len(ends), dtype=np.int64)
        number += len(ends)
        blank = _STRIPPED[np.frombuffer(buf, np.uint8)[starts]]
        for i in np.flatnonzero(blank).tolist():  # starts with whitespace: blank if only that
            blank[i] = not buf[starts[i]:ends[i]].strip()
        if blank.any():
            keep = ~blank
            starts, ends, numbers = starts[keep], ends[keep], numbers[keep]
        if skip:
            k = min(skip, len(starts))
            skip -= k
            index += k
            starts, ends, numbers = starts[k:], ends[k:], numbers[k:]
        while len(starts):
            take = min(batch_size - pending, len(starts))
            pieces.append((buf, starts[:take], ends[:take], numbers[:take]))
            pending += take
            starts, ends, numbers = starts[take:], ends[take:], numbers[take:]
            if pending == batch_size:
                yield _joined_lines(pieces, index)
                index += pending
                pieces, pending = [], 0
    if pieces:
        yield _joined_lines(pieces, index)
    if total is not None:
        total.append(index + pending)


def _joined_lines(pieces: list[tuple[bytearray, np.ndarray, np.ndarray, np.ndarray]],
                  first: int) -> _Lines:
    """One buffer of records from pieces of several (a batch across two reads)."""
    if len(pieces) == 1:
        buf, starts, ends, numbers = pieces[0]
        return _Lines(buf, starts, ends, numbers, first)
    parts, all_starts, all_ends = [], [], []
    size = 0
    for buf, starts, ends, _ in pieces:
        lo, hi = int(starts[0]), int(ends[-1])
        parts.append(memoryview(buf)[lo:hi])
        all_starts.append(starts - lo + size)
        all_ends.append(ends - lo + size)
        size += hi - lo
    return _Lines(b"".join(parts), np.concatenate(all_starts), np.concatenate(all_ends),
                  np.concatenate([p[3] for p in pieces]), first)


def _json_batch(name: str, lines: _Lines, reader: _JsonReader) -> FileBatch:
    """One batch of records: the good ones as a table, the bad ones malformed."""
    n = len(lines.starts)
    verdicts = _suspects(lines)
    # fields that held text among numbers before: such lines are set apart from the start
    apart = _lines_of_text_apart(lines, verdicts, reader) if reader.apart else None
    if apart is None:
        try:
            apart = reader.table(lines, verdicts)
        except _NotColumnar:
            apart = _lines_of_text_apart(lines, verdicts, reader)
            if apart is None:
                return _objects_batch(name, lines)
    table, keep = apart
    malformed = [(str(lines.first + i), verdicts[i]) for i in sorted(verdicts)]
    return FileBatch(name, table, None, keep.astype(np.int64) + lines.first, malformed,
                     lines.first + n)


def _lines_of_text_apart(lines: _Lines, verdicts: dict[int, Malformed], reader: _JsonReader
                ) -> tuple[pa.Table, np.ndarray] | None:
    """A batch pyarrow refuses because a field is a number on some lines and text on
    others (``"amount": "pending"``), as a table all the same: the lines where it is text
    are set apart (found in the text), the others parsed by pyarrow, and the few set apart
    read by Python, their text kept beside the column of numbers, null in it (see
    :mod:`cep.nfa.stray_text`), as CSV's words among numbers are.  The fields found so are
    set apart in the reader's later batches from the start.  The table and the records it
    holds; None when that is not what made pyarrow refuse the batch, or when the text is no
    rare exception (the batch is then read by Python, as before)."""
    import pyarrow as pa

    n = len(lines.starts)
    keep = _kept(n, verdicts)
    if not len(keep):
        return None
    text = _line_texts(lines)
    fields = list(reader.apart)
    apart = np.zeros(n, np.bool_)
    for field in fields:
        apart |= _quoted(text, field)
    table = None
    for _ in range(_MOST_FIELDS_APART + 1):
        rest = keep[~apart[keep]]
        try:
            table = reader._parse(lines, rest)
        except _NotColumnar:
            return None
        if table is not None:
            break
        found = _CHANGED.search(reader.refused)
        if found is None or found.group(1) in fields or len(fields) == _MOST_FIELDS_APART:
            return None
        field = found.group(1)
        quoted = _quoted(text, field)
        if not quoted[rest].any():
            return None
        apart |= quoted
        fields.append(field)
    if table is None:
        return None
    reader.apart = fields
    taken = keep[apart[keep]]
    if not len(taken):
        return table, rest
    if len(taken) * _RARE > len(keep):
        return None
    rows: list[dict[str, Any]] = []
    kept: list[int] = []
    for i in taken.tolist():
        value = _classify(lines.line(i), int(lines.numbers[i]))
        if isinstance(value, Malformed):
            verdicts[i] = value
        else:
            rows.append(value)
            kept.append(i)
    alike = _like_table(rows, table, fields)
    if alike is None:
        return None
    both = pa.concat_tables([table, alike], promote_options="default")
    records = np.concatenate([rest, np.array(kept, np.int64)])
    order = np.argsort(records, kind="stable")
    return both.take(pa.array(order)), records[order]


def _quoted(text: Any, field: str) -> np.ndarray:
    """Which records (``text``, see :func:`_line_texts`) give ``field`` a text value (or
    may: a nested object's field of that name matches too, and is then read as it is)."""
    import pyarrow.compute as pc

    return pc.match_substring_regex(text, f'"{_key_pattern({field})}"{_WS}:{_WS}"').to_numpy(
        zero_copy_only=False)


#: fields of one batch that may be numbers and text at once (more: read by Python)
_MOST_FIELDS_APART = 4
#: lines holding such text, at most one in this many (more: read by Python)
_RARE = 8
#: pyarrow.json's report of a top-level field of two types
_CHANGED = re.compile(r"Column\(/([^/()]+)\) changed from (?:number to string|string to number)")


def _line_texts(lines: _Lines) -> Any:
    """The records as one Arrow binary array (for regular expressions over them)."""
    import pyarrow as pa

    data = lines.data(np.arange(len(lines.starts)))
    offsets = np.concatenate(([0], np.cumsum(lines.ends - lines.starts))).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(lines.starts), [
        None, pa.py_buffer(offsets), pa.py_buffer(bytes(data))])


def _like_table(rows: list[dict[str, Any]], table: pa.Table, fields: list[str]
                ) -> pa.Table | None:
    """``rows`` (events Python read) as a table of ``table``'s columns, the text of
    ``fields`` in their companions; None when they do not fit it as they are (a field it
    does not have, an integer in a column of floats, a value of another type)."""
    import pyarrow as pa

    names = set(table.column_names)
    if any(k not in names for row in rows for k in row):
        return None
    columns: dict[str, Any] = {}
    for f in table.schema:
        values = [row.get(f.name) for row in rows]
        if f.name in fields:
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
                return None  # the column is text: the numbers are the exception
            words = [v if isinstance(v, str) else None for v in values]
            values = [None if isinstance(v, str) else v for v in values]
            columns[PREFIX + f.name] = pa.array(words, pa.string())
        if pa.types.is_floating(f.type) and any(type(v) is int for v in values):
            return None
        try:
            columns[f.name] = pa.array(values, f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            return None
    return pa.table(columns)


def _objects_batch(name: str, lines: _Lines) -> FileBatch:
    """A batch read line by line with Python's json (as FileSource reads every line): a
    table all the same when it is one but for text among a field's numbers or true/false
    (on many lines, or beside true/false: see :func:`cep.nfa.stray_text.table_of_dicts`),
    else its dicts."""
    from cep.gcpause import paused_gc
    objects: list[dict[str, Any]] = []
    rows: list[int] = []
    malformed: list[tuple[str, Malformed]] = []
    with paused_gc():  # a dict per event: no cycles, many objects
        for i, number in enumerate(lines.numbers.tolist()):
            value = _classify(lines.line(i), number)
            if isinstance(value, Malformed):
                malformed.append((str(lines.first + i), value))
            else:
                objects.append(value)
                rows.append(lines.first + i)
    table = table_of_dicts(objects)
    return FileBatch(name, table, None if table is not None else objects,
                     np.array(rows, np.int64), malformed, lines.first + len(lines.starts))


def _suspects(lines: _Lines) -> dict[int, Malformed]:
    """The records found malformed before pyarrow sees them: Python reads every line that
    is not ``{...}``, that could nest deeper than MAX_NESTING (pyarrow's parser would
    crash on a deep enough one) or that is not UTF-8 (pyarrow would keep its bytes)."""
    buf, starts, ends = lines.buf, lines.starts, lines.ends
    if not len(starts):
        return {}
    data = np.frombuffer(buf, np.uint8)
    last = ends - 1
    last = last - (data[last] == 0x0A)  # the last byte before the line break
    last = np.maximum(last - ((data[np.maximum(last, starts)] == 0x0D) & (last > starts)), starts)
    look = ~((data[starts] == 0x7B) & (data[last] == 0x7D) & (last > starts))
    lengths = ends - starts
    long = lengths > 2 * MAX_NESTING  # MAX_NESTING levels take twice as many bytes
    if long.any():
        lo, hi = int(starts[0]), int(ends[-1])
        part = data[lo:hi]
        brackets = (part == 0x7B) | (part == 0x5B)
        counts = np.add.reduceat(brackets, starts - lo, dtype=np.int64)
        look |= long & (counts > MAX_NESTING)
    if not buf.isascii():
        look |= _not_utf8(lines)
    verdicts: dict[int, Malformed] = {}
    for i in np.flatnonzero(look).tolist():
        value = _classify(lines.line(i), int(lines.numbers[i]))
        if not isinstance(value, dict):
            verdicts[i] = value
    return verdicts


def _not_utf8(lines: _Lines) -> np.ndarray:
    """Which records are not UTF-8 (only lines with bytes beyond ASCII are tried alone)."""
    starts, ends = lines.starts, lines.ends
    lo, hi = int(starts[0]), int(ends[-1])
    bad = np.zeros(len(starts), np.bool_)
    try:
        str(memoryview(lines.buf)[lo:hi], "utf-8")
        return bad
    except UnicodeDecodeError:
        pass
    high = np.flatnonzero(np.frombuffer(lines.buf, np.uint8)[lo:hi] >= 0x80) + lo
    for i in np.unique(np.searchsorted(starts, high, "right") - 1).tolist():
        try:
            lines.line(i).decode()
        except UnicodeDecodeError:
            bad[i] = True
    return bad


class _JsonReader:
    """pyarrow.json over batches of lines, read as Python's json reads them."""

    def __init__(self) -> None:
        #: columns pyarrow read as timestamps before, read as text since (their type with
        #: every timestamp in it text): later batches are parsed once, not twice
        self.text_types: dict[str, Any] = {}
        #: fields that held text among numbers (see _lines_of_text_apart), in a batch before
        self.apart: list[str] = []
        #: why pyarrow refused the records _parse was last given
        self.refused = ""

    def table(self, lines: _Lines, verdicts: dict[int, Malformed]) -> tuple[pa.Table, np.ndarray]:
        """The table of every record not in ``verdicts`` and their indices; records that
        turn out malformed are added to ``verdicts``.  Raises _NotColumnar."""
        keep = _kept(len(lines.starts), verdicts)
        table = self._parse(lines, keep)
        if table is None:
            self._isolate(lines, verdicts)
            keep = _kept(len(lines.starts), verdicts)
            table = self._parse(lines, keep)
            if table is None:
                raise _NotColumnar
        return table, keep

    def _parse(self, lines: _Lines, keep: np.ndarray) -> pa.Table | None:
        """Records ``keep`` as a table with Python's values, or None if pyarrow refuses them
        (or finds more values than lines).  Raises _NotColumnar."""
        import pyarrow as pa

        if not len(keep):
            return pa.table({})
        data = lines.data(keep)
        longest = int((lines.ends[keep] - lines.starts[keep]).max())
        hinted = self.text_types
        try:
            table = _read_json(data, hinted, longest)
        except pa.ArrowException as err:
            self.refused = str(err)
            if not hinted:
                return None
            try:  # the text columns of earlier batches are not text in this one
                table = _read_json(data, {}, longest)
            except pa.ArrowException as again:
                self.refused = str(again)
                return None
            hinted = self.text_types = {}
        if table.num_rows != len(keep):
            return None
        # pyarrow reads ISO-8601 text as timestamps: such columns again, as text
        for _ in range(8):
            stamped = {f.name: _as_text(f.type) for f in table.schema if _has_timestamp(f.type)}
            if not stamped:
                break
            hinted = self.text_types = {**hinted, **stamped}
            try:
                table = _read_json(data, hinted, longest)
            except pa.ArrowException as err:
                raise _NotColumnar from err
        else:
            raise _NotColumnar
        if _long_ints_among_floats(table, lines, keep, data):
            raise _NotColumnar
        return _in_record_order(table, lines.data(keep[:1])) if hinted else table

    def _isolate(self, lines: _Lines, verdicts: dict[int, Malformed]) -> None:
        """Find the malformed records that made pyarrow refuse the batch: parse a window of
        lines in one block, which stops at the first failure and says in which row; read
        that line with Python and go on after it.  Where failures are dense, Python reads
        the rest of the lines (faster than a parse per failure).  Raises _NotColumnar when a
        failure is no malformed record (values of different types, a value only Python
        reads)."""
        import pyarrow as pa

        n = len(lines.starts)
        keep = _kept(n, verdicts)
        position = 0  # the records before it are good or in verdicts
        failures = 0
        while (j := int(np.searchsorted(keep, position))) < len(keep):
            if failures >= _SPARSE[0] and position < _SPARSE[1] * failures:
                for i in keep[j:].tolist():
                    value = _classify(lines.line(i), int(lines.numbers[i]))
                    if not isinstance(value, dict):
                        verdicts[i] = value
                return
            # a window a few times the lines seen per failure: pyarrow reads all it is given
            window = _WINDOW if not failures else min(_WINDOW, max(256, 4 * position // failures))
            part = keep[j:j + window]
            data = lines.data(part)
            try:
                rows, row = _read_json(data, {}, len(data)).num_rows, None
            except pa.ArrowException as err:
                found = _ERROR_ROW.search(str(err))
                if found is None or int(found.group(1)) >= len(part):
                    raise _NotColumnar from err
                rows, row = 0, int(found.group(1))
            if row is None and rows == len(part):
                position = int(part[-1]) + 1
                continue
            failures += 1
            if row is not None:
                i = int(part[row])
                value = _classify(lines.line(i), int(lines.numbers[i]))
                if not isinstance(value, dict):
                    verdicts[i] = value
                    position = i + 1
                    continue
            # more rows than lines, or a good line refused: a line holding several values
            # (pyarrow makes a row of each, shifting its row numbers), or else a good line
            # that does not fit the lines before it
            if not self._several(lines, part if row is None else part[:row + 1], verdicts):
                raise _NotColumnar
            keep = _kept(n, verdicts)

    @staticmethod
    def _several(lines: _Lines, part: np.ndarray, verdicts: dict[int, Malformed]) -> bool:
        """Mark the lines of ``part`` that hold several JSON values; were there any?"""
        found = False
        for i in part.tolist():
            line = lines.line(i)
            if _SEVERAL.search(line):
                value = _classify(line, int(lines.numbers[i]))
                if not isinstance(value, dict):
                    verdicts[i] = value
                    found = True
        return found


def _kept(n: int, verdicts: dict[int, Malformed]) -> np.ndarray:
    """The indices of ``n`` records not in ``verdicts``."""
    if not verdicts:
        return np.arange(n, dtype=np.int64)
    keep = np.ones(n, np.bool_)
    keep[list(verdicts)] = False
    return np.flatnonzero(keep)


def _in_record_order(table: pa.Table, first: Any) -> pa.Table:
    """``table``'s columns in the order of the fields of its first record (``first``, a
    JSON line's bytes or buffer), then the others: pyarrow puts columns whose types it was given (text that
    looks like times) first.

    >>> import pyarrow as pa
    >>> _in_record_order(pa.table({"ts": ["x"], "user": ["a"], "v": [1]}),
    ...                  b'{"user": "a", "ts": "x"}').column_names
    ['user', 'ts', 'v']
    """
    try:
        fields = list(json.loads(bytes(first)))
    except (ValueError, TypeError, RecursionError):
        return table
    names = table.column_names
    order = [f for f in fields if f in names] + [n for n in names if n not in fields]
    return table if order == names else table.select(order)


def _read_json(data: Any, text_types: dict[str, Any], longest: int) -> pa.Table:
    """pyarrow.json over ``data``; ``text_types`` fixes the types of some columns (the rest
    are inferred).  With ``longest`` at least the data's size, it is parsed in one block:
    a failure then names the row from the start of the data."""
    import pyarrow as pa
    import pyarrow.json as pj

    one_block = longest >= len(data)
    options = pj.ReadOptions(use_threads=not one_block,
                             block_size=max(_JSON_BLOCK, longest + 1))
    parse = pj.ParseOptions(explicit_schema=pa.schema(list(text_types.items())),
                            unexpected_field_behavior="infer") if text_types else None
    return pj.read_json(pa.BufferReader(pa.py_buffer(data)), read_options=options,
                        parse_options=parse)


def _has_timestamp(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_timestamp(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_timestamp(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_timestamp(kind.value_type)
    return False


def _as_text(kind: Any) -> Any:
    """The part of ``kind`` that holds timestamps, with text for them (pyarrow infers the
    rest: a struct's other fields, as it would anyway)."""
    import pyarrow as pa

    if pa.types.is_timestamp(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _as_text(f.type)) for f in kind
                          if _has_timestamp(f.type)])
    return pa.list_(_as_text(kind.value_type))


_WS = r"[ \t\r\n]*"


def _long_ints_among_floats(table: pa.Table, lines: _Lines, keep: np.ndarray, data: Any
                            ) -> bool:
    """Could a column of floats hold an integer of 16 digits or more (which Python reads
    exactly, pyarrow as a float that may not hold it)?  An integer among floats that a
    float holds (``5`` beside ``5.5``, as JavaScript writes 5.0) is read as a float, as
    pandas and Spark read it.  Looked for in the text (``data``, the bytes of records
    ``keep``): a key of such a column followed by such an integer (a key of that name
    elsewhere may match too: then the batch is read by Python, which is never wrong).  For
    columns of floats at the top, only the lines where one is that large and whole are
    looked at."""
    import pyarrow as pa
    import pyarrow.compute as pc

    top: list[str] = []
    keys: set[str] = set()
    lists: set[str] = set()

    def walk(kind: Any, key: str, depth: int) -> bool:
        if pa.types.is_floating(kind):
            if depth > 1:
                return True  # floats in lists of lists: not looked for, read by Python
            (lists if depth else keys).add(key)
        elif pa.types.is_struct(kind):
            return any(walk(f.type, f.name, 0) for f in kind)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return walk(kind.value_type, key, depth + 1)
        return False

    for f in table.schema:
        if pa.types.is_floating(f.type):
            top.append(f.name)
        elif walk(f.type, f.name, 0):
            return True
    if top and not keys and not lists:
        whole = np.zeros(table.num_rows, np.bool_)
        for name in top:
            column = table.column(name)
            whole |= pc.fill_null(pc.and_(pc.equal(column, pc.floor(column)),
                                          pc.greater_equal(pc.abs(column), _LONG)),
                                  False).to_numpy(zero_copy_only=False)
        if not whole.any():
            return False  # an integer would be a whole number
        where = np.flatnonzero(whole)
        if len(where) <= len(whole) // 8:
            data = lines.data(keep[where])
    keys.update(top)
    if not keys and not lists:
        return False
    patterns = []
    if keys:
        patterns.append(f'"{_key_pattern(keys)}"{_WS}:{_WS}-?[0-9]{{16,}}{_WS}[,}}]')
    if lists:
        patterns.append(f'"{_key_pattern(lists)}"{_WS}:{_WS}\\[(?:[^\\]]*?,)?{_WS}-?[0-9]{{16,}}{_WS}[,\\]]')
    text = pa.Array.from_buffers(pa.large_binary(), 1, [
        None, pa.py_buffer(np.array([0, len(data)], np.int64)), pa.py_buffer(data)])
    return bool(pc.match_substring_regex(text, "|".join(patterns))[0].as_py())


#: the least integer of 16 digits: from there on float64 does not hold every integer
_LONG = 10.0**15


def _key_pattern(keys: set[str]) -> str:
    """A regular expression (RE2's) for the keys as JSON writes them (non-ASCII raw or
    escaped); ASCII punctuation is written as ``\\xHH``, which RE2 reads alike in its
    UTF-8 and Latin-1 modes."""
    forms = {json.dumps(k, ensure_ascii=a)[1:-1] for k in keys for a in (True, False)}
    return "(?:" + "|".join("".join(c if not c.isascii() or c.isalnum() else f"\\x{ord(c):02x}"
                                     for c in f) for f in sorted(forms)) + ")"


def _classify(line: bytes, number: int) -> dict[str, Any] | Malformed:
    """The JSON line ``line`` (``number`` counts from 1) read as FileSource reads it: the
    event, or why it is not one."""
    try:
        value = json.loads(line.decode())
    except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError
        return _malformed(line, number)
    if type(value) is not dict or (len(line) > 2 * MAX_NESTING and _nested_deeper(line, value)):
        return _malformed(line, number)
    return value


def _malformed(line: bytes, number: int) -> Malformed:
    """Why the JSON line ``line`` (``number`` counts from 1) is not an event."""
    try:
        text = line.decode()
    except UnicodeDecodeError as err:
        return Malformed(line.decode("utf-8", "replace").rstrip("\r\n"),
                         f"not UTF-8: byte 0x{line[err.start]:02x} at column {err.start + 1} "
                         f"(line {number})")
    text = text.rstrip("\r\n")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        return Malformed(text, f"not JSON: {err.msg} (line {number}, column {err.colno})")
    except RecursionError:
        return Malformed(text, f"not readable: JSON nested too deeply (line {number})")
    if type(value) is dict:
        return Malformed(text, f"not readable: JSON nested more than {MAX_NESTING} levels "
                         f"deep (line {number})")
    return Malformed(text, f"a JSON {_json_kind(value)}, not an object (line {number})")


def _nested_deeper(line: bytes, value: Any) -> bool:
    """Does ``value`` (parsed from ``line``) nest deeper than MAX_NESTING?  Counting
    brackets in the line first settles most lines."""
    if line.count(b"{") + line.count(b"[") <= MAX_NESTING:
        return False
    level = [(value, 1)]
    while level:
        item, depth = level.pop()
        if depth > MAX_NESTING:
            return True
        children = item.values() if isinstance(item, dict) else item
        level.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")
