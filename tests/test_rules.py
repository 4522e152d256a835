"""Specification of rule files: rules as JSON data, checked file by file, never run.

A rule = name, version, key field(s), pattern (``Pattern.to_json``'s form), optional
measures, enabled flag, description, owner.  A rule set is a directory of rule files
or one file; each problem is reported with the file and the place in it, and a broken
rule never takes the others down.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cep import Pattern, SkipStrategy, col, count, first, last, lit
from cep import sum as sum_
from cep.rules import Rule, RuleError, load_rules, load_rules_text, rule_set


def card_testing_doc(name: str = "card_testing", **extra: Any) -> dict[str, Any]:
    pattern = (Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
               .where(col("amount") < 5).times_or_more(3).consecutive()
               .next("big").where(col("amount") > 500).within(600_000))
    return {"name": name, "version": 1, "key": "card_id",
            "pattern": json.loads(pattern.to_json()), **extra}


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def test_a_rule_round_trips_through_its_file(tmp_path: Path) -> None:
    rule = Rule("velocity", 4, ("card_id", "merchant"),
                Pattern.begin("a").where(col("amount") > 100).times(3).within(60_000),
                measures={"n": count("a"), "first": first("a", "amount")},
                enabled=False, description="three big charges in a minute", owner="fraud-ops")
    loaded = load_rules(write(tmp_path / "velocity.json", rule.to_json()))
    assert loaded.problems == () and list(loaded) == [rule]
    assert loaded["velocity"].key == ("card_id", "merchant")
    assert loaded.enabled() == []


def test_a_directory_of_rule_files_in_name_order(tmp_path: Path) -> None:
    write(tmp_path / "b.json", card_testing_doc("second"))
    write(tmp_path / "a.json", {"rules": [card_testing_doc("first"), card_testing_doc("third")]})
    write(tmp_path / "notes.txt", "not a rule")
    rules = load_rules(tmp_path)
    assert [r.name for r in rules] == ["first", "third", "second"]
    assert rules.sources["second"] == str(tmp_path / "b.json")


@pytest.mark.parametrize("content, place, message", [
    ('{"name": "x",\n  "version": 1,\n  "key": }', "line 3, column 10", "not valid JSON"),
    ({**card_testing_doc(), "version": "3"}, "$.version", "expected an integer, got a string"),
    ({**card_testing_doc(), "enabled": "yes"}, "$.enabled", "expected true or false"),
    ({**card_testing_doc(), "key": []}, "$.key", "non-empty list of field names"),
    ({**card_testing_doc(), "colour": "red"}, "$", "unknown field 'colour'"),
    ({k: v for k, v in card_testing_doc().items() if k != "key"}, "$", "missing 'key'"),
    ({**card_testing_doc(), "pattern": {"stages": []}}, "$.pattern", "missing 'skip'"),
    ({**card_testing_doc(), "measures": {"n": {"op": "eval", "args": [{"op": "lit",
                                                                       "value": "1+1"}]}}},
     "$.measures.n", "'eval'"),
])
def test_each_problem_names_the_file_and_the_place(tmp_path: Path, content: Any, place: str,
                                                   message: str) -> None:
    path = write(tmp_path / "rule.json", content)
    rules = load_rules(tmp_path)
    assert len(rules) == 0
    [problem] = rules.problems
    assert problem.file == str(path) and problem.place == place, problem
    assert message in problem.message, problem


def test_a_broken_rule_never_takes_the_others_down(tmp_path: Path) -> None:
    broken_skip = card_testing_doc("skips_to_nowhere")
    broken_skip["pattern"]["pattern"]["skip"] = {"kind": "skip_to_first", "stage": "nope",
                                                 "throw_on_miss": False}
    dangling = json.loads(Pattern.begin("a").where(col("v") > 1).not_followed_by("b").to_json())
    write(tmp_path / "rules.json", {"rules": [
        card_testing_doc("good"),
        {**card_testing_doc("bad_version"), "version": 0},
        broken_skip,
        {**card_testing_doc("dangling"), "pattern": dangling},
        card_testing_doc("good"),
    ]})
    write(tmp_path / "zz.json", "{ not json")
    loaded = load_rules(tmp_path)
    assert [r.name for r in loaded] == ["good", "skips_to_nowhere", "dangling"]
    checked = loaded.check()
    assert [r.name for r in checked] == ["good"]
    problems = [(Path(p.file).name, p.place, p.message) for p in checked.problems]
    assert problems[0] == ("rules.json", "$.rules[1].version", "versions start at 1, got 0")
    assert problems[1] == ("rules.json", "$.rules[4].name", "rule 'good' is defined twice")
    assert problems[2][:2] == ("zz.json", "line 1, column 3")
    # a pattern that does not compile: at the rule's pattern, a JSON path as ever
    assert problems[3][:2] == ("rules.json", "$.rules[2].pattern")
    assert "nope" in problems[3][2]
    assert problems[4][:2] == ("rules.json", "$.rules[3].pattern")
    assert "not_followed_by" in problems[4][2] or "within" in problems[4][2]


def test_the_same_name_in_two_files_keeps_the_first(tmp_path: Path) -> None:
    write(tmp_path / "a.json", card_testing_doc())
    write(tmp_path / "b.json", {**card_testing_doc(), "version": 2})
    rules = load_rules(tmp_path)
    assert [(r.name, r.version) for r in rules] == [("card_testing", 1)]
    assert "already defined in" in rules.problems[0].message


def test_a_name_used_again_in_a_list_file_is_reported_at_its_place(tmp_path: Path) -> None:
    write(tmp_path / "1_a.json", card_testing_doc("a"))
    write(tmp_path / "2_list.json", {"rules": [card_testing_doc("b"), card_testing_doc("c"),
                                               card_testing_doc("a")]})
    [problem] = load_rules(tmp_path).problems
    assert (problem.place, problem.rule) == ("$.rules[2].name", "a")  # was "$.name"


def test_a_problem_names_its_rule_when_the_document_does(tmp_path: Path) -> None:
    write(tmp_path / "set.json", {"rules": [{**card_testing_doc("r1"), "version": "2"},
                                            {**card_testing_doc(), "name": 7}]})
    (tmp_path / "broken.json").write_text("{ broken")
    rules = load_rules(tmp_path)
    assert [(Path(p.file).name, p.rule) for p in rules.problems] == [
        ("broken.json", None), ("set.json", "r1"), ("set.json", None)]
    assert rules.root == str(tmp_path)


def test_a_rule_removed_from_a_file_whose_other_rule_is_broken_is_removed() -> None:
    """A live rule set: r2 deleted from a list file while r1 in it breaks; r1 runs on
    (its document is there, broken), r2 is removed (it ran on as if its file were
    unreadable, found by a check)."""
    from cep.rules import plan_changes

    doc = card_testing_doc()
    before = load_rules_text(json.dumps({"rules": [{**doc, "name": "r1"},
                                                   {**doc, "name": "r2"}]}), "set.json")
    after = load_rules_text(json.dumps({"rules": [{**doc, "name": "r1", "version": "2"}]}),
                            "set.json")
    plan = plan_changes(before, after)
    assert [(c.name, c.what) for c in plan.changes] == [("r2", "removed")]
    assert list(plan.after.rules) == ["r1"]
    assert any("r1" in p.place and "runs on" in p.message for p in plan.problems)


def test_a_key_given_twice_in_one_object_is_a_problem(tmp_path: Path) -> None:
    """JSON readers keep one of the two silently (found by a check: "name" twice)."""
    text = json.dumps(card_testing_doc("dk"))[:-1] + ', "name": "dk2"}'
    (tmp_path / "twice.json").write_text(text)
    [problem] = load_rules(tmp_path).problems
    assert "key 'name' is given twice in one object" in str(problem)


def test_cep_rules_check_of_a_folder_without_rules_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cep.runtime.cli import main

    (tmp_path / "notes.txt").write_text("rules are .json files")
    assert main(["rules", "check", str(tmp_path)]) == 1
    assert capsys.readouterr().out == f"{tmp_path}: no rules (no .json file here holds one)\n"


def test_a_byte_order_mark_is_no_problem(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes("\ufeff".encode() + json.dumps(card_testing_doc()).encode())
    assert [r.name for r in load_rules(path)] == ["card_testing"]


def test_the_bare_pattern_object_is_accepted() -> None:
    doc = card_testing_doc()
    doc["pattern"] = doc["pattern"]["pattern"]
    rules = load_rules_text(json.dumps(doc))
    assert rules.problems == () and rules["card_testing"].pattern.stage_names() == ["small", "big"]


def test_loading_a_missing_path_is_an_error() -> None:
    with pytest.raises(RuleError, match="no such file or directory"):
        load_rules("/no/such/rules")


# ------------------------------------------------------------------ cep rules check
def test_cep_rules_check_lists_each_rule_and_each_problem_and_fails_on_any(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cep.runtime.cli import main

    write(tmp_path / "rules" / "a_card_testing.json", card_testing_doc())
    write(tmp_path / "rules" / "b_off.json", card_testing_doc("off", enabled=False))
    write(tmp_path / "rules" / "c_typo.json", {**card_testing_doc("typo"), "kee": "card_id"})
    bad = Pattern.begin("a").where((col("x") > 1) & (col("x") == "y"))
    write(tmp_path / "rules" / "d_types.json",
          {"name": "types", "version": 1, "key": "k", "pattern": json.loads(bad.to_json())})
    assert main(["rules", "check", str(tmp_path / "rules")]) == 1
    lines = capsys.readouterr().out.splitlines()
    root = tmp_path / "rules"
    assert lines == [
        f"ok   card_testing (version 1, key card_id) {root / 'a_card_testing.json'}",
        f"ok   off (version 1, key card_id, disabled) {root / 'b_off.json'}",
        f"{root / 'c_typo.json'}: $: unknown field 'kee' (a rule has: format, name, version, "
        "key, pattern, measures, enabled, description, owner)",
        f"{root / 'd_types.json'}: $.pattern: stage 'a': (col('x') == 'y'): cannot compare "
        "numeric with string",
        "2 rules fine (1 enabled), 2 problems"]


def test_cep_rules_check_stops_quietly_when_its_reader_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cep rules check DIR | head -1`` printed a traceback and said 1 (found by a check)."""
    import sys

    from cep.runtime import cli

    class Gone:
        def write(self, text: str) -> int:
            raise BrokenPipeError

        def flush(self) -> None:
            raise BrokenPipeError

    write(tmp_path / "rules.json", {"rules": [card_testing_doc("one"), card_testing_doc("two")]})
    left: list[bool] = []
    monkeypatch.setattr(sys, "stdout", Gone())
    monkeypatch.setattr(cli, "_reader_gone", lambda: left.append(True))
    assert cli.main(["rules", "check", str(tmp_path / "rules.json")]) == 0 and left == [True]


