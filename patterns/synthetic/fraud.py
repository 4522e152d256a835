"""Synthetic streams with injected ground truth for the fraud patterns (:mod:`cep.patterns.fraud`).

One generator per pattern, each ``generator(seed=0, ...) -> Dataset`` with
keyword parameters that mirror the pattern's (so a tuned pattern gets a
matching stream).  Timestamps are integer epoch milliseconds in ``ts``; every
event has a unique integer ``id``.

* :func:`card_transactions` for ``card_testing``: key ``card_id``; amount, merchant.
* :func:`velocity_transactions` for ``velocity_burst``: key ``card_id``; amount, merchant.
* :func:`travel_transactions` for ``impossible_travel``: key ``card_id``; amount,
  merchant, city, lat, lon, card_present.
* :func:`account_events` for ``account_takeover``: key ``account_id``; type, device,
  country, amount, new_device, new_country.
* :func:`refund_events` for ``refund_abuse``: key ``customer_id``; type, item, product,
  amount.

Each dataset holds realistic background traffic (hundreds to a few thousand
events over many keys), episodes the pattern must find and near misses it must
not (one charge too few, a window just too long, a refund of another item, ...).
The same seed always gives the same events.

How background never forms (or completes) an episode: an injection is kept
apart from the background of its key - by a *quiet span* from one window
before its first event to one window after its last, in which no background
event of that key is generated, or (refunds) by items the background never
sells - so a match can only combine background events with each other.  Each
generator then builds its background under a rule that makes a
background-only match impossible (stated at each generator, e.g. "never two
small charges in a row on a card").

>>> ds = card_transactions(seed=1)
>>> len(ds.episodes) >= 3 and len(ds.near_misses) >= 3 and ds.key
'card_id'
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from cep.patterns.synthetic import Dataset, Episode, Ids, by_time, millis

START = millis("2024-03-04T00:00:00")  # a Monday
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


class _Stream:
    """Collects one dataset: events with ids, quiet spans per key, episodes and near misses."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.ids = Ids()
        self.events: list[dict[str, Any]] = []
        self.quiet: dict[Any, list[tuple[int, int]]] = {}
        self.episodes: list[Episode] = []
        self.near_misses: list[Episode] = []

    def event(self, key: Any, ts: int, **fields: Any) -> dict[str, Any]:
        e = {"id": self.ids(), self.key: key, "ts": ts, **fields}
        self.events.append(e)
        return e

    def inject(self, events: Sequence[dict[str, Any]], before: int, after: int | None = None) -> None:
        """Keep background events of the injection's key out of [first - before, last + after]."""
        key = _one_key(events, self.key)
        times = [e["ts"] for e in events]
        hi = max(times) + (before if after is None else after)
        self.quiet.setdefault(key, []).append((min(times) - before, hi))

    def free(self, key: Any, ts: int) -> bool:
        """True if a background event of ``key`` may happen at ``ts`` (not in a quiet span)."""
        return all(not lo <= ts <= hi for lo, hi in self.quiet.get(key, ()))

    def episode(self, taken: Sequence[dict[str, Any]]) -> None:
        """Record the events a match must take, in the order it reports them."""
        self.episodes.append(Episode(_one_key(taken, self.key), tuple(e["id"] for e in taken)))

    def near_miss(self, events: Sequence[dict[str, Any]]) -> None:
        """Record events that no match may contain all of."""
        self.near_misses.append(Episode(_one_key(events, self.key), tuple(e["id"] for e in events)))

    def dataset(self) -> Dataset:
        return Dataset(by_time(self.events), self.key, "ts", self.episodes, self.near_misses)


def _one_key(events: Sequence[dict[str, Any]], field: str) -> Any:
    keys = {e[field] for e in events}
    if len(keys) != 1:
        raise AssertionError(f"an injection lives on one key, got {sorted(keys)}")
    return keys.pop()


def _ms(d: timedelta) -> int:
    return int(d.total_seconds() * 1000)


def _money(x: float) -> float:
    return round(x, 2)


def _day(rng: random.Random, days: int, avoid: Iterable[int] = ()) -> int:
    """A day in [1, days - 1) (a day of margin at both ends), not one of ``avoid``."""
    pool = [d for d in range(1, max(2, days - 1)) if d not in set(avoid)]
    if not pool:
        raise ValueError(f"days={days} is too short for the injections")
    return rng.choice(pool)


def _at(day: int, rng: random.Random, start_hour: float = 8, end_hour: float = 21) -> int:
    """A time on ``day`` between ``start_hour`` and ``end_hour`` (whole seconds)."""
    return START + day * DAY + rng.randrange(int(start_hour * 3600), int(end_hour * 3600)) * SECOND


def _offsets(rng: random.Random, n: int, span: int) -> list[int]:
    """``n`` distinct sorted offsets in [0, span], the first 0 and the last ``span``."""
    if n == 1:
        return [0]
    inner = sorted(rng.sample(range(1, span), n - 2)) if n > 2 else []
    return [0, *inner, span]


