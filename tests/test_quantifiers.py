"""Quantifiers: ``one_or_more``, ``times(n)``, ``times(n, m)``, ``times_or_more(n)``,
``optional`` and the inner contiguity of looping stages (``consecutive`` /
``allow_combinations``).

Every scenario and expected result is ported from FlinkCEP's test-suite
(``NFAITCase``, ``TimesRangeITCase``, ``TimesOrMoreITCase``, ``SameElementITCase``);
the Flink test method is named in each docstring.  Results are compared
order-insensitively (Flink's ``comparePatterns``) unless stated otherwise.

Notation used in docstrings: ``c a{2,} b`` means a stage matching name "c", a
looping stage matching "a" at least twice, then a stage matching "b"; ``-next->``,
``-fb->`` (followed_by) and ``-any->`` (followed_by_any) give the contiguity
*into* a stage.

Inner contiguity of a looping stage (between the events the loop takes):

* default — relaxed, skip till next: non-matching events in between are skipped,
  but each matching event is taken (no skipping of matching events);
* ``consecutive()`` — strict: the loop's events must be adjacent;
* ``allow_combinations()`` — skip till any: any subsequence of matching events.
"""

from __future__ import annotations

from itertools import combinations

import pytest
from support import Event, feed, run, same_matches, stream

from cep import Pattern


def named(name: str):
    return lambda e: e.name == name


IS_A = named("a")
IS_B = named("b")
IS_C = named("c")

# Flink's ``ConsecutiveData`` (also the values most NFAITCase tests use locally).
C = Event(40, "c", 1.0)
A1 = Event(41, "a", 2.0)
A2 = Event(42, "a", 3.0)
A3 = Event(43, "a", 4.0)
A4 = Event(43, "a", 5.0)
B = Event(44, "b", 5.0)
F = Event(23, "f", 1.0)  # filler that matches no stage
D = Event(50, "d", 6.0)  # filler that matches no stage

# c f a1 f a2 a3 b — used by many times / times-range / times-or-more tests.
C_F_A1_F_A2_A3_B = [(C, 1), (F, 2), (A1, 3), (F, 4), (A2, 5), (A3, 6), (B, 7)]
# c a1 f a2 f a3 b — ``next`` into the quantified stage.
C_A1_F_A2_F_A3_B = [(C, 1), (A1, 2), (F, 3), (A2, 4), (F, 5), (A3, 6), (B, 7)]
# c a1 a2 a3 b (timestamps with gaps, no intervening events).
C_A1_A2_A3_B = [(C, 1), (A1, 2), (A2, 4), (A3, 6), (B, 7)]
# c f b — no "a" at all.
C_F_B = [(C, 1), (F, 2), (B, 7)]


def c_then_a(link: str) -> Pattern:
    """``start(c) -link-> middle(a)``; the caller adds the quantifier and the end."""
    return getattr(Pattern.begin("start").where(IS_C), link)("middle").where(IS_A)


def then_b(p: Pattern) -> Pattern:
    """``... -fb-> end1(b)``."""
    return p.followed_by("end1").where(IS_B)


# =========================================================================== one_or_more


def test_one_or_more_without_condition_takes_every_following_event():
    """NFAITCase.testNoConditionLoopingNFA.

    start -fb-> end{1,} (no conditions); events a b c d e.  Every start begins a
    loop that takes each subsequent event; a match is emitted per take.
    """
    a, b, c, d, e = (Event(40 + i, n, 1.0 + i) for i, n in enumerate("abcde"))
    pattern = Pattern.begin("start").followed_by("end").one_or_more()
    same_matches(
        feed(pattern, stream(a, b, c, d, e)),
        [
            [a, b, c, d, e], [a, b, c, d], [a, b, c], [a, b],
            [b, c, d, e], [b, c, d], [b, c],
            [c, d, e], [c, d],
            [d, e],
        ],
    )  # fmt: skip


def test_one_or_more_ending_the_pattern_emits_every_prefix():
    """NFAITCase.testEndWithOneOrMore.

    c -fb-> a{1,} (pattern ends with the loop); events c a1 a2 a3.
    Matches: [c a1], [c a1 a2], [c a1 a2 a3].
    """
    pattern = c_then_a("followed_by").one_or_more()
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (A2, 4), (A3, 5)]),
        [[C, A1, A2, A3], [C, A1, A2], [C, A1]],
    )


def test_one_or_more_entered_with_followed_by_any():
    """NFAITCase.testAtLeastOneEager.

    c -any-> a{1,} (default inner contiguity) -any-> b; events c a1 a2 a3 b.
    The loop may *start* at any a (followed_by_any) but then takes every later a
    (skip till next): no [c a1 a3 b].
    """
    pattern = c_then_a("followed_by_any").one_or_more().followed_by_any("end1").where(IS_B)
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (A2, 4), (A3, 5), (B, 6)]),
        [
            [C, A1, A2, A3, B],
            [C, A1, A2, B],
            [C, A2, A3, B],
            [C, A3, B],
            [C, A2, B],
            [C, A1, B],
        ],
    )


def test_one_or_more_with_combinations():
    """NFAITCase.testAtLeastOne.

    c -any-> a{1,} allow_combinations -any-> b; events c a1 a2 b.
    """
    pattern = (
        c_then_a("followed_by_any")
        .one_or_more()
        .allow_combinations()
        .followed_by_any("end1")
        .where(IS_B)
    )
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (A2, 4), (B, 6)]),
        [[C, A1, A2, B], [C, A1, B], [C, A2, B]],
    )


