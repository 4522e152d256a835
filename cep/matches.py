"""Matches and timeouts: read-only mappings from stage name to the events it took."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any


class Match(Mapping[str, list[Any]]):
    """A complete match: stage name -> the events taken, in take order.

    Keys are in the order the stages first took an event; events are the very
    objects that were fed in.  ``start`` / ``end`` are the timestamps of the
    first and last events taken; ``key`` is the partition key under
    :func:`cep.match` (None for a bare :class:`cep.Matcher`); ``rule`` names the rule
    that found it in a job running several (None otherwise), and ``version`` its version
    in a job running a rule set.

    >>> m = Match({"a": [{"id": 1}], "b": [{"id": 2}]}, start=1, end=2)
    >>> m["b"], m.start, m.end
    ([{'id': 2}], 1, 2)
    """

    #: ``_last``: the event taken last, when the engine that made the match said it (the
    #: stages are kept in first-take order, and a repeated group's interleave);
    #: ``_one``: every stage took one event: ``_one`` maps each stage to its place, and
    #: its event is ``_events[_at + place]``, a list the matches an engine made at once
    #: share (no dict or list per match while an engine makes many); else False, and
    #: ``_events`` maps each stage to its events
    __slots__ = ("_events", "_one", "_at", "start", "end", "key", "_rule", "_version",
                 "_last")

    def __init__(
        self, events: Mapping[str, Sequence[Any]], start: int, end: int, key: Any = None
    ) -> None:
        self._events = {name: list(evs) for name, evs in events.items()}
        self._one = False
        self.start = start
        self.end = end
        self.key = key

    @classmethod
    def of(cls, events: dict[str, list[Any]], start: int, end: int, key: Any = None) -> Match:
        """Build from lists the caller hands over (no copy); for engines."""
        m = cls.__new__(cls)
        m._events = events
        m._one = False
        m.start = start
        m.end = end
        m.key = key
        return m

    def __getitem__(self, stage: str) -> list[Any]:
        one = self._one
        if one:
            return [self._events[self._at + one[stage]]]
        return list(self._events[stage])

    def __iter__(self) -> Iterator[str]:
        return iter(self._one or self._events)

    def __len__(self) -> int:
        return len(self._one or self._events)

    def as_dict(self) -> dict[str, list[Any]]:
        """Stage name -> the events it took, as a new dict of new lists (one copy).

        >>> Match({"a": [1], "b": [2, 3]}, start=1, end=3).as_dict()
        {'a': [1], 'b': [2, 3]}
        """
        if self._one:
            return {name: [event] for name, event in zip(self._one, self.events())}
        return {name: list(evs) for name, evs in self._events.items()}

    def events(self) -> list[Any]:
        """All events of the match, stage by stage in key order."""
        if self._one:
            return self._events[self._at:self._at + len(self._one)]
        return [e for evs in self._events.values() for e in evs]

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """Its own events only, as a dict of lists (a pickle or copy of one match must not
        carry the list its call's other matches share)."""
        state = {name: getattr(self, name) for cls in type(self).__mro__
                 for name in getattr(cls, "__slots__", ()) if hasattr(self, name)}
        if self._one:
            state.update(_events=self.as_dict(), _one=False)
            state.pop("_at", None)
        return None, state

    @property
    def rule(self) -> str | None:
        """The rule that found this match, in a job that runs several (else None)."""
        return getattr(self, "_rule", None)

    @property
    def version(self) -> int | None:
        """The version of that rule, in a job running a rule set (else None)."""
        return getattr(self, "_version", None)

    def _with_rule(self, rule: str | None, version: int | None = None) -> Match:
        self._rule = rule
        self._version = version
        return self

    def _with_key(self, key: Any) -> Match:
        self.key = key
        return self

    def __repr__(self) -> str:
        key = "" if self.key is None else f", key={self.key!r}"
        return f"{type(self).__name__}({self.as_dict()!r}, start={self.start}, end={self.end}{key})"


class Timeout(Match):
    """A partial match whose window passed: what it had taken, and when it expired.

    ``timestamp`` is start + window (FIRST_AND_LAST) or previous event +
    window (PREVIOUS_AND_CURRENT and loop windows), as in FlinkCEP.
    """

    __slots__ = ("timestamp",)

    def __init__(
        self,
        events: Mapping[str, Sequence[Any]],
        start: int,
        end: int,
        timestamp: int,
        key: Any = None,
    ) -> None:
        super().__init__(events, start, end, key)
        self.timestamp = timestamp

    @classmethod
    def of(  # type: ignore[override]
        cls, events: dict[str, list[Any]], start: int, end: int, timestamp: int, key: Any = None
    ) -> Timeout:
        t = cls.__new__(cls)
        t._events = events
        t._one = False
        t.start = start
        t.end = end
        t.key = key
        t.timestamp = timestamp
        return t

    def __repr__(self) -> str:
        key = "" if self.key is None else f", key={self.key!r}"
        return (
            f"Timeout({self.as_dict()!r}, start={self.start}, end={self.end}, "
            f"timestamp={self.timestamp}{key})"
        )
