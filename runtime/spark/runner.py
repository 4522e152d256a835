"""What a Spark worker does for one group: pandas in, matches out, state as bytes.

Spark-free on purpose, so the logic is tested without a cluster: the Spark
functions in :mod:`cep.runtime.spark.stream` and :mod:`cep.runtime.spark.batch` only
move frames, state bytes and timers between Spark and a :class:`GroupRunner`.

A group is one key, or one key group (``hash(key) mod G``) holding many keys.
Its state is the engine's snapshot plus the events still waiting for the
watermark, packed by :mod:`cep.runtime.blob` (no pickle).  The rules are the
embedded operator's: an event at or below the watermark when it arrives is
late; the rest wait until the watermark passes them and are matched in
(time, arrival) order; then event time moves to the watermark, which fires
``within`` timeouts and completes trailing ``not_followed_by`` matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from cep.errors import CEPError
from cep.expr import Expr
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES
from cep.nfa.engine import Snapshot
from cep.nfa.events import Keys
from cep.nfa.found import MATCH as MATCH_CODE
from cep.nfa.found import TIMEOUT as TIMEOUT_CODE
from cep.nfa.found import Found
from cep.pattern import Pattern
from cep.runtime.blob import pack, unpack
from cep.runtime.buffer import Waiting, from_ipc, to_ipc
from cep.runtime.checkpoint import rows_from_bytes, rows_to_bytes
from cep.runtime.operator import CepOperator, Output
from cep.runtime.tables import DEAD_LETTER as DEAD
from cep.runtime.tables import FIXED, LATE, SIDE, match_table, side_rows, stage_columns
from cep.runtime.watermarks import MIN_WATERMARK

TS = "__cep_ts"  # event time, integer milliseconds
# arrival order within one Spark batch: when the file it came from was written, which file
# (a hash of its path, for files written at the same instant), its place in the file
ORDER = "__cep_order"
ORDER_FILE = "__cep_order_file"
ORDER_ROW = "__cep_order_row"
ORDERING = (ORDER, ORDER_FILE, ORDER_ROW)
GROUP = "__cep_group"  # the key group
FIELD = "__cep_field"  # a rule set's key field (which of its specs)
SEQ = "__cep_seq"  # arrival order across batches (in state)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MATCH, TIMEOUT = "match", "timeout"


@dataclass(frozen=True)
class Spec:
    """Everything a worker needs, in a form that travels to executors.

    ``pattern`` is JSON when every condition is an expression; a pattern with Python
    callables travels as the object itself (Spark ships it with cloudpickle).
    """

    #: None for a rule set's group (a :class:`~cep.runtime.spark.rule_sets.RuleSetSpec`)
    pattern: str | Pattern | None
    key: tuple[str, ...]
    columns: tuple[str, ...]
    kinds: Mapping[str, str]
    time_is_timestamp: bool
    engine: str = "auto"
    timeouts: bool = False
    late: bool = False
    measures: Mapping[str, str] = field(default_factory=dict)
    #: streaming: the time field's name, and events at or before the epoch are dead letters
    #: (Spark takes watermark 0 for "none" and refuses timers at 0, so they could never wait)
    after_epoch: str | None = None
    #: unit of an integer time column (None: milliseconds, values that look like another
    #: unit become dead letters, see cep.times)
    time_unit: str | None = None
    #: the time column's name, for messages
    time: str = "time"
    #: the cap on each key's partial matches (None: none), and what happens beyond
    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES
    on_overflow: str = "fail"

    def load_pattern(self) -> Pattern:
        """The pattern, parsed from JSON when it travelled as JSON.

        >>> from cep import col
        >>> p = Pattern.begin("a").where(col("v") > 1)
        >>> Spec(p.to_json(), ("k",), ("k", "v"), {"v": "numeric"}, False).load_pattern() == p
        True
        """
        if self.pattern is None:
            raise CEPError("a rule set's spec has rules, not one pattern")
        return Pattern.from_json(self.pattern) if isinstance(self.pattern, str) else self.pattern

    def load_measures(self) -> dict[str, Expr]:
        """The measures, parsed from their JSON.

        >>> from cep import count
        >>> spec = Spec(Pattern.begin("a"), ("k",), ("k",), {}, False,
        ...             measures={"n": count("a").to_json()})
        >>> spec.load_measures()
        {'n': count('a')}
        """
        return {name: Expr.from_json(text) for name, text in self.measures.items()}

    def stages(self, pattern: Pattern) -> list[str]:
        """The stages that get an output column: all but the NOT stages.

        >>> p = Pattern.begin("a").not_next("x").next("b")
        >>> Spec(p, ("k",), ("k",), {}, False).stages(p)
        ['a', 'b']
        """
        return stage_columns(pattern)


@dataclass
class Result:
    """What one call produced: output rows, the new state (None: nothing left to keep),
    the event time at which the group must run again (None: only when data comes), counts:
    of events, matches, timeouts, late events, dead letters and partial matches the cap
    dropped, and the change this call made to the keys with state, their partial matches
    and the bytes of state Spark keeps (so summed over every call, they are the totals
    now)."""

    output: pd.DataFrame
    state: bytes | None
    timer: int | None
    counts: dict[str, int]


class GroupRunner:
    """Runs one group's events against its state; one per worker process and Spec.

    The events go through the embedded runtime's :class:`~cep.runtime.operator.CepOperator`
    (its intake screens keys, times and types, its watermark buffer holds what waits, its
    engines match), restored from the group's state at each call: Spark and the embedded
    runtime judge every event alike.
    """

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.pattern = spec.load_pattern()
        self.measures = spec.load_measures()
        self.stages = self.spec.stages(self.pattern)
        # the operator's compiled patterns are shared by every call (see CepOperator.fresh)
        self._prototype = group_operator(spec, self.pattern)
        self.columns = list(spec.columns)
        self.output_columns = output_columns(spec, self.stages)

    # ----------------------------------------------------------------- state
    def _restore(self, state: bytes | None) -> CepOperator:
        op = self._prototype.fresh()
        if state is None:
            return op
        meta, arrays, blobs = unpack(state)
        rows = rows_from_bytes(blobs.get("rows", b""), dict_rows=True, name="state rows")
        self._restore_engines(op, meta, Snapshot(
            meta["engine"], {k[2:]: v for k, v in arrays.items() if k[:2] == "e."}, rows),
            blobs)
        job = meta["job"]
        if "buffer" in blobs:  # the state of an earlier version: the waiting rows as a frame
            chunk = self._legacy_waiting(_frame_of(blobs["buffer"]))
        else:
            chunk = from_ipc(blobs.get("waiting", b""))
        op.restore_buffer_state(chunk, {"origins": [None], "seq": job["seq"]})
        if job["watermark"] is not None:
            op.watermark = int(job["watermark"])
        return op

    def _restore_engines(self, op: CepOperator, meta: dict[str, Any], snap: Snapshot,
                         blobs: dict[str, bytes]) -> None:
        """Give ``op``'s engines the state a group saved (``meta`` and ``blobs`` as saved)."""
        assert op.engine is not None
        op.engine.restore(snap)

    def _engine_state(self, op: CepOperator) -> tuple[Snapshot, dict[str, Any], dict[str, bytes]]:
        """The engines' state to save, with what else the group keeps about its rules (in
        the state's metadata, and as blobs)."""
        assert op.engine is not None
        return op.engine.snapshot(), {}, {}

    def _save(self, op: CepOperator) -> bytes | None:
        if not op.buffered and op.partial_matches == 0:
            return None  # nothing to remember: Spark drops the group's state
        snap, meta, blobs = self._engine_state(op)
        arrays = {f"e.{k}": v for k, v in snap.arrays.items()}
        chunk, buffered = op.buffer_state()
        job = {"seq": buffered["seq"],
               "watermark": None if op.watermark == MIN_WATERMARK else op.watermark}
        blobs = {**blobs, "rows": rows_to_bytes(snap.rows, "the events of partial matches"),
                 "waiting": to_ipc(chunk)}
        return pack({**meta, "engine": snap.meta, "job": job}, arrays, blobs)

    def _legacy_waiting(self, frame: pd.DataFrame) -> Waiting | None:
        """The waiting rows of an earlier version's state (with their times and arrival
        numbers) as a chunk of the watermark buffer, keyed by the job's key."""
        if not len(frame):
            return None
        rows = frame[self.columns].reset_index(drop=True)
        return Waiting.of(rows, frame[TS].to_numpy(dtype=np.int64),
                          [Keys.of_values(_keys(frame, self.spec.key))],
                          frame[SEQ].to_numpy(dtype=np.int64))

    # ------------------------------------------------------------------- run
    def run(self, state: bytes | None, frames: Iterable[pd.DataFrame], watermark: int | None,
            final: bool = False) -> Result:
        """Take this batch's events (any order), release what ``watermark`` passes.

        ``watermark`` None means none yet (Spark reports 0 before its first one);
        ``final`` ends a bounded input: everything buffered is released and time moves
        to the end, as the embedded runtime does at the end of a file.  The operator moves
        to ``watermark`` first, so this batch's events at or below it are late, as they
        would be had they come a moment after it.
        """
        op = self._restore(state)
        counts = {"events": 0, "late": 0, "dead_letters": 0, "matches": 0, "timeouts": 0,
                  "dropped_partial_matches": 0, "keys_with_state": -op.keys_with_state,
                  "partial_matches": -op.partial_matches,
                  "state_bytes": -len(state or b"")}
        outputs = []
        side: list[dict[str, Any]] = []
        outputs += self._before_watermark(op, watermark)
        if watermark is not None:
            outputs.append(op.process_watermark(watermark))
        parts = [f for f in frames if len(f)]
        if parts:
            new = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
            counts["events"] = len(new) if self._event_wide() else 0
            new = self._after_epoch(new, side)
            order = [c for c in ORDERING if c in new.columns]
            if order and len(new) > 1:
                new = new.sort_values(order, kind="stable")
            if len(new):
                out, _ = op.process_batch(new[self.columns].reset_index(drop=True),
                                          times=new[TS].reset_index(drop=True))
                outputs.append(out)
        if final:
            outputs.append(op.finish())
        output = self._output(outputs, side, counts)
        counts["dropped_partial_matches"] = (op.metrics["dropped_partial_matches"]
                                             + sum(r.engine.take_dropped() for r in op.rules))
        if final:
            return Result(output, None, None, counts)
        timer = self._timer(op, watermark)
        saved = self._save(op)
        counts["keys_with_state"] += op.keys_with_state
        counts["partial_matches"] += op.partial_matches
        counts["state_bytes"] += len(saved or b"")
        return Result(output, saved, timer, counts)

    def _before_watermark(self, op: CepOperator, watermark: int | None) -> list[Output]:
        """What to do before the watermark moves to ``watermark`` (a rule set's group applies
        the rule changes made up to it)."""
        return []

    def _event_wide(self) -> bool:
        """Does this group report what concerns an event whatever the rule (the event
        counted, a late event, a dead letter of the event)?  A rule set's event goes to a
        group of each key field: one field's groups do."""
        return True

    def _after_epoch(self, new: pd.DataFrame, side: list[dict[str, Any]]) -> pd.DataFrame:
        """Streaming: events at or before the epoch are dead letters (Spark's watermark 0
        means "none yet", so they could never be released)."""
        if self.spec.after_epoch is None:
            return new
        ts = new[TS].to_numpy(dtype=np.float64, na_value=np.nan)
        early = ts <= 0  # NaN (no time) compares False: the operator names it
        if not early.any():
            return new
        times = ts[early].astype(np.int64).tolist()
        if self._event_wide():
            side += self._side_rows(DEAD, new.loc[early, self.columns].to_dict("records"), times,
                                    [_before_epoch(t, self.spec.after_epoch) for t in times])
        return new[~early]

    def _timer(self, op: CepOperator, watermark: int | None) -> int | None:
        """When the group must run again without new data: Spark fires a group's timeout once
        the watermark is *past* it, so one millisecond before what must happen - but never
        before 1 ms: Spark refuses a timer at 0 (watermark 0 means none), so something due
        at 1 ms waits until the watermark reaches 2 ms or the group gets data."""
        first = op.buffer.min_time()
        due = [first] if first is not None else []
        due += [d for r in op.rules if (d := r.engine.next_deadline()) is not None]
        if not due:
            return None
        return max(min(due) - 1, watermark if watermark is not None else 0, 1)

    # ---------------------------------------------------------------- output
    def _output(self, outputs: list[Output], side: list[dict[str, Any]],
                counts: dict[str, int]) -> pd.DataFrame:
        """Matches and timeouts as the runtime's tables make them (one builder, one schema,
        one id), then the side outputs when asked for."""
        found = [part for out in outputs for part in out.found if len(part)]
        counts["matches"] += sum(part.count(MATCH_CODE) for part in found)
        counts["timeouts"] += sum(part.count(TIMEOUT_CODE) for part in found)
        late = [e for out in outputs for e in out.late]
        dead = [d for out in outputs for d in out.dead]
        if not self._event_wide():  # another group reports them (a rule set's first field's)
            late, dead = [], [d for d in dead if d.rule is not None]
        side += self._side_rows(LATE, [e.event for e in late], [e.timestamp for e in late],
                                [e.reason for e in late])
        side += self._side_rows(DEAD, [d.event for d in dead], [d.timestamp for d in dead],
                                [d.reason for d in dead], [(d.rule, d.version) for d in dead])
        counts["late"] += sum(r["kind"] == LATE for r in side)
        # as the embedded runtime's summary: events no rule could take, not one rule's
        counts["dead_letters"] += sum(r["kind"] == DEAD and r.get("rule") is None for r in side)
        parts = []
        if found:
            parts.append(self._match_frame(found))
        if self.spec.late and side:
            rows = pd.DataFrame(side, columns=self.output_columns)
            for name in ("start", "end", "timeout_at"):
                rows[name] = (pd.to_datetime(rows[name], unit="ms", utc=True)
                              if self.spec.time_is_timestamp else rows[name].astype("Int64"))
            # a column no side row fills comes from the matches (pandas will stop typing a
            # concatenation by the other parts when one part is all null)
            parts.append(rows.dropna(axis=1, how="all") if parts else rows)
        if not parts:
            return pd.DataFrame(columns=self.output_columns)
        frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        frame = frame.reindex(columns=self.output_columns)
        for name in self._sometimes_null():  # null, not NaN, where a row has none
            frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
        return frame

    def _sometimes_null(self) -> list[str]:
        """The columns some rows have no value in: the side outputs' (matches have none)."""
        return list(SIDE) if self.spec.late else []

    def _match_frame(self, found: list[Found]) -> pd.DataFrame:
        """The matches and timeouts ``found`` holds as output rows."""
        return match_table(Found.concat(found), key=self.spec.key, stages=self.stages, measures=self.measures,
                           timestamps=self.spec.time_is_timestamp, lenient=True).to_pandas()

    def _side_rows(self, kind: str, events: list[dict[str, Any]], times: list[int | None],
                   reasons: list[str], rules: list[tuple[str | None, int | None]] | None = None
                   ) -> list[dict[str, Any]]:
        """Late events or dead letters as the runtime's side rows are (one builder, one
        id), with the stages empty and the measures null as Spark's schema has them."""
        if not events:
            return []
        events = [{c: e.get(c) for c in self.columns} for e in events]
        keys = []
        for e in events:
            values = tuple(None if _is_null(e.get(k)) else e.get(k) for k in self.spec.key)
            keys.append(values if len(values) > 1 else values[0])
        named = rules is not None and "rule" in self.output_columns  # a rule set's: who refused
        rows = side_rows(kind, events, key=self.spec.key, keys=keys, times=times,
                         reasons=reasons, positions=[None] * len(events),
                         rules=[r for r, _ in rules] if named else None,
                         versions=[v for _, v in rules] if named else None)
        for out in rows:
            out.update(self._no_match())
        return rows

    def _no_match(self) -> dict[str, Any]:
        """What a side row holds in the columns of a match: no events, no measures."""
        return {**{stage: [] for stage in self.stages}, **dict.fromkeys(self.measures)}


