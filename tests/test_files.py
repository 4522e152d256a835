"""cep.runtime.files: event files read as Arrow batches.

Each test writes a file and states the batches it must read as.  Reading must resume:
from the offsets after any batch (what a checkpoint stores), the rest of the file reads
exactly as it did in one pass; JSON lines read as Python's ``json`` reads each line; and
``FileSource`` gives the same records, positions and offsets as chunks.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import cep
import cep.runtime.files as files
from cep import Pattern, col
from cep.errors import InputError
from cep.nfa.stray_text import PREFIX
from cep.runtime import Job, ListSink
from cep.runtime.files import (
    FileBatch,
    file_format,
    list_files,
    read_batches,
    read_file,
    read_whole,
)
from cep.runtime.replay import replay
from cep.runtime.sources import (
    FileSource,
    Malformed,
    SortedFileSource,
    unparsable_rows_key,
)


# ----------------------------------------------------------------------------- helpers
def chunks_of_source(path: Path, offsets: dict[str, int], batch_size: int) -> list[tuple]:
    return [(c.events, c.positions, c.end_offset, c.other_offsets)
            for c in FileSource(path, batch_size=batch_size).read(offsets)]


def as_chunk(path: Path, batch: FileBatch) -> tuple:
    """A batch as (records, positions, offset, other offsets): good rows, then bad ones."""
    good = [(f"{path}:{r}", e) for r, e in zip(batch.rows.tolist(), batch.to_pylist(), strict=True)]
    bad = [(f"{path}:{label}", m) for label, m in batch.malformed]
    items = good + bad
    return ([e for _, e in items], [p for p, _ in items], batch.end_offset, batch.other_offsets)


def chunks_of_files(path: Path, offsets: dict[str, int], batch_size: int) -> list[tuple]:
    return [as_chunk(path, b) for b in read_batches(
        path, skip=offsets.get(str(path), 0),
        skip_unparsable=offsets.get(unparsable_rows_key(path), 0), batch_size=batch_size)]


def strict(value: Any) -> Any:
    """``value`` compared by type too (1 is not 1.0 nor True), dicts in any key order."""
    if isinstance(value, dict):
        return ("dict", sorted((k, strict(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [strict(v) for v in value])
    return (type(value).__name__, repr(value))


def json_lines_one_by_one(path: Path) -> list[tuple[str, Any]]:
    """The oracle for JSON lines: each non-blank line read by Python's ``json`` on its own
    (a byte-order mark at the start skipped), with its record index as position."""
    data = (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    data = data.removeprefix(b"\xef\xbb\xbf")
    lines = [(number, line) for number, line in enumerate(data.split(b"\n"), 1) if line.strip()]
    return [(f"{path}:{i}", files._classify(line, number))
            for i, (number, line) in enumerate(lines)]


def in_file_order(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return sorted(items, key=lambda item: int(item[0].rsplit(":", 1)[1]))


def assert_as_file_source(path: Path, batch_size: int = 65536, resume_every: int = 1) -> None:
    """The file read in batches: as FileSource's chunks; JSON lines as Python reads each
    line; and resumed from the offsets after any batch, the rest exactly as in one pass."""
    whole = chunks_of_files(path, {}, batch_size)
    assert strict(whole) == strict(chunks_of_source(path, {}, batch_size))
    items = [(p, e) for events, positions, _, _ in whole
             for p, e in zip(positions, events, strict=True)]
    if file_format(path) == "json":
        assert strict(in_file_order(items)) == strict(json_lines_one_by_one(path))
    for k in range(0, len(whole) - 1, resume_every):
        _, _, end, others = whole[k]
        done = sum(len(c[0]) for c in whole[:k + 1])
        offsets = {str(path): end, **(others or {})}
        rest = [(p, e) for ev, ps, _, _ in chunks_of_files(path, offsets, batch_size)
                for p, e in zip(ps, ev, strict=True)]
        assert strict(rest) == strict(items[done:])


def batches(path: Path, **kwargs: Any) -> list[FileBatch]:
    return list(read_batches(path, **kwargs))


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def cards(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Card transactions (amounts written with a fraction, as json.dumps writes floats)."""
    return [{"card_id": f"c{i % 7}", "ts": 1_700_000_000_000 + i, "amount": i + 0.25,
             "merchant": "Shell" if i % 3 else "Café Zürich"} for i in range(start, start + n)]


# ---------------------------------------------------------------------- names and lists
@pytest.mark.parametrize(("name", "fmt"), [
    ("day.parquet", "parquet"), ("day.pq", "parquet"), ("day.csv", "csv"), ("day.jsonl", "json"),
    ("day.ndjson", "json"), ("day.json", "json"), ("DAY.JSONL.GZ", "json"),
    ("day.csv.zst", "csv"), ("day.csv.bz2", "csv"), ("day.parquet.lz4", "parquet"),
    ("day.2024.csv", "csv"), ("day.txt", None), ("day.gz", None), ("day", None),
])
def test_file_format_from_suffix(name: str, fmt: str | None) -> None:
    assert file_format(name) == fmt
    assert file_format(Path(name)) == fmt


