"""Replay history through the runtime: ``cep replay`` and :func:`replay`.

    cep replay cep.patterns.fraud:card_testing data/*.parquet --key card_id --time ts \\
        --out-of-orderness 5s --checkpoint-dir chk --output out/matches.jsonl

Several rules run in one pass when PATTERN names a set of them
(:func:`cep.runtime.specs.load_rule_set`): a module's Patterns and pattern factories, a
directory of pattern/rule JSON files, specs separated by commas, ``NAME=SPEC``:

    cep replay cep.patterns.fraud:card_testing,cep.patterns.fraud:velocity_burst \\
        data/ --key card_id --time ts --sort --output out/matches.jsonl
    cep replay rules/ data/ --key card_id --time ts --sort --output out/matches.jsonl

Every record then carries its ``"rule"``, and the summary counts each rule's matches,
timeouts and dead letters.  A directory (or file) of rule files runs as ``--watch`` runs
it, read once: every record carries its rule's ``"version"`` and measures too, and a
rule that does not load is reported (``FILE: PLACE: WHAT``) while the others run; the
command then exits with 1.

Matches go to ``out/matches/part-*.jsonl`` (one file per checkpoint epoch, each
committed with its checkpoint); late events and dead letters to ``out/late/`` and
``out/dead_letters/`` next to it, and with ``--timeouts`` the partial matches whose
window passed to ``out/timeouts/``.
``kill -USR1 <pid>`` takes a savepoint on demand; Ctrl-C stops at the next batch
boundary with a checkpoint and prints the command that resumes.

History that is not in event-time order: ``--sort`` reads the whole input and replays
it sorted by time (memory for the whole input); without it, events that arrive behind
the watermark are late, and more late events than ``--max-late`` (default 0) make the
command warn and exit with status 3 (after committing its output).

An event more than ``--max-ahead`` (default 365 days) ahead of the rest of its file is
a dead letter, so one time in the year 9999 cannot make the events after it late.  An
output directory that holds part files of an earlier replay is refused unless
``--resume`` continues that replay or ``--overwrite`` replaces its output.
"""

from __future__ import annotations

import shlex
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from cep.durations import parse_duration as _parse_duration
from cep.errors import CEPError
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES
from cep.pattern import Pattern
from cep.rules import RuleSet, rule_set
from cep.runtime.job import Job, Summary
from cep.runtime.sinks import FileSink
from cep.runtime.sources import FileSource, SortedFileSource, Source
from cep.runtime.specs import (
    ENGINE_CHOICES,
    RULES_HELP,
    TIME_UNITS,
    Loaded,
    add_cap_arguments,
    add_input_arguments,
    disabled_named,
    expand_inputs,
    load_for_job,
    rule_files,
)
from cep.runtime.watermarks import MIN_WATERMARK, WatermarkStrategy

#: exit status of ``cep replay`` when more events were late than ``--max-late`` allows
EXIT_LATE = 3
#: exit status of ``cep replay`` when rules had problems (reported; the others ran), as
#: ``cep rules check`` and ``cep backtest`` exit
EXIT_RULE_PROBLEMS = 1
#: exit status after Ctrl-C (128 + SIGINT, as shells report it)
EXIT_INTERRUPTED = 130
#: checkpoint interval (events) when ``--checkpoint-dir`` is given without ``--checkpoint-every``
DEFAULT_CHECKPOINT_EVERY = 100_000
#: the far-future guard of a replay (see :meth:`Job.max_event_time_ahead`): history has no
#: reason to hold an event a year ahead of the rest of its file; a time like that is a
#: typo or a wrong unit, and would make every event after it late
DEFAULT_MAX_AHEAD = timedelta(days=365)


def parse_duration(text: str) -> int:
    """``250ms``, ``5s``, ``10m``, ``2h``, ``1d`` or plain milliseconds -> milliseconds
    (the command line requires the unit: :func:`cep.durations.parse_duration`).

    >>> parse_duration("5s"), parse_duration("1.5m")
    (5000, 90000)
    """
    return _parse_duration(text)


#: where each kind of record goes, relative to the matches' output path
_SIDE_OUTPUTS = {"timeout": "timeouts", "late": "late", "dead_letter": "dead_letters"}


def output_paths(output: str | Path) -> dict[str, Path]:
    """The directory each kind of record of a replay writing to ``output`` goes to.

    >>> {k: p.as_posix() for k, p in output_paths("out/matches.jsonl").items()}
    {'match': 'out/matches', 'timeout': 'out/timeouts', 'late': 'out/late', 'dead_letter': 'out/dead_letters'}
    """
    out = Path(output)
    base = out.with_suffix("") if out.suffix else out
    return {"match": base, **{kind: base.parent / name for kind, name in _SIDE_OUTPUTS.items()}}


def sinks_for(output: str | Path, timeouts: bool = True) -> dict[str, FileSink]:
    """The file sinks of a replay writing matches to ``output``: one per record type (no
    timeouts unless ``timeouts``), the format from ``output``'s suffix (default JSONL),
    side outputs in sibling directories.

    >>> sinks = sinks_for("alerts/matches.parquet")
    >>> sorted(sinks), sinks["match"].format
    (['dead_letter', 'late', 'match', 'timeout'], 'parquet')
    >>> sinks["match"].path.as_posix(), sinks["dead_letter"].path.as_posix()
    ('alerts/matches', 'alerts/dead_letters')
    """
    out = Path(output)
    fmt = out.suffix[1:] if out.suffix else "jsonl"
    return {kind: FileSink(path, fmt) for kind, path in output_paths(output).items()
            if timeouts or kind != "timeout"}


