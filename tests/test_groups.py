"""Specification tests for group patterns (a ``Pattern`` used as a stage).

Ported from FlinkCEP's ``GroupITCase``; every expected result below is the one Flink's own
test asserts.  The rules these scenarios pin down:

* A group ``Pattern.begin("x")...`` passed to ``begin`` / ``next`` / ``followed_by`` /
  ``followed_by_any`` behaves like a single stage whose "event" is a whole run of the inner
  pattern; the contiguity keyword applies to the group's first inner stage.
* Quantifiers on the group (``times``, ``one_or_more``, ``optional``, ``consecutive``,
  ``allow_combinations``, ``until``) repeat the whole inner pattern.
* Groups nest.
* The match is keyed by the inner stage names; a repeated group collects all its
  iterations' events under those names.

Feeding follows Flink's NFA test harness (see ``support.run``).
"""

from __future__ import annotations

from support import Event, feed, run, same_matches

from cep import Pattern


def named(name: str):
    """Condition: the event's name equals ``name``."""
    return lambda e: e.name == name


def a_then_b(first: str = "middle1", second: str = "middle2") -> Pattern:
    """The inner group used by most scenarios: (a followed_by b)."""
    return Pattern.begin(first).where(named("a")).followed_by(second).where(named("b"))


# Events shared by the "c (a b)... d" scenarios, as in Flink.
C = Event(40, "c", 1.0)
A1 = Event(41, "a", 2.0)
B1 = Event(42, "b", 3.0)
A2 = Event(43, "a", 4.0)
B2 = Event(44, "b", 5.0)
D = Event(45, "d", 6.0)
C_A1_B1_A2_B2_D = [(C, 1), (A1, 2), (B1, 3), (A2, 4), (B2, 5), (D, 6)]


# ---------------------------------------------------------------------------------------------
# followed_by a group, with quantifiers
# ---------------------------------------------------------------------------------------------


def test_group_followed_by_times():
    """Flink: GroupITCase#testGroupFollowedByTimes.

    Pattern: c, followed_by (a followed_by b) times(2), followed_by d.
    Events:  c a1 b1 a2 b2 d.
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).times(2)
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, C_A1_B1_A2_B2_D)

    same_matches(matches, [[C, A1, B1, A2, B2, D]])


def test_group_match_is_keyed_by_inner_stage_names():
    """Flink: GroupITCase#testGroupFollowedByTimes, read as a stage-name -> events mapping.

    Same scenario as above.  Flink names the group's states after the inner stages, so the
    single match holds start=[c], middle1=[a1, a2], middle2=[b1, b2], end=[d]
    (each stage's events in take order).
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).times(2)
        .followed_by("end").where(named("d"))
    )

    matches, _ = run(pattern, C_A1_B1_A2_B2_D)

    assert len(matches) == 1
    assert {k: list(v) for k, v in matches[0].items()} == {
        "start": [C],
        "middle1": [A1, A2],
        "middle2": [B1, B2],
        "end": [D],
    }


def test_group_followed_by_optional():
    """Flink: GroupITCase#testGroupFollowedByOptional.

    Pattern: c, followed_by (a followed_by b) optional, followed_by d.
    Events:  c@1 a1@2 a2@3 b@4 d@5.
    The group is either skipped ([c d]) or taken once; inside the group, a followed_by b
    takes the first a (skip-till-next), so [c a1 b d] and not [c a2 b d].
    """
    c = Event(40, "c", 1.0)
    a1 = Event(41, "a", 2.0)
    a2 = Event(42, "a", 2.0)
    b = Event(43, "b", 3.0)
    d = Event(44, "d", 4.0)
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(c, 1), (a1, 2), (a2, 3), (b, 4), (d, 5)])

    same_matches(matches, [[c, d], [c, a1, b, d]])


