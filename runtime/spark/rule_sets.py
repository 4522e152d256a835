"""Rule sets on Spark: what a worker does for one key group of a rule set.

A rule set (:mod:`cep.rules`) runs with each event routed once to every distinct key
field (the groups of a field run its rules; one shuffle, because Spark allows one stateful
operator per query); a group call runs every rule keyed by that field at once, through the embedded runtime's operator and
its :class:`~cep.runtime.live_rules.LiveRules`, so a rule change means on Spark what it
means in a :class:`~cep.runtime.Job`: a new rule reads the events waiting for the
watermark and every event after them; a removed or disabled rule's partial matches are
dropped; a changed rule runs its new version while the old one's partial matches drain
or are dropped (``on_change``).

**When a change takes effect.**  Spark calls a group only when it has data or a timer,
so groups see a change at different micro-batches; yet every key must switch at one
watermark, or the output would depend on which keys happened to get data.  A directory
of rules therefore has a **change log** (:class:`ChangeLog`, a folder beside it): the
first group call that finds the files changed appends the new set with the watermark of
its micro-batch, and every group applies the log's entries in order, each at its
watermark, whenever it is next called.  A group that was not called in between held
nothing that the change would have treated differently (events only wait until a
watermark releases them, and a release is what calls the group), so every key switches
exactly at the logged watermark; a micro-batch replayed after a crash finds the same
entry and gives the same output.

A group's state holds, besides the waiting events and every running version's partial
matches, the documents of the rules it runs (a drained version runs on after a restart,
when its file is gone) and the last log entry it applied.  A rule that left is gone from
a group's state after the group's next call.

Spark-free, like :mod:`cep.runtime.spark.runner`: tested without a cluster.

>>> from cep import Pattern, col
>>> from cep.rules import Rule, rule_set
>>> rules = rule_set([Rule("big", 1, "card", Pattern.begin("a").where(col("v") > 5))])
>>> spec = RuleSetSpec(None, ("card",), ("card", "ts", "v"), {"v": "numeric"}, False,
...                    rules=rules_text(rules), rule_key="card", key_columns=("card",))
>>> import pandas as pd
>>> frame = pd.DataFrame({"card": ["c1", "c1"], "ts": [1, 2], "v": [1.0, 9.0],
...                       "__cep_ts": [1, 2]})
>>> out = RuleSetRunner(spec).run(None, [frame], None, final=True).output
>>> out[["card", "kind", "rule", "version", "start"]].to_dict("records")
[{'card': 'c1', 'kind': 'match', 'rule': 'big', 'version': 1, 'start': 2}]
>>> [(stage, [e["v"] for e in events]) for stage, events in out["stages"][0].items()]
[('a', [9.0])]
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pyrsistent import pmap

from cep.errors import CEPError
from cep.nfa.engine import Snapshot
from cep.nfa.found import Found
from cep.rules import Rule, RuleProblem, RuleSet, load_rules_text, plan_changes, versions_used
from cep.runtime.job import Summary, combine, split
from cep.runtime.live_rules import LiveRules, RuleDirectory, RuleFeed
from cep.runtime.operator import CepOperator, Output
from cep.runtime.records import json_text
from cep.runtime.spark.runner import FIXED, SIDE, GroupRunner, Spec, group_operator
from cep.runtime.tables import match_table, stage_columns
from cep.runtime.watermarks import MIN_WATERMARK

#: the columns of a rule set's output after the key: each row names its rule and version;
#: the stages a rule's pattern has are a map (rules come and go while the query runs, and a
#: Spark query's schema is fixed when it starts), and so are its measures, as JSON text
RULE_COLUMNS = ("rule", "version")
STAGES, MEASURES = "stages", "measures"
#: the change log's folder, when not given: beside the rule directory, named after it
LOG_SUFFIX = ".cep-changes"


@dataclass(frozen=True)
class RuleSetSpec(Spec):
    """A :class:`~cep.runtime.spark.runner.Spec` for the groups of one key field of a rule
    set (``pattern`` is None, ``key`` is the field): where its rules come from, and the
    columns of the query's output."""

    #: the rules' key as their documents write it: a field, or a tuple of fields
    rule_key: str | tuple[str, ...] = ""
    #: every key field of the query, in order: the output's key columns
    key_columns: tuple[str, ...] = ()
    #: what a changed rule's old version does: "drain" or "drop"
    on_change: str = "drain"
    #: a directory (or file) of rule files, read again while the query runs ...
    directory: str | None = None
    #: ... looked at no more often than every so many seconds per worker process ...
    every: float = 1.0
    #: ... and the folder of its change log
    changes: str | None = None
    #: or the rule set itself, as ``{"rules": [...]}`` JSON text
    rules: str | None = None
    #: the key fields the query routes events to, each event to the groups of every one (a
    #: rule keyed otherwise cannot run) ...
    routed: tuple[Any, ...] = ()
    #: ... and whether this field's groups report what concerns an event whatever the rule
    #: (counted events, late events, dead letters of the event): one field's do
    primary: bool = True


