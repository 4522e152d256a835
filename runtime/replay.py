"""Replay history through the runtime: ``cep replay`` and :func:`replay`.

    cep replay patterns.fraud:card_testing data/*.parquet --key card_id --time ts \\
        --out-of-orderness 5s --checkpoint-dir chk --output out/matches.jsonl

Matches go to ``out/matches/part-*.jsonl`` (one file per checkpoint epoch, each
committed with its checkpoint); timeouts, late events and dead letters to
``out/timeouts/``, ``out/late/`` and ``out/dead_letters/`` next to it.
``kill -USR1 <pid>`` takes a savepoint on demand.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from cep.errors import CEPError
from cep.pattern import Pattern
from runtime.job import Job, Summary
from runtime.sinks import FileSink
from runtime.sources import FileSource
from runtime.watermarks import WatermarkStrategy

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration(text: str) -> int:
    """``250ms``, ``5s``, ``10m``, ``2h``, ``1d`` or plain milliseconds -> milliseconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*", text)
    if not m:
        raise CEPError(f"cannot read duration {text!r}: use e.g. 500ms, 5s, 10m, 2h")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "ms"])


def sinks_for(output: str | Path) -> dict[str, FileSink]:
    """The file sinks of a replay writing matches to ``output``: one per record type, the
    format from ``output``'s suffix (default JSONL), side outputs in sibling directories.

    >>> sinks = sinks_for("alerts/matches.parquet")
    >>> sorted(sinks), sinks["match"].format
    (['dead_letter', 'late', 'match', 'timeout'], 'parquet')
    >>> sinks["match"].path.as_posix(), sinks["dead_letter"].path.as_posix()
    ('alerts/matches', 'alerts/dead_letters')
    """
    out = Path(output)
    fmt = out.suffix[1:] if out.suffix else "jsonl"
    base = out.with_suffix("") if out.suffix else out
    parent = base.parent
    return {
        "match": FileSink(base, fmt),
        "timeout": FileSink(parent / "timeouts", fmt),
        "late": FileSink(parent / "late", fmt),
        "dead_letter": FileSink(parent / "dead_letters", fmt),
    }


def replay(
    pattern: Pattern,
    inputs: Sequence[str | Path],
    *,
    key: str | Sequence[str] | None,
    time: str,
    output: str | Path,
    out_of_orderness: timedelta | int = 0,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 100_000,
    resume: bool = False,
    speed: float | None = None,
    engine: str = "auto",
    progress: bool = True,
    batch_size: int = 65536,
    time_unit: str | None = None,
) -> Summary:
    """Replay files through a CEP job; return its :class:`Summary`.

    Matches go to ``output`` (see :func:`sinks_for`); ``progress`` shows a progress bar.
    ``key`` is a field or a list of fields (a composite key); integer times are epoch
    milliseconds unless ``time_unit`` says ``"s"``, ``"us"`` or ``"ns"`` (see
    :meth:`Job.timestamps`).

    >>> import json
    >>> from pathlib import Path
    >>> from patterns.fraud import card_testing
    >>> rows = [{"card_id": "c1", "ts": 1000 * i, "amount": a}
    ...         for i, a in enumerate([1, 2, 3, 900, 5])]
    >>> _ = Path("cards.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> summary = replay(card_testing(), ["cards.jsonl"], key="card_id", time="ts",
    ...                  output="out/matches.jsonl", progress=False)
    >>> summary.events_in, summary.matches
    (5, 1)
    >>> [f.name for f in Path("out/matches").iterdir()]
    ['part-000000001.jsonl']
    """
    import signal

    if resume and checkpoint_dir is None:
        raise CEPError("--resume needs --checkpoint-dir (where the checkpoints are)")
    sinks = sinks_for(output)
    requested: list[bool] = []
    if checkpoint_dir is not None and hasattr(signal, "SIGUSR1"):
        # `kill -USR1 <pid>` takes a savepoint at the next batch boundary
        try:
            signal.signal(signal.SIGUSR1, lambda *_: requested.append(True))
        except ValueError:  # not the main thread
            pass

    def savepoint() -> bool:
        if requested:
            requested.clear()
            return True
        return False

    job = (
        Job(FileSource(*inputs, batch_size=batch_size))
        .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(out_of_orderness))
        .timestamps(time, unit=time_unit)
        .match(pattern, engine=engine)
    )
    if key is not None:
        job = job.key_by(key)
    for kind, sink in sinks.items():
        job = job.sink(sink, kinds=(kind,))
    if checkpoint_dir is not None:
        job = job.checkpoint(checkpoint_dir, every_events=checkpoint_every)
    if not progress:
        return job.run(resume=resume, speed=speed, savepoint=savepoint)
    return _with_progress(job, resume, speed, savepoint)


