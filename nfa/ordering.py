"""The order a batch is matched in: key by key, each key's events by time, ties in
arrival order - ``np.lexsort((times, keys))``, in O(n) for the usual batch.

Events mostly arrive in time order per key (a card's charges are hours apart, a source's
delays seconds), so after a counting sort by key id (stable) each key's events are sorted
or nearly: an insertion sort finishes them, and a batch far out of order is left to
``np.lexsort``.

>>> order = key_time_order(np.array([1, 0, 1, 0]), np.array([5, 9, 3, 9]), 2)
>>> order.tolist() == np.lexsort((np.array([5, 9, 3, 9]), np.array([1, 0, 1, 0]))).tolist()
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cep.nfa.jit_cache import cacheable, ready

#: numba caches compiled code on disk when it can (see cep.nfa.jit_cache)
CACHE = cacheable(__file__)

#: a counting sort allocates and walks one slot per key id: worth it while key ids are at
#: most this many times the events (else np.lexsort, whose cost does not depend on them)
KEYS_PER_EVENT = 4


def key_time_order(key_ids: np.ndarray, times: np.ndarray, n_keys: int) -> np.ndarray:
    """Positions that sort events by (key id, time), stably; key ids are in ``range(n_keys)``."""
    key_ids = np.asarray(key_ids, np.int64)
    times = np.asarray(times, np.int64)
    if n_keys <= KEYS_PER_EVENT * max(len(key_ids), 1) and _compiled():
        order, ok = _counting_order(key_ids, times, np.int64(n_keys))
        if ok:
            return order
    return np.lexsort((times, key_ids))


#: set when a second process compiles the counting sort (cep.nfa.compile_aside), until the
#: next batch put in order
_compiled_aside: list[bool] = []


def compiled_aside() -> None:
    """Say that a second process compiles :func:`_counting_order` into numba's cache: the
    next batch is then put in order without it (see :func:`_compiled`)."""
    _compiled_aside.append(True)


def _compiled() -> bool:
    """Whether to use :func:`_counting_order`: always but on the first call after
    :func:`compiled_aside`, when it is neither compiled nor cached: that batch is sorted by
    ``np.lexsort``, the kernel's first compile follows, and the next batch finds the
    counting sort in the cache (half a second less of a machine's first ``cep.match``).
    With no second process it is compiled at once: later, it would only take the half
    second from the next batch."""
    if not _compiled_aside:
        return True
    _compiled_aside.clear()
    return ready(_counting_order)


@njit(cache=CACHE, nogil=True)
def _counting_order(key_ids, times, n_keys):
    """The order, and whether it is complete: each key's events are put in time order by
    insertion (cheap when they are nearly so), giving up past a budget of moves (the
    caller then sorts the whole batch)."""
    n = key_ids.shape[0]
    start = np.zeros(n_keys + 1, np.int64)
    for i in range(n):
        start[key_ids[i] + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    order = np.empty(n, np.int64)
    at = start[:-1].copy()
    for i in range(n):  # in arrival order: stable
        k = key_ids[i]
        order[at[k]] = i
        at[k] += 1
    budget = 8 * n + 64  # moves: a batch this far out of order is sorted as a whole
    for k in range(n_keys):
        for j in range(start[k] + 1, start[k + 1]):
            row = order[j]
            t = times[row]
            m = j
            while m > start[k] and times[order[m - 1]] > t:  # stable: equal times stay
                order[m] = order[m - 1]
                m -= 1
            budget -= j - m
            if budget < 0:
                return order, False
            order[m] = row
    return order, True