def test_pattern_beginning_with_one_or_more_combinations():
    """NFAITCase.testBeginWithAtLeastOne.

    a{1,} allow_combinations -fb-> b; events a1 a2 a3 b.
    Every non-empty subsequence of the a's, followed by b: 7 matches.
    """
    s1 = Event(41, "a", 2.0)
    s2 = Event(42, "a", 3.0)
    s3 = Event(42, "a", 4.0)
    end = Event(44, "b", 5.0)
    pattern = (
        Pattern.begin("start")
        .where(IS_A)
        .one_or_more()
        .allow_combinations()
        .followed_by("end")
        .where(IS_B)
    )
    same_matches(
        feed(pattern, [(s1, 3), (s2, 4), (s3, 5), (end, 6)]),
        [
            [s1, s2, s3, end],
            [s1, s2, end],
            [s1, s3, end],
            [s2, s3, end],
            [s1, end],
            [s2, end],
            [s3, end],
        ],
    )


# The three inner contiguities of a loop over the same input (Flink's ``testOneOrMore``
# helper): c d a1 a2 a3 d a4 b, with a2 and a3 sharing timestamp 4.
_INNER_EVENTS = [(C, 1), (D, 2), (A1, 3), (A2, 4), (A3, 4), (D, 5), (A4, 6), (B, 7)]


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        pytest.param(
            "consecutive",
            [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B]],
            id="strict-testStrictOneOrMore",
        ),
        pytest.param(
            "default",
            [[C, A1, A2, A3, A4, B], [C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B]],
            id="skip_till_next-testSkipTillNextOneOrMore",
        ),
        pytest.param(
            "allow_combinations",
            [
                [C, A1, A2, A3, A4, B],
                [C, A1, A3, A4, B],
                [C, A1, A2, A3, B],
                [C, A1, A2, A4, B],
                [C, A1, A2, B],
                [C, A1, A3, B],
                [C, A1, A4, B],
                [C, A1, B],
            ],
            id="skip_till_any-testSkipTillAnyOneOrMore",
        ),
    ],
)
def test_inner_contiguity_of_one_or_more(inner, expected):
    """NFAITCase.testStrictOneOrMore / testSkipTillNextOneOrMore / testSkipTillAnyOneOrMore.

    c -fb-> a{1,} <inner> -fb-> b over c d a1 a2 a3 d a4 b.  The loop always
    starts at a1 (followed_by).  consecutive stops at the d; the default takes
    every a; allow_combinations takes any subsequence that starts with a1.
    """
    loop = c_then_a("followed_by").one_or_more()
    if inner != "default":
        loop = getattr(loop, inner)()
    same_matches(feed(then_b(loop), _INNER_EVENTS), expected)


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        pytest.param(
            "consecutive",
            [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B], [C, B]],
            id="strict-testStrictEagerZeroOrMore",
        ),
        pytest.param(
            "default",
            [
                [C, A1, A2, A3, A4, B],
                [C, A1, A2, A3, B],
                [C, A1, A2, B],
                [C, A1, B],
                [C, B],
            ],
            id="skip_till_next-testSkipTillNextZeroOrMore",
        ),
        pytest.param(
            "allow_combinations",
            [
                [C, A1, A2, A3, A4, B],
                [C, A1, A2, A4, B],
                [C, A1, A3, A4, B],
                [C, A1, A4, B],
                [C, A1, A2, A3, B],
                [C, A1, A2, B],
                [C, A1, A3, B],
                [C, A1, B],
                [C, B],
            ],
            id="skip_till_any-testSkipTillAnyZeroOrMore",
        ),
    ],
)
def test_inner_contiguity_of_zero_or_more(inner, expected):
    """NFAITCase.testStrictEagerZeroOrMore / testSkipTillNextZeroOrMore /
    testSkipTillAnyZeroOrMore.

    Same as above with the loop made optional (c -fb-> a{0,} <inner> -fb-> b):
    the same matches plus [c b].
    """
    loop = c_then_a("followed_by").one_or_more().optional()
    if inner != "default":
        loop = getattr(loop, inner)()
    same_matches(feed(then_b(loop), _INNER_EVENTS), expected)


def test_patterns_are_immutable_so_variants_can_share_a_prefix():
    """Builder calls return new patterns: variants derived from one shared prefix
    keep their own quantifiers (expected results: the three Flink tests above)."""
    base = c_then_a("followed_by").one_or_more()
    strict = then_b(base.consecutive())
    relaxed = then_b(base)
    anything = then_b(base.allow_combinations())
    # Building the variants must not have changed the shared prefix.
    same_matches(
        feed(relaxed, _INNER_EVENTS),
        [[C, A1, A2, A3, A4, B], [C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B]],
    )
    same_matches(feed(strict, _INNER_EVENTS), [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B]])
    assert len(feed(anything, _INNER_EVENTS)) == 8


def test_camel_case_quantifier_aliases_are_identical():
    """``oneOrMore`` / ``allowCombinations`` are aliases (NFAITCase.testSkipTillAnyOneOrMore)."""
    camel = then_b(c_then_a("followedBy").oneOrMore().allowCombinations())
    snake = then_b(c_then_a("followed_by").one_or_more().allow_combinations())
    assert feed(camel, _INNER_EVENTS) == feed(snake, _INNER_EVENTS)
    assert len(feed(camel, _INNER_EVENTS)) == 8


@pytest.mark.parametrize("optional", [True, False], ids=["zero_or_more", "one_or_more"])
def test_pattern_starting_with_a_consecutive_loop(optional):
    """NFAITCase.testStartWithZeroOrMoreStrict / testStartWithOneOrMoreStrict.

    a{1,} consecutive (optionally a{0,}) as the whole pattern; events
    c a1 c a2 a3.  Matches [a1], [a2], [a3], [a2 a3] — the c between a1 and a2
    breaks the run; an optional single-stage pattern never emits an empty match.
    """
    loop = Pattern.begin("start").where(IS_A).one_or_more()
    if optional:
        loop = loop.optional()
    pattern = loop.consecutive()
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (C, 4), (A2, 5), (A3, 6)]),
        [[A1], [A2, A3], [A2], [A3]],
    )


