"""Rule sets that change while a job runs: where the rules come from, and how a change
is applied.

A job given a rule source (:meth:`cep.runtime.Job.rules`) asks it after every batch
whether the rules changed: a directory of rule files is read again when its files
change (:class:`RuleDirectory`), a program publishes a new set (:class:`RuleFeed`).  A
change takes effect at the watermark of that moment, between two batches:

- an added rule (or one enabled again) reads the events still waiting for the watermark
  and every event after them, none at or below it;
- a removed or disabled rule stops at once: its partial matches are dropped and counted;
- a changed rule (a new version) starts afresh under the new version; the old version's
  partial matches are drained (``on_change="drain"``: they may still complete or time
  out, and the old version begins no new one; it leaves once it holds none) or dropped
  and counted (``"drop"``).

Every record names the rule and version that produced it; ``Summary.rule_changes`` lists
each change with the watermark it took effect at, ``Summary.rules`` counts per rule.  A
checkpoint holds the rules in force (every version still running), so a job resumed
from it runs exactly those, then reads its source again.  A rule file that does not
load, or a rule changed without a new version, is reported (a :class:`RuleWarning`)
and the rule in force runs on: a typo never stops a rule.

>>> from cep import Pattern, col
>>> from cep.rules import Rule, rule_set
>>> feed = RuleFeed(rule_set([Rule("big", 1, "card", Pattern.begin("a").where(col("v") > 5))]))
>>> feed.poll(None)["big"].version, feed.poll(None)
(1, None)
"""

from __future__ import annotations

import hashlib
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyrsistent import pmap

from cep.errors import CEPError
from cep.rules import (
    CHANGED,
    DISABLED,
    REMOVED,
    Rule,
    RuleError,
    RuleProblem,
    RuleSet,
    load_rules,
    plan_changes,
    rule_fingerprint,
    rule_set,
)
from cep.runtime.operator import CepOperator, Output, RuleRun
from cep.runtime.watermarks import MIN_WATERMARK

if TYPE_CHECKING:
    from cep.runtime.job import Summary

#: what happens to a changed rule's partial matches
POLICIES = ("drain", "drop")
#: a change log entry's ``change`` when a drained version held nothing any more
RETIRED = "retired"


class RuleWarning(UserWarning):
    """A rule set read while a job runs has problems (a file that does not load, a rule
    changed without a new version): they are not applied, the rules in force run on."""


class RuleSource(Protocol):
    """Where a job's rules come from; asked after every batch."""

    def poll(self, summary: Summary | None) -> RuleSet | None:
        """The rule set, when it is new since the last call (checked with
        :meth:`cep.rules.RuleSet.check`), else None.  ``summary`` is the job's progress
        so far (a source may decide by it)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the source is, as JSON: a checkpoint is resumed only with the same one."""
        ...

    # A source may also have ``restart()``: a job calls it as it starts, so that its first
    # poll gives the rule set in force even when an earlier job was given it already (the
    # sources here have one; a source without it is asked as it is).


