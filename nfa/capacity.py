"""A per-key cap on partial matches, applied after a batch: fail with a clear error, or drop
the oldest partial matches (by their first event, as FlinkCEP orders them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cep.errors import TooManyPartialMatches
from cep.nfa.kernel import NO_START, R_SID_SEQ, R_SID_TS, R_STATE
from cep.nfa.priority_queue import PriorityQueue

#: the start id of a row that is not a partial match (the key's start state)


def _fail(key: Any, count: int, cap: int, stages: list[str]) -> None:
    raise TooManyPartialMatches(
        f"key {key!r} holds {count} partial matches, over the cap of {cap} "
        f"(they wait in stages {sorted(set(stages))}); narrow the pattern (within, "
        "consecutive, conditions) or raise max_partial_matches, or use on_overflow='drop_oldest'"
    )


def limit_reference(engine: Any, cap: int, policy: str) -> int:
    """The cap on a :class:`~cep.nfa.reference_engine.ReferenceEngine`'s runs."""
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


def limit_columnar(core: Any, cap: int, policy: str) -> int:
    """The cap on a :class:`~cep.nfa.columnar.ColumnarEngine`'s arena, key by key."""
    dropped = 0
    for kid in np.nonzero(core.key_len - 1 > cap)[0].tolist():
        off, n = int(core.key_off[kid]), int(core.key_len[kid])
        rows = core.AI[off : off + n]
        live = [r for r in range(n) if rows[r, R_SID_SEQ] != NO_START]
        if len(live) <= cap:
            continue
        if policy == "fail":
            _fail(core.key_values[kid], len(live), cap,
                  [core.state_stages[int(rows[r, R_STATE])] for r in live])
        oldest = sorted(live, key=lambda r: (rows[r, R_SID_TS], rows[r, R_SID_SEQ]))
        doomed = set(oldest[: len(live) - cap])
        # survivors keep array order and are heapified, as Java's bulk removal does
        order = np.array(_heapified([r for r in range(n) if r not in doomed], rows), np.int64)
        core.AI[off : off + len(order)] = rows[order]
        core.AF[off : off + len(order)] = core.AF[off : off + n][order]
        core.key_len[kid] = len(order)
        dropped += len(doomed)
    return dropped


def _heapified(keep: list[int], rows: np.ndarray) -> list[int]:
    return PriorityQueue.heapified(lambda r: (int(rows[r, R_SID_TS]), int(rows[r, R_SID_SEQ])),
                                   keep)
