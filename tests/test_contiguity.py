"""Contiguity between stages: ``next`` / ``followed_by`` / ``followed_by_any``.

Plus the condition combinators that decide which event a stage may take
(``where`` / ``or_`` / ``subtype``) and the shape of the emitted matches.

Every scenario and expected result here is ported from FlinkCEP's own test-suite
(``NFAITCase``, ``SameElementITCase``, ``CEPITCase``); the Flink test method is
named in each docstring.  Unless stated otherwise, results are compared
order-insensitively, like Flink's ``comparePatterns``.

The three contiguities, as Flink defines them:

* ``next`` (strict): the stage must take the event that *immediately* follows
  the previous stage's last event.
* ``followed_by`` (relaxed, "skip till next"): non-matching events in between are
  skipped, but the partial match takes the *first* matching event and does not
  keep a copy waiting for later ones.
* ``followed_by_any`` (non-deterministic relaxed, "skip till any"): like
  ``followed_by``, but the partial match also stays waiting, so *every* later
  matching event starts its own branch.
"""

from __future__ import annotations

from support import Event, SubEvent, feed, run, same_matches, stream

from cep import Pattern


def named(name: str):
    return lambda e: e.name == name


# --------------------------------------------------------------------------- conditionless


A = Event(40, "a", 1.0)
B = Event(41, "b", 2.0)
C = Event(42, "c", 3.0)
D = Event(43, "d", 4.0)
E = Event(44, "e", 5.0)
ABCDE = stream(A, B, C, D, E)  # timestamps 1..5


def test_followed_by_without_conditions_pairs_each_event_with_the_next():
    """NFAITCase.testNoConditionNFA.

    start -> followed_by end, no conditions; events a b c d e.
    Each start takes the first following event only: ab, bc, cd, de.
    """
    pattern = Pattern.begin("start").followed_by("end")
    same_matches(feed(pattern, ABCDE), [[A, B], [B, C], [C, D], [D, E]])


def test_followed_by_any_without_conditions_pairs_each_event_with_every_later_one():
    """NFAITCase.testAnyWithNoConditionNFA.

    start -> followed_by_any end, no conditions; events a b c d e.
    Every (earlier, later) pair is a match: 10 matches.
    """
    pattern = Pattern.begin("start").followed_by_any("end")
    same_matches(
        feed(pattern, ABCDE),
        [
            [A, B], [A, C], [A, D], [A, E],
            [B, C], [B, D], [B, E],
            [C, D], [C, E],
            [D, E],
        ],
    )  # fmt: skip


def test_camel_case_followed_by_any_alias_is_identical():
    """``followedByAny`` is an alias of ``followed_by_any`` (same scenario as above)."""
    snake = feed(Pattern.begin("start").followed_by_any("end"), ABCDE)
    camel = feed(Pattern.begin("start").followedByAny("end"), ABCDE)
    assert camel == snake
    assert len(camel) == 10


def test_camel_case_followed_by_alias_is_identical():
    """``followedBy`` is an alias of ``followed_by`` (NFAITCase.testNoConditionNFA)."""
    snake = feed(Pattern.begin("start").followed_by("end"), ABCDE)
    camel = feed(Pattern.begin("start").followedBy("end"), ABCDE)
    assert camel == snake
    same_matches(camel, [[A, B], [B, C], [C, D], [D, E]])


# --------------------------------------------------------------------------- next (strict)


def test_next_matches_when_events_are_adjacent():
    """NFAITCase.testStrictContinuityWithResults.

    middle(name == a) -> next end(name == b); events a@3 b@5 -> [a, b].
    (Timestamps need not be consecutive: strictness is about the event sequence.)
    """
    a = Event(41, "a", 2.0)
    b = Event(42, "b", 4.0)
    pattern = Pattern.begin("middle").where(named("a")).next("end").where(named("b"))
    same_matches(feed(pattern, [(a, 3), (b, 5)]), [[a, b]])


def test_next_fails_when_an_event_intervenes():
    """NFAITCase.testStrictContinuityNoResults.

    middle(name == a) -> next end(name == b); events a c b -> no match.
    """
    pattern = Pattern.begin("middle").where(named("a")).next("end").where(named("b"))
    events = [(Event(41, "a", 2.0), 3), (Event(42, "c", 3.0), 4), (Event(43, "b", 4.0), 5)]
    assert feed(pattern, events) == []


