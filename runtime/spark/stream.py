"""``match_stream``: a pattern over a streaming DataFrame with ``applyInPandasWithState``."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cep.errors import CEPError
from cep.expr import Expr
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES
from cep.pattern import Pattern
from cep.rules import Rule, RuleSet
from cep.runtime.spark.metrics import SparkMetrics
from cep.runtime.spark.rule_sets import RuleSetSpec, group_runner
from cep.runtime.spark.runner import (
    FIELD,
    GROUP,
    NULLS,
    ORDER,
    ORDER_FILE,
    ORDER_ROW,
    TS,
    GroupRunner,
    Spec,
    exact_integers,
)
from cep.runtime.spark.schema import make_rule_specs, make_spec, output_schema, rule_set_schema

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame

#: Spark's key for a column's watermark delay (EventTimeWatermark.delayKey)
_DELAY_KEY = "spark.watermarkDelayMs"

#: key groups per shuffle partition when ``key_groups="auto"`` (benchmarks/SPARK_RESULTS.md)
GROUPS_PER_PARTITION = 4

# one runner per Spec per Python worker: compiling a pattern once, not per group and batch
_RUNNERS: dict[int, GroupRunner] = {}


def match_stream(
    df: DataFrame,
    pattern: Pattern | RuleSet | list[Rule] | str | Path,
    *,
    key: str | Sequence[str] | None = None,
    time: str,
    watermark: str = "5 seconds",
    timeouts: bool = False,
    late: bool = False,
    measures: Mapping[str, Expr] | None = None,
    key_groups: int | str | None = "auto",
    engine: str = "auto",
    order_by: str | None = None,
    metrics: SparkMetrics | None = None,
    time_unit: str | None = None,
    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
    on_overflow: str = "fail",
    on_change: str = "drain",
    every: float = 1.0,
    key_fields: Sequence[str | Sequence[str]] = (),
    changes: str | None = None,
) -> DataFrame:
    """Match ``pattern`` per ``key`` over a streaming DataFrame, in event time; or every
    rule of a rule set, each keyed by its own field.

    One output row per match (``kind`` = ``"match"``): the key columns, ``match_id``,
    ``start``/``end``, one column per stage holding the events it took (an array of
    structs of the input columns) and one column per measure.  With ``timeouts=True``
    partial matches whose ``within`` window passed come as ``kind = "timeout"`` rows
    (``timeout_at`` says when).  Late events (at or below the watermark when they
    arrive) and events with a null key or time are always counted in ``metrics``;
    with ``late=True`` they are also returned as ``"late"`` / ``"dead_letter"`` rows
    with a ``reason`` and the ``event``.  Event times must be after 1970-01-01 (epoch
    millisecond 1 or later), because Spark's watermark 0 means "no watermark yet": an
    event at or before the epoch is a dead letter whose reason says so.

    The watermark is Spark's (``withWatermark(time, watermark)``); events wait in the
    group's state until it passes them and are matched in (time, arrival) order, so
    out-of-order input within the delay gives the matches sorted input gives.  Partial
    matches and waiting events live in Spark's state store: the query's
    ``checkpointLocation`` makes them survive a restart.  Use append output mode.

    ``key_groups`` = G runs one Python call per group of keys (``hash(key) mod G``)
    instead of one per key, because Spark's per-call cost, not matching, limits a
    per-key design; ``"auto"`` is four groups per shuffle partition (enough to keep
    every partition busy, few enough that each call gets many keys);
    ``key_groups=None`` groups by the key itself.  ``order_by`` names a
    column that orders events with equal time within one Spark batch (default: the
    order Spark reads them, which is defined within a file but not across files).
    No key holds more than ``max_partial_matches`` partial matches (None: no cap);
    beyond, ``on_overflow`` fails the query naming the key, or drops the oldest or
    newest (counted in ``metrics``), as in :func:`cep.match`.  A group with nothing
    pending (no partial match, no waiting event) keeps no state in Spark's store.

    A directory of Parquet files as a stream, its matches collected in a memory table
    (with ``availableNow`` the query reads what is there and stops):

    >>> import os, tempfile
    >>> import pandas as pd
    >>> from cep import Pattern, col
    >>> src, chk = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> pd.DataFrame({"card": ["c1"] * 4, "ts": [1000, 2000, 3000, 60_000],
    ...               "amount": [1.0, 2.0, 900.0, 5.0]}).to_parquet(os.path.join(src, "p0.parquet"))
    >>> stream = spark.readStream.schema("card string, ts long, amount double").parquet(src)
    >>> p = (Pattern.begin("small").where(col("amount") < 5).times(2)
    ...      .next("big").where(col("amount") > 500))
    >>> out = match_stream(stream, p, key="card", time="ts", watermark="10 seconds")
    >>> query = (out.writeStream.format("memory").queryName("card_testing")
    ...          .option("checkpointLocation", chk).outputMode("append")
    ...          .trigger(availableNow=True).start())
    >>> query.awaitTermination()
    >>> [(r.card, r.kind, r.start, r.end) for r in spark.table("card_testing").collect()]
    [('c1', 'match', 1000, 3000)]

    **A rule set** (:mod:`cep.rules`: a directory or file of rule files, a ``RuleSet`` or a
    list of ``Rule``) instead of a pattern runs every rule, each event routed once to
    every distinct key field's groups in one shuffle (Spark allows one stateful operator
    per query), every rule keyed by that field in one group call (``key`` is not given:
    rules say theirs).  A directory is read again while the query runs, by every group at
    its next call (each worker process looks at the files at most every ``every``
    seconds), so the directory must be readable by every executor (a shared path, like
    the checkpoint location), and a rule file is best written whole (to a temporary name,
    then renamed).  The first group call that finds the files changed logs the new set
    with its micro-batch's watermark in a change log (the folder ``changes``, default
    beside the directory: ``rules/`` logs to ``rules.cep-changes/``; every executor
    writes to it), and every key switches exactly at that watermark, whatever micro-batch
    its group is next called in (see :mod:`cep.runtime.spark.rule_sets`).  A change
    means what it means in the embedded runtime's :meth:`cep.runtime.Job.rules`: a new
    rule reads the events after it, a
    removed or disabled one's partial matches are dropped, and a changed one (a new
    ``version``) runs afresh while the old version's partial matches drain
    (``on_change="drain"``) or are dropped (``"drop"``); a file that does not load, or a
    rule changed without a new version, is reported and the rule in force runs on.  Each
    group's state records the rules it runs, so a restart resumes them.  The key fields
    are those of the rules at the start, and ``key_fields``: a rule added later keyed by
    another field is reported and not run (restart the query with that field in
    ``key_fields``).  The output has a column per key field of the query (null where a
    rule keyed otherwise found the row), ``rule`` and ``version``, and, because rules come
    and go while the query's schema stays, ``stages`` (a map from stage name to the events
    it took) and ``measures`` (a map from name to JSON text)::

        out = match_stream(stream, "rules/", time="ts", watermark="1 minute")
    """
    if not df.isStreaming:
        raise CEPError("match_stream needs a streaming DataFrame; use match_batch for a static one")
    if not isinstance(pattern, Pattern):
        specs = make_rule_specs(df, pattern, key=key, measures=measures, time=time,
                                engine=engine, timeouts=timeouts, late=late,
                                time_unit=time_unit, max_partial_matches=max_partial_matches,
                                on_overflow=on_overflow, on_change=on_change, every=every,
                                key_fields=key_fields, changes=changes)
        return _stateful(df, [replace(spec, after_epoch=time) for spec in specs],
                         rule_set_schema(df.schema, specs[0]), time, watermark, order_by,
                         _key_groups(df, key_groups), metrics)
    spec = replace(make_spec(df, pattern, key=key, time=time, engine=engine, timeouts=timeouts,
                             late=late, measures=measures, time_unit=time_unit,
                             max_partial_matches=max_partial_matches, on_overflow=on_overflow),
                   after_epoch=time)
    schema = output_schema(df.schema, spec, pattern)
    return _stateful(df, [spec], schema, time, watermark, order_by, _key_groups(df, key_groups),
                     metrics)


def _key_groups(df: DataFrame, key_groups: int | str | None) -> int | None:
    if key_groups == "auto":
        partitions = df.sparkSession.conf.get("spark.sql.shuffle.partitions") or "200"
        return GROUPS_PER_PARTITION * int(partitions)
    if isinstance(key_groups, str):
        raise CEPError(f"key_groups must be a number, None or 'auto', got {key_groups!r}")
    return key_groups


def _stateful(df: DataFrame, specs: list[Spec], schema: Any, time: str, watermark: str,
              order_by: str | None, key_groups: int | None, metrics: SparkMetrics | None
              ) -> DataFrame:
    """One shuffle and one stateful call per group.  One pattern: grouped by its key (or
    key group).  A rule set: Spark allows one stateful operator per query, so each event
    goes once to each key field (``FIELD`` says which), grouped by the field and its key
    group (or its key's hash when ``key_groups`` is None)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    named = isinstance(specs[0], RuleSetSpec)
    prepared = _prepare(df, specs, time, watermark, order_by, key_groups)
    grouping = ([FIELD, GROUP] if named else [GROUP] if key_groups is not None
                else list(specs[0].key))
    return prepared.groupBy(*grouping).applyInPandasWithState(
        _group_function(specs, named, metrics), schema, "state binary", "append",
        GroupStateTimeout.EventTimeTimeout,
    )


def union(frames: list[DataFrame]) -> DataFrame:
    """The rows of every frame (a rule set's key fields: one per field, same schema)."""
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def event_millis(df: DataFrame, time: str, is_timestamp: bool, unit: str | None = None
                 ) -> Column:
    """The column ``time`` as epoch milliseconds: a timestamp through ``unix_millis``, an
    integer as it is (``unit`` None or ``"ms"``) or scaled from ``"s"``, ``"us"``, ``"ns"``.

    >>> df = spark.createDataFrame([("2024-01-01 00:00:01",)], "ts string")
    >>> df.select(event_millis(df, "ts", is_timestamp=True).alias("ms")).first().ms
    1704067201000
    """
    from pyspark.sql import functions as F

    from cep.times import TIME_UNITS

    c = F.col(time)
    if is_timestamp:
        return F.unix_millis(c.cast("timestamp"))
    num, den = TIME_UNITS[unit or "ms"]
    scaled = c.cast("long") * F.lit(num) if num != 1 else c.cast("long")
    return F.floor(scaled / F.lit(den)).cast("long") if den != 1 else scaled


def with_order(df: DataFrame, order_by: str | None) -> DataFrame:
    """Add the columns that order events of equal time: ``order_by``; else, for file sources,
    the file's modification time (the order Spark's file source takes new files in), a hash
    of its path (files written at the same instant) and the row's place in the file; else,
    for static frames, Spark's row id; else none (the order rows reach the function)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    if order_by is not None:
        if order_by not in df.columns:
            raise CEPError(f"order_by column {order_by!r} is not in the DataFrame")
        return df.withColumn(ORDER_ROW, F.col(order_by))
    quiet = logging.getLogger("DataFrameQueryContextLogger")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a frame without a file source is no error here
    try:
        # longs, not the path itself: a string per event costs more than matching it
        out = df.withColumns({
            ORDER: F.unix_micros(F.col("_metadata.file_modification_time")),
            ORDER_FILE: F.xxhash64(F.col("_metadata.file_path")),
            ORDER_ROW: F.col("_metadata.row_index"),
        })
        out.schema  # noqa: B018 -- analysis happens here
        return out
    except AnalysisException:
        pass
    finally:
        quiet.setLevel(level)
    if not df.isStreaming:
        return df.withColumn(ORDER_ROW, F.monotonically_increasing_id())
    return df


def _prepare(df: DataFrame, specs: list[Spec], time: str, watermark: str,
             order_by: str | None, key_groups: int | None) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    if key_groups is not None and key_groups < 1:
        raise CEPError(f"key_groups must be at least 1 (or None for one group per key), "
                       f"got {key_groups}")
    spec = specs[0]
    out = with_order(df.withColumn(TS, event_millis(df, time, spec.time_is_timestamp,
                                                    spec.time_unit)), order_by)

    def group_of(key: tuple[str, ...]) -> Column:
        hashed = F.xxhash64(*key)
        return hashed if key_groups is None else F.pmod(hashed, F.lit(key_groups))

    if isinstance(spec, RuleSetSpec):
        names = [_field_id(s) for s in specs]
        out = out.withColumn(FIELD, F.explode(F.array(*(F.lit(n) for n in names))))
        chosen = F.when(F.col(FIELD) == names[0], group_of(spec.key))
        for name, other in zip(names[1:], specs[1:], strict=True):
            chosen = chosen.when(F.col(FIELD) == name, group_of(other.key))
        out = out.withColumn(GROUP, chosen)
    elif key_groups is not None:
        out = out.withColumn(GROUP, group_of(spec.key))
    # nullable 64-bit integers reach the function exact (see NULLS); not a column the groups
    # are made of (a null key would join key 0's group)
    grouped = set(spec.key) if not isinstance(spec, RuleSetSpec) and key_groups is None else set()
    for field in df.schema.fields:
        if (field.nullable and isinstance(field.dataType, LongType)
                and field.name not in grouped):
            column = F.col(f"`{field.name}`")
            out = out.withColumn(NULLS + field.name, column.isNull()).withColumn(
                field.name, F.coalesce(column, F.lit(0).cast("long")))
    wm = "__cep_wm"
    out = out.withColumn(wm, F.timestamp_millis(F.col(TS))).withWatermark(wm, watermark)
    # Spark drops rows behind the previous batch's watermark before a stateful function
    # sees them, but only by the watermark column it finds in the function's input.  The
    # operator judges lateness itself (and reports late events instead of losing them),
    # so that column is replaced by one that carries the watermark delay and is never late.
    delay = _delay_ms(out, wm)
    return out.drop(wm).withColumn(
        wm, F.lit(None).cast("timestamp").alias(wm, metadata={_DELAY_KEY: delay}))


def _delay_ms(df: DataFrame, column: str) -> int:
    meta = df.schema[column].metadata
    if _DELAY_KEY not in meta:
        raise CEPError("Spark did not record the watermark delay (unsupported Spark version?)")
    return int(meta[_DELAY_KEY])


def _field_id(spec: Spec) -> str:
    """A rule set's key field as its group's first column names it: its field names as a
    JSON list, so that a query restarted with other key fields finds each one's state where
    it was (numbered by its place in the list, a field sorting before it moved every
    other's: found by a check, card state restored into account groups)."""
    return json.dumps(list(spec.key))


def _group_function(specs: list[Spec], by_field: bool, metrics: SparkMetrics | None) -> Any:
    """The function Spark calls per group: ``by_field``, the group's first column names
    the spec (a rule set's key field, :func:`_field_id`) it runs.  A group of a key field
    no rule uses any more (a query restarted without it) has its state removed: its
    rules are retired, their partial matches dropped."""
    by_name = {_field_id(spec): (spec, id(spec)) for spec in specs} if by_field else {}

    def run_group(group: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any
                  ) -> Iterator[pd.DataFrame]:
        if by_field:
            found = by_name.get(str(group[0]))
            if found is None:
                if state.exists:
                    state.remove()
                return
            spec, spec_id = found
        else:
            spec, spec_id = specs[0], id(specs[0])
        runner = _RUNNERS.get(spec_id)
        if runner is None or runner.spec != spec:
            runner = _RUNNERS[spec_id] = group_runner(spec)
        if state.hasTimedOut:
            frames = iter(())
        blob = state.get[0] if state.exists else None
        wm = state.getCurrentWatermarkMs()
        result = runner.run(blob, (exact_integers(f.drop(columns=["__cep_wm", GROUP, FIELD],
                                                         errors="ignore"))
                                   for f in frames), wm if wm > 0 else None)
        if result.state is None:
            if state.exists:
                state.remove()
        else:
            state.update((result.state,))
            if result.timer is not None:
                state.setTimeoutTimestamp(result.timer)
        if metrics is not None:
            metrics.add(result.counts)
        if len(result.output):
            yield result.output

    return run_group

