"""Spark: match_stream and match_batch on a real local[2] Spark give the embedded runtime's results.

Events are card transactions ``{id, card, ts, amount, v, merchant}`` written as
Parquet files; a streaming query reads the directory with
``trigger(availableNow=True)``, one file per micro-batch so the watermark moves
between batches.  The oracle is the embedded runtime's :class:`CepOperator` fed
the same events: at the end of an ``availableNow`` run Spark's watermark is the
newest event time minus the delay (partial matches beyond it rightly stay in
state), so the oracle is taken to that same watermark.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cep import Pattern, SkipStrategy, WithinType, col, count, first, last
from cep.runtime.operator import CepOperator
from cep.runtime.spark import SparkMetrics, match_batch, match_stream

DELAY_MS = 10_000
SCHEMA = "id long, card string, ts long, amount double, v int, merchant string"
MINUTE = 60_000


def transactions(n: int = 1200, cards: int = 12, seed: int = 7) -> list[dict[str, Any]]:
    """Card transactions in time order: bursts of tiny charges, big ones, ties in time."""
    rng = random.Random(seed)
    clock = {f"c{i:02d}": 1_700_000_000_000 + rng.randrange(60_000) for i in range(cards)}
    out = []
    for i in range(n):
        card = rng.choice(sorted(clock))
        clock[card] += rng.choice([0, 1000, 2000, 5000, 20_000, 90_000])
        r = rng.random()
        amount = round(rng.uniform(0.5, 4.5), 2) if r < 0.4 else (
            round(rng.uniform(501, 2000), 2) if r < 0.5 else round(rng.uniform(10, 200), 2))
        out.append({"id": i, "card": card, "ts": clock[card], "amount": amount,
                    "v": rng.randrange(4), "merchant": rng.choice(["m1", "m2", "m3"])})
    return sorted(out, key=lambda e: (e["ts"], e["id"]))


PATTERNS: dict[str, Callable[[], Pattern]] = {
    "card_testing_skip_past_last": lambda: (
        Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
        .where(col("amount") < 5).times_or_more(3).consecutive()
        .next("big").where(col("amount") > 500).within(10 * MINUTE)),
    "followed_by_any_no_skip": lambda: (
        Pattern.begin("a").where(col("v") == 0)
        .followed_by_any("b").where(col("v") == 1).times(2)
        .followed_by("c").where(col("amount") > 500).within(5 * MINUTE)),
    "trailing_not_followed_by": lambda: (
        Pattern.begin("big").where(col("amount") > 500)
        .not_followed_by("small").where(col("amount") < 5).within(3 * MINUTE)),
    "not_next_skip_to_next": lambda: (
        Pattern.begin("a", skip=SkipStrategy.skip_to_next()).where(col("v") == 2)
        .not_next("b").where(col("v") == 2)
        .followed_by("c").where(col("merchant") == "m3").within(4 * MINUTE)),
    "greedy_loop_until_skip_to_first": lambda: (
        Pattern.begin("a", skip=SkipStrategy.skip_to_first("b"))
        .where(col("merchant") == "m1")
        .followed_by("b").where(col("amount") < 100).one_or_more().greedy()
        .until(col("v") == 3)
        .next("c").where(col("amount") >= 100).within(6 * MINUTE)),
    "optional_range_skip_to_last": lambda: (
        Pattern.begin("a", skip=SkipStrategy.skip_to_last("b")).where(col("v") == 1)
        .followed_by("b").where(col("amount") < 50).times(1, 3).optional()
        .followed_by("c").where(col("v") == 3)
        .within(2 * MINUTE)),
    "gap_window_previous_and_current": lambda: (
        Pattern.begin("a").where(col("amount") < 5)
        .next("b").where(col("amount") < 5)
        .next("c").where(col("amount") > 500)
        .within(30_000, WithinType.PREVIOUS_AND_CURRENT)),
    "python_callables": lambda: (
        Pattern.begin("a").where(lambda e: e["amount"] < 5)
        .followed_by("b").where(lambda e, ctx: e["amount"] > 20 * len(ctx.events("a")))
        .within(2 * MINUTE)),
}


# ----------------------------------------------------------------- helpers
def write_files(directory: Path, batches: list[list[dict[str, Any]]], first: int = 0) -> None:
    """One Parquet file per batch, modification times one second apart (Spark reads new
    files in modification-time order)."""
    directory.mkdir(parents=True, exist_ok=True)
    base = 1_750_000_000
    for i, rows in enumerate(batches, start=first):
        path = directory / f"part-{i:04d}.parquet"
        frame = pd.DataFrame(rows).astype({"id": "int64", "ts": "int64", "v": "int32"})
        frame.to_parquet(path, index=False)
        os.utime(path, (base + i, base + i))


def chunks(events: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    size = -(-len(events) // n)
    return [events[i:i + size] for i in range(0, len(events), size)]


def run_stream(spark: Any, source: Path, pattern: Pattern, checkpoint: Path, sink: Path,
               **kw: Any) -> list[Any]:
    stream = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
              .parquet(str(source)))
    kw.setdefault("timeouts", True)
    out = match_stream(stream, pattern, key="card", time="ts", watermark="10 seconds", **kw)
    query = (out.writeStream.format("parquet").option("path", str(sink))
             .option("checkpointLocation", str(checkpoint)).outputMode("append")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return spark.read.parquet(str(sink)).collect()


def summary(rows: list[Any], stages: list[str]) -> list[tuple[Any, ...]]:
    out = []
    for r in rows:
        if r["kind"] not in ("match", "timeout"):
            continue
        taken = tuple((s, tuple(e["id"] for e in r[s])) for s in stages if r[s])
        out.append((r["kind"], r["card"], r["start"], r["end"], taken))
    return sorted(out)


def embedded(pattern: Pattern, events: list[dict[str, Any]], watermark: int | None,
             timeouts: bool = True) -> list[tuple[Any, ...]]:
    """The embedded runtime's output for events arriving in this order, up to ``watermark``
    (None: to the end of input)."""
    op = CepOperator(pattern, "reference", key="card", time="ts", timeouts=timeouts)
    out, _ = op.process_elements(events, [None] * len(events))
    found = op.finish() if watermark is None else op.process_watermark(watermark)
    assert not out.late and not out.dead
    result = []
    for kind, ms in (("match", found.matches), ("timeout", found.timeouts)):
        for m in ms:
            taken = tuple((s, tuple(e["id"] for e in evs)) for s, evs in m.items() if evs)
            result.append((kind, m.key, m.start, m.end, taken))
    return sorted(result)


def stages_of(pattern: Pattern) -> list[str]:
    return [s.name for s in pattern.iter_stages() if not s.consuming.negated]


# ------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_streaming_equals_the_embedded_runtime(spark: Any, tmp_path: Path, name: str) -> None:
    pattern = PATTERNS[name]()
    events = transactions()
    write_files(tmp_path / "in", chunks(events, 4))
    # per-key grouping for two of the patterns, key groups for the rest
    groups = None if name in ("trailing_not_followed_by", "python_callables") else 16
    rows = run_stream(spark, tmp_path / "in", pattern, tmp_path / "chk", tmp_path / "out",
                      key_groups=groups)
    final_watermark = max(e["ts"] for e in events) - DELAY_MS
    expected = embedded(pattern, events, final_watermark)
    assert expected, "the data should produce matches for this pattern"
    assert summary(rows, stages_of(pattern)) == expected


def test_restart_from_the_checkpoint_completes_matches_that_span_it(
        spark: Any, tmp_path: Path) -> None:
    pattern = PATTERNS["card_testing_skip_past_last"]()
    events = transactions(seed=11)
    parts = chunks(events, 6)
    # card "zz" charges three tiny amounts just before the restart and a big one after it
    boundary = max(e["ts"] for e in parts[2])
    parts[2] += [{"id": 90_000 + i, "card": "zz", "ts": boundary - 3000 + 1000 * i,
                  "amount": 1.0, "v": 0, "merchant": "m1"} for i in range(3)]
    parts[3] = [{"id": 90_003, "card": "zz", "ts": boundary + 1000, "amount": 900.0, "v": 0,
                 "merchant": "m1"}, *parts[3]]
    events = sorted((e for part in parts for e in part), key=lambda e: (e["ts"], e["id"]))
    # the first run sees three files; partial matches are open when it stops
    write_files(tmp_path / "in", parts[:3])
    first_run = run_stream(spark, tmp_path / "in", pattern, tmp_path / "chk", tmp_path / "out")
    write_files(tmp_path / "in", parts[3:], first=3)
    both_runs = run_stream(spark, tmp_path / "in", pattern, tmp_path / "chk", tmp_path / "out")
    assert len(both_runs) > len(first_run)
    # a single run over every file, from scratch
    single = run_stream(spark, tmp_path / "in", pattern, tmp_path / "chk1", tmp_path / "out1")
    stages = stages_of(pattern)
    assert summary(both_runs, stages) == summary(single, stages)
    spanning = [r for r in both_runs if r["start"] <= boundary < r["end"]]
    assert [r["card"] for r in spanning] == ["zz"]
    final_watermark = max(e["ts"] for e in events) - DELAY_MS
    assert summary(both_runs, stages) == embedded(pattern, events, final_watermark)


def test_out_of_order_within_the_delay_matches_like_sorted_input(
        spark: Any, tmp_path: Path) -> None:
    pattern = PATTERNS["card_testing_skip_past_last"]()
    events = transactions(seed=3)
    rng = random.Random(5)
    shuffled = []
    for part in chunks(events, 4):
        # move events within a file by less than the watermark delay; events with equal
        # times keep their order (ties are matched in arrival order, as in Flink)
        jitter = {e["ts"]: rng.uniform(0, DELAY_MS / 2) for e in part}
        keyed = sorted(part, key=lambda e: e["ts"] + jitter[e["ts"]])
        assert keyed != part
        shuffled.append(keyed)
    write_files(tmp_path / "sorted", chunks(events, 4))
    write_files(tmp_path / "shuffled", shuffled)
    stages = stages_of(pattern)
    a = run_stream(spark, tmp_path / "sorted", pattern, tmp_path / "c1", tmp_path / "o1")
    b = run_stream(spark, tmp_path / "shuffled", pattern, tmp_path / "c2", tmp_path / "o2")
    assert summary(a, stages) == summary(b, stages) != []


def test_late_events_are_counted_and_returned(spark: Any, tmp_path: Path) -> None:
    pattern = PATTERNS["card_testing_skip_past_last"]()
    events = transactions(seed=3, n=400)
    parts = chunks(events, 3)
    newest = max(e["ts"] for e in parts[1])
    stale = [{**e, "id": 10_000 + i, "ts": newest - DELAY_MS - 60_000}
             for i, e in enumerate(parts[0][:5])]
    write_files(tmp_path / "in", [parts[0], parts[1], stale, parts[2]])
    metrics = SparkMetrics(spark)
    rows = run_stream(spark, tmp_path / "in", pattern, tmp_path / "chk", tmp_path / "out",
                      late=True, metrics=metrics)
    late = [r for r in rows if r["kind"] == "late"]
    assert sorted(r["event"]["id"] for r in late) == [e["id"] for e in stale]
    assert all("at or below the watermark" in r["reason"] for r in late)
    assert metrics.late == 5 and metrics.events == len(events) + 5
    # the rest matched as if the late events had never come
    final_watermark = max(e["ts"] for e in events) - DELAY_MS
    assert summary(rows, stages_of(pattern)) == embedded(pattern, events, final_watermark)


def test_timestamp_time_column_and_measures(spark: Any, tmp_path: Path) -> None:
    pattern = PATTERNS["card_testing_skip_past_last"]()
    events = transactions(seed=9, n=600)
    frame = pd.DataFrame(events)
    frame["ts"] = pd.to_datetime(frame["ts"], unit="ms")
    df = spark.createDataFrame(frame).withColumn("ts", col_ts())
    out = match_batch(df, pattern, key="card", time="ts", measures={
        "n_small": count("small"), "first_small": first("small", "ts"),
        "big_amount": last("big", "amount")}).collect()
    expected = [m for m in embedded(pattern, events, None) if m[0] == "match"]
    assert len(out) == len(expected) > 0
    for r in out:
        assert r["n_small"] == len(r["small"])
        assert r["first_small"] == r["small"][0]["ts"] == r["start"]
        assert r["big_amount"] == r["big"][-1]["amount"]
    got = sorted((r["card"], [e["id"] for e in r["small"]], [e["id"] for e in r["big"]])
                 for r in out)
    want = sorted((m[1], list(dict(m[4])["small"]), list(dict(m[4])["big"])) for m in expected)
    assert got == want


def col_ts() -> Any:
    from pyspark.sql import functions as F

    return F.col("ts").cast("timestamp")


@pytest.mark.parametrize("name", ["card_testing_skip_past_last", "trailing_not_followed_by",
                                  "python_callables"])
def test_batch_replay_equals_the_embedded_runtime(spark: Any, tmp_path: Path, name: str) -> None:
    pattern = PATTERNS[name]()
    events = transactions(seed=21)
    write_files(tmp_path / "hist", chunks(events, 3))
    df = spark.read.schema(SCHEMA).parquet(str(tmp_path / "hist"))
    rows = match_batch(df, pattern, key="card", time="ts", timeouts=True).collect()
    assert summary(rows, stages_of(pattern)) == embedded(pattern, events, None) != []


def test_bad_calls_name_what_is_wrong(spark: Any) -> None:
    from cep import CEPError

    df = spark.createDataFrame(pd.DataFrame(transactions(n=5)))
    p = PATTERNS["card_testing_skip_past_last"]()
    with pytest.raises(CEPError, match="key column 'account' is not in the DataFrame"):
        match_batch(df, p, key="account", time="ts")
    with pytest.raises(CEPError, match="time column 'merchant' is string"):
        match_batch(df, p, key="card", time="merchant")
    with pytest.raises(CEPError, match="needs a streaming DataFrame"):
        match_stream(df, p, key="card", time="ts")
    bad = Pattern.begin("a").where(col("missing") > 1)
    with pytest.raises(CEPError, match="unknown column 'missing'"):
        match_batch(df, bad, key="card", time="ts")
    clash = Pattern.begin("kind").where(col("v") > 1)
    with pytest.raises(CEPError, match="clash with the output column"):
        match_batch(df, clash, key="card", time="ts")


def test_events_at_or_before_the_epoch_are_dead_letters(spark: Any, tmp_path: Path) -> None:
    """Spark's watermark 0 means "none" and it refuses timers at 0: an event at or before
    1970-01-01 is a dead letter saying so (it used to fail the query with PySpark's
    "timestampMs must be positive"); one at 1 ms is matched."""
    pattern = (Pattern.begin("small").where(col("amount") < 5)
               .next("big").where(col("amount") > 500))

    def event(i: int, card: str, ts: int, amount: float) -> dict[str, Any]:
        return {"id": i, "card": card, "ts": ts, "amount": amount, "v": 0, "merchant": "m1"}

    write_files(tmp_path / "in", [
        [event(1, "c", 0, 1.0), event(2, "c", -5, 1.0), event(3, "d", 1, 1.0),
         event(4, "d", 2, 900.0)],
        [event(5, "z", 60_000, 50.0)],  # moves the watermark past the rest
    ])
    metrics = SparkMetrics(spark)
    rows = run_stream(spark, tmp_path / "in", pattern, tmp_path / "chk", tmp_path / "out",
                      late=True, metrics=metrics)
    dead = sorted((r for r in rows if r["kind"] == "dead_letter"), key=lambda r: r["event"]["id"])
    assert [(r["card"], r["event"]["id"]) for r in dead] == [("c", 1), ("c", 2)]
    for r in dead:
        assert "of 'ts' is at or before 1970-01-01T00:00:00Z" in r["reason"]
        assert "event times after 1970-01-01" in r["reason"]
    assert "1969-12-31T23:59:59.995+00:00 (-5 ms)" in dead[1]["reason"]
    matches = [r for r in rows if r["kind"] == "match"]
    assert [(r["card"], r["start"], r["end"]) for r in matches] == [("d", 1, 2)]
    counts = metrics.as_dict()
    assert {k: counts[k] for k in ("events", "matches", "timeouts", "late", "dead_letters")} == {
        "events": 5, "matches": 1, "timeouts": 0, "late": 0, "dead_letters": 2}


def test_integer_times_in_seconds(spark: Any) -> None:
    """Epoch seconds read as milliseconds would put a day's charges into one window: with
    no ``time_unit`` they are dead letters naming the unit to give; with
    ``time_unit="s"`` they are matched, start/end in epoch milliseconds."""
    pattern = (Pattern.begin("small").where(col("amount") < 5)
               .next("big").where(col("amount") > 500).within(120_000))
    march_1 = 1_709_251_200
    df = spark.createDataFrame(pd.DataFrame([
        {"card": "c", "ts": march_1, "amount": 1.0},
        {"card": "c", "ts": march_1 + 60, "amount": 900.0},
    ]))
    rows = match_batch(df, pattern, key="card", time="ts", time_unit="s").collect()
    assert [(r.card, r.start, r.end) for r in rows] == [
        ("c", march_1 * 1000, (march_1 + 60) * 1000)]
    dead = match_batch(df, pattern, key="card", time="ts", dead_letters=True).collect()
    assert [r.kind for r in dead] == ["dead_letter", "dead_letter"]
    assert "looks like epoch seconds" in dead[0].reason and "time_unit='s'" in dead[0].reason


def test_match_ids_are_the_ones_cep_match_gives(spark: Any, tmp_path: Path) -> None:
    """One builder makes Spark's rows and cep.match's tables: the same matches get the same
    ids, though Spark read the events from Parquet in three files and cep.match from dicts."""
    import cep

    pattern = PATTERNS["card_testing_skip_past_last"]()
    events = transactions(seed=21)
    write_files(tmp_path / "hist", chunks(events, 3))
    df = spark.read.schema(SCHEMA).parquet(str(tmp_path / "hist"))
    got = match_batch(df, pattern, key="card", time="ts", timeouts=True).collect()
    want = cep.match(events, pattern, key="card", time="ts", timeouts=True, output="arrow")
    assert sorted(r.match_id for r in got) == sorted(want["match_id"].to_pylist())
    assert len(got) > 10


def test_integers_beyond_2_53_with_a_null_among_them_stay_apart(
        spark: Any, tmp_path: Path) -> None:
    """Accounts 2**62 + 1 and 2**62 + 2, and an event without an account: Spark hands pandas
    a 64-bit integer column holding a null as float64, which made the two accounts one and a
    pair span both (and wrote 2**62 as the account of its events)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cep.rules import Rule

    base = 2**62
    events = [{"acct": base + 1, "ts": 1_000, "amount": 1.0},
              {"acct": base + 2, "ts": 2_000, "amount": 900.0},
              {"acct": None, "ts": 3_000, "amount": 5.0},
              {"acct": base + 1, "ts": 4_000, "amount": 950.0},
              {"acct": base + 3, "ts": 10**8, "amount": 5.0}]  # moves the watermark on
    schema = "acct long, ts long, amount double"
    pair = Pattern.begin("small").where(col("amount") < 5).next("big").where(col("amount") > 500)
    df = spark.createDataFrame([tuple(e.values()) for e in events], schema).coalesce(1)
    want = [(base + 1, [base + 1, base + 1])]
    rows = match_batch(df, pair, key="acct", time="ts", partitions=1).collect()
    assert [(r.acct, [e.acct for e in r.small + r.big]) for r in rows] == want
    rows = match_batch(df, [Rule("r", 1, "acct", pair)], time="ts", partitions=1).collect()
    assert [(r.acct, [e.acct for e in r.stages["small"] + r.stages["big"]]) for r in rows] == want
    source = tmp_path / "src"
    source.mkdir()
    pq.write_table(pa.Table.from_pylist(events, pa.schema(
        [("acct", pa.int64()), ("ts", pa.int64()), ("amount", pa.float64())])),
        str(source / "p.parquet"))
    stream = spark.readStream.schema(schema).parquet(str(source))
    query = (match_stream(stream, [Rule("r", 1, "acct", pair)], time="ts", watermark="1 second",
                          key_groups=1)
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert [(r.acct, [e.acct for e in r.stages["small"] + r.stages["big"]]) for r in rows] == want