def rules_text(rules: RuleSet) -> str:
    """A rule set as the JSON text a spec carries (``{"rules": [...]}``).

    >>> from cep import Pattern
    >>> from cep.rules import rule_set
    >>> json.loads(rules_text(rule_set([Rule("r", 1, "k", Pattern.begin("a"))])))["rules"][0]["name"]
    'r'
    """
    return json.dumps({"rules": [r.to_dict() for r in rules]})


def change_log_path(directory: str | Path) -> Path:
    """Where a rule directory's change log lives unless told: beside it.

    >>> change_log_path("/srv/rules").as_posix()
    '/srv/rules.cep-changes'
    """
    path = Path(directory)
    return path.with_name(path.name + LOG_SUFFIX)


# ------------------------------------------------------------------ the log
@dataclass(frozen=True)
class Change:
    """One entry of a change log: from ``watermark`` on, ``rules`` are in force."""

    seq: int
    watermark: int
    digest: str
    rules: RuleSet


class ChangeLog:
    """The rule sets a directory held, in the order they were found, each with the watermark
    it took effect at: one file per entry (``00000001.change``), created whole and never
    rewritten, so every worker reads the same history.

    >>> import tempfile
    >>> from cep import Pattern
    >>> from cep.rules import rule_set
    >>> log = ChangeLog(tempfile.mkdtemp())
    >>> v1 = rule_set([Rule("r", 1, "k", Pattern.begin("a"))])
    >>> [c.seq for c in log.record(v1, 1000)], [c.seq for c in log.record(v1, 2000)]
    ([1], [1])
    >>> [(c.seq, c.watermark) for c in log.entries()]
    [(1, 1000)]
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._read: dict[int, Change] = {}

    def entries(self) -> list[Change]:
        """Every entry, in order (those read before are not read again)."""
        try:
            names = sorted(p.name for p in self.path.iterdir() if p.suffix == ".change")
        except FileNotFoundError:
            return []
        for name in names:
            seq = int(name.split(".")[0])
            if seq not in self._read:
                self._read[seq] = self._load(self.path / name, seq)
        return [self._read[seq] for seq in sorted(self._read)]

    def record(self, rules: RuleSet, watermark: int) -> list[Change]:
        """Every entry, after adding ``rules`` at ``watermark`` when they are not the last
        entry's (a watermark before the last entry's is taken as that one's: the log only
        moves forward)."""
        read = rules
        while True:
            known = self.entries()
            # a version a rule ran under before, reused for another rule, is refused here,
            # once for every group (each group's own history may lack it)
            rules = plan_changes(known[-1].rules, read, versions_used(
                c.rules for c in known)).after if known else read
            digest = set_digest(rules)
            if known and known[-1].digest == digest:
                return known
            seq = known[-1].seq + 1 if known else 1
            at = max(watermark, known[-1].watermark) if known else watermark
            if self._create(seq, at, digest, rules):
                return self.entries()
            # another worker wrote that entry first: read it, and look again

    def _create(self, seq: int, watermark: int, digest: str, rules: RuleSet) -> bool:
        """Write entry ``seq`` whole, unless it exists (a hard link is created at once or
        not at all, so no reader sees half an entry and no two writers both succeed)."""
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / f"{seq:08d}.change"
        tmp = self.path / f".{seq:08d}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        document = {"seq": seq, "watermark": watermark, "digest": digest,
                    "rules": json.loads(rules_text(rules))["rules"],
                    "sources": dict(rules.sources),
                    "problems": [[p.file, p.place, p.message, p.rule]
                                 for p in rules.problems]}
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(document, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, final)
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink()

    @staticmethod
    def _load(path: Path, seq: int) -> Change:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise CEPError(f"rule change log entry {path} cannot be read: {err}") from err
        loaded = load_rules_text(json.dumps({"rules": doc["rules"]}), str(path))
        rules = RuleSet(loaded.rules, loaded.order,
                        tuple(RuleProblem(*p) for p in doc["problems"]),
                        pmap({n: f for n, f in doc["sources"].items() if n in loaded.rules}))
        return Change(seq, int(doc["watermark"]), doc["digest"], rules)


def set_digest(rules: RuleSet) -> str:
    """A digest of a rule set: its rules' documents and its problems."""
    return _digest(json.dumps([[_digest_of(r) for r in rules], [str(p) for p in rules.problems]]))


