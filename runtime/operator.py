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

import copy
import math
import os
import time as _time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, NamedTuple, NoReturn, TypeVar

import numpy as np

from cep.errors import (
    CEPError,
    MalformedPatternError,
    MissingFieldError,
    TimeUnitError,
    TooManyPartialMatches,
)
from cep.expr import field_of
from cep.gcpause import paused_gc
from cep.keys import key_spec
from cep.matches import Match, Timeout
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, Cap
from cep.nfa.engine import Engine, fields_absent, make_engine
from cep.nfa.events import (
    Events,
    Keys,
    arrow_schema,
    checked_frame,
    column_keys,
    count_rows,
    has_field,
    is_table,
    object_array,
    row_objects,
    take_rows,
    without_views,
)
from cep.nfa.found import MATCH, TIMEOUT, Found
from cep.nfa.shared_cuts import share_cuts
from cep.nfa.stray_text import PREFIX, has_stray_text, stray_text
from cep.nfa.table_names import has_column
from cep.pattern import Pattern
from cep.runtime.buffer import Waiting, WatermarkBuffer
from cep.runtime.threads import worker_threads
from cep.runtime.watermarks import END_OF_TIME, MIN_WATERMARK
from cep.times import SECONDS_LIKE_HIGH, SECONDS_LIKE_LOW, SUBMILLI_LIKE, check_unit, iso_time
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

    @property
    def reason(self) -> str:
        """Why it is a side output, as every output row says it.

        >>> LateEvent({"v": 1}, timestamp=3, key=None, watermark=9).reason
        'event time 3 is at or below the watermark 9'
        """
        return f"event time {self.timestamp} is at or below the watermark {self.watermark}"


@dataclass(frozen=True)
class DeadLetter:
    """An event that could not be processed, why, and where it came from."""

    event: Any
    reason: str
    position: str | None = None
    #: the rule that refused it, when only some rules of a job could not read it
    rule: str | None = None
    #: its event time in milliseconds, when that could be read
    timestamp: int | None = None
    #: the version of that rule, in a job running a rule set
    version: int | None = None


@dataclass
class Output:
    """What one call produced: matches and timeouts as the engines found them (columns, see
    :class:`~cep.nfa.found.Found`; Match objects when read), late events and dead letters."""

    #: what the engines found, call by call (matches and timeouts together)
    found: list[Found] = field(default_factory=list)
    late: list[LateEvent] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)

    def extend(self, found: Sequence[Match], rule: str | None = None,
               version: int | None = None, like: Any = None) -> None:
        """Add what an engine returned (its Found columns, or Match objects), found by
        ``rule`` (its ``version``, of a rule set); ``like``: the input's schema (Match
        objects hold its rows as Python objects).

        >>> out = Output()
        >>> out.extend([Match({"a": [1]}, 1, 1), Timeout({"a": [2]}, 2, 2, timestamp=9)])
        >>> len(out.matches), len(out.timeouts), out.count(MATCH)
        (1, 1, 1)
        """
        if len(found):
            self.found.append(Found.of_matches(found, like).with_rule(rule, version))

    def count(self, kind: int) -> int:
        """How many outputs of ``kind`` (MATCH or TIMEOUT), without making objects."""
        return sum(part.count(kind) for part in self.found)

    def of_kind(self, kind: int) -> Found:
        """The outputs of ``kind``, as one Found."""
        return Found.concat([part.of_kind(kind) for part in self.found])

    @property
    def matches(self) -> list[Match]:
        """The matches, as Match objects (made on first use)."""
        return [m for part in self.found for m in part if not isinstance(m, Timeout)]

    @property
    def timeouts(self) -> list[Timeout]:
        """The timeouts, as Timeout objects (made on first use)."""
        return [m for part in self.found for m in part if isinstance(m, Timeout)]


@dataclass(frozen=True)
class RuleRun:
    """One rule of an operator: its name (None for a job's single pattern), engine, and which
    of the operator's key fields its events are keyed by."""

    name: str | None
    engine: Engine
    key: int
    #: its version, in a job running a rule set (None otherwise)
    version: int | None = None
    #: its place in the operator's state (the rows it refused among those waiting): never
    #: given twice in a run, so a rule added after another left finds none of its marks
    slot: int = 0
    #: being drained after a change: it begins no new partial match
    #: (:meth:`~cep.nfa.engine.Engine.stop_starting`), those it holds go on
    draining: bool = False

    def emit(self, out: Output, found: Sequence[Match], like: Any = None) -> None:
        """Add what its engine found to ``out``, named by the rule (``like``: the input's
        schema, see :meth:`Output.extend`)."""
        out.extend(found, self.name, self.version, like)


