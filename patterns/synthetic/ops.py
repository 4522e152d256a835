"""Service logs and login attempts with injected incidents, one generator per pattern of
:mod:`cep.patterns.ops`.

* ``deploy_logs`` for ``error_burst_after_deploy``, key ``service``; fields
  id, service, host, ts, kind, level, message, version.
* ``login_events`` for ``failed_logins_then_success``, key ``user``; fields
  id, user, ts, outcome, ip, client.

Every generator takes the pattern's parameters (defaults equal the pattern's
defaults) and a ``seed``; the same arguments always give the same events.
Timestamps are epoch milliseconds in ``ts``, from Monday 2024-03-04 00:00 UTC.

Each injected incident or near miss books a time slot on its key at least the
pattern's window away from every other booking on that key, and the background
events the pattern reads (deploys and errors, logins) are kept out of a booking
and its margin, so injected events only combine with each other.  Why the
background alone never matches is said in each generator.

>>> ds = login_events(seed=2)
>>> len(ds.episodes) >= 3 and len(ds.near_misses) >= 3, ds.key
(True, 'user')
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from cep.patterns.synthetic import Dataset, Episode, Ids, by_time, millis
from cep.patterns.synthetic.anomaly import MINUTE, Calendar, duration_ms

START = millis("2024-03-04T00:00:00")
SECOND = 1_000

SERVICES = (
    "checkout",
    "payments",
    "search",
    "catalog",
    "cart",
    "auth",
    "shipping",
    "inventory",
    "recommendations",
    "notifications",
    "gateway",
    "billing",
    "profile",
    "reviews",
    "pricing",
)
INFO = (
    "GET /api/v1/items 200 in {ms} ms",
    "POST /api/v1/orders 201 in {ms} ms",
    "cache refresh finished in {ms} ms",
    "health check ok",
    "GET /api/v1/cart 200 in {ms} ms",
    "scheduled job reconcile done in {ms} ms",
)
WARN = (
    "slow query: {ms} ms on orders_by_customer",
    "retrying call to inventory (attempt 2)",
    "connection pool 85% used",
    "GET /api/v1/items 429 rate limited",
)
ERROR = (
    "upstream timeout after {ms} ms",
    "HTTP 500 on POST /api/v1/orders",
    "connection refused: db-primary:5432",
    "NullPointerException in OrderMapper.map",
    "failed to publish event: broker unavailable",
)


def deploy_logs(
    seed: int = 0,
    errors: int = 5,
    within: timedelta | int = timedelta(minutes=10),
    services: int = 12,
    hours: float = 6.0,
    episodes: int = 5,
    near_misses: int = 6,
) -> Dataset:
    """Application logs of a fleet of services for :func:`cep.patterns.ops.error_burst_after_deploy`.

    Background: each service logs a line every 2 minutes on average (mostly
    ``INFO``, some ``WARN``, a few ``ERROR``) from one of its hosts, and is
    deployed once or twice (``kind="deploy"``, a new ``version`` from then on).
    Errors are logged as ``ERROR`` (the pattern's default ``levels``).
    Two background errors of one service are always at least ``within``
    apart (a would-be error closer than that is logged as a ``WARN`` retry), so
    no deploy window ever holds more than one background error; ``errors``
    must be at least 2.

    Episodes (a bad release): a deploy, then ``errors`` to ``errors + 5``
    errors spread over the next ``within`` minus 30 s, and sometimes a
    rollback deploy after the window.  The episode is the deploy and its first
    ``errors`` errors.  Near misses (each kind at least once): one error too
    few; the last needed error exactly ``within`` after the deploy (too late:
    the window is half open); an error burst with no deploy before it (an
    upstream outage); a deploy on one service while another one fails; a
    deploy followed by warnings only.
    """
    if errors < 2:
        raise ValueError(f"errors must be at least 2, got {errors!r}")
    rng = random.Random(seed)
    window = duration_ms(within)
    if window < 2 * MINUTE:
        raise ValueError(f"within must be at least 2 minutes, got {within!r}")
    end = START + int(hours * 3_600_000)
    names = [*SERVICES[:services], *[f"service-{i:02d}" for i in range(len(SERVICES), services)]]
    hosts = {
        s: [f"{s}-{rng.randrange(16**5):05x}" for _ in range(rng.randint(2, 4))] for s in names
    }
    slot = 2 * window + 4 * MINUTE
    calendar = Calendar(rng, START, end, margin=window)
    ids = Ids()
    events: list[dict[str, Any]] = []

    def line(service: str, ts: int, level: str, kind: str = "request") -> dict[str, Any]:
        templates = {"INFO": INFO, "WARN": WARN}.get(level, ERROR)
        message = rng.choice(templates).format(ms=rng.randint(5, 30_000))
        e = {
            "id": ids(),
            "service": service,
            "host": rng.choice(hosts[service]),
            "ts": ts,
            "kind": kind,
            "level": level,
            "message": message,
            "version": "",
        }
        events.append(e)
        return e

    def burst(service: str, t0: int, n: int, span: int, level: str) -> list[dict[str, Any]]:
        """``n`` lines of ``level`` at random times in ``[t0 + 20 s, t0 + span)``."""
        times = sorted(rng.sample(range(t0 + 20 * SECOND, t0 + span), n))
        return [line(service, t, level) for t in times]

    def bad_release() -> Episode:
        (service,), t0 = calendar.book(names, slot)
        deploy = line(service, t0, "INFO", "deploy")
        failed = burst(service, t0, rng.randint(errors, errors + 5), window - 30 * SECOND, "ERROR")
        if rng.random() < 0.5:
            line(
                service, t0 + window + rng.randint(1, 3) * MINUTE, "INFO", "deploy"
            )  # the rollback
        return Episode(service, (deploy["id"], *[e["id"] for e in failed[:errors]]))

    def too_few() -> Episode:
        (service,), t0 = calendar.book(names, slot)
        deploy = line(service, t0, "INFO", "deploy")
        failed = burst(service, t0, errors - 1, window - 30 * SECOND, "ERROR")
        return Episode(service, (deploy["id"], *[e["id"] for e in failed]))

    def too_late() -> Episode:
        (service,), t0 = calendar.book(names, slot)
        deploy = line(service, t0, "INFO", "deploy")
        failed = burst(service, t0, errors - 1, window - 30 * SECOND, "ERROR")
        failed.append(line(service, t0 + window, "ERROR"))
        return Episode(service, (deploy["id"], *[e["id"] for e in failed]))

    def outage() -> Episode:
        (service,), t0 = calendar.book(names, slot)
        failed = burst(service, t0, errors + 2, 3 * MINUTE, "ERROR")
        return Episode(service, tuple(e["id"] for e in failed[:errors]))

    def other_service() -> Episode:
        (deployed, failing), t0 = calendar.book(names, slot, together=2)
        deploy = line(deployed, t0, "INFO", "deploy")
        failed = burst(failing, t0, errors + 1, window - 30 * SECOND, "ERROR")
        return Episode(deployed, (deploy["id"], *[e["id"] for e in failed[:errors]]))

    def warnings() -> Episode:
        (service,), t0 = calendar.book(names, slot)
        deploy = line(service, t0, "INFO", "deploy")
        warned = burst(service, t0, errors + 2, window - 30 * SECOND, "WARN")
        return Episode(service, (deploy["id"], *[e["id"] for e in warned[:errors]]))

    found = [bad_release() for _ in range(episodes)]
    makers: list[Callable[[], Episode]] = [too_few, too_late, outage, other_service, warnings]
    makers += [rng.choice(makers) for _ in range(near_misses - len(makers))]
    near = [make() for make in makers[:near_misses]]

    for service in names:
        # background deploys and errors stay out of bookings and their margins
        for _ in range(rng.randint(1, 2)):
            t = rng.randrange(START, end)
            if not calendar.busy(service, t):
                line(service, t, "INFO", "deploy")
        last_error = START - window
        t = START + int(rng.expovariate(1 / (2 * MINUTE)))
        while t < end:
            level = rng.choices(("INFO", "WARN", "ERROR"), weights=(88, 9, 3))[0]
            if level == "ERROR":
                if t - last_error < window or calendar.busy(service, t):
                    level = "WARN"  # a retry that worked
                else:
                    last_error = t
            line(service, t, level)
            t += 1_000 + int(rng.expovariate(1 / (2 * MINUTE)))

    # versions: each service starts on its own release; a deploy moves it to the next one
    events = by_time(events)
    version = {s: [rng.randint(1, 4), rng.randint(0, 30), rng.randint(0, 9)] for s in names}
    for e in events:
        v = version[e["service"]]
        if e["kind"] == "deploy":
            v[2] += 1
        e["version"] = ".".join(map(str, v))
        if e["kind"] == "deploy":
            e["message"] = f"deployed {e['service']} {e['version']}"
    return Dataset(events, "service", "ts", sorted(found), sorted(near))


# ------------------------------------------------------------ login attempts
CLIENTS = ("web", "ios", "android", "api")


def login_events(
    seed: int = 0,
    failures: int = 5,
    within: timedelta | int = timedelta(minutes=10),
    users: int = 150,
    hours: float = 24.0,
    episodes: int = 5,
    near_misses: int = 6,
) -> Dataset:
    """Login attempts of a user base for :func:`cep.patterns.ops.failed_logins_then_success`.

    Background: every user signs in one to six times a day from a home
    address, now and then after a typo or two; a few times a day a password
    spray tries one password on dozens of accounts from a foreign address
    (failures only).  Walking each user's background attempts in time order,
    the generator drops any failure that would be the ``failures``-th in a row,
    so the background never holds ``failures`` consecutive failures
    (``failures`` must be at least 2).

    Episodes (a brute force that worked): from one foreign address,
    ``failures`` to ``failures + 6`` failures a few seconds apart, then a
    success; or a slower run whose first failures are more than ``within``
    before the success.  The episode is the failures less than ``within``
    before the success, and the success.  Near misses (each kind at least
    once): one failure too few; the success ``within`` plus a little after the
    first failure; two runs of ``failures - 1`` split by a success; a brute
    force that never succeeds; a success followed by failures.
    """
    if failures < 2:
        raise ValueError(f"failures must be at least 2, got {failures!r}")
    rng = random.Random(seed)
    window = duration_ms(within)
    if window < MINUTE:
        raise ValueError(f"within must be at least a minute, got {within!r}")
    end = START + int(hours * 3_600_000)
    names = [f"u{n:04d}" for n in rng.sample(range(1000, 10_000), users)]
    home = {u: _address(rng, (81, 82, 88, 94)) for u in names}
    slot = window + 5 * MINUTE
    calendar = Calendar(rng, START, end, margin=window)
    ids = Ids()
    events: list[dict[str, Any]] = []

    def attempt(user: str, ts: int, outcome: str, ip: str, client: str) -> dict[str, Any]:
        e = {"id": ids(), "user": user, "ts": ts, "outcome": outcome, "ip": ip, "client": client}
        events.append(e)
        return e

    def run(
        user: str,
        t: int,
        n: int,
        gap: tuple[int, int],
        outcome: str = "failure",
        ip: str | None = None,
    ) -> list[dict[str, Any]]:
        """``n`` attempts from one address, ``gap`` (ms, low-high) apart, starting at ``t``."""
        ip = ip or _address(rng, (45, 91, 185, 193))
        client = rng.choice(("api", "web"))
        out = []
        for _ in range(n):
            out.append(attempt(user, t, outcome, ip, client))
            t += rng.randint(*gap)
        return out

    def brute_force() -> Episode:
        (user,), t0 = calendar.book(names, slot)
        if rng.random() < 0.6:
            n = rng.randint(failures, failures + 6)
            fast = max(2 * SECOND, min(8 * SECOND, (window - 20 * SECOND) // n))
            tried = run(user, t0, n, (SECOND, fast))
        else:  # low and slow: the first failures fall out of the window
            step = window // (failures + 1)
            tried = run(user, t0, failures + 4, (step, step))
        ok = attempt(
            user,
            tried[-1]["ts"] + rng.randint(3, 10) * SECOND,
            "success",
            tried[-1]["ip"],
            tried[-1]["client"],
        )
        recent = [e for e in tried if ok["ts"] - e["ts"] < window]
        assert len(recent) >= failures
        return Episode(user, (*[e["id"] for e in recent], ok["id"]))

    def too_few() -> Episode:
        (user,), t0 = calendar.book(names, slot)
        tried = run(user, t0, failures - 1, (2 * SECOND, 8 * SECOND))
        ok = attempt(user, tried[-1]["ts"] + 5 * SECOND, "success", tried[-1]["ip"], "web")
        return Episode(user, (*[e["id"] for e in tried], ok["id"]))

    def too_slow() -> Episode:
        (user,), t0 = calendar.book(names, slot)
        spread = (window // 2) // failures
        tried = run(user, t0, failures, (spread, spread))
        ok = attempt(
            user, t0 + window + rng.randint(1, 60) * SECOND, "success", tried[-1]["ip"], "web"
        )
        return Episode(user, (*[e["id"] for e in tried], ok["id"]))

    def split() -> Episode:
        (user,), t0 = calendar.book(names, slot)
        first = run(user, t0, failures - 1, (3 * SECOND, 10 * SECOND), ip=home[user])
        middle = attempt(user, first[-1]["ts"] + 5 * SECOND, "success", home[user], "web")
        second = run(
            user, middle["ts"] + 30 * SECOND, failures - 1, (3 * SECOND, 10 * SECOND), ip=home[user]
        )
        ok = attempt(user, second[-1]["ts"] + 5 * SECOND, "success", home[user], "web")
        return Episode(user, (*[e["id"] for e in first + second], ok["id"]))

    def locked_out() -> Episode:
        (user,), t0 = calendar.book(names, slot)
        tried = run(user, t0, 2 * failures, (SECOND, 5 * SECOND))
        return Episode(user, tuple(e["id"] for e in tried[:failures]))

    def success_first() -> Episode:
        (user,), t0 = calendar.book(names, slot)
        ok = attempt(user, t0, "success", home[user], "ios")
        tried = run(user, t0 + MINUTE, failures, (2 * SECOND, 8 * SECOND))
        return Episode(user, (ok["id"], *[e["id"] for e in tried]))

    found = [brute_force() for _ in range(episodes)]
    makers: list[Callable[[], Episode]] = [too_few, too_slow, split, locked_out, success_first]
    makers += [rng.choice(makers) for _ in range(near_misses - len(makers))]
    near = [make() for make in makers[:near_misses]]

    background: dict[str, list[tuple[int, str, str, str]]] = {u: [] for u in names}
    for user in names:
        for _ in range(rng.randint(1, 6)):
            t = rng.randrange(START, end - 5 * MINUTE)
            client = rng.choice(CLIENTS)
            for _ in range(rng.choices((0, 1, 2), weights=(85, 11, 4))[0]):
                background[user].append((t, "failure", home[user], client))
                t += rng.randint(5, 40) * SECOND
            background[user].append((t, "success", home[user], client))
    for _ in range(rng.randint(2, 4)):  # password sprays
        ip = _address(rng, (45, 91, 185, 193))
        t = rng.randrange(START, end - 10 * MINUTE)
        for user in rng.sample(names, min(len(names), rng.randint(30, 60))):
            background[user].append((t + rng.randrange(10 * MINUTE), "failure", ip, "api"))
    for user in names:
        in_a_row = 0
        for t, outcome, ip, client in sorted(background[user]):
            if calendar.busy(user, t):
                continue
            if outcome == "failure":
                if in_a_row + 1 >= failures:
                    continue
                in_a_row += 1
            else:
                in_a_row = 0
            attempt(user, t, outcome, ip, client)
    return Dataset(by_time(events), "user", "ts", sorted(found), sorted(near))


def _address(rng: random.Random, first: Sequence[int]) -> str:
    return f"{rng.choice(first)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
