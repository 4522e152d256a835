"""Counters the Spark workers add to and the driver reads: Spark accumulators."""

from __future__ import annotations

from typing import Any

NAMES = ("events", "matches", "timeouts", "late", "dead_letters")


class SparkMetrics:
    """Events, matches, timeouts, late events and dead letters counted across the cluster.

    Accumulators live in the driver: the counts cover the queries this driver ran
    (they start from zero again after a restart).

    >>> metrics = SparkMetrics(spark)                                    # doctest: +SKIP
    >>> out = match_stream(df, pattern, key="card", time="ts", metrics=metrics)
    >>> ...; metrics.as_dict()
    {'events': 1000000, 'matches': 1204, 'timeouts': 0, 'late': 3, 'dead_letters': 0}
    """

    def __init__(self, spark: Any) -> None:
        sc = spark.sparkContext
        self._acc = {name: sc.accumulator(0) for name in NAMES}

    def add(self, counts: dict[str, int]) -> None:
        for name, n in counts.items():
            if n and name in self._acc:
                self._acc[name].add(n)

    def as_dict(self) -> dict[str, int]:
        return {name: int(acc.value) for name, acc in self._acc.items()}

    def __getattr__(self, name: str) -> int:
        if name in NAMES:
            return int(self._acc[name].value)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"SparkMetrics({self.as_dict()})"