# ------------------------------------------------------ the rules, per process
#: per worker process: a directory's watcher and its change log, by the directory
_WATCHERS: dict[str, tuple[RuleDirectory, ChangeLog]] = {}
#: per worker process: a fixed rule set (a spec's ``rules``) as the one entry it is, by its
#: text's digest
_FIXED: dict[str, Change] = {}
#: per worker process: the rules of each change, by (source, entry, key field)
_KEYED: dict[tuple[str, int, Any], RuleSet] = {}
#: per worker process: each rule read, by the digest of its document; one Rule (and so one
#: pattern object, compiled once by the operators' engine cache) per document
_RULES: dict[str, Rule] = {}
#: the digest of each of those, by the Rule's id
_DIGESTS: dict[int, str] = {}
#: per worker process: problems already reported (each is reported once)
_REPORTED: set[str] = set()
#: per worker process: where those reports go besides a RuleWarning
_PROBLEMS = Summary()


def changes_after(spec: RuleSetSpec, seen: int, watermark: int | None
                  ) -> list[tuple[int, int, RuleSet, RuleSet]]:
    """The changes a group that applied entry ``seen`` has still to apply, as (entry,
    watermark, the rules keyed by ``spec``'s field, every rule that can run), reading the
    directory first (a change found there is logged at ``watermark``, the micro-batch's)."""
    if spec.directory is None:  # a fixed set: one entry, in force from the start
        source = _digest(spec.rules or "")
        if source not in _FIXED:
            _FIXED[source] = Change(1, MIN_WATERMARK, source,
                                    load_rules_text(spec.rules or "", "<rules>").check())
        changes = [] if seen else [_FIXED[source]]
    else:
        source = spec.directory
        if source not in _WATCHERS:
            _WATCHERS[source] = (RuleDirectory(source, spec.every),
                                 ChangeLog(spec.changes or change_log_path(source)))
        watcher, log = _WATCHERS[source]
        read = watcher.poll(None)
        at = MIN_WATERMARK if watermark is None else watermark
        changes = [c for c in (log.entries() if read is None else log.record(read, at))
                   if c.seq > seen]
    out = []
    for change in changes:
        whole = (source, change.seq, None)
        if whole not in _KEYED:
            _KEYED[whole] = routed_only(fitting(change.rules, spec.kinds), spec.routed)
        slot = (source, change.seq, spec.rule_key)
        if slot not in _KEYED:
            _KEYED[slot] = _keyed(_KEYED[whole], spec.rule_key)
        out.append((change.seq, change.watermark, _KEYED[slot], _KEYED[whole]))
    return out


def _only(rules: RuleSet, kept: Sequence[str], problems: Sequence[RuleProblem]) -> RuleSet:
    """The rules of ``rules`` named in ``kept``, with ``problems``."""
    return RuleSet(pmap({n: rules[n] for n in kept}), tuple(kept), tuple(problems),
                   pmap({n: f for n, f in rules.sources.items() if n in kept}))


