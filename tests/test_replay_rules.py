"""Specification: ``cep replay`` runs several rules in one pass (issue #11 item 3).

The PATTERN argument of ``cep replay`` (and the first argument of ``replay()``) may name
a set of rules instead of one pattern:

- a module, or a ``file.py``: every Pattern at its top level, and every function defined
  there that is annotated ``-> Pattern`` and needs no arguments, named by attribute;
- specs separated by commas, each named by its attribute (``module:attribute``) or file
  stem (``pattern.json``), or by the name ``NAME=SPEC`` gives it;
- a directory of pattern and rule JSON files, each named by its file stem; a rule file
  keeps its own key.

The rules run over one intake; every record carries its ``"rule"``, the summary has a
table of each rule's matches, timeouts and dead letters, and a checkpoint is resumed
only by the same rules (in any order).  A single pattern runs exactly as before.

The events: five card transactions.  By card, c1 charges 2 then 900 (a small charge then
a big one) and c2 is declined twice in a row; by ip, 10.0.0.1 sees two declines in a
row (c2's) and so does 10.0.0.2 (c1's, then c3's).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from cep import CEPError, Pattern, col, count, first, last
from cep.rules import Rule
from cep.runtime import FileSink, replay
from cep.runtime.cli import main as cep_main
from cep.runtime.specs import load_rule_set, names_rule_set

ROWS = [
    {"card": "c1", "ip": "10.0.0.1", "amount": 2, "status": "ok", "ts": 1000},
    {"card": "c2", "ip": "10.0.0.1", "amount": 3, "status": "declined", "ts": 2000},
    {"card": "c1", "ip": "10.0.0.2", "amount": 900, "status": "declined", "ts": 3000},
    {"card": "c3", "ip": "10.0.0.2", "amount": 1, "status": "declined", "ts": 4000},
    {"card": "c2", "ip": "10.0.0.1", "amount": 4, "status": "declined", "ts": 5000},
]

SMALL_THEN_BIG = (Pattern.begin("small").where(col("amount") < 5)
                  .followed_by("big").where(col("amount") > 500))
TWO_DECLINES = (Pattern.begin("d1").where(col("status") == "declined")
                .next("d2").where(col("status") == "declined"))

#: a module of rules: two that run, and what a module scan leaves out
RULES_MODULE = '''\
from cep import Pattern, col

small_then_big = (Pattern.begin("small").where(col("amount") < 5)
                  .followed_by("big").where(col("amount") > 500))


def two_declines(status: str = "declined") -> Pattern:
    return (Pattern.begin("d1").where(col("status") == status)
            .next("d2").where(col("status") == status))


def needs_an_argument(status: str) -> Pattern:  # left out: it needs an argument
    return Pattern.begin("x").where(col("status") == status)


def not_annotated():  # left out: not declared to return a Pattern
    raise AssertionError("a module scan must not call this")


_private = Pattern.begin("p")  # left out: private
LIMIT = 500  # left out: not a Pattern
'''

#: by card: c1's small then big charge, c2's two declines
BY_CARD = {("small_then_big", "c1", 1000, 3000), ("two_declines", "c2", 2000, 5000)}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "cards.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The rules module, importable by name (a fresh one for each test)."""
    name = f"replay_rules_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(RULES_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def run(spec: str, data: Path, out: Path, *extra: str, key: str | None = "card") -> int:
    return cep_main(["replay", spec, str(data), *(["--key", key] if key else []),
                     "--time", "ts", "--output", str(out / "matches.jsonl"), *extra])


#: the fields the rules here are keyed by: a record has the key column of its rule's key only
KEY_FIELDS = ("card", "ip")


def key(record: dict[str, Any]) -> Any:
    """The key of a record, from its one key column (named after its rule's key field)."""
    [value] = [record[field] for field in KEY_FIELDS if field in record]
    return value


def found(out: Path, kind: str = "matches") -> set[tuple[Any, ...]]:
    return {(r.get("rule"), key(r), r["start"], r["end"]) for r in FileSink(out / kind).read()}


