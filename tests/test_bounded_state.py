"""State that stays bounded: a cap on partial matches that holds event by event, whatever
the batch size, and no state at all for keys with nothing pending.

Explosive patterns branch on every event; three kinds are tried on one key whose events
alternate v = 0, 1 (200 such events made 171,700 partial matches before the cap):
``followed_by_any`` + ``one_or_more``, ``allow_combinations``, and a chain of optional
``followed_by_any`` stages.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import expressions, patterns, streams
from support import taken

import cep
from cep import Matcher, Pattern, TooManyPartialMatches, col
from cep.nfa.engine import make_engine
from cep.nfa.events import Events, Keys
from cep.runtime import IterableSource, Job, ListSink

V = col("v")
EXPLOSIVE = {
    "followed_by_any + one_or_more": (
        Pattern.begin("a").where(V == 0).followed_by_any("b").where(V == 1).one_or_more()
        .followed_by("c").where(V == 9)),
    "allow_combinations": (
        Pattern.begin("a").where(V == 0).followed_by("b").where(V == 1).one_or_more()
        .allow_combinations().followed_by("c").where(V == 9)),
    "optional chain": (
        Pattern.begin("a").where(V == 0)
        .followed_by_any("b").where(V == 1).optional()
        .followed_by_any("c").where(V == 1).optional()
        .followed_by_any("d").where(V == 1).optional()
        .followed_by_any("e").where(V == 1).optional()
        .followed_by("f").where(V == 9)),
}
ENGINES = pytest.mark.parametrize("engine", ["reference", "numba"])
POLICIES = pytest.mark.parametrize("policy", ["drop_oldest", "drop_newest"])


def alternating(n: int, key: str = "card-7") -> list[dict[str, Any]]:
    """``n`` events of one key, v = 0, 1, 0, 1, ... at 0, 1, 2, ... ms."""
    return [{"card": key, "v": i % 2, "ts": i, "i": i} for i in range(n)]


def ending(rows: list[dict[str, Any]], key: str = "card-7") -> list[dict[str, Any]]:
    """``rows`` and then the event (v = 9) that completes every partial match."""
    return [*rows, {"card": key, "v": 9, "ts": 10**6, "i": len(rows)}]


def shape(found: list[Any]) -> list[tuple[Any, ...]]:
    """Each match as (key, ((stage, event numbers), ...)), in the order found."""
    return [(m.key, tuple((s, tuple(e["i"] for e in es)) for s, es in m.items()))
            for m in found]


# ============================================================ the default cap
@ENGINES
@pytest.mark.parametrize("name", list(EXPLOSIVE))
def test_an_explosive_pattern_stops_at_the_default_cap_in_cep_match(name: str,
                                                                    engine: str) -> None:
    """100,000 events of one key: the default cap of 10,000 stops the run with an error
    naming the key, the stages holding the partial matches and what to change (before
    the cap, 2,000 events of this kind did not finish in 5 minutes)."""
    with pytest.raises(TooManyPartialMatches) as info:
        cep.match(alternating(100_000), EXPLOSIVE[name], key="card", time="ts", engine=engine)
    message = str(info.value)
    assert "key 'card-7' holds" in message and "over the cap of 10000" in message
    assert "they wait in stages ['b'" in message
    assert "max_partial_matches" in message and "drop_oldest" in message


@ENGINES
@pytest.mark.parametrize("name", list(EXPLOSIVE))
def test_an_explosive_pattern_stops_at_the_default_cap_in_a_job(name: str, engine: str) -> None:
    """The runtime has the same default: one batch of 100,000 events cannot run away."""
    job = (Job(IterableSource(alternating(100_000), batch_size=100_000)).key_by("card")
           .timestamps("ts").match(EXPLOSIVE[name], engine=engine))
    with pytest.raises(TooManyPartialMatches, match="key 'card-7' holds .* over the cap of 10000"):
        job.run()


@ENGINES
def test_a_rule_over_the_cap_in_a_rule_set_is_named(engine: str) -> None:
    """A hundred rules in one job: the error says which rule (and version) to fix."""
    from cep.rules import Rule, rule_set

    calm = Pattern.begin("a").where(col("amount") < 0)
    rules = rule_set([Rule("calm", 1, "card", calm),
                      Rule("boom", 7, "card", EXPLOSIVE["followed_by_any + one_or_more"])])
    job = (Job(IterableSource(alternating(2_000), batch_size=2_000)).timestamps("ts")
           .limit_partial_matches(100).rules(rules, engine=engine))
    with pytest.raises(TooManyPartialMatches, match="^rule 'boom' version 7: key 'card-7' "
                                                    "holds .* over the cap of 100"):
        job.run()


@ENGINES
def test_the_cap_holds_after_every_event_whatever_the_batch(engine: str) -> None:
    """A cap of 50 with drop_oldest: one batch of 2,000 events never leaves more than 50
    partial matches (before, the cap was checked after the batch, which had exploded)."""
    runner = make_engine(EXPLOSIVE["followed_by_any + one_or_more"], engine,
                         cap=cep.nfa.capacity.Cap(50, "drop_oldest"))
    rows = alternating(2_000)
    runner.process(Events.of(rows, Keys.of_values([r["card"] for r in rows]),
                             [r["ts"] for r in rows]))
    assert runner.partial_matches == 50
    assert runner.take_dropped() > 10_000 and runner.take_dropped() == 0


def test_no_cap_is_an_explicit_choice() -> None:
    """``max_partial_matches=None`` turns the cap off: 24 events make thousands of
    matches, where a cap of 100 keeps at most 100."""
    rows = ending(alternating(24))
    found = cep.match(rows, EXPLOSIVE["allow_combinations"], key="card", time="ts",
                      max_partial_matches=None)
    capped = cep.match(rows, EXPLOSIVE["allow_combinations"], key="card", time="ts",
                       max_partial_matches=100, on_overflow="drop_newest")
    assert len(found) > 100 >= len(capped) > 0


def test_matcher_takes_the_cap() -> None:
    """``Matcher`` (one key, event by event) has the same options."""
    m = Matcher(EXPLOSIVE["followed_by_any + one_or_more"], engine="numba",
                max_partial_matches=5)
    with pytest.raises(TooManyPartialMatches, match="key None holds 6 partial matches"):
        for r in alternating(100):
            m.process(r, r["ts"])


@pytest.mark.parametrize(("given", "message"), [
    ({"max_partial_matches": 0}, "a positive integer or None"),
    ({"max_partial_matches": 2.5}, "a positive integer or None"),
    ({"on_overflow": "drop"}, "'fail', 'drop_oldest', 'drop_newest'"),
])
def test_a_wrong_cap_is_refused_up_front(given: dict[str, Any], message: str) -> None:
    with pytest.raises(cep.CEPError, match=message):
        cep.match([], EXPLOSIVE["allow_combinations"], **given)


# ================================================ drop policies, engine against engine
@POLICIES
@pytest.mark.parametrize("name", list(EXPLOSIVE))
def test_numba_drops_the_partial_matches_the_reference_engine_drops(name: str,
                                                                    policy: str) -> None:
    """Both engines order partial matches by first event (ties: place in the queue) and
    drop the same ones: the matches that survive a cap of 40 are the same, in order."""
    rows = ending(alternating(400))
    got, want = (cep.match(rows, EXPLOSIVE[name], key="card", time="ts", engine=engine,
                           max_partial_matches=40, on_overflow=policy)
                 for engine in ("numba", "reference"))
    assert shape(got) == shape(want)
    assert 0 < len(got) <= 40


def test_drop_oldest_keeps_the_newest_starts_and_drop_newest_the_oldest() -> None:
    """a@1..5 wait for a b; cap 3. drop_oldest keeps a3, a4, a5 (the b completes those);
    drop_newest refuses a4 and a5 and keeps a1, a2, a3."""
    p = Pattern.begin("a").where(V == 1).followed_by("b").where(V == 2)
    rows = [{"v": 1, "ts": t, "i": t} for t in range(1, 6)] + [{"v": 2, "ts": 9, "i": 9}]
    for policy, starts in (("drop_oldest", [3, 4, 5]), ("drop_newest", [1, 2, 3])):
        for engine in ("reference", "numba"):
            found = cep.match(rows, p, time="ts", engine=engine, max_partial_matches=3,
                              on_overflow=policy)
            assert [m["a"][0]["i"] for m in found] == starts, (policy, engine)


@POLICIES
def test_drops_with_a_skip_strategy_release_held_matches(policy: str) -> None:
    """With skip_past_last_event a completed match waits for earlier-started partial
    matches; when the cap drops those, it leaves at once, on both engines alike."""
    from cep import SkipStrategy

    p = (Pattern.begin("a", skip=SkipStrategy.skip_past_last_event()).where(V == 0)
         .followed_by_any("b").where(V == 1).one_or_more().followed_by("c").where(V >= 0))
    rows = ending(alternating(120))
    got, want = (cep.match(rows, p, time="ts", engine=engine, max_partial_matches=7,
                           on_overflow=policy) for engine in ("numba", "reference"))
    assert shape(got) == shape(want) and got


# ============================================== the same result with any batch size
def _job_output(rows: list[dict[str, Any]], p: Pattern, engine: str, batch: int,
                cap: int, policy: str) -> Any:
    matches, timeouts = ListSink(), ListSink()
    try:
        (Job(IterableSource(rows, batch_size=batch)).key_by("key").timestamps("ts")
         .match(p, engine=engine).limit_partial_matches(cap, policy)
         .sink(matches).sink_timeouts(timeouts).run())
    except TooManyPartialMatches:
        return "over the cap"
    return sorted(json.dumps([r["key"], {s: [e["id"] for e in es]
                                         for s, es in taken(r).items()}], sort_keys=True)
                  for r in [*matches.records, *timeouts.records])


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(patterns(conditions=expressions), streams(max_len=24, keys=("a", "b")),
       st.integers(1, 4), st.sampled_from(["fail", "drop_oldest", "drop_newest"]))
def test_capped_results_do_not_depend_on_batch_size(p: Pattern, events: list[Any], cap: int,
                                                    policy: str) -> None:
    """The cap is checked as each event is processed, so cutting the input into batches
    of 1, 5 or all events gives the same matches and timeouts (or the same failure),
    on both engines."""
    try:
        Matcher(p, engine="reference")
    except cep.MalformedPatternError:
        return
    rows = [{"id": e.id, "v": e.v, "key": e.key, "ts": ts} for e, ts in events]
    outputs = {(engine, batch): _job_output(rows, p, engine, batch, cap, policy)
               for engine in ("reference", "numba") for batch in (1, 5, max(len(rows), 1))}
    assert len({json.dumps(o) for o in outputs.values()}) == 1, outputs


# ========================================================= idle keys hold nothing
ONE_THEN_WAIT = (Pattern.begin("a").where(V == 1).followed_by("b").where(V == 2)
                 .within(timedelta(milliseconds=10)))


@ENGINES
def test_a_key_whose_partial_matches_ended_holds_no_state(engine: str) -> None:
    """5,000 cards with one event each: once their windows closed, the engine holds no
    key at all, and its snapshot names none."""
    runner = make_engine(ONE_THEN_WAIT, engine)
    rows = [{"card": f"c{i}", "v": 1, "ts": i} for i in range(5_000)]
    runner.process(Events.of(rows, Keys.of_values([r["card"] for r in rows]),
                             [r["ts"] for r in rows]))
    assert runner.keys_with_state == 5_000
    runner.advance(10_000)
    assert (runner.keys_with_state, runner.partial_matches) == (0, 0)
    snap = runner.snapshot()
    assert snap.meta.get("keys", []) == [] and snap.rows == []


@ENGINES
def test_keys_that_match_at_once_never_hold_state(engine: str) -> None:
    """A key whose event starts nothing (or completes at once) is as a key never seen."""
    runner = make_engine(Pattern.begin("a").where(V == 1), engine)
    rows = [{"card": f"c{i}", "v": i % 2, "ts": i} for i in range(2_000)]
    step = runner.process(Events.of(rows, Keys.of_values([r["card"] for r in rows]),
                                    [r["ts"] for r in rows]))
    assert len(step.found) == 1_000 and runner.keys_with_state == 0


def test_the_numba_engine_forgets_the_ids_of_idle_keys() -> None:
    """Its per-key arrays follow the keys with state, not every key seen: after 50,000
    one-event cards, at most a few thousand key ids are kept (they are renumbered once
    idle ones outnumber the live ones and a slack, 65,536 unless lowered as here), and a
    card seen again still matches."""
    runner = make_engine(ONE_THEN_WAIT, "numba")
    runner.process(Events.of([{"v": 0}], Keys.of_values(["c0"]), [0]))
    runner.core.key_slack = 1_000  # type: ignore[attr-defined]
    for start in range(0, 50_000, 1_000):
        rows = [{"card": f"c{i}", "v": 1, "ts": i} for i in range(start, start + 1_000)]
        runner.process(Events.of(rows, Keys.of_values([r["card"] for r in rows]),
                                 [r["ts"] for r in rows]))
        runner.advance(start + 1_000)
    core = runner.core  # type: ignore[attr-defined]
    assert len(core.key_values) < 4_000 and len(core.key_time) == len(core.key_values)
    again = [{"card": "c7", "v": 1, "ts": 60_000}, {"card": "c7", "v": 2, "ts": 60_001}]
    step = runner.process(Events.of(again, Keys.of_values(["c7", "c7"]), [60_000, 60_001]))
    assert [m.key for m in step.found] == ["c7"]


@ENGINES
def test_a_checkpoint_holds_only_keys_with_something_pending(engine: str, tmp_path: Any
                                                             ) -> None:
    """20,000 cards with one event each, whose windows close, and one card with a partial
    match still open when the job stops: the checkpoint holds that one key, not a record
    per card ever seen (before: 9.6 MB of arrays and a 2.5 MB manifest at 200k cards)."""
    rows = [{"card": f"c{i}", "v": 1, "ts": i} for i in range(20_000)]
    rows += [{"card": "open", "v": 1, "ts": 30_000}, {"card": "late", "v": 0, "ts": 30_005}]
    batches = [0]

    def after_the_last_batch() -> bool:  # stop before the end of input closes every window
        batches[0] += 1
        return batches[0] == 5

    s = (Job(IterableSource(rows, batch_size=4_096)).key_by("card").timestamps("ts")
         .match(ONE_THEN_WAIT, engine=engine)
         .checkpoint(tmp_path / "chk").run(stop=after_the_last_batch))
    assert s.stopped and s.events_in == 20_002
    assert (s.keys_with_state, s.partial_matches) == (1, 1)
    assert s.last_checkpoint_bytes < 20_000
    assert s.state_bytes < 100_000  # 20,000 keys would take megabytes


def test_the_summary_reports_state_and_drops() -> None:
    """Summary: dropped partial matches, keys with state, state bytes."""
    rows = ending(alternating(200), key="card-7")[:-1]  # no end: partial matches stay
    s = (Job(IterableSource(rows)).key_by("card").timestamps("ts")
         .match(EXPLOSIVE["followed_by_any + one_or_more"], engine="numba")
         .limit_partial_matches(20, "drop_oldest").run())
    assert s.dropped_partial_matches > 1_000
    assert (s.keys_with_state, s.partial_matches) == (1, 20)
    assert 0 < s.state_bytes < 1_000_000


# ===================================================================== Spark
@ENGINES
def test_match_batch_stops_an_explosive_pattern_at_the_default_cap(spark: Any,
                                                                   engine: str) -> None:
    """Spark has the same default: 100,000 events of one card fail the task with the
    error naming the card, instead of running for hours."""
    import pandas as pd

    from cep.runtime.spark import match_batch

    df = spark.createDataFrame(pd.DataFrame(alternating(100_000)))
    out = match_batch(df, EXPLOSIVE["followed_by_any + one_or_more"], key="card", time="ts",
                      engine=engine)
    with pytest.raises(Exception, match="key 'card-7' holds .* over the cap of 10000"):
        out.collect()


@POLICIES
def test_match_batch_drops_the_partial_matches_cep_match_drops(spark: Any,
                                                               policy: str) -> None:
    import pandas as pd

    from cep.runtime.spark import SparkMetrics, match_batch

    p = EXPLOSIVE["allow_combinations"]
    rows = ending(alternating(300))
    want = cep.match(rows, p, key="card", time="ts", engine="reference",
                     max_partial_matches=25, on_overflow=policy)
    metrics = SparkMetrics(spark)
    out = match_batch(spark.createDataFrame(pd.DataFrame(rows)), p, key="card", time="ts",
                      max_partial_matches=25, on_overflow=policy, metrics=metrics).collect()
    got = sorted(tuple(tuple(e.i for e in r[s]) for s in "abc") for r in out)
    assert got == sorted(tuple(tuple(e["i"] for e in m[s]) for s in "abc") for m in want)
    assert metrics.dropped_partial_matches > 0 and metrics.keys_with_state == 0


def test_a_key_group_keeps_state_only_for_keys_with_something_pending() -> None:
    """One Spark group holding 1,000 cards (key groups): their partial matches are in its
    state while their windows are open, and once every window has closed the group's
    state is removed; the metrics' changes add up to the state there is."""
    import pandas as pd

    from cep.runtime.spark.runner import ORDER_ROW, TS, GroupRunner, Spec

    p = ONE_THEN_WAIT.within(timedelta(milliseconds=1_500))
    runner = GroupRunner(Spec(p.to_json(), ("card",), ("card", "v", "ts"),
                              {"v": "numeric", "ts": "numeric"}, False, engine="numba",
                              time="ts"))
    frame = pd.DataFrame([{"card": f"c{i}", "v": 1, "ts": i + 1, TS: i + 1, ORDER_ROW: i}
                          for i in range(1_000)])
    totals: dict[str, int] = {}
    state = None
    for frames, watermark, keys in (([frame], None, 0), ([], 1_000, 1_000), ([], 5_000, 0)):
        result = runner.run(state, frames, watermark)
        state = result.state
        for name, n in result.counts.items():
            totals[name] = totals.get(name, 0) + n
        assert totals["keys_with_state"] == totals["partial_matches"] == keys
        assert totals["state_bytes"] == len(state or b"")
    assert state is None and totals["timeouts"] == 0


