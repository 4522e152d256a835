"""Rules as data: JSON documents a team edits, checks and deploys, loaded without running code.

A rule is a pattern with a name, a version, the field (or fields) its events are keyed
by, optional measures, an enabled flag, a description and an owner.  A rule file holds
one rule or ``{"rules": [...]}``; a rule set is a directory of such files (``*.json``,
read in name order) or one file.  Loading never evaluates anything: patterns and
measures are expression trees read by :func:`cep.Pattern.from_json` and
:meth:`cep.Expr.from_dict`.

A broken rule never takes the others down: :func:`load_rules` returns the rules that
load and a :class:`RuleProblem` for each one that does not, naming the file, the place
in it (a JSON path, or the line and column of a syntax error) and what is wrong.

>>> import json
>>> from cep import Pattern, col
>>> rule = {"name": "card_testing", "version": 3, "key": "card_id",
...         "pattern": json.loads(Pattern.begin("small").where(col("amount") < 5).times(3)
...                               .next("big").where(col("amount") > 500).to_json())}
>>> rules = load_rules_text(json.dumps(rule), "card_testing.json")
>>> rules.problems, [(r.name, r.version, r.key) for r in rules]
((), [('card_testing', 3, 'card_id')])
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from pyrsistent import PMap, pmap

from cep.errors import CEPError
from cep.expr import NUMERIC, Expr, fields_read
from cep.measures import check_measures, unknown_stage
from cep.pattern import Pattern
from cep.serialize import FORMAT as PATTERN_FORMAT
from cep.serialize import (
    MAX_INT,
    MAX_NESTING,
    JSONTextError,
    PatternJSONError,
    expression_from_data,
    nesting_place,
    number_text,
    parse_json,
    pattern_from_data,
    pattern_to_json,
)

FORMAT = "cep.rule/1"
#: the fields of a rule document, with the JSON types each accepts
FIELDS: dict[str, tuple[type, ...]] = {
    "format": (str,), "name": (str,), "version": (int,), "key": (str, list),
    "pattern": (dict,), "measures": (dict,), "enabled": (bool,), "description": (str,),
    "owner": (str,),
}
REQUIRED = ("name", "version", "key", "pattern")
#: the highest version: outputs, checkpoints and engines hold versions as 64-bit integers
MAX_VERSION = MAX_INT


class RuleError(CEPError):
    """A rule document that cannot be used: the message names the file and the place."""


@dataclass(frozen=True, eq=False)
class Rule:
    """One rule: what to match (``pattern``), per what (``key``), and who owns it.

    >>> from cep import Pattern, col
    >>> r = Rule("big", 1, "card_id", Pattern.begin("a").where(col("amount") > 500))
    >>> Rule.from_dict(r.to_dict()) == r
    True
    """

    name: str
    version: int
    key: str | tuple[str, ...]
    pattern: Pattern
    measures: Mapping[str, Expr] = field(default_factory=pmap)
    enabled: bool = True
    description: str = ""
    owner: str = ""

    def __post_init__(self) -> None:
        version = self.version
        if isinstance(version, bool) or not isinstance(version, int) or not (
                1 <= version <= MAX_VERSION):
            # a version past 64 bits would load, then overflow in the job that runs it
            given = number_text(version) if isinstance(version, int) else repr(version)
            raise RuleError(f"rule {self.name!r}: a version is an integer from 1 to "
                            f"{MAX_VERSION}, got {given}")
        object.__setattr__(self, "measures", pmap(self.measures))  # immutable, hashable
        if isinstance(self.key, list):  # a composite key given as a list, as JSON holds it
            object.__setattr__(self, "key", tuple(self.key))

    def __eq__(self, other: object) -> bool:
        # expressions compare into expressions (col("x") == 1), so compare documents
        return isinstance(other, Rule) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def to_dict(self) -> dict[str, Any]:
        """The rule as a JSON-able document (what a rule file holds)."""
        return {
            "format": FORMAT, "name": self.name, "version": self.version,
            "key": self.key if isinstance(self.key, str) else list(self.key),
            "pattern": json.loads(pattern_to_json(self.pattern)),
            "measures": {name: e.to_dict() for name, e in self.measures.items()},
            "enabled": self.enabled, "description": self.description, "owner": self.owner,
        }

    def to_json(self) -> str:
        """The rule as JSON text, indented for people who edit it."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @staticmethod
    def from_dict(data: Any, where: str = "$") -> Rule:
        """A rule from its document; a :class:`RuleError` names the place that is wrong."""
        if not isinstance(data, dict):
            raise RuleError(f"{where}: a rule is a JSON object, got {_json_type(data)}")
        deep = nesting_place(data, where)
        if deep is not None:
            raise RuleError(f"{deep}: nested more than {MAX_NESTING} levels deep")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise RuleError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(map(repr, unknown))} (a rule has: {', '.join(FIELDS)})")
        for name in REQUIRED:
            if name not in data:
                raise RuleError(f"{where}: missing {name!r}")
        for name, value in data.items():
            types = FIELDS[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                wanted = " or ".join(_JSON_NAMES[t] for t in types)
                given = _json_type(value)
                if value is not None:  # null says it all
                    given += f" {json.dumps(value)[:60]}"
                raise RuleError(f"{where}.{name}: expected {wanted}, got {given}")
        if data.get("format", FORMAT) != FORMAT:
            raise RuleError(f"{where}.format: {data['format']!r} is not {FORMAT!r}")
        if not data["name"].strip():
            raise RuleError(f"{where}.name: a rule needs a non-empty name")
        if data["version"] < 1:
            raise RuleError(f"{where}.version: versions start at 1, got {data['version']}")
        if data["version"] > MAX_VERSION:
            raise RuleError(f"{where}.version: versions go up to 2^63-1 ({MAX_VERSION}), got "
                            f"{number_text(data['version'])}")
        key = data["key"]
        if isinstance(key, list):
            if not key or not all(isinstance(k, str) and k for k in key):
                raise RuleError(f"{where}.key: a composite key is a non-empty list of field "
                                f"names, got {json.dumps(key)}")
            key = tuple(key) if len(key) > 1 else key[0]
        elif not key:
            raise RuleError(f"{where}.key: give the field the rule's events are keyed by")
        document, place = data["pattern"], f"{where}.pattern"
        if "format" in document:  # else the bare pattern object
            if document["format"] != PATTERN_FORMAT:
                raise RuleError(f"{place}.format: {document['format']!r} is not "
                                f"{PATTERN_FORMAT!r}")
            if set(document) != {"format", "pattern"}:
                raise RuleError(f"{place}: a pattern document has a format and a pattern, "
                                f"got {', '.join(map(repr, document))}")
            document, place = document["pattern"], f"{place}.pattern"
        try:
            pattern = pattern_from_data(document, place)
        except PatternJSONError as err:
            raise RuleError(f"{err.place}: {err.reason}") from None
        names = [stage.name for stage in pattern.iter_stages()]
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:  # said before the measures, which would miss one of the two
            raise RuleError(f"{place}: the stage name {twice!r} is used twice: stage names "
                            "must be unique")
        measures: dict[str, Expr] = {}
        for name, body in data.get("measures", {}).items():
            try:
                measures[name] = expression_from_data(body, f"{where}.measures.{name}")
            except PatternJSONError as err:
                raise RuleError(f"{err.place}: {err.reason}") from None
            reason = unknown_stage(measures[name], pattern)
            if reason is not None:
                raise RuleError(f"{where}.measures.{name}: {reason}")
        return Rule(data["name"], data["version"], key, pattern, pmap(measures),
                    data.get("enabled", True), data.get("description", ""),
                    data.get("owner", ""))


@dataclass(frozen=True)
class RuleProblem:
    """Why one rule (or one file) could not be loaded: where, and what; ``rule`` names the
    rule when its document gives a name (None: the file, or a document without a name,
    so any rule of the file may be the one).

    >>> str(RuleProblem("r/a.json", "$.version", "expected an integer", rule="a"))
    'r/a.json: $.version: expected an integer'
    """

    file: str
    place: str
    message: str
    rule: str | None = None

    def __str__(self) -> str:
        return f"{self.file}: {self.place}: {self.message}"


@dataclass(frozen=True)
class RuleSet:
    """The rules that loaded (an immutable map by name, kept in the order read) and the
    problems of those that did not.  Iterating gives the rules in the order read.

    >>> len(RuleSet()), RuleSet().problems
    (0, ())
    """

    rules: PMap = field(default_factory=pmap)
    order: tuple[str, ...] = ()
    problems: tuple[RuleProblem, ...] = ()
    #: where each rule came from: name -> file
    sources: PMap = field(default_factory=pmap)
    #: where in its file each rule is: name -> JSON path (``$``, ``$.rules[2]``)
    places: PMap = field(default_factory=pmap)
    #: the directory (or file) the rules were read from (:func:`load_rules`)
    root: str | None = None

    def __iter__(self) -> Iterator[Rule]:
        return (self.rules[name] for name in self.order)

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, name: str) -> Rule:
        return self.rules[name]

    def enabled(self) -> list[Rule]:
        """The rules to run: enabled ones, in the order read."""
        return [r for r in self if r.enabled]

    def check(self) -> RuleSet:
        """Compile every rule's pattern (FlinkCEP's rules: windows, negation, quantifiers,
        skip strategies) and check its expressions agree on each field's type; a rule that
        fails moves to ``problems``.

        >>> import json
        >>> from cep import Pattern, col
        >>> bad = Pattern.begin("a").where((col("x") > 1) & (col("x") == "y"))
        >>> doc = {"name": "r", "version": 1, "key": "k", "pattern": json.loads(bad.to_json())}
        >>> [p.message for p in load_rules_text(json.dumps(doc), "r.json").check().problems]
        ["stage 'a': (col('x') == 'y'): cannot compare numeric with string"]
        """
        from cep.nfa.bytecode import assumed_schema, check_types
        from cep.nfa.compiler import compile_pattern
        from cep.runtime.tables import check_output_names, stage_columns

        kept: dict[str, Rule] = {}
        problems = list(self.problems)
        for rule in self:
            # where in its file (a rule made in code has no place: its name says which)
            base = self.places.get(rule.name)
            place = f"rule {rule.name!r}" if base is None else base
            try:
                for name, measure in rule.measures.items():  # a rule made in code, unchecked
                    reason = unknown_stage(measure, rule.pattern)
                    if reason is not None:
                        place = place if base is None else f"{base}.measures.{name}"
                        raise RuleError(f"measure {name!r}: {reason}")
                place = place if base is None else f"{base}.pattern"
                compile_pattern(rule.pattern)
                assumed = assumed_schema(rule.pattern)
                check_types(rule.pattern, assumed)
                # what the pattern says of a field's type holds for its measures too (a
                # field only they read is taken for a number: the data decides)
                for name, measure in rule.measures.items():
                    place = place if base is None else f"{base}.measures.{name}"
                    check_measures(rule.pattern, {name: measure}, {
                        **dict.fromkeys(fields_read(measure), NUMERIC), **assumed})
                # its records' columns: a stage named "start" would overwrite the start time
                place = place if base is None else base
                check_output_names(rule.key, stage_columns(rule.pattern), list(rule.measures),
                                   named=True)
            except CEPError as err:
                problems.append(RuleProblem(self.sources.get(rule.name, "?"), place, str(err),
                                            rule.name))
                continue
            kept[rule.name] = rule
        return RuleSet(pmap(kept), tuple(n for n in self.order if n in kept), tuple(problems),
                       pmap({n: f for n, f in self.sources.items() if n in kept}),
                       pmap({n: w for n, w in self.places.items() if n in kept}), self.root)


