"""Specification of ``cep.match``: what it accepts as input, how it orders and groups
events, what it returns, and how it reports bad input.

``cep.match(events, pattern, key=..., time=..., timeouts=...)`` runs a pattern over
a bounded collection: a list of dicts or objects, a pandas DataFrame, a pyarrow
Table, or a Parquet / CSV / JSONL file.  Events are grouped by ``key``, ordered by
``time`` (stably for equal timestamps) and fed to one :class:`cep.Matcher` per key;
at the end time moves past the last event.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cep
from cep import CEPError, InputError, Match, Matcher, Pattern, SkipStrategy, Timeout

# a, then b (relaxed contiguity): the smallest pattern that shows order and grouping
A_THEN_B = (
    Pattern.begin("a").where(lambda e: e["v"] == "a")
    .followed_by("b").where(lambda e: e["v"] == "b")
)

T0 = 1_709_510_400_000  # 2024-03-04T00:00:00Z in epoch milliseconds


def summary(matches: list[Match]) -> list[tuple[Any, int, int, dict[str, list[Any]]]]:
    """(key, start, end, stage -> event ids): what a match is, without the event objects."""
    return [
        (m.key, m.start, m.end, {stage: [e["id"] for e in evs] for stage, evs in m.items()})
        for m in matches
    ]


def rows(*specs: tuple[int, str, Any, int]) -> list[dict[str, Any]]:
    """Events from (id, v, key, ts) tuples."""
    return [{"id": i, "v": v, "k": k, "ts": ts} for i, v, k, ts in specs]


# ------------------------------------------------------------------ inputs
class TestInputKinds:
    def test_list_of_dicts(self) -> None:
        events = rows((1, "a", "x", 10), (2, "c", "x", 20), (3, "b", "x", 30))
        assert summary(cep.match(events, A_THEN_B, key="k", time="ts")) == [
            ("x", 10, 30, {"a": [1], "b": [3]})
        ]

    def test_matches_hold_the_very_events_fed_in(self) -> None:
        events = rows((1, "a", "x", 10), (2, "b", "x", 20))
        [m] = cep.match(events, A_THEN_B, key="k", time="ts")
        assert m["a"][0] is events[0]
        assert m["b"][0] is events[1]
        assert m.events() == events

    def test_list_of_objects_uses_attribute_access(self) -> None:
        @dataclass(frozen=True)
        class Charge:
            id: int
            card: str
            at: int
            amount: float

        pattern = (
            Pattern.begin("small").where(lambda e: e.amount < 5).times(2).consecutive()
            .next("big").where(lambda e: e.amount > 500)
        )
        events = [
            Charge(1, "c1", 100, 1.0),
            Charge(2, "c2", 101, 2.0),
            Charge(3, "c1", 102, 2.0),
            Charge(4, "c1", 103, 900.0),
        ]
        [m] = cep.match(events, pattern, key="card", time="at")
        assert (m.key, m.start, m.end) == ("c1", 100, 103)
        assert m["small"] == [events[0], events[2]]
        assert m["big"] == [events[3]]

    def test_a_generator_is_accepted(self) -> None:
        events = rows((1, "a", "x", 1), (2, "b", "x", 2))
        assert len(cep.match((e for e in events), A_THEN_B, key="k", time="ts")) == 1

    def test_pandas_dataframe_with_integer_milliseconds(self) -> None:
        df = pd.DataFrame(rows((1, "a", "x", T0), (2, "a", "y", T0 + 5), (3, "b", "x", T0 + 9)))
        assert df["ts"].dtype == "int64"
        assert summary(cep.match(df, A_THEN_B, key="k", time="ts")) == [
            ("x", T0, T0 + 9, {"a": [1], "b": [3]})
        ]

    def test_pandas_string_columns_on_the_numba_engine(self) -> None:
        """Object (string) columns type as strings, not as the nulls of an empty frame."""
        df = pd.DataFrame(rows((1, "a", "x", T0), (2, "a", "y", T0 + 5), (3, "b", "x", T0 + 9)))
        assert df["v"].dtype == object
        p = Pattern.begin("a").where(cep.col("v") == "a").followed_by("b").where(cep.col("v") == "b")
        assert summary(cep.match(df, p, key="k", time="ts", engine="numba")) == [
            ("x", T0, T0 + 9, {"a": [1], "b": [3]})
        ]

    def test_pandas_dataframe_with_datetime64_column(self) -> None:
        df = pd.DataFrame(
            {
                "id": [1, 2],
                "v": ["a", "b"],
                "k": ["x", "x"],
                "ts": pd.to_datetime(
                    ["2024-03-04T00:00:00", "2024-03-04T00:00:01.250"], format="ISO8601"
                ),
            }
        )
        assert str(df["ts"].dtype) == "datetime64[ns]"  # naive: taken as UTC
        [m] = cep.match(df, A_THEN_B, key="k", time="ts")
        assert (m.start, m.end) == (T0, T0 + 1250)

    def test_pandas_dataframe_with_timezone_aware_datetimes(self) -> None:
        df = pd.DataFrame(
            {
                "id": [1, 2],
                "v": ["a", "b"],
                "k": ["x", "x"],
                "ts": pd.to_datetime(["2024-03-04T01:00:00+01:00", "2024-03-04T00:00:02Z"], utc=True),
            }
        )
        [m] = cep.match(df, A_THEN_B, key="k", time="ts")
        assert (m.start, m.end) == (T0, T0 + 2000)

    def test_pyarrow_table(self) -> None:
        table = pa.Table.from_pylist(rows((1, "a", "x", 1), (2, "b", "y", 2), (3, "b", "x", 3)))
        assert summary(cep.match(table, A_THEN_B, key="k", time="ts")) == [
            ("x", 1, 3, {"a": [1], "b": [3]})
        ]

    def test_pyarrow_table_with_timestamp_column(self) -> None:
        table = pa.table(
            {
                "id": [1, 2],
                "v": ["a", "b"],
                "k": ["x", "x"],
                "ts": pa.array([T0, T0 + 7], type=pa.timestamp("ms", tz="UTC")),
            }
        )
        [m] = cep.match(table, A_THEN_B, key="k", time="ts")
        assert (m.start, m.end) == (T0, T0 + 7)

    def test_parquet_file(self, tmp_path: Path) -> None:
        path = tmp_path / "events.parquet"
        pq.write_table(pa.Table.from_pylist(rows((1, "a", "x", 5), (2, "b", "x", 6))), path)
        assert summary(cep.match(path, A_THEN_B, key="k", time="ts")) == [
            ("x", 5, 6, {"a": [1], "b": [2]})
        ]

    def test_file_path_may_be_a_string(self, tmp_path: Path) -> None:
        path = tmp_path / "events.parquet"
        pq.write_table(pa.Table.from_pylist(rows((1, "a", "x", 5), (2, "b", "x", 6))), path)
        assert len(cep.match(str(path), A_THEN_B, key="k", time="ts")) == 1

    def test_csv_file_with_iso_timestamps(self, tmp_path: Path) -> None:
        path = tmp_path / "events.csv"
        path.write_text(
            "id,v,k,ts\n"
            "1,a,x,2024-03-04T00:00:00Z\n"
            "2,a,y,2024-03-04T00:00:00.500Z\n"
            "3,b,x,2024-03-04T00:00:03Z\n"
        )
        assert summary(cep.match(path, A_THEN_B, key="k", time="ts")) == [
            ("x", T0, T0 + 3000, {"a": [1], "b": [3]})
        ]

    def test_csv_file_with_integer_milliseconds(self, tmp_path: Path) -> None:
        path = tmp_path / "events.csv"
        path.write_text("id,v,k,ts\n1,a,x,100\n2,b,x,200\n")
        [m] = cep.match(path, A_THEN_B, key="k", time="ts")
        assert (m.start, m.end) == (100, 200)

    def test_jsonl_file(self, tmp_path: Path) -> None:
        path = tmp_path / "events.jsonl"
        lines = rows((1, "a", "x", 10), (2, "c", "x", 11), (3, "b", "x", 12))
        path.write_text("".join(json.dumps(e) + "\n" for e in lines))
        assert summary(cep.match(path, A_THEN_B, key="k", time="ts")) == [
            ("x", 10, 12, {"a": [1], "b": [3]})
        ]

    def test_iso_strings_in_python_rows(self) -> None:
        events = [
            {"id": 1, "v": "a", "k": "x", "ts": "2024-03-04T01:00:00+01:00"},  # = T0
            {"id": 2, "v": "b", "k": "x", "ts": "2024-03-04T00:00:01Z"},
            {"id": 3, "v": "a", "k": "y", "ts": "2024-03-04T00:00:00"},  # naive: UTC
            {"id": 4, "v": "b", "k": "y", "ts": " 2024-03-04 00:00:02.500 "},
        ]
        matches = cep.match(events, A_THEN_B, key="k", time="ts")
        assert [(m.key, m.start, m.end) for m in matches] == [
            ("x", T0, T0 + 1000),
            ("y", T0, T0 + 2500),
        ]

    def test_python_datetimes(self) -> None:
        start = datetime(2024, 3, 4, tzinfo=UTC)
        events = [
            {"id": 1, "v": "a", "k": "x", "ts": start},
            {"id": 2, "v": "b", "k": "x", "ts": start + timedelta(milliseconds=42)},
        ]
        [m] = cep.match(events, A_THEN_B, key="k", time="ts")
        assert (m.start, m.end) == (T0, T0 + 42)


# ------------------------------------------------------------ key and time
class TestKeyAndTime:
    def test_key_and_time_as_callables(self) -> None:
        events = [
            {"id": 1, "v": "a", "meta": {"card": "x", "t": 3}},
            {"id": 2, "v": "b", "meta": {"card": "y", "t": 1}},
            {"id": 3, "v": "b", "meta": {"card": "x", "t": 2}},
            {"id": 4, "v": "b", "meta": {"card": "x", "t": 4}},
        ]
        matches = cep.match(
            events, A_THEN_B, key=lambda e: e["meta"]["card"], time=lambda e: e["meta"]["t"]
        )
        # event 3 (t=2) comes before event 1 (t=3) in time: only event 4 follows the a
        assert summary(matches) == [("x", 3, 4, {"a": [1], "b": [4]})]

    def test_time_orders_events_not_input_position(self) -> None:
        events = rows((1, "b", "x", 20), (2, "a", "x", 10))
        assert summary(cep.match(events, A_THEN_B, key="k", time="ts")) == [
            ("x", 10, 20, {"a": [2], "b": [1]})
        ]

    def test_time_none_uses_input_order(self) -> None:
        events = rows((1, "b", "x", 20), (2, "a", "x", 10), (3, "b", "x", 0))
        matches = cep.match(events, A_THEN_B, key="k")
        # the ts field is ignored: the position in the input is the timestamp
        assert summary(matches) == [("x", 1, 2, {"a": [2], "b": [3]})]

    def test_key_none_puts_everything_in_one_group(self) -> None:
        events = rows((1, "a", "x", 1), (2, "b", "y", 2))
        [m] = cep.match(events, A_THEN_B, time="ts")
        assert m.key is None
        assert summary([m]) == [(None, 1, 2, {"a": [1], "b": [2]})]

    def test_equal_timestamps_keep_input_order(self) -> None:
        strict = Pattern.begin("a").where(lambda e: e["v"] == "a").next("b")
        events = rows((1, "a", "x", 5), (2, "c", "x", 5), (3, "d", "x", 5), (4, "b", "x", 1))
        matches = cep.match(events, strict, key="k", time="ts")
        # order: 4 (ts 1), then 1, 2, 3 (ts 5, as given): a=1 is strictly followed by 2
        assert summary(matches) == [("x", 5, 5, {"a": [1], "b": [2]})]
        reversed_ties = [events[2], events[1], events[0], events[3]]
        # now 3, 2, 1 at ts 5: the a is last, nothing follows it
        assert cep.match(reversed_ties, strict, key="k", time="ts") == []

    def test_matches_never_mix_keys(self) -> None:
        events = rows(
            (1, "a", "x", 1), (2, "a", "y", 2), (3, "b", "y", 3), (4, "b", "z", 4), (5, "b", "x", 5)
        )
        matches = cep.match(events, A_THEN_B, key="k", time="ts")
        assert summary(matches) == [
            ("x", 1, 5, {"a": [1], "b": [5]}),
            ("y", 2, 3, {"a": [2], "b": [3]}),
        ]
        for m in matches:
            assert {e["k"] for e in m.events()} == {m.key}

    def test_keys_may_be_any_hashable_value(self) -> None:
        events = [
            {"id": 1, "v": "a", "k": (1, "eu"), "ts": 1},
            {"id": 2, "v": "b", "k": (1, "eu"), "ts": 2},
            {"id": 3, "v": "a", "k": 7, "ts": 3},
            {"id": 4, "v": "b", "k": 7, "ts": 4},
        ]
        assert [m.key for m in cep.match(events, A_THEN_B, key="k", time="ts")] == [(1, "eu"), 7]

    def test_unhashable_key_is_an_input_error(self) -> None:
        events = [{"id": 1, "v": "a", "k": ["x"], "ts": 1}]
        with pytest.raises(InputError, match=r"row 0.*not hashable"):
            cep.match(events, A_THEN_B, key="k", time="ts")

    def test_empty_input_has_no_matches(self) -> None:
        assert cep.match([], A_THEN_B, key="k", time="ts") == []
        assert cep.match([], A_THEN_B, key="k", time="ts", timeouts=True) == ([], [])


# ---------------------------------------------------------------- timeouts
class TestTimeouts:
    WINDOWED = A_THEN_B.within(timedelta(milliseconds=10))

    def test_timeouts_true_returns_matches_and_timeouts(self) -> None:
        events = rows((1, "a", "x", 100), (2, "b", "x", 105), (3, "a", "y", 100), (4, "b", "y", 130))
        matches, timeouts = cep.match(events, self.WINDOWED, key="k", time="ts", timeouts=True)
        assert summary(matches) == [("x", 100, 105, {"a": [1], "b": [2]})]
        assert len(timeouts) == 1
        [t] = timeouts
        assert isinstance(t, Timeout)
        assert (t.key, t.start, t.end, t.timestamp) == ("y", 100, 100, 110)
        assert [e["id"] for e in t["a"]] == [3]

    def test_partial_matches_left_at_the_end_time_out(self) -> None:
        events = rows((1, "a", "x", 100), (2, "c", "x", 103))
        matches, timeouts = cep.match(events, self.WINDOWED, key="k", time="ts", timeouts=True)
        assert matches == []
        assert [(t.key, t.timestamp) for t in timeouts] == [("x", 110)]

    def test_without_timeouts_flag_only_matches_are_returned(self) -> None:
        events = rows((1, "a", "x", 100), (2, "b", "x", 130))
        assert cep.match(events, self.WINDOWED, key="k", time="ts") == []

    def test_trailing_not_followed_by_completes_at_the_end(self) -> None:
        pattern = (
            Pattern.begin("a").where(lambda e: e["v"] == "a")
            .not_followed_by("no_b").where(lambda e: e["v"] == "b")
            .within(timedelta(milliseconds=10))
        )
        events = rows((1, "a", "x", 1), (2, "a", "y", 1), (3, "b", "y", 5))
        assert summary(cep.match(events, pattern, key="k", time="ts")) == [
            ("x", 1, 1, {"a": [1]})
        ]


# ------------------------------------------------------------------ errors
class TestBadInput:
    def test_input_error_is_a_cep_error(self) -> None:
        assert issubclass(InputError, CEPError)

    def test_missing_key_field(self) -> None:
        events = [{"id": 1, "k": "x", "ts": 1}, {"id": 2, "ts": 2}]
        with pytest.raises(InputError, match=r"row 1\b.*key field 'k'"):
            cep.match(events, A_THEN_B, key="k", time="ts")

    def test_missing_key_attribute_on_objects(self) -> None:
        @dataclass
        class E:
            ts: int

        with pytest.raises(InputError, match=r"row 0\b.*key field 'card'"):
            cep.match([E(1)], A_THEN_B, key="card", time="ts")

    def test_missing_time_field(self) -> None:
        events = [{"id": 1, "k": "x", "ts": 1}, {"id": 2, "k": "x", "ts": 2}, {"id": 3, "k": "x"}]
        with pytest.raises(InputError, match=r"row 2\b.*time field 'ts'"):
            cep.match(events, A_THEN_B, key="k", time="ts")

    @pytest.mark.parametrize(
        "bad, what",
        [
            (None, "null"),
            (float("nan"), "nan"),
            (float("inf"), "inf"),
            ("yesterday", "yesterday"),
            ("2024-13-45T00:00:00Z", "2024-13-45"),
            (1.5, "1.5"),
            (True, "True"),
        ],
    )
    def test_bad_timestamp(self, bad: Any, what: str) -> None:
        events = [{"k": "x", "when": 1}, {"k": "x", "when": bad}]
        with pytest.raises(InputError, match=r"row 1\b") as info:
            cep.match(events, A_THEN_B, key="k", time="when")
        message = str(info.value)
        assert "'when'" in message
        assert what in message

    def test_nat_in_a_dataframe(self) -> None:
        df = pd.DataFrame(
            {"k": ["x", "x", "x"], "ts": pd.to_datetime(["2024-03-04", None, "2024-03-05"])}
        )
        with pytest.raises(InputError, match=r"row 1\b.*'ts'.*NaT"):
            cep.match(df, A_THEN_B, key="k", time="ts")

    def test_nan_in_a_dataframe(self) -> None:
        df = pd.DataFrame({"k": ["x", "x"], "ts": [1.0, float("nan")]})
        with pytest.raises(InputError, match=r"row 1\b.*'ts'.*nan"):
            cep.match(df, A_THEN_B, key="k", time="ts")

    def test_null_timestamp_in_a_csv_file_names_the_file(self, tmp_path: Path) -> None:
        path = tmp_path / "events.csv"
        path.write_text("k,ts\nx,2024-03-04T00:00:00Z\nx,\n")
        with pytest.raises(InputError) as info:
            cep.match(path, A_THEN_B, key="k", time="ts")
        message = str(info.value)
        assert str(path) in message
        assert "row 1" in message
        assert "'ts'" in message

    def test_missing_field_in_a_jsonl_file_names_the_file(self, tmp_path: Path) -> None:
        path = tmp_path / "events.jsonl"
        path.write_text('{"k": "x", "ts": 1}\n{"k": "x", "ts": 2}\n')
        with pytest.raises(InputError) as info:
            cep.match(path, A_THEN_B, key="card", time="ts")
        assert str(path) in str(info.value)
        assert "'card'" in str(info.value)

    def test_a_failing_key_function(self) -> None:
        with pytest.raises(InputError, match=r"row 0\b.*key function"):
            cep.match([{"ts": 1}], A_THEN_B, key=lambda e: e["card"], time="ts")

    def test_unknown_file_type(self, tmp_path: Path) -> None:
        path = tmp_path / "events.xlsx"
        path.write_bytes(b"not really")
        with pytest.raises(InputError, match="xlsx") as info:
            cep.match(path, A_THEN_B, key="k", time="ts")
        assert str(path) in str(info.value)

    def test_missing_file(self, tmp_path: Path) -> None:
        path = tmp_path / "nowhere.csv"
        with pytest.raises(InputError) as info:
            cep.match(path, A_THEN_B, key="k", time="ts")
        assert str(path) in str(info.value)

    def test_corrupt_parquet_file(self, tmp_path: Path) -> None:
        path = tmp_path / "events.parquet"
        path.write_bytes(b"this is not parquet")
        with pytest.raises(InputError) as info:
            cep.match(path, A_THEN_B, key="k", time="ts")
        assert str(path) in str(info.value)

    def test_pattern_must_be_a_pattern(self) -> None:
        with pytest.raises(InputError, match="Pattern"):
            cep.match([], "a then b", key="k", time="ts")  # type: ignore[call-overload]

    def test_events_must_be_a_collection(self) -> None:
        with pytest.raises(InputError, match="cannot read events"):
            cep.match(42, A_THEN_B)  # type: ignore[call-overload]


# --------------------------------------------- equivalence with the Matcher
def _by_hand(
    events: list[dict[str, Any]], pattern: Pattern
) -> tuple[list[tuple[Any, Match]], list[tuple[Any, Timeout]]]:
    """What ``cep.match`` promises to be: one Matcher per key, fed in time order.

    Before each new timestamp time advances to it, then the event is processed;
    finally time advances to the end of time.  Returns (key, match) and
    (key, timeout) pairs, key by key in order of first appearance.
    """
    groups: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        groups.setdefault(e["k"], []).append(e)
    matches: list[tuple[Any, Match]] = []
    timeouts: list[tuple[Any, Timeout]] = []
    for key, group in groups.items():
        matcher = Matcher(pattern)
        last = None
        for e in sorted(group, key=lambda e: e["ts"]):
            if e["ts"] != last:
                done, expired = matcher.advance_time(e["ts"])
                matches += [(key, m) for m in done]
                timeouts += [(key, t) for t in expired]
                last = e["ts"]
            matches += [(key, m) for m in matcher.process(e, e["ts"])]
        done, expired = matcher.advance_time(2**63 - 1)
        matches += [(key, m) for m in done]
        timeouts += [(key, t) for t in expired]
    return matches, timeouts


def _is_a(v: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["v"] == v


EQUIVALENCE_PATTERNS = {
    "followed_by": A_THEN_B,
    "strict_loop_then_next": (
        Pattern.begin("a", skip=SkipStrategy.skip_past_last_event())
        .where(_is_a("a")).times_or_more(2).consecutive().greedy()
        .next("b").where(_is_a("b")).within(timedelta(milliseconds=40))
    ),
    "followed_by_any_window": (
        Pattern.begin("a").where(_is_a("a"))
        .followed_by_any("b").where(_is_a("b")).optional()
        .followed_by("c").where(_is_a("c")).within(timedelta(milliseconds=25))
    ),
    "trailing_negation": (
        Pattern.begin("a").where(_is_a("a"))
        .not_followed_by("no_c").where(_is_a("c")).within(timedelta(milliseconds=15))
    ),
    "skip_to_next_one_or_more": (
        Pattern.begin("a", skip=SkipStrategy.skip_to_next())
        .where(_is_a("a")).one_or_more()
        .followed_by("b").where(_is_a("b")).within(timedelta(milliseconds=30))
    ),
}


@pytest.mark.parametrize("name", sorted(EQUIVALENCE_PATTERNS))
@pytest.mark.parametrize("seed", range(5))
def test_match_equals_one_hand_fed_matcher_per_key(name: str, seed: int) -> None:
    rng = random.Random(seed)
    pattern = EQUIVALENCE_PATTERNS[name]
    events = [
        {"id": i, "v": rng.choice("abcd"), "k": rng.choice(["x", "y", "z"]), "ts": rng.randrange(120)}
        for i in range(60)
    ]
    matches, timeouts = cep.match(events, pattern, key="k", time="ts", timeouts=True)
    expected_matches, expected_timeouts = _by_hand(events, pattern)

    assert [m.key for m in matches] == [key for key, _ in expected_matches]
    assert [s[1:] for s in summary(matches)] == [
        s[1:] for s in summary([m for _, m in expected_matches])
    ]
    assert [t.key for t in timeouts] == [key for key, _ in expected_timeouts]
    assert [(t.timestamp, *summary([t])[0][1:]) for t in timeouts] == [
        (t.timestamp, *summary([t])[0][1:]) for _, t in expected_timeouts
    ]
