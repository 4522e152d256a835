"""A batch of events as every engine takes it: rows, one key and one time per row.

Rows are Arrow columns (a ``pyarrow.Table``: files, tables), a pandas DataFrame (as
the user or Spark gave it), or, for events given as Python objects, an object array
holding them.  Keys are dense codes with the
key value of each code, so a batch of a million events with ten thousand cards holds
ten thousand Python key objects, not a million.  Arrival order is the position in the
batch; engines sort by (key, time, arrival) themselves.

>>> import numpy as np
>>> batch = Events.of([{"v": 1}, {"v": 2}], Keys.of_values(["a", "b"]), np.array([5, 6]))
>>> len(batch), batch.keys.value(1), batch.objects([1])
(2, 'b', [{'v': 2}])
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cep.expr import field_of, value_of
from cep.gcpause import paused_gc
from cep.nfa.distinct import distinct_inverse
from cep.nfa.stray_text import with_stray_text, without_stray_text
from cep.nfa.table_names import has_column


class BadValue(Exception):
    """A value the pattern cannot read at a position of the batch (an engine turns it into
    an error that names the field and the stages reading it)."""

    def __init__(self, row: int, what: str) -> None:
        super().__init__(row, what)
        self.row = row
        self.what = what


class Keys:
    """One key per event: ``codes`` (int64, one per event) index ``values`` (a key value per
    code; a value may appear under more than one code after :meth:`concat`).

    >>> keys = Keys.of_values(["x", "y", "x"])
    >>> keys.codes.tolist(), keys.values
    ([0, 1, 0], ['x', 'y'])
    """

    __slots__ = ("codes", "values", "shared", "lock")

    def __init__(self, codes: np.ndarray, values: list[Any]) -> None:
        self.codes = codes
        self.values = values
        #: what the first engine fed these keys worked out (its key ids, the batch's
        #: order), for the next engines of the same keys (the rules of one job); see
        #: ColumnarEngine._key_ids
        self.shared: Any = None
        #: held by the engine working ``shared`` out: the rules of a job run side by side,
        #: and the others wait to take it rather than work it out again
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.codes)

    def value(self, i: int) -> Any:
        """The key of event ``i``."""
        return self.values[int(self.codes[i])]

    def take(self, idx: np.ndarray) -> Keys:
        return Keys(self.codes[idx], self.values)

    def unique(self) -> Keys:
        """The same keys with one code per distinct value (after :meth:`concat` a value may
        have several).

        >>> Keys.concat([Keys.of_values(["a"]), Keys.of_values(["a"])]).unique().codes.tolist()
        [0, 0]
        """
        index: dict[Any, int] = {}
        remap = np.fromiter((index.setdefault(v, len(index)) for v in self.values), np.int64,
                            len(self.values))
        if len(index) == len(self.values):
            return self
        return Keys(remap[self.codes], list(index))

    def used(self) -> Keys:
        """The same keys holding only the values some event has (a slice holds them all).

        >>> Keys.of_values(["a", "b", "c"]).take(np.array([2])).used().values
        ['c']
        """
        present, codes = distinct_inverse(self.codes)
        if len(present) == len(self.values):
            return self
        return Keys(codes,
                    [self.values[i] for i in present.tolist()])

    @staticmethod
    def none(n: int) -> Keys:
        """No key: every event in one group, whose key is None.

        >>> Keys.none(2).codes.tolist(), Keys.none(2).values
        ([0, 0], [None])
        """
        return Keys(np.zeros(n, np.int64), [None])

    @staticmethod
    def of_values(values: Any) -> Keys:
        """Keys from one value per event (a list, a numpy or object array; tuples stay whole)."""
        import pandas as pd

        if isinstance(values, np.ndarray) and values.ndim == 1:
            array = values if values.dtype.kind in "iufbUS" else values.astype(object)
        else:
            array = object_array(values)
        if array.dtype.kind in "US":
            array = array.astype(object)
        codes, uniques = pd.factorize(array, use_na_sentinel=True)
        found = list(uniques.tolist() if hasattr(uniques, "tolist") else uniques)
        if (codes < 0).any():  # None (no key) as a group of its own
            codes = np.where(codes < 0, len(found), codes)
            found.append(None)
        return Keys(codes.astype(np.int64, copy=False), found)

    @staticmethod
    def of_arrow(column: Any) -> Keys:
        """Keys from an Arrow column: dictionary-encoded, so a Python object per distinct key."""
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
                or pa.types.is_integer(arr.type) or pa.types.is_binary(arr.type)
                # through numpy a timestamp would lose its time zone: Arrow keeps it
                or pa.types.is_timestamp(arr.type)):
            # floats, booleans, times: the same factorisation as Python values get
            return Keys.of_values(arr.to_numpy(zero_copy_only=False))
        encoded = pc.dictionary_encode(arr, null_encoding="encode")
        indices = encoded.indices
        codes = indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        distinct = encoded.dictionary
        # integers without a null, and text: through numpy (15x faster than Arrow's
        # to_pylist for 7,000 strings); a timestamp keeps its zone through Arrow alone
        plain = (pa.types.is_integer(distinct.type) and distinct.null_count == 0) or (
            pa.types.is_string(distinct.type) or pa.types.is_large_string(distinct.type)
            or pa.types.is_binary(distinct.type))
        return Keys(codes, distinct.to_numpy(zero_copy_only=False).tolist() if plain
                    else distinct.to_pylist())

    @staticmethod
    def composite(parts: Sequence[Keys]) -> Keys:
        """One key per event from several: the tuple of the parts' values.

        >>> k = Keys.composite([Keys.of_values(["a", "a", "b"]), Keys.of_values([1, 2, 1])])
        >>> [k.value(i) for i in range(3)]
        [('a', 1), ('a', 2), ('b', 1)]
        """
        if len(parts) == 1:
            return parts[0]
        stacked = np.stack([p.codes for p in parts], axis=1)
        uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
        # first-appearance order, as factorising Python tuples gives
        first = np.full(len(uniq), len(inverse), np.int64)
        np.minimum.at(first, inverse.reshape(-1), np.arange(len(inverse)))
        rank = np.empty(len(uniq), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        values = [None] * len(uniq)
        for u, row in enumerate(uniq.tolist()):
            values[rank[u]] = tuple(p.values[c] for p, c in zip(parts, row, strict=True))
        return Keys(rank[inverse.reshape(-1)], values)

    @staticmethod
    def concat(parts: Sequence[Keys]) -> Keys:
        """The keys of batches one after another (codes moved past the earlier values).
        Parts over the same list of values (an engine's outputs over many batches: its
        key list, only ever appended to) share one copy of it.

        >>> k = Keys.of_values(["a", "b"])
        >>> both = Keys.concat([k, k.take(np.array([1]))])
        >>> both.codes.tolist(), both.values
        ([0, 1, 1], ['a', 'b'])
        """
        if len(parts) == 1:
            return parts[0]
        # a part of few events over a long list brings the values it uses, not the list:
        # the tail of a batch released with the next one (the rules' key ids look each
        # value up: a released chunk's list was twice as long as its distinct keys), the
        # outputs of a job's rules, each over its engine's keys
        parts = [p.used() if len(p.values) > 2 * len(p.codes) + 64 else p for p in parts]
        lists: dict[int, list[Any]] = {}
        for p in parts:
            lists.setdefault(id(p.values), p.values)
        base, values = {}, []
        for key, held in lists.items():
            base[key] = len(values)
            values.extend(held)
        codes = [p.codes + base[id(p.values)] for p in parts]
        return Keys(np.concatenate(codes) if codes else np.empty(0, np.int64), values)


class Events:
    """Rows with their keys and times (int64 milliseconds); see the module docstring."""

    __slots__ = ("rows", "keys", "times", "cache")

    def __init__(self, rows: Any, keys: Keys, times: np.ndarray,
                 cache: dict[Any, Any] | None = None) -> None:
        self.rows = rows
        self.keys = keys
        self.times = times
        #: what engines worked out from these rows (columns as float64, see
        #: ColumnarEngine._column), shared by the batches of the same rows (the rules of
        #: one job each get their own batch of one released chunk)
        self.cache: dict[Any, Any] = {} if cache is None else cache

    @staticmethod
    def of(rows: Any, keys: Keys | None = None, times: Any = None) -> Events:
        """A batch of ``rows`` (a pyarrow Table, or Python events); no key and times 0, 1, 2...
        unless given."""
        if not (_is_table(rows) or _is_frame(rows)
                or (isinstance(rows, np.ndarray) and rows.dtype == object)):
            rows = object_array(rows)
        n = rows.num_rows if _is_table(rows) else len(rows)
        stamps = np.arange(n, dtype=np.int64) if times is None else np.asarray(times, np.int64)
        return Events(rows, keys if keys is not None else Keys.none(n), stamps)

    @staticmethod
    def one(event: Any, key: Any, time: int) -> Events:
        """A batch of one event (a Matcher's or a test harness's step)."""
        return Events(object_array([event]), Keys(np.zeros(1, np.int64), [key]),
                      np.array([time], np.int64))

    def __len__(self) -> int:
        return len(self.times)

    @property
    def n(self) -> int:
        return len(self.times)

    @property
    def is_table(self) -> bool:
        """Are the rows Arrow columns (else Python objects)?"""
        return _is_table(self.rows)

    @property
    def is_frame(self) -> bool:
        """Are the rows a pandas DataFrame?"""
        return _is_frame(self.rows)

    def column(self, name: str) -> Any:
        """The values of field ``name``: an Arrow column, a pandas Series, or a list of
        Python values; null where an event has no such field (a table without the column:
        all null).

        >>> Events.of([{"v": 1}, {"w": 2}]).column("v")
        [1, None]
        """
        if self.is_table:
            if not has_column(self.rows, name):
                import pyarrow as pa

                return pa.nulls(self.n)
            return self.rows.column(name)
        if _is_frame(self.rows):
            if name not in self.rows.columns:
                import pyarrow as pa

                return pa.nulls(self.n)
            return self.rows[name]
        return [value_of(e, name) for e in self.rows]

    def has_field(self, name: str) -> bool:
        """Does any event hold field ``name`` (see :func:`has_field`)?

        >>> Events.of([{"v": 1}, {"w": 2}]).has_field("w"), Events.of([{"v": 1}]).has_field("w")
        (True, False)
        """
        return has_field(self.rows, name)

    def objects(self, idx: Any = None) -> list[Any]:
        """The events at ``idx`` (all when None) as Python objects: dicts for Arrow rows."""
        return row_objects(self.rows, idx)

    def take(self, idx: np.ndarray) -> Events:
        """The events at positions ``idx``, in that order."""
        idx = np.asarray(idx, np.int64)
        return Events(take_rows(self.rows, idx), self.keys.take(idx), self.times[idx])

    @staticmethod
    def concat(parts: Sequence[Events]) -> Events:
        """Batches one after another (rows as :func:`concat_rows` joins them)."""
        if len(parts) == 1:
            return parts[0]
        return Events(concat_rows([p.rows for p in parts]), Keys.concat([p.keys for p in parts]),
                      np.concatenate([p.times for p in parts]))


class EntryRefs:
    """Events held by reference: the batches they are in (``sources``, :class:`Events`
    of Arrow rows) and, per entry, which batch (``which``) and which row of it (``at``).
    The outputs of an engine (:class:`~cep.nfa.found.Found`) and the events a snapshot
    of its state holds are such references: taking the events is left to whoever needs
    them (a file sink builds its table from the batches on its writer thread,
    :func:`cep.runtime.tables.match_table`; a checkpoint takes each event once for all
    the rules of a job, :func:`cep.runtime.job.combine`), and the rules of a job share
    the batches' caches (see :attr:`Events.cache`).

    >>> import pyarrow as pa
    >>> batch = Events.of(pa.table({"v": [1, 2, 3]}))
    >>> refs = EntryRefs([batch], np.array([0, 0]), np.array([2, 0]))
    >>> refs.taken().column("v").to_pylist(), refs.take(np.array([1])).at.tolist()
    ([3, 1], [0])
    """

    __slots__ = ("sources", "which", "at")

    def __init__(self, sources: Sequence[Events], which: np.ndarray, at: np.ndarray) -> None:
        self.sources = list(sources)
        self.which = np.asarray(which, np.int64)
        self.at = np.asarray(at, np.int64)

    def __len__(self) -> int:
        return len(self.at)

    def take(self, entries: np.ndarray) -> EntryRefs:
        """The references of ``entries``, in that order."""
        return EntryRefs(self.sources, self.which[entries], self.at[entries])

    @staticmethod
    def concat(parts: Sequence[EntryRefs]) -> EntryRefs:
        """References one after another (their sources joined, each batch once)."""
        if len(parts) == 1:
            return parts[0]
        place: dict[int, int] = {}
        sources: list[Events] = []
        which = []
        for p in parts:
            remap = np.zeros(max(len(p.sources), 1), np.int64)
            for j, src in enumerate(p.sources):
                k = place.get(id(src))
                if k is None:
                    k = place[id(src)] = len(sources)
                    sources.append(src)
                remap[j] = k
            which.append(remap[p.which])
        return EntryRefs(sources, np.concatenate(which), np.concatenate([p.at for p in parts]))

    def groups(self) -> list[tuple[Events, np.ndarray]]:
        """Per source holding entries: the source and its entries (positions here)."""
        if len(self.sources) == 1:
            return [(self.sources[0], np.arange(len(self.which), dtype=np.int64))]
        # few sources: small integers, which numpy sorts stably by radix, in one pass
        small = self.which.astype(np.int16) if len(self.sources) < 1 << 15 else self.which
        order = np.argsort(small, kind="stable")
        cuts = np.flatnonzero(np.diff(self.which[order])) + 1
        return [(self.sources[int(self.which[g[0]])], g) for g in np.split(order, cuts) if len(g)]

    def taken(self) -> Any:
        """The events, taken from their batches, in entry order (an empty object array
        for none)."""
        groups = self.groups()
        if not groups:
            return np.empty(0, object)
        if len(groups) == 1:
            src, _ = groups[0]
            return take_rows(src.rows, self.at)
        joined = concat_rows([take_rows(src.rows, self.at[g]) for src, g in groups])
        back = in_entry_order(groups)
        return joined if back is None else take_rows(joined, back)


def in_entry_order(groups: Sequence[tuple[Any, np.ndarray]]) -> np.ndarray | None:
    """Where each entry's value is among values taken group after group (see
    :meth:`EntryRefs.groups`), to put them back in entry order; None when they are in
    it already.

    >>> in_entry_order([(None, np.array([1])), (None, np.array([0, 2]))]).tolist()
    [1, 0, 2]
    """
    order = np.concatenate([entries for _, entries in groups])
    if (order[1:] > order[:-1]).all():
        return None
    back = np.empty_like(order)
    back[order] = np.arange(len(order), dtype=np.int64)
    return back


def pool_refs(refs: Sequence[EntryRefs], whole: bool = False
              ) -> tuple[Any, list[np.ndarray]] | None:
    """The events ``refs`` hold, each taken once from its batch (batches told apart by
    their rows: the rules of a job each have a batch of their own over one table), as
    one table, and each reference's positions in it; None when there are none or the
    batches' columns do not join.  With ``whole``, a batch most of whose rows are
    asked for goes whole (one call less per batch, for some rows more).

    >>> import pyarrow as pa
    >>> t = pa.table({"v": [1, 2, 3]})
    >>> a, b = Events.of(t), Events.of(t)
    >>> table, at = pool_refs([EntryRefs([a], [0], [2]), EntryRefs([b], [0, 0], [0, 2])])
    >>> table.column("v").to_pylist(), [p.tolist() for p in at]
    ([1, 3], [[1], [0, 1]])
    """
    grouped = [r.groups() for r in refs]
    rows: dict[int, Any] = {}
    marks: dict[int, np.ndarray] = {}
    for r, groups in zip(refs, grouped, strict=True):
        for src, entries in groups:
            key = id(src.rows)
            if key not in marks:
                rows[key] = src.rows
                marks[key] = np.zeros(count_rows(src.rows), np.bool_)
            marks[key][r.at[entries]] = True
    # a row's place among its batch's rows asked for is its rank
    rank: dict[int, np.ndarray] = {}
    start: dict[int, int] = {}
    parts = []
    offset = 0
    for key, mark in marks.items():
        if whole and 2 * int(np.count_nonzero(mark)) >= len(mark):
            rank[key] = np.arange(len(mark), dtype=np.int64)
            parts.append(rows[key])
        else:
            rank[key] = np.cumsum(mark, dtype=np.int64) - 1
            parts.append(take_rows(rows[key], np.flatnonzero(mark)))
        start[key] = offset
        offset += count_rows(parts[-1])
    if not parts:
        return None
    table = concat_rows(parts)
    if not _is_table(table):
        return None
    positions = []
    for r, groups in zip(refs, grouped, strict=True):
        at = np.empty(len(r), np.int64)
        for src, entries in groups:
            key = id(src.rows)
            at[entries] = start[key] + rank[key][r.at[entries]]
        positions.append(at)
    return table, positions

# ----------------------------------------------------------------- rows of any kind
def count_rows(rows: Any) -> int:
    """How many rows: of a table, a frame, an object array or :class:`EntryRefs`."""
    return rows.num_rows if _is_table(rows) else len(rows)


def row_objects(rows: Any, idx: Any = None) -> list[Any]:
    """The rows at ``idx`` (all when None) as Python objects: dicts for Arrow and pandas rows.

    >>> import pyarrow as pa
    >>> row_objects(pa.table({"v": [1, 2, 3]}), [2, 0])
    [{'v': 3}, {'v': 1}]
    """
    if _is_table(rows):
        table = rows if idx is None else rows.take(np.asarray(idx, np.int64))
        return table_dicts(table)
    if _is_frame(rows):
        frame = rows if idx is None else rows.iloc[np.asarray(idx, np.int64)]
        return frame.to_dict("records")
    return list(rows) if idx is None else rows[np.asarray(idx, np.int64)].tolist()


def table_dicts(table: Any) -> list[dict[str, Any]]:
    """The rows of an Arrow table as dicts, as ``Table.to_pylist`` makes them, about twice
    as fast: numbers and booleans without nulls, and text, go through numpy's
    ``tolist`` (one C call a column), the other columns through Arrow's.  Text a column
    of numbers held is in its field again (:mod:`cep.nfa.stray_text`).

    >>> import pyarrow as pa
    >>> table_dicts(pa.table({"v": [1, None], "w": ["x", None], "f": [0.5, 1.0]}))
    [{'v': 1, 'w': 'x', 'f': 0.5}, {'v': None, 'w': None, 'f': 1.0}]
    """
    import pyarrow as pa

    whole = table
    table = without_stray_text(table)
    if not table.num_columns:
        return [{} for _ in range(table.num_rows)]
    columns = []
    for column in table.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            columns.append(_texts_list(column))
            continue
        plain = column.null_count == 0 and (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind))
        columns.append(column.to_numpy().tolist() if plain else column.to_pylist())
    with paused_gc():  # a dict per row
        rows = row_dicts(table.column_names, columns)
    return with_stray_text(rows, whole) if whole is not table else rows


def _texts_list(column: Any) -> list[Any]:
    """A text column as a list of str (None for null).  Text repeats (a merchant, a
    country): then each distinct text is made once and the list shares it, as the
    events of a list of dicts usually do, instead of one str per row.

    >>> import pyarrow as pa
    >>> _texts_list(pa.chunked_array([["a", "b", None, "a"] * 3]))[:4]
    ['a', 'b', None, 'a']
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(column)
    # a look at the first rows first: encoding a column of ids would cost twice its list
    if n >= 64 and 4 * pc.count_distinct(column.slice(0, 1024)).as_py() <= min(n, 1024):
        codes = pc.dictionary_encode(column.combine_chunks() if isinstance(
            column, pa.ChunkedArray) else column)
        if 4 * len(codes.dictionary) <= n:
            texts = object_array([*codes.dictionary.to_pylist(), None])
            at = codes.indices.fill_null(len(codes.dictionary)).to_numpy(zero_copy_only=False)
            return texts[at].tolist()
    return column.to_numpy(zero_copy_only=False).tolist()