#: what a change does to a rule (see :func:`plan_changes`)
ADDED, REMOVED, DISABLED, CHANGED = "added", "removed", "disabled", "changed"


@dataclass(frozen=True)
class RuleChange:
    """One rule that a new rule set changes: ``what`` is ``added`` (new, or enabled again),
    ``removed`` (gone from the set), ``disabled`` (``"enabled": false``) or ``changed`` (a
    new version); ``old`` is the rule in force before (None when added), ``new`` the one
    after (None when removed or disabled)."""

    name: str
    what: str
    old: Rule | None
    new: Rule | None


@dataclass(frozen=True)
class RulePlan:
    """What to do when a rule set is read again: the ``changes`` to apply, the rule set in
    force after them (``after``), and the problems of the new set (rules it could not load,
    changes it could not apply)."""

    changes: tuple[RuleChange, ...]
    after: RuleSet
    problems: tuple[RuleProblem, ...]


def plan_changes(before: RuleSet, new: RuleSet,
                 used: Mapping[str, Mapping[int, str]] | None = None) -> RulePlan:
    """The changes that turn ``before`` (the rules in force) into ``new`` (the rule set as
    read now, checked), in the order of ``new`` then the removed ones.  ``used``: the
    versions each rule has run under so far, with their :func:`rule_fingerprint`.  Three
    things are never done, and reported instead, keeping the rule in force as it is:

    - a rule whose file no longer loads is not removed (a typo must not silently stop a
      rule that runs in production);
    - a rule whose pattern, key or measures changed but kept its version is not replaced
      (every output names the version that found it, so a version must mean one rule);
      turning a rule on or off, or editing its description or owner, needs no new version;
    - for the same reason, a version a rule ran under before is not run again as another
      rule (going back from version 2 to a new version 1); the very same version 1 may
      come back.

    >>> from cep import Pattern, col
    >>> v1 = Rule("big", 1, "card", Pattern.begin("a").where(col("amount") > 500))
    >>> v2 = Rule("big", 2, "card", Pattern.begin("a").where(col("amount") > 900))
    >>> plan = plan_changes(rule_set([v1]), rule_set([v2]))
    >>> [(c.name, c.what, c.old.version, c.new.version) for c in plan.changes]
    [('big', 'changed', 1, 2)]
    >>> same = Rule("big", 1, "card", Pattern.begin("a").where(col("amount") > 900))
    >>> plan = plan_changes(rule_set([v1]), rule_set([same]))
    >>> plan.changes, plan.after["big"] == v1, [p.message for p in plan.problems]
    ((), True, ["rule 'big' changed but kept version 1: give the change a new version (it was not applied; version 1 still runs)"])
    >>> plan = plan_changes(rule_set([v2]), rule_set([same]), {"big": {1: rule_fingerprint(v1)}})
    >>> plan.changes, plan.after["big"] == v2, [p.message for p in plan.problems]
    ((), True, ["rule 'big' version 1 ran before as another rule: give the change a new version (it was not applied; version 2 still runs)"])
    """
    changes: list[RuleChange] = []
    problems = list(new.problems)
    # a file that did not load, or holds a document without a readable name, may hold
    # any rule; a named document that did not load is that rule's
    broken_files = {p.file for p in new.problems if p.rule is None}
    broken_rules = {p.rule for p in new.problems if p.rule is not None}
    rules = dict(new.rules)
    sources = dict(new.sources)
    order = list(new.order)
    for rule in new:
        old = before.rules.get(rule.name)
        running = old is not None and old.enabled
        if old is not None and old.version == rule.version and _matches_alike(old, rule):
            # the same version, enabled or not, described otherwise: nothing to re-run
            if rule.enabled != running:
                changes.append(RuleChange(rule.name, ADDED if rule.enabled else DISABLED,
                                          None if rule.enabled else old,
                                          rule if rule.enabled else None))
            continue
        if old is not None and rule.name in broken_rules:
            # defined twice (a file added that sorts first), or a document of its name did
            # not load: which one is meant is unclear, so the one in force runs on
            files = sorted({p.file for p in new.problems if p.rule == rule.name}
                           | {new.sources.get(rule.name, "?")})
            running_now = (f"version {old.version} still runs" if running
                           else "it stays disabled")
            problems.append(RuleProblem(
                new.sources.get(rule.name, "?"), f"rule {rule.name!r}",
                f"rule {rule.name!r} has a problem in {', '.join(files)} (see above): the "
                f"change was not applied; {running_now}", rule.name))
            rules[rule.name] = old
            continue
        if old is not None and old.version == rule.version:
            problems.append(RuleProblem(
                new.sources.get(rule.name, "?"), f"rule {rule.name!r}",
                f"rule {rule.name!r} changed but kept version {rule.version}: give the change "
                f"a new version (it was not applied; version {rule.version} still runs)",
                rule.name))
            rules[rule.name] = old
            continue
        earlier = (used or {}).get(rule.name, {}).get(rule.version)
        if rule.enabled and earlier is not None and earlier != rule_fingerprint(rule):
            still = (f"version {old.version} still runs" if running and old is not None
                     else "the rule does not run")
            problems.append(RuleProblem(
                new.sources.get(rule.name, "?"), f"rule {rule.name!r}",
                f"rule {rule.name!r} version {rule.version} ran before as another rule: give "
                f"the change a new version (it was not applied; {still})", rule.name))
            if old is not None:
                rules[rule.name] = old
            else:
                del rules[rule.name]
                sources.pop(rule.name, None)
                order.remove(rule.name)
            continue
        if not rule.enabled:
            if running:
                changes.append(RuleChange(rule.name, DISABLED, old, None))
        elif not running:
            changes.append(RuleChange(rule.name, ADDED, None, rule))
        else:
            changes.append(RuleChange(rule.name, CHANGED, old, rule))
    for old in before:
        if old.name in new.rules:
            continue
        source = before.sources.get(old.name)
        if old.name in broken_rules or _broken(source, broken_files):  # it runs on
            rules[old.name] = old
            sources[old.name] = source
            order.append(old.name)
            problems.append(RuleProblem(source, f"rule {old.name!r}",
                                        f"its file does not load now: version {old.version} "
                                        "runs on until the file is mended or deleted",
                                        old.name))
        elif old.enabled:
            changes.append(RuleChange(old.name, REMOVED, old, None))
    after = RuleSet(pmap(rules), tuple(order), tuple(problems), pmap(sources),
                    pmap({n: w for n, w in {**before.places, **new.places}.items() if n in rules}),
                    new.root)
    return RulePlan(tuple(changes), after, tuple(problems))