# ===================================================================== card testing
# merchant -> (low, high) amount of its ordinary charges
CARD_MERCHANTS = {
    "Whole Foods Market": (12.0, 180.0),
    "Shell": (25.0, 95.0),
    "Uber": (7.5, 48.0),
    "Amazon.com": (9.99, 240.0),
    "Netflix": (15.49, 15.49),
    "Target": (8.0, 160.0),
    "Chipotle": (9.5, 32.0),
    "CVS Pharmacy": (5.0, 60.0),
    "Delta Air Lines": (120.0, 480.0),
    "IKEA": (19.0, 420.0),
    "Spotify": (10.99, 10.99),
    "Trader Joe's": (14.0, 120.0),
}
COFFEE_SHOP = "Corner Coffee Cart"  # the background's only charges under the small limit
BIG_MERCHANTS = ("Apple Store", "Best Buy", "Marriott Hotels")  # legitimate big charges
TEST_MERCHANTS = ("DonateNow.org", "ParkMeter App", "eGift Shop 24", "QuickTopUp")
CASHOUT_MERCHANTS = ("ElectroMax Online", "LuxWatch Direct", "GiftCardHub")


def card_transactions(
    seed: int = 0,
    *,
    cards: int = 60,
    days: int = 7,
    small: float = 5.0,
    big: float = 500.0,
    tests: int = 3,
    within: timedelta = timedelta(minutes=10),
) -> Dataset:
    """Card charges (``card_id``, ``ts``, ``amount``, ``merchant``) with card testing in them.

    Background: every card has 1-6 ordinary charges a day; now and then a
    coffee under ``small`` or a legitimate purchase over ``big``.  Episodes
    (ground truth for :func:`cep.patterns.fraud.card_testing`): ``tests`` to
    ``tests + 3`` charges under ``small`` in a row at "testing" merchants, then
    one over ``big``, well inside ``within``; one card is hit twice.  Near
    misses: one small charge too few; the big charge just after the window; an
    ordinary charge between the small ones and the big one; a "big" charge just
    under ``big``; the big charge before the small ones.

    Background rule: never two charges under ``small`` in a row on a card, so
    (with ``tests >= 2``) no run of small charges exists outside the injections.
    """
    if tests < 2:
        raise ValueError(f"tests must be >= 2 for a background without runs, got {tests}")
    rng = random.Random(seed)
    win = _ms(within)
    quiet = win + MINUTE
    s = _Stream("card_id")
    keys = [f"C{n:04d}" for n in range(1, cards + 1)]

    def test_charge(card: str, ts: int) -> dict[str, Any]:
        amount = _money(small * rng.uniform(0.02, 0.9))
        return s.event(card, ts, amount=amount, merchant=rng.choice(TEST_MERCHANTS))

    def cashout(card: str, ts: int, amount: float | None = None) -> dict[str, Any]:
        value = _money(big * rng.uniform(1.2, 6.0)) if amount is None else amount
        return s.event(card, ts, amount=value, merchant=rng.choice(CASHOUT_MERCHANTS))

    def ordinary(card: str, ts: int) -> dict[str, Any]:
        merchant = rng.choice(list(CARD_MERCHANTS))
        lo, hi = CARD_MERCHANTS[merchant]
        amount = _money(min(max(rng.uniform(lo, hi), small), big))  # never small, never big
        return s.event(card, ts, amount=amount, merchant=merchant)

    def run(card: str, t0: int, n: int, span: int) -> list[dict[str, Any]]:
        return [test_charge(card, t0 + o) for o in _offsets(rng, n, span)]

    victims = rng.sample(keys, 10)
    first_day = _day(rng, days)
    for i, card in enumerate([*victims[:5], victims[0]]):  # victims[0] is hit twice
        day = first_day if i == 0 else _day(rng, days, avoid=[first_day] if i == 5 else [])
        smalls = run(card, _at(day, rng), tests + i % 4, int(win * rng.uniform(0.3, 0.6)))
        taken = [*smalls, cashout(card, smalls[-1]["ts"] + int(win * rng.uniform(0.05, 0.3)))]
        s.inject(taken, quiet)
        s.episode(taken)

    near: list[list[dict[str, Any]]] = []
    card, t0 = victims[5], _at(_day(rng, days), rng)  # one small charge too few
    ev = run(card, t0, tests - 1, int(win * 0.3))
    near.append([*ev, cashout(card, ev[-1]["ts"] + MINUTE)])
    card, t0 = victims[6], _at(_day(rng, days), rng)  # the big charge just after the window
    near.append([*run(card, t0, tests, int(win * 0.6)), cashout(card, t0 + win + 30 * SECOND)])
    card, t0 = victims[7], _at(_day(rng, days), rng)  # an ordinary charge before the big one
    ev = run(card, t0, tests, int(win * 0.3))
    ev.append(ordinary(card, ev[-1]["ts"] + 40 * SECOND))
    near.append([*ev, cashout(card, ev[-1]["ts"] + 40 * SECOND)])
    card, t0 = victims[8], _at(_day(rng, days), rng)  # the "big" charge is just under the limit
    ev = run(card, t0, tests + 1, int(win * 0.3))
    near.append([*ev, cashout(card, ev[-1]["ts"] + MINUTE, amount=_money(big * 0.96))])
    card, t0 = victims[9], _at(_day(rng, days), rng)  # the big charge first
    near.append([cashout(card, t0), *run(card, t0 + MINUTE, tests + 1, int(win * 0.3))])
    for ev in near:
        s.inject(ev, quiet)
        s.near_miss(ev)

    # Background rule: no two small charges in a row on a card.  With the quiet spans
    # (a window and a minute around each injection) no background charge is close
    # enough to an injection to extend or complete it.
    for card in keys:
        last_small = False
        for day in range(days):
            for ts in sorted(_at(day, rng, 7, 23) for _ in range(rng.randint(1, 6))):
                if not s.free(card, ts):
                    continue
                r = rng.random()
                if r < 0.08 and not last_small:
                    amount = _money(small * rng.uniform(0.5, 0.98))
                    s.event(card, ts, amount=amount, merchant=COFFEE_SHOP)
                    last_small = True
                    continue
                if r > 0.985:
                    amount = _money(big * rng.uniform(1.05, 4.0))
                    s.event(card, ts, amount=amount, merchant=rng.choice(BIG_MERCHANTS))
                else:
                    ordinary(card, ts)
                last_small = False
    return s.dataset()


