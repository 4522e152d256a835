"""The numba engine gives exactly the reference engine's matches and timeouts, in order.

Random patterns (every stage kind, quantifier, window and skip strategy, with
expression conditions including stage references and aggregates) run on
random keyed streams through both engines.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from strategies import expressions, patterns, streams

import cep
from cep import MalformedPatternError, Matcher, Pattern, col, last

END = 2**63 - 1


def compiles(p: Pattern) -> bool:
    try:
        Matcher(p, engine="reference")
    except MalformedPatternError:
        return False
    return True


def run(p: Pattern, events, engine: str):
    m = Matcher(p, engine=engine)
    out = []
    for e, ts in events:
        done, expired = m.advance_time(ts)
        out += [("match", x) for x in done] + [("timeout", x) for x in expired]
        out += [("match", x) for x in m.process(e, ts)]
    done, expired = m.advance_time(END)
    out += [("match", x) for x in done] + [("timeout", x) for x in expired]
    return out


def shape(out):
    rows = []
    for kind, m in out:
        events = tuple((k, tuple(id(e) for e in v)) for k, v in m.items())
        rows.append((kind, events, m.start, m.end, getattr(m, "timestamp", None)))
    return rows


def check_same(p: Pattern, events) -> None:
    assume(compiles(p))
    want = shape(run(p, events, "reference"))
    got = shape(run(p, events, "numba"))
    assert got == want


def check_same_bounded(p: Pattern, events) -> None:
    assume(compiles(p))
    rows = [e for e, _ in events]
    times = {e.id: ts for e, ts in events}

    def go(engine):
        m, t = cep.match(rows, p, key="key", time=lambda e: times[e.id], timeouts=True,
                         engine=engine)
        return [(x.key, tuple((k, tuple(e.id for e in v)) for k, v in x.items())) for x in m], [
            (x.key, x.timestamp, tuple((k, tuple(e.id for e in v)) for k, v in x.items()))
            for x in t
        ]

    assert go("numba") == go("reference")


FAST = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(patterns(conditions=expressions), streams())
def test_numba_matcher_equals_reference(p, events):
    check_same(p, events)


@FAST
@given(patterns(conditions=expressions), streams(max_len=20, keys=("a", "b", "c")))
def test_numba_cep_match_equals_reference_over_keys(p, events):
    check_same_bounded(p, events)


@pytest.mark.slow
@SLOW
@given(patterns(max_stages=5, conditions=expressions), streams(max_len=24))
def test_numba_matcher_equals_reference_many_examples(p, events):
    check_same(p, events)


@pytest.mark.slow
@SLOW
@given(patterns(max_stages=5, conditions=expressions), streams(max_len=30, keys=("a", "b", "c")))
def test_numba_cep_match_equals_reference_many_examples(p, events):
    check_same_bounded(p, events)


@pytest.mark.parametrize("skip", ["no_skip", "skip_past_last_event", "skip_to_next"])
def test_numba_reclaims_path_nodes_inside_a_batch_without_changing_results(skip):
    """A long batch with node reclamation forced often gives the reference engine's matches."""
    import random

    import numpy as np

    from cep import SkipStrategy, count
    from nfa.columnar import Batch, ColumnarEngine

    rnd = random.Random(7)
    rows = [{"k": rnd.randrange(5), "v": rnd.randrange(6), "ts": i} for i in range(3000)]
    p = (
        Pattern.begin("a", skip=getattr(SkipStrategy, skip)()).where(col("v") >= 1)
        .followed_by("b").where(col("v") > last("a", "v")).one_or_more()
        .followed_by("c").where((col("v") == 0) & (count("b") >= 2))
        .within(40)
    )
    want = cep.match(rows, p, key="k", time="ts", timeouts=True, engine="reference")
    engine = ColumnarEngine(p, {"v": "numeric"})
    engine.gc_min = 64
    found = engine.process(Batch.of_events(rows), np.array([r["k"] for r in rows]),
                           np.array([r["ts"] for r in rows]))
    found += engine.advance(END)
    order = np.argsort([engine.keys[m.key] for m in found], kind="stable")
    got = [found[i] for i in order]
    flat = [(type(m).__name__, m.key, [(k, [id(e) for e in v]) for k, v in m.items()]) for m in got]
    ref = [(type(m).__name__, m.key, [(k, [id(e) for e in v]) for k, v in m.items()])
           for m in [*want[0], *want[1]]]
    assert sorted(map(repr, flat)) == sorted(map(repr, ref))
    assert [x for x in flat if x[0] == "Match"] == [x for x in ref if x[0] == "Match"]
    assert engine.nodes_n < 3000


def test_auto_picks_numba_for_expressions_and_says_why_not_for_callables():
    expr = Pattern.begin("a").where(col("v") > 1).next("b").where(col("v") > last("a", "v"))
    assert Matcher(expr).engine == "numba"
    lam = Pattern.begin("a").where(lambda e: e["v"] > 1)
    m = Matcher(lam)
    assert m.engine == "reference"
    assert "stage 'a'" in m.explain() and "Python code" in m.explain()
    with pytest.raises(cep.CEPError, match="cannot run this pattern"):
        Matcher(lam, engine="numba")
