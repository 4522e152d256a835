"""Specification of the anomaly / IoT patterns (``cep.patterns.anomaly``) and their generators.

Every pattern, on both engines:

* finds exactly the episodes its generator injected, for several seeds, and none of the
  near misses (look-alikes: one reading too few, a dip in the middle, a heartbeat just in
  time, smoke just after the window, ...);
* is made of expressions only, so ``engine="auto"`` picks numba and the pattern survives
  ``Pattern.to_json()`` / ``Pattern.from_json()`` with the same results.

The scenarios below spell out what a match holds.  The "in a row" patterns
(``sustained_breach``, ``rising_trend``, ``flatline``) take an *anchor* (the reading just
before the run) and the first N readings of the run, and report once per run, at its N-th
reading.  ``missing_heartbeat`` reports the last heartbeat before a silence when the
timeout passes.  ``fire_alarm`` reports the first smoke and the earliest hot reading less
than the window before it, once per fire.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from support import dataset
from support import run_dataset as run
from support import stage_ids as stages

import cep
from cep import MalformedPatternError, Matcher, Pattern
from cep.patterns.anomaly import (
    fire_alarm,
    flatline,
    missing_heartbeat,
    rising_trend,
    sustained_breach,
)
from cep.patterns.synthetic import Dataset, found
from cep.patterns.synthetic.anomaly import (
    flatline_readings,
    heartbeats,
    room_events,
    sensor_readings,
    trend_readings,
)

ENGINES = ("reference", "numba")
SEEDS = (0, 1, 7)
MIN = 60_000



def readings(*values: float | None, sensor: str = "s1", every: int = MIN) -> list[dict[str, Any]]:
    """One sensor's readings a minute apart; ids 0, 1, 2, ... in order."""
    return [
        {"id": i, "sensor_id": sensor, "ts": i * every, "value": v} for i, v in enumerate(values)
    ]


def match_readings(
    events: list[dict[str, Any]], pattern: Pattern, engine: str
) -> list[dict[str, list[int]]]:
    return stages(cep.match(events, pattern, key="sensor_id", time="ts", engine=engine))


# ================================================================== library contract


@pytest.mark.parametrize(
    "generate, closer",
    [
        pytest.param(sensor_readings, sustained_breach(readings=2), id="breach"),
        pytest.param(trend_readings, rising_trend(readings=4), id="trend"),
        pytest.param(flatline_readings, flatline(readings=5), id="flatline"),
    ],
)
def test_the_background_comes_close_to_a_run(
    generate: Callable[..., Dataset], closer: Pattern
) -> None:
    """The generators' guarantee is tight, not a clean background: one reading less and the
    pattern finds more than the episodes (background runs, near misses one reading short)."""
    ds = dataset(generate, SEEDS[0])
    assert len(run(ds, closer, "numba")) > len(ds.episodes) + 2


def test_parameters_are_checked() -> None:
    with pytest.raises(MalformedPatternError, match="readings"):
        rising_trend(readings=1)
    with pytest.raises(MalformedPatternError, match="readings"):
        flatline(readings=1)
    with pytest.raises(MalformedPatternError, match="readings"):
        sustained_breach(readings=0)
    with pytest.raises(ValueError, match="timeout"):
        heartbeats(timeout=timedelta(seconds=90))
    with pytest.raises(ValueError, match="readings"):
        sensor_readings(readings=1)


def test_generators_follow_the_pattern_parameters() -> None:
    """A generator given other parameters injects episodes for the pattern with those."""
    cases = [
        (
            sustained_breach(threshold=30.0, readings=3),
            sensor_readings(seed=3, threshold=30.0, readings=3),
        ),
        (
            rising_trend(readings=7, min_step=0.05),
            trend_readings(seed=3, readings=7, min_step=0.05),
        ),
        (flatline(readings=3), flatline_readings(seed=3, readings=3)),
        (
            missing_heartbeat(timeout=timedelta(minutes=10)),
            heartbeats(seed=3, timeout=timedelta(minutes=10)),
        ),
        (  # past 12.5 minutes, a planned restart's silence had no room (randrange failed)
            missing_heartbeat(timeout=timedelta(minutes=20)),
            heartbeats(seed=3, timeout=timedelta(minutes=20)),
        ),
        (
            fire_alarm(temperature=70.0, within=2 * MIN),
            room_events(seed=3, temperature=70.0, within=2 * MIN),
        ),
    ]
    for pattern, ds in cases:
        for engine in ENGINES:
            assert found(run(ds, pattern, engine)) == set(ds.episodes)