# =================================================================== velocity burst
BURST_MERCHANTS = (
    "Steam", "PlayStation Store", "GiftCardHub", "Google Play", "Razer Gold", "eGift Shop 24",
)


def velocity_transactions(
    seed: int = 0,
    *,
    cards: int = 80,
    days: int = 7,
    transactions: int = 5,
    within: timedelta = timedelta(minutes=2),
) -> Dataset:
    """Card transactions (``card_id``, ``ts``, ``amount``, ``merchant``) with velocity bursts.

    Background: 1-7 purchases a card a day at ordinary merchants, and a few
    refunds (negative amounts).  Episodes (ground truth for
    :func:`cep.patterns.fraud.velocity_burst`): ``transactions`` to
    ``2 * transactions - 1`` charges at digital-goods merchants within 35-85 %
    of ``within``; a match holds the burst's first ``transactions`` charges.
    Near misses: one charge too few; ``transactions`` charges spread over 5 %
    more than ``within``; one charge too few plus a refund; a steady stream
    of charges each a little too far apart for ``transactions`` of them to
    fit in the window.

    Background rule: at most two background transactions of a card in any
    ``within`` (plus a minute), so (with ``transactions >= 3``) no burst outside
    the injections.
    """
    if transactions < 3:
        raise ValueError(f"transactions must be >= 3 (the background has pairs), got {transactions}")
    rng = random.Random(seed)
    n = transactions
    win = _ms(within)
    quiet = win + MINUTE
    s = _Stream("card_id")
    keys = [f"C{k:04d}" for k in range(1, cards + 1)]

    def charge(card: str, ts: int) -> dict[str, Any]:
        return s.event(card, ts, amount=_money(rng.uniform(10.0, 250.0)),
                       merchant=rng.choice(BURST_MERCHANTS))

    def burst(card: str, t0: int, count: int, span: int) -> list[dict[str, Any]]:
        return [charge(card, t0 + o) for o in _offsets(rng, count, span)]

    victims = rng.sample(keys, 9)
    first_day = _day(rng, days)
    sizes = [n, n + 1, 2 * n - 1, n + 2, n]  # all under 2n: one report each
    for i, card in enumerate([*victims[:4], victims[0]]):  # victims[0] twice, days apart
        day = first_day if i == 0 else _day(rng, days, avoid=[first_day] if i == 4 else [])
        ev = burst(card, _at(day, rng), sizes[i], int(win * rng.uniform(0.35, 0.85)))
        s.inject(ev, quiet)
        s.episode(ev[:n])  # skip past last event: the first n charges, reported once

    near: list[list[dict[str, Any]]] = []
    near.append(burst(victims[4], _at(_day(rng, days), rng), n - 1, int(win * 0.5)))
    near.append(burst(victims[5], _at(_day(rng, days), rng), n, int(win * 1.05)))
    ev = burst(victims[6], _at(_day(rng, days), rng), n, int(win * 0.6))
    refunded = ev[rng.randrange(1, n)]  # one of them is a refund, not a charge
    refunded.update(amount=-_money(rng.uniform(10.0, 250.0)), merchant="Refund: " + refunded["merchant"])
    near.append(ev)
    gap = int(win / (n - 1) * 1.1)  # evenly spaced: any n of them span 1.1 windows
    t0 = _at(_day(rng, days), rng)
    near.append([charge(victims[7], t0 + j * gap) for j in range(n + 1)])
    for ev in near:
        s.inject(ev, quiet)
        s.near_miss(ev)

    # Background rule: a transaction is dropped when the card already has two in the
    # window before it, so no three background transactions of a card fit in a window.
    for card in keys:
        kept: list[int] = []
        for day in range(days):
            for ts in sorted(_at(day, rng, 7, 23) for _ in range(rng.randint(1, 7))):
                if not s.free(card, ts) or sum(1 for k in kept if ts - k <= quiet) >= 2:
                    continue
                kept.append(ts)
                merchant = rng.choice(list(CARD_MERCHANTS))
                lo, hi = CARD_MERCHANTS[merchant]
                amount = _money(rng.uniform(lo, hi))
                if rng.random() < 0.03:
                    amount, merchant = -amount, "Refund: " + merchant
                s.event(card, ts, amount=amount, merchant=merchant)
    return s.dataset()


# ================================================================= account takeover
HOME_COUNTRIES = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "CA", "PL", "SE", "IE", "AU")
ABROAD = ("PT", "GR", "MX", "JP", "TH", "BR", "NG", "RO", "VN", "TR", "ZA", "AR", "AE", "IN")
DEVICE_KINDS = ("iphone", "android", "ipad", "macbook", "windows-pc", "pixel")
SESSION_ACTIONS = ("balance_check", "transfer", "statement_download", "card_settings")