def test_one_or_more_consecutive_optional_after_followed_by_any():
    """NFAITCase.testOneOrMoreStrictOptional.

    c -any-> a{0,} consecutive -fb-> b over c f a1 f a2 a3 b.  Runs of adjacent
    a's may start at any a: [a1], [a2], [a3], [a2 a3]; plus the empty loop.
    """
    pattern = then_b(c_then_a("followed_by_any").one_or_more().consecutive().optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A2, A3, B], [C, A1, B], [C, A2, B], [C, A3, B], [C, B]],
    )


def test_next_into_optional_consecutive_loop():
    """NFAITCase.testNextZeroOrMore.

    start -next-> middle{0,} consecutive -fb-> end; events start, event,
    middle x3, end.  The "event" right after start prevents the loop from
    starting (next), so the only match skips the loop: [start, end].
    """
    start = Event(40, "start", 1.0)
    end = Event(46, "end", 1.0)
    events = [
        (start, 1),
        (Event(1, "event", 1.0), 2),
        (Event(40, "middle", 2.0), 3),
        (Event(40, "middle", 3.0), 4),
        (Event(40, "middle", 4.0), 5),
        (end, 6),
    ]
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .next("middle")
        .where(named("middle"))
        .one_or_more()
        .optional()
        .consecutive()
        .followed_by("end")
        .where(named("end"))
    )
    same_matches(feed(pattern, events), [[start, end]])


def test_multiple_takes_by_two_adjacent_loops():
    """NFAITCase.testMultipleTakesVersionCollision.

    c -fb-> middle1 a{1,} allow_combinations -fb-> middle2 a{1,} allow_combinations
    -fb-> b; events c a1 a2 a3 a4 a5 b.  Flink lists 20 matches (flattened, so
    different splits between middle1 and middle2 look identical).
    """
    c = Event(40, "c", 1.0)
    m1, m2, m3, m4, m5 = (Event(41, "a", p) for p in (2.0, 3.0, 4.0, 5.0, 6.0))
    end = Event(44, "b", 5.0)
    events = [(c, 1), (m1, 3), (m2, 4), (m3, 5), (m4, 6), (m5, 7), (end, 10)]
    pattern = (
        Pattern.begin("start")
        .where(IS_C)
        .followed_by("middle1")
        .where(IS_A)
        .one_or_more()
        .allow_combinations()
        .followed_by("middle2")
        .where(IS_A)
        .one_or_more()
        .allow_combinations()
        .followed_by("end")
        .where(IS_B)
    )
    same_matches(
        feed(pattern, events),
        [
            [c, m1, m2, m3, m4, m5, end],
            [c, m1, m2, m3, m4, m5, end],
            [c, m1, m2, m3, m4, m5, end],
            [c, m1, m2, m3, m4, m5, end],
            [c, m1, m2, m3, m4, end],
            [c, m1, m2, m4, m5, end],
            [c, m1, m2, m3, m4, end],
            [c, m1, m2, m3, m5, end],
            [c, m1, m3, m4, m5, end],
            [c, m1, m3, m4, m5, end],
            [c, m1, m2, m3, m4, end],
            [c, m1, m2, m3, m5, end],
            [c, m1, m2, m4, m5, end],
            [c, m1, m2, m3, end],
            [c, m1, m3, m4, end],
            [c, m1, m4, m5, end],
            [c, m1, m2, m3, end],
            [c, m1, m2, m4, end],
            [c, m1, m2, m5, end],
            [c, m1, m2, end],
        ],
    )


# =========================================================================== zero or more


def test_zero_or_more_with_combinations():
    """NFAITCase.testZeroOrMore.

    c -any-> a{0,} allow_combinations -fb-> b; events c a1 a2 b.
    """
    pattern = then_b(c_then_a("followed_by_any").one_or_more().allow_combinations().optional())
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (A2, 4), (B, 6)]),
        [[C, A1, A2, B], [C, A1, B], [C, A2, B], [C, B]],
    )


def test_zero_or_more_skips_irrelevant_events():
    """NFAITCase.testEagerZeroOrMore.

    c -fb-> a{0,} -fb-> b; events c a1 a2 d a3 b.  The d is skipped inside the
    loop; the loop takes every a: [c a1 a2 a3 b], [c a1 a2 b], [c a1 b], [c b].
    """
    pattern = then_b(c_then_a("followed_by").one_or_more().optional())
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (A2, 4), (D, 5), (A3, 6), (B, 7)]),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B], [C, B]],
    )


def test_pattern_beginning_with_zero_or_more():
    """NFAITCase.testBeginWithZeroOrMore.

    a{0,} -fb-> b; events a1 a2 a3 b (a2 and a3 are equal values but distinct
    events).  Each a starts a loop; the empty loop gives [b]: 7 matches.
    """
    m1 = Event(40, "a", 2.0)
    m2 = Event(41, "a", 3.0)
    m3 = Event(41, "a", 3.0)
    end = Event(42, "b", 4.0)
    pattern = (
        Pattern.begin("middle").where(IS_A).one_or_more().optional().followed_by("end").where(IS_B)
    )
    same_matches(
        feed(pattern, [(m1, 3), (m2, 4), (m3, 5), (end, 6)]),
        [
            [m1, m2, m3, end],
            [m1, m2, end],
            [m2, m3, end],
            [m1, end],
            [m2, end],
            [m3, end],
            [end],
        ],
    )


