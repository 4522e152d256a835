"""Checkpoints on disk: atomic, versioned, checksummed, and never pickle.

A checkpoint is a directory ``chk-<id>`` holding ``manifest.json`` (format,
version, pattern fingerprint, job state: source offsets, watermarks, sink
transactions, metrics; and the SHA-256 of every other file), the engines' numeric
arrays in one ``arrays.npz`` (``.npy`` members, loaded with ``allow_pickle=False``),
and events as Arrow IPC files.  One file for every array, not one each: a job of
100 rules held 800 arrays, and opening, writing and syncing a file apiece took more
of its checkpoint writer's time than encoding them.  It is written to a temporary
directory, fsynced and renamed into place, so a reader sees a whole checkpoint or none.
Anything that does not check out is refused with a message saying what is wrong.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cep.errors import CEPError, CheckpointError, ForeignCheckpointError
from cep.jsonvalue import exact_table, from_json, to_json
from cep.nfa.engine import Snapshot
from cep.nfa.events import is_table

FORMAT = "cep.checkpoint"
#: 2: waiting events as one Arrow chunk with control columns (the columnar runtime); the
#: row runtime's checkpoints (1) are refused, naming the version.  3: the engines' arrays
#: in one ``arrays.npz`` (2 had a ``.npy`` file per array).  4: a job's rules may hold
#: their events once for all (``shared_rows`` in the engine state); 3 is still read
VERSION = 4
#: the versions this cep reads
READS = (3, 4)
#: the file holding every engine array
ARRAYS = "arrays.npz"


class CheckpointWarning(UserWarning):
    """A damaged checkpoint was passed over and the job resumed from an older one."""


@dataclass
class Checkpoint:
    """What a checkpoint holds, in memory: the job's state (offsets, watermarks, metrics),
    the engine's :class:`~cep.nfa.engine.Snapshot` and the events waiting for the
    watermark (an Arrow IPC file, see :func:`cep.runtime.buffer.to_ipc`); ``path`` is set
    when it was loaded from disk."""

    id: int
    job: dict[str, Any]
    engine: Snapshot
    buffered: bytes = b""
    #: how many events ``buffered`` holds (recorded in the manifest)
    buffered_count: int = 0
    path: Path | None = None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_digest(manifest: dict[str, Any]) -> str:
    """Checksum of the manifest itself (every field but the checksum, canonical JSON)."""
    return _sha256(_canonical(manifest).encode())


def _canonical(manifest: dict[str, Any]) -> str:
    """The text the manifest's checksum is of: every field but the checksum, keys sorted."""
    return json.dumps({k: v for k, v in manifest.items() if k != "checksum"}, sort_keys=True)


def rows_to_bytes(rows: Any, what: str) -> bytes:
    """Events as an Arrow IPC file (empty bytes for none): an Arrow table as it is (no
    Python object per event: what the numba engine holds of Arrow input); dicts of plain
    values become columns, other values one ``value`` column; events Arrow cannot hold as
    columns (a field of two types, an integer beyond 64 bits, bytes keys...) one column of
    tagged JSON (:mod:`cep.jsonvalue`), so whatever plain data the engine took is kept
    exactly; ``what`` names them in the error for values that are not plain data.

    >>> rows_from_bytes(rows_to_bytes([{"v": 1}, {"v": 2}], "events"), dict_rows=True)
    [{'v': 1}, {'v': 2}]
    >>> rows_from_bytes(rows_to_bytes([{"v": 1}, {"v": "x"}], "events"), dict_rows=True)
    [{'v': 1}, {'v': 'x'}]
    """
    table = _rows_table(rows, what)
    if table is None:
        return b""
    sink = io.BytesIO()
    _write_ipc(table, sink)
    return sink.getvalue()


def _rows_table(rows: Any, what: str) -> Any:
    """The table :func:`rows_to_bytes` writes (None for no events)."""
    import pyarrow as pa

    if is_table(rows):  # Arrow columns already: written as they are
        return rows if rows.num_rows else None
    if not rows:
        return None
    table = exact_table(rows)
    if table is None:  # columns would change a value (1 among floats, a missing field)
        try:
            texts = [to_json(r) for r in rows]
        except CEPError as err:
            raise CheckpointError(f"cannot checkpoint {what}: {err}") from None
        table = pa.table({"json": pa.array(texts, pa.string())}).replace_schema_metadata(
            {_ENCODING: b"json"})
    return table


