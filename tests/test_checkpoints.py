"""Checkpoints of the embedded runtime, and the exactly-once file sinks committed with them.

The contract (DESIGN.md, "State and checkpoints"; issue 3):

* a job with ``.checkpoint(dir, every_events=N)`` writes ``chk-<id>`` directories
  holding ``manifest.json`` (format, version, pattern fingerprint, job state and the
  SHA-256 of every other file), the engines' numeric arrays in one ``arrays.npz`` of
  ``.npy`` members and events as Arrow IPC files; ``retain`` keeps the newest K;
* ``run(resume=True)`` continues from the newest checkpoint and the committed output
  is the same as an uninterrupted run's, for both engines;
* a missing, corrupt, truncated, foreign or crafted checkpoint is refused with a
  :class:`runtime.CheckpointError` (a :class:`cep.CEPError`) saying what is wrong,
  before anything is loaded or any output is touched; pickle is never used;
* :class:`runtime.FileSink` (JSONL, Parquet, CSV) is two-phase: an epoch's records are
  written pending and become visible when the checkpoint covering them is complete;
  on recovery pending files the last checkpoint covers are committed and the others
  discarded.

Crashes are simulated in-process here (a stop, a failing checkpoint write, a commit
that never happened); ``test_crash_recovery.py`` kills real processes.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import random
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cep import CEPError, Pattern, col
from cep.runtime import (
    CheckpointError,
    CheckpointStore,
    FileSink,
    IterableSource,
    Job,
    ListSink,
    WatermarkStrategy,
)
from cep.runtime.checkpoint import CheckpointWarning, ForeignCheckpointError
from cep.runtime.job import _Writer
from cep.runtime.sinks import read_records

# ---------------------------------------------------------------------------
# a keyed stream with matches and timeouts, and the same rule for both engines
# ---------------------------------------------------------------------------

EXPR_RULE = (
    Pattern.begin("a").where(col("v") < 3)
    .followed_by("b").where(col("v") > 7)
    .within(100)
)
LAMBDA_RULE = (
    Pattern.begin("a").where(lambda e: e["v"] < 3)
    .followed_by("b").where(lambda e: e["v"] > 7)
    .within(100)
)
ENGINES = pytest.mark.parametrize(
    ("engine", "rule"),
    [("reference", LAMBDA_RULE), ("numba", EXPR_RULE)],
    ids=["reference-lambda", "numba-expr"],
)
BATCH = 100  # events per source chunk; checkpoints are taken between chunks


def make_events(n: int = 1000, seed: int = 1, keys: int = 6) -> list[dict[str, Any]]:
    """In timestamp order; ``i`` makes every event (and so every match) unique."""
    rng = random.Random(seed)
    out, ts = [], 0
    for i in range(n):
        ts += rng.randint(1, 20)
        out.append({"k": f"k{rng.randint(0, keys - 1)}", "v": rng.randint(0, 9), "ts": ts, "i": i})
    return out


def shuffled(events: list[dict[str, Any]], bound: int, seed: int = 2) -> list[dict[str, Any]]:
    """Out of order by less than ``bound`` ms: sort by a jittered timestamp."""
    rng = random.Random(seed)
    return sorted(events, key=lambda e: e["ts"] + rng.uniform(0, bound - 1))


EVENTS = make_events()


def build(
    directory: Path,
    rule: Pattern,
    engine: str,
    *,
    events: list[dict[str, Any]] = EVENTS,
    every: int = 200,
    retain: int = 3,
    fmt: str = "jsonl",
    delay: int = 0,
    checkpoints: bool = True,
) -> Job:
    """A job writing matches to ``directory/matches`` and timeouts to ``directory/timeouts``."""
    job = (
        Job(IterableSource(events, batch_size=BATCH))
        .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(delay))
        .key_by("k")
        .timestamps("ts")
        .match(rule, engine=engine)
        .sink(FileSink(directory / f"matches.{fmt}"))
        .sink_timeouts(FileSink(directory / f"timeouts.{fmt}"))
    )
    if checkpoints:
        job = job.checkpoint(directory / "chk", every_events=every, retain=retain)
    return job


def committed(directory: Path, fmt: str = "jsonl") -> tuple[list[Any], list[Any]]:
    """Every committed match and timeout record, in file order."""
    return (FileSink(directory / f"matches.{fmt}").read(),
            FileSink(directory / f"timeouts.{fmt}").read())


def stop_after(chunks: int) -> Callable[[], bool]:
    """A ``stop=`` callback that ends the run after ``chunks`` source chunks."""
    seen = [0]

    def stop() -> bool:
        seen[0] += 1
        return seen[0] >= chunks

    return stop


def canon(record: Any) -> str:
    return json.dumps(record, sort_keys=True)


def per_key(records: list[dict[str, Any]]) -> dict[Any, list[str]]:
    out: dict[Any, list[str]] = {}
    for r in records:
        out.setdefault(r["k"], []).append(canon(r))
    return out


def assert_same_output(got: tuple[list[Any], list[Any]], want: tuple[list[Any], list[Any]]) -> None:
    """Nothing lost, nothing duplicated: same multiset, and the same order per key."""
    for g, w, what in ((got[0], want[0], "matches"), (got[1], want[1], "timeouts")):
        assert Counter(map(canon, g)) == Counter(map(canon, w)), what
        assert per_key(g) == per_key(w), what


def await_checkpoint_writers() -> None:
    """Checkpoints are written on a background thread; let a failed run's writer finish."""
    for t in threading.enumerate():
        if t.name.startswith("checkpoint-"):
            t.join(10)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    """The committed output of an uninterrupted run, per (engine, format, delay, events)."""
    cache: dict[Any, Any] = {}

    def get(engine: str, rule: Pattern, fmt: str = "jsonl", delay: int = 0,
            events: list[dict[str, Any]] = EVENTS) -> tuple[list[Any], list[Any]]:
        key = (engine, fmt, delay, id(events))
        if key not in cache:
            d = tmp_path_factory.mktemp(f"uninterrupted-{engine}-{fmt}")
            summary = build(d, rule, engine, events=events, fmt=fmt, delay=delay).run()
            assert summary.engine == engine
            cache[key] = committed(d, fmt)
        return cache[key]

    return get


