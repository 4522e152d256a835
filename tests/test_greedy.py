"""``greedy()``: a looping stage keeps taking events instead of handing them on.

Ported from FlinkCEP's ``GreedyITCase`` (the Flink test method is named in each
docstring); results are compared order-insensitively like Flink's
``comparePatterns``.

Rule: without ``greedy`` a loop ``a*`` followed by ``d`` yields one match per
possible loop length.  With ``greedy`` the loop keeps every event it can take,
so only the longest loop survives when the pattern continues after it.  When the
greedy loop *ends* the pattern, every prefix is still emitted as it is taken.

Misuse (enforced by Flink's ``Quantifier.greedy`` / ``Pattern.optional``, not by
a test in ``GreedyITCase``): ``greedy`` is rejected on a singleton stage and on a
loop with ``allow_combinations``; an ``optional`` stage may not follow a greedy one.
(The pre-1.5 ``GreedyITCase`` tests that put an optional stage after a greedy loop
were dropped from Flink for this reason and are not ported.)
"""

from __future__ import annotations

import pytest
from support import Event, feed, same_matches

from cep import MalformedPatternError, Matcher, Pattern


def named(name: str):
    return lambda e: e.name == name


IS_A = named("a")
IS_C = named("c")
IS_D = named("d")

C = Event(40, "c", 1.0)
A1 = Event(41, "a", 2.0)
A2 = Event(42, "a", 2.0)
A3 = Event(43, "a", 2.0)
D = Event(44, "d", 3.0)
DUMMY = Event(43, "dummy", 2.0)


def c_then_a() -> Pattern:
    """``start(c) -followed_by-> middle(a)``; caller adds the quantifier."""
    return Pattern.begin("start").where(IS_C).followed_by("middle").where(IS_A)


def then_d(p: Pattern) -> Pattern:
    return p.followed_by("end").where(IS_D)


# --------------------------------------------------------------------------- zero or more


def test_greedy_zero_or_more_keeps_only_the_longest_loop():
    """GreedyITCase.testGreedyZeroOrMore.

    c a*(greedy) d over c a1 a2 a3 d -> only [c a1 a2 a3 d]
    (a non-greedy loop would also give [c d], [c a1 d], [c a1 a2 d]).
    """
    pattern = then_d(c_then_a().one_or_more().optional().greedy())
    events = [(C, 1), (A1, 2), (A2, 3), (A3, 4), (D, 5)]
    same_matches(feed(pattern, events), [[C, A1, A2, A3, D]])


def test_greedy_zero_or_more_skips_irrelevant_events_in_between():
    """GreedyITCase.testGreedyZeroOrMoreInBetween.

    c a*(greedy) d over c x a1 x a2 x a3 d (x = dummy) -> only [c a1 a2 a3 d].
    """
    dummy = Event(1, "dummy", 1111)
    pattern = then_d(c_then_a().one_or_more().optional().greedy())
    events = [
        (C, 1),
        (dummy, 2),
        (A1, 3),
        (dummy, 4),
        (A2, 5),
        (dummy, 6),
        (A3, 7),
        (D, 8),
    ]
    same_matches(feed(pattern, events), [[C, A1, A2, A3, D]])


def test_greedy_zero_or_more_with_dummy_after_the_loop():
    """GreedyITCase.testGreedyZeroOrMoreWithDummyEventsAfterQuantifier.

    c a*(greedy) d over c a1 a2 x d -> only [c a1 a2 d].
    """
    pattern = then_d(c_then_a().one_or_more().optional().greedy())
    events = [(C, 1), (A1, 2), (A2, 3), (DUMMY, 4), (D, 5)]
    same_matches(feed(pattern, events), [[C, A1, A2, D]])


def test_greedy_zero_or_more_with_no_loop_events():
    """GreedyITCase.testGreedyZeroOrMoreWithDummyEventsBeforeQuantifier.

    c a*(greedy) d over c x d -> [c d].
    """
    pattern = then_d(c_then_a().one_or_more().optional().greedy())
    same_matches(feed(pattern, [(C, 1), (DUMMY, 2), (D, 5)]), [[C, D]])


