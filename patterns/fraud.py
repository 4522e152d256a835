"""Fraud patterns over card transactions, account activity and orders.

Every pattern is built from expression conditions only, so it runs on the numba
engine and survives ``Pattern.to_json()`` / ``Pattern.from_json()``.  Run each
one keyed by the entity it watches (``cep.match(events, p, key=..., time="ts")``,
``ts`` in epoch milliseconds): "in a row" and "consecutive" then mean events
*of that key*.

* :func:`card_testing` - key ``card_id``: several tiny charges in a row, then a big one.
* :func:`velocity_burst` - key ``card_id``: N transactions within T.
* :func:`account_takeover` - key ``account_id``: a login from a new device or
  country, a credentials change, then a large transfer, within an hour.
* :func:`refund_abuse` - key ``customer_id``: buy, refund, buy the same item
  again, repeated, within a month.

Data generators with injected ground truth for each pattern are in
:mod:`patterns.synthetic.fraud`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from cep import Pattern, SkipStrategy, col, first


def card_testing(
    small: float = 5.0,
    big: float = 500.0,
    tests: int = 3,
    within: timedelta = timedelta(minutes=10),
) -> Pattern:
    """Card testing: ``tests`` or more charges under ``small`` in a row, then one over ``big``.

    Fraudsters check a stolen card with tiny charges before a large one.  Fields:
    ``amount`` (number).  Each episode is reported once (skip past last event),
    with all of its small charges: the ``small`` stage is greedy and the charges
    must be consecutive on the card, and the big charge must come right after
    the last small one.

    >>> from cep import match
    >>> rows = [{"card_id": "c1", "ts": i * 30_000, "amount": a}
    ...         for i, a in enumerate([42.0, 1.0, 0.5, 2.0, 1.5, 899.0, 3.0])]
    >>> [([r["amount"] for r in m["small"]], m["big"][0]["amount"])
    ...  for m in match(rows, card_testing(), key="card_id", time="ts")]
    [([1.0, 0.5, 2.0, 1.5], 899.0)]
    """
    _need(tests, 1, "tests")
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


def velocity_burst(
    transactions: int = 5,
    within: timedelta = timedelta(minutes=2),
    min_amount: float = 0.0,
) -> Pattern:
    """Velocity: ``transactions`` charges of at least ``min_amount`` on one card within ``within``.

    Catches a stolen or cloned card being emptied quickly (many purchases in a
    couple of minutes, usually online).  Fields: ``amount`` (number; refunds
    and reversals are negative and do not count).  Other events in between are
    skipped (relaxed contiguity), so the charges need not be back to back.

    Each burst is reported once, at its ``transactions``-th charge (as soon as
    it can be known), holding the burst's first ``transactions`` charges: skip
    past last event drops every other way of picking them.  Charges of the
    same burst after the report start afresh, so a run of twice as many
    charges within ``within`` is reported as two bursts.  (A report holding the
    whole burst would have to wait for the window to close; FlinkCEP's pending
    ``not_followed_by`` state cannot follow a looping stage, so that is not
    expressible.)

    >>> from cep import match
    >>> rows = [{"card_id": "c1", "ts": t * 1000, "amount": 25.0}
    ...         for t in [0, 3600, 3610, 3625, 3640, 3660, 3690, 3700]]
    >>> [[r["ts"] // 1000 for r in m["burst"]]
    ...  for m in match(rows, velocity_burst(), key="card_id", time="ts")]
    [[3600, 3610, 3625, 3640, 3660]]
    """
    _need(transactions, 2, "transactions")
    return (
        Pattern.begin("burst", skip=SkipStrategy.skip_past_last_event())
        .where(col("amount") >= min_amount)
        .times(transactions)
        .within(within)
    )


def account_takeover(
    large: float = 1000.0,
    within: timedelta = timedelta(hours=1),
    changes: Sequence[str] = ("password_change", "email_change"),
) -> Pattern:
    """Account takeover: a suspicious login, a credentials change, then a large transfer.

    The classic sequence after phishing or a SIM swap: someone logs in from a
    device or a country the account has never used, locks the owner out by
    changing the password or the e-mail address, and moves money out, all
    within ``within``.  Events are one account's activity, keyed by
    ``account_id``.  Fields:

    * ``type`` (string): ``"login"``, one of ``changes`` (by default
      ``"password_change"``, ``"email_change"``), ``"transfer"``; other types
      (``"balance_check"``, ``"logout"``, ...) are skipped;
    * ``new_device``, ``new_country`` (booleans): enrichment flags computed
      upstream from the account's history - true when the login's device
      (country) was never seen on this account before.  A login is suspicious
      when either is true; a null flag counts as unknown, not as true;
    * ``amount`` (number, may be null for non-transfers): a transfer is large
      when ``amount >= large``.

    Stages ``login``, ``change``, ``transfer``; each takes the first event that
    fits after the previous stage (relaxed contiguity: anything else may happen
    in between).  One report per takeover (skip past last event), however many
    suspicious logins came before the change.

    >>> from cep import match
    >>> def ev(minute, type, amount=None, new_device=False):
    ...     return {"account_id": "a1", "ts": minute * 60_000, "type": type, "amount": amount,
    ...             "new_device": new_device, "new_country": False}
    >>> rows = [ev(0, "login", new_device=True), ev(2, "balance_check"),
    ...         ev(4, "password_change"), ev(6, "transfer", 50.0), ev(9, "transfer", 4800.0)]
    >>> [(m["change"][0]["type"], m["transfer"][0]["amount"])
    ...  for m in match(rows, account_takeover(), key="account_id", time="ts")]
    [('password_change', 4800.0)]
    """
    kinds = list(changes)
    if not kinds or not all(isinstance(k, str) for k in kinds):
        raise ValueError(f"changes must be a non-empty list of event types, got {changes!r}")
    return (
        Pattern.begin("login", skip=SkipStrategy.skip_past_last_event())
        .where((col("type") == "login") & (col("new_device") | col("new_country")))
        .followed_by("change")
        .where(col("type").isin(kinds))
        .followed_by("transfer")
        .where((col("type") == "transfer") & (col("amount") >= large))
        .within(within)
    )


def refund_abuse(cycles: int = 2, within: timedelta = timedelta(days=30)) -> Pattern:
    """Refund abuse: buy an item, get it refunded, buy it again - ``cycles`` times in a row.

    Catches serial returners and refund fraud (wear-and-return, refunds for
    items never sent back, exploiting price drops): the same customer buys,
    refunds and re-buys the *same* item again and again within ``within``.
    Events are one customer's orders, keyed by ``customer_id``.  Fields:
    ``type`` (string: ``"purchase"`` or ``"refund"``, others are skipped) and
    ``item`` (string, e.g. a SKU).

    Stages: ``buy`` (the first purchase), then ``refund1``, ``rebuy1``, ...,
    ``refund{cycles}``, ``rebuy{cycles}``, each a refund / purchase of the item
    ``buy`` took.  Orders of other items may come in between (relaxed
    contiguity).  Each case is reported once (skip past last event), at the
    re-purchase that completes the ``cycles``-th cycle.

    >>> from cep import match
    >>> day = 86_400_000
    >>> rows = [{"customer_id": "u1", "ts": d * day, "type": t, "item": i}
    ...         for d, t, i in [(0, "purchase", "dress"), (2, "purchase", "socks"),
    ...                         (3, "refund", "dress"), (5, "purchase", "dress"),
    ...                         (9, "refund", "dress"), (10, "purchase", "dress")]]
    >>> [[(r["type"], r["ts"] // day) for r in m.events()]
    ...  for m in match(rows, refund_abuse(), key="customer_id", time="ts")]
    [[('purchase', 0), ('refund', 3), ('purchase', 5), ('refund', 9), ('purchase', 10)]]
    """
    _need(cycles, 1, "cycles")
    item = first("buy", "item")
    pattern = (
        Pattern.begin("buy", skip=SkipStrategy.skip_past_last_event())
        .where(col("type") == "purchase")
    )
    for n in range(1, cycles + 1):
        pattern = (
            pattern.followed_by(f"refund{n}")
            .where((col("type") == "refund") & (col("item") == item))
            .followed_by(f"rebuy{n}")
            .where((col("type") == "purchase") & (col("item") == item))
        )
    return pattern.within(within)


def _need(value: int, low: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")
