"""Specification tests for negated stages: ``not_next`` and ``not_followed_by``.

Ported from FlinkCEP's ``NotPatternITCase`` (plus the negation cases of ``NFAITCase``,
``PatternTest`` and ``NFACompilerTest``); every expected result below is the one Flink's own
test asserts.  The rules these scenarios pin down:

* ``not_next(x)``: the event right after the previous stage's last taken event must not
  satisfy ``x``.  When it is the last stage, a match is only released once the next event
  arrives and does not satisfy ``x``.
* ``not_followed_by(x)``: no event satisfying ``x`` may occur between the previous stage's
  last taken event and the next stage's first taken event.  Events after that first take are
  no longer guarded.
* ``not_followed_by`` may only end a pattern when the pattern has a ``within`` window; the
  match is then "pending" and is released when time passes the window without an ``x``.
* Negated stages take no events and never appear as keys of a match.
* Negated stages cannot be quantified (``one_or_more``, ``times``, ``optional``).

Feeding follows Flink's NFA test harness (see ``support.run``): before every event, time is
advanced to the event's timestamp, so pending matches are released by later events.
"""

from __future__ import annotations

import pytest
from support import Event, feed, feed_nfa, same_matches, stream

from cep import (
    CEPError,
    MalformedPatternError,
    Matcher,
    Pattern,
    SkipStrategy,
    WithinType,
)


def named(name: str):
    """Condition: the event's name equals ``name``."""
    return lambda e: e.name == name


# ---------------------------------------------------------------------------------------------
# not_next / not_followed_by in the middle of a pattern
# ---------------------------------------------------------------------------------------------