# ================================================ the same result across a restore
@ENGINES
@POLICIES
def test_a_capped_job_resumed_from_a_checkpoint_writes_what_an_uninterrupted_one_does(
        engine: str, policy: str, tmp_path: Any) -> None:
    """Three cards with explosive histories, a cap of 30: stopped after 2, 5 or 7 batches
    (a checkpoint each time) and resumed, the job writes the matches an uninterrupted run
    writes, and counts the same drops."""
    from cep.runtime import FileSink

    rows = sorted((r for card in ("c1", "c2", "c3")
                   for r in ending(alternating(120, card), card)),
                  key=lambda r: (r["ts"], r["card"]))
    for i, r in enumerate(rows):
        r["i"] = i

    def job(directory: Any) -> Job:
        return (Job(IterableSource(rows, batch_size=37)).key_by("card").timestamps("ts")
                .match(EXPLOSIVE["followed_by_any + one_or_more"], engine=engine)
                .limit_partial_matches(30, policy)
                .sink(FileSink(directory / "matches.jsonl"))
                .checkpoint(directory / "chk", every_events=50))

    whole = job(tmp_path / "whole").run()
    want = sorted(json.dumps(r, sort_keys=True)
                  for r in FileSink(tmp_path / "whole" / "matches").read())
    assert want and whole.dropped_partial_matches > 0
    for stop_at in (2, 5, 7):
        directory = tmp_path / f"stop{stop_at}"
        seen = [0]

        def stop(n: int = stop_at, seen: list[int] = seen) -> bool:
            seen[0] += 1
            return seen[0] == n

        assert job(directory).run(stop=stop).stopped
        resumed = job(directory).run(resume=True)
        got = sorted(json.dumps(r, sort_keys=True)
                     for r in FileSink(directory / "matches").read())
        assert got == want, stop_at
        assert resumed.dropped_partial_matches == whole.dropped_partial_matches


