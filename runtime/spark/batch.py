"""``match_batch``: a pattern over a static DataFrame (history), partitioned by key and
sorted within partitions, matched columnar with ``mapInArrow``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cep.errors import CEPError
from cep.expr import Expr
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES
from cep.pattern import Pattern
from cep.rules import Rule, RuleSet
from cep.runtime.spark.metrics import SparkMetrics
from cep.runtime.spark.rule_sets import group_runner
from cep.runtime.spark.runner import ORDERING, TS, Spec, arrow_frame
from cep.runtime.spark.schema import make_rule_specs, make_spec, output_schema, rule_set_schema
from cep.runtime.spark.stream import event_millis, union, with_order

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: rows handed to the engine per call (Arrow batches are gathered up to this size)
CHUNK_ROWS = 200_000


def match_batch(
    df: DataFrame,
    pattern: Pattern | RuleSet | list[Rule] | str | Path,
    *,
    key: str | Sequence[str] | None = None,
    time: str,
    timeouts: bool = False,
    dead_letters: bool = False,
    measures: Mapping[str, Expr] | None = None,
    engine: str = "auto",
    order_by: str | None = None,
    partitions: int | None = None,
    metrics: SparkMetrics | None = None,
    time_unit: str | None = None,
    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
    on_overflow: str = "fail",
) -> DataFrame:
    """Match ``pattern`` per ``key`` over a static DataFrame, e.g. years of Parquet; or
    every rule of a rule set, each keyed by its own field.

    The output has the schema of :func:`match_stream`'s and the rows the embedded
    runtime finds on the same events read to the end: every key's events are matched
    in (time, arrival) order and, at the end of the key, time moves to the end, so
    every ``within`` window closes (timeouts with ``timeouts=True``).  ``order_by``
    orders events with equal time (default: the order Spark reads them).  Events with a
    null key or time are counted in ``metrics`` and returned with ``dead_letters=True``.
    No key holds more than ``max_partial_matches`` partial matches (None: no cap);
    beyond, ``on_overflow`` fails the task naming the key, or drops the oldest or newest
    (counted in ``metrics``), as in :func:`cep.match`.

    >>> from cep import Pattern, col
    >>> rows = [("c1", 1000, 1.0), ("c1", 2000, 2.0), ("c1", 3000, 900.0), ("c2", 1500, 3.0)]
    >>> hist = spark.createDataFrame(rows, "card string, ts long, amount double")
    >>> p = (Pattern.begin("small").where(col("amount") < 5).times(2)
    ...      .next("big").where(col("amount") > 500))
    >>> out = match_batch(hist, p, key="card", time="ts")
    >>> [(r.card, r.kind, r.start, r.end, [e.amount for e in r.small]) for r in out.collect()]
    [('c1', 'match', 1000, 3000, [1.0, 2.0])]

    Years of Parquet work the same way: ``match_batch(spark.read.parquet(path), ...)``.

    A rule set (a directory or file of rule files, a ``RuleSet``, a list of ``Rule``; read
    once, when called) runs every enabled rule over the same history, one shuffle per
    distinct key field, every rule keyed by it in one pass over each partition; ``key`` is
    not given (rules say theirs).  The output is :func:`match_stream`'s for a rule set: a
    column per key field, ``rule``, ``version``, and ``stages`` / ``measures`` as maps:

    >>> from cep.rules import Rule
    >>> rules = [Rule("testing", 1, "card", p), Rule("big", 1, "card",
    ...          Pattern.begin("big").where(col("amount") > 500))]
    >>> out = match_batch(hist, rules, time="ts")
    >>> sorted((r.rule, r.card, r.start, sorted(r.stages)) for r in out.collect())
    [('big', 'c1', 3000, ['big']), ('testing', 'c1', 1000, ['big', 'small'])]
    """
    if df.isStreaming:
        raise CEPError("match_batch needs a static DataFrame; use match_stream for a stream")
    if not isinstance(pattern, Pattern):
        specs = make_rule_specs(df, pattern, key=key, measures=measures, time=time,
                                engine=engine, timeouts=timeouts, late=dead_letters,
                                time_unit=time_unit, max_partial_matches=max_partial_matches,
                                on_overflow=on_overflow)
        schema = rule_set_schema(df.schema, specs[0])
        return union([_matched(df, spec, schema, order_by, partitions, metrics)
                       for spec in specs])
    spec = make_spec(df, pattern, key=key, time=time, time_unit=time_unit, engine=engine,
                     timeouts=timeouts, late=dead_letters, measures=measures,
                     max_partial_matches=max_partial_matches, on_overflow=on_overflow)
    return _matched(df, spec, output_schema(df.schema, spec, pattern), order_by, partitions,
                    metrics)


def _matched(df: DataFrame, spec: Spec, schema: Any, order_by: str | None,
             partitions: int | None, metrics: SparkMetrics | None) -> DataFrame:
    """One shuffle by ``spec``'s key, partitions sorted by key and time, matched."""
    n = partitions or int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    prepared = with_order(df.withColumn(TS, event_millis(df, spec.time, spec.time_is_timestamp,
                                                         spec.time_unit)),
                          order_by)
    order = [c for c in ORDERING if c in prepared.columns]
    prepared = prepared.repartition(n, *spec.key).sortWithinPartitions(*spec.key, TS, *order)
    return prepared.mapInArrow(_partition_function(spec, schema, metrics), schema)


def _partition_function(spec: Spec, schema: Any, metrics: SparkMetrics | None) -> Any:
    def run_partition(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        runner = group_runner(spec)
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        for chunk in _key_complete_chunks(batches, spec.key):
            result = runner.run(None, [chunk], None, final=True)
            if metrics is not None:
                metrics.add(result.counts)
            if len(result.output):
                yield pa.RecordBatch.from_pandas(result.output, schema=arrow_schema,
                                                 preserve_index=False)

    return run_partition


def _key_complete_chunks(batches: Iterator[Any], key: tuple[str, ...]) -> Iterator[pd.DataFrame]:
    """Frames of about CHUNK_ROWS rows that never split a key (the input is sorted by key),
    so each is matched to the end on its own and no state crosses chunks."""
    pending: list[pd.DataFrame] = []
    size = 0
    for rb in batches:
        frame = arrow_frame(rb)
        if not len(frame):
            continue
        pending.append(frame)
        size += len(frame)
        if size < CHUNK_ROWS:
            continue
        whole = pd.concat(pending, ignore_index=True)
        cut = _last_key_start(whole, key)
        if cut == 0:
            pending, size = [whole], len(whole)  # one key so far: keep gathering
            continue
        yield whole.iloc[:cut]
        rest = whole.iloc[cut:].reset_index(drop=True)
        pending, size = [rest], len(rest)
    if size:
        yield pd.concat(pending, ignore_index=True)


def _last_key_start(frame: pd.DataFrame, key: tuple[str, ...]) -> int:
    """Index of the first row of the frame's last key."""
    last = frame.iloc[-1]
    same = np.ones(len(frame), dtype=bool)
    for k in key:
        col = frame[k]
        same &= (col == last[k]).to_numpy() | (col.isna().to_numpy() & bool(pd.isna(last[k])))
    # rows of the last key are a suffix: find where the suffix starts
    differ = np.flatnonzero(~same)
    return int(differ[-1] + 1) if len(differ) else 0
