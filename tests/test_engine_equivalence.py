"""The numba engine gives exactly the reference engine's matches and timeouts, in order.

Random patterns (every stage kind, quantifier, window and skip strategy, with
expression conditions including stage references and aggregates) run on
random keyed streams through both engines.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, assume, given, settings
from strategies import compiles, expressions, patterns, streams

import cep
from cep import Matcher, Pattern, TooManyPartialMatches, col, last

END = 2**63 - 1



#: the cap on partial matches in these runs: a random pattern may branch on every event
#: (2^24 partial matches on 24 events stalled make test-slow for 20 minutes); over it both
#: engines must fail alike
CAP = 2_000


def run(p: Pattern, events, engine: str):
    m = Matcher(p, engine=engine, max_partial_matches=CAP)
    out = []
    try:
        for e, ts in events:
            done, expired = m.advance_time(ts)
            out += [("match", x) for x in done] + [("timeout", x) for x in expired]
            out += [("match", x) for x in m.process(e, ts)]
        done, expired = m.advance_time(END)
    except TooManyPartialMatches as err:
        return [("over the cap", str(err))]
    out += [("match", x) for x in done] + [("timeout", x) for x in expired]
    return out


def shape(out):
    if out and out[0][0] == "over the cap":
        return out
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
        try:
            m, t = cep.match(rows, p, key="key", time=lambda e: times[e.id], timeouts=True,
                             engine=engine, max_partial_matches=CAP)
        except TooManyPartialMatches as err:
            return str(err)
        return [(x.key, tuple((k, tuple(e.id for e in v)) for k, v in x.items())) for x in m], [
            (x.key, x.timestamp, tuple((k, tuple(e.id for e in v)) for k, v in x.items()))
            for x in t
        ]

    assert go("numba") == go("reference")


FAST = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
#: a per-example deadline at length: two random runs of make test-slow stalled here for
#: over 20 minutes on an example not found again since; past 30 s an example now fails
#: with its reproduce blob instead of hanging
SLOW = settings(max_examples=800, deadline=timedelta(seconds=30),
                suppress_health_check=list(HealthCheck))


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
    from cep.nfa.columnar import ColumnarEngine
    from cep.nfa.events import Events

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
    found = [*engine.process(Events.of(rows), np.array([r["k"] for r in rows]),
                             np.array([r["ts"] for r in rows])), *engine.advance(END)]
    order = np.argsort([engine.key_values.index(m.key) for m in found], kind="stable")
    got = [found[i] for i in order]
    flat = [(type(m).__name__, m.key, [(k, [id(e) for e in v]) for k, v in m.items()]) for m in got]
    ref = [(type(m).__name__, m.key, [(k, [id(e) for e in v]) for k, v in m.items()])
           for m in [*want[0], *want[1]]]
    assert sorted(map(repr, flat)) == sorted(map(repr, ref))
    assert [x for x in flat if x[0] == "Match"] == [x for x in ref if x[0] == "Match"]
    assert engine.nodes_n < 3000


@pytest.mark.parametrize("skip", ["no_skip", "skip_to_next", "skip_past_last_event"])
def test_numba_grows_its_arrays_in_the_middle_of_a_key_without_changing_results(skip):
    """The kernel starts with room for 16 partial matches, 64 outputs and a few path
    nodes, and stops to grow them where a step needs more (see cep.nfa.kernel.run): here
    one key holds hundreds of partial matches and completes hundreds of matches in one
    batch, with timeouts, and every key's results are the reference engine's."""
    from cep import SkipStrategy

    rows = [{"k": "one" if i % 10 else "other", "v": (i * 7) % 13, "ts": i} for i in range(600)]
    p = (
        Pattern.begin("a", skip=getattr(SkipStrategy, skip)()).where(col("v") >= 2)
        .followed_by_any("b").where(col("v") > last("a", "v"))
        .followed_by("c").where(col("v") == 0)
        .within(60)
    )
    want = cep.match(rows, p, key="k", time="ts", timeouts=True, engine="reference")
    got = cep.match(rows, p, key="k", time="ts", timeouts=True, engine="numba")
    assert len(want[0]) + len(want[1]) > 64
    for g, w in zip(got, want, strict=True):
        assert [(m.key, m.start, m.end, dict(m)) for m in g] == [
            (m.key, m.start, m.end, dict(m)) for m in w]


def test_auto_picks_numba_for_expressions_and_says_why_not_for_callables():
    expr = Pattern.begin("a").where(col("v") > 1).next("b").where(col("v") > last("a", "v"))
    assert Matcher(expr).engine == "numba"
    lam = Pattern.begin("a").where(lambda e: e["v"] > 1)
    m = Matcher(lam)
    assert m.engine == "reference"
    assert "stage 'a'" in m.explain() and "Python code" in m.explain()
    with pytest.raises(cep.CEPError, match="cannot run this pattern"):
        Matcher(lam, engine="numba")


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("form", ["arrow", "pandas", "csv"])
def test_both_engines_read_timestamp_columns_as_epoch_milliseconds(unit, form, tmp_path):
    """A datetime time column of any unit means the same instants on both engines."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    base = 1_709_601_324_000
    stamps = [base, base + 1000, base + 2000, base + 700_000]
    table = pa.table({
        "k": ["x", "x", "x", "x"],
        "amount": [1.0, 2.0, 900.0, 901.0],
        "ts": pa.array([s * {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}[unit] // (
            1000 if unit == "s" else 1) for s in stamps], pa.timestamp(unit, "UTC")),
    })
    source = {"arrow": table, "pandas": table.to_pandas()}.get(form)
    if source is None:
        source = tmp_path / "events.csv"
        pcsv.write_csv(table, source)
    p = (Pattern.begin("small").where(col("amount") < 5).times(2).consecutive()
         .next("big").where(col("amount") > 500).within(600_000))
    got = cep.match(source, p, key="k", time="ts", timeouts=True, engine="numba")
    want = cep.match(source, p, key="k", time="ts", timeouts=True, engine="reference")
    assert [(m.start, m.end) for m in got[0]] == [(m.start, m.end) for m in want[0]] == [
        (base, base + 2000)]
    assert [t.timestamp for t in got[1]] == [t.timestamp for t in want[1]]
