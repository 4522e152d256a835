"""The numba engine's state as data: its arrays, dictionaries, and the events live paths hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cep.errors import CheckpointError
from cep.keys import decode_key, encode_keys
from cep.nfa.columnar import _Retained, entry_refs, rows_of
from cep.nfa.distinct import distinct_inverse
from cep.nfa.engine import Snapshot
from cep.nfa.events import Events, count_rows, is_table, row_objects
from cep.nfa.kernel import N_PARENT, N_ROW, N_STAGE, R_NODE, R_STATE, collect_garbage
from cep.nfa.numba_engine import NumbaEngine

_ARRAYS = ("AI", "AF", "key_time", "key_off", "key_len", "key_coff", "key_clen")


def capture(engine: NumbaEngine) -> Callable[[], Snapshot]:
    """The kernel replaces its arena instead of writing into it, so holding a reference
    freezes it in O(1); the per-key arrays, which it writes in place, are taken for the
    keys that hold state (a snapshot records no other), and the short dictionaries
    copied.  The key list is only ever appended to (or replaced): the keys the arrays
    index stay as they are, without a copy (a hundred rules' lists of 40,000 keys, on the
    job's thread, were the most of a checkpoint's pause)."""
    eng = engine.core
    if eng is None:
        return lambda: Snapshot({"engine": "numba", "empty": True})
    if eng.broken is not None:
        raise CheckpointError(f"the engine stopped at an error ({eng.broken}): it has no "
                              "state to save")
    # keys with nothing pending are left out: as keys never seen, they need no record
    held = np.flatnonzero(eng.key_len >= 0)
    arrays = {name: getattr(eng, name) if name in ("AI", "AF") else getattr(eng, name)[held]
              for name in _ARRAYS}
    nodes = eng.nodes[: eng.nodes_n]
    retained = list(eng._retained)
    strings = dict(eng.strings)
    key_values = eng.key_values
    schema = dict(eng.schema)
    return lambda: _dump(arrays, held, nodes, retained, strings, key_values, schema)


def _dump(arrays: dict[str, np.ndarray], held: np.ndarray, nodes: np.ndarray,
          retained: list[Any], strings: dict[str, int], key_values: list[Any],
          schema: dict[str, str]) -> Snapshot:
    # the engine collects garbage only now and then: a snapshot holds live nodes only
    ai = arrays["AI"].copy()
    nodes, n = collect_garbage(ai, len(ai), nodes.copy(), len(nodes))
    nodes = nodes[:n]
    arrays = {**arrays, "AI": ai}
    key_values = [key_values[i] for i in held.tolist()]
    # marked, not sorted as np.unique would, and each node's place among them read from
    # the same table, not searched for: a job of a hundred rules does this per rule at
    # every checkpoint
    rows_used, places = distinct_inverse(nodes[:, N_ROW])
    if retained and all(is_table(kept.batch.rows) for kept in retained):
        # by reference: the rules of a job hold events of the same batches, and a
        # checkpoint takes each once for all of them (cep.runtime.job.combine)
        rows: Any = entry_refs(retained, rows_used)
    else:
        held_rows = rows_of(retained, rows_used)
        # Arrow events stay a table (a checkpoint writes it as it is); others objects
        rows = held_rows if is_table(held_rows) else row_objects(held_rows, None)
    nodes[:, N_ROW] = places
    out = dict(arrays)
    out["nodes"] = nodes
    meta = {
        "engine": "numba",
        "empty": False,
        "schema": schema,
        "strings": sorted(strings, key=strings.__getitem__),
        "keys": encode_keys(key_values),
    }
    return Snapshot(meta, out, rows)


def load(engine: NumbaEngine, snap: Snapshot) -> None:
    """Restore ``engine`` from a numba snapshot (what ``NumbaEngine.restore`` does)."""
    meta = snap.meta
    if meta.get("empty"):
        engine.core = None
        return
    eng = engine.blank(meta["schema"])
    snap = snap.held()
    check_state(eng, snap)
    for name in _ARRAYS:
        setattr(eng, name, np.array(snap.arrays[name], copy=True))
    nodes = snap.arrays["nodes"]
    eng.nodes = np.array(nodes if len(nodes) else np.empty((16, 5), np.int64), copy=True)
    eng.nodes_n = eng._live_nodes = len(nodes)
    eng.strings = {s: i for i, s in enumerate(meta["strings"])}
    eng.key_values = [decode_key(k) for k in meta["keys"]]
    eng.keys = {k: i for i, k in enumerate(eng.key_values)}
    eng._keys_changed()
    rows = snap.rows if is_table(snap.rows) else list(snap.rows)
    n = count_rows(rows)
    eng.next_row = n
    eng._retained = [_Retained(0, n, Events.of(rows))] if n else []
    eng._live_rows = eng._held_rows = n
    engine.core = eng


def check_state(eng: Any, snap: Snapshot) -> None:
    """Refuse a snapshot whose arrays do not fit ``eng``'s compiled pattern: the kernel reads
    them without bounds checks, so an index out of range would crash the process or read
    another key's state.  A checksum only says the files are as written; this says they
    make sense (a hand-edited or foreign checkpoint with a recomputed checksum).

    Checked: shapes and types; every key's partial and completed rows inside the arena,
    completed right after partial; states and nodes in range; each node's parent an
    earlier node (so a path always ends); each node's event among the saved events."""
    def fail(what: str) -> CheckpointError:
        return CheckpointError(f"engine state does not fit this pattern: {what}; the checkpoint "
                               "was edited, damaged or written by another job")

    arrays = snap.arrays
    missing = [n for n in (*_ARRAYS, "nodes") if n not in arrays]
    if missing:
        raise fail(f"arrays {missing} are missing")
    ai, af, nodes = arrays["AI"], arrays["AF"], arrays["nodes"]
    n_keys = len(snap.meta.get("keys", []))
    for name in _ARRAYS:
        a = arrays[name]
        want = np.float64 if name == "AF" else np.int64
        if a.dtype != want:
            raise fail(f"{name} holds {a.dtype}, not {np.dtype(want)}")
        if name not in ("AI", "AF") and a.shape != (n_keys,):
            raise fail(f"{name} has shape {a.shape} for {n_keys} keys")
    if nodes.dtype != np.int64 or (len(nodes) and nodes.ndim != 2) or (
            nodes.ndim == 2 and nodes.shape[1] != 5):
        raise fail(f"nodes have shape {nodes.shape} ({nodes.dtype})")
    n = len(ai)
    if ai.ndim != 2 or ai.shape[1] != 6 or af.shape != (n, eng.n_slots):
        raise fail(f"partial matches have shapes {ai.shape} and {af.shape}, the pattern "
                   f"needs (n, 6) and (n, {eng.n_slots})")
    off, ln = arrays["key_off"], arrays["key_len"]
    coff, cln = arrays["key_coff"], arrays["key_clen"]
    partial = np.maximum(ln, 0)
    bad = ((ln < -1) | (off < 0) | (cln < 0) | (coff != off + partial)
           | (coff + cln > n) | ((ln < 0) & (cln > 0)))
    if bad.any():
        k = int(np.argmax(bad))
        raise fail(f"key {k} claims rows {int(off[k])}+{int(ln[k])} and "
                   f"{int(coff[k])}+{int(cln[k])} of an arena of {n}")
    m = len(nodes)
    states = ai[:, R_STATE] if n else np.empty(0, np.int64)
    if n and ((states < 0) | (states >= len(eng.st_kind))).any():
        raise fail(f"a partial match is in state {int(states.max())} of {len(eng.st_kind)}")
    if n and ((ai[:, R_NODE] < -1) | (ai[:, R_NODE] >= m)).any():
        raise fail(f"a partial match points at a node beyond the {m} saved")
    if m:
        parents = nodes[:, N_PARENT]
        if ((parents < -1) | (parents >= np.arange(m))).any():
            raise fail("a node's parent is not an earlier node")
        if ((nodes[:, N_ROW] < 0) | (nodes[:, N_ROW] >= len(snap.rows))).any():
            raise fail(f"a node names an event beyond the {len(snap.rows)} saved")
        if ((nodes[:, N_STAGE] < 0) | (nodes[:, N_STAGE] >= len(eng.stages))).any():
            raise fail(f"a node names a stage beyond the pattern's {len(eng.stages)}")