# ===================================================================== cep replay
def test_cep_replay_takes_the_cap_and_the_policy(tmp_path: Any, capsys: Any) -> None:
    """``cep replay`` fails on an explosive history with the default cap (exit 2, the
    error naming the card), and with ``--max-partial-matches 20 --on-overflow
    drop_newest`` replays it, printing how many partial matches it dropped."""
    from cep.runtime.replay import main

    data = tmp_path / "cards.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ending(alternating(30_000))))
    spec = tmp_path / "explosive.json"
    spec.write_text(EXPLOSIVE["followed_by_any + one_or_more"].to_json())
    common = [str(spec), str(data), "--key", "card", "--time", "ts"]
    assert main([*common, "--output", str(tmp_path / "a" / "m.jsonl"), "--quiet"]) == 2
    assert "key 'card-7' holds" in capsys.readouterr().err
    assert main([*common, "--output", str(tmp_path / "b" / "m.jsonl"),
                 "--max-partial-matches", "20", "--on-overflow", "drop_newest"]) == 0
    out = capsys.readouterr().out
    assert "dropped partial matches" in out and "partial matches of" in out
    with pytest.raises(SystemExit):
        main([*common, "--output", str(tmp_path / "c" / "m.jsonl"),
              "--max-partial-matches", "0"])


