"""Specification: ordinary inputs never give wrong or missing results without an error.

Each case here once gave a wrong answer (or none) with no error at all: integer times
in epoch seconds read as milliseconds, a second ``Job.match`` silently replacing the
first, composite keys that dead-lettered every event, ``within(0)`` meaning "no
window", a ``Matcher`` fed a time going backwards returning a match that ends before
it starts, and engine failures surfacing as bare ``KeyError``/``ArrowInvalid``.
"""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from cep import CEPError, InputError, Matcher, Pattern, TimeUnitError, col, match
from cep.errors import MalformedPatternError
from cep.patterns.fraud import card_testing
from cep.runtime import CheckpointStore, IterableSource, Job, ListSink

ENGINES = ["reference", "numba"]
DAY_S = 86_400
MARCH_1_S = 1_709_251_200  # 2024-03-01T00:00:00Z in epoch seconds


def charges_a_day_apart() -> list[dict[str, Any]]:
    """Three small charges and a big one, one a day, times in epoch *seconds*: no
    10-minute card-testing episode whatever unit is right."""
    return [{"card_id": "c", "ts": MARCH_1_S + i * DAY_S, "amount": a}
            for i, a in enumerate([1, 2, 3, 900])]


def as_input(rows: list[dict[str, Any]], kind: str) -> Any:
    if kind == "pandas":
        return pd.DataFrame(rows)
    if kind == "arrow":
        return pa.Table.from_pylist(rows)
    return rows


# ------------------------------------------------------------- time units
@pytest.mark.parametrize("kind", ["list", "pandas", "arrow"])
@pytest.mark.parametrize("engine", ENGINES)
def test_epoch_seconds_are_refused_naming_the_field_and_the_unit(engine: str, kind: str) -> None:
    """Read as milliseconds the four charges fall within 4.3 minutes and match card
    testing; cep refuses to guess and says which unit to give."""
    events = as_input(charges_a_day_apart(), kind)
    with pytest.raises(TimeUnitError, match=r"time field 'ts' is 1709251200, which looks like "
                       r"epoch seconds \(2024-03-01T00:00:00Z\).*time_unit='s'"):
        match(events, card_testing(), key="card_id", time="ts", engine=engine)


