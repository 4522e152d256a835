"""The keyed CEP operator: FlinkCEP's CepOperator semantics in one process.

Events wait in a buffer until the watermark passes them; then all released
events go to the engine in (timestamp, arrival) order per key, and event time
is advanced to the watermark for every key, which fires ``within`` timeouts
and completes trailing ``not_followed_by`` matches even for keys that get no
further events.  An event at or below the current watermark is late and goes
to the late output; a malformed event goes to the dead-letter output with the
reason.  Nothing is dropped silently.
"""

from __future__ import annotations

import heapq
import math
import time as _time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np

from cep.bounded import key_spec
from cep.errors import CEPError, ConditionError, MissingFieldError, TimeUnitError
from cep.expr import field_of
from cep.gcpause import paused_gc
from cep.match import Match, Timeout
from cep.pattern import Pattern
from cep.runtime.engines import KeyedEngine, ReferenceKeyed, make_engine
from cep.runtime.watermarks import END_OF_TIME, MIN_WATERMARK
from cep.times import SECONDS_LIKE_HIGH, SECONDS_LIKE_LOW, SUBMILLI_LIKE, _iso, check_unit
from cep.times import to_epoch_millis as _to_millis

Extractor = str | tuple[str, ...] | list[str] | Callable[[Any], Any] | None


@dataclass(frozen=True)
class LateEvent:
    """An event that arrived after the watermark had passed its timestamp."""

    event: Any
    timestamp: int
    key: Any
    watermark: int
    position: str | None = None


@dataclass(frozen=True)
class DeadLetter:
    """An event that could not be processed, why, and where it came from."""

    event: Any
    reason: str
    position: str | None = None


@dataclass
class Output:
    """What one call produced."""

    matches: list[Match] = field(default_factory=list)
    timeouts: list[Timeout] = field(default_factory=list)
    late: list[LateEvent] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)

    def extend(self, found: list[Match]) -> None:
        """Add what an engine returned: timeouts to ``timeouts``, the rest to ``matches``.

        >>> out = Output()
        >>> out.extend([Match({"a": [1]}, 1, 1), Timeout({"a": [2]}, 2, 2, timestamp=9)])
        >>> len(out.matches), len(out.timeouts)
        (1, 1)
        """
        for m in found:
            (self.timeouts if isinstance(m, Timeout) else self.matches).append(m)


