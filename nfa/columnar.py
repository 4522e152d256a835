"""The numba engine: columnar batches in, matches out, many keys per kernel call.

Python's part is bookkeeping around the kernel: mapping keys to dense ids,
strings to dictionary codes, columns to one float64 matrix; sorting each batch
once by (key, time, arrival); turning the kernel's output (tails of event
paths) into :class:`Match` objects; and dropping event paths and batches no
live partial match can reach any more.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import islice, repeat
from typing import Any

import numpy as np

from cep.errors import CEPError, InputError, SkipStrategyError
from cep.expr import BOOLEAN, NUMERIC, STRING, field_of
from cep.nfa import compile_aside, kernel
from cep.nfa.bytecode import (
    EVENT_TIME,
    Derived,
    Program,
    apply_text,
    compile_conditions,
    null_tested_only,
    stages_reading,
)
from cep.nfa.capacity import DEFAULT_CAP, Cap, too_many
from cep.nfa.column_conditions import condition_key, eval_columns
from cep.nfa.compiler import compile_pattern
from cep.nfa.distinct import distinct
from cep.nfa.events import (
    BadValue,
    EntryRefs,
    Events,
    Keys,
    object_array,
    rows_bytes,
    take_rows,
)
from cep.nfa.found import Found
from cep.nfa.kernel import (
    A_PROCEED,
    A_TAKE,
    C_DROPPED,
    CAP_DROP_NEWEST,
    CAP_DROP_OLDEST,
    CAP_FAIL,
    ERR_CAP,
    ERR_SKIP_FIRST,
    ERR_SKIP_MISSING,
    N_ROW,
    NO_START,
    O_EXPIRY,
    O_KEY,
    O_KIND,
    O_NODE,
    OP_SLOT,
    OP_TRUE,
    R_PREV,
    R_SID_SEQ,
    R_START,
    R_STATE,
)
from cep.nfa.model import NFA, StateKind
from cep.nfa.ordering import key_time_order
from cep.nfa.screening import BEYOND_FLOAT64
from cep.nfa.skip_codes import skip_code
from cep.nfa.stray_text import PREFIX, stray_text
from cep.pattern import Pattern
from cep.times import time_value_millis

_KINDS = {
    StateKind.START: 0,
    StateKind.NORMAL: 1,
    StateKind.FINAL: 2,
    StateKind.STOP: 3,
    StateKind.PENDING: 4,
}
_ACTIONS = {"TAKE": 0, "IGNORE": 1, "PROCEED": 2}
NO_TIME = np.iinfo(np.int64).min
_CAP_POLICIES = {"fail": CAP_FAIL, "drop_oldest": CAP_DROP_OLDEST,
                 "drop_newest": CAP_DROP_NEWEST}


def _is_null(v: Any) -> bool:
    if v is None or (isinstance(v, float) and v != v):
        return True
    name = type(v).__name__
    return name in ("NAType", "NaTType")


def _nullness(values: Any) -> np.ndarray:
    """NaN where a value is null (None, NaN, NA, NaT), 0.0 elsewhere, for any type."""
    module = type(values).__module__
    if module.startswith("pyarrow"):
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        null = pc.is_null(arr, nan_is_null=pa.types.is_floating(arr.type))
        mask = null.to_numpy(zero_copy_only=False)
    elif module.startswith("pandas"):
        mask = values.isna().to_numpy()
    else:
        mask = np.fromiter((_is_null(v) for v in values), np.bool_, len(values))
    return np.where(mask, np.nan, 0.0)


def _arrow_millis(arr: Any) -> np.ndarray:
    """An Arrow timestamp, date or duration array as float64 milliseconds (epoch
    milliseconds for times), rounded down as the reference engine does; NaN for null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_date32(t):
        per_unit, scale = 86_400_000, 1  # days
    elif pa.types.is_date64(t):
        per_unit, scale = 1, 1
    else:
        per_unit, scale = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000),
                           "ns": (1, 1_000_000)}[t.unit]
    raw = pc.cast(arr, pa.int64() if not pa.types.is_date32(t) else pa.int32())
    null = raw.is_null().to_numpy(zero_copy_only=False)
    ints = raw.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    out = (ints * per_unit // scale).astype(np.float64)
    out[null] = np.nan
    return out


def _first_valid(arr: Any) -> int:
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return int(np.argmax(valid)) if valid.any() else 0


def _cached(cache: dict[Any, Any] | None, key: Any, make: Callable[[], Any]) -> Any:
    """``make()``, once per ``cache`` (a batch's, shared by the rules of one job) and
    ``key``; what it raises is not kept."""
    if cache is None:
        return make()
    found = cache.get(key)
    if found is None:
        found = cache[key] = make()
    return found


def _numbered(known: Mapping[Any, int], values: list[Any], first: int
              ) -> tuple[np.ndarray, list[Any]]:
    """The number ``known`` gives each of ``values``; the values it lacks numbered
    ``first``, ``first + 1``... in order of first appearance (a value given twice, or
    under two forms such as 1 and 1.0, one number), and those values.  Dict lookups in C
    (``map``), not a Python step per value: a stream of ever new keys, 100 rules over 8
    key fields, spent 0.5 s of a 12 s job so.

    >>> ids, new = _numbered({"a": 0}, ["b", "a", "c", "b"], 1)
    >>> ids.tolist(), new
    ([1, 0, 2, 1], ['b', 'c'])
    """
    ids = np.fromiter(map(known.get, values, repeat(-1)), np.int64, len(values))
    missing = np.flatnonzero(ids < 0)
    if not len(missing):
        return ids, []
    unknown = [values[j] for j in missing.tolist()]
    new = list(dict.fromkeys(unknown))
    fresh = dict(zip(new, range(first, first + len(new)), strict=True))
    ids[missing] = np.fromiter(map(fresh.__getitem__, unknown), np.int64, len(missing))
    return ids, new


def _arrow_type(values: Any) -> str:
    """The Arrow type of a column's values (a dictionary's values' type), as a string."""
    import pyarrow as pa

    kind = values.type
    return str(kind.value_type if pa.types.is_dictionary(kind) else kind)


def _arrow_floats(values: Any) -> np.ndarray:
    """A numeric, boolean or time Arrow column as float64 (NaN for null; times and
    durations in milliseconds); BadValue for a column of another type.  Read-only: the
    rules of one job share it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count == len(arr):
        # nothing but nulls, whatever the column's type (text amounts with an empty one:
        # the screening refused the texts, and left the nulls, null for every engine)
        out = np.full(len(arr), np.nan)
    elif (pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type)
            or pa.types.is_date(arr.type)):
        out = _arrow_millis(arr)
    elif not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
              or pa.types.is_decimal(arr.type) or pa.types.is_boolean(arr.type)
              or pa.types.is_null(arr.type)):
        raise BadValue(_first_valid(arr), f"holds {arr.type} values")
    else:
        out = pc.cast(arr, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if (pa.types.is_integer(arr.type) and arr.type.bit_width == 64) or (
                pa.types.is_decimal(arr.type) and arr.type.precision - arr.type.scale > 15):
            _exactly_floats(out, arr)
    out.flags.writeable = False
    return out


#: the largest magnitude below which float64, the kernel's numbers, holds every integer
_EXACT = 2.0**53


def _exactly_floats(floats: np.ndarray, values: Any = None, base: int = 0) -> None:
    """BadValue for the first of ``floats`` (``values`` as float64) beyond 2**53 that is an
    integer or a decimal: float64 cannot tell it from its neighbours (2**62 + 1 would
    equal 2**62), so the numba engine would compare it wrong; the reference engine reads
    it exactly.  Floats that large were approximate before they came."""
    with np.errstate(invalid="ignore"):
        beyond = np.flatnonzero(np.abs(floats) > _EXACT)
    if not len(beyond):
        return
    j = int(beyond[0])
    shown = values[j] if values is not None else None
    if hasattr(shown, "as_py"):
        shown = shown.as_py()
    elif hasattr(shown, "item"):  # numpy's
        shown = shown.item()
    raise BadValue(base + j, f"is {shown if shown is not None else int(floats[j])}, "
                   f"{BEYOND_FLOAT64}")


def _arrow_texts(values: Any) -> tuple[list[str], np.ndarray]:
    """A text Arrow column as its distinct strings and, per value, the index of its
    string (the number of strings for null); BadValue for a column of another type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count == len(arr):  # nulls alone, whatever the type (see _arrow_floats)
        idx = np.zeros(len(arr), np.int64)
        idx.flags.writeable = False
        return [], idx
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise BadValue(_first_valid(arr), f"holds {arr.type} values")
    arr = pc.dictionary_encode(arr)
    # through numpy: 15x faster than Arrow's to_pylist for thousands of strings
    texts = arr.dictionary.to_numpy(zero_copy_only=False).tolist()
    idx = arr.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False).astype(np.int64)
    idx.flags.writeable = False
    return texts, idx


