"""Every way of running a pattern gives the same output, on both engines.

The same random expression patterns and keyed streams go through each driver:
``cep.match``, one ``cep.Matcher`` per key fed by hand, ``OperatorHarness``, a
``runtime.Job`` and the Spark group function (``GroupRunner``, Spark's call protocol
without Spark), each with the reference and the numba engine.  All ten outputs
must be the same matches and timeouts.  Streams are in time order (lateness has
specs of its own), with ties, and text and number fields that are sometimes null,
also in the first event (a ``Matcher`` on the numba engine once refused that).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cep import (
    MalformedPatternError,
    Matcher,
    Pattern,
    Timeout,
    TooManyPartialMatches,
    avg,
    coalesce,
    col,
    last,
    match,
    prev,
)
from cep.durations import MAX_TIMESTAMP
from cep.nfa.compiler import compile_pattern
from cep.runtime import IterableSource, Job, ListSink, WatermarkStrategy
from cep.runtime.spark.runner import ORDER_ROW, TS, GroupRunner, Spec
from cep.runtime.testing import OperatorHarness
from tests.strategies import expressions, patterns
from tests.support import taken

ENGINES = ("reference", "numba")
MATRIX = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
MATRIX_SLOW = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))

text_conditions = st.sampled_from([
    col("s") == "x", col("s").isin(["x", "y"]), col("s").is_null() | (col("v") == 1),
    (col("s") != "y") & (col("v") >= 1),
    # text functions (derived columns on the numba engine), also of stage references
    col("s").lower().startswith("x"), coalesce(col("s"), "y").contains("y") & (col("v") >= 1),
    last("s0", "s").lower() == col("s").lower(), prev("s").lower().contains("x") | (col("v") == 0)])
conditions = st.one_of(expressions, text_conditions)

Row = dict[str, Any]
Found = list[tuple[Any, ...]]


@st.composite
def keyed_streams(draw: Any) -> list[Row]:
    n = draw(st.integers(0, 16))
    keys = draw(st.sampled_from([("a",), ("a", "b"), ("a", "b", "c")]))
    rows, ts = [], 1
    for i in range(n):
        ts += draw(st.integers(0, 3))
        rows.append({"id": i, "k": draw(st.sampled_from(keys)),
                     "v": draw(st.one_of(st.integers(0, 3), st.just(None))) if i % 5 else
                     draw(st.integers(0, 3)),
                     "s": None if i == 0 else draw(st.sampled_from(["x", "y", "X", None])),
                     "ts": ts})
    return rows


def summary(kind: str, m: Any, key: Any) -> tuple[Any, ...]:
    stages = tuple((s, tuple(e["id"] for e in evs)) for s, evs in m.items() if evs)
    return (kind, key, m.start, m.end, stages)


def of_matches(found: list[Any]) -> Found:
    return sorted(summary("timeout" if isinstance(m, Timeout) else "match", m, m.key)
                  for m in found)


def via_match(p: Pattern, rows: list[Row], engine: str) -> Found:
    matches, timeouts = match(rows, p, key="k", time="ts", timeouts=True, engine=engine)
    return of_matches([*matches, *timeouts])


def via_matcher(p: Pattern, rows: list[Row], engine: str) -> Found:
    found: list[Any] = []
    by_key: dict[str, list[Row]] = {}
    for r in rows:
        by_key.setdefault(r["k"], []).append(r)
    for key, events in by_key.items():
        m = Matcher(p, engine=engine)
        for e in events:  # in time order already
            found += [x._with_key(key) for x in m.process(e, e["ts"])]
        done, expired = m.advance_time(MAX_TIMESTAMP)
        found += [x._with_key(key) for x in [*done, *expired]]
    return of_matches(found)


def via_matchers_at_job_watermarks(p: Pattern, rows: list[Row], batch: int) -> Found:
    """The reference engine fed the way a Job over ``rows`` in batches of ``batch`` feeds
    it: after each batch the watermark is the newest time so far - 1 (no out-of-orderness);
    the events at or below it are matched in (time, arrival) order, then every key's
    time moves to the watermark; at the end, to the end of time.  Which watermarks come
    decides some outputs (FlinkCEP's too): a watermark that expires earlier partial
    matches lets a held match be emitted and its skip strategy prune a partial match
    that, with time moving on in one step, would have timed out first."""
    matchers: dict[str, Matcher] = {}
    found: list[Any] = []
    waiting: list[Row] = []

    def release(watermark: int) -> None:
        nonlocal waiting
        ready = sorted((r for r in waiting if r["ts"] <= watermark), key=lambda r: r["ts"])
        waiting = [r for r in waiting if r["ts"] > watermark]
        for r in ready:
            m = matchers.setdefault(r["k"], Matcher(p, engine="reference"))
            found.extend(x._with_key(r["k"]) for x in m.process(r, r["ts"]))
        for key, m in matchers.items():
            done, expired = m.advance_time(watermark)
            found.extend(x._with_key(key) for x in [*done, *expired])

    for lo in range(0, len(rows), batch):
        waiting += rows[lo:lo + batch]
        release(max(r["ts"] for r in rows[:lo + batch]) - 1)  # the newest time so far - 1
    release(MAX_TIMESTAMP)
    return of_matches(found)


def via_harness(p: Pattern, rows: list[Row], engine: str) -> Found:
    h = OperatorHarness(p, engine, key="k", time="ts", timeouts=True)
    for r in rows:
        h.process_element(r)
    h.finish()
    assert not h.late and not h.dead_letters
    return of_matches([*h.matches, *h.timeouts])


def via_job(p: Pattern, rows: list[Row], engine: str, batch: int) -> Found:
    out = ListSink()
    summary_ = (Job(IterableSource(rows, batch_size=batch))
                .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(0))
                .key_by("k").timestamps("ts").match(p, engine=engine)
                .sink(out, kinds=("match", "timeout")).run())
    assert summary_.late == 0 and summary_.dead_letters == 0
    return sorted((r["kind"], r["k"], r["start"], r["end"],
                   tuple((s, tuple(e["id"] for e in evs)) for s, evs in taken(r).items()))
                  for r in out.records)


def via_spark_group(p: Pattern, rows: list[Row], engine: str) -> Found:
    spec = Spec(pattern=p.to_json(), key=("k",), columns=("id", "k", "v", "s", "ts"),
                kinds={"id": "numeric", "k": "string", "v": "numeric", "s": "string",
                       "ts": "numeric"},
                time_is_timestamp=False, engine=engine, timeouts=True, time="ts")
    runner = GroupRunner(spec)
    found: Found = []
    for key in dict.fromkeys(r["k"] for r in rows):
        frame = pd.DataFrame([{**r, TS: r["ts"], ORDER_ROW: i}
                              for i, r in enumerate(rows) if r["k"] == key])
        out = runner.run(None, [frame], None, final=True).output
        for row in out.to_dict("records"):
            stages = tuple((s, tuple(e["id"] for e in row[s])) for s in runner.stages
                           if len(row[s]))
            found.append((row["kind"], row["k"], row["start"], row["end"], stages))
    return sorted(found)


@MATRIX
@given(pattern=patterns(conditions=conditions), rows=keyed_streams(),
       batch=st.integers(1, 7))
def test_every_driver_and_engine_gives_the_same_output(pattern: Pattern, rows: list[Row],
                                                        batch: int) -> None:
    same_everywhere(pattern, rows, batch)


@pytest.mark.slow
@MATRIX_SLOW
@given(pattern=patterns(conditions=conditions), rows=keyed_streams(),
       batch=st.integers(1, 7))
def test_every_driver_and_engine_gives_the_same_output_at_length(
        pattern: Pattern, rows: list[Row], batch: int) -> None:
    same_everywhere(pattern, rows, batch)


def test_a_text_field_null_in_the_first_event_and_only_tested_for_null() -> None:
    """Found by the matrix: the numba Matcher typed ``s`` from the pattern alone (no type:
    numeric) and refused the text that came later; a field only tested for null needs no
    type."""
    p = Pattern.begin("s0").where(col("s").is_null() | (col("v") == 1))
    rows = [{"id": 0, "k": "a", "v": 0, "s": None, "ts": 1},
            {"id": 1, "k": "a", "v": None, "s": "x", "ts": 1}]
    same_everywhere(p, rows, 1)
    assert via_match(p, rows, "numba") == [("match", "a", 1, 1, (("s0", (0,)),))]


def same_everywhere(pattern: Pattern, rows: list[Row], batch: int) -> None:
    try:
        compile_pattern(pattern)
    except MalformedPatternError:
        reject()  # the strategy can draw windows the compiler refuses
    expected = outcome(lambda: via_match(pattern, rows, "reference"))
    for engine in ENGINES:
        outputs = {
            "cep.match": outcome(lambda: via_match(pattern, rows, engine)),  # noqa: B023
            "Matcher": outcome(lambda: via_matcher(pattern, rows, engine)),  # noqa: B023
            "OperatorHarness": outcome(lambda: via_harness(pattern, rows, engine)),  # noqa: B023
            "Job": outcome(lambda: via_job(pattern, rows, engine, batch)),  # noqa: B023
            "Spark group": outcome(lambda: via_spark_group(pattern, rows, engine)),  # noqa: B023
        }
        for driver, found in outputs.items():
            want = (outcome(lambda: via_matchers_at_job_watermarks(pattern, rows, batch))
                    if driver == "Job" else expected)
            assert found == want, f"{driver} on the {engine} engine"


def outcome(run: Any) -> Any:
    """What a driver gives: its matches, or, when a key's partial matches go over the
    cap, that error and the count it names (every driver and engine must fail alike,
    never answer with fewer matches)."""
    try:
        return run()
    except TooManyPartialMatches as err:
        return ("too many partial matches", str(err).split(" holds ")[1].split(" ")[0])


def test_a_pattern_that_branches_past_the_cap_fails_alike_everywhere() -> None:
    """Found by the matrix at length (make test-slow): one key's fourteen events at one
    time, a looping stage of any combination after another looping stage: 15,644
    partial matches, over the default cap of 10,000.  Every driver on every engine
    refuses it with the same count."""
    p = (Pattern.begin("s0").where(col("v") == 0).one_or_more()
         .next("s1").where(avg("s0", "v") >= 0.0).one_or_more().allow_combinations()
         .next("s2").where(col("v") == 0))
    values = [0, 0, 0, 0, 0, 0, None, 0, None, None, 0, 0, None, 0]
    rows = [{"id": i, "k": "a", "v": v, "s": None if i == 0 else "x", "ts": 1}
            for i, v in enumerate(values)]
    assert outcome(lambda: via_match(p, rows, "reference")) == (
        "too many partial matches", "15644")
    same_everywhere(p, rows, 1)


def test_a_watermark_between_two_timeouts_lets_a_skip_prune_the_later_one() -> None:
    """Found by the matrix at length (make test-slow): ``followed_by_any`` keeps s0 = e3
    alive after its match (e3, e4); with time moving from 2 to 4 in one step, e3's gap
    window expires with the earlier partial matches and e3 times out; a Job's watermark
    of 3 in between expires only the earlier ones, which releases the held match, and
    skip_to_next then prunes e3 before its window ends - as FlinkCEP's operator does on
    the same watermarks.  Both engines agree in both cases."""
    from cep import SkipStrategy
    from cep.pattern import WithinType

    p = (Pattern.begin("s0", skip=SkipStrategy.skip_to_next()).where(col("v") == 0)
         .followed_by_any("s1").where(last("s0", "s").lower() == col("s").lower())
         .within(2, WithinType.PREVIOUS_AND_CURRENT))
    rows = [{"id": 0, "k": "a", "v": 0, "s": None, "ts": 1},
            {"id": 1, "k": "a", "v": 0, "s": "x", "ts": 1},
            {"id": 2, "k": "a", "v": None, "s": "x", "ts": 1},
            {"id": 3, "k": "a", "v": 0, "s": "x", "ts": 2},
            {"id": 4, "k": "a", "v": 0, "s": "x", "ts": 2},
            {"id": 5, "k": "a", "v": 0, "s": "x", "ts": 4}]
    e3_times_out = ("timeout", "a", 2, 2, (("s0", (3,)),))
    for engine in ENGINES:
        assert e3_times_out in via_match(p, rows, engine)
        assert e3_times_out not in via_job(p, rows, engine, 1)
    same_everywhere(p, rows, 1)
