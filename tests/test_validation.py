"""Malformed patterns, specified by FlinkCEP's ``PatternTest`` and ``NFACompilerTest``.

A malformed pattern is rejected with :class:`cep.MalformedPatternError` either
while it is being built or, at the latest, when a :class:`cep.Matcher` is
created for it (Flink's compile step).  Every test therefore builds *and*
compiles inside the ``pytest.raises`` block, so both places are accepted.

Flink rejects a few bad arguments with ``IllegalArgumentException`` rather than
``MalformedPatternException`` (non-positive ``times``); for those a
``ValueError`` is accepted as well as :class:`cep.MalformedPatternError`.

Messages are checked loosely: they must name the offending stage or rule.

The last section lists rules Flink enforces in ``Pattern``/``Quantifier``
itself without a dedicated test; each says so.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from support import SubEvent

from cep import (
    CEPError,
    MalformedPatternError,
    Matcher,
    Pattern,
    SkipStrategy,
    SkipStrategyError,
    WithinType,
    col,
)

BAD_ARGUMENT = (MalformedPatternError, ValueError)


def anything(event: Any) -> bool:
    """Flink's ``dummyCondition``: accepts every event."""
    return True


def compile_pattern(build: Callable[[], Pattern]) -> Matcher:
    """Build the pattern and compile it, so a misuse is caught wherever it is detected."""
    return Matcher(build(), engine="reference")


def test_errors_share_a_common_base_class() -> None:
    """Both error kinds of the library derive from :class:`cep.CEPError`."""
    assert issubclass(MalformedPatternError, CEPError)
    assert issubclass(SkipStrategyError, CEPError)


# ---------------------------------------------------------------------------
# Quantifier arguments  (PatternTest)
# ---------------------------------------------------------------------------


