"""The numba engine's state as data: its arrays, dictionaries, and the events live paths hold."""

from __future__ import annotations

import numpy as np

from runtime.engines import NumbaKeyed, Snapshot
from runtime.keys import decode_key, encode_key

_ARRAYS = ("AI", "AF", "key_time", "key_off", "key_len", "key_coff", "key_clen")


def dump(engine: NumbaKeyed) -> Snapshot:
    eng = engine.engine
    if eng is None:
        return Snapshot({"engine": "numba", "empty": True})
    n = eng.nodes_n
    nodes = eng.nodes[:n].copy()
    rows_used = np.unique(nodes[:, 0]) if n else np.empty(0, np.int64)
    found = eng._events(rows_used)
    rows = [found[r] for r in rows_used.tolist()]
    if n:
        nodes[:, 0] = np.searchsorted(rows_used, nodes[:, 0])
    arrays = {name: np.array(getattr(eng, name), copy=True) for name in _ARRAYS}
    arrays["nodes"] = nodes
    meta = {
        "engine": "numba",
        "empty": False,
        "schema": eng.schema,
        "strings": sorted(eng.strings, key=eng.strings.__getitem__),
        "keys": [encode_key(k) for k in eng.key_values],
    }
    return Snapshot(meta, arrays, rows)


def load(engine: NumbaKeyed, snap: Snapshot) -> None:
    from nfa.columnar import Batch, ColumnarEngine, _Retained

    meta = snap.meta
    if meta.get("empty"):
        engine.engine = None
        return
    eng = ColumnarEngine(engine.pattern, meta["schema"], timeouts=engine.timeouts)
    for name in _ARRAYS:
        setattr(eng, name, np.array(snap.arrays[name], copy=True))
    nodes = snap.arrays["nodes"]
    eng.nodes = np.array(nodes if len(nodes) else np.empty((16, 5), np.int64), copy=True)
    eng.nodes_n = len(nodes)
    eng.strings = {s: i for i, s in enumerate(meta["strings"])}
    eng.key_values = [decode_key(k) for k in meta["keys"]]
    eng.keys = {k: i for i, k in enumerate(eng.key_values)}
    rows = list(snap.rows)
    eng.next_row = len(rows)
    eng._retained = [_Retained(0, len(rows), Batch.of_events(rows))] if rows else []
    engine.engine = eng
