"""Expressions that read time and text: ``event_time()``, datetime and duration values,
``.hour()``, ``.day_of_week()``, ``.lower()``, ``.startswith()``, ``.contains()`` and
``coalesce()``.

Each test states a rule in its docstring, then shows the pattern, the events and the
expected matches, on both engines (``engine`` is "reference" or "numba"; the numba
engine must give exactly the reference engine's answer).

Rules in brief (docs/expressions.md, "Time and text"):

* Times are numbers: epoch milliseconds.  ``event_time()`` is the time the engine gave
  the event; datetime fields (Python, pandas, Arrow) read as epoch milliseconds and
  duration fields as milliseconds; ``datetime``/``date``/``timedelta`` literals are the
  same numbers.  A datetime without a zone is UTC.
* ``hour()`` is 0-23 and ``day_of_week()`` ISO (Monday 1 .. Sunday 7), both in UTC.
* ``lower()`` is Python's ``str.lower``; ``startswith``/``contains`` look for a literal
  text, case-sensitively.  ``coalesce(a, b, ...)`` is the first non-null argument.
* Null in, null out; a condition over null is unknown, so the event is not taken.
* The new nodes are data: they print as the DSL and round-trip through JSON (datetime
  and duration literals in a tagged form).
* A text function of a number (or a time function of text) is refused: by the numba
  engine before any event is read (MalformedPatternError naming the stage), by the
  reference engine when an event reaches it (ConditionError naming the stage).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep import (
    ConditionError,
    Expr,
    MalformedPatternError,
    Matcher,
    Pattern,
    coalesce,
    col,
    event_time,
    first,
    last,
    lit,
    match,
    prev,
)

ENGINES = ("reference", "numba")
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


def rows(*values: dict[str, Any]) -> list[dict[str, Any]]:
    """Events as dicts, numbered by an ``id`` field in input order."""
    return [{"id": i, **v} for i, v in enumerate(values)]


def taken(events: Any, condition: Any, engine: str, **kw: Any) -> list[int]:
    """The ids of the events a one-stage pattern ``where(condition)`` takes."""
    return [m["x"][0]["id"] for m in match(events, Pattern.begin("x").where(condition),
                                           engine=engine, **kw)]


def found(events: Any, pattern: Pattern, engine: str, **kw: Any) -> list[list[int]]:
    """Each match as the ids of its events."""
    return [[e["id"] for e in m.events()] for m in match(events, pattern, engine=engine, **kw)]


# ------------------------------------------------------------------------ event time


def test_event_time_compares_with_datetime_literals(engine: str) -> None:
    """``event_time()`` is the event's time in epoch milliseconds; a datetime literal is the
    same number (a naive one is UTC), so the two compare."""
    events = rows({"ts": datetime(2024, 2, 29, 23, 59)}, {"ts": datetime(2024, 3, 1)},
                  {"ts": datetime(2024, 3, 1, 0, 0, 1, tzinfo=UTC)})
    assert taken(events, event_time() >= datetime(2024, 3, 1), engine, time="ts") == [1, 2]
    assert taken(events, event_time() < date(2024, 3, 1), engine, time="ts") == [0]
    berlin = timezone(timedelta(hours=1))
    assert taken(events, event_time() == datetime(2024, 3, 1, 1, 0, tzinfo=berlin), engine,
                 time="ts") == [1]


def test_event_time_is_milliseconds_whatever_the_time_unit(engine: str) -> None:
    """With ``time_unit="s"`` the field holds seconds, but ``event_time()`` is milliseconds."""
    events = rows({"ts": 1709251200}, {"ts": 1709251260})
    assert taken(events, event_time() == 1709251260000, engine, time="ts",
                 time_unit="s") == [1]
    assert taken(events, event_time() - col("ts") * 1000 == 0, engine, time="ts",
                 time_unit="s") == [0, 1]


def test_event_time_minus_a_datetime_field_is_a_duration(engine: str) -> None:
    """A time minus a time is a duration in milliseconds, compared with ``timedelta``: here a
    login and a payment less than 5 minutes apart, by event time and by field."""
    events = rows(
        {"user": "u", "kind": "login", "ts": datetime(2024, 3, 1, 10, 0)},
        {"user": "u", "kind": "pay", "ts": datetime(2024, 3, 1, 10, 7)},
        {"user": "u", "kind": "login", "ts": datetime(2024, 3, 1, 11, 0)},
        {"user": "u", "kind": "pay", "ts": datetime(2024, 3, 1, 11, 4, 59)},
    )
    quick = (Pattern.begin("login").where(col("kind") == "login")
             .followed_by("pay").where((col("kind") == "pay")
                                       & (col("ts") - first("login", "ts") < timedelta(minutes=5))))
    assert found(events, quick, engine, key="user", time="ts") == [[2, 3]]
    by_event_time = (Pattern.begin("login").where(col("kind") == "login")
                     .followed_by("pay").where(
                         (col("kind") == "pay")
                         & (event_time() - last("login", "ts") < timedelta(minutes=5))))
    assert found(events, by_event_time, engine, key="user", time="ts") == [[2, 3]]


def test_without_a_time_event_time_is_the_position(engine: str) -> None:
    """Without ``time=``, events are ordered by position and that is their time."""
    events = rows({"v": 1}, {"v": 1}, {"v": 1})
    assert taken(events, event_time() >= 1, engine) == [1, 2]


def _forms(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The same events as dicts, a pandas frame and an Arrow table."""
    frame = pd.DataFrame(events)
    return {"dicts": events, "pandas": frame, "arrow": pa.Table.from_pylist(events)}


