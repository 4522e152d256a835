"""``until(cond)``: a stop condition for a looping stage.

Ported from FlinkCEP's ``UntilConditionITCase`` (plus one ``SameElementITCase``
scenario and the ``until`` checks of ``PatternTest``); the Flink test method is
named in each docstring.  Results are compared order-insensitively like Flink's
``comparePatterns``.

Rule: once an event satisfies the until condition, the loop stops — that event
is *not* taken by the loop, and a loop that is still running or waiting for its
next element is discarded.  The event may still be taken by the stage after the
loop.  An iterative until condition sees, through ``ctx.events(stage)``, the
events the partial match has already taken (not the current one).

(Flink additionally asserts that after each scenario only the initial state
remains in the NFA, i.e. the stopped loops were pruned; the public API here
cannot observe that.)
"""

from __future__ import annotations

import pytest
from support import Event, feed, same_matches

from cep import MalformedPatternError, Matcher, Pattern


def named(name: str):
    return lambda e: e.name == name


def until_condition(e) -> bool:
    """Flink's ``UNTIL_CONDITION``: price == 5.0."""
    return e.price == 5.0


IS_A = named("a")
IS_C = named("c")

C = Event(40, "c", 1.0)
M1 = Event(41, "a", 2.0)
M2 = Event(42, "a", 3.0)
M3 = Event(43, "a", 4.0)
BREAKING = Event(44, "a", 5.0)  # an "a" that satisfies the until condition
IGNORED = Event(45, "a", 6.0)

# c a a (a@5.0) a — testUntilConditionFollowedByOneOrMore / ZeroOrMore
C_M1_M2_BREAK = [(C, 1), (M1, 3), (M2, 4), (BREAKING, 6), (IGNORED, 7)]
# c a a a (a@5.0) a — the "Combinations" variants
C_M1_M2_M3_BREAK = [(C, 1), (M1, 3), (M2, 4), (M3, 5), (BREAKING, 6), (IGNORED, 7)]


def c_then_loop(link: str = "followed_by") -> Pattern:
    """``start(c) -link-> middle(a){1,}``; the caller adds modifiers and until."""
    return getattr(Pattern.begin("start").where(IS_C), link)("middle").where(IS_A).one_or_more()


def then_breaking(p: Pattern) -> Pattern:
    """``... -followed_by-> end(price == 5.0)``: the stopping event ends the match."""
    return p.followed_by("end").where(until_condition)


# --------------------------------------------------------------------------- one or more


def test_until_stops_one_or_more():
    """UntilConditionITCase.testUntilConditionFollowedByOneOrMore.

    c a{1,} until(price == 5) -fb-> end(price == 5) over c a1 a2 a(5.0) a(6.0).
    The a priced 5.0 stops the loop and becomes ``end``; the a after it is
    never taken: [c a1 a2 a5], [c a1 a5].
    """
    pattern = then_breaking(c_then_loop().until(until_condition))
    same_matches(
        feed(pattern, C_M1_M2_BREAK),
        [[C, M1, M2, BREAKING], [C, M1, BREAKING]],
    )


def test_until_stops_one_or_more_with_combinations():
    """UntilConditionITCase.testUntilConditionFollowedByOneOrMoreCombinations.

    c a{1,} allow_combinations until(price == 5) -fb-> end(price == 5)
    over c a1 a2 a3 a(5.0) a(6.0).
    """
    pattern = then_breaking(c_then_loop().allow_combinations().until(until_condition))
    same_matches(
        feed(pattern, C_M1_M2_M3_BREAK),
        [
            [C, M1, M2, M3, BREAKING],
            [C, M1, M2, BREAKING],
            [C, M1, M3, BREAKING],
            [C, M1, BREAKING],
        ],
    )


def test_until_stops_consecutive_one_or_more():
    """UntilConditionITCase.testUntilConditionFollowedByOneOrMoreConsecutive.

    c a{1,} consecutive until(price == 5) -fb-> end(price == 5)
    over c a1 a2 a(5.0) a(6.0) -> [c a1 a2 a5], [c a1 a5].
    """
    breaking = Event(45, "a", 5.0)
    events = [(C, 1), (M1, 3), (M2, 4), (breaking, 7), (Event(46, "a", 6.0), 8)]
    pattern = then_breaking(c_then_loop().consecutive().until(until_condition))
    same_matches(feed(pattern, events), [[C, M1, M2, breaking], [C, M1, breaking]])


def test_until_with_consecutive_loop_already_broken():
    """UntilConditionITCase.testUntilConditionFollowedByOneOrMoreConsecutive2.

    c a{1,} consecutive until(price == 5) -fb-> end(price == 5)
    over c a1 b a3 a(5.0) a(6.0).  The b breaks the run after a1, so a3 can
    never join it; [c a1] still waits for ``end`` and gets the a priced 5.0:
    only [c a1 a5].
    """
    breaking = Event(45, "a", 5.0)
    events = [
        (C, 1),
        (M1, 3),
        (Event(42, "b", 3.0), 4),
        (M3, 5),
        (breaking, 7),
        (Event(46, "a", 6.0), 8),
    ]
    pattern = then_breaking(c_then_loop().consecutive().until(until_condition))
    same_matches(feed(pattern, events), [[C, M1, breaking]])


