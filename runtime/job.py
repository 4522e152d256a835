"""A streaming job: source -> timestamps and watermarks -> keyed CEP operator -> sinks.

>>> from cep import Pattern, col
>>> from cep.runtime import Job, IterableSource, ListSink
>>> out = ListSink()
>>> rows = [{"k": 1, "v": 1, "ts": 1}, {"k": 1, "v": 2, "ts": 2}]
>>> p = Pattern.begin("a").where(col("v") == 1).next("b")
>>> summary = Job(IterableSource(rows)).key_by("k").timestamps("ts").match(p).sink(out).run()
>>> [r["b"][0]["v"] for r in out.records]
[2]
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np

from cep.errors import CEPError
from cep.keys import key_spec
from cep.matches import Match
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, Cap
from cep.nfa.engine import ENGINES, Snapshot
from cep.nfa.events import (
    EntryRefs,
    concat_rows,
    count_rows,
    is_table,
    pool_refs,
    row_objects,
    take_rows,
)
from cep.nfa.found import MATCH, TIMEOUT, Found
from cep.pattern import Pattern
from cep.runtime.buffer import Waiting, from_ipc, to_ipc
from cep.runtime.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    CheckpointWarning,
    ForeignCheckpointError,
)
from cep.runtime.identity import (
    differences,
    field_identity,
    fingerprint,
    pattern_identity,
    source_identity,
)
from cep.runtime.live_rules import POLICIES, LiveRules, rule_source
from cep.runtime.operator import CepOperator, DeadLetter, LateEvent, Output
from cep.runtime.records import table_rows
from cep.runtime.sinks import MatchBatch, Sink
from cep.runtime.sources import Chunk, Malformed, ReadAhead, Source
from cep.runtime.tables import DEAD_LETTER, LATE, check_output_names, side_rows, stage_columns
from cep.runtime.watermarks import END_OF_TIME, PartitionWatermarks, WatermarkStrategy
from cep.times import check_unit


class FieldWarning(UserWarning):
    """A field a rule reads was absent from every event of a bounded input: it read null
    everywhere, so the conditions on it never held (most likely a misspelt name)."""


#: the kinds of record a job emits, each to the sinks registered for it
RECORD_KINDS = ("match", "timeout", "late", "dead_letter")


@dataclass(frozen=True)
class CheckpointConfig:
    """Where and how often a job checkpoints: what :meth:`Job.checkpoint` records.

    >>> from cep.runtime import IterableSource
    >>> cfg = Job(IterableSource([])).checkpoint("chk", every_events=10_000).checkpoints
    >>> cfg.directory.name, cfg.every_events, cfg.every_seconds, cfg.retain
    ('chk', 10000, None, 3)
    """

    directory: Path
    every_events: int | None = None
    every_seconds: float | None = None
    retain: int = 3


@dataclass
class Summary:
    """What a run did; ``events_in == processed + late + dead_letters`` always holds.

    ``dead_letters`` counts events no rule could take; in a job of several rules, an event
    only some rules refuse is a dead letter of each of those (counted under ``rules``), and
    still processed by the others.
    """

    events_in: int = 0
    matches: int = 0
    timeouts: int = 0
    late: int = 0
    dead_letters: int = 0
    checkpoints: int = 0
    last_checkpoint_seconds: float = 0.0
    last_checkpoint_bytes: int = 0
    #: the most partial matches held at once, as counted after each released batch is
    #: matched and before its timers fire (so it depends on the batch size, as the
    #: watermark's steps do)
    peak_partial_matches: int = 0
    partial_matches: int = 0
    #: partial matches the cap on each key discarded (``on_overflow`` drop policies)
    dropped_partial_matches: int = 0
    #: at the end: keys holding partial matches (summed over rules), and about how many
    #: bytes the state takes in memory (engines and waiting events)
    keys_with_state: int = 0
    state_bytes: int = 0
    buffered: int = 0
    watermark: int = 0
    seconds: float = 0.0
    engine: str = ""
    resumed_from: int | None = None
    #: why damaged newer checkpoints were passed over when resuming (see CheckpointWarning)
    skipped_checkpoints: list[str] = field(default_factory=list)
    last_event_time: int | None = None
    #: the run ended because ``run(stop=...)`` said so, before the end of the input
    stopped: bool = False
    #: per named rule (a job of several rules): its matches, timeouts, dead letters (those
    #: refused by that rule alone), partial matches the cap dropped and partial matches
    #: live at the end, e.g. ``{"velocity": {"matches": 3, ...}}``
    rules: dict[str, dict[str, int]] = field(default_factory=dict)
    #: what the run warned of (fields a rule reads that no event held, ...)
    warnings: list[str] = field(default_factory=list)
    #: a job running a rule set (:meth:`Job.rules`): each change, in order, with the
    #: watermark it took effect at: ``{"rule", "change"`` (added, removed, disabled,
    #: changed, retired: a drained version that held nothing any more), ``"version"`` (the
    #: new one), ``"previous"`` (the one it replaced or stopped), ``"watermark"``,
    #: ``"dropped"`` (partial matches dropped)``}``
    rule_changes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def processed(self) -> int:
        """Events that reached the matcher: neither late nor dead-lettered."""
        return self.events_in - self.late - self.dead_letters

    @property
    def events_per_second(self) -> float:
        """Throughput of the run: events read per second of wall time (0 before any time passed).

        >>> Summary(events_in=5000, seconds=2.0).events_per_second
        2500.0
        """
        return self.events_in / self.seconds if self.seconds > 0 else 0.0


def match_rows(matches: Sequence[Match], *, key: Any = None,
               stages: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The records a sink receives for matches or timeouts: rows of the output table
    (:mod:`cep.runtime.tables`), made from Match objects.

    >>> [row] = match_rows([Match({"a": [{"v": 1}]}, start=5, end=5, key="k")], key="card")
    >>> {k: v for k, v in row.items() if k != "match_id"}
    {'card': 'k', 'kind': 'match', 'start': 5, 'end': 5, 'timeout_at': None, 'a': [{'v': 1}]}
    """
    found = Found.of_matches(matches)
    if stages is None:
        stages = found.stages
    return table_rows(MatchBatch(found, key, list(stages)).table)


def late_rows(late: Sequence[LateEvent], key: Any) -> list[dict[str, Any]]:
    """The records a sink receives for late events (see :func:`cep.runtime.tables.side_rows`).

    >>> [row] = late_rows([LateEvent({"v": 1}, timestamp=3, key=None, watermark=9)], None)
    >>> row["kind"], row["start"], row["reason"]
    ('late', 3, 'event time 3 is at or below the watermark 9')
    """
    return side_rows(LATE, [e.event for e in late], key=key, keys=[e.key for e in late],
                     times=[e.timestamp for e in late],
                     reasons=[e.reason for e in late],
                     positions=[e.position for e in late])