def test_followed_by_group_times_optional_skips_an_incomplete_group():
    """Flink: GroupITCase#testFollowedByGroupTimesOptional.

    Pattern: c, followed_by (a followed_by b) times(2) optional, followed_by d.
    Events:  c@1 a@2 d@3.
    The group never completes, so only the "skipped" path [c d] matches.
    """
    c = Event(40, "c", 1.0)
    a = Event(41, "a", 2.0)
    d = Event(45, "d", 3.0)
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).times(2).optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(c, 1), (a, 2), (d, 3)])

    same_matches(matches, [[c, d]])


def test_group_followed_by_one_or_more():
    """Flink: GroupITCase#testGroupFollowedByOneOrMore.

    Pattern: c, followed_by (a followed_by b) one_or_more, followed_by d.
    Events:  c a1 b1 a2 b2 d.
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).one_or_more()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, C_A1_B1_A2_B2_D)

    same_matches(matches, [[C, A1, B1, D], [C, A1, B1, A2, B2, D]])


def test_group_followed_by_zero_or_more():
    """Flink: GroupITCase#testGroupFollowedByZeroOrMore.

    Pattern: c, followed_by (a followed_by b) one_or_more optional, followed_by d.
    Events:  c a1 b1 a2 b2 d.
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).one_or_more().optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, C_A1_B1_A2_B2_D)

    same_matches(matches, [[C, D], [C, A1, B1, D], [C, A1, B1, A2, B2, D]])


def test_group_followed_by_one_or_more_with_until():
    """Flink: GroupITCase#testGroupFollowedByOneOrMoreWithUntilCondition.

    Pattern: c, followed_by (a followed_by b) one_or_more until(name == d), followed_by d.
    Events:  c a1 b1 a2 b2 d.
    The until condition stops the group loop at d, which is then taken by "end".
    (Flink additionally checks that only the initial partial match remains afterwards, an
    internal-state detail not visible through this API.)
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by(a_then_b()).one_or_more().until(named("d"))
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, C_A1_B1_A2_B2_D)

    same_matches(matches, [[C, A1, B1, D], [C, A1, B1, A2, B2, D]])


# ---------------------------------------------------------------------------------------------
# followed_by_any a group
# ---------------------------------------------------------------------------------------------

A3 = Event(45, "a", 4.0)
B3 = Event(46, "b", 5.0)
D_LATE = Event(47, "d", 6.0)
THREE_PAIRS = [(C, 1), (A1, 2), (B1, 3), (A2, 4), (B2, 5), (A3, 6), (B3, 7), (D_LATE, 8)]


def test_group_followed_by_any_times_combinations():
    """Flink: GroupITCase#testGroupFollowedByAnyTimesCombinations.

    Pattern: c, followed_by_any (a followed_by b) times(2) allow_combinations, followed_by d.
    Events:  c a1 b1 a2 b2 a3 b3 d.
    Any two of the three (a b) pairs, in order.
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any(a_then_b()).times(2).allow_combinations()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, THREE_PAIRS)

    same_matches(
        matches,
        [
            [C, A1, B1, A2, B2, D_LATE],
            [C, A1, B1, A3, B3, D_LATE],
            [C, A2, B2, A3, B3, D_LATE],
        ],
    )


