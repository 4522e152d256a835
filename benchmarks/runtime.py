"""The embedded runtime streaming, against ``cep.match`` over the same data in the same run.

    python -m benchmarks.runtime            # 1M card events (A), 200k IoT readings (C)
    python -m benchmarks.runtime --quick    # a fifth of that, to try it out

``cep.match`` sees the whole input at once: one sort, one pass of the matching
kernel.  A streaming job sees it a chunk at a time and moves its watermark after
every chunk, so the engine runs once per chunk and again for the timers.  These
cases measure what that costs, for the patterns A and C of ``benchmarks/patterns.py``
(numba engine, timeouts off, input in arrival order, up to 5 s late):

- baseline: ``cep.match(table, pattern, key=..., time=...)`` on the Parquet file
  read into memory;
- operator, chunk N: ``CepOperator`` fed the same events as Python dicts (converted
  before the clock starts), N at a time, each chunk followed by a watermark 10 s
  behind the newest event, then ``finish()``;
- job, chunk N: ``Job(FileSource(parquet, batch_size=N))`` with the same watermarks
  and a counting sink: reading, checkpoint-free, end to end.

Every case runs in a process of its own, after the engine ran once on 1,000
events (the numba kernel loaded); peak memory is that process's `peak RSS (`VmHWM`)`
above what it held just before the timed run.  Each case must find as many
matches as the baseline.  Results go to ``benchmarks/RUNTIME_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.patterns import CASES_BY_NAME, Case
from benchmarks.run import ROOT, _machine, _spawn, peak_rss_mb

OUT = ROOT / "benchmarks" / "RUNTIME_RESULTS.md"
OUT_OF_ORDERNESS = timedelta(seconds=10)
CHUNKS = (1_000, 10_000, 100_000)
JOB_CHUNK = 10_000


def _operator(case: Case, rows: list[dict[str, Any]], chunk: int) -> int:
    from cep.runtime.operator import CepOperator

    op = CepOperator(case.pattern(), "numba", key=case.key, time=case.time, timeouts=False)
    delay = int(OUT_OF_ORDERNESS.total_seconds() * 1000)
    found = 0
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        out, newest = op.process_elements(part, [None] * len(part))
        found += len(out.matches)
        if newest is not None:
            found += len(op.process_watermark(newest - delay).matches)
    return found + len(op.finish().matches)


def _job(case: Case, path: Path, chunk: int) -> int:
    from cep.runtime import CallbackSink, FileSource, Job, WatermarkStrategy

    found = [0]
    job = (Job(FileSource(path, batch_size=chunk))
           .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(OUT_OF_ORDERNESS))
           .key_by(case.key).timestamps(case.time)
           .match(case.pattern(), engine="numba", timeouts=False)
           .sink(CallbackSink(lambda record: found.__setitem__(0, found[0] + 1))))
    job.run()
    return found[0]


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process: load, warm up on 1k events, then time the run."""
    import pyarrow.parquet as pq

    import cep

    case, path, variant = CASES_BY_NAME[spec["case"]], Path(spec["path"]), spec["variant"]
    chunk = spec.get("chunk")
    table = pq.read_table(path)
    rows = table.to_pylist() if variant == "operator" else []
    warm = table.slice(0, 1_000)
    cep.match(warm, case.pattern(), key=case.key, time=case.time, engine="numba")
    if variant == "operator":
        _operator(case, rows[:1_000], 100)
    before = peak_rss_mb()
    started = time.perf_counter()
    if variant == "baseline":
        found = len(cep.match(table, case.pattern(), key=case.key, time=case.time,
                              engine="numba"))
    elif variant == "operator":
        found = _operator(case, rows, chunk)
    else:
        found = _job(case, path, chunk)
    seconds = time.perf_counter() - started
    return {"case": case.name, "variant": variant, "chunk": chunk, "events": table.num_rows,
            "matches": found, "seconds": seconds, "peak_mb": peak_rss_mb() - before}


def _row(r: dict[str, Any], base: dict[str, Any]) -> str:
    if r["variant"] == "baseline":
        what = "`cep.match` (baseline)"
    else:
        what = f"{'operator' if r['variant'] == 'operator' else 'job from Parquet'}, chunk " \
               f"{r['chunk']:,}"
    rate = r["events"] / r["seconds"]
    ratio = base["seconds"] / r["seconds"]
    same = "yes" if r["matches"] == base["matches"] else f"**no** ({base['matches']:,})"
    return (f"| {r['case']} | {what} | {r['events']:,} | {r['matches']:,} | {same} | "
            f"{r['seconds']:.2f} s | {rate / 1e3:,.0f}k | {ratio:.2f}× | {r['peak_mb']:,.0f} MB |")


def report(results: list[dict[str, Any]], command: str, wall: float) -> str:
    """RUNTIME_RESULTS.md: the command, the machine, a row per case."""
    m = _machine()
    lines = [
        "# Embedded runtime: streaming against `cep.match`",
        "",
        f"Command: `{command}` (from the repository root; {wall / 60:.1f} min wall time).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']:.0f} GB RAM, {m['os']}; Python "
        f"{m['python']}, numba {m['numba']}, numpy {m['numpy']}, pyarrow {m['pyarrow']}; code "
        f"at `{m['commit']}`.",
        "",
        "What each row is: see the docstring of `benchmarks/runtime.py`. Ratio = baseline "
        "seconds ÷ this case's seconds (1.00× = as fast as `cep.match` on the whole input); "
        "peak = resident memory above the process's state just before the timed run.",
        "",
        "| pattern | case | events | matches | same as baseline | time | events/s | ratio | "
        "peak |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for name in dict.fromkeys(r["case"] for r in results):
        mine = [r for r in results if r["case"] == name]
        base = next(r for r in mine if r["variant"] == "baseline")
        lines += [_row(r, base) for r in mine]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every case (each in its own process) and write the report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.runtime", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200k card events, 40k readings")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    n = 200_000 if args.quick else 1_000_000
    began = time.perf_counter()
    results = []
    for name in ("A", "C"):
        case = CASES_BY_NAME[name]
        path = str(case.path(n))
        specs = [{"variant": "baseline"},
                 *({"variant": "operator", "chunk": c} for c in CHUNKS),
                 {"variant": "job", "chunk": JOB_CHUNK}]
        for spec in specs:
            r = _spawn({**spec, "case": name, "path": path}, None, module="benchmarks.runtime")
            print(f"{name:2} {r['variant']:9} {r['chunk'] or '':>7} {r['events'] / r['seconds']:>12,.0f}"
                  f" ev/s  {r['matches']:>7,} matches  {r['peak_mb']:>6,.0f} MB", flush=True)
            results.append(r)
    command = "python -m benchmarks.runtime" + (" --quick" if args.quick else "")
    args.out.write_text(report(results, command, time.perf_counter() - began))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