# ----------------------------------------------------------------- what a spec names
def test_a_module_runs_its_patterns_and_pattern_factories(module: str, data: Path,
                                                          tmp_path: Path) -> None:
    assert run(module, data, tmp_path / "out", "--quiet") == 0
    assert found(tmp_path / "out") == BY_CARD


def test_a_python_file_runs_like_a_module(module: str, data: Path, tmp_path: Path) -> None:
    assert run(str(tmp_path / f"{module}.py"), data, tmp_path / "out", "--quiet") == 0
    assert found(tmp_path / "out") == BY_CARD


def test_specs_separated_by_commas_are_named_by_attribute(module: str, data: Path,
                                                          tmp_path: Path) -> None:
    spec = f"{module}:small_then_big,{module}:two_declines"
    assert run(spec, data, tmp_path / "out", "--quiet") == 0
    assert found(tmp_path / "out") == BY_CARD


def test_name_equals_spec_names_a_rule(module: str, data: Path, tmp_path: Path) -> None:
    # the factory's arguments may hold commas: they are not cut
    spec = f"big={module}:small_then_big,declined={module}:two_declines(status='declined')"
    assert run(spec, data, tmp_path / "out", "--quiet") == 0
    assert found(tmp_path / "out") == {("big", "c1", 1000, 3000), ("declined", "c2", 2000, 5000)}


def test_a_directory_of_json_files_named_by_stem_each_rule_file_keyed_by_its_key(
        data: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "small_then_big.json").write_text(SMALL_THEN_BIG.to_json())
    (rules / "declines_by_ip.json").write_text(Rule("declines", 1, "ip", TWO_DECLINES).to_json())
    (rules / "README.txt").write_text("not a rule")
    assert run(str(rules), data, tmp_path / "out", "--quiet") == 0
    assert found(tmp_path / "out") == {
        ("small_then_big", "c1", 1000, 3000),          # keyed by --key card
        ("declines_by_ip", "10.0.0.1", 2000, 5000),    # keyed by the rule file's ip
        ("declines_by_ip", "10.0.0.2", 3000, 4000)}


def test_a_rule_file_of_several_rules_runs_each_by_its_name(data: Path, tmp_path: Path) -> None:
    several = tmp_path / "fraud.json"
    several.write_text(json.dumps({"rules": [Rule("big", 1, "card", SMALL_THEN_BIG).to_dict(),
                                             Rule("declines", 1, "ip", TWO_DECLINES).to_dict()]}))
    assert run(str(several), data, tmp_path / "out", "--quiet", key=None) == 0
    assert found(tmp_path / "out") == {("big", "c1", 1000, 3000),
                                       ("declines", "10.0.0.1", 2000, 5000),
                                       ("declines", "10.0.0.2", 3000, 4000)}