def fitting(rules: RuleSet, kinds: Mapping[str, str]) -> RuleSet:
    """``rules`` less the enabled ones that cannot run on columns of these types (an
    expression whose types do not fit, a measure over no stage or column): those become
    problems, after the set's own.

    >>> from cep import Pattern, col
    >>> from cep.rules import rule_set
    >>> bad = Rule("r", 1, "k", Pattern.begin("a").where(col("v") == "x"))
    >>> [p.message for p in fitting(rule_set([bad]), {"v": "numeric"}).problems]
    ["stage 'a': (col('v') == 'x'): cannot compare numeric with string (the rule does not run)"]
    """
    from cep.measures import check_measures
    from cep.nfa.bytecode import check_types

    kept, problems = [], list(rules.problems)
    for rule in rules:
        try:
            if rule.enabled:
                check_measures(rule.pattern, dict(rule.measures), kinds)
                check_types(rule.pattern, kinds)
        except CEPError as err:
            problems.append(RuleProblem(rules.sources.get(rule.name, "?"), f"rule {rule.name!r}",
                                        f"{err} (the rule does not run)", rule.name))
            continue
        kept.append(rule.name)
    return _only(rules, kept, problems)


def routed_only(rules: RuleSet, routed: Sequence[Any]) -> RuleSet:
    """``rules`` less those keyed by a field the query does not route (``routed``: every
    field it does; empty: not known), which become problems: a rule added to a running
    query keyed by a new field does not run, and says so.

    >>> from cep import Pattern
    >>> from cep.rules import rule_set
    >>> later = Rule("by_ip", 1, "ip", Pattern.begin("a"))
    >>> [p.message for p in routed_only(rule_set([later]), ["card"]).problems]
    ["keyed by 'ip', a key the query does not route: it does not run until the query is restarted with that field (key_fields=)"]
    """
    if not routed:
        return rules
    away = [r.name for r in rules if r.enabled and r.key not in routed]
    if not away:
        return rules
    problems = [RuleProblem(rules.sources.get(n, "?"), f"rule {n!r}",
                            f"keyed by {rules[n].key!r}, a key the query does not route: it "
                            "does not run until the query is restarted with that field "
                            "(key_fields=)", n) for n in away]
    return _only(rules, [n for n in rules.order if n not in away], [*rules.problems, *problems])


def _keyed(rules: RuleSet, key: Any) -> RuleSet:
    """The rules of ``rules`` keyed by ``key`` (the problems of the whole set kept: a rule
    whose file broke runs on), each the one Rule of its document."""
    kept = {rule.name: _canonical(rule) for rule in rules if rule.key == key}
    return RuleSet(pmap(kept), tuple(kept), rules.problems,
                   pmap({n: f for n, f in rules.sources.items() if n in kept}))


def _canonical(rule: Rule, digest: str | None = None) -> Rule:
    """The one Rule of ``rule``'s document in this process."""
    digest = digest or _digest(json.dumps(rule.to_dict(), sort_keys=True))
    if digest not in _RULES:
        _RULES[digest] = rule
        _DIGESTS[id(rule)] = digest
    return _RULES[digest]


def _digest_of(rule: Rule) -> str:
    """The digest of a rule's document (known for every rule :func:`_canonical` gave)."""
    known = _DIGESTS.get(id(rule))
    if known is not None and _RULES.get(known) is rule:
        return known
    return _digest(json.dumps(rule.to_dict(), sort_keys=True))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# ------------------------------------------------------------------ a group
