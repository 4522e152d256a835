"""Distinct values of integer arrays (:mod:`cep.nfa.distinct`): the same as numpy's
``np.unique`` whether the values are dense enough for a table over their span or not."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cep.nfa.distinct import distinct, distinct_inverse

#: values clustered (a table over their span) or spread (a sort), negatives included
VALUES = st.one_of(
    st.lists(st.integers(-50, 50), max_size=200),
    st.lists(st.integers(-(2**40), 2**40), max_size=50),
).map(lambda v: np.array(v, np.int64))


@given(VALUES)
def test_distinct_is_numpys_unique(values: np.ndarray) -> None:
    assert distinct(values).tolist() == np.unique(values).tolist()


@given(VALUES)
def test_distinct_inverse_is_numpys_unique_with_inverse(values: np.ndarray) -> None:
    used, inverse = distinct_inverse(values)
    expected, where = np.unique(values, return_inverse=True)
    assert used.tolist() == expected.tolist()
    assert inverse.dtype == np.int64
    assert inverse.tolist() == where.reshape(-1).tolist()
    assert (used[inverse] == values).all()


def test_the_events_of_matches() -> None:
    """Row numbers of the events of matches, some taken twice: near one another (a table
    over their span) or far apart (a sort), the same answer."""
    near = np.array([1_000_040, 1_000_003, 1_000_003, 1_000_020], np.int64)
    far = near * 1000
    for rows in (near, far):
        used, inverse = distinct_inverse(rows)
        assert used.tolist() == sorted(set(rows.tolist()))
        assert inverse.tolist() == [2, 0, 0, 1]