def _with_progress(job: Job, resume: bool, speed: float | None, savepoint: Any) -> Summary:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = _count_rows(job.source)
    columns = [
        TextColumn("[bold]replay"), BarColumn(), TextColumn("{task.completed:,} events"),
        TextColumn("{task.fields[rate]}"), TextColumn("matches {task.fields[matches]:,}"),
        TextColumn("wm lag {task.fields[lag]}"), TimeElapsedColumn(),
    ]
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("replay", total=total, rate="", matches=0, lag="-")

        def update(s: Summary) -> None:
            lag = "-"
            if s.last_event_time is not None and -(2**62) < s.watermark < 2**62:
                lag = f"{max(0, s.last_event_time - s.watermark) / 1000:.1f}s"
            bar.update(task, completed=s.events_in, rate=f"{s.events_per_second:,.0f} ev/s",
                       matches=s.matches, lag=lag)

        return job.run(resume=resume, speed=speed, progress=update, savepoint=savepoint)


def _count_rows(source: Any) -> int | None:
    total = 0
    for f in getattr(source, "files", []):
        if f.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            total += pq.ParquetFile(f).metadata.num_rows
        else:
            return None
    return total or None


def print_summary(s: Summary, output: str | Path) -> None:
    """Print the summary of a replay writing to ``output`` as a table (what ``cep replay``
    shows at the end)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="replay summary", show_header=False)
    rows = [
        ("engine", s.engine),
        ("events", f"{s.events_in:,}"),
        ("processed", f"{s.processed:,}"),
        ("matches", f"{s.matches:,}"),
        ("timeouts", f"{s.timeouts:,}"),
        ("late events", f"{s.late:,}"),
        ("dead letters", f"{s.dead_letters:,}"),
        ("throughput", f"{s.events_per_second:,.0f} events/s"),
        ("peak partial matches", f"{s.peak_partial_matches:,}"),
        ("state at the end", f"{s.partial_matches:,} partial matches, {s.buffered:,} events "
                             "waiting for the watermark"),
        ("checkpoints", f"{s.checkpoints} (last {s.last_checkpoint_bytes:,} bytes, "
                        f"{s.last_checkpoint_seconds * 1000:.0f} ms)"),
        ("resumed from checkpoint", "-" if s.resumed_from is None else str(s.resumed_from)),
        ("output", str(output)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def main(argv: Sequence[str]) -> int:
    """``cep replay`` with arguments ``argv``; returns the exit status (2 after printing a
    :class:`~cep.errors.CEPError`).

    >>> import json
    >>> from pathlib import Path
    >>> rows = [{"card_id": "c1", "ts": 1000 * i, "amount": a}
    ...         for i, a in enumerate([1, 2, 3, 900])]
    >>> _ = Path("cards.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> main(["patterns.fraud:card_testing", "cards.jsonl", "--key", "card_id",
    ...       "--time", "ts", "--output", "replayed/matches.jsonl", "--quiet"])
    0
    """
    import argparse

    from cep.cli import load_pattern

    parser = argparse.ArgumentParser(prog="cep replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("pattern", help="module:attribute or file.py:attribute")
    parser.add_argument("inputs", nargs="+", help="Parquet/CSV/JSONL files or directories")
    parser.add_argument("--key", help="field to partition by")
    parser.add_argument("--time", required=True, help="event-time field")
    parser.add_argument("--out-of-orderness", default="0", help="allowed lateness, e.g. 5s")
    parser.add_argument("--checkpoint-dir", help="directory for checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=100_000, help="events")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    parser.add_argument("--output", required=True, help="e.g. out/matches.jsonl (.parquet, .csv)")
    parser.add_argument("--speed", type=float, help="N times real time (default: as fast as possible)")
    parser.add_argument("--engine", default="auto", choices=["auto", "reference", "numba"])
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    args = parser.parse_args(argv)
    try:
        summary = replay(
            load_pattern(args.pattern), args.inputs, key=args.key, time=args.time,
            output=args.output, out_of_orderness=parse_duration(args.out_of_orderness),
            checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
            resume=args.resume, speed=args.speed, engine=args.engine,
            progress=not args.quiet, batch_size=args.batch_size,
        )
    except CEPError as err:
        print(f"cep replay: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print_summary(summary, args.output)
    return 0