@pytest.mark.parametrize("kind", ["list", "pandas", "arrow"])
@pytest.mark.parametrize("engine", ENGINES)
def test_time_unit_seconds_reads_them_right(engine: str, kind: str) -> None:
    events = as_input(charges_a_day_apart(), kind)
    assert match(events, card_testing(), key="card_id", time="ts", engine=engine,
                 time_unit="s") == []
    # the same charges a minute apart are an episode, reported in epoch milliseconds
    close = [dict(e, ts=MARCH_1_S + i * 60) for i, e in enumerate(charges_a_day_apart())]
    found = match(as_input(close, kind), card_testing(), key="card_id", time="ts",
                  engine=engine, time_unit="s")
    assert [(m.start, m.end) for m in found] == [(MARCH_1_S * 1000, (MARCH_1_S + 180) * 1000)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("unit, scale", [("ms", 1000), ("us", 1_000_000), ("ns", 1_000_000_000)])
def test_sub_second_units(engine: str, unit: str, scale: int) -> None:
    rows = [{"card_id": "c", "ts": (MARCH_1_S + i * 60) * scale, "amount": a}
            for i, a in enumerate([1, 2, 3, 900])]
    found = match(rows, card_testing(), key="card_id", time="ts", engine=engine, time_unit=unit)
    assert [(m.start, m.end) for m in found] == [(MARCH_1_S * 1000, (MARCH_1_S + 180) * 1000)]


@pytest.mark.parametrize("engine", ENGINES)
def test_microseconds_without_a_unit_are_refused(engine: str) -> None:
    rows = [{"card_id": "c", "ts": MARCH_1_S * 1_000_000, "amount": 1}]
    with pytest.raises(TimeUnitError, match="epoch microseconds.*time_unit='us'"):
        match(rows, card_testing(), key="card_id", time="ts", engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_saying_milliseconds_accepts_values_that_look_like_seconds(engine: str) -> None:
    """1970-01-20 in milliseconds is odd but possible: ``time_unit="ms"`` says so."""
    rows = [{"card_id": "c", "ts": MARCH_1_S + i, "amount": a}
            for i, a in enumerate([1, 2, 3, 900])]
    found = match(rows, card_testing(), key="card_id", time="ts", engine=engine, time_unit="ms")
    assert [(m.start, m.end) for m in found] == [(MARCH_1_S, MARCH_1_S + 3)]


def test_small_integer_times_stay_milliseconds() -> None:
    """Positions and test clocks (0, 1, 2 ... or minutes from zero) are not ambiguous."""
    rows = [{"card_id": "c", "ts": i * 60_000, "amount": a} for i, a in enumerate([1, 2, 3, 900])]
    assert len(match(rows, card_testing(), key="card_id", time="ts")) == 1


def test_unknown_time_unit_is_refused() -> None:
    with pytest.raises(InputError, match="unknown time unit 'sec'"):
        match([], card_testing(), time="ts", time_unit="sec")


def test_job_fails_when_every_time_looks_like_seconds() -> None:
    job = Job(IterableSource(charges_a_day_apart())).key_by("card_id").timestamps("ts")
    with pytest.raises(TimeUnitError, match="time field 'ts' is 1709251200.*--time-unit s"):
        job.match(card_testing()).run()


def test_job_with_unit_seconds_matches_in_milliseconds() -> None:
    close = [dict(e, ts=MARCH_1_S + i * 60) for i, e in enumerate(charges_a_day_apart())]
    out = ListSink()
    job = Job(IterableSource(close)).key_by("card_id").timestamps("ts", unit="s")
    job.match(card_testing()).sink(out).run()
    assert [(r["start"], r["end"]) for r in out.records] == [
        (MARCH_1_S * 1000, (MARCH_1_S + 180) * 1000)]


def test_one_seconds_value_among_milliseconds_is_a_dead_letter() -> None:
    rows = [{"card_id": "c", "ts": MARCH_1_S * 1000 + i * 1000, "amount": a}
            for i, a in enumerate([1, 2, 3, 900])]
    rows.insert(2, {"card_id": "c", "ts": MARCH_1_S, "amount": 1})
    out, dead = ListSink(), ListSink()
    summary = (Job(IterableSource(rows)).key_by("card_id").timestamps("ts")
               .match(card_testing()).sink(out).sink_dead_letters(dead).run())
    assert summary.dead_letters == 1
    assert "looks like epoch seconds" in dead.records[0]["reason"]
    assert len(out.records) == 1


# ------------------------------------------------------------------- jobs
def test_a_second_match_on_a_job_is_refused() -> None:
    job = Job(IterableSource([])).match(Pattern.begin("a"))
    with pytest.raises(CEPError, match="already has a pattern"):
        job.match(Pattern.begin("b"))


@pytest.mark.parametrize("build, message", [
    (lambda j: j.sink(ListSink(), kinds=("matches",)), "kinds must be a tuple of match"),
    (lambda j: j.checkpoint("chk", every_events=0), "every_events must be >= 1"),
    (lambda j: j.checkpoint("chk", retain=0), "retain must keep at least 1"),
    (lambda j: j.limit_partial_matches(10, on_overflow="drop"), "on_overflow must be"),
    (lambda j: j.limit_partial_matches(0), "must be a positive integer or None"),
    (lambda j: Job(IterableSource([])).match(Pattern.begin("a"), engine="fast"),
     "unknown engine 'fast'"),
])
def test_misuse_of_the_job_builder_is_refused_when_built(build: Any, message: str) -> None:
    """Each of these was accepted and then ignored, or failed only after the run."""
    with pytest.raises(CEPError, match=message):
        build(Job(IterableSource([])).timestamps("ts").match(Pattern.begin("a")))


def test_a_zero_batch_size_is_refused_not_a_hang() -> None:
    with pytest.raises(CEPError, match="batch_size must be a whole number of events >= 1"):
        IterableSource([{"ts": 1}], batch_size=0)


@pytest.mark.parametrize("build, message", [
    (lambda j: j.match(Pattern.begin("a")).run(), "the job has no event time"),
    (lambda j: j.timestamps("ts").match(Pattern.begin("a")).run(speed=-1),
     "speed must be a positive"),
])
def test_jobs_that_could_only_dead_letter_or_misbehave_do_not_run(build: Any, message: str
                                                                  ) -> None:
    with pytest.raises(CEPError, match=message):
        build(Job(IterableSource([{"card_id": "c", "ts": 1}])))


@pytest.mark.parametrize("setup, message", [
    (lambda j: j.key_by("card").timestamps("ts"), "missing key field 'card'"),
    (lambda j: j.key_by("card_id").timestamps("time"), "missing time field 'time'"),
])
def test_a_misspelt_key_or_time_field_fails_the_job(setup: Any, message: str) -> None:
    """Every event would be a dead letter and the run would "succeed" with no match."""
    from cep.errors import MissingFieldError

    job = setup(Job(IterableSource(charges_a_day_apart()))).match(card_testing())
    with pytest.raises(MissingFieldError, match=message):
        job.run()


def test_a_record_missing_its_key_after_good_ones_is_a_dead_letter() -> None:
    rows = [{"card_id": "c", "ts": 1000, "amount": 1}, {"ts": 2000, "amount": 1}]
    summary = (Job(IterableSource(rows, batch_size=1)).key_by("card_id").timestamps("ts")
               .match(card_testing()).run())
    assert summary.dead_letters == 1 and summary.processed == 1


# ---------------------------------------------------------- composite keys
def card_merchant_rows() -> list[dict[str, Any]]:
    """Card c at two merchants, interleaved: three small charges and a big one at each
    merchant, but by card alone a mid-sized charge always breaks the run."""
    seq = [(1, 1), (1, 2), (1, 3), (2, 50), (1, 900), (2, 1), (2, 2), (2, 3), (1, 50), (2, 1000)]
    return [{"card": "c", "merchant": m, "ts": 1000 * i, "amount": a}
            for i, (m, a) in enumerate(seq)]


EXPECTED_BY_CARD_AND_MERCHANT = [(("c", 1), 0, 4000), (("c", 2), 5000, 9000)]


@pytest.mark.parametrize("kind", ["list", "pandas", "arrow"])
@pytest.mark.parametrize("engine", ENGINES)
def test_match_with_a_composite_key(engine: str, kind: str) -> None:
    found = match(as_input(card_merchant_rows(), kind), card_testing(),
                  key=["card", "merchant"], time="ts", engine=engine)
    assert [(m.key, m.start, m.end) for m in found] == EXPECTED_BY_CARD_AND_MERCHANT
    assert match(card_merchant_rows(), card_testing(), key="card", time="ts",
                 engine=engine) == []


def test_composite_key_with_a_null_part_names_the_field() -> None:
    rows = card_merchant_rows()
    rows[3]["merchant"] = None
    with pytest.raises(InputError, match="row 3: key field 'merchant' is null"):
        match(rows, card_testing(), key=["card", "merchant"], time="ts")


@pytest.mark.parametrize("engine", ENGINES)
def test_job_key_by_a_list_of_fields(engine: str, tmp_path: Path) -> None:
    out, dead = ListSink(), ListSink()
    job = (Job(IterableSource(card_merchant_rows(), batch_size=3)).key_by(["card", "merchant"])
           .timestamps("ts").match(card_testing(), engine=engine).sink(out)
           .sink_dead_letters(dead).checkpoint(tmp_path / "chk", every_events=3))
    summary = job.run()
    assert summary.dead_letters == 0 and dead.records == []
    assert [((r["card"], r["merchant"]), r["start"], r["end"])
            for r in out.records] == EXPECTED_BY_CARD_AND_MERCHANT
    assert CheckpointStore(tmp_path / "chk").ids()  # tuple keys checkpoint


def test_bad_key_specs_are_refused() -> None:
    with pytest.raises(CEPError, match="non-empty list of field names"):
        Job(IterableSource([])).key_by([])
    with pytest.raises(InputError, match="non-empty list of field names"):
        match([], card_testing(), key=["card", 3], time="ts")


# ---------------------------------------------------------------- windows
def test_within_zero_is_refused() -> None:
    with pytest.raises(MalformedPatternError, match=r"within\(0\) needs a duration of at least"):
        Pattern.begin("a").next("b").within(0)
    with pytest.raises(MalformedPatternError, match="at least 1 ms"):
        Pattern.begin("a").next("b").within(timedelta(0))


def test_within_zero_in_pattern_json_is_refused() -> None:
    data = json.loads(Pattern.begin("a").next("b").within(10).to_json())
    data["pattern"]["stages"][-1]["within"][0][1] = 0
    with pytest.raises(MalformedPatternError, match="window must be at least 1 ms"):
        Pattern.from_json(json.dumps(data))


# ---------------------------------------------------------------- Matcher
@pytest.mark.parametrize("engine", ENGINES)
def test_matcher_refuses_a_time_going_backwards(engine: str) -> None:
    """Fed 10 then 5, the old Matcher returned a match with end < start."""
    m = Matcher(Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2),
                engine=engine)
    assert m.process({"v": 1}, 10) == []
    with pytest.raises(InputError, match="timestamp 5 is before 10"):
        m.process({"v": 2}, 5)
    assert [(x.start, x.end) for x in m.process({"v": 2}, 10)] == [(10, 10)]


@pytest.mark.parametrize("engine", ENGINES)
def test_matcher_refuses_an_event_before_advance_time(engine: str) -> None:
    m = Matcher(Pattern.begin("a").where(col("v") == 1), engine=engine)
    m.advance_time(100)
    m.advance_time(50)  # moving to a time already passed does nothing
    with pytest.raises(InputError, match="timestamp 99 is before 100"):
        m.process({"v": 1}, 99)


def test_numba_matcher_reads_a_first_event_with_a_null_field() -> None:
    """The text column's type comes from the pattern when the first value is None."""
    m = Matcher(Pattern.begin("a").where(col("s") == "x"), engine="numba")
    assert m.process({"s": None}, 1) == []
    assert [dict(x) for x in m.process({"s": "x"}, 2)] == [{"a": [{"s": "x"}]}]


# ------------------------------------------------------------ inputs (4)
def small_then_big_rows() -> list[dict[str, Any]]:
    return [{"card_id": "c", "ts": 1000 * i, "amount": a} for i, a in enumerate([1, 2, 3, 900])]


@pytest.mark.parametrize("engine", ENGINES)
def test_arrow_dataset_reader_and_batch_inputs(engine: str) -> None:
    table = pa.Table.from_pylist(small_then_big_rows())
    for data in (ds.dataset(table), table.to_reader(), table.to_batches()[0]):
        found = match(data, card_testing(), key="card_id", time="ts", engine=engine)
        assert [(m.start, m.end) for m in found] == [(0, 3000)], type(data).__name__


@pytest.mark.parametrize("engine", ENGINES)
def test_a_list_of_paths_a_directory_and_compressed_files(engine: str, tmp_path: Path) -> None:
    rows = small_then_big_rows()
    pq.write_table(pa.Table.from_pylist(rows[:2]), tmp_path / "part-1.parquet")
    with gzip.open(tmp_path / "part-2.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows[2:])
    files = [tmp_path / "part-1.parquet", str(tmp_path / "part-2.jsonl.gz")]
    for data in (files, tmp_path):
        found = match(data, card_testing(), key="card_id", time="ts", engine=engine)
        assert [(m.start, m.end) for m in found] == [(0, 3000)]


def test_a_list_of_strings_that_are_not_files_is_events() -> None:
    found = match(["x", "y"], Pattern.begin("a").where(lambda e: e == "x").next("b"))
    assert [dict(m) for m in found] == [{"a": ["x"], "b": ["y"]}]


def test_a_missing_file_in_a_list_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.parquet: no such file"):
        match([tmp_path / "nope.parquet"], card_testing(), time="ts")


def nullable_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "k": [1, 1, 1, 1, 1],
        "ts": [1, 2, 3, 4, 5],
        "flag": pd.array([True, None, True, True, False], dtype="boolean"),
        "amount": [Decimal("1.5"), Decimal("7"), Decimal("8"), None, Decimal("12.25")],
    })