def _write_ipc(table: Any, sink: Any) -> None:
    import pyarrow as pa

    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


#: schema metadata of an events file held as tagged JSON, one text column
_ENCODING = b"cep.encoding"


def rows_from_bytes(data: bytes, dict_rows: bool, name: str = "events",
                    as_table: bool = False) -> Any:
    """The events :func:`rows_to_bytes` wrote (dicts, or the bare values when
    ``dict_rows`` is false; with ``as_table``, events of named fields stay the Arrow table
    they were written as); bytes that are not an Arrow IPC file are a
    :class:`CheckpointError` naming ``name``.

    >>> rows_from_bytes(rows_to_bytes(["a", "b"], "events"), dict_rows=False)
    ['a', 'b']
    >>> rows_from_bytes(rows_to_bytes([{"v": 1}], "events"), True, as_table=True).num_rows
    1
    """
    import pyarrow as pa

    if not data:
        return []
    try:
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except (pa.ArrowInvalid, OSError) as err:
        raise CheckpointError(f"{name} is not an Arrow IPC file ({err})") from err
    if (table.schema.metadata or {}).get(_ENCODING) == b"json":
        try:
            return [from_json(t) for t in table.column("json").to_pylist()]
        except (CEPError, ValueError, TypeError, KeyError) as err:
            raise CheckpointError(f"{name} holds an event that is not tagged JSON ({err})"
                                  ) from err
    if dict_rows:
        return table if as_table else table.to_pylist()
    return table.column("value").to_pylist()


def write_arrays(arrays: dict[str, np.ndarray], f: Any) -> None:
    """Numeric arrays as one ``.npz`` file (an uncompressed zip of ``.npy`` members),
    written to the open binary file ``f``.

    >>> buf = io.BytesIO()
    >>> write_arrays({"a": np.arange(3)}, buf)
    >>> arrays_from_bytes(buf.getvalue(), "here")["a"].tolist()
    [0, 1, 2]
    """
    np.savez(f, **{name: np.ascontiguousarray(a) for name, a in arrays.items()})


def arrays_from_bytes(data: bytes, where: str) -> dict[str, np.ndarray]:
    """The arrays :func:`write_arrays` wrote; an array that would need pickle (Python
    objects), or bytes that are not such a file, is a :class:`CheckpointError` naming it."""
    import zipfile

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            out = {}
            for name in npz.files:
                try:
                    out[name] = npz[name]
                except ValueError as err:
                    raise CheckpointError(f"{where}: array {name!r} in {ARRAYS} is not a "
                                          f"numeric array ({err})") from err
            return out
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise CheckpointError(f"{where}: {ARRAYS} is not an array file ({err})") from err


def array_bytes(a: np.ndarray) -> bytes:
    """A numeric array in ``.npy`` format (read back with ``allow_pickle=False``).

    >>> array_bytes(np.arange(3))[:6]
    b'\\x93NUMPY'
    """
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