def row_dicts(names: Sequence[str], columns: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """A dict per row of ``columns`` (lists of equal length), keyed by ``names``.

    >>> row_dicts(["a", "b"], [[1, 2], ["x", "y"]])
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'y'}]
    """
    return _dicts_of_width(len(names))(tuple(names), columns)


@functools.lru_cache(maxsize=64)
def _dicts_of_width(width: int) -> Callable[[tuple[str, ...], Sequence[Sequence[Any]]],
                                             list[Any]]:
    """A function making a dict per row of ``width`` columns with a dict display
    (``{n0: v0, n1: v1}``), twice as fast as ``dict(zip(names, values))`` per row (0.06 s
    against 0.13 s for 370k rows of 4 columns).  The code is made from ``width`` alone,
    as :func:`collections.namedtuple` once made its classes: no name or value of the
    data is in it.

    >>> _dicts_of_width(2)(("a", "b"), [[1, 2], ["x", "y"]])
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'y'}]
    """
    if width > 64:  # a display that long gains nothing
        return lambda names, columns: [dict(zip(names, values, strict=True))
                                       for values in zip(*columns, strict=True)]
    ns = [f"n{i}" for i in range(width)]
    vs = [f"v{i}" for i in range(width)]
    display = ", ".join(f"{n}: {v}" for n, v in zip(ns, vs, strict=True))
    source = (f"def dicts(names, columns):\n"
              f"    {''.join(n + ', ' for n in ns)}= names\n"
              f"    return [{{{display}}} for {''.join(v + ', ' for v in vs)}in zip(*columns)]\n")
    space: dict[str, Any] = {}
    exec(source, {}, space)  # noqa: S102 - the text above holds only n0.. and v0..
    return space["dicts"]  # type: ignore[no-any-return]


def checked_frame(frame: Any) -> Any:
    """A pandas frame of events as the engines read one: column names as text (Arrow's
    are; a column named ``5`` is field ``"5"``), sparse columns dense; a name given to
    two columns is an InputError (which would the field be?).

    >>> import pandas as pd
    >>> checked_frame(pd.DataFrame({5: [1]})).columns.tolist()
    ['5']
    """
    from cep.errors import InputError

    names = [str(c) for c in frame.columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"the frame names {', '.join(map(repr, twice))} more than once "
                         "among its columns: give each column a name of its own")
    if names != list(frame.columns):
        frame = frame.set_axis(names, axis=1)
    sparse = [c for c in names if type(frame[c].dtype).__name__ == "SparseDtype"]
    if sparse:
        frame = frame.assign(**{c: frame[c].sparse.to_dense() for c in sparse})
    return frame


def without_views(table: Any) -> Any:
    """``table`` with its view columns (``string_view``, ``binary_view``: Arrow's newer
    layouts, which its ``take`` and other kernels do not all read yet) as plain ones.

    >>> import pyarrow as pa
    >>> without_views(pa.table({"s": pa.array(["x"], pa.string_view())})).schema.types
    [DataType(string)]
    """
    import pyarrow as pa

    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    if not any(f.type in plain for f in table.schema):
        return table
    return table.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in table.schema],
                                metadata=table.schema.metadata))


