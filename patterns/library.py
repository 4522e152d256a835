"""The pattern library as a catalogue: every pattern with the generator of its ground truth.

>>> from cep.patterns.library import LIBRARY
>>> entry = LIBRARY["card_testing"]
>>> entry.domain, entry.pattern().stage_names()
('fraud', ['small', 'big'])
>>> data = entry.generate(seed=0)
>>> data.key, len(data.episodes) >= 3
('card_id', True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cep import Pattern
from cep.patterns import anomaly, fraud, ops
from cep.patterns.synthetic import Dataset
from cep.patterns.synthetic import anomaly as sensors
from cep.patterns.synthetic import fraud as cards
from cep.patterns.synthetic import ops as logs


@dataclass(frozen=True)
class Entry:
    """A library pattern (called with its defaults) and the generator of data for it."""

    name: str
    domain: str  # "fraud", "anomaly" or "ops"
    pattern: Callable[..., Pattern]
    generate: Callable[..., Dataset]


LIBRARY: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry("card_testing", "fraud", fraud.card_testing, cards.card_transactions),
        Entry("velocity_burst", "fraud", fraud.velocity_burst, cards.velocity_transactions),
        Entry("impossible_travel", "fraud", fraud.impossible_travel, cards.travel_transactions),
        Entry("account_takeover", "fraud", fraud.account_takeover, cards.account_events),
        Entry("refund_abuse", "fraud", fraud.refund_abuse, cards.refund_events),
        Entry("sustained_breach", "anomaly", anomaly.sustained_breach, sensors.sensor_readings),
        Entry("rising_trend", "anomaly", anomaly.rising_trend, sensors.trend_readings),
        Entry("flatline", "anomaly", anomaly.flatline, sensors.flatline_readings),
        Entry("missing_heartbeat", "anomaly", anomaly.missing_heartbeat, sensors.heartbeats),
        Entry("fire_alarm", "anomaly", anomaly.fire_alarm, sensors.room_events),
        Entry("error_burst_after_deploy", "ops", ops.error_burst_after_deploy, logs.deploy_logs),
        Entry("failed_logins_then_success", "ops", ops.failed_logins_then_success,
              logs.login_events),
    )
}
