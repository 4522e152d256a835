"""Specification: no record or file stops or corrupts a replay (#17).

Found by crash, fuzz and tamper runs through ``cep replay``:

- poison rows: a JSONL line nested thousands of levels deep raised RecursionError in the
  source and stopped the job, and ``--resume`` crashed again on the same row.  Every
  line that cannot be an event - not JSON, nested too deeply, not a JSON object, not
  UTF-8 - is now a dead letter with its reason and line, and the file goes on; offsets
  count it like any other line, so a resume starts after it.  A CSV row with the wrong
  number of fields, or text in a column pyarrow typed as numbers from the file's first
  block, no longer stops the file either;
- a UTF-8 byte-order mark at the start of a JSONL file cost its first record;
- one far-future time (the year 9999) moved the watermark there and made every later
  event late: the far-future guard (``Job.max_event_time_ahead``, ``cep replay
  --max-ahead``, on by default for replays) makes it a dead letter, across checkpoints;
- replaying again into an output directory left the earlier run's part files next to
  the new ones (46,345 duplicates on read back): such a directory is now refused unless
  ``--resume`` continues that run or ``--overwrite`` replaces it.

The fuzz test at the end mixes the poison of #17 into ordinary card transactions at
random places and replays them with checkpoints on both engines, stopped part way and
resumed: every poison line is a dead letter and the matches are the clean file's.
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import taken

import cep.runtime.files as files
from cep import Pattern, SkipStrategy, col
from cep.errors import CEPError
from cep.runtime import FileSource, IterableSource, Job, ListSink, SortedFileSource, replay
from cep.runtime.job import FieldWarning
from cep.runtime.replay import main as replay_main
from cep.runtime.sinks import FileSink

EXPR = (Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
        .where(col("amount") < 5).times_or_more(3).consecutive().greedy()
        .next("big").where(col("amount") > 500).within(timedelta(minutes=10)))

LAMBDA_RULES = '''\
from datetime import timedelta

from cep import Pattern, SkipStrategy

# card testing with Python conditions: the reference engine
rule = (
    Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
    .where(lambda e: e["amount"] < 5).times_or_more(3).consecutive().greedy()
    .next("big").where(lambda e: e["amount"] > 500)
    .within(timedelta(minutes=10))
)
'''

T0 = 1_709_251_200_000  # 2024-03-01


def transactions(n: int, seed: int, cards: int = 2) -> list[dict[str, Any]]:
    """Card transactions in time order: runs of small charges, some followed by a big one."""
    rng = random.Random(seed)
    rows, ts = [], T0
    for i in range(n):
        ts += rng.randint(1_000, 30_000)
        kind = rng.random()
        amount = (round(rng.uniform(0.5, 4.9), 2) if kind < 0.6 else
                  round(rng.uniform(600, 999), 2) if kind < 0.8 else round(rng.uniform(10, 90), 2))
        rows.append({"card_id": f"c{rng.randint(1, cards)}", "ts": ts, "amount": amount, "i": i})
    return rows


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def run_job(source: Any, *, engine: str = "numba", guard: Any = None, chk: Path | None = None,
            stop: Any = None, resume: bool = False) -> tuple[Any, ListSink, ListSink, ListSink]:
    found, late, dead = ListSink(), ListSink(), ListSink()
    pattern = EXPR if engine == "numba" else _lambda_pattern()
    job = (Job(source).key_by("card_id").timestamps("ts").match(pattern, engine=engine)
           .max_event_time_ahead(guard).sink(found).sink_late(late).sink_dead_letters(dead))
    if chk is not None:
        job = job.checkpoint(chk, every_events=1)
    summary = job.run(stop=stop, resume=resume)
    return summary, found, late, dead


def _lambda_pattern() -> Pattern:
    scope: dict[str, Any] = {}
    exec(LAMBDA_RULES, scope)  # the rule file's own text, as the fuzz test loads it
    return scope["rule"]


def spans(records: list[dict[str, Any]]) -> Counter[tuple[Any, int, int]]:
    return Counter((r["card_id"], r["start"], r["end"]) for r in records)


ROWS = transactions(60, seed=3)


@pytest.fixture(scope="module")
def clean_spans() -> Counter[tuple[Any, int, int]]:
    _, found, _, _ = run_job(IterableSource(ROWS))
    assert found.records, "the transactions must hold matches"
    return spans(found.records)


def poisoned_file(path: Path, lines: list[bytes], at: list[int], *, bom: bool = False) -> Path:
    """ROWS as JSONL with ``lines`` inserted before the rows numbered ``at``."""
    good = jsonl(ROWS).splitlines(keepends=True)
    for line, i in sorted(zip(lines, at, strict=True), key=lambda p: -p[1]):
        good.insert(i, line.rstrip(b"\n") + b"\n")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + b"".join(good))
    return path


# --------------------------------------------------------------------- poison rows
def test_lines_that_are_not_json_are_dead_letters_and_the_file_goes_on(
        tmp_path: Path, clean_spans: Counter[Any]) -> None:
    bad = [b"{not json", b'{"card_id": "c1", "ts": ', b"}", b"\x00\x00"]
    src = poisoned_file(tmp_path / "p.jsonl", bad, [5, 17, 30, 59])
    summary, found, late, dead = run_job(FileSource(src))
    assert spans(found.records) == clean_spans and not late.records
    assert [d["reason"].split(":")[0] for d in dead.records] == ["not JSON"] * 4
    assert [d["position"] for d in dead.records] == [f"{src}:5", f"{src}:18", f"{src}:32",
                                                     f"{src}:62"]
    assert "(line 6, column 2)" in dead.records[0]["reason"]
    assert dead.records[1]["event"] == '{"card_id": "c1", "ts": '
    assert summary.events_in == 64 and summary.dead_letters == 4


UNREADABLE = {  # a file of each kind that cannot be read at all
    "empty.csv": b"",
    "header_without_newline.csv": b"card_id,amount,ts",
    "empty.parquet": b"",
    "text.parquet": b"not parquet",
    "not_gzip.csv.gz": b"card_id,amount,ts\n",
    "twice.csv": b"card_id,amount,ts,amount\nc1,1.0,1700000000000,1\n",
}


@pytest.mark.parametrize("source", ["files", "sorted"])
@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_that_cannot_be_read_is_a_dead_letter_and_the_others_go_on(
        tmp_path: Path, clean_spans: Counter[Any], name: str, source: str) -> None:
    """Found by a replay check: one such file among good ones stopped the whole replay
    (exit 2, nothing written), and a resume met it again."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_good.jsonl").write_bytes(jsonl(ROWS))
    (folder / name).write_bytes(UNREADABLE[name])
    made = (FileSource(folder) if source == "files"
            else SortedFileSource(folder, time="ts"))
    summary, found, late, dead = run_job(made)
    assert spans(found.records) == clean_spans and not late.records
    [letter] = dead.records
    assert letter["position"] == f"{folder / name}:file"
    assert letter["reason"].startswith(f"{folder / name}: cannot read")
    assert summary.dead_letters == 1