def test_list_files_as_sources_lists_them(tmp_path: Path) -> None:
    for name in ("b.csv", "a.jsonl.gz", "c.json", "notes.txt", "d.parquet"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    given = tmp_path / "notes.txt"
    assert list_files([tmp_path, given]) == [
        tmp_path / "a.jsonl.gz", tmp_path / "b.csv", tmp_path / "c.json", tmp_path / "d.parquet",
        given]
    with pytest.raises(InputError, match="missing.csv: no such file or directory"):
        list_files([tmp_path / "missing.csv"])
    with pytest.raises(InputError, match=r"no Parquet, CSV or JSONL files in \['.*sub'\]"):
        list_files([tmp_path / "sub"])


# ---------------------------------------------------------------------------- Parquet
def test_parquet_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "cards.parquet"
    pq.write_table(pa.Table.from_pylist(cards(2500)), path, row_group_size=1000)
    got = batches(path, batch_size=700)
    assert [b.rows.tolist() for b in got] == [list(range(0, 700)), list(range(700, 1400)),
                                              list(range(1400, 2100)), list(range(2100, 2500))]
    assert [b.end_offset for b in got] == [700, 1400, 2100, 2500]
    assert all(b.objects is None and not b.malformed for b in got)
    assert pa.concat_tables([b.table for b in got]).to_pylist() == cards(2500)
    resumed = batches(path, skip=1234, batch_size=700)
    assert resumed[0].rows[0] == 1234 and resumed[0].table.to_pylist()[0] == cards(2500)[1234]
    assert_as_file_source(path, batch_size=700)


# -------------------------------------------------------------------------------- CSV
def test_csv_bad_rows_are_malformed_and_counted_apart(tmp_path: Path) -> None:
    path = tmp_path / "cards.csv"
    path.write_text("card,amount\n1,2.5\n2,3.5,extra\n3,4.5\n4\n5,6.5\n")
    (batch,) = batches(path)
    assert batch.table.to_pylist() == [{"card": 1, "amount": 2.5}, {"card": 3, "amount": 4.5},
                                       {"card": 5, "amount": 6.5}]
    assert batch.rows.tolist() == [0, 2, 4]  # numbered among all rows, as JSON lines are
    assert batch.malformed == [
        ("line 3", Malformed("2,3.5,extra", "not a CSV row: 3 fields where the header has 2 "
                             "(line 3)")),
        ("line 5", Malformed("4", "not a CSV row: 1 fields where the header has 2 (line 5)"))]
    assert (batch.end_offset, batch.other_offsets) == (3, {unparsable_rows_key(path): 2})
    # resumed after both bad rows were emitted: they are not emitted again
    (again,) = batches(path, skip=1, skip_unparsable=2)
    assert again.rows.tolist() == [2, 4] and again.malformed == []
    assert_as_file_source(path)
    assert_as_file_source(path, batch_size=1)


def test_a_csv_rows_position_counts_the_unparsable_rows_before_it(tmp_path: Path) -> None:
    """Found by a check: a dead letter's position skipped the malformed lines before it
    (``c3`` on the file's 5th line said ``:1``), while JSON lines count every line."""
    path = tmp_path / "pos.csv"
    path.write_text('card_id,amount,ts\nc1,1.0\nc1,"2.0,7\nc2,1.0,8\nc3,abc,9\nc4,1.0,10\n')
    (batch,) = batches(path)
    assert [r["card_id"] for r in batch.to_pylist()] == ["c2", "c3", "c4"]
    assert batch.rows.tolist() == [2, 3, 4]  # the data rows after the header, from 0


def test_csv_text_in_a_number_column_reads_the_file_again(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow types columns from the first block: text after it re-reads the file with that
    column as text, converted back to numbers; a word among them is null in the column and
    kept in its companion (cep.nfa.stray_text), so the batch stays a table."""
    block = 256
    monkeypatch.setattr(files, "_CSV_BLOCK", block)
    rows = [f"{i},{i}," for i in range(60)]  # the first block: v int64, note all empty
    rows[45] = "45,x,"
    rows[50] = "50,50,abc"
    path = tmp_path / "t.csv"
    path.write_text("k,v,note\n" + "\n".join(rows) + "\n")
    got = batches(path, batch_size=10)
    assert got[0].table.schema.field("v").type == pa.int64()
    (with_x,) = [b for b in got if 45 in b.rows.tolist()]
    assert with_x.objects is None and with_x.table.schema.field("v").type == pa.int64()
    at = with_x.rows.tolist().index(45)
    assert with_x.table.column("v")[at].as_py() is None  # "x" is no int: null, and kept
    assert with_x.table.column(PREFIX + "v").to_pylist().count("x") == 1
    assert {"k": 45, "v": "x", "note": None} in with_x.to_pylist()
    assert {"k": 44, "v": 44, "note": None} in with_x.to_pylist()
    later = got[-1]
    assert later.table is not None and later.table.schema.field("v").type == pa.int64()
    assert later.table.schema.field("note").type == pa.string()
    assert {"k": 50, "v": 50, "note": "abc"} in [r for b in got for r in b.to_pylist()]
    assert np.array_equal(np.concatenate([b.rows for b in got]), np.arange(60))
    assert_as_file_source(path, batch_size=10)
    assert_as_file_source(path, batch_size=7)


def test_csv_bad_rows_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which batch an unparsable row comes with depends on how far pyarrow has parsed ahead
    (as in FileSource): each comes once, in file order, and every batch's offsets resume."""
    monkeypatch.setattr(files, "_CSV_BLOCK", 256)
    rows = [f"{i},{i}" for i in range(60)]
    rows[12], rows[40], rows[52] = "12", "40,40,40", "52,x,y"
    path = tmp_path / "t.csv"
    path.write_text("k,v\n" + "\n".join(rows) + "\n")
    got = batches(path, batch_size=10)
    assert [label for b in got for label, _ in b.malformed] == ["line 14", "line 42", "line 54"]
    good = [i for i in range(60) if i not in (12, 40, 52)]  # a row's number among all rows
    assert [r for b in got for r in b.rows.tolist()] == good
    key = unparsable_rows_key(path)
    for b in got:
        later = batches(path, skip=b.end_offset, skip_unparsable=b.other_offsets[key],
                        batch_size=10)
        seen = sum(len(x.malformed) for x in got[:got.index(b) + 1])
        assert [label for x in later for label, _ in x.malformed] == [
            "line 14", "line 42", "line 54"][seen:]
        assert [r for x in later for r in x.rows.tolist()] == good[b.end_offset:]


# ------------------------------------------------- CSV: quotes, empty text, words in numbers
#: card testing: three small charges in a row, then a big one
SMALL_THEN_BIG = (Pattern.begin("small").where(col("amount") < 5).times(3).consecutive()
                  .next("big").where(col("amount") > 500))


def card_rows(n: int) -> list[str]:
    """CSV lines ``card_id,ts,amount,note`` of one card: 1, 2, 3, then 600, over and over."""
    return [f"c1,{i},{(1, 2, 3, 600)[i % 4]},x" for i in range(n)]


def run_job(source: Any) -> tuple[Any, list[tuple[Any, ...]], list[tuple[str, str]]]:
    """The job's summary, its matches (key, first and last time) and its dead letters
    (position, reason)."""
    found, dead = ListSink(), ListSink()
    summary = (Job(source).key_by("card_id").timestamps("ts").match(SMALL_THEN_BIG)
               .sink(found).sink_dead_letters(dead).run())
    return (summary, [(m["card_id"], m["start"], m["end"]) for m in found.records],
            [(d["position"], d["reason"]) for d in dead.records])


UNCLOSED = "not a CSV row: a quoted value is not closed by the end of the line (line {n})"


@pytest.mark.parametrize("bad", [
    'c1,99,3,"oops',  # the header's number of fields
    'c1,99,"oops',  # one field too few
    'c1,9"9,3,"oops',  # a quote inside a value first: an even number of quotes
])
def test_csv_a_line_that_leaves_a_quote_open_is_refused_alone(tmp_path: Path, bad: str) -> None:
    """pyarrow lets a quoted value run on over line breaks: the lines after an unclosed
    quote were read into it up to the end of the block, every later row lost without a
    word (or, when the field count was off, swallowed by one dead letter).  A quoted value
    may not hold a line break: only the line that opens it is refused."""
    path = tmp_path / "q.csv"
    path.write_text("card_id,ts,amount,note\n"
                    'c1,1,2.5,"a, quoted ""note"""\n'
                    f"{bad}\n"
                    'c1,3,4.5,12" screen\n'
                    'c2,4,5.5,"x"\r\n')
    good = [{"card_id": "c1", "ts": 1, "amount": 2.5, "note": 'a, quoted "note"'},
            {"card_id": "c1", "ts": 3, "amount": 4.5, "note": '12" screen'},
            {"card_id": "c2", "ts": 4, "amount": 5.5, "note": "x"}]
    refused = [("line 3", Malformed(bad, UNCLOSED.format(n=3)))]
    for got in (batches(path), [read_file(path)]):
        assert [row for b in got for row in b.to_pylist()] == good
        assert [m for b in got for m in b.malformed] == refused
    assert_as_file_source(path, batch_size=1)


@pytest.mark.parametrize("name", ["q.csv", "q.csv.gz"])
def test_csv_an_unclosed_quote_costs_a_replay_one_dead_letter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The tester's file: 1,000 rows and an unclosed quote on line 102; the replay read
    100 events, no dead letter.  Blocks of 4 KB: the line and the rows after it in other
    blocks than the first."""
    monkeypatch.setattr(files, "_CSV_BLOCK", 4096)
    rows = card_rows(1000)
    clean = tmp_path / "clean.csv"
    clean.write_text("card_id,ts,amount,note\n" + "\n".join(rows) + "\n")
    rows.insert(100, 'c1,99,3,"oops')
    path = tmp_path / name
    text = ("card_id,ts,amount,note\n" + "\n".join(rows) + "\n").encode()
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    _, want, _ = run_job(FileSource(clean))
    for source in (FileSource(path, batch_size=64), SortedFileSource(path, time="ts")):
        summary, found, dead = run_job(source)
        assert (summary.events_in, summary.dead_letters) == (1001, 1)
        assert found == want
        assert dead == [(f"{path}:line 102", UNCLOSED.format(n=102))]


def test_csv_a_header_that_leaves_a_quote_open_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text('card_id,"ts\nc1,1\n')
    for read in (batches, read_file):
        with pytest.raises(InputError, match=r"h.csv: cannot read: the header \(line 1\) "
                                             r"opens a quoted value it does not close"):
            read(path)


def test_csv_malformed_rows_are_named_by_their_line_in_the_file(tmp_path: Path) -> None:
    """pyarrow numbers rows without the blank lines it skips: a dead letter after blank
    lines named a line above its own."""
    path = tmp_path / "b.csv"
    path.write_bytes(b'card_id,ts\r\n\r\nc1,1\r\n\r\n\r\nc2,"2\r\nc3,3,x\r\n\r\nc4,4\r\n')
    for got in (batches(path), [read_file(path)]):
        assert [row["card_id"] for b in got for row in b.to_pylist()] == ["c1", "c4"]
        assert [(label, m.reason) for b in got for label, m in b.malformed] == [
            ("line 6", UNCLOSED.format(n=6)),
            ("line 7", "not a CSV row: 3 fields where the header has 2 (line 7)")]


CSV_WITH_EMPTY_TEXT = 'card_id,ts,country,amount\nc1,1,,\n,2,DE,3.5\nc3,3,"",4.5\n'


def test_csv_an_empty_field_is_null_in_a_text_column_as_in_a_number_column(
        tmp_path: Path) -> None:
    """An empty text field read as "" (an empty number as null): an empty key was no
    missing key, and ``is_null()`` did not hold on it.  Quoted, "" is an empty text."""
    path = tmp_path / "e.csv"
    path.write_text(CSV_WITH_EMPTY_TEXT)
    rows = [{"card_id": "c1", "ts": 1, "country": None, "amount": None},
            {"card_id": None, "ts": 2, "country": "DE", "amount": 3.5},
            {"card_id": "c3", "ts": 3, "country": "", "amount": 4.5}]
    assert batches(path)[0].to_pylist() == rows
    assert read_file(path).to_pylist() == rows
    # an empty key is a dead letter, as a null one in Parquet
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "e.parquet")
    for source in (FileSource(path), FileSource(tmp_path / "e.parquet")):
        found, dead = ListSink(), ListSink()
        (Job(source).key_by("card_id").timestamps("ts").match(Pattern.begin("a"))
         .sink(found).sink_dead_letters(dead).run())
        assert [m["card_id"] for m in found.records] == ["c1", "c3"]
        assert [d["reason"] for d in dead.records] == ["key field 'card_id' is null"]


def test_csv_and_parquet_of_the_same_data_match_alike(tmp_path: Path) -> None:
    rows = [{"card_id": "c1", "ts": 1, "country": None}, {"card_id": "c2", "ts": 2,
                                                          "country": "DE"},
            {"card_id": "c3", "ts": 3, "country": ""}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    pcsv.write_csv(pa.Table.from_pylist(rows), tmp_path / "t.csv")  # null: empty; "": ""
    for where, keys in [(col("country").is_null(), ["c1"]), (col("country") == "", ["c3"]),
                        (col("country") == "DE", ["c2"])]:
        for path in (tmp_path / "t.parquet", tmp_path / "t.csv"):
            got = cep.match(path, Pattern.begin("a").where(where), key="card_id", time="ts")
            assert [m.key for m in got] == keys, (path.name, where)


@pytest.mark.parametrize("block", [1 << 22, 256], ids=["in-the-first-block", "after-it"])
def test_csv_a_word_in_a_column_of_numbers_is_a_dead_letter_wherever_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """In the block pyarrow types columns from (4 MB: any small file), one word among
    numbers made the column text and the whole replay was refused ("cannot compare
    string with numeric"); after that block it was one dead letter.  Now it is one dead
    letter wherever it is, and the other rows match as in the file without it."""
    monkeypatch.setattr(files, "_CSV_BLOCK", block)
    rows = card_rows(60)
    clean = tmp_path / "clean.csv"
    clean.write_text("card_id,ts,amount,note\n" + "\n".join(rows) + "\n")
    rows.insert(50, "c1,49,abc,x")
    path = tmp_path / "p.csv"
    path.write_text("card_id,ts,amount,note\n" + "\n".join(rows) + "\n")
    events = [e for chunk in FileSource(path).read({}) for e in chunk.events]
    assert [type(e["amount"]) for e in events] == [int] * 50 + [str] + [int] * 10
    _, want, _ = run_job(FileSource(clean))
    for source in (FileSource(path, batch_size=16), SortedFileSource(path, time="ts")):
        summary, found, dead = run_job(source)
        assert found == want
        assert dead == [(f"{path}:50", "field 'amount' is 'abc': the pattern needs a number")]


def test_csv_a_column_of_words_with_some_numbers_stays_text(tmp_path: Path) -> None:
    """Only a column most of whose values are numbers is read as numbers."""
    path = tmp_path / "w.csv"
    path.write_text("card_id,merchant,amount\nc1,m1,1.5\nc2,7,abc\nc3,m3,2\n9,m4,3\n")
    want = [{"card_id": "c1", "merchant": "m1", "amount": 1.5},
            {"card_id": "c2", "merchant": "7", "amount": "abc"},
            {"card_id": "c3", "merchant": "m3", "amount": 2.0},
            {"card_id": "9", "merchant": "m4", "amount": 3.0}]
    assert strict(batches(path)[0].to_pylist()) == strict(want)
    assert strict(read_file(path).to_pylist()) == strict(want)


#: two cards' charges, the amount of one of them "pending" (a word among numbers)
WORD_ROWS = [{"card_id": f"c{i % 2}", "ts": i, "amount": "pending" if i == 6 else (1, 2, 700)[i % 3],
              "merchant": f"m{i % 3}"} for i in range(24)]
WORD_AMOUNTS = "card_id,ts,amount,merchant\n" + "".join(
    f"{r['card_id']},{r['ts']},{r['amount']},{r['merchant']}\n" for r in WORD_ROWS)
#: reads the amount
BIG_TWICE = (Pattern.begin("a").where(col("amount") > 500)
             .followed_by("b").where(col("amount") > 500))
#: does not read it
MERCHANTS = (Pattern.begin("a").where(col("merchant") == "m0")
             .followed_by("b").where(col("merchant") == "m1"))


def rule_outputs(source: Any, engine: str) -> tuple[dict[str, list[Any]], list[Any]]:
    """Per rule of BIG_TWICE and MERCHANTS in one job, its matches (id, key, the first
    stage's amounts); and the dead letters (rule, position, reason)."""
    found, dead = ListSink(), ListSink()
    (Job(source).key_by("card_id").timestamps("ts")
     .match({"big": BIG_TWICE, "merchants": MERCHANTS}, engine=engine)
     .sink(found).sink_dead_letters(dead).run())
    out: dict[str, list[Any]] = {"big": [], "merchants": []}
    for m in found.records:
        out[m["rule"]].append((m["match_id"], m["card_id"], [e["amount"] for e in m["a"]]))
    return ({r: sorted(v) for r, v in out.items()},
            sorted((d["rule"], d["position"], d["reason"]) for d in dead.records))


def test_csv_a_word_among_numbers_keeps_one_schema_across_the_output_files(
        tmp_path: Path) -> None:
    """The batch holding the word wrote its amounts as JSON text and the others as
    numbers: the output directory could not be read as one dataset."""
    path = tmp_path / "w.csv"
    path.write_text(WORD_AMOUNTS)
    # Python conditions (the reference engine): a partial match holding the word's row
    # completes batches later, released with rows of no batch that had a companion column
    by_hand = (Pattern.begin("a").where(lambda e: e["merchant"] == "m0")
               .followed_by("b").where(lambda e: e["ts"] >= 15))
    later = tmp_path / "later.csv"  # the word in row 3: c1's "a", whose "b" is row 15
    later.write_text(WORD_AMOUNTS.replace(",pending,", ",1,").replace("c1,3,1,", "c1,3,pending,"))
    for rules, data in (({"big": BIG_TWICE, "merchants": MERCHANTS}, path),
                        ({"by_hand": by_hand}, later)):
        out = tmp_path / next(iter(rules)) / "matches.parquet"
        summary = replay(rules, [data], key="card_id", time="ts", output=out, batch_size=5,
                         checkpoint_dir=out.parent / "chk", checkpoint_every=5, progress=False)
        assert summary.rules.get("big", {"dead_letters": 1})["dead_letters"] == 1
        parts = sorted((out.parent / "matches").glob("part-*.parquet"))
        assert len(parts) > 1
        assert len({pq.read_schema(p) for p in parts}) == 1
        taken = pq.read_table(out.parent / "matches").to_pylist()
        assert len(taken) == summary.matches
        assert None in [e["amount"] for m in taken for e in m["a"]]  # the word's row


def decoded(found: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Rule outputs with JSON text amounts read back."""
    return {rule: [(i, key, [json.loads(a) if isinstance(a, str) else a for a in amounts])
                   for i, key, amounts in matches] for rule, matches in found.items()}


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_csv_a_word_among_numbers_keeps_the_batch_columnar_and_refuses_it_per_rule(
        tmp_path: Path, engine: str) -> None:
    """One word in a column of numbers made its batch Python dicts (a replay 3.4x slower)
    and every value of the column JSON text in that batch's outputs ("700.0"), so the
    part files of one output had different schemas.  The batch stays a table: the word is
    null in the column of numbers and kept beside it, so the rule reading the amount
    refuses that row alone (its dead letter quotes the word), the other rule takes it
    (amount null in its output, one type per column), and the ids are cep.match's."""
    path = tmp_path / "w.csv"
    path.write_text(WORD_AMOUNTS)
    (chunk,) = list(FileSource(path).read({}))
    assert isinstance(chunk.rows, pa.Table)
    assert chunk.rows.schema.field("amount").type == pa.int64()
    got, dead = rule_outputs(FileSource(path), engine)
    assert dead == [("big", f"{path}:6", "field 'amount' is 'pending': the pattern needs a "
                                         "number")]
    assert [amounts for _, _, amounts in got["big"]] == [[700]] * 6
    # the rule that took the word's row: null there, as output tables hold one type per column
    assert [None] in [amounts for _, _, amounts in got["merchants"]]
    for name, pattern in (("big", BIG_TWICE), ("merchants", MERCHANTS)):
        alone = ([] if name == "big" else
                 cep.match(path, pattern, key="card_id", time="ts", output="arrow").to_pylist())
        if alone:
            assert [i for i, _, _ in got[name]] == sorted(r["match_id"] for r in alone)
    with pytest.raises(InputError, match="row 6: field 'amount' is 'pending' \\(text\\)"):
        cep.match(path, BIG_TWICE, key="card_id", time="ts")
    # Python objects made of the rows hold the word, as the file does
    matches = cep.match(path, MERCHANTS, key="card_id", time="ts", engine=engine)
    assert "pending" in [e["amount"] for m in matches for e in m["a"]]


def test_jsonl_text_among_numbers_keeps_the_batch_columnar_as_csv_does(tmp_path: Path) -> None:
    """A JSON field that is a number on most lines and text on a few made the batch
    Python dicts (a replay 3.1-3.5x slower).  The lines holding text are set apart and read
    by Python, the rest by pyarrow, and the batch is one table as CSV's is: the same
    events as JSON lines give the same matches, ids and dead letters as the CSV file."""
    csv = tmp_path / "w.csv"
    csv.write_text(WORD_AMOUNTS)
    rows = WORD_ROWS
    path = tmp_path / "w.jsonl"
    path.write_bytes(b"\n".join(json.dumps(r).encode() for r in rows))
    for size in (24, 10):
        got = batches(path, batch_size=size)
        assert all(b.objects is None for b in got)
        assert [r for b in got for r in b.to_pylist()] == rows
    for engine in ("numba", "reference"):
        (want, dead), (found, dead_here) = rule_outputs(FileSource(csv), engine), rule_outputs(
            FileSource(path, batch_size=10), engine)
        # the same matches and ids; which batch's amounts are JSON text depends on batches
        assert decoded(found) == decoded(want)
        assert [d[2] for d in dead_here] == [d[2] for d in dead] and len(dead) == 1
    assert_as_file_source(path, batch_size=10)
    # text that is no rare exception: read by Python, a table all the same
    dense = b'{"v": 1}\n{"v": "x"}\n{"v": 2}\n{"v": "y"}\n{"v": 3}\n'
    path.write_bytes(dense)
    (batch,) = batches(path)
    assert batch.table is not None and batch.to_pylist() == [json.loads(t) for t in
                                                                dense.splitlines()]
    # text with numbers among it (most values text): no column of numbers, Python's dicts
    # (a rule reading text refuses the numbers, not the text)
    texts = b'{"v": 1}\n{"v": "x"}\n{"v": "y"}\n'
    path.write_bytes(texts)
    (batch,) = batches(path)
    assert batch.table is None and batch.objects == [json.loads(t) for t in texts.splitlines()]
    # beside a value of a third type: Python's dicts
    many = b"".join(b'{"v": %d}\n' % i for i in range(20)) + b'{"v": "x"}\n{"v": [1]}\n'
    path.write_bytes(many)
    (batch,) = batches(path)
    assert batch.table is None and batch.objects == [json.loads(t) for t in many.splitlines()]


#: a purchase at m1, later one at m2 (reads no number)
M1_THEN_M2 = (Pattern.begin("a").where(col("merchant") == "m1")
              .followed_by("b").where(col("merchant") == "m2"))
#: words in two columns, in different rows (an independent check's file)
TWO_COLUMNS = ("card,ts,amount,qty,merchant\nc2,1000,1.5,2,m1\nc1,2000,2.5,pending,m1\n"
               "c2,3000,3.5,1,m2\nc3,4000,unknown,3,m1\nc1,5000,5.5,4,m2\n")


def replayed(path: Path, pattern: Pattern, engine: str, tmp: Path, *extra: str
             ) -> tuple[list[str], set[Any]]:
    """The match ids of ``cep replay`` (batches of 1 and 2, checkpoints as ``extra``
    asks) and the schemas of its part files."""
    from cep.runtime.cli import main

    tmp.mkdir(parents=True, exist_ok=True)
    rule = tmp / "rule.json"
    rule.write_text(pattern.to_json())
    out = tmp / f"out-{engine}-{len(extra)}"
    assert main(["replay", str(rule), str(path), "--key", "card", "--time", "ts", "--engine",
                 engine, "--output", str(out / "m.parquet"), "--quiet", *extra]) == 0
    parts = sorted((out / "m").glob("part-*.parquet"))
    return (sorted(i for p in parts for i in pq.read_table(p).column("match_id").to_pylist()),
            {pq.read_schema(p) for p in parts})


def test_words_in_two_columns_keep_ids_and_schema_on_both_engines(tmp_path: Path) -> None:
    """The reference engine, rows of one batch each: a partial match held a word in qty
    when a later batch held one in amount, and every event's qty came out JSON text
    ("2", "\\"pending\\""), every id another than numba's and cep.match's."""
    path = tmp_path / "two.csv"
    path.write_text(TWO_COLUMNS)
    want = sorted(cep.match(path, M1_THEN_M2, key="card", time="ts",
                            output="arrow").column("match_id").to_pylist())
    assert len(want) == 2
    for engine in ("numba", "reference"):
        ids, schemas = replayed(path, M1_THEN_M2, engine, tmp_path, "--batch-size", "1")
        assert ids == want and len(schemas) == 1
        (schema,) = schemas
        assert schema.field("a").type.value_type.field("qty").type == pa.int64()


def test_jsonl_read_by_python_is_a_table_with_the_ids_of_the_same_csv(tmp_path: Path) -> None:
    """A true/false field with a "yes" among its values (or text on many lines) has its
    batch read by Python: it was dicts, every value of the field JSON text in outputs, ids
    other than the CSV's (even of matches in other batches, joined with it), and
    cep.match(output="arrow") refused it ("the matched events do not make a table")."""
    rows = [{"card": "c1", "ts": 1000 * (i + 1), "amount": 10.5 + i, "ok": i % 2 == 0,
             "merchant": "m1" if i % 2 == 0 else "m2"} for i in range(20)]
    rows[10]["ok"] = "yes"
    jsonl_path = tmp_path / "w.jsonl"
    jsonl_path.write_bytes(jsonl(rows))
    csv_path = tmp_path / "w.csv"
    csv_path.write_text("card,ts,amount,ok,merchant\n" + "".join(
        f"{r['card']},{r['ts']},{r['amount']},{str(r['ok']).lower()},{r['merchant']}\n"
        for r in rows))
    (batch,) = batches(jsonl_path)
    assert batch.table is not None and batch.to_pylist() == rows
    ids = {}
    for path in (csv_path, jsonl_path):
        for engine in ("numba", "reference"):
            ids[path.suffix, engine, "match"] = sorted(cep.match(
                path, M1_THEN_M2, key="card", time="ts", engine=engine,
                output="arrow").column("match_id").to_pylist())
            got, schemas = replayed(path, M1_THEN_M2, engine, tmp_path / path.suffix[1:],
                                    "--batch-size", "5", "--checkpoint-dir",
                                    str(tmp_path / f"ck{path.suffix}{engine}"),
                                    "--checkpoint-every", "5")
            ids[path.suffix, engine, "replay"] = got
            assert len(schemas) == 1, (path.name, engine)
    assert len({tuple(v) for v in ids.values()}) == 1 and len(ids[".csv", "numba", "match"]) == 10


def test_a_key_column_with_a_word_has_the_same_ids_and_type_whatever_the_checkpoints(
        tmp_path: Path) -> None:
    """Keys mixing a word and numbers were hashed as JSON text only in the checkpoint
    epochs that held both, and the key column was int64 in some part files, text in
    others."""
    path = tmp_path / "k.csv"
    path.write_text("card,ts,merchant\nunknown,1000,m1\nunknown,2000,m2\n7,3000,m1\n"
                    "7,4000,m2\n8,5000,m1\n8,6000,m2\n")
    want = sorted(cep.match(path, M1_THEN_M2, key="card", time="ts",
                            output="arrow").column("match_id").to_pylist())
    for engine in ("numba", "reference"):
        for extra in ((), ("--checkpoint-dir", str(tmp_path / f"ck-{engine}"),
                           "--checkpoint-every", "2")):
            ids, schemas = replayed(path, M1_THEN_M2, engine, tmp_path, "--batch-size", "2",
                                    *extra)
            assert ids == want
            assert {s.field("card").type for s in schemas} == {pa.string()}


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_csv_a_fraction_after_a_first_block_of_integers_is_a_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """pyarrow types a column from the file's first block: integers there and 2.5 later
    made 2.5 a word, a dead letter of every rule comparing the column ("field 'qty' is
    '2.5': the pattern needs a number").  It is a number, the column floats from there
    on (a word after it stays a word)."""
    monkeypatch.setattr(files, "_CSV_BLOCK", 256)
    rows = [f"c,{i},{i % 3}" for i in range(60)]
    rows[50], rows[55] = "c,50,2.5", "c,55,pending"
    path = tmp_path / "f.csv"
    path.write_text("card,ts,qty\n" + "\n".join(rows) + "\n")
    values = {r["ts"]: r["qty"] for b in batches(path, batch_size=10) for r in b.to_pylist()}
    assert (values[0], values[50], values[55]) == (0, 2.5, "pending")
    between = Pattern.begin("a").where((col("qty") > 2.4) & (col("qty") < 3))
    found, dead = ListSink(), ListSink()
    (Job(FileSource(path, batch_size=10)).key_by("card").timestamps("ts")
     .match(between, engine=engine).sink(found).sink_dead_letters(dead).run())
    assert [m["start"] for m in found.records] == [50]
    assert [d["reason"] for d in dead.records] == [
        "field 'qty' is 'pending': the pattern needs a number"]


def test_csv_spaces_around_a_number_do_not_make_it_a_word(tmp_path: Path) -> None:
    """pyarrow reads " 7 " in a column of numbers as 7; with a word elsewhere in the column
    it became a word of its own (a dead letter of a rule reading it)."""
    path = tmp_path / "q.csv"
    path.write_text("card,ts,qty\nc,1, 7 \nc,2,3\nc,3,pending\n")
    assert [r["qty"] for b in batches(path) for r in b.to_pylist()] == [7, 3, "pending"]


def test_cep_match_tables_of_dicts_with_a_word_among_numbers(tmp_path: Path) -> None:
    """A list of dicts whose field is a number or a word made no table ("the matched events
    do not make a table"); it is one, as the same rows from a CSV are, with their ids."""
    path = tmp_path / "w.csv"
    path.write_text(WORD_AMOUNTS)
    for engine in ("numba", "reference"):
        from_dicts = cep.match(WORD_ROWS, MERCHANTS, key="card_id", time="ts", engine=engine,
                               output="arrow")
        from_csv = cep.match(path, MERCHANTS, key="card_id", time="ts", engine=engine,
                             output="arrow")
        assert from_dicts.column("match_id") == from_csv.column("match_id")
        assert [None] in [[e["amount"] for e in a] for a in from_dicts.column("a").to_pylist()]


def test_csv_a_word_among_numbers_in_the_key_or_time_column(tmp_path: Path) -> None:
    """A key column of numbers holding a word keys that row by the word (it was null: a
    dead letter "key is null"); a time column of numbers holding one refuses that row with
    the word in its reason, as the row-by-row reader did."""
    path = tmp_path / "k.csv"
    path.write_text("card_id,ts,amount\n1,1,5\n1,2,5\nx9,3,5\nx9,4,5\n2,oops,5\n2,6,5\n")
    found, dead = ListSink(), ListSink()
    pair = Pattern.begin("a").next("b")
    (Job(FileSource(path)).key_by("card_id").timestamps("ts").match(pair)
     .sink(found).sink_dead_letters(dead).run())
    assert sorted(str(m["card_id"]) for m in found.records) == ["1", "x9"]
    ((reason,),) = [[d["reason"]] for d in dead.records]
    assert "'oops'" in reason and f"{path}:4" == dead.records[0]["position"]


# ------------------------------------------------------------------------- JSON lines
BAD_LINES = [
    (b"not json", "not JSON: Expecting value (line {n}, column 1)"),
    (b'{"card_id": "x", "ts": ', "not JSON: Expecting value (line {n}, column 24)"),
    (b"[1, 2]", "a JSON array, not an object (line {n})"),
    (b'"text"', "a JSON string, not an object (line {n})"),
    (b"42", "a JSON number, not an object (line {n})"),
    (b"null", "a JSON null, not an object (line {n})"),
    (b"true", "a JSON boolean, not an object (line {n})"),
    (b'{"card_id": "\xff"}', "not UTF-8: byte 0xff at column 14 (line {n})"),
    (b'{"a": ' + b"[" * 150 + b"]" * 150 + b"}",
     "not readable: JSON nested more than 100 levels deep (line {n})"),
    (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "not readable: JSON nested too deeply (line {n})"),
    (b'\xef\xbb\xbf{"card_id": "bom"}',
     "not JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (line {n}, column 1)"),
    (b'{"card_id": "a"}{"card_id": "b"}', "not JSON: Extra data (line {n}, column 17)"),
    (b'{"card_id": "a"} null {"card_id": "b"}', "not JSON: Extra data (line {n}, column 18)"),
    (b'{"card_id": "a"} x', "not JSON: Extra data (line {n}, column 18)"),
    (b'{"card_id": "a\x01"}', "not JSON: Invalid control character at (line {n}, column 15)"),
    (b'{"card_id": "a"}\x0c', "not JSON: Extra data (line {n}, column 17)"),
]


def test_jsonl_bad_lines_are_isolated_and_the_rest_stays_a_table(tmp_path: Path) -> None:
    good = cards(3000)
    lines = [json.dumps(r).encode() for r in good]
    at = [100 + 150 * k for k in range(len(BAD_LINES))]  # record indices of the bad lines
    for where, (line, _) in zip(at, BAD_LINES, strict=True):
        lines.insert(where, line)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    (batch,) = batches(path)
    assert batch.objects is None and batch.table.num_rows == 3000
    assert batch.table.to_pylist() == good
    assert batch.rows.tolist() == [i for i in range(3000 + len(at)) if i not in at]
    assert [(label, m.reason) for label, m in batch.malformed] == [
        (str(where), reason.format(n=where + 1))
        for where, (_, reason) in zip(at, BAD_LINES, strict=True)]
    assert batch.malformed[0][1].text == "not json"
    assert batch.end_offset == 3000 + len(at)
    assert_as_file_source(path)
    assert_as_file_source(path, batch_size=500, resume_every=2)


@pytest.mark.parametrize("every", [7, 20, 500])
def test_jsonl_many_bad_lines_in_one_batch(tmp_path: Path, every: int) -> None:
    """Lines that look like objects but are not JSON are found by pyarrow, one parse per
    failure; where they are dense, Python reads the rest of the batch: the good lines are
    one table either way."""
    lines = [b'{"v": }' if i % every == 3 else json.dumps({"v": i}).encode()
             for i in range(8000)]
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"\n".join(lines))
    (batch,) = batches(path)
    assert batch.table is not None and batch.table.column("v").to_pylist() == [
        i for i in range(8000) if i % every != 3]
    assert [label for label, _ in batch.malformed] == [
        str(i) for i in range(8000) if i % every == 3]
    assert_as_file_source(path)


def test_jsonl_blank_lines_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"v": 1}\r\n\r\n   \n\x0c\n  {"v": 2}  \r\n\n{"v": 3}')
    (batch,) = batches(path)
    assert batch.table.to_pylist() == [{"v": 1}, {"v": 2}, {"v": 3}]
    assert batch.rows.tolist() == [0, 1, 2]  # blank lines are not records
    assert batch.end_offset == 3
    other = tmp_path / "c.jsonl"
    other.write_bytes(b'\n\n{"v": 1}\n\nnope\n')
    (bad,) = batches(other)
    assert bad.malformed[0][0] == "1"  # the record index; the reason names the line
    assert bad.malformed[0][1].reason == "not JSON: Expecting value (line 5, column 1)"
    assert_as_file_source(path)
    assert_as_file_source(path, batch_size=1)


def test_jsonl_mixed_types_fall_back_to_dicts(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'{"v": 1}\n{"v": "x"}\nbad\n{"v": [1]}\n')
    (batch,) = batches(path)
    assert batch.table is None
    assert batch.objects == [{"v": 1}, {"v": "x"}, {"v": [1]}]
    assert batch.rows.tolist() == [0, 1, 3]
    assert [label for label, _ in batch.malformed] == ["2"]
    assert_as_file_source(path)


@pytest.mark.parametrize("text", [
    b'{"v": 1.5}\n{"v": 123456789012345678901234}\n',  # beyond int64: pyarrow makes it a float
    b'{"v": 1.5}\n{"v": 1234567890123456}\n',  # 16 digits among floats: not every float
    b'{"l": [[1.5], [2.5]]}\n',  # lists of lists of floats are not looked into
    b'{"v": NaN, "w": 1e400}\n',  # Python reads these, pyarrow not all
    b'{"v": "\\ud800"}\n',  # a lone surrogate: Python reads it, pyarrow not
    b'{"v": 1, "v": 2}\n',  # a key twice: Python keeps the last
])
def test_jsonl_values_only_python_reads_alike_fall_back_to_dicts(tmp_path: Path,
                                                                 text: bytes) -> None:
    path = tmp_path / "v.jsonl"
    path.write_bytes(text)
    (batch,) = batches(path)
    assert batch.table is None
    expected = [json.loads(line) for line in text.splitlines()]
    assert repr(batch.objects) == repr(expected)  # repr: 1 is not 1.0, nan is nan
    assert_as_file_source(path)


@pytest.mark.parametrize("text", [
    b'{"v": 1}\n{"v": 2.5}\n',
    b'{"v": 2.5, "s": {"x": 1}}\n{"v": 2.5, "s": {"x": 1.5}}\n',  # in a struct
    b'{"l": [1.5, 2]}\n',  # in a list
    b'{"v": 1.5}\n{"v": 123456789012345}\n',  # 15 digits: a float holds it
])
def test_jsonl_integers_among_floats_are_floats(tmp_path: Path, text: bytes) -> None:
    """JavaScript writes 5.0 as 5: a field of floats with whole numbers written so had its
    batch read by Python, a dict per event (a replay 13-16x slower).  They are floats in
    their batch, as pandas and Spark read them, of the values Python reads."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(text)
    (batch,) = batches(path)
    assert batch.table is not None
    assert batch.to_pylist() == [json.loads(line) for line in text.splitlines()]


def test_jsonl_floats_stay_a_table(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"v": 1.0, "l": [2.0, 3.5], "s": {"x": -0.0}}\n{"v": 2.5e3}\n')
    (batch,) = batches(path)
    assert batch.table is not None and batch.table.schema.field("v").type == pa.float64()
    assert batch.table.column("v").to_pylist() == [1.0, 2500.0]


def test_jsonl_iso_text_stays_text(tmp_path: Path) -> None:
    rows = [{"t": "2024-03-01T09:30:00+02:00", "d": "2024-03-01", "n": {"t": "2024-03-01 09:30:00"},
             "l": [{"t": "2024-03-02", "x": i}], "i": i} for i in range(5)]
    path = tmp_path / "iso.jsonl"
    path.write_bytes(jsonl(rows))
    got = batches(path, batch_size=2)  # later batches are parsed with the text types
    assert [r for b in got for r in b.to_pylist()] == rows
    for b in got:
        assert b.table is not None
        assert b.table.schema.field("t").type == pa.string()
        assert b.table.schema.field("n").type == pa.struct([("t", pa.string())])
    assert_as_file_source(path, batch_size=2)


def test_jsonl_text_types_of_one_batch_do_not_bind_the_next(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl([{"t": "2024-03-01", "v": 1}] * 3 + [{"t": 5, "v": 2}] * 3))
    first, second = batches(path, batch_size=3)
    assert first.table.column("t").to_pylist() == ["2024-03-01"] * 3
    assert second.table.schema.field("t").type == pa.int64()
    assert second.table.column("t").to_pylist() == [5] * 3
    assert_as_file_source(path, batch_size=3)


def test_jsonl_batches_across_reads_and_lines_longer_than_a_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    monkeypatch.setattr(files, "_READ", 64)
    rows = cards(40) + [{"card_id": "long" * 50, "ts": 1, "amount": 0.5, "merchant": "m"}]
    path = tmp_path / "small-reads.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl(rows[:20]) + b"\n\nbroken\n" + jsonl(rows[20:])[:-1])
    got = batches(path, batch_size=6)
    assert [r for b in got for r in b.to_pylist()] == rows
    assert [label for b in got for label, _ in b.malformed] == ["20"]
    assert all(b.table is not None for b in got)
    assert_as_file_source(path, batch_size=6)


def test_jsonl_resumes_after_a_checkpoint(tmp_path: Path) -> None:
    lines = [json.dumps(r).encode() for r in cards(50)]
    lines[17] = b"broken"
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n\n".join(lines))
    first = batches(path, skip=18, batch_size=10)[0]
    assert first.rows.tolist() == list(range(18, 28)) and first.malformed == []
    assert batches(path, skip=50) == []
    assert_as_file_source(path, batch_size=10)


def test_jsonl_missing_fields_read_as_null_in_a_table(tmp_path: Path) -> None:
    """A table has every column on every row: a field a line lacks is null there (Python's
    dict would lack the key)."""
    path = tmp_path / "sparse.jsonl"
    path.write_bytes(b'{"a": 1, "b": "x"}\n{"a": 2}\n{}\n')
    (batch,) = batches(path)
    assert batch.table.to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": None},
                                       {"a": None, "b": None}]


# ------------------------------------------------------------------------- compressed
def unnamed(batch: FileBatch) -> tuple:
    """A batch without its file's name (to compare a file with a copy of it)."""
    return (batch.to_pylist(), batch.rows.tolist(), batch.malformed, batch.end_offset,
            list((batch.other_offsets or {}).values()))


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_files_read_as_plain_ones(tmp_path: Path, suffix: str) -> None:
    table = pa.Table.from_pylist(cards(300))
    plain = {"parquet": tmp_path / "c.parquet", "csv": tmp_path / "c.csv",
             "json": tmp_path / "c.jsonl"}
    pq.write_table(table, plain["parquet"])
    pcsv.write_csv(table, plain["csv"])
    plain["json"].write_bytes(b"\xef\xbb\xbf" + jsonl(cards(300)) + b"broken\n")
    codec = "gzip" if suffix == ".gz" else "zstd"
    for path in plain.values():
        packed = path.with_name(path.name + suffix)
        with pa.output_stream(str(packed), compression=codec) as out:
            out.write(path.read_bytes())
        assert [unnamed(b) for b in batches(packed, batch_size=128)] == [
            unnamed(b) for b in batches(path, batch_size=128)]
        if suffix == ".gz":  # FileSource reads .gz and .zst alike
            assert_as_file_source(packed, batch_size=128)


# ------------------------------------------------------------------------------ whole
def test_read_whole_a_directory_of_mixed_formats(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(cards(3)), tmp_path / "a.parquet")
    (tmp_path / "b.csv").write_text("card_id,ts,amount,merchant\nc9,5,9.5,Shell\nbad\n")
    (tmp_path / "c.jsonl").write_bytes(jsonl(cards(2, start=10)) + b"[]\n")
    with gzip.open(tmp_path / "d.json.gz", "wb") as f:
        f.write(jsonl(cards(1, start=20)))
    (tmp_path / "notes.txt").write_text("not events")
    table, bad = read_whole(tmp_path)
    assert table.to_pylist() == [*cards(3), {"card_id": "c9", "ts": 5, "amount": 9.5,
                                             "merchant": "Shell"},
                                 *cards(2, start=10), *cards(1, start=20)]
    assert [(where, m.reason) for where, m in bad] == [
        (f"{tmp_path / 'b.csv'}:line 3", "not a CSV row: 1 fields where the header has 4 (line 3)"),
        (f"{tmp_path / 'c.jsonl'}:2", "a JSON array, not an object (line 3)")]


def test_read_whole_falls_back_to_dicts_when_columns_do_not_agree(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b'{"v": {"x": 1}}\n')
    (tmp_path / "b.jsonl").write_bytes(b'{"v": [1, 2]}\n')
    rows, bad = read_whole([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    assert rows == [{"v": {"x": 1}}, {"v": [1, 2]}] and bad == []
    # integers in one file and floats in another: one column of floats
    (tmp_path / "c.jsonl").write_bytes(b'{"v": 1}\n')
    (tmp_path / "d.jsonl").write_bytes(b'{"v": 1.5}\n')
    table, _ = read_whole([tmp_path / "c.jsonl", tmp_path / "d.jsonl"])
    assert table.column("v").to_pylist() == [1.0, 1.5]


def test_read_file_positions_for_a_sorting_source(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"v": 1}\nbad\n{"v": 2}\n' + jsonl([{"v": i} for i in range(3, 70000)]))
    whole = read_file(path)
    assert whole.table.num_rows == 69999 and whole.rows[:3].tolist() == [0, 2, 3]
    assert [label for label, _ in whole.malformed] == ["1"] and whole.end_offset == 70000
    # batches that cannot be one table: the whole file as dicts
    mixed = tmp_path / "m.jsonl"
    mixed.write_bytes(jsonl([{"v": 1}] * 65536) + b'{"v": "x"}\n')
    whole = read_file(mixed)
    assert whole.table is None and whole.objects[-1] == {"v": "x"} and len(whole.objects) == 65537
    # a whole CSV file is typed from all of it, as pyarrow reads it whole
    csv = tmp_path / "t.csv"
    csv.write_text("v\n" + "".join(f"{i}\n" for i in range(200_000)) + "1.5\n")
    assert read_file(csv).table.schema.field("v").type == pa.float64()


# ----------------------------------------------------------------------------- errors
def test_unreadable_files_raise_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"notes.txt: unknown file type '.txt'"):
        batches(tmp_path / "notes.txt")
    for name in ("missing.jsonl", "missing.csv", "missing.parquet"):
        with pytest.raises(InputError, match=f"{name}: cannot read"):
            batches(tmp_path / name)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="broken.parquet: cannot read"):
        batches(broken)
    with pytest.raises(InputError, match="broken.parquet: cannot read"):
        read_whole(broken)
    truncated = tmp_path / "t.jsonl.gz"
    truncated.write_bytes(gzip.compress(jsonl(cards(1000)))[:500])
    # broken off: no longer a failed file, its whole lines then a record saying where it
    # broke (zlib hands back all it decompressed before the break: a check found hundreds
    # of whole lines lost with each 64 KiB read Arrow's stream failed in)
    *read, last = batches(truncated)
    lines = sum(b.num_rows for b in read) + last.num_rows
    assert lines > 0 and last.malformed[-1][1].reason.startswith(
        f"the file breaks off after line {lines}")
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="e.csv: cannot read"):
        batches(empty)
    with pytest.raises(InputError, match="batch_size must be a whole number"):
        read_batches(empty, batch_size=0)


def test_good_files_are_never_dicts(tmp_path: Path) -> None:
    path = tmp_path / "cards.jsonl"
    path.write_bytes(jsonl(cards(20000)))
    got = batches(path, batch_size=4096)
    assert all(b.table is not None and b.objects is None for b in got)
    assert got[0].table.schema == pa.schema([("card_id", pa.string()), ("ts", pa.int64()),
                                             ("amount", pa.float64()), ("merchant", pa.string())])
    assert np.array_equal(np.concatenate([b.rows for b in got]), np.arange(20000))


# ------------------------------------------------------------------------- read ahead
def test_read_ahead_gives_the_chunks_in_order_and_raises_the_readers_error_in_place() -> None:
    from cep.runtime.sources import ReadAhead

    def chunks() -> Any:
        yield 1
        yield 2
        raise InputError("day2.csv: cannot read: truncated")

    got = []
    with pytest.raises(InputError, match="truncated"), ReadAhead(chunks()) as ahead:
        for chunk in ahead:
            got.append(chunk)
    assert got == [1, 2]


def test_read_ahead_stops_reading_when_the_consumer_stops() -> None:
    from cep.runtime.sources import ReadAhead

    read = []

    def chunks() -> Any:
        for i in range(1000):
            read.append(i)
            yield i

    with ReadAhead(chunks(), depth=2) as ahead:
        for chunk in ahead:
            if chunk == 3:
                break
    assert len(read) <= 3 + 1 + 2 + 1  # what was taken, the queue, one in the reader's hand


# ---------------------------------------------------------------- broken compressed files
def broken_download(path: Path, text: str) -> None:
    """``text`` gzip-compressed and cut short, as an interrupted download leaves it."""
    packed = gzip.compress(text.encode())
    path.write_bytes(packed[:len(packed) * 3 // 4])


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_compressed_file_that_breaks_off_gives_what_it_holds_then_says_so(
        tmp_path: Path, fmt: str) -> None:
    rows = cards(40_000)
    path = tmp_path / f"cards.{fmt}.gz"
    if fmt == "csv":
        broken_download(path, "card_id,ts,amount,merchant\n" + "".join(
            f"{r['card_id']},{r['ts']},{r['amount']},{r['merchant']}\n" for r in rows))
    else:
        broken_download(path, jsonl(rows).decode())
    got = batches(path, batch_size=5000)
    read = [row for b in got for row in b.to_pylist()]
    assert 0 < len(read) < len(rows)
    assert [r["ts"] for r in read] == [r["ts"] for r in rows[:len(read)]]  # whole rows only
    broken = [m for b in got for _, m in b.malformed]
    assert len(broken) == 1 and broken[0].reason.startswith(
        "the file breaks off after line ") and "Truncated compressed stream" in broken[0].reason
    # counted as a record: resumed after it, it is not said again
    last = got[-1]
    again = batches(path, skip=last.end_offset,
                    skip_unparsable=(last.other_offsets or {}).get(unparsable_rows_key(path), 0))
    assert [b for b in again if b.num_rows or b.malformed] == []


def test_a_cut_gzip_file_gives_every_whole_line_before_the_cut(tmp_path: Path) -> None:
    import zlib

    body = jsonl(cards(20_000))
    data = gzip.compress(body)[:-30]
    whole = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data).count(b"\n")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data)
    got = batches(path)
    assert sum(b.num_rows for b in got) == whole  # was ~860 lines short
    assert got[-1].malformed[-1][1].reason.startswith(f"the file breaks off after line {whole}")


def test_gzip_files_of_several_members_are_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl.gz"
    rows = cards(3000)
    path.write_bytes(gzip.compress(jsonl(rows[:1000])) + gzip.compress(jsonl(rows[1000:])))
    got = batches(path)
    assert sum(b.num_rows for b in got) == 3000 and not any(b.malformed for b in got)


def test_a_compressed_file_broken_before_its_first_line_names_the_break(tmp_path: Path) -> None:
    path = tmp_path / "cards.csv.gz"
    path.write_bytes(gzip.compress(b"card_id,ts\n" + b"c1,1\n" * 50_000)[:12])
    with pytest.raises(InputError, match="breaks off after line 0"):
        batches(path)


def test_a_broken_compressed_file_read_whole_gives_its_lines_and_says_where_it_broke(
        tmp_path: Path) -> None:
    """As SortedFileSource and cep.match read files: the same salvage, and cep.match (which
    has no dead-letter output) refuses the input naming the break."""
    import cep
    from cep import Pattern, col

    rows = cards(40_000)
    path = tmp_path / "cards.csv.gz"
    broken_download(path, "card_id,ts,amount,merchant\n" + "".join(
        f"{r['card_id']},{r['ts']},{r['amount']},{r['merchant']}\n" for r in rows))
    whole = read_file(path)
    assert 0 < whole.num_rows < len(rows)
    (where, record), = whole.malformed
    assert where == f"line {whole.num_rows + 2}" and "breaks off" in record.reason
    with pytest.raises(InputError, match=r"cards.csv.gz:line \d+: the file breaks off"):
        cep.match(path, Pattern.begin("a").where(col("amount") > 1), time="ts")


def test_csv_words_read_as_null_in_numbers_stay_text_in_a_column_of_text(
        tmp_path: Path) -> None:
    """``NA`` is Namibia in a column of country codes, and no number in a column of
    amounts: only an empty field is null in a text column."""
    path = tmp_path / "na.csv"
    path.write_text('card_id,ts,country,amount\nc1,1,NA,1.5\nc2,2,null,NA\nc3,3,,nan\n'
                    'c4,4,DE,\nc5,5,N/A,2\n')
    rows = [{"card_id": "c1", "ts": 1, "country": "NA", "amount": 1.5},
            {"card_id": "c2", "ts": 2, "country": "null", "amount": None},
            {"card_id": "c3", "ts": 3, "country": None, "amount": None},
            {"card_id": "c4", "ts": 4, "country": "DE", "amount": None},
            {"card_id": "c5", "ts": 5, "country": "N/A", "amount": 2.0}]
    for got in (batches(path)[0].to_pylist(), read_file(path).to_pylist()):
        assert [{**r, "amount": None if r["amount"] != r["amount"] else r["amount"]}
                for r in got] == rows
    found = cep.match(path, Pattern.begin("a").where(col("country") == "NA"), key="card_id",
                      time="ts")
    assert [m.key for m in found] == ["c1"]


def test_jsonl_a_resumed_replay_writes_what_an_uninterrupted_one_does(tmp_path: Path) -> None:
    """A batch Python read (a word in one field and a whole number among floats in
    another, on one line) took the schema of the batch before it for its outputs; a job
    resumed from a checkpoint did not know that batch: its records said "1.5" and "2"
    (JSON text) where the uninterrupted run said 1.5 and 2.0, with other ids."""
    lines = ([{"ts": 1000 + i, "card": "z", "amount": 1.5, "fee": 0.5} for i in range(8)]
             + [{"ts": 30000 + i, "card": "z", "amount": 1.5, "fee": 0.5} for i in range(8)]
             + [{"ts": 31000 + i, "card": "z", "amount": 2, "fee": 0.5} for i in range(8)])
    lines[19] = {"ts": 31003, "card": "z", "amount": "pending", "fee": 0}
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl(lines))
    every = Pattern.begin("a").where(col("fee") >= 0)

    def run(name: str, stop_after: int | None) -> list[str]:
        out, ck = tmp_path / name / "m.jsonl", tmp_path / name / "ck"
        for stop in (stop_after, None) if stop_after else (None,):
            calls = [0]

            def stopping(stop: int | None = stop, calls: list[int] = calls) -> bool:
                calls[0] += 1
                return stop is not None and calls[0] >= stop
            replay(every, [path], key="card", time="ts", output=out, batch_size=8,
                   checkpoint_dir=ck, checkpoint_every=8, stop=stopping, progress=False,
                   resume=(ck / "manifest.json").exists() or any(ck.glob("chk-*")))
        return sorted(line for p in sorted((out.parent / "m").glob("part-*.jsonl"))
                      for line in p.read_text().splitlines())

    whole = run("whole", None)
    assert len(whole) == 24
    for stop in (2, 3):
        assert run(f"stopped-{stop}", stop) == whole


def test_jsonl_columns_keep_the_order_of_the_records_fields(tmp_path: Path) -> None:
    """Text that looks like a time is read as text, and stays in its place (it moved to
    the front, before the fields the record gives first)."""
    path = tmp_path / "e.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"user": "ann", "ts": "2024-03-04T09:00:00Z", "kind": "a"},
        {"user": "bob", "ts": "2024-03-04T09:00:01Z", "kind": "b", "extra": 1}]))
    table, bad = files.read_whole([path])
    assert table.column_names == ["user", "ts", "kind", "extra"] and not bad
    assert table.column("ts").type == pa.string()