def test_times_rejects_negative_count() -> None:
    """PatternTest.testPatternTimesNegativeTimes: ``times(-1)`` is rejected."""
    with pytest.raises(BAD_ARGUMENT, match=r"(?i)times|positive|greater|-1|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).times(-1))


def test_times_rejects_negative_lower_bound() -> None:
    """PatternTest.testPatternTimesNegativeFrom: ``times(-1, 2)`` is rejected."""
    with pytest.raises(BAD_ARGUMENT, match=r"(?i)times|positive|greater|-1|from|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).times(-1, 2))


# ---------------------------------------------------------------------------
# A stage takes at most one quantifier  (PatternTest.testPatternCanHaveQuantifierSpecifiedOnce*)
# ---------------------------------------------------------------------------

QUANTIFIER_RULE = r"(?i)quantifier|already|start"


def test_one_or_more_twice_then_optional_is_rejected() -> None:
    """PatternTest.testPatternCanHaveQuantifierSpecifiedOnce1: ``oneOrMore().oneOrMore().optional()``."""
    with pytest.raises(MalformedPatternError, match=QUANTIFIER_RULE):
        compile_pattern(
            lambda: Pattern.begin("start").where(anything).one_or_more().one_or_more().optional()
        )


def test_times_after_one_or_more_optional_is_rejected() -> None:
    """PatternTest.testPatternCanHaveQuantifierSpecifiedOnce2: ``oneOrMore().optional().times(1)``."""
    with pytest.raises(MalformedPatternError, match=QUANTIFIER_RULE):
        compile_pattern(
            lambda: Pattern.begin("start").where(anything).one_or_more().optional().times(1)
        )


def test_one_or_more_after_times_is_rejected() -> None:
    """PatternTest.testPatternCanHaveQuantifierSpecifiedOnce3: ``times(1).oneOrMore()``."""
    with pytest.raises(MalformedPatternError, match=QUANTIFIER_RULE):
        compile_pattern(lambda: Pattern.begin("start").where(anything).times(1).one_or_more())


def test_one_or_more_twice_is_rejected() -> None:
    """PatternTest.testPatternCanHaveQuantifierSpecifiedOnce4: ``oneOrMore().oneOrMore()``."""
    with pytest.raises(MalformedPatternError, match=QUANTIFIER_RULE):
        compile_pattern(lambda: Pattern.begin("start").where(anything).one_or_more().one_or_more())


def test_one_or_more_twice_is_rejected_camel_case() -> None:
    """PatternTest.testPatternCanHaveQuantifierSpecifiedOnce5, via the camelCase aliases."""
    with pytest.raises(MalformedPatternError, match=QUANTIFIER_RULE):
        compile_pattern(
            lambda: Pattern.begin("start").where(anything).oneOrMore().oneOrMore().optional()
        )


# ---------------------------------------------------------------------------
# NOT stages cannot be quantified  (PatternTest.testNot*Cannot*)
# ---------------------------------------------------------------------------

NOT_RULE = r"(?i)not"


def _not_next() -> Pattern:
    return Pattern.begin("start").where(anything).not_next("not").where(anything)


def _not_followed_by() -> Pattern:
    return Pattern.begin("start").where(anything).not_followed_by("not").where(anything)


def _then_end(pattern: Pattern) -> Pattern:
    """Append a final stage, so a deferred check cannot fail for ending in notFollowedBy."""
    return pattern.followed_by("end").where(anything)


def test_not_next_cannot_be_one_or_more() -> None:
    """PatternTest.testNotNextCannotBeOneOrMore."""
    with pytest.raises(MalformedPatternError, match=NOT_RULE):
        compile_pattern(lambda: _not_next().one_or_more())


def test_not_next_cannot_be_times() -> None:
    """PatternTest.testNotNextCannotBeTimes."""
    with pytest.raises(MalformedPatternError, match=NOT_RULE):
        compile_pattern(lambda: _not_next().times(3))


def test_not_next_cannot_be_optional() -> None:
    """PatternTest.testNotNextCannotBeOptional."""
    with pytest.raises(MalformedPatternError, match=NOT_RULE):
        compile_pattern(lambda: _not_next().optional())


def test_not_followed_by_cannot_be_one_or_more() -> None:
    """PatternTest.testNotFollowedCannotBeOneOrMore."""
    with pytest.raises(MalformedPatternError, match=NOT_RULE):
        compile_pattern(lambda: _then_end(_not_followed_by().one_or_more()))


def test_not_followed_by_cannot_be_times() -> None:
    """PatternTest.testNotFollowedCannotBeTimes."""
    with pytest.raises(MalformedPatternError, match=NOT_RULE):
        compile_pattern(lambda: _then_end(_not_followed_by().times(3)))


def test_not_followed_by_cannot_be_optional() -> None:
    """PatternTest.testNotFollowedCannotBeOptional."""
    with pytest.raises(MalformedPatternError, match=NOT_RULE):
        compile_pattern(lambda: _then_end(_not_followed_by().optional()))


# ---------------------------------------------------------------------------
# until() only on looping stages, only once  (PatternTest.testUntil*)
# ---------------------------------------------------------------------------

UNTIL_RULE = r"(?i)until"


def test_until_cannot_be_applied_to_times() -> None:
    """PatternTest.testUntilCannotBeAppliedToTimes: ``times(1).until(...)``."""
    with pytest.raises(MalformedPatternError, match=UNTIL_RULE):
        compile_pattern(lambda: Pattern.begin("start").where(anything).times(1).until(anything))


def test_until_cannot_be_applied_to_singleton() -> None:
    """PatternTest.testUntilCannotBeAppliedToSingleton: ``until`` on an unquantified stage."""
    with pytest.raises(MalformedPatternError, match=UNTIL_RULE):
        compile_pattern(lambda: Pattern.begin("start").where(anything).until(anything))


def test_until_cannot_be_applied_twice() -> None:
    """PatternTest.testUntilCannotBeAppliedTwice.

    Flink's test calls ``until`` twice on a singleton stage; either violation
    (not looping, applied twice) must be reported.
    """
    with pytest.raises(MalformedPatternError, match=UNTIL_RULE):
        compile_pattern(
            lambda: Pattern.begin("start").where(anything).until(anything).until(anything)
        )


# ---------------------------------------------------------------------------
# Compile-time checks  (NFACompilerTest)
# ---------------------------------------------------------------------------


def test_stage_names_must_be_unique() -> None:
    """NFACompilerTest.testNFACompilerUniquePatternName.

    ``start followedBy middle followedBy start``: Flink reports
    "Duplicate pattern name: start. Names must be unique."
    """
    with pytest.raises(MalformedPatternError, match=r"start"):
        compile_pattern(
            lambda: (
                Pattern.begin("start")
                .where(anything)
                .followed_by("middle")
                .where(anything)
                .followed_by("start")
                .where(anything)
            )
        )


def test_not_followed_by_at_end_requires_a_window() -> None:
    """NFACompilerTest.testNFACompilerPatternEndsWithNotFollowedBy.

    ``start followedBy middle notFollowedBy end`` without ``within``: Flink
    reports "NotFollowedBy is not supported without windowTime as a last part
    of a Pattern!".
    """
    with pytest.raises(MalformedPatternError, match=r"(?i)not.?followed.?by|window|end"):
        compile_pattern(
            lambda: (
                Pattern.begin("start")
                .where(anything)
                .followed_by("middle")
                .where(anything)
                .not_followed_by("end")
                .where(anything)
            )
        )


@pytest.mark.parametrize(
    "within_type",
    [WithinType.FIRST_AND_LAST, WithinType.PREVIOUS_AND_CURRENT],
    ids=["first_and_last", "previous_and_current"],
)
def test_not_followed_by_at_end_with_a_window_is_accepted(within_type: WithinType) -> None:
    """NFACompilerTest.testNFACompilerPatternNotFollowedByWithIn (and NotPatternITCase's
    ``testNotFollowedByWithin*AtEnd``, which run such patterns with either window type).

    ``start notFollowedBy middle within 1ms`` compiles.
    """
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .where(lambda e: e.price > 2)
            .not_followed_by("middle")
            .where(lambda e: e.name == "end")
            .within(1, within_type)
        )
    )