def test_the_stream_has_matches_and_timeouts(uninterrupted: Callable[..., Any]) -> None:
    matches, timeouts = uninterrupted("reference", LAMBDA_RULE)
    assert len(matches) > 50 and len(timeouts) > 50
    assert len({m["k"] for m in matches}) == 6
    # and the engines agree, so comparing each with itself below is meaningful
    assert_same_output(uninterrupted("numba", EXPR_RULE), (matches, timeouts))


# ---------------------------------------------------------------------------
# the format on disk
# ---------------------------------------------------------------------------

@ENGINES
def test_checkpoint_directory_layout(tmp_path: Path, engine: str, rule: Pattern) -> None:
    summary = build(tmp_path, rule, engine, every=200, retain=100).run(stop=stop_after(5))
    chk = tmp_path / "chk"
    dirs = sorted(p.name for p in chk.iterdir())
    # 200 events per checkpoint over 5 chunks of 100, plus the one at the end of the run
    assert dirs == ["chk-000000001", "chk-000000002", "chk-000000003"]
    assert summary.checkpoints == 3
    latest = chk / dirs[-1]
    manifest = json.loads((latest / "manifest.json").read_text())
    assert manifest["format"] == "cep.checkpoint"
    assert manifest["version"] == 4
    assert manifest["id"] == 3
    assert manifest["pattern"].startswith(f"{engine}:")
    assert manifest["job"]["offsets"] == {"memory-0": 500}
    names = {p.name for p in latest.iterdir()}
    assert "manifest.json" in names
    assert "arrays.npz" in names, names
    assert {"events.arrow", "buffered.arrow"} <= names
    # the manifest lists every other file with its SHA-256
    assert set(manifest["files"]) == names - {"manifest.json"}
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((latest / name).read_bytes()).hexdigest() == digest, name
    # opening it runs no code: numeric arrays without pickle, Arrow IPC for events
    for name in names:
        data = (latest / name).read_bytes()
        if name.endswith(".npz"):
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                assert arrays.files, name
                for member in arrays.files:
                    array = arrays[member]
                    assert array.dtype.kind in "iufb", (member, array.dtype)
        elif name.endswith(".arrow") and data:
            pa.ipc.open_file(pa.BufferReader(data)).read_all()
    # written atomically: no temporary directories are left behind
    assert not [p for p in chk.iterdir() if p.name.startswith(".")]


def test_checkpoints_every_n_events(tmp_path: Path) -> None:
    summary = build(tmp_path, EXPR_RULE, "numba", every=300, retain=100).run()
    ids = CheckpointStore(tmp_path / "chk").ids()
    # chunks of 100: after 300, 600, 900 events, and one at the end of the run
    assert ids == [1, 2, 3, 4]
    assert summary.checkpoints == 4
    offsets = [json.loads((tmp_path / "chk" / f"chk-{i:09d}" / "manifest.json").read_text())
               ["job"]["offsets"]["memory-0"] for i in ids]
    assert offsets == [300, 600, 900, 1000]


@pytest.mark.parametrize("retain", [1, 2, 4])
def test_retain_keeps_the_newest(tmp_path: Path, retain: int) -> None:
    summary = build(tmp_path, LAMBDA_RULE, "reference", every=100, retain=retain).run()
    assert summary.checkpoints == 11
    assert CheckpointStore(tmp_path / "chk").ids() == list(range(12 - retain, 12))


# ---------------------------------------------------------------------------
# round trips: stop part-way, resume, and get what an uninterrupted run gets
# ---------------------------------------------------------------------------

@ENGINES
@pytest.mark.parametrize("chunks", [1, 4, 9])
def test_resume_continues_with_identical_results(
    tmp_path: Path, uninterrupted: Callable[..., Any], engine: str, rule: Pattern, chunks: int
) -> None:
    first = build(tmp_path, rule, engine).run(stop=stop_after(chunks))
    assert first.events_in == chunks * BATCH
    second = build(tmp_path, rule, engine).run(resume=True)
    assert second.resumed_from is not None
    assert second.events_in == len(EVENTS)  # counters continue from the checkpoint
    assert second.processed == len(EVENTS)
    assert_same_output(committed(tmp_path), uninterrupted(engine, rule))
    want = uninterrupted(engine, rule)
    assert (second.matches, second.timeouts) == (len(want[0]), len(want[1]))


@ENGINES
def test_many_resumes_in_a_row(
    tmp_path: Path, uninterrupted: Callable[..., Any], engine: str, rule: Pattern
) -> None:
    for _ in range(4):
        build(tmp_path, rule, engine).run(resume=True, stop=stop_after(2))
    build(tmp_path, rule, engine).run(resume=True)
    assert_same_output(committed(tmp_path), uninterrupted(engine, rule))


class _LateWriter(_Writer):
    """A checkpoint writer that starts late, so processing goes on while it serialises."""

    def run(self) -> None:
        threading.Event().wait(0.03)
        super().run()


@ENGINES
def test_resume_from_every_checkpoint_of_a_run(
    tmp_path: Path, uninterrupted: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
    engine: str, rule: Pattern
) -> None:
    """Checkpoints written in the background, while later events are processed, hold the
    state at their barrier: resuming from any one of them (as if the process had died
    right after it) gives the uninterrupted output."""
    import cep.runtime.job

    run_dir = tmp_path / "run"
    monkeypatch.setattr(cep.runtime.job, "_Writer", _LateWriter)
    summary = build(run_dir, rule, engine, events=shuffled(EVENTS, 40), delay=50,
                    retain=100).run()
    monkeypatch.undo()
    ids = CheckpointStore(run_dir / "chk").ids()
    assert ids == list(range(1, summary.checkpoints + 1)) and len(ids) >= 5
    want = uninterrupted(engine, rule)
    for last in ids[:-1]:
        crashed = tmp_path / f"after-{last}"
        shutil.copytree(run_dir, crashed)
        for later in ids[ids.index(last) + 1:]:
            shutil.rmtree(crashed / "chk" / f"chk-{later:09d}")
        resumed = build(crashed, rule, engine, events=shuffled(EVENTS, 40), delay=50).run(
            resume=True)
        assert resumed.resumed_from == last
        assert_same_output(committed(crashed), want)