def test_group_followed_by_any_times_optional():
    """Flink: GroupITCase#testGroupFollowedByAnyTimesOptional.

    Pattern: c, followed_by_any (a followed_by b) times(2) optional, followed_by d.
    Events:  c a1 b1 a2 b2 a3 b3 d.
    Without allow_combinations the two iterations are adjacent pairs: (1,2) or (2,3); or the
    group is skipped.
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any(a_then_b()).times(2).optional()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, THREE_PAIRS)

    same_matches(
        matches,
        [
            [C, D_LATE],
            [C, A1, B1, A2, B2, D_LATE],
            [C, A2, B2, A3, B3, D_LATE],
        ],
    )


def test_group_followed_by_any_one_or_more():
    """Flink: GroupITCase#testGroupFollowedByAnyOneOrMore.

    Pattern: c, followed_by_any (a followed_by b) one_or_more, followed_by d.
    Events:  c a1 b1 a2 b2 a3 b3 d.
    Runs of consecutive (a b) pairs starting at any pair.
    """
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any(a_then_b()).one_or_more()
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, THREE_PAIRS)

    same_matches(
        matches,
        [
            [C, A1, B1, D_LATE],
            [C, A2, B2, D_LATE],
            [C, A3, B3, D_LATE],
            [C, A1, B1, A2, B2, D_LATE],
            [C, A2, B2, A3, B3, D_LATE],
            [C, A1, B1, A2, B2, A3, B3, D_LATE],
        ],
    )


# ---------------------------------------------------------------------------------------------
# next a group, consecutive groups
# ---------------------------------------------------------------------------------------------


def test_group_next_zero_or_more_consecutive():
    """Flink: GroupITCase#testGroupNextZeroOrMore.

    Pattern: c, next (a followed_by b) one_or_more optional consecutive, followed_by d.
    Events:  c@1 a1@3 b1@4 a2@5 b2@6 a3@7 b3@8 d@9.
    The group must start right after c and its iterations must be back to back.
    """
    c = Event(40, "c", 1.0)
    a1 = Event(41, "a", 2.0)
    b1 = Event(42, "b", 3.0)
    a2 = Event(43, "a", 3.0)
    b2 = Event(44, "b", 3.0)
    a3 = Event(45, "a", 4.0)
    b3 = Event(46, "b", 3.0)
    d = Event(47, "d", 1.0)
    pattern = (
        Pattern.begin("start").where(named("c"))
        .next(a_then_b()).one_or_more().optional().consecutive()
        .followed_by("end").where(named("d"))
    )

    matches = feed(
        pattern, [(c, 1), (a1, 3), (b1, 4), (a2, 5), (b2, 6), (a3, 7), (b3, 8), (d, 9)]
    )

    same_matches(
        matches,
        [
            [c, d],
            [c, a1, b1, d],
            [c, a1, b1, a2, b2, d],
            [c, a1, b1, a2, b2, a3, b3, d],
        ],
    )


def test_group_starts_with_optional_stage():
    """Flink: GroupITCase#testGroupStartsWithOptionalPattern.

    Pattern: a, next (b optional, next c), next d.
    Events:  a@1 c@2 d@3.
    The group's first stage is optional, so "next" applies to c when b is skipped.
    """
    a = Event(40, "a", 1.0)
    c = Event(41, "c", 2.0)
    d = Event(42, "d", 3.0)
    group = Pattern.begin("middle1").where(named("b")).optional().next("middle2").where(named("c"))
    pattern = (
        Pattern.begin("start").where(named("a"))
        .next(group)
        .next("d").where(named("d"))
    )

    matches = feed(pattern, [(a, 1), (c, 2), (d, 3)])

    same_matches(matches, [[a, c, d]])


def test_followed_by_optional_group_then_next():
    """Flink: GroupITCase#testFollowedByOptionalGroupPattern.

    Pattern: a, followed_by (b next c) optional, next d.
    Events:  a@1 d1@2 d2@3.
    With the group skipped, "next d" means d must come right after a: only [a d1].
    """
    a = Event(40, "a", 1.0)
    d1 = Event(41, "d", 2.0)
    d2 = Event(42, "d", 3.0)
    group = Pattern.begin("middle1").where(named("b")).next("middle2").where(named("c"))
    pattern = (
        Pattern.begin("start").where(named("a"))
        .followed_by(group).optional()
        .next("d").where(named("d"))
    )

    matches = feed(pattern, [(a, 1), (d1, 2), (d2, 3)])

    same_matches(matches, [[a, d1]])


# ---------------------------------------------------------------------------------------------
# A group as the first stage
# ---------------------------------------------------------------------------------------------


def test_group_begin_with_times_range():
    """Flink: GroupITCase#testGroupBegin.

    Pattern: begin (a followed_by b) times(1, 2), followed_by d.
    Events:  a1@1 b1@2 a2@3 b2@4 d@5.
    """
    a1 = Event(41, "a", 2.0)
    b1 = Event(42, "b", 3.0)
    a2 = Event(43, "a", 4.0)
    b2 = Event(44, "b", 5.0)
    d = Event(45, "d", 6.0)
    pattern = (
        Pattern.begin(a_then_b()).times(1, 2)
        .followed_by("end").where(named("d"))
    )

    matches = feed(pattern, [(a1, 1), (b1, 2), (a2, 3), (b2, 4), (d, 5)])

    same_matches(matches, [[a1, b1, d], [a2, b2, d], [a1, b1, a2, b2, d]])


# ---------------------------------------------------------------------------------------------
# Negation after a group
# ---------------------------------------------------------------------------------------------

def _group_negation_scenario():
    c = Event(40, "c", 1.0)
    a1 = Event(41, "a", 2.0)
    b1 = Event(42, "b", 3.0)
    d = Event(43, "d", 3.0)
    a2 = Event(44, "a", 4.0)
    b2 = Event(45, "b", 5.0)
    e = Event(46, "e", 6.0)
    events = [(c, 1), (a1, 2), (b1, 3), (d, 4), (a2, 5), (b2, 6), (e, 7)]
    return events, [[c, a2, b2, e]]


def test_group_then_not_followed_by():
    """Flink: GroupITCase#testGroupNotFollowedBy.

    Pattern: c, followed_by_any (a followed_by b), not_followed_by d, followed_by e.
    Events:  c a1 b1 d a2 b2 e.
    (a1 b1) is followed by d before e, so only the (a2 b2) run matches.
    """
    events, expected = _group_negation_scenario()
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any(a_then_b())
        .not_followed_by("notPattern").where(named("d"))
        .followed_by("end").where(named("e"))
    )

    same_matches(feed(pattern, events), expected)


def test_group_then_not_next():
    """Flink: GroupITCase#testGroupNotNext.

    Pattern: c, followed_by_any (a followed_by b), not_next d, followed_by e.
    Events:  c a1 b1 d a2 b2 e.
    d comes right after b1, so only the (a2 b2) run matches.
    """
    events, expected = _group_negation_scenario()
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any(a_then_b())
        .not_next("notPattern").where(named("d"))
        .followed_by("end").where(named("e"))
    )

    same_matches(feed(pattern, events), expected)


# ---------------------------------------------------------------------------------------------
# Nested groups
# ---------------------------------------------------------------------------------------------


def test_nested_groups_optional_and_zero_or_more():
    """Flink: GroupITCase#testGroupNest.

    Pattern: d, followed_by (a, followed_by (b followed_by c) one_or_more optional) optional,
    followed_by e.
    Events:  d@1 a1@2 b1@3 c1@4 b2@5 c2@6 e@7.
    """
    d = Event(40, "d", 1.0)
    a1 = Event(41, "a", 2.0)
    b1 = Event(42, "b", 3.0)
    c1 = Event(43, "c", 4.0)
    b2 = Event(44, "b", 5.0)
    c2 = Event(45, "c", 4.0)
    e = Event(46, "e", 6.0)
    b_then_c = Pattern.begin("middle2").where(named("b")).followed_by("middle3").where(named("c"))
    inner = (
        Pattern.begin("middle1").where(named("a"))
        .followed_by(b_then_c).one_or_more().optional()
    )
    pattern = (
        Pattern.begin("start").where(named("d"))
        .followed_by(inner).optional()
        .followed_by("end").where(named("e"))
    )

    matches = feed(pattern, [(d, 1), (a1, 2), (b1, 3), (c1, 4), (b2, 5), (c2, 6), (e, 7)])

    same_matches(
        matches,
        [
            [d, e],
            [d, a1, e],
            [d, a1, b1, c1, e],
            [d, a1, b1, c1, b2, c2, e],
        ],
    )


# Events of Flink's testGroupNestTimes / testGroupNestTimesConsecutive.
N_D = Event(40, "d", 1.0)
N_A1 = Event(41, "a", 2.0)
N_B1 = Event(42, "b", 3.0)
N_C1 = Event(43, "c", 4.0)
N_B2 = Event(44, "b", 5.0)
N_C2 = Event(45, "c", 4.0)
N_B3 = Event(46, "b", 5.0)
N_C3 = Event(47, "c", 4.0)
N_A2 = Event(48, "a", 2.0)
N_B4 = Event(49, "b", 3.0)
N_C4 = Event(50, "c", 4.0)
N_B5 = Event(51, "b", 5.0)
N_C5 = Event(52, "c", 4.0)
N_B6 = Event(53, "b", 5.0)
N_C6 = Event(54, "c", 4.0)
N_E = Event(55, "e", 6.0)
FIRST_BLOCK = [N_A1, N_B1, N_C1, N_B2, N_C2, N_B3, N_C3]
SECOND_BLOCK = [N_A2, N_B4, N_C4, N_B5, N_C5, N_B6, N_C6]


def _nested_times(consecutive: bool) -> Pattern:
    """d, followed_by_any (a, followed_by (b followed_by c) times(3)) times(0, 2), followed_by e;
    with ``consecutive`` on both group quantifiers when requested."""
    b_then_c = Pattern.begin("middle2").where(named("b")).followed_by("middle3").where(named("c"))
    inner = Pattern.begin("middle1").where(named("a")).followed_by(b_then_c).times(3)
    if consecutive:
        inner = inner.consecutive()
    outer = Pattern.begin("start").where(named("d")).followed_by_any(inner).times(0, 2)
    if consecutive:
        outer = outer.consecutive()
    return outer.followed_by("end").where(named("e"))


def test_nested_groups_with_times():
    """Flink: GroupITCase#testGroupNestTimes.

    Pattern: d, followed_by_any (a, followed_by (b followed_by c) times(3)) times(0, 2),
    followed_by e.
    Events:  d a1 b1 c1 b2 c2 b3 c3 a2 b4 c4 b5 c5 b6 c6 e  (timestamps 1..16).
    The outer group is skipped, taken for either a-block, or taken for both.
    """
    events = [(ev, ts) for ts, ev in enumerate([N_D, *FIRST_BLOCK, *SECOND_BLOCK, N_E], 1)]

    matches = feed(_nested_times(consecutive=False), events)

    same_matches(
        matches,
        [
            [N_D, N_E],
            [N_D, *FIRST_BLOCK, N_E],
            [N_D, *SECOND_BLOCK, N_E],
            [N_D, *FIRST_BLOCK, *SECOND_BLOCK, N_E],
        ],
    )


def test_nested_groups_with_times_consecutive():
    """Flink: GroupITCase#testGroupNestTimesConsecutive.

    Same pattern with consecutive() on both group quantifiers.
    Events:  d a1 b1 c1 b2 c2 b3 c3 a2 b4 c4 breaking b5 c5 b6 c6 e  (timestamps 1..17).
    The "breaking" event interrupts the second block's (b c) repetitions, so only the
    first block can be taken.
    """
    breaking = Event(0, "breaking", 99.0)
    sequence = [N_D, *FIRST_BLOCK, N_A2, N_B4, N_C4, breaking, N_B5, N_C5, N_B6, N_C6, N_E]
    events = [(ev, ts) for ts, ev in enumerate(sequence, 1)]

    matches = feed(_nested_times(consecutive=True), events)

    same_matches(matches, [[N_D, N_E], [N_D, *FIRST_BLOCK, N_E]])