class RuleDirectory(RuleSource):
    """The rule files of a directory (or one file), read again when their contents change,
    looked at no more often than every ``every`` seconds.

    >>> import json, pathlib
    >>> from cep import Pattern
    >>> folder = pathlib.Path("watched-rules"); folder.mkdir(exist_ok=True)
    >>> doc = Rule("r", 1, "k", Pattern.begin("a")).to_dict()
    >>> _ = (folder / "r.json").write_text(json.dumps(doc))
    >>> source = RuleDirectory(folder, every=0)
    >>> [r.version for r in source.poll(None)], source.poll(None)
    ([1], None)
    >>> _ = (folder / "r.json").write_text(json.dumps({**doc, "version": 2}))
    >>> [r.version for r in source.poll(None)]
    [2]
    """

    def __init__(self, path: str | Path, every: float = 5.0) -> None:
        if every < 0:
            raise CEPError(f"every is seconds between looks at the rule files, got {every!r}")
        self.path = Path(path)
        if not self.path.exists():
            raise RuleError(f"{path}: no such file or directory")
        self.every = every
        self.restart()

    def restart(self) -> None:
        """Read the files at the next poll, as if never read (a new job starts)."""
        self._looked = -float("inf")
        self._digest: str | None = None

    def poll(self, summary: Summary | None) -> RuleSet | None:
        now = time.monotonic()
        if now - self._looked < self.every:
            return None
        self._looked = now
        digest = self._contents()
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            return load_rules(self.path).check()
        except RuleError as err:  # the directory itself went away: report, keep the rules
            return RuleSet(problems=(RuleProblem(str(self.path), "directory", str(err)),))

    def _contents(self) -> str:
        """A digest of every rule file's name and bytes (a change of either is a change)."""
        files = (sorted(p for p in self.path.rglob("*.json") if p.is_file())
                 if self.path.is_dir() else [self.path])
        h = hashlib.sha256()
        for f in files:
            h.update(str(f).encode() + b"\0")
            try:
                h.update(f.read_bytes())
            except OSError as err:
                h.update(str(err).encode())
        return h.hexdigest()

    def describe(self) -> dict[str, Any]:
        return {"kind": "directory", "path": str(self.path.resolve())}


class RuleFeed(RuleSource):
    """Rule sets a program publishes (from any thread); the job takes the newest at its
    next batch.  Given ``rules``, those are the first.

    >>> from cep import Pattern
    >>> feed = RuleFeed()
    >>> feed.poll(None) is None
    True
    >>> feed.publish([Rule("r", 1, "k", Pattern.begin("a"))])
    >>> [r.name for r in feed.poll(None)]
    ['r']
    """

    def __init__(self, rules: RuleSet | Iterable[Rule] | None = None) -> None:
        self._lock = threading.Lock()
        self._pending: RuleSet | None = None
        self._newest: RuleSet | None = None
        if rules is not None:
            self.publish(rules)

    def restart(self) -> None:
        """Give the newest set again at the next poll (a new job starts)."""
        with self._lock:
            self._pending = self._newest

    def publish(self, rules: RuleSet | Iterable[Rule]) -> None:
        """Make ``rules`` the rule set (checked here: a rule that does not compile is a
        problem of the set, reported when the job takes it)."""
        made = (rules if isinstance(rules, RuleSet) else rule_set(rules)).check()
        with self._lock:
            self._pending = self._newest = made

    def poll(self, summary: Summary | None) -> RuleSet | None:
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def describe(self) -> dict[str, Any]:
        return {"kind": "feed"}


class RuleSchedule(RuleSource):
    """Rule sets that take effect at given event times: the set of time ``T`` matches the
    events from ``T`` on (it takes effect at watermark ``T - 1``), the one before it the
    events before.  Replaying history with the rules as they were deployed, or a change
    planned for midnight, lands exactly where it says, whatever the batches.  A time is
    epoch milliseconds or a datetime (UTC when naive); None is the beginning.

    >>> from cep import Pattern
    >>> v = [Rule("r", n, "k", Pattern.begin("a")) for n in (1, 2)]
    >>> schedule = RuleSchedule([(None, v[:1]), (1000, v[1:])])
    >>> schedule.due(-1, 0), schedule.due(-1, 5000), schedule.due(999, 5000)
    (None, 999, None)
    """

    def __init__(self, entries: Iterable[tuple[Any, RuleSet | Iterable[Rule]]]) -> None:
        from cep.times import to_epoch_millis

        made = []
        for at, rules in entries:
            when = MIN_WATERMARK if at is None else to_epoch_millis(at, "ms", "schedule") - 1
            made.append((when, (rules if isinstance(rules, RuleSet) else rule_set(rules)).check()))
        self.entries = sorted(made, key=lambda e: e[0])
        self.restart()

    def restart(self) -> None:
        """Give the set in force at the next poll, as if none was given (a new job)."""
        self._given = -1

    def due(self, after: int, upto: int) -> int | None:
        """The watermark of the first change after watermark ``after``, up to ``upto``."""
        return next((at for at, _ in self.entries if after < at <= upto), None)

    def poll(self, summary: Summary | None) -> RuleSet | None:
        watermark = MIN_WATERMARK if summary is None else summary.watermark
        due = [i for i, (at, _) in enumerate(self.entries) if at <= watermark]
        if not due or due[-1] <= self._given:
            return None
        self._given = due[-1]
        return self.entries[due[-1]][1]

    def describe(self) -> dict[str, Any]:
        return {"kind": "schedule", "at": [at for at, _ in self.entries]}


