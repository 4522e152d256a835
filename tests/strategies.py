"""Hypothesis strategies: random FlinkCEP patterns and keyed event streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import cep
from cep import (
    MalformedPatternError,
    Pattern,
    SkipStrategy,
    WithinType,
    coalesce,
    col,
    count,
    event_time,
    first,
    last,
    prev,
)


@dataclass(frozen=True)
class Ev:
    """A tiny event: identity matters (two Ev with equal fields are distinct events)."""

    id: int
    v: int
    key: str = "k"


def _predicate(kind: str, k: int):
    if kind == "eq":
        return lambda e, k=k: e.v == k
    if kind == "ge":
        return lambda e, k=k: e.v >= k
    if kind == "ne":
        return lambda e, k=k: e.v != k
    return lambda e: True


predicates = st.tuples(st.sampled_from(["eq", "ge", "ne", "any"]), st.integers(0, 3)).map(
    lambda t: _predicate(*t)
)


def _expression(kind: str, k: int):
    v = col("v")
    table = {
        "eq": v == k,
        "ge": v >= k,
        "ne": v != k,
        "any": v >= 0,
        "between": v.between(1, 2),
        "isin": v.isin([0, k]),
        "gt_prev": v > prev("v"),
        "le_last": v <= last("s0", "v"),
        "ne_first": v != first("s0", "v"),
        "count": count("s0") < k + 1,
        "sum": cep.sum("s0", "v") + v < 4 + k,
        "avg": cep.avg("s0", "v") >= k / 2,
        "min": (cep.min("s0", "v") < v) | (v == k),
        "max": ~(cep.max("s0", "v") > v),
        "arith": (v * 2 - k).abs() <= 2,
        "null": prev("v").is_null() | (v == k),
        "sqrt": (v - k).sqrt() <= 1,  # null below k
        "log": (v - k).log().exp().floor() >= 1,  # null at and below k
        "trig": (v * 0.9 + k).radians().sin().asin().degrees().ceil() > 2 * k,
        "coalesce": coalesce(prev("v"), last("s0", "v"), k) <= v,
        # a stage that may come after this one (or be missing: the pattern is refused)
        "count_later": count("s1") <= k,
        "last_later": coalesce(last("s1", "v"), k) >= v,
        "hour": (v * 25_200_000 + k * 3_600_000).hour() < 12,  # v * 7 hours
        "day": (event_time() * 86_400_000).day_of_week() >= 4 + k,  # one day per ms
        "time": event_time() - coalesce(prev("v"), 0) >= 2 * k,
    }
    return table[kind]


expressions = st.tuples(
    st.sampled_from(["eq", "ge", "ne", "any", "between", "isin", "gt_prev", "le_last",
                     "ne_first", "count", "sum", "avg", "min", "max", "arith", "null",
                     "sqrt", "log", "trig", "coalesce", "hour", "day", "time", "count_later",
                     "last_later"]),
    st.integers(0, 3),
).map(lambda t: _expression(*t))


@st.composite
def patterns(draw, max_stages: int = 4, negation: bool = True, windows: bool = True,
             skips: bool = True, quantifiers: bool = True, conditions=predicates) -> Pattern:
    n = draw(st.integers(1, max_stages))
    skip = SkipStrategy.no_skip()
    p = None
    for i in range(n):
        name = f"s{i}"
        if i == 0:
            p = Pattern.begin(name)
        else:
            options = ["next", "followed_by", "followed_by_any"]
            if negation and 0 < i < n - 1:
                options += ["not_next", "not_followed_by"]
            how = draw(st.sampled_from(options))
            try:
                p = getattr(p, how)(name)
            except MalformedPatternError:
                p = p.followed_by(name)
        p = p.where(draw(conditions))
        if p.stages[-1].consuming.negated or not quantifiers:
            continue
        q = draw(st.sampled_from(["single", "single", "optional", "one_or_more", "times",
                                  "times_range", "times_or_more"]))
        try:
            if q == "optional":
                p = p.optional()
            elif q == "one_or_more":
                p = p.one_or_more()
            elif q == "times":
                p = p.times(draw(st.integers(1, 3)))
            elif q == "times_range":
                lo = draw(st.integers(0, 2))
                p = p.times(lo, lo + draw(st.integers(1, 2)))
            elif q == "times_or_more":
                p = p.times_or_more(draw(st.integers(1, 3)))
            if q not in ("single", "optional"):
                extra = draw(st.sampled_from(["", "consecutive", "allow_combinations", "greedy",
                                              "optional", "until"]))
                if extra == "until" and q in ("one_or_more", "times_or_more"):
                    p = p.until(draw(conditions))
                elif extra and extra != "until":
                    p = getattr(p, extra)()
        except MalformedPatternError:
            pass
    if windows and draw(st.booleans()):
        p = p.within(draw(st.integers(2, 12)))
    if windows and draw(st.integers(0, 4)) == 0:
        p = p.within(draw(st.integers(1, 6)), WithinType.PREVIOUS_AND_CURRENT)
    if skips:
        which = draw(st.sampled_from(["no_skip", "skip_to_next", "skip_past_last_event",
                                      "skip_to_first", "skip_to_last"]))
        if which in ("skip_to_first", "skip_to_last"):
            top = [s.name for s in p.stages if not s.consuming.negated]
            skip = getattr(SkipStrategy, which)(draw(st.sampled_from(top)))
        else:
            skip = getattr(SkipStrategy, which)()
    return Pattern(p.stages, skip)


@st.composite
def streams(draw, max_len: int = 14, keys: tuple[str, ...] = ("k",)) -> list[tuple[Ev, int]]:
    n = draw(st.integers(0, max_len))
    out = []
    ts = 0
    for i in range(n):
        ts += draw(st.integers(0, 3))
        out.append((Ev(i, draw(st.integers(0, 3)), draw(st.sampled_from(keys))), ts))
    return out


def compiles(p: Pattern) -> bool:
    """Whether the reference engine accepts ``p`` (random patterns may be malformed)."""
    try:
        cep.Matcher(p, engine="reference")
    except MalformedPatternError:
        return False
    return True


def event_rows(events: list[tuple[Ev, int]]) -> list[dict[str, Any]]:
    """A drawn stream as the dict rows ``cep.match`` reads: id, v, key, ts."""
    return [{"id": e.id, "v": e.v, "key": e.key, "ts": ts} for e, ts in events]