@ENGINES
def test_round_trip_with_events_waiting_for_the_watermark(
    tmp_path: Path, uninterrupted: Callable[..., Any], engine: str, rule: Pattern
) -> None:
    """Out-of-order input: checkpoints hold events the watermark has not released yet."""
    events = shuffled(EVENTS, bound=40)
    want = uninterrupted(engine, rule, delay=50, events=events)
    assert_same_output(want, uninterrupted(engine, rule))  # the reorder is within bounds
    build(tmp_path, rule, engine, events=events, delay=50).run(stop=stop_after(3))
    latest = tmp_path / "chk" / "chk-000000002"
    manifest = json.loads((latest / "manifest.json").read_text())
    assert manifest["buffered"], "expected buffered events in the checkpoint"
    waiting = pa.ipc.open_file(pa.BufferReader((latest / "buffered.arrow").read_bytes()))
    assert waiting.read_all().num_rows == manifest["buffered"]
    build(tmp_path, rule, engine, events=events, delay=50).run(resume=True)
    assert_same_output(committed(tmp_path), want)


def test_resume_with_no_checkpoint_yet_starts_from_the_beginning(
    tmp_path: Path, uninterrupted: Callable[..., Any]
) -> None:
    summary = build(tmp_path, EXPR_RULE, "numba").run(resume=True)
    assert summary.resumed_from is None
    assert_same_output(committed(tmp_path), uninterrupted("numba", EXPR_RULE))


def test_resume_after_a_finished_run_adds_nothing(
    tmp_path: Path, uninterrupted: Callable[..., Any]
) -> None:
    build(tmp_path, LAMBDA_RULE, "reference").run()
    again = build(tmp_path, LAMBDA_RULE, "reference").run(resume=True)
    assert again.events_in == len(EVENTS)
    assert_same_output(committed(tmp_path), uninterrupted("reference", LAMBDA_RULE))


def test_resume_needs_a_checkpoint_directory(tmp_path: Path) -> None:
    job = build(tmp_path, EXPR_RULE, "numba", checkpoints=False)
    with pytest.raises(CEPError, match="checkpoint"):
        job.run(resume=True)


@ENGINES
def test_resume_never_uses_pickle(
    tmp_path: Path, uninterrupted: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
    engine: str, rule: Pattern
) -> None:
    build(tmp_path, rule, engine).run(stop=stop_after(5))

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a checkpoint was read with pickle")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    monkeypatch.setattr(np.lib.format, "read_array",
                        _no_pickle_read_array(np.lib.format.read_array))
    build(tmp_path, rule, engine).run(resume=True)
    monkeypatch.undo()
    assert_same_output(committed(tmp_path), uninterrupted(engine, rule))


def _no_pickle_read_array(read_array: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, allow_pickle: bool = False, **kwargs: Any) -> Any:
        assert not allow_pickle, "an array was read with allow_pickle=True"
        return read_array(*args, allow_pickle=allow_pickle, **kwargs)

    return guarded


@ENGINES
def test_tuple_keys_round_trip(tmp_path: Path, engine: str, rule: Pattern) -> None:
    """Composite keys (tuples) are checkpointed as tagged JSON and come back as tuples."""
    def job(d: Path, out: ListSink) -> Job:
        return (Job(IterableSource(EVENTS, batch_size=BATCH))
                .key_by(lambda e: (e["k"], e["i"] % 2)).timestamps("ts")
                .match(rule, engine=engine).sink(out)
                .checkpoint(d, every_events=200))

    whole = ListSink()
    job(tmp_path / "a", whole).run()
    parts = ListSink()
    job(tmp_path / "b", parts).run(stop=stop_after(4))
    job(tmp_path / "b", parts).run(resume=True)
    assert whole.records and parts.records == whole.records
    # a key function names its column "key"; it holds the tuple's values
    for r in whole.records:
        first = r["a"][0]
        assert tuple(r["key"]) == (first["k"], first["i"] % 2), r["key"]
    assert len({tuple(r["key"]) for r in whole.records}) == 12


# ---------------------------------------------------------------------------
# refusals: what is wrong is said, and nothing is half-loaded
# ---------------------------------------------------------------------------

def _rewrite_manifest(chk: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    """Change the manifest and re-sign it, so only the changed content is wrong."""
    from cep.runtime.checkpoint import _manifest_digest

    manifest = json.loads((chk / "manifest.json").read_text())
    change(manifest)
    if "checksum" in manifest:
        manifest["checksum"] = _manifest_digest(manifest)
    (chk / "manifest.json").write_text(json.dumps(manifest))


def _replace_file(chk: Path, name: str, data: bytes) -> None:
    """Swap a data file and re-sign it in the manifest: only the content is wrong."""
    (chk / name).write_bytes(data)
    _rewrite_manifest(chk, lambda m: m["files"].__setitem__(name, hashlib.sha256(data).hexdigest()))


def _replace_member(chk: Path, name: str, npy: bytes) -> None:
    """Swap one engine array (its ``.npy`` bytes) in ``arrays.npz`` and re-sign the file."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(chk / "arrays.npz") as old, zipfile.ZipFile(out, "w") as new:
        for info in old.infolist():
            new.writestr(info.filename, npy if info.filename == f"{name}.npy"
                         else old.read(info.filename))
    _replace_file(chk, "arrays.npz", out.getvalue())


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in (len(data) // 2, len(data) - 1):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _object_npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([{"boom": 1}, None], dtype=object), allow_pickle=True)
    return buf.getvalue()


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def stopped(tmp_path: Path) -> Callable[[str], Path]:
    """A numba job stopped after 5 chunks (checkpoints 1..3, only the newest kept, so there
    is nothing older to fall back to), with a pending sink file of a later, failed attempt;
    returns the newest checkpoint's directory."""

    def make(engine: str = "numba") -> Path:
        rule = EXPR_RULE if engine == "numba" else LAMBDA_RULE
        build(tmp_path, rule, engine, retain=1).run(stop=stop_after(5))
        (tmp_path / "matches" / "part-000000004.jsonl.pending").write_text('{"x": 1}\n')
        return tmp_path / "chk" / "chk-000000003"

    return make


def _assert_refused(tmp_path: Path, job: Job, *phrases: str) -> CheckpointError:
    """Resuming raises CheckpointError naming the checkpoint and the problem; no output,
    pending file or checkpoint is touched."""
    before = _tree(tmp_path)
    with pytest.raises(CheckpointError) as info:
        job.run(resume=True)
    assert isinstance(info.value, CEPError)
    message = str(info.value)
    assert "chk-000000003" in message
    for phrase in phrases:
        assert phrase in message, message
    await_checkpoint_writers()
    assert _tree(tmp_path) == before, "a refused checkpoint changed files"
    return info.value


def test_refuses_a_checkpoint_without_manifest(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    (stopped() / "manifest.json").unlink()
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "no manifest.json")


def test_refuses_a_manifest_that_is_not_json(tmp_path: Path, stopped: Callable[..., Path]) -> None:
    chk = stopped()
    text = (chk / "manifest.json").read_text()
    (chk / "manifest.json").write_text(text[: len(text) // 2])  # torn write
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "manifest.json", "corrupt")


def test_refuses_a_manifest_that_is_not_an_object(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    (stopped() / "manifest.json").write_text("[1, 2, 3]")
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "not a cep checkpoint")


def test_refuses_another_format(tmp_path: Path, stopped: Callable[..., Path]) -> None:
    _rewrite_manifest(stopped(), lambda m: m.update(format="flink.savepoint"))
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"),
                    "not a cep checkpoint", "flink.savepoint")


@pytest.mark.parametrize("version", [0, 1, 2, 5, "4", None])
def test_refuses_another_version(
    tmp_path: Path, stopped: Callable[..., Path], version: Any
) -> None:
    _rewrite_manifest(stopped(), lambda m: m.update(version=version))
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "version", repr(version))