# --------------------------------------------------------------------------- zero or more


def test_until_stops_zero_or_more():
    """UntilConditionITCase.testUntilConditionFollowedByZeroOrMore.

    c a{0,} until(price == 5) -fb-> end(price == 5) over c a1 a2 a(5.0) a(6.0)
    -> [c a1 a2 a5], [c a1 a5], [c a5].
    """
    pattern = then_breaking(c_then_loop().optional().until(until_condition))
    same_matches(
        feed(pattern, C_M1_M2_BREAK),
        [[C, M1, M2, BREAKING], [C, M1, BREAKING], [C, BREAKING]],
    )


def test_until_stops_zero_or_more_with_combinations():
    """UntilConditionITCase.testUntilConditionFollowedByZeroOrMoreCombinations.

    c a{0,} allow_combinations until(price == 5) -fb-> end(price == 5)
    over c a1 a2 a3 a(5.0) a(6.0).
    """
    pattern = then_breaking(c_then_loop().optional().allow_combinations().until(until_condition))
    same_matches(
        feed(pattern, C_M1_M2_M3_BREAK),
        [
            [C, M1, M2, M3, BREAKING],
            [C, M1, M2, BREAKING],
            [C, M1, M3, BREAKING],
            [C, M1, BREAKING],
            [C, BREAKING],
        ],
    )


def test_until_stops_consecutive_zero_or_more():
    """UntilConditionITCase.testUntilConditionFollowedByZeroOrMoreConsecutive.

    c a{0,} consecutive until(price == 5) -fb-> end(price == 5)
    over c a1 a2 a(5.0) a(6.0) -> [c a1 a2 a5], [c a1 a5], [c a5].
    """
    breaking = Event(45, "a", 5.0)
    events = [(C, 1), (M1, 3), (M2, 4), (breaking, 7), (Event(46, "a", 6.0), 8)]
    pattern = then_breaking(c_then_loop().optional().consecutive().until(until_condition))
    same_matches(
        feed(pattern, events),
        [[C, M1, M2, breaking], [C, M1, breaking], [C, breaking]],
    )


# --------------------------------------------------------------------------- followed_by_any


def test_until_with_followed_by_any_one_or_more():
    """UntilConditionITCase.testUntilConditionFollowedByAnyOneOrMore.

    c -any-> a{1,} until(price == 5) ending the pattern, over c a1 a2 a(5.0) a(6.0).
    Running loops stop at the a priced 5.0 (never taken), but c keeps waiting
    (followed_by_any), so the a priced 6.0 starts a fresh loop:
    [c a1], [c a1 a2], [c a2], [c a6].
    """
    m3 = Event(45, "a", 6.0)
    events = [(C, 1), (M1, 3), (M2, 4), (BREAKING, 6), (m3, 7)]
    pattern = c_then_loop("followed_by_any").until(until_condition)
    same_matches(feed(pattern, events), [[C, M1, M2], [C, M1], [C, M2], [C, m3]])


def test_until_with_followed_by_any_zero_or_more():
    """UntilConditionITCase.testUntilConditionFollowedByAnyZeroOrMore.

    As above with the loop optional: the same matches plus [c].
    """
    m3 = Event(45, "a", 6.0)
    events = [(C, 1), (M1, 3), (M2, 4), (BREAKING, 6), (m3, 7)]
    pattern = c_then_loop("followed_by_any").optional().until(until_condition)
    same_matches(feed(pattern, events), [[C, M1, M2], [C, M1], [C, M2], [C, m3], [C]])


# --------------------------------------------------------------------------- loops without where


_NO_WHERE_EVENTS = [
    (C, 1),
    (M1, 3),
    (M2, 4),
    (Event(40, "d", 1.0), 5),
    (BREAKING, 6),
    (IGNORED, 7),
]


def _c_then_unconditional_loop() -> Pattern:
    """``start(c) -followed_by-> middle{1,}`` — the loop has no ``where``."""
    return Pattern.begin("start").where(IS_C).followed_by("middle").one_or_more()


def test_until_on_a_loop_without_condition():
    """UntilConditionITCase.testUntilConditionWithEmptyWhere.

    c -fb-> any{1,} until(price == 5) ending the pattern, over
    c a(2) a(3) d(1) a(5) a(6): the loop takes everything up to the price-5 event:
    [c a2], [c a2 a3], [c a2 a3 d].
    """
    d = _NO_WHERE_EVENTS[3][0]
    pattern = _c_then_unconditional_loop().until(until_condition)
    same_matches(
        feed(pattern, _NO_WHERE_EVENTS),
        [[C, M1, M2, d], [C, M1, M2], [C, M1]],
    )


