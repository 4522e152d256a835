"""100 rules in one job (issue #13): one job of the pattern library's 12 patterns with
varied parameters against one rule and against 100 separate jobs, over 1M events.

    make bench-rules                       # 1M events
    python -m benchmarks.rules --quick     # 100k events, to try it out
    python -m benchmarks.rules --events 200000 --separate 24

**Rules** (:func:`rules`): 100 :class:`cep.rules.Rule` objects (version 1, each keyed by
its pattern's key field, :data:`KEY_FIELDS`), built from the 12 patterns of
:data:`cep.patterns.library.LIBRARY` with the parameters in :data:`VARIANTS` (thresholds,
counts, windows; 8 or 9 per pattern).  Rule ``card_testing-1`` is the library's
card testing with its defaults (pattern A of ``benchmarks/replay.py``): the one-rule job.

**Data** (:func:`stream`): one mixed stream of events of all 12 kinds, from the library's
own generators (:mod:`cep.patterns.synthetic`): for each pattern, datasets generated in
turn with each of its rules' parameters (so every rule has injected episodes and near
misses of its own) and new seeds, until the pattern has 1/12 of the events; each dataset
shifted to start somewhere in a 30-day span (refund datasets span the 30 days), its keys
made its own (``"<pattern>.<dataset>/<key>"``).  The events of all kinds are merged in
time order, cut to N events and written in arrival order (each event 0-5 s late, as
``benchmarks/data.py`` does) to one Parquet file with every field of every kind (a field
an event's kind does not have is null).  The entity an event is about (its card, account,
customer, sensor, device, room, service or user) is copied into all eight key fields: a
rule keyed by a field the event does not hold would refuse it as a dead letter (one
per rule per event: ~90 million for this stream), so each rule sees every event, keyed
by its entity; conditions on fields an event's kind does not have read null and do not
hold.  Generated once and cached in ``benchmarks/.data``.

**Cases**, each in a fresh process (``benchmarks.run._spawn``), each job the same call on
the first 1,000 events first (the numba kernel loaded, the rules compiled once), then
timed, the way ``benchmarks/replay.py`` times its replay case.  Every job is
:func:`cep.runtime.replay.replay` (what ``cep replay`` runs) of the rules given as
``{name: (pattern, key)}``, with the settings of ``benchmarks/replay.py``'s replay case: a
``FileSource`` of the Parquet file (batches of 65,536), bounded out-of-orderness 5 s,
far-future guard 365 days, the default cap of partial matches, numba engine, a
checkpoint every 100,000 events into a temporary directory, matches, timeouts, late
events and dead letters to Parquet file sinks:

1. **one rule**: ``card_testing-1`` alone;
2. **100 rules**: all of them in one job.  For comparison, one process each: (2b) the
   same job with ``Job.rules(rule_set(all 100))`` instead of ``Job.match`` of named rules
   (the rule-set path; before 405bd8d its check refused the rules of 4 of the 12
   patterns), and (1c, 2c) cases 1 and 2 without timeouts, as ``cep replay`` runs by
   default (``replay(..., timeouts=False)``; cases 1 and 2 track them and write them out,
   ``cep replay --timeouts``), best of the same number of processes;
3. **100 separate jobs**: one job per rule (as in case 1), one after another, in
   :data:`SEPARATE_CHUNK`-rule processes; the total is the sum of the jobs' timed runs
   (processes' start-up and warm-ups excluded).  ``--separate K`` times K of them instead
   (the same share of each pattern's rules) and extrapolates the total: each pattern's
   mean job time × its number of rules, summed.

The 100-rule job must find, per rule, as many matches as the rule's own job (exit status
1 otherwise).  A last process runs the 100-rule job under ``cProfile`` (not timed; the
threads it starts, checkpoint writers and the read-ahead, profiled apart) for where its
time goes.  The report, with the command, the machine, a "Targets" section
(100 rules in at most 10× one rule's time) and the profile, goes to
``benchmarks/RULES_RESULTS.md`` (``--quick``: ``benchmarks/.data/RULES_RESULTS-quick.md``);
the raw numbers go to ``benchmarks/.data/rules-last-run*.json``, and ``--rerender`` writes
the report again from them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.run import (
    ROOT,
    _spawn,
    case_parser,
    peak_rss_mb,
    run_info,
    run_lines,
    serve_worker,
    write_report,
)

OUT = ROOT / "benchmarks" / "RULES_RESULTS.md"
QUICK_OUT = ROOT / "benchmarks" / ".data" / "RULES_RESULTS-quick.md"
#: the raw numbers of the last run (full, quick), for ``--rerender``
LAST_RUN = {False: ROOT / "benchmarks" / ".data" / "rules-last-run.json",
            True: ROOT / "benchmarks" / ".data" / "rules-last-run-quick.json"}
DELAY_MS = 5_000
CHECKPOINT_EVERY = 100_000
WARM_EVENTS = 1_000
BATCH_SIZE = 65_536
SPAN = timedelta(days=30)
SEED = 20250113
#: rules per process of the separate-jobs case
SEPARATE_CHUNK = 10
TARGET_RULES = 10.0  # time of the 100-rule job ÷ time of the one-rule job, at most
ONE_RULE = "card_testing-1"
PROFILE_TOP = 25

MIN = timedelta(minutes=1)
DAY = timedelta(days=1)

#: the field each library pattern's events are keyed by
KEY_FIELDS = {
    "card_testing": "card_id", "velocity_burst": "card_id", "impossible_travel": "card_id",
    "account_takeover": "account_id", "refund_abuse": "customer_id",
    "sustained_breach": "sensor_id", "rising_trend": "sensor_id", "flatline": "sensor_id",
    "missing_heartbeat": "device_id", "fire_alarm": "room",
    "error_burst_after_deploy": "service", "failed_logins_then_success": "user",
}

#: each pattern's rules: the parameters of each (the first: the library's defaults, but
#: for refund abuse, whose default 30-day window does not fit the 30-day span twice)
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "card_testing": [
        {}, {"small": 2.0}, {"small": 3.0}, {"small": 10.0}, {"tests": 2}, {"tests": 4},
        {"tests": 5}, {"within": 5 * MIN}, {"small": 7.5, "tests": 2, "within": 30 * MIN,
                                            "big": 1000.0}],
    "velocity_burst": [
        {}, {"transactions": 3, "within": MIN}, {"transactions": 4}, {"transactions": 6},
        {"transactions": 8, "within": 5 * MIN}, {"within": MIN}, {"within": 5 * MIN},
        {"min_amount": 10.0}],
    "impossible_travel": [
        {}, {"max_kmh": 500.0}, {"max_kmh": 700.0}, {"max_kmh": 1200.0}, {"min_km": 50.0},
        {"min_km": 300.0}, {"max_kmh": 600.0, "min_km": 200.0},
        {"max_kmh": 1000.0, "min_km": 500.0}],
    "account_takeover": [
        {}, {"large": 500.0}, {"large": 2500.0}, {"large": 5000.0}, {"within": 30 * MIN},
        {"within": 120 * MIN}, {"large": 2000.0, "within": 180 * MIN},
        {"changes": ["password_change"]}],
    "refund_abuse": [
        {"within": 14 * DAY}, {"cycles": 1, "within": 7 * DAY}, {"cycles": 1, "within": 14 * DAY},
        {"cycles": 2, "within": 7 * DAY}, {"cycles": 2, "within": 21 * DAY},
        {"cycles": 3, "within": 14 * DAY}, {"cycles": 3, "within": 21 * DAY},
        {"cycles": 1, "within": 21 * DAY}],
    "sustained_breach": [
        {}, {"threshold": 70.0}, {"threshold": 75.0}, {"threshold": 85.0}, {"readings": 3},
        {"readings": 8}, {"threshold": 75.0, "readings": 4}, {"threshold": 85.0, "readings": 6}],
    "rising_trend": [
        {}, {"readings": 4}, {"readings": 6}, {"readings": 8}, {"min_step": 0.5},
        {"readings": 4, "min_step": 1.0}, {"readings": 6, "min_step": 0.2}, {"readings": 3}],
    "flatline": [{}, *({"readings": r} for r in (3, 4, 5, 7, 8, 10, 12, 15))],
    "missing_heartbeat": [
        {}, *({"timeout": m * MIN} for m in (2, 4, 5, 6, 8, 10, 12))],
    "fire_alarm": [
        {}, {"temperature": 50.0}, {"temperature": 65.0}, {"within": 2 * MIN},
        {"within": 10 * MIN}, {"temperature": 60.0, "within": 3 * MIN},
        {"temperature": 45.0, "within": 15 * MIN}, {"temperature": 70.0}],
    "error_burst_after_deploy": [
        {}, {"errors": 3}, {"errors": 4}, {"errors": 8}, {"errors": 10}, {"within": 5 * MIN},
        {"within": 30 * MIN}, {"errors": 3, "within": 5 * MIN}, {"errors": 8, "within": 30 * MIN}],
    "failed_logins_then_success": [
        {}, {"failures": 3}, {"failures": 4}, {"failures": 6}, {"failures": 8},
        {"within": 5 * MIN}, {"within": 30 * MIN}, {"failures": 3, "within": 2 * MIN},
        {"failures": 10, "within": 30 * MIN}],
}
#: what each pattern's generator is given besides its rules' parameters
GENERATOR_SIZE: dict[str, dict[str, Any]] = {"refund_abuse": {"days": 30}}


# ====================================================================== rules
def _text(value: Any) -> str:
    if isinstance(value, timedelta):
        seconds = int(value.total_seconds())
        for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
            if seconds % size == 0:
                return f"{seconds // size}{unit}"
        return f"{seconds}s"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe(params: dict[str, Any]) -> str:
    """``small=2, tests=3`` (``defaults`` for none)."""
    return ", ".join(f"{k}={_text(v)}" for k, v in params.items()) or "defaults"


def rule_params() -> list[tuple[str, str, dict[str, Any]]]:
    """(rule name, pattern, parameters) of the 100 rules, in order."""
    out = [(f"{pattern}-{i}", pattern, params) for pattern, variants in VARIANTS.items()
           for i, params in enumerate(variants, 1)]
    assert len(out) == 100 and set(VARIANTS) == set(KEY_FIELDS)
    return out


def rules(names: list[str] | None = None) -> list[Any]:
    """The rules (all 100, or those named, in this order) as :class:`cep.rules.Rule`."""
    from cep.patterns.library import LIBRARY
    from cep.rules import Rule

    made = {}
    for name, pattern, params in rule_params():
        if names is None or name in names:
            made[name] = Rule(name, 1, KEY_FIELDS[pattern], LIBRARY[pattern].pattern(**params),
                              description=f"{pattern}({describe(params)})")
    return list(made.values()) if names is None else [made[n] for n in names]


# ====================================================================== data
def stream(n: int) -> Path:
    """The Parquet file of ``n`` mixed events (generated once, cached in benchmarks/.data)."""
    from benchmarks import data
    from cep.patterns import library, synthetic
    from cep.patterns.synthetic import anomaly, fraud, ops

    variants = {p: [{k: _text(v) for k, v in params.items()} for params in vs]
                for p, vs in VARIANTS.items()}  # in the cache key: new parameters, new file
    return data._cached("rules", {"n_events": n, "seed": SEED, "span_days": SPAN.days,
                                  "max_delay_ms": DELAY_MS, "variants": variants,
                                  "sizes": GENERATOR_SIZE}, _make_stream,
                        uses=(library, synthetic, anomaly, fraud, ops))  # what it generates with


def _make_stream(n_events: int, seed: int, span_days: int, max_delay_ms: int,
                 variants: Any, sizes: Any) -> tuple[Any, dict[str, Any]]:
    """The mixed stream (see the module docstring) as an Arrow table in arrival order, and
    what it holds of each pattern's data."""
    import inspect

    import numpy as np
    import pyarrow as pa

    from benchmarks.data import T0, _arrival_order
    from cep.patterns.library import LIBRARY

    span = span_days * 86_400_000
    quota = -(-n_events // len(VARIANTS))
    key_columns = sorted(set(KEY_FIELDS.values()))
    events: list[dict[str, Any]] = []
    made: dict[str, list[tuple[int, Any, dict[int, dict[str, Any]]]]] = {}
    for p_index, (pattern, params_list) in enumerate(VARIANTS.items()):
        entry = LIBRARY[pattern]
        accepts = inspect.signature(entry.generate).parameters
        datasets: list[tuple[int, Any]] = []
        count = 0
        while count < quota:  # each rule's parameters in turn, a new seed each time
            v = len(datasets) % len(params_list)
            params = {k: val for k, val in params_list[v].items() if k in accepts}
            ds = entry.generate(seed=seed + 1000 * p_index + len(datasets),
                                **sizes.get(pattern, {}), **params)
            datasets.append((v, ds))
            count += len(ds.events)
        made[pattern] = []
        for j, (v, ds) in enumerate(datasets):
            times = [e[ds.time] for e in ds.events]
            first, length = min(times), max(times) - min(times)
            start = T0 + (j * max(0, span - length)) // len(datasets)
            by_id: dict[int, dict[str, Any]] = {}
            for e in ds.events:
                row = {k: val for k, val in e.items() if k not in (ds.key, "id", ds.time)}
                row.update(dict.fromkeys(key_columns, f"{pattern}.{j}/{e[ds.key]}"))
                row.update(ts=e[ds.time] - first + start, generator=pattern,
                           _order=(p_index, j, e["id"]))
                by_id[e["id"]] = row
                events.append(row)
            made[pattern].append((v, ds, by_id))
    events.sort(key=lambda e: (e["ts"], e["_order"]))
    del events[n_events:]
    kept = {id(e) for e in events}
    info: dict[str, Any] = {"events": len(events), "first_ts": events[0]["ts"],
                            "last_ts": events[-1]["ts"], "patterns": {}}
    for pattern, datasets in made.items():
        episodes = [0] * len(VARIANTS[pattern])
        near = [0] * len(VARIANTS[pattern])
        entities: set[str] = set()
        rows = 0
        for v, ds, by_id in datasets:
            whole = [r for r in by_id.values() if id(r) in kept]
            rows += len(whole)
            entities.update(r["card_id"] for r in whole)
            episodes[v] += sum(all(id(by_id[i]) in kept for i in ep.ids) for ep in ds.episodes)
            near[v] += sum(all(id(by_id[i]) in kept for i in ep.ids) for ep in ds.near_misses)
        info["patterns"][pattern] = {"datasets": len(datasets), "events": rows,
                                     "entities": len(entities), "episodes": episodes,
                                     "near_misses": near}
    fields: dict[str, None] = {}
    for e in events:
        fields.update(dict.fromkeys(e))
    del fields["_order"]
    info["fields"] = list(fields)
    ts = np.fromiter((e["ts"] for e in events), np.int64, len(events))
    order = _arrival_order(np.random.default_rng(seed), ts, max_delay_ms).tolist()
    columns = {}
    for name in ["ts", "generator", *key_columns, *(f for f in fields if f not in (
            "ts", "generator", *key_columns))]:
        values = [events[i].get(name) for i in order]
        kinds = {type(x) for x in values if x is not None}
        if kinds == {int, float}:  # a field some generators write as whole numbers
            values = [None if x is None else float(x) for x in values]
        columns[name] = pa.array(values)
    return pa.table(columns), info


# ====================================================================== workers
def _run_job(chosen: list[Any], path: Path, work: Path, how: str) -> dict[str, Any]:
    """One job of ``chosen`` rules over ``path``, set up as ``cep replay`` sets up its job
    (``how="rules"``: ``Job.rules(rule_set)``; ``"named"``: :func:`replay` itself, given
    ``{name: (pattern, key)}`` with ``timeouts=True`` (``cep replay --timeouts``);
    ``"no-timeouts"``: the same without, as ``cep replay`` runs by default)."""
    from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES
    from cep.rules import rule_set
    from cep.runtime.job import Job
    from cep.runtime.replay import DEFAULT_MAX_AHEAD, replay, sinks_for
    from cep.runtime.sources import FileSource
    from cep.runtime.watermarks import WatermarkStrategy

    output, checkpoints = work / "out" / "matches.parquet", work / "chk"
    if how in ("named", "no-timeouts"):
        summary = replay({r.name: (r.pattern, r.key) for r in chosen}, [path], key=None,
                         time="ts", output=output, out_of_orderness=DELAY_MS,
                         checkpoint_dir=checkpoints, checkpoint_every=CHECKPOINT_EVERY,
                         engine="numba", progress=False, batch_size=BATCH_SIZE,
                         timeouts=how == "named")
    else:
        job = (
            Job(FileSource(path, batch_size=BATCH_SIZE))
            .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(DELAY_MS))
            .timestamps("ts")
            .max_event_time_ahead(DEFAULT_MAX_AHEAD)
            .limit_partial_matches(DEFAULT_MAX_PARTIAL_MATCHES, "fail")
            .rules(rule_set(chosen), engine="numba")
        )
        for kind, sink in sinks_for(output).items():
            job = job.sink(sink, kinds=(kind,))
        summary = job.checkpoint(checkpoints, every_events=CHECKPOINT_EVERY).run()
    return {"matches": summary.matches, "timeouts": summary.timeouts,
            "events": summary.events_in, "late": summary.late,
            "dead_letters": summary.dead_letters, "checkpoints": summary.checkpoints,
            "peak_partial_matches": summary.peak_partial_matches,
            "per_rule": {name: c["matches"] for name, c in summary.rules.items()},
            "timeouts_per_rule": {name: c["timeouts"] for name, c in summary.rules.items()}}


