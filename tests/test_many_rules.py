"""Several named rules in one job (#11 item 3): one intake, one buffer, one release per
watermark, every rule's engine fed the same released events; each rule keyed by its own
field; every record says which rule produced it; a checkpoint holds every rule's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cep import Pattern, col
from cep.runtime import IterableSource, Job, ListSink

ENGINES = ["reference", "numba"]

#: a small charge, then a large one, of the same key
SMALL_THEN_LARGE = (Pattern.begin("small").where(col("amount") < 5)
                    .followed_by("large").where(col("amount") > 500))
#: two declines in a row
TWO_DECLINES = Pattern.begin("d1").where(col("status") == "declined").next("d2").where(
    col("status") == "declined")

ROWS = [
    {"card": "c1", "ip": "10.0.0.1", "amount": 2, "status": "ok", "ts": 1},
    {"card": "c2", "ip": "10.0.0.1", "amount": 3, "status": "declined", "ts": 2},
    {"card": "c1", "ip": "10.0.0.2", "amount": 900, "status": "declined", "ts": 3},
    {"card": "c3", "ip": "10.0.0.2", "amount": 1, "status": "declined", "ts": 4},
]

#: the key column of each rule's records: named after the field the rule is keyed by
KEY_COLUMN = {"small_then_large": "card", "declines_per_ip": "ip"}


def key(record: dict[str, Any]) -> Any:
    """The key of a rule's record, from the column named after the rule's key field."""
    return record[KEY_COLUMN[record["rule"]]]


def _run(rules: dict[str, Any], engine: str, rows: list[dict[str, Any]] = ROWS,
         **kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    out = ListSink()
    job = (Job(IterableSource(rows, batch_size=kwargs.pop("batch_size", 2))).key_by("card")
           .timestamps("ts").match(rules, engine=engine))
    summary = job.sink(out, kinds=("match", "dead_letter")).run(**kwargs)
    return out.records, summary


@pytest.mark.parametrize("engine", ENGINES)
def test_each_rule_matches_on_its_own_key_and_records_name_the_rule(engine: str) -> None:
    records, summary = _run({"small_then_large": SMALL_THEN_LARGE,
                             "declines_per_ip": (TWO_DECLINES, "ip")}, engine)
    found = sorted((r["rule"], key(r), r["start"], r["end"]) for r in records)
    # by card: c1 took 2 then 900; by ip: 10.0.0.2 saw two declines in a row (c1, c3)
    assert found == [("declines_per_ip", "10.0.0.2", 3, 4), ("small_then_large", "c1", 1, 3)]
    assert summary.matches == 2 and summary.events_in == 4


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rule_gives_what_it_gives_alone(engine: str) -> None:
    both, _ = _run({"a": SMALL_THEN_LARGE, "b": (TWO_DECLINES, "ip")}, engine)
    alone, _ = _run({"a": SMALL_THEN_LARGE}, engine)
    assert [r for r in both if r["rule"] == "a"] == alone


@pytest.mark.parametrize("engine", ENGINES)
def test_a_null_key_of_one_rule_refuses_the_event_for_that_rule_only(engine: str) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2]["ip"] = None  # the large charge has no ip: by-ip rule cannot key it
    records, summary = _run({"small_then_large": SMALL_THEN_LARGE,
                             "declines_per_ip": (TWO_DECLINES, "ip")}, engine, rows)
    matches = sorted((r["rule"], key(r)) for r in records if r["kind"] == "match")
    dead = [(r["rule"], r["reason"], r["event"]["ts"]) for r in records
            if r["kind"] == "dead_letter"]
    assert matches == [("small_then_large", "c1")]
    assert dead == [("declines_per_ip", "key field 'ip' is null", 3)]
    # its record names the key of the rule that refused it, as that rule's matches do
    [letter] = [r for r in records if r["kind"] == "dead_letter"]
    assert "ip" in letter and letter["ip"] is None and "card" not in letter
    # the small_then_large rule still processed it: a dead letter of one rule only
    assert summary.dead_letters == 0 and summary.processed == 4
    counts = ("matches", "timeouts", "dead_letters", "dropped_partial_matches")
    assert {name: [c[k] for k in counts] for name, c in summary.rules.items()} == {
        "small_then_large": [1, 0, 0, 0], "declines_per_ip": [0, 0, 1, 0]}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_null_job_key_refuses_the_event_only_for_the_rules_keyed_by_it(engine: str) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2]["card"] = None  # the large charge has no card: the by-ip rule still reads it
    records, summary = _run({"small_then_large": SMALL_THEN_LARGE,
                             "declines_per_ip": (TWO_DECLINES, "ip")}, engine, rows)
    dead = [(r["rule"], r["reason"], r["event"]["ts"]) for r in records
            if r["kind"] == "dead_letter"]
    assert dead == [("small_then_large", "key field 'card' is null", 3)]
    assert [r["rule"] for r in records if r["kind"] == "match"] == ["declines_per_ip"]
    assert summary.dead_letters == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_an_event_no_rule_can_key_is_one_dead_letter_of_the_job(engine: str) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2]["card"] = rows[2]["ip"] = None
    records, summary = _run({"small_then_large": SMALL_THEN_LARGE,
                             "declines_per_ip": (TWO_DECLINES, "ip")}, engine, rows)
    dead = [r for r in records if r["kind"] == "dead_letter"]
    assert [(r.get("rule"), r["event"]["ts"]) for r in dead] == [(None, 3)]
    assert summary.dead_letters == 1 and summary.processed == 3


@pytest.mark.parametrize("order", ["as written", "reversed"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_checkpoint_holds_every_rule_and_resume_gives_the_same_output(
        engine: str, order: str, tmp_path: Path) -> None:
    """Resumed with the rules written in another order, each rule gets its own state back."""
    rules = {"small_then_large": SMALL_THEN_LARGE, "declines_per_ip": (TWO_DECLINES, "ip")}
    whole, _ = _run(rules, engine)
    polls = iter(range(10))
    chk, out = tmp_path / "chk", ListSink()

    def job(given: dict[str, Any]) -> Job:
        return (Job(IterableSource(ROWS, batch_size=1)).key_by("card").timestamps("ts")
                .match(given, engine=engine).checkpoint(chk, every_events=1).sink(out))

    first = job(rules).run(stop=lambda: next(polls) == 1)  # stops after two events
    assert first.stopped and first.partial_matches >= 1
    again = rules if order == "as written" else dict(reversed(rules.items()))
    assert job(again).run(resume=True).resumed_from is not None
    got = sorted((r["rule"], key(r), r["start"], r["end"]) for r in out.records)
    assert got == sorted((r["rule"], key(r), r["start"], r["end"]) for r in whole)


def test_rules_are_named_patterns() -> None:
    from cep import CEPError

    with pytest.raises(CEPError, match="expected a Pattern"):
        Job(IterableSource([])).match({"x": "not a pattern"})  # type: ignore[dict-item]
    with pytest.raises(CEPError, match="non-empty names"):
        Job(IterableSource([])).match({})


@pytest.mark.parametrize("broken", [
    Pattern.begin("login").where(col("amount")),  # a number, not a condition
    Pattern.begin("login").where(col("status") > 5),  # text compared with a number
], ids=["number as condition", "text as number"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_rule_whose_types_do_not_fit_the_input_refuses_its_events_only(
        engine: str, broken: Pattern) -> None:
    """One broken rule never takes the others down (found by a check: on the numba engine
    the type error, found when the pattern is compiled for the input's columns, stopped
    the whole job, while the reference engine refused each event for that rule)."""
    records, summary = _run({"takeover": broken, "small_then_large": SMALL_THEN_LARGE}, engine)
    assert [(r["rule"], key(r)) for r in records if r["kind"] == "match"] == [
        ("small_then_large", "c1")]
    dead = [r for r in records if r["kind"] == "dead_letter"]
    assert [(r["rule"], r["event"]["ts"]) for r in dead] == [("takeover", t) for t in range(1, 5)]
    assert all(("status" if "status" in str(broken.to_json()) else "amount") in r["reason"]
               for r in dead)
    assert {n: (c["matches"], c["dead_letters"]) for n, c in summary.rules.items()} == {
        "small_then_large": (1, 0), "takeover": (0, 4)}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rule_set_of_one_rule_that_does_not_fit_the_input_refuses_its_events(
        engine: str) -> None:
    """A rule set may be mended while the job runs (a new version): its one rule that
    cannot read the input does not stop the job, on either engine."""
    from cep.rules import Rule

    broken = Rule("takeover", 1, "card", Pattern.begin("login").where(col("status") > 5))
    out = ListSink()
    summary = (Job(IterableSource(ROWS)).timestamps("ts").rules([broken], engine=engine)
               .sink(out, kinds=("match", "dead_letter")).run())
    assert summary.matches == 0 and summary.processed == 0
    assert len(out.records) == 4 and all("status" in r["reason"] for r in out.records)


@pytest.mark.parametrize("engine", ENGINES)
def test_alone_a_pattern_whose_types_do_not_fit_the_input_refuses_each_event(
        engine: str) -> None:
    """One pattern, as several: each event it cannot read is a dead letter and the job
    goes on (the numba engine, compiling the pattern for the first batch's column types,
    stopped the job; now it compiles it for the types the pattern implies, and a batch
    that fits may still come: a first file of text amounts, found by a check)."""
    unreadable = Pattern.begin("login").where(col("amount"))  # a number, not a condition
    out = ListSink()
    summary = (Job(IterableSource(ROWS)).timestamps("ts").match(unreadable, engine=engine)
               .sink(out, kinds=("match", "dead_letter")).run())
    assert summary.dead_letters == 4 and summary.matches == 0
    assert all(r["reason"].endswith("the pattern needs true/false") for r in out.records)


def test_a_first_file_of_text_where_the_pattern_compares_numbers_does_not_decide(
        tmp_path: Path) -> None:
    """Text amounts in the first file, numbers after: the text rows are dead letters and
    the numbers match, on both engines alike."""
    from cep.runtime import FileSource

    first = [{"card": "c1", "amount": "2", "ts": 1}, {"card": "c1", "amount": "3", "ts": 2}]
    then = [{"card": "c1", "amount": 2.0, "ts": 3}, {"card": "c1", "amount": 900.0, "ts": 4}]
    pq.write_table(pa.Table.from_pylist(first), tmp_path / "a_first.parquet")
    pq.write_table(pa.Table.from_pylist(then), tmp_path / "b_then.parquet")
    found = {}
    for engine in ENGINES:
        out = ListSink()
        source = FileSource(tmp_path)
        summary = (Job(source).key_by("card").timestamps("ts")
                   .match(SMALL_THEN_LARGE, engine=engine)
                   .sink(out, kinds=("match", "dead_letter")).run())
        found[engine] = sorted((r["kind"], r["event"]["ts"] if "event" in r else r["start"])
                               for r in out.records)
        assert summary.matches == 1 and summary.dead_letters == 2
    assert found["numba"] == found["reference"] == [
        ("dead_letter", 1), ("dead_letter", 2), ("match", 3)]


def test_engines_fed_the_same_keys_keep_their_own_key_ids() -> None:
    """The rules of a job share the released batch's keys; an engine takes the key ids an
    engine before it worked out only when it holds the same keys, so an engine with
    another history (it saw another key first) still finds each key's own matches."""
    import numpy as np

    from cep.nfa.engine import make_engine
    from cep.nfa.events import Events, Keys

    p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    rows = [{"k": "y", "v": 1}, {"k": "x", "v": 2}, {"k": "y", "v": 2}]
    times = np.array([2, 3, 4], np.int64)
    shared = Keys.of_values([r["k"] for r in rows])
    fresh, twin, seasoned = (make_engine(p, "numba") for _ in range(3))
    seasoned.process(Events.of([{"k": "x", "v": 1}], Keys.of_values(["x"]),
                               np.array([1], np.int64)))
    found = {name: sorted((m.key, m.start, m.end) for m in engine.process(
        Events.of(rows, shared, times)).found)
        for name, engine in (("fresh", fresh), ("twin", twin), ("seasoned", seasoned))}
    assert found == {"fresh": [("y", 2, 4)], "seasoned": [("x", 1, 3), ("y", 2, 4)],
                     "twin": [("y", 2, 4)]}