def test_the_numba_engine_forgets_strings_no_partial_match_holds() -> None:
    """A rule reading a text field (the same IP twice within 10 ms) codes every distinct
    IP it sees; the codes no partial match holds any more are forgotten, so the string
    table follows what is pending, not every IP seen, and the matches and timeouts stay
    the reference engine's."""
    from cep import last

    p = (Pattern.begin("a").where(col("ip") != "0.0.0.0").followed_by("b")
         .where(col("ip") == last("a", "ip")).within(timedelta(milliseconds=10)))
    runners = {engine: make_engine(p, engine) for engine in ("reference", "numba")}
    for runner in runners.values():
        runner.process(Events.of([{"ip": "seed"}], Keys.of_values(["k"]), [0]))
    runners["numba"].core.key_slack = 500  # type: ignore[attr-defined]
    found: dict[str, list[Any]] = {engine: [] for engine in runners}
    for start in range(0, 20_000, 1_000):
        rows = [{"ip": f"10.0.{i // 256}.{i % 256}"} for i in range(start, start + 1_000)]
        rows.append({"ip": rows[-1]["ip"]})  # the last IP again: one match per batch
        ts = [start + i for i in range(1_000)] + [start + 1_000]
        for engine, runner in runners.items():
            out = [*runner.process(Events.of(rows, Keys.of_values(["k"] * len(rows)), ts)
                                   ).found, *runner.advance(start + 2_000)]
            found[engine] += [(type(m).__name__, {s: [e["ip"] for e in es]
                                                  for s, es in m.items()}) for m in out]
    assert found["numba"] == found["reference"]
    assert sum(kind == "Match" for kind, _ in found["numba"]) == 20
    assert len(runners["numba"].core.strings) < 2_000  # type: ignore[attr-defined]


