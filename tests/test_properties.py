"""Properties every FlinkCEP-faithful engine has, checked on random patterns and streams."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import Ev, patterns, predicates, streams

import cep
from cep import MalformedPatternError, Matcher, Pattern, SkipStrategy

END = 2**63 - 1
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def compiles(p: Pattern) -> bool:
    try:
        Matcher(p)
    except MalformedPatternError:
        return False
    return True


def feed(p: Pattern, events, *, advance_first: bool = True, extra_advances=()):
    """Run a Matcher; return matches and timeouts as comparable tuples.  Uncapped: a
    random pattern may branch on every event (14,836 partial matches of 14 events once
    stopped a random run at the default cap); the streams are short."""
    m = Matcher(p, engine="reference", max_partial_matches=None)
    out, tos = [], []
    extra = sorted(extra_advances)
    for e, ts in events:
        while extra and extra[0] <= ts:
            done, expired = m.advance_time(extra.pop(0))
            out += done
            tos += expired
        if advance_first:
            done, expired = m.advance_time(ts)
            out += done
            tos += expired
        out += m.process(e, ts)
    done, expired = m.advance_time(END)
    return out + done, tos + expired


def ids(matches):
    return [tuple((k, tuple(e.id for e in v)) for k, v in m.items()) for m in matches]


@SETTINGS
@given(st.lists(predicates, min_size=2, max_size=4), streams())
def test_followed_by_any_finds_every_followed_by_match(conds, events):
    """Non-deterministic relaxed contiguity only adds matches to relaxed contiguity."""
    relaxed = Pattern.begin("s0").where(conds[0])
    anyp = Pattern.begin("s0").where(conds[0])
    for i, c in enumerate(conds[1:], 1):
        relaxed = relaxed.followed_by(f"s{i}").where(c)
        anyp = anyp.followed_by_any(f"s{i}").where(c)
    got_relaxed = set(ids(feed(relaxed, events)[0]))
    got_any = set(ids(feed(anyp, events)[0]))
    assert got_relaxed <= got_any


@SETTINGS
@given(patterns(skips=False), streams())
def test_skip_past_last_event_matches_share_no_event(p, events):
    p = Pattern(p.stages, SkipStrategy.skip_past_last_event())
    assume(compiles(p))
    matches, _ = feed(p, events)
    seen: set[int] = set()
    for m in matches:
        these = {e.id for e in m.events()}
        assert not (these & seen), f"event shared between matches: {ids(matches)}"
        seen |= these


@SETTINGS
@given(patterns(), streams())
def test_no_match_spans_more_than_its_window(p, events):
    assume(compiles(p))
    nfa = Matcher(p).nfa
    assume(nfa.window > 0)
    matches, timeouts = feed(p, events)
    for m in matches:
        assert m.end - m.start < nfa.window
    longest_gap = max(nfa.windows.values(), default=0)
    for t in timeouts:
        # a FIRST_AND_LAST timeout expires at start + window, a gap timeout at previous + gap
        assert t.timestamp == t.start + nfa.window or t.timestamp <= t.end + longest_gap


@SETTINGS
@given(patterns(), streams(), st.lists(st.integers(0, 40), max_size=6))
def test_results_do_not_depend_on_how_time_is_advanced(p, events, extra):
    """process() alone, advance-then-process, and extra advances in between agree."""
    assume(compiles(p))
    base_m, base_t = feed(p, events)
    alone_m, alone_t = feed(p, events, advance_first=False)
    extra_m, extra_t = feed(p, events, extra_advances=extra)
    assert ids(alone_m) == ids(base_m)
    assert ids(alone_t) == ids(base_t)
    assert ids(extra_m) == ids(base_m)
    assert ids(extra_t) == ids(base_t)


@SETTINGS
@given(patterns(), streams(keys=("a", "b", "c")))
def test_cep_match_equals_a_hand_fed_matcher_per_key(p, events):
    assume(compiles(p))
    rows = [e for e, _ in events]
    times = {e.id: ts for e, ts in events}
    got_m, got_t = cep.match(rows, p, key="key", time=lambda e: times[e.id], timeouts=True)
    want_m, want_t = [], []
    for k in dict.fromkeys(e.key for e in rows):
        mine = sorted(((e, ts) for e, ts in events if e.key == k), key=lambda x: x[1])
        m, t = feed(p, mine)
        want_m += m
        want_t += t
    assert ids(got_m) == ids(want_m)
    assert ids(got_t) == ids(want_t)
    assert all(m.key == m.events()[0].key for m in got_m)


@SETTINGS
@given(patterns(), streams())
def test_matches_take_events_in_stream_order_and_satisfy_the_stage_order(p, events):
    assume(compiles(p))
    matches, _ = feed(p, events)
    order = {e.id: i for i, (e, _) in enumerate(events)}
    stage_rank = {name: i for i, name in enumerate(p.stage_names())}
    for m in matches:
        for evs in m.values():
            positions = [order[e.id] for e in evs]
            assert positions == sorted(positions)
        firsts = [stage_rank[k] for k in m]
        assert firsts == sorted(firsts)


def test_events_are_the_objects_fed_in():
    a, b = Ev(1, 1), Ev(2, 2)
    p = Pattern.begin("a").where(lambda e: e.v == 1).next("b")
    (m,), _ = feed(p, [(a, 1), (b, 2)])
    assert m["a"][0] is a and m["b"][0] is b
    assert (m.start, m.end) == (1, 2)