def group_operator(spec: Spec, pattern: Pattern | dict[str, Any]) -> CepOperator:
    """The operator a group runs (with no state: each call takes a :meth:`fresh` copy)."""
    # Spark reads the time (session time zone, units) into TS; integer times in no
    # declared unit are read again by the operator, which refuses those that look
    # like seconds or microseconds, naming the field
    plain = not spec.time_is_timestamp and spec.time_unit is None
    return CepOperator(
        pattern, spec.engine, key=spec.key if len(spec.key) > 1 else spec.key[0],
        time=spec.time, timeouts=spec.timeouts, time_unit=None if plain else "ms",
        max_partial_matches=spec.max_partial_matches, on_overflow=spec.on_overflow,
        schema=dict(spec.kinds),
        # a group sees a slice of the stream: its refusals are dead letters, never the
        # job's setup error (see CepOperator._refuse_setup)
        setup_checks=False)


def output_columns(spec: Spec, stages: Sequence[str]) -> list[str]:
    """The output's column names, in the order of its schema: key, the fixed columns,
    stages, measures, and ``reason``/``event`` when side outputs are returned.

    >>> output_columns(Spec(Pattern.begin("a"), ("card",), ("card",), {}, False), ["a"])
    ['card', 'kind', 'match_id', 'start', 'end', 'timeout_at', 'a']
    """
    return [*spec.key, *FIXED, *stages, *spec.measures, *(SIDE if spec.late else ())]


