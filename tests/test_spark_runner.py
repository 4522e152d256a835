"""The Spark group function's logic, without Spark: equal to the embedded operator.

Spark calls a group's function once per micro-batch in which the group has
data, or when the watermark has passed the group's timer; it gives the
function the watermark computed *before* the batch.  These tests play that
protocol: random expression patterns, random keyed streams cut into random
micro-batches, out of order, with some events late; keys spread over key
groups (several keys per state) or one key per group; the state goes through
bytes between every call.  The union of what the groups output must equal what
the embedded :class:`CepOperator` (reference engine) outputs when it gets the
same batches and watermarks.
"""

from __future__ import annotations

import zlib
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cep import MalformedPatternError, Pattern, SkipStrategy, col, count, first, last
from cep.nfa.compiler import compile_pattern
from cep.runtime.blob import pack, unpack
from cep.runtime.checkpoint import CheckpointError
from cep.runtime.operator import CepOperator
from cep.runtime.spark.runner import LATE, ORDER_ROW, TS, GroupRunner, Spec
from tests.strategies import expressions, patterns

KINDS = {"id": "numeric", "k": "string", "v": "numeric", "ts": "numeric"}
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def spec_for(pattern: Pattern, engine: str, **kw: Any) -> Spec:
    return Spec(pattern=pattern.to_json(), key=("k",), columns=("id", "k", "v", "ts"),
                kinds=KINDS, time_is_timestamp=False, engine=engine, timeouts=True, time="ts",
                **kw)


@st.composite
def micro_batches(draw: Any) -> tuple[list[list[dict[str, Any]]], int]:
    """Events in arrival order cut into micro-batches, and the watermark delay."""
    n = draw(st.integers(0, 24))
    keys = draw(st.sampled_from([("a",), ("a", "b"), ("a", "b", "c", "d")]))
    # from 2 ms: Spark reports watermark 0 when it has none and refuses a timer at 0, so the
    # runner's timer floors at 1 ms and fires once the watermark passes it (at 2 ms); an event
    # at 1 ms would wait for a later watermark than this oracle's (GroupRunner._timer)
    events, ts = [], 2
    for i in range(n):
        ts += draw(st.integers(0, 3))
        events.append({"id": i, "k": draw(st.sampled_from(keys)), "v": draw(st.integers(0, 3)),
                       "ts": ts})
    # arrival: each event may move back by a few places (so some may come late)
    arrival = sorted(range(n), key=lambda i: i + draw(st.integers(0, 3)))
    arrived = [events[i] for i in arrival]
    batches, i = [], 0
    while i < n:
        size = draw(st.integers(1, 6))
        batches.append(arrived[i:i + size])
        i += size
    return batches, draw(st.integers(0, 4))


def watermarks(batches: list[list[dict[str, Any]]], delay: int) -> list[int | None]:
    """Spark's watermark at each batch: the newest time of the batches before, minus the delay."""
    out: list[int | None] = []
    newest: int | None = None
    for batch in batches:
        out.append(None if newest is None else newest - delay)
        for e in batch:
            newest = e["ts"] if newest is None else max(newest, e["ts"])
    out.append(None if newest is None else newest - delay)  # Spark's final no-data batch
    return out


def oracle(pattern: Pattern, batches: list[list[dict[str, Any]]], marks: list[int | None]
           ) -> tuple[list[tuple[Any, ...]], list[int]]:
    op = CepOperator(pattern, "reference", key="k", time="ts", timeouts=True)
    found, late = [], []
    for batch, wm in zip([*batches, []], marks, strict=True):
        outs = [op.process_watermark(wm)] if wm is not None else []
        out, _ = op.process_elements(batch, [None] * len(batch))
        outs.append(out)
        for o in outs:
            found += [_summary("match", m) for m in o.matches]
            found += [_summary("timeout", m) for m in o.timeouts]
            late += [e.event["id"] for e in o.late]
    return sorted(found), sorted(late)