def test_a_checkpoint_gives_the_numba_engine_its_events_back_as_arrow(
    stopped: Callable[..., Path]
) -> None:
    """The events partial matches hold come back from a checkpoint as the Arrow table
    they were written as: a resumed numba engine goes on holding Arrow events (its
    outputs and next checkpoints take them by reference) instead of a dict each; the
    reference engine gets its dicts."""
    from cep.nfa.engine import make_engine
    from cep.runtime.checkpoint import load_checkpoint

    cp = load_checkpoint(stopped(), None)
    assert isinstance(cp.engine.rows, pa.Table) and cp.engine.rows.num_rows > 0
    engine = make_engine(EXPR_RULE, "numba")
    engine.restore(cp.engine)
    assert engine.core is not None
    assert [kept.batch.is_table for kept in engine.core._retained] == [True]
    assert engine.core.partial_matches > 0


def test_resumes_from_a_version_3_checkpoint(
    tmp_path: Path, stopped: Callable[..., Path], uninterrupted: Callable[..., Any]
) -> None:
    """Version 4 only added events held once for several rules: a rule's checkpoint of
    version 3 reads as it did."""
    _rewrite_manifest(stopped(), lambda m: m.update(version=3))
    assert build(tmp_path, EXPR_RULE, "numba").run(resume=True).resumed_from is not None
    assert_same_output(committed(tmp_path), uninterrupted("numba", EXPR_RULE))


@pytest.mark.parametrize("name", ["arrays.npz", "events.arrow", "buffered.arrow"])
def test_refuses_a_checkpoint_with_a_missing_file(
    tmp_path: Path, stopped: Callable[..., Path], name: str
) -> None:
    (stopped() / name).unlink()
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), name, "missing")


def test_refuses_a_truncated_file(tmp_path: Path, stopped: Callable[..., Path]) -> None:
    path = stopped() / "arrays.npz"
    path.write_bytes(path.read_bytes()[:-17])
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "arrays.npz", "checksum")


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_refuses_flipped_bytes(
    tmp_path: Path, stopped: Callable[..., Path], engine: str
) -> None:
    chk = stopped(engine)
    _flip_bytes(chk / "arrays.npz")
    rule = EXPR_RULE if engine == "numba" else LAMBDA_RULE
    _assert_refused(tmp_path, build(tmp_path, rule, engine), "arrays.npz", "checksum")


def test_refuses_flipped_bytes_in_events(tmp_path: Path, stopped: Callable[..., Path]) -> None:
    chk = stopped()
    assert (chk / "events.arrow").stat().st_size > 0
    _flip_bytes(chk / "events.arrow")
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "events.arrow", "checksum")