def dead_rows(dead: Sequence[DeadLetter], key: Any) -> list[dict[str, Any]]:
    """The records a sink receives for dead letters: the event, why it was refused, where
    it was read.

    >>> [row] = dead_rows([DeadLetter({"v": 1}, "missing time field 'ts'")], None)
    >>> row["kind"], row["reason"], row["position"], row["event"]
    ('dead_letter', "missing time field 'ts'", None, {'v': 1})
    """
    return side_rows(DEAD_LETTER, [d.event for d in dead], key=key,
                     keys=[_key_of(d.event, key) for d in dead],
                     times=[d.timestamp for d in dead], reasons=[d.reason for d in dead],
                     positions=[d.position for d in dead], rules=[d.rule for d in dead],
                     versions=[d.version for d in dead])


def _key_of(event: Any, key: Any) -> Any:
    """The key of a refused event, as far as its fields give it (None where they do not)."""
    if not isinstance(event, Mapping) or key is None or callable(key):
        return None
    if isinstance(key, tuple):
        return tuple(event.get(k) for k in key)
    return event.get(key)


@dataclass(frozen=True)
class Job:
    """A fluent, immutable description of a streaming CEP job; :meth:`run` executes it.

    Every builder method returns a new Job; see the module docstring for a whole job.
    """

    source: Source
    strategy: WatermarkStrategy = field(default_factory=WatermarkStrategy.for_monotonous_timestamps)
    key: Any = None
    time: Any = None
    #: a Pattern, or several named rules ({name: pattern or (pattern, key)})
    pattern: Pattern | dict[str, Any] | None = None
    engine: str = "auto"
    timeouts_wanted: bool = True
    processing_time: bool = False
    sinks: tuple[tuple[str, Sink], ...] = ()
    checkpoints: CheckpointConfig | None = None
    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES
    on_overflow: str = "fail"
    time_unit: str | None = None
    #: the ``strptime`` format of times given as text (None: ISO-8601 and the like)
    time_format: str | None = None
    #: the far-future guard in milliseconds (None: off); see :meth:`max_event_time_ahead`
    max_ahead: int | None = None
    #: where the rules of a rule set come from (see :meth:`rules`), and what a change
    #: does to the old version's partial matches
    rule_source: Any = None
    on_change: str = "drain"

    def with_watermarks(self, strategy: WatermarkStrategy) -> Job:
        """Use ``strategy`` for watermarks (default: monotonous timestamps, so any event
        older than one already seen is late).  Allowing 5 s of out-of-orderness, an event
        that arrives 1 s out of order is matched, not late:

        >>> from datetime import timedelta
        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource, ListSink
        >>> rows = [{"v": 1, "ts": 1000}, {"v": 3, "ts": 3000}, {"v": 2, "ts": 2000}]
        >>> p = Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
        >>> out = ListSink()
        >>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
        >>> job = Job(IterableSource(rows, batch_size=1)).with_watermarks(strategy)
        >>> job.timestamps("ts").match(p).sink(out).run().late, len(out.records)
        (0, 1)
        """
        return replace(self, strategy=strategy)

    def key_by(self, key: str | list[str] | Callable[[Any], Any]) -> Job:
        """Partition events by a field, a list of fields (a composite key) or a function
        (FlinkCEP's ``keyBy``): each key is matched on its own, so ``next`` means the next
        event *of that key*.  Records name the key by its fields: a column per field, or
        ``key`` for a function.

        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource, ListSink
        >>> rows = [{"card": "x", "v": 1, "ts": 1}, {"card": "y", "v": 9, "ts": 2},
        ...         {"card": "x", "v": 2, "ts": 3}]
        >>> p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
        >>> out = ListSink()
        >>> _ = Job(IterableSource(rows)).key_by("card").timestamps("ts").match(p).sink(out).run()
        >>> [(r["card"], r["start"], r["end"]) for r in out.records]
        [('x', 1, 3)]
        """
        return replace(self, key=key_spec(key))

    def timestamps(self, time: str | Callable[[Any], Any], *, unit: str | None = None,
                   format: str | None = None) -> Job:
        """The event-time field (integer times, datetime or ISO-8601 text) or function.

        Integer times are epoch milliseconds unless ``unit`` is ``"s"``, ``"us"`` or
        ``"ns"``.  Without a unit, integers that look like epoch seconds are refused: the
        run fails with :class:`~cep.TimeUnitError` when they are all the input has,
        and an odd one among millisecond times is a dead letter.  Text times in another
        layout than ISO-8601 take a ``strptime`` ``format`` (UTC unless it reads a zone),
        parsed a column at a time; a value that does not match is a dead letter.

        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource, ListSink
        >>> rows = [{"v": 1, "ts": 1709251200}, {"v": 2, "ts": 1709251260}]
        >>> p = Pattern.begin("a").where(col("v") == 1).next("b").within(120_000)
        >>> out = ListSink()
        >>> _ = Job(IterableSource(rows)).timestamps("ts", unit="s").match(p).sink(out).run()
        >>> [(r["start"], r["end"]) for r in out.records]
        [(1709251200000, 1709251260000)]
        >>> rows = [{"v": 1, "ts": "01/03/2024 09:30"}, {"v": 2, "ts": "01/03/2024 09:31"}]
        >>> out = ListSink()
        >>> job = Job(IterableSource(rows)).timestamps("ts", format="%d/%m/%Y %H:%M")
        >>> _ = job.match(p).sink(out).run()
        >>> [(r["start"], r["end"]) for r in out.records]
        [(1709285400000, 1709285460000)]
        """
        if format is not None and (not isinstance(format, str) or "%" not in format):
            raise CEPError(f"format is a strptime format such as '%d/%m/%Y %H:%M:%S', got "
                           f"{format!r}")
        return replace(self, time=time, time_unit=check_unit(unit), time_format=format)

    def max_event_time_ahead(self, limit: timedelta | int | None) -> Job:
        """Guard the watermark against far-future times: an event whose time is more than
        ``limit`` (a timedelta or milliseconds; None turns the guard off, the default) ahead
        of its stream's reference time is a dead letter with the reason, and never moves
        the watermark.  Without the guard, one event stamped in the year 9999 moves the
        watermark there, and every event after it is late.

        A stream's reference time is the newest event time accepted from it (each file of
        a :class:`~runtime.FileSource` is a stream, so files that cover different days do
        not hold each other back); before its first batch, the median time of that batch,
        so a far-future event among the first ones is caught too (read alone, a stream's
        very first event has nothing to be compared with).  When most of a stream's recent
        events (33 of the last 64) lie beyond the limit, the stream has moved on (a gap in
        the data, not a stray event): its events are accepted again.  The guard's state is
        in every checkpoint.

        >>> from datetime import timedelta
        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource, ListSink
        >>> rows = [{"v": 1, "ts": 1000}, {"v": 9, "ts": "9999-12-31T00:00:00"},
        ...         {"v": 2, "ts": 2000}]
        >>> p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
        >>> found, dead = ListSink(), ListSink()
        >>> job = (Job(IterableSource(rows)).timestamps("ts").match(p)
        ...        .max_event_time_ahead(timedelta(days=1)).sink(found).sink_dead_letters(dead))
        >>> summary = job.run()
        >>> summary.matches, summary.late, summary.dead_letters
        (1, 0, 1)
        >>> print(dead.records[0]["reason"])
        time field 'ts' is 9999-12-31T00:00:00Z (253402214400000), 2,932,896d ahead of
        1970-01-01T00:00:02Z, the reference time of memory-0 (its newest event time, or the
        median of its recent ones): more than the far-future guard allows
        (max_event_time_ahead, cep replay --max-ahead: 1d); if such times are real, raise the
        limit
        """
        from cep.runtime.operator import check_max_ahead

        return replace(self, max_ahead=check_max_ahead(limit))

    def in_processing_time(self) -> Job:
        """Match in arrival order with wall-clock timestamps; no watermarks, nothing late."""
        return replace(self, processing_time=True)

    def match(self, pattern: Pattern | dict[str, Any], *, engine: str = "auto",
              timeouts: bool = True) -> Job:
        """The pattern to run, on ``engine`` (``"auto"``, ``"reference"`` or ``"numba"``);
        ``timeouts=False`` does not track timed-out partial matches (see :meth:`sink_timeouts`).

        Several rules run in one pass when given by name: ``{"card_testing": p1,
        "velocity": p2}``, each optionally keyed by a field of its own, ``{"by_ip": (p3,
        "ip")}`` (else the job's :meth:`key_by`).  One intake, one buffer and one release per
        watermark feed every rule's engine; every record carries its ``rule``.

        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource, ListSink
        >>> rows = [{"card": "c", "ip": "i", "v": 1, "ts": 1}, {"card": "c", "ip": "i", "v": 2, "ts": 2}]
        >>> one = Pattern.begin("a").where(col("v") == 1).next("b")
        >>> out = ListSink()
        >>> job = Job(IterableSource(rows)).key_by("card").timestamps("ts")
        >>> _ = job.match({"by_card": one, "by_ip": (one, "ip")}).sink(out).run()
        >>> sorted((r["rule"], r.get("card"), r.get("ip")) for r in out.records)
        [('by_card', 'c', None), ('by_ip', None, 'i')]
        """
        if engine not in ENGINES:
            raise CEPError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
        if self.pattern is not None or self.rule_source is not None:
            raise CEPError(
                "this job already has a pattern: a Job runs one pattern (or one dict of named "
                "rules, or one rule set), and a second .match() would silently replace the "
                "first")
        if isinstance(pattern, dict):
            if not pattern or not all(isinstance(n, str) and n for n in pattern):
                raise CEPError("rules are given as {name: pattern}: non-empty names, at least "
                               "one rule")
            for name, given in pattern.items():
                p = given[0] if isinstance(given, tuple) else given
                if not isinstance(p, Pattern):
                    raise CEPError(f"rule {name!r}: expected a Pattern (or (Pattern, key)), got "
                                   f"{type(p).__name__}")
        elif not isinstance(pattern, Pattern):
            raise CEPError(f"match() takes a Pattern or {{name: Pattern}}, got "
                           f"{type(pattern).__name__}")
        return replace(self, pattern=pattern, engine=engine, timeouts_wanted=timeouts)

    def rules(self, rules: Any, *, on_change: str = "drain", every: float = 5.0,
              engine: str = "auto", timeouts: bool = True) -> Job:
        """Run a rule set (:mod:`cep.rules`) that may change while the job runs: a directory
        (or file) of rule files, read again when they change (looked at every ``every``
        seconds), a :class:`~cep.rules.RuleSet` or list of :class:`~cep.rules.Rule`, or a
        :class:`~cep.runtime.RuleFeed` a program publishes new sets to.  Each rule is keyed
        by its own field.  A change takes effect at the watermark when the job sees it: a
        new rule reads the events after it, a removed or disabled one stops (its partial
        matches dropped and counted), and a changed one runs its new version while the old
        version's partial matches drain (``on_change="drain"``: they may still complete or
        time out) or are dropped (``"drop"``).  Records carry ``rule`` and ``version``;
        ``Summary.rule_changes`` lists the changes (see :mod:`cep.runtime.live_rules`).

        >>> from cep import Pattern, col
        >>> from cep.rules import Rule
        >>> from cep.runtime import IterableSource, ListSink, RuleFeed
        >>> pair = Pattern.begin("a").where(col("v") == 1).next("b")
        >>> feed = RuleFeed([Rule("pair", 1, "card", pair.where(col("v") == 2))])
        >>> rows = [{"card": "c", "v": v, "ts": t} for t, v in enumerate([1, 2, 1, 2, 1, 3])]
        >>> def change(summary):  # after the first batch, version 2 looks for 1 then 3
        ...     if summary.events_in == 2:
        ...         feed.publish([Rule("pair", 2, "card", pair.where(col("v") == 3))])
        >>> out = ListSink()
        >>> job = Job(IterableSource(rows, batch_size=2)).timestamps("ts").rules(feed).sink(out)
        >>> summary = job.run(progress=change)
        >>> [(r["rule"], r["version"], r["start"], r["end"]) for r in out.records]
        [('pair', 1, 0, 1), ('pair', 1, 2, 3), ('pair', 2, 4, 5)]
        >>> [(c["change"], c["version"], c["previous"], c["watermark"]) for c in summary.rule_changes]
        [('added', 1, None, -9223372036854775808), ('changed', 2, 1, 2), ('retired', None, 1, 4)]
        """
        if self.pattern is not None or self.rule_source is not None:
            raise CEPError("this job already has its rules: a Job runs one pattern, one dict "
                           "of named rules, or one rule set")
        if engine not in ENGINES:
            raise CEPError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
        if on_change not in POLICIES:
            raise CEPError(f"on_change is one of {', '.join(POLICIES)}, got {on_change!r}")
        return replace(self, rule_source=rule_source(rules, every), on_change=on_change,
                       engine=engine, timeouts_wanted=timeouts)

    def limit_partial_matches(self, per_key: int | None, on_overflow: str = "fail") -> Job:
        """Cap the partial matches a key may hold, checked as each event is processed (so
        the result does not depend on batch sizes): over the cap the run fails with
        ``TooManyPartialMatches`` naming the key and the stages holding them
        (``on_overflow="fail"``), or the partial matches that started first
        (``"drop_oldest"``) or last (``"drop_newest"``) are discarded and counted
        (``Summary.dropped_partial_matches``).  Every job has a cap of 10,000 per key,
        failing, unless told otherwise; ``per_key=None`` turns it off.

        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource
        >>> rows = [{"v": i % 3, "ts": i} for i in range(50)]
        >>> p = (Pattern.begin("a").where(col("v") == 0).followed_by_any("b").one_or_more()
        ...      .followed_by("c").where(col("v") == 9))
        >>> job = Job(IterableSource(rows)).timestamps("ts").match(p)
        >>> job.limit_partial_matches(10, on_overflow="drop_oldest").run().partial_matches
        10
        >>> job.limit_partial_matches(10).run()
        Traceback (most recent call last):
        ...
        cep.errors.TooManyPartialMatches: key None holds ... partial matches, over the cap of 10 ...
        """
        cap = Cap(per_key, on_overflow)
        return replace(self, max_partial_matches=cap.per_key, on_overflow=cap.on_overflow)

    def sink(self, sink: Sink, *, kinds: tuple[str, ...] = ("match",)) -> Job:
        """Send records of ``kinds`` (match, timeout, late, dead_letter) to ``sink``: rows
        of the output schema of :mod:`cep.runtime.tables` (the key's columns, ``kind``,
        ``rule`` for named rules, ``match_id``, ``start``, ``end``, ``timeout_at``, a column
        per stage with the events it took; late events and dead letters ``reason``,
        ``position`` and ``event`` instead of the stages), as tables to a ``FileSink``."""
        unknown = [k for k in kinds if k not in RECORD_KINDS]
        if isinstance(kinds, str) or unknown:
            raise CEPError(f"kinds must be a tuple of {', '.join(RECORD_KINDS)}; got {kinds!r}")
        return replace(self, sinks=self.sinks + tuple((k, sink) for k in kinds))

    def sink_timeouts(self, sink: Sink) -> Job:
        """Send timeout records (partial matches whose ``within`` window passed) to ``sink``.

        >>> from datetime import timedelta
        >>> from cep import Pattern, col
        >>> from cep.runtime import IterableSource, ListSink
        >>> p = (Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
        ...      .within(timedelta(seconds=1)))
        >>> rows = [{"v": 1, "ts": 1000}, {"v": 2, "ts": 5000}]
        >>> out = ListSink()
        >>> _ = Job(IterableSource(rows)).timestamps("ts").match(p).sink_timeouts(out).run()
        >>> [(r["kind"], r["start"], r["timeout_at"]) for r in out.records]
        [('timeout', 1000, 2000)]
        """
        return self.sink(sink, kinds=("timeout",))

    def sink_late(self, sink: Sink) -> Job:
        """Send late events (at or below the watermark when they arrive) to ``sink``.

        >>> from cep import Pattern
        >>> from cep.runtime import IterableSource, ListSink
        >>> rows = [{"v": 1, "ts": 5000}, {"v": 2, "ts": 1000}]
        >>> out = ListSink()
        >>> job = Job(IterableSource(rows, batch_size=1)).timestamps("ts").match(Pattern.begin("a"))
        >>> _ = job.sink_late(out).run()
        >>> [(r["kind"], r["start"], r["reason"]) for r in out.records]
        [('late', 1000, 'event time 1000 is at or below the watermark 4999')]
        """
        return self.sink(sink, kinds=("late",))

    def sink_dead_letters(self, sink: Sink) -> Job:
        """Send dead letters (events that cannot be processed, with the reason) to ``sink``.

        >>> from cep import Pattern
        >>> from cep.runtime import IterableSource, ListSink
        >>> out = ListSink()
        >>> job = Job(IterableSource([{"v": 1, "ts": 5}, {"v": 2}])).timestamps("ts")
        >>> _ = job.match(Pattern.begin("a")).sink_dead_letters(out).run()
        >>> [(r["reason"], r["position"]) for r in out.records]
        [("missing time field 'ts'", 'memory-0:1')]
        """
        return self.sink(sink, kinds=("dead_letter",))

    def checkpoint(self, directory: str | Path, *, every_events: int | None = None,
                   every: timedelta | float | None = None, retain: int = 3) -> Job:
        """Checkpoint into ``directory`` every ``every_events`` events and/or ``every``
        (a timedelta or seconds), and at the end of the run, keeping the newest ``retain``;
        ``run(resume=True)`` continues from the latest one.

        >>> from cep import Pattern
        >>> from cep.runtime import CheckpointStore, IterableSource
        >>> job = Job(IterableSource([{"ts": 1}, {"ts": 2}])).timestamps("ts")
        >>> job = job.match(Pattern.begin("a")).checkpoint("job-chk", every_events=1000)
        >>> job.run().checkpoints
        1
        >>> CheckpointStore("job-chk").ids()
        [1]
        """
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        if every_events is not None and every_events < 1:
            raise CEPError(f"every_events must be >= 1 (or None), got {every_events!r}")
        if seconds is not None and seconds <= 0:
            raise CEPError(f"every must be a positive duration (or None), got {every!r}")
        if retain < 1:
            raise CEPError(f"retain must keep at least 1 checkpoint, got {retain!r}")
        return replace(self, checkpoints=CheckpointConfig(Path(directory), every_events, seconds,
                                                          retain))

    def run(self, *, resume: bool = False, speed: float | None = None,
            progress: Callable[[Summary], None] | None = None,
            stop: Callable[[], bool] | None = None,
            savepoint: Callable[[], bool] | None = None) -> Summary:
        """Run to the end of a bounded source (or until ``stop()``); return the summary.

        ``savepoint()`` is asked after every batch; when it says yes a checkpoint is taken
        at once (on demand).  Stopping always ends with a checkpoint, so a stopped job
        resumes where it stopped.
        """
        if self.pattern is None and self.rule_source is None:
            raise CEPError("the job has no pattern: call .match(pattern) (or .rules(...)) "
                           "before .run()")
        if self.time is None and not self.processing_time:
            raise CEPError("the job has no event time: call .timestamps(field) (or "
                           ".in_processing_time() to match in arrival order)")
        if speed is not None and speed <= 0:
            raise CEPError(f"speed must be a positive factor of real time, got {speed!r}")
        return _Runner(self).run(resume=resume, speed=speed, progress=progress, stop=stop,
                                 savepoint=savepoint)