def test_zero_or_more_ending_the_pattern():
    """NFAITCase.testEndWithZeroOrMore.

    c -fb-> a{0,} (pattern ends with the loop); events c a1 a2 a3.
    Matches [c], [c a1], [c a1 a2], [c a1 a2 a3].
    """
    pattern = c_then_a("followed_by").one_or_more().optional()
    same_matches(
        feed(pattern, [(C, 1), (A1, 3), (A2, 4), (A3, 5)]),
        [[C, A1, A2, A3], [C, A1, A2], [C, A1], [C]],
    )


def test_single_stage_zero_or_more():
    """NFAITCase.testStartAndEndWithZeroOrMore.

    a{0,} is the whole pattern; events c a1 a2 a3 d d d.  Each a starts a loop;
    no empty match is ever emitted.
    """
    events = [
        (C, 1),
        (A1, 3),
        (A2, 4),
        (A3, 5),
        (Event(44, "d", 5.0), 6),
        (Event(45, "d", 5.0), 6),
        (Event(46, "d", 5.0), 6),
    ]
    pattern = Pattern.begin("start").where(IS_A).one_or_more().optional()
    same_matches(
        feed(pattern, events),
        [[A1, A2, A3], [A1, A2], [A1], [A2, A3], [A2], [A3]],
    )


def test_zero_or_more_after_zero_or_more():
    """NFAITCase.testZeroOrMoreAfterZeroOrMore.

    c -any-> middle-first a{0,} allow_combinations
      -fb-> middle-second d{0,} allow_combinations -fb-> e;
    events c a d1 d2 e.  Entering middle-second with followed_by takes d1 first,
    so there is no [c d2 e] and no [c a d2 e].
    """
    a = Event(41, "a", 2.0)
    d1 = Event(42, "d", 3.0)
    d2 = Event(43, "d", 4.0)
    e = Event(44, "e", 4.0)
    pattern = (
        Pattern.begin("start")
        .where(IS_C)
        .followed_by_any("middle-first")
        .where(IS_A)
        .one_or_more()
        .allow_combinations()
        .optional()
        .followed_by("middle-second")
        .where(named("d"))
        .one_or_more()
        .allow_combinations()
        .optional()
        .followed_by("end")
        .where(named("e"))
    )
    same_matches(
        feed(pattern, [(C, 1), (a, 3), (d1, 4), (d2, 5), (e, 6)]),
        [
            [C, a, d1, d2, e],
            [C, a, d1, e],
            [C, d1, d2, e],
            [C, d1, e],
            [C, a, e],
            [C, e],
        ],
    )


def test_zero_or_more_after_branching():
    """NFAITCase.testZeroOrMoreAfterBranching.

    c -any-> branching(a) -any-> merging(f) -any-> kleene d{0,} allow_combinations
    -fb-> end(e); events c a1 a2 f d1 d2 e.  Both a's branch; each branch merges
    on f and then takes any subset of {d1, d2}: 2 x 4 = 8 matches.
    """
    a1 = Event(41, "a", 2.0)
    a2 = Event(42, "a", 3.0)
    f = Event(42, "f", 3.0)
    k1 = Event(43, "d", 4.0)
    k2 = Event(44, "d", 4.0)
    e = Event(45, "e", 4.0)
    pattern = (
        Pattern.begin("start")
        .where(IS_C)
        .followed_by_any("branching")
        .where(IS_A)
        .followed_by_any("merging")
        .where(named("f"))
        .followed_by_any("kleene")
        .where(named("d"))
        .one_or_more()
        .allow_combinations()
        .optional()
        .followed_by("end")
        .where(named("e"))
    )
    same_matches(
        feed(pattern, [(C, 1), (a1, 3), (a2, 4), (f, 5), (k1, 6), (k2, 7), (e, 8)]),
        [[C, a, f, *ks, e] for a in (a1, a2) for ks in ([], [k1], [k2], [k1, k2])],
    )


def test_complex_branching_after_zero_or_more():
    """NFAITCase.testComplexBranchingAfterZeroOrMore.

    c -any-> a{0,} allow_combinations -any-> end1(b) -any-> end2(d) -any-> end3(e);
    events c a1 a2 a3 b d1 d2 e.  8 subsets of the a's x 2 choices of d = 16.
    """
    a1, a2, a3 = Event(41, "a", 2.0), Event(42, "a", 3.0), Event(43, "a", 4.0)
    end1 = Event(44, "b", 5.0)
    end2 = Event(45, "d", 6.0)
    end3 = Event(46, "d", 7.0)
    end4 = Event(47, "e", 8.0)
    events = [(C, 1), (a1, 3), (a2, 4), (a3, 5), (end1, 6), (end2, 7), (end3, 8), (end4, 9)]
    pattern = (
        c_then_a("followed_by_any")
        .one_or_more()
        .allow_combinations()
        .optional()
        .followed_by_any("end1")
        .where(IS_B)
        .followed_by_any("end2")
        .where(named("d"))
        .followed_by_any("end3")
        .where(named("e"))
    )
    same_matches(
        feed(pattern, events),
        [
            [C, a1, a2, a3, end1, end2, end4],
            [C, a1, a2, end1, end2, end4],
            [C, a1, a3, end1, end2, end4],
            [C, a2, a3, end1, end2, end4],
            [C, a1, end1, end2, end4],
            [C, a2, end1, end2, end4],
            [C, a3, end1, end2, end4],
            [C, end1, end2, end4],
            [C, a1, a2, a3, end1, end3, end4],
            [C, a1, a2, end1, end3, end4],
            [C, a1, a3, end1, end3, end4],
            [C, a2, a3, end1, end3, end4],
            [C, a1, end1, end3, end4],
            [C, a2, end1, end3, end4],
            [C, a3, end1, end3, end4],
            [C, end1, end3, end4],
        ],
    )


# =========================================================================== optional


