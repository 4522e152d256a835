"""Idle keys hold no state (issue #14): state and checkpoint size against keys seen.

    make bench-state                        # 100k, 1M and 5M keys
    python -m benchmarks.state --quick      # 10k, 100k and 500k keys, to try it out

The input is N distinct cards with one event each, cards that never come back:
``card`` = ``"c{i}"``, ``v`` = 1, ``ts`` = one event every :data:`SPACING_MS` ms (epoch
milliseconds, in order), written once per N as a Parquet file into a temporary directory
(generated with numpy and pyarrow; removed afterwards).  The pattern,
``Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
.within(timedelta(minutes=10))``, starts a partial match on every event and never
completes one, so each card waits for its 10-minute window to close and is then idle for
good.  When the input ends, only the cards of the last 10 minutes of event time
(:data:`WINDOW_MS` ÷ :data:`SPACING_MS` = 60,000, or all N when fewer) have anything
pending; every other card has been seen and is idle.

The job, on the embedded runtime: ``Job(FileSource(path)).key_by("card").timestamps("ts")
.match(p, engine=...).checkpoint(tmp, every_events=CHECKPOINT_EVERY)`` (monotonous
watermarks, the default cap of partial matches), run with ``run(stop=...)``: the stop
callback says yes once the batch holding the last event has been processed, so the run
ends ``stopped`` (with a checkpoint taken at the stop) before the end of input, which
would otherwise move the watermark to the end of time and close every window.  The cases:

1. **numba**: the numba engine at each N (100k, 1M, 5M; ``--quick``: 10k, 100k, 500k).
2. **reference**: the reference engine, at the smallest N only (it is slow).
3. **no expiry** (the baseline): the numba engine with ``within(timedelta(days=365))``, so
   that no window closes and every card seen keeps its partial match: what holding every
   key costs; at the smallest N only.

Each case runs in a fresh process (``benchmarks.run._spawn``): it first runs the same job
on the first 1,000 events (the numba kernel loaded from its cache, readers imported), then
the measured run.  Each reports, from the run's :class:`cep.runtime.Summary`: events,
seconds, events/s, keys with state at the end (``keys_with_state``), partial matches,
state bytes (``state_bytes``: the engine's state and the waiting events, in memory), the
last checkpoint's bytes (``last_checkpoint_bytes``: the checkpoint taken at the stop) and
the largest checkpoint written during the run; then the total size of the newest checkpoint
directory on disk and the process's peak resident memory (``ru_maxrss``; and how much of it
the measured run added).  The report, with a "Targets" section saying whether state and
checkpoint size follow the keys with pending work rather than the keys seen, goes to
``benchmarks/STATE_RESULTS.md`` (``--quick``: ``benchmarks/.data/STATE_RESULTS-quick.md``,
so a quick run never replaces the full results).  Exit status 1 when a target is missed.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.run import (
    ROOT,
    _spawn,
    case_parser,
    run_info,
    run_lines,
    serve_worker,
    write_report,
)

OUT = ROOT / "benchmarks" / "STATE_RESULTS.md"
QUICK_OUT = ROOT / "benchmarks" / ".data" / "STATE_RESULTS-quick.md"
SIZES = (100_000, 1_000_000, 5_000_000)
QUICK_SIZES = (10_000, 100_000, 500_000)
SPACING_MS = 10  # one event (one new card) every 10 ms of event time
WINDOW = timedelta(minutes=10)  # the pattern's within()
WINDOW_MS = int(WINDOW.total_seconds() * 1000)
NO_EXPIRY_DAYS = 365  # the baseline's window: nothing closes
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z, the first event's time
BATCH = 65_536  # FileSource's default batch size
CHECKPOINT_EVERY = 500_000
WARM_EVENTS = 1_000
WRITE_ROWS = 1_000_000  # rows generated and written at a time
#: "O(keys with pending work)" read as: from the smallest to the largest N (50x the keys
#: seen), state bytes and checkpoint bytes grow by at most this factor times the growth of
#: the keys with pending work (none at the full sizes: 60,000 pending at each N)
TARGET_FLAT = 1.25
#: keys with state at the end: within this fraction of the cards of the last window
TARGET_KEYS = 0.01


# ====================================================================== input
def events(start: int, stop: int) -> Any:
    """Cards ``start`` to ``stop - 1`` as a pyarrow Table, one event each, in time order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    i = np.arange(start, stop, dtype=np.int64)
    card = pc.binary_join_element_wise("c", pc.cast(pa.array(i), pa.string()), "")
    return pa.table({"card": card, "v": pa.array(np.ones(len(i), dtype=np.int64)),
                     "ts": pa.array(START_MS + i * SPACING_MS)})