def test_each_rule_counts_its_drops_and_its_partial_matches() -> None:
    """A job of several rules: Summary.rules says how many partial matches the cap dropped
    for each rule and how many each holds at the end."""
    rows = alternating(300)
    s = (Job(IterableSource(rows)).key_by("card").timestamps("ts")
         .match({"explosive": EXPLOSIVE["followed_by_any + one_or_more"],
                 "calm": Pattern.begin("a").where(V == 0).next("b").where(V == 7)},
                engine="numba")
         .limit_partial_matches(25, "drop_oldest").run())
    assert s.rules["explosive"]["dropped_partial_matches"] == s.dropped_partial_matches > 0
    assert s.rules["calm"]["dropped_partial_matches"] == 0
    assert (s.rules["explosive"]["partial_matches"], s.rules["calm"]["partial_matches"]) == (
        25, 0)


def test_cep_match_takes_the_cap_and_the_policy(tmp_path: Any, capsys: Any) -> None:
    """``cep match`` has the same flags: the default cap stops an explosive history with
    the error naming the card (exit 2); a cap of 20 dropping the newest prints at most
    20 matches."""
    from cep.runtime.cli import main

    data = tmp_path / "cards.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ending(alternating(30_000))))
    spec = tmp_path / "explosive.json"
    spec.write_text(EXPLOSIVE["followed_by_any + one_or_more"].to_json())
    common = ["match", str(spec), str(data), "--key", "card", "--time", "ts", "-q"]
    assert main(common) == 2
    assert "key 'card-7' holds" in capsys.readouterr().err
    assert main([*common, "--max-partial-matches", "20", "--on-overflow", "drop_newest"]) == 0
    assert 0 < len(capsys.readouterr().out.splitlines()) <= 20