def test_optional_single_stage_in_the_middle():
    """NFAITCase.testOptional.

    c -fb-> a? -fb-> b; events c a b -> [c a b] and [c b].
    """
    a = Event(43, "a", 4.0)
    pattern = then_b(c_then_a("followed_by").optional())
    same_matches(feed(pattern, [(C, 1), (a, 5), (B, 6)]), [[C, a, B], [C, B]])


def test_optional_first_stage():
    """NFAITCase.testStartWithOptional.

    c? -fb-> b; events c b -> [c b] and [b].
    """
    pattern = Pattern.begin("start").where(IS_C).optional().followed_by("end1").where(IS_B)
    same_matches(feed(pattern, [(C, 1), (B, 6)]), [[C, B], [B]])


def test_optional_last_stage():
    """NFAITCase.testEndWithOptional.

    c -fb-> a? (pattern ends with the optional stage); events c a.
    Matches [c] (emitted as soon as c arrives) and [c a].
    """
    pattern = c_then_a("followed_by").optional()
    same_matches(feed(pattern, [(C, 1), (A1, 3)]), [[C, A1], [C]])


def test_optional_stages_around_a_loop_with_repeated_event():
    """SameElementITCase.testRepeatingPatternWSameElement.

    c -fb-> middle1 a{0,} -fb-> middle2 b? -fb-> end(a).
    Events c, a1 (the same object twice), a2, d, b, a3.  The last stage also
    matches "a", so an a can end the match.
    """
    c = Event(40, "c", 1.0)
    a1 = Event(40, "a", 2.0)
    a2 = Event(40, "a", 3.0)
    a3 = Event(40, "a", 4.0)
    b = Event(40, "b", 5.0)
    events = [(c, 1), (a1, 3), (a1, 3), (a2, 3), (Event(40, "d", 6.0), 5), (b, 6), (a3, 7)]
    pattern = (
        Pattern.begin("start")
        .where(IS_C)
        .followed_by("middle1")
        .where(IS_A)
        .one_or_more()
        .optional()
        .followed_by("middle2")
        .where(IS_B)
        .optional()
        .followed_by("end")
        .where(IS_A)
    )
    same_matches(
        feed(pattern, events),
        [
            [c, a1],
            [c, a1, a1],
            [c, b, a3],
            [c, a1, a1, a2],
            [c, a1, b, a3],
            [c, a1, a1, a2, a3],
            [c, a1, a1, b, a3],
            [c, a1, a1, a2, b, a3],
        ],
    )


# =========================================================================== times(n)


def test_times_after_next_with_combinations():
    """NFAITCase.testTimes.

    c -next-> a{2} allow_combinations -fb-> b; events c a1 a2 a3 b.
    ``next`` pins the first a to a1; the second may be any later a.
    """
    pattern = then_b(c_then_a("next").times(2).allow_combinations())
    same_matches(
        feed(pattern, [(C, 1), (A1, 2), (A2, 3), (A3, 4), (B, 6)]),
        [[C, A1, A2, B], [C, A1, A3, B]],
    )


def test_pattern_starting_with_consecutive_times():
    """NFAITCase.testStartWithTimes.

    a{2} consecutive -fb-> b; events a1 a2 a3 b -> [a1 a2 b], [a2 a3 b].
    """
    pattern = (
        Pattern.begin("middle").where(IS_A).times(2).consecutive().followed_by("end1").where(IS_B)
    )
    same_matches(
        feed(pattern, [(A1, 2), (A2, 3), (A3, 4), (B, 6)]),
        [[A1, A2, B], [A2, A3, B]],
    )


def test_times_after_next_skips_fillers_inside_the_loop():
    """NFAITCase.testTimesNonStrictWithNext.

    c -next-> a{2} allow_combinations -fb-> b over c a1 f a2 f a3 b.
    ``next`` only constrains the first a; inside the loop fillers are skipped.
    """
    pattern = then_b(c_then_a("next").times(2).allow_combinations())
    same_matches(
        feed(pattern, C_A1_F_A2_F_A3_B),
        [[C, A1, A2, B], [C, A1, A3, B]],
    )


def test_times_after_followed_by_takes_the_first_events():
    """NFAITCase.testTimesNotStrictWithFollowedByEager.

    c -fb-> a{2} -fb-> b over c a1 a2 a3 b -> only [c a1 a2 b].
    """
    pattern = then_b(c_then_a("followed_by").times(2))
    same_matches(feed(pattern, C_A1_A2_A3_B), [[C, A1, A2, B]])


def test_times_after_followed_by_any_with_combinations():
    """NFAITCase.testTimesNotStrictWithFollowedByNotEager.

    c -any-> a{2} allow_combinations -fb-> b over c a1 a2 a3 b: every pair of a's.
    (Flink writes two of these in non-take order; comparison is order-insensitive.)
    """
    pattern = then_b(c_then_a("followed_by_any").times(2).allow_combinations())
    same_matches(
        feed(pattern, C_A1_A2_A3_B),
        [[C, A1, A2, B], [C, A2, A3, B], [C, A1, A3, B]],
    )


def test_consecutive_times_after_next_broken_by_filler():
    """NFAITCase.testTimesStrictWithNextAndConsecutive.

    c -next-> a{2} consecutive -fb-> b over c a1 f a2 a3 b: a1 is adjacent to c
    but the f breaks the run, so there is no match.
    """
    events = [(C, 1), (A1, 2), (F, 3), (A2, 4), (A3, 6), (B, 7)]
    pattern = then_b(c_then_a("next").times(2).consecutive())
    assert feed(pattern, events) == []


def test_consecutive_times_after_followed_by_any():
    """NFAITCase.testTimesStrict (same scenario as TimesOrMoreITCase.testTimesOrMoreStrict).

    c -any-> a{2} consecutive -fb-> b over c f a1 f a2 a3 b -> only [c a2 a3 b].
    """
    pattern = then_b(c_then_a("followed_by_any").times(2).consecutive())
    same_matches(feed(pattern, C_F_A1_F_A2_A3_B), [[C, A2, A3, B]])


