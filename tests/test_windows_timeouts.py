"""Time windows (``within``) and timed-out partial matches, specified by FlinkCEP's tests.

Scenarios are ported from ``NFAITCase``, ``NFATest`` and
``CEPITCase`` (flink-cep); the expected matches, timed-out partial matches and
timeout timestamps are the ones those tests assert.

Feeding follows Flink's ``NFATestHarness``: for every event, time is first
advanced to the event's timestamp (which prunes and reports timed-out partial
matches, and releases pending matches), then the event is processed.  Where a
Flink test runs the CEP operator in event time, the operator sorts buffered
events by timestamp and finally advances to the end-of-input watermark; we
feed the events in timestamp order and advance to ``END_OF_INPUT`` at the end.

The rules being specified:

* ``within(w)`` / ``WithinType.FIRST_AND_LAST``: a partial match is dropped
  (reported as a :class:`cep.Timeout`) as soon as time reaches
  ``first_event_timestamp + w``.  The window is half-open: an event exactly
  ``w`` after the first one no longer fits.  The timeout's timestamp is
  ``first_event_timestamp + w``.
* ``within(w, WithinType.PREVIOUS_AND_CURRENT)`` bounds the gap between the
  previous taken event and the event taken by the stage ``within`` was called
  on.  A partial match waiting for that stage is dropped once time reaches
  ``previous_event_timestamp + w``, which is also the timeout's timestamp.
  Partial matches waiting for any *other* stage are not affected (in the
  tests below, partial matches holding only "start" never time out).
* A pattern ending in ``not_followed_by`` needs a window; its matches are
  released by time, when the window has passed without the forbidden event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from support import Event, feed, run, same_matches

from cep import Matcher, Pattern, SkipStrategy, Timeout, WithinType, col, match

# Far beyond every window used here; Flink's end-of-input watermark is Long.MAX_VALUE.
END_OF_INPUT = 10**9

BOTH_WITHIN_TYPES = pytest.mark.parametrize(
    "within_type",
    [WithinType.FIRST_AND_LAST, WithinType.PREVIOUS_AND_CURRENT],
    ids=["first_and_last", "previous_and_current"],
)


def named(name: str) -> Callable[[Any], bool]:
    return lambda e: e.name == name


def as_dict(m: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """A match or timeout as ``{stage: events}``, leaving out stages that took nothing.

    Flink's maps only hold the stages that took events.
    """
    return {stage: list(events) for stage, events in m.items() if events}


def frozen(m: Mapping[str, Sequence[Any]]) -> frozenset[tuple[str, tuple[Any, ...]]]:
    return frozenset((stage, tuple(events)) for stage, events in as_dict(m).items())


def timeout_set(timeouts: Sequence[Timeout]) -> set[tuple[frozenset, int]]:
    """Timeouts as a set of (match, timestamp), like the ``HashSet`` Flink's tests collect."""
    return {(frozen(t), t.timestamp) for t in timeouts}


# ---------------------------------------------------------------------------
# start -> middle -> end over events with a late "end"  (NFAITCase)
# ---------------------------------------------------------------------------

START1 = Event(1, "start", 1.0)
START2 = Event(2, "start", 1.0)
MIDDLE = Event(3, "middle", 1.0)
FOOBAR = Event(4, "foobar", 1.0)
END5 = Event(5, "end", 1.0)
END6 = Event(6, "end", 1.0)
LATE_END_EVENTS = [(START1, 1), (START2, 2), (MIDDLE, 3), (FOOBAR, 4), (END5, 11), (END6, 13)]


@pytest.mark.parametrize("window", [10, timedelta(milliseconds=10)], ids=["int_ms", "timedelta"])
def test_within_first_and_last_drops_expired_partial_matches(window: int | timedelta) -> None:
    """NFAITCase.testSimplePatternWithTimeWindowNFAWithinFirstAndLast.

    Pattern ``start followedBy middle followedBy end within 10ms``; events
    start1@1 start2@2 middle@3 foobar@4 end@11 end@13.  At 11 the partial
    match started at 1 has expired (11 - 1 = 10 is not < 10); the one started
    at 2 completes.  A window may be given as int milliseconds or timedelta.
    """
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by("middle")
        .where(named("middle"))
        .followed_by("end")
        .where(named("end"))
        .within(window)
    )

    same_matches(feed(pattern, LATE_END_EVENTS), [[START2, MIDDLE, END5]])