def rule_source(rules: Any, every: float = 5.0) -> RuleSource:
    """A rule source from what :meth:`cep.runtime.Job.rules` takes: a directory or file of
    rules (watched), a RuleSet or rules (fixed, a feed nobody publishes to), or a source."""
    if isinstance(rules, (str, Path)):
        return RuleDirectory(rules, every)
    if isinstance(rules, RuleSet) or (isinstance(rules, (list, tuple)) and all(
            isinstance(r, Rule) for r in rules)):
        return RuleFeed(rules)
    if hasattr(rules, "poll") and hasattr(rules, "describe"):
        return rules
    raise CEPError(f"rules are a directory or file of rule files, a RuleSet, a list of Rule, "
                   f"or a source with poll() and describe(); got {type(rules).__name__}")


@dataclass
class LiveRules:
    """The rules a job runs from a :class:`RuleSource`: the set in force, and the changes
    made so far (see the module docstring)."""

    source: RuleSource
    #: one of POLICIES (Job.rules checks it)
    policy: str = "drain"
    #: the rule set in force (as read, disabled rules included)
    in_force: RuleSet = field(default_factory=RuleSet)
    #: the problems reported so far (each once)
    reported: set[str] = field(default_factory=set)
    #: the rule each running version runs, by its slot in the operator
    documents: dict[int, Rule] = field(default_factory=dict)
    #: every version each rule has run under, with its rule_fingerprint (a version must
    #: mean one rule: see plan_changes)
    used: dict[str, dict[int, str]] = field(default_factory=dict)

    def poll(self, operator: CepOperator, summary: Summary) -> tuple[Output, list[dict[str, Any]]]:
        """Read the source; apply what changed to ``operator`` at its watermark.  Returns
        the output the change made (dead letters of waiting events a new rule cannot
        read) and the change log entries."""
        new = self.source.poll(summary)
        if new is None:
            return Output(), []
        return self.apply(operator, summary, new)

    def apply(self, operator: CepOperator, summary: Summary, new: RuleSet
              ) -> tuple[Output, list[dict[str, Any]]]:
        """Make ``new`` (a rule set as read, checked) the rules ``operator`` runs, at its
        watermark: what :meth:`poll` does with a set its source gave."""
        plan = plan_changes(self.in_force, new, self.used)
        self._report(plan.problems, summary)
        out, log = Output(), []
        current = {r.name: r for r in operator.rules if not r.draining}
        after = plan.after
        for change in plan.changes:
            entry = {"rule": change.name, "change": change.what, "watermark": operator.watermark,
                     "version": None, "previous": None, "dropped": 0}
            old_run = current.get(change.name)
            if change.what in (REMOVED, DISABLED):
                assert old_run is not None
                entry["previous"] = old_run.version
                entry["dropped"] = sum(self._remove(operator, r) for r in operator.rules
                                       if r.name == change.name)
                log.append(entry)
                continue
            assert change.new is not None
            try:
                run, made = operator.add_rule(change.name, change.new.pattern, change.new.key,
                                              change.new.version,
                                              measures=dict(change.new.measures))
            except CEPError as err:  # not in force: the rule it would replace runs on
                place = f"rule {change.name!r}"
                why = str(err).removeprefix(f"{place}: ")  # the operator names the rule too
                self._report([RuleProblem(new.sources.get(change.name, "?"), place, why,
                                          change.name)], summary)
                after = _in_force(after, change.name, change.old)
                continue
            self.documents[run.slot] = change.new
            self.used.setdefault(change.name, {})[change.new.version] = rule_fingerprint(
                change.new)
            out.dead += made.dead
            entry["version"] = change.new.version
            if change.what == CHANGED:
                assert old_run is not None
                entry["previous"] = old_run.version
                if self.policy == "drop" or not old_run.engine.partial_matches:
                    entry["dropped"] = self._remove(operator, old_run)
                else:
                    operator.drain_rule(old_run)
            log.append(entry)
        self.in_force = after
        return out, log

    def due(self, after: int, upto: int) -> int | None:
        """The watermark of the first change the source has scheduled after watermark
        ``after``, up to ``upto`` (None: none, or a source that schedules nothing)."""
        due = getattr(self.source, "due", None)
        return None if due is None else due(after, upto)

    def retire(self, operator: CepOperator) -> list[dict[str, Any]]:
        """Remove the drained versions that hold nothing any more; their log entries."""
        log = []
        for run in operator.drained():
            self._remove(operator, run)
            log.append({"rule": run.name, "change": RETIRED, "watermark": operator.watermark,
                        "version": None, "previous": run.version, "dropped": 0})
        return log

    def _remove(self, operator: CepOperator, run: RuleRun) -> int:
        self.documents.pop(run.slot, None)
        return operator.remove_rule(run)

    def _report(self, problems: Iterable[RuleProblem], summary: Summary) -> None:
        for problem in problems:
            text = str(problem)
            if text in self.reported:
                continue
            self.reported.add(text)
            summary.warnings.append(text)
            warnings.warn(text, RuleWarning, stacklevel=5)

    # -------------------------------------------------------------- checkpoints
    def state(self, operator: CepOperator) -> dict[str, Any]:
        """The rules in force and every running version, as JSON for a checkpoint."""
        return {
            "in_force": [r.to_dict() for r in self.in_force],
            "sources": dict(self.in_force.sources),
            "reported": sorted(self.reported),
            "used": {name: {str(v): f for v, f in versions.items()}
                     for name, versions in self.used.items()},
            "key_specs": [_spec_json(s) for s in operator.key_specs[1:]],
            "next_slot": operator.next_slot,
            "runs": [{"slot": r.slot, "key": r.key, "draining": r.draining,
                      "rule": self.documents[r.slot].to_dict()} for r in operator.rules],
        }

    def restore(self, state: dict[str, Any], operator: CepOperator) -> None:
        """Run what :meth:`state` recorded (before the engines' state is restored)."""
        rules = [Rule.from_dict(d) for d in state["in_force"]]
        self.in_force = RuleSet(pmap({r.name: r for r in rules}), tuple(r.name for r in rules),
                                (), pmap(state["sources"]))
        self.reported = set(state["reported"])
        # checkpoints written before versions were recorded know only the running ones
        self.used = {name: {int(v): f for v, f in versions.items()}
                     for name, versions in state.get("used", {}).items()}
        runs = [(Rule.from_dict(run["rule"]), run) for run in state["runs"]]
        self.documents = {run["slot"]: rule for rule, run in runs}
        for rule in self.documents.values():
            self.used.setdefault(rule.name, {}).setdefault(rule.version, rule_fingerprint(rule))
        operator.set_rules([_spec_back(s) for s in state["key_specs"]],
                           [(rule.name, rule.pattern, run["key"], rule.version, run["slot"],
                             run["draining"]) for rule, run in runs], state["next_slot"])


def _in_force(rules: RuleSet, name: str, rule: Rule | None) -> RuleSet:
    """``rules`` with ``rule`` in force under ``name`` (None: no rule of that name)."""
    if rule is not None:
        return RuleSet(rules.rules.set(name, rule), rules.order, rules.problems, rules.sources)
    return RuleSet(rules.rules.discard(name), tuple(n for n in rules.order if n != name),
                   rules.problems, rules.sources.discard(name))


def _spec_json(spec: Any) -> Any:
    return list(spec) if isinstance(spec, tuple) else spec


def _spec_back(spec: Any) -> Any:
    return tuple(spec) if isinstance(spec, list) else spec


__all__ = ["POLICIES", "RETIRED", "LiveRules", "RuleDirectory", "RuleFeed", "RuleSchedule",
           "RuleSource", "RuleWarning", "rule_source"]