class CepOperator:
    """Keyed pattern matching in event time (or processing time).

    >>> p = Pattern.begin("a").where(lambda e: e["v"] == 1).next("b")
    >>> op = CepOperator(p, key="k", time="ts")
    >>> op.process_element({"k": 1, "v": 1, "ts": 5}).matches
    []
    >>> _ = op.process_element({"k": 1, "v": 2, "ts": 6})
    >>> [m["b"][0]["v"] for m in op.process_watermark(10).matches]
    [2]
    """

    def __init__(
        self,
        pattern: Pattern,
        engine: str = "auto",
        *,
        key: Extractor = None,
        time: Extractor = None,
        timeouts: bool = True,
        processing_time: bool = False,
        clock: Callable[[], float] | None = None,
        max_partial_matches: int | None = None,
        on_overflow: str = "fail",
        time_unit: str | None = None,
        max_ahead: timedelta | int | None = None,
    ) -> None:
        if on_overflow not in ("fail", "drop_oldest"):
            raise CEPError(f"on_overflow must be 'fail' or 'drop_oldest', got {on_overflow!r}")
        #: the far-future guard (milliseconds, None: off); see :func:`check_max_ahead`
        self.max_ahead = check_max_ahead(max_ahead)
        #: per stream: [reference time, recent event times] (see _guard_state)
        self._ahead: dict[str, list[Any]] = {}
        self.pattern = pattern
        self.engine: KeyedEngine = make_engine(pattern, engine, timeouts=timeouts)
        self.key = key_spec(key)
        self.time = time
        #: unit of integer times (None: milliseconds, refusing values that look like seconds)
        self.time_unit = check_unit(time_unit)
        self._accepted_any = False  # has an event got past intake (see _refuse_setup)
        self.processing_time = processing_time
        self.clock = clock or _time.time
        self.max_partial_matches = max_partial_matches
        self.on_overflow = on_overflow
        self.watermark = MIN_WATERMARK
        self._buffer_last_ts = MIN_WATERMARK
        self._buffer: list[tuple[int, int, Any, Any]] = []
        self._seq = 0
        self._validate = getattr(self.engine, "check", None)
        self.metrics = {
            "events_in": 0, "matches": 0, "timeouts": 0, "late": 0, "dead_letters": 0,
            "dropped_partial_matches": 0, "peak_partial_matches": 0,
        }

    # ------------------------------------------------------------- elements
    def process_element(
        self, event: Any, timestamp: int | None = None, *, position: str | None = None,
        stream: str = "",
    ) -> Output:
        """Take one event; in processing-time mode it is matched at once.  ``stream`` names
        the input it came from, whose recent times the far-future guard compares it with."""
        out = Output()
        self.metrics["events_in"] += 1
        try:
            k = self._key_of(event)
            ts = self._time_of(event, timestamp)
            if self._validate is not None:
                self._validate(event)
        except SETUP_ERRORS as err:
            self._refuse_setup(err)
            out.dead.append(DeadLetter(event, str(err), position))
            return self._counted(out)
        except CEPError as err:
            out.dead.append(DeadLetter(event, str(err), position))
            return self._counted(out)
        if self.max_ahead is not None and not self.processing_time:
            reason = self._guard_one(stream, ts)
            if reason is not None:
                out.dead.append(DeadLetter(event, reason, position))
                return self._counted(out)
        self._accepted_any = True
        self._buffer_last_ts = ts
        if self.processing_time:
            self._feed([(ts, self._next_seq(), k, event, position)], out)
            return self._counted(out)
        if ts <= self.watermark:
            out.late.append(LateEvent(event, ts, k, self.watermark, position))
            return self._counted(out)
        heapq.heappush(self._buffer, (ts, self._next_seq(), k, (event, position)))
        state = self._ahead.get(stream)
        if state is not None and ts > state[0]:
            state[0] = ts
        return out

    def process_elements(
        self, events: list[Any], positions: list[str | None], stream: str = ""
    ) -> tuple[Output, int | None]:
        """Take a batch of events (event time); return the output and the newest timestamp
        buffered (for the source's watermark), so per-event work stays minimal.  ``stream``
        names the input the batch came from (see :meth:`process_element`)."""
        if self.processing_time:
            raise CEPError("process_elements is for event time; use process_element")
        out = Output()
        buffer = self._buffer
        push = heapq.heappush
        key_of, time_of = self._key_of, self._time_of
        check_batch = getattr(self.engine, "check_batch", None)
        misfits = check_batch(events) if check_batch is not None else {}
        watermark = self.watermark
        newest: int | None = None
        seq = self._seq
        setup_refused: CEPError | None = None
        # the far-future guard: an event beyond ``bound`` is checked (see _too_far_ahead)
        guard = self.max_ahead is not None
        state = self._guard_state(stream, events) if guard else None
        recent: list[int] = state[1] if state is not None else []
        limit = self.max_ahead or 0
        bound = state[0] + limit if state is not None else _NO_BOUND
        with paused_gc():  # a tuple per event, buffered: no cycles, and the buffer can be big
            for i, (event, position) in enumerate(zip(events, positions, strict=True)):
                try:
                    k = key_of(event)
                    ts = time_of(event, None)
                    if misfits and i in misfits:
                        raise CEPError(misfits[i])
                except SETUP_ERRORS as err:
                    setup_refused = setup_refused or err
                    out.dead.append(DeadLetter(event, str(err), position))
                    continue
                except CEPError as err:
                    out.dead.append(DeadLetter(event, str(err), position))
                    continue
                if guard:
                    if ts > bound:
                        assert state is not None
                        reason = self._too_far_ahead(ts, state[0], recent, stream)
                        recent.append(ts)
                        if reason is not None:
                            out.dead.append(DeadLetter(event, reason, position))
                            continue
                        state[0], bound = ts, ts + limit
                    else:
                        recent.append(ts)
                if ts <= watermark:
                    out.late.append(LateEvent(event, ts, k, watermark, position))
                    continue
                seq += 1
                push(buffer, (ts, seq, k, (event, position)))
                if newest is None or ts > newest:
                    newest = ts
                    if guard and ts > state[0]:  # type: ignore[index]
                        state[0], bound = ts, ts + limit  # type: ignore[index]
        if state is not None:
            state[1] = recent[-AHEAD_WINDOW:]
        if setup_refused is not None and seq == self._seq and len(out.dead) == len(events):
            self._refuse_setup(setup_refused)
        self._accepted_any = self._accepted_any or seq != self._seq
        self._seq = seq
        self.metrics["events_in"] += len(events)
        return self._counted(out), newest

    def process_watermark(self, watermark: int) -> Output:
        """Event time reached ``watermark``: match what it releases, then fire timers."""
        out = Output()
        if watermark <= self.watermark:
            return out
        self.watermark = watermark
        released = []
        with paused_gc():
            while self._buffer and self._buffer[0][0] <= watermark:
                ts, seq, k, (event, position) = heapq.heappop(self._buffer)
                released.append((ts, seq, k, event, position))
            if released:
                self._feed(released, out)
        out.extend(self.engine.advance(watermark))
        return self._counted(out)

    def finish(self) -> Output:
        """End of a bounded input: the watermark moves to the end of time."""
        return self.process_watermark(END_OF_TIME)

    # ---------------------------------------------------------------- state
    @property
    def buffered(self) -> int:
        """How many events wait for the watermark to pass them.

        >>> op = CepOperator(Pattern.begin("a"), time="ts")
        >>> _ = op.process_element({"ts": 5}); op.buffered
        1
        """
        return len(self._buffer)

    def buffered_events(self) -> list[tuple[int, int, Any, Any, str | None]]:
        """(timestamp, arrival, key, event, position) of events waiting for the watermark."""
        return [(ts, seq, k, ev, pos) for ts, seq, k, (ev, pos) in sorted(self._buffer)]

    def restore_buffer(self, items: list[tuple[int, int, Any, Any, str | None]], seq: int) -> None:
        """Put back :meth:`buffered_events` taken before, with the arrival counter ``seq``
        (a job resuming from a checkpoint)."""
        self._buffer = [(ts, s, k, (ev, pos)) for ts, s, k, ev, pos in items]
        heapq.heapify(self._buffer)
        self._seq = seq

    def guard_state(self) -> dict[str, list[Any]]:
        """What the far-future guard knows of each stream (its reference time and recent
        event times), as plain JSON for a checkpoint; :meth:`restore_guard` reads it back.

        >>> op = CepOperator(Pattern.begin("a"), time="ts", max_ahead=1000)
        >>> _ = op.process_elements([{"ts": 5}, {"ts": 9}, {"ts": 99_999}], [None] * 3, "f")
        >>> op.guard_state()
        {'f': [9, [5, 9, 99999]]}
        """
        return {stream: [ref, list(recent)] for stream, (ref, recent) in self._ahead.items()}

    def restore_guard(self, state: dict[str, list[Any]]) -> None:
        """Continue from a :meth:`guard_state` taken before (a job resuming)."""
        self._ahead = {str(stream): [int(ref), [int(t) for t in recent][-AHEAD_WINDOW:]]
                       for stream, (ref, recent) in state.items()}

    # ------------------------------------------------------------ internals
    def _guard_state(self, stream: str, events: list[Any]) -> list[Any] | None:
        """The guard's state of ``stream``: [reference time, recent times].  A stream's
        first batch has no reference yet: it is the (lower) median of the batch's times,
        so one far-future (or far-past) event among them does not become the reference.
        None when the batch has no readable time either."""
        state = self._ahead.get(stream)
        if state is None:
            times = []
            for event in events:
                try:
                    times.append(self._time_of(event, None))
                except Exception:  # the event's own refusal comes with its turn
                    continue
            if not times:
                return None
            state = self._ahead[stream] = [sorted(times)[(len(times) - 1) // 2], []]
        return state

    def _guard_one(self, stream: str, ts: int) -> str | None:
        """The far-future guard for one event (``process_element``): why it is refused,
        or None (then the event counts as the stream's newest if it is)."""
        state = self._guard_state(stream, [])
        if state is None:
            state = self._ahead[stream] = [ts, []]
        reason = None
        assert self.max_ahead is not None
        if ts > state[0] + self.max_ahead:
            reason = self._too_far_ahead(ts, state[0], state[1], stream)
        state[1].append(ts)
        del state[1][:-AHEAD_WINDOW]
        return reason

    def _too_far_ahead(self, ts: int, ref: int, recent: list[int], stream: str) -> str | None:
        """Why an event at ``ts`` is too far ahead of its stream, or None when the median of
        the stream's recent times (``recent``, before this event) says that the stream
        itself has moved on (a gap in the data, not one stray event)."""
        window = sorted(recent[-AHEAD_WINDOW:])
        # the lower median: a tie is no majority
        reference = max(ref, window[(len(window) - 1) // 2]) if window else ref
        assert self.max_ahead is not None
        if ts - reference <= self.max_ahead:
            return None
        where = f" of {stream}" if stream else ""
        name = self.time if isinstance(self.time, str) else "time"
        return (f"time field {name!r} is {_iso(ts)} ({ts}), {_span(ts - reference)} ahead of "
                f"{_iso(reference)}, the reference time{where} (its newest event time, or the "
                "median of its recent ones): more than the far-future guard allows "
                f"(max_event_time_ahead, cep replay --max-ahead: {_span(self.max_ahead)}); if "
                "such times are real, raise the limit")

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _key_of(self, event: Any) -> Any:
        key = self.key
        if key is None:
            return None
        if isinstance(key, tuple):
            parts = []
            for name in key:
                try:
                    parts.append(_key_value(name, field_of(event, name)))
                except KeyError:
                    raise MissingFieldError(f"missing key field {name!r}") from None
            return tuple(parts)
        try:
            value = key(event) if callable(key) else field_of(event, key)
        except KeyError as err:
            raise MissingFieldError(f"missing key field {key!r}") from err
        except Exception as err:
            raise CEPError(f"the key function raised {err!r}") from err
        value = _key_value(key if isinstance(key, str) else "key", value)
        try:
            hash(value)
        except TypeError:
            raise CEPError(f"key {value!r} is not hashable") from None
        return value

    def _refuse_setup(self, err: CEPError) -> None:
        """A key or time field missing, or times in the wrong unit: one odd event is a
        dead letter, but when nothing has got through yet and a whole batch is refused so,
        the job's setup is wrong (a misspelt field, seconds read as milliseconds), and
        dead-lettering all of it would let the job "succeed" with nothing matched: fail
        with the message instead."""
        if not self._accepted_any:
            raise err

    def _time_of(self, event: Any, timestamp: int | None) -> int:
        if self.processing_time:
            return int(self.clock() * 1000)
        if timestamp is not None:
            if type(timestamp) is int:
                return timestamp
            return _to_millis(timestamp, "ms", "timestamp")
        if self.time is None:
            raise CEPError("no timestamp: pass one or give the operator a time field")
        try:
            value = self.time(event) if callable(self.time) else field_of(event, self.time)
        except KeyError as err:
            raise MissingFieldError(f"missing time field {self.time!r}") from err
        # the usual case, inline: integer milliseconds of a plausible size
        if type(value) is int and self.time_unit is None and (
                -SECONDS_LIKE_LOW < value < SECONDS_LIKE_LOW
                or SECONDS_LIKE_HIGH <= value < SUBMILLI_LIKE):
            return value
        return _to_millis(value, self.time_unit,
                          self.time if isinstance(self.time, str) else "time")

    def _feed(self, items: list[tuple[int, int, Any, Any, str | None]], out: Output) -> None:
        """Match released events: (timestamp, arrival, key, event, position), in order."""
        engine = self.engine
        if isinstance(engine, ReferenceKeyed):
            # event by event, so a condition that raises costs only its own event
            for ts, _, k, event, pos in items:
                try:
                    out.extend(engine.process_one(k, ts, event))
                except ConditionError as err:
                    out.dead.append(DeadLetter(event, str(err), pos))
        else:
            keys = [k for _, _, k, _, _ in items]
            times = np.array([ts for ts, _, _, _, _ in items], np.int64)
            out.extend(engine.process(keys, times, [e for _, _, _, e, _ in items]))
        live = self.engine.partial_matches
        if live > self.metrics["peak_partial_matches"]:
            self.metrics["peak_partial_matches"] = live
        self._enforce_cap()

    def _counted(self, out: Output) -> Output:
        m = self.metrics
        m["matches"] += len(out.matches)
        m["timeouts"] += len(out.timeouts)
        m["late"] += len(out.late)
        m["dead_letters"] += len(out.dead)
        return out

    def _enforce_cap(self) -> None:
        cap = self.max_partial_matches
        if cap is None:
            return
        from cep.runtime.capacity import enforce

        self.metrics["dropped_partial_matches"] += enforce(self.engine, cap, self.on_overflow)


#: recent event times per stream the far-future guard keeps: their median lets a stream
#: move on after a jump, which a burst of no more than half as many events cannot do
AHEAD_WINDOW = 64

#: no far-future guard: no event time is beyond it
_NO_BOUND = 2**64


def check_max_ahead(limit: timedelta | int | None) -> int | None:
    """The far-future guard's limit in milliseconds (None: no guard).

    >>> check_max_ahead(timedelta(days=1)), check_max_ahead(None)
    (86400000, None)
    >>> check_max_ahead(0)
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: the far-future guard's limit must be a positive duration (a timedelta or milliseconds), or None for no guard; got 0
    """
    if limit is None:
        return None
    if isinstance(limit, timedelta):
        ms = limit // timedelta(milliseconds=1)
    elif isinstance(limit, int) and not isinstance(limit, bool):
        ms = limit
    else:
        ms = 0
    if ms <= 0:
        raise CEPError("the far-future guard's limit must be a positive duration (a timedelta "
                       f"or milliseconds), or None for no guard; got {limit!r}")
    return ms


def _span(ms: int) -> str:
    """A duration in the largest unit it holds whole.

    >>> _span(86_400_000 * 2914 + 3_600_000), _span(90_000), _span(12)
    ('2,914d', '1.5m', '12ms')
    """
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:,.1f}".removesuffix(".0") + unit
    return f"{ms}ms"


#: refusals that, for a whole first batch, mean the job is set up wrong (see _refuse_setup)
SETUP_ERRORS = (TimeUnitError, MissingFieldError)


def _key_value(name: str, value: Any) -> Any:
    """``value`` as a key, or a CEPError when it is null."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise CEPError(f"key field {name!r} is null")
    return value


#: integers at or beyond this have no float64 value (the numba engine reads numbers so)
_FLOAT_LIMIT = 2**1024


def check_fields(event: Any, schema: dict[str, str], names: list[str]) -> None:
    """Raise a CEPError naming the field if ``event`` does not fit the column types."""
    for name in names:
        try:
            value = field_of(event, name)
        except KeyError:
            raise CEPError(f"missing field {name!r}, which the pattern reads") from None
        kind = schema.get(name)
        vtype = type(value)
        if vtype is float and kind == "numeric":
            continue  # the common cases first
        if vtype is int and kind == "numeric" and -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
            continue
        if vtype is str and kind == "string":
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if kind == "numeric":
            # times are numbers to expressions: epoch milliseconds, durations milliseconds
            ok = isinstance(value, (int, float, np.number, date, timedelta, np.datetime64,
                                    np.timedelta64)) and not isinstance(value, (bool, np.bool_))
            if not ok:
                raise CEPError(f"field {name!r} is {value!r}: the pattern needs a number")
            if isinstance(value, int) and not -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
                raise CEPError(f"field {name!r} is an integer of {len(str(abs(value)))} digits, "
                               "beyond the range of a number the pattern can compare (float64)")
        elif kind == "string" and not isinstance(value, str):
            raise CEPError(f"field {name!r} is {value!r}: the pattern needs a string")
        elif kind == "boolean" and not isinstance(value, (bool, np.bool_)):
            raise CEPError(f"field {name!r} is {value!r}: the pattern needs true/false")
