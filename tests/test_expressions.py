"""Expression conditions: ``col``, literals, arithmetic, comparisons, stage references, aggregates.

Each test states a rule in its docstring, then shows the pattern, the events and
the expected matches.  Patterns run on the reference engine through
:func:`cep.match` (events are dicts; ``id`` identifies them in the expected
matches) or :class:`cep.Matcher`.

Rules in brief (DESIGN.md, "Expressions"):

* ``col(name)`` is a field of the current event; numbers compare with
  ``== != < <= > >=``, strings with ``==``, ``!=`` and ``isin`` only.
* Nulls follow SQL: a null field (None or NaN) makes a comparison *unknown*;
  unknown is not true, so the event is not taken; ``~unknown`` is still unknown;
  ``unknown | True`` is True and ``unknown & False`` is False.  Division by zero
  is null.
* ``first``/``last``/``prev`` and the aggregates read the partial match *before*
  the current event (what an iterative condition's ``ctx.events`` sees).  Over a
  stage that took nothing, ``count`` is 0 and every other reference is null.
* Expressions are data: they print as the DSL, round-trip through JSON, and a
  pattern of expressions serializes; loading never runs code.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass
from typing import Any

import pytest

import cep
from cep import (
    ConditionError,
    Expr,
    MalformedPatternError,
    Matcher,
    MissingFieldError,
    Pattern,
    SkipStrategy,
    WithinType,
    avg,
    col,
    count,
    first,
    last,
    lit,
    match,
    prev,
)
from cep.expr import infer_type, max_, min_, sum_

NAN = float("nan")


# --------------------------------------------------------------------------- helpers


def rows(*values: dict[str, Any]) -> list[dict[str, Any]]:
    """Events as dicts, numbered by an ``id`` field in input order."""
    return [{"id": i, **v} for i, v in enumerate(values)]


def amounts(*values: Any, field: str = "amount") -> list[dict[str, Any]]:
    return rows(*({field: v} for v in values))


def ids(matches: list[cep.Match]) -> list[dict[str, list[int]]]:
    """Each match as ``{stage: [event ids]}``, in the order the engine emitted them."""
    return [{stage: [e["id"] for e in events] for stage, events in m.items()} for m in matches]


def run(events: list[dict[str, Any]], pattern: Pattern) -> list[dict[str, list[int]]]:
    return ids(match(events, pattern, engine="reference"))


def taken(cond: Any, events: list[dict[str, Any]]) -> list[int]:
    """The ids of the events a one-stage pattern ``begin("a").where(cond)`` takes."""
    return [m["a"][0] for m in run(events, Pattern.begin("a").where(cond))]


# ===================================================================== comparisons


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        pytest.param(col("amount") == 5, [1], id="=="),
        pytest.param(col("amount") != 5, [0, 2], id="!="),
        pytest.param(col("amount") < 5, [0], id="<"),
        pytest.param(col("amount") <= 5, [0, 1], id="<="),
        pytest.param(col("amount") > 5, [2], id=">"),
        pytest.param(col("amount") >= 5, [1, 2], id=">="),
    ],
)
def test_numeric_comparisons(cond: Expr, expected: list[int]) -> None:
    """``col(name) <op> number`` takes the events for which the comparison holds.

    Events: amounts 3, 5, 7 (ids 0, 1, 2); a one-stage pattern takes each
    event satisfying the condition, so each taken event is one match.
    """
    assert taken(cond, amounts(3, 5, 7)) == expected


def test_ints_and_floats_compare_as_numbers() -> None:
    """Integers and floats compare by value: 5 == 5.0, 4.5 < 5."""
    events = amounts(5.0, 4.5, 5)
    assert taken(col("amount") == 5, events) == [0, 2]
    assert taken(col("amount") < 5, events) == [1]


def test_literal_on_the_left() -> None:
    """A literal may stand on either side: ``5 < col(x)`` is ``col(x) > 5``."""
    events = amounts(3, 7)
    assert taken(5 < col("amount"), events) == [1]
    assert (5 < col("amount")).equals(col("amount") > 5)
    assert taken(lit(5) < col("amount"), events) == [1]


def test_two_columns_compare() -> None:
    """Two fields of the same event can be compared with each other."""
    events = rows({"bid": 10, "ask": 11}, {"bid": 12, "ask": 11}, {"bid": 11, "ask": 11})
    assert taken(col("bid") > col("ask"), events) == [1]
    assert taken(col("bid") == col("ask"), events) == [2]


def test_strings_compare_by_equality() -> None:
    """Strings compare with ``==`` and ``!=``."""
    events = rows({"country": "RU"}, {"country": "FR"}, {"country": "KP"})
    assert taken(col("country") == "RU", events) == [0]
    assert taken(col("country") != "RU", events) == [1, 2]


def test_string_isin() -> None:
    """``col(s).isin([...])`` takes the events whose value is one of the listed values.

    The docs' example: an amount over 500 from a sanctioned country.
    """
    cond = (col("amount") > 500) & col("country").isin(["RU", "KP"])
    events = rows(
        {"amount": 900, "country": "RU"},
        {"amount": 900, "country": "FR"},
        {"amount": 100, "country": "KP"},
        {"amount": 501, "country": "KP"},
    )
    assert taken(cond, events) == [0, 3]


def test_numeric_isin_and_empty_isin() -> None:
    """``isin`` works on numbers too (1 and 1.0 are the same number); an empty list takes nothing."""
    events = amounts(1, 2, 3, 1.0)
    assert taken(col("amount").isin([1, 3]), events) == [0, 2, 3]
    assert taken(col("amount").isin([]), events) == []


def test_isin_does_not_mix_strings_and_numbers() -> None:
    """A string is never "in" a list of numbers, nor a number in a list of strings."""
    events = rows({"v": "1"}, {"v": 1})
    assert taken(col("v").isin([1]), events) == [1]
    assert taken(col("v").isin(["1"]), events) == [0]


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_strings_do_not_order(op: str) -> None:
    """``<`` ``<=`` ``>`` ``>=`` on strings is an error, reported with the stage and the event.

    Pattern: ``begin("a").where(col("country") < "M")`` over ``{"country": "FR"}``.
    """
    cond = {
        "<": col("country") < "M",
        "<=": col("country") <= "M",
        ">": col("country") > "M",
        ">=": col("country") >= "M",
    }[op]
    with pytest.raises(ConditionError, match=r"stage 'a'.*== and != only.*FR"):
        match(rows({"country": "FR"}), Pattern.begin("a").where(cond), engine="reference")


def test_string_compared_with_number_is_an_error() -> None:
    """Comparing a string field with a number is an error naming the stage, not silently false."""
    with pytest.raises(ConditionError, match=r"stage 'a'.*cannot compare 'FR' with 5"):
        match(rows({"country": "FR"}), Pattern.begin("a").where(col("country") == 5),
              engine="reference")


def test_a_missing_field_reads_null() -> None:
    """An event without a field holds null there: its conditions on it are not true, and
    ``is_null`` is; a field no event holds at all is refused as a likely misspelling."""
    events = rows({"amount": 5, "kind": "charge"}, {"kind": "login"})
    for engine in ("reference", "numba"):
        found = match(events, Pattern.begin("a").where(col("amount").is_null()), engine=engine)
        assert [m["a"][0] for m in found] == [{"id": 1, "kind": "login"}]
        with pytest.raises(MissingFieldError, match=r"'amout' \(read by stage 'a'\)"):
            match(events, Pattern.begin("a").where(col("amout") > 0), engine=engine)


def test_fields_of_objects() -> None:
    """``col`` reads attributes of objects as well as keys of mappings."""

    @dataclass(frozen=True)
    class Reading:
        sensor: str
        temp: float

    events = [(Reading("s1", 20.0), 1), (Reading("s1", 95.5), 2)]
    matcher = Matcher(Pattern.begin("hot").where(col("temp") > 90), engine="reference")
    found = [m for e, ts in events for m in matcher.process(e, ts)]
    assert [m["hot"] for m in found] == [[Reading("s1", 95.5)]]


# ====================================================================== arithmetic


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        pytest.param(col("price") * col("qty") > 100, [1], id="*"),
        pytest.param(col("price") + col("qty") == 12, [0], id="+"),
        pytest.param(col("price") - col("qty") == 26, [1], id="-"),
        pytest.param(col("price") / col("qty") == 2.5, [2], id="/"),
        pytest.param(col("price") * 2 + 1 == 21, [0], id="precedence"),
        pytest.param(200 / col("price") == 20, [0], id="literal/col"),
        pytest.param(1 - col("qty") == -3, [1], id="literal-col"),
    ],
)
def test_arithmetic(cond: Expr, expected: list[int]) -> None:
    """``+ - * /`` combine numbers (fields or literals) before comparing; Python precedence applies.

    Events: (price, qty) = (10, 2), (30, 4), (5, 2).
    """
    events = rows({"price": 10, "qty": 2}, {"price": 30, "qty": 4}, {"price": 5, "qty": 2})
    assert taken(cond, events) == expected


def test_division_is_true_division() -> None:
    """``/`` is true division, also between integers: 7 / 2 == 3.5."""
    assert taken(col("a") / col("b") == 3.5, rows({"a": 7, "b": 2})) == [0]


def test_abs_and_negation() -> None:
    """``abs(e)`` (or ``e.abs()``) is the absolute value; ``-e`` negates."""
    events = rows({"delta": -12}, {"delta": 5}, {"delta": 11})
    assert taken(abs(col("delta")) > 10, events) == [0, 2]
    assert taken(col("delta").abs() > 10, events) == [0, 2]
    assert taken(-col("delta") > 10, events) == [0]


def both_engines(cond: Any, events: list[dict[str, Any]]) -> list[int]:
    """``taken`` on each engine; they must agree."""
    p = Pattern.begin("a").where(cond)
    got = {e: [m["a"][0]["id"] for m in match(events, p, engine=e)] for e in ("reference", "numba")}
    assert got["reference"] == got["numba"], got
    return got["numba"]


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        pytest.param(col("x").sqrt() == 3, [2], id="sqrt"),
        pytest.param(col("x").sqrt().is_null(), [0], id="sqrt of a negative is null"),
        pytest.param(col("x").log().is_null(), [0, 1], id="log of 0 and below is null"),
        pytest.param(col("x").exp() > 1000, [2], id="exp"),
        pytest.param((col("x") * 1000).exp().is_null(), [2], id="exp overflow is null"),
        pytest.param((col("x") / 9).asin().is_null(), [], id="asin in domain"),
        pytest.param((col("x") / 4).asin().is_null(), [2], id="asin outside [-1, 1] is null"),
        pytest.param(((col("x") * 90).radians().sin() - 1).abs() < 1e-12, [2], id="sin(810°)"),
        pytest.param((col("x") / 2).floor() == -1, [0], id="floor"),
        pytest.param((col("x") / 2).ceil() == 5, [2], id="ceil"),
        pytest.param(lit(1.0).atan().degrees() == 45, [0, 1, 2], id="atan(1) is 45 degrees"),
        pytest.param((col("x") * 0).acos().degrees() == 90, [0, 1, 2], id="acos(0)"),
        pytest.param((col("x") * 0).cos() == 1, [0, 1, 2], id="cos(0)"),
        pytest.param(lit(0.25).tan() > 0.25, [0, 1, 2], id="tan"),
    ],
)
def test_math_functions(cond: Any, expected: list[int]) -> None:
    """Unary math (Polars style, ``col("x").sqrt()``); out of domain or not finite is null."""
    assert both_engines(cond, rows({"x": -1}, {"x": 0}, {"x": 9})) == expected


def test_great_circle_distance_in_expressions() -> None:
    """Haversine from the math functions: Paris -> New York is about 5,837 km, on both engines."""
    lat1, lon1 = first("here", "lat").radians(), first("here", "lon").radians()
    lat2, lon2 = col("lat").radians(), col("lon").radians()
    a = ((lat2 - lat1) / 2).sin() * ((lat2 - lat1) / 2).sin() + (
        lat1.cos() * lat2.cos() * ((lon2 - lon1) / 2).sin() * ((lon2 - lon1) / 2).sin()
    )
    km = a.sqrt().asin() * (2 * 6371.0)
    p = Pattern.begin("here").followed_by("there").where((km > 5800) & (km < 5900))
    events = rows({"lat": 48.8566, "lon": 2.3522}, {"lat": 48.86, "lon": 2.35},
                  {"lat": 40.7128, "lon": -74.006})
    for engine in ("reference", "numba"):
        assert ids(match(events, p, engine=engine)) == [
            {"here": [0], "there": [2]}, {"here": [1], "there": [2]}
        ]
    assert Pattern.from_json(p.to_json()) == p


def test_math_functions_need_numbers() -> None:
    """``sqrt`` of a string column is a type error naming the stage, before any event runs."""
    with pytest.raises(MalformedPatternError, match=r"stage 'a'.*arithmetic needs numbers"):
        match(rows({"s": "x"}), Pattern.begin("a").where(col("s").sqrt() > 0), engine="numba")


def test_math_functions_round_trip_json() -> None:
    """Math nodes are plain data: ``{"op": "sqrt", "args": [...]}``, loaded back equal."""
    e = (col("x").radians().cos() * 2).sqrt() > 1
    assert '"op": "sqrt"' in e.to_json()
    assert Expr.from_json(e.to_json()).equals(e)
    assert repr(e) == "(sqrt((cos(radians(col('x'))) * lit(2))) > 1)"


def test_arithmetic_on_strings_is_an_error() -> None:
    """Arithmetic needs numbers: ``col(s) + 1`` on a string fails naming the stage."""
    with pytest.raises(ConditionError, match=r"stage 'a'.*arithmetic needs numbers"):
        match(rows({"s": "x"}), Pattern.begin("a").where(col("s") + 1 > 0), engine="reference")


# ================================================================ ranges, nulls, logic


def test_between_is_inclusive() -> None:
    """``e.between(low, high)`` is ``low <= e <= high``: both ends are included (SQL BETWEEN)."""
    assert taken(col("amount").between(5, 10), amounts(4, 5, 7, 10, 11)) == [1, 2, 3]


def test_is_null_takes_none_and_nan() -> None:
    """``is_null()`` is true for None and for NaN, false for every value (0 and "" included)."""
    events = amounts(None, NAN, 0, "", 1.5)
    assert taken(col("amount").is_null(), events) == [0, 1]
    assert taken(~col("amount").is_null(), events) == [2, 3, 4]


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        pytest.param((col("x") > 0) & (col("y") > 0), [3], id="and"),
        pytest.param((col("x") > 0) | (col("y") > 0), [1, 2, 3], id="or"),
        pytest.param(~(col("x") > 0), [0, 2], id="not"),
        pytest.param(~((col("x") > 0) | (col("y") > 0)), [0], id="not-or"),
        pytest.param((col("x") > 0) & True, [1, 3], id="and-python-bool"),
        pytest.param(False | (col("y") > 0), [2, 3], id="python-bool-or"),
    ],
)
def test_boolean_connectives(cond: Expr, expected: list[int]) -> None:
    """``&`` is and, ``|`` is or, ``~`` is not; a Python bool may be an operand of ``&``/``|``.

    Events: (x, y) = (0, 0), (1, 0), (0, 1), (1, 1).
    """
    events = rows({"x": 0, "y": 0}, {"x": 1, "y": 0}, {"x": 0, "y": 1}, {"x": 1, "y": 1})
    assert taken(cond, events) == expected


# ---------------------------------------------------------------- SQL null semantics

T, F, U = True, False, None  # U: unknown

AND_TABLE = [
    (T, T, T), (T, F, F), (T, U, U),
    (F, T, F), (F, F, F), (F, U, F),
    (U, T, U), (U, F, F), (U, U, U),
]
OR_TABLE = [
    (T, T, T), (T, F, T), (T, U, T),
    (F, T, T), (F, F, F), (F, U, U),
    (U, T, T), (U, F, U), (U, U, U),
]


@pytest.mark.parametrize(("a", "b", "result"), AND_TABLE)
def test_and_truth_table(a: bool | None, b: bool | None, result: bool | None) -> None:
    """``&`` follows SQL's three-valued logic: False wins, then unknown, then True."""
    assert (lit(a) & lit(b)).evaluate({}, None) is result


