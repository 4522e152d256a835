"""Anomaly and IoT patterns over sensor readings and device messages.

Every pattern is built from expression conditions only, so it runs on the numba
engine and survives ``Pattern.to_json()`` / ``Pattern.from_json()``.  Run them
keyed by the sensor, device or room (``cep.match(events, p, key=..., time="ts")``):
"consecutive" and "in a row" then mean consecutive readings *of that key*.

* :func:`sustained_breach` - N readings in a row above a threshold, once per episode.
* :func:`rising_trend` - N readings in a row, each greater than the one before.
* :func:`flatline` - the same value N times in a row (a stuck sensor).
* :func:`missing_heartbeat` - a heartbeat not followed by another within a timeout.
* :func:`fire_alarm` - a high temperature followed by smoke in the same room.

The three "in a row" patterns start with an *anchor*: the reading just before
the run (the last normal reading, the reading the trend starts from, the last
reading before the value froze).  A run must begin right after its anchor, so a
run is reported exactly once, as soon as it reaches N readings, however long it
goes on; a key whose very first reading is already inside a run has no anchor
for that run and is reported at its next run.  Data generators with ground
truth for every pattern are in :mod:`cep.patterns.synthetic.anomaly`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from cep import Pattern, SkipStrategy, col, count, prev
from cep.patterns._params import need_count


def sustained_breach(threshold: float = 80.0, readings: int = 5, field: str = "value") -> Pattern:
    """``readings`` consecutive readings above ``threshold``, reported once per episode.

    Catches a sensor that stays over its limit (an overheating motor, a cold
    room that is too warm) while ignoring a single noisy spike.  Fields:
    ``field`` (number).  A reading equal to the threshold is not a breach; a
    null reading ends a run.

    Stages: ``ok`` is the last reading at or below the threshold before the
    episode, ``breach`` the first ``readings`` readings above it.  The match is
    reported at the ``readings``-th breaching reading (not when the episode
    ends), and only once: later readings of the same episode have no ``ok``
    reading right before them.

    >>> from cep import match
    >>> rows = [{"sensor_id": "m1", "ts": i * 60_000, "value": v}
    ...         for i, v in enumerate([75.0, 81.0, 84.0, 86.5, 88.0, 70.0])]
    >>> [(m["ok"][0]["value"], [r["value"] for r in m["breach"]])
    ...  for m in match(rows, sustained_breach(readings=3), key="sensor_id", time="ts")]
    [(75.0, [81.0, 84.0, 86.5])]
    """
    need_count(readings, 1, "readings")
    return (
        Pattern.begin("ok")
        .where(col(field) <= threshold)
        .next("breach")
        .where(col(field) > threshold)
        .times(readings)
        .consecutive()
    )


def rising_trend(readings: int = 5, min_step: float = 0.0, field: str = "value") -> Pattern:
    """``readings`` consecutive readings, each more than ``min_step`` above the one before.

    Catches a value that keeps climbing (a bearing heating up, pressure building,
    a battery draining in reverse) however slowly, which a fixed threshold misses.
    Fields: ``field`` (number).  With ``min_step=0`` any strict increase counts;
    an equal reading breaks the trend.

    Stages: ``before`` is the reading the trend starts from (the first trend
    reading is not above it, so the trend begins right after it), ``trend`` the
    first ``readings`` readings of the rise.  The match is reported at the
    ``readings``-th reading, once per trend however long it continues.

    >>> from cep import match
    >>> rows = [{"sensor_id": "p1", "ts": i * 60_000, "value": v}
    ...         for i, v in enumerate([5.0, 4.0, 4.5, 5.2, 6.0, 6.1, 5.0])]
    >>> [[r["value"] for r in m["trend"]]
    ...  for m in match(rows, rising_trend(readings=4), key="sensor_id", time="ts")]
    [[4.0, 4.5, 5.2, 6.0]]
    """
    need_count(readings, 2, "readings")
    starts = (count("trend") == 0) & (col(field) <= prev(field))
    rises = (count("trend") > 0) & (col(field) > prev(field) + min_step)
    return (
        Pattern.begin("before")
        .where(~col(field).is_null())
        .next("trend")
        .where(starts | rises)
        .times(readings)
        .consecutive()
    )


def flatline(readings: int = 6, field: str = "value") -> Pattern:
    """The same value ``readings`` times in a row: a stuck sensor (or a frozen feed).

    A live analog sensor jitters; one that repeats exactly the same value has
    usually lost its probe or its firmware is replaying the last value.  Fields:
    ``field`` (number; compared with ``==``, so round the values the way the
    sensor reports them).

    Stages: ``before`` is the last reading before the value froze (it differs
    from the frozen value), ``stuck`` the first ``readings`` equal readings.
    Reported at the ``readings``-th equal reading, once per stuck period.

    >>> from cep import match
    >>> rows = [{"sensor_id": "t1", "ts": i * 60_000, "value": v}
    ...         for i, v in enumerate([21.4, 21.7, 21.7, 21.7, 21.7, 21.9])]
    >>> [(m["before"][0]["value"], len(m["stuck"]))
    ...  for m in match(rows, flatline(readings=4), key="sensor_id", time="ts")]
    [(21.4, 4)]
    """
    need_count(readings, 2, "readings")
    starts = (count("stuck") == 0) & (col(field) != prev(field))
    repeats = (count("stuck") > 0) & (col(field) == prev(field))
    return (
        Pattern.begin("before")
        .where(~col(field).is_null())
        .next("stuck")
        .where(starts | repeats)
        .times(readings)
        .consecutive()
    )


def missing_heartbeat(
    timeout: timedelta | int = timedelta(minutes=3),
    heartbeat: str = "heartbeat",
    goodbye: Sequence[str] = ("offline",),
    field: str = "type",
) -> Pattern:
    """A heartbeat not followed by another heartbeat within ``timeout``: the device went silent.

    Fields: ``field`` (string: the message type).  Messages of other types
    (telemetry, logs) do not count as a sign of life; a ``goodbye`` message
    (a device announcing it goes offline) also clears the alarm, so planned
    shutdowns are not reported.

    The match is ``{"beat": [the last heartbeat]}``, one per silence, and it is
    reported when the window passes, at ``beat.ts + timeout`` event time.  The
    window is half open: a heartbeat exactly ``timeout`` after the previous one
    is too late.  Under :func:`cep.match` time moves past the end of the input,
    so a device whose data simply ends (no goodbye) is reported as silent.

    >>> from cep import match
    >>> rows = [{"device_id": "d7", "ts": t * 1000, "type": k} for t, k in
    ...         [(0, "heartbeat"), (60, "heartbeat"), (400, "heartbeat"), (420, "offline")]]
    >>> [m["beat"][0]["ts"] for m in match(rows, missing_heartbeat(), key="device_id", time="ts")]
    [60000]
    """
    if isinstance(goodbye, str):
        goodbye = (goodbye,)
    return (
        Pattern.begin("beat")
        .where(col(field) == heartbeat)
        .not_followed_by("next_beat")
        .where(col(field).isin([heartbeat, *goodbye]))
        .within(timeout)
    )


def fire_alarm(
    temperature: float = 57.0,
    within: timedelta | int = timedelta(minutes=5),
    smoke: str = "smoke",
) -> Pattern:
    """A temperature reading above ``temperature`` followed by smoke within ``within``.

    Heat alone (an oven, a sunny window) or smoke alone (burnt toast, steam) is
    a nuisance alarm; both in the same room close together is a fire.  Run it
    keyed by room.  Fields: ``type`` (``"temperature"``, ``smoke`` or anything
    else, ignored) and ``value`` (degrees Celsius on temperature readings).

    The match is ``{"heat": [...], "smoke": [...]}``: the first smoke event and
    the earliest hot reading less than ``within`` before it (the window is half
    open).  Each fire is reported once (skip past last event): the other hot
    readings before that smoke do not raise a second alarm.

    >>> from cep import match
    >>> rows = [{"room": "B12", "ts": t * 1000, "type": k, "value": v} for t, k, v in
    ...         [(0, "temperature", 24.0), (60, "temperature", 61.0),
    ...          (90, "temperature", 75.0), (120, "smoke", 1.0)]]
    >>> [(m["heat"][0]["value"], m["smoke"][0]["ts"])
    ...  for m in match(rows, fire_alarm(), key="room", time="ts")]
    [(61.0, 120000)]
    """
    return (
        Pattern.begin("heat", skip=SkipStrategy.skip_past_last_event())
        .where((col("type") == "temperature") & (col("value") > temperature))
        .followed_by("smoke")
        .where(col("type") == smoke)
        .within(within)
    )