class CheckpointStore:
    """A directory of checkpoints; keeps the newest ``retain``.

    >>> from cep.nfa.engine import Snapshot
    >>> store = CheckpointStore("chk", retain=2)
    >>> for i in (1, 2, 3):
    ...     _ = store.write(Checkpoint(id=i, job={"offsets": {}}, engine=Snapshot()), "job-1")
    >>> store.ids(), store.latest()
    ([2, 3], 3)
    >>> store.load(3, "job-1").job
    {'offsets': {}}
    """

    def __init__(self, directory: str | os.PathLike[str], retain: int = 3) -> None:
        self.directory = Path(directory)
        self.retain = max(1, retain)
        self.directory.mkdir(parents=True, exist_ok=True)

    def ids(self) -> list[int]:
        """The ids of the complete checkpoints in the directory, oldest first."""
        out = []
        for p in self.directory.iterdir():
            if p.is_dir() and p.name.startswith("chk-") and p.name[4:].isdigit():
                out.append(int(p.name[4:]))
        return sorted(out)

    def path(self, checkpoint_id: int) -> Path:
        """The directory of checkpoint ``checkpoint_id`` (``chk-<id>``, zero-padded).

        >>> CheckpointStore("chk").path(7).name
        'chk-000000007'
        """
        return self.directory / f"chk-{checkpoint_id:09d}"

    # ------------------------------------------------------------------ write
    def write(self, cp: Checkpoint, fingerprint: str) -> Path:
        """Write ``cp`` for the job ``fingerprint`` atomically (temporary directory, fsync,
        rename), drop checkpoints beyond ``retain``, and return its directory.

        >>> from cep.nfa.engine import Snapshot
        >>> path = CheckpointStore("written").write(Checkpoint(1, {}, Snapshot()), "job-1")
        >>> sorted(f.name for f in path.iterdir())
        ['arrays.npz', 'buffered.arrow', 'events.arrow', 'manifest.json']
        """
        for name, array in cp.engine.arrays.items():
            if array.dtype == object:
                raise CheckpointError(f"engine array {name!r} holds Python objects")
        dict_rows = is_table(cp.engine.rows) or all(isinstance(r, dict) for r in cp.engine.rows)
        events = _rows_table(cp.engine.rows, "the events of partial matches")
        final = self.path(cp.id)
        tmp = self.directory / f".chk-{cp.id:09d}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        try:
            # each file encoded straight into it, not into bytes first: a job of many
            # rules checkpoints tens of megabytes, and copies of them in memory cost more
            # than writing them (fresh pages each time); the checksums are of the files
            with open(tmp / ARRAYS, "wb") as f:
                write_arrays(cp.engine.arrays, f)
                _synced(f)
            with open(tmp / "events.arrow", "wb") as f:
                if events is not None:
                    _write_ipc(events, f)
                _synced(f)
            _write_synced(tmp / "buffered.arrow", cp.buffered)
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "id": cp.id,
                "created": time.time(),
                "pattern": fingerprint,
                "job": cp.job,
                "engine": cp.engine.meta,
                "events_are_dicts": dict_rows,
                "buffered": cp.buffered_count,
                "files": {name: _file_sha256(tmp / name)
                          for name in (ARRAYS, "events.arrow", "buffered.arrow")},
            }
            # the file is the text the checksum is of, the checksum added (a 100-rule
            # job's manifest is megabytes of keys: serialised once)
            body = _canonical(manifest)
            text = f'{body[:-1]}, "checksum": "{_sha256(body.encode())}"}}'
            _write_synced(tmp / "manifest.json", text.encode())
            _fsync_dir(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(self.directory)
        self._prune()
        return final

    def _prune(self) -> None:
        for old in self.ids()[: -self.retain]:
            shutil.rmtree(self.path(old), ignore_errors=True)
        for stale in self.directory.glob(".chk-*.tmp-*"):
            if not stale.name.endswith(f"-{os.getpid()}"):
                shutil.rmtree(stale, ignore_errors=True)

    # ------------------------------------------------------------------- read
    def latest(self) -> int | None:
        """The newest checkpoint's id, or None when there is none.

        >>> CheckpointStore("empty").latest() is None
        True
        """
        ids = self.ids()
        return ids[-1] if ids else None

    def load(self, checkpoint_id: int, fingerprint: str) -> Checkpoint:
        """Read and verify checkpoint ``checkpoint_id``; one written for another
        ``fingerprint`` (pattern or engine), or damaged, is a :class:`CheckpointError`.

        >>> from cep.nfa.engine import Snapshot
        >>> store = CheckpointStore("loaded")
        >>> _ = store.write(Checkpoint(1, {}, Snapshot()), "job-1")
        >>> store.load(1, "job-2")
        Traceback (most recent call last):
        ...
        cep.errors.ForeignCheckpointError: checkpoint loaded/chk-000000001: written for a different job ...
        """
        return load_checkpoint(self.path(checkpoint_id), fingerprint)

    def load_newest(self, fingerprint: str) -> tuple[Checkpoint | None, list[str]]:
        """The newest checkpoint of job ``fingerprint`` that loads (None when there is
        none), and why each newer one was passed over.  A damaged checkpoint (emptied,
        truncated, corrupt) falls back to the one before: the sinks then drop the output
        committed after it, so the output stays exactly once.  One of another job or version
        is refused outright, as is a directory whose every checkpoint is damaged.

        >>> from cep.nfa.engine import Snapshot
        >>> store = CheckpointStore("fallback")
        >>> _ = store.write(Checkpoint(1, {}, Snapshot()), "job-1")
        >>> store.path(2).mkdir()  # a checkpoint emptied by a failing disk
        >>> cp, skipped = store.load_newest("job-1")
        >>> cp.id, skipped
        (1, ['checkpoint fallback/chk-000000002: no manifest.json (not a checkpoint, or truncated)'])
        """
        skipped: list[str] = []
        newest_error: CheckpointError | None = None
        for checkpoint_id in reversed(self.ids()):
            try:
                return self.load(checkpoint_id, fingerprint), skipped
            except ForeignCheckpointError:
                raise
            except CheckpointError as err:
                skipped.append(str(err))
                newest_error = newest_error or err
        if newest_error is not None:
            raise newest_error
        return None, []


def load_checkpoint(path: Path, fingerprint: str | None) -> Checkpoint:
    """Read and verify a checkpoint; raise :class:`CheckpointError` saying what is wrong."""
    try:
        return _load(path, fingerprint)
    except CheckpointError:
        raise
    except Exception as err:  # a field missing, a file that checks out but does not parse
        raise CheckpointError(
            f"checkpoint {path}: unreadable ({type(err).__name__}: {err}); it was not loaded"
        ) from err


def _load(path: Path, fingerprint: str | None) -> Checkpoint:
    where = f"checkpoint {path}"
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file():
        raise CheckpointError(f"{where}: no manifest.json (not a checkpoint, or truncated)")
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{where}: manifest.json is corrupt ({err})") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{where}: not a cep checkpoint (format {manifest.get('format')!r})"
                              if isinstance(manifest, dict) else f"{where}: not a cep checkpoint")
    if manifest.get("version") not in READS:
        raise ForeignCheckpointError(
            f"{where}: format version {manifest.get('version')!r}, this cep reads versions "
            f"{' and '.join(map(str, READS))}")
    missing = [f for f in ("id", "pattern", "job", "engine", "files", "buffered", "checksum")
               if f not in manifest]
    if missing:
        raise CheckpointError(f"{where}: manifest.json lacks {missing} (truncated or foreign)")
    if manifest["checksum"] != _manifest_digest(manifest):
        raise CheckpointError(f"{where}: manifest.json is corrupt (checksum mismatch)")
    if fingerprint is not None and manifest.get("pattern") != fingerprint:
        raise ForeignCheckpointError(
            f"{where}: written for a different job - pattern, engine, input, key, time or "
            f"options ({manifest.get('pattern')!r}, this job is {fingerprint!r}); resume it with "
            "the job that wrote it, or use another checkpoint directory"
        )
    files: dict[str, bytes] = {}
    for name, digest in manifest.get("files", {}).items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{where}: {name} is missing (truncated checkpoint)")
        data = file.read_bytes()
        if _sha256(data) != digest:
            raise CheckpointError(f"{where}: {name} is corrupt (checksum mismatch)")
        files[name] = data
    if ARRAYS not in files:
        raise CheckpointError(f"{where}: the manifest lists no {ARRAYS} (truncated or foreign)")
    arrays = arrays_from_bytes(files[ARRAYS], where)
    try:
        # as a table: the numba engine goes on holding Arrow events (a dict each would
        # slow every rule that holds them, and a job's next checkpoint)
        rows = rows_from_bytes(files.get("events.arrow", b""),
                                manifest.get("events_are_dicts", True), "events.arrow",
                                as_table=True)
    except CheckpointError as err:
        raise CheckpointError(f"{where}: {err}") from err
    buffered = files.get("buffered.arrow", b"")
    count = manifest["buffered"]
    return Checkpoint(
        id=int(manifest["id"]),
        job=manifest["job"],
        engine=Snapshot(manifest["engine"], arrays, rows),
        buffered=buffered,
        buffered_count=count if isinstance(count, int) else 0,
        path=path,
    )


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        _synced(f)


def _synced(f: Any) -> None:
    """Flush and fsync an open file."""
    f.flush()
    os.fsync(f.fileno())


def _file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read a megabyte at a time (from the page cache, just written)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
