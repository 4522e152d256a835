"""The benchmark patterns, all conditions as expressions (so the numba engine runs them).

Each :class:`Case` names a pattern, the data it runs on, and the key and time
columns: ``run.py`` iterates over :data:`CASES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from benchmarks import data
from cep import Pattern, SkipStrategy, col, last

SMALL, BIG = data.SMALL, data.BIG
WINDOW_A = timedelta(minutes=10)
HOT, COOL = 60.0, 30.0
WINDOW_C = timedelta(minutes=5)


def card_testing() -> Pattern:
    """(A) 3 or more charges under 5.00 in a row, then one over 500.00, within 10 minutes."""
    return (
        Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
        .where(col("amount") < SMALL)
        .times_or_more(3)
        .consecutive()
        .greedy()
        .next("big")
        .where(col("amount") > BIG)
        .within(WINDOW_A)
    )


def increasing(skip: SkipStrategy) -> Pattern:
    """(B) three strictly contiguous charges, each larger than the one before."""
    return (
        Pattern.begin("A", skip=skip)
        .next("B")
        .where(col("amount") > last("A", "amount"))
        .next("C")
        .where(col("amount") > last("B", "amount"))
    )


def fire() -> Pattern:
    """(C) a hot reading, then more hot readings, no cool reading after them, then smoke, in 5 min.

    Relaxed contiguity throughout (``followed_by``), a looping stage, a negation in
    the middle and a window; FlinkCEP's default skip strategy (no skip).
    """
    return (
        Pattern.begin("hot")
        .where(col("temperature") > HOT)
        .followed_by("hotter")
        .where(col("temperature") > HOT)
        .one_or_more()
        .not_followed_by("cool")
        .where(col("temperature") < COOL)
        .followed_by("smoke")
        .where(col("smoke"))
        .within(WINDOW_C)
    )


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    pattern: Callable[[], Pattern]
    dataset: str  # "cards" or "iot"
    key: str
    time: str
    handwritten: str | None  # name of the specialised loop in benchmarks.handwritten

    def path(self, n_events: int) -> Path:
        """The input for a run over ``n_events`` card transactions (IoT inputs are 1/5 of that)."""
        if self.dataset == "cards":
            return data.card_transactions(n_events, max(1, min(10_000, n_events // 100)))
        n = max(1_000, n_events // 5)
        return data.iot_readings(n, max(1, min(200, n // 1_000)))


CASES = (
    Case("A", "card testing: small{3,} consecutive greedy, next big, within 10 min, "
         "skip past last", card_testing, "cards", "card_id", "ts", "card_testing"),
    Case("B-past", "3 contiguous increasing amounts, skip past last event",
         lambda: increasing(SkipStrategy.skip_past_last_event()), "cards", "card_id", "ts",
         "increasing_past"),
    Case("B-next", "3 contiguous increasing amounts, skip to next",
         lambda: increasing(SkipStrategy.skip_to_next()), "cards", "card_id", "ts",
         "increasing_next"),
    Case("C", "IoT fire: hot, hotter+ (relaxed), not_followed_by cool, followed_by smoke, "
         "within 5 min", fire, "iot", "sensor_id", "ts", None),
)
CASES_BY_NAME = {c.name: c for c in CASES}