def job_identity(job: Job, engine: str) -> dict[str, Any]:
    """What must not change across a resume, as a checkpoint records it (see
    :mod:`cep.runtime.identity`): a checkpoint of another identity is refused, naming what
    differs.

    >>> from cep import Pattern, col
    >>> from cep.runtime.sources import IterableSource
    >>> job = Job(IterableSource([])).key_by("card").timestamps("ts")
    >>> ident = job_identity(job.match(Pattern.begin("a").where(col("v") > 1)), "numba")
    >>> ident["key"], ident["time"], ident["input"]["kind"]
    ('card', 'ts', 'IterableSource')
    """
    rules: Any
    if job.rule_source is not None:
        # the rules may change between runs: the checkpoint holds those in force
        rules = {"source": job.rule_source.describe(), "on_change": job.on_change}
    elif isinstance(job.pattern, Pattern):
        rules = pattern_identity(job.pattern)
    else:
        assert job.pattern is not None
        rules = {name: [pattern_identity(g[0] if isinstance(g, tuple) else g),
                        field_identity(g[1]) if isinstance(g, tuple) else None]
                 for name, g in job.pattern.items()}
    return {
        "engine": engine,
        "pattern": rules,
        "key": field_identity(job.key),
        "time": field_identity(job.time),
        "time_unit": job.time_unit,
        "time_format": job.time_format,
        "processing_time": job.processing_time,
        "timeouts": job.timeouts_wanted,
        "watermarks": {"delay": job.strategy.delay, "idleness": job.strategy.idleness},
        "max_partial_matches": job.max_partial_matches,
        "on_overflow": job.on_overflow,
        "max_ahead": job.max_ahead,
        "input": source_identity(job.source),
        # the watermark moves once per batch: other batches, other late events
        "batch_size": getattr(job.source, "batch_size", None),
    }


