"""Iterative conditions: ``f(event, ctx)`` with ``ctx.events(stage)`` / ``ctx.timestamp``.

Ported from FlinkCEP's ``IterativeConditionsITCase`` (plus one ``SameElementITCase``
scenario and ``NFAIterativeConditionTimeContextTest``); the Flink test method is
named in each docstring.  Results are compared order-insensitively like Flink's
``comparePatterns``.

Rule: an iterative condition is evaluated per partial match.  ``ctx.events(name)``
returns the events *that partial match* has already taken for stage ``name``
(the event being tested is not included, even when ``name`` is the current
stage); different branches therefore see different histories.
``ctx.timestamp`` is the timestamp of the event being tested.
"""

from __future__ import annotations

import pytest
from support import Event, SubEvent, feed, run, same_matches

from cep import Pattern


def named(name: str):
    return lambda e: e.name == name


IS_START = named("start")
IS_END = named("end")

S1 = Event(40, "start", 1.0)
S2 = Event(40, "start", 2.0)
S3 = Event(40, "start", 3.0)
S4 = Event(40, "start", 4.0)
M1 = SubEvent(41, "foo1", 1.0, 10)
M2 = SubEvent(42, "foo2", 2.0, 10)
M3 = SubEvent(43, "foo3", 3.0, 10)
M4 = SubEvent(43, "foo4", 1.0, 10)
NEXT_ONE = Event(44, "next-one", 1.0)
END = Event(46, "end", 1.0)


def prices(events) -> float:
    return sum(e.price for e in events)


# --------------------------------------------------------------------------- loop over its own history


def middle_sum_below_5(event, ctx) -> bool:
    """Flink's ``MySubeventIterCondition``: a ``foo*`` SubEvent whose price, added to
    the prices already taken by ``middle``, stays below 5."""
    if not event.name.startswith("foo"):
        return False
    return prices(ctx.events("middle")) + event.price < 5.0


_BRANCHING_EVENTS = [
    (S1, 1),
    (M1, 2),
    (M2, 3),
    (S2, 4),
    (M3, 5),
    (M4, 5),
    (NEXT_ONE, 6),
    (END, 8),
]


@pytest.mark.parametrize(
    ("combinations", "expected"),
    [
        pytest.param(
            False,
            [
                [S1, M1, M2, M4, END],
                [S1, M1, M2, END],
                [S1, M1, END],
                [S2, M3, M4, END],
                [S2, M3, END],
            ],
            id="testIterativeWithBranchingPatternEager",
        ),
        pytest.param(
            True,
            [
                [S1, M1, M2, M4, END],
                [S1, M1, M2, END],
                [S1, M1, M3, END],
                [S2, M3, M4, END],
                [S1, M1, M4, END],
                [S1, M1, END],
                [S2, M3, END],
            ],
            id="testIterativeWithBranchingPatternCombinations",
        ),
    ],
)
def test_loop_condition_reads_the_loops_own_events(combinations, expected):
    """IterativeConditionsITCase.testIterativeWithBranchingPattern{Eager,Combinations}.

    start(name == start) -fb-> middle(SubEvent, foo*, sum of middle prices < 5){1,}
    -fb-> end(name == end) over s1 m1(1) m2(2) s2 m3(3) m4(1) next-one end.
    For s1 the loop takes m1 (1), m2 (3); m3 would reach 6 and is rejected, m4
    reaches 4 and is taken.  s2's loop takes m3 (3) and m4 (4).  With
    allow_combinations, s1 may also pick {m1, m3} and {m1, m4}.
    """
    loop = (
        Pattern.begin("start")
        .where(IS_START)
        .followed_by("middle")
        .subtype(SubEvent)
        .where(middle_sum_below_5)
        .one_or_more()
    )
    if combinations:
        loop = loop.allow_combinations()
    pattern = loop.followed_by("end").where(IS_END)
    same_matches(feed(pattern, _BRANCHING_EVENTS), expected)


def start_sum_below_5(event, ctx) -> bool:
    """Flink's ``MyEventIterCondition``: a ``start`` whose price, added to the
    prices already taken by ``start``, stays below 5."""
    if event.name != "start":
        return False
    return prices(ctx.events("start")) + event.price < 5.0


@pytest.mark.parametrize(
    ("combinations", "expected"),
    [
        pytest.param(
            False,
            [[S1, S2, END], [S1, END], [S2, END], [S3, END], [END]],
            id="testIterativeWithLoopingStartingEager",
        ),
        pytest.param(
            True,
            [[S1, S2, END], [S1, S3, END], [S1, END], [S2, END], [S3, END], [END]],
            id="testIterativeWithLoopingStartingCombination",
        ),
    ],
)
def test_iterative_condition_on_a_leading_loop(combinations, expected):
    """IterativeConditionsITCase.testIterativeWithLoopingStarting{Eager,Combination}.

    start(name == start, sum of start prices < 5){0,} -fb-> end over
    s1(1) s2(2) s3(3) end.  s1 s2 sums to 3; adding s3 would give 6.  A loop
    that begins the pattern has relaxed inner contiguity by default.
    """
    loop = Pattern.begin("start").where(start_sum_below_5).one_or_more()
    if combinations:
        loop = loop.allow_combinations()
    pattern = loop.optional().followed_by("end").where(IS_END)
    same_matches(feed(pattern, [(S1, 1), (S2, 2), (S3, 3), (END, 4)]), expected)