def batch(rows: list[dict[str, Any]]) -> Events:
    return Events.of(rows, Keys.of_values([r["card"] for r in rows]), [r["ts"] for r in rows])


def test_the_numba_engine_writes_its_per_key_arrays_in_place_but_never_under_a_snapshot(
) -> None:
    """A pass writes the entries of the keys it visits into the engine's own per-key
    arrays (not a new array of every key seen, per rule and batch); a snapshot captured
    before it keeps the state it froze (it took the entries of the keys with state)."""
    one_then_two = Pattern.begin("a").where(V == 1).next("b").where(V == 2)
    runner = make_engine(one_then_two, "numba")
    runner.process(batch([{"card": f"c{i}", "v": 1, "ts": i} for i in range(300)]))
    core = runner.core  # type: ignore[attr-defined]
    arrays = core.key_len
    runner.process(batch([{"card": "c1", "v": 1, "ts": 400}, {"card": "n1", "v": 1, "ts": 401}]))
    assert np.shares_memory(core.key_len, arrays)  # in place, grown by a key in its room
    frozen = runner.capture()
    expected = make_engine(one_then_two, "numba")
    expected.restore(runner.snapshot())
    # every third card completes (and holds nothing after), the others fail (v 3)
    done = runner.process(batch([{"card": f"c{i}", "v": 2 if i % 3 == 0 else 3, "ts": 500 + i}
                                 for i in range(300)]))
    assert len(done.found) == 100 and runner.keys_with_state == 1  # n1
    restored = make_engine(one_then_two, "numba")
    restored.restore(frozen().held())
    assert restored.keys_with_state == expected.keys_with_state == 301
    last = batch([{"card": "c4", "v": 2, "ts": 600}, {"card": "n1", "v": 2, "ts": 601}])
    assert ([m.key for m in restored.process(last).found]
            == [m.key for m in expected.process(last).found] == ["c4", "n1"])


