"""Fraud patterns over card transactions (fields: card_id, amount, ts)."""

from __future__ import annotations

from datetime import timedelta

from cep import Pattern, SkipStrategy, col


def card_testing(
    small: float = 5.0,
    big: float = 500.0,
    tests: int = 3,
    within: timedelta = timedelta(minutes=10),
) -> Pattern:
    """Card testing: ``tests`` or more charges under ``small`` in a row, then one over ``big``.

    Fraudsters check a stolen card with tiny charges before a large one.  Fields:
    ``amount`` (number).  Each episode is reported once (skip past last event).

    >>> card_testing().stages[0].name
    'small'
    """
    return (
        Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
        .where(col("amount") < small)
        .times_or_more(tests)
        .consecutive()
        .greedy()
        .next("big")
        .where(col("amount") > big)
        .within(within)
    )