def account_events(
    seed: int = 0,
    *,
    accounts: int = 60,
    days: int = 10,
    large: float = 1000.0,
    within: timedelta = timedelta(hours=1),
) -> Dataset:
    """Online-banking activity with account takeovers in it.

    Fields: ``account_id``, ``ts``, ``type`` (``login``, ``balance_check``,
    ``transfer``, ``statement_download``, ``card_settings``,
    ``password_change``, ``email_change``, ``logout``), ``device``,
    ``country``, ``amount`` (transfers only, null otherwise) and the
    enrichment flags ``new_device`` / ``new_country``: true when the event's
    device (country) had not been seen on the account before it.  The flags are
    computed here the way an upstream job would, from each account's history in
    time order; the history before the stream is the account's registered
    devices and home country.

    Background: sessions (a login, a few actions, often a logout) 0-3 times a
    day from the account's devices, now and then a new phone, a trip abroad, a
    password or e-mail change, a large transfer (rent, a car).  Episodes
    (ground truth for :func:`cep.patterns.fraud.account_takeover`, with ``large``
    and ``within``): a login from a new device and/or country, a password or
    e-mail change, a transfer of at least ``large``, inside 30-80 % of
    ``within``, with other actions in between.  Near misses: the owner doing
    the same from a known device at home; the transfer 7 % after the window;
    the transfer before the change; a transfer just under ``large``; no
    credentials change at all.

    Background rule: no transfer of ``large`` or more within ``within`` (plus a
    minute) after a credentials change of the same account, and one session at
    a time, so the background has no change-then-large-transfer inside a window.
    """
    rng = random.Random(seed)
    win = _ms(within)
    quiet = win + MINUTE
    s = _Stream("account_id")
    keys = [f"A{k:04d}" for k in range(1, accounts + 1)]
    used_devices: set[str] = set()

    def new_device() -> str:
        while True:
            name = f"{rng.choice(DEVICE_KINDS)}-{rng.getrandbits(24):06x}"
            if name not in used_devices:
                used_devices.add(name)
                return name

    home = {k: rng.choice(HOME_COUNTRIES) for k in keys}
    registered = {k: [new_device() for _ in range(rng.randint(1, 3))] for k in keys}

    def big() -> float:
        return _money(large * rng.uniform(1.5, 9.0))

    def session(account: str, t0: int, span: int, steps: list[tuple[str, float | None]],
                device: str, country: str) -> list[dict[str, Any]]:
        return [
            s.event(account, t0 + o, type=kind, device=device, country=country, amount=amount,
                    new_device=False, new_country=False)
            for o, (kind, amount) in zip(_offsets(rng, len(steps), span), steps, strict=True)
        ]

    def abroad(account: str) -> str:
        return rng.choice([c for c in ABROAD if c != home[account]])

    victims = rng.sample(keys, 10)
    small = _money(rng.uniform(20.0, 200.0))
    plans: list[tuple[str, str, str, list[tuple[str, float | None]], tuple[int, ...], float]] = [
        # (account, device, country, steps, indices a match takes, span as a share of within)
        (victims[0], new_device(), home[victims[0]],
         [("login", None), ("balance_check", None), ("password_change", None),
          ("transfer", small), ("transfer", big()), ("logout", None)], (0, 2, 4), 0.8),
        (victims[1], new_device(), abroad(victims[1]),
         [("login", None), ("email_change", None), ("transfer", big())], (0, 1, 2), 0.3),
        (victims[2], registered[victims[2]][0], abroad(victims[2]),
         [("login", None), ("balance_check", None), ("password_change", None),
          ("transfer", big())], (0, 2, 3), 0.5),
        (victims[3], new_device(), home[victims[3]],
         [("login", None), ("email_change", None), ("password_change", None),
          ("balance_check", None), ("transfer", big()), ("transfer", big())], (0, 1, 4), 0.6),
        (victims[4], new_device(), home[victims[4]],  # the second login is no longer new
         [("login", None), ("login", None), ("password_change", None), ("transfer", big())],
         (0, 2, 3), 0.4),
    ]
    for account, device, country, steps, take, share in plans:
        ev = session(account, _at(_day(rng, days), rng), int(win * share), steps, device, country)
        s.inject(ev, quiet)
        s.episode([ev[i] for i in take])

    near = [
        # the owner: known device, home country
        session(victims[5], _at(_day(rng, days), rng), int(win * 0.3),
                [("login", None), ("password_change", None), ("transfer", big())],
                registered[victims[5]][0], home[victims[5]]),
        # the transfer comes 7 % after the window
        session(victims[6], _at(_day(rng, days), rng), int(win * 1.07),
                [("login", None), ("password_change", None), ("transfer", big())],
                new_device(), home[victims[6]]),
        # the transfer before the change
        session(victims[7], _at(_day(rng, days), rng), int(win * 0.4),
                [("login", None), ("transfer", big()), ("email_change", None)],
                new_device(), home[victims[7]]),
        # a transfer just under the limit
        session(victims[8], _at(_day(rng, days), rng), int(win * 0.4),
                [("login", None), ("email_change", None), ("transfer", _money(large * 0.95))],
                registered[victims[8]][0], abroad(victims[8])),
        # no credentials change
        session(victims[9], _at(_day(rng, days), rng), int(win * 0.4),
                [("login", None), ("balance_check", None), ("transfer", big())],
                new_device(), home[victims[9]]),
    ]
    for ev in near:
        s.inject(ev, quiet)
        s.near_miss(ev)

    # Background rule: one session at a time; a transfer of `large` or more within a
    # window (and a minute) of a credentials change is made smaller.
    for account in keys:
        devices = list(registered[account])
        trip: range = range(0)
        if account not in victims and rng.random() < 0.15:
            first = rng.randrange(1, max(2, days - 3))
            trip = range(first, first + rng.randint(2, 5))
        trip_country = abroad(account)
        free_from, last_change = 0, -(10**15)
        for day in range(days):
            country = trip_country if day in trip else home[account]
            count = rng.choices((0, 1, 2, 3), weights=(25, 45, 25, 5))[0]
            for start in sorted(_at(day, rng, 6.5, 23.5) for _ in range(count)):
                device = rng.choice(devices)
                if rng.random() < 0.02:
                    device = new_device()
                    devices.append(device)
                steps = ["login", *rng.choices(SESSION_ACTIONS, (5, 3, 1, 1), k=rng.randint(1, 4))]
                if rng.random() < 0.015:
                    steps.insert(rng.randint(1, len(steps)), rng.choice(
                        ("password_change", "email_change")))
                if rng.random() < 0.7:
                    steps.append("logout")
                times = [start]
                for _ in steps[1:]:
                    times.append(times[-1] + rng.randint(20, 300) * SECOND)
                if start < free_from or not all(s.free(account, t) for t in times):
                    continue
                free_from = times[-1] + MINUTE
                for t, kind in zip(times, steps, strict=True):
                    amount = None
                    if kind in ("password_change", "email_change"):
                        last_change = t
                    if kind == "transfer":
                        amount = _money(min(math.exp(rng.gauss(4.6, 1.0)), large * 0.9))
                        if rng.random() < 0.06:
                            amount = _money(large * rng.uniform(1.05, 3.0))
                        if amount >= large and t - last_change <= quiet:
                            amount = _money(large * rng.uniform(0.1, 0.6))
                    s.event(account, t, type=kind, device=device, country=country, amount=amount,
                            new_device=False, new_country=False)

    # the enrichment flags, from each account's history in time order
    seen_devices = {k: set(registered[k]) for k in keys}
    seen_countries = {k: {home[k]} for k in keys}
    for e in by_time(s.events):
        account = e["account_id"]
        e["new_device"] = e["device"] not in seen_devices[account]
        e["new_country"] = e["country"] not in seen_countries[account]
        seen_devices[account].add(e["device"])
        seen_countries[account].add(e["country"])
    return s.dataset()