def _inconsistency(state: dict[str, Any], buffered: Waiting | None) -> str | None:
    """What does not add up in a checkpoint's job state, or None.  The manifest's checksum
    shows damage, not edits (anyone can recompute it); these relations hold in every
    checkpoint a job writes, so an edited offset or watermark breaks one of them: every
    event read is counted once, the watermark never passes the newest time seen, and
    events wait for the watermark only while it is below them."""
    offsets = state["offsets"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
               for v in offsets.values()):
        return f"offsets {offsets} are not counts"
    read = state["summary"].get("events_in")
    if read != sum(offsets.values()):
        return f"the offsets add up to {sum(offsets.values())} events, the job read {read}"
    marks = state["watermarks"]
    newest = max([int(v) for v in marks["max_ts"].values()], default=None)
    current, operator = int(marks["current"]), int(state["operator_watermark"])
    everything_read = set(marks["finished"]) >= set(marks["max_ts"]) and marks["max_ts"]
    if current < operator < END_OF_TIME:  # the end of a bounded input moves it to the end
        return f"the operator's watermark {operator} is past the sources' {current}"
    if newest is not None and current > newest and not everything_read:
        return f"the watermark {current} is past the newest event time read, {newest}"
    if buffered is not None and len(buffered) and int(buffered.times.min()) <= operator:
        return f"events wait for a watermark ({operator}) that has already passed them"
    return None