def test_duration_fields_read_as_milliseconds(engine: str) -> None:
    """A field of durations (``timedelta``; pandas timedelta64, Arrow duration) is
    milliseconds and compares with timedelta."""
    events = rows({"took": timedelta(seconds=1)}, {"took": timedelta(minutes=10)},
                  {"took": None})
    for form, data in _forms(events).items():
        assert taken(data, col("took") > timedelta(minutes=5), engine) == [1], form
        assert taken(data, col("took") == 1000, engine) == [0], form


def test_date_fields_read_as_their_midnight_utc(engine: str) -> None:
    """A field of dates (``date``; Arrow date32) is the epoch milliseconds of its midnight,
    UTC: a Saturday and a Sunday are the weekend, and dates compare with datetimes."""
    events = rows({"day": date(2024, 3, 1)}, {"day": date(2024, 3, 2)}, {"day": date(2024, 3, 3)},
                  {"day": None})
    for form, data in _forms(events).items():
        assert taken(data, col("day").day_of_week() >= 6, engine) == [1, 2], form
        assert taken(data, col("day") > datetime(2024, 3, 2, 12), engine) == [2], form
        assert taken(data, col("day").hour() == 0, engine) == [0, 1, 2], form


# ----------------------------------------------------------------------- hour and day


def test_hour_is_the_utc_hour_of_the_day(engine: str) -> None:
    """``hour()`` gives 0-23 in UTC: a naive datetime is UTC, an aware one is converted,
    an integer is epoch milliseconds."""
    plus2 = timezone(timedelta(hours=2))
    events = rows({"ts": datetime(2024, 3, 1, 23, 30)},                # 23 UTC
                  {"ts": datetime(2024, 3, 2, 1, 30, tzinfo=plus2)},   # 23 UTC
                  {"ts": datetime(2024, 3, 2, 0, 0)},                  # 0 UTC
                  {"ts": 5 * 3_600_000 + 1})                           # 05:00:00.001 UTC
    assert taken(events, col("ts").hour() == 23, engine) == [0, 1]
    assert taken(events, col("ts").hour() < 6, engine) == [2, 3]


def test_hour_of_event_time_finds_night_activity(engine: str) -> None:
    """Three events between midnight and 6 am in a row (UTC) on the same card."""
    times = [datetime(2024, 3, day, h, 15) for day, h in ((1, 22), (2, 1), (2, 2), (2, 3),
                                                           (2, 7), (3, 4))]
    events = rows(*({"card": "c", "ts": t} for t in times))
    night = Pattern.begin("n").where(event_time().hour() < 6).times(3).consecutive()
    assert found(events, night, engine, key="card", time="ts") == [[1, 2, 3]]