# ===================================================================== refund abuse
# (sku, product, price): what the background customers buy
CATALOGUE = (
    ("SKU-10231", "USB-C charger", 19.99), ("SKU-10457", "running socks 3-pack", 12.50),
    ("SKU-10512", "phone case", 24.90), ("SKU-10688", "coffee beans 1 kg", 21.00),
    ("SKU-10734", "paperback novel", 14.99), ("SKU-10819", "yoga mat", 34.95),
    ("SKU-10903", "bluetooth speaker", 59.00), ("SKU-11047", "desk lamp", 42.00),
    ("SKU-11172", "water bottle", 18.50), ("SKU-11256", "t-shirt", 16.00),
    ("SKU-11349", "jeans", 69.90), ("SKU-11430", "sneakers", 89.00),
    ("SKU-11581", "backpack", 74.50), ("SKU-11627", "board game", 39.99),
    ("SKU-11795", "kitchen knife", 49.00), ("SKU-11843", "bath towels", 29.90),
    ("SKU-11968", "sunglasses", 64.00), ("SKU-12015", "wireless mouse", 27.99),
    ("SKU-12177", "printer ink", 33.49), ("SKU-12264", "hoodie", 45.00),
    ("SKU-12339", "scented candle", 15.90), ("SKU-12481", "cookbook", 28.00),
    ("SKU-12526", "hair dryer", 54.90), ("SKU-12690", "rain jacket", 99.00),
)
# what the injected cases buy and refund: never sold to the background
PREMIUM = (
    ("SKU-88102", "designer handbag", 1290.00), ("SKU-88217", "mirrorless camera", 1899.00),
    ("SKU-88340", "gaming laptop", 2199.00), ("SKU-88411", "espresso machine", 749.00),
    ("SKU-88529", "evening dress", 620.00), ("SKU-88604", "smartwatch", 429.00),
    ("SKU-88713", "noise-cancelling headphones", 379.00), ("SKU-88820", "camera drone", 1099.00),
    ("SKU-88931", "e-bike battery", 689.00), ("SKU-89044", "leather jacket", 540.00),
    ("SKU-89152", "tablet", 899.00), ("SKU-89260", "VR headset", 549.00),
)