def test_within_previous_and_current_bounds_gap_between_events() -> None:
    """NFAITCase.testSimplePatternWithTimeWindowNFAWithinPreviousAndCurrent.

    Same pattern and events with ``within 9ms, PREVIOUS_AND_CURRENT``: only the
    gap middle@3 -> end@11 (8ms) is bounded, so both starts complete, although
    the match from start1 spans 10ms.
    """
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by("middle")
        .where(named("middle"))
        .followed_by("end")
        .where(named("end"))
        .within(9, WithinType.PREVIOUS_AND_CURRENT)
    )

    same_matches(
        feed(pattern, LATE_END_EVENTS),
        [[START1, MIDDLE, END5], [START2, MIDDLE, END5]],
    )


def _any_start_middle_end(within_type: WithinType) -> Pattern:
    return (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by_any("middle")
        .where(named("middle"))
        .followed_by_any("end")
        .where(named("end"))
        .within(10, within_type)
    )


def test_timeouts_first_and_last() -> None:
    """NFAITCase.testSimplePatternWithTimeoutHandlingWithinFirstAndLast.

    Pattern ``start followedByAny middle followedByAny end within 10ms``, same
    events.  One match (start2 middle end@11).  Every partial match times out
    at its first event's timestamp + 10: {start1, middle} and {start1} at 11,
    {start2, middle} and {start2} at 12 (reported when time reaches 13).
    """
    matches, timeouts = run(_any_start_middle_end(WithinType.FIRST_AND_LAST), LATE_END_EVENTS)

    assert len(matches) == 1
    assert timeout_set(timeouts) == {
        (frozen({"start": [START1], "middle": [MIDDLE]}), 11),
        (frozen({"start": [START2], "middle": [MIDDLE]}), 12),
        (frozen({"start": [START1]}), 11),
        (frozen({"start": [START2]}), 12),
    }


def test_timeouts_previous_and_current() -> None:
    """NFAITCase.testSimplePatternWithTimeoutHandlingWithinPreviousAndCurrent.

    Same pattern with ``within 10ms, PREVIOUS_AND_CURRENT`` (declared on "end"):
    two matches (both starts with middle and end@11).  Partial matches waiting
    for "end" time out at middle@3 + 10 = 13; partial matches holding only
    "start" wait for "middle", which has no window, and never time out.
    """
    matches, timeouts = run(_any_start_middle_end(WithinType.PREVIOUS_AND_CURRENT), LATE_END_EVENTS)

    assert len(matches) == 2
    assert timeout_set(timeouts) == {
        (frozen({"start": [START1], "middle": [MIDDLE]}), 13),
        (frozen({"start": [START2], "middle": [MIDDLE]}), 13),
    }


# ---------------------------------------------------------------------------
# Window borders  (NFATest; a start -> followedByAny end NFA with a 2ms window)
# ---------------------------------------------------------------------------


def _start_any_end_within_2ms() -> Pattern:
    return (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by_any("end")
        .where(named("end"))
        .within(2)
    )


def test_window_pruning() -> None:
    """NFATest.testTimeoutWindowPruning.

    Events start1@1 bar@2 start3@3 end4@4, window 2ms: the partial match from
    start1 is gone by 4; only (start3, end4) matches.
    """
    start1, bar, start3, end4 = (
        Event(1, "start", 1.0),
        Event(2, "bar", 2.0),
        Event(3, "start", 3.0),
        Event(4, "end", 4.0),
    )
    matches, _ = run(_start_any_end_within_2ms(), [(start1, 1), (bar, 2), (start3, 3), (end4, 4)])

    assert {frozen(m) for m in matches} == {frozen({"start": [start3], "end": [end4]})}


def test_window_right_border_is_exclusive() -> None:
    """NFATest.testWindowBorders.

    Events start@1 end@3, window 2ms: events exactly one window apart do not
    match (the window's right side is exclusive).
    """
    matches, _ = run(
        _start_any_end_within_2ms(), [(Event(1, "start", 1.0), 1), (Event(2, "end", 2.0), 3)]
    )

    assert matches == []


def test_pruning_and_matching_share_window_borders() -> None:
    """NFATest.testTimeoutWindowPruningWindowBorders.

    Events start1@1 start2@2 foobar@3 end4@3, window 2ms: at 3 the partial match
    from start1 is pruned (left side inclusive, right side exclusive), the one
    from start2 matches end4.
    """
    start1, start2 = Event(1, "start", 1.0), Event(2, "start", 2.0)
    foobar, end4 = Event(3, "foobar", 3.0), Event(4, "end", 4.0)
    matches, _ = run(
        _start_any_end_within_2ms(), [(start1, 1), (start2, 2), (foobar, 3), (end4, 3)]
    )

    assert {frozen(m) for m in matches} == {frozen({"start": [start2], "end": [end4]})}


