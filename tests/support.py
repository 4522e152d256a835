"""Shared helpers for the specification tests.

Events mirror the ones FlinkCEP's own test-suite uses (``Event(id, name,
price)`` and its ``SubEvent``), so scenarios can be compared with Flink's
documented behaviour line by line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from cep import Match, Matcher, Pattern, Timeout
from cep import match as cep_match


@dataclass(frozen=True)
class Event:
    id: int
    name: str
    price: float


@dataclass(frozen=True)
class SubEvent(Event):
    volume: float = 0.0


def stream(*events: Event, start: int = 1) -> list[tuple[Event, int]]:
    """Pair events with consecutive timestamps (1, 2, 3, ... by default)."""
    return [(e, start + i) for i, e in enumerate(events)]


def run(
    pattern: Pattern,
    events: Iterable[tuple[Any, int]],
    *,
    final_time: int | None = None,
) -> tuple[list[Match], list[Timeout]]:
    """Feed ``(event, timestamp)`` pairs the way Flink's NFA test harness does.

    Before each event, time is advanced to the event's timestamp; then the
    event is processed.  When ``final_time`` is given, time is finally advanced
    to it (use a large number to flush pending matches and timeouts).
    """
    matcher = Matcher(pattern, engine="reference")
    matches: list[Match] = []
    timeouts: list[Timeout] = []
    for event, ts in events:
        done, expired = matcher.advance_time(ts)
        matches.extend(done)
        timeouts.extend(expired)
        matches.extend(matcher.process(event, ts))
    if final_time is not None:
        done, expired = matcher.advance_time(final_time)
        matches.extend(done)
        timeouts.extend(expired)
    return matches, timeouts


def feed_nfa(pattern: Pattern, events: Iterable[tuple[Any, int]]) -> list[list[Any]]:
    """Matches from feeding the NFA directly, in the order given, as Flink's NFATestHarness does.

    Some of Flink's ITCases feed timestamps out of order to pin what the NFA does with them;
    :class:`cep.Matcher` refuses such input (a time going backwards would give wrong matches
    in a real job), so those ports drive the reference NFA below it, like Flink's tests.
    """
    from cep.nfa.compiler import compile_pattern
    from cep.nfa.reference import ReferenceRun

    engine = ReferenceRun(compile_pattern(pattern))
    reached: int | None = None
    matches: list[Match] = []
    for event, ts in events:
        if reached is None or ts > reached:  # Flink's advanceTime never moves time back
            reached = ts
            matches.extend(engine.advance_time(ts)[0])
        matches.extend(engine.process(event, ts))
    return [flat(m) for m in matches]


def flat(m: Match | Timeout) -> list[Any]:
    """A match as one list: its stages in pattern order, each stage's events in take order."""
    return [e for events in m.values() for e in events]


def feed(pattern: Pattern, events: Iterable[tuple[Any, int]], **kw: Any) -> list[list[Any]]:
    """The matches of ``pattern`` over ``events``, each flattened with :func:`flat`."""
    matches, _ = run(pattern, events, **kw)
    return [flat(m) for m in matches]


def _key(events: Sequence[Any]) -> list[tuple[int, str, float]]:
    return sorted((e.id, e.name, e.price) for e in events)


def same_matches(actual: Sequence[Sequence[Any]], expected: Sequence[Sequence[Any]]) -> None:
    """Assert two collections of matches are equal ignoring order (Flink's comparePatterns)."""
    got = sorted(_key(m) for m in actual)
    want = sorted(_key(m) for m in expected)
    assert got == want, f"\nexpected {len(want)} matches: {want}\n     got {len(got)} matches: {got}"


# ------------------------------------------------ the pattern library's generated data
@cache
def dataset(generate: Callable[..., Any], seed: int) -> Any:
    """A generator's :class:`cep.patterns.synthetic.Dataset`, made once per session (deterministic)."""
    return generate(seed=seed)


def run_dataset(ds: Any, pattern: Pattern, engine: str) -> list[Match]:
    """``cep.match`` over a generated dataset, keyed and timed as it says."""
    return cep_match(ds.events, pattern, key=ds.key, time=ds.time, engine=engine)


def stage_ids(matches: list[Match]) -> list[dict[str, list[int]]]:
    """Each match as stage -> ids of the events it took."""
    return [{stage: [e["id"] for e in events] for stage, events in m.items()} for m in matches]


def taken(record: dict[str, Any]) -> dict[str, list[Any]]:
    """The stages of an output record (a row of cep.runtime.tables' schema) that took
    events, with the events: its stage columns are the ones holding lists."""
    return {name: value for name, value in record.items() if isinstance(value, list) and value}