def test_hour_in_another_fixed_offset_shifts_first(engine: str) -> None:
    """For local time at a fixed offset, add it before taking the hour."""
    events = rows({"ts": datetime(2024, 3, 1, 22, 30)})  # 23:30 at UTC+1
    assert taken(events, (col("ts") + timedelta(hours=1)).hour() == 23, engine) == [0]


def test_day_of_week_is_iso_monday_one_to_sunday_seven(engine: str) -> None:
    """2024-03-04 was a Monday: a week of days is 1, 2, ..., 7 (not Spark's Sunday = 1)."""
    events = rows(*({"ts": datetime(2024, 3, 4 + d, 12)} for d in range(7)))
    for day in range(1, 8):
        assert taken(events, col("ts").day_of_week() == day, engine, time="ts") == [day - 1]
    assert taken(events, event_time().day_of_week() >= 6, engine, time="ts") == [5, 6]


def test_times_before_1970_round_down(engine: str) -> None:
    """Negative epoch milliseconds: 1969-12-31 23:59:59.999 is a Wednesday, hour 23."""
    events = rows({"t": -1}, {"t": datetime(1969, 12, 31, 23, 59, 59, 999999)})
    assert taken(events, (col("t").hour() == 23) & (col("t").day_of_week() == 3), engine) == [
        0, 1]
    assert taken(events, col("t") == -1, engine) == [0, 1]