def test_skip_target_must_be_a_stage_of_the_pattern() -> None:
    """NFACompilerTest.testSkipToNotExistsMatchingPattern.

    ``skip_to_last("midd")`` on a pattern with stages start/middle/end: Flink
    reports "The pattern name specified in AfterMatchSkipStrategy can not be
    found in the given Pattern".
    """
    with pytest.raises(MalformedPatternError, match=r"midd|(?i:skip)"):
        compile_pattern(
            lambda: (
                Pattern.begin("start", skip=SkipStrategy.skip_to_last("midd"))
                .where(lambda e: "a" in e.name)
                .next("middle")
                .where(lambda e: "d" in e.name)
                .one_or_more()
                .optional()
                .next("end")
                .where(lambda e: "c" in e.name)
            )
        )


def test_previous_and_current_window_cannot_exceed_first_and_last_window() -> None:
    """NFACompilerTest.testCheckPatternWindowTimes.

    Gaps of 3s and 1s between events but a whole-match window of 2ms: Flink
    reports "The window length between the previous and current event cannot be
    larger than the window length between the first and last event for a
    Pattern."
    """
    with pytest.raises(MalformedPatternError, match=r"(?i)window"):
        compile_pattern(
            lambda: (
                Pattern.begin("start")
                .followed_by("middle")
                .within(timedelta(seconds=3), WithinType.PREVIOUS_AND_CURRENT)
                .followed_by("then")
                .within(timedelta(seconds=1), WithinType.PREVIOUS_AND_CURRENT)
                .followed_by("end")
                .within(2)
            )
        )


def test_within_on_several_stages_is_accepted() -> None:
    """NFACompilerTest.testWindowTimeCorrectlySet.

    ``within`` may be called on any stage, several times (Flink keeps the
    smallest window, here 10s).
    """
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .followed_by("middle")
            .within(timedelta(seconds=10))
            .followed_by("then")
            .within(timedelta(seconds=20))
            .followed_by("end")
        )
    )


def test_previous_and_current_windows_on_several_stages_are_accepted() -> None:
    """NFACompilerTest.testWindowTimesCorrectlySet.

    Each stage may carry its own PREVIOUS_AND_CURRENT window (Flink records
    middle -> 10s, then -> 20s).
    """
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .followed_by("middle")
            .within(timedelta(seconds=10), WithinType.PREVIOUS_AND_CURRENT)
            .followed_by("then")
            .within(timedelta(seconds=20), WithinType.PREVIOUS_AND_CURRENT)
            .followed_by("end")
        )
    )


def test_zero_length_window_is_refused() -> None:
    """NFACompilerTest.testMultipleWindowTimeWithZeroLength, deliberately changed.

    FlinkCEP accepts ``within(10s)`` on one stage and ``within(0)`` on another and
    then ends up with window 0, which means no window at all: a silent loss of the
    10 s bound.  cep refuses a window of 0 and says what to do instead.
    """
    with pytest.raises(MalformedPatternError, match=r"stage 'then': within\(.*at least 1 ms"):
        (
            Pattern.begin("start")
            .followed_by("middle")
            .within(timedelta(seconds=10))
            .followed_by("then")
            .within(timedelta(seconds=0))
        )


def test_pattern_builders_complete_without_failure() -> None:
    """PatternTest.testStrictContiguity / testNonStrictContiguity /
    testStrictContiguityWithCondition / testPatternWithSubtyping /
    testPatternWithSubtypingAndFilter / testPatternWithOrFilter / testRichCondition.

    Flink's docs for these tests: they "simply test that the pattern
    construction completes without failure".
    """
    compile_pattern(lambda: Pattern.begin("start").next("next").next("end"))
    compile_pattern(lambda: Pattern.begin("start").followed_by("next").followed_by("end"))
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .next("next")
            .where(lambda e: e.name == "foobar")
            .next("end")
            .where(lambda e: e.id == 42)
        )
    )
    compile_pattern(
        lambda: Pattern.begin("start").next("subevent").subtype(SubEvent).followed_by("end")
    )
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .next("subevent")
            .subtype(SubEvent)
            .where(lambda e: False)
            .followed_by("end")
        )
    )
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .where(lambda e: False)
            .or_(lambda e: False)
            .next("or")
            .or_(lambda e: False)
            .followed_by("end")
        )
    )
    compile_pattern(
        lambda: (
            Pattern.begin("start")
            .where(anything)
            .where(anything)
            .followed_by("end")
            .where(anything)
            .or_(anything)
        )
    )


