"""Rule sets on Spark (#13 item 3): every rule of a set over one stream, one shuffle per key
field, a rule directory edited while the query runs.

The oracle is the embedded runtime's operator running the same rules, with each change
applied at the watermark the change log recorded for it, for every key at once: a rule
set on Spark must find what the embedded runtime finds when the rules change at that
watermark, whichever micro-batch each key's group happens to be called in.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cep import Pattern, SkipStrategy, col, count
from cep.errors import InputError
from cep.rules import Rule, rule_set
from cep.runtime import CepOperator, RuleFeed, RuleWarning
from cep.runtime.blob import unpack
from cep.runtime.job import Summary
from cep.runtime.live_rules import LiveRules
from cep.runtime.operator import Output
from cep.runtime.spark import match_batch, match_stream
from cep.runtime.spark.rule_sets import ChangeLog, RuleSetRunner, RuleSetSpec, fitting
from cep.runtime.spark.runner import TS
from cep.runtime.watermarks import MIN_WATERMARK
from tests.test_spark import DELAY_MS, MINUTE, SCHEMA, chunks, transactions, write_files

KINDS = {"id": "numeric", "card": "string", "ts": "numeric", "amount": "numeric",
         "v": "numeric", "merchant": "string"}
COLUMNS = ("id", "card", "ts", "amount", "v", "merchant")


def card_testing(window: int) -> Pattern:
    return (Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
            .where(col("amount") < 5).times_or_more(2)
            .followed_by("big").where(col("amount") > 500).within(window * MINUTE))


PAIR = (Pattern.begin("a").where(col("v") == 0).followed_by("b").where(col("v") == 1)
        .within(3 * MINUTE))
TRIPLE = (Pattern.begin("a").where(col("v") == 2).followed_by("b").where(col("v") == 3)
          .followed_by("c").where(col("v") == 2).within(4 * MINUTE))
BURST = (Pattern.begin("big").where(col("amount") > 500)
         .followed_by("again").where(col("amount") > 500).within(2 * MINUTE))

BEFORE = [Rule("testing", 1, "card", card_testing(5), {"smalls": count("small")}),
          Rule("pair", 1, "card", PAIR),
          Rule("burst", 1, "merchant", BURST)]
AFTER = [Rule("testing", 2, "card", card_testing(15), {"smalls": count("small")}),
         Rule("triple", 1, "card", TRIPLE),
         Rule("burst", 1, "merchant", BURST)]


def write_rules(folder: Path, rules: list[Rule], broken: bool = False) -> None:
    """The folder holds exactly these rules (one file each), and a broken file if asked."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()
    for rule in rules:
        (folder / f"{rule.name}.json").write_text(rule.to_json())
    if broken:
        (folder / "typo.json").write_text('{"name": "typo", "version": 1,')


def history() -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """Card transactions in six files; card "zz" charges twice a tiny amount at the end of
    the third file, nothing in the fourth (its group is not called when the rules change
    there), and a big amount in the fifth."""
    parts = chunks(transactions(n=900, cards=10, seed=21), 6)
    boundary = max(e["ts"] for e in parts[2])
    parts[2] += [{"id": 90_000 + i, "card": "zz", "ts": boundary - 3000 + 1000 * i,
                  "amount": 1.0, "v": 7, "merchant": "m9"} for i in range(2)]
    parts[4] += [{"id": 90_002, "card": "zz", "ts": max(e["ts"] for e in parts[3]) + 1000,
                  "amount": 900.0, "v": 7, "merchant": "m9"}]
    events = sorted((e for p in parts for e in p), key=lambda e: (e["ts"], e["id"]))
    return events, parts