@PROPERTY
@given(st.lists(st.integers(-(10**13), 10**13), min_size=1, max_size=20))
def test_hour_and_day_of_week_agree_with_python_datetime(millis: list[int]) -> None:
    """For any epoch milliseconds, both engines give datetime's UTC hour and isoweekday."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    events = []
    for i, ms in enumerate(millis):
        when = epoch + timedelta(milliseconds=ms)
        events.append({"id": i, "t": ms, "h": when.hour, "d": when.isoweekday()})
    right = (col("t").hour() == col("h")) & (col("t").day_of_week() == col("d"))
    for engine in ENGINES:
        assert taken(events, right, engine) == list(range(len(events)))


# ---------------------------------------------------------- pandas and Arrow columns


def _frame() -> pd.DataFrame:
    """Card charges with a real timestamp column (pandas datetime64[ns]) and text."""
    return pd.DataFrame({
        "id": [0, 1, 2, 3, 4],
        "card": ["c1", "c1", "c1", "c2", "c2"],
        "ts": pd.to_datetime(["2024-03-01 23:50:00.000900", "2024-03-01 23:53:00.000000",
                              "2024-03-02 00:20:00.000000", "2024-03-02 09:00:00.000000",
                              "2024-03-02 09:01:00.000000"]),
        "merchant": ["ACME Corp", "acme online", None, "Gift Shop", "GIFTS R US"],
        "amount": [1.0, None, 900.0, 2.0, 3.0],
    })


TABLE_PATTERNS = {
    # a small charge at an ACME merchant, then within 5 minutes by its own timestamps
    # another one at a merchant of the same name (any case)
    "acme-twice": (
        Pattern.begin("a").where(col("merchant").lower().startswith("acme"))
        .followed_by("b").where(
            col("merchant").lower().startswith("acme")
            & (col("ts") - first("a", "ts") <= timedelta(minutes=5))),
        [[0, 1]],
    ),
    "gift-by-day": (
        Pattern.begin("g").where(col("merchant").lower().contains("gift")
                                 & (event_time().day_of_week() == 6)),
        [[3], [4]],
    ),
    "night-amount": (
        Pattern.begin("n").where((event_time().hour() < 1) & (coalesce(col("amount"), 0) < 5)),
        [],
    ),
    "late-evening": (
        Pattern.begin("n").where((col("ts").hour() == 23) & (coalesce(col("amount"), 0) < 5)),
        [[0], [1]],
    ),
    "after-midnight": (
        Pattern.begin("n").where(event_time() >= datetime(2024, 3, 2)),
        [[2], [3], [4]],
    ),
}


@pytest.mark.parametrize("name", sorted(TABLE_PATTERNS))
@pytest.mark.parametrize("form", ["dicts", "pandas", "pandas-utc", "arrow", "arrow-dict"])
def test_tables_with_timestamp_and_text_columns(engine: str, name: str, form: str) -> None:
    """A pandas frame or an Arrow table with a timestamp column and a text column gives the
    same matches as the same events as dicts, on both engines."""
    pattern, expected = TABLE_PATTERNS[name]
    frame = _frame()
    data: Any
    if form == "dicts":
        data = [{**r, "ts": r["ts"].to_pydatetime(), "amount": None if math.isnan(r["amount"])
                 else r["amount"]} for r in frame.to_dict("records")]
    elif form == "pandas":
        data = frame
    elif form == "pandas-utc":
        data = frame.assign(ts=frame["ts"].dt.tz_localize("UTC").dt.tz_convert("Asia/Tokyo"))
    elif form == "arrow":
        data = pa.Table.from_pandas(frame, preserve_index=False)
    else:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        data = table.set_column(table.schema.get_field_index("merchant"), "merchant",
                                table["merchant"].dictionary_encode())
    assert found(data, pattern, engine, key="card", time="ts") == expected


# ------------------------------------------------------------------------------- text


def test_lower_startswith_contains(engine: str) -> None:
    """Case matters; ``lower()`` first to ignore it; contains looks for plain text."""
    events = rows({"m": "ACME Corp"}, {"m": "acme corp"}, {"m": "The ACME"}, {"m": "a.c*"},
                  {"m": ""})
    assert taken(events, col("m").startswith("ACME"), engine) == [0]
    assert taken(events, col("m").lower().startswith("acme"), engine) == [0, 1]
    assert taken(events, col("m").contains("ACME"), engine) == [0, 2]
    assert taken(events, col("m").lower().contains("acme"), engine) == [0, 1, 2]
    assert taken(events, col("m").contains(".c*"), engine) == [3]       # not a regex
    assert taken(events, col("m").lower() == "acme corp", engine) == [0, 1]
    assert taken(events, col("m").startswith(""), engine) == [0, 1, 2, 3, 4]
    assert taken(events, col("m").lower().isin(["the acme", ""]), engine) == [2, 4]


def test_lower_is_pythons_for_every_letter(engine: str) -> None:
    """``lower()`` is Python's ``str.lower`` on both engines, also where other libraries
    differ (a final sigma, a dotted capital I, German sharp s)."""
    words = ["ΟΔΟΣ", "İstanbul", "STRASSE", "ẞ", "Ǆ", "ascii"]
    events = rows(*({"w": w, "low": w.lower()} for w in words))
    assert taken(events, col("w").lower() == col("low"), engine) == list(range(len(words)))
    assert taken(events, col("w").lower().contains("ς"), engine) == [0]


def test_text_functions_of_stage_references(engine: str) -> None:
    """``last``/``first``/``prev`` of a text field take text functions too: the same
    merchant twice in a row whatever the case; a memo after one that mentioned a gift."""
    events = rows({"m": "ACME", "memo": "gift card"}, {"m": "Acme", "memo": None},
                  {"m": "Other", "memo": "x"}, {"m": "acme", "memo": "GIFT"},
                  {"m": "ACME", "memo": "y"})
    same = Pattern.begin("a").next("b").where(col("m").lower() == last("a", "m").lower())
    assert found(events, same, engine) == [[0, 1], [3, 4]]
    after_gift = Pattern.begin("a").next("b").where(prev("memo").lower().contains("gift"))
    assert found(events, after_gift, engine) == [[0, 1], [3, 4]]
    same_start = (Pattern.begin("a").where(col("m").startswith("A")).followed_by("b")
                  .where(first("a", "m").lower().startswith("acm") & (col("m") == "acme")))
    assert found(events, same_start, engine) == [[0, 3], [1, 3]]


def test_text_of_values_first_seen_in_later_batches(engine: str) -> None:
    """Fed one event at a time (a Matcher), strings first seen late are handled like the
    others: the numba engine extends its per-string results batch by batch."""
    words = ["Gift", "card", "GIFTED", "gift", "Regift", None, "Gi ft", "GIFT"]
    m = Matcher(Pattern.begin("x").where(col("w").lower().contains("gift")
                                         & ~col("w").startswith("G")), engine=engine)
    got = []
    for t, w in enumerate(words):
        got += [x["x"][0]["w"] for x in m.process({"w": w}, t)]
    assert got == ["gift", "Regift"]


# --------------------------------------------------------------------------- coalesce


def test_coalesce_is_the_first_non_null_argument(engine: str) -> None:
    """Numbers, text and conditions; with stage references; all null is null."""
    events = rows({"a": None, "b": 2.0, "s": None, "t": "x"},
                  {"a": 1.0, "b": None, "s": "y", "t": None},
                  {"a": None, "b": None, "s": None, "t": None})
    assert taken(events, coalesce(col("a"), col("b")) == 2, engine) == [0]
    assert taken(events, coalesce(col("a"), col("b"), 0) < 1.5, engine) == [1, 2]
    assert taken(events, coalesce(col("a"), col("b")).is_null(), engine) == [2]
    assert taken(events, coalesce(col("s"), col("t"), "none") == "none", engine) == [2]
    assert taken(events, coalesce(col("s"), col("t")).lower() == "x", engine) == [0]
    assert taken(events, coalesce(col("a") > 0, False), engine) == [1]
    assert taken(events, coalesce(col("t")) == "x", engine) == [0]
    # the event before had no value: -1 stands in
    after_unknown = Pattern.begin("p").next("q").where(coalesce(prev("a"), -1) < 0)
    assert found(events, after_unknown, engine) == [[0, 1]]


# ------------------------------------------------------------------------------ nulls


NULL_CASES = [
    col("s").lower(), col("s").startswith("a"), col("s").contains("a"),
    col("t").hour(), col("t").day_of_week(), coalesce(col("s"), col("s")),
]


@pytest.mark.parametrize("e", NULL_CASES, ids=repr)
def test_null_in_null_out(engine: str, e: Expr) -> None:
    """Every new function gives null for null: ``is_null()`` takes exactly the null events
    and the reference evaluates it to None."""
    events = rows({"s": "ab", "t": 3_600_000}, {"s": None, "t": None},
                  {"s": "b", "t": float("nan")})
    if "col('s')" in repr(e):
        assert taken(events, e.is_null(), engine) == [1]
    else:
        assert taken(events, e.is_null(), engine) == [1, 2]
    assert e.evaluate(events[1], None) is None


def test_a_condition_over_null_text_is_unknown(engine: str) -> None:
    """Neither ``startswith`` nor its negation takes a null value."""
    events = rows({"s": None}, {"s": "abc"}, {"s": "xyz"})
    assert taken(events, col("s").startswith("a"), engine) == [1]
    assert taken(events, ~col("s").startswith("a"), engine) == [2]
    assert taken(events, col("s").startswith("a") | True, engine) == [0, 1, 2]


def test_event_time_has_no_value_outside_a_match() -> None:
    """Evaluated by hand without a context, ``event_time()`` is null."""
    assert event_time().evaluate({}, None) is None


# ----------------------------------------------------------------------------- as data

NODES = [
    event_time(),
    event_time() >= datetime(2024, 3, 1, 12, 30, 15, 250000),
    col("ts") - first("a", "ts") < timedelta(minutes=5),
    lit(date(2024, 3, 1)),
    lit(timedelta(milliseconds=-1500)),
    col("ts").hour(),
    event_time().day_of_week() == 7,
    col("m").lower(),
    col("m").startswith("ACME"),
    col("m").lower().contains("gift card"),
    last("a", "m").lower() == "x",
    coalesce(col("a"), prev("a"), 0),
    coalesce(col("s"), "none").lower().startswith("n"),
]


@pytest.mark.parametrize("e", NODES, ids=repr)
def test_json_round_trip_and_repr(e: Expr) -> None:
    """Each new node survives ``to_json``/``from_json``; its repr is the DSL."""
    back = Expr.from_json(e.to_json())
    assert back.equals(e)
    assert back.to_json() == e.to_json()
    assert repr(back) == repr(e)
    assert eval(repr(e), vars(cep.expr)).equals(e)  # repr is source (tests only)


def test_json_of_datetime_and_duration_literals() -> None:
    """Datetime literals are tagged ISO-8601 UTC text, durations tagged milliseconds; a
    pattern of them serialises and loads back."""
    assert lit(datetime(2024, 3, 1)).to_dict() == {
        "op": "lit", "value": {"datetime": "2024-03-01T00:00:00Z"}}
    assert lit(datetime(2024, 3, 1, 0, 0, 0, 1500)).to_dict()["value"] == {
        "datetime": "2024-03-01T00:00:00.001Z"}
    assert lit(timedelta(minutes=5)).to_dict() == {"op": "lit", "value": {"duration_ms": 300000}}
    loaded = Expr.from_dict({"op": ">=", "args": [
        {"op": "event_time"}, {"op": "lit", "value": {"datetime": "2024-03-01T01:00:00+01:00"}}]})
    assert loaded.equals(event_time() >= datetime(2024, 3, 1))
    p = (Pattern.begin("a").where(col("m").lower().startswith("acme"))
         .followed_by("b").where((event_time() - last("a", "ts") < timedelta(hours=1))
                                 & (coalesce(col("v"), 0) > 1)))
    assert Pattern.from_json(p.to_json()) == p
    assert json.loads(p.to_json())["format"] == "cep.pattern/1"


@pytest.mark.parametrize("value", [
    {"datetime": "yesterday"}, {"datetime": 5}, {"duration_ms": 1.5}, {"duration_ms": True},
    {"datetime": "2024-03-01", "duration_ms": 1}, {"when": "2024-03-01"}])
def test_malformed_time_literals_are_refused(value: Any) -> None:
    """A tagged literal must be one of the two forms, with a value of the right type."""
    with pytest.raises(MalformedPatternError, match="expression JSON at"):
        Expr.from_dict({"op": "lit", "value": value})


@pytest.mark.parametrize("data, message", [
    ({"op": "startswith", "args": [{"op": "col", "name": "m"}]}, "needs 'value'"),
    ({"op": "contains", "args": [{"op": "col", "name": "m"}], "value": 5}, "needs a string"),
    ({"op": "lower", "args": []}, "takes 1 args"),
    ({"op": "coalesce", "args": []}, "needs args"),
])
def test_malformed_text_and_coalesce_json_is_refused(data: dict[str, Any], message: str) -> None:
    """Text functions need their argument and text; coalesce needs arguments."""
    with pytest.raises(MalformedPatternError, match=message):
        Expr.from_dict(data)


# ---------------------------------------------------------------------------- refusals


def test_text_function_of_a_number_is_refused_naming_the_stage() -> None:
    """``lower()`` of a number: numba refuses the pattern before reading events; the
    reference engine reports it when an event reaches it; both name the stage."""
    events = rows({"amount": 5.0})
    p = Pattern.begin("small").where(col("amount").lower() == "5")
    with pytest.raises(MalformedPatternError, match=r"stage 'small'.*lower\(\) needs text"):
        match(events, p, engine="numba")
    with pytest.raises(ConditionError, match="stage 'small'"):
        match(events, p, engine="reference")


@pytest.mark.parametrize("condition, message", [
    (col("name").hour() == 1, "arithmetic needs numbers"),
    (col("amount").startswith("1"), "startswith\\(\\) needs text"),
    (coalesce(col("amount"), "none") == "none", "coalesce\\(\\) needs arguments of one type"),
    (col("name").lower(), "gives a string value, not true/false"),
])
def test_type_errors_are_refused_by_numba(condition: Expr, message: str) -> None:
    """Time functions need numbers, text functions text, coalesce one type."""
    events = rows({"name": "x", "amount": 1.0})
    with pytest.raises(MalformedPatternError, match=message):
        match(events, Pattern.begin("a").where(condition), engine="numba")


def test_text_arguments_must_be_strings() -> None:
    """The text looked for is a string literal, checked when the expression is built."""
    with pytest.raises(MalformedPatternError, match="needs a string to look for"):
        col("m").startswith(5)  # type: ignore[arg-type]
    with pytest.raises(MalformedPatternError, match="needs a string to look for"):
        col("m").contains(col("n"))  # type: ignore[arg-type]
    with pytest.raises(MalformedPatternError, match="at least one argument"):
        coalesce()
    with pytest.raises(MalformedPatternError, match="one by one"):
        coalesce([col("a"), col("b")])


def test_auto_picks_numba_for_time_and_text() -> None:
    """Every new node compiles: ``engine="auto"`` picks the numba engine."""
    p = (Pattern.begin("a").where(col("m").lower().contains("gift") & (event_time().hour() < 6))
         .next("b").where(coalesce(last("a", "m"), "").startswith("G")))
    assert Matcher(p).engine == "numba"


def test_datetime_values_in_the_runtime() -> None:
    """The streaming runtime screens datetime fields as numbers (times) and matches them."""
    from cep.runtime.testing import OperatorHarness

    for engine in ENGINES:
        h = OperatorHarness(Pattern.begin("x").where(col("at").hour() == 3), engine,
                            key="k", time="t")
        h.process_element({"k": "a", "t": 1, "at": datetime(2024, 3, 1, 3, 5)})
        h.process_element({"k": "a", "t": 2, "at": datetime(2024, 3, 1, 4, 5)})
        h.process_element({"k": "a", "t": 3, "at": np.datetime64("2024-03-01T03:00")})
        h.finish()
        assert not h.dead_letters
        assert [m["x"][0]["t"] for m in h.matches] == [1, 3]


def test_text_state_survives_a_spark_state_round_trip() -> None:
    """The Spark group function stores partial matches between calls; a stage reference to
    a lowered text (a string code in the numba engine's state) still compares right after
    the state is restored, with strings first seen after the restore; measures read text
    and time too."""
    from cep.runtime.spark.runner import ORDER_ROW, TS, GroupRunner, Spec

    p = (Pattern.begin("a").where(col("m").lower().startswith("ac"))
         .followed_by("b").where((col("m").lower() == last("a", "m").lower())
                                 & (event_time() - first("a", "ts") < 10)))
    measures = {"merchant": last("b", "m").lower().to_json(),
                "hour": first("a", "ts").hour().to_json()}

    def play(engine: str) -> list[dict[str, Any]]:
        spec = Spec(pattern=p.to_json(), key=("k",), columns=("id", "k", "m", "ts"),
                    kinds={"id": "numeric", "k": "string", "m": "string", "ts": "numeric"},
                    time_is_timestamp=False, engine=engine, measures=measures,
                    time="ts")
        runner = GroupRunner(spec)
        state, out = None, []
        batches = [[("ACME", 1), ("zeta", 2)], [("Zeta", 3), ("acme", 4), ("Acme", 20)]]
        row = 0
        for batch, watermark in zip(batches, [None, 2], strict=True):  # on arrival
            frame = pd.DataFrame([{"id": row + i, "k": "c", "m": m, "ts": t, TS: t,
                                   ORDER_ROW: row + i} for i, (m, t) in enumerate(batch)])
            row += len(batch)
            result = runner.run(state, [frame], watermark)
            state = result.state
            out += [{"a": [e["id"] for e in r["a"]], "b": [e["id"] for e in r["b"]],
                     "merchant": r["merchant"], "hour": r["hour"]}
                    for r in result.output.to_dict("records")]
        out += [{"a": [e["id"] for e in r["a"]], "b": [e["id"] for e in r["b"]],
                 "merchant": r["merchant"], "hour": r["hour"]}
                for r in runner.run(state, [], None, final=True).output.to_dict("records")]
        return out

    expected = [{"a": [0], "b": [3], "merchant": "acme", "hour": 0}]
    assert play("reference") == expected
    assert play("numba") == expected
