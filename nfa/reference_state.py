"""The reference engine's state as data: computations, the path nodes they reach, the events."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from cep.errors import CheckpointError
from cep.keys import decode_key, encode_key
from cep.nfa.engine import Snapshot
from cep.nfa.events import is_table, row_objects, rows_bytes
from cep.nfa.reference import Computation, PathNode
from cep.nfa.reference_engine import ReferenceEngine

#: columns of the saved path nodes ``[event, ts, eid ts, eid seq, stage, parent]``, in the
#: order ``capture`` writes them and ``load`` reads them
NODE_EVENT, NODE_TS, NODE_EID_TS, NODE_EID_SEQ, NODE_STAGE, NODE_PARENT = range(6)


def capture(engine: ReferenceEngine) -> Callable[[], Snapshot]:
    """Computations and path nodes are never changed once made, so holding each key's
    current lists (O(live partial matches)) freezes the state; serialising can wait."""
    frozen = [
        (key, engine.times.get(key), *run.state()) for key, run in engine.runs.items()
    ]
    return lambda: _dump(frozen)


def _dump(frozen: list[tuple[Any, Any, int, list[Any], list[Any]]]) -> Snapshot:
    node_ids: dict[int, int] = {}
    nodes: list[PathNode] = []
    event_ids: dict[int, int] = {}
    rows: list[Any] = []

    def node_id(node: PathNode | None) -> int:
        if node is None:
            return -1
        chain = []
        while node is not None and id(node) not in node_ids:
            chain.append(node)
            node = node.parent
        for n in reversed(chain):  # parents first, so ids grow along a path
            node_ids[id(n)] = len(nodes)
            nodes.append(n)
            if id(n.event) not in event_ids:
                event_ids[id(n.event)] = len(rows)
                rows.append(n.event)
        return node_ids[id(chain[0])] if chain else node_ids[id(node)]

    def comp(c: Any) -> list[Any]:
        sid = c.start_id
        return [c.state.name, node_id(c.node), c.start_ts, c.prev_ts,
                None if sid is None else sid[0], None if sid is None else sid[1]]

    keys, times, seqs, partial, completed = [], [], [], [], []
    for key, time, seq, partial_items, completed_items in frozen:
        keys.append(encode_key(key))
        times.append(time)
        seqs.append(seq)
        partial.append([comp(c) for c in partial_items])
        completed.append([comp(c) for c in completed_items])
    stages = sorted({n.stage for n in nodes})
    table = np.array(
        [
            [event_ids[id(n.event)], n.ts, n.eid[0], n.eid[1], stages.index(n.stage),
             -1 if n.parent is None else node_ids[id(n.parent)]]
            for n in nodes
        ],
        dtype=np.int64,
    ).reshape(-1, 6)
    meta = {
        "engine": "reference", "keys": keys, "times": times, "seqs": seqs,
        "partial": partial, "completed": completed, "stages": stages,
    }
    return Snapshot(meta, {"nodes": table}, rows)


def load(engine: ReferenceEngine, snap: Snapshot) -> None:
    """Restore ``engine`` from a reference snapshot (what ``ReferenceEngine.restore`` does)."""
    meta = snap.meta
    if is_table(snap.rows):  # a checkpoint's events, read as a table: a dict each
        snap = Snapshot(meta, snap.arrays, row_objects(snap.rows))
    check_state(engine, snap)
    stages = meta["stages"]
    built: list[PathNode] = []
    for event_ix, ts, eid_ts, eid_seq, stage_ix, parent in snap.arrays["nodes"].tolist():
        built.append(
            PathNode(snap.rows[event_ix], ts, (eid_ts, eid_seq), stages[stage_ix],
                     None if parent < 0 else built[parent])
        )
    states = engine.nfa.states

    def comp(row: list[Any]) -> Computation:
        name, node, start_ts, prev_ts, sid_ts, sid_seq = row
        sid = None if sid_ts is None else (sid_ts, sid_seq)
        return Computation(states[name], None if node < 0 else built[node], start_ts, prev_ts, sid)

    engine.runs.clear()
    engine.times.clear()
    for key, time, seq, partial, completed in zip(
        meta["keys"], meta["times"], meta["seqs"], meta["partial"], meta["completed"]
    ):
        run = engine.new_run()
        run.load_state(seq, [comp(c) for c in partial], [comp(c) for c in completed])
        if run.idle:
            continue  # written before idle keys were forgotten
        k = decode_key(key)
        engine.runs[k] = run
        if time is not None:
            engine.times[k] = time


def size_of(engine: ReferenceEngine) -> int:
    """About how many bytes the engine's state takes: its runs, their partial and completed
    matches, the path nodes those reach and the events on them (each counted once)."""
    seen: set[int] = set()
    total = sys.getsizeof(engine.runs) + sys.getsizeof(engine.times)
    for run in engine.runs.values():
        total += _RUN_BYTES
        for c in (*run.partial.heap(), *run.completed.heap()):
            total += _COMPUTATION_BYTES
            node = c.node
            while node is not None and id(node) not in seen:
                seen.add(id(node))
                total += _NODE_BYTES
                if id(node.event) not in seen:
                    seen.add(id(node.event))
                    total += rows_bytes([node.event])
                node = node.parent
    return total


# a computation with its start id tuple, a path node with its event id tuple, a run with
# its two queues and their lists (CPython 3.11, 64-bit)
_COMPUTATION_BYTES = 72 + 56
_NODE_BYTES = 72 + 56
_RUN_BYTES = 56 + 2 * (56 + 56)


def check_state(engine: ReferenceEngine, snap: Snapshot) -> None:
    """Refuse a snapshot that does not fit ``engine``'s pattern before building from it:
    a negative index would silently pick another event or stage (Python counts from the
    end), a name not in the NFA would fail half-way through the restore."""
    def fail(what: str) -> CheckpointError:
        return CheckpointError(f"engine state does not fit this pattern: {what}; the checkpoint "
                               "was edited, damaged or written by another job")

    meta = snap.meta
    try:
        stages = list(meta["stages"])
        per_key = [meta[f] for f in ("keys", "times", "seqs", "partial", "completed")]
        nodes = snap.arrays["nodes"]
    except (KeyError, TypeError) as err:
        raise fail(f"{err} is missing") from None
    if len({len(v) for v in per_key}) != 1:
        raise fail("the per-key lists differ in length")
    if nodes.dtype != np.int64 or nodes.ndim != 2 or nodes.shape[1] != 6:
        raise fail(f"nodes have shape {nodes.shape} ({nodes.dtype})")
    unknown = set(stages) - set(engine.nfa.stage_names)
    if unknown:
        raise fail(f"stages {sorted(unknown)} are not in the pattern")
    m = len(nodes)
    if m:
        if ((nodes[:, NODE_EVENT] < 0) | (nodes[:, NODE_EVENT] >= len(snap.rows))).any():
            raise fail(f"a node names an event beyond the {len(snap.rows)} saved")
        if ((nodes[:, NODE_STAGE] < 0) | (nodes[:, NODE_STAGE] >= len(stages))).any():
            raise fail(f"a node names a stage beyond the {len(stages)} saved")
        if ((nodes[:, NODE_PARENT] < -1) | (nodes[:, NODE_PARENT] >= np.arange(m))).any():
            raise fail("a node's parent is not an earlier node")
    states = engine.nfa.states
    for rows in (*meta["partial"], *meta["completed"]):
        for row in rows:
            if (not isinstance(row, list) or len(row) != 6 or row[0] not in states
                    or not isinstance(row[1], int) or not -1 <= row[1] < m):
                raise fail(f"partial match {row!r} names no state or node of the pattern")