# --------------------------------------------------------------------------- reading earlier stages


def end_after_start_sum_at_least_2(event, ctx) -> bool:
    return event.name == "end" and prices(ctx.events("start")) >= 2.0


def test_condition_reads_a_previous_stage():
    """IterativeConditionsITCase.testIterativeWithPrevPatternDependency.

    start(name == start){1,} -fb-> end(name == end, sum of start prices >= 2)
    over s1(1) s2(2) end: [s1 s2 end] (sum 3) and [s2 end] (sum 2), not [s1 end].
    """
    pattern = (
        Pattern.begin("start")
        .where(IS_START)
        .one_or_more()
        .followed_by("end")
        .where(end_after_start_sum_at_least_2)
    )
    same_matches(
        feed(pattern, [(S1, 1), (S2, 2), (END, 4)]),
        [[S1, S2, END], [S2, END]],
    )


def test_condition_reads_a_previous_stage_after_branching():
    """IterativeConditionsITCase.testIterativeWithPrevPatternDependencyAfterBranching.

    start(name == start){1,} -any-> middle1(SubEvent, foo*) -any-> end(name == end,
    sum of start prices >= 2) over s1(1) s2(2) m1 s3(3) m2 end.
    """
    pattern = (
        Pattern.begin("start")
        .where(IS_START)
        .one_or_more()
        .followed_by_any("middle1")
        .subtype(SubEvent)
        .where(lambda e: e.name.startswith("foo"))
        .followed_by_any("end")
        .where(end_after_start_sum_at_least_2)
    )
    events = [(S1, 1), (S2, 2), (M1, 4), (S3, 5), (M2, 6), (END, 7)]
    same_matches(
        feed(pattern, events),
        [
            [S1, S2, M1, END],
            [S2, M1, END],
            [S1, S2, M2, END],
            [S1, S2, S3, M2, END],
            [S2, S3, M2, END],
            [S2, M2, END],
            [S3, M2, END],
        ],
    )


def middle2_start_sum_at_most_5(event, ctx) -> bool:
    if event.name != "start":
        return False
    return prices(ctx.events("middle2")) + event.price <= 5.0


def test_a_b_a_c_pattern():
    """IterativeConditionsITCase.testIterativeWithABACPattern.

    start(name == start) -any-> middle1(SubEvent, foo*)
    -fb-> middle2(name == start, sum of middle2 prices <= 5){1,} -fb-> end.
    Events (all @2 except s1@1 and end@4): s1 m1 s2 s3 m2 s4 m3 m4 end, where
    s<k> is priced k.  The same kind of event (start) plays two roles.
    """
    events = [
        (S1, 1),
        (M1, 2),
        (S2, 2),
        (S3, 2),
        (M2, 2),
        (S4, 2),
        (M3, 2),
        (M4, 2),
        (END, 4),
    ]
    pattern = (
        Pattern.begin("start")
        .where(IS_START)
        .followed_by_any("middle1")
        .subtype(SubEvent)
        .where(lambda e: e.name.startswith("foo"))
        .followed_by("middle2")
        .where(middle2_start_sum_at_most_5)
        .one_or_more()
        .followed_by("end")
        .where(IS_END)
    )
    same_matches(
        feed(pattern, events),
        [
            [S1, M1, S2, S3, END],
            [S1, M1, S2, END],
            [S1, M2, S4, END],
            [S2, M2, S4, END],
            [S3, M2, S4, END],
        ],
    )


def test_branches_see_their_own_history_with_equal_events():
    """SameElementITCase.testIterativeConditionWSameElement.

    c -any-> middle(a){0,} allow_combinations -fb-> end(sum of middle prices == 4)
    over c a a' a'' b — three equal a's (price 2) @3, then b.  The ``end``
    condition does not look at the name, so the branch with middle [a a'] ends on
    a'' itself; the branches [a a''] and [a' a''] end on b.  Flink's expected
    matches (value-compared): [c a a' b], [c a a' a''], [c a' a'' b].
    """
    c = Event(40, "c", 1.0)
    m1, m1a, m1b = Event(41, "a", 2.0), Event(41, "a", 2.0), Event(41, "a", 2.0)
    end = Event(44, "b", 5.0)
    pattern = (
        Pattern.begin("start")
        .where(named("c"))
        .followed_by_any("middle")
        .where(named("a"))
        .one_or_more()
        .optional()
        .allow_combinations()
        .followed_by("end")
        .where(lambda _e, ctx: prices(ctx.events("middle")) == 4.0)
    )
    same_matches(
        feed(pattern, [(c, 1), (m1, 3), (m1a, 3), (m1b, 3), (end, 7)]),
        [[c, m1, m1a, end], [c, m1, m1a, m1b], [c, m1a, m1b, end]],
    )


# --------------------------------------------------------------------------- timestamp


def test_condition_sees_the_event_timestamp():
    """NFAIterativeConditionTimeContextTest.testEventTimestamp.

    start(ctx.timestamp == 3); a single event at timestamp 3 matches.
    """
    event = Event(1, "", 0.0)
    pattern = Pattern.begin("start").where(lambda _e, ctx: ctx.timestamp == 3)
    matches, _ = run(pattern, [(event, 3)])
    assert [list(m["start"]) for m in matches] == [[event]]