def test_engines_holding_the_same_keys_take_the_first_ones_key_ids() -> None:
    """Key ids are worked out once per batch for the rules of a job: an engine holding
    the same keys as the first engine fed the batch takes its ids (and its new keys) as
    they are, batch after batch, without comparing key lists; one with another history
    works its own out."""
    import numpy as np

    from cep.nfa.engine import make_engine
    from cep.nfa.events import Events, Keys

    p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    first, second, seasoned = (make_engine(p, "numba") for _ in range(3))
    seasoned.process(Events.of([{"k": "z", "v": 1}], Keys.of_values(["z"]),
                               np.array([0], np.int64)))
    for batch in ([("x", 1), ("y", 1)], [("y", 2), ("z", 1), ("x", 2)]):
        rows = [{"k": k, "v": v} for k, v in batch]
        keys = Keys.of_values([k for k, _ in batch])
        times = np.arange(len(rows), dtype=np.int64) + 10 * len(batch)
        for engine in (first, second, seasoned):
            engine.process(Events.of(rows, keys, times))
        assert second.core.key_token is first.core.key_token
        assert second.core.key_values == first.core.key_values
        assert seasoned.core.key_token is not first.core.key_token
    assert first.core.key_values == ["x", "y", "z"]
    assert seasoned.core.key_values == ["z", "x", "y"]