def _broken(source: str | None, broken: set[str]) -> bool:
    """Is ``source`` (a rule's file) one of the ``broken`` files, or inside a broken folder
    (a rule directory that could not be read: its rules are not gone, only unread)?

    >>> _broken("rules/a.json", {"rules"}), _broken("rules/a.json", {"rules/b.json"})
    (True, False)
    """
    if source is None:
        return False
    return source in broken or any(PurePath(source).is_relative_to(f) for f in broken)


def _matches_alike(a: Rule, b: Rule) -> bool:
    """Do two rules find the same (their pattern, key and measures agree)?  Turning a
    rule on or off, or rewording its description, is not a new version."""
    return rule_fingerprint(a) == rule_fingerprint(b)


def versions_used(sets: Iterable[RuleSet]) -> dict[str, dict[int, str]]:
    """The versions each rule ran under in ``sets`` (rule sets in force one after another),
    with their :func:`rule_fingerprint`, as :func:`plan_changes` takes them.

    >>> from cep import Pattern
    >>> one = rule_set([Rule("a", 1, "k", Pattern.begin("x"))])
    >>> {n: list(v) for n, v in versions_used([one]).items()}
    {'a': [1]}
    """
    used: dict[str, dict[int, str]] = {}
    for rules in sets:
        for rule in rules:
            if rule.enabled:
                used.setdefault(rule.name, {}).setdefault(rule.version, rule_fingerprint(rule))
    return used


