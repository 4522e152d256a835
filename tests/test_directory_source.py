"""A watched directory is a streaming source: files that appear later are read too."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from cep import Pattern, col
from cep.runtime import DirectorySource, Job, ListSink, WatermarkStrategy


def write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(path)  # appear whole, as a writer should publish files


def test_files_added_while_the_job_runs_are_matched(tmp_path: Path) -> None:
    """Pattern a(v=1) next b(v=2) per key; the second half of the stream arrives later."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_jsonl(inbox / "part-1.jsonl", [{"k": 1, "v": 1, "ts": 1}, {"k": 2, "v": 1, "ts": 2}])

    def later() -> None:
        time.sleep(0.3)
        write_jsonl(inbox / "part-2.jsonl", [{"k": 1, "v": 2, "ts": 3}, {"k": 2, "v": 2, "ts": 4},
                                             {"k": 3, "v": 0, "ts": 100}])

    threading.Thread(target=later).start()
    out = ListSink()
    pattern = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    source = DirectorySource(inbox, poll_seconds=0.05, stop_after_idle=1.0)
    summary = (
        Job(source).with_watermarks(WatermarkStrategy.for_monotonous_timestamps())
        .key_by("k").timestamps("ts").match(pattern).sink(out).run()
    )
    assert summary.events_in == 5
    assert sorted((r["k"], r["start"], r["end"]) for r in out.records) == [(1, 1, 3), (2, 2, 4)]


def test_a_watched_directory_is_unbounded_so_pending_matches_wait(tmp_path: Path) -> None:
    """An unbounded source never moves the watermark to the end of time on its own."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_jsonl(inbox / "a.jsonl", [{"k": 1, "v": 1, "ts": 1}, {"k": 1, "v": 2, "ts": 2}])
    out = ListSink()
    pattern = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    Job(DirectorySource(inbox, poll_seconds=0.05, stop_after_idle=0.2)).key_by("k").timestamps(
        "ts").match(pattern).sink(out).run()
    assert out.records == []  # watermark is 1 (monotonous: max - 1): event at 2 still waits


DAY = 86_400_000


def _days(folder: Path, days: int = 3, per_day: int = 60) -> Path:
    """One JSONL file per day: a key's small charge then a big one, all day long."""
    folder.mkdir()
    for d in range(days):
        rows = [{"k": f"c{i % 5}", "v": 900 if i % 3 == 2 else 1,
                 "ts": d * DAY + i * 60_000} for i in range(per_day)]
        (folder / f"day{d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _watermarks(folder: Path, in_order: bool) -> tuple[list[int], list[tuple[int, int]]]:
    from cep.runtime import FileSource

    seen: list[int] = []
    out = ListSink()
    (Job(FileSource(folder, batch_size=10, in_order=in_order)).key_by("k").timestamps("ts")
     .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(0))
     .match(Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 900))
     .sink(out).run(progress=lambda s: seen.append(s.watermark)))
    return seen, sorted((r["start"], r["end"]) for r in out.records)


def test_files_split_by_time_read_in_order_are_one_stream_whose_watermark_moves(
        tmp_path: Path) -> None:
    """Side by side, each file has a watermark and the job's is the least: with one file
    per day it stays in the first day until that file is read (found by a docs check: a
    rule change watched meanwhile applied to every later day).  ``in_order`` reads them
    one after another as one stream, and finds the same matches."""
    folder = _days(tmp_path / "days")
    apart, found_apart = _watermarks(folder, in_order=False)
    ordered, found_ordered = _watermarks(folder, in_order=True)
    assert found_ordered == found_apart and len(found_apart) > 50
    # half way through the input (9 of 18 batches), in the second day only in order
    assert ordered[9] >= DAY > apart[9]
    assert ordered == sorted(ordered)