def schema_of_values(values: Mapping[str, Any]) -> dict[str, str]:
    """Column types from sample Python values (first non-null value of each column)."""
    out: dict[str, str] = {}
    for name, v in values.items():
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            out[name] = BOOLEAN
        elif isinstance(v, str):
            out[name] = STRING
        elif v is None or isinstance(v, (dict, list, tuple, set, bytes)):
            continue  # no kernel type: the pattern's own types decide, the values are refused
        else:
            out[name] = NUMERIC
    return out


#: non-null values of a field looked at to type it (:func:`schema_of_rows`)
TYPE_SAMPLE = 101


def schema_of_rows(rows: Sequence[Any], pattern: Pattern) -> dict[str, str]:
    """Column types for Python events (dicts or objects): each field the pattern reads typed
    by most of its first non-null values (up to :data:`TYPE_SAMPLE`; what the pattern
    implies - compared with text: a string - when half of them or more are of that
    type), else by what the pattern implies, else numeric.  A missing or misfit value is
    reported later, by row and stage: one odd value, even the first, is that row's dead
    letter, not a refusal of the whole input.

    >>> from cep import Pattern, col
    >>> p = Pattern.begin("a").where(col("s") == "x").next("b").where(col("v") > 1)
    >>> schema_of_rows([{"s": None, "v": 2}], p)
    {'s': 'string', 'v': 'numeric'}
    >>> schema_of_rows([{"s": "x", "v": "oops"}, {"s": "y", "v": 2}, {"s": "z", "v": 3}], p)
    {'s': 'string', 'v': 'numeric'}
    """
    from collections import Counter

    from cep.nfa.bytecode import referenced_columns, schema_from_pattern

    implied = schema_from_pattern(pattern)
    out: dict[str, str] = {}
    for name in referenced_columns(pattern):
        kinds: Counter[str] = Counter()
        seen = 0
        for row in rows:
            try:
                value = field_of(row, name)
            except KeyError:
                continue
            if _is_null(value):
                continue
            kinds.update(schema_of_values({name: value}).values())
            seen += 1
            if seen == TYPE_SAMPLE:
                break
        wanted = implied.get(name)
        if not kinds:
            out[name] = wanted or NUMERIC
        elif wanted is not None and 2 * kinds[wanted] >= sum(kinds.values()):
            out[name] = wanted
        else:
            out[name] = kinds.most_common(1)[0][0]
    return out


def _value_index(values: np.ndarray) -> Any:
    """A pandas index of key values (an object array): of int64 when they are all
    integers (a key of card numbers: hashing numbers, not Python objects, finds them
    several times faster), else of the objects.

    >>> _value_index(np.array([7, 3], object)).dtype, _value_index(np.array([7, "a"], object)).dtype
    (dtype('int64'), dtype('O'))
    """
    import pandas as pd

    if len(values) and pd.api.types.infer_dtype(values, skipna=False) == "integer":
        try:
            return pd.Index(values.astype(np.int64))
        except OverflowError:  # beyond 64 bits: as Python objects
            pass
    return pd.Index(values, dtype=object, tupleize_cols=False)


def schema_of_arrow(schema: Any) -> dict[str, str]:
    import pyarrow as pa

    out: dict[str, str] = {}
    for f in schema:
        t = f.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_boolean(t):
            out[f.name] = BOOLEAN
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            out[f.name] = STRING
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            out[f.name] = NUMERIC
        elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t):
            out[f.name] = NUMERIC
    return out


