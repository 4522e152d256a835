"""After-match skip strategies, specified by FlinkCEP's own test-suite.

Every scenario here is ported from ``AfterMatchSkipITCase`` (flink-cep,
``org.apache.flink.cep.nfa``) or ``CEPITCase.testSimpleAfterMatchSkip``; the
expected matches are the ones those tests assert (and that Flink produces).

Flink's skip tests feed ``StreamRecord``s without timestamps, i.e. every event
carries the same timestamp and only arrival order matters; no scenario here
uses a time window, so we use consecutive timestamps 1, 2, 3, ... instead.

Unless stated otherwise the comparison is order-insensitive, like Flink's
``comparePatterns``: each match is flattened (stages in pattern order, events
in take order) and the multiset of matches is compared.

The rules being specified:

* ``no_skip``            -- every match is reported, overlapping or not.
* ``skip_to_next``       -- after a match, discard every partial match that
  started with the same event as the match.
* ``skip_past_last_event`` -- after a match, discard every partial match that
  started at or before the match's last event.
* ``skip_to_first(s)`` / ``skip_to_last(s)`` -- after a match, discard every
  partial match that started before the first / last event the match took for
  stage ``s``.
* When the target stage took no event, or skipping would go to the first
  event of the match itself (an endless loop), the strategy cannot skip: by
  default it then behaves like ``no_skip``; with ``.throw_exception_on_miss()``
  processing raises :class:`cep.SkipStrategyError`.
* With any strategy other than ``no_skip`` a completed match is only released
  once no partial match that started earlier is still running; completed
  matches are released in order of their start, each one pruning the others.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import Event, feed, run, same_matches, stream

from cep import CEPError, Pattern, SkipStrategy, SkipStrategyError


def named(name: str) -> Callable[[Event], bool]:
    return lambda e: e.name == name


def contains(text: str) -> Callable[[Event], bool]:
    return lambda e: text in e.name


# ---------------------------------------------------------------------------
# NO_SKIP / SKIP_TO_NEXT / SKIP_PAST_LAST_EVENT on a times(3) pattern
# ---------------------------------------------------------------------------

A1, A2, A3, A4, A5, A6 = (Event(i, "a", 0.0) for i in range(1, 7))


def test_no_skip_reports_every_overlapping_match() -> None:
    """AfterMatchSkipITCase.testNoSkip.

    Pattern ``start{3}`` (name == "a"), strategy NO_SKIP, events a1..a6: every
    window of three consecutive a's is a match.
    """
    pattern = Pattern.begin("start", skip=SkipStrategy.no_skip()).where(named("a")).times(3)

    same_matches(
        feed(pattern, stream(A1, A2, A3, A4, A5, A6)),
        [[A1, A2, A3], [A2, A3, A4], [A3, A4, A5], [A4, A5, A6]],
    )


def test_skip_past_last_event_makes_matches_disjoint() -> None:
    """AfterMatchSkipITCase.testSkipPastLast.

    Pattern ``start{3}`` (name == "a"), strategy SKIP_PAST_LAST_EVENT, events
    a1..a6: after a match every partial match started inside it is dropped,
    so only the two disjoint matches remain.
    """
    pattern = (
        Pattern.begin("start", skip=SkipStrategy.skip_past_last_event()).where(named("a")).times(3)
    )

    same_matches(feed(pattern, stream(A1, A2, A3, A4, A5, A6)), [[A1, A2, A3], [A4, A5, A6]])


def test_skip_past_last_event_first_event_of_each_match() -> None:
    """CEPITCase.testSimpleAfterMatchSkip.

    Pattern ``start{2}`` (name == "a"), SKIP_PAST_LAST_EVENT, events
    (1,a) (2,a) (3,a) (4,a): the matches start with events 1 and 3.
    """
    events = [Event(i, "a", 0.0) for i in range(1, 5)]
    pattern = (
        Pattern.begin("start", skip=SkipStrategy.skip_past_last_event()).where(named("a")).times(2)
    )

    matches, _ = run(pattern, stream(*events))

    assert sorted(m["start"][0].id for m in matches) == [1, 3]


# ---------------------------------------------------------------------------
# start -> followedByAny end   (TwoVariablesFollowedByAny)
# ---------------------------------------------------------------------------

FBA_A1 = Event(1, "a", 0.0)
FBA_B1 = Event(2, "b", 0.0)
FBA_A2 = Event(4, "a", 0.0)
FBA_B2 = Event(5, "b", 0.0)


def _two_variables_followed_by_any(skip: SkipStrategy) -> list[list[Event]]:
    pattern = (
        Pattern.begin("start", skip=skip).where(named("a")).followed_by_any("end").where(named("b"))
    )
    return feed(pattern, stream(FBA_A1, FBA_B1, FBA_A2, FBA_B2))


def test_no_skip_with_followed_by_any() -> None:
    """AfterMatchSkipITCase.testNoSkipWithFollowedByAny.

    Pattern ``a followedByAny b``, events a1 b1 a2 b2, NO_SKIP: a1 pairs with
    both b's (skip-till-any), a2 with b2.
    """
    same_matches(
        _two_variables_followed_by_any(SkipStrategy.no_skip()),
        [[FBA_A1, FBA_B1], [FBA_A1, FBA_B2], [FBA_A2, FBA_B2]],
    )


def test_skip_to_next_with_followed_by_any() -> None:
    """AfterMatchSkipITCase.testSkipToNextWithFollowedByAny.

    Same pattern and events with SKIP_TO_NEXT: once a1 matched with b1, the
    other partial match that started with a1 is discarded, so (a1, b2) is gone.
    """
    same_matches(
        _two_variables_followed_by_any(SkipStrategy.skip_to_next()),
        [[FBA_A1, FBA_B1], [FBA_A2, FBA_B2]],
    )


# ---------------------------------------------------------------------------
# start -> next end+   (QuantifierAtEndOfPattern)
# ---------------------------------------------------------------------------

QE_A1 = Event(1, "a", 0.0)
QE_B1 = Event(2, "b", 0.0)
QE_B2 = Event(4, "b", 0.0)
QE_B3 = Event(5, "b", 0.0)


def _quantifier_at_end(skip: SkipStrategy) -> list[list[Event]]:
    pattern = (
        Pattern.begin("start", skip=skip)
        .where(named("a"))
        .next("end")
        .where(named("b"))
        .one_or_more()
    )
    return feed(pattern, stream(QE_A1, QE_B1, QE_B2, QE_B3))


def test_no_skip_with_quantifier_at_the_end() -> None:
    """AfterMatchSkipITCase.testNoSkipWithQuantifierAtTheEnd.

    Pattern ``a next b+``, events a1 b1 b2 b3, NO_SKIP: each longer loop
    iteration is a new match.
    """
    same_matches(
        _quantifier_at_end(SkipStrategy.no_skip()),
        [[QE_A1, QE_B1, QE_B2, QE_B3], [QE_A1, QE_B1, QE_B2], [QE_A1, QE_B1]],
    )


def test_skip_to_next_with_quantifier_at_the_end() -> None:
    """AfterMatchSkipITCase.testSkipToNextWithQuantifierAtTheEnd.

    Same pattern and events with SKIP_TO_NEXT: the first match (a1 b1) discards
    the partial match that would have grown the loop, as it also started at a1.
    """
    same_matches(_quantifier_at_end(SkipStrategy.skip_to_next()), [[QE_A1, QE_B1]])


# ---------------------------------------------------------------------------
# SKIP_TO_FIRST / SKIP_TO_LAST on start{2} next end{2}
# ---------------------------------------------------------------------------

AB = [Event(i, "ab", 0.0) for i in range(1, 8)]


def _ab_pattern(skip: SkipStrategy) -> Pattern:
    return (
        Pattern.begin("start", skip=skip)
        .where(contains("a"))
        .times(2)
        .next("end")
        .where(contains("b"))
        .times(2)
    )


def test_skip_to_first() -> None:
    """AfterMatchSkipITCase.testSkipToFirst.

    Pattern ``start{2} next end{2}`` where every event "ab" fits both stages,
    events ab1..ab6, SKIP_TO_FIRST("end"): after (ab1 ab2 | ab3 ab4) matching
    resumes at ab3, the first event of "end".
    """
    same_matches(
        feed(_ab_pattern(SkipStrategy.skip_to_first("end")), stream(*AB[:6])),
        [AB[0:4], AB[2:6]],
    )


def test_skip_to_last() -> None:
    """AfterMatchSkipITCase.testSkipToLast.

    Same pattern, events ab1..ab7, SKIP_TO_LAST("end"): after (ab1 ab2 | ab3
    ab4) matching resumes at ab4, the last event of "end".
    """
    same_matches(
        feed(_ab_pattern(SkipStrategy.skip_to_last("end")), stream(*AB[:7])),
        [AB[0:4], AB[3:7]],
    )


# ---------------------------------------------------------------------------
# SKIP_PAST_LAST_EVENT with branching and strict contiguity
# ---------------------------------------------------------------------------


def test_skip_past_last_event_with_branching_followed_by_any() -> None:
    """AfterMatchSkipITCase.testSkipPastLast2.

    Pattern ``a followedByAny b followedByAny c followedBy d`` (name contains the
    letter), SKIP_PAST_LAST_EVENT, events a1 a2 b1 b2 c1 c2 d1 d2: the many
    combinations collapse to the single first match.
    """
    a1, a2 = Event(1, "a1", 0.0), Event(2, "a2", 0.0)
    b1, b2 = Event(3, "b1", 0.0), Event(4, "b2", 0.0)
    c1, c2 = Event(5, "c1", 0.0), Event(6, "c2", 0.0)
    d1, d2 = Event(7, "d1", 0.0), Event(7, "d2", 0.0)
    pattern = (
        Pattern.begin("a", skip=SkipStrategy.skip_past_last_event())
        .where(contains("a"))
        .followed_by_any("b")
        .where(contains("b"))
        .followed_by_any("c")
        .where(contains("c"))
        .followed_by("d")
        .where(contains("d"))
    )

    same_matches(feed(pattern, stream(a1, a2, b1, b2, c1, c2, d1, d2)), [[a1, b1, c1, d1]])


def test_skip_past_last_event_after_broken_strict_contiguity() -> None:
    """AfterMatchSkipITCase.testSkipPastLast3.

    Pattern ``a next b``, SKIP_PAST_LAST_EVENT, events a1 c a2 b2: a1 is broken
    by c; a2 b2 matches.
    """
    a1, c, a2, b2 = (
        Event(1, "a1", 0.0),
        Event(2, "c", 0.0),
        Event(3, "a2", 0.0),
        Event(4, "b2", 0.0),
    )
    pattern = (
        Pattern.begin("a", skip=SkipStrategy.skip_past_last_event())
        .where(contains("a"))
        .next("b")
        .where(contains("b"))
    )

    same_matches(feed(pattern, stream(a1, c, a2, b2)), [[a2, b2]])


# ---------------------------------------------------------------------------
# SKIP_TO_FIRST where the target is the first event of the match
# ---------------------------------------------------------------------------

SO_AB1 = Event(1, "ab1", 0.0)
SO_C1 = Event(2, "c1", 0.0)
SO_AB2 = Event(3, "ab2", 0.0)
SO_C2 = Event(4, "c2", 0.0)


def test_skip_to_first_with_optional_match() -> None:
    """AfterMatchSkipITCase.testSkipToFirstWithOptionalMatch.

    Pattern ``x+? next b next c`` (x is an optional loop that never matches),
    SKIP_TO_FIRST("b"), events ab1 c1 ab2 c2. "b" is the first event of each
    match, so skipping to it would loop forever; the strategy falls back to
    not skipping and both matches are reported.
    """
    pattern = (
        Pattern.begin("x", skip=SkipStrategy.skip_to_first("b"))
        .where(contains("x"))
        .one_or_more()
        .optional()
        .next("b")
        .where(contains("b"))
        .next("c")
        .where(contains("c"))
    )

    same_matches(
        feed(pattern, stream(SO_AB1, SO_C1, SO_AB2, SO_C2)), [[SO_AB1, SO_C1], [SO_AB2, SO_C2]]
    )


def test_skip_to_first_at_start_position() -> None:
    """AfterMatchSkipITCase.testSkipToFirstAtStartPosition.

    Pattern ``b next c`` with SKIP_TO_FIRST("b") -- the first stage itself.
    Events ab1 c1 ab2 c2: both matches, the strategy silently does not skip.
    """
    pattern = (
        Pattern.begin("b", skip=SkipStrategy.skip_to_first("b"))
        .where(contains("b"))
        .next("c")
        .where(contains("c"))
    )

    same_matches(
        feed(pattern, stream(SO_AB1, SO_C1, SO_AB2, SO_C2)), [[SO_AB1, SO_C1], [SO_AB2, SO_C2]]
    )


def test_skip_to_first_element_of_match_raises_when_asked_to() -> None:
    """AfterMatchSkipITCase.testSkipToFirstElementOfMatch.

    Pattern ``a`` with SKIP_TO_FIRST("a").throwExceptionOnMiss(), event a1:
    skipping to the first element of the match would be an endless loop, which
    the throwing variant (used by MATCH_RECOGNIZE) reports as an error.
    """
    pattern = Pattern.begin(
        "a", skip=SkipStrategy.skip_to_first("a").throw_exception_on_miss()
    ).where(contains("a"))

    with pytest.raises(SkipStrategyError):
        run(pattern, stream(Event(1, "a1", 0.0)))


# ---------------------------------------------------------------------------
# SKIP_TO_FIRST / SKIP_TO_LAST on a stage that took no event (MissedSkipTo)
# ---------------------------------------------------------------------------

MISS_A = Event(1, "a", 0.0)
MISS_C = Event(4, "c", 0.0)


def _missed_skip_to(skip: SkipStrategy) -> list[list[Event]]:
    """Pattern ``a next b*(consecutive, optional) next c`` over events a c: "b" stays empty."""
    pattern = (
        Pattern.begin("a", skip=skip)
        .where(contains("a"))
        .next("b")
        .where(contains("b"))
        .one_or_more()
        .optional()
        .consecutive()
        .next("c")
        .where(contains("c"))
    )
    return feed(pattern, stream(MISS_A, MISS_C))


def test_skip_to_first_missing_stage_raises_with_throw_exception_on_miss() -> None:
    """AfterMatchSkipITCase.testSkipToFirstNonExistentPosition.

    SKIP_TO_FIRST("b").throwExceptionOnMiss() and a match in which "b" took no
    event: processing raises.
    """
    with pytest.raises(SkipStrategyError):
        _missed_skip_to(SkipStrategy.skip_to_first("b").throw_exception_on_miss())


def test_skip_to_last_missing_stage_raises_with_throw_exception_on_miss() -> None:
    """AfterMatchSkipITCase.testSkipToLastNonExistentPosition.

    SKIP_TO_LAST("b").throwExceptionOnMiss() and a match in which "b" took no
    event: processing raises.
    """
    with pytest.raises(SkipStrategyError):
        _missed_skip_to(SkipStrategy.skip_to_last("b").throw_exception_on_miss())


def test_skip_to_first_missing_stage_without_exception_does_not_skip() -> None:
    """AfterMatchSkipITCase.testSkipToFirstNonExistentPositionWithoutException.

    Plain SKIP_TO_FIRST("b") with an empty "b": no error, the match (a, c) is
    reported. (Flink's ``testSkipToLastNonExistentPositionWithoutException``
    runs the very same skip_to_first scenario, so it is not repeated here.)
    """
    same_matches(_missed_skip_to(SkipStrategy.skip_to_first("b")), [[MISS_A, MISS_C]])


def test_throw_exception_on_miss_returns_a_new_strategy() -> None:
    """``throwExceptionOnMiss`` does not change the strategy it is called on.

    Uses the same scenario as the two tests above: the original strategy keeps
    the non-throwing behaviour while the derived one raises. The raised error
    is a :class:`cep.CEPError`. (Also exercises the camelCase alias.)
    """
    lenient = SkipStrategy.skip_to_first("b")
    strict = lenient.throwExceptionOnMiss()

    with pytest.raises(CEPError):
        _missed_skip_to(strict)
    same_matches(_missed_skip_to(lenient), [[MISS_A, MISS_C]])


# ---------------------------------------------------------------------------
# a next b+ (consecutive) with SKIP_TO_FIRST / SKIP_TO_LAST("b")
# ---------------------------------------------------------------------------

OM_A1 = Event(1, "a1", 0.0)
OM_B1 = Event(2, "b1", 0.0)
OM_A2 = Event(3, "a2", 0.0)
OM_B2 = Event(4, "b2", 0.0)
OM_B3 = Event(5, "b3", 0.0)
OM_A3 = Event(3, "a3", 0.0)
OM_B4 = Event(4, "b4", 0.0)
OM_EVENTS = stream(OM_A1, OM_B1, OM_A2, OM_B2, OM_B3, OM_A3, OM_B4)


def _a_next_b_plus(skip: SkipStrategy) -> Pattern:
    return (
        Pattern.begin("a", skip=skip)
        .where(contains("a"))
        .next("b")
        .where(contains("b"))
        .one_or_more()
        .consecutive()
    )


def test_skip_to_first_with_one_or_more() -> None:
    """AfterMatchSkipITCase.testSkipToFirstWithOneOrMore.

    Pattern ``a next b+ (consecutive)``, SKIP_TO_FIRST("b"), events
    a1 b1 a2 b2 b3 a3 b4: the longer (a2 b2 b3) is pruned after (a2 b2).
    """
    same_matches(
        feed(_a_next_b_plus(SkipStrategy.skip_to_first("b")), OM_EVENTS),
        [[OM_A1, OM_B1], [OM_A2, OM_B2], [OM_A3, OM_B4]],
    )


def test_skip_to_last_with_one_or_more() -> None:
    """AfterMatchSkipITCase.testSkipToLastWithOneOrMore.

    Same pattern and events with SKIP_TO_LAST("b"): same three matches.
    """
    same_matches(
        feed(_a_next_b_plus(SkipStrategy.skip_to_last("b")), OM_EVENTS),
        [[OM_A1, OM_B1], [OM_A2, OM_B2], [OM_A3, OM_B4]],
    )


# ---------------------------------------------------------------------------
# Documentation examples: a+ (consecutive, greedy) next b over a1 a2 a3 b1
# ---------------------------------------------------------------------------

DOC_A1 = Event(1, "a1", 0.0)
DOC_A2 = Event(2, "a2", 0.0)
DOC_A3 = Event(3, "a3", 0.0)
DOC_B1 = Event(4, "b1", 0.0)
DOC_EVENTS = stream(DOC_A1, DOC_A2, DOC_A3, DOC_B1)


def _greedy_a_plus_next_b(skip: SkipStrategy) -> Pattern:
    return (
        Pattern.begin("a", skip=skip)
        .where(contains("a"))
        .one_or_more()
        .consecutive()
        .greedy()
        .next("b")
        .where(contains("b"))
    )


def test_doc_example_skip_past_last_event() -> None:
    """AfterMatchSkipITCase.testSkipPastLastWithOneOrMoreAtBeginning (docs example)."""
    same_matches(
        feed(_greedy_a_plus_next_b(SkipStrategy.skip_past_last_event()), DOC_EVENTS),
        [[DOC_A1, DOC_A2, DOC_A3, DOC_B1]],
    )


def test_doc_example_skip_to_last() -> None:
    """AfterMatchSkipITCase.testSkipToLastWithOneOrMoreAtBeginning (docs example).

    SKIP_TO_LAST("a"): after (a1 a2 a3 b1) matching resumes at a3.
    """
    same_matches(
        feed(_greedy_a_plus_next_b(SkipStrategy.skip_to_last("a")), DOC_EVENTS),
        [[DOC_A1, DOC_A2, DOC_A3, DOC_B1], [DOC_A3, DOC_B1]],
    )


def test_doc_example_skip_to_first() -> None:
    """AfterMatchSkipITCase.testSkipToFirstWithOneOrMoreAtBeginning (docs example).

    SKIP_TO_FIRST("a") targets the first event of the match, so it cannot skip
    and behaves like NO_SKIP.
    """
    same_matches(
        feed(_greedy_a_plus_next_b(SkipStrategy.skip_to_first("a")), DOC_EVENTS),
        [[DOC_A1, DOC_A2, DOC_A3, DOC_B1], [DOC_A2, DOC_A3, DOC_B1], [DOC_A3, DOC_B1]],
    )


def test_doc_example_no_skip() -> None:
    """AfterMatchSkipITCase.testNoSkipWithOneOrMoreAtBeginning (docs example)."""
    same_matches(
        feed(_greedy_a_plus_next_b(SkipStrategy.no_skip()), DOC_EVENTS),
        [[DOC_A1, DOC_A2, DOC_A3, DOC_B1], [DOC_A2, DOC_A3, DOC_B1], [DOC_A3, DOC_B1]],
    )


def test_doc_example_skip_to_first_discarding() -> None:
    """AfterMatchSkipITCase.testSkipToFirstDiscarding (docs example).

    Pattern ``(a|c) followedBy (b|c) followedBy c+ (greedy) followedBy d``,
    SKIP_TO_FIRST("c*"), events a b c1 c2 c3 d: after (a b c1 c2 c3 d) matching
    resumes at c1, which yields (c1 c2 c3 d); all other overlapping matches are
    discarded.
    """
    a, b = Event(1, "a", 0.0), Event(2, "b", 0.0)
    c1, c2, c3 = Event(3, "c1", 0.0), Event(4, "c2", 0.0), Event(5, "c3", 0.0)
    d = Event(6, "d", 0.0)
    pattern = (
        Pattern.begin("a or c", skip=SkipStrategy.skip_to_first("c*"))
        .where(lambda e: "a" in e.name or "c" in e.name)
        .followed_by("b or c")
        .where(lambda e: "b" in e.name or "c" in e.name)
        .followed_by("c*")
        .where(contains("c"))
        .one_or_more()
        .greedy()
        .followed_by("d")
        .where(contains("d"))
    )

    same_matches(
        feed(pattern, stream(a, b, c1, c2, c3, d)), [[a, b, c1, c2, c3, d], [c1, c2, c3, d]]
    )


# ---------------------------------------------------------------------------
# Skipping must not discard matches that already completed earlier
# ---------------------------------------------------------------------------


def test_skip_does_not_discard_other_already_completed_match() -> None:
    """AfterMatchSkipITCase.testSkipBeforeOtherAlreadyCompleted.

    Pattern ``a followedBy c followedBy b`` where b must have the same price as
    the first "a" (iterative condition), SKIP_TO_FIRST("c").
    Events a1(0.0) c1 a2(1.0) c2 b1(1.0) b2(0.0): (a2 c2 b1) completes first,
    but while the earlier-started (a1 c1 ...) is still running Flink holds it
    back; once (a1 c1 b2) completes, matches are released in start order and
    skipping to c1 does not touch (a2 c2 b1). Both are reported.
    """
    a1 = Event(1, "a1", 0.0)
    c1 = Event(2, "c1", 0.0)
    a2 = Event(3, "a2", 1.0)
    c2 = Event(4, "c2", 0.0)
    b1 = Event(5, "b1", 1.0)
    b2 = Event(6, "b2", 0.0)

    def b_priced_like_first_a(event: Event, ctx) -> bool:
        return "b" in event.name and next(iter(ctx.events("a"))).price == event.price

    pattern = (
        Pattern.begin("a", skip=SkipStrategy.skip_to_first("c"))
        .where(contains("a"))
        .followed_by("c")
        .where(contains("c"))
        .followed_by("b")
        .where(b_priced_like_first_a)
    )

    same_matches(feed(pattern, stream(a1, c1, a2, c2, b1, b2)), [[a1, c1, b2], [a2, c2, b1]])
