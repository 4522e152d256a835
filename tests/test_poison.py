"""No record can stop a job or its checkpoints (#17).

Events of odd but plain types - a field that is a number in one event and text in the
next, integers beyond 64 bits, tuple, bytes and datetime keys, zoned datetimes among
integer times - ran fine without checkpoints but failed the job at its next checkpoint,
and a resume failed the same way.  Checkpoints now hold whatever the engine accepted.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cep import Pattern, col
from cep.jsonvalue import from_json, to_json
from cep.runtime import IterableSource, Job, ListSink, WatermarkStrategy

EXPR = (Pattern.begin("small").where(col("amount") < 5)
        .followed_by("big").where(col("amount") > 500).within(100_000))
LAMBDA = (Pattern.begin("small").where(lambda e: e["amount"] < 5)
          .followed_by("big").where(lambda e: e["amount"] > 500).within(100_000))

CASES: dict[str, list[dict[str, Any]]] = {
    "an integer beyond 64 bits": [
        {"k": "c", "ts": 1, "amount": 1, "ref": 10**30}, {"k": "c", "ts": 2, "amount": 900}],
    "a field of two types": [
        {"k": "c", "ts": 1, "amount": 1, "merchant": 7},
        {"k": "c", "ts": 2, "amount": 3, "merchant": "shop"},
        {"k": "c", "ts": 3, "amount": 900, "merchant": "x"}],
    "tuple keys": [{"k": ("a", 1), "ts": 1, "amount": 1}, {"k": ("a", 1), "ts": 2, "amount": 900}],
    "bytes keys": [{"k": b"ab", "ts": 1, "amount": 1}, {"k": b"ab", "ts": 2, "amount": 900}],
    "datetime keys": [{"k": datetime(2024, 1, 1), "ts": 1, "amount": 1},
                      {"k": datetime(2024, 1, 1), "ts": 2, "amount": 900}],
    "a zoned datetime among integer times": [
        {"k": "c", "ts": 1, "amount": 1},
        {"k": "c", "ts": datetime(1970, 1, 1, 0, 0, 0, 2000, tzinfo=UTC), "amount": 3},
        {"k": "c", "ts": 3, "amount": 900}],
}


def _job(events: list[dict[str, Any]], engine: str, out: ListSink, chk: Path | None) -> Job:
    job = (Job(IterableSource(events, batch_size=1))
           .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(5_000))
           .key_by("k").timestamps("ts")
           .match(EXPR if engine == "numba" else LAMBDA, engine=engine).sink(out))
    return job.checkpoint(chk, every_events=1) if chk is not None else job


def _records(out: ListSink) -> list[Any]:
    return sorted(to_json(r) for r in out.records)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_checkpoints_hold_plain_events_of_any_type(
        tmp_path: Path, engine: str, case: str) -> None:
    """Checkpointed after every event, stopped after each number of events in turn and
    resumed: the output equals a run without checkpoints."""
    events = CASES[case] + [{"k": "zz", "ts": 10_000 + i, "amount": 50} for i in range(3)]
    want = ListSink()
    _job(events, engine, want, None).run()
    assert want.records, "the scenario must match something"
    for stop_after in range(1, len(events)):
        chk = tmp_path / f"chk-{stop_after}"
        first, second = ListSink(), ListSink()
        seen = [0]

        def stop(seen: list[int] = seen, n: int = stop_after) -> bool:
            seen[0] += 1
            return seen[0] >= n

        _job(events, engine, first, chk).run(stop=stop)
        _job(events, engine, second, chk).run(resume=True)
        assert sorted(_records(first) + _records(second)) == _records(want), (case, stop_after)
        shutil.rmtree(chk)


@pytest.mark.parametrize("value", [
    10**30, -(2**70), ("a", (1, b"\x00")), {"nested": [1, {"x": None}]}, {1: "int key"},
    {"$cep": "looks like a tag"}, datetime(2024, 3, 1, 9, 30, tzinfo=UTC), float("inf"),
])
def test_tagged_json_round_trips(value: Any) -> None:
    assert from_json(to_json(value)) == value


POISON = {
    "a time of 10**20": {"k": "c", "ts": 10**20, "amount": 1},
    "a time of -10**20": {"k": "c", "ts": -(10**20), "amount": 1},
    "a float time of 1e300": {"k": "c", "ts": 1e300, "amount": 1},
    "thirty digits of text as a time": {"k": "c", "ts": "9" * 30, "amount": 1},
    "the year 10000": {"k": "c", "ts": "10000-01-01T00:00:00", "amount": 1},
    "a list as the key": {"k": [1], "ts": 7, "amount": 1},
    "NaN as the key": {"k": float("nan"), "ts": 7, "amount": 1},
    "text where a number is read": {"k": "c", "ts": 6, "amount": "x"},
}


@pytest.mark.parametrize("poison", list(POISON))
@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_a_poison_record_is_a_dead_letter_and_the_job_goes_on(engine: str, poison: str) -> None:
    events = [{"k": "c", "ts": 1, "amount": 1}, POISON[poison], {"k": "c", "ts": 9, "amount": 900}]
    out, dead = ListSink(), ListSink()
    summary = (Job(IterableSource(events)).key_by("k").timestamps("ts")
               .match(EXPR if engine == "numba" else LAMBDA, engine=engine)
               .sink(out).sink(dead, kinds=("dead_letter",)).run())
    assert (summary.matches, summary.dead_letters) == (1, 1)
    assert dead.records[0]["event"] == POISON[poison]


def test_an_integer_beyond_float64_is_a_dead_letter_where_numbers_are_float64() -> None:
    """The numba engine reads numbers as float64: 10**400 has none (it raised OverflowError
    and stopped the job); the reference engine compares Python integers and takes it."""
    events = [{"k": "c", "ts": 1, "amount": 1}, {"k": "c", "ts": 5, "amount": 10**400},
              {"k": "c", "ts": 9, "amount": 900}]
    for engine, rule, dead_letters in (("numba", EXPR, 1), ("reference", LAMBDA, 0)):
        dead = ListSink()
        summary = (Job(IterableSource(events)).key_by("k").timestamps("ts")
                   .match(rule, engine=engine).sink(ListSink())
                   .sink(dead, kinds=("dead_letter",)).run())
        assert (summary.matches, summary.dead_letters) == (1, dead_letters), engine
        if dead_letters:
            assert "beyond the range of a number" in dead.records[0]["reason"]


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize("where", ["memory", "jsonl"])
def test_a_word_in_the_first_event_where_numbers_go_is_one_dead_letter(
        tmp_path: Path, engine: str, where: str) -> None:
    """The field's type is what most of its values are, not its first value: a first
    event holding text where the pattern compares numbers is that event's dead letter
    (the whole job was refused: 'cannot compare string with numeric')."""
    from cep.runtime import FileSource

    rows = [{"k": "a", "ts": 1, "v": "oops"}, {"k": "a", "ts": 2, "v": 5},
            {"k": "a", "ts": 3, "v": 7}]
    if where == "jsonl":
        path = tmp_path / "e.jsonl"
        path.write_text("".join(to_json(r) + "\n" for r in rows))
        source: Any = FileSource(path)
    else:
        source = IterableSource(rows)
    out, dead = ListSink(), ListSink()
    (Job(source).key_by("k").timestamps("ts")
     .match(Pattern.begin("a").where(col("v") > 4), engine=engine)
     .sink(out).sink_dead_letters(dead).run())
    assert [r["start"] for r in out.records] == [2, 3]
    assert len(dead.records) == 1 and "'oops'" in dead.records[0]["reason"]


def test_text_where_rules_compare_numbers_is_the_same_dead_letter_on_both_engines() -> None:
    """Two expression rules read ``v`` as a number and one event holds text there: on
    either engine it is one dead letter no rule could take (the numba engine screened it
    out; the reference engine evaluated each rule's conditions and wrote one dead letter
    per rule, counted against each rule, with a TypeError for a reason)."""
    rows = [{"k": "x", "ts": 1, "v": 1}, {"k": "x", "ts": 2, "v": "abc"},
            {"k": "x", "ts": 3, "v": 2}]
    rules = {"pair": Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2),
             "positive": Pattern.begin("a").where(col("v") > 0)}
    seen = {}
    for engine in ("numba", "reference"):
        out, dead = ListSink(), ListSink()
        summary = (Job(IterableSource(rows)).key_by("k").timestamps("ts")
                   .match(rules, engine=engine).sink(out).sink_dead_letters(dead).run())
        assert summary.matches == 3 and summary.dead_letters == 1, engine
        assert {r: c["dead_letters"] for r, c in summary.rules.items()} == {
            "pair": 0, "positive": 0}, engine
        assert [(d.get("rule"), d["reason"]) for d in dead.records] == [
            (None, "field 'v' is 'abc': the pattern needs a number")], engine
        seen[engine] = _records(out)
    assert seen["numba"] == seen["reference"]