def test_match_keys_follow_stage_order():
    """NFAITCase.testNFAResultKeyOrdering.

    a -> next b -> next aa -> next bb -> next ab, each stage matching its own
    name; events a b aa bb ab.  Exactly one match, whose keys are in stage order
    ``a, b, aa, bb, ab`` (not alphabetical, not hash order).
    """
    names = ["a", "b", "aa", "bb", "ab"]
    prices = [2.0, 3.0, 4.0, 5.0, 6.0]
    events = [Event(41, n, p) for n, p in zip(names, prices, strict=True)]
    timestamps = [1, 3, 4, 5, 6]

    pattern = Pattern.begin("a").where(named("a"))
    for n in names[1:]:
        pattern = pattern.next(n).where(named(n))

    matches, _ = run(pattern, list(zip(events, timestamps, strict=True)))
    assert len(matches) == 1
    match = matches[0]
    assert list(match.keys()) == names
    for n, e in zip(names, events, strict=True):
        assert list(match[n]) == [e]


# --------------------------------------------------------------------------- branching


_BR_START = Event(40, "start", 1.0)
_BR_MID1 = SubEvent(41, "foo1", 1.0, 10.0)
_BR_MID2 = SubEvent(42, "foo2", 1.0, 10.0)
_BR_MID3 = SubEvent(43, "foo3", 1.0, 10.0)
_BR_NEXT1 = SubEvent(44, "next-one", 1.0, 2.0)
_BR_NEXT2 = SubEvent(45, "next-one", 1.0, 2.0)
_BR_END = Event(46, "end", 1.0)
_BRANCHING_EVENTS = [
    (_BR_START, 1),
    (_BR_MID1, 3),
    (_BR_MID2, 4),
    (_BR_MID3, 5),
    (_BR_NEXT1, 6),
    (_BR_NEXT2, 7),
    (_BR_END, 8),
]


def _branching(first_link: str, second_link: str) -> Pattern:
    """start -[first]-> middle-first(SubEvent, volume > 5)
    -[second]-> middle-second(SubEvent, name == next-one) -[any]-> end."""
    p = Pattern.begin("start").where(named("start"))
    p = getattr(p, first_link)("middle-first").subtype(SubEvent).where(lambda e: e.volume > 5.0)
    p = getattr(p, second_link)("middle-second").subtype(SubEvent).where(named("next-one"))
    return p.followed_by_any("end").where(named("end"))


def test_branching_with_followed_by_any_everywhere():
    """NFAITCase.testBranchingPattern.

    start, 3 candidate middle-firsts (foo1..3, volume 10), 2 candidate
    middle-seconds (next-one, volume 2), end — all linked by followed_by_any:
    every combination matches, 3 x 2 = 6 matches.
    """
    pattern = _branching("followed_by_any", "followed_by_any")
    same_matches(
        feed(pattern, _BRANCHING_EVENTS),
        [
            [_BR_START, m, n, _BR_END]
            for n in (_BR_NEXT1, _BR_NEXT2)
            for m in (_BR_MID1, _BR_MID2, _BR_MID3)
        ],
    )


def test_branching_with_followed_by_takes_only_the_first_candidates():
    """NFAITCase.testBranchingPatternSkipTillNext.

    Same events; start -followed_by-> middle-first -followed_by-> middle-second
    -followed_by_any-> end.  Skip-till-next takes only the first candidate of
    each stage: exactly [start, foo1, next-one#1, end].
    """
    pattern = _branching("followed_by", "followed_by")
    same_matches(feed(pattern, _BRANCHING_EVENTS), [[_BR_START, _BR_MID1, _BR_NEXT1, _BR_END]])


def test_branching_with_mixed_contiguity():
    """NFAITCase.testBranchingPatternMixedFollowedBy.

    start -followed_by_any-> middle-first -followed_by-> middle-second
    -followed_by_any-> end: every middle-first branches, but each branch takes
    only the first next-one -> 3 matches.
    """
    pattern = _branching("followed_by_any", "followed_by")
    same_matches(
        feed(pattern, _BRANCHING_EVENTS),
        [[_BR_START, m, _BR_NEXT1, _BR_END] for m in (_BR_MID1, _BR_MID2, _BR_MID3)],
    )