# ================================================================== sustained_breach
@pytest.mark.parametrize("engine", ENGINES)
class TestSustainedBreach:
    def test_reports_the_last_normal_reading_and_the_first_n_hot_ones_once(
        self, engine: str
    ) -> None:
        events = readings(70.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 70.0)
        assert match_readings(events, sustained_breach(), engine) == [
            {"ok": [0], "breach": [1, 2, 3, 4, 5]}
        ]

    def test_one_reading_too_few_is_not_a_breach(self, engine: str) -> None:
        events = readings(70.0, 81.0, 82.0, 83.0, 84.0, 70.0)
        assert match_readings(events, sustained_breach(), engine) == []

    def test_a_reading_at_the_threshold_restarts_the_count(self, engine: str) -> None:
        split = readings(70.0, 81.0, 82.0, 83.0, 84.0, 80.0, 81.0, 82.0, 83.0, 84.0, 70.0)
        assert match_readings(split, sustained_breach(), engine) == []
        long_enough = readings(70.0, 81.0, 82.0, 80.0, 81.0, 82.0, 83.0, 84.0, 85.0)
        assert match_readings(long_enough, sustained_breach(), engine) == [
            {"ok": [3], "breach": [4, 5, 6, 7, 8]}
        ]

    def test_each_episode_is_reported(self, engine: str) -> None:
        events = readings(70.0, *[90.0] * 5, 70.0, 75.0, *[95.0] * 6)
        assert match_readings(events, sustained_breach(), engine) == [
            {"ok": [0], "breach": [1, 2, 3, 4, 5]},
            {"ok": [7], "breach": [8, 9, 10, 11, 12]},
        ]

    def test_a_sensor_already_in_breach_at_its_first_reading_has_no_anchor(
        self, engine: str
    ) -> None:
        events = readings(90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 70.0)
        assert match_readings(events, sustained_breach(), engine) == []

    def test_consecutive_means_of_the_same_sensor(self, engine: str) -> None:
        a = readings(70.0, 81.0, 82.0, 83.0, 84.0, 85.0, sensor="a")
        b = [
            {**e, "id": e["id"] + 100, "ts": e["ts"] + 1} for e in readings(*[99.0] * 6, sensor="b")
        ]
        b[3]["value"] = 10.0  # sensor b dips; sensor a's run is not affected
        assert match_readings(a + b, sustained_breach(), engine) == [
            {"ok": [0], "breach": [1, 2, 3, 4, 5]}
        ]

    def test_the_alert_comes_at_the_nth_hot_reading(self, engine: str) -> None:
        matcher = Matcher(sustained_breach(readings=3), engine=engine)
        values = [70.0, 81.0, 82.0, 83.0, 84.0]
        out = [len(matcher.process({"value": v}, i * MIN)) for i, v in enumerate(values)]
        assert out == [0, 0, 0, 1, 0]