def earlier_parts(output: str | Path) -> list[Path]:
    """The part files (committed, pending or half-written) that a replay writing to
    ``output`` finds in its directories before it starts, in any format.

    >>> from cep.runtime.sinks import FileSink
    >>> sink = FileSink("before/dead_letters"); sink.write([{"v": 1}]); sink.prepare(1)
    >>> [p.as_posix() for p in earlier_parts("before/matches.jsonl")]
    ['before/dead_letters/part-000000001.jsonl.pending']
    """
    return sorted(part for path in output_paths(output).values() if path.is_dir()
                  for part in path.glob("part-*") if part.is_file())


def _check_output(output: str | Path, resume: bool, overwrite: bool,
                  checkpoint_dir: str | Path | None) -> None:
    """Refuse output directories that hold an earlier replay's parts (they would be read
    back with this run's, counted twice), unless resuming (the sinks continue them) or
    overwriting (they are deleted, with the earlier run's checkpoints)."""
    if resume and overwrite:
        raise CEPError("--resume continues the earlier replay's output and --overwrite deletes "
                       "it: give one of them")
    if resume:
        return
    parts = earlier_parts(output)
    if overwrite:
        for part in parts:
            part.unlink()
        if checkpoint_dir is not None:
            import shutil

            from cep.runtime.checkpoint import CheckpointStore

            store = CheckpointStore(checkpoint_dir)
            for checkpoint_id in store.ids():
                shutil.rmtree(store.path(checkpoint_id))
        return
    if parts:
        places = sorted({str(part.parent) for part in parts})
        where = (f"the output directory {places[0]} already holds" if len(places) == 1 else
                 f"the output directories {', '.join(places)} already hold")
        raise CEPError(
            f"{where} {len(parts):,} part file{'s' if len(parts) != 1 else ''} of an earlier "
            f"replay (e.g. {parts[0].name}): "
            "their records would be read back with this run's. Continue that replay with "
            "--resume, replace its output with --overwrite (deletes those part files and "
            "its checkpoints), or write to another --output")