def oracle(events: list[dict[str, Any]], stretches: list[tuple[int, list[Rule]]],
           final: int | None, on_change: str) -> list[tuple[Any, ...]]:
    """The embedded operator over ``events``, the rules of each stretch put in force at its
    watermark for every key, then time moved to ``final`` (None: the end)."""
    op = CepOperator({}, "reference", key="card", time="ts")
    live = LiveRules(RuleFeed(), on_change)
    outs: list[Output] = [op.process_elements(events, [None] * len(events))[0]]
    for at, rules in stretches:
        if at > op.watermark:
            outs.append(op.process_watermark(at))
        outs.append(live.apply(op, Summary(), fitting(rule_set(rules), KINDS))[0])
        live.retire(op)
    outs.append(op.finish() if final is None else op.process_watermark(final))
    result = []
    for out in outs:
        assert not out.late and not out.dead
        for kind, ms in (("match", out.matches), ("timeout", out.timeouts)):
            for m in ms:
                stages = tuple(sorted((s, tuple(e["id"] for e in evs)) for s, evs in m.items()
                                      if evs))
                result.append((m.rule, m.version, kind, m.key, m.start, m.end, stages))
    return sorted(result)


def rows_summary(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Spark's (or a runner's) rows in the oracle's terms; the key is the rule's own field's."""
    out = []
    for r in rows:
        if r["kind"] not in ("match", "timeout"):
            continue
        stages = tuple(sorted((s, tuple(e["id"] for e in evs)) for s, evs in dict(r["stages"])
                              .items() if len(evs)))
        key = r["merchant"] if r["rule"] == "burst" else r["card"]
        out.append((r["rule"], r["version"], r["kind"], key, r["start"], r["end"], stages))
    return sorted(out)


# ------------------------------------------------------- without a cluster
def spec_for(key: str, folder: Path, on_change: str = "drain") -> RuleSetSpec:
    return RuleSetSpec(None, (key,), COLUMNS, KINDS, False, engine="numba", timeouts=True,
                       rule_key=key, key_columns=("card", "merchant"), on_change=on_change,
                       directory=str(folder), every=0, changes=str(folder) + ".log")


class Groups:
    """Spark's calls, simulated: one group per key, called in a micro-batch when it has
    events or its timer is behind the watermark, its state carried from call to call."""

    def __init__(self, runner: RuleSetRunner, key: str) -> None:
        self.runner, self.key = runner, key
        self.state: dict[Any, bytes | None] = {}
        self.timers: dict[Any, int | None] = {}
        self.rows: list[dict[str, Any]] = []
        self.calls: list[tuple[int | None, Any]] = []

    def batch(self, events: list[dict[str, Any]], watermark: int | None,
              final: bool = False) -> None:
        frame = pd.DataFrame(events, columns=list(COLUMNS))
        frame[TS] = frame["ts"]
        keys = set(frame[self.key]) | {k for k, t in self.timers.items() if final or (
            t is not None and watermark is not None and watermark > t)}
        for k in sorted(keys):
            self.calls.append((watermark, k))
            mine = frame[frame[self.key] == k].reset_index(drop=True)
            result = self.runner.run(self.state.get(k), [mine], watermark, final=final)
            self.state[k], self.timers[k] = result.state, result.timer
            self.rows += result.output.to_dict("records")


@pytest.mark.filterwarnings("ignore::cep.runtime.live_rules.RuleWarning")  # typo.json's
@pytest.mark.parametrize("on_change", ["drain", "drop"])
def test_every_key_switches_at_the_logged_watermark_whenever_its_group_is_called(
        tmp_path: Path, on_change: str) -> None:
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    events, parts = history()
    groups = [Groups(RuleSetRunner(spec_for(k, folder, on_change)), k)
              for k in ("card", "merchant")]
    newest, watermark = MIN_WATERMARK, None
    for i, part in enumerate(parts):
        if i == 3:  # the rules change between two micro-batches
            write_rules(folder, AFTER, broken=True)
        for g in groups:
            g.batch(part, watermark)
        newest = max(newest, max(e["ts"] for e in part))
        watermark = newest - DELAY_MS
    for g in groups:
        g.batch([], watermark)  # timers behind the last watermark fire
    log = ChangeLog(str(folder) + ".log").entries()
    assert [c.seq for c in log] == [1, 2]
    switch = log[1].watermark
    assert switch == max(e["ts"] for p in parts[:3] for e in p) - DELAY_MS
    assert [str(p) for p in log[1].rules.problems] == [
        f"{folder}/typo.json: line 1, column 31: not valid JSON: Expecting property name "
        "enclosed in double quotes"]
    # zz's group was not called in the micro-batch the change was found in
    called_then = {k for w, k in groups[0].calls if w == switch}
    assert called_then and "zz" not in called_then
    rows = [r for g in groups for r in g.rows]
    expected = oracle(events, [(MIN_WATERMARK, BEFORE), (switch, AFTER)], watermark, on_change)
    assert {(r[0], r[1]) for r in expected} == {("testing", 1), ("testing", 2), ("pair", 1),
                                                ("triple", 1), ("burst", 1)}
    # zz's tiny charges were waiting when the rules changed: version 2 took them
    assert [r[:4] for r in expected if r[3] == "zz"] == [("testing", 2, "match", "zz")]
    assert rows_summary(rows) == expected