def test_a_numba_engine_that_stopped_at_an_error_is_done() -> None:
    """Its pass stopped half way through the keys: it refuses to go on, or to be saved,
    rather than carry on from a state no run of it had."""
    runner = make_engine(EXPLOSIVE["followed_by_any + one_or_more"], "numba",
                         cap=cep.nfa.capacity.Cap(20, "fail"))
    with pytest.raises(TooManyPartialMatches):
        runner.process(batch(alternating(200)))
    with pytest.raises(cep.CEPError, match="this engine stopped at an error .*key 'card-"):
        runner.process(batch(alternating(10)))
    with pytest.raises(cep.CEPError, match="stopped at an error"):
        runner.snapshot()


def test_a_timer_pass_with_nothing_due_moves_key_times_in_place_but_never_under_a_snapshot(
) -> None:
    """As a pass does (see above)."""
    runner = make_engine(ONE_THEN_WAIT, "numba")
    runner.process(batch([{"card": f"c{i}", "v": 1, "ts": 100} for i in range(50)]))
    runner.advance(101)  # nothing due before 110: the keys' times move, in place
    core = runner.core  # type: ignore[attr-defined]
    assert (core.key_time == 101).all()
    frozen = runner.capture()
    runner.advance(105)
    assert (core.key_time == 105).all()
    assert (frozen().arrays["key_time"] == 101).all()
    runner.advance(107)
    assert (core.key_time == 107).all()
