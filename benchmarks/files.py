"""Reading event files: ``cep.runtime.files.read_batches`` against today's ``FileSource``.

    python -m benchmarks.files                # 1M card transactions per format
    python -m benchmarks.files --rows 200000 --repeat 1

The same card transactions (``card_id`` text, ``ts`` integer epoch ms, ``amount`` float,
``merchant`` text), generated with a fixed seed, are written once as Parquet, CSV and
JSON lines under ``/tmp/cep-bench-files`` (kept for later runs: the file names carry
the row count).  Each reader reads each file through, in batches of 65,536 rows:

- ``read_batches``: Arrow batches (a table per batch, positions as an int64 array);
- ``FileSource``: chunks of Python dicts with a position string per row, as the
  streaming runtime reads files today.

Each case runs ``--repeat`` times in this process; the best time is reported as rows per
second.  Nothing is written to the repository.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DATA = Path("/tmp/cep-bench-files")
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z in epoch ms
MERCHANTS = ("Amazon.com", "Whole Foods Market", "Shell", "Uber", "Netflix", "Trader Joe's",
             "Café Zürich", "Delta Air Lines", "IKEA", "DoorDash")
BATCH = 65536


def card_files(rows: int) -> dict[str, Path]:
    """The Parquet, CSV and JSONL files of ``rows`` card transactions (written if missing)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    DATA.mkdir(parents=True, exist_ok=True)
    paths = {fmt: DATA / f"cards-{rows}.{fmt}" for fmt in ("parquet", "csv", "jsonl")}
    if all(p.exists() for p in paths.values()):
        return paths
    rng = np.random.default_rng(20240304)
    cards = np.array([f"card-{i:06d}" for i in range(10_000)])
    table = pa.table({
        "card_id": cards[rng.integers(0, len(cards), rows)],
        "ts": T0 + np.sort(rng.integers(0, 30 * 86_400_000, rows)),
        "amount": np.round(rng.lognormal(3.0, 1.2, rows), 2),
        "merchant": np.array(MERCHANTS)[rng.integers(0, len(MERCHANTS), rows)],
    })
    pq.write_table(table, paths["parquet"])
    pcsv.write_csv(table, paths["csv"])
    with open(paths["jsonl"], "w", encoding="utf-8") as f:
        for row in table.to_pylist():
            f.write(json.dumps(row) + "\n")
    return paths


def _read_batches(path: Path) -> int:
    from cep.runtime.files import read_batches

    return sum(b.num_rows for b in read_batches(path, batch_size=BATCH))


def _file_source(path: Path) -> int:
    from cep.runtime.sources import FileSource

    return sum(len(c.events) for c in FileSource(path, batch_size=BATCH).read({}))


def _best(read: Callable[[Path], int], path: Path, repeat: int) -> tuple[float, int]:
    best, rows = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        rows = read(path)
        best = min(best, time.perf_counter() - start)
    return best, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.files", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    paths = card_files(args.rows)
    print(f"{args.rows:,} card transactions, batches of {BATCH:,}, best of {args.repeat}")
    print(f"{'format':8} {'MB':>6} {'read_batches':>16} {'FileSource':>16} {'speed-up':>9}")
    for fmt, path in paths.items():
        new, rows_new = _best(_read_batches, path, args.repeat)
        old, rows_old = _best(_file_source, path, args.repeat)
        if rows_new != rows_old:
            raise SystemExit(f"{path}: read_batches read {rows_new} rows, FileSource {rows_old}")
        size = path.stat().st_size / 1e6
        print(f"{fmt:8} {size:6.0f} {rows_new / new:12,.0f} r/s {rows_old / old:12,.0f} r/s "
              f"{old / new:8.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
