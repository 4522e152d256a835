"""The numba engine's short cuts give the reference engine's matches: conditions that read
only the event are evaluated a column at a time, and a key with nothing pending skips to
its next event that can begin a partial match.  The random patterns of
test_engine_equivalence cover single-stage starts (optional ones too, and conditions
reading the partial match, whose starts the kernel finds event by event); these cover
starts whose first event may belong to a later stage: optional and looping groups."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import compiles, event_rows, expressions, patterns, streams

import cep
from cep import MalformedPatternError, Pattern, TooManyPartialMatches, col, lit
from cep.nfa.capacity import Cap
from cep.nfa.engine import make_engine
from cep.nfa.events import Events, Keys

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
CAP = 2_000



def found(p: Pattern, rows: list[dict[str, Any]], engine: str) -> Any:
    try:
        matches, timeouts = cep.match(rows, p, key="key", time="ts", timeouts=True,
                                      engine=engine, max_partial_matches=CAP)
    except TooManyPartialMatches as err:
        return str(err)
    return ([(m.key, m.start, m.end, {s: [e["id"] for e in v] for s, v in m.items()})
             for m in matches],
            [(t.key, t.timestamp, {s: [e["id"] for e in v] for s, v in t.items()})
             for t in timeouts])


@st.composite
def group_starts(draw: Any) -> Pattern:
    """A group first - optional, looping or counted - then one to three more stages."""
    inner = draw(patterns(max_stages=2, negation=False, windows=False, skips=False,
                          conditions=expressions))
    group = Pattern.begin(inner)
    how = draw(st.sampled_from(["single", "optional", "one_or_more", "times", "times_range"]))
    try:
        if how == "optional":
            group = group.optional()
        elif how == "one_or_more":
            group = group.one_or_more()
        elif how == "times":
            group = group.times(2)
        elif how == "times_range":
            group = group.times(0, 2)
    except MalformedPatternError:
        pass
    rest = draw(patterns(max_stages=3, negation=True, windows=False, skips=False,
                         conditions=expressions))
    p = group
    for stage in rest.stages:
        step = draw(st.sampled_from(["next", "followed_by", "followed_by_any"]))
        p = getattr(p, step)(f"t{stage.name}").where(stage.condition)
    if draw(st.booleans()):
        p = p.within(draw(st.integers(2, 10)))
    return p



@PROPERTY
@given(p=group_starts(), events=streams(max_len=20, keys=("a", "b", "c")))
def test_group_starts_match_as_on_the_reference_engine(p: Pattern, events: list[Any]) -> None:
    assume(compiles(p))
    rows = event_rows(events)
    assert found(p, rows, "numba") == found(p, rows, "reference")


def in_batches(p: Pattern, rows: list[dict[str, Any]], cuts: list[int], engine: str) -> Any:
    """Outputs of one engine fed the rows in batches cut at ``cuts``."""
    run = make_engine(p, engine, cap=Cap(CAP))
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(rows)}), len(rows)]
    out: list[Any] = []
    try:
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            part = rows[lo:hi]
            events = Events.of(part, Keys.of_values([r["key"] for r in part]),
                               [r["ts"] for r in part])
            out += list(run.process(events).found)
        out += list(run.advance(10**12))
    except TooManyPartialMatches as err:
        return str(err)
    return sorted((type(m).__name__, m.key, m.start, m.end,
                   tuple((s, tuple(e["id"] for e in v)) for s, v in m.items())) for m in out)


@PROPERTY
@given(p=patterns(conditions=expressions), events=streams(max_len=24, keys=("a", "b", "c")),
       cuts=st.lists(st.integers(1, 23), max_size=4))
def test_batches_cut_anywhere_match_as_on_the_reference_engine(
        p: Pattern, events: list[Any], cuts: list[int]) -> None:
    """A key idle at the end of one batch skips ahead in the next, as within one."""
    assume(compiles(p))
    rows = sorted(event_rows(events), key=lambda r: r["ts"])  # each batch after the one before
    assert in_batches(p, rows, cuts, "numba") == in_batches(p, rows, cuts, "reference")


def test_an_idle_key_skips_until_an_event_can_begin_and_keeps_every_event_after() -> None:
    p = (Pattern.begin("small").where(col("amount") < 5).times(2).consecutive()
         .next("big").where(col("amount") > 500))
    rows = [{"card": "c1", "ts": t, "amount": a} for t, a in enumerate(
        [50.0, 60.0, 1.0, 2.0, 900.0, 70.0, 3.0, 80.0, 4.0, 1.0, 700.0])]
    for engine in ("numba", "reference"):
        got = cep.match(rows, p, key="card", time="ts", engine=engine)
        assert [(m.start, m.end) for m in got] == [(2, 4), (8, 10)]


def test_conditions_over_many_blocks_of_events_take_the_events_they_hold_for() -> None:
    """Conditions read a block of events at a time (2,048): 5,000 events with nulls, every
    comparison against a constant, against another field and against a null constant (never
    true),
    AND/OR/NOT, membership and arithmetic take the same events on both engines."""
    amounts = [None if i % 7 == 0 else float((i * 37) % 101) for i in range(5_000)]
    rows = [{"card": f"c{i % 13}", "ts": i, "id": i, "amount": a,
             "limit": None if i % 11 == 0 else float((i * 13) % 97)}
            for i, a in enumerate(amounts)]
    amount, limit, null = col("amount"), col("limit"), lit(None)
    never = [amount == null, amount != null]
    conditions = [amount == 50, amount != 50, amount < 50, amount <= 50, amount > 50,
                  amount >= 50, amount < limit, amount != limit, *never,
                  (amount > 10) & (limit < 40), (amount > 90) | (limit > 90), ~(amount < 20),
                  amount.isin([3.0, 40.0, None]), amount * 2 - limit > 30,
                  amount.is_null() | (limit >= 96)]
    for cond in conditions:
        p = Pattern.begin("a").where(cond)
        ids = {engine: [m["a"][0]["id"] for m in cep.match(rows, p, key="card", time="ts",
                                                           engine=engine)]
               for engine in ("numba", "reference")}
        assert ids["numba"] == ids["reference"], cond
        # against a null constant a comparison is unknown: it never holds
        assert bool(ids["numba"]) != (repr(cond) in map(repr, never)), cond
