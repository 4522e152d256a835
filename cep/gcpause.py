"""Pausing Python's cyclic garbage collector around loops that build many small objects.

Building a tuple or a dict per event makes the collector run again and again, and
each full run walks every object alive, so the cost grows with what is buffered:
a loop over 100,000 events ran at half speed.  The objects these loops build hold
no reference cycles, so nothing is left for the collector to find afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc(*, promote: bool = False) -> Iterator[None]:
    """Run the block with the cyclic collector off (as it was again afterwards).

    ``promote``: the objects the block made are results that live on (the Match objects
    a call returns), so they go straight to the collector's oldest generation instead of
    being walked by the next young collection and again by the middle one (0.06 s of
    0.66 s for 123k matches).  Not done when the program has frozen objects itself
    (``gc.freeze()``, as pre-forking servers do): the move goes through the frozen
    generation.

    >>> import gc
    >>> with paused_gc():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if promote and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_on:
            gc.enable()