def test_times_with_combinations_after_followed_by_any():
    """NFAITCase.testTimesNonStrict.

    c -any-> a{2} allow_combinations -fb-> b over c f a1 f a2 a3 b: every pair.
    """
    pattern = then_b(c_then_a("followed_by_any").times(2).allow_combinations())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, B], [C, A1, A3, B], [C, A2, A3, B]],
    )


def test_optional_times_without_any_a():
    """NFAITCase.testTimesNonStrictOptional1.

    c -fb-> a{3}? -fb-> b over c f b -> [c b].
    """
    pattern = then_b(c_then_a("followed_by").times(3).optional())
    same_matches(feed(pattern, C_F_B), [[C, B]])


def test_optional_times_with_combinations():
    """NFAITCase.testTimesNonStrictOptional2.

    c -any-> a{2}? allow_combinations -fb-> b over c f a1 f a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times(2).allow_combinations().optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, B], [C, A1, A3, B], [C, A2, A3, B], [C, B]],
    )


def test_optional_times_after_followed_by_any():
    """NFAITCase.testTimesNonStrictOptional3.

    c -any-> a{2}? -fb-> b over c f a1 f a2 a3 b.  The loop can start at any a
    but then takes the next a: [c a1 a2 b], [c a2 a3 b] (Flink: "this exists
    because of the optional()"), and [c b].
    """
    pattern = then_b(c_then_a("followed_by_any").times(2).optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, B], [C, A2, A3, B], [C, B]],
    )


def test_optional_consecutive_times_after_followed_by_any():
    """NFAITCase.testTimesStrictOptional.

    c -any-> a{2}? consecutive -fb-> b over c f a1 f a2 a3 b -> [c a2 a3 b], [c b].
    """
    pattern = then_b(c_then_a("followed_by_any").times(2).consecutive().optional())
    same_matches(feed(pattern, C_F_A1_F_A2_A3_B), [[C, A2, A3, B], [C, B]])


def test_optional_consecutive_times_after_next():
    """NFAITCase.testTimesStrictOptional1.

    c -next-> a{2}? consecutive -fb-> b over c a1 a2 a3 b -> [c a1 a2 b], [c b].
    """
    pattern = then_b(c_then_a("next").times(2).consecutive().optional())
    same_matches(feed(pattern, C_A1_A2_A3_B), [[C, A1, A2, B], [C, B]])


def test_optional_times_with_combinations_after_next():
    """NFAITCase.testOptionalTimesNonStrictWithNext.

    c -next-> a{2}? allow_combinations -fb-> b over c a1 f a2 f a3 b.
    """
    pattern = then_b(c_then_a("next").times(2).allow_combinations().optional())
    same_matches(
        feed(pattern, C_A1_F_A2_F_A3_B),
        [[C, A1, A2, B], [C, A1, A3, B], [C, B]],
    )


def test_times_keeps_take_order_within_each_stage():
    """NFAITCase.testNFAResultOrdering — exact order, not just membership.

    start (name starts with "a-"){4} allow_combinations -any-> middle (name starts
    with "b-"){3} consecutive; events a-1 a-2 a-3 a-4 b-1 b-2 b-3.  Exactly one
    match; ``start`` lists a-1..a-4 and ``middle`` lists b-1..b-3, in arrival order.
    """
    starts = [Event(41, f"a-{i}", p) for i, p in zip(range(1, 5), (2.0, 3.0, 4.0, 5.0))]
    ends = [Event(41, f"b-{i}", p) for i, p in zip(range(1, 4), (6.0, 7.0, 8.0))]
    events = list(zip(starts + ends, [1, 3, 4, 5, 6, 7, 10]))
    pattern = (
        Pattern.begin("start")
        .where(lambda e: e.name.startswith("a-"))
        .times(4)
        .allow_combinations()
        .followed_by_any("middle")
        .where(lambda e: e.name.startswith("b-"))
        .times(3)
        .consecutive()
    )
    matches, _ = run(pattern, events)
    assert len(matches) == 1
    assert list(matches[0]["start"]) == starts
    assert list(matches[0]["middle"]) == ends


# =========================================================================== times(n, m)


def test_times_range_after_next_with_combinations():
    """TimesRangeITCase.testTimesRange.

    c -next-> a{1,3} allow_combinations -fb-> b over c a1 a2 a3 b.
    """
    pattern = then_b(c_then_a("next").times(1, 3).allow_combinations())
    same_matches(
        feed(pattern, [(C, 1), (A1, 2), (A2, 3), (A3, 4), (B, 6)]),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B], [C, A1, B]],
    )


def test_times_range_from_zero_is_optional():
    """TimesRangeITCase.testTimesRangeFromZero.

    c -next-> a{0,2} allow_combinations -fb-> b over c a1 a2 a3 b.
    ``times(0, 2)`` behaves as an optional ``times(1, 2)``; when the loop is
    skipped, b is reached with followed_by, giving [c b].
    """
    pattern = then_b(c_then_a("next").times(0, 2).allow_combinations())
    same_matches(
        feed(pattern, [(C, 1), (A1, 2), (A2, 3), (A3, 4), (B, 6)]),
        [[C, A1, A2, B], [C, A1, A3, B], [C, A1, B], [C, B]],
    )


def test_times_range_with_combinations_after_followed_by_any():
    """TimesRangeITCase.testTimesRangeNonStrict.

    c -any-> a{1,3} allow_combinations -fb-> b over c f a1 f a2 a3 b:
    every non-empty subset of {a1, a2, a3}.
    """
    pattern = then_b(c_then_a("followed_by_any").times(1, 3).allow_combinations())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, *subset, B] for n in (1, 2, 3) for subset in combinations([A1, A2, A3], n)],
    )


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p: p.times(0, 3).consecutive(), id="testTimesRangeStrict"),
        pytest.param(
            lambda p: p.times(1, 3).consecutive().optional(), id="testTimesRangeStrictOptional"
        ),
    ],
)
def test_consecutive_times_range_after_followed_by_any(make):
    """TimesRangeITCase.testTimesRangeStrict / testTimesRangeStrictOptional.

    c -any-> a{0,3} consecutive (equivalently a{1,3}? consecutive) -fb-> b over
    c f a1 f a2 a3 b: runs of adjacent a's are [a1], [a2], [a3], [a2 a3], or none.
    """
    pattern = then_b(make(c_then_a("followed_by_any")))
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A2, A3, B], [C, A1, B], [C, A2, B], [C, A3, B], [C, B]],
    )


def test_optional_consecutive_times_range_after_next():
    """TimesRangeITCase.testTimesRangeStrictOptional1.

    c -next-> a{1,3}? consecutive -fb-> b over c a1 a2 a3 b.
    """
    pattern = then_b(c_then_a("next").times(1, 3).consecutive().optional())
    same_matches(
        feed(pattern, C_A1_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, B], [C, B]],
    )


def test_optional_times_range_without_any_a():
    """TimesRangeITCase.testTimesRangeNonStrictOptional1.

    c -fb-> a{1,3}? -fb-> b over c f b -> [c b].
    """
    pattern = then_b(c_then_a("followed_by").times(1, 3).optional())
    same_matches(feed(pattern, C_F_B), [[C, B]])


def test_optional_times_range_with_combinations():
    """TimesRangeITCase.testTimesRangeNonStrictOptional2.

    c -any-> a{2,3}? allow_combinations -fb-> b over c f a1 f a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times(2, 3).allow_combinations().optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B], [C, A2, A3, B], [C, B]],
    )