def replay(
    pattern: Pattern | Mapping[str, Any] | str,
    inputs: Sequence[str | Path],
    *,
    key: str | Sequence[str] | None,
    time: str,
    output: str | Path,
    out_of_orderness: timedelta | int = 0,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    speed: float | None = None,
    engine: str = "auto",
    progress: bool = True,
    batch_size: int = 65536,
    time_unit: str | None = None,
    time_format: str | None = None,
    sort: bool = False,
    stop: Callable[[], bool] | None = None,
    max_ahead: timedelta | int | None = DEFAULT_MAX_AHEAD,
    overwrite: bool = False,
    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
    on_overflow: str = "fail",
    watch: float | None = None,
    on_change: str = "drain",
    timeouts: bool = False,
    files_in_order: bool = False,
) -> Summary:
    """Replay files through a CEP job; return its :class:`Summary`.

    ``pattern`` is a Pattern, several named rules as :meth:`Job.match` takes them
    (``{name: pattern or (pattern, key)}``), or a spec as ``cep replay`` takes it: one
    pattern (:func:`cep.runtime.specs.load`; a rule file's key is then the key) or a set
    of rules (:func:`cep.runtime.specs.load_rule_set`; each rule of a rule file keyed by
    its own key, the others by ``key``).  Several rules run in name order (the same rules
    given in another order are the same job, and resume its checkpoints); every record
    carries its ``"rule"`` and ``Summary.rules`` counts each rule's matches, timeouts and
    dead letters.

    Matches go to ``output`` (see :func:`sinks_for`); ``progress`` shows a progress bar.
    ``key`` is a field or a list of fields (a composite key); integer times are epoch
    milliseconds unless ``time_unit`` says ``"s"``, ``"us"`` or ``"ns"`` (see
    :meth:`Job.timestamps`); text times in another layout than ISO-8601 take a
    ``strptime`` ``time_format``.  With ``checkpoint_dir`` a checkpoint is taken every
    ``checkpoint_every`` events (default 100,000) and at the end.

    Files are read as they come, with watermarks (``out_of_orderness``): an event behind
    the watermark is late (``Summary.late``, written to the late output), which is what a
    live job would have done.  ``sort=True`` reads the whole input first and replays it
    in event-time order (stable: equal times keep their input order;
    :class:`~cep.runtime.sources.SortedFileSource`), so nothing is late and the matches are
    those :func:`cep.match` finds; it needs memory for the whole input.  ``stop()`` is
    asked after every batch: when it says yes the replay ends there (with a checkpoint
    when ``checkpoint_dir`` is given) and ``Summary.stopped`` is set.

    An event whose time is more than ``max_ahead`` (a timedelta or milliseconds; default
    :data:`DEFAULT_MAX_AHEAD`, None for no limit) ahead of the rest of its file is a dead
    letter (:meth:`Job.max_event_time_ahead`).  Output directories that hold part files of
    an earlier replay are refused with a :class:`~cep.errors.CEPError` unless ``resume``
    (the replay continues them) or ``overwrite=True`` (they are deleted first, and the
    earlier run's checkpoints in ``checkpoint_dir`` with them).  No key holds more than
    ``max_partial_matches`` partial matches (None: no cap); beyond, ``on_overflow`` fails
    the replay or drops some (:meth:`Job.limit_partial_matches`).

    With ``watch`` (seconds), ``pattern`` is a directory (or file) of rule files
    (:mod:`cep.rules`) read again whenever they change, looked at every ``watch`` seconds
    while the replay runs: a change takes effect at the watermark of that moment, a
    changed rule's old version drained or dropped as ``on_change`` says
    (:meth:`Job.rules`); records carry ``rule``, ``version`` and the rule's measures, and
    ``Summary.rule_changes`` lists the changes.  Without ``watch``, such a directory or
    file (:func:`cep.runtime.specs.rule_files`) runs the same way, read once.  Either way a
    rule that does not load is reported (a :class:`~cep.runtime.RuleWarning`, also in
    ``Summary.warnings``) and the others run.

    Several files are read side by side, each with a watermark of its own (the replay's is
    the least of them): files that each hold a stream over the same time.
    ``files_in_order=True`` reads them one after another (in the order given, a directory's
    files in name order) as one stream:
    history split into files by time (one per day), which side by side would keep the
    watermark at the first file's progress, the later days waiting in memory (and a rule
    change seen with ``watch`` applied to them).

    ``timeouts=True`` also writes the partial matches whose window passes (to
    ``out/timeouts/``); by default they are not tracked, as :func:`cep.match`, ``cep
    match`` and FlinkCEP (without a side output) do: when most partial matches expire
    (each small charge of card testing begins one) they outnumber the matches by far.

    >>> import json
    >>> from pathlib import Path
    >>> from cep.patterns.fraud import card_testing
    >>> rows = [{"card_id": "c1", "ts": 1000 * i, "amount": a}
    ...         for i, a in enumerate([1, 2, 3, 900, 5])]
    >>> _ = Path("cards.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> summary = replay(card_testing(), ["cards.jsonl"], key="card_id", time="ts",
    ...                  output="out/matches.jsonl", progress=False)
    >>> summary.events_in, summary.matches
    (5, 1)
    >>> [f.name for f in Path("out/matches").iterdir()]
    ['part-000000001.jsonl']

    Out of order, the big charge arrives first and the small ones are late; sorted, they
    match:

    >>> shuffled = [rows[3], rows[0], rows[1], rows[2], rows[4]]
    >>> _ = Path("shuffled.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in shuffled))
    >>> s = replay(card_testing(), ["shuffled.jsonl"], key="card_id", time="ts",
    ...            output="plain/matches.jsonl", progress=False, batch_size=1)
    >>> s.late, s.matches
    (3, 0)
    >>> s = replay(card_testing(), ["shuffled.jsonl"], key="card_id", time="ts",
    ...            output="sorted/matches.jsonl", progress=False, batch_size=1, sort=True)
    >>> s.late, s.matches
    (0, 1)

    Two rules in one pass, given as a spec (or as ``{"few": card_testing(tests=2), ...}``):

    >>> s = replay("few=cep.patterns.fraud:card_testing(tests=2),cep.patterns.fraud:card_testing",
    ...            ["cards.jsonl"], key="card_id", time="ts", output="two/matches.jsonl",
    ...            progress=False)
    >>> s.matches, {name: counts["matches"] for name, counts in s.rules.items()}
    (2, {'card_testing': 1, 'few': 1})
    >>> sorted(r["rule"] for r in FileSink("two/matches").read())
    ['card_testing', 'few']
    """
    import signal

    if resume and checkpoint_dir is None:
        raise CEPError("--resume needs --checkpoint-dir (where the checkpoints are)")
    if checkpoint_every is not None and checkpoint_dir is None:
        raise CEPError("--checkpoint-every needs --checkpoint-dir (where to write checkpoints)")
    if watch is not None and not isinstance(pattern, (str, Path)):
        raise CEPError("--watch reads a directory or file of rule files: give its path as "
                       "PATTERN")
    rules = None
    if isinstance(pattern, str) and watch is None:
        rules = _rule_files(pattern, key)
        if rules is None:
            pattern, key = load_for_job(pattern, key)
            if isinstance(pattern, RuleSet):  # rules.json:NAME, and lists of such
                rules = pattern
    if isinstance(pattern, Mapping):
        pattern = _in_name_order(pattern)
    _check_output(output, resume, overwrite, checkpoint_dir)
    source: Source = (SortedFileSource(*inputs, time=time, time_unit=time_unit,
                                       time_format=time_format, batch_size=batch_size) if sort
                      else FileSource(*inputs, batch_size=batch_size, in_order=files_in_order))
    if resume:
        assert checkpoint_dir is not None
        _check_same_inputs(Path(checkpoint_dir), source, sort)
    sinks = sinks_for(output, timeouts)
    requested: list[bool] = []
    previous = None
    if checkpoint_dir is not None and hasattr(signal, "SIGUSR1"):
        # `kill -USR1 <pid>` takes a savepoint at the next batch boundary
        try:
            previous = signal.signal(signal.SIGUSR1, lambda *_: requested.append(True))
        except ValueError:  # not the main thread
            pass

    def savepoint() -> bool:
        if requested:
            requested.clear()
            return True
        return False

    job = (
        Job(source)
        .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(out_of_orderness))
        .timestamps(time, unit=time_unit, format=time_format)
        .max_event_time_ahead(max_ahead)
        .limit_partial_matches(max_partial_matches, on_overflow)
    )
    if rules is not None:  # as --watch runs them, read once
        job = job.rules(rules, engine=engine, timeouts=timeouts)
    elif watch is None:
        job = job.match(pattern, engine=engine, timeouts=timeouts)
    else:
        from cep.runtime.live_rules import RuleDirectory

        job = job.rules(RuleDirectory(pattern, every=watch), on_change=on_change, engine=engine,
                        timeouts=timeouts)
    if key is not None:
        job = job.key_by(list(key) if isinstance(key, (list, tuple)) else key)
    for kind, sink in sinks.items():
        job = job.sink(sink, kinds=(kind,))
    if checkpoint_dir is not None:
        job = job.checkpoint(checkpoint_dir, every_events=checkpoint_every
                             if checkpoint_every is not None else DEFAULT_CHECKPOINT_EVERY)
    if resume and watch is None and rules is None:
        assert checkpoint_dir is not None
        _check_same_rules(Path(checkpoint_dir), job)
    try:
        if not progress:
            return job.run(resume=resume, speed=speed, savepoint=savepoint, stop=stop)
        return _with_progress(job, resume, speed, savepoint, stop)
    finally:
        if previous is not None:
            signal.signal(signal.SIGUSR1, previous)


