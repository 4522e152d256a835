"""Property tests of the event-time runtime: out-of-order input within the allowed
lateness gives the sorted input's matches, and nothing is ever lost.

Streams are random keyed events ``{"id", "k", "v", "ts"}`` with non-decreasing
timestamps (ties allowed).  The arrival order is a random bounded shuffle:
each event moves at most ``D`` positions, and events with equal timestamps
keep their relative order (ties are matched in arrival order, so reordering
them would legitimately change the result).  The watermark strategy's delay
is at least the shuffle's real out-of-orderness.

Every run goes through ``Job(IterableSource(...)).with_watermarks(
WatermarkStrategy.for_bounded_out_of_orderness(delay))`` with small source
batches, so watermarks advance (and would expose late events) during the run.
Patterns use lambdas on the reference engine and ``cep.col`` expressions on
the numba engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep import Pattern, SkipStrategy, col
from cep.runtime import IterableSource, Job, ListSink, WatermarkStrategy
from tests.support import taken

ENGINES = pytest.mark.parametrize("engine", ["reference", "numba"])
PROPERTY = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def is_v(engine: str, value: int) -> Any:
    if engine == "reference":
        return lambda e, value=value: e["v"] == value
    return col("v") == value


# A few fixed patterns with windows: followed_by, next, trailing negation, a loop
# with a skip strategy, and a three-stage followed_by_any.
PATTERNS: dict[str, Callable[[str], Pattern]] = {
    "followed_by": lambda e: Pattern.begin("a").where(is_v(e, 0))
    .followed_by("b").where(is_v(e, 1)).within(8),
    "next": lambda e: Pattern.begin("a").where(is_v(e, 0))
    .next("b").where(is_v(e, 1)).within(5),
    "not_followed_by": lambda e: Pattern.begin("a").where(is_v(e, 0))
    .not_followed_by("b").where(is_v(e, 1)).within(6),
    "one_or_more_skip_past_last": lambda e: Pattern.begin(
        "a", skip=SkipStrategy.skip_past_last_event())
    .where(is_v(e, 0)).one_or_more().followed_by("b").where(is_v(e, 2)).within(10),
    "followed_by_any": lambda e: Pattern.begin("a").where(is_v(e, 0))
    .followed_by_any("b").where(is_v(e, 1)).followed_by("c").where(is_v(e, 2)).within(12),
}


# ------------------------------------------------------------------ strategies
@st.composite
def keyed_streams(draw: Any) -> list[dict[str, Any]]:
    """Events in timestamp order; gaps of 0 make equal timestamps."""
    items = draw(st.lists(
        st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 2), st.integers(0, 3)),
        min_size=2, max_size=40))
    ts, rows = 1, []
    for i, (k, v, gap) in enumerate(items):
        ts += gap
        rows.append({"id": i, "k": k, "v": v, "ts": ts})
    return rows


def bounded_shuffle(rows: list[dict[str, Any]], offsets: list[int]) -> list[dict[str, Any]]:
    """Each event moves by at most max(offsets) positions; equal timestamps keep their order."""
    order = sorted(range(len(rows)), key=lambda i: (i + offsets[i], i))
    shuffled = [rows[i] for i in order]
    # give the slots of each equal-timestamp group back to its members in stream order
    slots: dict[int, list[int]] = {}
    for pos, e in enumerate(shuffled):
        slots.setdefault(e["ts"], []).append(pos)
    out = list(shuffled)
    for ts, positions in slots.items():
        members = [e for e in rows if e["ts"] == ts]
        for pos, e in zip(positions, members, strict=True):
            out[pos] = e
    return out


def out_of_orderness(rows: list[dict[str, Any]]) -> int:
    """How far behind the largest timestamp seen so far an event arrives, at worst."""
    worst, high = 0, None
    for e in rows:
        if high is not None:
            worst = max(worst, high - e["ts"])
        high = e["ts"] if high is None else max(high, e["ts"])
    return worst


@st.composite
def shuffled_streams(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(stream in timestamp order, bounded shuffle of it, a delay covering the shuffle)."""
    rows = draw(keyed_streams())
    d = draw(st.integers(1, 6))
    rnd = draw(st.randoms(use_true_random=False))
    offsets = [rnd.randint(0, d) for _ in rows]
    arrived = bounded_shuffle(rows, offsets)
    delay = out_of_orderness(arrived) + draw(st.integers(0, 3))
    return rows, arrived, delay