def schema_of_pandas(frame: Any) -> dict[str, str]:
    import pyarrow as pa

    # the whole frame: on an empty copy object (string) columns would type as null
    try:
        return schema_of_arrow(pa.Schema.from_pandas(frame, preserve_index=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass  # a column of mixed types: type each column by itself
    out: dict[str, str] = {}
    for name in frame.columns:
        column = frame[name]
        try:
            out.update(schema_of_arrow(pa.Schema.from_pandas(column.to_frame(),
                                                             preserve_index=False)))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            first = column.dropna()
            out.update(schema_of_values({name: first.iloc[0] if len(first) else None}))
    return out


@dataclass
class _Retained:
    first_row: int
    end_row: int
    batch: Events
    #: collections it has been through whole (see ColumnarEngine._collect)
    age: int = 0


def _places(node_rows: np.ndarray, batch: _Retained, kept: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The event-path nodes reaching events of ``batch`` (their indices among
    ``node_rows``, the row id of each node) and the place of each one's event among
    ``kept`` (ascending positions in the batch); None when ``kept`` misses one."""
    mine = np.flatnonzero((node_rows >= batch.first_row) & (node_rows < batch.end_row))
    at = node_rows[mine] - batch.first_row
    where = np.searchsorted(kept, at)
    if len(at) and (where.max() >= len(kept) or (kept[where] != at).any()):
        return None
    return mine, where


def rows_of(retained: list[_Retained], rows: np.ndarray) -> Any:
    """The events of global row ids ``rows``, in that order, held as the retained batches
    hold them (joined as :func:`~cep.nfa.events.concat_rows` joins rows)."""
    return entry_refs(retained, rows).taken()


def entry_refs(retained: list[_Retained], rows: np.ndarray) -> EntryRefs:
    """Global row ids ``rows`` (any order) as references into the retained batches that
    hold them (ascending, disjoint ranges of ids).  Only the batches from the one holding
    the lowest row to the one holding the highest are looked at: a Matcher retains a
    batch per event, thousands, and its matches are in the last few."""
    if len(rows):
        lo = bisect.bisect_right(retained, int(rows.min()), key=_end_row)
        hi = bisect.bisect_right(retained, int(rows.max()), key=_end_row) + 1
        retained = retained[lo:hi]
    ends = np.array([kept.end_row for kept in retained], np.int64)
    where = np.searchsorted(ends, rows, side="right")
    # the batches used, numbered in order: counted over the few batches, not sorted
    used = np.flatnonzero(np.bincount(where, minlength=len(retained)))
    number = np.zeros(len(retained) + 1, np.int64)
    number[used] = np.arange(len(used))
    which = number[where]
    firsts = np.array([retained[i].first_row for i in used.tolist()], np.int64)
    return EntryRefs([retained[i].batch for i in used.tolist()], which, rows - firsts[which])


def _end_row(kept: _Retained) -> int:
    return kept.end_row


def _first_rank(keys: Any, sorted_ids: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per key id, the rank of the key's first event in the batch; worked out once for
    every engine given the same key ids and order (the rules of one job)."""
    shared = keys.shared if isinstance(keys, Keys) else None
    if not (isinstance(shared, _SharedKeys) and shared.order is not None
            and shared.order[1] is sorted_ids):
        shared = None  # this engine's own key ids: nothing to share
    if shared is not None and shared.rank is not None:
        return shared.rank
    starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))
    first = np.minimum.reduceat(order, starts)
    rank = np.empty(int(sorted_ids[-1]) + 1, np.int64)
    rank[sorted_ids[starts][np.argsort(first)]] = np.arange(len(starts))
    if shared is not None:
        shared.rank = rank
    return rank


def _in_order(source: np.ndarray, order: np.ndarray, keys: Any, batch: Events,
              name: str) -> np.ndarray:
    """``source[order]``, gathered once for every engine of the same keys and order when
    ``source`` is the batch's own column (the rules of one job read the same fields; a
    column of an engine's string codes is its own).  Kept in the batch's cache, which
    the job empties once its rules are done with the batch."""
    shared = keys.shared if isinstance(keys, Keys) else None
    if not (isinstance(shared, _SharedKeys) and shared.order is not None
            and shared.order[0] is order and batch.cache.get(("float", name)) is source):
        return source[order]
    slot = ("in order", name, id(order))
    held = batch.cache.get(slot)
    if held is None or held[0] is not order:  # the entry holds order: its id is not reused
        held = batch.cache[slot] = (order, source[order])
    return held[1]


#: no deadline (next_deadline's sentinel)
_NEVER = np.iinfo(np.int64).max

#: the key-list token of an engine that knows no key: all such engines hold the same
_NO_KEYS = object()


@dataclass
class _SharedKeys:
    """What the first engine fed a :class:`Keys` worked out, for the engines after it (the
    rules of one job): the ids, the batch's order, and its key list before and after.

    An engine's key list has a token, replaced whenever the list changes: engines holding
    the same token hold the same keys, so the rules of one job, fed the same keys from
    the start, take the first one's ids without comparing their lists."""

    #: the first engine's token before these keys, and its key count then
    before: object
    before_size: int
    #: its token after, and its key list (appended to later: entries past ``size`` are
    #: newer than this batch)
    after: object
    values: list[Any]
    size: int
    ids: np.ndarray
    times: np.ndarray | None = None
    order: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: see _first_rank
    rank: np.ndarray | None = None


#: the per-key arrays, and what a key with nothing pending holds in each
_KEY_ARRAYS = ("key_time", "key_off", "key_len", "key_coff", "key_clen")
_KEY_FILL = (NO_TIME, 0, -1, 0, 0)


class ColumnarEngine:
    """Runs one compiled pattern for many keys; state persists across batches."""

    def __init__(
        self,
        pattern: Pattern,
        schema: Mapping[str, str],
        nfa: NFA | None = None,
        *,
        timeouts: bool = True,
        cap: Cap = DEFAULT_CAP,
    ):
        compile_aside.begin()  # on a machine's first use: the kernel's helpers on another core
        self.pattern = pattern
        self.timeouts = timeouts
        self.cap = cap
        #: the kernel's in-out counters (``kernel.C_DROPPED``)
        self.counters = np.zeros(1, np.int64)
        #: False once :meth:`stop_starting` was called: no new partial match begins
        self.starting = True
        self.nfa = nfa if nfa is not None else compile_pattern(pattern)
        self.schema = dict(schema)
        program, cond_ids = compile_conditions(self.nfa, pattern, self.schema)
        self.program: Program = program
        self._readers = stages_reading(pattern)
        #: fields read only by null tests: the kernel gets null or not, whatever the type
        self.null_only = null_tested_only(pattern)
        self.kernel = kernel
        self._tables(cond_ids)
        self.strings: dict[str, int] = {}
        self._forget_derived()
        self.keys: dict[Any, int] = {}
        self.key_values: list[Any] = []
        #: see _SharedKeys
        self.key_token: object = _NO_KEYS
        ns = self.n_slots
        self.AI = np.empty((0, 6), np.int64)
        self.AF = np.empty((0, ns), np.float64)
        self.key_time = np.empty(0, np.int64)
        self.key_off = np.empty(0, np.int64)
        self.key_len = np.empty(0, np.int64)
        self.key_coff = np.empty(0, np.int64)
        self.key_clen = np.empty(0, np.int64)
        self.nodes = np.empty((64, 5), np.int64)
        #: the kernel's scratch arrays, kept between calls (see cep.nfa.kernel.run)
        self._scratch: dict[str, Any] = {}
        #: the arrays the per-key ones are views of (see _own_keys); None: the next
        #: kernel call makes them
        self._key_room: tuple[np.ndarray, ...] | None = None
        #: the error a kernel pass stopped at, which left this engine half way through it
        self.broken: CEPError | None = None
        self.nodes_n = 0
        self.next_row = 0
        self._retained: list[_Retained] = []
        #: reclaim event-path nodes inside a batch once this many exist (tests lower it);
        #: between batches once nodes or retained events grew by a quarter of it and doubled
        self.gc_min = 1 << 16
        #: forget the ids of idle keys once there are more of them than this and than
        #: keys with state (tests lower it)
        self.key_slack = 1 << 16
        #: cut a batch few of whose events are live into a copy of its own (see
        #: _collect); False for the rules of a job, which hold the same batches: a copy
        #: each would hold an event once per rule, so such a batch is left whole and cut
        #: once for all the rules holding it (cep.nfa.shared_cuts)
        self.cut_alone = True
        #: the batches left whole though few of their events are live (cut_alone False),
        #: by the id of their rows: the rows, and the positions among them of those live
        #: (a superset of those live later: no event of a batch is taken after its own)
        self.cut_requests: dict[int, tuple[Any, np.ndarray]] = {}
        self._live_nodes = 0  # event-path nodes after the last collection
        self._live_rows = 0  # events in retained batches after the last collection
        self._live_strings = 0  # strings after they were last forgotten
        self._held_rows = 0  # events in retained batches now

    # ------------------------------------------------------------------ setup
    def _tables(self, cond_ids: dict[int, int]) -> None:
        nfa = self.nfa
        states = list(nfa.states.values())
        index = {s.name: i for i, s in enumerate(states)}
        stages = list(nfa.stage_names)
        kinds, firsts, counts, gaps = [], [], [], []
        actions, targets, conds, tstages = [], [], [], []
        for s in states:
            kinds.append(_KINDS[s.kind])
            firsts.append(len(actions))
            counts.append(len(s.transitions))
            gaps.append(nfa.windows.get(s.name, 0))
            for t in s.transitions:
                actions.append(_ACTIONS[t.action.value])
                targets.append(index[t.target.name])
                conds.append(-1 if t.condition is None else cond_ids[id(t.condition)])
                tstages.append(stages.index(t.source.stage) if t.source.stage in stages else -1)
        i64 = np.int64
        self.st_kind = np.array(kinds, i64)
        self.st_first = np.array(firsts, i64)
        self.st_count = np.array(counts, i64)
        self.st_gap = np.array(gaps, i64)
        #: whether a partial match can ever time out (a window, or a gap after a stage)
        self.timed = nfa.window > 0 or bool((self.st_gap > 0).any())
        self.tr_action = np.array(actions, i64)
        self.tr_target = np.array(targets, i64)
        self.tr_cond = np.array(conds, i64)
        self.tr_stage = np.array(tstages, i64)
        self.start_state = index[nfa.start.name]
        self.state_stages = [s.stage for s in states]
        self.skip_kind, self.skip_stage = skip_code(nfa.skip, stages)
        self.skip_throw = nfa.skip.throw_on_miss
        self.stages = stages
        self.prog, self.cstart = self.program.arrays()
        self.slot_tables = self.program.slot_tables(stages)
        self.init_slots = self.program.initial_slots()
        self.n_slots = len(self.init_slots)
        # a condition that is always true is no condition (greedy loops add one)
        for tr, c in enumerate(self.tr_cond):
            if c >= 0 and self.cstart[c + 1] - self.cstart[c] == 1 and (
                    self.prog[self.cstart[c], 0] == OP_TRUE):
                self.tr_cond[tr] = -1
        # conditions that read only the event (no slot) are evaluated once per batch, a
        # column at a time; the kernel reads their row of the result (-1: evaluates it)
        used = sorted({int(c) for c in self.tr_cond if c >= 0})
        self.pre_conds = [c for c in used if not np.any(
            self.prog[self.cstart[c]:self.cstart[c + 1], 0] == OP_SLOT)]
        self.pre_row = np.full(max(len(self.cstart) - 1, 1), -1, i64)
        self.pre_row[self.pre_conds] = np.arange(len(self.pre_conds))
        #: what each of them computes, for the rules of a job sharing a batch's results
        self.pre_keys = [condition_key(self.prog[self.cstart[c]:self.cstart[c + 1]],
                                       int(self.cstart[c]), self._column_held,
                                       self.program.constants) for c in self.pre_conds]
        #: does every condition on the way from the start state to a taking edge read only
        #: the event (so which events begin a partial match is found with column masks)?
        self._start_by_columns = self._start_walk(None, None)

    # --------------------------------------------------------------- columns
    def _column_held(self, j: int) -> Hashable:
        """What kernel column ``j`` holds, as :meth:`process` fills it from a batch: a
        field's values read as its type (or only whether they are null), a derived column,
        the event time.  Equal for the same column of two engines over the same input."""
        name = self.program.columns[j]
        if not isinstance(name, str):
            return name
        return name, name in self.null_only, self.schema.get(name, NUMERIC)

    def _code(self, text: str) -> int:
        code = self.strings.get(text)
        if code is None:
            code = self.strings[text] = len(self.strings)
        return code

    def _codes(self, texts: list[str]) -> np.ndarray:
        """:meth:`_code` of each of ``texts``, as float64 (each rule of a job does this for
        every batch's texts: see :func:`_numbered`)."""
        first = len(self.strings)
        codes, new = _numbered(self.strings, texts, first)
        self.strings.update(zip(new, range(first, first + len(new)), strict=True))
        return codes.astype(np.float64)

    def _forget_derived(self) -> None:
        #: derived column -> its value for each string code (NaN: not computed yet)
        self._derived: dict[Derived, np.ndarray] = {}
        self._texts: list[str] = []  # code -> string
        self._derived_for = self.strings  # the string table those belong to

    def _text_column(self, codes: np.ndarray, d: Derived) -> np.ndarray:
        """``d``'s text functions over a string column (kernel codes, NaN for null): computed
        once per distinct string (with pyarrow.compute) and then looked up by code."""
        if self._derived_for is not self.strings:  # a restored or fresh string table
            self._forget_derived()
            self._derived_for = self.strings
        table = self._derived.get(d)
        if table is None or len(table) < len(self.strings):
            grown = np.full(len(self.strings), np.nan)
            if table is not None:
                grown[: len(table)] = table
            table = self._derived[d] = grown
        valid = ~np.isnan(codes)
        idx = codes[valid].astype(np.int64)
        todo = np.unique(idx[np.isnan(table[idx])])
        if len(todo):
            if len(self._texts) < len(self.strings):  # codes are given in insertion order
                self._texts.extend(islice(self.strings, len(self._texts), None))
            texts = [self._texts[c] for c in todo.tolist()]
            table[todo] = self._apply_text(d, texts)
        out = np.full(len(codes), np.nan)
        out[valid] = table[idx]
        return out

    def _apply_text(self, d: Derived, texts: list[str]) -> np.ndarray:
        """``d``'s functions of distinct non-null strings: kernel codes for text results,
        1.0 / 0.0 for true / false.  pyarrow.compute does the work; lower() of non-ASCII
        text is Python's ``str.lower`` (Arrow's differs for a few letters, e.g. a final
        sigma), so both engines agree on every string."""
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            arr = pa.array(texts, pa.string())
        except (pa.ArrowException, UnicodeError):  # e.g. a lone surrogate: Python does it
            values = [apply_text(d.fns, t) for t in texts]
        else:
            for fn, arg in d.fns:
                if fn == "lower":
                    if pc.all(pc.string_is_ascii(arr)).as_py() is not False:
                        arr = pc.ascii_lower(arr)
                    else:
                        arr = pa.array([t.lower() for t in arr.to_pylist()], pa.string())
                elif fn == "startswith":
                    arr = pc.starts_with(arr, pattern=arg)
                else:
                    arr = pc.match_substring(arr, pattern=arg)
            if d.kind == BOOLEAN:
                return arr.to_numpy(zero_copy_only=False).astype(np.float64)
            values = arr.to_pylist()
        if d.kind == BOOLEAN:
            return np.array(values, np.float64)
        return np.array([float(self._code(t)) for t in values], np.float64)

    def _constants(self) -> np.ndarray:
        values = [float(self._code(v)) if isinstance(v, str) else v for v in self.program.constants]
        return np.array(values or [0.0], np.float64)

    def _column(self, batch: Events, name: str) -> np.ndarray:
        """Column ``name`` of ``batch`` as float64 for the kernel; a value the pattern cannot
        read is an InputError naming the row (position in the batch), field and stages."""
        try:
            if name in self.null_only:
                return _cached(batch.cache, ("null", name), lambda: _nullness(batch.column(name)))
            stray = stray_text(batch.rows, name) if batch.is_table else None
            if stray is not None and self.schema.get(name, NUMERIC) == STRING:
                # text among numbers (a CSV column), read as text: the text beside the
                # column (its numbers, null there, were refused as the rows were screened)
                return self._as_float(name, batch.rows.column(PREFIX + name), batch.cache)
            if stray is not None:  # text among numbers, null in the column
                raise BadValue(int(stray[0][0]), f"is {stray[1][0]!r} (text)")
            return self._as_float(name, batch.column(name), batch.cache)
        except BadValue as bad:
            kind = self.schema.get(name, NUMERIC)
            stages = self._readers.get(name, [])
            who = (f"stage{'s' if len(stages) > 1 else ''} "
                   f"{', '.join(repr(s) for s in stages)}") if stages else "the pattern"
            raise InputError(f"row {bad.row}: field {name!r} {bad.what}, but {who} read"
                             f"{'s' if len(stages) == 1 else ''} it as {kind}") from None

    def _as_float(self, name: str, values: Any, cache: dict[Any, Any] | None = None
                  ) -> np.ndarray:
        kind = self.schema.get(name, NUMERIC)
        module = type(values).__module__
        if module.startswith("pyarrow"):
            if kind == STRING:
                texts, idx = _cached(cache, ("text", name), lambda: _arrow_texts(values))
                return np.append(self._codes(texts), np.nan)[idx]
            if kind == NUMERIC and _arrow_type(values) == "bool":
                raise BadValue(_first_valid(values), "holds true/false, not numbers")
            return _cached(cache, ("float", name), lambda: _arrow_floats(values))
        if module.startswith("pandas"):
            import pandas as pd

            if kind == NUMERIC and values.dtype.kind == "b":
                raise BadValue(0, "holds true/false, not numbers")
            if isinstance(values.dtype, pd.api.extensions.ExtensionDtype) and (
                    values.dtype.kind in "biuf" and kind != STRING):
                if values.dtype.kind in "iu":  # nullable integers: the same range as int64's
                    _exactly_floats(values.to_numpy(dtype=np.float64, na_value=0), values.array)
                return values.to_numpy(dtype=np.float64, na_value=np.nan)  # nullable: NA is null
            if isinstance(values.dtype, pd.DatetimeTZDtype):
                values = values.dt.tz_convert("UTC").dt.tz_localize(None)
            values = values.to_numpy()
        if isinstance(values, np.ndarray) and values.dtype != object:
            if kind == NUMERIC and values.dtype.kind == "b":
                raise BadValue(0, "holds true/false, not numbers")
            if kind != STRING and values.dtype.kind in "fiub":
                out = values.astype(np.float64)
                if values.dtype.kind in "iu" and values.dtype.itemsize == 8:
                    _exactly_floats(out, values)
                return out
            if kind != STRING and values.dtype.kind in "Mm":  # datetimes, durations: ms
                ms = values.astype("datetime64[ms]" if values.dtype.kind == "M"
                                   else "timedelta64[ms]")
                out = ms.astype(np.int64).astype(np.float64)
                out[np.isnat(ms)] = np.nan
                return out
            values = values.astype(object)
        return self._objects_as_float(kind, values)

    def _objects_as_float(self, kind: str, values: Any) -> np.ndarray:
        """Python values (one per event) as float64: string codes, numbers, 1/0 for bools."""
        types = set(map(type, values))
        if kind != STRING and types <= {int, float, type(None)}:
            try:
                out = np.array(values, dtype=np.float64)  # None -> NaN: null
            except OverflowError:
                pass  # an integer beyond float64: the loop below names its row
            else:
                if int in types:
                    _exactly_floats(out, values)
                return out
        out = np.empty(len(values), np.float64)
        code = self._code
        for j, v in enumerate(values):
            if type(v) is str:
                if kind != STRING:
                    raise BadValue(j, f"is {v!r} (text)")
                out[j] = code(v)
            elif kind == NUMERIC and isinstance(v, (bool, np.bool_)):
                raise BadValue(j, f"is {v!r} (true/false, not a number)")
            elif _is_null(v):
                out[j] = np.nan
            elif kind == STRING:
                if not isinstance(v, str):
                    raise BadValue(j, f"is {v!r} ({type(v).__name__})")
                out[j] = code(str(v))
            elif isinstance(v, (int, float, np.integer, np.floating, np.bool_, Decimal)):
                try:
                    out[j] = float(v)
                except OverflowError:
                    raise BadValue(j, "is a number beyond the range of float64") from None
                if isinstance(v, (int, np.integer, Decimal)) and abs(out[j]) > _EXACT:
                    _exactly_floats(out[j:j + 1], [v], j)
            elif (ms := time_value_millis(v)) is not None:  # a datetime, date or duration
                out[j] = float(ms)
            else:
                raise BadValue(j, f"is {v!r} ({type(v).__name__})")
        return out

    def _key_ids(self, keys: Any) -> np.ndarray:
        """The engine's id of each event's key (new keys get the next ids).  An engine fed
        the same :class:`Keys` as an engine before it (the rules of one job) and holding
        the same keys takes that engine's result: the same keys in the same order give the
        same ids."""
        if not isinstance(keys, Keys):
            ids = self._new_key_ids(keys)
            self._keys_changed()
            return ids
        shared = keys.shared
        if isinstance(shared, _SharedKeys) and self._holds(shared):
            held = len(self.key_values)
            new = shared.values[held:shared.size]
            self.key_values.extend(new)  # self.keys catches up when it is read
            self.key_token = shared.after
            return shared.ids
        before, before_size = self.key_token, len(self.key_values)
        ids = self._new_key_ids(keys)
        self._keys_changed()
        keys.shared = _SharedKeys(before, before_size, self.key_token, self.key_values,
                                  len(self.key_values), ids)
        return ids

    def _holds(self, shared: _SharedKeys) -> bool:
        """Does this engine hold the keys the engine that made ``shared`` held before it?
        By token, else by value when the counts agree (engines restored from a checkpoint
        may hold equal lists under tokens of their own: they take the token then)."""
        if self.key_token is shared.before:
            return True
        if len(self.key_values) != shared.before_size or (
                shared.values[:shared.before_size] != self.key_values):
            return False
        self.key_token = shared.before
        return True

    def _keys_changed(self) -> None:
        """A new token for the key list (see :class:`_SharedKeys`)."""
        self.key_token = object() if self.key_values else _NO_KEYS

    def _sorted(self, keys: Any, key_ids: np.ndarray, ts: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch's (key, time, arrival) order, and the key ids and times in it: worked
        out once for every engine given the same key ids and times."""
        shared = keys.shared if isinstance(keys, Keys) else None
        if isinstance(shared, _SharedKeys) and shared.ids is key_ids and shared.times is ts:
            assert shared.order is not None
            return shared.order
        order = key_time_order(key_ids, ts, len(self.key_values))  # ties: arrival order
        out = (order, key_ids[order], ts[order])
        if isinstance(shared, _SharedKeys) and shared.ids is key_ids:
            shared.times, shared.order = ts, out
        return out

    def _key_dict(self) -> dict[Any, int]:
        """Key value -> id.  An engine taking another's ids (see :meth:`_key_ids`) only
        extends its list; the dict catches up here, when the engine works ids out itself
        (rarely, for the rules of one job: a hundred rules would each fill a dict)."""
        held = len(self.keys)
        if held < len(self.key_values):
            self.keys.update(zip(self.key_values[held:], range(held, len(self.key_values))))
        return self.keys

    def _new_key_ids(self, keys: Any) -> np.ndarray:
        import pandas as pd

        if isinstance(keys, Keys):
            if len(keys.values) < 64 or type(keys.values[0]) is not int:
                # a few keys (a Matcher's one), or text: the dict alone (a lookup per
                # distinct key in C, kept up to date; hashing the batch's text into an
                # index for pandas to look up took more than twice as long)
                return self._ids_of(list(keys.values))[keys.codes]
            values = object_array(keys.values)
            mapping = self._known_ids(values)
            # keys the index does not hold: new ones, or added since the index was built
            missing = np.flatnonzero(mapping < 0)
            if len(missing):
                mapping[missing] = self._ids_of(values[missing].tolist())
            return mapping[keys.codes]
        if isinstance(keys, np.ndarray) and keys.ndim == 1:
            values = keys if keys.dtype.kind in "iufb" else keys.astype(object)
        else:
            values = object_array(keys)  # composite keys stay whole tuples
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        # code -1: no key (None), one group
        mapping = self._ids_of([*uniques.tolist(), None])
        return mapping[np.where(codes < 0, len(mapping) - 1, codes)]

    def _ids_of(self, values: list[Any]) -> np.ndarray:
        """The engine's id of each value, new values taking the next ids (see
        :func:`_numbered`); the dict of ids catches up with the new ones when it is read."""
        ids, new = _numbered(self._key_dict(), values, len(self.key_values))
        self.key_values.extend(new)
        return ids

    def _known_ids(self, values: np.ndarray) -> np.ndarray:
        """The engine's id of each key value, -1 for a value the index does not hold: one
        hash lookup per value in C (pandas) against an index of the known keys.  The index
        is rebuilt once the keys added since its last build are a quarter of it (or 1,024),
        so a stream of ever new keys costs O(1) per key; keys added since are found by the
        caller in the engine's dict."""

        cached = getattr(self, "_key_index", None)
        n = len(self.key_values)
        if cached is None or cached[0] is not self.key_values or n - cached[1] > max(
                1024, cached[1] // 4):
            cached = self._key_index = (self.key_values, n,
                                        _value_index(object_array(self.key_values)))
        return np.asarray(cached[2].get_indexer(_value_index(values)), np.int64)

    # ------------------------------------------------------------------ runs
    def process(self, batch: Events, keys: Any = None, times: Any = None
                ) -> Found:
        """Feed a batch (any order) with its own keys and times, or with ``keys`` and
        ``times`` given apart; return matches and timeouts key by key, in order of each
        key's first event in the batch."""
        if keys is None:
            keys, times = batch.keys, batch.times
        n = batch.n
        if n == 0:
            return []
        ts = np.asarray(times, dtype=np.int64)
        with keys.lock if isinstance(keys, Keys) else contextlib.nullcontext():
            key_ids = self._key_ids(keys)
            order, sorted_ids, sorted_ts = self._sorted(keys, key_ids, ts)
        base = self.next_row
        self.next_row += n
        self._retained.append(_Retained(base, base + n, batch))
        self._held_rows += n
        cols = np.empty((max(1, len(self.program.columns)), n), np.float64)
        read: dict[str, np.ndarray] = {}
        for j, name in enumerate(self.program.columns):
            if name == EVENT_TIME:
                cols[j] = sorted_ts
            elif isinstance(name, Derived):
                assert name.field is not None
                source = read.get(name.field)
                if source is None:
                    source = read[name.field] = self._column(batch, name.field)
                cols[j] = self._text_column(source, name)[order]
            else:
                source = read.get(name)
                if source is None:
                    source = read[name] = self._column(batch, name)
                cols[j] = _in_order(source, order, keys, batch, name)
        def arranged(out: np.ndarray) -> np.ndarray:
            """The kernel's outputs key by key in order of each key's first event in this
            batch (as the reference engine gives them), not by the engine's key ids, which
            depend on the history; ordered before their events are taken, so the events
            are taken once.  Each key's events are one run of the sorted ids, its first
            event their least index."""
            rank = _first_rank(keys, sorted_ids, order)
            return out[np.argsort(rank[out[:, O_KEY]], kind="stable")]

        # a rule of a job of several (cut_alone False: see _collect) shares the batch's
        # conditions; alone, the batch's cache would only hold them as long as the batch
        shared = None if self.cut_alone else (batch.cache, order)
        return self._run(0, 0, sorted_ids, sorted_ts, order + base, cols, arranged, shared)

    def advance(self, timestamp: int) -> Found:
        """Move every key's time to ``timestamp`` (timers, end of input)."""
        if len(self.key_time) == len(self.key_len):
            if not self.timed:
                # nothing ever times out: the keys' times matter to no step (the kernel
                # reads them only to time partial matches out), and moving them costs a
                # pass over every key at every watermark, for each of a job's rules
                return Found.none(self.stages)
            due = self.next_deadline()
            if due is None or due > timestamp:
                # no partial match times out: the kernel's pass would only move the keys'
                # times, after copying the whole arena (a job of many rules advances each
                # rule at every watermark, most of them with nothing due)
                self._times_moved(timestamp)
                return Found.none(self.stages)
        empty_i = np.empty(0, np.int64)
        return self._run(1, timestamp, empty_i, empty_i, empty_i, np.empty((1, 0), np.float64))

    def _times_moved(self, timestamp: int) -> None:
        """The keys holding state at ``timestamp``, as a timer pass leaves them when
        nothing times out (the kernel's, for keys not expiring); in place when this
        engine alone holds the array (see :meth:`_own_keys`), else a new one."""
        held = self.key_len >= 0
        kt = self.key_time
        if not held.any():
            return
        if self._key_room is not None and len(kt) == len(held):
            np.maximum(kt, timestamp, out=kt, where=held)  # this engine's own: in place
        else:
            self.key_time = np.where(held, np.maximum(kt, timestamp), kt)

    def _start_walk(self, pre: np.ndarray | None, hit: np.ndarray | None) -> bool:
        """Mark in ``hit`` the events that some taking edge reached from the start state
        takes, given the pre-evaluated conditions ``pre`` (None, None: only check that it
        can be done so); False when a condition on the way reads a slot.

        Each state's events are the union over the paths that reach it, grown until
        nothing changes: the paths themselves can be exponentially many (optional and
        counted groups chain PROCEED edges that fan out), the states are few."""
        n = 0 if hit is None else len(hit)
        reach: dict[int, np.ndarray] = {self.start_state: np.ones(n, np.bool_)}
        work = [self.start_state]
        while work:
            state = work.pop()
            mask = reach[state]
            for tr in range(self.st_first[state], self.st_first[state] + self.st_count[state]):
                c = self.tr_cond[tr]
                if c >= 0 and self.pre_row[c] < 0:
                    return False
                m = mask if c < 0 or pre is None else mask & pre[self.pre_row[c]]
                if self.tr_action[tr] == A_TAKE:
                    if hit is not None:
                        np.logical_or(hit, m, out=hit)
                elif self.tr_action[tr] == A_PROCEED:
                    target = int(self.tr_target[tr])
                    seen = reach.get(target)
                    if seen is None:
                        reach[target] = m.copy()
                    elif pre is None or not (m & ~seen).any():
                        continue
                    else:
                        np.logical_or(seen, m, out=seen)
                    work.append(target)
        return True

    def _pre_evaluated(self, cols: np.ndarray, n: int, consts: np.ndarray,
                       shared: tuple[dict[Any, Any], np.ndarray] | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The event-only conditions over the batch (a row each), and per event whether it
        can begin a partial match (keys with nothing pending skip the others).  ``shared``:
        the batch's cache and the order of ``cols``' events, where the rules of a job given
        the batch in that order find what another one's equal conditions gave."""
        pre = np.empty((len(self.pre_conds), n), np.bool_)
        cache, order = shared if shared is not None else ({}, None)
        for j, c in enumerate(self.pre_conds):
            slot = ("condition", self.pre_keys[j])
            held = cache.get(slot)
            if held is not None and held[0] is order:
                pre[j] = held[1]
                continue
            eval_columns(c, cols, n, self.prog, consts, self.cstart, pre[j])
            if held is None:
                cache[slot] = (order, pre[j])
        if not self.starting:  # draining: no event begins anything (see stop_starting)
            can_start = np.zeros(n, np.bool_)
        elif self._start_by_columns:
            can_start = np.zeros(n, np.bool_)
            self._start_walk(pre, can_start)
        else:  # a slot on the way: the start row's slots are the initial ones, for all keys
            can_start = self.kernel.start_events(
                cols, np.int64(n), self.start_state, self.init_slots, self.st_first,
                self.st_count, self.tr_action, self.tr_target, self.tr_cond, self.prog, consts,
                self.cstart, np.int64(self.program.depth))
        return pre, can_start

    def _run(
        self, mode: int, t: int, keys: np.ndarray, ts: np.ndarray, rows: np.ndarray,
        cols: np.ndarray, arranged: Callable[[np.ndarray], np.ndarray] | None = None,
        shared: tuple[dict[Any, Any], np.ndarray] | None = None,
    ) -> Found:
        """One kernel call (see :func:`cep.nfa.kernel.run`); ``arranged`` puts two or more
        outputs in the order they are given in, before their events are taken; ``shared``
        see :meth:`_pre_evaluated`."""
        if self.broken is not None:
            raise CEPError(f"this engine stopped at an error ({self.broken}): make a new one, "
                           "or restore a checkpoint")
        consts = self._constants()
        if mode == 0:
            pre, can_start = self._pre_evaluated(cols, len(keys), consts, shared)
        else:
            pre, can_start = np.empty((0, 0), np.bool_), np.empty(0, np.bool_)
        self._own_keys(len(self.key_values))
        result = self.kernel.run(
            mode, np.int64(t), keys, ts, rows, cols, self.prog, consts, self.cstart,
            self.program.depth, *self.slot_tables,
            self.st_kind, self.st_first, self.st_count, self.st_gap,
            self.tr_action, self.tr_target, self.tr_cond, self.tr_stage,
            self.start_state, np.int64(self.nfa.window), self.skip_kind, self.skip_stage,
            self.skip_throw, self.init_slots, self.timeouts, np.int64(self.gc_min),
            len(self.key_values), self.key_time, self.key_off, self.key_len,
            self.key_coff, self.key_clen, self.AI, self.AF, self.nodes, self.nodes_n,
            np.int64(-1 if self.cap.per_key is None else self.cap.per_key),
            _CAP_POLICIES[self.cap.on_overflow], self.counters, can_start, self.pre_row, pre,
            self._scratch,
        )
        (bi, bf, bn, off, ln, coff, cln, nodes, nodes_n, out, on, err, key_time) = result
        self.nodes, self.nodes_n = nodes, nodes_n
        if err:
            # the pass stopped half way, its keys' entries written in place: the engine is
            # done (a job stops at this error, and resumes from a checkpoint)
            try:
                self._raise(err, out[on - 1], bi, off, ln)
            except CEPError as error:
                self.broken = error
                raise
        self.key_time = key_time
        self.AI, self.AF = bi[:bn], bf[:bn]
        self.key_off, self.key_len, self.key_coff, self.key_clen = off, ln, coff, cln
        out = out[:on]
        if arranged is not None and on > 1:
            out = arranged(out)
        outputs = self._materialise(out)
        # a collection costs a pass over every node: amortised, not after every batch (the
        # rows held are references to batches, most of them shared with the job's other
        # rules: holding two batches more costs little, collecting after each of a hundred
        # rules' batches a tenth of their time); path nodes grow faster than rows held,
        # and compacting them alone costs a compiled pass, without working out which
        # events are live
        if self._held_rows > 2 * self._live_rows + 2 * self.gc_min:
            self._collect()
        elif self.nodes_n > 2 * self._live_nodes + self.gc_min // 4:
            self._compact_nodes()
        live = self.keys_with_state
        # renumbering costs a pass over every key: only once the idle ones outnumber the
        # live ones and a slack, so a stream of ever new keys pays O(1) per key
        if len(self.key_values) - live > max(self.key_slack, live):
            self._forget_idle_keys()
        if len(self.strings) > max(self.key_slack, 2 * self._live_strings):
            self._forget_unused_strings()
        return outputs

    def _own_keys(self, n: int) -> None:
        """The per-key arrays as views, ``n`` long, of arrays this engine alone holds, which
        the kernel writes in place: a pass then costs what its keys with events or state
        cost, not a new array of every key seen (for each of a job's rules, at every batch
        and timer pass).  Nothing else keeps them: a snapshot takes the entries of the keys
        with state (:func:`cep.nfa.numba_state.capture`).  New keys are idle (no state, no
        time)."""
        room = self._key_room
        if room is None or room[0].shape[0] < n:
            size = max(64, n + n // 2)
            room = tuple(np.empty(size, np.int64) for _ in _KEY_FILL)
            for a, name, fill in zip(room, _KEY_ARRAYS, _KEY_FILL, strict=True):
                held = getattr(self, name)
                a[:len(held)] = held
                a[len(held):] = fill
            self._key_room = room
        # past the views nothing is ever written: new keys' entries are idle already
        for a, name in zip(room, _KEY_ARRAYS, strict=True):
            setattr(self, name, a[:n])

    def _raise(self, err: int, last: np.ndarray, arena: np.ndarray, off: np.ndarray,
               ln: np.ndarray) -> None:
        """The error the kernel stopped with; ``last`` is its last output row, and the new
        ``arena`` (with the per-key offsets and lengths) holds that row's key's partial
        matches: the kernel stored them when it stopped."""
        if err == ERR_CAP:
            assert self.cap.per_key is not None
            k = int(last[O_KEY])
            rows = arena[off[k]:off[k] + ln[k]]
            live = rows[rows[:, R_SID_SEQ] != NO_START]
            raise too_many(self.key_values[k], int(last[O_NODE]),
                           self.cap.per_key, [self.state_stages[s] for s in live[:, R_STATE]])
        stage = self.nfa.skip.stage
        if err == ERR_SKIP_MISSING:
            raise SkipStrategyError(
                f"could not skip to {stage!r}: the match has no event for that stage"
            )
        if err == ERR_SKIP_FIRST:
            raise SkipStrategyError(
                f"could not skip to {stage!r}: it is the first event of the match, "
                "so skipping there would find the same match again"
            )
        raise CEPError("the NFA's PROCEED edges loop without end (internal error)")

    # ---------------------------------------------------------- matches out
    def _materialise(self, out: np.ndarray) -> Found:
        """The kernel's outputs as columns: each output's kind, key and times, and the
        events of its path (taken from the retained batches as they came in)."""
        if len(out) == 0:
            return Found.none(self.stages)
        offsets, rows, stages, times = self.kernel.paths_of(self.nodes, out[:, O_NODE].copy())
        kind, expiry = out[:, O_KIND], out[:, O_EXPIRY]
        lo, hi = offsets[:-1], offsets[1:]
        taken = hi > lo
        last = max(len(times) - 1, 0)
        start = np.where(taken, times[np.minimum(lo, last)] if len(times) else expiry, expiry)
        end = np.where(taken, times[np.maximum(hi - 1, 0)] if len(times) else expiry, expiry)
        # the engine's ids index its key values; the list is replaced, never changed (see
        # _forget_idle_keys), so it can be shared
        keys = Keys(out[:, O_KEY].copy(), self.key_values)
        refs = entry_refs(self._retained, rows)
        if all(batch.is_table for batch in refs.sources):
            # Arrow rows are taken later, by whoever needs them (a file sink, on its
            # checkpoint writer's thread), straight from the batches
            return Found(self.stages, kind=kind, keys=keys, start=start, end=end,
                         expiry=expiry, offsets=offsets, stage=stages, refs=refs)
        return Found(self.stages, kind=kind, keys=keys, start=start, end=end, expiry=expiry,
                     offsets=offsets, stage=stages, rows=refs.taken())

    def _collect(self) -> None:
        """Drop event-path nodes and events that no live partial match can reach: a batch
        none of whose events is reached goes; one of which only a few are reached is
        replaced by those few (under new row ids), so the events held follow the live
        partial matches, not the batches they came in.

        A batch is cut down only once it has been through a collection whole: most partial
        matches end within a batch or two, so by then it usually goes whole, without the
        copy (an Arrow ``take`` over every column costs about a millisecond however few
        rows it takes).  The rules of one job hold the same batch, which a cut would copy
        into each: their engines (``cut_alone`` False) leave it whole and ask for it to be
        cut once for all of them (``cut_requests``, :mod:`cep.nfa.shared_cuts`)."""
        self._compact_nodes()
        node_rows = self.nodes[:self.nodes_n, N_ROW]  # a view: this engine's alone
        live = distinct(node_rows)
        kept: list[_Retained] = []
        moved: list[_Retained] = []
        for batch in self._retained:
            lo, hi = np.searchsorted(live, [batch.first_row, batch.end_row])
            size = batch.end_row - batch.first_row
            if hi == lo:
                continue
            # a cut of its own costs a take per rule; a cut for all the rules of a job one
            # take for all: cut smaller batches then, or a long-lived rule keeps for good
            # the copy of what all the rules needed when it was cut
            if size < (1024 if self.cut_alone else 64) or 4 * (hi - lo) >= size or (
                    batch.age == 0):
                batch.age += 1
                kept.append(batch)
                continue
            used = live[lo:hi]
            if not self.cut_alone:
                batch.age += 1
                kept.append(batch)
                self.cut_requests[id(batch.batch.rows)] = (batch.batch.rows,
                                                           used - batch.first_row)
                continue
            first = self.next_row
            self.next_row += len(used)
            places = _places(node_rows, batch, used - batch.first_row)
            assert places is not None  # used: every row a node reaches
            node_rows[places[0]] = first + places[1]
            moved.append(_Retained(first, self.next_row, Events.of(
                take_rows(batch.batch.rows, used - batch.first_row))))
        self._retained = kept + moved  # in row-id order: moved ones have the newest ids
        self._live_rows = self._held_rows = sum(k.end_row - k.first_row for k in self._retained)
        if self.cut_requests:  # of batches it still holds
            held = {id(k.batch.rows) for k in self._retained}
            self.cut_requests = {k: v for k, v in self.cut_requests.items() if k in held}

    def rebase(self, cuts: Sequence[tuple[Any, np.ndarray, Events]]) -> int:
        """Hold the cut batches ``cuts`` (rows, kept, into) instead of the batches they
        were cut from: ``into`` holds the rows at positions ``kept`` (ascending) of the
        batch whose rows are ``rows``, which must include every one this engine's event
        paths reach (see :mod:`cep.nfa.shared_cuts`); a batch it does not hold, or whose
        reached rows ``kept`` misses, it goes on holding.  How many it took."""
        nodes = self.nodes.copy()  # a snapshot being written may hold this array
        node_rows = nodes[:self.nodes_n, N_ROW]
        retained, taken = self._retained, 0
        for rows, kept, into in cuts:
            self.cut_requests.pop(id(rows), None)
            old = [b for b in retained if b.batch.rows is rows]
            remapped = [_places(node_rows, batch, kept) for batch in old]
            if not old or any(r is None for r in remapped):
                continue
            moved = []
            for batch, (mine, where) in zip(old, remapped, strict=True):  # type: ignore[misc]
                node_rows[mine] = self.next_row + where
                moved.append(_Retained(self.next_row, self.next_row + len(kept), into))
                self.next_row += len(kept)
                freed = batch.end_row - batch.first_row - len(kept)
                self._held_rows -= freed
                self._live_rows -= freed
            # in row-id order still: the new ids are the newest
            retained = [b for b in retained if b.batch.rows is not rows] + moved
            taken += 1
        if taken:
            self.nodes, self._retained = nodes, retained
        return taken

    def _compact_nodes(self) -> None:
        """Drop the event-path nodes no live partial match reaches (renumbering the rest)."""
        # collect_garbage renumbers nodes in the array it is given: a copy, since a
        # snapshot being written on another thread may hold this one
        self.AI = self.AI.copy()
        self.nodes, self.nodes_n = self.kernel.collect_garbage(
            self.AI, len(self.AI), self.nodes, self.nodes_n)
        self._live_nodes = self.nodes_n

    def _forget_idle_keys(self) -> None:
        """Renumber the keys that hold state and forget the rest (their ids, values and
        per-key arrays), so memory follows the keys with something pending, not every key
        seen.  Outputs already made keep the old key list; it is replaced, not changed."""
        keep = np.flatnonzero(self.key_len >= 0)
        self._key_room = None
        self.key_values = [self.key_values[i] for i in keep.tolist()]
        self.keys = {k: i for i, k in enumerate(self.key_values)}
        self._keys_changed()
        for name in ("key_time", "key_off", "key_len", "key_coff", "key_clen"):
            setattr(self, name, getattr(self, name)[keep])

    def _forget_unused_strings(self) -> None:
        """Renumber the strings partial matches still hold (in slots: ``last("a", "ip")``)
        and the pattern's own, and forget the rest, so the string table follows what is
        pending, not every distinct text seen (IP addresses, device ids...).  The slots get
        new arrays (a snapshot may hold the old ones); derived tables start again."""
        cols = self._text_slots()
        if cols is None:
            return
        held = self.AF[:, cols]
        live = held[~np.isnan(held)].astype(np.int64)
        own = [self.strings[v] for v in self.program.constants if isinstance(v, str)
               and v in self.strings]
        keep = np.unique(np.concatenate([live, np.array(own, np.int64)]))
        texts = list(self.strings)  # codes are given in insertion order
        remap = np.full(len(texts), np.nan)
        remap[keep] = np.arange(len(keep), dtype=np.float64)
        af = self.AF.copy()
        for c in cols:
            v = af[:, c]
            ok = ~np.isnan(v)
            v[ok] = remap[v[ok].astype(np.int64)]
        self.AF = af
        self.strings = {texts[c]: i for i, c in enumerate(keep.tolist())}
        self._forget_derived()
        self._live_strings = len(self.strings)

    def _text_slots(self) -> list[int] | None:
        """The slots holding string codes (the first, last or previous value of a text
        column); None when some other slot reads text (then codes stay as they are)."""
        kinds, _, cols, _ = self.slot_tables
        out: list[int] = []
        for slot, (kind, col) in enumerate(zip(kinds.tolist(), cols.tolist(), strict=True)):
            if kind in (kernel.SL_COUNT, kernel.SL_NONNULL):
                continue
            column = self.program.columns[col] if col < len(self.program.columns) else None
            text = (column.kind == STRING if isinstance(column, Derived)
                    else self.schema.get(column) == STRING)  # type: ignore[arg-type]
            if not text:
                continue
            if kind not in (kernel.SL_PREV, kernel.SL_FIRST, kernel.SL_LAST):
                return None
            out.append(slot)
        return out

    @property
    def keys_with_state(self) -> int:
        """Keys holding a partial match or a completed match waiting for a skip strategy."""
        return int(np.count_nonzero(self.key_len >= 0))

    def take_dropped(self) -> int:
        """Partial matches the cap dropped since the last call."""
        dropped = int(self.counters[C_DROPPED])
        self.counters[C_DROPPED] = 0
        return dropped

    def state_bytes(self) -> int:
        """Bytes of the state arrays and of the events live partial matches hold (what is
        no longer reachable, and the ids of idle keys, are collected first).  Of a batch
        only some of whose events are live, those events' share of its bytes: what a cut
        would hold, measured without cutting (the rules of a job hold batches in common,
        and a copy each only to measure them cost a job's end seconds)."""
        self._collect()
        self._forget_idle_keys()
        self._forget_unused_strings()
        arrays = (self.AI, self.AF, self.key_time, self.key_off, self.key_len,
                  self.key_coff, self.key_clen)
        total = sum(a.nbytes for a in arrays) + self.nodes[: self.nodes_n].nbytes
        total += sum(len(t) + 100 for t in self.strings)  # a dict entry and a str each
        live = distinct(self.nodes[: self.nodes_n, N_ROW])
        for kept in self._retained:
            lo, hi = np.searchsorted(live, [kept.first_row, kept.end_row])
            total += rows_bytes(kept.batch.rows) * int(hi - lo) // max(
                kept.end_row - kept.first_row, 1)
        return total + 64 * len(self.key_values)

    def stop_starting(self) -> None:
        """Begin no new partial match from now on; those held go on as before (they may
        still complete or time out).  The kernel never lets the start state take an event
        that ``can_start`` rules out, so no event may begin one once it says none can."""
        self.starting = False

    def fresh(self) -> ColumnarEngine:
        """An engine with no state that shares this one's compiled tables (cheap: for state
        restored again and again, as in a Spark group function)."""
        new = copy.copy(self)
        ns = self.n_slots
        new.strings, new.keys, new.key_values = {}, {}, []
        new.key_token = _NO_KEYS
        new._forget_derived()
        new.AI = np.empty((0, 6), np.int64)
        new.AF = np.empty((0, ns), np.float64)
        for name in ("key_time", "key_off", "key_len", "key_coff", "key_clen"):
            setattr(new, name, np.empty(0, np.int64))
        new.nodes = np.empty((64, 5), np.int64)
        new.nodes_n = 0
        new._scratch = {}  # its own: engines may run side by side
        new._key_room = None
        new.broken = None
        new.counters = np.zeros(1, np.int64)
        new.starting = True
        new.next_row = 0
        new._retained = []
        new.cut_requests = {}
        new._live_nodes = new._live_rows = new._held_rows = new._live_strings = 0
        return new

    def next_deadline(self) -> int | None:
        """The earliest event time at which a live partial match's window closes (None when
        none can), so a caller with its own timers knows when to advance time again.
        Conservative: it may be earlier than the first real timeout, never later."""
        ai = self.AI
        if not len(ai) or not self.timed:
            return None
        states = ai[:, R_STATE]
        live = self.st_kind[states] != _KINDS[StateKind.START]
        gap = self.st_gap[states]
        never = _NEVER
        due = np.where(gap > 0, ai[:, R_PREV] + gap, never)
        window = int(self.nfa.window)
        if window > 0:
            due = np.minimum(due, ai[:, R_START] + window)
        due = due[live]
        if not len(due) or due.min() == never:
            return None
        return int(due.min())

    @property
    def partial_matches(self) -> int:
        # a key's rows less its start state's; -1 (nothing held) and 0 count none
        kl = self.key_len
        return int(np.maximum(kl, 1).sum()) - len(kl) + int(self.key_clen.sum())