@pytest.mark.parametrize(("a", "b", "result"), OR_TABLE)
def test_or_truth_table(a: bool | None, b: bool | None, result: bool | None) -> None:
    """``|`` follows SQL's three-valued logic: True wins, then unknown, then False."""
    assert (lit(a) | lit(b)).evaluate({}, None) is result


@pytest.mark.parametrize(("a", "result"), [(T, F), (F, T), (U, U)])
def test_not_truth_table(a: bool | None, result: bool | None) -> None:
    """``~`` swaps True and False and leaves unknown unknown."""
    assert (~lit(a)).evaluate({}, None) is result


@pytest.mark.parametrize("null", [None, NAN], ids=["None", "NaN"])
def test_comparison_with_null_is_not_taken(null: Any) -> None:
    """A comparison with a null field is unknown, and unknown is not taken: neither
    ``x > 5`` nor ``x <= 5`` takes an event whose x is null."""
    events = amounts(7, null, 3, field="x")
    assert taken(col("x") > 5, events) == [0]
    assert taken(col("x") <= 5, events) == [2]
    assert taken(col("x") != 5, events) == [0, 2]


@pytest.mark.parametrize("null", [None, NAN], ids=["None", "NaN"])
def test_negated_unknown_is_still_unknown(null: Any) -> None:
    """``~(col("x") > 5)`` does NOT take an event whose x is null: not unknown is unknown.

    (A Python ``lambda e: not e["x"] > 5`` would have no answer for None.)
    """
    events = amounts(7, null, 3, field="x")
    assert taken(~(col("x") > 5), events) == [2]