def rule_fingerprint(rule: Rule) -> str:
    """A digest of what a rule finds (its pattern, key and measures; not its name, version,
    description, owner or whether it is on): two rules of one fingerprint find the same.

    >>> from cep import Pattern
    >>> one = Rule("a", 1, "k", Pattern.begin("x"), description="first")
    >>> rule_fingerprint(one) == rule_fingerprint(Rule("a", 2, "k", Pattern.begin("x")))
    True
    """
    document = rule.to_dict()
    finds = {k: document[k] for k in ("key", "pattern", "measures")}
    return hashlib.sha256(json.dumps(finds, sort_keys=True).encode()).hexdigest()


def rule_set(rules: Iterable[Rule], source: str = "<code>") -> RuleSet:
    """A rule set of rules made in code (in this order; a name used twice is an error).

    >>> from cep import Pattern
    >>> [r.name for r in rule_set([Rule("a", 1, "k", Pattern.begin("x"))])]
    ['a']
    """
    made: dict[str, Rule] = {}
    for rule in rules:
        if not isinstance(rule, Rule):
            raise RuleError(f"a rule set holds Rule objects, got {type(rule).__name__}")
        if rule.name in made:
            raise RuleError(f"rule {rule.name!r} is given twice")
        made[rule.name] = rule
    return RuleSet(pmap(made), tuple(made), (), pmap(dict.fromkeys(made, source)))


