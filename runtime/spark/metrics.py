"""Counters the Spark workers add to and the driver reads: Spark accumulators."""

from __future__ import annotations

from typing import Any

#: counts of what happened
COUNTS = ("events", "matches", "timeouts", "late", "dead_letters", "dropped_partial_matches")
#: state now: each group call adds the change it made, so the sums are the totals
STATE = ("keys_with_state", "partial_matches", "state_bytes")
NAMES = COUNTS + STATE


class SparkMetrics:
    """Events, matches, timeouts, late events, dead letters and partial matches dropped by
    the cap, counted across the cluster; and the state now: keys holding partial
    matches, those partial matches, and the bytes of state in Spark's state store (partial
    matches and events waiting for the watermark) (every group call adds the change it made, so the sums are the totals; zero
    after a ``match_batch``, which ends every key).

    Accumulators live in the driver: the counts cover the queries this driver ran
    (they start from zero again after a restart).  Over a rule set, each event goes to
    the groups of every key field, and is counted once; ``dead_letters`` counts the events
    no rule could take (no time, say), as the embedded runtime's summary does, not an
    event one rule refused (its row names the rule).

    >>> from cep import Pattern, col
    >>> from cep.runtime.spark import match_batch
    >>> rows = [("c1", 1000, 1.0), ("c1", 2000, 2.0), ("c1", 3000, 900.0), ("c2", 1500, 3.0)]
    >>> df = spark.createDataFrame(rows, "card string, ts long, amount double")
    >>> p = Pattern.begin("small").where(col("amount") < 5).times(2).next("big")
    >>> metrics = SparkMetrics(spark)
    >>> len(match_batch(df, p, key="card", time="ts", metrics=metrics).collect())
    1
    >>> metrics.as_dict()["events"], metrics.matches, metrics.state_bytes
    (4, 1, 0)

    The tasks that compute the output add the counts, so every action over the same
    output (``collect``, ``count``, a write) adds them again: run one.
    """

    def __init__(self, spark: Any) -> None:
        sc = spark.sparkContext
        self._acc = {name: sc.accumulator(0) for name in NAMES}

    def add(self, counts: dict[str, int]) -> None:
        """Add ``counts`` (what one group or partition call counted); unknown names are
        ignored.  Workers call it; on the driver it adds at once.

        >>> metrics = SparkMetrics(spark)
        >>> metrics.add({"events": 3, "matches": 1}); metrics.events
        3
        """
        for name, n in counts.items():
            if n and name in self._acc:
                self._acc[name].add(n)

    def as_dict(self) -> dict[str, int]:
        """Every count, as the driver sees it now.

        >>> SparkMetrics(spark).as_dict()
        {'events': 0, 'matches': 0, 'timeouts': 0, 'late': 0, 'dead_letters': 0, 'dropped_partial_matches': 0, 'keys_with_state': 0, 'partial_matches': 0, 'state_bytes': 0}
        """
        return {name: int(acc.value) for name, acc in self._acc.items()}

    def __getattr__(self, name: str) -> int:
        if name in NAMES:
            return int(self._acc[name].value)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"SparkMetrics({self.as_dict()})"