def _summary(kind: str, m: Any) -> tuple[Any, ...]:
    stages = tuple((s, tuple(e["id"] for e in evs)) for s, evs in m.items() if evs)
    return (kind, m.key, m.start, m.end, stages)


def play_spark(spec: Spec, batches: list[list[dict[str, Any]]], marks: list[int | None],
               groups: int | None) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Call the runner the way Spark calls a group function."""
    runner = GroupRunner(spec)
    states: dict[Any, bytes | None] = {}
    timers: dict[Any, int | None] = {}
    found, late = [], []
    arrival = 0

    def group_of(key: str) -> Any:
        return key if groups is None else zlib.crc32(key.encode()) % groups

    for batch, wm in zip([*batches, []], marks, strict=True):
        by_group: dict[Any, list[dict[str, Any]]] = {}
        for e in batch:
            by_group.setdefault(group_of(e["k"]), []).append({**e, TS: e["ts"],
                                                              ORDER_ROW: arrival})
            arrival += 1
        due = {g for g, t in timers.items() if t is not None and wm is not None and wm > t}
        for g in sorted(set(by_group) | due, key=str):
            rows = by_group.get(g, [])
            # Spark hands rows of a group over in no particular order
            frames = [pd.DataFrame(rows[::-1])] if rows else []
            result = runner.run(states.get(g), frames, wm)
            states[g], timers[g] = result.state, result.timer
            if result.state is None:
                assert result.timer is None
            for row in result.output.to_dict("records"):
                if row["kind"] == LATE:
                    late.append(row["event"]["id"])
                    continue
                stages = tuple((s, tuple(e["id"] for e in row[s])) for s in runner.stages
                               if len(row[s]))
                found.append((row["kind"], row["k"], row["start"], row["end"], stages))
    return sorted(found), sorted(late)


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize("groups", [None, 1, 3])
@PROPERTY
@given(pattern=patterns(conditions=expressions), stream=micro_batches())
def test_group_function_equals_the_embedded_operator(engine: str, groups: int | None,
                                                     pattern: Pattern, stream: Any) -> None:
    batches, delay = stream
    try:
        compile_pattern(pattern)
    except MalformedPatternError:
        reject()  # the strategy can draw windows the compiler refuses
    marks = watermarks(batches, delay)
    spec = spec_for(pattern, engine, late=True)
    assert play_spark(spec, batches, marks, groups) == oracle(pattern, batches, marks)


def test_an_event_at_or_below_the_watermark_is_late_and_returned_with_the_reason() -> None:
    p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    runner = GroupRunner(spec_for(p, "numba", late=True))
    frame = pd.DataFrame([{"id": 0, "k": "a", "v": 1, "ts": 10, TS: 10, ORDER_ROW: 0}])
    out = runner.run(None, [frame], 10).output
    assert out["kind"].tolist() == ["late"]
    assert out["reason"][0] == "event time 10 is at or below the watermark 10"
    assert out["event"][0] == {"id": 0, "k": "a", "v": 1, "ts": 10}


def test_events_with_no_key_or_time_are_dead_letters_not_lost() -> None:
    p = Pattern.begin("a").where(col("v") == 1)
    runner = GroupRunner(spec_for(p, "numba", late=True))
    frame = pd.DataFrame([{"id": 0, "k": None, "v": 1, "ts": 5, TS: 5, ORDER_ROW: 0},
                          {"id": 1, "k": "a", "v": 1, "ts": None, TS: None, ORDER_ROW: 1}])
    result = runner.run(None, [frame], None)
    assert result.output["kind"].tolist() == ["dead_letter", "dead_letter"]
    assert result.output["reason"].tolist() == ["key field 'k' is null",
                                                "time field 'ts' is null"]
    assert result.counts["dead_letters"] == 2


def test_waiting_events_and_windows_set_the_timer_one_millisecond_early() -> None:
    # Spark fires a group's timeout once the watermark is past it
    p = Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2).within(100)
    runner = GroupRunner(spec_for(p, "numba"))
    frame = pd.DataFrame([{"id": 0, "k": "a", "v": 1, "ts": 50, TS: 50, ORDER_ROW: 0}])
    waiting = runner.run(None, [frame], 10)
    assert waiting.timer == 49  # the event waits for watermark 50
    started = runner.run(waiting.state, [], 50)
    assert started.timer == 149  # the partial match times out at 150
    done = runner.run(started.state, [], 150)
    assert done.state is None and done.timer is None


def test_measures_are_computed_over_the_whole_match() -> None:
    p = (Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
         .where(col("v") < 2).times(2).next("big").where(col("v") == 3))
    spec = spec_for(p, "numba", measures={
        "n": count("small").to_json(), "first_ts": first("small", "ts").to_json(),
        "rise": (last("big", "v") - first("small", "v")).to_json()})
    runner = GroupRunner(spec)
    rows = [{"id": i, "k": "a", "v": v, "ts": i, TS: i, ORDER_ROW: i}
            for i, v in enumerate([1, 0, 3])]
    out = runner.run(None, [pd.DataFrame(rows)], None, final=True).output
    assert out[["n", "first_ts", "rise"]].to_dict("records") == [
        {"n": 2, "first_ts": 0, "rise": 2}]


def test_a_group_with_nothing_left_keeps_no_state() -> None:
    p = Pattern.begin("a").where(col("v") == 1)
    runner = GroupRunner(spec_for(p, "numba"))
    frame = pd.DataFrame([{"id": 0, "k": "a", "v": 1, "ts": 5, TS: 5, ORDER_ROW: 0}])
    result = runner.run(None, [frame], 5 - 1)
    assert result.state is not None  # the event waits for the watermark
    result = runner.run(result.state, [], 5)
    assert len(result.output) == 1 and result.state is None


def test_a_group_state_of_the_earlier_layout_still_resumes() -> None:
    """Group states written before the runner held waiting events in the runtime's
    watermark buffer kept them as a frame (an Arrow stream under ``buffer``): they load."""
    import io

    import pyarrow as pa

    from cep.runtime.spark.runner import SEQ

    p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    runner = GroupRunner(spec_for(p, "numba"))
    waiting = pd.DataFrame([{"id": 0, "k": "a", "v": 1, "ts": 5, TS: 5, SEQ: 0},
                            {"id": 1, "k": "a", "v": 2, "ts": 6, TS: 6, SEQ: 1}])
    sink = io.BytesIO()
    table = pa.Table.from_pandas(waiting, preserve_index=False)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    snap = runner._prototype.engine.fresh().snapshot()
    old = pack({"engine": snap.meta, "job": {"seq": 2, "watermark": 4}},
               {f"e.{k}": v for k, v in snap.arrays.items()},
               {"rows": b"", "buffer": sink.getvalue()})
    result = runner.run(old, [], 6)
    assert [(r["start"], r["end"]) for r in result.output.to_dict("records")] == [(5, 6)]


def test_state_bytes_refuse_anything_else() -> None:
    with pytest.raises(CheckpointError, match="not cep state"):
        unpack(b"\x80\x04pickle")
    data = pack({"x": 1}, {}, {"rows": b"abc"})
    with pytest.raises(CheckpointError, match="truncated"):
        unpack(data[:-1])


def test_batch_chunks_never_split_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    from cep.runtime.spark import batch

    monkeypatch.setattr(batch, "CHUNK_ROWS", 4)
    keys = ["a"] * 3 + ["b"] * 6 + [None] * 2 + ["c"] * 1 + ["d"] * 5
    frame = pd.DataFrame({"k": keys, "i": range(len(keys))})
    record_batches = [pa.RecordBatch.from_pandas(frame.iloc[i:i + 3], preserve_index=False)
                      for i in range(0, len(frame), 3)]
    chunks = list(batch._key_complete_chunks(iter(record_batches), ("k",)))
    assert len(chunks) > 2
    assert [i for c in chunks for i in c["i"]] == list(range(len(keys)))
    for key in ("a", "b", "c", "d"):
        assert sum(key in set(c["k"]) for c in chunks) == 1, key