# ================================================================== rising_trend
@pytest.mark.parametrize("engine", ENGINES)
class TestRisingTrend:
    def test_reports_the_anchor_and_the_first_n_rising_readings_once(self, engine: str) -> None:
        events = readings(5.0, 4.0, 4.5, 5.2, 6.0, 6.1, 7.0, 8.0, 2.0)
        assert match_readings(events, rising_trend(readings=4), engine) == [
            {"before": [0], "trend": [1, 2, 3, 4]}
        ]

    def test_an_equal_reading_breaks_the_trend(self, engine: str) -> None:
        events = readings(5.0, 4.0, 4.5, 4.5, 5.0, 6.0, 3.0)
        assert match_readings(events, rising_trend(readings=4), engine) == []

    def test_a_dip_starts_a_new_trend(self, engine: str) -> None:
        events = readings(5.0, 1.0, 2.0, 3.0, 2.5, 3.5, 4.5, 5.5)
        assert match_readings(events, rising_trend(readings=4), engine) == [
            {"before": [3], "trend": [4, 5, 6, 7]}
        ]

    def test_back_to_back_trends_share_a_reading(self, engine: str) -> None:
        events = readings(5.0, 1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 2.0, 3.0)
        assert match_readings(events, rising_trend(readings=4), engine) == [
            {"before": [0], "trend": [1, 2, 3, 4]},
            {"before": [4], "trend": [5, 6, 7, 8]},
        ]

    def test_min_step_asks_for_a_steeper_rise(self, engine: str) -> None:
        events = readings(10.0, 9.0, 9.05, 9.1, 9.2)
        assert match_readings(events, rising_trend(readings=4, min_step=0.1), engine) == []
        assert match_readings(events, rising_trend(readings=4, min_step=0.01), engine) == [
            {"before": [0], "trend": [1, 2, 3, 4]}
        ]

    def test_a_trend_from_the_first_reading_has_no_anchor(self, engine: str) -> None:
        events = readings(1.0, 2.0, 3.0, 4.0, 5.0)
        assert match_readings(events, rising_trend(readings=4), engine) == []

    def test_a_null_reading_breaks_the_trend(self, engine: str) -> None:
        events = readings(5.0, 1.0, 2.0, None, 3.0, 4.0, 5.0)
        assert match_readings(events, rising_trend(readings=4), engine) == []


# ================================================================== flatline
@pytest.mark.parametrize("engine", ENGINES)
class TestFlatline:
    def test_reports_the_reading_before_and_the_first_n_equal_ones_once(self, engine: str) -> None:
        events = readings(21.4, *[21.7] * 20, 21.9)
        assert match_readings(events, flatline(readings=4), engine) == [
            {"before": [0], "stuck": [1, 2, 3, 4]}
        ]

    def test_one_flicker_restarts_the_count(self, engine: str) -> None:
        events = readings(20.0, 21.0, 21.0, 21.0, 21.1, 21.0, 21.0, 21.0, 20.0)
        assert match_readings(events, flatline(readings=4), engine) == []

    def test_a_sensor_toggling_between_two_values_is_alive(self, engine: str) -> None:
        events = readings(20.0, *[21.0, 21.1] * 6)
        assert match_readings(events, flatline(readings=4), engine) == []

    def test_stuck_at_one_value_then_at_another(self, engine: str) -> None:
        events = readings(20.0, *[21.0] * 4, *[22.0] * 4)
        assert match_readings(events, flatline(readings=4), engine) == [
            {"before": [0], "stuck": [1, 2, 3, 4]},
            {"before": [4], "stuck": [5, 6, 7, 8]},
        ]


# ================================================================== missing_heartbeat
def messages(*spec: tuple[int, str], device: str = "gw-1") -> list[dict[str, Any]]:
    """A device's messages from (seconds, type) pairs."""
    return [
        {"id": i, "device_id": device, "ts": s * 1000, "type": t} for i, (s, t) in enumerate(spec)
    ]


def silences(events: list[dict[str, Any]], engine: str, **kw: Any) -> list[dict[str, list[int]]]:
    return stages(
        cep.match(events, missing_heartbeat(**kw), key="device_id", time="ts", engine=engine)
    )


