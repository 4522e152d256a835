"""Deterministic synthetic event streams with injected ground truth.

Each library pattern has a generator here: ``generate(seed=..., ...)`` returns a
:class:`Dataset` holding realistic background events, the *episodes* the
pattern must find (injected on purpose) and *near misses* (look-alikes that
must not match: one charge too few, a window just too long, ...).  The same
seed always gives the same events, so tests and the demo are reproducible.

Every event carries an integer ``id`` unique within the dataset; an episode is
identified by its key and the ids of the events a match takes, so "the pattern
finds exactly the injected episodes" is a set comparison:

>>> from cep import Match
>>> m = Match({"a": [{"id": 3}], "b": [{"id": 7}]}, start=0, end=1, key="k1")
>>> found([m])
{Episode(key='k1', ids=(3, 7))}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cep import Match


@dataclass(frozen=True, order=True)
class Episode:
    """One injected occurrence: its key and the ids of the events a match takes, in order."""

    key: Any
    ids: tuple[int, ...]


@dataclass
class Dataset:
    """Events in time order plus what a pattern must (``episodes``) and must not (``near_misses``) find."""

    events: list[dict[str, Any]]
    key: str
    time: str
    episodes: list[Episode] = field(default_factory=list)
    near_misses: list[Episode] = field(default_factory=list)

    def to_pandas(self) -> Any:
        """The events as a pandas DataFrame (one column per field)."""
        import pandas as pd

        return pd.DataFrame(self.events)

    def to_arrow(self) -> Any:
        """The events as a pyarrow Table."""
        import pyarrow as pa

        return pa.Table.from_pylist(self.events)


def found(matches: Iterable[Match]) -> set[Episode]:
    """The episodes a list of matches stands for (key + ids of the events taken)."""
    return {Episode(m.key, tuple(e["id"] for e in m.events())) for m in matches}


class Ids:
    """Hands out event ids 0, 1, 2, ... in creation order."""

    def __init__(self) -> None:
        self._next = 0

    def __call__(self) -> int:
        self._next += 1
        return self._next - 1


def millis(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 UTC time: ``millis("2024-03-04T00:00:00")``."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def by_time(events: Iterable[dict[str, Any]], time: str = "ts") -> list[dict[str, Any]]:
    """Events sorted by time, ties by id (stable, so the stream order is reproducible)."""
    return sorted(events, key=lambda e: (e[time], e["id"]))


def combine(parts: Iterable[Dataset]) -> Dataset:
    """One dataset from several with disjoint keys: part ``i``'s keys become ``"{i}/{key}"``.

    Ids are renumbered so they stay unique; episodes and near misses follow.  Use it
    to scale a generator up (``combine(gen(seed=s) for s in range(20))``) or to mix
    generators whose events share a key field.

    >>> a = Dataset([{"id": 0, "k": "x", "ts": 5}], "k", "ts", [Episode("x", (0,))])
    >>> both = combine([a, a])
    >>> [e["k"] for e in both.events], both.episodes
    (['0/x', '1/x'], [Episode(key='0/x', ids=(0,)), Episode(key='1/x', ids=(1,))])
    """
    parts = list(parts)
    if not parts:
        raise ValueError("combine() needs at least one dataset")
    key, time = parts[0].key, parts[0].time
    events: list[dict[str, Any]] = []
    episodes: list[Episode] = []
    near: list[Episode] = []
    base = 0  # the first id free for the next part
    for i, part in enumerate(parts):
        if (part.key, part.time) != (key, time):
            raise ValueError(f"part {i} keys by {part.key!r}/{part.time!r}, not {key!r}/{time!r}")
        for e in part.events:
            events.append({**e, "id": e["id"] + base, key: f"{i}/{e[key]}"})

        def moved(ep: Episode, i: int = i, base: int = base) -> Episode:
            return Episode(f"{i}/{ep.key}", tuple(x + base for x in ep.ids))

        episodes += map(moved, part.episodes)
        near += map(moved, part.near_misses)
        base += max((e["id"] for e in part.events), default=-1) + 1
    return Dataset(by_time(events, time), key, time, episodes, near)