# ---------------------------------------------------------------------------
# notFollowedBy at the end of a pattern: matches released by time
# ---------------------------------------------------------------------------


@BOTH_WITHIN_TYPES
def test_pending_not_followed_by_matches_are_released_when_time_advances(
    within_type: WithinType,
) -> None:
    """NFAITCase.testPendingStateMatchesWithinFirstAndLast / ...WithinPreviousAndCurrent.

    Pattern ``start notFollowedBy middle within 5ms``; events start1@1 middle2@4
    start3@5 start4@11 middle5@18.  start1 is killed by middle2.  start3 is
    released when time reaches 11, start4 when it reaches 18 (middle5 comes too
    late).  Flink collects these from advancing time, before each event.
    """
    events = [
        (Event(1, "start", 1.0), 1),
        (Event(2, "middle", 1.0), 4),
        (Event(3, "start", 1.0), 5),
        (Event(4, "start", 1.0), 11),
        (Event(5, "middle", 1.0), 18),
    ]
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .not_followed_by("middle")
        .where(named("middle"))
        .within(5, within_type)
    )
    matcher = Matcher(pattern, engine="reference")
    released = []
    for event, ts in events:
        done, _ = matcher.advance_time(ts)
        released.extend(done)
        matcher.process(event, ts)

    assert {frozen(m) for m in released} == {
        frozen({"start": [Event(3, "start", 1.0)]}),
        frozen({"start": [Event(4, "start", 1.0)]}),
    }


# ---------------------------------------------------------------------------
# Operator-level scenarios (CEPITCase), fed in timestamp order
# ---------------------------------------------------------------------------

OP_START1 = Event(1, "start", 1.0)
OP_START2 = Event(1, "start", 2.0)
OP_MIDDLE = Event(1, "middle", 2.0)
OP_END = Event(1, "end", 2.0)
# Flink receives start1@1 middle@5 start2@4 end@6 and processes them sorted by timestamp.
OP_EVENTS = [(OP_START1, 1), (OP_START2, 4), (OP_MIDDLE, 5), (OP_END, 6)]


def _prices(m: Mapping[str, Sequence[Event]]) -> tuple[float, float, float]:
    return (m["start"][0].price, m["middle"][0].price, m["end"][0].price)


def test_event_time_timeouts_first_and_last() -> None:
    """CEPITCase.testTimeoutHandlingWithinFirstAndLast.

    Pattern ``start followedByAny middle followedByAny end within 3ms``.  The
    partial match from start1 times out before middle@5; start2 completes
    (2.0, 2.0, 2.0); its leftovers {start2, middle} and {start2} time out at the
    end of input.  Timeouts are identified by their start price, as in Flink.
    """
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by_any("middle")
        .where(named("middle"))
        .followed_by_any("end")
        .where(named("end"))
        .within(3)
    )

    matches, timeouts = run(pattern, OP_EVENTS, final_time=END_OF_INPUT)

    assert sorted(_prices(m) for m in matches) == [(2.0, 2.0, 2.0)]
    assert sorted(t["start"][0].price for t in timeouts) == [1.0, 2.0, 2.0]


def test_event_time_timeouts_previous_and_current() -> None:
    """CEPITCase.testTimeoutHandlingWithinPreviousAndCurrent.

    Same pattern with ``within 3ms, PREVIOUS_AND_CURRENT`` (declared on "end"):
    middle@5 -> end@6 is within 3ms for both starts, so both complete; the
    leftovers {start1, middle} and {start2, middle} time out at the end of
    input, while {start1} and {start2} (waiting for "middle") never do.
    """
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by_any("middle")
        .where(named("middle"))
        .followed_by_any("end")
        .where(named("end"))
        .within(3, WithinType.PREVIOUS_AND_CURRENT)
    )

    matches, timeouts = run(pattern, OP_EVENTS, final_time=END_OF_INPUT)

    assert sorted(_prices(m) for m in matches) == [(1.0, 2.0, 2.0), (2.0, 2.0, 2.0)]
    assert sorted(t["start"][0].price for t in timeouts) == [1.0, 2.0]