def load_rules(path: str | Path) -> RuleSet:
    """Every rule of a directory (its ``*.json`` files, in name order, subdirectories
    included) or of one file.  Rules that do not load are in ``problems``; a name used
    twice keeps the first and reports the second.

    >>> load_rules("no/such/dir")
    Traceback (most recent call last):
    ...
    cep.rules.RuleError: no/such/dir: no such file or directory
    """
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*.json") if p.is_file())
    elif root.is_file():
        files = [root]
    else:
        raise RuleError(f"{path}: no such file or directory")
    merged = RuleSet()
    for f in files:
        try:
            text = f.read_text(encoding="utf-8-sig")  # a byte-order mark is no error
        except (OSError, UnicodeDecodeError) as err:
            merged = _merge(merged, RuleSet(problems=(RuleProblem(str(f), "file", str(err)),)))
            continue
        merged = _merge(merged, load_rules_text(text, str(f)))
    return replace(merged, root=str(root))


def load_rules_text(text: str, source: str = "<text>") -> RuleSet:
    """The rules of one file's text: one rule object, or ``{"rules": [...]}``."""
    try:
        data = parse_json(text)
    except JSONTextError as err:
        return RuleSet(problems=(RuleProblem(source, err.place, err.reason),))
    if isinstance(data, dict) and "rules" in data and set(data) <= {"rules", "format"}:
        if not isinstance(data["rules"], list):
            return RuleSet(problems=(RuleProblem(source, "$.rules", "expected a list of "
                                                 f"rules, got {_json_type(data['rules'])}"),))
        documents = [(f"$.rules[{i}]", d) for i, d in enumerate(data["rules"])]
    else:
        documents = [("$", data)]
    rules: dict[str, Rule] = {}
    places: dict[str, str] = {}
    problems: list[RuleProblem] = []
    for where, document in documents:
        try:
            rule = Rule.from_dict(document, where)
        except RuleError as err:
            place, _, message = str(err).partition(": ")
            named = document.get("name") if isinstance(document, dict) else None
            problems.append(RuleProblem(source, place, message,
                                        named if isinstance(named, str) else None))
            continue
        if rule.name in rules:
            problems.append(RuleProblem(source, f"{where}.name",
                                        f"rule {rule.name!r} is defined twice", rule.name))
            continue
        rules[rule.name] = rule
        places[rule.name] = where
    return RuleSet(pmap(rules), tuple(rules), tuple(problems),
                   pmap({name: source for name in rules}), pmap(places))