def test_greedy_zero_or_more_with_until_after_the_loop():
    """GreedyITCase.testGreedyUntilZeroOrMoreWithDummyEventsAfterQuantifier.

    c a*(greedy, until price > 3.0) d over c a1 a2 a3 a(4.0) d: the a priced 4.0
    ends the loop without being taken -> only [c a1 a2 a3 d].
    """
    a1, a2, a3 = Event(41, "a", 2.0), Event(42, "a", 3.0), Event(43, "a", 3.0)
    d = Event(45, "d", 3.0)
    pattern = then_d(c_then_a().one_or_more().optional().greedy().until(lambda e: e.price > 3.0))
    events = [(C, 1), (a1, 2), (a2, 3), (a3, 4), (Event(44, "a", 4.0), 5), (d, 6)]
    same_matches(feed(pattern, events), [[C, a1, a2, a3, d]])


def test_greedy_zero_or_more_with_until_before_the_loop():
    """GreedyITCase.testGreedyUntilWithDummyEventsBeforeQuantifier.

    c a*(greedy, until price > 3.0) d over c a(4.0) a1 a2 a3 d: the stopping
    event arrives before the loop took anything, so the loop can never start;
    only the empty loop survives -> [c d].
    """
    a1, a2, a3 = Event(41, "a", 2.0), Event(42, "a", 3.0), Event(43, "a", 3.0)
    d = Event(45, "d", 3.0)
    pattern = then_d(c_then_a().one_or_more().optional().greedy().until(lambda e: e.price > 3.0))
    events = [(C, 1), (Event(44, "a", 4.0), 2), (a1, 3), (a2, 4), (a3, 5), (d, 6)]
    same_matches(feed(pattern, events), [[C, d]])


# --------------------------------------------------------------------------- one or more


def test_greedy_one_or_more_keeps_only_the_longest_loop():
    """GreedyITCase.testGreedyOneOrMore.

    c a+(greedy) d over c a1 a2 a3 d -> only [c a1 a2 a3 d].
    """
    pattern = then_d(c_then_a().one_or_more().greedy())
    events = [(C, 1), (A1, 2), (A2, 3), (A3, 4), (D, 5)]
    same_matches(feed(pattern, events), [[C, A1, A2, A3, D]])


def test_greedy_one_or_more_skips_irrelevant_events_in_between():
    """GreedyITCase.testGreedyOneOrMoreInBetween.

    c a+(greedy) d over c x a1 x a2 x a3 d -> only [c a1 a2 a3 d].
    """
    dummy = Event(1, "dummy", 1111)
    pattern = then_d(c_then_a().one_or_more().greedy())
    events = [
        (C, 1),
        (dummy, 2),
        (A1, 3),
        (dummy, 4),
        (A2, 5),
        (dummy, 6),
        (A3, 7),
        (D, 8),
    ]
    same_matches(feed(pattern, events), [[C, A1, A2, A3, D]])


def test_greedy_one_or_more_with_dummy_after_the_loop():
    """GreedyITCase.testGreedyOneOrMoreWithDummyEventsAfterQuantifier.

    c a+(greedy) d over c a1 a2 x d -> only [c a1 a2 d].
    """
    pattern = then_d(c_then_a().one_or_more().greedy())
    events = [(C, 1), (A1, 2), (A2, 3), (DUMMY, 4), (D, 5)]
    same_matches(feed(pattern, events), [[C, A1, A2, D]])


def test_greedy_one_or_more_needs_at_least_one_event():
    """GreedyITCase.testGreedyOneOrMoreWithDummyEventsBeforeQuantifier.

    c a+(greedy) d over c x d -> no match.
    """
    pattern = then_d(c_then_a().one_or_more().greedy())
    assert feed(pattern, [(C, 1), (DUMMY, 2), (D, 5)]) == []


def test_greedy_one_or_more_with_until_after_the_loop():
    """GreedyITCase.testGreedyUntilOneOrMoreWithDummyEventsAfterQuantifier.

    c a+(greedy, until price > 3.0) d over c a1 a2 a3 a(4.0) d -> only [c a1 a2 a3 d].
    """
    a1, a2, a3 = Event(41, "a", 2.0), Event(42, "a", 3.0), Event(43, "a", 3.0)
    d = Event(45, "d", 3.0)
    pattern = then_d(c_then_a().one_or_more().greedy().until(lambda e: e.price > 3.0))
    events = [(C, 1), (a1, 2), (a2, 3), (a3, 4), (Event(44, "a", 4.0), 5), (d, 6)]
    same_matches(feed(pattern, events), [[C, a1, a2, a3, d]])