def test_unknown_or_true_is_true() -> None:
    """``unknown | True`` is True: the event is taken although x is null."""
    events = rows({"x": None, "y": 1}, {"x": None, "y": 0})
    assert taken((col("x") > 5) | (col("y") == 1), events) == [0]


def test_unknown_and_false_is_false() -> None:
    """``unknown & False`` is False, so its negation is True and the event is taken;
    ``unknown & True`` is unknown, so its negation is not."""
    events = rows({"x": None, "y": 2}, {"x": None, "y": 1})
    assert taken(~((col("x") > 5) & (col("y") == 1)), events) == [0]


def test_arithmetic_with_null_is_null() -> None:
    """Arithmetic with a null operand is null: ``x + 1`` compares as unknown and ``is_null`` holds."""
    events = amounts(None, 1, field="x")
    assert taken(col("x") + 1 > 0, events) == [1]
    assert taken((col("x") + 1).is_null(), events) == [0]
    assert taken(abs(col("x")).is_null(), events) == [0]


def test_division_by_zero_is_null() -> None:
    """``a / 0`` is null (not an error, not infinity): no comparison with it is taken,
    not even negated, and ``is_null()`` holds."""
    events = rows({"a": 1, "b": 0}, {"a": 4, "b": 2}, {"a": 1, "b": 0.0})
    assert taken(col("a") / col("b") > 1, events) == [1]
    assert taken(~(col("a") / col("b") > 1), events) == []
    assert taken((col("a") / col("b")).is_null(), events) == [0, 2]


def test_isin_with_null_value_is_unknown() -> None:
    """``null.isin([...])`` is unknown: neither it nor its negation takes the event."""
    events = amounts(None, 1, 2, field="x")
    assert taken(col("x").isin([1]), events) == [1]
    assert taken(~col("x").isin([1]), events) == [2]


def test_between_with_null_is_unknown() -> None:
    """``null.between(a, b)`` is unknown, and so is its negation."""
    events = amounts(None, 1, 20, field="x")
    assert taken(col("x").between(0, 10), events) == [1]
    assert taken(~col("x").between(0, 10), events) == [2]


def test_equality_with_none_literal_is_never_true() -> None:
    """SQL: ``x == None`` is unknown for every x (null included); use ``is_null()`` instead."""
    events = amounts(None, 1, field="x")
    assert taken(col("x") == None, events) == []  # noqa: E711
    assert taken(col("x") != None, events) == []  # noqa: E711
    assert taken(col("x").is_null(), events) == [0]