# --------------------------------------------------------------------- running
def shape(r: dict[str, Any]) -> tuple[Any, ...]:
    stages = tuple((stage, tuple(e["id"] for e in evs)) for stage, evs in taken(r).items())
    return (stages, r["start"], r["end"], r["timeout_at"])


def per_key(records: list[dict[str, Any]]) -> dict[Any, list[tuple[Any, ...]]]:
    out: dict[Any, list[tuple[Any, ...]]] = {}
    for r in records:
        out.setdefault(r["k"], []).append(shape(r))
    return {k: sorted(v) for k, v in out.items()}


def run_job(rows: list[dict[str, Any]], pattern: Pattern, engine: str, delay: int,
            batch_size: int) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    matches, timeouts, late, dead = ListSink(), ListSink(), ListSink(), ListSink()
    summary = (
        Job(IterableSource(rows, batch_size=batch_size))
        .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(delay))
        .key_by("k").timestamps("ts").match(pattern, engine=engine)
        .sink(matches).sink_timeouts(timeouts).sink_late(late).sink_dead_letters(dead)
        .run()
    )
    assert summary.engine == engine
    # nothing is lost: every event is processed, late or dead, and the sinks agree
    assert summary.events_in == len(rows)
    assert summary.events_in == summary.processed + summary.late + summary.dead_letters
    assert (summary.late, summary.dead_letters) == (len(late.records), len(dead.records))
    assert (summary.matches, summary.timeouts) == (len(matches.records), len(timeouts.records))
    result = {"matches": per_key(matches.records), "timeouts": per_key(timeouts.records)}
    return summary, result, late.records


def bounded_oracle(rows: list[dict[str, Any]], pattern: Pattern, engine: str) -> dict[str, Any]:
    """cep.match over the whole (bounded) input: the runtime must agree with it."""
    found, expired = cep.match(rows, pattern, key="k", time="ts", timeouts=True, engine=engine)

    def records(ms: list[Any]) -> list[dict[str, Any]]:
        return [{"k": m.key, "kind": "timeout" if isinstance(m, cep.Timeout) else "match",
                 "start": m.start, "end": m.end,
                 "timeout_at": m.timestamp if isinstance(m, cep.Timeout) else None,
                 **dict(m.items())}
                for m in ms]

    return {"matches": per_key(records(found)), "timeouts": per_key(records(expired))}


# -------------------------------------------------------------------- properties
@ENGINES
@pytest.mark.parametrize("name", sorted(PATTERNS))
@PROPERTY
@given(case=shuffled_streams(), batch_size=st.integers(1, 3))
def test_bounded_shuffle_gives_the_sorted_streams_matches_and_timeouts(
    engine: str, name: str, case: Any, batch_size: int
) -> None:
    """Property: if every event is at most ``delay`` behind the largest timestamp seen
    before it, a Job with for_bounded_out_of_orderness(delay) finds exactly the matches
    and timeouts (per key, sorted) of the same events in timestamp order, nothing is
    late, and both equal cep.match over the bounded input."""
    rows, arrived, delay = case
    pattern = PATTERNS[name](engine)
    s_sorted, want, late_sorted = run_job(rows, pattern, engine, delay, batch_size)
    s_shuffled, got, late_shuffled = run_job(arrived, pattern, engine, delay, batch_size)
    assert late_sorted == [] and late_shuffled == []
    assert s_shuffled.processed == s_sorted.processed == len(rows)
    assert got == want
    assert want == bounded_oracle(rows, pattern, engine)


@ENGINES
@pytest.mark.parametrize("name", ["followed_by", "not_followed_by"])
@PROPERTY
@given(case=shuffled_streams(), shortfall=st.integers(1, 6))
def test_too_small_delay_makes_exactly_the_predicted_events_late(
    engine: str, name: str, case: Any, shortfall: int
) -> None:
    """Property: with a delay smaller than the real out-of-orderness (one event per
    source batch, one partition), the late events are exactly those whose timestamp is
    <= (largest timestamp before them) - delay - 1; they are reported, never matched, and
    the matches and timeouts are those of the remaining events in timestamp order."""
    rows, arrived, _ = case
    delay = max(0, out_of_orderness(arrived) - shortfall)
    pattern = PATTERNS[name](engine)
    _, got, late = run_job(arrived, pattern, engine, delay, batch_size=1)

    expected_late, high = [], None
    for e in arrived:
        if high is not None and e["ts"] <= high - delay - 1:
            expected_late.append((e["id"], e["ts"], f"event time {e['ts']} is at or below "
                                  f"the watermark {high - delay - 1}"))
        high = e["ts"] if high is None else max(high, e["ts"])
    assert [(r["event"]["id"], r["start"], r["reason"]) for r in late] == expected_late

    late_ids = {i for i, *_ in expected_late}
    on_time = sorted((e for e in arrived if e["id"] not in late_ids),
                     key=lambda e: (e["ts"], e["id"]))
    assert got == bounded_oracle(on_time, pattern, engine)


