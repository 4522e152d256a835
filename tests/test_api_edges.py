"""The Python API at the edges of its inputs: what an independent check of odd but
legitimate inputs found (each a raw exception from inside the library, an answer that
depended on the engine or on the input's form, or a wrong one), as specifications.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa
import pytest

import cep
from cep import CEPError, Matcher, Pattern, col, prev
from cep.errors import ConditionError, InputError, MalformedPatternError
from cep.runtime import IterableSource, Job, ListSink
from cep.runtime.testing import OperatorHarness

#: a small amount, then anything
SMALL_THEN_ANY = Pattern.begin("a").where(col("v") < 5).next("b")


def job(events: object, pattern: Pattern, engine: str, key: str | None = None
        ) -> tuple[list[tuple[int, int]], list[str]]:
    """The (start, end) of a job's matches and its dead letters' reasons."""
    found, dead = ListSink(), ListSink()
    run = Job(IterableSource(events)).timestamps("ts")
    if key is not None:
        run = run.key_by(key)
    run.match(pattern, engine=engine).sink(found).sink_dead_letters(dead).run()
    return [(m["start"], m["end"]) for m in found.records], [d["reason"] for d in dead.records]


# ------------------------------------------------------------- integers beyond 2**53
BIG = 2**62 + 1
BIG_ROWS = [{"ts": 1, "v": BIG}, {"ts": 2, "v": BIG + 1}, {"ts": 3, "v": 2**62}]


@pytest.mark.parametrize("form", [list, pa.Table.from_pylist, pd.DataFrame])
def test_an_integer_beyond_2_53_is_refused_by_numba_and_read_exactly_by_reference(form) -> None:
    """The numba engine reads numbers as float64: 2**62 + 1 equalled 2**62 and 2**62 + 2,
    so ``v == 2**62 + 1`` matched all three events (an Arrow table raised pyarrow's own
    ArrowInvalid).  It refuses such a value naming it; the reference engine, exact, finds
    the one event, and runs a pattern holding such an integer under ``auto``."""
    events = form(BIG_ROWS)
    positive = Pattern.begin("a").where(col("v") > 0)
    with pytest.raises(InputError, match=r"row 0: field 'v' is 4611686018427387905, beyond "
                                         r"2\*\*53.*engine='reference'"):
        cep.match(events, positive, time="ts")
    is_big = Pattern.begin("a").where(col("v") == BIG)
    with pytest.raises(CEPError, match=r"holds the integer 4611686018427387905, beyond 2\*\*53"):
        cep.match(events, is_big, time="ts", engine="numba")
    assert [m.start for m in cep.match(events, is_big, time="ts")] == [1]
    assert [m.start for m in cep.match(events, is_big, time="ts", engine="reference")] == [1]
    rising = Pattern.begin("a").next("b").where(col("v") > prev("v"))
    assert len(cep.match(events, rising, time="ts", engine="reference")) == 1


def test_a_job_on_numba_makes_each_integer_beyond_2_53_a_dead_letter() -> None:
    rows = [{"k": "a", "ts": 1, "v": BIG}, {"k": "a", "ts": 2, "v": 5}, {"k": "a", "ts": 3, "v": 7}]
    both = Pattern.begin("a").where(col("v") > 1).next("b").where(col("v") > 1)
    found, dead = job(rows, both, "numba", key="k")
    assert found == [(2, 3)] and len(dead) == 1 and "beyond 2**53" in dead[0]
    assert job(rows, both, "reference", key="k") == ([(1, 2), (2, 3)], [])


# ------------------------------------------------------------------- odd input forms
def test_a_key_beyond_64_bits_in_a_frame_is_a_key() -> None:
    """Python ints of 2**64 in a pandas object column raised OverflowError from pyarrow."""
    frame = pd.DataFrame({"k": [2**64, 2**64], "ts": [1, 2], "v": [1, 2]})
    assert [m.key for m in cep.match(frame, Pattern.begin("a"), key="k", time="ts")] == [2**64] * 2


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_string_view_columns_are_read_as_text(engine: str) -> None:
    """Arrow's string_view had no ``take`` kernel: ArrowNotImplementedError."""
    table = pa.table({"card": pa.array(["x", "x"], pa.string_view()), "ts": [1, 2],
                      "v": [1.0, 600.0]})
    assert len(cep.match(table, SMALL_THEN_ANY, key="card", time="ts", engine=engine)) == 1
    out = cep.match(table, SMALL_THEN_ANY, key="card", time="ts", engine=engine, output="arrow")
    assert out.column("card").to_pylist() == ["x"]
    assert job(table, SMALL_THEN_ANY, engine, key="card") == ([(1, 2)], [])


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_frames_with_odd_columns(engine: str) -> None:
    """A name given to two columns raised AttributeError on numba (reference dropped one);
    a column named 5 or a sparse column raised TypeError making a table; a Series of dicts
    raised AttributeError."""
    twice = pd.DataFrame([["x", 1, 1.0, 1.0], ["x", 2, 600.0, 600.0]],
                         columns=["card", "ts", "v", "v"])
    with pytest.raises(InputError, match="the frame names 'v' more than once"):
        cep.match(twice, SMALL_THEN_ANY, key="card", time="ts", engine=engine)
    named = pd.DataFrame({"card": ["x", "x"], "ts": [1, 2], "v": [1.0, 600.0], 5: [0, 0]})
    out = cep.match(named, SMALL_THEN_ANY, key="card", time="ts", engine=engine, output="arrow")
    assert out.column("a").to_pylist()[0][0]["5"] == 0  # a column's name is text
    sparse = pd.DataFrame({"card": ["x", "x"], "ts": [1, 2],
                           "v": pd.arrays.SparseArray([1.0, 600.0])})
    assert cep.match(sparse, SMALL_THEN_ANY, key="card", time="ts", engine=engine,
                     output="arrow").num_rows == 1
    series = pd.Series([{"ts": 1, "v": 1.0}, {"ts": 2, "v": 600.0}])
    assert [m.start for m in cep.match(series, SMALL_THEN_ANY, time="ts", engine=engine)] == [1]