FLAGGED_THEN_BIG = (Pattern.begin("a").where(col("flag") == True)  # noqa: E712
                    .next("b").where(col("amount") > 5))


def test_nullable_boolean_and_decimal_columns_agree_on_both_engines() -> None:
    results = {engine: [(m.start, m.end) for m in match(nullable_frame(), FLAGGED_THEN_BIG,
                                                        key="k", time="ts", engine=engine)]
               for engine in ENGINES}
    # ts 2's flag is NA (null: no match starts there); ts 4's amount is null (no match ends)
    assert results == {"reference": [(1, 2), (4, 5)], "numba": [(1, 2), (4, 5)]}


@pytest.mark.parametrize("events, message", [
    ([{"k": 1, "ts": 1, "v": 1}, {"k": 1, "ts": 2, "v": 1}],
     r"field 's' \(read by stage 'b'\) is absent from every event of the input"),
    ([{"k": 1, "ts": 1, "v": 1, "s": "x"}, {"k": 1, "ts": 2, "v": "1", "s": "x"}],
     r"row 1: field 'v' is '1' \(text\), but stage 'a' reads it as numeric"),
    ([{"k": 1, "ts": 1, "v": 1, "s": "x"}, {"k": 1, "ts": 2, "v": 1, "s": 5}],
     r"row 1: field 's' is 5 \(int\), but stage 'b' reads it as string"),
    ([{"k": 1, "ts": 1, "v": [1], "s": "x"}],
     r"row 0: field 'v' is \[1\] \(list\), but stage 'a' reads it as numeric"),
    (pd.DataFrame({"k": [1, 1], "ts": [1, 2], "v": [1, "a"], "s": ["x", "x"]}),
     r"row 1: field 'v' is 'a' \(text\), but stage 'a' reads it as numeric"),
    (pd.DataFrame({"k": [1, 1], "ts": [1, 2], "v": [1, 1], "s": ["x", 3]}),
     r"row 1: field 's' is 3 \(int\), but stage 'b' reads it as string"),
])
def test_numba_failures_name_row_field_and_stage(events: Any, message: str) -> None:
    p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("s") == "x")
    with pytest.raises(InputError, match=message):
        match(events, p, key="k", time="ts", engine="numba")