class _Writer(threading.Thread):
    """A checkpoint's writer thread, and whether its epoch failed to commit."""

    failed: threading.Event


class _Runner:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.operator = CepOperator(
            {} if job.pattern is None else job.pattern, job.engine, key=job.key, time=job.time,
            timeouts=job.timeouts_wanted, processing_time=job.processing_time,
            max_partial_matches=job.max_partial_matches, on_overflow=job.on_overflow,
            time_unit=job.time_unit, time_format=job.time_format,
        )
        #: the rule set of a job given one (see Job.rules), else None
        self.live = (None if job.rule_source is None
                     else LiveRules(job.rule_source, job.on_change))
        restart = getattr(job.rule_source, "restart", None)
        if restart is not None:  # a source an earlier job read gives this one its rules too
            restart()
        #: per rule (name, version), the key its table names, its stage columns and its
        #: measures (a rule of a rule set may have some)
        self.layouts: dict[tuple[str | None, int | None], tuple[Any, list[str], Any]] = {}
        self._know_rules()
        self.watermarks = PartitionWatermarks(job.strategy)
        self.offsets: dict[str, int] = {}
        engine = job.engine if self.operator.engine is None else self.operator.engine.name
        self.summary = Summary(engine=engine, rules={
            rule.name: dict.fromkeys(RULE_COUNTS, 0)
            for rule in self.operator.rules if rule.name is not None})
        self.epoch = 1
        self.identity = job_identity(job, engine)
        self.fingerprint = fingerprint(self.identity)
        self.store = (CheckpointStore(job.checkpoints.directory, job.checkpoints.retain)
                      if job.checkpoints else None)
        #: the checkpoint writers still running, oldest first (at most two)
        self._writers: list[_Writer] = []
        self._writer_error: BaseException | None = None

    def _know_rules(self) -> None:
        """Learn the layout of the rules running now (their records' key and stages)."""
        for rule in self.operator.rules:
            measures = (None if self.live is None
                        else dict(self.live.documents[rule.slot].measures) or None)
            key, stages = self.operator.key_specs[rule.key], stage_columns(rule.engine.pattern)
            if self.live is None:  # a rule set's rules were checked as they were read
                check_output_names(key, stages, named=rule.name is not None)
            self.layouts.setdefault((rule.name, rule.version), (key, stages, measures))

    # ------------------------------------------------------------- outputs
    def emit(self, out: Output) -> None:
        counts = {"match": out.count(MATCH), "timeout": out.count(TIMEOUT)}
        if not (counts["match"] or counts["timeout"] or out.late or out.dead):
            return
        s = self.summary
        s.matches += counts["match"]
        s.timeouts += counts["timeout"]
        s.late += len(out.late)
        s.dead_letters += sum(d.rule is None for d in out.dead)
        if s.rules:
            _count_rules(s.rules, out)
        made: dict[str, list[Any]] = {}
        for kind, sink in self.job.sinks:
            if kind in counts and not counts[kind]:
                continue
            parts = made.get(kind)
            if parts is None:
                parts = made[kind] = self._parts(kind, out)
            for part in parts:
                if isinstance(part, list):
                    sink.write(part)
                else:
                    sink.write_matches(part)

    def _parts(self, kind: str, out: Output) -> list[Any]:
        """What sinks of ``kind`` receive from ``out``: the matches or timeouts of each
        rule that found some (made into tables when a sink asks), or the side records."""
        if kind in ("match", "timeout"):
            code = MATCH if kind == "match" else TIMEOUT
            return [MatchBatch(part.of_kind(code), *self.layouts[part.rule, part.version])
                    for part in out.found if part.count(code)]
        if kind == "late":
            return [late_rows(out.late, self.operator.key)] if out.late else []
        # a dead letter one rule refused names that rule's key; the job's, the job's
        runs = [list(run) for _, run in groupby(out.dead, key=lambda d: (d.rule, d.version))]
        return [dead_rows(run, self.layouts[by][0] if (by := (run[0].rule, run[0].version))
                          in self.layouts else self.operator.key) for run in runs]

    def _unique_sinks(self) -> list[Sink]:
        seen: dict[int, Sink] = {}
        for _, s in self.job.sinks:
            seen.setdefault(id(s), s)
        return list(seen.values())

    # --------------------------------------------------------- checkpoints
    def _job_state(self, buffer_state: dict[str, Any]) -> dict[str, Any]:
        s = self.summary
        return {
            "offsets": dict(self.offsets),
            "watermarks": self.watermarks.state(),
            "operator_watermark": self.operator.watermark,
            "buffer": buffer_state,
            "guard": self.operator.guard_state(),
            "unseen": self.operator.unseen_state(),
            "epoch": self.epoch,
            "identity": self.identity,
            "summary": {**{k: getattr(s, k) for k in (
                "events_in", "matches", "timeouts", "late", "dead_letters",
                "peak_partial_matches", "dropped_partial_matches")},
                "rules": {n: dict(c) for n, c in s.rules.items()},
                "rule_changes": [dict(c) for c in s.rule_changes]},
            **({} if self.live is None else {"live": self.live.state(self.operator)}),
        }

    def checkpoint(self) -> None:
        if self.store is None:
            return
        self._await_writer(keep=1)
        started = time.perf_counter()
        epoch = self.epoch
        # the barrier: cheap, state frozen here (chunks and engine arrays are never changed
        # in place, so holding them is enough, and the sinks hand over the epoch's records);
        # encoding and writing them happens on the writer thread
        sinks = self._unique_sinks()
        finishing = [(sink.detach(epoch), sink.overlapping) for sink in sinks]
        waiting, buffer_state = self.operator.buffer_state()
        job_state = self._job_state(buffer_state)
        captures = [rule.engine.capture() for rule in self.operator.rules]
        names = self._state_names()
        self.epoch += 1
        store = self.store
        before = self._writers[-1] if self._writers else None
        failed = threading.Event()  # this epoch is not committed: none after it may be

        def write() -> None:
            try:
                # a file sink's part files (pending until committed) are encoded and
                # written while the epoch before is still being written: of a job that
                # writes many records, the writers then use a core each
                for finish, overlapping in finishing:
                    if overlapping:
                        finish()
                cp = Checkpoint(id=epoch, job=job_state, engine=combine([c() for c in captures], names),
                                buffered=to_ipc(waiting),
                                buffered_count=0 if waiting is None else len(waiting))
                if before is not None:  # checkpoints and commits in epoch order
                    before.join()
                    if before.failed.is_set():
                        failed.set()
                        return
                for finish, overlapping in finishing:  # the epoch's records durable first
                    if not overlapping:
                        finish()
                path = store.write(cp, self.fingerprint)
                for sink in sinks:
                    sink.commit(epoch)
                self.summary.checkpoints += 1
                self.summary.last_checkpoint_bytes = sum(
                    f.stat().st_size for f in path.iterdir())
                self.summary.last_checkpoint_seconds = time.perf_counter() - started
            except BaseException as err:  # surfaced on the processing thread
                failed.set()
                if self._writer_error is None:
                    self._writer_error = err

        # the snapshot is taken; serialising and writing it overlaps with processing
        writer = _Writer(target=write, name=f"checkpoint-{epoch}", daemon=True)
        writer.failed = failed
        self._writers.append(writer)
        writer.start()

    def _await_writer(self, keep: int = 0) -> None:
        """Wait for the checkpoint writers until at most ``keep`` are left running (each
        waits for the one before it), and raise the error one of them met."""
        while len(self._writers) > keep:
            self._writers.pop(0).join()
        if self._writer_error is not None:
            err, self._writer_error = self._writer_error, None
            raise CheckpointError(f"writing a checkpoint failed: {err}") from err

    def _what_differs(self) -> str:
        """How the newest checkpoint's job differs from this one (for the refusal)."""
        assert self.store is not None
        newest = self.store.latest()
        try:
            manifest = json.loads((self.store.path(newest or 0) / "manifest.json").read_text())
            before = manifest["job"]["identity"]
        except (OSError, ValueError, KeyError, TypeError):
            return ""  # written before checkpoints recorded it, or unreadable
        found = differences(before, self.identity) if isinstance(before, dict) else []
        return "".join(f"\n  {line}" for line in found)

    def restore(self) -> None:
        assert self.store is not None
        try:
            cp, skipped = self.store.load_newest(self.fingerprint)
        except ForeignCheckpointError as err:
            raise ForeignCheckpointError(f"{err}{self._what_differs()}") from None
        if cp is None:
            for sink in self._unique_sinks():
                sink.recover(0)
            return
        for reason in skipped:
            warnings.warn(f"{reason}: passed over, resuming from the older {cp.path}",
                          CheckpointWarning, stacklevel=4)
        state = cp.job
        try:
            waiting = from_ipc(cp.buffered)
        except CheckpointError as err:
            raise CheckpointError(f"checkpoint {cp.path}: {err}") from err
        problem = _inconsistency(state, waiting)
        if problem is not None:
            raise CheckpointError(f"checkpoint {cp.path}: the job state is inconsistent "
                                  f"({problem}): it was edited or damaged; it was not used")
        self.offsets = {k: int(v) for k, v in state["offsets"].items()}
        self.watermarks.restore(state["watermarks"])
        self.operator.watermark = int(state["operator_watermark"])
        try:
            if self.live is not None:
                self.live.restore(state["live"], self.operator)
                self._know_rules()
            for rule, snap in zip(self.operator.rules, split(cp.engine, self._state_names()),
                                  strict=True):
                rule.engine.restore(snap)
        except (CheckpointError, KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"checkpoint {cp.path}: {err}") from err
        self.operator.restore_buffer_state(waiting, state["buffer"])
        self.operator.restore_guard(state.get("guard", {}))
        if "unseen" in state:
            self.operator.restore_unseen(state["unseen"])
        self.epoch = int(state["epoch"]) + 1
        for k, v in state["summary"].items():
            if k == "rules":  # counts a checkpoint of an earlier version did not keep are 0
                v = {name: {**dict.fromkeys(RULE_COUNTS, 0), **c} for name, c in v.items()}
            if k == "rule_changes":
                v = [dict(c) for c in v]
            if k != "processed":
                setattr(self.summary, k, v)
        self.operator.metrics["dropped_partial_matches"] = self.summary.dropped_partial_matches
        self.summary.resumed_from = cp.id
        self.summary.skipped_checkpoints = skipped
        for sink in self._unique_sinks():
            sink.recover(cp.id)

    def _state_names(self) -> list[str | None]:
        """The names the rules' states go by in a checkpoint (a rule set's versions: each
        running version has its own)."""
        if self.live is None:
            return [rule.name for rule in self.operator.rules]
        return [f"{rule.name}@{rule.version}#{rule.slot}" for rule in self.operator.rules]

    # ----------------------------------------------------------- rule sets
    def _poll_rules(self, read: bool = True) -> bool:
        """Apply what changed in the rule set (a job given one; ``read``: ask its source,
        else only let go of drained versions); True when a rule changed."""
        assert self.live is not None
        self.summary.watermark = self.operator.watermark
        out, log = self.live.poll(self.operator, self.summary) if read else (Output(), [])
        log += self.live.retire(self.operator)
        if not log:
            return False
        self._know_rules()
        s = self.summary
        for entry in log:
            counts = s.rules.setdefault(entry["rule"], dict.fromkeys(RULE_COUNTS, 0))
            counts["dropped_on_change"] += entry["dropped"]
            if entry["change"] in ("added", "changed"):
                counts["version"] = entry["version"]
            s.rule_changes.append(entry)
        self.emit(out)
        return any(entry["change"] != "retired" for entry in log)

    def _advance(self, watermark: int) -> bool:
        """Move event time to ``watermark``; a rule change scheduled on the way is made
        exactly at its time (True when one was)."""
        changed = False
        while self.live is not None and (
                at := self.live.due(self.operator.watermark, watermark)) is not None:
            self.emit(self.operator.process_watermark(at))
            changed = self._poll_rules() or changed
        self.emit(self.operator.process_watermark(watermark))
        return changed

    def _count_rule_events(self) -> None:
        """Add the events each rule's engine was given to its counts, and its partial
        matches now (a rule's versions together)."""
        s = self.summary
        for name, n in self.operator.take_rule_events().items():
            if name is not None and name in s.rules:
                s.rules[name]["events"] += n
        if self.live is not None:
            live: dict[str, int] = dict.fromkeys(s.rules, 0)
            for rule in self.operator.rules:
                if rule.name is not None:
                    live[rule.name] = live.get(rule.name, 0) + rule.engine.partial_matches
            for name, n in live.items():
                if name in s.rules:
                    s.rules[name]["partial_matches"] = n

    def _warn_unseen(self) -> None:
        """At the end of a bounded input: warn of fields a rule reads that no event held
        (each reads null, so the conditions on them never held: a likely misspelling)."""
        from cep.nfa.engine import absent_message

        if not self.summary.processed:
            return  # nothing was read: nothing to say about its fields
        for rule, absent in self.operator.unseen_fields().items():
            where = "the input" if rule is None else f"the input (rule {rule!r})"
            message = absent_message(absent, where)
            self.summary.warnings.append(message)
            warnings.warn(message, FieldWarning, stacklevel=4)

    # -------------------------------------------------------------- intake
    def _intake_batch(self, chunk: Chunk, now: float) -> int | None:
        """A source batch in one go, as columns (event time); returns the newest time it
        brought (None: nothing waits for the watermark from it)."""
        s = self.summary
        s.events_in += len(chunk)
        if chunk.malformed:
            self.emit(Output(dead=[DeadLetter(m.text, m.reason, where)
                                   for where, m in chunk.malformed]))
        stream = chunk.stream or chunk.partition
        out, newest = self.operator.process_batch(
            chunk.rows, origin=chunk.origins if chunk.origins is not None else chunk.partition,
            origin_of=chunk.origin_of, row_numbers=chunk.row_numbers, stream=stream)
        if newest is not None:
            self.watermarks.observe(stream, newest, now)
            s.last_event_time = newest
        self.emit(out)
        return newest

    def _intake_each(self, chunk: Chunk) -> None:
        """Event by event, in processing time: each is matched as it arrives."""
        s = self.summary
        stream = chunk.stream or chunk.partition
        for event, position in zip(chunk.events, chunk.positions, strict=True):
            s.events_in += 1
            if isinstance(event, Malformed):
                self.emit(Output(dead=[DeadLetter(event.text, event.reason, position)]))
                continue
            self.emit(self.operator.process_element(event, position=position, stream=stream))

    # ----------------------------------------------------------------- run
    def run(self, *, resume: bool, speed: float | None,
            progress: Callable[[Summary], None] | None, stop: Callable[[], bool] | None,
            savepoint: Callable[[], bool] | None = None) -> Summary:
        try:
            return self._run(resume=resume, speed=speed, progress=progress, stop=stop,
                             savepoint=savepoint)
        except BaseException as failed:
            # a checkpoint being written when the run failed is finished first: left
            # running, it would go on renaming and committing files while a resume in
            # this process restores from the same directories
            for writer in self._writers:
                writer.join()
            self._writers = []
            if self._writer_error is not None:
                failed.add_note(f"(writing a checkpoint failed too: {self._writer_error})")
                self._writer_error = None
            raise

    def _run(self, *, resume: bool, speed: float | None,
             progress: Callable[[Summary], None] | None, stop: Callable[[], bool] | None,
             savepoint: Callable[[], bool] | None) -> Summary:
        job = self.job
        started = time.perf_counter()
        self.operator.max_ahead = job.max_ahead
        if self.store is not None:
            if resume:
                self.restore()
            elif self.store.latest() is not None:
                raise CheckpointError(
                    f"checkpoint directory {self.store.directory} holds checkpoints of an earlier "
                    "run: resume it (resume=True / --resume) or use an empty directory"
                )
            else:
                for sink in self._unique_sinks():
                    sink.recover(0)
        elif resume:
            raise CEPError("resume needs a checkpoint directory (.checkpoint(...))")
        for p in job.source.streams():
            self.watermarks.register(p)
        if self.live is not None:
            self._poll_rules()  # the rules to begin with (or, resumed, what changed since)
        cfg = job.checkpoints
        since_events, since_time = 0, time.monotonic()
        first_event_time: int | None = None
        s = self.summary
        # the source read ahead on a thread: parsing files overlaps with matching
        # (from a copy of the offsets: the reader must not see them move)
        with ReadAhead(job.source.read(dict(self.offsets))) as chunks:
            for chunk in chunks:
                if job.processing_time:
                    self._intake_each(chunk)
                else:
                    newest = self._intake_batch(chunk, time.time())
                    if speed and newest is not None:
                        # paced a batch at a time: what the batch releases is emitted once wall
                        # time has caught up with its newest event
                        if first_event_time is None:
                            first_event_time = newest
                        _pace(newest - first_event_time, speed, started)
                self.offsets[chunk.partition] = chunk.end_offset
                if chunk.other_offsets:
                    self.offsets.update(chunk.other_offsets)
                if chunk.last:
                    self.watermarks.finish(chunk.stream or chunk.partition)
                changed = False
                if not job.processing_time:
                    changed = self._advance(self.watermarks.compute(time.time()))
                # a change is checkpointed at once: the rules in force are durable with it
                changed = (self.live is not None and self._poll_rules()) or changed
                self._count_rule_events()
                since_events += len(chunk)
                s.peak_partial_matches = max(s.peak_partial_matches,
                                             self.operator.metrics["peak_partial_matches"])
                s.dropped_partial_matches = self.operator.metrics["dropped_partial_matches"]
                _count_drops(s.rules, self.operator.take_dropped_by_rule())
                s.watermark = self.operator.watermark
                wanted = savepoint is not None and savepoint()
                if wanted and self.store is None:
                    raise CEPError("a savepoint needs a checkpoint directory (.checkpoint(...))")
                if cfg and (wanted or changed or (
                        cfg.every_events and since_events >= cfg.every_events) or (
                        cfg.every_seconds and time.monotonic() - since_time >= cfg.every_seconds)):
                    self.checkpoint()
                    since_events, since_time = 0, time.monotonic()
                s.seconds = time.perf_counter() - started
                if progress is not None:
                    progress(s)
                if stop is not None and stop():
                    s.stopped = True
                    break
            else:
                if job.source.bounded:
                    for p in job.source.streams():
                        self.watermarks.finish(p)
                    self._advance(END_OF_TIME)
                    if self.live is not None:
                        self._poll_rules(read=False)  # drained versions the end let go
                    self._count_rule_events()
                    self._warn_unseen()
        s.watermark = self.operator.watermark
        s.peak_partial_matches = max(s.peak_partial_matches,
                                     self.operator.metrics["peak_partial_matches"])
        s.partial_matches = self.operator.partial_matches
        s.dropped_partial_matches = self.operator.metrics["dropped_partial_matches"]
        _count_drops(s.rules, self.operator.take_dropped_by_rule())
        if self.live is None:
            for rule in self.operator.rules:
                if rule.name in s.rules:
                    s.rules[rule.name]["partial_matches"] = rule.engine.partial_matches
        s.keys_with_state = self.operator.keys_with_state
        s.state_bytes = self.operator.state_bytes()
        s.buffered = self.operator.buffered
        if self.store is not None:
            self.checkpoint()
            self._await_writer()
        else:
            for sink in self._unique_sinks():
                sink.prepare(self.epoch)
                sink.commit(self.epoch)
        for sink in self._unique_sinks():
            sink.close()
        s.seconds = time.perf_counter() - started
        if progress is not None:
            progress(s)
        return s


