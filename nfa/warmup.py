"""Compile the numba kernel once, so the first real pattern pays no JIT time.

``make`` runs this after installing; numba caches the machine code on disk
(next to :mod:`cep.nfa.kernel`), and every later process and pattern reuses it.

    python -m cep.nfa.warmup
"""

from __future__ import annotations

import time


def warm() -> float:
    """Run a small expression pattern through every kernel entry point; return seconds."""
    import numpy as np

    from cep import Pattern, SkipStrategy, col, last
    from cep.nfa.columnar import ColumnarEngine
    from cep.nfa.events import Events
    from cep.nfa.ordering import _counting_order

    started = time.perf_counter()
    pattern = (
        Pattern.begin("a", skip=SkipStrategy.skip_past_last_event())
        .where(col("v") > 0)
        .next("b")
        .where(col("v") > last("a", "v"))
        .within(10)
    )
    events = [{"v": v} for v in (1, 2, 3, 1)]
    engine = ColumnarEngine(pattern, {"v": "numeric"})
    engine.process(Events.of(events), np.zeros(4, np.int64), np.arange(4, dtype=np.int64))
    engine.advance(2**63 - 1)
    # the batch above went without it if a second process was compiling it meanwhile
    _counting_order(np.zeros(1, np.int64), np.zeros(1, np.int64), np.int64(1))
    return time.perf_counter() - started


if __name__ == "__main__":
    print(f"numba kernel ready ({warm():.1f} s)")
