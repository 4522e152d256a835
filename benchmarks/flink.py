"""cep side by side with Apache Flink's MATCH_RECOGNIZE, on the same CSV, in one run.

    make bench-flink                      # 1M card transactions, 10k cards
    python -m benchmarks.flink --events 200000

The same card transactions as ``benchmarks/data.py`` writes (arrival order, each event
up to 5 s late) become one CSV with ``ts`` as ``YYYY-MM-DD HH:MM:SS.fff`` text, and
two patterns run over it three ways:

- **Flink**: Flink SQL ``MATCH_RECOGNIZE`` (``benchmarks/flink_job.py``), streaming mode,
  parallelism 1, watermark 5 s behind, matches written to CSV; the job runs twice in
  one JVM and the second (warm) run counts.  It runs in ``benchmarks/.flink-venv``
  (``apache-flink`` installed there by ``make bench-flink``, never in the project's
  ``.venv``; Java 17 from the machine).
- **cep replay**: ``cep.runtime.replay`` (what ``cep replay`` runs) on the numba engine,
  out-of-orderness 5 s, checkpoints every 100,000 events, matches to Parquet.
- **cep.match**: ``cep.match(csv_path, ...)`` on the numba engine.

cep runs each case in a fresh process after a warm-up on 1,000 events (the numba
kernel loaded from its cache), best of two.  Every way must find the same number of
matches.  Patterns: A = card testing (3+ charges under 5.00 in a row, then one over
500.00, within 10 minutes, skip past last); B = three contiguous increasing amounts
(skip past last).  Results go to ``benchmarks/FLINK_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.run import ROOT, _machine, _spawn

OUT = ROOT / "benchmarks" / "FLINK_RESULTS.md"
FLINK_VENV = ROOT / "benchmarks" / ".flink-venv"
DELAY_S = 5
CHECKPOINT_EVERY = 100_000


def card_csv(n_events: int, header: bool) -> Path:
    """The card transactions as CSV (``card_id,amount,ts,merchant``), cached next to the
    Parquet file; Flink's CSV format reads no header line, cep's reader wants one."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from benchmarks import data

    parquet = data.card_transactions(n_events, max(1, min(10_000, n_events // 100)))
    out = parquet.with_name(f"{parquet.stem}{'' if header else '-noheader'}.csv")
    if out.exists():
        return out
    table = pq.read_table(parquet)
    stamps = pc.cast(table["ts"], pa.timestamp("ms"))
    ts = pc.strftime(stamps, format="%Y-%m-%d %H:%M:%S")  # %S of a ms timestamp: 05.123
    csv_table = pa.table({"card_id": table["card_id"], "amount": table["amount"], "ts": ts,
                          "merchant": table["merchant"]})
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    pcsv.write_csv(csv_table, tmp, pcsv.WriteOptions(include_header=header))
    os.replace(tmp, out)
    return out


def _pattern(name: str) -> Any:
    from benchmarks.patterns import card_testing, increasing
    from cep import SkipStrategy

    return card_testing() if name == "A" else increasing(SkipStrategy.skip_past_last_event())


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One cep case in this process: warm up on 1k events, then time the run."""
    import pyarrow.csv as pcsv

    import cep

    path, name, variant = Path(spec["csv"]), spec["pattern"], spec["variant"]
    pattern = _pattern(name)
    warm = pcsv.read_csv(path).slice(0, 1_000)
    cep.match(warm, pattern, key="card_id", time="ts", engine="numba")
    started = time.perf_counter()
    if variant == "match":
        found = len(cep.match(path, pattern, key="card_id", time="ts", engine="numba"))
        events = None
    else:
        from cep.runtime.replay import replay

        work = Path(tempfile.mkdtemp(prefix="cep-bench-replay-"))
        try:
            summary = replay(pattern, [path], key="card_id", time="ts",
                             output=work / "out" / "matches.parquet",
                             out_of_orderness=DELAY_S * 1000, checkpoint_dir=work / "chk",
                             checkpoint_every=CHECKPOINT_EVERY, engine="numba", progress=False)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        found, events = summary.matches, summary.events_in
    return {"pattern": name, "variant": variant, "seconds": time.perf_counter() - started,
            "matches": found, "events": events}


def flink(csv: Path, name: str, runs: int = 2) -> dict[str, Any]:
    """The warm (last) run of the Flink job for pattern ``name``."""
    python = FLINK_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: run `make bench-flink`, which installs "
                         "apache-flink into benchmarks/.flink-venv")
    with tempfile.TemporaryDirectory(prefix="cep-bench-flink-") as out:
        proc = subprocess.run(
            [str(python), str(ROOT / "benchmarks" / "flink_job.py"), str(csv), out,
             "--pattern", name, "--runs", str(runs), "--delay", str(DELAY_S)],
            capture_output=True, text=True, timeout=3600)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(lines) != runs:
        raise RuntimeError(f"the Flink job failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-6000:]}")
    return {**lines[-1], "first_seconds": lines[0]["seconds"]}


def _flink_version() -> str:
    python = FLINK_VENV / "bin" / "python"
    proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                           "print(m.version('apache-flink'))"], capture_output=True, text=True)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return f"apache-flink {proc.stdout.strip()}, {java.splitlines()[0] if java else 'java ?'}"


def report(rows: list[dict[str, Any]], events: int, command: str, wall: float,
           load: tuple[float, float]) -> str:
    m = _machine()
    lines = [
        "# cep against Flink's MATCH_RECOGNIZE",
        "",
        f"Command: `{command}` (from the repository root; {wall / 60:.1f} min wall time).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']:.0f} GB RAM, {m['os']}; Python "
        f"{m['python']}, numba {m['numba']}, pyarrow {m['pyarrow']}; {_flink_version()}; code "
        f"at `{m['commit']}`. Load average (1 min) {load[0]:.2f} before, {load[1]:.2f} after.",
        "",
        f"Input: {events:,} card transactions (10,000 cards) as one CSV, `ts` as text; what "
        "each row runs: see the docstring of `benchmarks/flink.py`. Ratios are events/s "
        "÷ Flink's events/s on the same pattern in the same run.",
        "",
        "| pattern | system | matches | same as Flink | time | events/s | ÷ Flink |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for name in ("A", "B"):
        mine = [r for r in rows if r["pattern"] == name]
        base = next(r for r in mine if r["variant"] == "flink")
        for r in mine:
            what = {"flink": f"Flink SQL MATCH_RECOGNIZE, parallelism 1, warm (first run "
                             f"{base['first_seconds']:.1f} s)",
                    "replay": "`cep replay` (numba, checkpoints every 100k)",
                    "match": "`cep.match` (numba)"}[r["variant"]]
            same = "yes" if r["matches"] == base["matches"] else f"**no** ({base['matches']:,})"
            ratio = base["seconds"] / r["seconds"]
            lines.append(f"| {name} | {what} | {r['matches']:,} | {same} | {r['seconds']:.2f} s | "
                         f"{events / r['seconds'] / 1e3:,.0f}k | {ratio:.2f}× |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.flink", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    with_header, without = card_csv(args.events, True), card_csv(args.events, False)
    rows = []
    for name in ("A", "B"):
        f = flink(without, name)
        rows.append({**f, "variant": "flink"})
        print(f"{name} flink   {args.events / f['seconds']:>12,.0f} ev/s {f['matches']:>8,} "
              "matches", flush=True)
        for variant in ("replay", "match"):
            best = min((_spawn({"variant": variant, "pattern": name, "csv": str(with_header)},
                               None, module="benchmarks.flink") for _ in range(2)),
                       key=lambda r: r["seconds"])
            rows.append(best)
            print(f"{name} {variant:7} {args.events / best['seconds']:>12,.0f} ev/s "
                  f"{best['matches']:>8,} matches", flush=True)
    command = " ".join(["python -m benchmarks.flink", *(argv if argv is not None
                                                          else sys.argv[1:])])
    args.out.write_text(report(rows, args.events, command.strip(), time.perf_counter() - began,
                               (load_before, os.getloadavg()[0])))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
