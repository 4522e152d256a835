"""Batches the rules of a job hold in common, cut once for all of them.

An engine holds the batches its partial matches' events came in; once few of a batch's
events are still live, it cuts the batch down to those, in a copy of its own
(:meth:`ColumnarEngine._collect <cep.nfa.columnar.ColumnarEngine._collect>`).  The rules
of one job are fed the same batches: a copy each held an event once per rule that still
needed it (a hundred rules held 148k events where 47k were distinct), cost an Arrow
``take`` per rule, and kept a checkpoint from writing each event once.  So the engines of
a job leave such a batch whole and say which of its events they still need
(``cut_requests``); once every engine holding the batch has said so, and all of them
together need few of its events, :func:`share_cuts` cuts it once, and each engine holds
that one copy instead (:meth:`ColumnarEngine.rebase
<cep.nfa.columnar.ColumnarEngine.rebase>`).  An engine's events of a batch are all taken
when the batch is processed, so what it needed when it asked is a superset of what it
needs later.

>>> import numpy as np, pyarrow as pa
>>> from cep import Pattern, col
>>> p = Pattern.begin("a").where(col("v") > 0).followed_by("b").where(col("v") > 9)
>>> engines = [ColumnarEngine(p, {"v": "numeric"}, timeouts=False) for _ in range(2)]
>>> batch = pa.table({"v": [1] + [0] * 2047})
>>> for e in engines:
...     e.cut_alone = False
...     _ = e.process(Events.of(batch), np.zeros(2048, np.int64), np.arange(2048))
...     e._collect(); e._collect()  # the batch is old, and one event of it is live
>>> [sorted(e.cut_requests) == [id(batch)] for e in engines]
[True, True]
>>> share_cuts(engines)
>>> held = [e._retained[0].batch for e in engines]  # one copy of the one live event
>>> [len(h) for h in held], held[0] is held[1]
([1, 1], True)
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from typing import Any

import numpy as np

from cep.nfa.columnar import ColumnarEngine
from cep.nfa.events import Events, count_rows, take_rows


def share_cuts(engines: Iterable[Any]) -> None:
    """Cut the batches every engine holding them asked to cut (see the module docstring),
    once each; ``engines`` are a job's rules' engines (a :class:`ColumnarEngine`, or an
    engine running one as ``core``; others are left alone).  With several engines, each is
    told to leave batches whole (``cut_alone``) from now on; alone, to cut its own."""
    cores = [c for c in (getattr(e, "core", e) for e in engines) if isinstance(c, ColumnarEngine)]
    alone = len(cores) < 2
    for core in cores:
        core.cut_alone = alone
    asked = {k for core in cores for k in core.cut_requests}
    if not asked:
        return
    holders: dict[int, list[ColumnarEngine]] = {}
    for core in cores:
        for k in {id(kept.batch.rows) for kept in core._retained} & asked:
            holders.setdefault(k, []).append(core)
    cuts: dict[int, list[tuple[Any, np.ndarray, Events]]] = {}  # by engine
    for k, holding in holders.items():
        if not all(k in core.cut_requests for core in holding):
            continue  # an engine holding it has not found it sparse (yet)
        rows = holding[0].cut_requests[k][0]
        needed = reduce(np.union1d, [core.cut_requests[k][1] for core in holding])
        if 4 * len(needed) >= count_rows(rows):
            # sparse for each, not for all of them: whole, it is no more than 4x what
            # they need; they ask again once it is sparser
            for core in holding:
                del core.cut_requests[k]
            continue
        cut = Events.of(take_rows(rows, needed))
        for core in holding:
            cuts.setdefault(id(core), []).append((rows, needed, cut))
    for core in cores:  # each engine's node array copied once, however many it takes
        if id(core) in cuts:
            core.rebase(cuts[id(core)])
