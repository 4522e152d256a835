"""Hand-written numba loops, each specialised to one benchmark pattern: the practical limit.

No NFA, no partial-match store: events sorted by (key, time, arrival) like the
engine sorts them, then one pass with a few scalars of state per key.  Each
loop returns ``(first, last)`` positions (in sorted order) of every match; the
semantics are FlinkCEP's, derived by hand for that one pattern:

* **A** (``small{3,}`` consecutive greedy, ``next`` big, within W, skip past
  last event): a big charge at position j matches iff it directly follows a
  run of small charges on the same card; the match starts at the earliest small
  charge s of that run still inside the window (``ts[j] - ts[s] < W``: FlinkCEP
  prunes a partial match once ``ts - start >= W``) provided ``j - s >= 3``.
  Every small charge of the run starts a partial match; skip-past-last emits
  the one that started first and discards the others.  A run ends at any
  non-small charge, so runs never interact.
* **B** (A, ``next`` B > A, ``next`` C > B): positions i-2, i-1, i on one
  key with strictly increasing amounts (a NaN compares false).  Skip to next
  keeps every such triple (a partial match starting later than the match's
  first event survives); skip past last event restarts after the match's
  last event.

:func:`run_loop` is the whole pipeline of the hand-written variant (Parquet
table in, :class:`cep.Match` objects out), timed in the same places as the
engine.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np
from numba import njit

from cep import Match


@njit(cache=True, nogil=True)
def card_testing(key, ts, amount, small, big, window):
    n = key.shape[0]
    first = np.empty(n // 4 + 1, np.int64)
    last = np.empty(n // 4 + 1, np.int64)
    m = 0
    run = -1  # first position of the current run of small charges, -1 if none
    for i in range(n):
        if i > 0 and key[i] != key[i - 1]:
            run = -1
        a = amount[i]
        if a < small:
            if run < 0:
                run = i
            continue
        if a > big and run >= 0:
            s = run
            while ts[i] - ts[s] >= window:
                s += 1
            if i - s >= 3:
                first[m] = s
                last[m] = i
                m += 1
        run = -1
    return first[:m], last[:m]


@njit(cache=True, nogil=True)
def increasing_past(key, amount):
    n = key.shape[0]
    first = np.empty(n // 3 + 1, np.int64)
    last = np.empty(n // 3 + 1, np.int64)
    m = 0
    run = 0  # length of the increasing run ending here, since the last match
    for i in range(n):
        if i > 0 and key[i] == key[i - 1] and run > 0 and amount[i] > amount[i - 1]:
            run += 1
        else:
            run = 1
        if run == 3:
            first[m] = i - 2
            last[m] = i
            m += 1
            run = 0
    return first[:m], last[:m]


@njit(cache=True, nogil=True)
def increasing_next(key, amount):
    n = key.shape[0]
    first = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    m = 0
    run = 0  # length of the increasing run ending here
    for i in range(n):
        if i > 0 and key[i] == key[i - 1] and amount[i] > amount[i - 1]:
            run += 1
        else:
            run = 1
        if run >= 3:
            first[m] = i - 2
            last[m] = i
            m += 1
    return first[:m], last[:m]


LOOPS = {"card_testing": card_testing, "increasing_past": increasing_past,
         "increasing_next": increasing_next}
STAGES = {"card_testing": ("small", "big"), "increasing_past": ("A", "B", "C"),
          "increasing_next": ("A", "B", "C")}


def call(name: str, key: np.ndarray, ts: np.ndarray, amount: np.ndarray) -> tuple[Any, Any]:
    """Run loop ``name`` over arrays already sorted by (key, time, arrival)."""
    if name == "card_testing":
        from benchmarks.patterns import BIG, SMALL, WINDOW_A

        window = int(WINDOW_A.total_seconds() * 1000)
        return card_testing(key, ts, amount, SMALL, BIG, window)
    return LOOPS[name](key, amount)


def warm_up() -> None:
    """Compile (or load from numba's cache) every loop on a tiny input."""
    k = np.zeros(8, np.int64)
    t = np.arange(8, dtype=np.int64)
    a = np.arange(8, dtype=np.float64)
    for name in LOOPS:
        call(name, k, t, a)


def run_loop(
    name: str, table: Any, key: str, time_col: str, timings: dict[str, float] | None = None
) -> list[Match]:
    """The hand-written pipeline: sort, loop, then Match objects for the matched events.

    ``timings`` (if given) receives ``loop`` (the jitted pass only) and ``prep``
    (columns to numpy and the sort).
    """
    t0 = time.perf_counter()
    keys = table.column(key).to_numpy()
    ts = table.column(time_col).to_numpy()
    amount = table.column("amount").to_numpy()
    order = np.lexsort((np.arange(len(ts)), ts, keys))
    k, t, a = keys[order], ts[order], amount[order]
    t1 = time.perf_counter()
    first, last = call(name, k, t, a)
    t2 = time.perf_counter()
    if timings is not None:
        timings["prep"] = t1 - t0
        timings["loop"] = t2 - t1
    return _matches(name, table, order, k, t, first, last)


def _matches(
    name: str, table: Any, order: np.ndarray, k: np.ndarray, t: np.ndarray,
    first: np.ndarray, last: np.ndarray,
) -> list[Match]:
    """Match objects holding each matched event as a dict, like the engine's over Arrow."""
    if len(first) == 0:
        return []
    was_on = gc.isenabled()
    gc.disable()  # many small containers at once: a collection midway only costs time
    try:
        return _build(name, table, order, k, t, first, last)
    finally:
        if was_on:
            gc.enable()


def _build(
    name: str, table: Any, order: np.ndarray, k: np.ndarray, t: np.ndarray,
    first: np.ndarray, last: np.ndarray,
) -> list[Match]:
    lengths = last - first + 1
    positions = np.repeat(first - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    unique, inverse = np.unique(order[positions], return_inverse=True)
    distinct = _dicts(table.take(unique))  # one dict per event, shared by its matches
    rows = [distinct[i] for i in inverse.tolist()]
    out: list[Match] = []
    j = 0
    starts, ends = t[first].tolist(), t[last].tolist()
    key_values = k[first].tolist()
    if name == "card_testing":
        for n, s, e, kv in zip(lengths.tolist(), starts, ends, key_values):
            out.append(Match.of({"small": rows[j : j + n - 1], "big": [rows[j + n - 1]]}, s, e, kv))
            j += n
    else:
        for s, e, kv in zip(starts, ends, key_values):
            out.append(Match.of({"A": [rows[j]], "B": [rows[j + 1]], "C": [rows[j + 2]]}, s, e, kv))
            j += 3
    return out


def _dicts(table: Any) -> list[dict[str, Any]]:
    """``table.to_pylist()``, column by column (numeric columns through numpy: faster)."""
    import pyarrow as pa

    names = table.column_names
    columns = []
    for name in names:
        column = table.column(name)
        if (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)) and (
            column.null_count == 0
        ):
            columns.append(column.to_numpy().tolist())
        else:
            columns.append(column.to_pylist())
    return [dict(zip(names, values)) for values in zip(*columns)]


def self_check(trials: int = 300, seed: int = 7) -> None:
    """Random small streams with the edge cases (ties, window boundary, NaN, key changes):
    every loop must give exactly the reference engine's matches."""
    import pyarrow as pa

    import cep
    from benchmarks.patterns import CASES

    rng = np.random.default_rng(seed)
    window = 600_000
    for trial in range(trials):
        n = int(rng.integers(1, 60))
        keys = rng.integers(0, 3, n)
        steps = rng.choice([0, 1, 1_000, 60_000, 200_000, window, window - 1], n)
        ts = np.cumsum(steps) - rng.integers(0, 3, n) * 1_000  # ties and a little disorder
        amount = rng.choice([1.0, 4.99, 5.0, 30.0, 500.0, 500.01, 900.0, 2.0, 3.0, np.nan], n)
        table = pa.table({"card_id": keys, "amount": amount, "ts": ts.astype(np.int64),
                          "merchant": ["m"] * n})
        for case in CASES:
            if not case.handwritten:
                continue
            want = cep.match(table, case.pattern(), key="card_id", time="ts", engine="reference")
            got = run_loop(case.handwritten, table, "card_id", "ts")

            def sig(ms: list[Match]) -> list[Any]:
                return sorted((m.key, m.start, m.end, repr(dict(m))) for m in ms)

            if sig(want) != sig(got):
                raise AssertionError(
                    f"trial {trial}, {case.name}: reference {sig(want)}\nhand-written {sig(got)}\n"
                    f"input {table.to_pylist()}"
                )
    print(f"hand-written loops agree with the reference engine on {trials} random streams")


if __name__ == "__main__":
    self_check()