class CepOperator:
    """Keyed pattern matching in event time (or processing time), for one pattern or several
    named rules (``{"name": pattern}``, each optionally ``(pattern, key)``) in one pass.

    Events arrive in batches (:meth:`process_batch`: Arrow tables, pandas frames or Python
    objects) or one at a time (:meth:`process_element`); keys and times are read a column
    at a time where the events are columns.  Events above the watermark wait as columnar
    chunks (:class:`~cep.runtime.buffer.WatermarkBuffer`); a watermark releases every
    waiting event at or below it as one batch to every rule's engine.

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
        pattern: Pattern | dict[str, Any],
        engine: str = "auto",
        *,
        key: Extractor = None,
        time: Extractor = None,
        timeouts: bool = True,
        processing_time: bool = False,
        clock: Callable[[], float] | None = None,
        max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
        on_overflow: str = "fail",
        time_unit: str | None = None,
        max_ahead: timedelta | int | None = None,
        time_format: str | None = None,
        setup_checks: bool = True,
        schema: Mapping[str, str] | None = None,
    ) -> None:
        cap = Cap(max_partial_matches, on_overflow)
        #: how rules added later (:meth:`add_rule`) get their engines
        self._engine_options = (engine, timeouts, cap, schema)
        #: the far-future guard (milliseconds, None: off); see :func:`check_max_ahead`
        self.max_ahead = check_max_ahead(max_ahead)
        #: the rule set has rules this operator does not run (a Spark group of one of its
        #: key fields): a row all of this operator's rules refuse is a dead letter of each
        #: of them, not of the set
        self.rules_elsewhere = False
        #: the schema of the last columns released: a reference engine's events, Python
        #: objects made of them, go back to a table as those types (timestamp[ns] stays so)
        self._like: Any = None
        #: the companion columns of text (see cep.nfa.stray_text) the released rows have
        #: held: kept in the schema of later ones, and in checkpoints
        self._text_fields: list[str] = []
        self.key = key_spec(key)
        #: the distinct key fields of the rules; each rule's events are keyed by one
        self.key_specs: list[Any] = [self.key]
        self.rules: list[RuleRun] = []
        # rules in name order: a rule's place (its state in a checkpoint, the rows it
        # refused in the buffer) does not depend on the order the dict was written in
        named = dict(sorted(pattern.items())) if isinstance(pattern, dict) else {None: pattern}
        for name, given in named.items():
            rule_pattern, rule_key = (given if isinstance(given, tuple) else (given, key))
            spec = key_spec(rule_key)
            if spec not in self.key_specs:
                self.key_specs.append(spec)
            try:
                rule_engine = make_engine(rule_pattern, engine, timeouts=timeouts, cap=cap,
                                          schema=schema)
            except CEPError as err:
                if name is None:
                    raise
                raise type(err)(f"rule {name!r}: {err}") from err
            self.rules.append(RuleRun(name, rule_engine, self.key_specs.index(spec),
                                      slot=len(self.rules)))
        #: the slot the next rule added gets
        self.next_slot = len(self.rules)
        #: engines made for patterns, by the pattern's id, when set to a dict: operators
        #: that restore the same rules again and again (Spark's group calls, whose
        #: :meth:`fresh` copies share it) compile each pattern once
        self.engine_cache: dict[int, tuple[Pattern, Engine]] | None = None
        self.pattern = self.rules[0].engine.pattern if len(self.rules) == 1 else None
        #: the engine of the first rule (the only one for a single pattern; None for an
        #: operator that starts with no rules, to be given some by :meth:`add_rule`)
        self.engine: Engine | None = self.rules[0].engine if self.rules else None
        self.time = time
        #: unit of integer times (None: milliseconds, refusing values that look like seconds)
        self.time_unit = check_unit(time_unit)
        #: the ``strptime`` format of times given as text (None: ISO-8601)
        self.time_format = time_format
        #: fail on a whole first batch refused for a setup error (see _refuse_setup)
        self.setup_checks = setup_checks
        self.processing_time = processing_time
        self.clock = clock or _time.time
        self._start()

    def _start(self) -> None:
        """Begin with no state: no events seen, none waiting, no watermark."""
        self._accepted_any = False  # has an event got past intake (see _refuse_setup)
        self.watermark = MIN_WATERMARK
        #: the time of the newest event taken in (for a source's watermark)
        self.newest_time = MIN_WATERMARK
        self.buffer = WatermarkBuffer()
        self.seq = 0  # arrival numbers given so far
        #: where events come from: position labels by index (0: none); see _position
        self.origins: list[str | None] = [None]
        self._origin_index: dict[str | None, int] = {None: 0}
        self.metrics = {
            "events_in": 0, "matches": 0, "timeouts": 0, "late": 0, "dead_letters": 0,
            "dropped_partial_matches": 0, "peak_partial_matches": 0,
        }
        #: partial matches the cap dropped per rule since :meth:`take_dropped_by_rule`
        self._dropped_by_rule: dict[str | None, int] = {}
        #: per stream: [reference time, recent event times] (see _guard_state)
        self._ahead: dict[str, list[Any]] = {}
        #: per rule, the fields its expressions read that no event has held yet (with the
        #: stages reading them): still there at the end of the input, a likely misspelling
        self._unseen = {rule.slot: _read_fields(rule.engine.pattern) for rule in self.rules}
        #: fields some event held (so a rule added later does not wait for them again)
        self._fields_seen: set[str] = set()
        #: events each rule's engines were given, by rule name, since :meth:`take_rule_events`
        self._rule_events: dict[str | None, int] = {}
        #: events each rule was given in all, by slot
        self._given: dict[int, int] = {}

    def fresh(self) -> CepOperator:
        """An operator like this one with no state (its engines' compiled patterns shared):
        cheaper than building one where many short runs share a configuration, as Spark's
        group calls do.

        >>> op = CepOperator(Pattern.begin("a"), key="k", time="ts")
        >>> _ = op.process_element({"k": 1, "ts": 5})
        >>> op.buffered, op.fresh().buffered
        (1, 0)
        """
        op = copy.copy(self)
        op.rules = [replace(r, engine=r.engine.fresh(), draining=False) for r in self.rules]
        op.engine = op.rules[0].engine if op.rules else None
        op._start()
        return op

    # ------------------------------------------------------------- elements
    def process_element(
        self, event: Any, timestamp: int | None = None, *, position: str | None = None,
        stream: str = "",
    ) -> Output:
        """Take one event; in processing-time mode it is matched at once.  ``stream`` names
        the input it came from, whose recent times the far-future guard compares it with."""
        if not self.processing_time:
            if timestamp is not None:
                try:
                    stamp = timestamp if type(timestamp) is int and (
                        _MIN_TIME <= timestamp <= _MAX_TIME) else _to_millis(
                        timestamp, "ms", "timestamp")
                except CEPError as err:
                    self.metrics["events_in"] += 1
                    return self._counted(Output(dead=[DeadLetter(event, str(err), position)]))
                out, newest = self._intake(object_array([event]), [position], stream, [stamp])
            else:
                out, newest = self._intake(object_array([event]), [position], stream)
            if newest is not None:
                self.newest_time = newest
            return out
        out = Output()
        self.metrics["events_in"] += 1
        try:
            ts = self._time_of(event, timestamp)
        except CEPError as err:
            return self._refused_element(event, err, position, out)
        keys: list[Keys] = []
        unkeyed: dict[int, CEPError] = {}  # key field -> why this event has no key by it
        for k, spec in enumerate(self.key_specs):
            try:
                keys.append(Keys.of_values([self._key_of(event, spec)]))
            except CEPError as err:
                keys.append(Keys.none(1))
                unkeyed[k] = err
        # per rule, why it cannot read the event: refused by all, a dead letter of the job;
        # by some, a dead letter of each of those, and matched by the others
        refusals: list[tuple[RuleRun, CEPError]] = []
        for rule in self.rules:
            if rule.key in unkeyed:
                refusals.append((rule, unkeyed[rule.key]))
                continue
            misfit = _screened(rule, Events.one(event, None, ts), self._rule_set).get(0)
            if misfit is not None:
                refusals.append((rule, CEPError(misfit)))
        if self.rules and len(refusals) == len(self.rules):
            return self._refused_element(event, refusals[0][1], position, out)
        for rule, err in refusals:
            out.dead.append(DeadLetter(event, str(err), position, rule=rule.name,
                                       version=rule.version))
        self._accepted_any = True
        self._see_fields(object_array([event]))
        self.newest_time = ts
        self.seq += 1
        chunk = Waiting.of(object_array([event]), [ts], keys, [self.seq],
                           [self._origin(position)], [-1])
        if refusals:
            chunk.refused = {rule.slot: np.ones(1, np.bool_) for rule, _ in refusals}
        self._feed(chunk, out)
        return self._counted(out)

    def _refused_element(self, event: Any, err: CEPError, position: str | None,
                         out: Output) -> Output:
        """An event no rule can take (processing time): a dead letter, or the job's setup
        error when nothing has got through yet (see :meth:`_refuse_setup`)."""
        if isinstance(err, SETUP_ERRORS):
            self._refuse_setup(err)
        out.dead.append(DeadLetter(event, str(err), position))
        return self._counted(out)

    def process_elements(
        self, events: list[Any], positions: list[str | None], stream: str = ""
    ) -> tuple[Output, int | None]:
        """Take a batch of events (event time); return the output and the newest timestamp
        buffered (for the source's watermark).  ``stream`` names the input the batch came
        from (see :meth:`process_element`)."""
        if self.processing_time:
            raise CEPError("process_elements is for event time; use process_element")
        return self._intake(object_array(events), positions, stream)

    def process_batch(self, rows: Any, *, origin: str | list[str] | None = None,
                      row_numbers: Any = None, stream: str = "", origin_of: Any = None,
                      times: Any = None) -> tuple[Output, int | None]:
        """Take a batch of events as columns: a pyarrow Table, a pandas DataFrame, or Python
        objects; ``origin`` (a file) and ``row_numbers`` (each event's row in it) make the
        positions late events and dead letters report (``<origin>:<row>``); rows from
        several origins give them as a list and each row's index in it as ``origin_of``.
        ``times`` is the batch's time column when it is not one of its fields (Spark reads
        it with the session's time zone); it is read and screened as the time field would
        be, and named by it in messages.
        Returns the output and the newest time buffered (for the source's watermark).

        >>> import pyarrow as pa
        >>> op = CepOperator(Pattern.begin("a"), key="card", time="ts")
        >>> op.process_element({"card": 1, "ts": 50}).late
        []
        >>> batch = pa.table({"card": [1, None, 2], "ts": [100, 200, 10]})
        >>> out, newest = op.process_batch(batch, origin="day1.csv", row_numbers=[7, 8, 9])
        >>> newest, [(d.reason, d.position) for d in out.dead]
        (100, [("key field 'card' is null", 'day1.csv:8')])
        """
        if self.processing_time:
            raise CEPError("process_batch is for event time; use process_element")
        if not (_is_columns(rows) or isinstance(rows, np.ndarray)):
            rows = object_array(rows)
        elif is_table(rows):
            rows = without_views(rows)
        elif _is_columns(rows):
            rows = checked_frame(rows)
        n = count_rows(rows)
        numbers = (np.arange(n, dtype=np.int64) if row_numbers is None
                   else np.asarray(row_numbers, np.int64))
        if origin_of is None:
            assert not isinstance(origin, list), "several origins need origin_of"
            part: int | np.ndarray = self._origin(origin)
        else:
            assert isinstance(origin, list)
            labels = np.array([self._origin(label) for label in origin], np.int32)
            part = labels[np.asarray(origin_of, np.int64)]
        return self._intake(rows, None, stream, None, part, numbers, times)

    def process_watermark(self, watermark: int) -> Output:
        """Event time reached ``watermark``: match what it releases, then fire timers."""
        watermark = _checked_watermark(watermark)
        out = Output()
        if watermark <= self.watermark:
            return out
        self.watermark = watermark
        released = self.buffer.release(watermark)
        if released is not None:
            with paused_gc():
                self._feed(released, out, watermark)
        else:
            for rule, advanced in zip(self.rules, _side_by_side(
                    lambda rule: rule.engine.advance(watermark), self.rules), strict=True):
                rule.emit(out, advanced, self._like)
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
        return len(self.buffer)

    @property
    def partial_matches(self) -> int:
        """Partial matches all rules hold."""
        return sum(rule.engine.partial_matches for rule in self.rules)

    @property
    def keys_with_state(self) -> int:
        """Keys holding partial matches, per rule (a key two rules track counts twice); a
        key with nothing pending holds nothing."""
        return sum(rule.engine.keys_with_state for rule in self.rules)

    def state_bytes(self) -> int:
        """About how many bytes the state takes: the engines' and the waiting events'."""
        return sum(rule.engine.state_bytes() for rule in self.rules) + self.buffer.nbytes()

    def take_dropped_by_rule(self) -> dict[str | None, int]:
        """Partial matches the cap dropped, per rule (by name), since the last call."""
        dropped, self._dropped_by_rule = self._dropped_by_rule, {}
        return dropped

    def take_rule_events(self) -> dict[str | None, int]:
        """Events each rule's engines were given since the last call, by rule name (a rule
        set's versions together)."""
        given, self._rule_events = self._rule_events, {}
        return given

    # ------------------------------------------------------ rules that change
    def add_rule(self, name: str, pattern: Pattern, key: Extractor, version: int | None = None,
                 draining: bool = False, measures: Mapping[str, Any] | None = None
                 ) -> tuple[RuleRun, Output]:
        """Run one more rule from now on: it reads the events that wait for the watermark
        and every event after them, none before.  Waiting events it cannot read (no key by
        its field, a field of the wrong type) are its dead letters, in the output.
        ``draining`` adds it as :meth:`drain_rule` leaves a rule (a job resuming);
        ``measures``, its measures, are only read for the fields they name (see
        :meth:`unseen_fields`).

        >>> from cep import col
        >>> op = CepOperator({}, key="card", time="ts")
        >>> _ = op.process_element({"card": 1, "v": 1, "ts": 5})
        >>> p = Pattern.begin("a").where(col("v") == 1).next("b")
        >>> run, out = op.add_rule("pair", p, "card", version=2)
        >>> _ = op.process_element({"card": 1, "v": 2, "ts": 6})
        >>> [(m.rule, m.version, m.start, m.end) for m in op.finish().matches]
        [('pair', 2, 5, 6)]
        """
        rule_engine = self._engine_for(name, pattern, draining)
        spec = key_spec(key)
        if spec not in self.key_specs:
            self.key_specs.append(spec)
            self._rekey_waiting()
        run = RuleRun(name, rule_engine, self.key_specs.index(spec), version, self.next_slot,
                      draining)
        self.next_slot += 1
        self.rules.append(run)
        if self.engine is None:
            self.engine = rule_engine
        self._unseen[run.slot] = {f: stages for f, stages in _read_fields(
            pattern, measures).items() if f not in self._fields_seen}
        for chunk in self.buffer.chunks:  # taken in before the rule came: seen all the same
            self._see_fields(chunk.rows)
        return run, self._screen_waiting(run)

    def set_rules(self, key_specs: list[Any],
                  runs: list[tuple[str, Pattern, int, int | None, int, bool]],
                  next_slot: int) -> None:
        """Run exactly these rules, holding nothing yet: a job resuming, whose checkpoint
        says which rules ran, keyed by which of ``key_specs`` (after the job's key), in which
        slot, draining or not (``runs``: name, pattern, key index, version, slot, draining);
        their engines' state is restored next."""
        self.key_specs = [self.key, *key_specs]
        self.rules = [RuleRun(name, self._engine_for(name, pattern, draining), key, version,
                              slot, draining)
                      for name, pattern, key, version, slot, draining in runs]
        self.next_slot = next_slot
        self.engine = self.rules[0].engine if self.rules else None
        self._unseen = {r.slot: _read_fields(r.engine.pattern) for r in self.rules}

    def _engine_for(self, name: str, pattern: Pattern, draining: bool) -> Engine:
        cache = self.engine_cache
        if cache is not None and id(pattern) in cache:
            made = cache[id(pattern)][1].fresh()
        else:
            engine, timeouts, cap, schema = self._engine_options
            try:
                made = make_engine(pattern, engine, timeouts=timeouts, cap=cap, schema=schema)
            except CEPError as err:
                raise type(err)(f"rule {name!r}: {err}") from err
            if cache is not None:  # the pattern is held so that its id is not reused
                cache[id(pattern)] = (pattern, made.fresh())
        if draining:
            made.stop_starting()
        return made

    def remove_rule(self, run: RuleRun) -> int:
        """Stop running a rule at once; returns the partial matches it held (dropped)."""
        dropped = run.engine.partial_matches
        self.rules = [r for r in self.rules if r.slot != run.slot]
        self._unseen.pop(run.slot, None)
        used = {0} | {r.key for r in self.rules}
        if len(used) < len(self.key_specs):  # a key field no rule reads: no longer read
            keep = sorted(used)
            self.key_specs = [self.key_specs[i] for i in keep]
            self.rules = [replace(r, key=keep.index(r.key)) for r in self.rules]
            self._rekey_waiting(keep)
        return dropped

    def drain_rule(self, run: RuleRun) -> RuleRun:
        """Let a rule begin no new partial match; those it holds may still complete or time
        out.  :meth:`drained` says when it holds none any more."""
        run.engine.stop_starting()
        drained = replace(run, draining=True)
        self.rules = [drained if r.slot == run.slot else r for r in self.rules]
        return drained

    def drained(self) -> list[RuleRun]:
        """The draining rules that hold nothing any more (to be removed)."""
        return [r for r in self.rules if r.draining and not r.engine.partial_matches]

    def _rekey_waiting(self, keep: list[int] | None = None) -> None:
        """The waiting chunks with a key per key field of the operator now: the new field's
        read from their rows, or only the fields ``keep`` says.  Chunks are replaced, never
        changed: a checkpoint being written may hold them."""
        chunks = []
        for chunk in self.buffer.chunks:
            if keep is not None:
                keys = [chunk.keys[i] for i in keep]
            else:
                read, _ = self._keys(chunk.rows, self.key_specs[-1], {}, alone=False)
                keys = [*chunk.keys, read]
            chunks.append(replace(chunk, keys=keys))
        self.buffer.replace(chunks)

    def _screen_waiting(self, run: RuleRun) -> Output:
        """Mark the waiting rows ``run`` cannot read; each is a dead letter of that rule."""
        out = Output()
        chunks = []
        for chunk in self.buffer.chunks:
            n = len(chunk)
            _, bad = self._keys(chunk.rows, self.key_specs[run.key], {}, alone=False)
            why = self._unreadable(run, chunk.rows, chunk.keys[run.key], bad, chunk.times,
                                   np.ones(n, np.bool_))
            if why:
                mask = np.zeros(n, np.bool_)
                mask[list(why)] = True
                for i in sorted(why):
                    out.dead.append(DeadLetter(
                        _row(chunk.rows, i), why[i], self._position(chunk.part[i], chunk.row[i]),
                        rule=run.name, timestamp=int(chunk.times[i]), version=run.version))
                chunk = replace(chunk, refused={**(chunk.refused or {}), run.slot: mask})
            chunks.append(chunk)
        self.buffer.replace(chunks)
        return self._counted(out)

    @property
    def _rule_set(self) -> bool:
        """Does the job run several rules, or a rule set (which may change while it runs)?
        Then a rule that cannot read the input refuses its events, and the job goes on."""
        return len(self.rules) > 1 or any(r.version is not None for r in self.rules)

    def _unreadable(self, rule: RuleRun, rows: Any, keys: Keys, key_bad: Mapping[int, CEPError],
                    times: np.ndarray, alive: np.ndarray, cache: dict[Any, Any] | None = None
                    ) -> dict[int, str]:
        """The rows among ``alive`` that ``rule`` cannot read, with why: no key by its
        field (``key_bad``), or a field its engine cannot read (its screening, see
        :func:`_screened`; ``cache``: shared by the rules screening the same rows)."""
        why = {i: str(err) for i, err in key_bad.items() if alive[i]}
        if not why and alive.all():  # the usual batch: all of it, no index to map back
            misfits = _screened(rule, Events(rows, keys, times, cache), self._rule_set)
            return {int(j): reason for j, reason in misfits.items()}
        readable = alive.copy()
        readable[list(why)] = False
        idx = np.flatnonzero(readable)
        if len(idx):
            batch = Events(rows, keys, times, cache)
            misfits = _screened(rule, batch if len(idx) == len(alive) else batch.take(idx),
                                self._rule_set)
            why.update({int(idx[j]): reason for j, reason in misfits.items()})
        return why

    def buffer_state(self) -> tuple[Waiting | None, dict[str, Any]]:
        """The waiting events as one chunk (arrival order) and what reads them back (the
        position labels and the arrival counter), for a checkpoint."""
        return self.buffer.everything(), {"origins": list(self.origins), "seq": self.seq,
                                          "text_fields": list(self._text_fields),
                                          "like": _schema_text(self._like)}

    def restore_buffer_state(self, chunk: Waiting | None, state: dict[str, Any]) -> None:
        """Continue from :meth:`buffer_state` taken before (a job resuming)."""
        self.origins = list(state["origins"])
        self._origin_index = {o: i for i, o in enumerate(self.origins)}
        self.seq = int(state["seq"])
        self._text_fields = [str(n) for n in state.get("text_fields", [])]
        # the input's schema outputs are made with (key types, words): as before the stop
        self._like = _schema_back(state.get("like"))
        self.buffer.restore(chunk)

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

    # --------------------------------------------------------------- intake
    def _intake(self, rows: Any, positions: list[str | None] | None, stream: str,
                stamps: list[int] | None = None, origin: int | np.ndarray = 0,
                numbers: np.ndarray | None = None, time_column: Any = None
                ) -> tuple[Output, int | None]:
        """Screen a batch (times, keys, types, the far-future guard), send late events to the
        late output, and buffer the rest; see :meth:`process_batch`."""
        out = Output()
        n = count_rows(rows)
        self.metrics["events_in"] += n
        if n == 0:
            return out, None
        if positions is not None:  # labels given one by one (process_element(s))
            part = np.fromiter((self._origin(p) for p in positions), np.int32, n)
            row = np.full(n, -1, np.int64)
        else:
            part = (np.full(n, origin, np.int32) if isinstance(origin, int)
                    else origin.astype(np.int32, copy=False))
            row = numbers if numbers is not None else np.arange(n, dtype=np.int64)
        dead: dict[int, CEPError] = {}
        # keys first: an event's first refusal is its key's, as events are read field by
        # field; for several rules, whose key refusals are per rule (not in dead), the key
        # fields of columns side by side (Arrow hashes them without the GIL; a function
        # of the user's is called on the job's thread alone)
        by_field = all(spec is None or isinstance(spec, (str, tuple)) for spec in self.key_specs)
        side_by_side = ((len(self.rules) > 1 or self.rules_elsewhere) and by_field
                        and _is_columns(rows))
        read = _side_by_side(lambda spec: self._keys(rows, spec, dead), self.key_specs,
                             n if side_by_side else 0)
        if stamps is not None:
            times, untimed = np.asarray(stamps, np.int64), np.zeros(n, np.bool_)
        else:
            times, untimed = self._times(rows, dead, time_column)
        keys = [k for k, _ in read]
        key_bad = [bad for _, bad in read]
        alive = np.ones(n, np.bool_)
        if dead:
            alive[list(dead)] = False
        # per rule, the rows it cannot read (key unreadable, fields of the wrong type): a row
        # no rule can read is a dead letter; one only some cannot, a dead letter per rule
        refused: dict[int, np.ndarray] = {}  # by slot
        refusals: list[tuple[int, str, RuleRun]] = []  # (row, why, rule)
        every: set[int] = set()  # the rows all of this operator's rules refuse
        screened: dict[Any, Any] = {}  # what screening found out, for every rule
        for rule in self.rules:
            why = self._unreadable(rule, rows, keys[rule.key], key_bad[rule.key], times, alive,
                                   screened)
            if why:
                refusals += [(i, reason, rule) for i, reason in why.items()]
                mask = np.zeros(n, np.bool_)
                mask[list(why)] = True
                refused[rule.slot] = mask
        if refused:
            first: dict[int, str] = {}
            for i, reason, _ in refusals:
                first.setdefault(i, reason)
            if len(refused) == len(self.rules):
                every = set(np.flatnonzero(np.logical_and.reduce(list(refused.values())))
                            .tolist())
                for i in every:
                    alive[i] = False
                    if not self.rules_elsewhere:
                        dead[i] = CEPError(first[i])
            if len(self.rules) > 1 or self.rules_elsewhere:
                mine = [(i, reason, by) for i, reason, by in refusals
                        if alive[i] or (self.rules_elsewhere and i in every)]
                # the rows as Python objects in one go (a rule keyed by a field most events
                # lack refuses nearly all of them: a call per row was 13x the job's time)
                at = sorted({i for i, _, _ in mine})
                event_of = dict(zip(at, row_objects(rows, np.array(at, np.int64)),
                                    strict=True)) if at else {}
                for i, reason, by in mine:
                    out.dead.append(DeadLetter(event_of[i], reason, self._position(
                        part[i], row[i]), rule=by.name, timestamp=int(times[i]),
                        version=by.version))
        self._refuse_setup_batch(dead, n, self.origins[int(part[0])] if n else None)
        if self.max_ahead is not None:
            self._guard(times, alive, dead, stream)
        seen = alive
        if every and self.rules_elsewhere:  # the set's other rules may take them: late too
            seen = alive.copy()
            seen[list(every)] = True
        late = seen & (times <= self.watermark)
        if late.any():
            late_idx = np.flatnonzero(late)
            events = row_objects(rows, late_idx)
            key_of = keys[0]
            for i, event in zip(late_idx.tolist(), events, strict=True):
                out.late.append(LateEvent(event, int(times[i]), key_of.value(i), self.watermark,
                                          self._position(part[i], row[i])))
        keep = alive & ~late
        if dead:
            order = sorted(dead)
            for i, event in zip(order, row_objects(rows, np.array(order, np.int64)), strict=True):
                out.dead.append(DeadLetter(event, str(dead[i]), self._position(part[i], row[i]),
                                           timestamp=None if untimed[i] else int(times[i])))
        newest: int | None = None
        if keep.any():
            self._see_fields(rows)
            idx = np.flatnonzero(keep)
            whole = len(idx) == n
            seq = np.arange(self.seq + 1, self.seq + 1 + len(idx), dtype=np.int64)
            self.seq += len(idx)
            if whole:  # the usual batch: its arrays as they are
                chunk = Waiting(rows, times, seq, part, row, keys, refused or None)
            else:
                chunk = Waiting(take_rows(rows, idx), times[idx], seq, part[idx], row[idx],
                                [k.take(idx) for k in keys],
                                None if not refused else {r: m[idx] for r, m in refused.items()})
            self.buffer.add(chunk)
            newest = int(chunk.times.max())
            self._accepted_any = True
            if self.max_ahead is not None:
                state = self._ahead.get(stream)
                if state is not None and newest > state[0]:
                    state[0] = newest
        elif late.any():
            self._accepted_any = True
        return self._counted(out), newest

    def unseen_fields(self) -> dict[str | None, dict[str, list[str]]]:
        """Per rule (by name), the fields its expressions read that no event taken in has
        held so far, with the stages reading them.  An event without a field reads null
        there; at the end of an input, a field no event held is most likely misspelt.

        >>> from cep import col
        >>> op = CepOperator(Pattern.begin("a").where(col("amout") > 5), time="ts")
        >>> _ = op.process_elements([{"amount": 9, "ts": 1}], [None])
        >>> op.unseen_fields()
        {None: {'amout': ['a']}}
        """
        # a rule of a rule set that came after the last event was given none: it has
        # nothing to say of the input's fields
        return {rule.name: dict(self._unseen[rule.slot]) for rule in self.rules
                if self._unseen[rule.slot] and (
                    rule.version is None or self._given.get(rule.slot, 0))}

    def unseen_state(self) -> list[list[str]]:
        """Per rule, the names of its unseen fields (for a checkpoint)."""
        return [sorted(self._unseen[rule.slot]) for rule in self.rules]

    def restore_unseen(self, names: list[list[str]]) -> None:
        """Continue from a checkpoint's unseen fields (per rule, the names; see
        :meth:`unseen_fields`): fields seen before it stay seen."""
        for rule, kept in zip(self.rules, names, strict=True):
            unseen = self._unseen[rule.slot]
            for name in [n for n in unseen if n not in kept]:
                del unseen[name]
                self._fields_seen.add(name)

    def _see_fields(self, rows: Any) -> None:
        """Strike the fields ``rows`` hold off the rules' unseen fields."""
        if not any(self._unseen.values()):
            return
        for unseen in self._unseen.values():
            for name in [n for n in unseen if has_field(rows, n)]:
                del unseen[name]
                self._fields_seen.add(name)

    def _times(self, rows: Any, dead: dict[int, CEPError], column: Any = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Event times of a batch (a column at a time for a named field of columns, or the
        ``column`` given for it), and which rows have none: those go to ``dead`` with the
        error their own reading gives."""
        n = count_rows(rows)
        if isinstance(self.time, str) and (_is_columns(rows) or column is not None) and (
                column is not None or stray_text(rows, self.time) is None):
            # (text in a column of times as numbers: read row by row, which names it)
            from cep.time_columns import times_of_column

            if column is None:
                column = _column(rows, self.time)
            if column is None:
                err = MissingFieldError(f"missing time field {self.time!r}")
                for i in range(n):
                    dead.setdefault(i, err)
                return np.zeros(n, np.int64), np.ones(n, np.bool_)
            read = times_of_column(column, self.time_unit, self.time, self.time_format)
            for i in np.flatnonzero(read.bad).tolist():
                dead.setdefault(i, read.error(i))
            return np.where(read.bad, 0, read.millis).astype(np.int64), read.bad
        times = np.zeros(n, np.int64)
        untimed = np.zeros(n, np.bool_)
        for i, event in enumerate(row_objects(rows, None)):
            try:
                times[i] = self._time_of(event, None)
            except CEPError as err:
                dead.setdefault(i, err)
                untimed[i] = True
        return times, untimed

    def _keys(self, rows: Any, spec: Any, dead: dict[int, CEPError], alone: bool | None = None
              ) -> tuple[Keys, dict[int, CEPError]]:
        """Keys by ``spec`` (a column at a time for named fields of columns), and the rows
        whose key cannot be read, with why; for a single rule (``alone``, by default when the
        operator runs one) those go to ``dead``."""
        n = count_rows(rows)
        if spec is None:
            return Keys.none(n), {}
        names = spec if isinstance(spec, tuple) else (spec,)
        found = None
        if _is_columns(rows) and all(isinstance(f, str) for f in names):
            found = _column_keys(rows, names)
        if found is None:
            values: list[Any] = [None] * n
            bad: dict[int, CEPError] = {}
            for i, event in enumerate(row_objects(rows, None)):
                try:
                    values[i] = self._key_of(event, spec)
                except CEPError as err:
                    bad[i] = err
            keys = Keys.of_values(values)
        else:
            keys, bad = found
        if alone is None:
            alone = len(self.rules) == 1 and not self.rules_elsewhere
        if bad and alone:  # several rules: refused per rule (see _intake)
            for i, err in bad.items():
                dead.setdefault(i, err)
        return keys, bad

    def _refuse_setup_batch(self, dead: dict[int, CEPError], n: int, origin: str | None
                            ) -> None:
        """See :meth:`_refuse_setup`: a whole first batch refused for a setup error; the
        message names where the batch came from (``origin``: its file, when the source
        has files), since one odd file read first looks just like a misspelt field."""
        if len(dead) == n and not self._accepted_any and self.setup_checks:
            for err in dead.values():
                if isinstance(err, SETUP_ERRORS):
                    if (origin is None or not isinstance(err, MissingFieldError)
                            or not os.path.isfile(origin)):
                        raise err
                    raise type(err)(f"{err} in any event of the first batch read, from "
                                    f"{origin} (a file that alone lacks it: replay the "
                                    "others, or put it after them)") from err

    def _guard(self, times: np.ndarray, alive: np.ndarray, dead: dict[int, CEPError],
               stream: str) -> None:
        """The far-future guard over a batch, in arrival order (see
        :meth:`~cep.runtime.Job.max_event_time_ahead`)."""
        state = self._ahead.get(stream)
        if state is None:
            # a stream's first batch: the (lower) median of its times is the reference, so
            # one far-future (or far-past) event among them does not become it
            readable = np.sort(times[alive])
            if not len(readable):
                return
            state = self._ahead[stream] = [int(readable[(len(readable) - 1) // 2]), []]
        limit = self.max_ahead
        assert limit is not None
        recent: list[int] = state[1]
        idx = np.flatnonzero(alive)
        values = times[idx]
        if not len(values):
            return
        if int(values.max()) <= state[0] + limit:  # the usual case: nothing to look at
            recent.extend(values[-AHEAD_WINDOW:].tolist())
            state[1] = recent[-AHEAD_WINDOW:]
            above = values[values > self.watermark]
            if len(above) and int(above.max()) > state[0]:
                state[0] = int(above.max())
            return
        bound = state[0] + limit
        for i, ts in zip(idx.tolist(), values.tolist(), strict=True):
            if ts > bound:
                reason = self._too_far_ahead(ts, state[0], recent, stream)
                recent.append(ts)
                if reason is not None:
                    dead[i] = CEPError(reason)
                    alive[i] = False
                    continue
                state[0], bound = ts, ts + limit
            else:
                recent.append(ts)
            if ts > self.watermark and ts > state[0]:
                state[0], bound = ts, ts + limit
        state[1] = recent[-AHEAD_WINDOW:]

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
        return (f"time field {name!r} is {iso_time(ts)} ({ts}), {_span(ts - reference)} ahead of "
                f"{iso_time(reference)}, the reference time{where} (its newest event time, or the "
                "median of its recent ones): more than the far-future guard allows "
                f"(max_event_time_ahead, cep replay --max-ahead: {_span(self.max_ahead)}); if "
                "such times are real, raise the limit")

    # ------------------------------------------------------------ internals
    def _origin(self, label: str | None) -> int:
        index = self._origin_index.get(label)
        if index is None:
            index = self._origin_index[label] = len(self.origins)
            self.origins.append(label)
        return index

    def _position(self, part: int, row: int) -> str | None:
        """The position label of an event: its origin, and its row there when known."""
        label = self.origins[int(part)]
        if row < 0 or label is None:
            return label
        return f"{label}:{int(row)}"

    def _key_of(self, event: Any, key: Any) -> Any:
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
        if not self._accepted_any and self.setup_checks:
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
        if self.time_format is not None and isinstance(value, str):
            return _formatted(value, self.time_format, self.time)
        # the usual case, inline: integer milliseconds of a plausible size
        if type(value) is int and self.time_unit is None and (
                -SECONDS_LIKE_LOW < value < SECONDS_LIKE_LOW
                or SECONDS_LIKE_HIGH <= value < SUBMILLI_LIKE):
            return value
        return _to_millis(value, self.time_unit,
                          self.time if isinstance(self.time, str) else "time")

    def _feed(self, chunk: Waiting, out: Output, watermark: int | None = None) -> None:
        """Match released events (in arrival order) with every rule's engine, then (given
        a ``watermark``) fire their timers.  The first rule of each key field starts before
        the others of its field: it works out the key ids and order they take (see
        ColumnarEngine._key_ids); the rules may run side by side (:func:`_side_by_side`)."""
        if has_stray_text(chunk.rows):
            self._text_fields += [n for n in chunk.rows.column_names
                                  if n.startswith(PREFIX) and n not in self._text_fields]
        self._like = _schema_of(chunk.rows, self._like, self._text_fields, self.rules)
        leaders: dict[int, RuleRun] = {}
        for rule in self.rules:
            leaders.setdefault(rule.key, rule)
        followers = [r for r in self.rules if leaders[r.key] is not r]

        def step(rule: RuleRun) -> _RuleStep:
            events, held = chunk.events(rule.key, rule.slot)
            found = None
            if len(events):
                with _naming(rule):
                    found = rule.engine.process(events)
            live = rule.engine.partial_matches  # before its timers fire
            advanced = None if watermark is None else rule.engine.advance(watermark)
            return _RuleStep(len(events), held, found, live, advanced)

        # the first rules first: the others of a key field take their key ids and order
        # (an engine working them out holds the keys' lock, see ColumnarEngine.process),
        # without waiting for all the first rules to be done
        group = [*leaders.values(), *followers]
        done = dict(zip(map(id, group), _side_by_side(step, group, len(chunk)), strict=True))
        rules = self.rules
        steps = [done[id(rule)] for rule in rules]
        for rule, done_ in zip(rules, steps, strict=True):
            if done_.step is None:
                continue
            self._rule_events[rule.name] = self._rule_events.get(rule.name, 0) + done_.events
            self._given[rule.slot] = self._given.get(rule.slot, 0) + done_.events
            rule.emit(out, done_.step.found, self._like)
            for i, err in done_.step.refused.items():  # a condition raised: that event alone
                at = int(done_.held[i])
                out.dead.append(DeadLetter(_row(chunk.rows, at), str(err), self._position(
                    chunk.part[at], chunk.row[at]), rule=rule.name,
                    timestamp=int(chunk.times[at]), version=rule.version))
        if watermark is not None:
            for rule, done_ in zip(rules, steps, strict=True):
                rule.emit(out, done_.advanced, self._like)
        # the columns the rules read (Events.cache) and the keys' order they shared are done
        # with; the batch itself may be held on by partial matches and outputs, which
        # should not hold them too
        chunk.cache.clear()
        for keys in chunk.keys:
            keys.shared = None
        live = sum(done_.live for done_ in steps)
        if live > self.metrics["peak_partial_matches"]:
            self.metrics["peak_partial_matches"] = live
        # a batch the rules hold few events of is cut once for all of them, not copied
        # into each
        share_cuts(rule.engine for rule in self.rules)
        for rule in self.rules:  # the engines hold each key to the cap event by event
            dropped = rule.engine.take_dropped()
            if dropped:
                self.metrics["dropped_partial_matches"] += dropped
                self._dropped_by_rule[rule.name] = self._dropped_by_rule.get(rule.name, 0) + dropped

    def _counted(self, out: Output) -> Output:
        m = self.metrics
        m["matches"] += out.count(MATCH)
        m["timeouts"] += out.count(TIMEOUT)
        m["late"] += len(out.late)
        m["dead_letters"] += len(out.dead)
        return out


class _RuleStep(NamedTuple):
    """What one rule did with a released chunk (see CepOperator._feed)."""

    #: events it was given, the chunk's positions of them, and what its engine made of them
    events: int
    held: np.ndarray
    step: Any
    #: its partial matches after the events, before its timers fired
    live: int
    #: what its timers fired (None: no watermark)
    advanced: Any


#: batches smaller than this run their rules one after another (handing a rule to a
#: thread costs more than matching a few events)
PARALLEL_MIN_EVENTS = 4096


def _schema_of(rows: Any, known: Any, text_fields: Sequence[str],
               rules: Sequence[RuleRun]) -> Any:
    """The Arrow schema of released rows (see CepOperator._like): a table's own, with the
    companion columns of text the job has met (``text_fields``, see
    :mod:`cep.nfa.stray_text`): a partial match may hold events of a batch that had one,
    whose words go back there when its events become a table; a pandas frame's only when
    a rule's engine takes Python objects (the reference engine) and Arrow can type it;
    else the one ``known`` before, which checkpoints keep, so that a resumed job makes the
    same outputs."""
    if not is_table(rows):
        if any(rule.engine.name == "reference" for rule in rules):
            return arrow_schema(rows) or known
        return known
    schema = rows.schema
    for name in text_fields:
        if name not in schema.names:
            schema = schema.append(_text_field(name))
    return schema


def _schema_text(schema: Any) -> str | None:
    """An Arrow schema as text for a checkpoint's JSON (None stays None)."""
    if schema is None:
        return None
    import base64

    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def _schema_back(text: str | None) -> Any:
    """The schema :func:`_schema_text` wrote."""
    if text is None:
        return None
    import base64

    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def _text_field(name: str) -> Any:
    """A nullable text field named ``name``."""
    import pyarrow as pa

    return pa.field(name, pa.string())


_Item = TypeVar("_Item")


def _side_by_side(work: Callable[[_Item], Any], items: Sequence[_Item], events: int = 0
                  ) -> list[Any]:
    """``work(item)`` for every item (a rule, a key field), results in order; on the
    process's worker threads (:mod:`cep.runtime.threads`) when there are several and
    ``events`` are many (each rule's engine is its own; the numba kernels and Arrow's let
    go of the GIL), so a job of many rules uses more than one core."""
    many = len(items) > 1 and events >= PARALLEL_MIN_EVENTS
    pool = worker_threads() if many else None
    if pool is None:
        return [work(item) for item in items]
    return list(pool.map(work, items))


def _screened(rule: RuleRun, batch: Events, several: bool) -> dict[int, str]:
    """The events of ``batch`` ``rule``'s engine cannot read, with why.  A pattern whose
    types do not fit the input's columns (found when the numba engine compiles it for
    them: ``col("merchant") > 5`` over text) refuses every event, in a job of ``several``
    rules or a rule set, as the reference engine refuses each such event: one broken
    rule must not stop the others (nor a rule set, which may mend it).  Else (a job's
    single pattern) it stops the job; the numba engine refuses rows one by one where the
    types the pattern implies compile (NumbaEngine.screen)."""
    try:
        return rule.engine.screen(batch)
    except MalformedPatternError as err:
        if several:  # each dead letter names its rule
            return dict.fromkeys(range(len(batch)), str(err))
        _raise_named(rule, err)


@contextmanager
def _naming(rule: RuleRun) -> Iterator[None]:
    """A pattern error of a named rule (found when its engine first sees the input's
    types), or a key of it over the cap of partial matches, says which rule (and version)
    it is: one job runs many."""
    try:
        yield
    except (MalformedPatternError, TooManyPartialMatches) as err:
        _raise_named(rule, err)


def _raise_named(rule: RuleRun, err: CEPError) -> NoReturn:
    """Raise ``err`` saying which rule it is, unless it does already (or the rule has no
    name)."""
    if rule.name is None or str(err).startswith("rule "):
        raise err
    version = "" if rule.version is None else f" version {rule.version}"
    raise type(err)(f"rule {rule.name!r}{version}: {err}") from err


# ------------------------------------------------------------ row helpers
def _read_fields(pattern: Pattern, measures: Mapping[str, Any] | None = None
                 ) -> dict[str, list[str]]:
    """The fields ``pattern``'s expressions and ``measures`` read, with the stages (and
    measures) reading them (all unseen before any event)."""
    return fields_absent(pattern, Events.of([]), measures)


def _is_columns(rows: Any) -> bool:
    """Are the rows a pyarrow Table or a pandas DataFrame (else Python objects)?"""
    module = type(rows).__module__
    return (module.startswith("pyarrow") and hasattr(rows, "num_rows")) or (
        module.startswith("pandas") and hasattr(rows, "iloc"))


def _row(rows: Any, i: int) -> Any:
    return row_objects(rows, [i])[0]


def _column(rows: Any, name: str) -> Any:
    if hasattr(rows, "num_rows"):
        return rows.column(name) if has_column(rows, name) else None
    return rows[name] if name in rows.columns else None


def _column_keys(rows: Any, names: tuple[str, ...]) -> tuple[Keys, dict[int, CEPError]] | None:
    """Keys from named columns, a column at a time (see :func:`~cep.nfa.events.column_keys`),
    and the rows whose key is null or missing (a column the table lacks: missing in every
    row); None when read row by row."""
    parts: list[Keys] = []
    bad: dict[int, CEPError] = {}
    for name in names:
        column = _column(rows, name)
        if column is None:
            # no such column: one error for every row, not one raised per row (a rule keyed
            # by a field these events lack, in a job of several, refuses each of them);
            # a row's first error stays its own
            n = count_rows(rows)
            bad = {**dict.fromkeys(range(n), MissingFieldError(f"missing key field {name!r}")),
                   **bad}
            parts.append(Keys.none(n))
            continue
        if column is not None and stray_text(rows, name) is not None:
            return None  # text among numbers: its keys are that text, read row by row
        found = column_keys(column)
        if found is None:
            return None
        keys, null = found
        for i in np.flatnonzero(null).tolist():
            bad.setdefault(i, CEPError(f"key field {name!r} is null"))
        parts.append(keys)
    return Keys.composite(parts), bad


def _formatted(value: str, fmt: str, field: Any) -> int:
    """Epoch milliseconds of a time written in the ``strptime`` format ``fmt`` (UTC unless
    it holds a zone), or the error naming the field, the value and the format.

    >>> _formatted("01/03/2024 09:30", "%d/%m/%Y %H:%M", "ts")
    1709285400000
    """
    from datetime import UTC, datetime

    name = field if isinstance(field, str) else "time"
    try:
        parsed = datetime.strptime(value, fmt)
    except ValueError:
        raise CEPError(f"time field {name!r} is {value!r}: does not match the format "
                       f"{fmt!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return _to_millis(parsed, None, name)


#: recent event times per stream the far-future guard keeps: their median lets a stream
#: move on after a jump, which a burst of no more than half as many events cannot do
AHEAD_WINDOW = 64

#: no far-future guard: no event time is beyond it
_NO_BOUND = 2**64


#: the times an int64 holds (epoch milliseconds)
_MIN_TIME, _MAX_TIME = -(2**63), 2**63 - 1


def _checked_watermark(watermark: Any) -> int:
    """A watermark as the int it must be (integer epoch milliseconds in int64's range).

    >>> _checked_watermark(7.5)
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: a watermark is integer milliseconds, got 7.5 (float)
    """
    if isinstance(watermark, np.integer):
        watermark = int(watermark)
    if type(watermark) is not int:
        raise CEPError(f"a watermark is integer milliseconds, got {watermark!r} "
                       f"({type(watermark).__name__})")
    if not _MIN_TIME <= watermark <= _MAX_TIME:
        raise CEPError(f"a watermark is integer milliseconds within int64, got {watermark}")
    return watermark


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
