"""Flink SQL MATCH_RECOGNIZE over the benchmark CSV: the JVM side of ``make bench-flink``.

Runs in a virtualenv of its own (``benchmarks/.flink-venv``, with ``apache-flink``), never
the project's: it imports nothing from cep.  For each pattern it runs the same job
``--runs`` times in one JVM (the first run warms it up) at parallelism 1, writing the
matches to CSV files, and prints one JSON line per run: pattern, seconds, matches.

    .flink-venv/bin/python benchmarks/flink_job.py cards.csv out/ --pattern A --runs 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

# the same patterns as benchmarks/patterns.py, in MATCH_RECOGNIZE
PATTERNS = {
    # card testing: 3+ charges under 5.00 in a row, then one over 500.00, within 10 minutes
    "A": """
        MEASURES FIRST(S.ts) AS start_ts, LAST(B.ts) AS end_ts, COUNT(S.amount) AS smalls
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (S{3,} B) WITHIN INTERVAL '10' MINUTE
        DEFINE S AS S.amount < 5.0, B AS B.amount > 500.0
    """,
    # three contiguous charges, each larger than the one before
    "B": """
        MEASURES X.ts AS start_ts, Z.ts AS end_ts
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (X Y Z)
        DEFINE Y AS Y.amount > X.amount, Z AS Z.amount > Y.amount
    """,
}


def run(csv: Path, out: Path, pattern: str, runs: int, delay_s: int) -> None:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("pipeline.name", f"cep-bench-{pattern}")
    env.execute_sql(f"""
        CREATE TABLE cards (
            card_id BIGINT, amount DOUBLE, ts TIMESTAMP(3), merchant STRING,
            WATERMARK FOR ts AS ts - INTERVAL '{delay_s}' SECOND
        ) WITH (
            'connector' = 'filesystem', 'path' = '{csv.resolve()}', 'format' = 'csv',
            'csv.ignore-parse-errors' = 'false', 'csv.allow-comments' = 'false'
        )""")
    for i in range(runs):
        target = out / f"{pattern}-{i}"
        shutil.rmtree(target, ignore_errors=True)
        env.execute_sql(f"DROP TABLE IF EXISTS matches_{i}")
        env.execute_sql(f"""
            CREATE TABLE matches_{i} (card_id BIGINT, start_ts TIMESTAMP(3),
                                      end_ts TIMESTAMP(3){', smalls BIGINT' if pattern == 'A' else ''})
            WITH ('connector' = 'filesystem', 'path' = '{target.resolve()}', 'format' = 'csv')""")
        started = time.perf_counter()
        env.execute_sql(f"""
            INSERT INTO matches_{i}
            SELECT * FROM cards MATCH_RECOGNIZE (
                PARTITION BY card_id ORDER BY ts {PATTERNS[pattern]}
            )""").wait()
        seconds = time.perf_counter() - started
        matches = sum(sum(1 for line in f.open() if line.strip())
                      for f in target.rglob("*") if f.is_file() and not f.name.startswith("."))
        print(json.dumps({"pattern": pattern, "run": i, "seconds": seconds, "matches": matches}),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="card transactions: card_id,amount,ts,merchant")
    parser.add_argument("out", type=Path, help="directory for the matches")
    parser.add_argument("--pattern", choices=sorted(PATTERNS), required=True)
    parser.add_argument("--runs", type=int, default=2, help="runs in one JVM (first warms up)")
    parser.add_argument("--delay", type=int, default=5, help="watermark delay, seconds")
    args = parser.parse_args()
    run(args.csv, args.out, args.pattern, args.runs, args.delay)


if __name__ == "__main__":
    main()
