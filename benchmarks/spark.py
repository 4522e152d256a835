"""Spark benchmarks: cep on Spark against Spark's own aggregation over the same data, same run.

    python -m benchmarks.spark            # 1M card events, 10k cards (make bench-spark)
    python -m benchmarks.spark --quick    # 200k events, to try it out

Everything runs on ``local[2]`` in one Spark session (4 shuffle partitions).  The
card transactions of ``benchmarks/data.py`` are cut, in arrival order, into 20
Parquet files.  Streaming cases read the directory with ``maxFilesPerTrigger=5``
(4 micro-batches) and ``trigger(availableNow=True)``; each micro-batch is counted
in ``foreachBatch`` (one Spark job per batch, same for every case).

- stream baseline: ``groupBy(card_id).count()`` over the stream (update mode);
- ``match_stream`` per key, and per key group for several G;
- batch baseline: ``groupBy(card_id).count()`` over the Parquet files;
- ``match_batch``;
- the embedded runtime (``runtime.Job``, numba engine) on the same files.

Reported: wall time from start to the last result, events/s, ratio to the baseline
of the same kind, output rows, and the peak resident memory of the whole process
tree (driver, JVM, Python workers) during the case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import data
from benchmarks.patterns import card_testing, increasing
from cep import Pattern, SkipStrategy

HERE = Path(__file__).parent
PATTERNS: dict[str, Callable[[], Pattern]] = {
    "A": card_testing,
    "B": lambda: increasing(SkipStrategy.skip_past_last_event()),
}
FILES = 20
FILES_PER_TRIGGER = 5
WATERMARK = "10 seconds"


# ------------------------------------------------------------------ memory
def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


class PeakMemory:
    """Samples the process tree's RSS every 0.2 s while a case runs."""

    def __enter__(self) -> PeakMemory:
        self.peak = _tree_rss(os.getpid())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, _tree_rss(os.getpid()))

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------- cases
def split_files(source: Path, target: Path) -> Path:
    """The Parquet file cut into FILES files in arrival order, modification times ascending."""
    import pyarrow.parquet as pq

    if target.exists() and len(list(target.glob("*.parquet"))) == FILES:
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    table = pq.read_table(source)
    size = -(-table.num_rows // FILES)
    for i in range(FILES):
        path = target / f"part-{i:04d}.parquet"
        pq.write_table(table.slice(i * size, size), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return target


def stream_case(spark: Any, files: Path, build: Callable[[Any], Any], tmp: Path) -> int:
    """Run a streaming query to the end; the number of output rows."""
    stream = (spark.readStream.schema(spark.read.parquet(str(files)).schema)
              .option("maxFilesPerTrigger", FILES_PER_TRIGGER).parquet(str(files)))
    rows = []
    out, mode = build(stream)
    query = (out.writeStream.outputMode(mode)
             .foreachBatch(lambda df, _: rows.append(df.count()))
             .option("checkpointLocation", str(tmp / f"chk-{time.monotonic_ns()}"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sum(rows)


def measure(name: str, n_events: int, fn: Callable[[], int]) -> dict[str, Any]:
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        rows = fn()
        seconds = time.perf_counter() - t0
    result = {"case": name, "seconds": round(seconds, 2), "events_per_s": n_events / seconds,
              "rows": rows, "peak_rss_mb": round(mem.peak / 2**20)}
    print(json.dumps(result), flush=True)
    return result


def embedded(path: Path, pattern: Pattern) -> int:
    from cep.runtime import CallbackSink, FileSource, Job, WatermarkStrategy

    found = [0]
    job = (Job(FileSource(str(path)))
           .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=10)))
           .key_by("card_id").timestamps("ts").match(pattern, engine="numba", timeouts=False)
           .sink(CallbackSink(lambda record: found.__setitem__(0, found[0] + 1))))
    job.run()
    return found[0]


def _trivial_state(stream: Any) -> Any:
    """The cheapest stateful Python function over the same prepared input match_stream uses:
    what Spark itself costs before any matching."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    from cep.runtime.spark.schema import make_spec
    from cep.runtime.spark.stream import _prepare

    def count_rows(key: Any, frames: Any, state: Any) -> Any:
        yield pd.DataFrame({"n": [sum(len(f) for f in frames)]})

    spec = make_spec(stream, card_testing(), key="card_id", time="ts", engine="auto",
                     timeouts=False, late=False, measures=None)
    prepared = _prepare(stream, spec, "ts", WATERMARK, None, 64)
    return prepared.groupBy("__cep_group").applyInPandasWithState(
        count_rows, "n long", "x long", "append", GroupStateTimeout.EventTimeTimeout)


def _trivial_batch(df: Any) -> int:
    """The cheapest Arrow function over the same key-sorted partitions match_batch uses."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    def count_rows(batches: Any) -> Any:
        yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})

    sorted_parts = df.repartition(4, "card_id").sortWithinPartitions("card_id", "ts")
    return int(sorted_parts.mapInArrow(count_rows, "n long").agg(F.sum("n")).collect()[0][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200k events, 2k cards")
    parser.add_argument("--groups", default="16,64,256",
                        help="key-group counts to measure (16 = the default, 4 per partition)")
    parser.add_argument("--skip-per-key", action="store_true",
                        help="leave out match_stream per key (the slowest case)")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from cep.runtime.spark import match_batch, match_stream
    from cep.runtime.spark.session import local_session

    n, cards = (200_000, 2_000) if args.quick else (1_000_000, 10_000)
    source = data.card_transactions(n_events=n, n_cards=cards)
    files = split_files(source, source.with_suffix("").with_name(source.stem + "-files"))
    tmp = HERE / ".spark-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    started = time.time()
    spark = local_session(cores=2, shuffle_partitions=4, app="cep-bench")
    groups = [int(g) for g in args.groups.split(",") if g]

    # warm up: Spark's first streaming query and first Python workers are slow
    stream_case(spark, files, lambda s: (s.limit(10).groupBy("card_id").count(), "complete"), tmp)
    stream_case(spark, files, lambda s: (match_stream(
        s.limit(1000), card_testing(), key="card_id", time="ts"), "append"), tmp)
    match_batch(spark.read.parquet(str(files)).limit(1000), card_testing(), key="card_id",
                time="ts").count()

    results: list[dict[str, Any]] = []

    def stream_count(s: Any) -> Any:
        return s.groupBy("card_id").count(), "update"

    results.append(measure("stream: groupBy(card_id).count() [baseline]", n,
                           lambda: stream_case(spark, files, stream_count, tmp)))
    results.append(measure(
        "stream: applyInPandasWithState, trivial function, 64 key groups [Spark's floor]", n,
        lambda: stream_case(spark, files, lambda s: (_trivial_state(s), "append"), tmp)))
    for pname, make in PATTERNS.items():
        for g in groups:
            results.append(measure(
                f"stream: match_stream {pname}, key_groups={g}", n,
                lambda g=g, make=make: stream_case(spark, files, lambda s: (match_stream(
                    s, make(), key="card_id", time="ts", watermark=WATERMARK, key_groups=g),
                    "append"), tmp)))
        if not args.skip_per_key:
            results.append(measure(
                f"stream: match_stream {pname}, per key", n,
                lambda make=make: stream_case(spark, files, lambda s: (match_stream(
                    s, make(), key="card_id", time="ts", watermark=WATERMARK, key_groups=None),
                    "append"), tmp)))
    batch = spark.read.parquet(str(files))
    results.append(measure("batch: groupBy(card_id).count() [baseline]", n, lambda: int(
        batch.groupBy("card_id").count().agg(F.count("*")).collect()[0][0])))
    results.append(measure(
        "batch: repartition + sortWithinPartitions + mapInArrow counting rows [Spark's floor]",
        n, lambda: _trivial_batch(batch)))
    for pname, make in PATTERNS.items():
        results.append(measure(f"batch: match_batch {pname}", n, lambda make=make: int(
            match_batch(batch, make(), key="card_id", time="ts").count())))
    for pname, make in PATTERNS.items():
        results.append(measure(f"embedded runtime (Job, numba) {pname}", n,
                               lambda make=make: embedded(files, make())))
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    _report(results, n, cards, time.time() - started, args)


def _report(results: list[dict[str, Any]], n: int, cards: int, wall: float,
            args: argparse.Namespace) -> None:
    import pyspark

    def baseline(kind: str) -> float:
        return next(r["events_per_s"] for r in results if r["case"].startswith(kind)
                    and "baseline" in r["case"])

    lines = [
        f"Command: `.venv/bin/python -m benchmarks.spark{' --quick' if args.quick else ''}` "
        f"({wall / 60:.1f} min wall time).",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Linux {platform.release()}; Python {platform.python_version()}, PySpark "
        f"{pyspark.__version__}, `local[2]`, 4 shuffle partitions. Data: {n:,} card "
        f"transactions, {cards:,} cards, {FILES} Parquet files; streams read "
        f"{FILES_PER_TRIGGER} files per micro-batch, watermark delay {WATERMARK}.",
        "",
        "| case | wall s | events/s | ÷ baseline of its kind | output rows | peak RSS, all processes |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        kind = "stream" if r["case"].startswith("stream") else (
            "batch" if r["case"].startswith("batch") else "batch")
        ratio = r["events_per_s"] / baseline(kind)
        lines.append(f"| {r['case']} | {r['seconds']:.1f} | {r['events_per_s'] / 1000:,.0f}k | "
                     f"{ratio:.2f}× | {r['rows']:,} | {r['peak_rss_mb']:,} MB |")
    text = "\n".join(lines)
    print(text)
    out = HERE / ("SPARK_RESULTS.quick.md" if args.quick else "SPARK_RESULTS.md")
    out.write_text("# Spark benchmark results\n\n" + text + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