def _is_null(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


#: the nulls of a nullable 64-bit integer column, in a column of their own beside it (named
#: this and the column's name), the column's nulls made 0: Spark hands a stateful function
#: such a column as float64, which changes integers beyond 2**53 (two 16-digit card
#: numbers would be one key)
NULLS = "__cep_nulls:"


def exact_integers(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each column that has a :data:`NULLS` companion made nullable integers
    again (the companion dropped).

    >>> f = pd.DataFrame({"acct": [2**62 + 1, 0], NULLS + "acct": [False, True]})
    >>> exact_integers(f)["acct"].tolist()
    [4611686018427387905, <NA>]
    """
    flags = [c for c in frame.columns if isinstance(c, str) and c.startswith(NULLS)]
    if not flags:
        return frame
    out = frame.drop(columns=flags)
    for flag in flags:
        name = flag[len(NULLS):]
        mask = frame[flag].to_numpy(dtype=bool)
        if mask.any():
            out[name] = pd.arrays.IntegerArray(frame[name].to_numpy(dtype=np.int64), mask)
    return out


def arrow_frame(batch: Any) -> pd.DataFrame:
    """An Arrow record batch as pandas, its integer columns holding nulls as nullable
    integers (pandas' default, float64, changes integers beyond 2**53).

    >>> import pyarrow as pa
    >>> arrow_frame(pa.record_batch({"acct": pa.array([2**62 + 1, None])}))["acct"].tolist()
    [4611686018427387905, <NA>]
    """
    import pyarrow as pa

    frame = batch.to_pandas()
    for i, kind in enumerate(batch.schema):
        column = batch.column(i)
        if pa.types.is_integer(kind.type) and column.null_count:
            frame[kind.name] = pd.arrays.IntegerArray(
                column.fill_null(0).to_numpy().astype(np.int64),
                column.is_null().to_numpy(zero_copy_only=False))
    return frame


def _keys(frame: pd.DataFrame, key: tuple[str, ...]) -> np.ndarray:
    if len(key) == 1:
        return frame[key[0]].to_numpy(dtype=object)
    return np.fromiter(zip(*(frame[k].tolist() for k in key), strict=True), dtype=object,
                       count=len(frame))


def _frame_of(data: bytes) -> pd.DataFrame:
    """The waiting rows of a group state written by an earlier version (an Arrow stream)."""
    import pyarrow as pa

    if not data:
        return pd.DataFrame()
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all().to_pandas()


def _before_epoch(ms: int, time: str) -> str:
    """Why an event at ``ms`` <= 0 cannot be matched by match_stream."""
    try:
        when = f"{(_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec='milliseconds')} "
    except OverflowError:  # before the year 1
        when = ""
    return (f"event time {when}({ms} ms) of {time!r} is at or before 1970-01-01T00:00:00Z: "
            "match_stream needs event times after 1970-01-01, because Spark's watermark 0 "
            "means 'no watermark yet'")