def test_camel_case_mixed_contiguity_aliases_are_identical():
    """camelCase builder aliases build the same pattern (NFAITCase.testBranchingPatternMixedFollowedBy)."""
    camel = (
        Pattern.begin("start")
        .where(named("start"))
        .followedByAny("middle-first")
        .subtype(SubEvent)
        .where(lambda e: e.volume > 5.0)
        .followedBy("middle-second")
        .subtype(SubEvent)
        .where(named("next-one"))
        .followedByAny("end")
        .where(named("end"))
    )
    snake = _branching("followed_by_any", "followed_by")
    assert feed(camel, _BRANCHING_EVENTS) == feed(snake, _BRANCHING_EVENTS)
    assert len(feed(camel, _BRANCHING_EVENTS)) == 3


# --------------------------------------------------------------------------- subtype / or_


def test_subtype_restricts_a_stage_to_a_subclass():
    """NFAITCase.testSimplePatternNFA.

    start(name == start) -> followed_by middle(subtype SubEvent, volume > 5)
    -> followed_by end(name == end).  Events:
    start@1, foobar@2, SubEvent barfoo volume 5 @3, SubEvent foo volume 10 @3,
    start@4, end@5.  Only [start#41, foo, end] matches: barfoo fails the
    volume test, and the second start only arrives after foo.

    The ``where`` after ``subtype`` only ever sees ``SubEvent`` instances (it reads
    ``volume``), so the subtype check must short-circuit before it.
    """
    start = Event(41, "start", 1.0)
    middle = SubEvent(42, "foo", 1.0, 10.0)
    end = Event(43, "end", 1.0)
    events = [
        (start, 1),
        (Event(43, "foobar", 1.0), 2),
        (SubEvent(41, "barfoo", 1.0, 5.0), 3),
        (middle, 3),
        (Event(43, "start", 1.0), 4),
        (end, 5),
    ]
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by("middle")
        .subtype(SubEvent)
        .where(lambda e: e.volume > 5.0)
        .followed_by("end")
        .where(named("end"))
    )
    same_matches(feed(pattern, events), [[start, middle, end]])


def test_subtype_excludes_plain_events_with_matching_fields():
    """CEPITCase.testSimplePatternCEP.

    start(name == start) -any-> middle(subtype SubEvent, name == middle)
    -any-> end(name == end).  Event 5 is named "middle" but is a plain Event,
    so only SubEvent 6 qualifies: the single match is start 2, middle 6, end 8.
    """
    events = stream(
        Event(1, "barfoo", 1.0),
        Event(2, "start", 2.0),
        Event(3, "foobar", 3.0),
        SubEvent(4, "foo", 4.0, 1.0),
        Event(5, "middle", 5.0),
        SubEvent(6, "middle", 6.0, 2.0),
        SubEvent(7, "bar", 3.0, 3.0),
        Event(42, "42", 42.0),
        Event(8, "end", 1.0),
    )
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by_any("middle")
        .subtype(SubEvent)
        .where(named("middle"))
        .followed_by_any("end")
        .where(named("end"))
    )
    matches, _ = run(pattern, events)
    ids = [(m["start"][0].id, m["middle"][0].id, m["end"][0].id) for m in matches]
    assert ids == [(2, 6, 8)]


def test_or_condition_accepts_either_alternative():
    """CEPITCase.testSimpleOrFilterPatternCEP.

    start(name == start) -any-> middle(price == 2.0 OR price == 5.0)
    -any-> end(name == end).  Events (id name price):
    1 start 1.0, 2 middle 2.0, 3 end 3.0, 4 start 4.0, 5 middle 5.0, 6 end 6.0.
    Matches (start, middle, end ids): 1,2,3 / 1,2,6 / 1,5,6 / 4,5,6.
    """
    events = stream(
        Event(1, "start", 1.0),
        Event(2, "middle", 2.0),
        Event(3, "end", 3.0),
        Event(4, "start", 4.0),
        Event(5, "middle", 5.0),
        Event(6, "end", 6.0),
    )
    pattern = (
        Pattern.begin("start")
        .where(named("start"))
        .followed_by_any("middle")
        .where(lambda e: e.price == 2.0)
        .or_(lambda e: e.price == 5.0)
        .followed_by_any("end")
        .where(named("end"))
    )
    matches, _ = run(pattern, events)
    ids = sorted((m["start"][0].id, m["middle"][0].id, m["end"][0].id) for m in matches)
    assert ids == [(1, 2, 3), (1, 2, 6), (1, 5, 6), (4, 5, 6)]


