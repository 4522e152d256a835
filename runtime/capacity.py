"""A per-key cap on partial matches: fail with a clear error, or drop the oldest."""

from __future__ import annotations

from typing import Any

import numpy as np

from cep.errors import CEPError
from cep.nfa.priority_queue import PriorityQueue


class TooManyPartialMatches(CEPError):
    """A key holds more partial matches than the job allows."""


def enforce(engine: Any, cap: int, policy: str) -> int:
    """Apply the cap to every key; return how many partial matches were dropped."""
    if engine.name == "reference":
        return _reference(engine, cap, policy)
    return _numba(engine, cap, policy)


def _fail(key: Any, count: int, cap: int, stages: list[str]) -> None:
    raise TooManyPartialMatches(
        f"key {key!r} holds {count} partial matches, over the cap of {cap} "
        f"(they wait in stages {sorted(set(stages))}); narrow the pattern (within, "
        "consecutive, conditions) or raise max_partial_matches, or use on_overflow='drop_oldest'"
    )


def _reference(engine: Any, cap: int, policy: str) -> int:
    dropped = 0
    for key, run in engine.runs.items():
        live = [c for c in run.partial if not c.state.is_start]
        if len(live) <= cap:
            continue
        if policy == "fail":
            _fail(key, len(live), cap, [c.state.stage for c in live])
        doomed = {id(c) for c in sorted(live, key=lambda c: c.start_id)[: len(live) - cap]}
        run.partial.remove_where(lambda c, d=doomed: id(c) in d)
        dropped += len(doomed)
    return dropped


def _numba(engine: Any, cap: int, policy: str) -> int:
    eng = engine.engine
    if eng is None:
        return 0
    dropped = 0
    for kid in np.nonzero(eng.key_len - 1 > cap)[0].tolist():
        off, n = int(eng.key_off[kid]), int(eng.key_len[kid])
        rows = eng.AI[off : off + n]
        live = [r for r in range(n) if rows[r, 5] != np.iinfo(np.int64).max]
        if len(live) <= cap:
            continue
        if policy == "fail":
            _fail(eng.key_values[kid], len(live), cap,
                  [eng.state_stages[int(rows[r, 0])] for r in live])
        oldest = sorted(live, key=lambda r: (rows[r, 4], rows[r, 5]))[: len(live) - cap]
        doomed = set(oldest)
        # survivors keep array order and are heapified, as Java's bulk removal does
        order = np.array(_heapified([r for r in range(n) if r not in doomed], rows), np.int64)
        eng.AI[off : off + len(order)] = rows[order]
        eng.AF[off : off + len(order)] = eng.AF[off : off + n][order]
        eng.key_len[kid] = len(order)
        dropped += len(oldest)
    return dropped


def _heapified(keep: list[int], rows: np.ndarray) -> list[int]:
    queue: PriorityQueue[int] = PriorityQueue(lambda r: (int(rows[r, 4]), int(rows[r, 5])))
    queue._items = list(keep)
    n = len(keep)
    for i in range((n >> 1) - 1, -1, -1):
        queue._sift_down(i, queue._items[i], n)
    return queue._items