def test_a_date_is_its_midnight_utc_in_every_form() -> None:
    """Dates as times were refused in a list (InputError) and read in a frame or table."""
    dates = [{"ts": dt.date(2024, 1, 1), "v": 1.0}, {"ts": dt.date(2024, 1, 2), "v": 600.0}]
    midnight = 1_704_067_200_000
    for events in (dates, pd.DataFrame(dates), pa.Table.from_pylist(dates)):
        assert [m.start for m in cep.match(events, SMALL_THEN_ANY, time="ts")] == [midnight]
    assert job(dates, SMALL_THEN_ANY, "reference")[0] == [(midnight, midnight + 86_400_000)]


# --------------------------------------------------------- type mistakes, both engines
TYPE_EVENTS = [{"ts": 1, "b": True, "n": 1}, {"ts": 2, "b": False, "n": 0}]


@pytest.mark.parametrize("condition", [col("b") < 5, col("b") == 1, -col("b") < 0, col("n"),
                                       col("n").isin(["1", 0])],
                         ids=["bool<5", "bool==1", "-bool", "number-as-condition", "isin-mixed"])
def test_a_type_mistake_is_an_error_on_both_engines(condition: object) -> None:
    """The numba engine refused these; the reference engine answered (True < 5, a number
    read as false, 0 found among ["1", 0]): docs/expressions.md says it reports the same
    mistakes, as a ConditionError, when an event reaches them."""
    pattern = Pattern.begin("a").where(condition)
    with pytest.raises(MalformedPatternError):
        cep.match(TYPE_EVENTS, pattern, time="ts", engine="numba")
    with pytest.raises(ConditionError):
        cep.match(TYPE_EVENTS, pattern, time="ts", engine="reference")