# --------------------------------------------------------------------------- next after loops


def test_next_after_optional_loop_needs_adjacency():
    """NFAITCase.testStrictContinuityNoResultsAfterZeroOrMore.

    start(d) -followed_by-> middle(a){0,} -next-> end(b).
    Events d a a c b: the c between the last a and b breaks ``next``; skipping
    the optional middle does not help either (d is not adjacent to b) -> no match.
    """
    events = [
        (Event(40, "d", 2.0), 1),
        (Event(41, "a", 2.0), 2),
        (Event(42, "a", 2.0), 3),
        (Event(43, "c", 3.0), 4),
        (Event(44, "b", 4.0), 5),
    ]
    pattern = (
        Pattern.begin("start")
        .where(named("d"))
        .followed_by("middle")
        .where(named("a"))
        .one_or_more()
        .optional()
        .next("end")
        .where(named("b"))
    )
    assert feed(pattern, events) == []


def test_next_after_optional_loop_with_combinations():
    """NFAITCase.testStrictContinuityResultsAfterZeroOrMore.

    start(d) -followed_by_any-> middle(a){0,} allow_combinations -next-> end(b).
    Events d a1 a2 b.  Only loops whose last a is a2 (adjacent to b) match:
    [d, a1, a2, b] and [d, a2, b].  [d, b] does not match (d is not adjacent to b)
    and neither does [d, a1, b].
    """
    d = Event(40, "d", 2.0)
    a1 = Event(41, "a", 2.0)
    a2 = Event(42, "a", 2.0)
    b = Event(43, "b", 4.0)
    pattern = (
        Pattern.begin("start")
        .where(named("d"))
        .followed_by_any("middle")
        .where(named("a"))
        .one_or_more()
        .optional()
        .allow_combinations()
        .next("end")
        .where(named("b"))
    )
    same_matches(feed(pattern, [(d, 1), (a1, 2), (a2, 3), (b, 5)]), [[d, a1, a2, b], [d, a2, b]])


# --------------------------------------------------------------------------- equal events


def test_the_same_event_object_twice_is_two_events():
    """SameElementITCase.testSimplePatternWSameElement.

    start(c) -any-> middle(a) -followed_by-> end(b); the very same ``a`` event
    object is fed twice (both @3).  Each occurrence is a distinct event, so
    there are two (value-identical) matches [c, a, b].
    """
    c = Event(40, "c", 1.0)
    a = Event(41, "a", 2.0)
    b = Event(44, "b", 5.0)
    pattern = (
        Pattern.begin("start")
        .where(named("c"))
        .followed_by_any("middle")
        .where(named("a"))
        .followed_by("end1")
        .where(named("b"))
    )
    same_matches(feed(pattern, [(c, 1), (a, 3), (a, 3), (b, 7)]), [[c, a, b], [c, a, b]])


def test_events_sharing_a_timestamp_are_sequenced_by_arrival():
    """SameElementITCase.testClearingBuffer.

    a -followed_by-> b -followed_by-> c -followed_by-> d; events a@1, then b, c
    and d all @2 (arriving in that order).  Equal timestamps do not reorder
    events: exactly one match [a, b, c, d].
    """
    a = Event(40, "a", 1.0)
    b = Event(41, "b", 2.0)
    c = Event(41, "c", 2.0)
    d = Event(41, "d", 2.0)
    pattern = (
        Pattern.begin("a")
        .where(named("a"))
        .followed_by("b")
        .where(named("b"))
        .followed_by("c")
        .where(named("c"))
        .followed_by("d")
        .where(named("d"))
    )
    same_matches(feed(pattern, [(a, 1), (b, 2), (c, 2), (d, 2)]), [[a, b, c, d]])