def test_refuses_a_checkpoint_of_another_pattern(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    stopped()
    other = Pattern.begin("a").where(col("v") < 4).next("b").where(col("v") > 7).within(100)
    _assert_refused(tmp_path, build(tmp_path, other, "numba"), "different job", "pattern: ")


def test_refuses_a_checkpoint_of_another_lambda_pattern(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    stopped("reference")
    other = Pattern.begin("x").where(lambda e: e["v"] < 3).next("y").within(100)
    _assert_refused(tmp_path, build(tmp_path, other, "reference"), "different job", "pattern: ")


def test_refuses_a_checkpoint_of_the_other_engine(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    stopped("numba")
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "reference"), "engine")


def test_refuses_an_npy_file_that_needs_pickle(
    tmp_path: Path, stopped: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even correctly signed, an object array is never unpickled."""
    chk = stopped()
    _replace_member(chk, "AI", _object_npy())

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle was used")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"),
                    "array 'AI' in arrays.npz", "not a numeric array")


def test_refuses_to_write_an_object_array(tmp_path: Path) -> None:
    from cep.nfa.engine import Snapshot
    from cep.runtime.checkpoint import Checkpoint

    cp = Checkpoint(1, {}, Snapshot({}, {"x": np.array([object()], dtype=object)}, []))
    with pytest.raises(CheckpointError, match="Python objects"):
        CheckpointStore(tmp_path).write(cp, "x")
    assert CheckpointStore(tmp_path).ids() == []


def test_refuses_a_manifest_with_a_corrupted_value(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    chk = stopped()
    text = (chk / "manifest.json").read_text()
    assert '"memory-0": 500' in text
    (chk / "manifest.json").write_text(text.replace('"memory-0": 500', '"memory-0": 100'))
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "manifest.json")


def test_refuses_an_events_file_that_is_not_arrow(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    _replace_file(stopped(), "events.arrow", b"not an arrow file" * 4)
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "events.arrow")


@pytest.mark.parametrize("field", [
    "buffered",
    "job",
    "files",
])
def test_refuses_a_manifest_missing_a_field(
    tmp_path: Path, stopped: Callable[..., Path], field: str
) -> None:
    _rewrite_manifest(stopped(), lambda m: m.pop(field))
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), field)


def test_a_fresh_run_over_old_checkpoints_refuses_or_starts_over(
    tmp_path: Path, uninterrupted: Callable[..., Any]
) -> None:
    """Running again without resume over an earlier run's checkpoints must neither lose
    the committed output nor leave a directory a later resume would read wrongly."""
    build(tmp_path, EXPR_RULE, "numba").run()
    before = committed(tmp_path)
    try:
        build(tmp_path, EXPR_RULE, "numba").run()
    except CheckpointError as err:
        # refusing is fine if it happens before any output is touched and says what to do
        assert "resume" in str(err)
        assert committed(tmp_path) == before
    else:
        assert_same_output(committed(tmp_path), uninterrupted("numba", EXPR_RULE))
    build(tmp_path, EXPR_RULE, "numba").run(resume=True)
    assert_same_output(committed(tmp_path), uninterrupted("numba", EXPR_RULE))


# ---------------------------------------------------------------------------
# exactly-once file sinks
# ---------------------------------------------------------------------------

FORMATS = pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])


@FORMATS
def test_file_sink_two_phase_commit(tmp_path: Path, fmt: str) -> None:
    sink = FileSink(tmp_path / f"out.{fmt}")
    assert sink.format == fmt and sink.path == tmp_path / "out"
    sink.write([{"key": "a", "n": 1, "events": {"x": [1, 2]}}])
    sink.prepare(1)
    assert (tmp_path / "out" / f"part-000000001.{fmt}.pending").exists()
    assert sink.read() == []  # durable but invisible
    sink.commit(1)
    assert [p.name for p in sink.files()] == [f"part-000000001.{fmt}"]
    [record] = sink.read()
    assert record["key"] == "a" and record["n"] == 1
    events = json.loads(record["events"]) if fmt == "csv" else record["events"]
    assert events == {"x": [1, 2]}


@FORMATS
def test_file_sink_columns_keep_their_types(tmp_path: Path, fmt: str) -> None:
    records = [
        {"type": "match", "key": "c1", "start": 5, "end": 9, "score": 0.5, "ok": True,
         "events": {"a": [{"id": 1}]}, "id": 7},
        {"type": "timeout", "key": "c2", "start": 6, "end": 6, "score": None, "ok": False,
         "events": {"a": []}, "id": "x-1", "timeout": 60},
    ]
    sink = FileSink(tmp_path / f"out.{fmt}")
    sink.write(records)
    sink.prepare(1)
    sink.commit(1)
    back = sink.read()
    if fmt == "csv":  # plain text: types as pyarrow infers them, nested values as JSON,
        # text as it is (a value of mixed types is JSON text in Parquet, and written in CSV
        # as in a column of its own type: the same whatever shares its part file)
        assert [r["id"] for r in back] == ["7", "x-1"]
        for r, given in zip(back, records, strict=True):
            r["events"] = json.loads(r["events"])
            r["id"] = given["id"]
    assert [{k: v for k, v in r.items() if v is not None} for r in back] == [
        {k: v for k, v in r.items() if v is not None} for r in records]
    if fmt == "parquet":
        import pyarrow.parquet as pq

        schema = pq.read_schema(sink.files()[0])
        assert {c: str(schema.field(c).type) for c in ("start", "score", "ok", "key", "events",
                                                        "timeout")} == {
            "start": "int64", "score": "double", "ok": "bool", "key": "string",
            "events": "string", "timeout": "int64"}


@FORMATS
def test_file_sink_recovery(tmp_path: Path, fmt: str) -> None:
    sink = FileSink(tmp_path / f"out.{fmt}")
    for epoch in (1, 2, 3, 4):
        sink.write([{"key": "a", "epoch": epoch}])
        sink.prepare(epoch)
        if epoch <= 2:
            sink.commit(epoch)
    sink.write([{"key": "a", "epoch": 5}])  # never prepared: lost with the process
    (tmp_path / "out" / f"part-000000005.{fmt}.tmp").write_bytes(b"torn")

    again = FileSink(tmp_path / f"out.{fmt}")
    again.recover(3)  # the last complete checkpoint covers epochs up to 3
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        f"part-00000000{e}.{fmt}" for e in (1, 2, 3)
    ]
    assert [int(json.loads(str(r["epoch"]))) for r in again.read()] == [1, 2, 3]


def test_file_sink_recovery_drops_committed_files_after_the_checkpoint(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "out.jsonl")
    for epoch in (1, 2, 3):
        sink.write([{"epoch": epoch}])
        sink.prepare(epoch)
        sink.commit(epoch)
    FileSink(tmp_path / "out.jsonl").recover(1)
    assert sink.read() == [{"epoch": 1}]
    FileSink(tmp_path / "out.jsonl").recover(0)
    assert sink.read() == []


def test_file_sink_rejects_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(CEPError, match="unknown format 'txt'"):
        FileSink(tmp_path / "out.txt")


@FORMATS
def test_pending_files_after_the_last_checkpoint_are_discarded(
    tmp_path: Path, uninterrupted: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """Epoch 3's records were written pending, then writing checkpoint 3 failed: after
    recovery from checkpoint 2 that pending file is gone and epoch 3 is redone once.  The
    failure comes late, when epoch 4's writer is already at work: no later checkpoint may
    be written after a failed one."""
    real_write = CheckpointStore.write

    def failing_write(self: CheckpointStore, cp: Any, fingerprint: str) -> Path:
        if cp.id == 3:
            threading.Event().wait(0.2)
            raise OSError("disk full (simulated)")
        return real_write(self, cp, fingerprint)

    monkeypatch.setattr(CheckpointStore, "write", failing_write)
    with pytest.raises(CheckpointError, match="disk full"):
        build(tmp_path, EXPR_RULE, "numba", fmt=fmt).run()
    await_checkpoint_writers()
    monkeypatch.undo()
    assert CheckpointStore(tmp_path / "chk").ids() == [1, 2]
    pending = tmp_path / "matches" / f"part-000000003.{fmt}.pending"
    assert pending.exists()
    assert read_records_of_pending(pending), "epoch 3 had matches"

    summary = build(tmp_path, EXPR_RULE, "numba", fmt=fmt).run(resume=True)
    assert summary.resumed_from == 2
    assert not list((tmp_path / "matches").glob("*.pending"))
    assert not list((tmp_path / "matches").glob("*.tmp"))
    assert_same_output(committed(tmp_path, fmt), uninterrupted("numba", EXPR_RULE, fmt))


@FORMATS
def test_pending_files_of_a_complete_checkpoint_are_committed(
    tmp_path: Path, uninterrupted: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """Checkpoint 3 was complete on disk but the process died before committing its
    epoch: recovery commits the pending files instead of redoing the epoch."""
    real_commit = FileSink.commit

    def crash_before_commit(self: FileSink, epoch: int) -> None:
        if epoch == 3:
            raise OSError("killed (simulated)")
        real_commit(self, epoch)

    monkeypatch.setattr(FileSink, "commit", crash_before_commit)
    with pytest.raises(CheckpointError, match="killed"):
        build(tmp_path, LAMBDA_RULE, "reference", fmt=fmt).run()
    await_checkpoint_writers()
    monkeypatch.undo()
    assert CheckpointStore(tmp_path / "chk").latest() == 3
    pending = tmp_path / "matches" / f"part-000000003.{fmt}.pending"
    assert pending.exists()
    expected = read_records_of_pending(pending)

    summary = build(tmp_path, LAMBDA_RULE, "reference", fmt=fmt).run(resume=True)
    assert summary.resumed_from == 3
    part3 = tmp_path / "matches" / f"part-000000003.{fmt}"
    assert part3.exists() and not pending.exists()
    assert read_records(part3) == expected
    assert_same_output(committed(tmp_path, fmt), uninterrupted("reference", LAMBDA_RULE, fmt))


def read_records_of_pending(pending: Path) -> list[dict[str, Any]]:
    """A pending file read as if committed (copied under its final name)."""
    copy = pending.parent.parent / "peek" / pending.name[: -len(".pending")]
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(pending, copy)
    return read_records(copy)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_tabular_formats_hold_the_same_records_as_jsonl(
    uninterrupted: Callable[..., Any], fmt: str
) -> None:
    """Parquet reads back as the JSONL records; CSV too, but with nested values (the
    stage columns, the matched events) as JSON text."""
    want_matches, want_timeouts = uninterrupted("numba", EXPR_RULE, "jsonl")
    got_matches, got_timeouts = uninterrupted("numba", EXPR_RULE, fmt)
    for got, want in ((got_matches, want_matches), (got_timeouts, want_timeouts)):
        if fmt == "csv":
            got = [{**g, "a": json.loads(g["a"]), "b": json.loads(g["b"])} for g in got]
        assert [list(g) for g in got] == [list(w) for w in want]  # the columns, in order
        assert got == want


def _edit_array(chk: Path, name: str, change: Callable[[np.ndarray], None]) -> None:
    """Edit an engine array and re-sign it: the checksums all agree, the content is wrong."""
    with np.load(chk / "arrays.npz", allow_pickle=False) as arrays:
        array = arrays[name].copy()
    change(array)
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    _replace_member(chk, name, buf.getvalue())


def _set(index: Any, value: int) -> Callable[[np.ndarray], None]:
    def change(a: np.ndarray) -> None:
        a[index] = value
    return change


@pytest.mark.parametrize(("name", "change", "phrase"), [
    ("nodes", _set((0, 2), 10**6), "parent is not an earlier node"),
    ("nodes", _set((-1, 2), -1 - 1), "parent is not an earlier node"),
    ("nodes", _set((0, 0), 10**9), "names an event beyond"),
    ("nodes", _set((0, 1), 77), "names a stage beyond"),
    ("AI", _set((0, 0), 99), "is in state 99"),
    ("AI", _set((0, 1), 10**6), "points at a node beyond"),
    ("key_off", _set(0, 10**6), "key 0 claims rows"),
    ("key_clen", _set(0, 10**6), "key 0 claims rows"),
    ("key_len", _set(0, -5), "key 0 claims rows"),
])
def test_refuses_engine_arrays_that_do_not_fit_the_pattern(
    tmp_path: Path, stopped: Callable[..., Path], name: str,
    change: Callable[[np.ndarray], None], phrase: str,
) -> None:
    """Indices out of range used to reach the kernel, which reads without bounds checks
    (a segfault, or another key's state): every index is checked before."""
    chk = stopped()
    _edit_array(chk, name, change)
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "does not fit", phrase)


def test_refuses_engine_arrays_of_the_wrong_shape(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    chk = stopped()
    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 2), np.float64), allow_pickle=False)
    _replace_member(chk, "AF", buf.getvalue())
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "does not fit", "shapes")