def test_cep_rules_check_is_quiet_and_succeeds_when_every_rule_is_fine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cep.runtime.cli import main

    write(tmp_path / "rules.json", {"rules": [card_testing_doc("one"), card_testing_doc("two")]})
    assert main(["rules", "check", str(tmp_path / "rules.json"), "-q"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["rules", "check", str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_every_pattern_of_the_library_is_a_rule_that_checks() -> None:
    """Flags used bare (``col("card_present")``), fields compared only with other fields
    (``col("item") == first("buy", "item")``) and ``prev`` need no data to type-check."""
    from cep.patterns.library import LIBRARY

    rules = rule_set([Rule(name, 1, "key", entry.pattern()) for name, entry in LIBRARY.items()])
    checked = load_rules_text(json.dumps({"rules": [r.to_dict() for r in rules]})).check()
    assert checked.problems == ()
    assert [r.name for r in checked] == list(LIBRARY)


# --------------------------------------------- a rule file is held to the builder's rules
#: a rule whose pattern has a quantified stage, an optional one and a single one:
#: Pattern.begin("a").where(...).times(2, 4).next("b").optional().next("c")
def quantified_doc() -> dict[str, Any]:
    pattern = (Pattern.begin("a").where(col("x") > 1).times(2, 4)
               .next("b").optional().next("c"))
    return {"name": "q", "version": 1, "key": "k", "pattern": json.loads(pattern.to_json())}


STAGES = "$.pattern.pattern.stages"


def edited(edit: Any) -> dict[str, Any]:
    doc = quantified_doc()
    edit(doc["pattern"]["pattern"]["stages"])
    return doc


def times(low: Any, high: Any) -> Any:
    return lambda stages: stages[0].update(times={"low": low, "high": high, "window": None})


@pytest.mark.parametrize("edit, place, message", [
    # what Pattern.times refuses, a rule file cannot say either
    (times(5, 2), f"{STAGES}[0].times", "times(n, m) needs m >= n"),
    (times(-3, 2), f"{STAGES}[0].times", "times(n, m) needs n >= 0"),
    (times(0, 0), f"{STAGES}[0].times.low", "expected 1 or more, got 0"),
    # a count is a JSON integer: not text, not a fraction
    (times("2", 4), f"{STAGES}[0].times.low", 'expected an integer, got a string "2"'),
    (times(2.5, 4), f"{STAGES}[0].times.low", "expected an integer, got a number 2.5"),
    (times(2, True), f"{STAGES}[0].times.high", "expected an integer, got a boolean true"),
    # a flag is a JSON boolean: "false" is text, not false
    (lambda s: s[2].update(optional="false"), f"{STAGES}[2].optional",
     'expected true or false, got a string "false"'),
    (lambda s: s[0].update(greedy="false"), f"{STAGES}[0].greedy",
     'expected true or false, got a string "false"'),
    # what the builder refuses: greedy() on a single stage, optional() on a NOT stage
    (lambda s: s[2].update(greedy=True), f"{STAGES}[2].greedy",
     "greedy() is not applicable to a single (non-quantified) stage"),
    (lambda s: s[1].update(consuming="NOT_NEXT"), f"{STAGES}[1].optional",
     "a not_next (NOT) stage cannot be optional"),
    # a looping stage has no upper bound: a high would be dropped without a word
    (lambda s: s[0].update(kind="LOOPING"), f"{STAGES}[0].times.high",
     "a LOOPING stage takes low events or more: expected null, got an integer 4"),
    (lambda s: s[0].update(kind="LOOOPING"), f"{STAGES}[0].kind",
     'unknown stage kind "LOOOPING" (one of SINGLE, LOOPING, TIMES)'),
    (lambda s: s[2].update(times={"low": 1, "high": 1, "window": None}), f"{STAGES}[2].times",
     "a SINGLE stage takes one event: expected null"),
    (lambda s: s[0].update(inner="NOT_NEXT"), f"{STAGES}[0].inner",
     "not NOT_NEXT"),
    (lambda s: s[1].update(colour="red"), f"{STAGES}[1]", "unknown field 'colour'"),
    (lambda s: s[0]["times"].update(window=2**64), f"{STAGES}[0].times.window",
     "is beyond the largest integer, 2^63-1"),
])
def test_a_pattern_value_the_builder_would_refuse_is_refused_at_its_place(
        edit: Any, place: str, message: str) -> None:
    rules = load_rules_text(json.dumps(edited(edit)), "q.json")
    assert len(rules) == 0
    [problem] = rules.problems
    assert (problem.file, problem.place) == ("q.json", place), problem
    assert message in problem.message, problem


def test_the_bare_pattern_object_is_refused_at_its_own_place() -> None:
    doc = quantified_doc()
    doc["pattern"] = doc["pattern"]["pattern"]
    doc["pattern"]["stages"][0]["greedy"] = "no"
    [problem] = load_rules_text(json.dumps(doc)).problems
    assert problem.place == "$.pattern.stages[0].greedy"


def test_every_pattern_the_builder_makes_loads_back_as_itself() -> None:
    """Loading builds the pattern with the builder's calls, in the order that reproduces
    what the builder made: times(0, m) after a greedy stage (optional without optional()'s
    check), greedy() then allow_combinations(), groups, windows of both kinds."""
    from cep import WithinType

    made = [
        Pattern.begin("a").where(col("x") > 1).one_or_more().greedy()
        .next("b").where(col("x") < 0).times(0, 2),
        Pattern.begin("a").times(2, 3).greedy().allow_combinations().followed_by("b"),
        Pattern.begin(Pattern.begin("a").next("b")).times(2).consecutive()
        .followed_by_any("c").times_or_more(2, window=50).until(col("x") > 9)
        .not_followed_by("d").followed_by("e").optional().next("f").within(100)
        .within(10, WithinType.PREVIOUS_AND_CURRENT),
        Pattern.begin("a", skip=SkipStrategy.skip_to_last("a").throw_exception_on_miss())
        .next("b"),
    ]
    for pattern in made:
        rule = Rule("r", 1, "k", pattern)
        assert list(load_rules_text(rule.to_json())) == [rule]


# ----------------------------------------------------------------------------- versions
def test_a_version_is_an_integer_from_1_to_2_63_minus_1() -> None:
    """Engines, outputs and checkpoints hold versions as 64-bit integers: a larger one
    loaded, then crashed the job that ran it."""
    top = 2**63 - 1
    assert [r.version for r in load_rules_text(json.dumps(card_testing_doc(version=top)))] == [
        top]
    [problem] = load_rules_text(json.dumps(card_testing_doc(version=10**30))).problems
    assert (problem.place, problem.message) == (
        "$.version", "versions go up to 2^63-1 (9223372036854775807), got a number of 31 digits")
    with pytest.raises(RuleError, match="a version is an integer from 1 to 9223372036854775807"):
        Rule("big", top + 1, "k", Pattern.begin("a"))


def test_cep_rules_check_refuses_a_version_past_64_bits(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cep.runtime.cli import main

    write(tmp_path / "huge.json", card_testing_doc(version=2**63))
    assert main(["rules", "check", str(tmp_path), "-q"]) == 1
    assert f"{tmp_path / 'huge.json'}: $.version: versions go up to 2^63-1" in (
        capsys.readouterr().out)


# ----------------------------------------------------------------------------- measures
def test_a_measure_of_a_stage_the_pattern_lacks_is_refused_at_its_place() -> None:
    """It would be 0 (or null) in every match, silently; a condition naming such a stage
    is refused too."""
    doc = card_testing_doc(measures={"tests": count("small").to_dict(),
                                     "oops": count("nope").to_dict()})
    [problem] = load_rules_text(json.dumps(doc), "ct.json").problems
    assert (problem.place, problem.message) == (
        "$.measures.oops",
        "count('nope') reads stage 'nope', which the pattern does not have (its stages: "
        "small, big)")
    made_in_code = Rule("ct", 1, "card_id", Pattern.begin("small").next("big"),
                        measures={"first": first("nope", "amount")})
    [problem] = rule_set([made_in_code]).check().problems
    assert problem.message.startswith("measure 'first': first('nope', 'amount') reads stage "
                                      "'nope'")


@pytest.mark.parametrize("measure, message", [
    # the pattern compares country with text: a difference with it cannot be computed
    (last("small", "amount") - first("small", "country"),
     "arithmetic needs numbers, first('small', 'country') is string"),
    (sum_("small", "country"), "sum needs a numeric column"),
    (lit(True) + lit("s"), "arithmetic needs numbers, lit(True) is boolean"),
])
def test_a_measure_that_cannot_be_computed_is_refused_at_its_place(measure: Any,
                                                                   message: str) -> None:
    """What the pattern says of a field's type holds for the measures: a job would write
    the measure null in every match."""
    doc = card_testing_doc(measures={"n": count("small").to_dict(), "bad": measure.to_dict()})
    stages = doc["pattern"]["pattern"]["stages"]
    stages[0]["condition"] = json.loads(Pattern.begin("small").where(
        (col("amount") < 5) & (col("country") == "US")).to_json())["pattern"]["stages"][0][
        "condition"]
    [problem] = load_rules_text(json.dumps(doc), "ct.json").check().problems
    assert (problem.file, problem.place, problem.rule) == ("ct.json", "$.measures.bad",
                                                           "card_testing")
    assert problem.message.startswith("measure 'bad': ") and message in problem.message


def test_a_measure_of_a_field_the_pattern_does_not_type_is_left_to_the_data() -> None:
    """A field only a measure reads could be a number: a job computes it, and writes it
    null, with a warning, where the data holds text (see test_replay_rules)."""
    doc = card_testing_doc(measures={"gap": (last("big", "amount") - first(
        "small", "fee")).to_dict()})
    assert not load_rules_text(json.dumps(doc)).check().problems


def test_a_measure_is_refused_at_the_place_in_the_expression() -> None:
    doc = card_testing_doc(measures={"gap": {"op": "-", "args": [
        {"op": "col", "name": "amount"}, {"op": "+", "args": [{"op": "lit", "value": 1}]}]}})
    [problem] = load_rules_text(json.dumps(doc)).problems
    assert (problem.place, problem.message) == ("$.measures.gap.args[1]", "'+' takes 2 args")


# ------------------------------------------------------------------------ deep nesting
def nested_not(depth: int) -> str:
    """A rule whose first stage's condition is ``not`` ``depth`` times over, as text (too
    deep for json.dumps to write)."""
    doc = card_testing_doc("deep")
    stage = doc["pattern"]["pattern"]["stages"][0]
    condition, stage["condition"] = json.dumps(stage["condition"]), "HERE"
    return json.dumps(doc).replace('"HERE"', '{"not": ' * depth + condition + "}" * depth)


@pytest.mark.parametrize("depth, place", [
    # too deep for the JSON parser: where the text goes too deep
    (5000, "line 1, column "),
    # parsed, but too deep for what runs it (compiling, printing, checkpoints recurse)
    (900, "$.pattern.pattern.stages[0].condition.not.not.not…"),
])
def test_a_rule_nested_too_deeply_is_a_problem_of_its_file_only(
        tmp_path: Path, depth: int, place: str, capsys: pytest.CaptureFixture[str]) -> None:
    from cep.runtime.cli import main

    write(tmp_path / "a_deep.json", nested_not(depth))
    write(tmp_path / "b_fine.json", card_testing_doc())
    rules = load_rules(tmp_path).check()
    assert [r.name for r in rules] == ["card_testing"]
    [problem] = rules.problems
    assert problem.place.startswith(place) and problem.message == (
        "nested more than 500 levels deep"), problem
    assert main(["rules", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "ok   card_testing" in out and "1 rule fine (1 enabled), 1 problem" in out
    assert main(["match", str(tmp_path / "a_deep.json"), str(tmp_path / "b_fine.json"),
                 "--time", "ts"]) == 2
    assert "nested more than 500 levels deep" in capsys.readouterr().err


def test_a_rule_nested_deep_within_the_limit_loads() -> None:
    assert [r.name for r in load_rules_text(nested_not(400)).check()] == ["deep"]


def test_whatever_a_rule_file_says_loading_it_never_raises() -> None:
    """Any value at any place of a rule document, or a field left out, is a problem of
    that rule (never an exception that would take the other rules down)."""
    import random

    generator = random.Random(7)
    values = [None, True, False, 0, -1, 2**64, 2.5, "", "x", "LOOPING", "STRICT", "small", [],
              [1], {}, {"op": "col"}, {"expr": 1}, {"not": {}}, [["FIRST_AND_LAST", 5]]]
    documents = [card_testing_doc(measures={"n": count("small").to_dict()}), quantified_doc()]

    def places(value: Any, trail: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        inner = (value.items() if isinstance(value, dict)
                 else enumerate(value) if isinstance(value, list) else ())
        return [trail] + [p for k, v in inner for p in places(v, (*trail, k))]

    for _ in range(300):
        doc = json.loads(json.dumps(generator.choice(documents)))
        *parents, last = generator.choice(places(doc)[1:])
        target = doc
        for step in parents:
            target = target[step]
        if isinstance(target, dict) and generator.random() < 0.2:
            del target[last]
        else:
            target[last] = generator.choice(values)
        load_rules_text(json.dumps(doc), "r.json").check()


def test_a_rule_whose_stage_is_named_like_an_output_column_is_a_problem() -> None:
    """A rule's records have ``start``, ``end``, ``rule``, ``version``, ...: a stage of one
    of those names would overwrite the column, so the rule is set aside, the others kept."""
    clash = Rule("clash", 1, "card", Pattern.begin("start").where(col("v") > 1).next("b"))
    fine = Rule("fine", 1, "card", Pattern.begin("a").where(col("v") > 1).next("b"))
    checked = rule_set([clash, fine]).check()
    assert [r.name for r in checked] == ["fine"]
    [problem] = checked.problems
    assert "stage 'start' would clash with the output column" in problem.message


@pytest.mark.parametrize(("literal", "reason"), [
    ("NaN", "NaN is not a number JSON has (null is a missing value)"),
    ("1e400", "1e400 is a number beyond the range of float64"),
    ("9" * 5000, "a number of more than 4,300 digits"),
])
def test_a_number_json_has_not_is_reported_where_it_stands(literal: str, reason: str) -> None:
    """NaN (``amount > NaN`` is never true), a number beyond float64 (read as infinity)
    and one of thousands of digits (Python will not read it) are each reported at their
    place; Infinity, as Python's json writes a pattern's infinite constant, reads back."""
    doc = Rule("big", 1, "card", Pattern.begin("a").where(col("amount") > 5)).to_json()
    text = doc.replace('"value": 5', f'"value": {literal}')
    assert text != doc
    (problem,) = load_rules_text(text, "big.json").problems
    line = text[:text.index(literal)].count("\n") + 1
    assert (problem.place.startswith(f"line {line}, column "), problem.message) == (True, reason)
    inf = Rule("big", 1, "card", Pattern.begin("a").where(col("amount") > float("inf")))
    assert load_rules_text(inf.to_json(), "inf.json").rules["big"] == inf
