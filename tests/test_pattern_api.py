"""The Pattern builder as a value: immutable, printable, explainable, with Flink's aliases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cep import MalformedPatternError, Matcher, Pattern, SkipStrategy, WithinType


def is_a(e):
    return e == "a"


def test_every_builder_call_returns_a_new_pattern_and_leaves_the_receiver_alone():
    base = Pattern.begin("a").where(is_a)
    longer = base.followed_by("b")
    quantified = base.one_or_more()
    assert [s.name for s in base.stages] == ["a"]
    assert [s.name for s in longer.stages] == ["a", "b"]
    assert base.stages[0].times is None and quantified.stages[0].times is not None


def test_patterns_built_the_same_way_are_equal():
    assert Pattern.begin("a").where(is_a).next("b") == Pattern.begin("a").where(is_a).next("b")
    assert Pattern.begin("a").next("b") != Pattern.begin("a").followed_by("b")


def test_repr_reads_as_the_dsl():
    p = (
        Pattern.begin("a", skip=SkipStrategy.skip_past_last_event())
        .where(is_a)
        .times_or_more(3)
        .consecutive()
        .next("b")
        .within(timedelta(minutes=10))
    )
    assert repr(p) == (
        "Pattern.begin('a', skip=SkipStrategy.skip_past_last_event())"
        ".where(is_a).times_or_more(3).consecutive().next('b').within(600000)"
    )


def test_repr_of_group_patterns_and_gap_windows():
    inner = Pattern.begin("x").followed_by("y")
    p = Pattern.begin("a").followed_by(inner).one_or_more().within(5, WithinType.PREVIOUS_AND_CURRENT)
    assert repr(p) == (
        "Pattern.begin('a').followed_by(Pattern.begin('x').followed_by('y'))"
        ".one_or_more().within(5, WithinType.PREVIOUS_AND_CURRENT)"
    )


def test_explain_lists_states_and_their_take_ignore_proceed_edges():
    text = Pattern.begin("a").where(is_a).followed_by("b").optional().next("c").explain()
    assert text.startswith("NFA (")
    assert "a [Start]" in text
    assert "TAKE    -> b" in text
    assert "PROCEED -> c" in text
    assert "IGNORE " in text
    assert "$endState$ [Final]" in text


def test_flink_camel_case_names_are_aliases():
    assert Pattern.followedBy is Pattern.followed_by
    assert Pattern.followedByAny is Pattern.followed_by_any
    assert Pattern.notNext is Pattern.not_next
    assert Pattern.notFollowedBy is Pattern.not_followed_by
    assert Pattern.oneOrMore is Pattern.one_or_more
    assert Pattern.timesOrMore is Pattern.times_or_more
    assert Pattern.allowCombinations is Pattern.allow_combinations
    strategy = SkipStrategy.skipToFirst("a").throwExceptionOnMiss()
    assert strategy == SkipStrategy.skip_to_first("a").throw_exception_on_miss()


def test_durations_are_timedelta_or_int_milliseconds():
    a = Pattern.begin("a").within(timedelta(seconds=2))
    b = Pattern.begin("a").within(2000)
    assert Matcher(a).nfa.window == Matcher(b).nfa.window == 2000


@pytest.mark.parametrize("bad", [1.5, "10s", None, True])
def test_a_duration_that_is_not_timedelta_or_int_is_rejected(bad):
    with pytest.raises(MalformedPatternError, match="stage 'a'"):
        Pattern.begin("a").within(bad)


def test_a_quantifier_replaces_an_earlier_optional_as_in_flink():
    """FlinkCEP builds a fresh quantifier for times()/one_or_more(): optional() must come after."""
    p = Pattern.begin("a").optional().times(2)
    assert not p.stages[0].optional
    assert Pattern.begin("a").times(2).optional().stages[0].optional


def test_conditions_with_default_arguments_are_simple_conditions():
    k = "a"
    p = Pattern.begin("a").where(lambda e, k=k: e == k).next("b")
    m = Matcher(p)
    assert m.process("a", 1) == []
    assert [dict(x) for x in m.process("z", 2)] == [{"a": ["a"], "b": ["z"]}]


def test_flink_style_condition_classes_port_directly():
    from cep import IterativeCondition, SimpleCondition

    class IsA(SimpleCondition):
        def filter(self, value):
            return value == "a"

    class SecondB(IterativeCondition):
        def filter(self, value, ctx):
            return value == "b" and len(ctx.events("bs")) == 1

    p = Pattern.begin("a").where(IsA()).followed_by("bs").where(lambda e: e == "b").times(2)
    p2 = Pattern.begin("a").where(IsA()).followed_by("bs").where(lambda e: e == "b").next(
        "c"
    ).where(SecondB())
    m = Matcher(p)
    out = [x for i, e in enumerate("abb") for x in m.process(e, i)]
    assert [dict(x) for x in out] == [{"a": ["a"], "bs": ["b", "b"]}]
    m2 = Matcher(p2)
    assert [x for i, e in enumerate("abb") for x in m2.process(e, i)] != []


def test_to_dot_draws_every_state_and_edge_with_its_condition() -> None:
    from cep import col

    p = (Pattern.begin("a").where(col("v") > 1)
         .followed_by("b").where(col("s") == 'say "hi"').within(5))
    dot = p.to_dot()
    assert dot.startswith("digraph NFA {") and dot.endswith("}")
    assert '"" -> "a";' in dot  # the entry arrow points at the start state
    assert '"$endState$" [shape=doublecircle' in dot
    assert '"a" -> "b" [label="TAKE\\n(col(\'v\') > 1)", style=solid];' in dot
    # IGNORE edges are dashed, quotes inside conditions are escaped
    assert '[label="IGNORE\\n~(col(\'s\') == \'say \\"hi\\"\')", style=dashed];' in dot
    assert 'label="within 5 ms, skip SkipStrategy.no_skip()"' in dot
    nfa_states = p.explain().splitlines()
    drawn = [line for line in dot.splitlines() if "[shape=" in line and '""' not in line]
    assert len(drawn) == sum(1 for line in nfa_states if line and not line.startswith(" ")) - 1


def test_from_json_holds_a_document_to_the_builders_rules_naming_the_place() -> None:
    """A saved pattern is loaded by the builder's own calls: what ``Pattern.times(5, 2)``
    or ``.greedy()`` on a single stage refuses, a document cannot say either, and a value
    of another JSON type is not coerced ("false" is not false, "2" and 2.5 are not 2)."""
    import json

    from cep import col

    saved = json.loads(Pattern.begin("a").where(col("x") > 1).times(2, 4)
                       .next("b").optional().next("c").to_json())

    def load(edit) -> MalformedPatternError:
        doc = json.loads(json.dumps(saved))
        edit(doc["pattern"]["stages"])
        with pytest.raises(MalformedPatternError) as err:
            Pattern.from_json(json.dumps(doc))
        return err.value

    err = load(lambda s: s[0].update(times={"low": 5, "high": 2, "window": None}))
    assert str(err) == ("pattern JSON at $.pattern.stages[0].times: stage 'a': times(n, m) "
                        "needs m >= n (and m >= 1), got m=2")
    assert load(lambda s: s[0]["times"].update(low=2.5)).place == "$.pattern.stages[0].times.low"
    assert load(lambda s: s[2].update(optional="false")).place == "$.pattern.stages[2].optional"
    assert "greedy() is not applicable to a single" in str(
        load(lambda s: s[2].update(greedy=True)))