def take_rows(rows: Any, idx: np.ndarray) -> Any:
    """The rows at positions ``idx``, in that order, held as they were."""
    if _is_table(rows):
        return rows.take(idx)
    if _is_frame(rows):
        return rows.iloc[idx].reset_index(drop=True)
    return rows[idx]


def arrow_schema(rows: Any) -> Any:
    """The Arrow schema of an Arrow table or pandas frame of events (a frame's as Arrow
    reads it); None for Python events or a frame Arrow cannot type.

    >>> import pyarrow as pa
    >>> arrow_schema(pa.table({"v": [1]})).names, arrow_schema([{"v": 1}])
    (['v'], None)
    """
    if _is_table(rows):
        return rows.schema
    if _is_frame(rows):
        import pyarrow as pa

        try:
            return pa.Schema.from_pandas(rows, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
    return None


def slice_rows(rows: Any, start: int, stop: int) -> Any:
    """The rows ``start:stop``, held as they were (a table's slice shares its buffers).

    >>> import pyarrow as pa
    >>> slice_rows(pa.table({"v": [1, 2, 3]}), 1, 3).column("v").to_pylist()
    [2, 3]
    """
    if _is_table(rows):
        return rows.slice(start, stop - start)
    if _is_frame(rows):
        return rows.iloc[start:stop].reset_index(drop=True)
    return rows[start:stop]


def one_chunk(rows: Any) -> Any:
    """Arrow rows with each column in one piece (other rows as they are).  ``take`` from a
    table of several chunks joins them first, every time: ten times dearer than from one
    (0.9 ms against 0.09 ms for 50 of 65,536 rows of 36 columns), and every rule of a
    job takes the events of its matches from the same batch.

    >>> import pyarrow as pa
    >>> t = pa.concat_tables([pa.table({"v": [1]}), pa.table({"v": [2]})])
    >>> one_chunk(t).column("v").num_chunks
    1
    """
    if _is_table(rows) and any(c.num_chunks > 1 for c in rows.columns):
        return rows.combine_chunks()
    return rows


def concat_rows(parts: Sequence[Any]) -> Any:
    """Rows one after another; Arrow rows stay Arrow when their columns agree (a column
    missing or all null in some parts is filled with nulls, but no value changes type: an
    int64 column and a double one do not join, so 1 never comes out as 1.0), frames stay a
    frame, else every row becomes a Python object.

    >>> import pyarrow as pa
    >>> type(concat_rows([pa.table({"v": [1]}), pa.table({"v": [None]})])).__name__
    'Table'
    >>> concat_rows([pa.table({"v": [1]}), pa.table({"v": [2.5]})]).tolist()
    [{'v': 1}, {'v': 2.5}]
    """
    if len(parts) == 1:
        return parts[0]
    if all(_is_table(p) for p in parts):
        import pyarrow as pa

        try:
            return pa.concat_tables(list(parts), promote_options="default")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass
        joined = _fractions_as_floats(parts)
        if joined is not None:
            return joined
    elif all(_is_frame(p) for p in parts):
        import pandas as pd

        return pd.concat(list(parts), ignore_index=True)
    return object_array([r for p in parts for r in row_objects(p)])


def _fractions_as_floats(parts: Sequence[Any]) -> Any:
    """Tables whose columns differ only in kinds of fractions (float32, float64, decimal:
    files of one history written by different tools) joined, those columns as float64,
    the numbers the engines and match ids read them as; None when other columns differ.
    (Made Python objects instead, a decimal and a float in one column were JSON text in
    the outputs, with other match ids than when the batches came apart.)

    >>> import pyarrow as pa
    >>> from decimal import Decimal
    >>> _fractions_as_floats([pa.table({"v": [1.5]}),
    ...                       pa.table({"v": pa.array([Decimal("2.25")])})]).column("v").type
    DataType(double)
    """
    import pyarrow as pa

    kinds: dict[str, set[Any]] = {}
    for part in parts:
        for field in part.schema:
            kinds.setdefault(field.name, set()).add(field.type)

    def fraction(t: Any) -> bool:
        return bool(pa.types.is_floating(t) or pa.types.is_decimal(t))

    mixed = [name for name, types in kinds.items()
             if len(types - {pa.null()}) > 1 and all(fraction(t) for t in types - {pa.null()})]
    if not mixed:
        return None
    cast = []
    for part in parts:
        for name in mixed:
            at = part.schema.get_field_index(name)
            if at >= 0:
                part = part.set_column(at, name, part.column(at).cast(pa.float64()))
        cast.append(part)
    try:
        return pa.concat_tables(cast, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _is_table(rows: Any) -> bool:
    return type(rows).__module__.startswith("pyarrow") and hasattr(rows, "num_rows")


def is_table(rows: Any) -> bool:
    """Are the rows an Arrow table (else a frame or Python objects)?

    >>> import pyarrow as pa
    >>> is_table(pa.table({"v": [1]})), is_table([{"v": 1}])
    (True, False)
    """
    return _is_table(rows)


def _is_frame(rows: Any) -> bool:
    return type(rows).__module__.startswith("pandas") and hasattr(rows, "iloc")


def column_keys(column: Any) -> tuple[Keys, np.ndarray] | None:
    """The keys of one Arrow or pandas column, read a column at a time, and where it is
    null (NaN too); None for a column whose values are read row by row instead (nested
    values, which may not be hashable; a column Arrow cannot type).

    >>> import pyarrow as pa
    >>> keys, null = column_keys(pa.array(["a", None, "a"]))
    >>> keys.codes.tolist(), null.tolist()
    ([0, 1, 0], [False, True, False])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not hasattr(column, "type"):  # pandas
        try:
            column = pa.array(column, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                OverflowError):  # integers beyond 64 bits, values of mixed types
            return None
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_nested(kind) or pa.types.is_null(kind):
        return None
    null = pc.is_null(column, nan_is_null=True).to_numpy(zero_copy_only=False)
    return Keys.of_arrow(column), null


def has_field(rows: Any, name: str) -> bool:
    """Does any of ``rows`` hold field ``name`` (a table or frame: has the column)?"""
    if _is_table(rows):
        return has_column(rows, name)
    if _is_frame(rows):
        return name in rows.columns
    for row in rows:
        try:
            field_of(row, name)
            return True
        except KeyError:
            continue
    return False


def object_array(values: Sequence[Any]) -> np.ndarray:
    """Values as a one-dimensional object array: tuples and lists stay whole values (as
    rows of Python objects, and as keys).

    >>> object_array([("a", 1), ("b", 2)]).shape
    (2,)
    """
    return np.fromiter(values, dtype=object, count=len(values))


def rows_bytes(rows: Any) -> int:
    """Bytes the rows of a batch take: Arrow's count for a table, pandas' for a frame, a
    shallow estimate for Python events (each event and, for dicts, its values).

    >>> import pyarrow as pa
    >>> rows_bytes(pa.table({"v": [1, 2]}))
    16
    """
    module = type(rows).__module__
    if module.startswith("pyarrow"):
        return int(rows.nbytes)
    if module.startswith("pandas"):
        return int(rows.memory_usage(index=False, deep=True).sum())
    return sum(sys.getsizeof(r) + (sum(map(sys.getsizeof, r.values()))
                                   if isinstance(r, dict) else 0) for r in rows)
