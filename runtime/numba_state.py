"""The numba engine's state as data: its arrays, dictionaries, and the events live paths hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.engines import NumbaKeyed, Snapshot
from runtime.keys import decode_key, encode_key

_ARRAYS = ("AI", "AF", "key_time", "key_off", "key_len", "key_coff", "key_clen")


def capture(engine: NumbaKeyed) -> Callable[[], Snapshot]:
    """The kernel replaces its arrays instead of writing into them, so holding references
    freezes the state in O(1); only the short dictionaries are copied."""
    eng = engine.engine
    if eng is None:
        return lambda: Snapshot({"engine": "numba", "empty": True})
    arrays = {name: getattr(eng, name) for name in _ARRAYS}
    nodes = eng.nodes[: eng.nodes_n]
    retained = list(eng._retained)
    strings = dict(eng.strings)
    key_values = list(eng.key_values)
    schema = dict(eng.schema)
    return lambda: _dump(arrays, nodes, retained, strings, key_values, schema)


def _dump(arrays: dict[str, np.ndarray], nodes: np.ndarray, retained: list[Any],
          strings: dict[str, int], key_values: list[Any], schema: dict[str, str]) -> Snapshot:
    from nfa.kernel import collect_garbage

    # the engine collects garbage only now and then: a snapshot holds live nodes only
    ai = arrays["AI"].copy()
    nodes, n = collect_garbage(ai, len(ai), nodes.copy(), len(nodes))
    nodes = nodes[:n]
    arrays = {**arrays, "AI": ai}
    rows_used = np.unique(nodes[:, 0]) if n else np.empty(0, np.int64)
    from nfa.columnar import events_of

    found = events_of(retained, rows_used)
    rows = [found[r] for r in rows_used.tolist()]
    if n:
        nodes[:, 0] = np.searchsorted(rows_used, nodes[:, 0])
    out = dict(arrays)
    out["nodes"] = nodes
    meta = {
        "engine": "numba",
        "empty": False,
        "schema": schema,
        "strings": sorted(strings, key=strings.__getitem__),
        "keys": [encode_key(k) for k in key_values],
    }
    return Snapshot(meta, out, rows)


def load(engine: NumbaKeyed, snap: Snapshot) -> None:
    """Restore ``engine`` from a numba snapshot (what ``NumbaKeyed.restore`` does)."""
    from nfa.columnar import Batch, _Retained

    meta = snap.meta
    if meta.get("empty"):
        engine.engine = None
        return
    eng = engine.blank(meta["schema"])
    for name in _ARRAYS:
        setattr(eng, name, np.array(snap.arrays[name], copy=True))
    nodes = snap.arrays["nodes"]
    eng.nodes = np.array(nodes if len(nodes) else np.empty((16, 5), np.int64), copy=True)
    eng.nodes_n = eng._live_nodes = len(nodes)
    eng.strings = {s: i for i, s in enumerate(meta["strings"])}
    eng.key_values = [decode_key(k) for k in meta["keys"]]
    eng.keys = {k: i for i, k in enumerate(eng.key_values)}
    rows = list(snap.rows)
    eng.next_row = len(rows)
    eng._retained = [_Retained(0, len(rows), Batch.of_events(rows))] if rows else []
    eng._live_rows = eng._held_rows = len(rows)
    engine.engine = eng