def test_a_first_file_without_the_key_field_is_named_when_it_stops_the_job(
        tmp_path: Path) -> None:
    """A whole first batch without the key field is taken for a misspelt field and stops
    the job (dead-lettering everything would let it 'succeed' with nothing matched); when
    one odd file was read first, the message names it (a check found it said only
    "missing key field 'card_id'")."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_nokey.jsonl").write_text('{"amount": 1.0, "ts": 1700000000000}\n')
    (folder / "b.jsonl").write_bytes(jsonl(ROWS))
    with pytest.raises(CEPError, match=r"missing key field 'card_id' in any event of the "
                       r"first batch read, from .*a_nokey\.jsonl \(a file that alone"):
        run_job(FileSource(folder))


def test_a_resumed_job_does_not_read_an_unreadable_file_again(tmp_path: Path) -> None:
    folder, chk = tmp_path / "in", tmp_path / "chk"
    folder.mkdir()
    (folder / "a.parquet").write_bytes(b"not parquet")
    (folder / "b.jsonl").write_bytes(jsonl(ROWS))
    dead = ListSink()
    polls = iter(range(1000))

    def job() -> Job:
        return (Job(FileSource(folder, batch_size=10)).key_by("card_id").timestamps("ts")
                .match(EXPR).sink(dead, kinds=("dead_letter",))
                .checkpoint(chk, every_events=10))

    assert job().run(stop=lambda: next(polls) == 3).stopped
    job().run(resume=True)
    assert [d["position"] for d in dead.records] == [f"{folder / 'a.parquet'}:file"]


@pytest.mark.parametrize("depth", [100_000, 150])
def test_a_deeply_nested_line_is_a_dead_letter_and_resume_goes_past_it(
        tmp_path: Path, depth: int, clean_spans: Counter[Any]) -> None:
    """100,000 levels raised RecursionError in the source, and again on every resume; 150
    parse, but would exhaust the recursion of the sinks and checkpoints later."""
    line = b'{"card_id": "c1", "ts": 1, "amount": ' + b"[" * depth + b"]" * depth + b"}"
    src = poisoned_file(tmp_path / "deep.jsonl", [line], [20])
    _, found, _, dead = run_job(FileSource(src))
    assert spans(found.records) == clean_spans
    [letter] = dead.records
    assert letter["reason"].startswith("not readable: JSON nested") and "(line 21)" in \
        letter["reason"] and letter["position"] == f"{src}:20"
    # checkpointed after every event, stopped right after the poison line, resumed
    chk, calls = tmp_path / "chk", [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] == 3

    first = run_job(FileSource(src, batch_size=10), chk=chk, stop=stop)
    assert first[0].stopped and first[0].dead_letters == 1
    second = run_job(FileSource(src, batch_size=10), chk=chk, resume=True)
    assert second[0].dead_letters == 1  # counted once, in the restored summary
    assert spans(first[1].records + second[1].records) == clean_spans
    assert not second[3].records  # the poison line is not read again


@pytest.mark.parametrize(("line", "kind"), [
    (b"[1, 2, 3]", "array"), (b"42", "number"), (b'"text"', "string"), (b"null", "null"),
    (b"true", "boolean")])
def test_a_line_that_is_not_a_json_object_is_a_dead_letter(
        tmp_path: Path, line: bytes, kind: str, clean_spans: Counter[Any]) -> None:
    src = poisoned_file(tmp_path / "p.jsonl", [line], [12])
    _, found, _, dead = run_job(FileSource(src))
    assert spans(found.records) == clean_spans
    assert [d["reason"] for d in dead.records] == [f"a JSON {kind}, not an object (line 13)"]
    assert dead.records[0]["event"] == line.decode()


def test_a_line_that_is_not_utf8_is_a_dead_letter_not_a_silently_altered_event(
        tmp_path: Path, clean_spans: Counter[Any]) -> None:
    """Read with errors="replace", the bad bytes became U+FFFD inside the event."""
    line = b'{"card_id": "c\xff\xfe", "ts": ' + str(T0 + 1).encode() + b', "amount": 1}'
    src = poisoned_file(tmp_path / "p.jsonl", [line], [40])
    _, found, _, dead = run_job(FileSource(src))
    assert spans(found.records) == clean_spans
    [letter] = dead.records
    assert letter["reason"] == "not UTF-8: byte 0xff at column 15 (line 41)"
    assert "\ufffd" in letter["event"]  # shown as far as it can be


@pytest.mark.parametrize("name", ["bom.jsonl", "bom.jsonl.gz"])
def test_a_byte_order_mark_does_not_cost_the_first_record(tmp_path: Path, name: str) -> None:
    rows = [{"card_id": "c1", "ts": T0 + i, "amount": a} for i, a in enumerate([1, 2, 3, 900])]
    data = b"\xef\xbb\xbf" + jsonl(rows)
    src = tmp_path / name
    src.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    for source in (FileSource(src), SortedFileSource(src, time="ts")):
        summary, found, _, dead = run_job(source)
        assert (summary.events_in, summary.matches, dead.records) == (4, 1, [])
        assert len(taken(found.records[0])["small"]) == 3


def test_a_csv_row_with_the_wrong_number_of_fields_is_a_dead_letter(
        tmp_path: Path, clean_spans: Counter[Any]) -> None:
    header, *lines = ["card_id,ts,amount,i", *(
        f"{r['card_id']},{r['ts']},{r['amount']},{r['i']}" for r in ROWS)]
    lines.insert(10, "c1,1,2")
    lines.insert(30, "c1,1,2,3,4,5")
    src = tmp_path / "p.csv"
    src.write_text("\n".join([header, *lines]) + "\n")
    want = None
    for source in (FileSource(src, batch_size=7), SortedFileSource(src, time="ts")):
        summary, found, _, dead = run_job(source)
        assert spans(found.records) == clean_spans
        got = [(d["position"], d["reason"], d["event"]) for d in dead.records]
        assert got == [
            (f"{src}:line 12", "not a CSV row: 3 fields where the header has 4 (line 12)",
             "c1,1,2"),
            (f"{src}:line 32", "not a CSV row: 6 fields where the header has 4 (line 32)",
             "c1,1,2,3,4,5")]
        want = want or got
    # stopped after every number of batches and resumed: each bad row once, nothing lost
    for stop_after in range(1, 11):
        chk, calls = tmp_path / f"chk-{stop_after}", [0]

        def stop(calls: list[int] = calls, n: int = stop_after) -> bool:
            calls[0] += 1
            return calls[0] >= n

        first = run_job(FileSource(src, batch_size=7), chk=chk, stop=stop)
        second = run_job(FileSource(src, batch_size=7), chk=chk, resume=True)
        assert spans(first[1].records + second[1].records) == clean_spans, stop_after
        assert [d["position"] for d in first[3].records + second[3].records] == [
            p for p, _, _ in want], stop_after


def test_text_in_a_csv_column_typed_from_the_first_block_does_not_stop_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_spans: Counter[Any]) -> None:
    """pyarrow types each column from the file's first block (4 MB): a text value after
    it failed the whole file with a conversion error."""
    monkeypatch.setattr(files, "_CSV_BLOCK", 256)  # so that the first block is small
    lines = [f"{r['card_id']},{r['ts']},{r['amount']},{r['i']}" for r in ROWS]
    lines.insert(50, f"c1,{ROWS[49]['ts']},lots,x")
    src = tmp_path / "p.csv"
    src.write_text("\n".join(["card_id,ts,amount,i", *lines]) + "\n")
    events = [e for chunk in FileSource(src).read({}) for e in chunk.events]
    assert [type(e["amount"]) for e in events] == [float] * 50 + [str] + [float] * 10
    assert all(type(e["i"]) is int for e in events[:50] + events[51:])  # converted back
    summary, found, _, dead = run_job(FileSource(src))
    assert spans(found.records) == clean_spans
    assert [d["reason"] for d in dead.records] == [
        "field 'amount' is 'lots': the pattern needs a number"]


# ----------------------------------------------------------------- far-future guard
FAR = {"card_id": "c2", "ts": "9999-12-31T00:00:00", "amount": 1}


def with_far_future(at: int) -> list[dict[str, Any]]:
    return ROWS[:at] + [dict(FAR)] + ROWS[at:]


def test_without_the_guard_one_far_future_time_makes_every_later_event_late() -> None:
    summary, _, late, _ = run_job(IterableSource(with_far_future(20), batch_size=5))
    assert summary.late == 40 - 4  # all after its batch of 5: the problem of #17


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_the_guard_makes_a_far_future_event_a_dead_letter_with_its_reason(
        engine: str, clean_spans: Counter[Any]) -> None:
    summary, found, late, dead = run_job(IterableSource(with_far_future(20), batch_size=5),
                                         engine=engine, guard=timedelta(days=1))
    assert spans(found.records) == clean_spans and not late.records
    [letter] = dead.records
    reason = letter["reason"]
    assert letter["event"] == FAR and letter["position"] == "memory-0:20"
    assert reason.startswith("time field 'ts' is 9999-12-31T00:00:00Z (253402214400000), ")
    ref = datetime.fromtimestamp(ROWS[19]["ts"] / 1000, UTC)  # the newest time before it
    assert f"ahead of {ref.isoformat(timespec='milliseconds')[:-6]}Z, the reference time of " \
        "memory-0 (its newest event time, or the median of its recent ones)" in reason
    assert "max_event_time_ahead, cep replay --max-ahead: 1d" in reason
    assert summary.last_event_time == ROWS[-1]["ts"]  # the far-future time moved nothing


def test_a_far_future_event_in_a_stream_s_first_batch_is_caught_too(
        clean_spans: Counter[Any]) -> None:
    """Before a stream has a reference, its first batch's median time is the reference."""
    summary, found, late, dead = run_job(IterableSource(with_far_future(0), batch_size=64),
                                         guard=timedelta(days=1))
    assert spans(found.records) == clean_spans and not late.records
    assert [d["event"] for d in dead.records] == [FAR]