def refund_events(
    seed: int = 0,
    *,
    customers: int = 80,
    days: int = 120,
    cycles: int = 2,
    within: timedelta = timedelta(days=30),
) -> Dataset:
    """Web-shop orders (``customer_id``, ``ts``, ``type``, ``item``, ``product``, ``amount``).

    ``type`` is ``"purchase"`` or ``"refund"``; ``item`` is the SKU, ``product``
    its name, ``amount`` the price paid or refunded.  Background: every
    customer orders every few days from an everyday catalogue and returns
    about one order in twelve, one to twenty days later.  Episodes (ground
    truth for :func:`cep.patterns.fraud.refund_abuse`, with ``cycles`` and
    ``within``): a premium item bought, refunded and bought again ``cycles``
    times (one case ``cycles + 1`` times: the match holds its first
    ``cycles``), inside 40-80 % of ``within``, between the customer's ordinary
    orders.  Near misses: one cycle too few; the cycles spread over 10 % more
    than ``within``; the refunds are of other items; the last re-purchase
    missing.

    Background rule: a customer never buys again an item they had refunded (the
    item leaves their choices once the refund is decided), so no background
    item is bought after its refund; the injected items are premium items the
    background never sells, so background orders cannot join an injected case.
    """
    _check_positive(cycles, "cycles")
    rng = random.Random(seed)
    win = _ms(within)
    s = _Stream("customer_id")
    keys = [f"U{k:04d}" for k in range(1, customers + 1)]

    def order(customer: str, ts: int, kind: str, item: tuple[str, str, float]) -> dict[str, Any]:
        sku, product, price = item
        return s.event(customer, ts, type=kind, item=sku, product=product, amount=price)

    def case(customer: str, item: tuple[str, str, float], n: int, span: int,
             refunds: Sequence[tuple[str, str, float]] | None = None,
             rebuy_last: bool = True) -> list[dict[str, Any]]:
        """Buy ``item``, then ``n`` cycles of (refund, re-buy) over ``span``."""
        kinds = ["purchase", *["refund", "purchase"] * n]
        if not rebuy_last:
            kinds.pop()
        t0 = START + rng.randrange(2 * DAY, max(3 * DAY, days * DAY - span - 2 * DAY))
        out = []
        for j, (o, kind) in enumerate(zip(_offsets(rng, len(kinds), span), kinds, strict=True)):
            what = item if refunds is None or kind == "purchase" else refunds[(j - 1) // 2]
            out.append(order(customer, t0 + o, kind, what))
        return out

    victims = rng.sample(keys, 8)
    goods = list(PREMIUM)
    rng.shuffle(goods)
    for i, customer in enumerate(victims[:4]):
        n = cycles + 1 if i == 2 else cycles
        ev = case(customer, goods[i], n, int(win * rng.uniform(0.4, 0.8)))
        s.episode(ev[: 2 * cycles + 1])  # skip past last event: one report, the first cycles

    near = [
        case(victims[4], goods[4], cycles - 1, int(win * 0.5)),
        case(victims[5], goods[5], cycles, int(win * 1.1)),
        case(victims[7], goods[7], cycles, int(win * 0.6), rebuy_last=False),
    ]
    # refunds of other items: the customer bought those before
    others = [goods[8 + j % 4] for j in range(cycles)]
    ev = case(victims[6], goods[6], cycles, int(win * 0.6), refunds=others)
    for j, item in enumerate(dict.fromkeys(others)):
        order(victims[6], ev[0]["ts"] - (j + 1) * DAY, "purchase", item)
    near.append(ev)
    for ev in near:
        s.near_miss(ev)

    # Background rule: an item a customer has refunded is never bought by them again.
    for customer in keys:
        choices = list(CATALOGUE)
        mean_gap = rng.uniform(3.0, 9.0) * DAY
        t = START + int(rng.expovariate(1 / mean_gap))
        while t < START + days * DAY and choices:
            item = rng.choice(choices)
            order(customer, t, "purchase", item)
            refund_at = t + rng.randrange(DAY, 20 * DAY)
            if rng.random() < 1 / 12 and refund_at < START + days * DAY:
                choices.remove(item)
                order(customer, refund_at, "refund", item)
            t += max(HOUR, int(rng.expovariate(1 / mean_gap)))
    return s.dataset()


def _check_positive(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")


# ================================================================= impossible travel
EARTH_RADIUS_KM = 6371.0088
#: city -> (lat, lon) of its centre
CITIES = {
    "New York": (40.7128, -74.0060), "Philadelphia": (39.9526, -75.1652),
    "Boston": (42.3601, -71.0589), "Chicago": (41.8781, -87.6298),
    "Detroit": (42.3314, -83.0458), "Toronto": (43.6532, -79.3832),
    "Montreal": (45.5019, -73.5674), "San Francisco": (37.7749, -122.4194),
    "Los Angeles": (34.0522, -118.2437), "Mexico City": (19.4326, -99.1332),
    "São Paulo": (-23.5505, -46.6333), "London": (51.5074, -0.1278),
    "Paris": (48.8566, 2.3522), "Brussels": (50.8503, 4.3517),
    "Amsterdam": (52.3676, 4.9041), "Berlin": (52.5200, 13.4050),
    "Prague": (50.0755, 14.4378), "Warsaw": (52.2297, 21.0122),
    "Madrid": (40.4168, -3.7038), "Barcelona": (41.3874, 2.1686),
    "Rome": (41.9028, 12.4964), "Istanbul": (41.0082, 28.9784),
    "Dubai": (25.2048, 55.2708), "Mumbai": (19.0760, 72.8777),
    "Singapore": (1.3521, 103.8198), "Hong Kong": (22.3193, 114.1694),
    "Tokyo": (35.6762, 139.6503), "Osaka": (34.6937, 135.5023),
    "Seoul": (37.5665, 126.9780), "Shanghai": (31.2304, 121.4737),
    "Sydney": (-33.8688, 151.2093), "Lagos": (6.5244, 3.3792),
}
#: cardholders live here (each has cities 124-700 km, 400-1,500 km and over 3,000 km away)
HOME_CITIES = (
    "New York", "Boston", "Chicago", "Toronto", "San Francisco", "London", "Paris",
    "Amsterdam", "Berlin", "Madrid", "Tokyo",
)
SHOP_KINDS = ("supermarket", "fuel station", "pharmacy", "restaurant", "café", "department store",
              "electronics store", "ATM")
#: online merchants -> (city of the coordinates they report, lat, lon)
ONLINE_MERCHANTS = {
    "Amazon.com": ("Seattle", 47.6062, -122.3321), "Netflix": ("Los Gatos", 37.2358, -121.9624),
    "Spotify": ("Stockholm", 59.3293, 18.0686), "Steam": ("Bellevue", 47.6101, -122.2015),
    "AliExpress": ("Hangzhou", 30.2741, 120.1551), "Booking.com": ("Amsterdam", 52.3676, 4.9041),
    "Zalando": ("Berlin", 52.5200, 13.4050), "Shopee": ("Singapore", 1.3521, 103.8198),
}


def haversine_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance in km between two (lat, lon) points in degrees."""
    (lat1, lon1), (lat2, lon2) = a, b
    h = (math.sin(math.radians(lat2 - lat1) / 2) ** 2
         + math.cos(math.radians(lat1)) * math.cos(math.radians(lat2))
         * math.sin(math.radians(lon2 - lon1) / 2) ** 2)
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(h))


def _moved(point: tuple[float, float], km: float, bearing: float) -> tuple[float, float]:
    """The point ``km`` away from ``point`` at ``bearing`` (radians), on a flat local map."""
    lat, lon = point
    dlat = km * math.cos(bearing) / 111.195
    dlon = km * math.sin(bearing) / (111.195 * math.cos(math.radians(lat)))
    return round(lat + dlat, 5), round(lon + dlon, 5)


def travel_transactions(
    seed: int = 0,
    *,
    cards: int = 60,
    days: int = 10,
    max_kmh: float = 900.0,
    min_km: float = 100.0,
) -> Dataset:
    """Card transactions with where they happened, and cloned cards used far apart.

    Fields: ``card_id``, ``ts``, ``amount``, ``merchant``, ``city``, ``lat``,
    ``lon``, ``card_present``.  Card-present transactions are at a shop within
    12 km of the centre of the city the cardholder is in; online
    (card-not-present) ones carry the online merchant's coordinates, anywhere
    in the world.

    Background: every cardholder shops 1-5 times a day in their home city and
    buys online 0-2 times a day; a quarter of them take a trip to another city
    for a few days, arriving no sooner than a trip at half of ``max_kmh`` plus
    two hours would.  Episodes (ground truth for
    :func:`cep.patterns.fraud.impossible_travel`, with ``max_kmh`` and ``min_km``):
    a shop at home, then a shop in a far city (1.5-6 times too fast); the same
    with online purchases in between; a shop in a city 400-1,500 km away, 30-100
    % too fast; a trip to a nearby city at a plausible speed, then a jump from
    there to a far city (the match is the jump).  Near misses: a flight 10 %
    slower than ``max_kmh``; an online purchase far away between two shops at
    home; two shops 60 % of ``min_km`` apart two minutes apart; the far jump
    above measured from home (not consecutive: the nearby shop is in between).

    Background rule: two consecutive card-present transactions of a card are
    never faster than half of ``max_kmh`` - in town they are at least five
    minutes (and ``96 km / max_kmh`` hours) apart and at most 24 km, and a trip
    takes the time above - and this is checked before the dataset is returned.
    Around an injection the card is quiet from two hours before to the time it
    would take to get home at half of ``max_kmh`` plus two hours after.
    """
    if not max_kmh > 0 or not min_km > 0:
        raise ValueError(f"max_kmh and min_km must be positive, got {max_kmh!r}, {min_km!r}")
    rng = random.Random(seed)
    s = _Stream("card_id")
    keys = [f"C{k:04d}" for k in range(1, cards + 1)]
    home = {k: rng.choice(HOME_CITIES) for k in keys}
    radius = 12.0
    town_gap = max(5 * MINUTE, int(4 * radius / max_kmh * HOUR))
    slow_kmh = max_kmh / 2

    def at_shop(card: str, ts: int, city: str, point: tuple[float, float] | None = None,
                ) -> dict[str, Any]:
        lat, lon = point or _moved(CITIES[city], radius * math.sqrt(rng.random()),
                                   rng.uniform(0, 2 * math.pi))
        return s.event(card, ts, amount=_money(rng.uniform(4.0, 180.0)),
                       merchant=f"{city} {rng.choice(SHOP_KINDS)}", city=city, lat=lat, lon=lon,
                       card_present=True)

    def online(card: str, ts: int) -> dict[str, Any]:
        merchant = rng.choice(list(ONLINE_MERCHANTS))
        city, lat, lon = ONLINE_MERCHANTS[merchant]
        return s.event(card, ts, amount=_money(rng.uniform(5.0, 120.0)), merchant=merchant,
                       city=city, lat=lat, lon=lon, card_present=False)

    def far_city(card: str, low: float, high: float) -> str:
        options = [c for c in CITIES if low <= haversine_km(CITIES[home[card]], CITIES[c]) <= high]
        return rng.choice(options)

    def hop(a: dict[str, Any], city: str, speed: float) -> dict[str, Any]:
        """A shop in ``city``, reached from ``a`` at ``speed`` km/h."""
        b_point = _moved(CITIES[city], radius * math.sqrt(rng.random()), rng.uniform(0, 6.3))
        km = haversine_km((a["lat"], a["lon"]), b_point)
        return at_shop(a["card_id"], a["ts"] + max(1, int(km / speed * HOUR)), city, b_point)

    def inject(ev: list[dict[str, Any]]) -> None:
        last = [e for e in ev if e["card_present"]][-1]
        back = haversine_km((last["lat"], last["lon"]), CITIES[home[last["card_id"]]])
        s.inject(ev, 2 * HOUR, int(back / slow_kmh * HOUR) + 2 * HOUR)

    victims = rng.sample(keys, 8)

    def start(card: str) -> dict[str, Any]:
        return at_shop(card, _at(_day(rng, days), rng), home[card])

    a = start(victims[0])  # cloned card used in a far city
    b = hop(a, far_city(victims[0], 2000, 20000), max_kmh * rng.uniform(1.5, 6.0))
    inject([a, b])
    s.episode([a, b])
    a = start(victims[1])  # the same with online purchases in between
    b = hop(a, far_city(victims[1], 2000, 20000), max_kmh * rng.uniform(1.5, 6.0))
    ev = [a, online(a["card_id"], a["ts"] + (b["ts"] - a["ts"]) // 3),
          online(a["card_id"], a["ts"] + (b["ts"] - a["ts"]) * 2 // 3), b]
    inject(ev)
    s.episode([a, b])
    a = start(victims[2])  # a city a few hundred km away, too soon
    b = hop(a, far_city(victims[2], 400, 1500), max_kmh * rng.uniform(1.3, 2.0))
    inject([a, b])
    s.episode([a, b])
    a = start(victims[3])  # a plausible trip to a nearby city, then a jump
    m = hop(a, far_city(victims[3], 100 + 2 * radius, 700), max_kmh * rng.uniform(0.2, 0.4))
    b = hop(m, far_city(victims[3], 3000, 20000), max_kmh * rng.uniform(1.5, 4.0))
    inject([a, m, b])
    s.episode([m, b])

    s.near_miss([a, b])  # the jump measured from home: not consecutive card-present shops
    a = start(victims[4])  # a flight, just slow enough
    b = hop(a, far_city(victims[4], 2000, 20000), max_kmh * 0.9)
    inject([a, b])
    s.near_miss([a, b])
    a = start(victims[5])  # an online purchase far away between two shops at home
    ev = [a, online(a["card_id"], a["ts"] + 3 * MINUTE),
          at_shop(a["card_id"], a["ts"] + 30 * MINUTE, home[a["card_id"]])]
    inject(ev)
    s.near_miss(ev)
    a = start(victims[6])  # across town (under min_km), two minutes later
    b_point = _moved((a["lat"], a["lon"]), min_km * 0.6, rng.uniform(0, 2 * math.pi))
    b = at_shop(a["card_id"], a["ts"] + 2 * MINUTE, home[a["card_id"]], b_point)
    inject([a, b])
    s.near_miss([a, b])

    # Background rule (see the docstring): in town, card-present transactions at
    # least `town_gap` apart; trips at half of `max_kmh` plus two hours.
    for card in keys:
        stays = [(START, START + days * DAY, home[card])]  # (from, to, city)
        if card not in victims and rng.random() < 0.25:
            away = rng.choice([c for c in CITIES if c != home[card]])
            leave = _at(rng.randrange(1, max(2, days - 4)), rng, 6, 12)
            legs = int(haversine_km(CITIES[home[card]], CITIES[away]) / slow_kmh * HOUR) + 2 * HOUR
            back = leave + legs + rng.randint(2, 4) * DAY
            stays = [(START, leave, home[card]), (leave + legs, back, away),
                     (back + legs, START + days * DAY, home[card])]
        last_shop = -(10**15)
        for day in range(days):
            times = [(t, True) for t in (_at(day, rng, 7, 22) for _ in range(rng.randint(1, 5)))]
            times += [(_at(day, rng, 0, 24), False) for _ in range(rng.randint(0, 2))]
            for ts, present in sorted(times):
                if not s.free(card, ts):
                    continue
                if not present:
                    online(card, ts)
                    continue
                city = next((c for lo, hi, c in stays if lo <= ts < hi), None)
                if city is None or ts - last_shop < town_gap:
                    continue  # travelling, or too soon after the last shop
                at_shop(card, ts, city)
                last_shop = ts

    dataset = s.dataset()
    _check_background_speeds(dataset, [e for ep in dataset.episodes + dataset.near_misses
                                       for e in ep.ids], slow_kmh)
    return dataset


def _check_background_speeds(ds: Dataset, injected: Iterable[int], limit_kmh: float) -> None:
    """Fail if two consecutive background card-present transactions of a card are too fast."""
    skip = set(injected)
    last: dict[Any, dict[str, Any]] = {}
    for e in ds.events:
        if not e["card_present"] or e["id"] in skip:
            continue
        prev = last.get(e["card_id"])
        last[e["card_id"]] = e
        if prev is None:
            continue
        km = haversine_km((prev["lat"], prev["lon"]), (e["lat"], e["lon"]))
        if km > limit_kmh * (e["ts"] - prev["ts"]) / HOUR:
            raise AssertionError(f"background travel too fast: {prev} -> {e}")