def test_decimal_arithmetic_agrees_on_both_engines() -> None:
    """Decimals are numbers (read as float64 by the numba engine, and so by the reference
    engine's expressions, which refused them in arithmetic)."""
    rows = [{"k": 1, "ts": 1, "amount": Decimal("7.5")}, {"k": 1, "ts": 2, "amount": Decimal("1.25")}]
    from cep.expr import sum_

    p = (Pattern.begin("a").where(col("amount") * 1.5 > 10)
         .next("b").where(sum_("a", "amount") + col("amount") > 8.7))
    for data in (rows, pd.DataFrame(rows), pa.Table.from_pylist(rows)):
        for engine in ENGINES:
            found = match(data, p, key="k", time="ts", engine=engine)
            assert [(m.start, m.end) for m in found] == [(1, 2)], (engine, type(data))


@pytest.mark.parametrize("kind", ["list", "pandas", "arrow"])
@pytest.mark.parametrize("engine", ENGINES)
def test_without_a_key_the_key_is_none_on_every_input(engine: str, kind: str) -> None:
    """Tables and frames gave key 0 on the numba engine, lists None."""
    found = match(as_input([{"v": 1, "ts": 1}], kind), Pattern.begin("a").where(col("v") == 1),
                  time="ts", engine=engine)
    assert [m.key for m in found] == [None]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_matcher_has_no_key(engine: str) -> None:
    """The numba Matcher reported key 0 where the reference Matcher reported None."""
    matcher = Matcher(Pattern.begin("a").where(col("v") == 1), engine=engine)
    assert [m.key for m in matcher.process({"v": 1}, 1)] == [None]