#: what Summary.rules counts for each named rule (partial matches: live at the end)
RULE_COUNTS = ("events", "matches", "timeouts", "dead_letters", "dropped_partial_matches",
               "partial_matches", "dropped_on_change")


def _count_drops(counts: dict[str, dict[str, int]], dropped: dict[str | None, int]) -> None:
    """Add the partial matches the cap dropped to each named rule's counts."""
    for name, n in dropped.items():
        if name is not None and name in counts:
            counts[name]["dropped_partial_matches"] += n


def _count_rules(counts: dict[str, dict[str, int]], out: Output) -> None:
    """Add what ``out`` holds to each named rule's counts."""
    for part in out.found:
        if part.rule is not None:
            counts[part.rule]["matches"] += part.count(MATCH)
            counts[part.rule]["timeouts"] += part.count(TIMEOUT)
    for dead in out.dead:
        if dead.rule is not None:
            counts[dead.rule]["dead_letters"] += 1


def _pace(event_ms: int, speed: float, started: float) -> None:
    """Replay at ``speed`` times real time: wait until wall time catches up with event time."""
    due = started + event_ms / 1000 / speed
    delay = due - time.perf_counter()
    if delay > 0:
        time.sleep(min(delay, 5.0))


#: the array (per rule, in a combined snapshot) of the positions of its events among
#: the snapshot's events, when they are held once for all rules
_ROWS = "__rows"


