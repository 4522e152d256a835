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


def test_auto_picks_numba_for_expressions_and_says_why_not_for_callables():
    expr = Pattern.begin("a").where(col("v") > 1).next("b").where(col("v") > last("a", "v"))
    assert Matcher(expr).engine == "numba"
    lam = Pattern.begin("a").where(lambda e: e["v"] > 1)
    m = Matcher(lam)
    assert m.engine == "reference"
    assert "stage 'a'" in m.explain() and "Python code" in m.explain()
    with pytest.raises(cep.CEPError, match="cannot run this pattern"):
        Matcher(lam, engine="numba")
