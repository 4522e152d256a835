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