def test_true_false_is_no_number_in_cep_match_as_in_a_job() -> None:
    """cep.match read True as 1 (a match) where a job refused the event."""
    rows = [{"card": "x", "ts": 1, "amount": True}, {"card": "x", "ts": 2, "amount": 600.0}]
    small_big = Pattern.begin("a").where(col("amount") < 5).next("b").where(col("amount") > 500)
    with pytest.raises(InputError, match="field 'amount' is True"):
        cep.match(rows, small_big, key="card", time="ts", engine="numba")
    with pytest.raises(ConditionError):
        cep.match(rows, small_big, key="card", time="ts", engine="reference")
    for engine in ("numba", "reference"):
        found, dead = job(rows, small_big, engine, key="card")
        assert found == [] and len(dead) == 1


# ------------------------------------------------------------------- table schemas
def test_a_table_of_no_match_has_the_schema_of_one_with_matches() -> None:
    """With no match the key column was null-typed and the stages struct<>; with no input
    the times were int64: tables of different days did not concatenate."""
    full = pa.table({"card": pa.array([7, 7], pa.int32()),
                     "ts": pa.array([1000, 2000], pa.timestamp("ms", "UTC")), "v": [1.0, 600.0]})
    schemas = [cep.match(t, SMALL_THEN_ANY, key="card", time="ts", output="arrow").schema
               for t in (full, full.slice(0, 1), full.slice(0, 0))]
    assert schemas[0].field("card").type == pa.int32()  # the input's type, not int64
    assert schemas[1] == schemas[0] and schemas[2] == schemas[0]
    frames = [cep.match(t, SMALL_THEN_ANY, key="card", time="ts", output="pandas")
              for t in (full.slice(0, 0), full)]
    assert list(frames[0].dtypes) == list(frames[1].dtypes)


# ------------------------------------------------------------ times out of range
def test_times_beyond_int64_and_watermarks_that_are_no_time_are_cep_errors() -> None:
    """OverflowError and TypeError came from inside; a watermark of 7.5 was taken."""
    with pytest.raises(CEPError, match="within int64"):
        Matcher(SMALL_THEN_ANY).process({"v": 1.0}, 2**64)
    with pytest.raises(CEPError, match="within int64"):
        Matcher(SMALL_THEN_ANY, "numba").advance_time(2**63)
    harness = OperatorHarness(SMALL_THEN_ANY)
    for bad in (None, 7.5):
        with pytest.raises(CEPError, match="a watermark is integer milliseconds"):
            harness.process_watermark(bad)  # type: ignore[arg-type]
    harness.process_element({"v": 1.0}, 2**64)
    assert len(harness.dead_letters) == 1
    with pytest.raises(MalformedPatternError, match="not text but NoneType"):
        Pattern.from_json(None)  # type: ignore[arg-type]


# ------------------------------------------------------------ events with named fields
def test_dataclass_and_named_tuple_events_make_tables() -> None:
    """Events with named fields of their own (dataclasses, named tuples) made no table:
    "matches as a table need events with named fields"; their fields are its columns,
    with the ids the same events as dicts get."""
    import dataclasses
    from collections import namedtuple

    @dataclasses.dataclass
    class Tx:
        card: str
        ts: int
        v: float

    Row = namedtuple("Row", "card ts v")
    as_dicts = [{"card": "c1", "ts": 1, "v": 1.0}, {"card": "c1", "ts": 2, "v": 600.0}]
    for engine in ("numba", "reference"):
        want = cep.match(as_dicts, SMALL_THEN_ANY, key="card", time="ts", engine=engine,
                         output="arrow")
        for events in ([Tx(**d) for d in as_dicts], [Row(**d) for d in as_dicts]):
            got = cep.match(events, SMALL_THEN_ANY, key="card", time="ts", engine=engine,
                            output="arrow")
            assert got.column("match_id") == want.column("match_id")
            assert got.column("a").to_pylist() == [[as_dicts[0]]]