class RuleSetRunner(GroupRunner):
    """Runs one group of a rule set's key field against its state (one per worker process
    and spec): the :class:`~cep.runtime.spark.runner.GroupRunner` of a rule set."""

    spec: RuleSetSpec

    def __init__(self, spec: RuleSetSpec) -> None:  # noqa: D107 -- the class says it
        self.spec = spec
        self.measures = {}
        self.stages = []
        self._prototype = group_operator(spec, {})
        self._prototype.engine_cache = {}  # every call restores the same rules
        self._prototype.rules_elsewhere = len(spec.routed) > 1
        self.columns = list(spec.columns)
        self.output_columns = rule_set_columns(spec)
        self._live = LiveRules(RuleFeed(), spec.on_change)
        #: a fixed rule set's digest, which a group's state records (None: a directory)
        self._fixed = None if spec.directory is not None else _digest(spec.rules or "")
        #: the last change log entry the group applied
        self._seen = 0
        #: every rule version this call ran, by (name, version): what its outputs hold
        self._ran: dict[tuple[str, int], Rule] = {}

    def _restore(self, state: bytes | None) -> CepOperator:
        self._live = LiveRules(RuleFeed(), self.spec.on_change, reported=_REPORTED)
        self._seen, self._ran = 0, {}
        return super()._restore(state)

    def _restore_engines(self, op: CepOperator, meta: dict[str, Any], snap: Snapshot,
                         blobs: dict[str, bytes]) -> None:
        held = meta["rules"]
        fixed = held.get("fixed")  # the fixed list of rules the state was made with
        if self._fixed is not None and fixed not in (None, self._fixed):
            raise CEPError(
                "the query was restarted from a checkpoint with another fixed list of rules: "
                "each key's state holds the rules it ran, so keys with state would run the "
                "old ones and the others the new ones. Give the rules as a directory (a "
                "change is logged and every key switches at one watermark), or start the "
                "query with a new checkpointLocation")
        rules = _documents(held, blobs.get("rules", b""))
        live = self._live
        in_force = [rules[d] for d in held["in_force"]]
        live.in_force = RuleSet(pmap({r.name: r for r in in_force}),
                                tuple(r.name for r in in_force), (), pmap(held["sources"]))
        live.documents = {slot: rules[d] for slot, _, d in held["runs"]}
        op.set_rules([], [(rules[d].name, rules[d].pattern, 0, rules[d].version, slot, draining)
                          for slot, draining, d in held["runs"]], held["next_slot"])
        for rule, part in zip(op.rules, split(snap, _state_names(op)), strict=True):
            rule.engine.restore(part)
        self._seen = int(held["seen"])
        self._ran = {(r.name, r.version): r for r in live.documents.values()}

    def _before_watermark(self, op: CepOperator, watermark: int | None) -> list[Output]:
        """Apply the changes logged since the group's last call, each at its watermark."""
        out = []
        due = [c for c in changes_after(self.spec, self._seen, watermark)
               if watermark is None or c[1] <= watermark]  # (a log written past a restart)
        if not op.rules and not op.buffered:  # holding nothing, only the newest set matters
            due = due[-1:]
        for seq, at, rules, whole in due:
            if at > op.watermark:
                out.append(op.process_watermark(at))
            self._moved_away(op, rules, whole)
            made, _ = self._live.apply(op, _PROBLEMS, rules)
            out.append(made)
            self._live.retire(op)
            self._seen = seq
            self._ran.update({(r.name, r.version): r for r in self._live.documents.values()})
        return out

    def _moved_away(self, op: CepOperator, rules: RuleSet, whole: RuleSet) -> None:
        """The rules in force here whose new version is keyed by another field (so runs in
        that field's groups): changed, not removed, so their version here drains under
        ``on_change="drain"`` as a changed rule's does, instead of being dropped."""
        live = self._live
        if self.spec.on_change != "drain":
            return  # "drop": dropped, as a removed rule's partial matches are
        for name in [n for n in live.in_force.rules if n not in rules.rules]:
            new = whole.rules.get(name)
            if new is None or not new.enabled:
                continue  # removed or disabled: dropped
            for run in [r for r in op.rules if r.name == name and not r.draining]:
                if run.engine.partial_matches:
                    op.drain_rule(run)
                else:
                    live.documents.pop(run.slot, None)
                    op.remove_rule(run)
            held = live.in_force
            live.in_force = _only(held, [n for n in held.order if n != name], held.problems)

    def _save(self, op: CepOperator) -> bytes | None:
        self._live.retire(op)  # drained versions that hold nothing leave the state
        return super()._save(op)

    def _engine_state(self, op: CepOperator) -> tuple[Snapshot, dict[str, Any], dict[str, bytes]]:
        live = self._live
        docs = {_digest_of(r): r for r in (*live.in_force, *live.documents.values())}
        held = {
            "seen": self._seen,
            "fixed": self._fixed,
            "in_force": [_digest_of(r) for r in live.in_force],
            "sources": dict(live.in_force.sources),
            "next_slot": op.next_slot,
            "runs": [[r.slot, r.draining, _digest_of(live.documents[r.slot])] for r in op.rules],
        }
        text = json.dumps({d: r.to_dict() for d, r in docs.items()}).encode()
        snap = combine([r.engine.snapshot() for r in op.rules], _state_names(op))
        return snap, {"rules": held}, {"rules": zlib.compress(text)}

    def _match_frame(self, found: list[Found]) -> pd.DataFrame:
        frames = [self._rule_frame(part) for part in found]
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

    def _sometimes_null(self) -> list[str]:
        # rows of a rule keyed by one field have no value in the others' columns
        return [*self.spec.key_columns, *RULE_COLUMNS, *super()._sometimes_null()]

    def _rule_frame(self, found: Found) -> pd.DataFrame:
        """One rule version's outputs in the rule set's columns: its key in the key field's
        columns, its stages and measures as maps."""
        assert found.rule is not None and found.version is not None
        rule = self._ran[(found.rule, found.version)]
        stages = stage_columns(rule.pattern)
        measures = dict(rule.measures)
        frame = match_table(found, key=self.spec.key, stages=stages, measures=measures,
                            timestamps=self.spec.time_is_timestamp, lenient=True).to_pandas()
        frame[STAGES] = [dict(zip(stages, events, strict=True))
                         for events in zip(*(frame[s] for s in stages), strict=True)]
        frame[MEASURES] = ([{m: None if _null(v) else json_text(v) for m, v in
                             zip(measures, values, strict=True)}
                            for values in zip(*(frame[m] for m in measures), strict=True)]
                           if measures else [{} for _ in range(len(frame))])
        return frame.reindex(columns=[c for c in self.output_columns if c not in SIDE])

    def _no_match(self) -> dict[str, Any]:
        return {STAGES: {}, MEASURES: {}}

    def _event_wide(self) -> bool:
        return self.spec.primary


