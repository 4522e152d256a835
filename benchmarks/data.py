"""Deterministic benchmark data, written to Parquet under ``benchmarks/.data/``.

Every generator is a pure function of its parameters (numpy ``Generator`` with a
fixed seed), so two machines produce byte-identical inputs.  A file is named
after a hash of its parameters, :data:`VERSION` and the generator function's
source; it is generated only when missing, so changing a parameter (or the
generator) writes a new file and never reuses a stale one.

* :func:`card_transactions` — ``card_id`` (int64), ``amount`` (float64), ``ts``
  (int64 epoch ms), ``merchant`` (string).  Background charges are lognormal
  amounts at random times on random cards; on top of them card-testing episodes
  (3–6 charges under 5.00 in a row on one card, then one over 500.00, all
  within 7 minutes) and near misses (two small charges only; the big charge
  11–20 minutes after the last small one; an ordinary charge in between; a
  "big" charge under 500).  Rows are in arrival order: each event arrives
  0–5 s after its timestamp, so ``ts`` is ordered up to a bounded delay.
* :func:`iot_readings` — ``sensor_id`` (int64), ``ts`` (int64 epoch ms),
  ``temperature`` (float64), ``smoke`` (bool).  Every sensor reports every
  ~10 s around a per-sensor baseline, with single-reading heat spikes, fire
  episodes (a ramp of hot readings, then smoke) and glitched fires (a cool
  reading between the ramp and the smoke).  Same arrival-order delay.

``python -m benchmarks.data`` generates the default files and prints their paths.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

VERSION = 1  # bump when a generator changes what it writes
CACHE = Path(__file__).resolve().parent / ".data"
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z in epoch ms

SMALL = 5.00
BIG = 500.00
MERCHANTS = (
    "Amazon.com", "Whole Foods Market", "Shell", "Uber", "Netflix", "Target", "Chipotle",
    "CVS Pharmacy", "Walgreens", "Starbucks", "Blue Bottle Coffee", "Home Depot", "Costco",
    "Trader Joe's", "Delta Air Lines", "United Airlines", "Airbnb", "Lyft", "Spotify",
    "Apple Store", "Best Buy", "Marriott Hotels", "Hilton", "IKEA", "Walmart", "Kroger",
    "Safeway", "Exxon", "Chevron", "McDonald's", "Subway", "DoorDash", "Instacart",
    "Etsy", "eBay", "Steam", "PlayStation Store", "Zara", "H&M", "Sephora",
)
TEST_MERCHANTS = ("DonateNow.org", "ParkMeter App", "eGift Shop 24", "QuickTopUp")
FRAUD_MERCHANTS = ("LuxWatch Online", "ElectroDirect", "GiftCard Hub")


def card_transactions(
    n_events: int = 1_000_000,
    n_cards: int = 10_000,
    *,
    seed: int = 20240304,
    episode_rate: float = 1 / 1000,
    near_miss_rate: float = 1 / 2000,
    days: int = 30,
    max_delay_ms: int = 5_000,
) -> Path:
    """Path of the card-transactions Parquet file for these parameters (generated if missing)."""
    params = dict(
        n_events=n_events, n_cards=n_cards, seed=seed, episode_rate=episode_rate,
        near_miss_rate=near_miss_rate, days=days, max_delay_ms=max_delay_ms,
    )
    return _cached("cards", params, _make_cards)


def iot_readings(
    n_events: int = 200_000,
    n_sensors: int = 200,
    *,
    seed: int = 20240305,
    fire_rate: float = 1 / 2000,
    spike_rate: float = 1 / 500,
    interval_ms: int = 10_000,
    max_delay_ms: int = 5_000,
) -> Path:
    """Path of the IoT-readings Parquet file for these parameters (generated if missing)."""
    params = dict(
        n_events=n_events, n_sensors=n_sensors, seed=seed, fire_rate=fire_rate,
        spike_rate=spike_rate, interval_ms=interval_ms, max_delay_ms=max_delay_ms,
    )
    return _cached("iot", params, _make_iot)


def metadata(path: Path) -> dict[str, Any]:
    """What the generator wrote next to ``path``: parameters and injected-episode counts."""
    return json.loads(path.with_suffix(".json").read_text())


# ---------------------------------------------------------------- caching
def _cached(name: str, params: dict[str, Any], make: Any, uses: tuple[Any, ...] = ()) -> Path:
    """The file ``make(**params)`` writes, made once: its name is a digest of the
    parameters and of the source of ``make`` and of the modules in ``uses`` (the code it
    generates with), so a changed generator never reuses an old file."""
    import inspect

    tag = json.dumps({"version": VERSION, **params}, sort_keys=True)
    source = "".join(inspect.getsource(code) for code in (make, *uses))
    digest = hashlib.sha256((tag + source).encode()).hexdigest()[:12]
    path = CACHE / f"{name}-{params['n_events']}-{digest}.parquet"
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists():
        return path
    import pyarrow.parquet as pq

    CACHE.mkdir(parents=True, exist_ok=True)
    table, info = make(**params)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    tmp_meta = meta.with_suffix(f".tmp{os.getpid()}")
    tmp_meta.write_text(json.dumps({"version": VERSION, "params": params, **info}, indent=2))
    os.replace(tmp_meta, meta)
    return path


def _strings(choices: tuple[str, ...], idx: np.ndarray) -> Any:
    import pyarrow as pa

    dictionary = pa.array(list(choices), pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), dictionary).cast(
        pa.string()
    )


def _arrival_order(rng: np.random.Generator, ts: np.ndarray, max_delay_ms: int) -> np.ndarray:
    """Row order of arrival: each event arrives 0..max_delay_ms after its timestamp."""
    arrival = ts + rng.integers(0, max_delay_ms + 1, len(ts))
    return np.argsort(arrival, kind="stable")


# ---------------------------------------------------------- card transactions
def _make_cards(
    n_events: int, n_cards: int, seed: int, episode_rate: float, near_miss_rate: float,
    days: int, max_delay_ms: int,
) -> tuple[Any, dict[str, Any]]:
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    span = days * 86_400_000
    cards: list[np.ndarray] = []
    times: list[np.ndarray] = []
    amounts: list[np.ndarray] = []
    merchants: list[np.ndarray] = []  # index into MERCHANTS + TEST_MERCHANTS + FRAUD_MERCHANTS
    all_merchants = MERCHANTS + TEST_MERCHANTS + FRAUD_MERCHANTS
    test0, fraud0 = len(MERCHANTS), len(MERCHANTS) + len(TEST_MERCHANTS)

    def add(card: int, ts: np.ndarray, amount: np.ndarray, merchant: np.ndarray) -> None:
        cards.append(np.full(len(ts), card, np.int64))
        times.append(ts.astype(np.int64))
        amounts.append(amount.astype(np.float64))
        merchants.append(merchant.astype(np.int64))

    def smalls(k: int) -> tuple[np.ndarray, np.ndarray]:
        amount = np.round(rng.uniform(0.50, 4.99, k), 2)
        return amount, test0 + rng.integers(0, len(TEST_MERCHANTS), k)

    # card-testing episodes: k smalls 5-60 s apart, the big one 5-120 s after the last
    n_episodes = int(round(n_events * episode_rate))
    for _ in range(n_episodes):
        card = int(rng.integers(0, n_cards))
        k = int(rng.integers(3, 7))
        start = int(rng.integers(0, span - 3_600_000))
        gaps = rng.integers(5_000, 60_001, k - 1)
        ts_small = T0 + start + np.concatenate([[0], np.cumsum(gaps)])
        ts_big = ts_small[-1] + int(rng.integers(5_000, 120_001))
        amount, merchant = smalls(k)
        big = np.round(rng.uniform(500.01, 2_500.00, 1), 2)
        add(
            card,
            np.concatenate([ts_small, [ts_big]]),
            np.concatenate([amount, big]),
            np.concatenate([merchant, [fraud0 + rng.integers(0, len(FRAUD_MERCHANTS))]]),
        )

    # near misses, four kinds in turn
    n_near = int(round(n_events * near_miss_rate))
    near_kinds = [0, 0, 0, 0]
    for i in range(n_near):
        kind = i % 4
        near_kinds[kind] += 1
        card = int(rng.integers(0, n_cards))
        k = 2 if kind == 0 else int(rng.integers(3, 7))
        start = int(rng.integers(0, span - 3_600_000))
        ts_small = T0 + start + np.concatenate([[0], np.cumsum(rng.integers(5_000, 60_001, k - 1))])
        amount, merchant = smalls(k)
        after = int(rng.integers(660_000, 1_200_001)) if kind == 1 else int(rng.integers(5_000, 120_001))
        ts_big = ts_small[-1] + after
        big_amount = rng.uniform(300.00, 499.99) if kind == 3 else rng.uniform(500.01, 2_500.00)
        ts = [*ts_small]
        amt = [*amount]
        mer = [*merchant]
        if kind == 2:  # an ordinary charge between the smalls and the big one
            ts.append(ts_small[-1] + (ts_big - ts_small[-1]) // 2)
            amt.append(round(float(rng.uniform(20.0, 100.0)), 2))
            mer.append(int(rng.integers(0, len(MERCHANTS))))
        ts.append(ts_big)
        amt.append(round(float(big_amount), 2))
        mer.append(fraud0 + int(rng.integers(0, len(FRAUD_MERCHANTS))))
        add(card, np.array(ts), np.array(amt), np.array(mer))

    # background: lognormal amounts (median ~27, ~6% under 5.00, ~0.4% over 500.00)
    injected = sum(len(t) for t in times)
    n_bg = n_events - injected
    if n_bg < 0:
        raise ValueError(f"{n_events} events cannot hold {injected} injected events")
    cards.append(rng.integers(0, n_cards, n_bg).astype(np.int64))
    times.append(T0 + rng.integers(0, span, n_bg).astype(np.int64))
    amounts.append(np.maximum(np.round(rng.lognormal(3.3, 1.1, n_bg), 2), 0.5))
    merchants.append(rng.integers(0, len(MERCHANTS), n_bg).astype(np.int64))

    card = np.concatenate(cards)
    ts = np.concatenate(times)
    amount = np.concatenate(amounts)
    merchant = np.concatenate(merchants)
    order = _arrival_order(rng, ts, max_delay_ms)
    table = pa.table(
        {
            "card_id": pa.array(card[order], pa.int64()),
            "amount": pa.array(amount[order], pa.float64()),
            "ts": pa.array(ts[order], pa.int64()),
            "merchant": _strings(all_merchants, merchant[order]),
        }
    )
    info = {
        "episodes": n_episodes,
        "near_misses": {
            "two_smalls": near_kinds[0], "big_too_late": near_kinds[1],
            "charge_between": near_kinds[2], "big_under_500": near_kinds[3],
        },
        "injected_rows": injected,
    }
    return table, info


# ------------------------------------------------------------------ IoT
def _make_iot(
    n_events: int, n_sensors: int, seed: int, fire_rate: float, spike_rate: float,
    interval_ms: int, max_delay_ms: int,
) -> tuple[Any, dict[str, Any]]:
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    per = -(-n_events // n_sensors)
    r = np.arange(per)
    offset = rng.integers(0, interval_ms, n_sensors)[:, None]
    ts = T0 + offset + r[None, :] * interval_ms + rng.integers(-1_000, 1_001, (n_sensors, per))
    base = rng.uniform(32.0, 45.0, n_sensors)[:, None]
    phase = rng.uniform(0, 2 * np.pi, n_sensors)[:, None]
    temp = base + 3.0 * np.sin(phase + r[None, :] / 360.0) + rng.normal(0.0, 1.5, (n_sensors, per))
    smoke = np.zeros((n_sensors, per), bool)

    spikes = rng.random((n_sensors, per)) < spike_rate  # a heater next to the sensor
    temp[spikes] = rng.uniform(61.0, 75.0, int(spikes.sum()))

    n_fires = int(round(n_events * fire_rate))
    glitched = 0
    for i in range(n_fires):
        s = int(rng.integers(0, n_sensors))
        ramp = int(rng.integers(3, 9))
        burn = int(rng.integers(1, 4))
        glitch = i % 3 == 2  # a cool reading (sensor glitch) between the ramp and the smoke
        length = ramp + glitch + burn + 3
        if per <= length:
            continue
        at = int(rng.integers(0, per - length))
        temp[s, at : at + ramp] = np.linspace(62.0, 95.0, ramp) + rng.normal(0.0, 1.0, ramp)
        j = at + ramp
        if glitch:
            temp[s, j] = rng.uniform(20.0, 28.0)
            glitched += 1
            j += 1
        temp[s, j : j + burn] = rng.uniform(90.0, 120.0, burn)
        smoke[s, j : j + burn] = True
        j += burn
        temp[s, j : j + 3] = np.linspace(55.0, 40.0, 3)  # the fire is put out

    sensor = np.repeat(np.arange(n_sensors, dtype=np.int64), per)
    ts, temp, smoke = ts.ravel(), np.round(temp.ravel(), 2), smoke.ravel()
    keep = rng.permutation(len(ts))[:n_events]
    keep.sort()
    sensor, ts, temp, smoke = sensor[keep], ts[keep], temp[keep], smoke[keep]
    order = _arrival_order(rng, ts, max_delay_ms)
    table = pa.table(
        {
            "sensor_id": pa.array(sensor[order], pa.int64()),
            "ts": pa.array(ts[order].astype(np.int64), pa.int64()),
            "temperature": pa.array(temp[order], pa.float64()),
            "smoke": pa.array(smoke[order], pa.bool_()),
        }
    )
    info = {"fires": n_fires, "glitched_fires": glitched, "spikes": int(spikes.sum())}
    return table, info


if __name__ == "__main__":
    for p in (card_transactions(), iot_readings()):
        print(p, metadata(p))