def _middle_prices_sum_to_6(_event, ctx) -> bool:
    return sum(e.price for e in ctx.events("middle")) == 6.0


def test_iterative_until_one_or_more():
    """UntilConditionITCase.testIterativeUntilConditionOneOrMore.

    c -fb-> any{1,} until(sum of prices already in ``middle`` == 6) over
    c a(2) a(3) d(1) a(5) a(6).  After a2 a3 d the taken prices sum to 6, so the
    next event stops the loop: [c a2], [c a2 a3], [c a2 a3 d].
    """
    d = _NO_WHERE_EVENTS[3][0]
    pattern = _c_then_unconditional_loop().until(_middle_prices_sum_to_6)
    same_matches(
        feed(pattern, _NO_WHERE_EVENTS),
        [[C, M1, M2, d], [C, M1, M2], [C, M1]],
    )


def test_iterative_until_zero_or_more():
    """UntilConditionITCase.testIterativeUntilConditionZeroOrMore.

    As above with the loop optional: the same matches plus [c].
    """
    d = _NO_WHERE_EVENTS[3][0]
    pattern = _c_then_unconditional_loop().optional().until(_middle_prices_sum_to_6)
    same_matches(
        feed(pattern, _NO_WHERE_EVENTS),
        [[C, M1, M2, d], [C, M1, M2], [C, M1], [C]],
    )


def test_iterative_until_counting_taken_events():
    """SameElementITCase.testClearingBufferWithUntilAtTheEnd.

    a -fb-> d{1,} until(len(ctx.events("d")) == 3) ending the pattern, over
    a d d d d (three equal d's @2, one @4).  The fourth d sees three d's
    already taken and stops the loop: [a d], [a d d], [a d d d].
    """
    a1 = Event(40, "a", 1.0)
    d1, d2, d3, d4 = (Event(41, "d", 2.0) for _ in range(4))
    pattern = (
        Pattern.begin("a")
        .where(IS_A)
        .followed_by("d")
        .where(named("d"))
        .one_or_more()
        .until(lambda _e, ctx: len(ctx.events("d")) == 3)
    )
    same_matches(
        feed(pattern, [(a1, 1), (d1, 2), (d2, 2), (d3, 2), (d4, 4)]),
        [[a1, d1, d2, d3], [a1, d1, d2], [a1, d1]],
    )


# --------------------------------------------------------------------------- misuse


def _true(_e) -> bool:
    return True


def test_until_on_times_is_rejected():
    """PatternTest.testUntilCannotBeAppliedToTimes: ``times`` is not a looping stage."""
    with pytest.raises(MalformedPatternError):
        Matcher(Pattern.begin("start").where(_true).times(1).until(_true), engine="reference")


def test_until_on_a_singleton_is_rejected():
    """PatternTest.testUntilCannotBeAppliedToSingleton."""
    with pytest.raises(MalformedPatternError):
        Matcher(Pattern.begin("start").where(_true).until(_true), engine="reference")


def test_until_twice_is_rejected():
    """PatternTest.testUntilCannotBeAppliedTwice (on a singleton, as in Flink's test) and,
    per Flink's ``Pattern.until`` ("Only one until condition can be applied."), on a loop."""
    with pytest.raises(MalformedPatternError):
        Matcher(Pattern.begin("start").where(_true).until(_true).until(_true), engine="reference")
    with pytest.raises(MalformedPatternError):
        pattern = Pattern.begin("start").where(_true).one_or_more().until(_true).until(_true)
        Matcher(pattern, engine="reference")


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_a_greedy_optional_loop_with_until_after_a_not_ends_the_pattern(engine: str):
    """The last stage, optional, greedy and with ``until``, after a ``not_followed_by``: its
    until edge proceeds to the end state, which has no state from before the NOTs were
    copied away.  The compiler failed with KeyError '$endState$' (FlinkCEP's compiler
    passes, and its NFA then fails at run time with a NullPointerException); found by
    the comparison with FlinkCEP (tests/flinkcep)."""
    import cep
    from cep import col

    p = (Pattern.begin("b").where(col("v") == 0).not_followed_by("c").where(col("v") == 2)
         .followed_by("d").where(col("v") != 0).one_or_more().optional().greedy()
         .until(col("v") == 9))
    rows = [{"k": "x", "ts": t, "v": v} for t, v in enumerate([0, 1, 1, 9, 1])]
    found = cep.match(rows, p, key="k", time="ts", engine=engine)
    # the loop stops at the 9: d takes what came before it, or nothing
    taken = sorted(str({s: [e["ts"] for e in evs] for s, evs in m.items()}) for m in found)
    assert taken == sorted(map(str, [{"b": [0]}, {"b": [0], "d": [1]}, {"b": [0], "d": [1, 2]}]))