def test_optional_times_range_after_followed_by_any():
    """TimesRangeITCase.testTimesRangeNonStrictOptional3.

    c -any-> a{2,3}? -fb-> b over c f a1 f a2 a3 b (default inner contiguity:
    no [c a1 a3 b]).
    """
    pattern = then_b(c_then_a("followed_by_any").times(2, 3).optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A2, A3, B], [C, B]],
    )


def test_times_range_after_next_with_combinations_and_fillers():
    """TimesRangeITCase.testTimesRangeNonStrictWithNext.

    c -next-> a{2,3} allow_combinations -fb-> b over c a1 f a2 f a3 b.
    """
    pattern = then_b(c_then_a("next").times(2, 3).allow_combinations())
    same_matches(
        feed(pattern, C_A1_F_A2_F_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B]],
    )


def test_times_range_after_followed_by():
    """TimesRangeITCase.testTimesRangeNotStrictWithFollowedBy.

    c -fb-> a{2,3} -fb-> b over c a1 a2 a3 b -> [c a1 a2 a3 b], [c a1 a2 b].
    """
    pattern = then_b(c_then_a("followed_by").times(2, 3))
    same_matches(feed(pattern, C_A1_A2_A3_B), [[C, A1, A2, A3, B], [C, A1, A2, B]])


def test_times_range_after_followed_by_any_with_combinations():
    """TimesRangeITCase.testTimesRangeNotStrictWithFollowedByAny.

    c -any-> a{2,3} allow_combinations -fb-> b over c a1 a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times(2, 3).allow_combinations())
    same_matches(
        feed(pattern, C_A1_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A2, A3, B], [C, A1, A3, B]],
    )


# =========================================================================== times_or_more(n)


def test_times_or_more_with_combinations():
    """TimesOrMoreITCase.testTimesOrMore.

    c -fb-> a{2,} allow_combinations -fb-> b over c a1 a2 a3 b.  The loop starts
    at a1 (followed_by), so every match contains a1.
    """
    pattern = then_b(c_then_a("followed_by").times_or_more(2).allow_combinations())
    same_matches(
        feed(pattern, [(C, 1), (A1, 2), (A2, 3), (A3, 4), (B, 6)]),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B]],
    )


def test_camel_case_times_or_more_alias_is_identical():
    """``timesOrMore`` is an alias of ``times_or_more`` (TimesOrMoreITCase.testTimesOrMore)."""
    events = [(C, 1), (A1, 2), (A2, 3), (A3, 4), (B, 6)]
    camel = then_b(c_then_a("followed_by").timesOrMore(2).allowCombinations())
    snake = then_b(c_then_a("followed_by").times_or_more(2).allow_combinations())
    assert feed(camel, events) == feed(snake, events)
    assert len(feed(camel, events)) == 3


def test_times_or_more_with_combinations_after_followed_by_any():
    """TimesOrMoreITCase.testTimesOrMoreNonStrict.

    c -any-> a{2,} allow_combinations -fb-> b over c f a1 f a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times_or_more(2).allow_combinations())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B], [C, A2, A3, B]],
    )


def test_optional_consecutive_times_or_more_after_followed_by_any():
    """TimesOrMoreITCase.testTimesOrMoreStrictOptional.

    c -any-> a{2,}? consecutive -fb-> b over c f a1 f a2 a3 b -> [c a2 a3 b], [c b].
    """
    pattern = then_b(c_then_a("followed_by_any").times_or_more(2).consecutive().optional())
    same_matches(feed(pattern, C_F_A1_F_A2_A3_B), [[C, A2, A3, B], [C, B]])


def test_optional_consecutive_times_or_more_after_next():
    """TimesOrMoreITCase.testTimesOrMoreStrictOptional2.

    c -next-> a{2,}? consecutive -fb-> b over c a1 a2 a3 b.
    """
    pattern = then_b(c_then_a("next").times_or_more(2).consecutive().optional())
    same_matches(
        feed(pattern, C_A1_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, B]],
    )