def _merge(a: RuleSet, b: RuleSet) -> RuleSet:
    rules, sources, places = a.rules, a.sources, a.places
    problems, order = list(a.problems) + list(b.problems), list(a.order)
    for rule in b:
        if rule.name in rules:
            problems.append(RuleProblem(b.sources[rule.name],
                                        f"{b.places.get(rule.name, '$')}.name",
                                        f"rule {rule.name!r} is already defined in "
                                        f"{sources[rule.name]}", rule.name))
            continue
        rules = rules.set(rule.name, rule)
        sources = sources.set(rule.name, b.sources[rule.name])
        places = places.set(rule.name, b.places.get(rule.name, "$"))
        order.append(rule.name)
    return RuleSet(rules, tuple(order), tuple(problems), sources, places)


_JSON_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object",
               bool: "true or false"}


def _json_type(value: Any) -> str:
    for t, name in (bool, "a boolean"), (int, "an integer"), (float, "a number"), (
            str, "a string"), (list, "a list"), (dict, "an object"):
        if isinstance(value, t):
            return name
    return "null" if value is None else type(value).__name__


__all__ = ["ADDED", "CHANGED", "DISABLED", "REMOVED", "Rule", "RuleChange", "RuleError",
           "RulePlan", "RuleProblem", "RuleSet", "load_rules", "load_rules_text", "plan_changes",
           "rule_fingerprint", "rule_set", "versions_used"]
