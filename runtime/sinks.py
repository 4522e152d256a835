"""Sinks: where matches, timeouts, late events and dead letters go.

File sinks are transactional: records of one checkpoint epoch are written to a
pending file, which becomes visible (renamed to its final name) only when the
checkpoint that covers it is complete.  After a crash, pending files of epochs
the last checkpoint covers are committed and the others deleted, so the
committed files hold every record exactly once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from cep.errors import CEPError


def to_json(value: Any) -> Any:
    """Plain JSON for records: datetimes as ISO strings, other objects as their str()."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return to_json(value.item())
    if hasattr(value, "__dict__"):
        return to_json(vars(value))
    return str(value)


class Sink:
    """Receives records (dicts); transactional sinks commit per checkpoint epoch."""

    transactional = False

    def write(self, records: list[dict[str, Any]]) -> None:
        """Receive a batch of records; a transactional sink holds them until
        :meth:`prepare` and :meth:`commit` of their epoch.

        >>> sink = ListSink()
        >>> sink.write([{"type": "match", "key": 1}])
        >>> sink.records
        [{'type': 'match', 'key': 1}]
        """
        raise NotImplementedError

    def prepare(self, epoch: int) -> None:
        """Make the epoch's records durable but invisible."""

    def commit(self, epoch: int) -> None:
        """Make the epoch's records visible (the checkpoint covering them is complete)."""

    def recover(self, committed_epoch: int) -> None:
        """After a restart: commit pending epochs <= ``committed_epoch``, drop the others."""

    def close(self) -> None:
        """End of a run."""


class CallbackSink(Sink):
    """Calls ``fn(record)`` for every record as it is produced (not transactional)."""

    def __init__(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        self.fn = fn

    def write(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.fn(r)


class ListSink(Sink):
    """Collects records in ``.records`` (tests, notebooks)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)


class FileSink(Sink):
    """Exactly-once files: ``<path>/part-<epoch>.<format>``, one per checkpoint epoch.

    ``format`` is ``jsonl``, ``parquet`` or ``csv`` (nested values as JSON text).
    """

    transactional = True

    def __init__(self, path: str | os.PathLike[str], format: str | None = None) -> None:
        self.path = Path(path)
        fmt = format or (self.path.suffix[1:] if self.path.suffix else "jsonl")
        if fmt not in ("jsonl", "parquet", "csv"):
            raise CEPError(f"sink {self.path}: unknown format {fmt!r} (use jsonl, parquet or csv)")
        self.format = fmt
        if self.path.suffix:
            self.path = self.path.with_suffix("")
        self.path.mkdir(parents=True, exist_ok=True)
        self._pending: list[dict[str, Any]] = []

    def _name(self, epoch: int) -> Path:
        return self.path / f"part-{epoch:09d}.{self.format}"

    def write(self, records: list[dict[str, Any]]) -> None:
        self._pending.extend(records)

    def prepare(self, epoch: int) -> None:
        records, self._pending = self._pending, []
        final = self._name(epoch)
        pending = final.with_name(final.name + ".pending")
        tmp = final.with_name(final.name + ".tmp")
        data = self._encode([to_json(r) for r in records])
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, pending)

    def commit(self, epoch: int) -> None:
        final = self._name(epoch)
        pending = final.with_name(final.name + ".pending")
        if pending.exists():
            os.replace(pending, final)

    def recover(self, committed_epoch: int) -> None:
        self._pending = []
        for p in self.path.glob("part-*.pending"):
            epoch = int(p.name.split("-")[1].split(".")[0])
            if epoch <= committed_epoch:
                os.replace(p, p.with_name(p.name[: -len(".pending")]))
            else:
                p.unlink()
        for p in self.path.glob("part-*.tmp"):
            p.unlink()
        for p in self.path.glob(f"part-*.{self.format}"):
            if int(p.name.split("-")[1].split(".")[0]) > committed_epoch:
                p.unlink()  # written by an attempt after the last checkpoint

    def files(self) -> list[Path]:
        """The committed files, in epoch order (pending ones are not listed).

        >>> sink = FileSink("committed/matches.jsonl")
        >>> sink.write([{"type": "match"}]); sink.prepare(1)
        >>> sink.files()
        []
        >>> sink.commit(1); [f.name for f in sink.files()]
        ['part-000000001.jsonl']
        """
        return sorted(self.path.glob(f"part-*.{self.format}"))

    def read(self) -> list[dict[str, Any]]:
        """Every committed record, in order."""
        out: list[dict[str, Any]] = []
        for p in self.files():
            out.extend(read_records(p))
        return out

    def _encode(self, records: list[dict[str, Any]]) -> bytes:
        if self.format == "jsonl":
            return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode()
        import io

        import pyarrow as pa

        flat = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()}
                for r in records]
        columns = sorted({k for r in flat for k in r})
        table = pa.table({c: pa.array([_scalar(r.get(c)) for r in flat], pa.string())
                          for c in columns}) if flat else pa.table({})
        buf = io.BytesIO()
        if self.format == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, buf)
        else:
            import pyarrow.csv as pcsv

            if table.num_columns:
                pcsv.write_csv(table, buf)
        return buf.getvalue()


def _scalar(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return json.dumps(v)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of one committed sink file (nested values stay JSON text for parquet/csv)."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    import pyarrow.csv as pcsv

    if path.stat().st_size == 0:
        return []
    return pcsv.read_csv(path).to_pylist()