@ENGINES
@PROPERTY
@given(case=shuffled_streams(), batch_size=st.integers(1, 3))
def test_partitions_by_key_give_the_single_stream_result(
    engine: str, case: Any, batch_size: int
) -> None:
    """Property: the same shuffled events split into two partitions (one per key, each in
    its arrival order) give the single partition's matches and timeouts: the operator's
    watermark is the minimum over partitions, so an event within its own partition's
    out-of-orderness is never late, whatever the other partition does."""
    rows, arrived, delay = case
    pattern = PATTERNS["followed_by"](engine)
    _, want, _ = run_job(arrived, pattern, engine, delay, batch_size)
    parts = [[e for e in arrived if e["k"] == k] for k in ("x", "y")]
    late, out = ListSink(), ListSink()
    s = (
        Job(IterableSource(*parts, batch_size=batch_size))
        .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(delay))
        .key_by("k").timestamps("ts").match(pattern, engine=engine)
        .sink(out, kinds=("match", "timeout")).sink_late(late).run()
    )
    assert late.records == []
    assert s.events_in == s.processed == len(rows)
    got = {"matches": per_key([r for r in out.records if r["kind"] == "match"]),
           "timeouts": per_key([r for r in out.records if r["kind"] == "timeout"])}
    assert got == want


@PROPERTY
@given(case=shuffled_streams(), bad=st.sets(st.integers(0, 39), max_size=6),
       kind=st.sampled_from(["no_key", "null_ts", "bad_ts", "no_ts"]))
def test_nothing_is_lost_with_malformed_events(case: Any, bad: set[int], kind: str) -> None:
    """Property: with malformed events mixed in, every input is processed, late or dead
    (the Summary adds up), the dead letters are exactly the malformed events with their
    source positions, and the good events give the matches of a run without the bad ones."""
    _, arrived, delay = case
    corrupted = []
    for pos, e in enumerate(arrived):
        if pos in bad:
            e = dict(e)
            if kind == "no_key":
                del e["k"]
            elif kind == "no_ts":
                del e["ts"]
            else:
                e["ts"] = None if kind == "null_ts" else "not-a-time"
        corrupted.append(e)
    bad_positions = sorted(p for p in bad if p < len(arrived))
    pattern = PATTERNS["followed_by"]("numba")
    dead = ListSink()
    out = ListSink()
    s = (
        Job(IterableSource(corrupted, batch_size=2))
        .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(delay))
        .key_by("k").timestamps("ts").match(pattern, engine="numba")
        .sink(out, kinds=("match", "timeout")).sink_dead_letters(dead).run()
    )
    assert s.events_in == len(corrupted) == s.processed + s.late + s.dead_letters
    assert [r["position"] for r in dead.records] == [f"memory-0:{p}" for p in bad_positions]
    good = [e for pos, e in enumerate(arrived) if pos not in bad]
    _, want, _ = run_job(good, pattern, "numba", delay, batch_size=2)
    got = {"matches": per_key([r for r in out.records if r["kind"] == "match"]),
           "timeouts": per_key([r for r in out.records if r["kind"] == "timeout"])}
    assert got == want


def test_bounded_shuffle_helper_keeps_ties_and_bounds() -> None:
    """The shuffle used above moves events at most D positions and keeps tie order."""
    rows = [{"id": i, "ts": t} for i, t in enumerate([1, 2, 2, 2, 3, 5, 5, 8])]
    arrived = bounded_shuffle(rows, [3, 0, 2, 1, 0, 3, 0, 1])
    assert sorted(e["id"] for e in arrived) == list(range(8))
    for ts in (2, 5):
        assert [e["id"] for e in arrived if e["ts"] == ts] == [e["id"] for e in rows
                                                              if e["ts"] == ts]
    assert out_of_orderness([{"ts": t} for t in (5, 3, 9, 1, 10)]) == 8