def test_greedy_one_or_more_with_until_before_the_loop():
    """GreedyITCase.testGreedyUntilOneOrMoreWithDummyEventsBeforeQuantifier.

    c a+(greedy, until price > 3.0) d over c a(4.0) a1 a2 a3 d: the stopping
    event arrives while c still waits for its first a.  That kills the branch
    (followed_by may not skip an event matching the stage), so there is no
    match at all — not even one starting at a1.
    """
    a1, a2, a3 = Event(41, "a", 2.0), Event(42, "a", 3.0), Event(43, "a", 3.0)
    d = Event(45, "d", 3.0)
    pattern = then_d(c_then_a().one_or_more().greedy().until(lambda e: e.price > 3.0))
    events = [(C, 1), (Event(44, "a", 4.0), 2), (a1, 3), (a2, 4), (a3, 5), (d, 6)]
    assert feed(pattern, events) == []


# --------------------------------------------------------------------------- greedy at the end


def test_greedy_zero_or_more_ending_the_pattern_emits_every_prefix():
    """GreedyITCase.testEndWithZeroOrMoreGreedy.

    c a*(greedy) ending the pattern, over c a1 a2 x a3:
    [c], [c a1], [c a1 a2], [c a1 a2 a3].
    """
    pattern = c_then_a().one_or_more().optional().greedy()
    events = [(C, 1), (A1, 2), (A2, 3), (Event(44, "dummy", 2.0), 4), (A3, 5)]
    same_matches(feed(pattern, events), [[C], [C, A1], [C, A1, A2], [C, A1, A2, A3]])


def test_greedy_consecutive_zero_or_more_ending_the_pattern():
    """GreedyITCase.testEndWithZeroOrMoreConsecutiveGreedy.

    c a*(consecutive, greedy) ending the pattern, over c a1 a2 x a3: the dummy
    breaks the run, so a3 is never taken: [c], [c a1], [c a1 a2].
    """
    pattern = c_then_a().one_or_more().optional().consecutive().greedy()
    events = [(C, 1), (A1, 2), (A2, 3), (Event(44, "dummy", 2.0), 4), (A3, 5)]
    same_matches(feed(pattern, events), [[C], [C, A1], [C, A1, A2]])


def test_greedy_times_range_ending_the_pattern():
    """GreedyITCase.testEndWithGreedyTimesRange.

    c a{2,5}(greedy) ending the pattern, over c a1 a2 a3 a4 x:
    [c a1 a2], [c a1 a2 a3], [c a1 a2 a3 a4].
    """
    a4 = Event(44, "a", 2.0)
    pattern = c_then_a().times(2, 5).greedy()
    events = [(C, 1), (A1, 2), (A2, 3), (A3, 4), (a4, 5), (Event(44, "dummy", 2.0), 6)]
    same_matches(feed(pattern, events), [[C, A1, A2], [C, A1, A2, A3], [C, A1, A2, A3, a4]])


def test_greedy_times_range_keeps_only_the_longest_loop():
    """GreedyITCase.testGreedyTimesRange.

    c a{2,5}(greedy) d over c a1 a2 a3 a4 d -> only [c a1 a2 a3 a4 d].
    """
    a4 = Event(44, "a", 2.0)
    d = Event(45, "d", 2.0)
    pattern = then_d(c_then_a().times(2, 5).greedy())
    events = [(C, 1), (A1, 2), (A2, 3), (A3, 4), (a4, 5), (d, 6)]
    same_matches(feed(pattern, events), [[C, A1, A2, A3, a4, d]])


# --------------------------------------------------------------------------- misuse


def test_greedy_on_a_singleton_stage_is_rejected():
    """Flink ``Quantifier.greedy``: "Option not applicable to singleton quantifier"."""
    with pytest.raises(MalformedPatternError):
        Matcher(then_d(c_then_a().greedy()), engine="reference")


def test_greedy_with_allow_combinations_is_rejected():
    """Flink ``Quantifier.greedy``: "Option not applicable to FollowedByAny pattern"
    (a loop with skip-till-any inner contiguity cannot be greedy)."""
    with pytest.raises(MalformedPatternError):
        Matcher(then_d(c_then_a().one_or_more().allow_combinations().greedy()), engine="reference")


def test_optional_stage_after_a_greedy_stage_is_rejected():
    """Flink ``Pattern.optional``: "Optional pattern cannot be preceded by greedy pattern"."""
    with pytest.raises(MalformedPatternError):
        pattern = c_then_a().one_or_more().greedy().followed_by("end").where(IS_D).optional()
        Matcher(pattern, engine="reference")
