"""A column of event times is read as its values are, one by one - but vectorised.

``cep.time_columns.times_of_column`` marks the values that are no time instead of
raising, so one bad row can go to a dead-letter output while the rest of its batch goes
on; the reasons are the single-value reader's own messages.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cep.errors import InputError, TimeUnitError
from cep.time_columns import times_of_column
from cep.times import to_epoch_millis

MARCH_1 = 1709251200000  # 2024-03-01T00:00:00Z


def read(values, unit=None, fmt=None):
    col = times_of_column(values, unit, "ts", fmt)
    return [None if b else int(m) for m, b in zip(col.millis, col.bad, strict=True)]


def test_integer_milliseconds_pass_through():
    assert read(pa.array([MARCH_1, MARCH_1 + 1])) == [MARCH_1, MARCH_1 + 1]


def test_integers_in_a_unit():
    assert read(np.array([1709251200]), "s") == [MARCH_1]
    assert read(pa.array([1709251200123456]), "us") == [MARCH_1 + 123]
    assert read(pd.Series([1709251200123456789]), "ns") == [MARCH_1 + 123]


def test_integers_that_look_like_seconds_are_marked_with_the_unit_advice():
    col = times_of_column(pa.array([MARCH_1, 1709251200]), None, "ts")
    assert col.bad.tolist() == [False, True]
    err = col.error(1, "row 1")
    assert isinstance(err, TimeUnitError)
    assert "row 1: time field 'ts' is 1709251200, which looks like epoch seconds" in str(err)


def test_floats_must_be_whole_milliseconds_and_finite():
    assert read(pa.array([1.0, 1.5, float("nan"), float("inf")])) == [1, None, None, None]
    assert read(np.array([1709251200.5]), "s") == [MARCH_1 + 500]


def test_nulls_are_marked():
    col = times_of_column(pa.array([1, None], pa.int64()), None, "ts")
    assert col.bad.tolist() == [False, True]
    assert col.reason(1) == "time field 'ts' is null"


def test_values_beyond_int64_or_the_year_9999_are_marked():
    assert read(pa.array([10**20 // 10**3]), "s") == [None]
    assert read(["100000000000000000000"]) == [None]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_arrow_timestamps_of_every_unit_and_zone(unit):
    naive = pa.array([datetime(2024, 3, 1, 0, 0, 0, 250_000)], pa.timestamp(unit))
    zoned = pa.array([datetime(2024, 3, 1, tzinfo=UTC)], pa.timestamp(unit, "Europe/Paris"))
    expected = MARCH_1 + (250 if unit != "s" else 0)
    assert read(naive) == [expected]
    assert read(zoned) == [MARCH_1]


def test_times_before_1970_round_down_to_the_millisecond():
    before = pa.array([-1500], pa.timestamp("us"))  # 1.5 ms before the epoch
    assert read(before) == [-2]
    assert read(pa.array([-1500]), "us") == [-2]


def test_dates_and_pandas_datetimes():
    assert read(pa.array([datetime(2024, 3, 1).date()])) == [MARCH_1]
    frame = pd.Series(pd.to_datetime(["2024-03-01T00:00:01Z", None], utc=True))
    assert read(frame) == [MARCH_1 + 1000, None]


def test_iso_text_with_and_without_zones_and_fractions():
    text = [
        "2024-03-01T00:00:00Z", "2024-03-01 00:00:00.123", "2024-03-01T01:00:00+01:00",
        "2024-03-01", "2024-03-01T00:00:00.123456789Z", "2024-03-01 00:00:00.1234",
    ]
    assert read(pa.array(text)) == [MARCH_1, MARCH_1 + 123, MARCH_1, MARCH_1, MARCH_1 + 123,
                                    MARCH_1 + 123]
    for value, got in zip(text, read(pa.array(text)), strict=True):  # as one value reads
        assert got == to_epoch_millis(value, None, "ts")


def test_bad_text_in_the_middle_of_a_long_column_marks_only_that_row():
    text = [f"2024-03-01T00:00:{s % 60:02d}Z" for s in range(10_000)]
    text[4321] = "not a time"
    text[9999] = "2024-13-01T00:00:00Z"
    col = times_of_column(pa.array(text), None, "ts")
    assert np.flatnonzero(col.bad).tolist() == [4321, 9999]
    assert col.millis[4322] == MARCH_1 + 2000
    assert col.reason(4321, "row 4321") == ("row 4321: time field 'ts' is 'not a time': not an "
                                            "ISO-8601 timestamp or integer milliseconds")


def test_digit_text_is_an_integer_time_in_the_unit():
    assert read(pa.array(["1709251200", " 1709251201 "]), "s") == [MARCH_1, MARCH_1 + 1000]
    assert read(pa.array(["1709251200"])) == [None]  # looks like seconds: said, not guessed


def test_a_user_format():
    values = pa.array(["01/03/2024 00:00", "01/03/2024 00:00:00.5", "March 1"])
    assert read(values, fmt="%d/%m/%Y %H:%M") == [MARCH_1, None, None]
    assert read(pa.array(["01/03/2024 00:00:00.5"]), fmt="%d/%m/%Y %H:%M:%S.%f") == [
        MARCH_1 + 500]
    col = times_of_column(values, None, "ts", fmt="%d/%m/%Y %H:%M")
    assert col.reason(2) == "time field 'ts' is 'March 1': does not match the format '%d/%m/%Y %H:%M'"


def test_python_values_of_mixed_types_are_read_one_by_one():
    values = [MARCH_1, "2024-03-01T00:00:01Z", datetime(2024, 3, 1, 0, 0, 2), None, "x", True]
    assert read(values) == [MARCH_1, MARCH_1 + 1000, MARCH_1 + 2000, None, None, None]


def test_other_types_are_no_times():
    assert read(pa.array([True])) == [None]
    assert read(pa.array([[1]])) == [None]
    assert "bool" in times_of_column(pa.array([True]), None, "ts").reason(0)


def test_an_unknown_unit_is_refused():
    with pytest.raises(InputError, match="unknown time unit"):
        times_of_column([1], "minutes", "ts")


_VALUES = st.one_of(
    st.integers(-(10**16), 10**16),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
        lambda d: d.isoformat(sep=" ")),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.just(UTC)).map(lambda d: d.isoformat().replace("+00:00", "Z")),
    st.integers(-(10**13), 10**13).map(lambda d: (datetime(2024, 1, 1, tzinfo=UTC)
                                                  + timedelta(microseconds=d)).isoformat()),
    st.text(max_size=6),
    st.none(),
)


@given(values=st.lists(_VALUES, min_size=1, max_size=20),
       unit=st.sampled_from([None, "s", "ms", "us"]))
def test_a_column_reads_as_its_values_do(values, unit):
    """Whatever the column holds, each value is read (or refused) as the one-value reader
    reads it; typed columns (all ints, all floats, all text) take the vectorised path."""
    for column in ([v for v in values if isinstance(v, str)],
                   [v for v in values if isinstance(v, int)], values):
        if not column:
            continue
        expected = []
        for v in column:
            try:
                expected.append(to_epoch_millis(v, unit, "ts"))
            except InputError:
                expected.append(None)
        assert read(column, unit) == expected, column