def test_pandas_missing_values_are_null() -> None:
    """From a DataFrame, NaN (float columns) and pd.NA (nullable integer columns) are null."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "id": [0, 1, 2],
            "f": [1.5, None, 9.0],
            "n": pd.array([1, None, 9], dtype="Int64"),
        }
    )
    pattern = Pattern.begin("a").where(~(col("f") > 5) & ~(col("n") > 5))
    assert [m["a"][0]["id"] for m in match(frame, pattern, engine="reference")] == [0]
    nulls = Pattern.begin("a").where(col("f").is_null() & col("n").is_null())
    assert [m["a"][0]["id"] for m in match(frame, nulls, engine="reference")] == [1]


def test_isin_list_containing_null_is_unknown_when_no_value_matches() -> None:
    """SQL: ``2 IN (1, NULL)`` is unknown (NULL might be 2), so ``~isin`` does not take 2."""
    events = amounts(1, 2, field="x")
    assert col("x").isin([1, None]).evaluate({"x": 2}, None) is None
    assert taken(~col("x").isin([1, None]), events) == []


def test_nan_literal_is_null() -> None:
    """NaN is null wherever it appears: a NaN literal makes a comparison unknown."""
    assert (col("x") > NAN).evaluate({"x": 3}, None) is None
    assert taken(~(col("x") > NAN), amounts(3, field="x")) == []


# ===================================================== references to the partial match


def test_strictly_increasing_amounts() -> None:
    """``last(stage, field)`` reads the last event an earlier stage took.

    Pattern: A, then B with a larger amount than A's, then C larger than B's,
    all strictly contiguous.  Amounts 5 3 4 6 2 7 8: runs 3<4<6 and 2<7<8.
    """
    pattern = (
        Pattern.begin("A")
        .next("B").where(col("amount") > last("A", "amount"))
        .next("C").where(col("amount") > last("B", "amount"))
    )
    assert run(amounts(5, 3, 4, 6, 2, 7, 8), pattern) == [
        {"A": [1], "B": [2], "C": [3]},
        {"A": [4], "B": [5], "C": [6]},
    ]


def test_first_reads_the_first_event_of_a_loop() -> None:
    """``first(stage, field)`` is the first event the stage took: here a loop of prices
    within 10% of the price where it started, then a drop below 90% of that start
    (skip past the match, so the run starting at 105 is not reported too).
    """
    pattern = (
        Pattern.begin("start", skip=SkipStrategy.skip_past_last_event())
        .next("steady")
        .where(abs(col("p") - first("start", "p")) <= first("start", "p") * 0.1)
        .one_or_more().consecutive().greedy()
        .next("drop").where(col("p") < first("start", "p") * 0.9)
    )
    events = amounts(100, 105, 95, 110, 80, field="p")
    assert run(events, pattern) == [{"start": [0], "steady": [1, 2, 3], "drop": [4]}]


def test_last_inside_a_loop_is_the_previous_iteration() -> None:
    """Within a loop, ``last(own stage, f)`` is the event the loop took before the current
    one (the current event is not yet part of the match); on the first iteration it is
    null, hence the ``is_null()`` guard.

    Pattern: a rising run of at least three prices, greedy, then any event.
    """
    rising = last("up", "p").is_null() | (col("p") > last("up", "p"))
    pattern = (
        Pattern.begin("up", skip=SkipStrategy.skip_past_last_event())
        .where(rising).times_or_more(3).consecutive().greedy()
        .next("end")
    )
    events = amounts(1, 2, 3, 4, 2, 5, 6, 7, 0, field="p")
    assert run(events, pattern) == [
        {"up": [0, 1, 2, 3], "end": [4]},
        {"up": [5, 6, 7], "end": [8]},
    ]


def test_reference_to_an_empty_stage_is_null() -> None:
    """``last`` of a stage that has not taken anything is null: the comparison is
    unknown and the event is not taken (without a guard the loop cannot start).
    """
    pattern = Pattern.begin("up").where(col("p") > last("up", "p")).one_or_more()
    assert run(amounts(1, 2, 3, field="p"), pattern) == []


def test_prev_is_the_previously_taken_event_whatever_its_stage() -> None:
    """``prev(field)`` reads the event the partial match took last, from any stage;
    events skipped by relaxed contiguity are not "previous".

    Pattern: a login, followed by a transfer, followed by an event with the
    same ``v`` as the transfer.  The event with id 2 sits between a (taken at
    id 0) and b (taken at id 3) but is skipped, so it is never ``prev``.
    """
    pattern = (
        Pattern.begin("a").where(col("kind") == "login")
        .followed_by("b").where(col("kind") == "transfer")
        .followed_by("c").where(col("v") == prev("v"))
    )
    events = rows(
        {"kind": "login", "v": 1},
        {"kind": "noise", "v": 7},
        {"kind": "noise", "v": 1},
        {"kind": "transfer", "v": 7},
        {"kind": "noise", "v": 1},
        {"kind": "noise", "v": 7},
    )
    assert run(events, pattern) == [{"a": [0], "b": [3], "c": [5]}]


def test_prev_before_the_first_event_is_null() -> None:
    """At the first stage nothing has been taken yet: ``prev`` is null."""
    events = amounts(1, 2, field="v")
    assert taken(prev("v").is_null(), events) == [0, 1]
    assert taken(col("v") > prev("v"), events) == []


def test_prev_inside_a_loop() -> None:
    """Within a loop ``prev`` is the loop's previous event (or the stage before it on the
    first iteration): here a consecutive run of non-decreasing values after a zero."""
    pattern = (
        Pattern.begin("zero", skip=SkipStrategy.skip_past_last_event())
        .where(col("v") == 0)
        .next("run").where(col("v") >= prev("v")).one_or_more().consecutive().greedy()
        .next("end").where(col("v") < prev("v"))
    )
    events = amounts(0, 1, 1, 3, 2, field="v")
    assert run(events, pattern) == [{"zero": [0], "run": [1, 2, 3], "end": [4]}]


def test_count_limits_a_loop() -> None:
    """``count(stage)`` is how many events the stage took before the current one:
    ``count("b") < 2`` lets the loop take at most two events."""
    pattern = (
        Pattern.begin("a").where(col("v") == 0)
        .next("b").where(count("b") < 2).one_or_more().consecutive().greedy()
        .next("c")
    )
    assert run(amounts(0, 1, 2, 3, field="v"), pattern) == [{"a": [0], "b": [1, 2], "c": [3]}]


def test_count_of_an_empty_stage_is_zero() -> None:
    """``count`` of a stage that has taken nothing is 0 (not null)."""
    assert taken(count("a") == 0, amounts(1, 2, field="v")) == [0, 1]


def test_aggregates() -> None:
    """``sum``, ``avg``, ``min``, ``max`` aggregate a field over what a stage took; null
    values are left out (avg divides by the non-null count) while ``count`` counts events.

    Pattern: ``b`` takes three events (2, null, 4), then ``c`` checks the aggregates.
    """
    checks = (
        (count("b") == 3)
        & (cep.sum("b", "x") == 6)
        & (cep.avg("b", "x") == 3)
        & (cep.min("b", "x") == 2)
        & (cep.max("b", "x") == 4)
    )
    pattern = Pattern.begin("b").times(3).consecutive().next("c").where(checks)
    events = amounts(2, None, 4, 0, field="x")
    assert run(events, pattern) == [{"b": [0, 1, 2], "c": [3]}]


@pytest.mark.parametrize("agg", [avg, min_, max_, first, last])
def test_aggregates_of_an_empty_stage_are_null(agg: Any) -> None:
    """Over a stage that took nothing (here an optional stage that was skipped)
    ``avg``/``min``/``max``/``first``/``last`` are null."""
    pattern = (
        Pattern.begin("a").where(col("x") < 0).optional()
        .followed_by("b").where(agg("a", "x").is_null())
    )
    assert run(amounts(5, field="x"), pattern) == [{"b": [0]}]


def test_sum_of_an_empty_stage_is_zero() -> None:
    """A sum over nothing is 0 (like count), so a loop can test ``sum + x`` from its first event."""
    pattern = (
        Pattern.begin("a").where(col("x") < 0).optional()
        .followed_by("b").where(sum_("a", "x") == 0)
    )
    assert run(amounts(5, field="x"), pattern) == [{"b": [0]}]


def test_aggregates_of_only_nulls_are_null() -> None:
    """Over events whose field is always null, avg/min/max are null; count counts them, sum is 0."""
    pattern = (
        Pattern.begin("b").times(2).consecutive()
        .next("c").where(
            cep.avg("b", "x").is_null() & cep.max("b", "x").is_null()
            & (cep.sum("b", "x") == 0) & (count("b") == 2)
        )
    )
    assert run(amounts(None, NAN, 1, field="x"), pattern) == [{"b": [0, 1], "c": [2]}]


def test_running_sum_loop() -> None:
    """A loop whose running sum stays under 100: ``sum(b) + amount < 100``.

    The first iteration has its own case here (``count("b") == 0``), which the next
    test shows is not needed: a sum over nothing is 0.  Each partial match has its
    own history, so several loops run side by side.  Amounts: 1 (a), 30, 40, 20, 50 (b), 5 (c).
    """
    first_one = (count("b") == 0) & (col("amount") < 100)
    under_100 = first_one | (cep.sum("b", "amount") + col("amount") < 100)
    pattern = (
        Pattern.begin("a").where(col("amount") < 10)
        .followed_by("b").where(under_100).one_or_more()
        .followed_by("c").where(col("amount") < 10)
    )
    assert run(amounts(1, 30, 40, 20, 50, 5), pattern) == [
        {"a": [0], "b": [1, 2, 3], "c": [5]},
        {"a": [0], "b": [1], "c": [5]},
        {"a": [0], "b": [1, 2], "c": [5]},
    ]


def test_running_sum_needs_no_first_case() -> None:
    """``sum(b) + amount < 100`` starts from 0, so the loop works without a special first case."""
    pattern = (
        Pattern.begin("a").where(col("amount") < 10)
        .followed_by("b").where(cep.sum("b", "amount") + col("amount") < 100).one_or_more()
        .followed_by("c").where(col("amount") < 10)
    )
    assert run(amounts(1, 30, 40, 20, 50, 5), pattern) == [
        {"a": [0], "b": [1, 2, 3], "c": [5]},
        {"a": [0], "b": [1], "c": [5]},
        {"a": [0], "b": [1, 2], "c": [5]},
    ]


def test_references_see_their_own_branch() -> None:
    """Partial matches branch (``followed_by_any``); each reference reads the history of
    its own branch: here two ``a`` events each find the later ``b`` that doubles them.
    """
    pattern = (
        Pattern.begin("a").where(col("kind") == "a")
        .followed_by_any("b").where((col("kind") == "b") & (col("v") == first("a", "v") * 2))
    )
    events = rows(
        {"kind": "a", "v": 1}, {"kind": "a", "v": 2}, {"kind": "b", "v": 4}, {"kind": "b", "v": 2}
    )
    assert sorted(run(events, pattern), key=lambda m: m["a"]) == [
        {"a": [0], "b": [3]},
        {"a": [1], "b": [2]},
    ]


def test_null_events_neither_take_nor_forbid() -> None:
    """In a ``not_followed_by`` stage an event whose condition is unknown is not a
    forbidden event: the match survives it."""
    pattern = (
        Pattern.begin("a").where(col("v") == 0)
        .not_followed_by("bad").where(col("v") > 5)
        .followed_by("c").where(col("v") == 1)
    )
    assert run(amounts(0, None, 1, 0, 9, 1, field="v"), pattern) == [{"a": [0], "c": [2]}]


def test_exported_names() -> None:
    """``cep.sum``/``cep.min``/``cep.max`` are the aggregates (``sum_``/``min_``/``max_`` in
    ``cep.expr``, named so they do not shadow the builtins there)."""
    assert cep.sum is sum_ and cep.min is min_ and cep.max is max_
    assert cep.sum("b", "x").equals(sum_("b", "x"))
    assert cep.avg is cep.expr.avg and cep.count is cep.expr.count


# ============================================ expressions match like Python conditions

_EVENTS = rows(
    *(
        {"amount": a, "country": c, "kind": k}
        for a, c, k in [
            (3, "FR", "card"), (8, "RU", "card"), (12, "FR", "wire"), (4, "KP", "card"),
            (7, "FR", "card"), (15, "RU", "wire"), (2, "FR", "card"), (9, "KP", "wire"),
            (9, "FR", "card"), (1, "RU", "card"), (20, "FR", "wire"), (6, "FR", "card"),
        ]
    )
)


def _events_of(ctx: Any, stage: str) -> list[dict[str, Any]]:
    return ctx.events(stage)


EQUIVALENT = {
    "simple": (
        Pattern.begin("a").where((col("amount") > 5) & col("country").isin(["RU", "KP"]))
        .followed_by("b").where((col("kind") == "wire") | (col("amount") < 3)),
        Pattern.begin("a").where(lambda e: e["amount"] > 5 and e["country"] in ("RU", "KP"))
        .followed_by("b").where(lambda e: e["kind"] == "wire" or e["amount"] < 3),
    ),
    "increasing": (
        Pattern.begin("a")
        .followed_by("b").where(col("amount") > last("a", "amount"))
        .followed_by("c").where(col("amount") > last("b", "amount") * 1.5),
        Pattern.begin("a")
        .followed_by("b").where(lambda e, ctx: e["amount"] > ctx.events("a")[-1]["amount"])
        .followed_by("c")
        .where(lambda e, ctx: e["amount"] > ctx.events("b")[-1]["amount"] * 1.5),
    ),
    "running-sum-any": (
        Pattern.begin("a").where(col("kind") == "wire")
        .followed_by("b")
        .where((count("b") == 0) | (cep.sum("b", "amount") + col("amount") < 20))
        .times(1, 3).allow_combinations()
        .followed_by("c").where(col("country") == "RU"),
        Pattern.begin("a").where(lambda e: e["kind"] == "wire")
        .followed_by("b")
        .where(lambda e, ctx: sum(x["amount"] for x in ctx.events("b")) + e["amount"] < 20)
        .times(1, 3).allow_combinations()
        .followed_by("c").where(lambda e: e["country"] == "RU"),
    ),
    "avg-min-max": (
        Pattern.begin("b").where(col("kind") == "card").times(2).consecutive()
        .followed_by("c")
        .where((col("amount") > cep.avg("b", "amount"))
               & (col("amount") - cep.min("b", "amount") > cep.max("b", "amount"))),
        Pattern.begin("b").where(lambda e: e["kind"] == "card").times(2).consecutive()
        .followed_by("c")
        .where(lambda e, ctx: e["amount"] > sum(x["amount"] for x in ctx.events("b")) / 2
               and e["amount"] - min(x["amount"] for x in ctx.events("b"))
               > max(x["amount"] for x in ctx.events("b"))),
    ),
    "first-and-count-greedy": (
        Pattern.begin("start", skip=SkipStrategy.skip_past_last_event())
        .where(col("kind") == "card")
        .followed_by("more").where((col("country") == first("start", "country"))
                                   & (count("more") < 3))
        .one_or_more().greedy()
        .next("end").where(col("kind") == "wire"),
        Pattern.begin("start", skip=SkipStrategy.skip_past_last_event())
        .where(lambda e: e["kind"] == "card")
        .followed_by("more")
        .where(lambda e, ctx: e["country"] == ctx.events("start")[0]["country"]
               and len(ctx.events("more")) < 3)
        .one_or_more().greedy()
        .next("end").where(lambda e: e["kind"] == "wire"),
    ),
    "prev-until": (
        Pattern.begin("a").where(col("kind") == "wire")
        .followed_by("b").where(col("amount") != prev("amount")).one_or_more()
        .until(col("country") == "KP"),
        Pattern.begin("a").where(lambda e: e["kind"] == "wire")
        .followed_by("b")
        .where(lambda e, ctx: e["amount"] != (ctx.events("b") or ctx.events("a"))[-1]["amount"])
        .one_or_more()
        .until(lambda e: e["country"] == "KP"),
    ),
}


@pytest.mark.parametrize("name", list(EQUIVALENT))
def test_expression_matches_like_the_equivalent_lambda(name: str) -> None:
    """An expression condition gives exactly the matches (same events, same order) of the
    equivalent Python lambda / iterative lambda over ``ctx.events``."""
    expr_pattern, lambda_pattern = EQUIVALENT[name]
    expected = run(_EVENTS, lambda_pattern)
    assert expected, "the scenario should produce matches"
    assert run(_EVENTS, expr_pattern) == expected


def test_expression_and_lambda_conditions_combine() -> None:
    """An expression and a Python callable can share a stage (``where`` ANDs, ``or_`` ORs)."""
    pattern = (
        Pattern.begin("a").where(col("amount") > 5).where(lambda e: e["country"] == "FR")
        .or_(col("amount") == 1)
    )
    assert [m["a"] for m in run(_EVENTS, pattern)] == [[2], [4], [8], [9], [10], [11]]


# ==================================================================== repr and JSON


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ((col("amount") > 500) & col("country").isin(["RU", "KP"]),
         "((col('amount') > 500) & col('country').isin(['RU', 'KP']))"),
        (col("x") * 2 > 10, "((col('x') * lit(2)) > 10)"),
        (~(col("x") > 5), "(~(col('x') > 5))"),
        (col("t") == "login", "(col('t') == 'login')"),
        (abs(col("x") - prev("x")) >= 1.5, "(abs((col('x') - prev('x'))) >= 1.5)"),
        (col("x").is_null() | (col("x") < first("a", "x")),
         "(col('x').is_null() | (col('x') < first('a', 'x')))"),
        (cep.sum("b", "x") + col("x") < 100, "((sum_('b', 'x') + col('x')) < 100)"),
        (count("b") <= cep.max("b", "x"), "(count('b') <= max_('b', 'x'))"),
        (col("x").between(1, 5), "((col('x') >= 1) & (col('x') <= 5))"),
    ],
)
def test_repr_prints_the_dsl(expr: Expr, text: str) -> None:
    """``repr`` prints the expression in the DSL it was written in."""
    assert repr(expr) == text


def test_repr_reads_back_as_the_same_expression() -> None:
    """What ``repr`` prints is valid DSL: evaluated with ``cep.expr``'s names it rebuilds an
    equal expression (this is for people reading patterns; loading uses JSON)."""
    namespace = vars(cep.expr)
    exprs = [
        (col("amount") > 500) & col("country").isin(["RU", "KP"]),
        ~(col("x") / 3 - -col("y") <= last("a", "y")) | lit(True),
        avg("b", "x").is_null() & (count("b") != 2.5) & (col("s") == None),  # noqa: E711
    ]
    for e in exprs:
        assert eval(repr(e), namespace).equals(e), repr(e)


def test_repr_parenthesizes_a_negated_receiver() -> None:
    """``(~c).is_null()`` and ``~(c.is_null())`` are different expressions and print differently."""
    c = col("x") > 1
    negated_first, negated_last = (~c).is_null(), ~(c.is_null())
    assert not negated_first.equals(negated_last)
    assert repr(negated_first) != repr(negated_last)
    assert eval(repr(negated_first), vars(cep.expr)).equals(negated_first)


def test_double_equals_builds_an_expression_and_equals_compares() -> None:
    """``==`` on expressions builds a condition; ``.equals()`` compares structure."""
    a, b = col("x") > 1, col("x") > 1
    assert isinstance(a == b, Expr)
    assert a.equals(b)
    assert not a.equals(col("x") > 2)
    assert not a.equals(col("x") >= 1)
    assert not a.equals(col("y") > 1)
    assert not a.equals("(col('x') > 1)")


def test_equals_tells_literal_types_apart() -> None:
    """``equals`` agrees with pattern equality: 1, 1.0 and True are different literals."""
    assert (Pattern.begin("a").where(col("f") == 1)
            != Pattern.begin("a").where(col("f") == True))  # noqa: E712
    assert not lit(1).equals(lit(True))
    assert not lit(1).equals(lit(1.0))


@pytest.mark.parametrize(
    "use",
    [
        pytest.param(lambda: bool(col("x") > 1), id="bool"),
        pytest.param(lambda: (col("x") > 1) and (col("y") > 1), id="and"),
        pytest.param(lambda: not col("x").is_null(), id="not"),
        pytest.param(lambda: 1 < col("x") < 5, id="chained-comparison"),
        pytest.param(lambda: col("x") in [col("y")], id="in"),
        pytest.param(lambda: "yes" if col("x") == col("y") else "no", id="if"),
    ],
)
def test_expressions_have_no_truth_value(use: Any) -> None:
    """Using an expression as a Python bool is a TypeError that says what to write instead."""
    with pytest.raises(TypeError, match=r"no truth value.*& \| ~.*\.equals\(\)"):
        use()


def test_expressions_are_not_hashable() -> None:
    """``==`` does not compare, so expressions cannot be dict keys or set members."""
    with pytest.raises(TypeError):
        hash(col("x"))


@pytest.mark.parametrize(
    "expr",
    [
        col("x"),
        lit(None),
        lit("a \"quoted\" string"),
        (col("amount") > 500) & col("country").isin(["RU", "KP"]),
        ~(col("a") / col("b") * 2 - 1 <= abs(col("c"))) | (col("d") != 2.5),
        col("v").between(-1, 1.5) & ~col("v").is_null(),
        col("f") == True,  # noqa: E712
        (col("x") == first("a", "x")) & (col("y") > last("b", "y")) & (col("z") < prev("z")),
        (count("b") < 3) & (sum_("b", "x") + avg("b", "x") > min_("b", "x") - max_("b", "x")),
        col("x").isin([1, 2.5, None, True, "s"]),
    ],
    ids=repr,
)
def test_json_round_trip(expr: Expr) -> None:
    """``Expr.from_json(e.to_json())`` is structurally equal to ``e`` and prints the same."""
    text = expr.to_json()
    json.loads(text)  # plain JSON
    back = Expr.from_json(text)
    assert back.equals(expr)
    assert repr(back) == repr(expr)
    assert back.to_json() == text


def test_json_round_trip_keeps_int_float_and_bool_literals_apart() -> None:
    """1, 1.0 and True stay distinct literals through JSON."""
    for value in (1, 1.0, True):
        back = Expr.from_json(lit(value).to_json())
        assert type(back.evaluate({}, None)) is type(value)


def test_json_shape() -> None:
    """The JSON is a tree of ``{"op": ..., "args": [...]}`` objects, leaves carrying names and values."""
    assert json.loads((col("x") > 5).to_json()) == {
        "op": ">",
        "args": [{"op": "col", "name": "x"}, {"op": "lit", "value": 5}],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{not json", "not valid JSON", id="invalid-json"),
        pytest.param("[]", "expected an object with 'op'", id="not-an-object"),
        pytest.param('{"name": "x"}', "expected an object with 'op'", id="no-op"),
        pytest.param('{"op": "eval", "args": []}', "unknown op 'eval'", id="unknown-op"),
        pytest.param('{"op": "__import__", "name": "os"}', "unknown op", id="import"),
        pytest.param(
            '{"op": "&", "args": [{"op": "col", "name": "x"}, {"op": "exec"}]}',
            r"\$\.args\[1\].*unknown op 'exec'",
            id="nested-unknown-op",
        ),
        pytest.param('{"op": "col"}', "needs 'name'", id="col-without-name"),
        pytest.param('{"op": "col", "name": ""}', "field name", id="col-empty-name"),
        pytest.param('{"op": "lit"}', "needs 'value'", id="lit-without-value"),
        pytest.param('{"op": "lit", "value": {"a": 1}}', "literals must be", id="lit-object"),
        pytest.param('{"op": "first", "stage": "a"}', "needs 'field'", id="first-no-field"),
        pytest.param('{"op": "sum", "stage": "a", "field": null}', "name", id="sum-null-field"),
        pytest.param('{"op": "+", "args": [{"op": "lit", "value": 1}]}', "takes 2 args",
                     id="arity"),
        pytest.param('{"op": "~", "args": {"op": "lit", "value": true}}', "must be a list",
                     id="args-not-list"),
        pytest.param('{"op": "isin", "args": [{"op": "col", "name": "x"}]}', "needs 'values'",
                     id="isin-without-values"),
        pytest.param(
            '{"op": "isin", "args": [{"op": "col", "name": "x"}], "values": [[1]]}',
            "literals must be",
            id="isin-nested-list",
        ),
    ],
)
def test_from_json_rejects_malformed_expressions(text: str, message: str) -> None:
    """Malformed or unknown JSON is refused with a MalformedPatternError saying where."""
    with pytest.raises(MalformedPatternError, match=message):
        Expr.from_json(text)


@pytest.mark.parametrize("values", ["5", '"RU"', '{"RU": 1}'])
def test_from_json_rejects_isin_values_that_are_not_a_list(values: str) -> None:
    """``isin``'s ``values`` must be a JSON list."""
    text = f'{{"op": "isin", "args": [{{"op": "col", "name": "x"}}], "values": {values}}}'
    with pytest.raises(MalformedPatternError):
        Expr.from_json(text)


