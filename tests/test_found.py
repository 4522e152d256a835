"""What engines find, as columns (cep.nfa.found.Found): the same matches as Match objects,
and as one Arrow table (cep.runtime.tables.match_table) whose rows are the records a job
writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cep
from cep import Pattern, SkipStrategy, col, last
from cep.nfa.engine import make_engine
from cep.nfa.events import Events, Keys
from cep.nfa.found import MATCH, TIMEOUT, Found
from cep.runtime import FileSink, FileSource, Job, ListSink
from cep.runtime.job import match_rows
from cep.runtime.records import table_rows
from cep.runtime.tables import match_table

#: small charges then a large one, within 10 s: matches and timeouts
SMALL_THEN_LARGE = (Pattern.begin("small").where(col("amount") < 5).one_or_more()
                    .followed_by("large").where(col("amount") > 500).within(10_000))

ROWS = [
    {"card": "c1", "amount": 2.0, "ts": 1_000},
    {"card": "c2", "amount": 3.0, "ts": 2_000},
    {"card": "c1", "amount": 1.0, "ts": 3_000},
    {"card": "c1", "amount": 900.0, "ts": 4_000},
    {"card": "c2", "amount": 4.0, "ts": 30_000},
]


def found_by_numba(rows: list[dict[str, Any]], key: Any = "card") -> tuple[Found, Found]:
    engine = make_engine(SMALL_THEN_LARGE, "numba")
    table = pa.Table.from_pylist(rows)
    values = [r[key] for r in rows] if isinstance(key, str) else [
        tuple(r[k] for k in key) for r in rows]
    step = engine.process(Events(table, Keys.of_values(values),
                                 np.array([r["ts"] for r in rows], np.int64)))
    return step.found, engine.advance(10**12)  # type: ignore[return-value]


def test_the_numba_engine_finds_columns_that_read_as_the_reference_engines_matches() -> None:
    found, expired = found_by_numba(ROWS)
    assert isinstance(found, Found) and isinstance(expired, Found)
    reference = make_engine(SMALL_THEN_LARGE, "reference")
    events = Events.of(ROWS, Keys.of_values([r["card"] for r in ROWS]),
                       np.array([r["ts"] for r in ROWS], np.int64))
    want = [*reference.process(events).found, *reference.advance(10**12)]
    got = [*found, *expired]
    assert [(type(m).__name__, m.key, m.start, m.end, dict(m)) for m in got] == [
        (type(m).__name__, m.key, m.start, m.end, dict(m)) for m in want]


def test_the_table_holds_the_records_a_job_writes() -> None:
    found, expired = found_by_numba(ROWS)
    stages = ["small", "large"]
    for part in (found, expired):
        table = match_table(part, key="card", stages=stages)
        assert table_rows(table) == match_rows(list(part), key="card", stages=stages)
    table = match_table(expired, key="card", stages=stages)
    assert table.column_names == ["card", "kind", "match_id", "start", "end", "timeout_at",
                                  "small", "large"]
    # one column per stage, each the list of events it took, as the input's columns
    event = pa.struct([("card", pa.string()), ("amount", pa.float64()), ("ts", pa.int64())])
    assert table.schema.field("small").type == pa.list_(event)
    assert table_rows(table)[0] | {"match_id": "-"} == {
        "card": "c1", "kind": "timeout", "match_id": "-", "start": 1_000, "end": 3_000,
        "timeout_at": 11_000, "small": [{"card": "c1", "amount": 2.0, "ts": 1_000},
                                        {"card": "c1", "amount": 1.0, "ts": 3_000}],
        "large": []}


def test_a_composite_key_is_a_column_per_field() -> None:
    rows = [{**r, "bank": "b"} for r in ROWS]
    found, _ = found_by_numba(rows, key=("card", "bank"))
    records = table_rows(match_table(found, key=("card", "bank"), stages=["small", "large"]))
    assert [(r["card"], r["bank"], r["start"], r["end"]) for r in records] == [
        (m.key[0], m.key[1], m.start, m.end) for m in found]


def test_take_concat_and_kinds_keep_each_outputs_events_together() -> None:
    found, expired = found_by_numba(ROWS)
    both = Found.concat([found, expired])
    outputs = [*found, *expired]
    assert both.count(MATCH) == sum(type(m).__name__ == "Match" for m in outputs) == 3
    assert both.count(TIMEOUT) == sum(type(m).__name__ == "Timeout" for m in outputs) == 4
    assert [dict(m) for m in both.of_kind(TIMEOUT)] == [
        dict(m) for m in outputs if type(m).__name__ == "Timeout"]
    backwards = both.take(np.arange(len(both))[::-1])
    assert [dict(m) for m in backwards] == [dict(m) for m in [*found, *expired]][::-1]


def test_events_held_by_reference_make_the_table_their_taken_rows_make() -> None:
    """The numba engine hands out the events of its outputs as references into the
    batches it holds (taken when someone needs them): over several batches, concatenated
    and reordered, the table built from the references is the one built from the rows."""
    engine = make_engine(SMALL_THEN_LARGE, "numba")
    parts = []
    for batch in (ROWS[:2], ROWS[2:4], ROWS[4:]):
        events = Events(pa.Table.from_pylist(batch), Keys.of_values([r["card"] for r in batch]),
                        np.array([r["ts"] for r in batch], np.int64))
        parts.append(engine.process(events).found)
    parts.append(engine.advance(10**12))
    held = Found.concat(parts)
    assert held.by_reference and len(held.refs.sources) == 3
    for found in (held, held.take(np.arange(len(held))[::-1]), held.of_kind(TIMEOUT)):
        assert found.by_reference
        taken = Found(found.stages, kind=found.kind, keys=found.keys, start=found.start,
                      end=found.end, expiry=found.expiry, offsets=found.offsets,
                      stage=found.stage, rows=found.rows)
        assert not taken.by_reference
        for stages in (["small", "large"], ["large", "small", "large"]):
            assert match_table(found, key="card", stages=stages).equals(
                match_table(taken, key="card", stages=stages))
    reference = make_engine(SMALL_THEN_LARGE, "reference")
    want = [*reference.process(Events.of(ROWS, Keys.of_values([r["card"] for r in ROWS]),
                                         np.array([r["ts"] for r in ROWS], np.int64))).found,
            *reference.advance(10**12)]
    assert sorted((type(m).__name__, m.key, m.start, m.end, repr(dict(m))) for m in held) == (
        sorted((type(m).__name__, m.key, m.start, m.end, repr(dict(m))) for m in want))


def test_python_events_make_the_same_records_as_columns() -> None:
    """The reference engine's Match objects (Python events) and the numba engine's columns
    make the same rows, ids included."""
    matches = list(make_engine(SMALL_THEN_LARGE, "reference").process(Events.of(
        ROWS, Keys.of_values([r["card"] for r in ROWS]),
        np.array([r["ts"] for r in ROWS], np.int64))).found)
    found, _ = found_by_numba(ROWS)
    assert match_rows(matches, key="card", stages=["small", "large"]) == table_rows(
        match_table(found, key="card", stages=["small", "large"]))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_a_replay_writes_the_same_records_in_every_format(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / "cards.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), src)
    want = ListSink()
    sink = FileSink(tmp_path / f"out.{fmt}")
    job = Job(FileSource(src)).key_by("card").timestamps("ts").match(SMALL_THEN_LARGE)
    job.sink(want, kinds=("match", "timeout")).sink(sink, kinds=("match", "timeout")).run()
    back = sink.read()
    if fmt == "csv":  # plain text: nested values as JSON text
        import json

        back = [{**r, "small": json.loads(r["small"]), "large": json.loads(r["large"]),
                 "timeout_at": r["timeout_at"] or None} for r in back]
    assert back == want.records
    if fmt == "parquet":  # matched events as nested columns, not JSON text
        (part,) = sink.files()
        assert pa.types.is_list(pq.read_schema(part).field("small").type)


def test_a_match_across_batches_of_different_column_types_keeps_each_value_as_read(
        tmp_path: Path) -> None:
    """JSON lines typed batch by batch: amounts whole in the first batch (int64), with a
    fraction in the next (double).  A match taking events of both gets one column type for
    them, as a table must (1 reads 1.0), the same on both engines, with the same id."""
    src = tmp_path / "cards.jsonl"
    rows = [{"card": "c1", "amount": 1, "ts": 1_000}, {"card": "c1", "amount": 2, "ts": 2_000},
            {"card": "c1", "amount": 900.5, "ts": 3_000}, {"card": "c1", "amount": 3.5, "ts": 4_000}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = {}
    for engine in ("numba", "reference"):
        out = ListSink()
        (Job(FileSource(src, batch_size=2)).key_by("card").timestamps("ts")
         .match(SMALL_THEN_LARGE, engine=engine).sink(out).run())
        got[engine] = json.dumps(out.records, sort_keys=True)
    assert got["numba"] == got["reference"]
    assert '"amount": 2.0,' in got["numba"] and '"amount": 900.5' in got["numba"]


def test_arrow_events_become_the_dicts_arrow_makes() -> None:
    """Match objects hold each Arrow event as the dict ``Table.to_pylist`` makes: the same
    values, of the same Python types, nulls as None (a fast path converts plain columns
    through numpy)."""
    import datetime
    import decimal

    from cep.nfa.events import table_dicts

    table = pa.table({
        "i": [1, 2, None], "j": pa.array([1, 2, 3], pa.int8()), "u": pa.array([1, 2, 3], pa.uint64()),
        "f": [0.5, float("nan"), None], "g": [1.0, 2.0, 3.0], "b": [True, False, None],
        "c": [True, False, True], "s": ["x", None, "é"], "ls": pa.array(["a", "b", None], pa.large_string()),
        "t": pa.array([datetime.datetime(2026, 1, 1), None, datetime.datetime(2026, 1, 2)],
                      pa.timestamp("ms", tz="UTC")),
        "d": pa.array(["p", "q", "p"]).dictionary_encode(), "n": [[1], None, []],
        "m": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("2")], pa.decimal128(5, 2)),
        "y": [b"\x00", None, b"z"], "z": pa.nulls(3)})
    got, want = table_dicts(table), table.to_pylist()
    assert repr(got) == repr(want)  # NaN != NaN: compare the texts, types included
    assert [type(v).__name__ for v in got[0].values()] == [type(v).__name__ for v in want[0].values()]
    assert repr(table_dicts(table.slice(1, 1))) == repr(want[1:2])  # a slice: offsets
    assert table_dicts(pa.table({})) == [] and table_dicts(table.select([]).slice(0, 2)) == [{}, {}]


def test_a_number_key_and_the_same_digits_as_text_are_two_keys_across_batches() -> None:
    """Keys are looked up by number while they are all integers: a later text key "1"
    is still another key than 1 (and True, as in Python, the same as 1)."""
    from cep import Pattern, col
    from cep.runtime import IterableSource, Job, ListSink

    rows = [{"k": 1, "ts": 0, "v": 1}, {"k": 2, "ts": 1, "v": 0},
            {"k": "1", "ts": 2, "v": 0}, {"k": 1, "ts": 3, "v": 0}]
    p = Pattern.begin("a").where(col("v") == 1).next("b")
    for engine in ("numba", "reference"):
        out = ListSink()
        (Job(IterableSource(rows, batch_size=2)).key_by("k").timestamps("ts")
         .match(p, engine=engine).sink(out).run())
        assert [(r["k"], r["start"], r["end"]) for r in out.records] == [(1, 0, 3)], engine


#: three charges in a row, each larger than the one before; skip to next lets matches
#: share events
RISING = (Pattern.begin("a", skip=SkipStrategy.skip_to_next()).next("b")
          .where(col("amount") > last("a", "amount")).next("c")
          .where(col("amount") > last("b", "amount")))


def test_matches_over_a_table_read_as_the_reference_engines_and_share_the_events_they_share(
) -> None:
    rows = [{"card": "c1", "amount": float(a), "ts": t * 1_000}
            for t, a in enumerate([1, 2, 3, 4, 2, 5, 6, 7])]
    rows += [{"card": "c2", "amount": 9.0, "ts": 9_000}]
    table = pa.Table.from_pylist(rows)
    got = cep.match(table, RISING, key="card", time="ts", engine="numba")
    want = cep.match(rows, RISING, key="card", time="ts", engine="reference")
    assert [(m.key, m.start, m.end, dict(m)) for m in got] == [
        (m.key, m.start, m.end, dict(m)) for m in want]
    assert [m.start for m in got] == [0, 1_000, 4_000, 5_000]
    # the event at 2 s is in the first two matches: one dict, as a list of dicts would be
    assert got[0]["c"][0] is got[1]["b"][0]


def test_matches_of_stages_taking_several_events_keep_what_was_taken_last() -> None:
    pattern = (Pattern.begin("small").where(col("amount") < 5).times(2)
               .next("big").where(col("amount") > 500))
    rows = [{"card": "c1", "amount": a, "ts": t} for t, a in enumerate([1.0, 2.0, 900.0])]
    got = cep.match(pa.Table.from_pylist(rows), pattern, key="card", time="ts",
                    engine="numba", output="matches")
    assert [dict(m) for m in got] == [{"small": rows[:2], "big": rows[2:]}]


def test_results_kept_in_the_oldest_generation_leave_a_programs_frozen_objects_frozen() -> None:
    import gc

    from cep.gcpause import paused_gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc(promote=True):
            kept = [[i] for i in range(1_000)]
        # not unfrozen (that would leave none), and the block's objects not frozen (some
        # of the program's may have been freed meanwhile)
        assert 0 < gc.get_freeze_count() <= frozen and gc.isenabled() and len(kept) == 1_000
    finally:
        gc.unfreeze()


def test_a_match_of_one_event_per_stage_reads_as_one_made_by_hand() -> None:
    rows = [{"card": "c1", "amount": float(a), "ts": t} for t, a in enumerate([1, 2, 3])]
    (got,) = cep.match(pa.Table.from_pylist(rows), RISING, key="card", time="ts",
                       engine="numba")
    by_hand = cep.Match({"a": [rows[0]], "b": [rows[1]], "c": [rows[2]]}, 0, 2, key="c1")
    assert got == by_hand and dict(got) == dict(by_hand) and repr(got) == repr(by_hand)
    assert got.as_dict() == by_hand.as_dict() and got.events() == rows
    assert got["b"] == [rows[1]] and got["b"] is not got["b"]  # a new list each time
    assert list(got) == ["a", "b", "c"] and len(got) == 3 and "b" in got and "z" not in got
    with pytest.raises(KeyError):
        got["z"]


def test_a_pickled_or_copied_match_carries_its_own_events_alone() -> None:
    """The matches of one call share the list of their events: a pickle of one match held
    the events of all 1,999 (57 KB for two events)."""
    import copy
    import pickle

    rows = [{"card": "c1", "amount": float(a), "ts": t} for t, a in enumerate(range(2_000))]
    pair = Pattern.begin("a").next("b").where(col("amount") > 0)
    found = cep.match(pa.Table.from_pylist(rows), pair, key="card", time="ts", engine="numba")
    text = pickle.dumps(found[7])
    back = pickle.loads(text)
    assert back == found[7] and repr(back) == repr(found[7]) and len(text) < 1_000
    assert (back.key, back.start, back.end) == ("c1", 7, 8) and back["b"] == [rows[8]]
    assert copy.copy(found[7]) == found[7]