def _rule_files(spec: str, key: Any) -> RuleSet | None:
    """The rule set ``spec`` names when it is a directory or file of rule files, else
    None; refused when no rule of it can run (a run of nothing would look like a run
    without matches)."""
    rules = rule_files(spec)
    if rules is None:
        return None
    if len(rules) == 1 and not rules.problems and Path(spec).is_file():
        # a file of one rule names it on its own: it runs though disabled, as
        # rules.json:NAME and cep match run it
        rules = rule_set([replace(next(iter(rules)), enabled=True)], spec)
    if not rules.enabled():
        if rules.problems:
            raise CEPError(f"rules {spec!r}: no rule loads: "
                           + "; ".join(str(p) for p in rules.problems))
        raise CEPError(f"rules {spec!r}: every rule is disabled (\"enabled\": false): "
                       f"{', '.join(sorted(rules.rules))}")
    if len(rules) == 1 and key is not None:  # one rule named on its own, as `cep match` does
        rule = next(iter(rules))
        Loaded(rule.pattern, rule.key, rule.name).key_or(key)
    return rules


def _in_name_order(rules: Mapping[Any, Any]) -> dict[Any, Any]:
    """Named rules in name order: a checkpoint holds the rules' states in the job's order,
    so the same rules given in another order must make the same job."""
    names = list(rules)
    if all(isinstance(name, str) for name in names):
        names.sort()
    return {name: rules[name] for name in names}  # other names: Job.match says what is wrong


def _newest_job_state(checkpoint_dir: Path, path: tuple[str, ...]) -> tuple[str, Any] | None:
    """``checkpoint <dir>`` and the value at ``path`` in the job state of the newest
    checkpoint in ``checkpoint_dir``; None without one, or when it cannot be read (loading
    the checkpoint reports what is wrong with it)."""
    import json

    from cep.runtime.checkpoint import CheckpointStore

    store = CheckpointStore(checkpoint_dir)
    latest = store.latest()
    if latest is None:
        return None
    try:
        value = json.loads((store.path(latest) / "manifest.json").read_text())["job"]
        for part in path:
            value = value[part]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"checkpoint {store.path(latest)}", value


def _check_same_rules(checkpoint_dir: Path, job: Job) -> None:
    """Refuse to resume a checkpoint of other rules than this replay's, naming them: a
    checkpoint of one pattern resumed with several rules or the other way round, rules
    added, left out or renamed, or a rule whose pattern or key changed (the job's own
    identity check would refuse these too, showing the patterns' text)."""
    from cep.errors import ForeignCheckpointError
    from cep.runtime.job import job_identity

    found = _newest_job_state(checkpoint_dir, ("identity", "pattern"))
    if found is None:
        return
    where, before = found
    now = job_identity(job, "")["pattern"]
    fix = ("resume with the rules it ran, or replay afresh without --resume (--overwrite "
           "replaces its output and checkpoints)")
    if isinstance(before, dict) != isinstance(now, dict):
        ran = (f"the rules {', '.join(sorted(before))}" if isinstance(before, dict)
               else "one pattern")
        runs = f"the rules {', '.join(sorted(now))}" if isinstance(now, dict) else "one pattern"
        raise ForeignCheckpointError(f"{where} ran {ran}; this replay runs {runs}: {fix}")
    if not isinstance(before, dict) or not isinstance(now, dict):
        return  # one pattern each: the job's identity check compares them
    missing, added = sorted(set(before) - set(now)), sorted(set(now) - set(before))
    changed = sorted(name for name in set(before) & set(now) if before[name] != now[name])
    if missing or added or changed:
        what = "; ".join(part for part in (
            f"left out: {', '.join(missing)}" if missing else "",
            f"added: {', '.join(added)}" if added else "",
            f"pattern or key changed: {', '.join(changed)}" if changed else "") if part)
        raise ForeignCheckpointError(f"{where} ran the rules {', '.join(sorted(before))}; this "
                                     f"replay runs {', '.join(sorted(now))} ({what}): {fix}")