def test_not_next_discards_only_branches_whose_next_event_is_forbidden():
    """Flink: NotPatternITCase#testNotNext.

    Pattern: a, not_next b, followed_by_any c, followed_by d.
    Events:  a1 c1 b1 c2 d.
    a1 is immediately followed by c1 (not b), so a1 survives; b1 later in the stream is
    irrelevant.  Both c's can pair with a1 (followed_by_any).
    """
    a1 = Event(40, "a", 1.0)
    c1 = Event(41, "c", 2.0)
    b1 = Event(42, "b", 3.0)
    c2 = Event(43, "c", 4.0)
    d = Event(43, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_next("notPattern").where(named("b"))
        .followed_by_any("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (c1, 2), (b1, 3), (c2, 4), (d, 5)])

    same_matches(matches, [[a1, c1, d], [a1, c2, d]])


def test_not_next_kills_the_partial_match_when_the_forbidden_event_comes_next():
    """Flink: NotPatternITCase#testNotNextNoMatches.

    Pattern: a, not_next b, followed_by c, followed_by d.
    Events:  a1 b1 c1 c2 d.  b1 directly follows a1, so nothing matches.
    """
    a1 = Event(40, "a", 1.0)
    b1 = Event(42, "b", 3.0)
    c1 = Event(41, "c", 2.0)
    c2 = Event(43, "c", 4.0)
    d = Event(43, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_next("notPattern").where(named("b"))
        .followed_by("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (b1, 2), (c1, 3), (c2, 4), (d, 5)])

    assert matches == []


def test_not_next_as_last_stage_fails_when_the_next_event_is_forbidden():
    """Flink: NotPatternITCase#testNotNextNoMatchesAtTheEnd.

    ``not_next`` is allowed as the last stage (unlike ``not_followed_by``).
    Pattern: a, followed_by_any c, followed_by_any d, not_next b.
    Events:  a1 c1 c2 d b1.  The only d is immediately followed by b1: no match at all.
    """
    a1 = Event(40, "a", 1.0)
    c1 = Event(41, "c", 2.0)
    c2 = Event(43, "c", 4.0)
    d = Event(43, "d", 4.0)
    b1 = Event(42, "b", 3.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .followed_by_any("middle").where(named("c"))
        .followed_by_any("end").where(named("d"))
        .not_next("notPattern").where(named("b"))
    )

    matches = feed(pattern, [(a1, 1), (c1, 2), (c2, 3), (d, 4), (b1, 5)])

    assert matches == []


def test_not_followed_by_guards_only_until_the_next_stage_takes():
    """Flink: NotPatternITCase#testNotFollowedBy.

    Pattern: a, not_followed_by b, followed_by_any c, followed_by d.
    Events:  a1 c1 b1 c2 d.
    Taking c1 ends the guarded gap, so the later b1 does not hurt [a1 c1 d]; but choosing c2
    would put b1 inside the gap, so [a1 c2 d] is not a match.
    """
    a1 = Event(40, "a", 1.0)
    c1 = Event(41, "c", 2.0)
    b1 = Event(42, "b", 3.0)
    c2 = Event(43, "c", 4.0)
    d = Event(43, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by_any("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (c1, 2), (b1, 3), (c2, 4), (d, 5)])

    same_matches(matches, [[a1, c1, d]])


def test_not_followed_by_before_an_optional_stage():
    """Flink: NotPatternITCase#testNotFollowedByBeforeOptional.

    Pattern: a, not_followed_by b, followed_by_any c optional, followed_by d.
    Events:  a1 c1 b1 c2 d.
    Skipping c would put b1 between a1 and d, and taking c2 puts b1 before c2: only
    [a1 c1 d] survives.
    """
    a1 = Event(40, "a", 1.0)
    c1 = Event(41, "c", 2.0)
    b1 = Event(42, "b", 3.0)
    c2 = Event(43, "c", 4.0)
    d = Event(43, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by_any("middle").where(named("c")).optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (c1, 2), (b1, 3), (c2, 4), (d, 5)])

    same_matches(matches, [[a1, c1, d]])


def test_not_followed_by_before_optional_last_stage_matches_immediately():
    """Flink: NotPatternITCase#testNotFollowedByBeforeOptionalAtTheEnd.

    Pattern: a, not_followed_by b, followed_by_any c optional  (no window needed: the
    pattern does not end with the negation).
    Events:  a1 c1 b1 c2.
    Expected: [a1] (c skipped) and [a1 c1]; [a1 c2] is ruled out by b1.
    """
    a1 = Event(40, "a", 1.0)
    c1 = Event(41, "c", 2.0)
    b1 = Event(42, "b", 3.0)
    c2 = Event(43, "c", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by_any("end").where(named("c")).optional()
    )

    matches = feed(pattern, [(a1, 1), (c1, 2), (b1, 3), (c2, 4)])

    same_matches(matches, [[a1, c1], [a1]])


def test_not_followed_by_before_optional_times():
    """Flink: NotPatternITCase#testNotFollowedByBeforeOptionalTimes.

    Pattern: a, not_followed_by b, followed_by_any c times(2) optional, followed_by d.
    Events:  a1 c1 b1 c2 d.
    b1 falls after the first c is taken (c1), so it is not inside the guarded gap:
    [a1 c1 c2 d] matches; skipping c would leave b1 in the gap.
    """
    a1 = Event(40, "a", 1.0)
    c1 = Event(41, "c", 2.0)
    b1 = Event(42, "b", 3.0)
    c2 = Event(43, "c", 4.0)
    d = Event(43, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by_any("middle").where(named("c")).times(2).optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (c1, 2), (b1, 3), (c2, 4), (d, 5)])

    same_matches(matches, [[a1, c1, c2, d]])


def test_not_followed_by_with_branching_at_start():
    """Flink: NotPatternITCase#testNotFollowedByWithBranchingAtStart.

    Pattern: a, not_followed_by b, followed_by c, followed_by d.
    Events:  a1 b1 c1 a2 c2 d.
    a1 is killed by b1; a2 starts a fresh run that completes as [a2 c2 d].
    """
    a1 = Event(40, "a", 1.0)
    b1 = Event(42, "b", 3.0)
    c1 = Event(41, "c", 2.0)
    a2 = Event(41, "a", 4.0)
    c2 = Event(43, "c", 5.0)
    d = Event(43, "d", 6.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (b1, 2), (c1, 3), (a2, 4), (c2, 5), (d, 6)])

    same_matches(matches, [[a2, c2, d]])


# ---------------------------------------------------------------------------------------------
# Negation around times() stages
# ---------------------------------------------------------------------------------------------


def test_not_followed_by_after_times_is_violated():
    """Flink: NotPatternITCase#testTimesWithNotFollowedBy.

    Pattern: a, followed_by_any b times(2), not_followed_by c, followed_by d.
    Events:  a1 b1 c b2 d.
    The only b pair is (b1, b2) and the gap b2..d is clean, yet there is no match: a
    negation after a quantified stage also guards the gaps *between* that stage's
    iterations, and c sits between b1 and b2.
    """
    a1 = Event(40, "a", 1.0)
    b1 = Event(41, "b", 2.0)
    c = Event(42, "c", 3.0)
    b2 = Event(43, "b", 4.0)
    d = Event(43, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .followed_by_any("middle").where(named("b")).times(2)
        .not_followed_by("notPattern").where(named("c"))
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (b1, 2), (c, 3), (b2, 4), (d, 5)])

    assert matches == []


def test_ignored_events_of_optional_times_do_not_leak_past_negation():
    """Flink: NotPatternITCase#testIgnoreStateOfTimesWithNotFollowedBy.

    Pattern: a, not_followed_by b, followed_by_any c times(2) optional, followed_by d.
    Events (out-of-order timestamps, exactly as in Flink):
        a1@1 d1@2 e@1 b1@3 c1@2 c2@4 d2@5.
    Only [a1 d1] matches: every later completion has b1 in the guarded gap after a1.
    """
    a1 = Event(40, "a", 1.0)
    e = Event(41, "e", 2.0)
    c1 = Event(42, "c", 3.0)
    b1 = Event(43, "b", 4.0)
    c2 = Event(44, "c", 5.0)
    d1 = Event(45, "d", 6.0)
    d2 = Event(46, "d", 7.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by_any("middle").where(named("c")).times(2).optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed_nfa(
        pattern, [(a1, 1), (d1, 2), (e, 1), (b1, 3), (c1, 2), (c2, 4), (d2, 5)]
    )

    same_matches(matches, [[a1, d1]])


def test_times_then_not_followed_by_without_enough_b_before_c():
    """Flink: NotPatternITCase#testTimesWithNotFollowedByAfter.

    Pattern: a, followed_by_any b times(2), not_followed_by c, followed_by d.
    Events (timestamps as in Flink): a1@1 d1@2 e@1 b1@3 b2@3 c1@2 d2@5.
    After (b1, b2) the event c1 arrives before d2, so nothing matches.
    """
    a1 = Event(40, "a", 1.0)
    e = Event(41, "e", 2.0)
    c1 = Event(42, "c", 3.0)
    b1 = Event(43, "b", 4.0)
    b2 = Event(44, "b", 5.0)
    d1 = Event(46, "d", 7.0)
    d2 = Event(47, "d", 8.0)
    pattern = (
        Pattern.begin("start").where(named("a"))
        .followed_by_any("middle").where(named("b")).times(2)
        .not_followed_by("notPattern").where(named("c"))
        .followed_by("end").where(named("d"))
    )

    matches = feed_nfa(
        pattern, [(a1, 1), (d1, 2), (e, 1), (b1, 3), (b2, 3), (c1, 2), (d2, 5)]
    )

    assert matches == []


# ---------------------------------------------------------------------------------------------
# Negation after / before one_or_more stages (Flink's NotFollowByData scenarios)
# ---------------------------------------------------------------------------------------------

A_1 = Event(40, "a", 1.0)
B_1 = Event(41, "b", 2.0)
B_2 = Event(42, "b", 3.0)
B_3 = Event(42, "b", 4.0)
C_1 = Event(43, "c", 5.0)
B_4 = Event(42, "b", 6.0)
B_5 = Event(42, "b", 7.0)
B_6 = Event(42, "b", 8.0)
D_1 = Event(43, "d", 9.0)


def _not_next_after_one_or_more(skip_till_any: bool) -> Pattern:
    """a, (followed_by | followed_by_any) b one_or_more, not_next c, followed_by d."""
    start = Pattern.begin("a").where(named("a"))
    bs = start.followed_by_any("b*") if skip_till_any else start.followed_by("b*")
    return (
        bs.where(named("b")).one_or_more()
        .not_next("not c").where(named("c"))
        .followed_by("d").where(named("d"))
    )


NOT_NEXT_AFTER_ONE_OR_MORE_EVENTS = stream(A_1, B_1, C_1, B_2, D_1, start=0)


def test_not_next_after_one_or_more_skip_till_next():
    """Flink: NotPatternITCase#testNotNextAfterOneOrMoreSkipTillNext.

    Pattern: a, followed_by b one_or_more, not_next c, followed_by d.
    Events:  A_1@0 B_1@1 C_1@2 B_2@3 D_1@4.
    With skip-till-next the b-loop starts at B_1, which is directly followed by C_1: no match.
    """
    matches = feed(_not_next_after_one_or_more(False), NOT_NEXT_AFTER_ONE_OR_MORE_EVENTS)

    assert matches == []


def test_not_next_after_one_or_more_skip_till_any():
    """Flink: NotPatternITCase#testNotNextAfterOneOrMoreSkipTillAny.

    Pattern: a, followed_by_any b one_or_more, not_next c, followed_by d.
    Events:  A_1@0 B_1@1 C_1@2 B_2@3 D_1@4.
    followed_by_any may start the loop at B_2 instead, which is followed by D_1: [A_1 B_2 D_1].
    """
    matches = feed(_not_next_after_one_or_more(True), NOT_NEXT_AFTER_ONE_OR_MORE_EVENTS)

    same_matches(matches, [[A_1, B_2, D_1]])


def _not_followed_by_after_one_or_more(eager: bool, skip_till_any: bool) -> Pattern:
    """a, (followed_by | followed_by_any) b one_or_more [allow_combinations],
    not_followed_by c, followed_by d."""
    start = Pattern.begin("a").where(named("a"))
    bs = start.followed_by_any("b*") if skip_till_any else start.followed_by("b*")
    bs = bs.where(named("b")).one_or_more()
    if not eager:
        bs = bs.allow_combinations()
    return bs.not_followed_by("not c").where(named("c")).followed_by("d").where(named("d"))


AFTER_ONE_OR_MORE_EVENTS = stream(A_1, B_1, B_2, B_3, C_1, B_4, B_5, B_6, D_1, start=0)


def test_not_followed_by_after_one_or_more_eager_skip_till_next():
    """Flink: NotPatternITCase#testNotFollowedByNextAfterOneOrMoreEager.

    Pattern: a, followed_by b one_or_more, not_followed_by c, followed_by d.
    Events:  A_1 B_1 B_2 B_3 C_1 B_4 B_5 B_6 D_1  (timestamps 0..8).
    The loop must start at B_1 (skip-till-next); C_1 then lies either between two taken b's
    or between the last taken b and D_1, and the guard covers both: no match.
    """
    matches = feed(_not_followed_by_after_one_or_more(True, False), AFTER_ONE_OR_MORE_EVENTS)

    assert matches == []


def test_not_followed_by_after_one_or_more_eager_skip_till_any():
    """Flink: NotPatternITCase#testNotFollowedByAnyAfterOneOrMoreEager.

    Pattern: a, followed_by_any b one_or_more, not_followed_by c, followed_by d.
    Events:  A_1 B_1 B_2 B_3 C_1 B_4 B_5 B_6 D_1  (timestamps 0..8).
    Only runs whose b's all come after C_1 survive; an eager (skip-till-next) loop yields the
    contiguous suffixes starting at each of B_4, B_5, B_6.
    """
    matches = feed(_not_followed_by_after_one_or_more(True, True), AFTER_ONE_OR_MORE_EVENTS)

    same_matches(
        matches,
        [
            [A_1, B_4, B_5, B_6, D_1],
            [A_1, B_4, B_5, D_1],
            [A_1, B_4, D_1],
            [A_1, B_5, B_6, D_1],
            [A_1, B_5, D_1],
            [A_1, B_6, D_1],
        ],
    )


def test_not_followed_by_after_one_or_more_combinations_skip_till_next():
    """Flink: NotPatternITCase#testNotFollowedByNextAfterOneOrMoreCombinations.

    Pattern: a, followed_by b one_or_more allow_combinations, not_followed_by c, followed_by d.
    Events:  A_1 B_1 B_2 B_3 C_1 B_4 B_5 B_6 D_1  (timestamps 0..8).  No match.
    """
    matches = feed(_not_followed_by_after_one_or_more(False, False), AFTER_ONE_OR_MORE_EVENTS)

    assert matches == []


def test_not_followed_by_after_one_or_more_combinations_skip_till_any():
    """Flink: NotPatternITCase#testNotFollowedByAnyAfterOneOrMoreCombinations.

    Pattern: a, followed_by_any b one_or_more allow_combinations, not_followed_by c,
    followed_by d.
    Events:  A_1 B_1 B_2 B_3 C_1 B_4 B_5 B_6 D_1  (timestamps 0..8).
    Every non-empty subset of {B_4, B_5, B_6} (the b's after C_1).
    """
    matches = feed(_not_followed_by_after_one_or_more(False, True), AFTER_ONE_OR_MORE_EVENTS)

    same_matches(
        matches,
        [
            [A_1, B_4, B_5, B_6, D_1],
            [A_1, B_4, B_5, D_1],
            [A_1, B_4, B_6, D_1],
            [A_1, B_4, D_1],
            [A_1, B_5, B_6, D_1],
            [A_1, B_5, D_1],
            [A_1, B_6, D_1],
        ],
    )


def _not_followed_by_before_loop(eager: bool, skip_till_any: bool, optional: bool) -> Pattern:
    """a, not_followed_by c, (followed_by | followed_by_any) b one_or_more [optional]
    [allow_combinations], followed_by d."""
    start = Pattern.begin("a").where(named("a")).not_followed_by("not c").where(named("c"))
    bs = start.followed_by_any("b*") if skip_till_any else start.followed_by("b*")
    bs = bs.where(named("b")).one_or_more()
    if optional:
        bs = bs.optional()
    if not eager:
        bs = bs.allow_combinations()
    return bs.followed_by("d").where(named("d"))


BEFORE_LOOP_EVENTS = stream(A_1, B_1, C_1, B_4, B_5, B_6, D_1, start=0)

# The guarded gap is A_1..(first b).  Only B_1 precedes C_1, so every match starts with B_1;
# C_1 occurring *inside* the b-loop is fine.
EAGER_BEFORE_LOOP = [
    [A_1, B_1, B_4, B_5, B_6, D_1],
    [A_1, B_1, B_4, B_5, D_1],
    [A_1, B_1, B_4, D_1],
    [A_1, B_1, D_1],
]
COMBINATIONS_BEFORE_LOOP = [
    [A_1, B_1, B_4, B_5, B_6, D_1],
    [A_1, B_1, B_4, B_6, D_1],
    [A_1, B_1, B_4, B_5, D_1],
    [A_1, B_1, B_4, D_1],
    [A_1, B_1, B_5, B_6, D_1],
    [A_1, B_1, B_5, D_1],
    [A_1, B_1, B_6, D_1],
    [A_1, B_1, D_1],
]


def test_not_followed_by_any_before_one_or_more_eager():
    """Flink: NotPatternITCase#testNotFollowedByAnyBeforeOneOrMoreEager.

    Pattern: a, not_followed_by c, followed_by_any b one_or_more, followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    A loop starting at B_4.. would have C_1 in the guarded gap; all matches start at B_1.
    """
    matches = feed(_not_followed_by_before_loop(True, True, False), BEFORE_LOOP_EVENTS)

    same_matches(matches, EAGER_BEFORE_LOOP)


def test_not_followed_by_any_before_one_or_more_combinations():
    """Flink: NotPatternITCase#testNotFollowedByAnyBeforeOneOrMoreCombinations.

    Pattern: a, not_followed_by c, followed_by_any b one_or_more allow_combinations,
    followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    """
    matches = feed(_not_followed_by_before_loop(False, True, False), BEFORE_LOOP_EVENTS)

    same_matches(matches, COMBINATIONS_BEFORE_LOOP)


def test_not_followed_by_before_one_or_more_eager():
    """Flink: NotPatternITCase#testNotFollowedByBeforeOneOrMoreEager.

    Pattern: a, not_followed_by c, followed_by b one_or_more, followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    """
    matches = feed(_not_followed_by_before_loop(True, False, False), BEFORE_LOOP_EVENTS)

    same_matches(matches, EAGER_BEFORE_LOOP)


def test_not_followed_by_before_one_or_more_combinations():
    """Flink: NotPatternITCase#testNotFollowedByBeforeOneOrMoreCombinations.

    Pattern: a, not_followed_by c, followed_by b one_or_more allow_combinations, followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    """
    matches = feed(_not_followed_by_before_loop(False, False, False), BEFORE_LOOP_EVENTS)

    same_matches(matches, COMBINATIONS_BEFORE_LOOP)


def test_not_followed_by_before_zero_or_more_eager_skip_till_next():
    """Flink: NotPatternITCase#testNotFollowedByBeforeZeroOrMoreEagerSkipTillNext.

    Pattern: a, not_followed_by c, followed_by b one_or_more optional, followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    The empty-loop path [A_1 D_1] is *not* a match: C_1 lies between A_1 and D_1.
    """
    matches = feed(_not_followed_by_before_loop(True, False, True), BEFORE_LOOP_EVENTS)

    same_matches(matches, EAGER_BEFORE_LOOP)


def test_not_followed_by_before_zero_or_more_combinations_skip_till_next():
    """Flink: NotPatternITCase#testNotFollowedByBeforeZeroOrMoreCombinationsSkipTillNext.

    Pattern: a, not_followed_by c, followed_by b one_or_more optional allow_combinations,
    followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    """
    matches = feed(_not_followed_by_before_loop(False, False, True), BEFORE_LOOP_EVENTS)

    same_matches(matches, COMBINATIONS_BEFORE_LOOP)


def test_not_followed_by_before_zero_or_more_eager_skip_till_any():
    """Flink: NotPatternITCase#testNotFollowedByBeforeZeroOrMoreEagerSkipTillAny.

    Pattern: a, not_followed_by c, followed_by_any b one_or_more optional, followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    """
    matches = feed(_not_followed_by_before_loop(True, True, True), BEFORE_LOOP_EVENTS)

    same_matches(matches, EAGER_BEFORE_LOOP)


def test_not_followed_by_before_zero_or_more_combinations_skip_till_any():
    """Flink: NotPatternITCase#testNotFollowedByBeforeZeroOrMoreCombinationsSkipTillAny.

    Pattern: a, not_followed_by c, followed_by_any b one_or_more optional allow_combinations,
    followed_by d.
    Events:  A_1 B_1 C_1 B_4 B_5 B_6 D_1  (timestamps 0..6).
    """
    matches = feed(_not_followed_by_before_loop(False, True, True), BEFORE_LOOP_EVENTS)

    same_matches(matches, COMBINATIONS_BEFORE_LOOP)


# ---------------------------------------------------------------------------------------------
# not_followed_by at the end of a pattern (requires within)
# ---------------------------------------------------------------------------------------------

WITHIN_TYPES = [WithinType.FIRST_AND_LAST, WithinType.PREVIOUS_AND_CURRENT]



@pytest.mark.parametrize("within_type", WITHIN_TYPES)
def test_not_followed_by_at_end_completes_when_the_window_passes(within_type):
    """Flink: NotPatternITCase#testNotFollowedByWithin{FirstAndLast,PreviousAndCurrent}AtEnd.

    Pattern: a, not_followed_by b, within 3 ms (either window type).
    Events:  a1@1 b1@2 a2@4 c@5 b2@10 a3@11 b3@13.
    * a1 is killed by b1 (inside its window).
    * a2 stays pending; when time advances to 10 (before b2 is processed), its window
      [4, 7] has passed without a b, so [a2] is released.  b2 arrives too late to matter.
    * a3 is killed by b3 at 13 (13 - 11 < 3).
    No final flush is needed: the harness advances time to each event's timestamp before
    processing it, which is what releases [a2].
    """
    a1 = Event(40, "a", 1.0)
    b1 = Event(41, "b", 2.0)
    a2 = Event(42, "a", 3.0)
    c = Event(43, "c", 4.0)
    b2 = Event(44, "b", 5.0)
    a3 = Event(45, "a", 7.0)
    b3 = Event(46, "b", 8.0)
    pattern = (
        Pattern.begin("a").where(named("a"))
        .not_followed_by("b").where(named("b"))
        .within(3, within_type=within_type)
    )

    matches = feed(
        pattern, [(a1, 1), (b1, 2), (a2, 4), (c, 5), (b2, 10), (a3, 11), (b3, 13)]
    )

    same_matches(matches, [[a2]])


@pytest.mark.parametrize("within_type", WITHIN_TYPES)
def test_pending_not_followed_by_matches_are_released_by_advance_time(within_type):
    """Flink: NFAITCase#testPendingStateMatchesWithin{FirstAndLast,PreviousAndCurrent}.

    Pattern: start, not_followed_by middle, within 5 ms.
    Events:  start(1)@1 middle(2)@4 start(3)@5 start(4)@11 middle(5)@18.
    Like Flink's test, advance time to each timestamp and collect what ``advance_time``
    releases, then process the event:
    * start(1) is killed by middle(2);
    * start(3) is released by advance_time(11) (window of 5 passed);
    * start(4) is released by advance_time(18), before middle(5) is processed.
    The released matches hold only the "start" stage: the negated stage is not a key.
    """
    events = [
        (Event(1, "start", 1.0), 1),
        (Event(2, "middle", 1.0), 4),
        (Event(3, "start", 1.0), 5),
        (Event(4, "start", 1.0), 11),
        (Event(5, "middle", 1.0), 18),
    ]
    pattern = (
        Pattern.begin("start").where(named("start"))
        .not_followed_by("middle").where(named("middle"))
        .within(5, within_type=within_type)
    )

    matcher = Matcher(pattern, engine="reference")
    pending = []
    for event, ts in events:
        released, _ = matcher.advance_time(ts)
        pending.extend(released)
        matcher.process(event, ts)

    as_dicts = sorted(
        ({k: list(v) for k, v in m.items()} for m in pending),
        key=lambda d: d["start"][0].id,
    )
    assert as_dicts == [
        {"start": [Event(3, "start", 1.0)]},
        {"start": [Event(4, "start", 1.0)]},
    ]


def test_not_followed_by_before_optional_times_within_window():
    """Flink: NotPatternITCase#testNotFollowByBeforeTimesWithin.

    Pattern: a, not_followed_by b, followed_by c times(0, 2), within 3 ms.
    (times(0, 2) means "zero to two", i.e. an optional stage of one or two c's.)
    Events:  a1@1 b1@2 a2@10 c1@11 c2@12 a3@20 c3@21 c4@24.
    Since c may be skipped and ends the pattern, each a is a match on its own immediately
    (a1 even though b1 follows it later); c's extend the match while inside the window
    (c4 is 4 ms after a3, outside it).
    """
    a1 = Event(40, "a", 1.0)
    b1 = Event(41, "b", 2.0)
    a2 = Event(42, "a", 3.0)
    c1 = Event(43, "c", 4.0)
    c2 = Event(44, "c", 5.0)
    a3 = Event(45, "a", 7.0)
    c3 = Event(46, "c", 8.0)
    c4 = Event(47, "c", 8.0)
    pattern = (
        Pattern.begin("a").where(named("a"))
        .not_followed_by("b").where(named("b"))
        .followed_by("c").where(named("c")).times(0, 2)
        .within(3)
    )

    matches = feed(
        pattern,
        [(a1, 1), (b1, 2), (a2, 10), (c1, 11), (c2, 12), (a3, 20), (c3, 21), (c4, 24)],
    )

    same_matches(matches, [[a1], [a2], [a2, c1], [a2, c1, c2], [a3], [a3, c3]])


def test_not_followed_by_at_end_after_match_with_skip_past_last_event():
    """Flink: NotPatternITCase#testNotFollowedByWithinAtEndAfterMatch.

    Pattern (skip past last event): a one_or_more allow_combinations, followed_by c,
    not_followed_by b, within 5 ms.
    Events:  a1@1 a2@2 a3@3 c1@4 c2@10.
    All the (a-subset, c1) runs are pending until time reaches 10; they are then released
    and the skip strategy keeps only [a1 a2 a3 c1].  c2 cannot start anything new.
    """
    a1 = Event(40, "a", 1.0)
    a2 = Event(41, "a", 2.0)
    a3 = Event(42, "a", 3.0)
    c1 = Event(43, "c", 4.0)
    c2 = Event(44, "c", 5.0)
    pattern = (
        Pattern.begin("a", skip=SkipStrategy.skip_past_last_event()).where(named("a"))
        .one_or_more().allow_combinations()
        .followed_by("c").where(named("c"))
        .not_followed_by("b").where(named("b"))
        .within(5)
    )

    matches = feed(pattern, [(a1, 1), (a2, 2), (a3, 3), (c1, 4), (c2, 10)])

    same_matches(matches, [[a1, a2, a3, c1]])


def test_not_followed_by_at_end_with_within_is_a_valid_pattern():
    """Flink: NFACompilerTest#testNFACompilerPatternNotFollowedByWithIn.

    start, not_followed_by middle, within 1 ms compiles (the negation becomes a pending
    state that completes when the window passes).
    """
    pattern = (
        Pattern.begin("start").where(lambda e: e.price > 2)
        .not_followed_by("middle").where(named("end"))
        .within(1)
    )

    Matcher(pattern, engine="reference")


# ---------------------------------------------------------------------------------------------
# Malformed negation patterns
# ---------------------------------------------------------------------------------------------


def test_not_followed_by_as_last_stage_without_within_is_rejected():
    """Flink: NFACompilerTest#testNFACompilerPatternEndsWithNotFollowedBy.

    start, followed_by middle, not_followed_by end  (no window) is malformed:
    "NotFollowedBy is not supported without windowTime as a last part of a Pattern!".
    """
    with pytest.raises(MalformedPatternError):
        pattern = (
            Pattern.begin("start").where(named("x"))
            .followed_by("middle").where(named("x"))
            .not_followed_by("end").where(named("x"))
        )
        Matcher(pattern, engine="reference")


def _always(_event) -> bool:
    return True


@pytest.mark.parametrize(
    "negation, quantify",
    [
        pytest.param("not_next", lambda p: p.one_or_more(), id="testNotNextCannotBeOneOrMore"),
        pytest.param("not_next", lambda p: p.times(3), id="testNotNextCannotBeTimes"),
        pytest.param("not_next", lambda p: p.optional(), id="testNotNextCannotBeOptional"),
        pytest.param(
            "not_followed_by",
            lambda p: p.one_or_more(),
            id="testNotFollowedCannotBeOneOrMore",
        ),
        pytest.param(
            "not_followed_by", lambda p: p.times(3), id="testNotFollowedCannotBeTimes"
        ),
        pytest.param(
            "not_followed_by", lambda p: p.optional(), id="testNotFollowedCannotBeOptional"
        ),
    ],
)
def test_negated_stage_cannot_be_quantified(negation, quantify):
    """Flink: PatternTest#testNotNextCannotBe*/testNotFollowedCannotBe*.

    A not_next / not_followed_by stage cannot take a quantifier (one_or_more, times(3),
    optional): MalformedPatternError, which is a CEPError.
    """
    start = Pattern.begin("start").where(_always)
    negated = getattr(start, negation)("not").where(_always)

    with pytest.raises(MalformedPatternError) as info:
        quantified = quantify(negated)
        # Flink raises while building; compiling is accepted as the latest point.
        Matcher(quantified.followed_by("end").where(_always), engine="reference")

    assert isinstance(info.value, CEPError)
