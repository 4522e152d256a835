"""Odd but legitimate inputs through ``cep replay`` (:func:`cep.runtime.replay.replay`):
each input, the pattern, and what the job must write.  Found by an independent check of
the runtime on its own data; every spec failed before its fix."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cep
from cep import Pattern, col
from cep.patterns.fraud import card_testing
from cep.runtime import FileSink
from cep.runtime.replay import replay

T = 1_700_000_000_000
ENGINES = ["numba", "reference"]


def written(out: Path, kind: str = "m") -> list[dict]:
    return FileSink(out / kind).read()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_number_among_the_text_of_a_json_field_is_one_dead_letter(
        tmp_path: Path, engine: str) -> None:
    """One 7 among 10,000 types "x"/"y": that line is refused, the others match (the
    field was made a column of numbers, every text a dead letter)."""
    types: list[object] = ["x", "y"] * 5000
    types[1234] = 7
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"k": "a", "ts": T + i, "type": t}) + "\n"
                            for i, t in enumerate(types)))
    pattern = Pattern.begin("a").where(col("type") == "x").next("b").where(col("type") == "y")
    summary = replay(pattern, [data], key="k", time="ts", output=tmp_path / "out/m.jsonl",
                     engine=engine, progress=False)
    assert (summary.matches, summary.dead_letters) == (4999, 1)
    assert written(tmp_path / "out", "dead_letters")[0]["reason"] == (
        "field 'type' is 7: the pattern needs a string")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_sorted_replay_reads_text_times_among_integer_times(tmp_path: Path, suffix: str) -> None:
    """A time written as ISO text among epoch milliseconds is sorted by its time: with
    --sort nothing is late (it was sorted first, as if it had no time)."""
    rows = [{"k": "x", "ts": T + i * 1000, "v": i} for i in range(10)]
    rows[3]["ts"] = "2023-11-14T22:13:23Z"  # T + 3,000 ms
    data = tmp_path / f"in{suffix}"
    if suffix == ".jsonl":
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        data.write_text("k,ts,v\n" + "".join(f"{r['k']},{r['ts']},{r['v']}\n" for r in rows))
    every = Pattern.begin("a").where(col("v") >= 0)
    summary = replay(every, [data], key="k", time="ts", sort=True, batch_size=2,
                     output=tmp_path / "out/m.jsonl", progress=False)
    assert (summary.matches, summary.late) == (10, 0)


def test_a_json_list_where_a_number_is_read_is_a_dead_letter_on_the_numba_engine(
        tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"k": "x", "ts": T + i, "amount": a}) + "\n"
                            for i, a in enumerate([1.0, [2.0], 900.0])))
    pattern = Pattern.begin("a").where(col("amount") < 5).next("b").where(col("amount") > 500)
    summary = replay(pattern, [data], key="k", time="ts", output=tmp_path / "out/m.jsonl",
                     engine="numba", progress=False)
    assert (summary.matches, summary.dead_letters) == (1, 1)


def test_a_record_that_cannot_be_read_is_a_dead_letter_under_a_composite_key(
        tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("card,merchant,ts,amount\nc1,m1,1000,1.0\nc1,m1,2000\nc1,m1,3000,900.0\n")
    summary = replay(card_testing(), [data], key=["card", "merchant"], time="ts",
                     output=tmp_path / "out/m.jsonl", progress=False)
    assert summary.dead_letters == 1
    dead = written(tmp_path / "out", "dead_letters")[0]
    assert (dead["card"], dead["merchant"], dead["event"]) == (None, None, "c1,m1,2000")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_event_of_a_dead_letter_is_written_alike_whatever_shares_its_file(
        tmp_path: Path, suffix: str) -> None:
    """A line that is not JSON, alone in its part file or beside a dead letter whose event
    is an object: the same text (a resumed job cuts its part files elsewhere)."""
    every = Pattern.begin("a").where(col("v") >= 0)
    texts = {}
    for name, lines in {"alone": ['{"k": "x", "ts": 1, "v": 1}', '{"k": "x", "ts": 2, "v'],
                        "mixed": ['{"k": "x", "ts": 1, "v": 1}', '{"k": "x", "ts": 2, "v',
                                  '{"k": "x", "ts": null, "v": 3}']}.items():
        data = tmp_path / f"{name}.jsonl"
        data.write_text("\n".join(lines) + "\n")
        out = tmp_path / f"out_{name}"
        replay(every, [data], key="k", time="ts", output=out / f"m{suffix}", progress=False)
        texts[name] = [d["event"] for d in written(out, "dead_letters")
                       if "not JSON" in d["reason"]]
    assert texts["alone"] == texts["mixed"] == ['{"k": "x", "ts": 2, "v']


def test_sorted_replay_of_files_of_decimal_and_of_float_amounts_finds_both(
        tmp_path: Path) -> None:
    pq.write_table(pa.table({"card_id": ["c1"] * 4, "ts": [T + i * 1000 for i in range(4)],
                             "amount": [1.0, 2.0, 3.0, 900.0]}), tmp_path / "float.parquet")
    pq.write_table(pa.table({
        "card_id": ["c2"] * 4, "ts": [T + i * 1000 for i in range(4)],
        "amount": pa.array([Decimal(x) for x in ["1.00", "2.00", "3.00", "900.00"]],
                           pa.decimal128(10, 2))}), tmp_path / "dec.parquet")
    files = [tmp_path / "float.parquet", tmp_path / "dec.parquet"]
    for sort in (False, True):
        out = tmp_path / f"out{sort}"
        summary = replay(card_testing(), files, key="card_id", time="ts", sort=sort,
                         output=out / "m.jsonl", progress=False)
        assert summary.dead_letters == 0
        assert sorted(m["card_id"] for m in written(out)) == ["c1", "c2"]


def test_both_engines_write_the_events_of_an_unsigned_column_beyond_int64_as_they_were(
        tmp_path: Path) -> None:
    data = tmp_path / "t.parquet"
    pq.write_table(pa.table({
        "k": ["a", "a"], "ts": [T, T + 1], "v": [1, 2],
        "blob": pa.array([b"\x00\xff", b"x"], pa.binary()),
        "lst": pa.array([[1, 2], [3]], pa.list_(pa.int64())),
        "big": pa.array([2**64 - 1, 5], pa.uint64()),
    }), data)
    pattern = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    first = {}
    for engine in ENGINES:
        table = cep.match(data, pattern, key="k", time="ts", output="arrow", engine=engine)
        replay(pattern, [data], key="k", time="ts", output=tmp_path / engine / "m.parquet",
               engine=engine, progress=False)
        row = pq.read_table(tmp_path / engine / "m").to_pylist()[0]
        assert row["match_id"] == table["match_id"][0].as_py()
        first[engine] = (row["match_id"], row["a"][0])
    assert first["numba"] == first["reference"]
    assert first["numba"][1] == {"k": "a", "ts": T, "v": 1, "blob": b"\x00\xff", "lst": [1, 2],
                                 "big": 2**64 - 1}


def test_csv_integers_beyond_int64_stay_apart(tmp_path: Path) -> None:
    """Account numbers of 20 digits that differ in the last: two keys, not one float."""
    data = tmp_path / "a.csv"
    data.write_text("acct,ts,amount\n12345678901234567890,1700000000000,1.0\n"
                    "12345678901234567891,1700000001000,2.0\n"
                    "12345678901234567890,1700000002000,3.0\n"
                    "12345678901234567891,1700000003000,4.0\n")
    rising = (Pattern.begin("a").where(col("amount") > 0).next("b")
              .where(col("amount") > 0).next("c").where(col("amount") > 0))
    assert cep.match(data, rising, key="acct", time="ts") == []
    pairs = Pattern.begin("a").where(col("amount") > 0).next("b").where(col("amount") > 0)
    assert sorted(m.key for m in cep.match(data, pairs, key="acct", time="ts")) == [
        "12345678901234567890", "12345678901234567891"]
    summary = replay(pairs, [data], key="acct", time="ts", output=tmp_path / "out/m.jsonl",
                     progress=False)
    assert sorted(m["acct"] for m in written(tmp_path / "out")) == [
        "12345678901234567890", "12345678901234567891"]
    assert summary.matches == 2


def test_csv_integers_beyond_int64_after_the_first_block_stay_apart(tmp_path: Path) -> None:
    """pyarrow types a CSV column from the first 4 MB: integers there, and later account
    numbers beyond int64 (read value by value, as Python reads them), not floats."""
    data = tmp_path / "a.csv"
    filler = "".join(f"{1000 + i % 50},{1_699_999_000_000 + i},-1.0\n" for i in range(200_000))
    late = ("12345678901234567890,1700000000000,1.0\n12345678901234567891,1700000001000,2.0\n"
            "12345678901234567890,1700000002000,3.0\n12345678901234567891,1700000003000,4.0\n")
    data.write_text("acct,ts,amount\n" + filler + late)
    assert data.stat().st_size > 4_500_000
    pairs = Pattern.begin("a").where(col("amount") > 0).next("b").where(col("amount") > 0)
    out = tmp_path / "out"
    summary = replay(pairs, [data], key="acct", time="ts", output=out / "m.csv", progress=False)
    assert summary.matches == 2
    # and read back from the CSV file as they are, not as one float
    assert sorted(str(m["acct"]) for m in written(out)) == ["12345678901234567890",
                                                            "12345678901234567891"]


@pytest.mark.parametrize("engine", ENGINES)
def test_match_ids_do_not_depend_on_the_other_events_of_an_epoch(
        tmp_path: Path, engine: str) -> None:
    """A field no rule reads that is text for one key and an object or a number for
    another, and amounts that are floats in one file and decimals in another: each match's
    id is the same whether the other events share its epoch (its output table) or not."""
    a = [{"k": "a", "ts": T, "v": 1, "meta": "x"}, {"k": "a", "ts": T + 1, "v": 2, "meta": "y"}]
    b = [{"k": "b", "ts": T + 2, "v": 1, "meta": {"n": 1}},
         {"k": "b", "ts": T + 3, "v": 2, "meta": 5}]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in a + b))
    pair = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)

    def ids(files: list[Path], name: str, **how: object) -> dict[str, str]:
        replay(pair, files, key="k", time="ts", output=tmp_path / name / "m.jsonl",
               engine=engine, progress=False, **how)  # type: ignore[arg-type]
        return {m["k"]: m["match_id"] for m in written(tmp_path / name)}

    together = ids([data], "one")
    apart = ids([data], "epochs", batch_size=2, checkpoint_dir=tmp_path / "chk",
                checkpoint_every=2)
    assert together == apart and len(together) == 2
    pq.write_table(pa.table({"k": ["c1", "c1"], "ts": [T, T + 1], "v": [1, 2],
                             "amount": [1.5, 900.0]}), tmp_path / "float.parquet")
    pq.write_table(pa.table({"k": ["c2", "c2"], "ts": [T + 10, T + 11], "v": [1, 2],
                             "amount": pa.array([Decimal("1.50"), Decimal("900.00")],
                                                pa.decimal128(10, 2))}), tmp_path / "dec.parquet")
    files = [tmp_path / "float.parquet", tmp_path / "dec.parquet"]
    together = ids(files, "one2", files_in_order=True)
    apart = ids(files, "epochs2", files_in_order=True, checkpoint_dir=tmp_path / "chk2",
                checkpoint_every=2)
    assert together == apart and len(together) == 2


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_text_among_numbers_is_read_by_a_pattern_reading_the_field_as_text(
        tmp_path: Path, engine: str, suffix: str) -> None:
    """Types "x", "y" among numbers (most values numbers: a column of them, the text
    beside it): the pattern reading the field as text takes the text and refuses the
    numbers (it refused every row, the text as "in a column of numbers")."""
    values: list[object] = ["x", "y", 3, 4, 5]
    data = tmp_path / f"in{suffix}"
    if suffix == ".jsonl":
        data.write_text("".join(json.dumps({"k": "a", "ts": T + i, "type": v}) + "\n"
                                for i, v in enumerate(values)))
    else:
        data.write_text("k,ts,type\n" + "".join(f"a,{T + i},{v}\n" for i, v in enumerate(values)))
    pattern = Pattern.begin("a").where(col("type") == "x").next("b").where(col("type") == "y")
    summary = replay(pattern, [data], key="k", time="ts", output=tmp_path / "out/m.jsonl",
                     engine=engine, progress=False)
    assert (summary.matches, summary.dead_letters) == (1, 3)
    assert sorted(d["reason"] for d in written(tmp_path / "out", "dead_letters")) == [
        f"field 'type' is {n}: the pattern needs a string" for n in (3, 4, 5)]


# ------------------------------------------------ files read side by side (third check)
def _jsonl(path: Path, times: list[int]) -> Path:
    path.write_text("".join(json.dumps({"k": "x", "ts": t, "v": 1}) + "\n" for t in times))
    return path


@pytest.mark.parametrize("stop_after", [1, 2, 3, 4])
def test_a_replay_resumed_in_the_middle_of_a_round_reads_the_files_in_the_same_order(
        tmp_path: Path, stop_after: int) -> None:
    """Files read side by side, a batch of each in turn: a resumed job began the round at
    the first file again, whoever's turn it was, so b's 2500 came after a's 3000 moved
    the watermark past it, and was late (5 matches, not 6)."""
    inputs = [_jsonl(tmp_path / "a.jsonl", [1000, 2000, 3000]),
              _jsonl(tmp_path / "b.jsonl", [5000, 2500, 6000])]
    one = Pattern.begin("a").where(col("v") == 1)
    kw = {"key": "k", "time": "ts", "batch_size": 1, "progress": False, "checkpoint_every": 1}
    whole = replay(one, inputs, output=tmp_path / "whole" / "m.jsonl",
                   checkpoint_dir=tmp_path / "c1", **kw)
    batches = [0]

    def stop() -> bool:
        batches[0] += 1
        return batches[0] == stop_after

    first = replay(one, inputs, output=tmp_path / "again" / "m.jsonl",
                   checkpoint_dir=tmp_path / "c2", stop=stop, **kw)
    rest = replay(one, inputs, output=tmp_path / "again" / "m.jsonl",
                  checkpoint_dir=tmp_path / "c2", resume=True, **kw)
    assert first.stopped and not rest.stopped
    records = [sorted(json.dumps(r, sort_keys=True) for r in FileSink(tmp_path / run / "m").read())
               for run in ("whole", "again")]
    assert (whole.late, rest.late, len(records[0])) == (0, 0, 6)
    assert records[0] == records[1]


@pytest.mark.parametrize("other", ["empty.jsonl", "header.csv", "short.jsonl"])
def test_a_file_read_to_its_end_no_longer_holds_the_watermark(tmp_path: Path,
                                                               other: str) -> None:
    """An empty file, a CSV of a header alone, or a file that ended, beside a long one:
    its watermark stayed where its events stopped (or at the beginning of time), so every
    event of the long file waited in memory, and in every checkpoint, to the end."""
    extra = tmp_path / other
    if other == "short.jsonl":
        _jsonl(extra, [0, 1])
    else:
        extra.write_text("" if other == "empty.jsonl" else "k,ts,v\n")
    long = _jsonl(tmp_path / "long.jsonl", list(range(0, 60_000, 10)))
    batches = [0]

    def stop() -> bool:
        batches[0] += 1
        return batches[0] == 8

    s = replay(Pattern.begin("a").where(col("v") == 1), [extra, long], key="k", time="ts",
               output=tmp_path / "out" / "m.jsonl", batch_size=500, progress=False, stop=stop)
    assert s.last_event_time is not None and s.watermark == s.last_event_time - 1
    assert s.matches > 0


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize(("name", "text"), [
    ("currency.csv", "card_id,ts,amount\nc1,1,$1.00\nc1,2,\nc1,3,$900.00\n"),
    ("strnull.jsonl", '{"card_id": "c1", "ts": 1, "amount": "1.00"}\n'
                      '{"card_id": "c1", "ts": 2, "amount": null}\n'
                      '{"card_id": "c1", "ts": 3, "amount": "900.00"}\n'),
])
def test_text_amounts_with_an_empty_one_are_dead_letters_on_both_engines(
        tmp_path: Path, engine: str, name: str, text: str) -> None:
    """The texts were refused by the screening, and the column that was left, nulls of a
    text type, stopped the numba engine ('holds string values'), on every resume too."""
    path = tmp_path / name
    path.write_text(text)
    s = replay(card_testing(), [path], key="card_id", time="ts", engine=engine,
               output=tmp_path / "out" / "m.jsonl", progress=False)
    dead = list(FileSink(tmp_path / "out" / "dead_letters").read())
    assert (s.events_in, s.matches, len(dead)) == (3, 0, 2)
    assert all("amount" in d["reason"] for d in dead)


@pytest.mark.parametrize("value", ["inf", "-inf", "Inf", "1e400"])
def test_an_infinity_among_csv_integers_is_a_number(tmp_path: Path, value: str) -> None:
    """It was taken for an integer beyond int64, and the whole column was read as text:
    every row of it a dead letter ('the pattern needs a number')."""
    path = tmp_path / "inf.csv"
    path.write_text("card_id,ts,amount\n" + "".join(
        f"a,{t},{v}\n" for t, v in enumerate(["1", "2", "3", value, "4"])))
    s = replay(card_testing(), [path], key="card_id", time="ts",
               output=tmp_path / "out" / "m.jsonl", progress=False)
    assert (s.events_in, s.dead_letters) == (5, 0)
    assert s.matches == (1 if value in ("inf", "Inf", "1e400") else 0)


def test_a_replay_resumed_with_another_batch_size_is_refused(tmp_path: Path) -> None:
    """The watermark moves once per batch, so the batch size decides which events are
    late: resumed with batches of 20,000 instead of 100, the output matched neither run."""
    from cep.errors import ForeignCheckpointError

    path = _jsonl(tmp_path / "in.jsonl", list(range(0, 3_000, 3)))
    kw = {"key": "k", "time": "ts", "progress": False, "checkpoint_every": 100,
          "output": tmp_path / "out" / "m.jsonl", "checkpoint_dir": tmp_path / "chk"}
    one = Pattern.begin("a").where(col("v") == 1)
    replay(one, [path], batch_size=100, stop=lambda: True, **kw)
    with pytest.raises(ForeignCheckpointError, match="batch_size: 100 in the checkpoint, "
                                                     "20000 now"):
        replay(one, [path], batch_size=20_000, resume=True, **kw)
    assert replay(one, [path], batch_size=100, resume=True, **kw).matches > 0


def test_a_rule_keyed_by_a_field_the_events_lack_refuses_each_and_the_other_rule_runs(
        tmp_path: Path) -> None:
    """Every event is a dead letter of the rule keyed by merchant, naming the field (they
    were made a row at a time: 13x the job's time); the rule keyed by card finds its
    match."""
    path = tmp_path / "tx.parquet"
    pq.write_table(pa.table({"card_id": ["c1"] * 4, "ts": [1, 2, 3, 4],
                             "amount": [1.0, 2.0, 3.0, 900.0]}), path)
    rules = {"ct": (card_testing(), "card_id"),
             "by_merchant": (Pattern.begin("big").where(col("amount") > 500), "merchant")}
    s = replay(rules, [path], key=None, time="ts", output=tmp_path / "out" / "m.jsonl",
               progress=False)
    dead = list(FileSink(tmp_path / "out" / "dead_letters").read())
    assert s.matches == 1 and len(dead) == 4
    assert {(d["rule"], d["reason"]) for d in dead} == {
        ("by_merchant", "missing key field 'merchant'")}


@pytest.mark.parametrize("stop_after", [1, 2, 3])
def test_a_job_of_in_memory_partitions_resumed_mid_round_finds_what_one_pass_finds(
        tmp_path: Path, stop_after: int) -> None:
    """IterableSource took its partitions in turn from the first again after a resume, as
    FileSource did: the same events, another order, other late events."""
    from cep.runtime import IterableSource, Job, ListSink

    parts = ([{"k": "x", "ts": t, "v": 1} for t in (1000, 2000, 3000)],
             [{"k": "x", "ts": t, "v": 1} for t in (5000, 2500, 6000)])
    one = Pattern.begin("a").where(col("v") == 1)

    def run(directory: Path, resume: bool = False, stop: object = None) -> tuple[int, int]:
        out = ListSink()
        s = (Job(IterableSource(*parts, batch_size=1)).key_by("k").timestamps("ts")
             .match(one).sink(out).checkpoint(directory, every_events=1)
             .run(resume=resume, stop=stop))
        return s.late, len(out.records)

    batches = [0]

    def stop() -> bool:
        batches[0] += 1
        return batches[0] == stop_after

    assert run(tmp_path / "whole") == (0, 6)
    first = run(tmp_path / "again", stop=stop)
    rest = run(tmp_path / "again", resume=True)
    assert (rest[0], first[1] + rest[1]) == (0, 6)
