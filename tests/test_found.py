"""What engines find, as columns (cep.nfa.found.Found): the same matches as Match objects,
and as one Arrow table whose records are the records a job writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cep import Pattern, col
from cep.nfa.engine import make_engine
from cep.nfa.events import Events, Keys
from cep.nfa.found import MATCH, TIMEOUT, Found
from cep.runtime import FileSink, FileSource, Job, ListSink
from cep.runtime.job import match_record
from cep.runtime.sinks import table_records

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
    for part in (found, expired):
        assert table_records(part.table()) == [match_record(m) for m in part]
    table = expired.table()
    assert table.column_names == ["type", "key", "start", "end", "timeout", "events"]
    # one field per stage, each the list of events it took, as the input's columns
    assert table.schema.field("events").type == pa.struct([
        ("small", pa.list_(pa.struct([("card", pa.string()), ("amount", pa.float64()),
                                      ("ts", pa.int64())]))),
        ("large", pa.list_(pa.struct([("card", pa.string()), ("amount", pa.float64()),
                                      ("ts", pa.int64())])))])


def test_a_composite_key_is_json_text_in_the_table_and_a_list_in_records() -> None:
    rows = [{**r, "bank": "b"} for r in ROWS]
    found, _ = found_by_numba(rows, key=("card", "bank"))
    records = table_records(found.table())
    assert records == [match_record(m) | {"key": list(m.key)} for m in found]


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


def test_python_events_have_no_table_and_are_written_as_records() -> None:
    matches = list(make_engine(SMALL_THEN_LARGE, "reference").process(Events.of(
        ROWS, Keys.of_values([r["card"] for r in ROWS]),
        np.array([r["ts"] for r in ROWS], np.int64))).found)
    assert Found.of_matches(matches).table() is None


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

        back = [{**r, "events": json.loads(r["events"])} for r in back]
    assert [{k: v for k, v in r.items() if v is not None} for r in back] == want.records
    if fmt == "parquet":  # matched events as nested columns, not JSON text
        (part,) = sink.files()
        assert pa.types.is_struct(pq.read_schema(part).field("events").type)


def test_a_match_across_batches_of_different_column_types_keeps_each_value_as_read(
        tmp_path: Path) -> None:
    """JSON lines typed batch by batch: amounts whole in the first batch (int64), with a
    fraction in the next (double).  A match taking events of both reads them as they were
    (1, not 1.0) on both engines, in every output format."""
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
    assert '"amount": 1,' in got["numba"] and '"amount": 900.5' in got["numba"]