def test_json_round_trip_of_a_nan_literal() -> None:
    """A NaN literal survives the JSON round-trip (as a null, or as itself)."""
    e = col("x") > NAN
    json.loads(e.to_json(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert Expr.from_json(e.to_json()).equals(e)


def test_from_json_never_runs_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading an expression runs no code: eval/exec/compile are never called and field
    names that look like code are only names (an event without them reads null)."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("from_json ran code")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    sneaky = (col("__import__('os').system('false')") > lit("__class__")) | col("x").isin(
        ["os.system('false')"]
    )
    back = Expr.from_json(sneaky.to_json())
    monkeypatch.undo()
    assert back.equals(sneaky)
    assert back.evaluate({"x": 1}, None) is None  # null > text, or 1 in [...]: unknown
    assert back.evaluate({"x": "os.system('false')"}, None) is True


# ========================================================= patterns as JSON


def _patterns() -> dict[str, Pattern]:
    big = col("amount") > 500
    small = col("amount") < 5
    group = Pattern.begin("g1").where(small).next("g2").where(col("kind") == "atm")
    return {
        "single": Pattern.begin("a").where(big),
        "contiguity": Pattern.begin("a").where(small).next("b").where(big)
        .followed_by("c").where(col("kind") == "x").followed_by_any("d").where(small),
        "quantifiers": Pattern.begin("a").where(small).times_or_more(3).consecutive()
        .next("b").where(big).times(2, 4).allow_combinations()
        .followed_by("c").where(col("k").is_null()).times(2).optional()
        .followed_by("d").where(col("k").isin([1, 2])).one_or_more().greedy()
        .until(col("k") == 3)
        .next("e"),
        "or-where": Pattern.begin("a").where(big).or_(small).where(~col("x").is_null()),
        "negation": Pattern.begin("a").where(big).not_next("n").where(small)
        .followed_by("b").where(big).not_followed_by("m").where(col("kind") == "refund")
        .within(1000),
        "group": Pattern.begin("start").where(big)
        .followed_by(group).times(2).consecutive().next("end").where(small),
        "group-first": Pattern.begin(group).one_or_more().followed_by("z"),
        "windows": Pattern.begin("a").where(small).one_or_more(window=500)
        .followed_by("b").within(100, WithinType.PREVIOUS_AND_CURRENT).within(10_000),
        "references": Pattern.begin("a")
        .next("b").where(col("amount") > last("a", "amount"))
        .followed_by("c").where((cep.sum("b", "amount") + col("amount") < 100)
                                & (prev("amount") != first("a", "amount")))
        .one_or_more(),
        "no-condition": Pattern.begin("a").next("b"),
        "skip-to-next": Pattern.begin("a", skip=SkipStrategy.skip_to_next()).where(big),
        "skip-past-last": Pattern.begin("a", skip=SkipStrategy.skip_past_last_event()).where(big),
        "skip-to-first": Pattern.begin("a", skip=SkipStrategy.skip_to_first("b")).next("b"),
        "skip-to-last-throw": Pattern.begin(
            "a", skip=SkipStrategy.skip_to_last("a").throw_exception_on_miss()
        ).one_or_more().next("b"),
    }


@pytest.mark.parametrize("name", list(_patterns()))
def test_pattern_json_round_trip(name: str) -> None:
    """``Pattern.from_json(p.to_json()) == p`` for patterns whose conditions are expressions,
    whatever their quantifiers, groups, windows and skip strategy; the text is stable."""
    pattern = _patterns()[name]
    text = pattern.to_json()
    assert json.loads(text)["format"] == "cep.pattern/1"
    back = Pattern.from_json(text)
    assert back == pattern
    assert hash(back) == hash(pattern)
    assert repr(back) == repr(pattern)
    assert back.to_json() == text


def test_loaded_pattern_finds_the_same_matches() -> None:
    """A pattern loaded from JSON matches exactly like the one that was saved."""
    pattern = EQUIVALENT["running-sum-any"][0]
    loaded = Pattern.from_json(pattern.to_json())
    assert run(_EVENTS, loaded) == run(_EVENTS, pattern) != []


def test_equal_patterns_compare_equal() -> None:
    """Patterns built separately from equal expressions are equal (and hash alike);
    a different literal, operator or stage makes them different."""

    def build(limit: int, op: str = ">") -> Pattern:
        cond = col("amount") > limit if op == ">" else col("amount") >= limit
        return Pattern.begin("a").where(cond).followed_by("b").where(col("c").isin(["x"]))

    assert build(5) == build(5)
    assert hash(build(5)) == hash(build(5))
    assert build(5) != build(6)
    assert build(5) != build(5, ">=")
    assert build(5) != build(5).within(10)


@pytest.mark.parametrize(
    ("pattern", "stage"),
    [
        pytest.param(
            Pattern.begin("a").where(col("x") > 1).followed_by("b").where(lambda e: e["x"] > 2),
            "b",
            id="lambda",
        ),
        pytest.param(
            Pattern.begin("a").followed_by("b").where(col("x") > 1)
            .where(lambda e, ctx: len(ctx.events("a")) > 0),
            "b",
            id="iterative-lambda-and-expression",
        ),
        pytest.param(
            Pattern.begin("a").one_or_more().until(lambda e: e["stop"]).followed_by("b"),
            "a",
            id="until",
        ),
        pytest.param(
            Pattern.begin("a").followed_by(
                Pattern.begin("g1").next("g2").where(lambda e: True)
            ),
            "g2",
            id="inside-group",
        ),
    ],
)
def test_pattern_with_python_code_refuses_to_serialize(pattern: Pattern, stage: str) -> None:
    """A Python callable cannot be written as data: ``to_json`` fails naming its stage."""
    with pytest.raises(MalformedPatternError, match=rf"stage '{stage}'.*cannot be serialized"):
        pattern.to_json()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("not json", id="invalid-json"),
        pytest.param('{"format": "something/else", "pattern": {}}', id="foreign-format"),
        pytest.param('{"format": "cep.pattern/1", "pattern": {"skip": {}, "stages": []}}',
                     id="bad-skip"),
        pytest.param('{"format": "cep.pattern/1", "pattern": 5}', id="pattern-not-object"),
    ],
)
def test_pattern_from_json_rejects_malformed_documents(text: str) -> None:
    """A document that is not a saved pattern is refused with a MalformedPatternError."""
    with pytest.raises(MalformedPatternError):
        Pattern.from_json(text)