def test_the_guard_is_per_stream_so_files_of_different_years_pass(
        tmp_path: Path, clean_spans: Counter[Any]) -> None:
    """The operator's watermark is the minimum over files: compared with it, a 2025 file
    read next to a 2024 one would be all dead letters."""
    later = [dict(r, ts=r["ts"] + 400 * 86_400_000) for r in ROWS]
    (tmp_path / "a.jsonl").write_bytes(jsonl(ROWS))
    (tmp_path / "b.jsonl").write_bytes(jsonl(later))
    summary, found, _, dead = run_job(FileSource(tmp_path, batch_size=8),
                                      guard=timedelta(days=1))
    assert not dead.records and summary.late == 0
    assert summary.matches == 2 * sum(clean_spans.values())


def test_a_stream_that_really_moves_on_is_followed_after_half_a_window() -> None:
    """A gap in the data looks like a far-future event at first; once most (33) of the
    stream's 64 most recent times lie beyond the limit, its events are accepted again."""
    rows = [{"card_id": "c1", "ts": T0 + i * 1000, "amount": 50} for i in range(100)]
    rows += [{"card_id": "c1", "ts": T0 + 30 * 86_400_000 + i * 1000, "amount": 50}
             for i in range(50)]
    summary, _, _, dead = run_job(IterableSource(rows, batch_size=1), guard=timedelta(days=1))
    assert [d["event"]["ts"] for d in dead.records] == [r["ts"] for r in rows[100:133]]
    assert summary.processed == 150 - 33 and summary.late == 0


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_the_guard_survives_checkpoint_and_resume(engine: str, tmp_path: Path) -> None:
    """Checkpointed after every batch, stopped after each number of batches and resumed:
    matches, late events and dead letters equal an uninterrupted run's, so the guard's
    reference and recent times are in the checkpoint (a restored guard without them
    would take the far-future events that come after the stop)."""
    rows = list(ROWS[:30])
    rows.insert(12, dict(FAR))
    rows.insert(25, dict(FAR, ts="2100-01-01T00:00:00"))
    rows += [dict(r, ts=r["ts"] + 30 * 86_400_000) for r in ROWS]  # a real jump
    want = run_job(IterableSource(rows, batch_size=3), engine=engine, guard=timedelta(days=1))
    # the two far-future events, and the first events after the jump until they are most
    # of the recent ones (the far-future times among those count as beyond the limit)
    assert [d["position"] for d in want[3].records] == [
        "memory-0:12", "memory-0:25", *(f"memory-0:{i}" for i in range(32, 32 + 29))]
    assert want[0].matches and not want[2].records

    def positions(sink: ListSink) -> list[Any]:
        return [(r.get("position"), r.get("start"), r.get("card_id")) for r in sink.records]

    for stop_after in range(1, len(rows) // 3, 2):
        chk, calls = tmp_path / f"chk-{stop_after}", [0]

        def stop(calls: list[int] = calls, n: int = stop_after) -> bool:
            calls[0] += 1
            return calls[0] >= n

        first = run_job(IterableSource(rows, batch_size=3), engine=engine,
                        guard=timedelta(days=1), chk=chk, stop=stop)
        second = run_job(IterableSource(rows, batch_size=3), engine=engine,
                         guard=timedelta(days=1), chk=chk, resume=True)
        for i in (1, 2, 3):
            assert positions(first[i]) + positions(second[i]) == positions(want[i]), (
                stop_after, i)


def test_the_guard_refuses_a_limit_that_is_no_duration() -> None:
    job = Job(IterableSource([]))
    for bad in (0, -5, 1.5, "1d", True):
        with pytest.raises(CEPError, match="far-future guard's limit must be a positive"):
            job.max_event_time_ahead(bad)
    assert job.max_event_time_ahead(timedelta(hours=2)).max_ahead == 7_200_000
    assert job.max_event_time_ahead(None).max_ahead is None


def replay_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["cep.patterns.fraud:card_testing", str(data), "--key", "card_id", "--time", "ts",
            "--output", str(out / "matches.jsonl"), "--quiet", *extra]


def test_cep_replay_guards_by_default_and_max_ahead_takes_a_unit_or_off(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "far.jsonl"
    src.write_bytes(jsonl(with_far_future(20)))
    assert replay_main(replay_args(src, tmp_path / "default")) == 0
    [letter] = FileSink(tmp_path / "default" / "dead_letters").read()
    assert "--max-ahead: 365d" in letter["reason"]
    assert replay_main(replay_args(src, tmp_path / "hour", "--max-ahead", "1h")) == 0
    # off: the watermark jumps to the year 9999, the rest is late, exit 3
    assert replay_main(replay_args(src, tmp_path / "off", "--max-ahead", "off",
                                   "--batch-size", "5")) == 3
    capsys.readouterr()
    for bad in ("5", "0", "soon"):
        with pytest.raises(SystemExit) as exit_:
            replay_main(replay_args(src, tmp_path / "bad", "--max-ahead", bad))
        assert exit_.value.code == 2
        assert "--max-ahead" in capsys.readouterr().err


# ------------------------------------------------------------------ output directory
def test_an_output_directory_with_parts_of_an_earlier_replay_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "cards.jsonl"
    src.write_bytes(jsonl(ROWS))
    out = tmp_path / "out"
    first = replay(EXPR, [src], key="card_id", time="ts", output=out / "matches.jsonl",
                   progress=False)
    with pytest.raises(CEPError) as refused:
        replay(EXPR, [src], key="card_id", time="ts", output=out / "matches.jsonl",
               progress=False)
    message = str(refused.value)
    # the directories with parts: an epoch without late events (say) writes no file
    assert f"the output directory {out}/matches already holds 1 part" in message
    assert "--resume" in message and "--overwrite" in message
    assert replay_main(replay_args(src, out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("cep replay: the output directory ") and "--overwrite" in err
    # a pending part (a run that stopped before its checkpoint completed) counts too
    lone = tmp_path / "lone"
    (lone / "matches").mkdir(parents=True)
    (lone / "matches" / "part-000000004.jsonl.pending").write_text("{}\n")
    with pytest.raises(CEPError, match=f"the output directory {lone}/matches already holds 1 "
                       "part file of an earlier replay"):
        replay(EXPR, [src], key="card_id", time="ts", output=lone / "matches.jsonl",
               progress=False)
    # nothing was written by the refused runs
    assert len(FileSink(out / "matches").read()) == first.matches


def test_overwrite_replaces_the_earlier_output_and_its_checkpoints(tmp_path: Path) -> None:
    src = tmp_path / "cards.jsonl"
    src.write_bytes(jsonl(ROWS))
    out, chk = tmp_path / "out", tmp_path / "chk"
    args = replay_args(src, out, "--checkpoint-dir", str(chk), "--checkpoint-every", "10")
    assert replay_main(args) == 0
    once = FileSink(out / "matches").read()
    (out / "matches" / "part-000000099.jsonl").write_text('{"stale": true}\n')
    assert replay_main([*args, "--overwrite"]) == 0
    assert FileSink(out / "matches").read() == once  # no stale part, no duplicate
    with pytest.raises(SystemExit):
        replay_main([*args, "--overwrite", "--resume"])


def test_resume_continues_the_earlier_output(tmp_path: Path) -> None:
    src = tmp_path / "cards.jsonl"
    src.write_bytes(jsonl(ROWS))
    want = replay(EXPR, [src], key="card_id", time="ts", output=tmp_path / "w" / "m.jsonl",
                  progress=False)
    out, chk, calls = tmp_path / "out", tmp_path / "chk", [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] == 3

    kwargs: dict[str, Any] = dict(key="card_id", time="ts", output=out / "matches.jsonl",
                                  progress=False, checkpoint_dir=chk, checkpoint_every=5,
                                  batch_size=8)
    assert replay(EXPR, [src], stop=stop, **kwargs).stopped
    assert replay(EXPR, [src], resume=True, **kwargs).matches == want.matches
    assert spans(FileSink(out / "matches").read()) == spans(
        FileSink(tmp_path / "w" / "m").read())


# -------------------------------------------------------------- broken downloads
def test_a_compressed_file_that_breaks_off_is_replayed_up_to_the_break(tmp_path: Path) -> None:
    """A .gz file cut short (an interrupted download): its whole lines are matched, one dead
    letter says where it broke off and why, and the job goes on to the next file."""
    rows = transactions(3000, seed=5)
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    packed = gzip.compress(text)
    cut, whole = tmp_path / "day1.jsonl.gz", tmp_path / "day2.jsonl"
    cut.write_bytes(packed[:len(packed) // 2])
    whole.write_text(json.dumps({**rows[-1], "ts": rows[-1]["ts"] + 1}) + "\n")
    out = tmp_path / "out" / "matches.jsonl"
    summary = replay(EXPR, [cut, whole], key="card_id", time="ts", output=out, progress=False)
    (dead,) = FileSink(tmp_path / "out" / "dead_letters").read()
    assert dead["reason"].startswith("the file breaks off after line ")
    assert dead["position"].startswith(f"{cut}:")
    assert 0 < summary.processed < len(rows) and summary.dead_letters == 1


# ------------------------------------------------------------------ time formats
@pytest.mark.parametrize("sort", [False, True])
def test_text_times_in_a_given_format_are_read_and_a_misfit_is_a_dead_letter(
        tmp_path: Path, sort: bool) -> None:
    """``--time-format``: times as a day-first text, parsed a column at a time; a value that
    does not match the format is a dead letter naming it, and the file goes on."""
    src = tmp_path / "cards.csv"
    src.write_text("card_id,ts,amount\n"
                   "c1,01/03/2024 09:30:00,2.0\n"
                   "c1,2024-03-01T09:30:30,3.0\n"  # ISO-8601: not the format
                   "c1,01/03/2024 09:31:00,1.0\n"
                   "c1,01/03/2024 09:31:30,2.5\n"
                   "c1,01/03/2024 09:32:00,900.0\n")
    out = tmp_path / "out" / "matches.jsonl"
    summary = replay(EXPR, [src], key="card_id", time="ts", output=out, progress=False,
                     time_format="%d/%m/%Y %H:%M:%S", sort=sort)
    (match,) = FileSink(out.with_suffix("")).read()
    assert (match["start"], match["end"]) == (1709285400000, 1709285520000)
    (dead,) = FileSink(tmp_path / "out" / "dead_letters").read()
    assert dead["reason"] == ("time field 'ts' is '2024-03-01T09:30:30': does not match the "
                              "format '%d/%m/%Y %H:%M:%S'")
    assert summary.dead_letters == 1 and summary.matches == 1


# --------------------------------------------------------------- missing fields
@pytest.mark.parametrize("batch_size", [1, 2, 64])
@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_an_event_without_a_field_the_pattern_reads_holds_null_there(
        tmp_path: Path, engine: str, batch_size: int) -> None:
    """Events of several shapes share a stream: a line without ``amount`` is an event whose
    amount is null (not a dead letter), whatever batch it lands in and whether the batch
    is read as a table or as dicts (a text value elsewhere in it)."""
    small = Pattern.begin("small").where(col("amount") < 5).next("big").where(
        col("amount") > 500)
    lines = [{"card_id": "c1", "ts": 1000, "amount": 2},
             {"card_id": "c1", "ts": 2000},  # no amount: breaks the strict sequence
             {"card_id": "c1", "ts": 3000, "amount": 900},
             {"card_id": "c2", "ts": 4000, "amount": 1, "note": "x"},
             {"card_id": "c2", "ts": 5000, "amount": 700, "note": 7}]  # note: text, then a number
    src = tmp_path / "shapes.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in lines))
    found, dead = ListSink(), ListSink()
    summary = (Job(FileSource(src, batch_size=batch_size)).key_by("card_id").timestamps("ts")
               .match(small, engine=engine).sink(found).sink_dead_letters(dead).run())
    assert [(r["card_id"], r["start"], r["end"]) for r in found.records] == [
        ("c2", 4000, 5000)]
    assert dead.records == [] and summary.processed == 5 and summary.warnings == []


def test_a_field_no_event_holds_is_named_in_a_warning(tmp_path: Path) -> None:
    misspelt = Pattern.begin("a").where(col("amout") > 5)
    rows = [{"card_id": "c1", "ts": 1000, "amount": 9}]
    with pytest.warns(FieldWarning, match="field 'amout' .read by stage 'a'. is absent"):
        summary = Job(IterableSource(rows)).timestamps("ts").match(misspelt).run()
    assert summary.matches == 0 and len(summary.warnings) == 1


def test_a_field_only_a_measure_reads_that_no_event_holds_is_named_in_a_warning() -> None:
    """Its measure would be null in every match, quietly: a misspelt name."""
    from cep import first
    from cep.rules import Rule

    rule = Rule("big", 1, "card_id", Pattern.begin("a").where(col("amount") > 5),
                measures={"paid": first("a", "amuont")})
    rows = [{"card_id": "c1", "ts": 1000, "amount": 9}]
    out = ListSink()
    with pytest.warns(FieldWarning, match="field 'amuont' .read by measure 'paid'. is absent"):
        summary = Job(IterableSource(rows)).timestamps("ts").rules([rule]).sink(out).run()
    assert summary.matches == 1 and len(summary.warnings) == 1


# ------------------------------------------------------------------------ the fuzz test
def poison_menu(ts: int) -> list[bytes]:
    """The poison of #17 (tests/test_poison.py POISON and CASES, plus broken lines), as
    JSONL lines at the time ``ts`` of the events around them."""
    card = b'"card_id": "c1"'
    return [
        b"{not json",
        b'{"card_id": "c1", "ts": ',
        b'{"card_id": "c2", "ts": 5, "amount": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b'{"card_id": "c2", "ts": 5, "amount": ' + b"[" * 120 + b"]" * 120 + b"}",
        b"[1, 2]",
        b"null",
        b'{' + card + b', "ts": ' + str(ts).encode() + b', "amount": "\xff"}',
        json.dumps({"card_id": "c1", "ts": 10**20, "amount": 1}).encode(),
        json.dumps({"card_id": "c1", "ts": -(10**20), "amount": 1}).encode(),
        json.dumps({"card_id": "c1", "ts": 1e300, "amount": 1}).encode(),
        json.dumps({"card_id": "c1", "ts": "9" * 30, "amount": 1}).encode(),
        json.dumps({"card_id": "c1", "ts": "10000-01-01T00:00:00", "amount": 1}).encode(),
        json.dumps({"card_id": "c3", "ts": "9999-12-31T00:00:00", "amount": 1}).encode(),
        json.dumps({"card_id": [1], "ts": ts, "amount": 1}).encode(),
        json.dumps({"card_id": float("nan"), "ts": ts, "amount": 1}).encode(),
        json.dumps({"card_id": None, "ts": ts, "amount": 1}).encode(),
        json.dumps({"card_id": "c1", "ts": ts, "amount": "x"}).encode(),
        json.dumps({"card_id": "c1", "amount": 1}).encode(),
    ]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_fuzz_poison_through_replay_with_checkpoints_stop_and_resume(
        tmp_path: Path, engine: str, seed: int) -> None:
    rng = random.Random(seed * 7919 + (engine == "numba"))
    rows = transactions(300, seed=seed)
    lines = [json.dumps(r).encode() for r in rows]
    poisoned: list[bytes] = []
    poison = 0
    for i, line in enumerate(lines):
        if rng.random() < 0.08:
            # at the time of the event before it: poison must not be late for other reasons
            menu = poison_menu(rows[max(0, i - 1)]["ts"])
            poisoned.append(rng.choice(menu))
            poison += 1
        if rng.random() < 0.03:
            poisoned.append(b"   ")  # blank lines are no records
        poisoned.append(line)
    clean, dirty = tmp_path / "clean.jsonl", tmp_path / "dirty.jsonl"
    clean.write_bytes(b"\n".join(lines) + b"\n")
    dirty.write_bytes(b"\xef\xbb\xbf" + b"\n".join(poisoned) + b"\n")
    if engine == "numba":
        spec = "cep.patterns.fraud:card_testing"
    else:
        (tmp_path / "rules.py").write_text(LAMBDA_RULES)
        spec = f"{tmp_path / 'rules.py'}:rule"

    def args(data: Path, out: str, *extra: str) -> list[str]:
        return [spec, str(data), "--key", "card_id", "--time", "ts", "--engine", engine,
                "--output", str(tmp_path / out / "matches.jsonl"), "--batch-size", "4",
                "--quiet", *extra]

    assert replay_main(args(clean, "clean")) == 0
    want = FileSink(tmp_path / "clean" / "matches").read()
    assert want, "the transactions must hold matches"

    chk = tmp_path / "chk"
    checkpoints = ("--checkpoint-dir", str(chk), "--checkpoint-every", "6")
    stop_after, calls = rng.randint(5, 60), [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] >= stop_after

    loaded = __import__("cep.runtime.specs", fromlist=["load"]).load(spec)
    first = replay(loaded.pattern, [dirty], key="card_id", time="ts", engine=engine,
                   output=tmp_path / "dirty" / "matches.jsonl", batch_size=4,
                   checkpoint_dir=chk, checkpoint_every=6, progress=False, stop=stop)
    assert first.stopped
    assert replay_main(args(dirty, "dirty", *checkpoints, "--resume")) in (0, 3)
    got = FileSink(tmp_path / "dirty" / "matches").read()
    assert Counter(map(canon, got)) == Counter(map(canon, want))
    dead = FileSink(tmp_path / "dirty" / "dead_letters").read()
    assert len(dead) == poison, [d["reason"] for d in dead]
    assert not FileSink(tmp_path / "dirty" / "late").read()


def canon(record: Any) -> str:
    return json.dumps(record, sort_keys=True)