@pytest.mark.parametrize(("column", "value", "phrase"), [
    (0, -1, "names an event beyond"),  # -1 would have picked the last event
    (4, -1, "names a stage beyond"),
    (5, 10**6, "parent is not an earlier node"),
])
def test_refuses_reference_engine_nodes_that_do_not_fit(
    tmp_path: Path, stopped: Callable[..., Path], column: int, value: int, phrase: str
) -> None:
    """Python counts negative indices from the end: an edited index picked another event or
    stage without a word."""
    chk = stopped("reference")
    _edit_array(chk, "nodes", _set((0, column), value))
    _assert_refused(tmp_path, build(tmp_path, LAMBDA_RULE, "reference"), "does not fit", phrase)


def test_refuses_a_reference_partial_match_in_a_state_the_pattern_lacks(
    tmp_path: Path, stopped: Callable[..., Path]
) -> None:
    def rename(manifest: dict[str, Any]) -> None:
        rows = [r for key_rows in manifest["engine"]["partial"] for r in key_rows]
        rows[0][0] = "no-such-state"

    chk = stopped("reference")
    _rewrite_manifest(chk, rename)
    _assert_refused(tmp_path, build(tmp_path, LAMBDA_RULE, "reference"), "does not fit",
                    "no-such-state")



# ---------------------------------------------------------------------------
# a damaged newest checkpoint: fall back to the newest valid one, saying so
# ---------------------------------------------------------------------------

def _damage_newest(chk: Path, how: str) -> None:
    if how == "emptied":
        for f in chk.iterdir():
            f.unlink()
    elif how == "no manifest":
        (chk / "manifest.json").unlink()
    else:
        _flip_bytes(chk / "arrays.npz")


