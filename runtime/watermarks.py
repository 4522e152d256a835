"""Timestamps and watermarks: how far event time has progressed.

>>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
>>> strategy.with_idleness(timedelta(minutes=1)).delay
5000
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from cep.durations import MAX_TIMESTAMP, to_millis
from cep.errors import InputError

MIN_WATERMARK = -(2**63)
END_OF_TIME = MAX_TIMESTAMP


@dataclass(frozen=True)
class WatermarkStrategy:
    """FlinkCEP users know this from Flink: bounded out-of-orderness, monotonous, idleness.

    The watermark of a partition is ``max timestamp seen - delay - 1``: every event
    at or below it is late (Flink's BoundedOutOfOrdernessWatermarks).
    """

    delay: int = 0
    idleness: int | None = None

    @staticmethod
    def for_bounded_out_of_orderness(delay: timedelta | int) -> WatermarkStrategy:
        """Events may arrive up to ``delay`` (a timedelta or milliseconds) after newer ones
        and still be matched in time order; older ones are late (Flink's
        ``forBoundedOutOfOrderness``).

        >>> WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
        WatermarkStrategy(delay=5000, idleness=None)
        """
        ms = to_millis(delay, "for_bounded_out_of_orderness")
        if ms < 0:
            raise InputError(f"the allowed out-of-orderness must be >= 0, got {delay!r}")
        return WatermarkStrategy(delay=ms)

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """Timestamps never go back: an event older than one already seen is late (Flink's
        ``forMonotonousTimestamps``; a delay of 0).

        >>> WatermarkStrategy.for_monotonous_timestamps()
        WatermarkStrategy(delay=0, idleness=None)
        """
        return WatermarkStrategy(delay=0)

    def with_idleness(self, timeout: timedelta | int) -> WatermarkStrategy:
        """A partition with no event for ``timeout`` (processing time) stops holding back."""
        return replace(self, idleness=to_millis(timeout, "with_idleness"))

    forBoundedOutOfOrderness = for_bounded_out_of_orderness
    forMonotonousTimestamps = for_monotonous_timestamps
    withIdleness = with_idleness


class PartitionWatermarks:
    """Per-partition watermarks; the operator's is the minimum over active partitions.

    >>> wm = PartitionWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(1000))
    >>> wm.observe("p0", 5000, now=0.0); wm.observe("p1", 3000, now=0.0)
    >>> wm.compute(now=0.0)
    1999
    >>> wm.finish("p1"); wm.compute(now=0.0)
    3999
    """

    def __init__(self, strategy: WatermarkStrategy) -> None:
        self.strategy = strategy
        self.max_ts: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.finished: set[str] = set()
        self.current = MIN_WATERMARK

    def register(self, partition: str) -> None:
        """Track ``partition`` from now on: until it sends an event it holds the watermark
        back (unless idleness lets it go)."""
        self.max_ts.setdefault(partition, MIN_WATERMARK + self.strategy.delay + 1)

    def observe(self, partition: str, ts: int, now: float) -> None:
        """``partition`` delivered an event at ``ts`` at processing time ``now`` (seconds)."""
        self.register(partition)
        if ts > self.max_ts[partition]:
            self.max_ts[partition] = ts
        self.last_seen[partition] = now

    def finish(self, partition: str) -> None:
        """``partition`` has ended: it no longer holds the watermark back."""
        self.finished.add(partition)

    def partition_watermark(self, partition: str) -> int:
        """One partition's watermark: its newest timestamp - delay - 1 (the end of time once
        finished).

        >>> wm = PartitionWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(1000))
        >>> wm.observe("p0", 5000, now=0.0)
        >>> wm.partition_watermark("p0")
        3999
        """
        if partition in self.finished:
            return END_OF_TIME
        return self.max_ts[partition] - self.strategy.delay - 1

    def compute(self, now: float) -> int:
        """The operator watermark (never goes back)."""
        idle_ms = self.strategy.idleness
        active = []
        for p in self.max_ts:
            self.last_seen.setdefault(p, now)  # a partition that never sends idles from here
            if p in self.finished:
                continue
            if idle_ms is not None and now - self.last_seen.get(p, now) >= idle_ms / 1000:
                continue  # idle: does not hold the watermark back
            active.append(self.partition_watermark(p))
        if not active:
            # every partition idle or finished: finished ones allow the end of time,
            # idle ones allow what they have seen
            if self.max_ts and all(p in self.finished for p in self.max_ts):
                candidate = END_OF_TIME
            else:
                seen = [self.partition_watermark(p) for p in self.max_ts if p not in self.finished]
                candidate = max(seen) if seen else self.current
        else:
            candidate = min(active)
        if candidate > self.current:
            self.current = candidate
        return self.current

    def state(self) -> dict[str, object]:
        """What a checkpoint keeps (plain JSON); :meth:`restore` reads it back.

        >>> wm = PartitionWatermarks(WatermarkStrategy.for_monotonous_timestamps())
        >>> wm.observe("p0", 5000, now=0.0); wm.finish("p0"); _ = wm.compute(now=0.0)
        >>> again = PartitionWatermarks(wm.strategy)
        >>> again.restore(wm.state())
        >>> again.state() == wm.state()
        True
        """
        return {"max_ts": dict(self.max_ts), "finished": sorted(self.finished), "current": self.current}

    def restore(self, state: dict[str, object]) -> None:
        """Continue from a :meth:`state` taken before (a job resuming from a checkpoint)."""
        self.max_ts = {str(k): int(v) for k, v in dict(state["max_ts"]).items()}  # type: ignore[arg-type]
        self.finished = set(state["finished"])  # type: ignore[arg-type]
        self.current = int(state["current"])  # type: ignore[arg-type]