def _check_same_inputs(checkpoint_dir: Path, source: Source, sort: bool) -> None:
    """Refuse to resume a checkpoint whose source offsets name none of these inputs (other
    files, or a replay with ``--sort`` resumed without it or the other way round): the
    offsets would be ignored and the input read again from the start."""
    found = _newest_job_state(checkpoint_dir, ("offsets",))
    if found is None or not isinstance(found[1], dict):
        return
    where, offsets = found
    if offsets and not set(offsets) & set(source.partitions()):
        was_sorted = any(p.startswith("sorted:") for p in offsets)
        hint = ("it was a replay with --sort: resume with --sort and the same inputs" if
                was_sorted and not sort else
                "it was a replay without --sort: resume without --sort" if sort and not
                was_sorted else "resume with the inputs it read")
        raise CEPError(f"{where} read other inputs than these "
                       f"({', '.join(sorted(offsets)[:3])}{', ...' if len(offsets) > 3 else ''}):"
                       f" {hint}")


def _with_progress(job: Job, resume: bool, speed: float | None, savepoint: Any,
                   stop: Callable[[], bool] | None) -> Summary:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = _count_rows(job.source)
    columns = [
        TextColumn("[bold]replay"), BarColumn(), TextColumn("{task.completed:,} events"),
        TextColumn("{task.fields[rate]}"), TextColumn("matches {task.fields[matches]:,}"),
        TextColumn("wm lag {task.fields[lag]}"), TimeElapsedColumn(),
    ]
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("replay", total=total, rate="", matches=0, lag="-")

        def update(s: Summary) -> None:
            lag = "-"
            if s.last_event_time is not None and -(2**62) < s.watermark < 2**62:
                lag = f"{max(0, s.last_event_time - s.watermark) / 1000:.1f}s"
            bar.update(task, completed=s.events_in, rate=f"{s.events_per_second:,.0f} ev/s",
                       matches=s.matches, lag=lag)

        return job.run(resume=resume, speed=speed, progress=update, savepoint=savepoint,
                       stop=stop)


def _count_rows(source: Any) -> int | None:
    import pyarrow.parquet as pq

    total = 0
    for f in getattr(source, "files", []):
        if f.suffix.lower() in (".parquet", ".pq"):
            total += pq.ParquetFile(f).metadata.num_rows
        else:
            return None
    return total or None


_KIND_LABELS = {"match": "matches", "timeout": "timeouts", "late": "late events",
                "dead_letter": "dead letters"}


def written(s: Summary, output: str | Path) -> list[tuple[Path, str]]:
    """The directories a replay writing to ``output`` put records in, with what they hold.

    >>> [(path.as_posix(), what)
    ...  for path, what in written(Summary(events_in=9, matches=2, late=1), "out/m.jsonl")]
    [('out/m', '2 matches'), ('out/late', '1 late event')]

    Dead letters of one rule of several are written too:

    >>> rules = {"a": {"matches": 0, "timeouts": 0, "dead_letters": 2}}
    >>> [what for _, what in written(Summary(events_in=9, rules=rules), "out/m.jsonl")]
    ['2 dead letters']
    """
    counts = {"match": s.matches, "timeout": s.timeouts, "late": s.late,
              "dead_letter": s.dead_letters + sum(c["dead_letters"] for c in s.rules.values())}
    out = []
    for kind, path in output_paths(output).items():
        n = counts[kind]
        if n:
            label = _KIND_LABELS[kind]
            out.append((path, f"{n:,} {label[:-1] if n == 1 and label.endswith('s') else label}"))
    return out


def late_advice(s: Summary) -> str:
    """What to do about late events (empty when there are none).

    >>> late_advice(Summary(events_in=200, late=150))
    '150 of 200 events (75.0%) arrived behind the watermark and were not matched: is the input in event-time order? Replay it with --sort, or allow more delay with --out-of-orderness'
    """
    if not s.late:
        return ""
    share = 100 * s.late / s.events_in if s.events_in else 100.0
    return (f"{s.late:,} of {s.events_in:,} events ({share:.1f}%) arrived behind the watermark "
            "and were not matched: is the input in event-time order? Replay it with --sort, "
            "or allow more delay with --out-of-orderness")


def rule_rows(s: Summary) -> list[tuple[str, ...]]:
    """The lines of the rules table of a replay of several rules: rule, matches, timeouts,
    dead letters (events that rule alone refused), partial matches the cap dropped and
    those live at the end; none for a single pattern.

    >>> rule_rows(Summary(rules={"velocity": {"matches": 1200, "timeouts": 3,
    ...     "dead_letters": 0, "dropped_partial_matches": 0, "partial_matches": 17}}))
    [('velocity', '1,200', '3', '0', '0', '17')]
    """
    return [(name, *(f"{c.get(k, 0):,}" for k in ("matches", "timeouts", "dead_letters",
                                                   "dropped_partial_matches",
                                                   "partial_matches")))
            + ((str(c.get("version", "-")), f"{c['events']:,}",
                f"{c['dropped_on_change']:,}") if s.rule_changes else ())
            for name, c in s.rules.items()]


