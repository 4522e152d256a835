"""Rule sets that change while a job runs (#13 item 2): added, removed, disabled and changed
rules (``drain`` and ``drop``), on both engines, checked against runs that replay each
stretch of the history with the rules in force for it.

The oracle, for a change that takes effect at watermark ``W`` (a schedule entry at event
time ``W + 1``, so it lands exactly there, whatever the batches):

- a rule added at ``W`` finds what a fresh run of it over the events after ``W`` finds;
- a rule removed (or disabled), or a version dropped, at ``W`` finds what a run over the
  events up to ``W`` has found once the watermark is ``W`` (nothing the end of the input
  would flush), and its partial matches at that point are counted as dropped;
- a version drained at ``W`` finds what a run over the whole history finds for partial
  matches that began at or before ``W`` (no skip strategy: partial matches are then
  independent of each other), and nothing that began after.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep import Pattern, col
from cep.errors import CEPError
from cep.rules import Rule, rule_set
from cep.runtime import (
    CepOperator,
    FileSink,
    IterableSource,
    Job,
    ListSink,
    RuleDirectory,
    RuleFeed,
    RuleSchedule,
    RuleWarning,
)
from cep.runtime.watermarks import END_OF_TIME
from tests.strategies import event_rows, expressions, patterns, streams

ENGINES = ["reference", "numba"]

PAIR = Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
TRIPLE = (Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
          .followed_by("c").where(col("v") == 3))
BIG = Pattern.begin("big").where(col("v") >= 3)


def rows_of(values: list[int], keys: str = "k") -> list[dict[str, Any]]:
    """One event per millisecond from 0; keys cycle through the letters of ``keys``."""
    return [{"key": keys[i % len(keys)], "v": v, "ts": i} for i, v in enumerate(values)]


def live_run(rows: list[dict[str, Any]], schedule: list[tuple[int | None, list[Rule]]], *,
             engine: str = "numba", on_change: str = "drain", batch: int = 3,
             ) -> tuple[list[dict[str, Any]], Any]:
    out = ListSink()
    job = (Job(IterableSource(rows, batch_size=batch)).timestamps("ts")
           .rules(RuleSchedule(schedule), on_change=on_change, engine=engine)
           .sink(out, kinds=("match", "timeout")))
    return out.records, job.run()


def found(records: list[dict[str, Any]], rule: str, version: int | None = None) -> Counter:
    return Counter((r["kind"], r["key"], r["start"], r["end"], r["match_id"]) for r in records
                   if r["rule"] == rule and (version is None or r["version"] == version))


def stretch(rule: Rule, rows: list[dict[str, Any]], *, engine: str, upto: int | None = None,
            began_by: int | None = None) -> tuple[Counter, int]:
    """What ``rule`` finds alone over ``rows``: to the end of time, or only up to watermark
    ``upto`` (and its partial matches then); ``began_by`` keeps what began by then."""
    op = CepOperator({rule.name: (rule.pattern, rule.key)}, engine, key=rule.key, time="ts")
    got: list[Any] = []
    if rows:
        out, _ = op.process_batch(rows)
        got += out.found
    out = op.process_watermark(END_OF_TIME if upto is None else upto)
    got += out.found
    records = [m for part in got for m in _records(part, rule)]
    if began_by is not None:
        records = [r for r in records if r["start"] <= began_by]
    return Counter((r["kind"], r["key"], r["start"], r["end"], r["match_id"])
                   for r in records), op.partial_matches


def _records(part: Any, rule: Rule) -> list[dict[str, Any]]:
    from cep.runtime.tables import match_table, stage_columns

    return match_table(part, key=rule.key, stages=stage_columns(rule.pattern)).to_pylist()


# --------------------------------------------------------------- the changes, one by one
@pytest.mark.parametrize("engine", ENGINES)
def test_an_added_rule_reads_the_events_after_the_watermark_it_came_at(engine: str) -> None:
    rows = rows_of([1, 2, 1, 2, 1, 2, 1, 2])
    big = Rule("big", 1, "key", BIG)
    pair = Rule("pair", 1, "key", PAIR)
    records, summary = live_run(rows, [(None, [big]), (4, [big, pair])], engine=engine)
    # pair sees the events at 4 and after, none before: the 1 at 2 begins nothing
    assert sorted((r["start"], r["end"]) for r in records if r["rule"] == "pair") == [
        (4, 5), (6, 7)]
    assert found(records, "pair", 1) == stretch(pair, rows[4:], engine=engine)[0]
    assert [(c["rule"], c["change"], c["version"], c["watermark"])
            for c in summary.rule_changes] == [
        ("big", "added", 1, -2**63), ("pair", "added", 1, 3)]
    assert summary.rules["pair"]["events"] == 4 and summary.rules["big"]["events"] == 8


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("how", ["removed", "disabled"])
def test_a_removed_or_disabled_rule_stops_and_its_partial_matches_are_counted(
        engine: str, how: str) -> None:
    rows = rows_of([1, 2, 1, 1, 2, 2], keys="k")
    pair = Rule("pair", 1, "key", PAIR)
    later = [] if how == "removed" else [Rule("pair", 1, "key", PAIR, enabled=False)]
    records, summary = live_run(rows, [(None, [pair]), (4, later)], engine=engine)
    # up to watermark 3: (0, 1), and the 1s at 2 and 3 wait for a 2 they never get
    assert sorted((r["start"], r["end"]) for r in records) == [(0, 1)]
    want, live = stretch(pair, rows[:4], engine=engine, upto=3)
    assert found(records, "pair") == want and live == 2
    [change] = summary.rule_changes[1:]
    assert (change["change"], change["previous"], change["dropped"]) == (how, 1, 2)
    assert summary.rules["pair"]["dropped_on_change"] == 2
    assert summary.rules["pair"]["partial_matches"] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_drained_version_completes_what_it_began_and_begins_nothing(engine: str) -> None:
    rows = rows_of([1, 2, 1, 1, 2, 3, 1, 2, 3])
    v1, v2 = Rule("seq", 1, "key", PAIR), Rule("seq", 2, "key", TRIPLE)
    records, summary = live_run(rows, [(None, [v1]), (4, [v2])], engine=engine)
    # v1 began 1s at 0, 2 and 3: each completes with the 2 at 4; the 1 at 6 is v2's only
    assert sorted((r["version"], r["start"], r["end"]) for r in records) == [
        (1, 0, 1), (1, 2, 4), (1, 3, 4), (2, 6, 8)]
    assert found(records, "seq", 1) == stretch(v1, rows, engine=engine, began_by=3)[0]
    assert found(records, "seq", 2) == stretch(v2, rows[4:], engine=engine)[0]
    assert [(c["change"], c["version"], c["previous"], c["watermark"], c["dropped"])
            for c in summary.rule_changes[1:]] == [
        ("changed", 2, 1, 3, 0), ("retired", None, 1, 4, 0)]
    assert summary.rules["seq"]["version"] == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_dropped_version_loses_its_partial_matches(engine: str) -> None:
    rows = rows_of([1, 2, 1, 1, 2, 3, 1, 2, 3])
    v1, v2 = Rule("seq", 1, "key", PAIR), Rule("seq", 2, "key", TRIPLE)
    records, summary = live_run(rows, [(None, [v1]), (4, [v2])], engine=engine,
                                on_change="drop")
    assert sorted((r["version"], r["start"], r["end"]) for r in records) == [
        (1, 0, 1), (2, 6, 8)]
    [change] = summary.rule_changes[1:]
    assert (change["change"], change["dropped"]) == ("changed", 2)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_new_version_keyed_by_another_field_rekeys_the_waiting_events(engine: str) -> None:
    # cards a and b share device d: by card there is no pair, by device there is
    rows = [{"card": c, "device": "d", "v": v, "ts": t}
            for t, (c, v) in enumerate([("a", 9), ("a", 1), ("b", 2), ("a", 1), ("b", 2)])]
    v1, v2 = Rule("pair", 1, "card", PAIR), Rule("pair", 2, "device", PAIR)
    out = ListSink()
    job = (Job(IterableSource(rows, batch_size=5)).timestamps("ts")
           .with_watermarks(_delayed(10))  # everything still waits when the change comes
           .rules(RuleSchedule([(None, [v1]), (0, [v2])]), engine=engine).sink(out))
    job.run()
    assert [(r["rule"], r["version"], r["device"], r["start"], r["end"])
            for r in out.records] == [("pair", 2, "d", 1, 2), ("pair", 2, "d", 3, 4)]


def _delayed(ms: int) -> Any:
    from datetime import timedelta

    from cep.runtime import WatermarkStrategy

    return WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=ms))


@pytest.mark.parametrize("engine", ENGINES)
def test_waiting_events_a_new_rule_cannot_read_are_its_dead_letters(engine: str) -> None:
    rows = [{"card": "a", "v": 1, "ts": 0}, {"card": None, "v": 2, "ts": 1},
            {"card": "a", "v": 2, "ts": 2}, {"card": "a", "v": 0, "ts": 50}]
    feed = RuleFeed([Rule("big", 1, "v", BIG)])
    dead, found_ = ListSink(), ListSink()

    def add(summary: Any) -> None:
        if summary.events_in == 3 and len(summary.rule_changes) == 1:
            feed.publish([Rule("big", 1, "v", BIG), Rule("pair", 4, "card", PAIR)])

    job = (Job(IterableSource(rows, batch_size=3)).timestamps("ts")
           .with_watermarks(_delayed(100)).rules(feed, engine=engine)
           .sink(found_).sink_dead_letters(dead))
    summary = job.run(progress=add)
    # the pair rule came (after the first batch) while its three events waited: the null
    # card is its dead letter alone
    assert [(r["rule"], r["version"], r["reason"]) for r in dead.records] == [
        ("pair", 4, "key field 'card' is null")]
    assert [(r["rule"], r["start"], r["end"]) for r in found_.records] == [("pair", 0, 2)]
    assert summary.rules["pair"]["dead_letters"] == 1


def test_records_name_the_rule_and_version_in_files(tmp_path: Path) -> None:
    rows = rows_of([1, 2, 1, 2])
    v1, v2 = Rule("pair", 1, "key", PAIR), Rule("pair", 2, "key", PAIR.within(5))
    job = (Job(IterableSource(rows)).timestamps("ts")
           .rules(RuleSchedule([(None, [v1]), (2, [v2])]))
           .sink(FileSink(tmp_path / "out.parquet")))
    job.run()
    table = FileSink(tmp_path / "out.parquet").read()
    assert [(r["rule"], r["version"], r["start"]) for r in table] == [
        ("pair", 1, 0), ("pair", 2, 2)]


# ------------------------------------------------------------------- the property
@st.composite
def rule_pairs(draw: Any) -> tuple[Rule, Rule]:
    old = draw(patterns(max_stages=3, skips=False, conditions=expressions))
    new = draw(patterns(max_stages=3, skips=False, conditions=expressions))
    return Rule("r", 1, "key", old), Rule("r", 2, "key", new)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=rule_pairs(), stream=streams(max_len=16, keys=("a", "b")),
       at=st.integers(0, 30), what=st.sampled_from(["drain", "drop", "remove", "add"]),
       engine=st.sampled_from(ENGINES), batch=st.integers(1, 5))
def test_every_stretch_finds_what_its_rules_find_alone(
        pair: tuple[Rule, Rule], stream: Any, at: int, what: str, engine: str,
        batch: int) -> None:
    old, new = pair
    if rule_set([old]).check().problems or rule_set([new]).check().problems:
        return  # a rule set reports such a rule and never runs it (see the watched directory)
    rows = event_rows(stream)
    before, after = [r for r in rows if r["ts"] < at], [r for r in rows if r["ts"] >= at]
    if what == "add":
        schedule = [(None, []), (at, [new])]
    elif what == "remove":
        schedule = [(None, [old]), (at, [])]
    else:
        schedule = [(None, [old]), (at, [new])]
    policy = "drop" if what == "drop" else "drain"
    records, summary = live_run(rows, schedule, engine=engine, on_change=policy, batch=batch)
    if what != "remove":
        assert found(records, "r", 2) == stretch(new, after, engine=engine)[0]
    if what in ("drop", "remove"):
        want, live = stretch(old, before, engine=engine, upto=at - 1)
        assert found(records, "r", 1) == want
        [change] = [c for c in summary.rule_changes if c["watermark"] == at - 1]
        assert change["dropped"] == live
    elif what == "drain":
        assert found(records, "r", 1) == stretch(old, rows, engine=engine, began_by=at - 1)[0]
    assert summary.events_in == len(rows)


# ----------------------------------------------------------- a watched directory
def write_rule(folder: Path, rule: Rule, name: str | None = None) -> None:
    (folder / f"{name or rule.name}.json").write_text(rule.to_json())


def watched_run(folder: Path, rows: list[dict[str, Any]], edits: dict[int, Any]
                ) -> tuple[Any, ListSink, list[str]]:
    """A job over ``rows`` in batches of 3 watching the rule files of ``folder``, making
    ``edits[n]()`` once it has read ``n`` events: its summary, records and RuleWarnings."""
    out = ListSink()
    job = (Job(IterableSource(rows, batch_size=3)).timestamps("ts")
           .rules(RuleDirectory(folder, every=0)).sink(out))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = job.run(progress=lambda s: edits.get(s.events_in, lambda: None)())
    return summary, out, [str(w.message) for w in caught if w.category is RuleWarning]


def test_a_watched_directory_applies_edits_and_reports_broken_files(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    write_rule(folder, Rule("pair", 1, "key", PAIR))
    write_rule(folder, Rule("big", 1, "key", BIG))
    rows = rows_of([1, 2, 3] * 6)
    edits = {
        # a typo in big's file: big runs on as it was, and the problem is reported
        3: lambda: (folder / "big.json").write_text("{not json"),
        # pair changed without a new version: reported, not applied
        6: lambda: write_rule(folder, Rule("pair", 1, "key", TRIPLE)),
        # a new version of pair and a new rule; big's file mended and disabled
        9: lambda: (write_rule(folder, Rule("pair", 2, "key", TRIPLE)),
                    write_rule(folder, Rule("ones", 1, "key", Pattern.begin("o").where(
                        col("v") == 1))),
                    write_rule(folder, Rule("big", 2, "key", BIG, enabled=False))),
    }
    summary, out, problems = watched_run(folder, rows, edits)
    assert any("big.json" in p and "not valid JSON" in p for p in problems)
    assert any("does not load now: version 1 runs on" in p for p in problems)
    assert any("changed but kept version 1" in p for p in problems)
    changes = [(c["rule"], c["change"], c["version"], c["previous"])
               for c in summary.rule_changes]
    # each edit is seen after the next batch: the last at watermark 10
    assert changes == [("big", "added", 1, None), ("pair", "added", 1, None),
                       ("big", "disabled", None, 1), ("ones", "added", 1, None),
                       ("pair", "changed", 2, 1)]
    assert summary.rule_changes[-1]["watermark"] == 10
    by_rule = Counter((r["rule"], r["version"]) for r in out.records)
    # big found its 3s up to the change (at 2, 5 and 8), its file broken for a while or not;
    # version 1 of pair its pairs up to 10; the new rules what came after
    assert by_rule == {("big", 1): 3, ("pair", 1): 4, ("ones", 1): 2, ("pair", 2): 2}
    assert summary.rules["big"]["version"] == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_a_version_that_ran_before_is_not_run_again_as_another_rule(
        tmp_path: Path, engine: str) -> None:
    """pair goes 1 (PAIR) -> 2 (TRIPLE) -> 1 again, but finding 3s after 1s: every record
    names its version, so version 1 would name two rules.  The reuse is refused and
    reported (version 2 runs on), also across a restart from a checkpoint taken after
    version 1 left; the very same version 1 may come back."""
    ones_threes = Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 3)
    v1, v2 = Rule("pair", 1, "key", PAIR), Rule("pair", 2, "key", TRIPLE)
    reused = Rule("pair", 1, "key", ones_threes)
    rows = rows_of([1, 2, 3] * 6)
    schedule = [(None, [v1]), (4, [v2]), (10, [reused]), (14, [v1])]

    def job(chk: Path) -> Job:
        return (Job(IterableSource(rows, batch_size=3)).timestamps("ts")
                .rules(RuleSchedule(schedule), engine=engine)
                .sink(ListSink(), kinds=("match",)).checkpoint(chk, every_events=3))

    for stop_at in (None, 6, 9):
        chk = tmp_path / f"chk-{stop_at}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if stop_at is not None:
                job(chk).run(**stop_after(stop_at))
            summary = job(chk).run(resume=stop_at is not None)
        problems = [str(w.message) for w in caught if w.category is RuleWarning]
        assert any("version 1 ran before as another rule" in p
                   and "version 2 still runs" in p for p in problems), stop_at
        changes = [(c["change"], c["version"], c["previous"]) for c in summary.rule_changes
                   if c["change"] != "retired"]
        assert changes[-1] == ("changed", 1, 2), stop_at  # the same version 1 came back
        assert ("changed", 1, 2) not in changes[:-1], stop_at


def test_a_rule_directory_that_cannot_be_read_keeps_its_rules_running(tmp_path: Path) -> None:
    """A watched directory that goes away (a moved mount, a deploy that replaces it) is a
    problem reported, not an order to remove every rule."""
    folder = tmp_path / "rules"
    folder.mkdir()
    write_rule(folder, Rule("big", 1, "key", BIG))
    rows = rows_of([3, 1] * 6)
    out = ListSink()
    job = (Job(IterableSource(rows, batch_size=2)).timestamps("ts")
           .rules(RuleDirectory(folder, every=0)).sink(out))
    moved = {4: lambda: folder.rename(tmp_path / "elsewhere")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = job.run(progress=lambda s: moved.get(s.events_in, lambda: None)())
    problems = [str(w.message) for w in caught if w.category is RuleWarning]
    assert any("no such file or directory" in p for p in problems)
    assert [c["change"] for c in summary.rule_changes] == ["added"]
    assert [r["start"] for r in out.records] == [0, 2, 4, 6, 8, 10]  # every 3, to the end


def test_a_rule_that_does_not_compile_is_reported_and_the_others_run(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    write_rule(folder, Rule("big", 1, "key", BIG))
    bad = Rule("bad", 1, "key", Pattern.begin("a").where((col("v") > 1) & (col("v") == "x")))
    write_rule(folder, bad)
    (folder / "unknown.json").write_text(json.dumps({**Rule("u", 1, "k", BIG).to_dict(),
                                                      "colour": "red"}))
    out = ListSink()
    job = Job(IterableSource(rows_of([3, 4]))).timestamps("ts").rules(folder).sink(out)
    with pytest.warns(RuleWarning) as caught:
        summary = job.run()
    messages = " | ".join(str(w.message) for w in caught)
    assert "cannot compare numeric with string" in messages and "'colour'" in messages
    assert [r["rule"] for r in out.records] == ["big", "big"]
    assert list(summary.rules) == ["big"]


# ------------------------------------------------------------------ checkpoints
def stop_after(events: int) -> dict[str, Any]:
    """``run`` arguments that stop a job once it has read ``events`` events."""
    read = [0]

    def progress(summary: Any) -> None:
        read[0] = summary.events_in

    return {"progress": progress, "stop": lambda: read[0] >= events}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_job_stopped_in_the_middle_of_a_drain_resumes_as_if_it_had_not(
        tmp_path: Path, engine: str) -> None:
    rows = rows_of([1, 2, 1, 1, 3, 2, 3, 1, 2, 3, 1, 1, 2, 3])
    v1, v2 = Rule("seq", 1, "key", PAIR), Rule("seq", 2, "key", TRIPLE)
    big = Rule("big", 1, "key", BIG)
    schedule = [(None, [v1, big]), (4, [v2, big]), (10, [v2])]

    def job(out: Path, chk: Path) -> Job:
        return (Job(IterableSource(rows, batch_size=2)).timestamps("ts")
                .rules(RuleSchedule(schedule), engine=engine)
                .sink(FileSink(out), kinds=("match", "timeout"))
                .checkpoint(chk, every_events=2))

    whole = job(tmp_path / "whole.jsonl", tmp_path / "chk-whole").run()
    want = FileSink(tmp_path / "whole.jsonl").read()
    assert {(r["rule"], r["version"]) for r in want} == {("seq", 1), ("seq", 2), ("big", 1)}
    for stop_at in range(2, len(rows), 2):  # every batch boundary, the changes included
        out, chk = tmp_path / f"out-{stop_at}.jsonl", tmp_path / f"chk-{stop_at}"
        first = job(out, chk).run(**stop_after(stop_at))
        assert first.stopped
        rest = job(out, chk).run(resume=True)
        assert FileSink(out).read() == want, f"stopped after {stop_at} events"
        assert rest.rule_changes == whole.rule_changes
        assert rest.rules == whole.rules


def test_a_checkpoint_records_the_rules_in_force_not_the_sources_rules(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    write_rule(folder, Rule("big", 1, "key", BIG))
    rows = rows_of([3, 3, 3, 3])

    def job() -> Job:
        return (Job(IterableSource(rows, batch_size=2)).timestamps("ts")
                .rules(RuleDirectory(folder, every=0)).checkpoint(tmp_path / "chk",
                                                                 every_events=2))

    job().run(**stop_after(2))
    write_rule(folder, Rule("big", 2, "key", Pattern.begin("big").where(col("v") >= 9)))
    summary = job().run(resume=True)
    # resumed with version 1 in force, the edit is a change at the watermark it resumed at
    assert [(c["change"], c["version"], c["watermark"]) for c in summary.rule_changes] == [
        ("added", 1, -2**63), ("changed", 2, 0)]
    assert summary.matches == 1  # the 3 at 0, the only event at or below the watermark 0


# ------------------------------------------------------------------ the API
def test_a_job_takes_one_kind_of_rules() -> None:
    job = Job(IterableSource([])).timestamps("ts")
    with pytest.raises(CEPError, match="already has its rules"):
        job.match(BIG).rules([Rule("big", 1, "key", BIG)])
    with pytest.raises(CEPError, match="already has a pattern"):
        job.rules([Rule("big", 1, "key", BIG)]).match(BIG)
    with pytest.raises(CEPError, match="on_change is one of drain, drop"):
        job.rules([Rule("big", 1, "key", BIG)], on_change="keep")
    with pytest.raises(CEPError, match="rules are a directory"):
        job.rules(42)


def test_rule_set_of_code_refuses_a_name_twice() -> None:
    with pytest.raises(CEPError, match="given twice"):
        rule_set([Rule("a", 1, "k", BIG), Rule("a", 2, "k", BIG)])


def test_a_rules_measures_are_columns_of_its_records() -> None:
    from cep import count, last

    rule = Rule("pair", 1, "key", PAIR, measures={"n": count("a"), "second": last("b", "v")})
    out = ListSink()
    Job(IterableSource(rows_of([1, 2]))).timestamps("ts").rules([rule]).sink(out).run()
    assert [(r["rule"], r["version"], r["n"], r["second"]) for r in out.records] == [
        ("pair", 1, 1, 2)]


# ------------------------------------------------------------------ cep replay --watch
def test_replay_watches_its_rule_directory(tmp_path: Path) -> None:
    from cep.runtime import replay

    folder = tmp_path / "rules"
    folder.mkdir()
    write_rule(folder, Rule("pair", 1, "key", PAIR))
    data = tmp_path / "events.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows_of([1, 2, 3] * 4)))
    batches = [0]

    def edit() -> bool:  # asked after every batch: the rule gets a new version after two
        batches[0] += 1
        if batches[0] == 2:
            write_rule(folder, Rule("pair", 2, "key", Pattern.begin("a").where(col("v") == 2)
                                    .next("b").where(col("v") == 3)))
        return False

    summary = replay(str(folder), [str(data)], key=None, time="ts",
                     output=str(tmp_path / "out/m.jsonl"),
                     progress=False, batch_size=3, watch=0, stop=edit)
    records = FileSink(tmp_path / "out/m").read()
    # batches of 3: version 2 came at watermark 7 (seen after the third batch)
    assert [(r["version"], r["start"], r["end"]) for r in records] == [
        (1, 0, 1), (1, 3, 4), (1, 6, 7), (2, 10, 11)]
    assert [(c["change"], c["watermark"]) for c in summary.rule_changes] == [
        ("added", -2**63), ("changed", 7)]


def test_cep_replay_watch_prints_the_changes(tmp_path: Path, capsys: Any,
                                             monkeypatch: Any) -> None:
    from cep.runtime.cli import main

    monkeypatch.chdir(tmp_path)
    Path("rules").mkdir()
    write_rule(Path("rules"), Rule("pair", 3, "key", PAIR))
    Path("events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_of([1, 2])))
    assert main(["replay", "rules", "events.jsonl", "--time", "ts", "--watch", "1",
                 "--output", "out/m.jsonl"]) == 0
    printed = capsys.readouterr().out
    assert "rule changes" in printed and "added" in printed
    assert [(r["rule"], r["version"]) for r in FileSink("out/m").read()] == [("pair", 3)]
    with pytest.raises(SystemExit):
        main(["replay", "rules", "events.jsonl", "--time", "ts", "--watch", "0",
              "--output", "out/m.jsonl"])


def test_a_rule_source_read_by_one_job_gives_the_next_job_its_rules(tmp_path: Path) -> None:
    """A schedule, a watched directory, a feed or a job run twice: the second run finds
    what the first found (each source had remembered what it had given)."""
    rows = [{"card": "c", "ts": t, "v": v} for t, v in enumerate([9, 1, 9, 2, 9])]
    v1 = Rule("big", 1, "card", Pattern.begin("a").where(col("v") > 5))
    v2 = Rule("big", 2, "card", Pattern.begin("a").where(col("v") > 8))
    (tmp_path / "big.json").write_text(json.dumps(v1.to_dict()))
    sources = {"schedule": RuleSchedule([(None, [v1]), (2, [v2])]),
               "directory": RuleDirectory(tmp_path, every=0), "feed": RuleFeed([v1])}
    for name, source in sources.items():
        job = Job(IterableSource(rows)).timestamps("ts").rules(source)
        runs = []
        for _ in range(2):
            out = ListSink()
            job.sink(out).run()
            runs.append([(r["version"], r["start"]) for r in out.records])
        assert runs[0] == runs[1] and runs[0], name
    assert runs[0] == [(1, 0), (1, 2), (1, 4)]  # the feed's


def test_a_rule_defined_again_in_a_new_file_keeps_the_version_in_force(tmp_path: Path) -> None:
    """A file added while the job runs defines a rule that runs already, and sorts before
    the file it runs from: which one is meant is unclear, so the running version runs on
    (it had been replaced by the new file's) until one of the two files goes."""
    folder = tmp_path / "rules"
    (folder / "sub").mkdir(parents=True)
    write_rule(folder / "sub", Rule("big", 1, "key", BIG))
    rows = rows_of([3] * 12)
    edits = {3: lambda: write_rule(folder, Rule("big", 2, "key", BIG)),  # folder/big.json
             9: lambda: (folder / "sub" / "big.json").unlink()}
    summary, out, problems = watched_run(folder, rows, edits)
    assert any("change was not applied; version 1 still runs" in p and "big.json" in p
               for p in problems)
    assert [(c["change"], c["version"]) for c in summary.rule_changes] == [
        ("added", 1), ("changed", 2)]
    # seen after the batch after the sub/ file went (as in the test above): version 1 found
    # the events up to watermark 10, version 2 the one after
    assert summary.rule_changes[-1]["watermark"] == 10
    assert Counter(r["version"] for r in out.records) == {1: 11, 2: 1}
