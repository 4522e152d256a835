"""The per-key cap on partial matches, enforced by both engines as each event is processed.

A key never holds more than the cap after an event, whatever the batch size, so the
result of a capped run does not depend on how its input was cut.  What happens at the
cap is the policy: ``"fail"`` raises :class:`~cep.errors.TooManyPartialMatches`
naming the key and the stages holding the matches, ``"drop_oldest"`` discards the
partial matches that started earliest, ``"drop_newest"`` those that started last (new
branches are refused).  Partial matches are ordered by their first event (time, then
arrival), as FlinkCEP orders them, and ties by their place in the queue.

>>> Cap()
Cap(per_key=10000, on_overflow='fail')
>>> Cap(None).per_key is None, Cap(50, "drop_newest").on_overflow
(True, 'drop_newest')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cep.errors import CEPError, TooManyPartialMatches

#: the cap when nobody sets one: an explosive pattern fails fast instead of hanging
DEFAULT_MAX_PARTIAL_MATCHES = 10_000
#: what a key over its cap does
OVERFLOW_POLICIES = ("fail", "drop_oldest", "drop_newest")

T = TypeVar("T")


def check_policy(policy: str) -> str:
    """``policy`` if it is an overflow policy, else a CEPError listing them.

    >>> check_policy("drop_oldest")
    'drop_oldest'
    """
    if policy not in OVERFLOW_POLICIES:
        raise CEPError(f"on_overflow must be one of {', '.join(map(repr, OVERFLOW_POLICIES))}, "
                       f"got {policy!r}")
    return policy


def check_cap(per_key: Any) -> int | None:
    """``per_key`` if it is a cap (a positive integer, or None for none), else a CEPError.

    >>> check_cap(5), check_cap(None)
    (5, None)
    """
    if per_key is None:
        return None
    if isinstance(per_key, bool) or not isinstance(per_key, int) or per_key < 1:
        raise CEPError(f"max_partial_matches must be a positive integer or None (no cap), "
                       f"got {per_key!r}")
    return per_key


@dataclass(frozen=True)
class Cap:
    """How many partial matches a key may hold (None: no cap), and what happens beyond."""

    per_key: int | None = DEFAULT_MAX_PARTIAL_MATCHES
    on_overflow: str = "fail"

    def __post_init__(self) -> None:
        check_cap(self.per_key)
        check_policy(self.on_overflow)


def over_cap(items: Sequence[T], start_of: Callable[[T], Any], cap: int, newest: bool
             ) -> set[int]:
    """Positions in ``items`` (a queue's array, live partial matches only where
    ``start_of`` is not None) to drop to hold it to ``cap``: the oldest by first event, or
    the newest; ties by position.

    >>> sorted(over_cap([(1, 0), (0, 1), (1, 2), None], lambda x: x, 2, newest=False))
    [1]
    >>> sorted(over_cap([(1, 0), (0, 1), (1, 2), None], lambda x: x, 1, newest=True))
    [0, 2]
    """
    live = [i for i, x in enumerate(items) if start_of(x) is not None]
    excess = len(live) - cap
    if excess <= 0:
        return set()
    live.sort(key=lambda i: start_of(items[i]))  # stable: ties keep their positions
    return set(live[len(live) - excess:] if newest else live[:excess])


def too_many(key: Any, count: int, cap: int, stages: Sequence[str]) -> TooManyPartialMatches:
    """The error of a key over its cap with ``on_overflow="fail"``.

    >>> print(too_many("c1", 10001, 10000, ["b", "a", "b"]))
    key 'c1' holds 10001 partial matches, over the cap of 10000 (they wait in stages ['a', 'b']): ...
    """
    return TooManyPartialMatches(
        f"key {key!r} holds {count} partial matches, over the cap of {cap} (they wait in "
        f"stages {sorted(set(stages))}): the pattern branches faster than its partial matches "
        "end. Narrow it (a shorter within, next/consecutive instead of followed_by_any, "
        "stricter conditions), or raise the cap (max_partial_matches, --max-partial-matches; "
        "None turns it off), or let the key drop partial matches "
        "(on_overflow='drop_oldest' or 'drop_newest')")


#: the cap every engine has unless told otherwise
DEFAULT_CAP = Cap()
#: no cap at all (a bare :class:`~cep.nfa.reference.ReferenceRun`)
NO_CAP = Cap(None)