def combine(snaps: list[Snapshot], names: list[str | None] | None = None) -> Snapshot:
    """The snapshots of a job's rules as one (a checkpoint holds one engine state): a single
    rule's as it is; several under ``rules`` in the metadata, with the rules' ``names``,
    arrays prefixed by the rule's place, events one after another, or, when the engines
    hold them by reference (Arrow rows), each event once for all rules with each rule's
    positions among them (a job's rules hold the same events: a hundred rules held 440k
    copies of far fewer events).

    >>> both = combine([Snapshot({"engine": "reference"}, rows=["x"]), Snapshot({}, rows=["y"])],
    ...                ["a", "b"])
    >>> [s.rows for s in split(both, ["a", "b"])]
    [['x'], ['y']]
    """
    if len(snaps) == 1:
        return snaps[0].held()
    arrays = {f"{i}.{name}": a for i, s in enumerate(snaps) for name, a in s.arrays.items()}
    counts = [count_rows(s.rows) for s in snaps]
    meta = {"engine": "rules", "rules": [s.meta for s in snaps], "rows": counts,
            "names": list(names) if names is not None else None}
    shared = _shared_rows(snaps)
    if shared is not None:
        rows, positions = shared
        arrays.update({f"{i}.{_ROWS}": p for i, p in enumerate(positions)})
        return Snapshot({**meta, "shared_rows": True}, arrays, rows)
    held = [s.held().rows for s in snaps if count_rows(s.rows)]
    if held and all(is_table(r) for r in held):
        rows = concat_rows(held)  # one table when their columns agree, else objects
        rows = rows if is_table(rows) else list(rows)
    else:
        rows = [r for part in held for r in (row_objects(part) if is_table(part) else part)]
    return Snapshot(meta, arrays, rows)