def test_a_group_state_keeps_the_rules_it_runs_and_lets_retired_ones_go(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    runner = RuleSetRunner(spec_for("card", folder))
    # c1 begins card testing (two small charges) under version 1
    early = [{"id": i, "card": "c1", "ts": 1000 * (i + 1), "amount": 1.0, "v": 9,
              "merchant": "m"} for i in range(2)]
    frame = pd.DataFrame(early)
    frame[TS] = frame["ts"]
    state = runner.run(None, [frame], None).state
    state = runner.run(state, [frame.iloc[:0]], 5000).state
    meta, _, blobs = unpack(state)
    assert [run[1] for run in meta["rules"]["runs"]] == [False, False]  # testing@1, pair@1
    write_rules(folder, AFTER)
    late = pd.DataFrame([{"id": 9, "card": "c1", "ts": 6000, "amount": 900.0, "v": 9,
                          "merchant": "m"}])
    late[TS] = late["ts"]
    result = runner.run(state, [late], 5500)
    meta, _, blobs = unpack(result.state)
    held = json.loads(zlib.decompress(blobs["rules"]))
    # version 1 drains its partial match, pair is gone, triple and version 2 run
    running = sorted((held[d]["name"], held[d]["version"], draining)
                     for _, draining, d in meta["rules"]["runs"])
    assert running == [("testing", 1, True), ("testing", 2, False), ("triple", 1, False)]
    done = runner.run(result.state, [late.iloc[:0]], 7000)
    assert [(r["rule"], r["version"], r["start"], r["end"]) for r in
            done.output.to_dict("records")] == [("testing", 1, 1000, 6000)]
    assert done.state is None  # nothing held: version 1 retired, the group keeps no state


@pytest.mark.parametrize(("on_change", "found"), [("drain", [("testing", 1, 1000, 6000)]),
                                                 ("drop", [])])
def test_a_rule_keyed_anew_by_another_field_drains_where_it_ran(
        tmp_path: Path, on_change: str, found: list[tuple[Any, ...]]) -> None:
    """Version 2 of card testing keyed by merchant: in the card groups version 1 was
    changed, not removed, so its partial match completes under "drain" (it was dropped)."""
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    runner = RuleSetRunner(spec_for("card", folder, on_change))
    smalls = pd.DataFrame([{"id": i, "card": "c1", "ts": 1000 * (i + 1), "amount": 1.0,
                            "v": 9, "merchant": "m"} for i in range(2)])
    smalls[TS] = smalls["ts"]
    state = runner.run(None, [smalls], None).state
    state = runner.run(state, [smalls.iloc[:0]], 5000).state
    moved = Rule("testing", 2, "merchant", card_testing(5), {"smalls": count("small")})
    write_rules(folder, [moved, *BEFORE[1:]])
    big = pd.DataFrame([{"id": 9, "card": "c1", "ts": 6000, "amount": 900.0, "v": 9,
                         "merchant": "m"}])
    big[TS] = big["ts"]
    state = runner.run(state, [big], 5500).state
    done = runner.run(state, [big.iloc[:0]], 7000)
    assert [(r["rule"], r["version"], r["start"], r["end"]) for r in
            done.output.to_dict("records")] == found


def test_a_rule_added_keyed_by_a_field_the_query_does_not_route_is_reported(
        tmp_path: Path) -> None:
    """It cannot run (no event goes to groups of that field), and it said nothing."""
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    spec = replace(spec_for("card", folder), routed=("card", "merchant"))
    runner = RuleSetRunner(spec)
    frame = pd.DataFrame([{"id": 1, "card": "c1", "ts": 1000, "amount": 1.0, "v": 9,
                           "merchant": "m"}])
    frame[TS] = frame["ts"]
    state = runner.run(None, [frame], None).state
    write_rules(folder, [*BEFORE, Rule("by_ip", 1, "ip", BURST)])
    with pytest.warns(RuleWarning, match="rule 'by_ip': keyed by 'ip', a key the query does "
                                         "not route"):
        runner.run(state, [frame.iloc[:0]], 2000)


def test_a_late_event_its_field_rules_refuse_is_still_reported_late(tmp_path: Path) -> None:
    """No card and late: the card rules refuse it (a dead letter of each), and it is late
    for the merchant rules, whose groups leave late events to the card groups (the first
    field's): the card group says so, as the embedded runtime does."""
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    runner = RuleSetRunner(replace(spec_for("card", folder), late=True,
                                   routed=("card", "merchant")))
    frame = pd.DataFrame([{"id": 1, "card": None, "ts": 1000, "amount": 1.0, "v": 9,
                           "merchant": "m"}])
    frame[TS] = frame["ts"]
    rows = runner.run(None, [frame], 5000).output.to_dict("records")
    assert sorted((r["kind"], r["rule"] or "") for r in rows) == [
        ("dead_letter", "pair"), ("dead_letter", "testing"), ("late", "")]


def test_rules_that_cannot_run_on_the_columns_are_reported_not_run() -> None:
    wrong = Rule("wrong", 1, "card", Pattern.begin("a").where(col("merchant") > 5))
    kept = fitting(rule_set([wrong, BEFORE[1]]), KINDS)
    assert [r.name for r in kept] == ["pair"]
    assert [p.message for p in kept.problems] == [
        "stage 'a': (col('merchant') > 5): cannot compare string with numeric "
        "(the rule does not run)"]


# ------------------------------------------------------------ on Spark
def rule_query(spark: Any, source: Path, rules: Any, checkpoint: Path, sink: Path,
               once: bool, **kw: Any) -> Any:
    stream = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
              .parquet(str(source)))
    out = match_stream(stream, rules, time="ts", watermark="10 seconds", timeouts=True,
                       every=0, key_groups=8, **kw)
    writer = (out.writeStream.format("parquet").option("path", str(sink))
              .option("checkpointLocation", str(checkpoint)).outputMode("append"))
    return writer.trigger(availableNow=True).start() if once else writer.start()