# ---------------------------------------------------------------------------
# Rules enforced by Flink's Pattern / Quantifier source, without a dedicated
# Flink test.  Each names the Flink code that enforces it.
# ---------------------------------------------------------------------------


def test_times_rejects_zero() -> None:
    """Pattern.times(int): ``checkArgument(times > 0, ...)`` (IllegalArgumentException)."""
    with pytest.raises(BAD_ARGUMENT, match=r"(?i)times|positive|greater|0|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).times(0))


def test_times_rejects_upper_bound_below_lower_bound() -> None:
    """Quantifier.Times: ``checkArgument(to >= from, ...)`` (IllegalArgumentException)."""
    with pytest.raises(BAD_ARGUMENT, match=r"(?i)times|greater|from|to|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).times(2, 1))


def test_optional_cannot_be_applied_twice() -> None:
    """Quantifier.optional(): "Optional already applied!"."""
    with pytest.raises(MalformedPatternError, match=r"(?i)optional|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).optional().optional())


def test_allow_combinations_needs_a_quantified_stage() -> None:
    """Quantifier.combinations(): "Combinations not applicable to ..." on a singleton stage."""
    with pytest.raises(MalformedPatternError, match=r"(?i)combination|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).allow_combinations())


def test_consecutive_needs_a_quantified_stage() -> None:
    """Quantifier.consecutive(): not applicable to a singleton stage."""
    with pytest.raises(MalformedPatternError, match=r"(?i)consecutive|combination|start"):
        compile_pattern(lambda: Pattern.begin("start").where(anything).consecutive())


def test_consecutive_and_allow_combinations_are_exclusive() -> None:
    """Quantifier.consecutive(): "You can apply apply either combinations or consecutive, not both!"."""
    with pytest.raises(MalformedPatternError, match=r"(?i)consecutive|combination|start"):
        compile_pattern(
            lambda: (
                Pattern.begin("start")
                .where(anything)
                .one_or_more()
                .allow_combinations()
                .consecutive()
            )
        )


def test_not_stage_cannot_follow_an_optional_stage() -> None:
    """Pattern.notNext / notFollowedBy: "Specifying a pattern with an optional path to NOT
    condition is not supported yet." (UnsupportedOperationException in Flink)."""
    with pytest.raises(MalformedPatternError, match=r"(?i)optional|not"):
        compile_pattern(
            lambda: (
                Pattern.begin("start").where(anything).optional().not_next("not").where(anything)
            )
        )


def test_not_stage_cannot_be_greedy() -> None:
    """Pattern.greedy(): ``checkIfNoNotPattern`` -- "Option not applicable to NOT pattern"."""
    with pytest.raises(MalformedPatternError, match=r"(?i)not|greedy"):
        compile_pattern(lambda: _not_next().greedy())


# ---------------------------------------------------------------------------------------------
# rules of this library where FlinkCEP has none
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_a_repeating_group_must_take_an_event_in_each_round(engine: str) -> None:
    """A group repeated without end whose round can take no event (every inner stage
    optional, or repeating zero times) would repeat without end on the first event: FlinkCEP
    compiles it and hangs.  Found by hypothesis (test_skip_ahead) as
    ``(s0? s1*)+ ts0``; the error names the stages."""
    inner = (Pattern.begin("s0").where(col("v").isin([0, 3])).optional()
             .next("s1").where(col("v") > 0).one_or_more().optional())
    looping = Pattern.begin(inner).one_or_more().followed_by_any("t").where(col("v") < 6)
    with pytest.raises(MalformedPatternError, match=r"'s0', 's1'.*make one of them required"):
        Matcher(looping, engine=engine)
    # counted rounds end, and a required stage makes each round take an event
    Matcher(Pattern.begin(inner).times(2).followed_by("t").where(col("v") < 6), engine=engine)
    required = Pattern.begin("s0").where(col("v") == 0).next("s1").where(col("v") > 0).optional()
    Matcher(Pattern.begin(required).one_or_more().followed_by("t"), engine=engine)