def test_engines_fed_the_same_keys_side_by_side_work_the_key_ids_out_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules of a job run on threads, a key field's first rule without a head start:
    engines fed the same keys at the same moment wait for the one working the key ids
    out and take them, batch after batch, rather than each working out its own."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from cep.nfa.columnar import ColumnarEngine
    from cep.nfa.engine import make_engine
    from cep.nfa.events import Events, Keys

    worked_out = []
    new_ids = ColumnarEngine._new_key_ids

    def slow(self: ColumnarEngine, keys: Any) -> Any:
        worked_out.append(self)
        threading.Event().wait(0.01)  # long enough for every other engine to arrive
        return new_ids(self, keys)

    monkeypatch.setattr(ColumnarEngine, "_new_key_ids", slow)
    p = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    engines = [make_engine(p, "numba") for _ in range(6)]
    with ThreadPoolExecutor(len(engines)) as pool:
        for batch in range(3):
            rows = [{"k": f"k{i % 50}", "v": 1 + (i // 50 + batch) % 2} for i in range(200)]
            events = Events.of(rows, Keys.of_values([r["k"] for r in rows]),
                               np.arange(200, dtype=np.int64) + 200 * batch)
            start = threading.Barrier(len(engines))

            def step(engine: Any, start: Any = start, events: Events = events) -> Any:
                start.wait()  # all at the same moment
                return engine.process(events).found

            found = list(pool.map(step, engines))
            assert all(len(f) == len(found[0]) > 0 for f in found)
    assert len(worked_out) == 3, "once per batch"
    assert len({id(e.core.key_token) for e in engines}) == 1


def test_parquet_files_hold_each_rules_columns_only(tmp_path: Any) -> None:
    """Rules with other stages and keys write Parquet files of their own in an epoch (one
    file would give every row every rule's columns, mostly null); reading the sink gives
    every record, epoch by epoch, and a resume commits or drops the files of an epoch
    together."""
    import pyarrow.parquet as pq

    from cep.runtime import FileSink

    sink = FileSink(tmp_path / "matches.parquet")
    job = (Job(IterableSource(ROWS, batch_size=2)).key_by("card").timestamps("ts")
           .match({"small_then_large": SMALL_THEN_LARGE, "declines_per_ip": (TWO_DECLINES, "ip")},
                  engine="numba").sink(sink)
           .checkpoint(tmp_path / "chk", every_events=100))  # one epoch: the whole input
    job.run()
    files = sink.files()
    assert [f.name for f in files] == ["part-000000001.parquet", "part-000000001.1.parquet"]
    assert [sorted(pq.read_schema(f).names) for f in files] == [
        ["card", "end", "kind", "large", "match_id", "rule", "small", "start", "timeout_at"],
        ["d1", "d2", "end", "ip", "kind", "match_id", "rule", "start", "timeout_at"]]
    assert sorted((r["rule"], key(r)) for r in sink.read()) == [
        ("declines_per_ip", "10.0.0.2"), ("small_then_large", "c1")]
    # an epoch's files are pending together until its checkpoint commits them
    sink.write([{"kind": "match", "rule": "small_then_large", "card": "c9"}])
    sink.write([{"kind": "match", "rule": "declines_per_ip", "ip": "10.0.0.9"}])
    sink.prepare(7)
    assert sorted(p.name for p in (tmp_path / "matches").glob("*.pending")) == [
        "part-000000007.1.parquet.pending", "part-000000007.parquet.pending"]
    sink.recover(6)
    assert not list((tmp_path / "matches").glob("part-000000007*"))
    sink.write([{"kind": "match", "rule": "small_then_large", "card": "c9"}])
    sink.write([{"kind": "match", "rule": "declines_per_ip", "ip": "10.0.0.9"}])
    sink.prepare(7)
    sink.commit(7)
    assert [f.name for f in sink.files()][2:] == [
        "part-000000007.parquet", "part-000000007.1.parquet"]


def test_rules_run_side_by_side_give_what_they_give_one_after_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of many events run the rules of a job on the process's rule threads (the
    first rule of each key field first: the others take its key ids): the same records in
    the same order, and the same counts, as the rules one after another."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pyarrow as pa

    import cep.runtime.threads as worker_threads

    rng = np.random.default_rng(7)
    n = 30_000
    table = pa.table({
        "card": rng.integers(0, 300, n).astype(str), "ip": rng.integers(0, 40, n).astype(str),
        "amount": rng.choice([1.0, 2.0, 50.0, 900.0], n),
        "status": rng.choice(["ok", "declined"], n, p=[0.7, 0.3]),
        "ts": np.sort(rng.integers(0, 10_000_000, n))})
    rules = {f"{name}-{i}": (p.within(w), k) for i, w in enumerate((1_000, 60_000, 600_000))
             for name, p, k in (("small_then_large", SMALL_THEN_LARGE, "card"),
                                ("declines_per_ip", TWO_DECLINES, "ip"))}
    got = {}
    for threads in (1, 3):
        pool = ThreadPoolExecutor(threads) if threads > 1 else None
        monkeypatch.setattr(worker_threads, "_POOL", [pool])
        out = ListSink()
        summary = (Job(IterableSource(table, batch_size=8_192)).key_by("card").timestamps("ts")
                   .match(rules, engine="numba").sink(out).run())
        got[threads] = (out.records, summary.matches, summary.timeouts,
                        summary.peak_partial_matches, summary.rules)
        if pool is not None:
            pool.shutdown()
    assert got[3] == got[1]
    assert got[1][1] > 1_000 and got[1][2] > 1_000


def test_rules_of_the_same_columns_make_one_table_with_each_rows_rule() -> None:
    """A file sink makes the tables of rules whose outputs have the same columns (variants
    of one pattern), when they come one after another, into one: the same rows in the
    same order as a table per rule, each naming its rule and version."""
    import numpy as np
    import pyarrow as pa

    from cep.nfa.engine import make_engine
    from cep.nfa.events import Events, Keys
    from cep.runtime.records import table_rows
    from cep.runtime.sinks import MatchBatch, _tables

    rows = [{"card": c, "amount": a, "ts": t} for t, (c, a) in enumerate(
        [("c1", 2), ("c2", 3), ("c1", 900), ("c2", 4), ("c2", 700), ("c1", 1), ("c1", 800)])]
    events = Events(pa.Table.from_pylist(rows), Keys.of_values([r["card"] for r in rows]),
                    np.array([r["ts"] for r in rows], np.int64))
    variants = {"a": SMALL_THEN_LARGE, "b": SMALL_THEN_LARGE.within(2),
                "c": TWO_DECLINES, "d": SMALL_THEN_LARGE.within(3)}
    pending: list[Any] = []
    for name, pattern in variants.items():
        found = make_engine(pattern, "numba").process(events).found.with_rule(name, 7)
        stages = ["d1", "d2"] if name == "c" else ["small", "large"]
        pending.append(MatchBatch(found, "card", stages))
    pending.insert(3, [{"kind": "dead_letter", "reason": "r"}])
    made = _tables(pending)
    assert [type(t).__name__ for t in made] == ["Table", "Table", "list", "Table"]
    assert made[0].num_rows == len(pending[0].found) + len(pending[1].found) > 2
    assert table_rows(made[0]) == table_rows(pending[0].table) + table_rows(pending[1].table)
    assert [r["rule"] for r in table_rows(made[0])] == (
        ["a"] * len(pending[0].found) + ["b"] * len(pending[1].found))
    assert {r["version"] for r in table_rows(made[0])} == {7}
    assert table_rows(made[3]) == table_rows(pending[4].table)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_a_forked_process_runs_rules_on_threads_of_its_own() -> None:
    """A child forked after the worker threads started (a Spark worker, a process pool)
    has none of its parent's threads: it makes its own pool instead of queueing work on
    threads that do not exist in it."""
    import os

    from cep.runtime.threads import worker_threads

    pool = worker_threads()
    if pool is None:
        pytest.skip("one core: rules run on the job's thread")
    assert list(pool.map(abs, [-1, -2])) == [1, 2]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            own = worker_threads()
            ok = own is not None and own is not pool and list(own.map(abs, [-3])) == [3]
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(child, 0)


def test_the_rules_of_a_job_hold_one_copy_of_the_events_they_still_need() -> None:
    """Two rules wait on the first event of a batch of 4,096 whose other events they are
    done with: once collected, the batch is cut down for both at once, to that event, in
    one table both hold (a copy each held it once per rule, took a ``take`` per rule, and
    made a checkpoint write it twice); then both match it."""
    from cep.runtime.operator import CepOperator

    wait = Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
    op = CepOperator({"one": wait, "two": wait}, "numba", key="card", time="ts")
    n = 4_096
    batch = pa.table({"card": ["open"] + [f"c{i}" for i in range(1, n)],
                      "v": [1] + [0] * (n - 1), "ts": list(range(n))})
    op.process_batch(batch)
    op.process_watermark(n)
    cores = [rule.engine.core for rule in op.rules]
    for core in cores:
        assert not core.cut_alone  # one job, several rules: cut once for all of them
        core.gc_min = 1
        core._collect()
        core._collect()  # old enough to be cut, and 1 event of 4,096 is live
    op.process_batch(pa.table({"card": ["other"], "v": [0], "ts": [n + 1]}))
    op.process_watermark(n + 2)  # the rules' next step: the cut is shared then
    held = [[kept.batch for kept in core._retained
             if kept.batch.rows.column("card").to_pylist()[:1] == ["open"]] for core in cores]
    assert [[len(b) for b in h] for h in held] == [[1], [1]]  # not the batch of 4,096
    assert held[0][0] is held[1][0]
    out, _ = op.process_batch(pa.table({"card": ["open"], "v": [2], "ts": [n + 3]}))
    out.found += op.finish().found
    assert sorted((m.rule, m.key, m["a"][0]["ts"]) for part in out.found
                  for m in part.matches()) == [("one", "open", 0), ("two", "open", 0)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rules_cutting_batches_together_give_what_each_gives_alone_across_a_restore(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random cards and amounts in batches of 1,500, engines collecting after every batch:
    three rules with long waits cut their sparse batches together (one copy for all,
    rebasing their event paths onto it), their short-lived ones go whole; a job of the
    three, stopped twice and resumed from its checkpoints, finds what each rule finds in a
    job of its own, and what the reference engine finds."""
    import random

    from cep.nfa.columnar import ColumnarEngine

    made = ColumnarEngine.__init__
    cut = []

    def collecting(self: ColumnarEngine, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self.gc_min = 1  # a collection after every batch (the default waits for 64k events)

    monkeypatch.setattr(ColumnarEngine, "__init__", collecting)
    rebase = ColumnarEngine.rebase
    monkeypatch.setattr(ColumnarEngine, "rebase",
                        lambda self, cuts: cut.append(rebase(self, cuts)) or cut[-1])
    rng = random.Random(seed)
    rows = [{"card": f"c{rng.randrange(300)}", "amount": rng.choice([1, 2, 3, 50, 600, 900]),
             "ts": i * 10} for i in range(9_000)]
    rules = {  # a first small charge waits long for its large one; two smalls, then large
        "small_then_large": SMALL_THEN_LARGE,
        "two_small_then_large": Pattern.begin("s").where(col("amount") < 5).times(2)
        .followed_by("l").where(col("amount") > 800),
        "large_then_large": Pattern.begin("a").where(col("amount") > 500).next("b")
        .where(col("amount") > 500),
    }

    def records(given: dict[str, Any], engine: str, stops: int = 0) -> list[tuple[Any, ...]]:
        out, chk = ListSink(), tmp_path / f"chk-{engine}-{'-'.join(given)}-{stops}"

        def job() -> Job:
            return (Job(IterableSource(rows, batch_size=1_500)).key_by("card")
                    .timestamps("ts").match(given, engine=engine)
                    .checkpoint(chk, every_events=1_500).sink(out))

        def third_poll() -> Any:
            polls = iter(range(100))
            return lambda: next(polls) == 2

        summary = job().run(stop=third_poll() if stops else None)
        for _ in range(stops):
            summary = job().run(resume=True, stop=third_poll())
        if summary.stopped:
            job().run(resume=True)
        return sorted((r["rule"], r["card"], r["start"], r["end"]) for r in out.records
                      if r["kind"] == "match")

    together = records(rules, "numba", stops=2)
    assert cut and all(cut), "the rules cut batches together, each taking every cut"
    alone = sorted(m for name, p in rules.items() for m in records({name: p}, "numba"))
    assert together == alone == records(rules, "reference")
    assert len(together) > 100


def test_a_long_lived_rule_lets_go_of_what_the_others_needed_when_they_cut() -> None:
    """A rule waiting for good on one event, and one holding a hundred events of the same
    batch for a while: the batch is cut for both to the 101 events; once the second rule
    is done with its hundred, the first rule's copy is cut again, to its one event (a rule
    waiting for weeks must not keep what others needed for seconds, batch after batch)."""
    import numpy as np

    from cep.nfa.columnar import ColumnarEngine
    from cep.nfa.events import Events
    from cep.nfa.shared_cuts import share_cuts

    waits = Pattern.begin("a").where(col("v") == 1).followed_by("b").where(col("v") == 2)
    brief = Pattern.begin("x").where(col("v") == 5).followed_by("y").where(col("v") == 6)
    engines = [ColumnarEngine(p, {"v": "numeric"}, timeouts=False) for p in (waits, brief)]
    for e in engines:
        e.gc_min = 1
        e.cut_alone = False  # as the operator of a job of several rules says

    def step(rows: Any, t0: int) -> None:
        n = rows.num_rows
        for e in engines:
            e.process(Events.of(rows), np.zeros(n, np.int64), np.arange(t0, t0 + n))
            e._collect()
            e._collect()  # old enough to be cut
        share_cuts(engines)

    def held(e: ColumnarEngine) -> list[int]:
        return sorted(len(kept.batch) for kept in e._retained)

    step(pa.table({"v": [1] + [5] * 100 + [0] * 3_995}), 0)
    assert held(engines[0]) == held(engines[1]) == [101]  # one copy for both
    step(pa.table({"v": [6]}), 5_000)  # the brief rule's hundred match: it holds nothing
    assert held(engines[1]) == []
    step(pa.table({"v": [0]}), 5_001)
    assert held(engines[0])[0] == 1, held(engines[0])


def test_rules_sharing_conditions_over_the_event_give_what_each_gives_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules of a job evaluate an equal condition over the event once per batch and
    key order: the same comparison with another constant (a number, a text, a list), or
    the same condition of a rule keyed by another field (its events in another order),
    is not the same condition; each rule finds what it finds alone and what the
    reference engine finds."""
    import random

    from cep.nfa import columnar

    rng = random.Random(7)
    rows = [{"card": f"c{rng.randrange(40)}", "ip": f"10.0.0.{rng.randrange(25)}",
             "amount": rng.choice([1, 4, 20, 60, 600]),
             "status": rng.choice(["ok", "declined", "fraud"]),
             "flag": rng.choice([None, 1, 5]), "ts": i * 10} for i in range(6_000)]

    def charge_then(limit: float, status: str) -> Pattern:
        return (Pattern.begin("a").where(col("amount") > limit).next("b")
                .where(col("status") == status))

    rules: dict[str, Any] = {
        "over_5": charge_then(5, "declined"),
        "over_50": charge_then(50, "declined"),  # another number
        "over_5_ok": charge_then(5, "ok"),  # another text
        "over_5_by_ip": (charge_then(5, "declined"), "ip"),  # another order
        "listed": Pattern.begin("a").where(col("status").isin(["declined", "fraud"]))
        .next("b").where(col("amount") > 5),
        "listed_other": Pattern.begin("a").where(col("status").isin(["declined", "ok"]))
        .next("b").where(col("amount") > 5),  # another list
        "no_flag_twice": Pattern.begin("a").where(col("flag").is_null()).next("b")
        .where(col("flag").is_null()),  # the field read for its nulls alone
        "no_flag_then_big": Pattern.begin("a").where(col("flag").is_null()).next("b")
        .where(col("flag") > 3),
    }
    evaluated = []
    real = columnar.eval_columns
    monkeypatch.setattr(columnar, "eval_columns",
                        lambda *args: evaluated.append(args[0]) or real(*args))

    def found(given: dict[str, Any], engine: str) -> list[tuple[Any, ...]]:
        out = ListSink()
        (Job(IterableSource(rows, batch_size=1_000)).key_by("card").timestamps("ts")
         .match(given, engine=engine).sink(out, kinds=("match",)).run())
        return sorted((r["rule"], r["start"], r["end"]) for r in out.records)

    together = found(rules, "numba")
    shared = len(evaluated)
    alone = sorted(m for name, rule in rules.items() for m in found({name: rule}, "numba"))
    assert together == alone == found(rules, "reference")
    assert len(together) > 1_000
    # over_5 and over_5_ok share "amount > 5" (and listed, listed_other the same as
    # their second condition); over_50 and over_5_by_ip share none of it
    assert shared < len(evaluated) - shared