@BOTH_WITHIN_TYPES
def test_window_of_one_day_keeps_close_events(within_type: WithinType) -> None:
    """CEPITCase.testProcessingTimeWithinBetweenFirstAndLast / ...PreviousAndCurrent.

    Pattern ``start followedByAny end within 1 day`` without conditions over the
    integers 1, 2: the single match is (1, 2), whose sum is 3.
    """
    pattern = Pattern.begin("start").followed_by_any("end").within(timedelta(days=1), within_type)

    matches, _ = run(pattern, [(1, 1), (2, 2)])

    assert [m["start"][0] + m["end"][0] for m in matches] == [3]


def test_timed_out_partial_match_releases_held_back_completed_match() -> None:
    """CEPITCase.testPartialMatchTimeoutOutputCompletedMatch.

    Pattern ``start+ (consecutive, greedy) followedBy middle within 100ms`` with
    SKIP_PAST_LAST_EVENT, where "middle" must be named "middle" when more than
    two starts were taken and "end" otherwise.  Events start1..start4 at 0..3,
    end5@4.  (start3 start4 | end5) completes but is held back behind the
    earlier partial matches (start1.. / start2..), which can never complete;
    when they time out it is released, and the skip strategy discards
    (start4 | end5).  Only "3,5" (first start id, middle id) is reported.
    """

    def middle_condition(event: Event, ctx) -> bool:
        taken = sum(1 for _ in ctx.events("start"))
        return event.name == ("middle" if taken > 2 else "end")

    pattern = (
        Pattern.begin("start", skip=SkipStrategy.skip_past_last_event())
        .where(named("start"))
        .one_or_more()
        .consecutive()
        .greedy()
        .followed_by("middle")
        .where(middle_condition)
        .within(100)
    )
    events = [(Event(i, "start", float(i)), i - 1) for i in range(1, 5)] + [
        (Event(5, "end", 5.0), 4)
    ]

    matches, _ = run(pattern, events, final_time=END_OF_INPUT)

    assert sorted(f"{m['start'][0].id},{m['middle'][0].id}" for m in matches) == ["3,5"]


# ------------------------------------------- loop windows (FlinkCEP's windowTime)
def _loop_ids(pattern: Pattern, spec: list[tuple[str, int]]) -> list[list[int]]:
    rows = [{"id": i, "n": n, "ts": t} for i, (n, t) in enumerate(spec)]
    got = {e: [[r["id"] for r in m.events()] for m in match(rows, pattern, time="ts", engine=e)]
           for e in ("reference", "numba")}
    assert got["reference"] == got["numba"]
    return got["numba"]


def test_times_window_bounds_the_gaps_into_the_unrolled_states_as_flink_does() -> None:
    """``s, a.times(3, window=10), b``: NFA states a:1 and a:0 carry the window.

    | events (n@ts)               | match |
    | s@0 a@1 a@5 a@16 b@17       | yes: only the third a may come 11 after the second |
    | s@0 a@1 a@12 a@13 b@14      | no: the second a is 11 after the first |
    | s@0 a@20 a@25 a@28 b@30     | no: the first a is 20 after s |
    """
    p = (Pattern.begin("s").where(col("n") == "s")
         .followed_by("a").where(col("n") == "a").times(3, window=10)
         .followed_by("b").where(col("n") == "b"))
    assert _loop_ids(p, [("s", 0), ("a", 1), ("a", 5), ("a", 16), ("b", 17)]) == [[0, 1, 2, 3, 4]]
    assert _loop_ids(p, [("s", 0), ("a", 1), ("a", 12), ("a", 13), ("b", 14)]) == []
    assert _loop_ids(p, [("s", 0), ("a", 20), ("a", 25), ("a", 28), ("b", 30)]) == []


def test_one_or_more_window_bounds_the_first_event_of_the_loop_as_flink_does() -> None:
    """``s, a.one_or_more(window=10), b``: only state a:1 carries the window."""
    p = (Pattern.begin("s").where(col("n") == "s")
         .followed_by("a").where(col("n") == "a").one_or_more(window=10)
         .followed_by("b").where(col("n") == "b"))
    assert _loop_ids(p, [("s", 0), ("a", 1), ("a", 12), ("a", 13), ("b", 14)]) == [
        [0, 1, 2, 3, 4], [0, 1, 4], [0, 1, 2, 4]
    ]
    assert _loop_ids(p, [("s", 0), ("a", 20), ("b", 21)]) == []