def _head(path: Path, into: Path) -> Path:
    """The first :data:`WARM_EVENTS` rows of ``path`` (Parquet) in ``into``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = into / "head.parquet"
    batch = next(pq.ParquetFile(path).iter_batches(batch_size=WARM_EVENTS))
    pq.write_table(pa.Table.from_batches([batch]), out)
    return out


def _timed(chosen: list[Any], path: Path, head: Path, work: Path, how: str
           ) -> dict[str, Any]:
    """The job on the first events (warm-up), then on all of them, timed."""
    _run_job(chosen, head, work / "warm", how)
    before = peak_rss_mb()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        result = _run_job(chosen, path, work / "run", how)
        seconds = time.perf_counter() - started
    shutil.rmtree(work, ignore_errors=True)
    said = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    return {**result, "seconds": seconds, "rise_mb": peak_rss_mb() - before, "warnings": said}


def _profile(chosen: list[Any], path: Path, head: Path, work: Path, how: str) -> dict[str, Any]:
    """The job under cProfile (after the warm-up): the top functions by own time and by
    cumulative time, of the job's thread and (apart) of the threads it starts (the source's
    read-ahead, the checkpoint writers), each of which gets a profiler of its own."""
    import cProfile
    import pstats
    import threading

    _run_job(chosen, head, work / "warm", how)
    threads: dict[str, list[cProfile.Profile]] = {}
    plain_run = threading.Thread.run

    def profiled_run(thread: threading.Thread) -> None:
        profiler = cProfile.Profile()
        threads.setdefault(thread.name.rstrip("0123456789").rstrip("-"), []).append(profiler)
        profiler.enable()
        try:
            plain_run(thread)
        finally:
            profiler.disable()

    profiler = cProfile.Profile()
    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        profiler.enable()
        _run_job(chosen, path, work / "run", how)
        profiler.disable()
        seconds = time.perf_counter() - started
    finally:
        threading.Thread.run = plain_run  # type: ignore[method-assign]

    def where(func: tuple[str, int, str]) -> str:
        file, line, name = func
        for root in (str(ROOT) + os.sep, sys.prefix + os.sep):
            file = file.removeprefix(root)
        return f"{name} ({file}:{line})" if line else name

    def table(profilers: list[cProfile.Profile]) -> dict[str, Any]:
        stats = pstats.Stats(*profilers)
        rows = [{"function": where(func), "calls": nc, "own": tt, "cumulative": ct}
                for func, (_cc, nc, tt, ct, _callers)
                in stats.stats.items()]  # type: ignore[attr-defined]
        return {"total": stats.total_tt,  # type: ignore[attr-defined]
                "count": len(profilers),
                "by_own": sorted(rows, key=lambda r: -r["own"])[:PROFILE_TOP],
                "by_cumulative": sorted(rows, key=lambda r: -r["cumulative"])[:PROFILE_TOP * 2]}

    return {"seconds": seconds, "main": table([profiler]),
            "threads": {name: table(found) for name, found in threads.items()}}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process: ``job`` (one job of the named rules), ``separate`` (a job
    per named rule, one after another) or ``profile``."""
    path = Path(spec["path"])
    work = Path(tempfile.mkdtemp(prefix="cep-bench-rules-"))
    try:
        head = _head(path, work)
        if spec["variant"] == "separate":
            jobs = {}
            for rule in rules(spec["names"]):
                jobs[rule.name] = _timed([rule], path, head, work / rule.name, spec["how"])
            result: dict[str, Any] = {"jobs": jobs}
        elif spec["variant"] == "profile":
            result = _profile(rules(spec["names"]), path, head, work / "job", spec["how"])
        else:
            result = _timed(rules(spec["names"]), path, head, work / "job", spec["how"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {**spec, **result, "peak_mb": peak_rss_mb()}


# ====================================================================== parent
def _names() -> list[str]:
    return [name for name, _, _ in rule_params()]


def _case(spec: dict[str, Any], repeat: int) -> dict[str, Any]:
    runs = [_spawn(spec, None, module="benchmarks.rules") for _ in range(repeat)]
    best = min(runs, key=lambda r: r["seconds"])
    best["all_seconds"] = [r["seconds"] for r in runs]
    return best


def _log(what: str, r: dict[str, Any], n: int) -> None:
    print(f"{what:34} {r['seconds']:8.2f} s {n / r['seconds']:>11,.0f} ev/s "
          f"{r['matches']:>9,} matches {r['peak_mb']:>7,.0f} MB", flush=True)


def _sample(count: int | None) -> list[str]:
    """The rules the separate-jobs case times: all, or ``count`` of them, the same share
    of each pattern's rules (at least one each)."""
    names = _names()
    if count is None or count >= len(names):
        return names
    chosen = []
    for pattern, variants in VARIANTS.items():
        take = max(1, round(count * len(variants) / len(names)))
        chosen += [f"{pattern}-{i}" for i in range(1, min(take, len(variants)) + 1)]
    return chosen


def measure_separate(path: Path, n: int, names: list[str], how: str) -> dict[str, Any]:
    """Case 3: a job per rule, :data:`SEPARATE_CHUNK` rules per process."""
    jobs: dict[str, Any] = {}
    peak = 0.0
    for start in range(0, len(names), SEPARATE_CHUNK):
        chunk = names[start:start + SEPARATE_CHUNK]
        r = _spawn({"variant": "separate", "how": how, "names": chunk, "path": str(path)},
                   None, module="benchmarks.rules")
        jobs.update(r["jobs"])
        peak = max(peak, r["peak_mb"])
        took = sum(j["seconds"] for j in r["jobs"].values())
        each = ", ".join(f"{k} {v['seconds']:.2f}" for k, v in r["jobs"].items())
        print(f"separate jobs {start + 1:3}-{start + len(chunk):3} {took:8.2f} s ({each})",
              flush=True)
    measured = sum(j["seconds"] for j in jobs.values())
    per_pattern: dict[str, dict[str, Any]] = {}
    for pattern, variants in VARIANTS.items():
        times = [jobs[name]["seconds"] for name in jobs if name.rsplit("-", 1)[0] == pattern]
        per_pattern[pattern] = {"rules": len(variants), "timed": len(times),
                                "seconds": sum(times), "mean": sum(times) / len(times),
                                "min": min(times), "max": max(times),
                                "total": sum(times) / len(times) * len(variants)}
    total = sum(p["total"] for p in per_pattern.values())
    return {"jobs": jobs, "measured": measured, "seconds": total, "peak_mb": peak,
            "extrapolated": len(jobs) < len(_names()), "per_pattern": per_pattern,
            "matches": sum(j["matches"] for j in jobs.values()),
            "timeouts": sum(j["timeouts"] for j in jobs.values())}


def _own_matches(job: dict[str, Any], name: str) -> int:
    return job["per_rule"].get(name, job["matches"])


def mismatches(many: dict[str, Any], separate: dict[str, Any]) -> list[str]:
    """Rules whose matches in the 100-rule job differ from their own job's (or that it
    did not run)."""
    wrong = []
    for name, job in separate["jobs"].items():
        own = _own_matches(job, name)
        got = many["per_rule"].get(name)
        if got != own:
            wrong.append(f"{name} ({'not run' if got is None else f'{got:,}'} vs {own:,})")
    return wrong


# ====================================================================== report
def _rate(n: int, seconds: float) -> str:
    rate = n / seconds
    return f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:,.0f}k"


def _verdict(value: float, target: float) -> str:
    """At most ``target``: met or missed, and by how much."""
    if value <= target:
        return f"**met** ({(target - value) / target:.0%} to spare)"
    return f"**missed**: {value / target:.1f}× the target ({value:.1f}× against at most {target:g}×)"


def _data_section(path: Path, n: int) -> list[str]:
    from benchmarks.data import metadata

    meta = metadata(path)
    days = (meta["last_ts"] - meta["first_ts"]) / 86_400_000
    lines = [
        "## Data",
        "",
        f"`{path.relative_to(ROOT)}`: {meta['events']:,} events over {days:.1f} days of event "
        "time, in arrival order (each event 0-5 s late), one Parquet file with "
        f"{len(meta['fields'])} columns (every field of every kind; a field an event's kind "
        "does not have is null). Made from the pattern library's own generators "
        "(`cep.patterns.synthetic`): for each pattern, datasets generated in turn with each "
        "of its rules' parameters and a new seed, until the pattern has 1/12 of the events; "
        "each dataset shifted to start somewhere in a 30-day span, its keys made its own; "
        "all merged in time order and cut to the size. **The entity an event is about "
        "(card, account, customer, sensor, device, room, service, user) is copied into all "
        "eight key fields** (`" + "`, `".join(sorted(set(KEY_FIELDS.values()))) + "`): a "
        "rule whose key field is null in an event refuses it as a dead letter of that rule "
        "(a `DeadLetter` object per rule per event, ~90 million here), so with one column "
        "per kind almost every event would be a dead letter of ~90 rules. So every rule "
        "reads every event, keyed by its entity; conditions on fields the event's kind "
        "does not have read null and do not hold (but fields several kinds share — "
        "`amount`, `value`, `type` — can, so a rule may also match on another kind's "
        "entities).",
        "",
        "| pattern | key field | datasets | events | entities | injected episodes / near "
        "misses kept |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for pattern, got in meta["patterns"].items():
        lines.append(f"| {pattern} | `{KEY_FIELDS[pattern]}` | {got['datasets']} | "
                     f"{got['events']:,} | {got['entities']:,} | {sum(got['episodes']):,} / "
                     f"{sum(got['near_misses']):,} |")
    return lines


def _rules_section() -> list[str]:
    lines = ["## Rules", "",
             "100 `cep.rules.Rule`s, version 1, each keyed by its pattern's key field; "
             "`<pattern>-1` has the library's defaults (refund abuse: a 14-day window). "
             "The one-rule job runs `card_testing-1` (pattern A of `benchmarks/replay.py`).",
             "", "| pattern | rules | parameters of rules 1, 2, ... |", "|---|---:|---|"]
    for pattern, variants in VARIANTS.items():
        lines.append(f"| {pattern} | {len(variants)} | "
                     + "; ".join(describe(v) for v in variants) + " |")
    return lines


def _results_section(one: dict[str, Any], many: dict[str, Any], separate: dict[str, Any],
                     rule_set: dict[str, Any] | None, quiet: dict[str, Any] | None, n: int,
                     repeat: int) -> list[str]:
    def late(r: dict[str, Any]) -> str:
        return f"{r['late']:,} / {r['dead_letters']:,}"

    sep_what = ("100 separate jobs, one rule each (sum of the jobs)" if not separate["extrapolated"]
                else f"100 separate jobs, **extrapolated** from {len(separate['jobs'])} timed")
    lines = [
        "## Results",
        "",
        "Events/s = the stream's events ÷ the row's seconds (for the separate jobs: ÷ their "
        "total, the throughput of running the 100 rules that way). Peak RSS = the process's "
        "peak RSS (`VmHWM`) (in brackets: what the timed run added); for the separate jobs, the "
        f"largest of their processes. One rule and 100 rules: best of {repeat} processes "
        "(all runs: in the last column). Row 2b (one process) runs the rules through the "
        "rule-set path; rows 1c and 2c are cases 1 and 2 without timeouts, as `cep replay` "
        "runs by default (cases 1 and 2 are `cep replay --timeouts`). ÷ one rule: against "
        "case 1.",
        "",
        "| case | rules run | time | events/s | matches | timeouts | late / dead letters | "
        "peak RSS | ÷ one rule | runs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def row(what: str, r: dict[str, Any], rules_run: int, extra: str = "") -> None:
        runs = ", ".join(f"{s:.2f}" for s in r.get("all_seconds", []))
        rise = f" (+{r['rise_mb']:,.0f})" if "rise_mb" in r else ""
        lines.append(
            f"| {what} | {rules_run} | {r['seconds']:.2f} s | {_rate(n, r['seconds'])} | "
            f"{r['matches']:,} | {r['timeouts']:,} | {extra or late(r)} | "
            f"{r['peak_mb']:,.0f} MB{rise} | {r['seconds'] / one['seconds']:.1f}× | {runs} |")

    row(f"1. one rule (`{ONE_RULE}`), one job, `--timeouts`", one, 1)
    row("2. 100 rules, one job, `--timeouts`", many, len(many["per_rule"]))
    if rule_set is not None:
        row("2b. the same 100 rules as `Job.rules(rule_set(...))`", rule_set,
            len(rule_set["per_rule"]))
    if quiet is not None:
        if "one" in quiet:
            row(f"1c. one rule (`{ONE_RULE}`), timeouts not tracked (`cep replay`'s default)",
                quiet["one"], 1)
        row("2c. 100 rules, one job, timeouts not tracked (`cep replay`'s default)",
            quiet, len(quiet["per_rule"]))
    row(f"3. {sep_what}", separate, len(separate["jobs"]), "—")
    return lines


def _separate_section(separate: dict[str, Any], n: int) -> list[str]:
    lines = [
        "## The separate jobs",
        "",
        "Each job: `replay` of one rule as in case 1 (its own warm-up on the first 1,000 "
        f"events, then timed), {SEPARATE_CHUNK} jobs per process, one after another. "
        + (f"Only {len(separate['jobs'])} of the 100 were timed; each pattern's total is its "
           "mean job time × its number of rules, and the grand total their sum "
           f"(timed: {separate['measured']:.1f} s)." if separate["extrapolated"] else
           "All 100 were timed; the total is their sum."),
        "",
        "| pattern | rules (timed) | total | mean job | fastest | slowest | events/s of a "
        "mean job |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for pattern, p in separate["per_pattern"].items():
        lines.append(f"| {pattern} | {p['rules']} ({p['timed']}) | {p['total']:.2f} s | "
                     f"{p['mean']:.2f} s | {p['min']:.2f} s | {p['max']:.2f} s | "
                     f"{_rate(n, p['mean'])} |")
    times = sorted(j["seconds"] for j in separate["jobs"].values())
    lines.append(f"| **all** | 100 ({len(times)}) | **{separate['seconds']:.2f} s** | "
                 f"{statistics.mean(times):.2f} s | {times[0]:.2f} s | {times[-1]:.2f} s | "
                 f"{_rate(n, statistics.mean(times))} |")
    return lines


def _per_rule_section(many: dict[str, Any], separate: dict[str, Any],
                      rule_set: dict[str, Any] | None, path: Path) -> list[str]:
    from benchmarks.data import metadata

    meta = metadata(path)["patterns"]
    lines = [
        "## Matches per rule",
        "",
        "Matches of each rule in the 100-rule job and in its own job (they must be equal); "
        "timeouts in the 100-rule job; its own job's time; the episodes injected (and kept) "
        "in the datasets generated with its parameters (other rules of the pattern find "
        "them too, and rules also match background or other kinds' events, so matches "
        "are not expected to equal them)."
        + (" `Job.rules` = matches in case 2b (— where it refused the rule)."
           if rule_set is not None else ""),
        "",
        "| rule | parameters | 100-rule job | own job | same | "
        + ("`Job.rules` | " if rule_set is not None else "")
        + "timeouts | own job time | injected |",
        "|---|---|---:|---:|---|" + ("---:|" if rule_set is not None else "") + "---:|---:|---:|",
    ]
    for name, pattern, params in rule_params():
        job = separate["jobs"].get(name)
        got = many["per_rule"].get(name)
        own = "—" if job is None else f"{_own_matches(job, name):,}"
        same = "—" if job is None else ("yes" if got == _own_matches(job, name) else "**NO**")
        took = "—" if job is None else f"{job['seconds']:.2f} s"
        variant = int(name.rsplit("-", 1)[1]) - 1
        injected = meta[pattern]["episodes"][variant]
        live = ""
        if rule_set is not None:
            value = rule_set["per_rule"].get(name)
            live = f"{'—' if value is None else f'{value:,}'} | "
        lines.append(f"| `{name}` | {describe(params)} | "
                     f"{'—' if got is None else f'{got:,}'} | {own} | {same} | {live}"
                     f"{many['timeouts_per_rule'].get(name, 0):,} | {took} | {injected} |")
    return lines


def _targets_section(one: dict[str, Any], many: dict[str, Any], separate: dict[str, Any],
                     wrong: list[str], quiet: dict[str, Any] | None = None) -> list[str]:
    ratio = many["seconds"] / one["seconds"]
    default = []
    if quiet is not None and "one" in quiet:
        q = quiet["seconds"] / quiet["one"]["seconds"]
        default = [f"| 100 rules in one job, as `cep replay` runs by default (no timeouts): at "
                   f"most {TARGET_RULES:g}× the time of one rule (the same) | "
                   f"{quiet['seconds']:.2f} s ÷ {quiet['one']['seconds']:.2f} s = {q:.1f}× | "
                   f"{_verdict(q, TARGET_RULES)} |"]
    return [
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---:|---|",
        *default,
        f"| 100 rules in one job with `--timeouts` (every timeout written): at most "
        f"{TARGET_RULES:g}× the time of one rule (the same) | "
        f"{many['seconds']:.2f} s ÷ {one['seconds']:.2f} s = {ratio:.1f}× | "
        f"{_verdict(ratio, TARGET_RULES)} |",
        f"| (no target) 100 separate jobs ÷ the 100-rule job | {separate['seconds']:.2f} s "
        f"÷ {many['seconds']:.2f} s = {separate['seconds'] / many['seconds']:.2f}× | "
        f"{'one job is faster' if separate['seconds'] > many['seconds'] else 'separate jobs are faster'} |",
        f"| the 100-rule job finds, per rule, as many matches as the rule's own job | "
        f"{'all ' + str(len(separate['jobs'])) + ' equal' if not wrong else ', '.join(wrong)} | "
        f"{'**met**' if not wrong else '**missed**'} |",
    ]


def _profile_table(part: dict[str, Any], key: str, only_project: bool) -> list[str]:
    total = part["total"]
    first, second = ("own", "cumulative") if key == "by_own" else ("cumulative", "own")
    lines = [f"| function | calls | {first} | % | {second} |", "|---|---:|---:|---:|---:|"]
    rows = part[key]
    if only_project:
        rows = [r for r in rows if any(f"({d}/" in r["function"]
                                       for d in ("runtime", "nfa", "cep"))]
    for r in rows[:PROFILE_TOP if key == "by_own" else 15]:
        lines.append(f"| `{r['function']}` | {r['calls']:,} | {r[first]:.2f} s | "
                     f"{r[first] / total:.0%} | {r[second]:.2f} s |")
    return lines


def _profile_section(profile: dict[str, Any], many: dict[str, Any]) -> list[str]:
    main = profile["main"]
    lines = [
        "## Where the 100-rule job spends its time",
        "",
        f"The job of case 2 once more under `cProfile` (after the same warm-up): "
        f"{profile['seconds']:.1f} s profiled against {many['seconds']:.1f} s unprofiled. "
        "The job's own thread has one profiler, and every thread it starts (the source's "
        "read-ahead, each checkpoint's writer, which encodes the epoch's records and the "
        "engines' state and writes them while the job goes on) one of its own, summed per "
        "kind of thread. cProfile's cost falls on Python calls, so small, frequent "
        "functions look dearer than they are; time inside numba-compiled code is charged "
        "to the Python function that calls it; a thread waiting for another shows as "
        "`acquire` of a lock.",
        "",
        f"### The job's thread: top {PROFILE_TOP} by own time (of {main['total']:.1f} s)",
        "",
        *_profile_table(main, "by_own", False),
        "",
        "By cumulative time (the project's functions only):",
        "",
        *_profile_table(main, "by_cumulative", True),
    ]
    small = {name: part for name, part in profile["threads"].items()
             if part["total"] < 0.05 * main["total"]}
    if small:
        lines += ["", "Other threads, too small to list: " + ", ".join(
            f"`{name}` {part['total']:.2f} s" for name, part in small.items()) + "."]
    for name, part in profile["threads"].items():
        if name in small:
            continue
        lines += ["", f"### Thread `{name}` ({part['count']} of them, {part['total']:.1f} s in "
                      "all): by own time", "", *_profile_table(part, "by_own", False)[:14],
                  "", "By cumulative time (the project's functions only):", "",
                  *_profile_table(part, "by_cumulative", True)]
    return lines


def _notes(one: dict[str, Any], many: dict[str, Any], separate: dict[str, Any],
           rule_set: dict[str, Any] | None, quiet: dict[str, Any] | None, n: int
           ) -> list[str]:
    times = [j["seconds"] for j in separate["jobs"].values()]
    per_rule = (many["seconds"] - one["seconds"]) / (len(many["per_rule"]) - 1)
    lines = [
        "## Reading the numbers",
        "",
        f"- Each rule added to the job costs {per_rule:.2f} s on average "
        f"(({many['seconds']:.2f} − {one['seconds']:.2f}) ÷ 99), against "
        f"{statistics.mean(times):.2f} s for the mean job of one rule on its own "
        f"(median {statistics.median(times):.2f} s): the 100-rule job is "
        f"{many['seconds'] / statistics.median(times):.1f}× the median single-rule job and "
        f"{many['seconds'] / one['seconds']:.1f}× `{ONE_RULE}`'s.",
        f"- Timeouts: the 100-rule job emits {many['timeouts']:,} timeout records "
        f"({many['timeouts'] / n:.1f} per event), each written to the timeouts sink as "
        "`cep replay --timeouts` does; the rules that emit most: "
        + ", ".join(f"`{k}` {v:,}" for k, v in sorted(
            many["timeouts_per_rule"].items(), key=lambda kv: -kv[1])[:5]) + ".",
        f"- Peak partial matches (all rules): {many['peak_partial_matches']:,} in the "
        f"100-rule job, {one['peak_partial_matches']:,} in the one-rule job.",
    ]
    if rule_set is not None:
        refused = [w for w in rule_set["warnings"] if "RuleWarning" in w]
        ran = len(rule_set["per_rule"])
        if refused or ran < len(many["per_rule"]):
            lines.append(
                f"- `Job.rules(rule_set(...))` (case 2b) ran {ran} of the 100 rules: "
                f"{len(refused)} were refused with a `RuleWarning` when the set was checked, "
                "e.g. " + "; ".join(f"`{w}`" for w in refused[:1]) + ". The same patterns "
                "run under `cep.match` and under `replay` / `Job.match` (case 2), so case 2 "
                "is the 100-rule job of this report.")
        else:
            lines.append(
                f"- `Job.rules(rule_set(...))` (case 2b) runs all 100 rules in "
                f"{rule_set['seconds']:.2f} s ({rule_set['seconds'] / many['seconds']:.0%} of "
                "case 2's time): the rule-set path costs no more than `Job.match` of named "
                "rules. (Before commit 405bd8d its check refused the 33 rules of "
                "impossible_travel, account_takeover, refund_abuse and flatline as "
                "'unknown column'.)")
    if quiet is not None:
        lines.append(f"- Without timeouts (case 2c) the 100-rule job takes {quiet['seconds']:.2f} s "
                     f"({quiet['seconds'] / many['seconds']:.0%} of case 2's time, "
                     f"{quiet['seconds'] / one['seconds']:.1f}× one rule's).")
    if many["warnings"]:
        lines.append("- Warnings of the 100-rule job: "
                     + "; ".join(f"`{w}`" for w in many["warnings"][:5]))
    lines.append("- Noise: the machine's 2 cores were shared with other work during the run "
                 "(see the load averages above), so times may be a few percent off.")
    return lines


def report(one: dict[str, Any], many: dict[str, Any], separate: dict[str, Any],
           rule_set: dict[str, Any] | None, quiet: dict[str, Any] | None,
           profile: dict[str, Any] | None, path: Path, n: int, run: dict[str, Any]) -> str:
    wrong = mismatches(many, separate)
    lines = [
        "# 100 rules in one job (issue #13)",
        "",
        *run_lines(run),
        *(["", "The machine was busy when the run began (other work on its 2 cores), so the "
               "numbers may be a little noisy."] if run["load"][0] >= 1.2 else []),
        "",
        f"What runs: {n:,} events of all 12 kinds the pattern library watches, 100 rules "
        "made from its 12 patterns; each job is `cep.runtime.replay.replay` (what `cep "
        "replay` runs) of the rules given as `{name: (pattern, key)}`, with the settings of "
        "`benchmarks/replay.py`'s replay case (Parquet source in batches of 65,536, "
        "out-of-orderness 5 s, a checkpoint every 100,000 events, matches, late events, "
        "dead letters and (cases 1, 2, 2b) timeouts to Parquet, numba engine), each in a "
        "fresh process after "
        "the same job on the first 1,000 events. See the docstring of `benchmarks/rules.py`.",
    ]
    if run["quick"]:
        lines += ["", "**Quick run**: the target is for 1M events; these numbers only show "
                      "that the benchmark runs."]
    sections = [_targets_section(one, many, separate, wrong, quiet),
                _results_section(one, many, separate, rule_set, quiet, n, run["repeat"]),
                _notes(one, many, separate, rule_set, quiet, n)]
    if profile is not None:
        sections.append(_profile_section(profile, many))
    sections += [_separate_section(separate, n), _rules_section(), _data_section(path, n),
                 _per_rule_section(many, separate, rule_set, path)]
    for section in sections:
        lines += ["", *section]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every case (each in its own process) and write the report."""
    parser = case_parser("python -m benchmarks.rules", __doc__,
                         "100k events; report to benchmarks/.data/RULES_RESULTS-quick.md")
    parser.add_argument("--events", type=int, help="events (default 1M, 100k with --quick)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="processes for the one-rule and 100-rule jobs, best counts")
    parser.add_argument("--separate", type=int, metavar="K",
                        help="time K of the 100 separate jobs and extrapolate (default: all)")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    parser.add_argument("--no-rule-set", action="store_true",
                        help="skip the Job.rules(rule_set) run (case 2b)")
    parser.add_argument("--no-quiet", action="store_true",
                        help="skip the runs without timeouts (cases 1c and 2c)")
    parser.add_argument("--rerender", action="store_true",
                        help="write the report again from the last run's raw numbers")
    args = parser.parse_args(argv)
    if serve_worker(args, worker):
        return 0
    n = args.events or (100_000 if args.quick else 1_000_000)
    out = args.out or (QUICK_OUT if args.quick else OUT)
    if args.rerender:
        last = json.loads(LAST_RUN[args.quick].read_text())
        write_report(out, report(last["one"], last["many"], last["separate"],
                                 last["rule_set"], last["quiet"], last["profile"],
                                 Path(last["path"]), last["n"], last["run"]))
        return 1 if mismatches(last["many"], last["separate"]) else 0
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    print(f"data: {n:,} events ...", flush=True)
    path = stream(n)
    spec = {"path": str(path), "how": "named"}
    one = _case({**spec, "variant": "job", "names": [ONE_RULE]}, args.repeat)
    _log(f"one rule ({ONE_RULE})", one, n)
    many = _case({**spec, "variant": "job", "names": _names()}, args.repeat)
    _log("100 rules, one job", many, n)
    rule_set = None
    if not args.no_rule_set:
        rule_set = _case({**spec, "how": "rules", "variant": "job", "names": _names()}, 1)
        _log(f"Job.rules: {len(rule_set['per_rule'])} rules ran", rule_set, n)
    quiet = None
    if not args.no_quiet:
        quiet_one = _case({**spec, "how": "no-timeouts", "variant": "job",
                           "names": [ONE_RULE]}, args.repeat)
        _log(f"one rule ({ONE_RULE}), no timeouts", quiet_one, n)
        quiet = _case({**spec, "how": "no-timeouts", "variant": "job", "names": _names()},
                      args.repeat)
        _log("100 rules, no timeouts", quiet, n)
        quiet = {**quiet, "one": quiet_one}
    separate = measure_separate(path, n, _sample(args.separate), "named")
    _log("100 separate jobs" + (" (extrapolated)" if separate["extrapolated"] else ""),
         separate, n)
    profile = None
    if not args.no_profile:
        profile = _spawn({**spec, "variant": "profile", "names": _names()}, None,
                         module="benchmarks.rules")
        print(f"profiled run: {profile['seconds']:.1f} s", flush=True)
    run = run_info("python -m benchmarks.rules", argv, began, load_before,
                   repeat=args.repeat, quick=args.quick)
    LAST_RUN[args.quick].parent.mkdir(parents=True, exist_ok=True)
    LAST_RUN[args.quick].write_text(json.dumps({
        "one": one, "many": many, "separate": separate, "rule_set": rule_set,
        "quiet": quiet, "profile": profile, "path": str(path), "n": n, "run": run}))
    write_report(out, report(one, many, separate, rule_set, quiet, profile, path, n, run))
    wrong = mismatches(many, separate)
    ratio = many["seconds"] / one["seconds"]
    print(f"100 rules ÷ one rule: {ratio:.1f}× (target at most {TARGET_RULES:g}×); "
          f"100 separate jobs ÷ one job of 100: {separate['seconds'] / many['seconds']:.2f}×")
    if wrong:
        print(f"MATCH COUNTS DIFFER between the 100-rule job and the rules' own jobs: "
              f"{', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
