"""What an engine found, as columns: matches and timeouts before anyone asks for objects.

An engine's outputs of one call are one :class:`Found`: per output its kind (match or
timeout), key, start, end and expiry; per event it took (an *entry*) its stage and its
row, the rows held as they came in (an Arrow table, a pandas frame or Python objects).
It is a sequence of :class:`~cep.Match` objects to whoever iterates it (built on first
use, once), and an Arrow table to whoever asks for one
(:func:`cep.runtime.tables.match_table`: one column per stage holding the events it took,
taken with Arrow from the input's columns, never a Python object per event).

>>> import numpy as np
>>> import pyarrow as pa
>>> rows = pa.table({"v": [1, 2, 5]})
>>> found = Found(["a", "b"], kind=np.array([MATCH]), keys=Keys.of_values(["k1"]),
...               start=np.array([1]), end=np.array([3]), expiry=np.array([3]),
...               offsets=np.array([0, 3]), stage=np.array([0, 0, 1]), rows=rows)
>>> [dict(m) for m in found]
[{'a': [{'v': 1}, {'v': 2}], 'b': [{'v': 5}]}]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from cep.gcpause import paused_gc
from cep.matches import Match, Timeout
from cep.nfa.events import (
    EntryRefs,
    Keys,
    concat_rows,
    object_array,
    row_objects,
    take_rows,
)

#: an output's kind
MATCH, TIMEOUT = 0, 1
#: the ``kind`` of an output row of each kind
KIND_NAMES = ("match", "timeout")


class Found(Sequence[Match]):
    """Outputs of an engine as columns (see the module docstring); a sequence of Match
    objects built on first use."""

    def __init__(self, stages: Sequence[str], *, kind: np.ndarray, keys: Keys,
                 start: np.ndarray, end: np.ndarray, expiry: np.ndarray, offsets: np.ndarray,
                 stage: np.ndarray, rows: Any = None, refs: EntryRefs | None = None,
                 rule: str | None = None, version: int | None = None, like: Any = None
                 ) -> None:
        self.stages = list(stages)
        #: int8 per output: MATCH or TIMEOUT
        self.kind = np.asarray(kind, np.int8)
        #: the key of each output (codes into distinct values)
        self.keys = keys
        self.start = np.asarray(start, np.int64)
        self.end = np.asarray(end, np.int64)
        #: when a timeout's window passed (unused for matches)
        self.expiry = np.asarray(expiry, np.int64)
        #: int64, one more than outputs: output j took entries offsets[j]:offsets[j + 1]
        self.offsets = np.asarray(offsets, np.int64)
        #: the stage (index into ``stages``) of each entry
        self.stage = np.asarray(stage, np.int64)
        #: the event of each entry (rows of any kind, see cep.nfa.events), taken from
        #: ``refs`` when first read
        self._rows = rows
        #: the events of the entries by reference (an engine's batches), or None
        self.refs = refs
        if rows is None and refs is None:
            raise ValueError("Found needs its entries' rows or references to them")
        #: the rule that found them (a job of several rules), else None
        self.rule = rule
        #: the version of that rule (a job running a rule set), else None
        self.version = version
        #: the Arrow schema of the input the events (Python objects) were rows of, if
        #: known: a table of them gives their fields its types
        self.like = like
        self._matches: list[Match] | None = None

    @property
    def by_reference(self) -> bool:
        """Are the entries' events still references into the batches (not yet taken)?"""
        return self._rows is None

    @property
    def rows(self) -> Any:
        """The event of each entry, taken from the batches on first use when the engine
        gave references (see :class:`EntryRefs`)."""
        if self._rows is None:
            assert self.refs is not None
            self._rows = self.refs.taken()
        return self._rows

    # ------------------------------------------------------------ building
    @staticmethod
    def of_matches(matches: Sequence[Match], like: Any = None) -> Found:
        """Outputs already made as Match objects (the reference engine's), as columns;
        ``like``: the schema of the input their events were rows of.

        >>> found = Found.of_matches([Match({"a": [{"v": 1}]}, 1, 1, key="x")])
        >>> found.count(MATCH), found.stages
        (1, ['a'])
        """
        if isinstance(matches, Found):  # the numba engine's
            if matches.like is None:
                matches.like = like
            return matches
        stages: dict[str, int] = {}
        stage: list[int] = []
        events: list[Any] = []
        offsets = [0]
        for m in matches:
            for name, taken in m.items():
                code = stages.setdefault(name, len(stages))
                stage += [code] * len(taken)
                events += taken
            offsets.append(len(events))
        rows = object_array(events)
        keys = Keys(np.arange(len(matches), dtype=np.int64), [m.key for m in matches])
        timeout = [isinstance(m, Timeout) for m in matches]
        found = Found(list(stages), kind=np.array(timeout, np.int8), keys=keys,
                      start=np.array([m.start for m in matches], np.int64),
                      end=np.array([m.end for m in matches], np.int64),
                      expiry=np.array([m.timestamp if isinstance(m, Timeout) else m.end
                                       for m in matches], np.int64),
                      offsets=np.array(offsets, np.int64), stage=np.array(stage, np.int64),
                      rows=rows, rule=matches[0].rule if len(matches) else None, like=like)
        found._matches = list(matches)
        return found

    @staticmethod
    def none(stages: Sequence[str] = ()) -> Found:
        """No outputs."""
        empty = np.empty(0, np.int64)
        return Found(stages, kind=empty, keys=Keys(empty, []), start=empty, end=empty,
                     expiry=empty, offsets=np.zeros(1, np.int64), stage=empty,
                     rows=np.empty(0, object))

    def with_rule(self, rule: str | None, version: int | None = None) -> Found:
        """These outputs, found by ``rule`` (its ``version``, of a rule set)."""
        self.rule = rule
        self.version = version
        if self._matches is not None:
            for m in self._matches:
                m._with_rule(rule, version)
        return self

    def take(self, idx: np.ndarray) -> Found:
        """The outputs at ``idx``, in that order."""
        idx = np.asarray(idx, np.int64)
        lengths = (self.offsets[1:] - self.offsets[:-1])[idx]
        offsets = np.zeros(len(idx) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # each chosen output's entries, one range after another
        entries = (np.repeat(self.offsets[:-1][idx] - offsets[:-1], lengths)
                   + np.arange(offsets[-1], dtype=np.int64))
        lazy = self._rows is None and self.refs is not None
        found = Found(self.stages, kind=self.kind[idx], keys=self.keys.take(idx),
                      start=self.start[idx], end=self.end[idx], expiry=self.expiry[idx],
                      offsets=offsets, stage=self.stage[entries],
                      rows=None if lazy else take_rows(self.rows, entries),
                      refs=self.refs.take(entries) if self.refs is not None and lazy else None,
                      rule=self.rule, version=self.version, like=self.like)
        if self._matches is not None:
            found._matches = [self._matches[i] for i in idx.tolist()]
        return found

    @staticmethod
    def concat(parts: Sequence[Found]) -> Found:
        """Outputs one after another (their stages joined by name)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return Found.none()
        if len(parts) == 1:
            return parts[0]
        stages: list[str] = []
        for p in parts:
            stages += [s for s in p.stages if s not in stages]
        codes = [np.array([stages.index(s) for s in p.stages] or [0], np.int64) for p in parts]
        lazy = all(p._rows is None and p.refs is not None for p in parts)
        starts = np.cumsum([0] + [int(p.offsets[-1]) for p in parts[:-1]])
        found = Found(
            stages, kind=np.concatenate([p.kind for p in parts]),
            keys=Keys.concat([p.keys for p in parts]),
            start=np.concatenate([p.start for p in parts]),
            end=np.concatenate([p.end for p in parts]),
            expiry=np.concatenate([p.expiry for p in parts]),
            offsets=np.concatenate([[0]] + [p.offsets[1:] + s for p, s in
                                            zip(parts, starts, strict=True)]),
            stage=np.concatenate([c[p.stage] for p, c in zip(parts, codes, strict=True)]),
            rows=None if lazy else concat_rows([p.rows for p in parts]),
            refs=EntryRefs.concat([p.refs for p in parts if p.refs is not None]) if lazy
            else None,
            rule=parts[0].rule if all(p.rule == parts[0].rule for p in parts) else None,
            version=(parts[0].version if all(p.version == parts[0].version for p in parts)
                     else None),
            like=_common_like([p.like for p in parts]))
        if all(p._matches is not None for p in parts):
            found._matches = [m for p in parts for m in p._matches or []]
        return found

    # -------------------------------------------------------------- reading
    def count(self, kind: int) -> int:  # type: ignore[override]
        """How many outputs are of ``kind`` (MATCH or TIMEOUT)."""
        return int(np.count_nonzero(self.kind == kind))

    def of_kind(self, kind: int) -> Found:
        """The outputs of ``kind`` only."""
        mask = self.kind == kind
        return self if mask.all() else self.take(np.flatnonzero(mask))

    def __len__(self) -> int:
        return len(self.kind)

    @overload
    def __getitem__(self, i: int) -> Match: ...

    @overload
    def __getitem__(self, i: slice) -> list[Match]: ...

    def __getitem__(self, i: int | slice) -> Match | list[Match]:
        return self.matches()[i]

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches())

    def __repr__(self) -> str:
        return (f"Found({self.count(MATCH)} matches, {self.count(TIMEOUT)} timeouts, "
                f"stages {self.stages})")

    def matches(self) -> list[Match]:
        """The outputs as Match and Timeout objects (made once, on first use): each stage
        with the events it took, in take order; rows of a table become dicts."""
        if self._matches is None:
            self._matches = self._objects()
        return self._matches

    def _objects(self) -> list[Match]:
        n = len(self)
        if not n:
            return []
        events = self._event_objects()
        names = self.stages
        width = max(len(names), 1)
        lengths = np.diff(self.offsets)
        output = np.repeat(np.arange(n, dtype=np.int64), lengths)
        # per output: did it take at most one event per stage?  (its stages are then
        # built in one go, and the event it took last is its last stage's)
        pairs = np.bincount(output * width + self.stage, minlength=n * width)
        single = (pairs.reshape(n, width) <= 1).all(axis=1)
        key_values = object_array(self.keys.values)[self.keys.codes].tolist() if len(
            self.keys.values) else [None] * n
        starts, ends, expiries = self.start.tolist(), self.end.tolist(), self.expiry.tolist()
        with paused_gc(promote=True):  # many small containers at once
            places = self._uniform_stages(single, lengths)
            if places:  # no container per output: see Match._one
                groups = itertools.repeat(events)
                at = self.offsets.tolist()
            else:
                groups, at = self._stage_dicts(events, single), itertools.repeat(0)
            out: list[Match] = []
            new = object.__new__
            kinds = self.kind.tolist()
            classes = [Match if kind == MATCH else Timeout for kind in kinds]
            for cls, grouped, lo, start, end, key in zip(classes, groups, at, starts, ends,
                                                         key_values):
                m = new(cls)
                m._events = grouped
                m._one = places
                m._at = lo
                m.start = start
                m.end = end
                m.key = key
                out.append(m)
            for j in np.flatnonzero(self.kind != MATCH).tolist():
                out[j].timestamp = expiries[j]  # type: ignore[attr-defined]
            for j in np.flatnonzero(~single & (lengths > 0)).tolist():
                # entries are in take order: the last was taken last
                out[j]._last = events[int(self.offsets[j + 1]) - 1]
            if self.rule is not None:
                for m in out:
                    m._with_rule(self.rule, self.version)
        return out

    def _event_objects(self) -> list[Any]:
        """Each entry's event as a Python object (rows of a table become dicts); an event
        two outputs took is one object."""
        if self._rows is not None or self.refs is None or len(self.refs) < 2:
            return row_objects(self.rows, None)
        refs = self.refs
        # one number per event (batch, row): counted, not sorted as np.unique would
        rows = int(refs.at.max()) + 1
        code = refs.which * rows + refs.at
        present = np.bincount(code)
        if present.max() < 2:
            return row_objects(self.rows, None)
        distinct = np.flatnonzero(present)
        rank = np.cumsum(present > 0) - 1
        once = EntryRefs(refs.sources, distinct // rows, distinct % rows)
        return object_array(row_objects(once.taken(), None))[rank[code]].tolist()

    def _uniform_stages(self, single: np.ndarray, lengths: np.ndarray) -> dict[str, int]:
        """When every output took the same stages one event each, in the same order (the
        usual case), each stage's place among an output's entries; else an empty dict."""
        n = len(lengths)
        width = int(lengths[0])
        if not (width and self.stages and single.all() and (lengths == width).all()
                and (self.stage.reshape(n, width) == self.stage[:width]).all()):
            return {}
        return {self.stages[s]: place for place, s in enumerate(self.stage[:width].tolist())}

    def _stage_dicts(self, events: list[Any], single: np.ndarray) -> list[dict[str, list[Any]]]:
        """Per output, stage name -> the events it took, in take order."""
        names = self.stages
        stage_names = [names[s] for s in self.stage.tolist()] if names else []
        offsets = self.offsets.tolist()
        out: list[dict[str, list[Any]]] = []
        for j, one in enumerate(single.tolist()):
            lo, hi = offsets[j], offsets[j + 1]
            grouped: dict[str, list[Any]]
            if one:
                grouped = {name: [event] for name, event in zip(
                    stage_names[lo:hi], events[lo:hi], strict=True)}
            else:
                grouped = {}
                for q in range(lo, hi):
                    bucket = grouped.get(stage_names[q])
                    if bucket is None:
                        grouped[stage_names[q]] = [events[q]]
                    else:
                        bucket.append(events[q])
            out.append(grouped)
        return out


def _common_like(likes: list[Any]) -> Any:
    """The input schema of outputs joined into one: theirs when they share it; when they
    differ only in companion columns of text (a batch held a word among numbers, see
    :mod:`cep.nfa.stray_text`), the one with most of them; else None (not known)."""
    first = likes[0]
    if all(like == first for like in likes):
        return first
    if any(like is None for like in likes):
        return None
    from cep.nfa.stray_text import PREFIX

    def plain(like: Any) -> list[Any]:
        return [f for f in like if not f.name.startswith(PREFIX)]

    if any(plain(like) != plain(first) for like in likes):
        return None
    return max(likes, key=lambda like: len(like) - len(plain(like)))


def key_column(values: list[Any], as_json: bool = False) -> tuple[Any, bool]:
    """Key values as a column, typed when they are of one type (unless ``as_json``), else
    JSON text (and whether it is JSON text)."""
    import json

    import pyarrow as pa

    try:
        column = None if as_json else pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    else:  # composite keys (tuples), lists and dicts come out nested: they go as JSON
        if column is not None and not pa.types.is_nested(column.type):
            return column, False
    return pa.array([None if v is None else json.dumps(v, sort_keys=True, default=str)
                     for v in values], pa.string()), True

