"""The process's worker threads: the rules of a job run on them side by side (see
``cep.runtime.operator._side_by_side``).  Work handed to them lets go of the GIL for much of its
time (numba kernels with ``nogil``, Arrow compute), so a job uses more than one core.
(A checkpoint writer building its tables there too made a 100-rule job slower: the
rules' steps queued behind them.)

>>> pool = worker_threads()
>>> pool is None or list(pool.map(abs, [-1, 2]))  == [1, 2]
True
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

_POOL: list[ThreadPoolExecutor | None] = []
# a forked child has none of its parent's threads: it makes a pool of its own
os.register_at_fork(after_in_child=_POOL.clear)


def worker_threads() -> ThreadPoolExecutor | None:
    """The process's worker threads: the environment's ``CEP_RULE_THREADS``, else one
    per core up to 4; None when that is 1 (work runs on the caller's thread)."""
    if not _POOL:
        given = os.environ.get("CEP_RULE_THREADS", "").strip()
        count = int(given) if given.isdigit() else min(os.cpu_count() or 1, 4)
        _POOL.append(ThreadPoolExecutor(max_workers=count, thread_name_prefix="cep-worker")
                     if count > 1 else None)
    return _POOL[0]