@pytest.mark.parametrize("how", ["emptied", "no manifest", "flipped bytes"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(
    tmp_path: Path, uninterrupted: Callable[..., Any], how: str
) -> None:
    """The output is still exactly once: the sinks drop what was committed after the older
    checkpoint, and the job does that part again."""
    build(tmp_path, EXPR_RULE, "numba").run(stop=stop_after(5))
    assert CheckpointStore(tmp_path / "chk").ids() == [1, 2, 3]
    _damage_newest(tmp_path / "chk" / "chk-000000003", how)
    with pytest.warns(CheckpointWarning, match="chk-000000003.*resuming from the older "
                      ".*chk-000000002"):
        summary = build(tmp_path, EXPR_RULE, "numba").run(resume=True)
    assert summary.resumed_from == 2
    assert len(summary.skipped_checkpoints) == 1
    assert "chk-000000003" in summary.skipped_checkpoints[0]
    assert_same_output(committed(tmp_path), uninterrupted("numba", EXPR_RULE))


def test_a_checkpoint_of_another_job_is_not_passed_over_for_an_older_one(tmp_path: Path) -> None:
    """Another pattern's checkpoints are all another pattern's: refused, not skipped."""
    build(tmp_path, EXPR_RULE, "numba").run(stop=stop_after(5))
    other = Pattern.begin("a").where(col("v") < 4).next("b").where(col("v") > 7).within(100)
    with pytest.raises(CheckpointError, match="chk-000000003: written for a different job"):
        build(tmp_path, other, "numba").run(resume=True)


def test_when_every_checkpoint_is_damaged_the_newest_is_named(tmp_path: Path) -> None:
    build(tmp_path, EXPR_RULE, "numba").run(stop=stop_after(5))
    for chk in (tmp_path / "chk").glob("chk-*"):
        (chk / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="chk-000000003: no manifest.json"):
        build(tmp_path, EXPR_RULE, "numba").run(resume=True)



# ---------------------------------------------------------------------------
# a checkpoint belongs to one job: input, key, time and options, not only the pattern
# ---------------------------------------------------------------------------

def _resume_refused(tmp_path: Path, job: Job, *phrases: str) -> None:
    with pytest.raises(ForeignCheckpointError) as info:
        job.run(resume=True)
    for phrase in phrases:
        assert phrase in str(info.value), str(info.value)


@pytest.mark.parametrize(("change", "phrase"), [
    (lambda job: job.key_by("v"), "key: 'k' in the checkpoint, 'v' now"),
    (lambda job: job.timestamps("ts", unit="ms"), "time_unit: None in the checkpoint, 'ms' now"),
    (lambda job: job.with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(7)),
     "watermarks:"),
    (lambda job: job.limit_partial_matches(5), "max_partial_matches:"),
])
def test_a_checkpoint_of_the_same_pattern_with_other_settings_is_refused(
    tmp_path: Path, change: Callable[[Job], Job], phrase: str
) -> None:
    """Another key field mixed partial matches of different keys; another time unit
    shifted every window: both gave wrong output without an error."""
    build(tmp_path, EXPR_RULE, "numba").run(stop=stop_after(5))
    _resume_refused(tmp_path, change(build(tmp_path, EXPR_RULE, "numba")), "different job",
                    phrase)


def test_a_checkpoint_of_another_input_file_is_refused(tmp_path: Path) -> None:
    """The offsets of one file were applied to another (a different path starts at 0 with
    the old partial matches; the same path rewritten skips rows it never read)."""
    from cep.runtime import FileSource

    def job(path: Path) -> Job:
        return (Job(FileSource(path, batch_size=100)).key_by("k").timestamps("ts")
                .match(EXPR_RULE, engine="numba").sink(ListSink())
                .checkpoint(tmp_path / "chk", every_events=100))

    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(e) + "\n" for e in EVENTS[:500]))
    second.write_text("".join(json.dumps(e) + "\n" for e in EVENTS[:400]))
    job(first).run(stop=stop_after(3))
    _resume_refused(tmp_path, job(second), "input:")
    first.write_text("".join(json.dumps(e) + "\n" for e in EVENTS[:450]))  # rewritten
    _resume_refused(tmp_path, job(first), "input:")


def test_two_lambda_patterns_of_one_shape_are_told_apart(tmp_path: Path) -> None:
    """Both are named <lambda>: their fingerprints were equal, so one resumed the other's."""
    build(tmp_path, Pattern.begin("a").where(lambda e: e["v"] < 3).next("b").within(100),
          "reference").run(stop=stop_after(5))
    other = Pattern.begin("a").where(lambda e: e["v"] < 4).next("b").within(100)
    _resume_refused(tmp_path, build(tmp_path, other, "reference"), "different job", "pattern:")


def _offsets_plus(n: int) -> Callable[[dict[str, Any]], None]:
    def change(m: dict[str, Any]) -> None:
        m["job"]["offsets"]["memory-0"] += n
    return change


def _watermarks_at(ts: int) -> Callable[[dict[str, Any]], None]:
    def change(m: dict[str, Any]) -> None:
        m["job"]["watermarks"]["current"] = ts
        m["job"]["operator_watermark"] = ts
    return change


@pytest.mark.parametrize(("change", "phrase"), [
    (_offsets_plus(100), "the offsets add up to 600 events, the job read 500"),
    (_offsets_plus(-100), "the offsets add up to 400 events, the job read 500"),
    (_watermarks_at(10**12), "past the newest event time read"),
    (lambda m: m["job"].__setitem__("operator_watermark", 10**12), "operator's watermark"),
])
def test_refuses_an_edited_offset_or_watermark_with_a_recomputed_checksum(
    tmp_path: Path, stopped: Callable[..., Path], change: Callable[[dict[str, Any]], None],
    phrase: str,
) -> None:
    """The checksum only shows damage; an edit that re-signs the manifest was accepted and
    skipped or re-read events (wrong output, no error).  What every checkpoint satisfies -
    each event read counted once, no watermark past the newest time read - is checked."""
    chk = stopped()
    _rewrite_manifest(chk, change)
    _assert_refused(tmp_path, build(tmp_path, EXPR_RULE, "numba"), "inconsistent", phrase)


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_events_of_mixed_shapes_come_back_from_a_checkpoint_exactly(
        tmp_path: Path, engine: str) -> None:
    """Ints among floats and fields some events lack: as Arrow columns they would come back
    as floats and nulls, so such events are held as tagged JSON; the records of a run
    stopped and resumed at every batch are those of an uninterrupted run, value for value."""
    from cep import Pattern, col
    from cep.runtime import IterableSource, Job, ListSink

    p = (Pattern.begin("a").where(col("v") > 0).followed_by("b").where(col("v") > 100)
         .within(50))
    rows = [{"k": "x", "ts": 1, "v": 1}, {"k": "x", "ts": 2, "v": 2.5, "note": "n"},
            {"k": "y", "ts": 3, "v": 3}, {"k": "x", "ts": 4, "v": 101},
            {"k": "y", "ts": 5, "v": 200.0, "extra": [1, 2.5]}, {"k": "x", "ts": 90, "v": 7}]

    def job(out: ListSink, chk: Path | None = None) -> Job:
        j = (Job(IterableSource(rows, batch_size=1)).key_by("k").timestamps("ts")
             .match(p, engine=engine).sink(out, kinds=("match", "timeout")))
        return j.checkpoint(chk, every_events=1) if chk else j

    want, got = ListSink(), ListSink()
    job(want).run()
    chk = tmp_path / "chk"
    for attempt in range(len(rows)):  # stopped after each batch, resumed from its checkpoint
        polls = iter(range(100))
        summary = job(got, chk).run(stop=lambda polls=polls: next(polls) >= 1,
                                    resume=attempt > 0)
        if not summary.stopped:
            break
    assert want.records and json.dumps(got.records, sort_keys=True) == json.dumps(
        want.records, sort_keys=True)


