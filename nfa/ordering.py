"""The order a batch is matched in: key by key, each key's events by time, ties in
arrival order - ``np.lexsort((times, keys))``, in O(n) for the usual batch.

Events mostly arrive in time order per key (a card's charges are hours apart, a source's
delays seconds), so a counting sort by key id (stable) leaves each key's events sorted
already; only a key whose events are not is sorted again, by time, stably.

>>> order = key_time_order(np.array([1, 0, 1, 0]), np.array([5, 9, 3, 9]), 2)
>>> order.tolist() == np.lexsort((np.array([5, 9, 3, 9]), np.array([1, 0, 1, 0]))).tolist()
True
"""

from __future__ import annotations

import os

import numpy as np
from numba import njit

CACHE = os.path.isfile(__file__)  # not when imported from a zip (Spark's --py-files)

#: a counting sort allocates and walks one slot per key id: worth it while key ids are at
#: most this many times the events (else np.lexsort, whose cost does not depend on them)
KEYS_PER_EVENT = 4


def key_time_order(key_ids: np.ndarray, times: np.ndarray, n_keys: int) -> np.ndarray:
    """Positions that sort events by (key id, time), stably; key ids are in ``range(n_keys)``."""
    key_ids = np.asarray(key_ids, np.int64)
    times = np.asarray(times, np.int64)
    if n_keys > KEYS_PER_EVENT * max(len(key_ids), 1):
        return np.lexsort((times, key_ids))
    return _counting_order(key_ids, times, np.int64(n_keys))


@njit(cache=CACHE)
def _counting_order(key_ids, times, n_keys):
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
    for k in range(n_keys):
        lo, hi = start[k], start[k + 1]
        for j in range(lo + 1, hi):
            if times[order[j]] < times[order[j - 1]]:
                part = order[lo:hi].copy()
                order[lo:hi] = part[np.argsort(times[part], kind="mergesort")]
                break
    return order