def test_a_disabled_rule_is_left_out_of_a_rule_set(data: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A rule marked ``"enabled": false`` does not run with the others (it did), but runs
    when named on its own; a set of disabled rules only is refused."""
    several = tmp_path / "fraud.json"
    several.write_text(json.dumps({"rules": [
        Rule("big", 1, "card", SMALL_THEN_BIG).to_dict(),
        {**Rule("declines", 1, "ip", TWO_DECLINES).to_dict(), "enabled": False}]}))
    assert run(str(several), data, tmp_path / "set", "--quiet", key=None) == 0
    assert found(tmp_path / "set") == {("big", "c1", 1000, 3000)}
    assert run(f"{several}:declines", data, tmp_path / "one", "--quiet", key=None) == 0
    assert {(key, start) for _, key, start, _ in found(tmp_path / "one")} == {
        ("10.0.0.1", 2000), ("10.0.0.2", 3000)}
    # so does a file of that one rule, as cep match runs it: each says it is disabled
    alone = tmp_path / "declines.json"
    alone.write_text(json.dumps({**Rule("declines", 1, "ip", TWO_DECLINES).to_dict(),
                                 "enabled": False}))
    capsys.readouterr()
    assert run(str(alone), data, tmp_path / "alone", "--quiet", key=None) == 0
    assert found(tmp_path / "alone") == found(tmp_path / "one")
    assert cep_main(["match", str(alone), str(data), "--time", "ts", "-q"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"cep {command}: note: rule 'declines' is disabled (\"enabled\": false); it runs "
        "because it is named on its own" for command in ("replay", "match")]
    off = tmp_path / "off.json"
    off.write_text(json.dumps({"rules": [
        {**Rule("big", 1, "card", SMALL_THEN_BIG).to_dict(), "enabled": False},
        {**Rule("declines", 1, "ip", TWO_DECLINES).to_dict(), "enabled": False}]}))
    with pytest.raises(CEPError, match="every rule is disabled"):
        replay(str(off), [data], key=None, time="ts", output=tmp_path / "x" / "m.jsonl",
               progress=False)


def test_replay_in_python_takes_a_spec_or_a_dict_of_rules(module: str, data: Path,
                                                          tmp_path: Path) -> None:
    by_spec = replay(module, [data], key="card", time="ts", output=tmp_path / "a" / "matches.jsonl",
                     progress=False)
    by_dict = replay({"two_declines": TWO_DECLINES, "small_then_big": SMALL_THEN_BIG}, [data],
                     key="card", time="ts", output=tmp_path / "b" / "matches.jsonl", progress=False)
    assert found(tmp_path / "a") == found(tmp_path / "b") == BY_CARD
    assert by_spec.rules == by_dict.rules
    assert {name: (c["matches"], c["timeouts"], c["dead_letters"])
            for name, c in by_dict.rules.items()} == {"small_then_big": (1, 0, 0),
                                                      "two_declines": (1, 0, 0)}
    assert list(by_dict.rules) == ["small_then_big", "two_declines"]  # in name order


# -------------------------------------------------------------------- a single pattern
def test_a_single_spec_runs_one_unnamed_pattern_as_before(module: str, data: Path,
                                                          tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert not names_rule_set(f"{module}:small_then_big")
    assert run(f"{module}:small_then_big", data, tmp_path / "out") == 0
    records = FileSink(tmp_path / "out" / "matches").read()
    assert [(r["card"], r["start"], r["end"]) for r in records] == [("c1", 1000, 3000)]
    assert "rule" not in records[0]
    assert not _rules_table(capsys.readouterr().out)


def test_a_file_spec_with_a_comma_or_equals_sign_in_its_path_is_one_pattern(
        data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("day=1,2").mkdir()
    Path("day=1,2", "rules.py").write_text(RULES_MODULE)
    spec = "day=1,2/rules.py:small_then_big"
    assert not names_rule_set(spec)
    assert run(spec, data, tmp_path / "out", "--quiet") == 0
    assert found(tmp_path / "out") == {(None, "c1", 1000, 3000)}


# ---------------------------------------------------------------------------- summary
def _rules_table(out: str) -> dict[str, list[str]]:
    """The rows of the printed rules table: rule -> [matches, timeouts, dead letters]."""
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "rules"]
    if not starts:
        return {}
    rows = {}
    for line in lines[starts[0] + 1:]:
        cells = re.findall(r"[\w.,-]+", line)
        if len(cells) == 6 and cells[0] != "rule":
            rows[cells[0]] = cells[1:4]  # matches, timeouts, dead letters
    return rows


def test_the_summary_counts_each_rules_matches_timeouts_and_dead_letters(
        module: str, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # short paths in the summary
    # one more event, without a card: a dead letter of the rules keyed by card, not of by_ip
    rows = [*ROWS, {"card": None, "ip": "10.0.0.3", "amount": 1, "status": "ok", "ts": 6000}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "by_ip.json").write_text(Rule("by_ip", 1, "ip", TWO_DECLINES).to_json())
    spec = f"{module}:small_then_big,by_ip.json,{module}:two_declines"
    assert run(spec, Path("cards.jsonl"), Path("out")) == 0
    printed = capsys.readouterr().out
    assert _rules_table(printed) == {"by_ip": ["2", "0", "0"],
                                     "small_then_big": ["1", "0", "1"],
                                     "two_declines": ["1", "0", "1"]}
    assert re.search(r"dead letters\s*│\s*0 \(events no rule could take; per rule below\)",
                     printed)
    # every rule's refusal is a record of its own
    assert "out/dead_letters/ (2 dead letters)" in printed
    dead = FileSink(tmp_path / "out" / "dead_letters").read()
    assert sorted((r["rule"], r["event"]["ts"]) for r in dead) == [
        ("small_then_big", 6000), ("two_declines", 6000)]


def test_the_summary_names_each_rule_in_full_in_a_log(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Captured output is not a terminal (a CI log, a pipe): the rules table is as wide as
    it needs, not cut to 80 columns, so rules named alike stay apart (they were both
    ``small_…``)."""
    folder = tmp_path / "rules"
    folder.mkdir()
    names = ["small_then_big_without_refund_in_between", "small_then_big_within_a_day"]
    for name in names:
        (folder / f"{name}.json").write_text(Rule(name, 3, "card", SMALL_THEN_BIG).to_json())
    assert run(str(folder), data, tmp_path / "out", key=None) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("│ small_then")]  # the rules table's (not the changes')
    assert [re.findall(r"[\w.,-]+", line)[:2] for line in rows] == [
        [name, "1"] for name in sorted(names)]


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("spec", "says"), [
    ("{m}:small_then_big,{m}:small_then_big",
     "two rules are named 'small_then_big' ('{m}:small_then_big' and '{m}:small_then_big'): "
     "name them apart with NAME=SPEC"),
    ("{m},{m}:two_declines", "two rules are named 'two_declines'"),
    ("{m}:small_then_big,{m}:nope", "rule 'nope': pattern '{m}:nope': module '{m}' has no "
     "attribute 'nope'"),
    ("{m}:small_then_big,", "an empty spec between commas"),
    ("x={m}", "'{m}' names several rules, and x= names one"),
    ("{m}:small_then_big,no_such_module_xyz", "'no_such_module_xyz': not a module that can "
     "be found"),
    ("{dir}/empty", "holds no .json files"),
    ("{dir}/broken", "rule 'oops': pattern '{dir}/broken/oops.json': {dir}/broken/oops.json "
     "is not valid JSON"),
    ("{dir}/nothing.py", "holds no Pattern and no pattern factory"),
    ("{dir}/boom.py", "rule '{dir}/boom.py:boom': calling boom() failed: "
     "RuntimeError('no pattern today')"),
])
def test_a_rule_set_that_cannot_load_names_the_spec_and_the_rule(
        spec: str, says: str, module: str, data: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "oops.json").write_text('{"format": ')
    (tmp_path / "nothing.py").write_text("LIMIT = 5\n")
    (tmp_path / "boom.py").write_text("from cep import Pattern\n\n\ndef boom() -> Pattern:\n"
                                      "    raise RuntimeError('no pattern today')\n")
    spec, says = (s.format(m=module, dir=tmp_path) for s in (spec, says))
    with pytest.raises(CEPError) as err:
        load_rule_set(spec)
    assert str(err.value).startswith(f"rules {spec!r}: ") and says in str(err.value)
    assert run(spec, data, tmp_path / "out", "--quiet") == 2
    assert capsys.readouterr().err.strip() == f"cep replay: {err.value}"