def test_optional_times_or_more_without_any_a():
    """TimesOrMoreITCase.testTimesOrMoreNonStrictOptional.

    c -fb-> a{2,}? -fb-> b over c f b -> [c b].
    """
    pattern = then_b(c_then_a("followed_by").times_or_more(2).optional())
    same_matches(feed(pattern, C_F_B), [[C, B]])


def test_optional_times_or_more_with_combinations():
    """TimesOrMoreITCase.testTimesOrMoreNonStrictOptional2.

    c -any-> a{2,}? allow_combinations -fb-> b over c f a1 f a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times_or_more(2).allow_combinations().optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B], [C, A2, A3, B], [C, B]],
    )


def test_optional_times_or_more_after_followed_by_any():
    """TimesOrMoreITCase.testTimesOrMoreNonStrictOptional3.

    c -any-> a{2,}? -fb-> b over c f a1 f a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times_or_more(2).optional())
    same_matches(
        feed(pattern, C_F_A1_F_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A2, A3, B], [C, B]],
    )


def test_times_or_more_after_next_with_combinations():
    """TimesOrMoreITCase.testTimesOrMoreNonStrictWithNext.

    c -next-> a{2,} allow_combinations -fb-> b over c a1 f a2 f a3 b.
    """
    pattern = then_b(c_then_a("next").times_or_more(2).allow_combinations())
    same_matches(
        feed(pattern, C_A1_F_A2_F_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A1, A3, B]],
    )


def test_times_or_more_after_followed_by():
    """TimesOrMoreITCase.testTimesOrMoreNotStrictWithFollowedBy.

    c -fb-> a{2,} -fb-> b over c a1 a2 a3 b -> [c a1 a2 a3 b], [c a1 a2 b].
    """
    pattern = then_b(c_then_a("followed_by").times_or_more(2))
    same_matches(feed(pattern, C_A1_A2_A3_B), [[C, A1, A2, A3, B], [C, A1, A2, B]])


def test_times_or_more_after_followed_by_any_with_combinations():
    """TimesOrMoreITCase.testTimesOrMoreNotStrictWithFollowedByAny.

    c -any-> a{2,} allow_combinations -fb-> b over c a1 a2 a3 b.
    """
    pattern = then_b(c_then_a("followed_by_any").times_or_more(2).allow_combinations())
    same_matches(
        feed(pattern, C_A1_A2_A3_B),
        [[C, A1, A2, A3, B], [C, A1, A2, B], [C, A2, A3, B], [C, A1, A3, B]],
    )


# =========================================================================== equal events


def test_zero_or_more_over_repeated_event_objects():
    """SameElementITCase.testEagerZeroOrMoreSameElement.

    c -fb-> a{0,} -fb-> b; the same a1 object arrives three times (all @3),
    then a2, d, the same a3 object twice (@6), b.  Every arrival is a distinct
    event the loop takes in turn.
    """
    events = [
        (C, 1),
        (A1, 3),
        (A1, 3),
        (A1, 3),
        (A2, 4),
        (D, 5),
        (A3, 6),
        (A3, 6),
        (B, 7),
    ]
    pattern = then_b(c_then_a("followed_by").one_or_more().optional())
    same_matches(
        feed(pattern, events),
        [
            [C, A1, A1, A1, A2, A3, A3, B],
            [C, A1, A1, A1, A2, A3, B],
            [C, A1, A1, A1, A2, B],
            [C, A1, A1, A1, B],
            [C, A1, A1, B],
            [C, A1, B],
            [C, B],
        ],
    )


def test_zero_or_more_combinations_over_equal_events():
    """SameElementITCase.testZeroOrMoreSameElement.

    c -any-> a{0,} allow_combinations -any-> b over c a1 a1' a2 d a3 a3' b, where
    a1' equals a1 and a3' equals a3 (same values, same timestamps, distinct events).
    Flink lists all 32 subsets of the five a's, each followed by b.
    """
    a1, a1x = Event(41, "a", 2.0), Event(41, "a", 2.0)
    a3, a3x = Event(43, "a", 4.0), Event(43, "a", 4.0)
    events = [(C, 1), (a1, 3), (a1x, 3), (A2, 4), (D, 5), (a3, 6), (a3x, 6), (B, 7)]
    pattern = (
        c_then_a("followed_by_any")
        .one_or_more()
        .optional()
        .allow_combinations()
        .followed_by_any("end1")
        .where(IS_B)
    )
    a_s = [a1, a1x, A2, a3, a3x]
    expected = [[C, *subset, B] for n in range(6) for subset in combinations(a_s, n)]
    assert len(expected) == 32
    same_matches(feed(pattern, events), expected)


def test_zero_or_more_at_the_end_over_equal_events():
    """SameElementITCase.testEndWLoopingWSameElement.

    c -any-> a{0,} (ends the pattern) over c a a' a'' b, the a's being equal
    values at the same timestamp.  Each a can start a loop, which then takes the
    following a's (no combinations): 7 matches, no [c a a''].
    """
    m1, m1a, m1b = Event(41, "a", 2.0), Event(41, "a", 2.0), Event(41, "a", 2.0)
    events = [(C, 1), (m1, 3), (m1a, 3), (m1b, 3), (Event(44, "b", 5.0), 7)]
    pattern = c_then_a("followed_by_any").one_or_more().optional()
    same_matches(
        feed(pattern, events),
        [
            [C],
            [C, m1],
            [C, m1a],
            [C, m1b],
            [C, m1, m1a],
            [C, m1a, m1b],
            [C, m1, m1a, m1b],
        ],
    )