@pytest.mark.parametrize("kind", ["list", "pandas", "arrow"])
@pytest.mark.parametrize("engine", ENGINES)
def test_microsecond_integer_columns_with_their_unit(engine: str, kind: str) -> None:
    """Frames and tables of epoch microseconds with time_unit='us' were refused as 'outside
    the years 0001-9999' (the range was checked before scaling)."""
    rows = [{"v": 1, "ts": 1709251200123456}, {"v": 2, "ts": 1709251200124456}]
    p = Pattern.begin("a").where(col("v") == 1).next("b")
    found = match(as_input(rows, kind), p, time="ts", time_unit="us", engine=engine)
    assert [(m.start, m.end) for m in found] == [(1709251200123, 1709251200124)]


def test_an_integer_beyond_2_53_in_a_pattern_runs_exactly_or_is_refused() -> None:
    """float64 rounds 2**62 + 100 to 2**62 + 128: ids 101 to 127 would quietly not match on
    the numba engine.  ``auto`` runs such a pattern on the reference engine, exactly, and
    ``numba`` refuses it, naming the integer."""
    rows = [{"id": i, "ts": i} for i in range(200)]
    pattern = Pattern.begin("a").where(col("id") + 2**62 > 2**62 + 100)
    found = match(rows, pattern, time="ts", engine="auto")
    assert [m["a"][0]["id"] for m in found] == list(range(101, 200))
    with pytest.raises(CEPError, match="4611686018427387904, beyond 2\\*\\*53"):
        match(rows, pattern, time="ts", engine="numba")
