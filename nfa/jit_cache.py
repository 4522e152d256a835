"""Whether numba can keep a module's compiled code on disk.

numba caches compiled functions beside their module, else in ``NUMBA_CACHE_DIR`` or the
user's cache directory.  Imported from a zip (Spark's ``--py-files``) there is no module
file; on a read-only installation with a read-only home there is nowhere to write.  A
function declared with ``cache=True`` then fails as its module is imported ("no locator
available"), even for a job that never compiles it; such modules compile in each process
instead.
"""

from __future__ import annotations

import os
import types


def cacheable(path: str) -> bool:
    """May functions of the module at ``path`` be declared with numba's ``cache=True``?

    >>> cacheable(__file__), cacheable("/no/such/module.py")
    (True, False)
    """
    if not os.path.isfile(path):
        return False
    from numba import njit

    def probe() -> int:
        return 0

    # numba looks for a place for a function's cache as it is declared, from its file
    located = types.FunctionType(probe.__code__.replace(co_filename=path), {})
    try:
        njit(cache=True)(located)
    except RuntimeError:  # nowhere to write: compiled in each process
        return False
    return True


def ready(dispatcher: object) -> bool:
    """Would calling the jitted ``dispatcher`` cost no compile: compiled in this process
    already, or in numba's cache on disk?  (A function that cannot be cached counts as
    ready: nothing would come of waiting for it.)

    >>> from numba import njit
    >>> ready(njit(lambda: 1))  # no cache: waiting would gain nothing
    True
    """
    if getattr(dispatcher, "signatures", None) != []:
        return True
    # numba's cache keeps an index file per function
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    return not isinstance(index, str) or os.path.exists(index)