def settle(query: Any, rows: int, newest: int, seconds: float = 180) -> None:
    """Wait until a running query has read ``rows`` rows and run a micro-batch at the
    watermark they give (``newest`` - the delay), so its timers behind it have fired:
    ``processAllAvailable`` alone can return before Spark lists files just written."""
    import time
    from datetime import datetime

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        query.processAllAvailable()
        progress = query.recentProgress
        read = sum(p["numInputRows"] for p in progress)
        marks = [p.get("eventTime", {}).get("watermark") for p in progress]
        reached = [datetime.fromisoformat(m.replace("Z", "+00:00")).timestamp() * 1000
                   for m in marks if m]
        if read >= rows and reached and max(reached) >= newest - DELAY_MS:
            return
        time.sleep(0.5)
    raise AssertionError(f"the query did not read {rows} rows and reach its watermark in "
                         f"{seconds} s: {query.lastProgress}")


@pytest.mark.filterwarnings("ignore::cep.runtime.live_rules.RuleWarning")  # typo.json's
@pytest.mark.parametrize(("on_change", "while_running"), [("drain", False), ("drop", True)])
def test_a_rule_directory_edited_mid_stream(spark: Any, tmp_path: Path, on_change: str,
                                            while_running: bool) -> None:
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    events, parts = history()
    write_files(tmp_path / "in", parts[:3])
    args = (spark, tmp_path / "in", folder, tmp_path / "chk", tmp_path / "out")
    if while_running:  # the team edits the rules while the query runs
        query = rule_query(*args, once=False, on_change=on_change)
        settle(query, sum(map(len, parts[:3])), max(e["ts"] for p in parts[:3] for e in p))
        write_rules(folder, AFTER, broken=True)
        # written aside and moved in whole, mtimes set: a listing that caught a file being
        # written would see its mtime as now, and skip the back-dated ones after it as too old
        write_files(tmp_path / "staging", parts[3:], first=3)
        for path in sorted((tmp_path / "staging").iterdir()):
            path.rename(tmp_path / "in" / path.name)
        settle(query, len(events), max(e["ts"] for e in events))
        query.stop()
    else:  # ... or while it is down, and it resumes from its checkpoint
        rule_query(*args, once=True, on_change=on_change).awaitTermination()
        write_rules(folder, AFTER, broken=True)
        write_files(tmp_path / "in", parts[3:], first=3)
        rule_query(*args, once=True, on_change=on_change).awaitTermination()
    rows = [r.asDict(recursive=True) for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    log = ChangeLog(folder.with_name("rules.cep-changes")).entries()
    assert [c.seq for c in log] == [1, 2]
    switch = log[1].watermark
    assert switch == max(e["ts"] for p in parts[:3] for e in p) - DELAY_MS
    final = max(e["ts"] for e in events) - DELAY_MS
    expected = oracle(events, [(MIN_WATERMARK, BEFORE), (switch, AFTER)], final, on_change)
    assert {(r[0], r[1]) for r in expected} == {("testing", 1), ("testing", 2), ("pair", 1),
                                                ("triple", 1), ("burst", 1)}
    # zz's tiny charges were waiting when the rules changed: version 2 took them
    assert [r[:4] for r in expected if r[3] == "zz"] == [("testing", 2, "match", "zz")]
    assert rows_summary(rows) == expected
    measured = [r for r in rows if r["rule"] == "testing" and r["kind"] == "match"]
    assert measured and all(
        json.loads(dict(r["measures"])["smalls"]) == len(dict(r["stages"])["small"])
        for r in measured)


def test_match_batch_runs_a_rule_set_one_shuffle_per_key_field(spark: Any) -> None:
    events = transactions(n=600, cards=8, seed=4)
    df = spark.createDataFrame(pd.DataFrame(events).astype({"v": "int32"}), SCHEMA)
    rows = [r.asDict(recursive=True) for r in match_batch(df, BEFORE, time="ts",
                                                          timeouts=True).collect()]
    expected = oracle(events, [(MIN_WATERMARK, BEFORE)], None, "drain")
    assert {r[0] for r in expected} == {"testing", "pair", "burst"}
    assert rows_summary(rows) == expected
    # a card rule's row has no merchant key, a merchant rule's no card
    assert {(r["rule"], r["card"] is None, r["merchant"] is None) for r in rows} == {
        ("testing", False, True), ("pair", False, True), ("burst", True, False)}


def test_problems_of_single_rules_are_reported_and_the_others_run(
        spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame(pd.DataFrame(transactions(n=50, cards=2)).astype({"v": "int32"}),
                               SCHEMA)
    folder = tmp_path / "rules"
    write_rules(folder, [*BEFORE, Rule("by_device", 1, "device", BURST)], broken=True)
    with pytest.warns(RuleWarning) as seen:
        out = match_batch(df, folder, time="ts")
    messages = [str(w.message) for w in seen]
    assert any("typo.json: line 1" in m for m in messages)
    assert any("key 'device': field 'device' is not in the DataFrame" in m for m in messages)
    assert out.columns[:4] == ["card", "merchant", "kind", "rule"]
    with pytest.raises(InputError, match="no rule of the rule set can run"), \
            pytest.warns(RuleWarning, match="field 'device' is not in the DataFrame"):
        match_batch(df, [Rule("by_device", 1, "device", BURST)], time="ts")
    with pytest.raises(InputError, match="give their own key"):
        match_batch(df, BEFORE, key="card", time="ts")
    with pytest.raises(InputError, match="a pattern needs key="):
        match_batch(df, BURST, time="ts")



def test_an_event_is_counted_and_refused_once_whatever_the_number_of_key_fields(
        spark: Any) -> None:
    """Each event goes to a group of each key field: the events, and the dead letter of an
    event without a time, were counted and written once per field; a card rule refusing an
    event without a card named no rule (the embedded runtime names it)."""
    from cep.runtime.spark import SparkMetrics

    big = Pattern.begin("b").where(col("amount") > 500)
    rules = [Rule("card_big", 1, "card", big), Rule("merchant_big", 1, "merchant", big)]
    rows = [(0, "c1", 1_000, 600.0, 0, "m1"), (1, "c2", None, 900.0, 0, "m1"),
            (2, None, 2_000, 700.0, 0, "m2")]
    df = spark.createDataFrame(rows, SCHEMA)
    metrics = SparkMetrics(spark)
    out = match_batch(df, rules, time="ts", dead_letters=True, metrics=metrics).collect()
    assert sorted(((r.rule or ""), r.event.id) for r in out if r.kind == "dead_letter") == [
        ("", 1), ("card_big", 2)]
    assert sorted((r.rule, r.start) for r in out if r.kind == "match") == [
        ("card_big", 1_000), ("merchant_big", 1_000), ("merchant_big", 2_000)]
    assert {k: metrics.as_dict()[k] for k in ("events", "dead_letters")} == {
        "events": 3, "dead_letters": 1}


@pytest.mark.filterwarnings("ignore::cep.runtime.live_rules.RuleWarning")  # the broken file
def test_a_restarted_query_routes_the_field_of_a_rule_whose_file_broke(
        spark: Any, tmp_path: Path) -> None:
    """burst (the only rule keyed by merchant) runs on while its file does not load; a
    query restarted then worked out its key fields from the files that load, so merchant
    was no longer routed and burst stopped without a word."""
    from cep.runtime.spark.schema import make_rule_specs

    df = spark.createDataFrame(pd.DataFrame(transactions(n=20, cards=2)).astype({"v": "int32"}),
                               SCHEMA)
    folder = tmp_path / "rules"
    write_rules(folder, BEFORE)
    ChangeLog(str(folder) + ".log").record(rule_set(BEFORE), MIN_WATERMARK)
    (folder / "burst.json").write_text('{"name": "burst", "version": 1,')
    specs = make_rule_specs(df, folder, time="ts", engine="numba", timeouts=False,
                            late=False, changes=str(folder) + ".log")
    assert [spec.rule_key for spec in specs] == ["card", "merchant"]


def test_the_change_log_refuses_a_version_that_ran_before_as_another_rule(tmp_path: Path) -> None:
    """pair 1 -> 2 -> 1 again but another rule: the log records version 2 still in force
    and the problem, so every group makes the same call (a group's own state may never
    have held version 1)."""
    log = ChangeLog(tmp_path / "log")
    log.record(rule_set([Rule("pair", 1, "card", PAIR)]), 1_000)
    log.record(rule_set([Rule("pair", 2, "card", TRIPLE)]), 2_000)
    entries = log.record(rule_set([Rule("pair", 1, "card", BURST)]), 3_000)
    last = entries[-1].rules
    assert (last.rules["pair"].version, last.rules["pair"].pattern) == (2, TRIPLE)
    assert [p.message for p in last.problems] == [
        "rule 'pair' version 1 ran before as another rule: give the change a new version "
        "(it was not applied; version 2 still runs)"]
    back = log.record(rule_set([Rule("pair", 1, "card", PAIR)]), 4_000)[-1].rules
    assert (back.rules["pair"].version, back.problems) == (1, ())  # the same version 1


# -------------------------------------------- restarted with other rules (found by a check)
T0 = 1_709_542_800_000
#: two small charges, then a big one within ten minutes
TESTING = Rule("testing", 1, "card", Pattern.begin("small").where(col("amount") < 5).times(2)
               .followed_by("big").where(col("amount") > 500).within(timedelta(minutes=10)))


def _restarted(spark: Any, base: Path, rules: Any, **kw: Any) -> list[tuple[Any, ...]]:
    """One availableNow run of a JSON file stream over ``base/data`` on ``base/chk``; every
    row written so far as (rule, version, account, card, start, end)."""
    stream = spark.readStream.schema("account string, card string, ts long, amount double"
                                     ).json(str(base / "data"))
    out = match_stream(stream, rules, time="ts", watermark="10 seconds", **kw)
    (out.writeStream.format("parquet").option("path", str(base / "out"))
     .option("checkpointLocation", str(base / "chk")).trigger(availableNow=True).start()
     .awaitTermination())
    rows = spark.read.option("mergeSchema", "true").parquet(str(base / "out")).collect()
    return sorted((r.rule, r.version, r["account"] if "account" in r else None, r.card,
                   r.start, r.end) for r in rows)


def _add(base: Path, name: str, rows: list[dict[str, Any]]) -> None:
    import time

    time.sleep(1.1)  # a new modification time: Spark lists the file as new
    (base / "data").mkdir(parents=True, exist_ok=True)
    (base / "data" / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_query_restarted_with_other_key_fields_finds_each_fields_state(
        spark: Any, tmp_path: Path) -> None:
    """Each key field's groups were numbered by the field's place in the sorted list: a
    field added before ``card`` moved card's state into the account groups (a card-keyed
    rule matched across two cards), and one whose last rule left crashed the query
    (IndexError).  Groups are named by their fields now; a retired field's go."""
    base, rules = tmp_path / "q", tmp_path / "q" / "rules"
    rules.mkdir(parents=True)
    write_rules(rules, [TESTING])
    s = lambda t: T0 + t * 1000  # noqa: E731
    _add(base, "f0.json", [{"account": "a1", "card": "c1", "ts": s(1), "amount": 1.0},
                           {"account": "a1", "card": "c1", "ts": s(2), "amount": 2.0}])
    assert _restarted(spark, base, str(rules)) == []
    _add(base, "f1.json", [{"account": "c1", "card": "c7", "ts": s(60), "amount": 900.0},
                           {"account": "a9", "card": "c9", "ts": s(200), "amount": 3.0}])
    # the same rules, restarted with an account key field too (sorted before card)
    assert _restarted(spark, base, str(rules), key_fields=["account"]) == []
    write_rules(rules, [TESTING, Rule("acct_big", 1, "account",
                                      Pattern.begin("a").where(col("amount") > 500))])
    _add(base, "f2.json", [{"account": "a1", "card": "c1", "ts": s(300), "amount": 900.0},
                           {"account": "a9", "card": "c9", "ts": s(500), "amount": 3.0}])
    # card c1's two small charges kept across both restarts: its big one completes them
    assert _restarted(spark, base, str(rules)) == [
        ("acct_big", 1, "a1", None, s(300), s(300)), ("testing", 1, None, "c1", s(1), s(300))]
    (rules / "acct_big.json").unlink()  # account's only rule leaves: its groups retire
    _add(base, "f3.json", [{"account": "a1", "card": "c1", "ts": s(600), "amount": 1.0},
                           {"account": "a1", "card": "c1", "ts": s(601), "amount": 1.0},
                           {"account": "a1", "card": "c1", "ts": s(602), "amount": 900.0},
                           {"account": "a9", "card": "c9", "ts": s(900), "amount": 3.0}])
    found = _restarted(spark, base, str(rules))  # was: IndexError in the group function
    assert ("testing", 1, None, "c1", s(600), s(602)) in found


def test_a_query_restarted_with_another_fixed_list_of_rules_is_refused(
        spark: Any, tmp_path: Path) -> None:
    """Keys with state ran the old list and the others the new one (found by a check)."""
    base = tmp_path / "q"
    _add(base, "f0.json", [{"account": "a", "card": "c1", "ts": T0 + 1000, "amount": 1.0}])
    assert _restarted(spark, base, [TESTING], key_groups=None) == []
    _add(base, "f1.json", [{"account": "a", "card": "c1", "ts": T0 + 2000, "amount": 1.0}])
    changed = Rule("testing", 2, "card", TESTING.pattern.within(timedelta(minutes=20)))
    with pytest.raises(Exception, match="another fixed list of rules"):
        _restarted(spark, base, [changed], key_groups=None)
