"""Conditions of the event alone, which the numba engine evaluates a column at a time
(cep.nfa.column_conditions): over nulls they take exactly the events the reference
engine takes, SQL's three-valued logic (a null compares unknown, and unknown is not
true, nor is NOT unknown)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import cep
from cep import Expr, Pattern, coalesce, col

#: v and w with nulls (and a NaN, which is null too), s text with a null
ROWS = [
    {"id": 0, "v": 5.0, "w": 1.0, "s": "a"},
    {"id": 1, "v": None, "w": 2.0, "s": "b"},
    {"id": 2, "v": 3.0, "w": None, "s": None},
    {"id": 3, "v": float("nan"), "w": 0.0, "s": "a"},
    {"id": 4, "v": 7.0, "w": 7.0, "s": "c"},
]

CASES = [
    # (condition, the ids it takes)
    (col("v") != 5, [2, 4]),  # null != 5 is unknown: not taken (numpy finds NaN != 5 true)
    (col("v") == col("w"), [4]),
    (col("v") != col("w"), [0]),
    (~(col("v") > 4), [2]),  # NOT unknown is unknown
    ((col("v") > 4) | (col("w") > 1), [0, 1, 4]),  # unknown OR true is true
    ((col("v") > 4) & (col("w") >= 0), [0, 4]),
    (~((col("v") > 4) & (col("w") > 1)), [0, 2, 3]),  # false AND unknown is false
    (col("v").is_null(), [1, 3]),
    (~col("v").is_null() & (col("s") != "a"), [4]),
    (col("s").isin(["a", "c"]), [0, 3, 4]),
    (~col("s").isin(["a"]), [1, 4]),
    (coalesce(col("v"), col("w")) > 1, [0, 1, 2, 4]),
    ((col("v") + col("w")) / col("w") > 2, [0]),  # division by zero is null
]


@pytest.mark.parametrize(("condition", "ids"), CASES, ids=[repr(c) for c, _ in CASES])
def test_a_condition_of_the_event_alone_takes_the_events_it_is_true_for(
        condition: Expr, ids: list[int]) -> None:
    pattern = Pattern.begin("a").where(condition)
    want = [m["a"][0]["id"] for m in cep.match(ROWS, pattern, engine="reference")]
    got = [m["a"][0]["id"] for m in cep.match(pa.Table.from_pylist(ROWS), pattern,
                                                engine="numba")]
    assert want == ids
    assert got == ids