def group_runner(spec: Spec) -> GroupRunner:
    """The runner of a spec: a rule set's, or one pattern's."""
    return RuleSetRunner(spec) if isinstance(spec, RuleSetSpec) else GroupRunner(spec)


def _state_names(op: CepOperator) -> list[str | None]:
    """The names the running versions' engine states go by in a group's state."""
    return [f"{r.name}@{r.version}#{r.slot}" for r in op.rules]


def _documents(held: dict[str, Any], blob: bytes) -> dict[str, Rule]:
    """The rules a group's state names, by digest: from this process's rules when it read
    them already, else from the documents the state holds."""
    wanted = {*held["in_force"], *(d for _, _, d in held["runs"])}
    if not wanted <= _RULES.keys():
        for d, doc in json.loads(zlib.decompress(blob)).items():
            if d not in _RULES:
                _canonical(Rule.from_dict(doc, f"the state's rule {d}"), d)
    return {d: _RULES[d] for d in wanted}


def _null(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array: a value
        return False


def rule_set_columns(spec: RuleSetSpec) -> list[str]:
    """A rule set's output columns: every key field of the query, the fixed columns with
    ``rule`` and ``version`` after ``kind``, ``stages`` and ``measures`` (maps), and the
    side outputs' columns when asked for.

    >>> rule_set_columns(RuleSetSpec(None, ("card",), ("card",), {}, False,
    ...                              key_columns=("card", "ip")))
    ['card', 'ip', 'kind', 'rule', 'version', 'match_id', 'start', 'end', 'timeout_at', 'stages', 'measures']
    """
    kind, *rest = FIXED
    return [*spec.key_columns, kind, *RULE_COLUMNS, *rest, STAGES, MEASURES,
            *(SIDE if spec.late else ())]


def key_fields(key: str | Sequence[str]) -> tuple[str, ...]:
    """A rule's key as the fields it reads.

    >>> key_fields("card"), key_fields(("card", "merchant"))
    (('card',), ('card', 'merchant'))
    """
    return (key,) if isinstance(key, str) else tuple(key)


__all__ = ["LOG_SUFFIX", "MEASURES", "RULE_COLUMNS", "STAGES", "Change", "ChangeLog",
           "RuleSetRunner", "RuleSetSpec", "change_log_path", "changes_after", "fitting",
           "group_runner", "key_fields", "routed_only", "rule_set_columns", "rules_text", "set_digest"]
