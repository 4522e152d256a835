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

from cep import Pattern, SkipStrategy, col, count, first
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
    ({**card_testing_doc(), "pattern": {"stages": []}}, "$.pattern", "pattern JSON"),
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
    assert problems[3][:2] == ("rules.json", "rule 'skips_to_nowhere'")
    assert "nope" in problems[3][2]
    assert problems[4][:2] == ("rules.json", "rule 'dangling'")
    assert "not_followed_by" in problems[4][2] or "within" in problems[4][2]


def test_the_same_name_in_two_files_keeps_the_first(tmp_path: Path) -> None:
    write(tmp_path / "a.json", card_testing_doc())
    write(tmp_path / "b.json", {**card_testing_doc(), "version": 2})
    rules = load_rules(tmp_path)
    assert [(r.name, r.version) for r in rules] == [("card_testing", 1)]
    assert "already defined in" in rules.problems[0].message


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
        f"{root / 'd_types.json'}: rule 'types': stage 'a': (col('x') == 'y'): cannot compare "
        "numeric with string",
        "2 rules fine (1 enabled), 2 problems"]


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