def test_arrow_events_of_partial_matches_are_checkpointed_as_arrow(tmp_path: Path) -> None:
    """The numba engine holds Arrow input as Arrow: its snapshot's events are a table (no
    Python object per event; a checkpoint writes the columns as they are), two rules' tables
    join into one, and an engine restored from the checkpoint goes on as if never stopped."""
    from cep.nfa.engine import make_engine
    from cep.nfa.events import Events, Keys
    from cep.runtime.checkpoint import Checkpoint, CheckpointStore
    from cep.runtime.job import combine, split

    p = (Pattern.begin("a").where(col("v") < 5).times(2).consecutive()
         .next("b").where(col("v") > 500))
    rows = pa.table({"k": ["x", "y", "x", "y", "x"], "v": [1.0, 2.0, 3.0, 900.0, 700.0],
                     "note": ["p", None, "q", "r", "s"]})
    times = np.array([1, 2, 3, 4, 5], np.int64)
    first, rest = rows.slice(0, 3), rows.slice(3)
    engines = [make_engine(p, "numba") for _ in range(3)]
    for engine in engines:
        engine.process(Events(first, Keys.of_values(first["k"].to_pylist()), times[:3]))
    snaps = [e.snapshot() for e in engines[:2]]
    assert all(isinstance(s.rows, pa.Table) and s.rows.num_rows == 3 for s in snaps)
    both = combine(snaps, ["one", "two"])
    assert isinstance(both.rows, pa.Table) and both.rows.num_rows == 6
    store = CheckpointStore(tmp_path)
    store.write(Checkpoint(id=1, job={}, engine=both, buffered=b"", buffered_count=0), "fp")
    loaded, _ = store.load_newest("fp")
    assert loaded is not None
    resumed = make_engine(p, "numba")
    resumed.restore(split(loaded.engine, ["one", "two"])[0])
    later = Events(rest, Keys.of_values(rest["k"].to_pylist()), times[3:])
    got = [(m.key, m.start, m.end, [e["note"] for e in m["a"]]) for m in resumed.process(later).found]
    want = [(m.key, m.start, m.end, [e["note"] for e in m["a"]])
            for m in engines[2].process(later).found]
    assert got == want == [("x", 1, 5, ["p", "q"])]


def test_a_file_sink_opened_by_its_directory_reads_the_parts_in_their_format(
        tmp_path: Path) -> None:
    """``FileSink("out/matches")`` after a job wrote ``out/matches.parquet``: the parts
    are read as Parquet (the directory has no suffix to say so)."""
    written = FileSink(tmp_path / "matches.parquet")
    written.write([{"kind": "match", "card": "c1", "start": 1, "end": 2}])
    written.prepare(1)
    written.commit(1)
    again = FileSink(tmp_path / "matches")
    assert again.format == "parquet"
    assert [(r["card"], r["start"]) for r in again.read()] == [("c1", 1)]
    assert FileSink(tmp_path / "fresh").format == "jsonl"


def test_a_csv_file_sink_reads_back_nulls_empty_texts_and_words_as_written() -> None:
    directory = Path(tempfile.mkdtemp())
    records = [{"a": "x", "b": None, "c": ""}, {"a": "NA", "b": "y", "c": "z"}]
    sink = FileSink(directory / "m.csv")
    sink.write(records)
    sink.prepare(1)
    sink.commit(1)
    assert FileSink(directory / "m.csv").read() == records


def test_a_run_that_fails_finishes_its_checkpoint_before_it_raises(tmp_path: Path) -> None:
    """A source that fails mid-run: the checkpoint being written is finished before
    ``run`` raises (left running, it renamed and committed files while a resume in the
    same process restored from them: 'Directory not empty', lost parts), so retrying at
    once gives the uninterrupted run's output."""
    from cep.runtime.sources import Source

    rows = [{"card": f"c{i % 50}", "ts": i * 10, "amount": 1.0 if i % 3 else 900.0,
             "pad": "x" * 200} for i in range(3000)]
    p = (Pattern.begin("a").where(col("amount") < 5).followed_by("b")
         .where(col("amount") > 500).within(200))

    class Flaky(Source):
        def __init__(self, fail_at: int | None = None) -> None:
            self.inner = IterableSource(rows, batch_size=100)
            self.fail_at = fail_at

        def partitions(self) -> Any:
            return self.inner.partitions()

        def read(self, offsets: Any) -> Any:
            for chunk in self.inner.read(offsets):
                if self.fail_at is not None and chunk.end_offset > self.fail_at:
                    raise RuntimeError("the source failed once")
                yield chunk

    def job(source: Source, where: Path) -> Job:
        return (Job(source).key_by("card").timestamps("ts").match(p)
                .sink(FileSink(where / "out", format="jsonl"), kinds=("match", "timeout"))
                .checkpoint(where / "ck", every_events=100))

    job(Flaky(), tmp_path / "whole").run()
    want = Counter(r["match_id"] for r in FileSink(tmp_path / "whole" / "out").read())
    for attempt in range(4):
        where = tmp_path / f"run{attempt}"
        with pytest.raises(RuntimeError, match="the source failed once"):
            job(Flaky(fail_at=1500 + 100 * attempt), where).run()
        assert not [t for t in threading.enumerate()
                    if t.name.startswith("checkpoint-") and t.is_alive()]
        job(Flaky(), where).run(resume=True)
        assert Counter(r["match_id"] for r in FileSink(where / "out").read()) == want
