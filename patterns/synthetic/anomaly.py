"""Sensor and device streams with injected anomalies, one generator per pattern of
:mod:`cep.patterns.anomaly`.

* ``sensor_readings`` for ``sustained_breach``, key ``sensor_id``; fields
  id, sensor_id, site, ts, value (deg C).
* ``trend_readings`` for ``rising_trend``, key ``sensor_id``; fields id,
  sensor_id, site, ts, value (bar).
* ``flatline_readings`` for ``flatline``, key ``sensor_id``; fields id,
  sensor_id, site, ts, value (deg C).
* ``heartbeats`` for ``missing_heartbeat``, key ``device_id``; fields id,
  device_id, ts, type, seq, rssi.
* ``room_events`` for ``fire_alarm``, key ``room``; fields id, room, sensor,
  ts, type, value.

Every generator takes the pattern's parameters (defaults equal the pattern's
defaults) and a ``seed``; the same arguments always give the same events.
Timestamps are epoch milliseconds in ``ts``, from Monday 2024-03-04 08:00 UTC.

The reading generators (the first three) emit one reading per sensor a minute.
Background values follow a noisy mean-reverting walk around a per-sensor
baseline, and a rule applied reading by reading, to the readings that were
really emitted, keeps the background from ever forming a run (see each
generator).  An injected segment always starts with its anchor reading and ends
with a reading that closes the run, both derived from the reading before the
segment, so background and injected readings never join into a longer run.  The
episode of a run pattern is the anchor plus the first N readings of the run:
exactly what the pattern's match takes.

The time-based generators (``heartbeats``, ``room_events``) book a time slot
per injected episode or near miss on its key, at least the pattern's window
away from every other booking on that key, so no two of them can combine; the
background alone can never match (see each generator for why).

>>> ds = sensor_readings(seed=1)
>>> len(ds.episodes), len(ds.near_misses), ds.key
(5, 6, 'sensor_id')
>>> sensor_readings(seed=1).events == ds.events
True
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cep.patterns.synthetic import Dataset, Episode, Ids, by_time, millis

START = millis("2024-03-04T08:00:00")
MINUTE = 60_000
SITES = ("plant-north", "plant-south", "warehouse")


# --------------------------------------------------------------- time slots
@dataclass
class Calendar:
    """Intervals booked per key for injected episodes and near misses.

    Each booking ``[t, t + length)`` is kept ``margin`` away from every other
    booking on the same key, and :meth:`busy` tells background generation which
    times to keep quiet.  Units are whatever the caller uses (milliseconds, or
    reading positions).
    """

    rng: random.Random
    start: int
    end: int
    margin: int
    booked: dict[Any, list[tuple[int, int]]] = field(default_factory=dict)

    def book(self, keys: Sequence[Any], length: int, together: int = 1) -> tuple[list[Any], int]:
        """``together`` distinct keys and a start time free on all of them for ``length``."""
        lo, hi = self.start + self.margin, self.end - length - self.margin
        if hi <= lo:
            raise ValueError(f"a slot of {length} does not fit in [{self.start}, {self.end})")
        for _ in range(10_000):
            chosen = self.rng.sample(list(keys), together)
            t = self.rng.randrange(lo, hi)
            if all(self._free(k, t, t + length) for k in chosen):
                for k in chosen:
                    self.booked.setdefault(k, []).append((t, t + length))
                return chosen, t
        raise ValueError("too many injected episodes for the data: add keys or time")

    def busy(self, key: Any, t: int, margin: bool = True) -> bool:
        """Whether ``t`` is in a booking of ``key`` (with ``margin``: or near one)."""
        m = self.margin if margin else 0
        return any(a - m <= t < b + m for a, b in self.booked.get(key, ()))

    def _free(self, key: Any, a: int, b: int) -> bool:
        m = self.margin
        return all(b + m <= x or y + m <= a for x, y in self.booked.get(key, ()))


# ------------------------------------------------------- reading sequences
# A segment is made when the sequence reaches it, from the value of the reading
# before it: (rng, previous value) -> values.
Make = Callable[[random.Random, float], list[float]]
# The background: (rng, baseline, values so far) -> next value.
Background = Callable[[random.Random, float, list[float]], float]


@dataclass(frozen=True)
class Segment:
    """Injected readings: how many, how to make them, which ones the (near) episode takes."""

    length: int
    make: Make
    takes: tuple[int, ...]
    near: bool


def _readings(
    rng: random.Random,
    *,
    prefix: str,
    sensors: int,
    per_sensor: int,
    baseline: tuple[float, float],
    background: Background,
    segments: Sequence[Segment],
) -> Dataset:
    """Readings of ``sensors`` sensors, one a minute, with ``segments`` placed at random."""
    ids = Ids()
    names = [f"{prefix}-{i:02d}" for i in range(1, sensors + 1)]
    calendar = Calendar(rng, 1, per_sensor, margin=3)
    placed: dict[str, dict[int, Segment]] = {n: {} for n in names}
    for seg in segments:
        (name,), at = calendar.book(names, seg.length)
        placed[name][at] = seg
    events: list[dict[str, Any]] = []
    episodes: list[Episode] = []
    near: list[Episode] = []
    for name in names:
        base = round(rng.uniform(*baseline), 1)
        site = rng.choice(SITES)
        offset = rng.randrange(MINUTE)
        values: list[float] = []
        i = 0
        while i < per_sensor:
            seg = placed[name].get(i)
            if seg is None:
                if values and rng.random() < 0.004:
                    i += 1  # a reading lost in transmission
                    continue
                made = [background(rng, base, values)]
            else:
                made = seg.make(rng, values[-1] if values else base)
                assert len(made) == seg.length
            taken: list[int] = []
            for j, v in enumerate(made):
                ts = START + offset + (i + j) * MINUTE + rng.randint(0, 4_000)
                e = {"id": ids(), "sensor_id": name, "site": site, "ts": ts, "value": v}
                events.append(e)
                values.append(v)
                if seg is not None and j in seg.takes:
                    taken.append(e["id"])
            if seg is not None:
                (near if seg.near else episodes).append(Episode(name, tuple(taken)))
            i += len(made)
    return Dataset(by_time(events), "sensor_id", "ts", sorted(episodes), sorted(near))


def _mixed(
    rng: random.Random, makers: Sequence[Callable[[], Segment]], count: int
) -> list[Segment]:
    """``count`` segments: every maker once, then makers drawn at random."""
    chosen = list(makers) + [rng.choice(makers) for _ in range(count - len(makers))]
    return [m() for m in chosen[:count]]


def duration_ms(duration: timedelta | int) -> int:
    """A window given as a timedelta or as integer milliseconds, in milliseconds."""
    if isinstance(duration, timedelta):
        return duration // timedelta(milliseconds=1)
    return int(duration)


def _check_run(readings: int, low: int) -> None:
    if isinstance(readings, bool) or not isinstance(readings, int) or readings < low:
        raise ValueError(f"readings must be a whole number >= {low}, got {readings!r}")


# ------------------------------------------------------------ sustained_breach
def sensor_readings(
    seed: int = 0,
    threshold: float = 80.0,
    readings: int = 5,
    sensors: int = 20,
    per_sensor: int = 120,
    episodes: int = 5,
    near_misses: int = 6,
) -> Dataset:
    """Motor winding temperatures for :func:`cep.patterns.anomaly.sustained_breach`.

    Background: each sensor hovers around its own baseline (12 to 30 below the
    threshold: 50-68 deg C by default) and stays at least 0.5 below
    ``threshold``, except for isolated electrical spikes above it.  A spike is
    only emitted after a reading at or below the threshold and is always
    followed by one, so the background never has two readings above the
    threshold in a row (``readings`` must be >= 2).

    Episodes: a normal reading, then ``readings`` to ``readings + 6`` readings
    above the threshold (a heating hump), then a normal one; the episode is the
    normal reading and the first ``readings`` hot ones (stages ``ok`` and
    ``breach``).  Near misses (each kind at least once): one hot reading too
    few; two runs of ``readings - 1`` split by a dip to exactly the threshold;
    ``readings`` readings exactly at the threshold.
    """
    _check_run(readings, 2)
    rng = random.Random(seed)
    x = float(threshold)

    def background(rng: random.Random, base: float, values: list[float]) -> float:
        prev = values[-1] if values else base
        if prev <= x and rng.random() < 0.015:
            return round(x + rng.uniform(0.5, 12.0), 1)  # an isolated spike
        last = prev if prev <= x else base
        return round(min(base + 0.8 * (last - base) + rng.gauss(0, 1.2), x - 0.5), 1)

    def hot(rng: random.Random, n: int) -> list[float]:
        peak = rng.uniform(2.0, 15.0)
        return [
            round(
                x + 0.2 + peak * math.sin(math.pi * (j + 1) / (n + 1)) + abs(rng.gauss(0, 0.3)), 1
            )
            for j in range(n)
        ]

    def normal(rng: random.Random) -> float:
        return round(x - rng.uniform(0.5, 6.0), 1)

    def episode() -> Segment:
        n = rng.randint(readings, readings + 6)
        return Segment(
            n + 2,
            lambda r, p: [normal(r), *hot(r, n), normal(r)],
            tuple(range(readings + 1)),
            False,
        )

    def too_few() -> Segment:
        n = readings - 1
        return Segment(
            n + 2, lambda r, p: [normal(r), *hot(r, n), normal(r)], tuple(range(n + 1)), True
        )

    def dip() -> Segment:
        n = readings - 1
        takes = (0, *range(1, n + 1), *range(n + 2, n + 2 + readings - n))
        return Segment(
            2 * n + 3, lambda r, p: [normal(r), *hot(r, n), x, *hot(r, n), normal(r)], takes, True
        )

    def at_threshold() -> Segment:
        return Segment(
            readings + 2,
            lambda r, p: [normal(r), *[x] * readings, normal(r)],
            tuple(range(readings + 1)),
            True,
        )

    segments = [episode() for _ in range(episodes)] + _mixed(
        rng, [too_few, dip, at_threshold], near_misses
    )
    return _readings(
        rng,
        prefix="motor",
        sensors=sensors,
        per_sensor=per_sensor,
        baseline=(x - 30.0, x - 12.0),
        background=background,
        segments=segments,
    )


# ---------------------------------------------------------------- rising_trend
def _rising_run(values: list[float]) -> int:
    """How many readings the strictly increasing run ending at the last value holds."""
    n = 1
    while n < len(values) and values[-n] > values[-n - 1]:
        n += 1
    return n


def trend_readings(
    seed: int = 0,
    readings: int = 5,
    min_step: float = 0.0,
    sensors: int = 20,
    per_sensor: int = 120,
    episodes: int = 5,
    near_misses: int = 6,
) -> Dataset:
    """Line pressures (bar) for :func:`cep.patterns.anomaly.rising_trend`.

    Background: each sensor wanders around its baseline (2-6 bar) with noise,
    so short rises are everywhere.  Whenever the next background reading would
    make a strictly increasing run of ``readings`` readings (counting the
    readings really emitted before it, injected ones included), it is replaced
    by a reading slightly below the previous one: background runs hold at most
    ``readings - 1`` readings.

    Episodes: an anchor at or below the reading before it, a first trend
    reading at or below the anchor, then ``readings - 1`` to ``readings + 4``
    rises of more than ``min_step`` each, then a drop.  The episode is the
    anchor and the first ``readings`` trend readings (stages ``before`` and
    ``trend``).  Near misses (each kind at least once): one rising reading too
    few; a rise interrupted by a dip and one interrupted by a repeated value
    (a plateau), each part one reading short.
    """
    _check_run(readings, 2)
    rng = random.Random(seed)

    def background(rng: random.Random, base: float, values: list[float]) -> float:
        prev = values[-1] if values else base
        v = round(base + 0.7 * (prev - base) + rng.gauss(0, 0.08), 2)
        if values and v > prev and _rising_run(values) + 1 >= readings:
            v = round(prev - abs(rng.gauss(0, 0.05)), 2)
        return v

    def climb(r: random.Random, start: float, steps: int) -> list[float]:
        out = [start]
        for _ in range(steps):
            out.append(round(out[-1] + min_step + r.uniform(0.02, 0.25), 2))
        return out[1:]

    def run(r: random.Random, prev: float, parts: Sequence[int], plateau: bool) -> list[float]:
        """Anchor, rising parts of the given lengths (each after a dip or a repeat), a drop."""
        anchor = round(prev - abs(r.gauss(0, 0.05)), 2)  # not above prev: extends no earlier run
        first = round(
            anchor - r.uniform(0.0, 0.1), 2
        )  # not above the anchor: the trend starts here
        out = [anchor, first, *climb(r, first, parts[0] - 1)]
        for n in parts[1:]:
            restart = out[-1] if plateau else round(out[-1] - r.uniform(0.05, 0.3), 2)
            out += [restart, *climb(r, restart, n - 1)]
        return [*out, round(out[-1] - r.uniform(0.2, 0.6), 2)]

    def episode() -> Segment:
        n = rng.randint(readings, readings + 5)
        return Segment(n + 2, lambda r, p: run(r, p, [n], False), tuple(range(readings + 1)), False)

    def too_few() -> Segment:
        n = readings - 1
        return Segment(n + 2, lambda r, p: run(r, p, [n], False), tuple(range(n + 1)), True)

    def interrupted(plateau: bool) -> Segment:
        # two parts of readings - 1 readings each (the second starts at the dip or repeat);
        # a careless detector would take the anchor, the first part and the reading after the dip
        n = readings - 1
        takes = (*range(n + 1), *range(n + 2, min(n + 2 + readings - n, 2 * n + 1)))
        return Segment(2 * n + 2, lambda r, p: run(r, p, [n, n], plateau), takes, True)

    segments = [episode() for _ in range(episodes)] + _mixed(
        rng, [too_few, lambda: interrupted(False), lambda: interrupted(True)], near_misses
    )
    return _readings(
        rng,
        prefix="pump",
        sensors=sensors,
        per_sensor=per_sensor,
        baseline=(2.0, 6.0),
        background=background,
        segments=segments,
    )


# -------------------------------------------------------------------- flatline
def _equal_run(values: list[float]) -> int:
    """How many readings at the end of ``values`` are equal to the last one."""
    n = 1
    while n < len(values) and values[-n - 1] == values[-1]:
        n += 1
    return n


def flatline_readings(
    seed: int = 0,
    readings: int = 6,
    sensors: int = 20,
    per_sensor: int = 120,
    episodes: int = 5,
    near_misses: int = 6,
) -> Dataset:
    """Cold-room temperatures at 0.1 deg C resolution for :func:`cep.patterns.anomaly.flatline`.

    Background: a slow, noisy walk around each room's set point (2-8 deg C),
    rounded to 0.1, so a value often repeats a few times.  When the next
    background reading would be the ``readings``-th equal value in a row
    (counting the readings really emitted, injected ones included), it is moved
    0.1 up or down: background runs of equal values hold at most
    ``readings - 1`` readings.

    Episodes: an anchor different from the reading before it, then a stuck
    value (different from the anchor) ``readings`` to ``3 * readings`` times,
    then a different value.  The episode is the anchor and the first
    ``readings`` stuck readings (stages ``before`` and ``stuck``).  Near misses
    (each kind at least once): one repeat too few; two runs of ``readings - 1``
    split by a single flicker 0.1 away; a sensor toggling between two adjacent
    values for ``2 * readings`` readings.
    """
    _check_run(readings, 2)
    rng = random.Random(seed)

    def background(rng: random.Random, base: float, values: list[float]) -> float:
        prev = values[-1] if values else base
        v = round(base + 0.85 * (prev - base) + rng.gauss(0, 0.08), 1)
        if values and v == prev and _equal_run(values) + 1 >= readings:
            v = round(prev + rng.choice((-0.1, 0.1)), 1)
        return v

    def away(r: random.Random, v: float) -> float:
        """A value 0.1 to 0.3 from ``v`` (never equal to it)."""
        return round(v + r.choice((-1, 1)) * r.choice((0.1, 0.2, 0.3)), 1)

    def stuck(
        r: random.Random, prev: float, runs: Sequence[int], toggle: bool = False
    ) -> list[float]:
        anchor = away(r, prev)  # differs from prev: extends no earlier run
        v = away(r, anchor)
        w = round(v + 0.1, 1)
        if toggle:
            body = [v if j % 2 == 0 else w for j in range(runs[0])]
        else:
            body = [v] * runs[0]
            for n in runs[1:]:
                body += [w, *[v] * n]
        return [anchor, *body, away(r, body[-1])]

    def episode() -> Segment:
        n = rng.randint(readings, 3 * readings)
        return Segment(n + 2, lambda r, p: stuck(r, p, [n]), tuple(range(readings + 1)), False)

    def too_few() -> Segment:
        n = readings - 1
        return Segment(n + 2, lambda r, p: stuck(r, p, [n]), tuple(range(n + 1)), True)

    def flicker() -> Segment:
        n = readings - 1
        takes = (
            *range(n + 1),
            n + 2,
        )  # the anchor and the stuck value n + 1 times, flicker skipped
        return Segment(2 * n + 3, lambda r, p: stuck(r, p, [n, n]), takes, True)

    def toggling() -> Segment:
        n = 2 * readings
        return Segment(n + 2, lambda r, p: stuck(r, p, [n], True), tuple(range(readings + 1)), True)

    segments = [episode() for _ in range(episodes)] + _mixed(
        rng, [too_few, flicker, toggling], near_misses
    )
    return _readings(
        rng,
        prefix="cold",
        sensors=sensors,
        per_sensor=per_sensor,
        baseline=(2.0, 8.0),
        background=background,
        segments=segments,
    )


# ----------------------------------------------------------- missing_heartbeat
BEAT = 60_000  # a device's heartbeat period
BEAT_JITTER = 8_000  # each heartbeat comes up to this early or late


def heartbeats(
    seed: int = 0,
    timeout: timedelta | int = timedelta(minutes=3),
    devices: int = 30,
    hours: float = 2.0,
    episodes: int = 5,
    near_misses: int = 5,
) -> Dataset:
    """Messages of a fleet of gateways for :func:`cep.patterns.anomaly.missing_heartbeat`.

    Background: every device sends a ``heartbeat`` every minute (up to 8 s
    early or late, so the longest background gap is 76 s, far inside
    ``timeout``, which must be at least 2 minutes); two in three also send
    ``reading`` messages at random (about one per 5 minutes).  ``seq`` counts a
    device's messages, ``rssi`` is its signal strength (dBm).  The capture ends
    with a planned shutdown: every device's last message is ``offline``, less
    than 2 minutes after its last heartbeat, so the end of the data is not a
    silence.

    Episodes (one per silence, the heartbeat before it): a network outage (no
    message at all for longer than ``timeout``), a hung watchdog (heartbeats
    stop, readings go on), and a heartbeat exactly ``timeout`` late, which is
    too late (the window is half open).  Near misses (each kind at least once):
    the next heartbeat ``timeout`` minus 1 s or 1 ms after the previous one; a
    planned restart (``offline``, a long silence, ``online``); a legacy device
    that never sends heartbeats, only a reading every 10 minutes.
    """
    rng = random.Random(seed)
    t_out = duration_ms(timeout)
    if t_out < 2 * MINUTE:
        raise ValueError(
            f"timeout must be at least 2 minutes (heartbeats come every minute), got {timeout!r}"
        )
    end = START + int(hours * 3_600_000)
    names = [f"gw-{i:03d}" for i in range(1, devices + 1)]
    calendar = Calendar(rng, START, end, margin=t_out)
    ids = Ids()
    events: list[dict[str, Any]] = []
    found: list[Episode] = []
    near: list[Episode] = []
    # device -> [(slot start, gap to the next heartbeat, kind, near miss?)]
    gaps: dict[str, list[tuple[int, int, str, bool]]] = {n: [] for n in names}

    def book(kind: str, gap: int, is_near: bool) -> None:
        (name,), t = calendar.book(names, BEAT + BEAT_JITTER + gap + 2 * MINUTE)
        gaps[name].append((t, gap, kind, is_near))

    for j in range(episodes):
        kind = ("outage", "hung", "late")[j % 3] if j < 3 else rng.choice(("outage", "hung"))
        book(kind, t_out if kind == "late" else rng.randint(t_out + 5_000, 4 * t_out), False)
    makers = ["in_time", "planned", "legacy"]
    makers += [rng.choice(makers) for _ in range(near_misses - len(makers))]
    legacy = 0
    for kind in makers[:near_misses]:
        if kind == "in_time":
            book(kind, t_out - rng.choice((1, 1_000)), True)
        elif kind == "planned":
            # longer than the timeout (a rule without the offline/online pair would alert)
            book(kind, rng.randint(max(2 * t_out, 10 * MINUTE), max(25 * MINUTE, 3 * t_out)),
                 True)
        else:
            legacy += 1

    def emit(device: str, ts: int, kind: str) -> dict[str, Any]:
        e = {"id": ids(), "device_id": device, "ts": ts, "type": kind}
        events.append(e)
        return e

    def finish(device: str, messages: list[dict[str, Any]]) -> None:
        last = max(m["ts"] for m in messages)
        messages.append(emit(device, max(end, last) + rng.randint(5_000, 30_000), "offline"))
        signal = rng.uniform(-95.0, -55.0)
        for seq, m in enumerate(sorted(messages, key=lambda m: (m["ts"], m["id"]))):
            m["seq"] = seq
            m["rssi"] = int(signal + rng.gauss(0, 3))

    for name in names:
        messages: list[dict[str, Any]] = []
        quiet: list[tuple[int, int]] = []  # no readings in these intervals
        plan = sorted(gaps[name])
        t = START + rng.randrange(BEAT)
        while t <= end:
            beat = emit(name, t, "heartbeat")
            messages.append(beat)
            if plan and t >= plan[0][0]:
                _, gap, kind, is_near = plan.pop(0)
                (near if is_near else found).append(Episode(name, (beat["id"],)))
                if kind == "planned":
                    messages.append(emit(name, t + rng.randint(10_000, 20_000), "offline"))
                    messages.append(emit(name, t + gap - 2_000, "online"))
                if kind in ("outage", "planned"):
                    quiet.append((t, t + gap))
                t += gap
            else:
                t += BEAT + rng.randint(-BEAT_JITTER, BEAT_JITTER)
        if rng.random() < 2 / 3:
            r = START + rng.randrange(5 * MINUTE)
            while r <= end:
                if not any(a < r < b for a, b in quiet):
                    messages.append(emit(name, r, "reading"))
                r += max(20_000, int(rng.expovariate(1 / (5 * MINUTE))))
        finish(name, messages)
    for i in range(1, legacy + 1):
        name = f"legacy-{i:02d}"
        messages = []
        r = START + rng.randrange(10 * MINUTE)
        while r <= end:
            messages.append(emit(name, r, "reading"))
            r += 10 * MINUTE + rng.randint(-30_000, 30_000)
        near.append(Episode(name, (messages[0]["id"],)))
        finish(name, messages)
    return Dataset(by_time(events), "device_id", "ts", sorted(found), sorted(near))


# ------------------------------------------------------------------ fire_alarm
SENSOR = {
    "temperature": "temp",
    "humidity": "hum",
    "motion": "pir",
    "door": "door",
    "battery": "smoke",
    "smoke": "smoke",
}


def room_events(
    seed: int = 0,
    temperature: float = 57.0,
    within: timedelta | int = timedelta(minutes=5),
    rooms: int = 30,
    hours: float = 2.0,
    episodes: int = 5,
    near_misses: int = 6,
) -> Dataset:
    """Building sensor events per room for :func:`cep.patterns.anomaly.fire_alarm`.

    Background: in every room a temperature reading every 2 minutes (19-24
    deg C, never above 35), humidity every 5 minutes, motion and door events at
    random, and the smoke detector's ``battery`` status every 30 minutes.
    ``value`` is the reading (deg C, % humidity, battery %, 1 for motion and
    door, obscuration %/m for smoke); ``sensor`` names the device.  Background
    has no smoke and no temperature above the threshold, so it cannot raise an
    alarm; inside an injected slot the room's temperature readings come from
    the injection (one a minute).

    Episodes (a fire): the temperature climbs past ``temperature`` for 1 to 4
    readings, a smoke event follows, then the sprinklers bring the temperature
    down (one more hot reading may come first).  The episode is the earliest
    hot reading less than ``within`` before the smoke, and the smoke.  Near
    misses (each kind at least once, slots ``within`` apart on a room): heat
    without smoke (an oven); smoke without heat (burnt toast); smoke exactly
    ``within`` after a single hot reading (too late: the window is half open);
    smoke first, heat after; heat in one room and smoke next door.
    """
    rng = random.Random(seed)
    x = float(temperature)
    window = duration_ms(within)
    if window < MINUTE:
        raise ValueError(f"within must be at least a minute, got {within!r}")
    end = START + int(hours * 3_600_000)
    names = [f"L{floor}-{n:02d}" for floor in range(1, 4) for n in range(1, 11)][:rooms]
    if len(names) < rooms:
        names += [f"L4-{n:02d}" for n in range(1, rooms - len(names) + 1)]
    slot = max(15 * MINUTE, window + 4 * MINUTE)
    calendar = Calendar(rng, START, end, margin=window)
    base = {room: round(rng.uniform(19.5, 24.0), 1) for room in names}
    ids = Ids()
    events: list[dict[str, Any]] = []

    def emit(room: str, ts: int, kind: str, value: float) -> dict[str, Any]:
        e = {
            "id": ids(),
            "room": room,
            "sensor": f"{room}/{SENSOR[kind]}",
            "ts": ts,
            "type": kind,
            "value": round(value, 1),
        }
        events.append(e)
        return e

    def normal(room: str) -> float:
        return base[room] + rng.gauss(0, 0.3)

    def temps(room: str, t0: int, values: Sequence[float]) -> list[dict[str, Any]]:
        """Temperature readings a minute apart from ``t0`` (the rest of the slot: normal)."""
        values = [*values, *[normal(room) for _ in range(slot // MINUTE - len(values))]]
        return [
            emit(room, t0 + k * MINUTE + rng.randint(0, 5_000), "temperature", v)
            for k, v in enumerate(values)
        ]

    def smoke(room: str, ts: int) -> dict[str, Any]:
        return emit(room, ts, "smoke", rng.uniform(1.5, 12.0))

    def fire() -> Episode:
        (room,), t0 = calendar.book(names, slot)
        n_hot = rng.randint(1, 4)
        climb = [normal(room) for _ in range(rng.randint(1, 3))] + [x - 14.0, x - 5.0]
        hot = [x + 1.0 + 9.0 * j + rng.uniform(0, 3) for j in range(n_hot)]
        after = [x + rng.uniform(5, 20)] if rng.random() < 0.5 else []
        readings = temps(room, t0, [*climb, *hot, *after, x - 18.0, 32.0, 27.0])
        last_hot = readings[len(climb) + n_hot - 1]
        alarm = smoke(room, last_hot["ts"] + rng.randint(10_000, 45_000))
        heat = [r for r in readings if r["value"] > x and 0 < alarm["ts"] - r["ts"] < window]
        return Episode(room, (heat[0]["id"], alarm["id"]))

    def oven() -> Episode:
        (room,), t0 = calendar.book(names, slot)
        k = rng.randint(1, 4)
        readings = temps(
            room,
            t0,
            [
                *[normal(room) for _ in range(k)],
                *[x + rng.uniform(1, 8) for _ in range(rng.randint(2, 3))],
            ],
        )
        return Episode(room, (readings[k]["id"],))

    def toast() -> Episode:
        (room,), t0 = calendar.book(names, slot)
        temps(room, t0, [])
        return Episode(room, (smoke(room, t0 + rng.randint(2 * MINUTE, slot - 2 * MINUTE))["id"],))

    def late_smoke() -> Episode:
        (room,), t0 = calendar.book(names, slot)
        k = rng.randint(1, 2)
        readings = temps(room, t0, [*[normal(room) for _ in range(k)], x + rng.uniform(1, 4)])
        spike = readings[k]
        return Episode(room, (spike["id"], smoke(room, spike["ts"] + window)["id"]))

    def smoke_first() -> Episode:
        (room,), t0 = calendar.book(names, slot)
        alarm = smoke(room, t0 + MINUTE + 30_000)
        readings = temps(room, t0, [normal(room), normal(room), x + rng.uniform(1, 8)])
        return Episode(room, (alarm["id"], readings[2]["id"]))

    def next_door() -> Episode:
        (hot_room, smoke_room), t0 = calendar.book(names, slot, together=2)
        readings = temps(hot_room, t0, [normal(hot_room), x + rng.uniform(1, 8)])
        temps(smoke_room, t0, [])
        alarm = smoke(smoke_room, readings[1]["ts"] + MINUTE)
        return Episode(hot_room, (readings[1]["id"], alarm["id"]))

    found = [fire() for _ in range(episodes)]
    makers: list[Callable[[], Episode]] = [oven, toast, late_smoke, smoke_first, next_door]
    makers += [rng.choice(makers) for _ in range(near_misses - len(makers))]
    near = [make() for make in makers[:near_misses]]

    def every(room: str, period: int, jitter: int, kind: str, value: Callable[[], float]) -> None:
        t = START + rng.randrange(period)
        while t <= end:
            if kind != "temperature" or not calendar.busy(room, t, margin=False):
                emit(room, t + rng.randint(0, jitter), kind, value())
            t += period

    def at_random(room: str, mean: int, kind: str) -> None:
        t = START + int(rng.expovariate(1 / mean))
        while t <= end:
            emit(room, t, kind, 1.0)
            t += 1_000 + int(rng.expovariate(1 / mean))

    for room in names:
        every(room, 2 * MINUTE, 20_000, "temperature", lambda r=room: min(normal(r), 35.0))
        every(room, 5 * MINUTE, 40_000, "humidity", lambda: rng.uniform(30.0, 60.0))
        every(room, 30 * MINUTE, 120_000, "battery", lambda: rng.uniform(85.0, 100.0))
        at_random(room, 8 * MINUTE, "motion")
        at_random(room, 20 * MINUTE, "door")
    return Dataset(by_time(events), "room", "ts", sorted(found), sorted(near))