def test_pattern_from_json_rejects_unknown_expression_ops() -> None:
    """An unknown op inside a saved pattern's condition is refused like in ``Expr.from_json``."""
    doc = json.loads(Pattern.begin("a").where(col("x") > 1).to_json())
    doc["pattern"]["stages"][0]["condition"]["expr"]["op"] = "system"
    with pytest.raises(MalformedPatternError, match="unknown op 'system'"):
        Pattern.from_json(json.dumps(doc))


def test_pattern_from_json_rejects_missing_stage_fields() -> None:
    """A stage with missing fields is refused, saying which."""
    doc = json.loads(Pattern.begin("a").where(col("x") > 1).to_json())
    del doc["pattern"]["stages"][0]["times"]
    with pytest.raises(MalformedPatternError, match=r"\$\.pattern.*times"):
        Pattern.from_json(json.dumps(doc))


def test_pattern_from_json_rejects_a_document_without_a_pattern() -> None:
    """``{"format": "cep.pattern/1"}`` with no pattern is a MalformedPatternError."""
    with pytest.raises(MalformedPatternError):
        Pattern.from_json('{"format": "cep.pattern/1"}')


# ======================================================================= type checks

SCHEMA = {"amount": "numeric", "country": "string", "flag": "boolean"}
STAGES = ["a", "b", "c"]