@pytest.mark.parametrize("engine", ENGINES)
class TestMissingHeartbeat:
    def test_reports_the_last_heartbeat_before_a_silence(self, engine: str) -> None:
        events = messages(
            (0, "heartbeat"),
            (60, "heartbeat"),
            (120, "heartbeat"),
            (600, "heartbeat"),
            (660, "offline"),
        )
        assert silences(events, engine) == [{"beat": [2]}]

    def test_the_window_is_half_open(self, engine: str) -> None:
        just_in_time = messages((0, "heartbeat"), (180, "heartbeat"), (200, "offline"))
        just_in_time[1]["ts"] -= 1  # 179.999 s after the first
        assert silences(just_in_time, engine) == []
        exactly_late = messages((0, "heartbeat"), (180, "heartbeat"), (200, "offline"))
        assert silences(exactly_late, engine) == [{"beat": [0]}]

    def test_other_messages_are_no_sign_of_life(self, engine: str) -> None:
        events = messages(
            (0, "heartbeat"),
            (100, "reading"),
            (200, "reading"),
            (300, "heartbeat"),
            (320, "offline"),
        )
        assert silences(events, engine) == [{"beat": [0]}]

    def test_a_goodbye_is_not_a_silence(self, engine: str) -> None:
        events = messages(
            (0, "heartbeat"),
            (10, "offline"),
            (1800, "online"),
            (1802, "heartbeat"),
            (1830, "offline"),
        )
        assert silences(events, engine) == []
        # without goodbyes both the restart and the end of the data are silences
        assert silences(events, engine, goodbye=()) == [{"beat": [0]}, {"beat": [3]}]

    def test_data_that_simply_ends_is_a_silence(self, engine: str) -> None:
        events = messages((0, "heartbeat"), (60, "heartbeat"))
        assert silences(events, engine) == [{"beat": [1]}]

    def test_reported_when_the_timeout_passes(self, engine: str) -> None:
        matcher = Matcher(missing_heartbeat(timeout=3 * MIN), engine=engine)
        assert matcher.process({"type": "heartbeat"}, 0) == []
        assert matcher.advance_time(3 * MIN - 1) == ([], [])
        done, _ = matcher.advance_time(3 * MIN)
        assert [dict(m) for m in done] == [{"beat": [{"type": "heartbeat"}]}]


# ================================================================== fire_alarm
def room(*spec: tuple[int, str, float], name: str = "B12") -> list[dict[str, Any]]:
    """A room's events from (seconds, type, value) triples."""
    return [
        {"id": i, "room": name, "ts": s * 1000, "type": t, "value": v}
        for i, (s, t, v) in enumerate(spec)
    ]


def alarms(events: list[dict[str, Any]], engine: str) -> list[dict[str, list[int]]]:
    return stages(cep.match(events, fire_alarm(), key="room", time="ts", engine=engine))


@pytest.mark.parametrize("engine", ENGINES)
class TestFireAlarm:
    def test_reports_the_first_hot_reading_and_the_smoke_once(self, engine: str) -> None:
        events = room(
            (0, "temperature", 24.0),
            (60, "temperature", 61.0),
            (120, "temperature", 75.0),
            (150, "smoke", 4.0),
            (170, "smoke", 6.0),
            (180, "temperature", 40.0),
        )
        assert alarms(events, engine) == [{"heat": [1], "smoke": [3]}]

    def test_hot_readings_older_than_the_window_are_left_out(self, engine: str) -> None:
        events = room((0, "temperature", 60.0), (200, "temperature", 65.0), (320, "smoke", 3.0))
        assert alarms(events, engine) == [{"heat": [1], "smoke": [2]}]

    def test_smoke_exactly_the_window_after_the_heat_is_too_late(self, engine: str) -> None:
        assert alarms(room((0, "temperature", 60.0), (300, "smoke", 3.0)), engine) == []
        late_by_less = room((0, "temperature", 60.0), (299, "smoke", 3.0))
        assert alarms(late_by_less, engine) == [{"heat": [0], "smoke": [1]}]

    def test_heat_alone_or_smoke_alone_or_smoke_first_is_no_fire(self, engine: str) -> None:
        assert alarms(room((0, "temperature", 70.0), (60, "temperature", 72.0)), engine) == []
        assert alarms(room((0, "temperature", 22.0), (60, "smoke", 8.0)), engine) == []
        assert alarms(room((0, "smoke", 8.0), (60, "temperature", 72.0)), engine) == []

    def test_heat_and_smoke_in_different_rooms_is_no_fire(self, engine: str) -> None:
        events = room((0, "temperature", 70.0), name="A") + [
            {**e, "id": 10 + e["id"]} for e in room((60, "smoke", 8.0), name="B")
        ]
        assert alarms(events, engine) == []

    def test_after_an_alarm_only_heat_after_the_smoke_raises_another(self, engine: str) -> None:
        events = room(
            (0, "temperature", 60.0),
            (30, "temperature", 70.0),
            (60, "smoke", 3.0),
            (90, "temperature", 80.0),
            (120, "smoke", 9.0),
        )
        assert alarms(events, engine) == [
            {"heat": [0], "smoke": [2]},
            {"heat": [3], "smoke": [4]},
        ]