def test_commands_of_one_pattern_say_that_replay_runs_several(
        module: str, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cep_main(["match", module, str(data), "--key", "card", "--time", "ts"]) == 2
    err = capsys.readouterr().err
    assert f"pattern '{module}' names a set of rules: this command takes one pattern" in err
    assert "cep replay runs several rules in one pass" in err


# -------------------------------------------------------------------------- checkpoints
def _stopped_after_two_events(spec: str, data: Path, out: Path, chk: Path) -> None:
    polls = iter(range(100))
    first = replay(spec, [data], key="card", time="ts", output=out / "matches.jsonl",
                   checkpoint_dir=chk, checkpoint_every=1, batch_size=1, progress=False,
                   stop=lambda: next(polls) == 1)
    assert first.stopped


def test_the_same_rules_in_another_order_resume_and_give_the_whole_output(
        module: str, data: Path, tmp_path: Path) -> None:
    assert run(module, data, tmp_path / "whole", "--quiet") == 0
    out, chk = tmp_path / "out", tmp_path / "chk"
    _stopped_after_two_events(f"{module}:small_then_big,{module}:two_declines", data, out, chk)
    assert run(f"{module}:two_declines,{module}:small_then_big", data, out, "--quiet",
               "--checkpoint-dir", str(chk), "--batch-size", "1", "--resume") == 0
    assert found(out) == found(tmp_path / "whole") == BY_CARD


@pytest.mark.parametrize(("then", "says"), [
    ("{m}:small_then_big,renamed={m}:two_declines",
     "ran the rules small_then_big, two_declines; this replay runs renamed, small_then_big "
     "(left out: two_declines; added: renamed)"),
    ("{m}:small_then_big", "ran the rules small_then_big, two_declines; this replay runs one "
     "pattern"),
    ("{m}:small_then_big,two_declines={m}:small_then_big",
     "(pattern or key changed: two_declines)"),
])
def test_resuming_with_other_rules_is_refused(then: str, says: str, module: str, data: Path,
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    _stopped_after_two_events(module, data, out, chk)
    assert run(then.format(m=module), data, out, "--quiet", "--checkpoint-dir", str(chk),
               "--resume") == 2
    err = capsys.readouterr().err
    assert err.startswith("cep replay: checkpoint ") and says.format(m=module) in err, err
    assert "resume with the rules it ran" in err


def test_a_checkpoint_of_one_pattern_is_not_resumed_by_rules(module: str, data: Path,
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    _stopped_after_two_events(f"{module}:small_then_big", data, out, chk)
    assert run(f"small_then_big={module}:small_then_big", data, out, "--quiet",
               "--checkpoint-dir", str(chk), "--resume") == 2
    assert ("ran one pattern; this replay runs the rules small_then_big"
            in capsys.readouterr().err)


# ------------------------------------------------- a directory of rule files, without --watch
#: a rule with measures, keyed by card: c1's small charge then big one
MEASURED = Rule("big_after_small", 4, "card", SMALL_THEN_BIG,
                measures={"smalls": count("small"), "paid": first("big", "amount")})


def rules_dir(tmp_path: Path, *broken: tuple[str, str]) -> Path:
    """rules/: MEASURED and two declines by ip, and a broken file per ``broken`` (name,
    text)."""
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "big_after_small.json").write_text(MEASURED.to_json())
    (folder / "declines.json").write_text(Rule("declines", 2, "ip", TWO_DECLINES).to_json())
    for name, text in broken:
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("watch", [[], ["--watch", "1"]], ids=["once", "watched"])
def test_records_of_a_rule_directory_carry_version_and_measures(
        watch: list[str], data: Path, tmp_path: Path) -> None:
    """With --watch or without, a rule's records name it, its version and its measures."""
    assert run(str(rules_dir(tmp_path)), data, tmp_path / "out", "--quiet", *watch,
               key=None) == 0
    records = FileSink(tmp_path / "out" / "matches").read()
    [big] = [r for r in records if r["rule"] == "big_after_small"]
    assert (big["version"], big["smalls"], big["paid"]) == (4, 1, 900)
    assert sorted((r["rule"], r["version"], r["ip"]) for r in records if "ip" in r) == [
        ("declines", 2, "10.0.0.1"), ("declines", 2, "10.0.0.2")]


@pytest.mark.parametrize("spec", ["{several}:big_after_small",
                                  "{several}:big_after_small,{several}:declines",
                                  "mine={several}:big_after_small"])
def test_rules_of_a_rule_file_named_one_by_one_keep_version_and_measures(
        spec: str, data: Path, tmp_path: Path) -> None:
    """As a directory of rule files runs them: their records' columns are the rule's."""
    several = tmp_path / "several.json"
    several.write_text(json.dumps({"rules": [
        MEASURED.to_dict(), Rule("declines", 2, "ip", TWO_DECLINES).to_dict()]}))
    assert run(spec.format(several=several), data, tmp_path / "out", "--quiet", key=None) == 0
    records = FileSink(tmp_path / "out" / "matches").read()
    [big] = [r for r in records if "card" in r]
    assert (big["rule"], big["version"], big["smalls"], big["paid"]) == (
        "mine" if spec.startswith("mine") else "big_after_small", 4, 1, 900)
    assert {(r["rule"], r["version"]) for r in records if "ip" in r} <= {("declines", 2)}


def test_cep_match_of_a_rule_file_gives_its_name_version_and_measures(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rule_file = tmp_path / "big_after_small.json"
    rule_file.write_text(MEASURED.to_json())
    assert cep_main(["match", str(rule_file), str(data), "--time", "ts", "-q"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert list(record)[:4] == ["card", "kind", "rule", "version"]
    assert (record["rule"], record["version"], record["smalls"], record["paid"]) == (
        "big_after_small", 4, 1, 900)


@pytest.mark.parametrize("watch", [[], ["--watch", "1"]], ids=["once", "watched"])
def test_a_broken_rule_file_is_reported_and_the_other_rules_run(
        watch: list[str], data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each broken rule is named with its file and place; the others run; the exit status
    (1, as cep rules check and cep backtest) and the summary say rules had problems."""
    monkeypatch.chdir(tmp_path)
    typo = {**Rule("typo", 1, "card", SMALL_THEN_BIG).to_dict(), "kee": "card"}
    rules_dir(tmp_path, ("a_syntax.json", '{"name": '), ("typo.json", json.dumps(typo)))
    assert run("rules", Path(data.name), Path("out"), *watch, key=None) == 1
    printed = capsys.readouterr()
    problems = [line for line in printed.err.splitlines() if "rule problem" in line]
    assert problems == [
        "cep replay: rule problem: rules/a_syntax.json: line 1, column 10: not valid JSON: "
        "Expecting value",
        "cep replay: rule problem: rules/typo.json: $: unknown field 'kee' (a rule has: "
        "format, name, version, key, pattern, measures, enabled, description, owner)"]
    assert re.search(r"rule problems\s*│\s*2 \(printed above\)", printed.out)
    assert {r["rule"] for r in FileSink(tmp_path / "out" / "matches").read()} == {
        "big_after_small", "declines"}


def test_a_measure_that_fails_on_the_data_is_null_and_reported_and_the_job_goes_on(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A measure reading a field the input holds as text, in arithmetic: ``cep rules
    check`` cannot know the field's type, the data says it.  Its matches are written, with
    that measure null (a match is never lost to its measure), the problem is reported once
    with the rule, and the other rules run."""
    gap = Rule("text_gap", 1, "card", SMALL_THEN_BIG, measures={
        "paid": first("big", "amount"), "gap": last("big", "amount") - first("small", "status")})
    folder = rules_dir(tmp_path)
    (folder / "text_gap.json").write_text(gap.to_json())
    assert run(str(folder), data, tmp_path / "out", key=None) == 1
    printed = capsys.readouterr()
    assert [line for line in printed.err.splitlines() if "problem" in line] == [
        "cep replay: measure problem: rule 'text_gap' (version 1): measure 'gap': "
        "(last('big', 'amount') - first('small', 'status')): arithmetic needs numbers, got "
        "'ok': null in 1 of 1 matches (and in any later match it fails on)"]
    records = FileSink(tmp_path / "out" / "matches").read()
    [text_gap] = [r for r in records if r["rule"] == "text_gap"]
    assert (text_gap["card"], text_gap["paid"], text_gap["gap"]) == ("c1", 900, None)
    assert {r["rule"] for r in records} == {"big_after_small", "declines", "text_gap"}


def test_a_rule_directory_none_of_whose_rules_loads_is_refused(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "old.json").write_text(json.dumps({**MEASURED.to_dict(), "version": 0}))
    assert run(str(folder), data, tmp_path / "out", "--quiet", key=None) == 2
    assert capsys.readouterr().err == (
        f"cep replay: rules {str(folder)!r}: no rule loads: {folder / 'old.json'}: $.version: "
        "versions start at 1, got 0\n")