def check(e: Expr, stage: str = "b") -> str | None:
    """Type-check ``e`` as the condition of ``stage`` of the pattern a -> b -> c."""
    return infer_type(e, SCHEMA, stage, STAGES)


@pytest.mark.parametrize(
    "expr",
    [
        (col("amount") > 500) & col("country").isin(["RU", "KP"]),
        (col("country") == "RU") | (col("country") != last("a", "country")),
        ~col("flag") | col("amount").is_null(),
        col("amount").between(1, 2) & (abs(col("amount") - prev("amount")) / 2 < 1),
        (cep.sum("b", "amount") + col("amount") < 100) & (count("a") == 1),
        (avg("a", "amount") > cep.min("b", "amount")) & (cep.max("a", "amount") != 0),
        col("amount") == None,  # noqa: E711
        first("a", "amount") <= col("amount"),
    ],
    ids=repr,
)
def test_well_typed_conditions_are_boolean(expr: Expr) -> None:
    """A well-typed condition has type boolean, references to itself and earlier stages allowed."""
    assert check(expr) == "boolean"


def test_value_types() -> None:
    """Columns have their schema type; arithmetic and aggregates are numeric."""
    assert check(col("country")) == "string"
    assert check(col("amount") * 2) == "numeric"
    assert check(count("a")) == "numeric"
    assert check(lit(None)) is None


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        pytest.param(col("amout") > 5, r"unknown column 'amout'.*columns: \['amount'",
                     id="unknown-column"),
        pytest.param(last("a", "amout") > 5, "unknown column 'amout'", id="unknown-ref-field"),
        pytest.param(col("country") == 5, "cannot compare string with numeric",
                     id="string-vs-number"),
        pytest.param(col("amount") == "5", "cannot compare numeric with string",
                     id="number-vs-string"),
        pytest.param(col("country").isin([1]), "1 is numeric, the value is string",
                     id="isin-wrong-type"),
        pytest.param(col("country") < "M", "strings compare by == and != only",
                     id="string-order"),
        pytest.param(col("country") >= last("a", "country"), "== and != only",
                     id="string-order-ref"),
        pytest.param(col("country") + 1 == 2, "arithmetic needs numbers", id="string-plus"),
        pytest.param(abs(col("country")) > 1, "arithmetic needs numbers", id="abs-string"),
        pytest.param(cep.sum("a", "country") > 1, "sum needs a numeric column",
                     id="sum-string"),
        pytest.param(cep.max("a", "country") == 1, "max over a string column",
                     id="max-string"),
        pytest.param(col("amount") & col("flag"), "is numeric, not a condition",
                     id="number-as-condition"),
        pytest.param(count("zz") > 1, "refers to stage 'zz', which the pattern does not have",
                     id="unknown-stage"),
        pytest.param(first("zz", "amount").is_null(), "refers to stage 'zz'",
                     id="unknown-stage-in-is-null"),
    ],
)
def test_type_errors_name_the_stage(expr: Expr, message: str) -> None:
    """Every type error is a MalformedPatternError that names the stage and the problem."""
    with pytest.raises(MalformedPatternError, match=rf"^stage 'b': .*{message}"):
        check(expr)