def print_summary(s: Summary, output: str | Path, rule_problems: int = 0) -> None:
    """Print the summary of a replay writing to ``output`` as a table (what ``cep replay``
    shows at the end), and for several rules a table of each rule's counts
    (:func:`rule_rows`); ``rule_problems`` counts the rule problems reported."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="replay summary" + (" (stopped)" if s.stopped else ""),
                  show_header=False)
    late = f"{s.late:,}"
    if s.late:
        share = 100 * s.late / s.events_in if s.events_in else 100.0
        late += (f" ({share:.1f}%): not in event-time order? use --sort or a larger "
                 "--out-of-orderness")
    places = written(s, output)
    rows = [
        ("engine", s.engine),
        ("events", f"{s.events_in:,}"),
        ("processed", f"{s.processed:,}"),
        ("matches", f"{s.matches:,}"),
        ("timeouts", f"{s.timeouts:,}"),
        ("late events", late),
        ("dead letters", f"{s.dead_letters:,}" + (" (events no rule could take; per rule "
                                                   "below)" if s.rules else "")),
        ("throughput", f"{s.events_per_second:,.0f} events/s"),
        ("peak partial matches", f"{s.peak_partial_matches:,}"),
        ("dropped partial matches", f"{s.dropped_partial_matches:,}"),
        ("state at the end", f"{s.partial_matches:,} partial matches of "
                             f"{s.keys_with_state:,} keys, {s.buffered:,} events waiting for "
                             f"the watermark ({_size(s.state_bytes)})"),
        ("checkpoints", f"{s.checkpoints} (last {s.last_checkpoint_bytes:,} bytes, "
                        f"{s.last_checkpoint_seconds * 1000:.0f} ms)"),
        ("resumed from checkpoint", "-" if s.resumed_from is None else str(s.resumed_from)),
        ("written", "\n".join(f"{path}/ ({what})" for path, what in places)
         or "no records (the output directories are empty)"),
    ]
    if rule_problems:
        rows.append(("rule problems", f"{rule_problems:,} (printed above): a rule that does "
                     "not load is not run, a change that cannot be applied is not"))
    for name, value in rows:
        table.add_row(name, value)
    console = Console()
    console.print(table)
    if s.rules:
        per_rule = Table(title="rules")
        # a rule's name is how its row is told apart: never cut (a narrow terminal wraps
        # the counts' headers first; a log or a pipe gets the table's full width)
        per_rule.add_column("rule", no_wrap=True)
        columns = ["matches", "timeouts", "dead letters", "dropped", "partial at end"]
        if s.rule_changes:  # a rule set that changed: its versions and what changes dropped
            columns += ["version", "events", "dropped on change"]
        for column in columns:
            per_rule.add_column(column, justify="right")
        for line in rule_rows(s):
            per_rule.add_row(*line)
        _print_whole(console, per_rule)
    if s.rule_changes:
        changes = Table(title="rule changes")
        for column in ("watermark", "rule", "change", "version", "dropped"):
            changes.add_column(column)
        for c in s.rule_changes:
            version = (f"{c['previous']} -> {c['version']}" if c["previous"] and c["version"]
                       else str(c["version"] or c["previous"]))
            changes.add_row(watermark_text(c["watermark"]), c["rule"], c["change"], version,
                            f"{c['dropped']:,}")
        _print_whole(console, changes)


def _print_whole(console: Any, table: Any) -> None:
    """Print ``table`` as wide as it needs when the output is not a terminal (a log, a
    pipe: rich would cut its cells to 80 columns there)."""
    if not console.is_terminal:
        from rich.console import Console

        wide = console.options.update_width(1_000)
        console = Console(width=max(console.width, console.measure(table, options=wide).maximum))
    console.print(table)


def watermark_text(ms: int) -> str:
    """A rule change's watermark for people: "start" before any event, else UTC time.

    >>> watermark_text(-2**63), watermark_text(1_700_000_000_000)
    ('start', '2023-11-14T22:13:20Z')
    """
    from cep.times import iso_time

    return "start" if ms <= MIN_WATERMARK else iso_time(ms)


def _size(nbytes: int) -> str:
    """Bytes for people.

    >>> _size(512), _size(3_500_000)
    ('512 bytes', '3.3 MB')
    """
    if nbytes < 1024:
        return f"{nbytes} bytes"
    for unit in ("KB", "MB", "GB"):
        nbytes /= 1024  # type: ignore[assignment]
        if nbytes < 1024 or unit == "GB":
            break
    return f"{nbytes:.1f} {unit}"


def _max_late(text: str) -> tuple[int | None, float | None]:
    """``--max-late``: a count of events (``100``) or a share of them (``0.5%``)."""
    import argparse

    body = text.strip()
    try:
        if body.endswith("%"):
            share = float(body[:-1])
            if not 0 <= share <= 100:
                raise ValueError
            return None, share / 100
        count = int(body)
        if count < 0:
            raise ValueError
        return count, None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a number of events (100) or a percentage of them (0.5%)") from None


def _too_late(s: Summary, limit: tuple[int | None, float | None]) -> bool:
    count, share = limit
    if count is not None:
        return s.late > count
    assert share is not None
    return s.late > share * s.events_in


def _duration_arg(text: str) -> int:
    import argparse

    try:
        return _parse_duration(text, default_unit=None)
    except CEPError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _max_ahead_arg(text: str) -> int | None:
    """``--max-ahead``: a positive duration with a unit, or ``off``."""
    import argparse

    if text.strip().lower() in ("off", "none"):
        return None
    try:
        ms = _parse_duration(text, default_unit=None)
    except CEPError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if ms <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a duration > 0 (or off)")
    return ms


def _positive(kind: type) -> Callable[[str], Any]:
    import argparse

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: give a number > 0")
        return value

    parse.__name__ = kind.__name__
    return parse


EXAMPLES = """\
examples:
  cep replay cep.patterns.fraud:card_testing 'data/*.parquet' --key card_id --time ts \\
      --out-of-orderness 5s --checkpoint-dir chk --output out/matches.jsonl
  cep replay rules/ ...                several rules in one pass: a directory of .json
                                       files, a module (mypatterns), or specs
                                       separated by commas (ct=mod:card_testing,
                                       vb=mod:velocity_burst, mod a module such as
                                       cep.patterns.fraud)
  cep replay ... --resume              continue after a crash or Ctrl-C
  cep replay ... --sort                history not in time order: sort it first (in memory)
  cep replay ... --max-late 0.1%       accept a few late events (exit 0)
  cep replay ... --overwrite           replay again into the same --output
  cep replay ... --speed 60            pace the replay at 60 times real time, a source
                                       batch at a time (see --batch-size)
  cep replay rules/ ... --watch 5      rule files edited while it runs take effect (a
                                       new version drains the old one's partial matches)

Exit status: 0; 1 when a rule had a problem (each is printed; the other rules ran); 2
for a wrong command line or input; 3 when more events were late than --max-late allows
(the output is committed all the same); 130 after Ctrl-C.
Late events are events that arrive behind the watermark (the newest time seen minus
--out-of-orderness): a live job could not have matched them either.  They go to
out/late/, and the summary says how many there were.  Records that cannot be read, and
events more than --max-ahead ahead of the rest of their file, go to out/dead_letters/.
"""


def build_parser() -> Any:
    """The argument parser of ``cep replay``.

    >>> build_parser().parse_args(["p:q", "a.csv", "--time", "ts", "--output", "o.jsonl",
    ...                            "--key", "card,shop"]).key
    ('card', 'shop')
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="cep replay", description=__doc__.split("\n\n")[0], epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_input_arguments(parser, "inputs", "field(s) to partition by; a rule file gives its "
                        "own (of several rules, those without a key of their own use this)",
                        pattern_help=RULES_HELP)
    parser.add_argument("--time", required=True, help="event-time field")
    parser.add_argument("--time-unit", choices=TIME_UNITS,
                        help="unit of integer times: s, ms (the default), us or ns")
    parser.add_argument("--out-of-orderness", type=_duration_arg, default=0, metavar="DURATION",
                        help="how far events may arrive out of time order and still be "
                        "matched, with a unit: 500ms, 5s, 10m, 2h, 1d (default 0)")
    parser.add_argument("--sort", action="store_true",
                        help="read the whole input and replay it sorted by event time (stable), "
                        "so nothing is late; needs memory for the whole input")
    parser.add_argument("--max-late", type=_max_late, default=(0, None), metavar="N|P%",
                        help="late events accepted before the command warns and exits 3: a "
                        "count or a percentage of the events (default 0)")
    parser.add_argument("--checkpoint-dir", help="directory for checkpoints")
    parser.add_argument("--checkpoint-every", type=_positive(int), metavar="EVENTS",
                        help=f"events between checkpoints (default {DEFAULT_CHECKPOINT_EVERY:,}; "
                        "needs --checkpoint-dir)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last checkpoint in --checkpoint-dir")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the part files an earlier replay left in the output "
                        "directories (and its checkpoints in --checkpoint-dir) first; without it "
                        "(or --resume) such directories are refused")
    parser.add_argument("--max-ahead", type=_max_ahead_arg, default=DEFAULT_MAX_AHEAD,
                        metavar="DURATION|off",
                        help="an event further than this ahead of the rest of its file is a "
                        "dead letter instead of moving the watermark there, with a unit: 1h, "
                        "30d (default 365d; off: no limit)")
    parser.add_argument("--output", required=True, help="e.g. out/matches.jsonl (.parquet, .csv)")
    parser.add_argument("--time-format", metavar="FORMAT",
                        help="strptime format of text times, when they are not ISO-8601, e.g. "
                        "'%%d/%%m/%%Y %%H:%%M:%%S' (UTC unless it reads a zone); every "
                        "text time must then match it (an ISO-8601 one is a dead letter)")
    parser.add_argument("--speed", type=_positive(float),
                        help="N times real time, a batch at a time (default: as fast as "
                        "possible)")
    parser.add_argument("--engine", default="auto", choices=ENGINE_CHOICES)
    parser.add_argument("--batch-size", type=_positive(int), default=65536, metavar="EVENTS",
                        help="events per source batch; the watermark moves once per batch")
    add_cap_arguments(parser)
    parser.add_argument("--watch", type=_positive(float), metavar="SECONDS",
                        help="PATTERN is a directory (or file) of rule files: read them again "
                        "when they change, looked at every SECONDS, and apply the changes "
                        "while the replay runs")
    parser.add_argument("--on-change", choices=("drain", "drop"), default=None,
                        help="with --watch, what happens to a changed rule's old version: its "
                        "partial matches may still complete (drain, the default) or are "
                        "dropped")
    parser.add_argument("--files-in-order", action="store_true",
                        help="read the input files one after another (as given; a directory's "
                        "in name order) as one stream: history split into files by time "
                        "(one per day); without it "
                        "files are read side by side, each with a watermark of its own")
    timeouts = parser.add_mutually_exclusive_group()
    timeouts.add_argument("--timeouts", action="store_true",
                          help="also write the partial matches whose window passes, to "
                          "out/timeouts/ (default: not tracked, as in cep match)")
    # the default since timeouts became opt-in; kept so that scripts written before work
    timeouts.add_argument("--no-timeouts", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    return parser


def main(argv: Sequence[str]) -> int:
    """``cep replay`` with arguments ``argv``; returns the exit status: 0, 1 when rules had
    problems (each printed as ``FILE: PLACE: WHAT``; the other rules ran), 2 after printing
    a :class:`~cep.errors.CEPError`, 3 when more events were late than ``--max-late``
    allows, 130 after Ctrl-C (argparse exits with 2 itself for a wrong command line).

    >>> import json
    >>> from pathlib import Path
    >>> rows = [{"card_id": "c1", "ts": 1000 * i, "amount": a}
    ...         for i, a in enumerate([1, 2, 3, 900])]
    >>> _ = Path("cards.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> main(["cep.patterns.fraud:card_testing", "cards.jsonl", "--key", "card_id",
    ...       "--time", "ts", "--output", "replayed/matches.jsonl", "--quiet"])
    0
    """
    import signal

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.checkpoint_every is not None and args.checkpoint_dir is None:
        parser.error("--checkpoint-every needs --checkpoint-dir (where to write checkpoints)")
    if args.resume and args.checkpoint_dir is None:
        parser.error("--resume needs --checkpoint-dir (where the checkpoints are)")
    if args.resume and args.overwrite:
        parser.error("--resume continues the earlier replay's output and --overwrite deletes "
                     "it: give one of them")
    if args.on_change is not None and args.watch is None:
        parser.error("--on-change says what a change of the rules does while the replay "
                     "watches them: it needs --watch")
    if args.sort and args.out_of_orderness:
        parser.error("--sort replays the events in time order: there is no out-of-orderness "
                     "to allow for (leave out --out-of-orderness)")
    interrupted: list[bool] = []

    def on_interrupt(*_: Any) -> None:
        if interrupted:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        interrupted.append(True)
        print("\ncep replay: stopping at the next batch boundary (Ctrl-C again to abort at "
              "once)", file=sys.stderr)

    previous = None
    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:  # not the main thread: Ctrl-C stays KeyboardInterrupt
        pass
    problems: list[str] = []
    for name in disabled_named(args.pattern):
        print(f"cep replay: note: rule {name!r} is disabled (\"enabled\": false); it runs "
              "because it is named on its own", file=sys.stderr)
    try:
        with _rule_problems_printed(problems):
            summary = replay(
                args.pattern, expand_inputs(args.inputs), key=args.key,
                time=args.time, output=args.output, out_of_orderness=args.out_of_orderness,
                checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                resume=args.resume, speed=args.speed, engine=args.engine,
                progress=not args.quiet, batch_size=args.batch_size, time_unit=args.time_unit,
                time_format=args.time_format,
                sort=args.sort, stop=lambda: bool(interrupted), max_ahead=args.max_ahead,
                overwrite=args.overwrite, max_partial_matches=args.max_partial_matches,
                on_overflow=args.on_overflow, watch=args.watch, on_change=args.on_change or "drain",
                timeouts=args.timeouts, files_in_order=args.files_in_order,
            )
    except CEPError as err:
        print(f"cep replay: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cep replay: aborted: the output of the epoch under way was not committed"
              + (", resume from the last checkpoint with --resume" if args.checkpoint_dir
                 else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if not args.quiet:
        print_summary(summary, args.output, len(problems))
    if summary.stopped:
        if args.checkpoint_dir is None:
            print(f"cep replay: interrupted after {summary.events_in:,} events; nothing can be "
                  "resumed (no --checkpoint-dir): what was found so far is committed in "
                  f"{Path(args.output).parent}/; run again with --checkpoint-dir DIR to be "
                  "able to resume", file=sys.stderr)
        else:
            command = ["cep", "replay", *argv, *([] if args.resume else ["--resume"])]
            print(f"cep replay: interrupted after {summary.events_in:,} events; checkpoint "
                  f"taken in {args.checkpoint_dir}. Resume with:\n  {shlex.join(command)}",
                  file=sys.stderr)
        return EXIT_INTERRUPTED
    if summary.late:
        if _too_late(summary, args.max_late):
            count, share = args.max_late
            allowed = f"{count:,}" if count is not None else f"{share * 100:g}%"
            print(f"cep replay: WARNING: {late_advice(summary)}, or accept them with "
                  f"--max-late (now {allowed}). The late events are in "
                  f"{output_paths(args.output)['late']}/.", file=sys.stderr)
            return EXIT_LATE
        if not args.quiet:
            print(f"cep replay: {summary.late:,} late events (within --max-late) are in "
                  f"{output_paths(args.output)['late']}/", file=sys.stderr)
    return EXIT_RULE_PROBLEMS if problems else 0


@contextmanager
def _rule_problems_printed(problems: list[str]) -> Iterator[None]:
    """Print each rule problem the job reports (a RuleWarning) as ``cep replay: rule
    problem: FILE: PLACE: WHAT``, and each measure it could not compute over some matches
    (a MeasureWarning: they were written with it null) as ``cep replay: measure problem:
    ...``, and collect them in ``problems``; other warnings as ever."""
    from cep.measures import MeasureWarning
    from cep.runtime.live_rules import RuleWarning

    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            if issubclass(category, (RuleWarning, MeasureWarning)):
                problems.append(str(message))
                what = "rule" if issubclass(category, RuleWarning) else "measure"
                print(f"cep replay: {what} problem: {message}", file=sys.stderr)
            else:
                shown(message, category, *args, **kwargs)

        # the job reports each problem once
        warnings.simplefilter("always", RuleWarning)
        warnings.simplefilter("always", MeasureWarning)
        warnings.showwarning = show
        yield
