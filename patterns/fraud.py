"""Fraud patterns over card transactions, account activity and orders.

Every pattern is built from expression conditions only, so it runs on the numba
engine and survives ``Pattern.to_json()`` / ``Pattern.from_json()``.  Run each
one keyed by the entity it watches (``cep.match(events, p, key=..., time="ts")``,
``ts`` in epoch milliseconds): "in a row" and "consecutive" then mean events
*of that key*.

* :func:`card_testing` - key ``card_id``: several tiny charges in a row, then a big one.
* :func:`velocity_burst` - key ``card_id``: N transactions within T.
* :func:`impossible_travel` - key ``card_id``: two consecutive card-present
  transactions too far apart for the time between them.
* :func:`account_takeover` - key ``account_id``: a login from a new device or
  country, a credentials change, then a large transfer, within an hour.
* :func:`refund_abuse` - key ``customer_id``: buy, refund, buy the same item
  again, repeated, within a month.

:func:`haversine_km` is the great-circle distance as an expression, for
patterns of your own.  Data generators with injected ground truth for each
pattern are in :mod:`cep.patterns.synthetic.fraud`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

from cep import Expr, Pattern, SkipStrategy, col, first
from cep.patterns._params import need, need_count

#: mean Earth radius (IUGG), the radius of the great-circle distances here
EARTH_RADIUS_KM = 6371.0088


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
    need_count(tests, 1, "tests")
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
    whole burst would need a trailing ``not_followed_by`` that waits for the
    window to close; in FlinkCEP's semantics, which cep follows, the burst's
    next transaction matches the negated stage and discards the whole branch,
    loop included, so such a pattern never reports a burst.)

    >>> from cep import match
    >>> rows = [{"card_id": "c1", "ts": t * 1000, "amount": 25.0}
    ...         for t in [0, 3600, 3610, 3625, 3640, 3660, 3690, 3700]]
    >>> [[r["ts"] // 1000 for r in m["burst"]]
    ...  for m in match(rows, velocity_burst(), key="card_id", time="ts")]
    [[3600, 3610, 3625, 3640, 3660]]
    """
    need_count(transactions, 2, "transactions")
    return (
        Pattern.begin("burst", skip=SkipStrategy.skip_past_last_event())
        .where(col("amount") >= min_amount)
        .times(transactions)
        .within(within)
    )


def impossible_travel(
    max_kmh: float = 900.0, min_km: float = 100.0, time: str = "ts"
) -> Pattern:
    """Impossible travel: two consecutive card-present transactions too far apart in too little time.

    A card used in a shop in New York and, an hour later, in a shop in London
    has been cloned (or its details skimmed): nobody covers 5,570 km in an
    hour.  The pattern compares each card-present transaction with the card's
    next card-present transaction and reports the pair when the great-circle
    (haversine) distance between them is more than ``max_kmh`` times the time
    between them (a faster-than-airliner trip; two transactions at the same
    millisecond in different places count too).  Jumps under ``min_km`` are
    ignored: merchant coordinates are city-level and two shops across town a
    minute apart are not travel.

    Fields: ``lat``, ``lon`` (degrees), ``card_present`` (boolean: chip,
    swipe or contactless at a terminal) and the event time ``time`` (default
    ``ts``), which the condition reads to compute the elapsed time, so it must
    hold epoch milliseconds as numbers (pass the same field as ``cep.match``'s
    ``time``).  Card-not-present (online) transactions carry the merchant's
    coordinates, not the cardholder's, so they are skipped: they neither break
    a pair nor make one.

    Stages: ``from`` (a card-present transaction), ``between`` (a
    ``not_followed_by`` of card-present transactions, so ``to`` is the *next*
    card-present one), ``to`` (card-present and too far for the time).  Every
    impossible hop is reported (no skip); one card-present transaction ends
    every pair that started before it, so a card keeps at most one partial
    match.  The window is the time a trip of half the Earth's circumference
    takes at ``max_kmh``: pairs further apart in time can never be too fast.

    >>> from cep import match
    >>> def tx(minute, lat, lon, present=True):
    ...     return {"card_id": "c1", "ts": minute * 60_000, "lat": lat, "lon": lon,
    ...             "card_present": present}
    >>> rows = [tx(0, 40.71, -74.01),                 # New York, in a shop
    ...         tx(20, 47.61, -122.33, present=False),  # online, merchant in Seattle
    ...         tx(60, 51.51, -0.13),                  # London, in a shop, an hour later
    ...         tx(900, 51.50, -0.12)]                 # London again, 14 hours later
    >>> [(m["from"][0]["ts"] // 60_000, m["to"][0]["ts"] // 60_000)
    ...  for m in match(rows, impossible_travel(), key="card_id", time="ts")]
    [(0, 60)]
    """
    need(max_kmh > 0, f"max_kmh must be positive, got {max_kmh!r}")
    need(min_km >= 0, f"min_km must be >= 0, got {min_km!r}")
    km = haversine_km(first("from", "lat"), first("from", "lon"), col("lat"), col("lon"))
    hours = (col(time) - first("from", time)) / 3_600_000
    half_way_round = math.ceil(math.pi * EARTH_RADIUS_KM / max_kmh * 3_600_000) + 1
    return (
        Pattern.begin("from")
        .where(col("card_present"))
        .not_followed_by("between")
        .where(col("card_present"))
        .followed_by("to")
        .where(col("card_present") & (km >= min_km) & (km > hours * max_kmh))
        .within(half_way_round)
    )


def haversine_km(lat1: Expr, lon1: Expr, lat2: Expr, lon2: Expr) -> Expr:
    """The great-circle distance in km between two points in degrees, as an expression.

    Runs on both engines (it uses the expression math functions), e.g. with
    ``first("a", "lat")`` for a point of an earlier stage and ``col("lat")`` for
    the current event.  Null when a coordinate is null.

    >>> from cep import lit
    >>> e = haversine_km(lit(40.7128), lit(-74.0060), lit(51.5074), lit(-0.1278))
    >>> round(e.evaluate({}, None))
    5570
    """
    half_dlat = (lat2 - lat1).radians() / 2
    half_dlon = (lon2 - lon1).radians() / 2
    a = (half_dlat.sin() * half_dlat.sin()
         + lat1.radians().cos() * lat2.radians().cos() * half_dlon.sin() * half_dlon.sin())
    return (2 * EARTH_RADIUS_KM) * a.sqrt().asin()


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
    need(bool(kinds) and all(isinstance(k, str) for k in kinds),
         f"changes must be a non-empty list of event types, got {changes!r}")
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
    need_count(cycles, 1, "cycles")
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