def write_events(n: int, path: Path) -> Path:
    """``n`` cards into the Parquet file ``path``, a million rows at a time."""
    import pyarrow.parquet as pq

    writer = None
    try:
        for start in range(0, n, WRITE_ROWS):
            table = events(start, min(n, start + WRITE_ROWS))
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return path


def pending(n: int) -> int:
    """The cards with a window still open at the end: those of the last 10 minutes."""
    return min(n, WINDOW_MS // SPACING_MS)


# ====================================================================== worker
def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pattern(no_expiry: bool) -> Any:
    """The pattern every case runs: a window of 10 minutes (the baseline: 365 days)."""
    from cep import Pattern, col

    within = timedelta(days=NO_EXPIRY_DAYS) if no_expiry else WINDOW
    return (Pattern.begin("a").where(col("v") == 1)
            .followed_by("b").where(col("v") == 2).within(within))


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_job(path: Path, n: int, engine: str, no_expiry: bool, chk: Path) -> dict[str, Any]:
    """The job on ``path`` (``n`` events), stopped once the batch holding the last event is
    processed; what its summary and its newest checkpoint say."""
    from cep.runtime import CheckpointStore, FileSource, Job

    job = (Job(FileSource(path, batch_size=BATCH)).key_by("card").timestamps("ts")
           .match(pattern(no_expiry), engine=engine)
           .checkpoint(chk, every_events=CHECKPOINT_EVERY))
    seen = {"events": 0, "batches": 0, "checkpoint_max": 0}

    def progress(s: Any) -> None:
        seen["events"] = s.events_in
        seen["batches"] += 1
        seen["checkpoint_max"] = max(seen["checkpoint_max"], s.last_checkpoint_bytes)

    s = job.run(progress=progress, stop=lambda: seen["events"] >= n)
    store = CheckpointStore(chk)
    newest = store.latest()
    return {
        "events": s.events_in, "seconds": s.seconds, "events_per_second": s.events_per_second,
        "stopped": s.stopped, "keys_with_state": s.keys_with_state,
        "partial_matches": s.partial_matches, "peak_partial_matches": s.peak_partial_matches,
        "timeouts": s.timeouts, "matches": s.matches, "late": s.late, "buffered": s.buffered,
        "state_bytes": s.state_bytes, "checkpoint_bytes": s.last_checkpoint_bytes,
        "checkpoint_max": seen["checkpoint_max"],
        "checkpoints": s.checkpoints, "checkpoint_seconds": s.last_checkpoint_seconds,
        "checkpoint_dir_bytes": _dir_bytes(store.path(newest)) if newest is not None else 0,
        "batches": seen["batches"] - 1,  # progress is called once more at the end
        "engine": s.engine,
    }


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process: the same job on the first 1,000 events, then measured."""
    import pyarrow.parquet as pq

    path = Path(spec["path"])
    work = Path(tempfile.mkdtemp(prefix="cep-bench-state-"))
    try:
        head = work / "head.parquet"
        pq.write_table(events(0, WARM_EVENTS), head)
        run_job(head, WARM_EVENTS, spec["engine"], spec["no_expiry"], work / "warm")
        before = _rss_mb()
        result = run_job(path, spec["n"], spec["engine"], spec["no_expiry"], work / "chk")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peak = _rss_mb()
    return {**spec, **result, "peak_mb": peak, "rise_mb": peak - before}


# ====================================================================== parent
def _case(name: str, n: int, engine: str, no_expiry: bool, path: Path) -> dict[str, Any]:
    r = _spawn({"variant": name, "n": n, "engine": engine, "no_expiry": no_expiry,
                "path": str(path)}, None, module="benchmarks.state")
    print(f"{name:10} {n:>10,} keys {r['seconds']:>7.2f} s {r['events_per_second']:>10,.0f} ev/s "
          f"{r['keys_with_state']:>10,} with state {r['state_bytes'] / 1e6:>8.1f} MB state "
          f"{r['checkpoint_bytes'] / 1e6:>7.1f} MB checkpoint {r['peak_mb']:>6,.0f} MB RSS",
          flush=True)
    return r


def measure(sizes: tuple[int, ...], data: Path) -> list[dict[str, Any]]:
    """Every case, each in a fresh process; the input of each N written just before."""
    rows = []
    for n in sizes:
        path = write_events(n, data / f"cards-{n}.parquet")
        rows.append(_case("numba", n, "numba", False, path))
        if n == sizes[0]:
            rows.append(_case("reference", n, "reference", False, path))
            rows.append(_case("no expiry", n, "numba", True, path))
        path.unlink()
    return rows


# ====================================================================== report
def _mb(b: float) -> str:
    return f"{b / 1e6:,.1f} MB"


def _per_key(r: dict[str, Any], what: str) -> str:
    return f"{r[what] / r['keys_with_state']:,.0f}" if r["keys_with_state"] else "—"


def _window(r: dict[str, Any]) -> str:
    return f"{NO_EXPIRY_DAYS} days (no expiry)" if r["no_expiry"] else "10 min"


def section_results(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Results",
        "",
        "Keys seen = events (one per card). Pending = cards whose window is still open at the "
        "stop (the last 10 minutes of event time; all of them with no expiry). Time = "
        "`Summary.seconds` (in brackets: the checkpoint at the stop, "
        "`Summary.last_checkpoint_seconds`, part of it). State = `Summary.state_bytes`; "
        "checkpoint = `Summary.last_checkpoint_bytes` (the checkpoint taken at the stop), the "
        "largest checkpoint of the run (`last_checkpoint_bytes` after each batch), and the "
        "newest checkpoint directory's size on disk; per key = ÷ keys with state. Peak RSS = "
        "the process's `ru_maxrss` (in brackets: what the measured run added to it).",
        "",
        "| engine | window | keys seen | pending | keys with state | partial matches | "
        "timed out | time | events/s | state | per key | checkpoint: at stop / largest / on "
        "disk | per key | peak RSS |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {_window(r)} | {r['n']:,} | {_pending(r):,} | "
            f"{r['keys_with_state']:,} | {r['partial_matches']:,} | {r['timeouts']:,} | "
            f"{r['seconds']:.2f} s ({r['checkpoint_seconds']:.2f}) | "
            f"{_rate(r['events_per_second'])} | {_mb(r['state_bytes'])} | "
            f"{_per_key(r, 'state_bytes')} B | {_mb(r['checkpoint_bytes'])} / "
            f"{_mb(r['checkpoint_max'])} / {_mb(r['checkpoint_dir_bytes'])} | "
            f"{_per_key(r, 'checkpoint_bytes')} B | {r['peak_mb']:,.0f} MB "
            f"(+{r['rise_mb']:,.0f}) |")
    lines += [
        "",
        "How each run went: batches processed before the stop, whether it ended stopped, "
        "checkpoints written, the most partial matches held at once (after a batch's events, "
        "before its watermark closes windows), events still waiting for the watermark at the "
        "stop (the newest, as the watermark is the newest time - 1), matches, late events.",
        "",
        "| engine | window | keys seen | batches | stopped | checkpoints | peak partial "
        "matches | waiting | matches | late |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {_window(r)} | {r['n']:,} | {r['batches']} | "
            f"{'yes' if r['stopped'] else '**no**'} | {r['checkpoints']} | "
            f"{r['peak_partial_matches']:,} | {r['buffered']:,} | {r['matches']:,} | "
            f"{r['late']:,} |")
    return lines


def _rate(rate: float) -> str:
    return f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:,.0f}k"


def _pending(r: dict[str, Any]) -> int:
    return r["n"] if r["no_expiry"] else pending(r["n"])


def _keys_ok(r: dict[str, Any]) -> bool:
    want = _pending(r)
    return r["stopped"] and abs(r["keys_with_state"] - want) <= TARGET_KEYS * want


def _verdict(ratio: float, most: float) -> str:
    if ratio <= most:
        return f"**met** ({(most - ratio) / most:.0%} to spare)"
    return f"**missed** by {(ratio - most) / most:.0%}"


def targets(rows: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """The "Targets" section, and whether every target is met."""
    numba = [r for r in rows if r["variant"] == "numba"]
    small, big = numba[0], numba[-1]
    ref = next(r for r in rows if r["variant"] == "reference")
    full = next(r for r in rows if r["variant"] == "no expiry")
    grow = big["n"] / small["n"]
    live = pending(big["n"]) / pending(small["n"])
    lines = [
        "## Targets",
        "",
        "Issue #14: \"live state and checkpoint size at the end are O(keys with pending work), "
        "shown in a benchmark that reports state bytes at 100k, 1M and 5M keys\". Read as: "
        f"(1) keys with state at the end within {TARGET_KEYS:.0%} of the cards whose window is "
        f"still open, whatever the cards seen; (2) from {small['n']:,} to {big['n']:,} keys "
        f"seen ({grow:.0f}× the keys), while the keys with pending work go from "
        f"{pending(small['n']):,} to {pending(big['n']):,} ({live:.2f}×), the state and the "
        f"checkpoint grow by at most {TARGET_FLAT:g} × {live:.2f} = {TARGET_FLAT * live:.2f}×.",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    ok = True
    keys = all(_keys_ok(r) for r in rows)
    ok &= keys
    lines.append(
        "| keys with state at the end = the cards with a window still open, not the cards "
        "seen | " + "; ".join(f"{r['engine']}, {_window(r)}, {r['n']:,} seen: "
                              f"{r['keys_with_state']:,} (pending {_pending(r):,})"
                              for r in rows)
        + f" | {'**met**' if keys else '**missed**'} |")
    for what, key in (("state bytes (`Summary.state_bytes`)", "state_bytes"),
                      ("checkpoint at the stop (`Summary.last_checkpoint_bytes`)",
                       "checkpoint_bytes"),
                      ("newest checkpoint directory on disk", "checkpoint_dir_bytes"),
                      ("largest checkpoint of the run", "checkpoint_max")):
        ratio = big[key] / small[key] if small[key] else float("inf")
        met = ratio <= TARGET_FLAT * live
        ok &= met
        lines.append(
            f"| {what} from {small['n']:,} to {big['n']:,} keys seen: at most "
            f"{TARGET_FLAT * live:.2f}× | " + " → ".join(_mb(r[key]) for r in numba)
            + f": {ratio:.2f}× | {_verdict(ratio, TARGET_FLAT * live)} |")
    lines += [
        "",
        f"What holding every key would cost (the baseline, measured in the same run): with a "
        f"window that never closes, {full['n']:,} cards leave {full['keys_with_state']:,} keys "
        f"with state, {_mb(full['state_bytes'])} of state ({_per_key(full, 'state_bytes')} B "
        f"per key) and a checkpoint of {_mb(full['checkpoint_bytes'])} "
        f"({_per_key(full, 'checkpoint_bytes')} B per key); the 10-minute window at the same N "
        f"holds {small['keys_with_state']:,} keys, {_mb(small['state_bytes'])} and "
        f"{_mb(small['checkpoint_bytes'])}. At those bytes per key, holding all "
        f"{big['n']:,} keys seen would take about "
        f"{_mb(full['state_bytes'] / full['keys_with_state'] * big['n'])} of state and a "
        f"checkpoint of about "
        f"{_mb(full['checkpoint_bytes'] / full['keys_with_state'] * big['n'])} (an "
        f"extrapolation, not measured), against {_mb(big['state_bytes'])} and "
        f"{_mb(big['checkpoint_bytes'])} measured.",
        "",
        f"The reference engine at {ref['n']:,}: {ref['keys_with_state']:,} keys with state, "
        f"{_mb(ref['state_bytes'])} of state ({_per_key(ref, 'state_bytes')} B per key; numba "
        f"{_per_key(small, 'state_bytes')} B), a checkpoint of "
        f"{_mb(ref['checkpoint_bytes'])}; {_rate(ref['events_per_second'])} events/s against "
        f"{_rate(small['events_per_second'])} for numba.",
        "",
        "Peak RSS of the numba runs (not a target of the issue; the process, with the "
        "interpreter, numba and pyarrow): " + " → ".join(
            f"{r['peak_mb']:,.0f} MB (+{r['rise_mb']:,.0f})" for r in numba)
        + f" from {small['n']:,} to {big['n']:,} keys seen; the most partial matches held "
        "at once (a batch's new keys before its watermark closes windows): " + " → ".join(
            f"{r['peak_partial_matches']:,}" for r in numba) + ".",
    ]
    return lines, ok


def _uncommitted() -> str:
    """The tracked files changed since that commit (what ``-dirty`` stands for), if any."""
    import subprocess

    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                             cwd=ROOT, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""
    files = [line[3:] for line in out.splitlines() if line.strip()]
    return f" (uncommitted changes to: {', '.join(files)})" if files else ""


def report(rows: list[dict[str, Any]], sizes: tuple[int, ...], run: dict[str, Any]) -> str:
    load = run["load"]
    lines = [
        "# Idle keys hold no state (issue #14)",
        "",
        *run_lines(run, _uncommitted()),
    ]
    if load[0] >= 1.2:
        lines += ["", f"**The machine was busy** when the run began (load average {load[0]:.2f} "
                      "on 2 cores, other work running): times and events/s are lower than on an "
                      "idle machine; the state, checkpoint and key counts do not depend on it."]
    lines += [
        "",
        f"Input: N cards with one event each (`card` = `c{{i}}`, `v` = 1, `ts` every "
        f"{SPACING_MS} ms), N = {', '.join(f'{n:,}' for n in sizes)}, as Parquet; pattern "
        "`Pattern.begin(\"a\").where(col(\"v\") == 1).followed_by(\"b\").where(col(\"v\") == 2)"
        ".within(timedelta(minutes=10))`, so every card starts a partial match that no event "
        f"completes, and at the end only the last {pending(sizes[-1]):,} cards (10 minutes at "
        f"{SPACING_MS} ms) have a window still open. The job runs on the embedded runtime "
        f"(`FileSource`, batches of {BATCH:,}, monotonous watermarks, a checkpoint every "
        f"{CHECKPOINT_EVERY:,} events) and is stopped (`run(stop=...)`) once the batch holding "
        "the last event is processed, before the end of input would close every window; a "
        "checkpoint is taken at the stop. One fresh process per case, after a warm-up on the "
        "first 1,000 events. What each case runs: see the docstring of `benchmarks/state.py`.",
    ]
    if run["quick"]:
        lines += ["", "**Quick run**: the targets are for 100k, 1M and 5M keys; these numbers "
                      "only show that the benchmark runs."]
    section, _ = targets(rows)
    for part in (section_results(rows), section):
        lines += ["", *part]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every case (each in its own process) and write the report."""
    parser = case_parser("python -m benchmarks.state", __doc__,
                         "10k, 100k and 500k keys; report to "
                         "benchmarks/.data/STATE_RESULTS-quick.md")
    args = parser.parse_args(argv)
    if serve_worker(args, worker):
        return 0
    sizes = QUICK_SIZES if args.quick else SIZES
    out = args.out or (QUICK_OUT if args.quick else OUT)
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    data = Path(tempfile.mkdtemp(prefix="cep-bench-state-data-"))
    try:
        rows = measure(sizes, data)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    run = run_info("python -m benchmarks.state", argv, began, load_before, quick=args.quick)
    write_report(out, report(rows, sizes, run))
    _, ok = targets(rows)
    if not ok:
        print("a target is missed: see the Targets section", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