def _shared_rows(snaps: list[Snapshot]) -> tuple[Any, list[np.ndarray]] | None:
    """The events the snapshots hold by reference, each taken once (one table), and each
    snapshot's positions among them (see :func:`~cep.nfa.events.pool_refs`); None unless
    every snapshot holding events holds them by reference and the tables join."""
    if not all(isinstance(s.rows, EntryRefs) or not count_rows(s.rows) for s in snaps):
        return None
    none = EntryRefs([], np.empty(0, np.int64), np.empty(0, np.int64))
    return pool_refs([s.rows if isinstance(s.rows, EntryRefs) else none for s in snaps])


def split(snap: Snapshot, names: list[str | None]) -> list[Snapshot]:
    """The rules' snapshots :func:`combine` joined, in the order of ``names`` (a
    CheckpointError when they are not the rules of the checkpoint)."""
    n = len(names)
    if n == 1:
        return [snap]
    meta = snap.meta
    if meta.get("engine") != "rules" or len(meta.get("rules", [])) != n:
        raise CheckpointError(f"the engine state holds {len(meta.get('rules', [1]))} rules, the "
                              f"job has {n}")
    out, start = [], 0
    for i, (rule_meta, count) in enumerate(zip(meta["rules"], meta["rows"], strict=True)):
        prefix = f"{i}."
        arrays = {k[len(prefix):]: a for k, a in snap.arrays.items() if k.startswith(prefix)}
        if meta.get("shared_rows"):
            positions = arrays.pop(_ROWS, None)
            if positions is None or len(positions) != count or (
                    len(positions) and not 0 <= positions.min() <= positions.max()
                    < count_rows(snap.rows)):
                raise CheckpointError(f"the positions of rule {i}'s events are missing or "
                                      "beyond the events saved")
            rows = (take_rows(snap.rows, positions) if is_table(snap.rows)
                    else [snap.rows[j] for j in positions.tolist()])
        else:
            rows = (snap.rows.slice(start, count) if is_table(snap.rows)
                    else snap.rows[start:start + count])
        out.append(Snapshot(rule_meta, arrays, rows))
        start += count
    held = meta.get("names")
    if held is None:
        return out
    if sorted(map(str, held)) != sorted(map(str, names)):
        raise CheckpointError(f"the engine state holds rules {held}, the job has {names}")
    return [out[held.index(name)] for name in names]
