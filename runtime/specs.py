"""Pattern specs: how the ``cep`` command names a pattern, and the arguments every command
that reads events shares (``cep match``, ``cep plot``, ``cep replay``).

A spec (:func:`load`) is ``module:attribute``, ``file.py:attribute``, a factory with
literal arguments (``cep.patterns.fraud:card_testing(tests=4, within="5m")``), or a JSON
file holding a pattern (``Pattern.to_json``) or a rule (:mod:`cep.rules`; ``rules.json:NAME``
picks one rule of several).  :mod:`cep.runtime.cli` and :mod:`cep.runtime.replay` both read
them from here: the command imports the replay, the replay imports this module.

A rule set spec (:func:`load_rule_set`, what ``cep replay`` runs in one pass) names
several rules: a module (``cep.patterns.fraud``) or a ``file.py``, a directory of pattern
and rule JSON files, specs separated by commas, or ``NAME=SPEC``.

>>> load("cep.patterns.fraud:card_testing(tests=4)").pattern.stage_names()
['small', 'big']
"""

from __future__ import annotations

import argparse
import ast
import glob
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cep.errors import CEPError
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, OVERFLOW_POLICIES, check_cap
from cep.pattern import Pattern
from cep.runtime.bounded import key_spec

if TYPE_CHECKING:
    from cep.rules import RuleSet

#: what a pattern spec may be, as error messages say it
SPEC_FORMS = ("module:attribute, file.py:attribute, module:factory(arg=literal, ...) "
              "or a pattern/rule .json file")
#: what a rule set spec may be, as error messages say it
RULE_SET_FORMS = ("a module or file.py (its Patterns and pattern factories), a directory of "
                  "pattern/rule .json files, specs separated by commas, or NAME=SPEC, where "
                  f"a spec is {SPEC_FORMS}")
#: what ``--time-unit`` accepts
TIME_UNITS = ("s", "ms", "us", "ns")
#: what ``--engine`` accepts
ENGINE_CHOICES = ("auto", "reference", "numba")
#: the help of a command's PATTERN argument
PATTERN_HELP = ("module:attribute, file.py:attribute, module:factory(tests=4) with literal "
                "arguments, or a pattern/rule .json file (rules.json:NAME)")
#: the help of ``cep replay``'s PATTERN argument, which may name several rules
RULES_HELP = (PATTERN_HELP + "; or several rules, run in one pass: a module or file.py (its "
              "Patterns and pattern factories), a directory of .json files, specs separated "
              "by commas, NAME=SPEC")
#: ``NAME=SPEC``: a rule's name given with its spec
_NAMED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*=(?!=)(.*)$", re.DOTALL)
#: a module name as ``import`` takes it
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Loaded:
    """What a pattern spec names: the pattern, and the key a rule file gives (else None).

    >>> load("cep.patterns.fraud:card_testing(tests=4)").pattern.stage_names()
    ['small', 'big']
    """

    pattern: Pattern
    key: Any = None
    #: the rule's name when the spec named a rule
    rule: str | None = None
    #: False for a rule file's rule marked ``"enabled": false``: a rule set leaves it out
    enabled: bool = True
    #: the rule's version and measures when the spec named a rule (its output's columns)
    version: int | None = None
    measures: Mapping[str, Any] = field(default_factory=dict)

    def key_or(self, given: Any) -> Any:
        """The key to run with: ``given`` (the command line's ``--key``) or the rule's; a
        ``--key`` that contradicts the rule's key is refused rather than silently preferred.

        >>> Loaded(Pattern.begin("a"), key="card_id").key_or(None)
        'card_id'
        >>> Loaded(Pattern.begin("a")).key_or(("card", "merchant"))
        ('card', 'merchant')
        """
        if given is None:
            return self.key
        if self.key is not None and key_spec(list(_as_tuple(given))) != key_spec(
                list(_as_tuple(self.key))):
            raise CEPError(f"rule {self.rule!r} is keyed by {_key_text(self.key)}; --key "
                           f"{_key_text(given)} contradicts it (leave --key out to use the rule's)")
        return given


def _as_tuple(key: Any) -> tuple[Any, ...]:
    return tuple(key) if isinstance(key, (list, tuple)) else (key,)


def _key_text(key: Any) -> str:
    return ",".join(map(str, _as_tuple(key)))


def load_pattern(spec: str) -> Pattern:
    """The pattern a spec names (see :func:`load`): ``module:attribute`` or
    ``file.py:attribute`` (called if it is a function), a factory called with literal
    arguments, or a pattern or rule JSON file.

    >>> load_pattern("cep.patterns.fraud:card_testing").stage_names()
    ['small', 'big']
    >>> from cep.patterns.fraud import card_testing
    >>> load_pattern("cep.patterns.fraud:card_testing(tests=4, within='5m')") == card_testing(
    ...     tests=4, within=timedelta(minutes=5))
    True
    """
    return load(spec).pattern


def load(spec: str) -> Loaded:
    """Load a pattern spec, never evaluating text:

    - ``module:attribute`` or ``path/to/file.py:attribute``: a Pattern, or a function
      returning one (called without arguments);
    - ``module:factory(4, within="10m")``: the function called with these arguments,
      which must be literals (numbers, strings, True/False/None, lists, tuples, dicts;
      read with :func:`ast.literal_eval`); a string given for a parameter whose default
      is a ``timedelta`` is a duration (``"10m"``, ``"30s"``);
    - ``pattern.json``: a pattern saved with :meth:`Pattern.to_json`, or a rule file
      (:mod:`cep.rules`) holding one rule, whose key is then the key to run with;
    - ``rules.json:NAME``: the rule ``NAME`` of a rule file holding several.

    A spec that names several rules (:func:`names_rule_set`) is refused with an error
    saying so: :func:`load_rule_set` reads those.

    >>> from cep import col
    >>> _ = Path("big.json").write_text(Pattern.begin("big").where(col("amount") > 500).to_json())
    >>> load("big.json").pattern.stage_names()
    ['big']
    >>> load("cep.patterns.fraud:card_testing(tests=__import__('os'))")
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: pattern "cep.patterns.fraud:card_testing(tests=__import__('os'))": argument tests=__import__('os') is not a literal: arguments may be numbers, strings, True, False, None, and lists, tuples or dicts of them (nothing is evaluated)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise CEPError(f"pattern {spec!r}: expected {SPEC_FORMS}")
    if spec.lower().endswith(".json"):
        return _load_json(spec, Path(spec), None)
    head, paren, call = spec.partition("(")
    call = paren + call
    target, sep, attr = head.rpartition(":")
    if target.lower().endswith(".json") and sep and attr and not call:
        return _load_json(spec, Path(target), attr)
    if names_rule_set(spec):
        raise CEPError(f"pattern {spec!r} names a set of rules: this command takes one "
                       f"pattern ({SPEC_FORMS}); cep replay runs several rules in one pass")
    if not sep or not target or not attr.strip():
        raise CEPError(f"pattern {spec!r}: expected {SPEC_FORMS}")
    attr = attr.strip()
    arguments = _call_arguments(spec, call) if call else None
    module = _import(spec, target)
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise CEPError(f"pattern {spec!r}: module {target!r} has no attribute {attr!r}") from None
    if arguments is not None:
        if not callable(value) or isinstance(value, Pattern):
            raise CEPError(f"pattern {spec!r}: {attr!r} is a {type(value).__name__}, not a "
                           "function: it takes no arguments")
        args, kwargs = _durations(spec, value, *arguments)
        value = _call(spec, attr, value, args, kwargs)
    elif callable(value) and not isinstance(value, Pattern):
        value = _call(spec, attr, value, [], {})
    if not isinstance(value, Pattern):
        raise CEPError(f"pattern {spec!r}: {attr!r} is a {type(value).__name__}, not a Pattern")
    return Loaded(value)


def _import(spec: str, target: str, what: str = "pattern") -> Any:
    """The module ``target`` names (a ``file.py`` or a module name); errors begin with
    ``what`` and the spec."""
    if target.endswith(".py"):
        path = Path(target)
        if not path.exists():
            raise CEPError(f"{what} {spec!r}: no such file {path}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise CEPError(f"{what} {spec!r}: cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            raise CEPError(f"{what} {spec!r}: importing {path} failed: {err!r}") from err
        return module
    _current_directory_importable()
    try:
        return importlib.import_module(target)
    except Exception as err:
        raise CEPError(f"{what} {spec!r}: cannot import module {target!r}: {err!r}") from err


def _current_directory_importable() -> None:
    """Like ``python -m``, let modules of the current directory be named."""
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))


def _call(spec: str, attr: str, func: Any, args: list[Any], kwargs: dict[str, Any],
          what: str = "pattern") -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as err:
        shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise CEPError(f"{what} {spec!r}: calling {attr}({shown}) failed: {err!r}") from err


def _call_arguments(spec: str, text: str) -> tuple[list[Any], dict[str, Any]]:
    """The literal arguments of ``(a, b=...)``, read with the ``ast`` module, never run."""
    try:
        tree = ast.parse("f" + text, mode="eval")
    except SyntaxError as err:
        raise CEPError(f"pattern {spec!r}: cannot read the arguments {text}: {err.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise CEPError(f"pattern {spec!r}: expected one call such as factory(tests=4) after "
                       "the colon")
    args: list[Any] = []
    for node in call.args:
        if isinstance(node, ast.Starred):
            raise CEPError(f"pattern {spec!r}: *{ast.unparse(node.value)} is not allowed: "
                           "write the arguments out")
        args.append(_literal(spec, node, ast.unparse(node)))
    kwargs: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise CEPError(f"pattern {spec!r}: **{ast.unparse(kw.value)} is not allowed: "
                           "write the arguments out")
        kwargs[kw.arg] = _literal(spec, kw.value, f"{kw.arg}={ast.unparse(kw.value)}")
    return args, kwargs


def _literal(spec: str, node: ast.expr, shown: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CEPError(f"pattern {spec!r}: argument {shown} is not a literal: arguments may "
                       "be numbers, strings, True, False, None, and lists, tuples or dicts of "
                       "them (nothing is evaluated)") from None


def _durations(spec: str, func: Any, args: list[Any], kwargs: dict[str, Any]
               ) -> tuple[list[Any], dict[str, Any]]:
    """Strings given for parameters whose default is a timedelta, read as durations."""
    from cep.durations import parse_duration

    try:
        bound = inspect.signature(func).bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs  # the call itself reports what is wrong
    parameters = inspect.signature(func).parameters
    for name, value in list(bound.arguments.items()):
        if isinstance(value, str) and isinstance(parameters[name].default, timedelta):
            try:
                bound.arguments[name] = timedelta(
                    milliseconds=parse_duration(value, default_unit=None))
            except CEPError as err:
                raise CEPError(f"pattern {spec!r}: {name}: {err}") from None
    return list(bound.args), dict(bound.kwargs)


def _load_json(spec: str, path: Path, name: str | None) -> Loaded:
    """A pattern document (``Pattern.to_json``) or a rule file (:mod:`cep.rules`)."""
    from cep.rules import load_rules_text

    if not path.is_file():
        raise CEPError(f"pattern {spec!r}: no such file {path}")
    from cep.serialize import JSONTextError, parse_json

    try:
        text = path.read_text(encoding="utf-8-sig")
        data = parse_json(text)
    except (OSError, UnicodeDecodeError) as err:
        raise CEPError(f"pattern {spec!r}: cannot read {path}: {err}") from None
    except JSONTextError as err:
        raise CEPError(f"pattern {spec!r}: {path} is {err.reason} ({err.place})") from None
    if isinstance(data, dict) and data.get("format") == "cep.pattern/1":
        if name is not None:
            raise CEPError(f"pattern {spec!r}: {path} holds one pattern, not rules: leave out "
                           f":{name}")
        try:
            return Loaded(Pattern.from_json(text))
        except CEPError as err:
            raise CEPError(f"pattern {spec!r}: {path}: {err}") from None
    rules = load_rules_text(text, str(path))
    if name is not None:
        if name not in rules.rules:
            problems = [str(p) for p in rules.problems]
            raise CEPError(f"pattern {spec!r}: {path} has no rule {name!r} (rules: "
                           f"{', '.join(rules.order) or 'none'})"
                           + (f"; problems: {'; '.join(problems)}" if problems else ""))
        rule = rules[name]
    else:
        if rules.problems:
            raise CEPError(f"pattern {spec!r}: {'; '.join(str(p) for p in rules.problems)}")
        if len(rules) != 1:
            raise CEPError(f"pattern {spec!r}: {path} holds {len(rules)} rules "
                           f"({', '.join(rules.order)}): pick one with {path}:NAME")
        rule = next(iter(rules))
    return Loaded(rule.pattern, rule.key, rule.name, rule.enabled, rule.version,
                  dict(rule.measures))


def rule_files(spec: str) -> RuleSet | None:
    """The rule set a spec names when it is a directory or file of rule files only (what
    ``cep replay --watch`` reads, :func:`cep.rules.load_rules`), checked: its rules keep
    their versions and measures, and the problems of those that do not load are in its
    ``problems``.  None for any other spec (modules, specs separated by commas, pattern
    files, ``rules.json:NAME``), and for one whose files all fail to parse (nothing says
    they are rules): :func:`load_rule_set` and :func:`load` read those.

    >>> from cep.rules import Rule
    >>> _ = Path("one-rule").mkdir(exist_ok=True)
    >>> _ = Path("one-rule/big.json").write_text(Rule("big", 3, "card", Pattern.begin("a")).to_json())
    >>> [(r.name, r.version) for r in rule_files("one-rule")], rule_files("cep.patterns.fraud")
    ([('big', 3)], None)
    """
    from cep.rules import load_rules

    if not isinstance(spec, str) or not _exists(spec):
        return None
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.json") if p.is_file())
    elif path.suffix.lower() == ".json":
        files = [path]
    else:
        return None
    rules = False
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError, RecursionError):
            continue  # a rule file's problem, or a pattern file's: the loader says which
        if isinstance(data, dict) and data.get("format") == "cep.pattern/1":
            return None  # a pattern file runs only as a rule set spec names it
        rules = True
    return load_rules(path).check() if rules else None


def names_rule_set(spec: str) -> bool:
    """Whether ``spec`` names a set of rules (:func:`load_rule_set`) rather than one
    pattern (:func:`load`): specs separated by commas, ``NAME=SPEC``, a directory, a
    ``file.py`` without ``:attribute``, a module without ``:attribute``, or a rule file
    holding several rules.

    >>> names_rule_set("cep.patterns.fraud"), names_rule_set("cep.patterns.fraud:card_testing")
    (True, False)
    >>> names_rule_set("ct=cep.patterns.fraud:card_testing")
    True
    >>> names_rule_set("cep.patterns.fraud:card_testing(tests=4, within='5m')")
    False
    """
    if not isinstance(spec, str) or not spec.strip():
        return False
    if _exists(spec):
        path = Path(spec)
        return (path.is_dir() or path.suffix.lower() == ".py"
                or (path.suffix.lower() == ".json" and _rules_in(path) is not None))
    target = spec.partition("(")[0].rpartition(":")[0]
    if target and _exists(target):
        return False  # file.py:attribute or rules.json:NAME, even with a comma in its path
    return len(_split(spec)) > 1 or _NAMED.match(spec) is not None or _is_module(spec)


def load_rule_set(spec: str) -> dict[str, Loaded]:
    """The rules a rule set spec names, by name, in name order; loading never evaluates
    text (modules are imported, JSON files read, factory arguments are literals):

    - a module (``cep.patterns.fraud``) or a ``path/to/file.py``: every :class:`Pattern`
      at its top level, and every function defined there that is annotated ``->
      Pattern`` and needs no arguments (called without any, as ``module:factory`` is),
      each named by its attribute; names starting with ``_`` are left out;
    - a directory: its ``*.json`` files (not its subdirectories), each a pattern
      (``Pattern.to_json``) or a rule file (:mod:`cep.rules`) named by its file stem; a
      rule file holding several rules gives each, named by its rule name (so does such a
      file given on its own);
    - specs separated by commas (``mod:card_testing,mod:velocity_burst(count=5)``): each
      a spec :func:`load` reads, named by its attribute (``module:attribute``,
      ``module:factory(...)``, ``rules.json:NAME``) or file stem (``pattern.json``), or
      a module, ``file.py`` or directory as above;
    - ``NAME=SPEC`` (also between commas): the one pattern ``SPEC`` names, named
      ``NAME``.

    Two rules of the same name are refused (name them apart with ``NAME=SPEC``).  A
    rule file's rule marked ``"enabled": false`` is left out of the set (named on its
    own, ``rules.json:NAME``, it runs).  A rule file's key stays with its rule (see
    :func:`load_for_job`).  Rules run in name
    order whatever order the spec gives them in, so the same rules listed in another
    order are the same job and resume its checkpoints.

    >>> sorted(load_rule_set("cep.patterns.fraud"))
    ['account_takeover', 'card_testing', 'impossible_travel', 'refund_abuse', 'velocity_burst']
    >>> rules = load_rule_set("few=cep.patterns.fraud:card_testing(tests=2),"
    ...                       "cep.patterns.fraud:card_testing")
    >>> [(name, len(rule.pattern.stage_names())) for name, rule in rules.items()]
    [('card_testing', 2), ('few', 2)]
    >>> load_rule_set("cep.patterns.fraud:card_testing,cep.patterns.fraud:card_testing(tests=2)")
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: rules 'cep.patterns.fraud:card_testing,cep.patterns.fraud:card_testing(tests=2)': two rules are named 'card_testing' ('cep.patterns.fraud:card_testing' and 'cep.patterns.fraud:card_testing(tests=2)'): name them apart with NAME=SPEC, e.g. card_testing_2=cep.patterns.fraud:card_testing(tests=2)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise CEPError(f"rules {spec!r}: expected {RULE_SET_FORMS}")
    parts = [spec] if _exists(spec) else _split(spec)
    found: dict[str, tuple[str, Loaded]] = {}
    for part in parts:
        if not part.strip():
            raise CEPError(f"rules {spec!r}: an empty spec between commas")
        for name, where, loaded in _rules_of(spec, part.strip()):
            if name in found:
                raise CEPError(
                    f"rules {spec!r}: two rules are named {name!r} ({found[name][0]!r} and "
                    f"{where!r}): name them apart with NAME=SPEC, e.g. {name}_2={where}")
            found[name] = (where, loaded)
    enabled = {name: found[name][1] for name in sorted(found) if found[name][1].enabled}
    if not enabled:
        raise CEPError(f"rules {spec!r}: every rule is disabled (\"enabled\": false): "
                       f"{', '.join(sorted(found))}")
    return enabled


def load_for_job(spec: str, key: Any) -> tuple[Pattern | dict[str, Any] | RuleSet, Any]:
    """What a job runs for ``spec`` with the command line's ``--key`` ``key``: the pattern
    and key to give ``Job.match`` and ``Job.key_by``, or the rule set to give ``Job.rules``.

    One pattern (:func:`load`) runs as it always has, with :meth:`Loaded.key_or`.  A rule
    set (:func:`names_rule_set`) runs as ``{name: pattern}``, each rule whose spec gives
    a key of its own (a rule file's) as ``(pattern, its key)``, the others keyed by
    ``key``.  Rules of rule files only (``rules.json:NAME``, or several such between
    commas) are a :class:`~cep.rules.RuleSet`: they keep their versions and measures, the
    columns of their records, as a directory of rule files does; one named on its own
    runs though disabled (see :func:`disabled_named`).

    >>> pattern, key = load_for_job("cep.patterns.fraud:card_testing", "card_id")
    >>> type(pattern).__name__, key
    ('Pattern', 'card_id')
    >>> rules, key = load_for_job("ct=cep.patterns.fraud:card_testing,"
    ...                           "cep.patterns.fraud:velocity_burst", "card_id")
    >>> sorted(rules), key
    (['ct', 'velocity_burst'], 'card_id')
    """
    if names_rule_set(spec):
        rules = load_rule_set(spec)
        if all(rule.version is not None for rule in rules.values()):
            return _rule_set_of(rules), key
        return {name: (rule.pattern, rule.key) if rule.key is not None else rule.pattern
                for name, rule in rules.items()}, key
    loaded = load(spec)
    if loaded.version is not None and loaded.rule is not None:
        loaded.key_or(key)  # a --key that contradicts the rule's is refused
        return _rule_set_of({loaded.rule: loaded}), key
    return loaded.pattern, loaded.key_or(key)


def _rule_set_of(rules: Mapping[str, Loaded]) -> RuleSet:
    """Rules of rule files, by the names the spec gives them, all enabled (a disabled one
    is here only if named on its own)."""
    from cep.rules import Rule, rule_set

    return rule_set([Rule(name, r.version, r.key, r.pattern, r.measures) for name, r in
                     rules.items() if r.version is not None], "<spec>")


def disabled_named(spec: str) -> list[str]:
    """The disabled rules (``"enabled": false``) ``spec`` names on their own, which run
    all the same (a rule set leaves them out): what ``cep match`` and ``cep replay`` note.

    >>> from cep.rules import Rule
    >>> _ = Path("off.json").write_text(Rule("off", 1, "k", Pattern.begin("a"), enabled=False).to_json())
    >>> disabled_named("off.json"), disabled_named("cep.patterns.fraud:card_testing")
    (['off'], [])
    """
    from cep.rules import load_rules_text

    if not isinstance(spec, str) or names_rule_set(spec):
        return []  # a set: its disabled rules are left out
    target, sep, name = spec.rpartition(":")
    path = Path(target if sep and target.lower().endswith(".json") else spec)
    if path.suffix.lower() != ".json" or not path.is_file():
        return []
    try:
        rules = load_rules_text(path.read_text(encoding="utf-8-sig"), str(path))
    except (CEPError, OSError, UnicodeDecodeError, ValueError):
        return []
    picked = [rules[name]] if sep and name in rules.rules else (
        list(rules) if len(rules) == 1 and not sep else [])
    return [r.name for r in picked if not r.enabled]


def _rules_of(spec: str, part: str) -> list[tuple[str, str, Loaded]]:
    """The rules one entry of a rule set spec names: (name, where from, what loaded)."""
    named = None if _exists(part) else _NAMED.match(part)
    if named is not None:
        name, inner = named.group(1), named.group(2).strip()
        if not inner:
            raise CEPError(f"rules {spec!r}: {name}= names no spec")
        if names_rule_set(inner):
            raise CEPError(f"rules {spec!r}: {inner!r} names several rules, and {name}= names "
                           f"one: give {name}= a single pattern ({SPEC_FORMS})")
        return [(name, part, _load_rule(spec, name, inner))]
    path = Path(part)
    if _exists(part) and path.is_dir():
        return _directory_rules(spec, path)
    if path.suffix.lower() == ".py" and path.is_file():
        return _module_rules(spec, part)
    if path.suffix.lower() == ".json":
        return _json_rules(spec, path)
    if _is_module(part):
        return _module_rules(spec, part)
    head = part.partition("(")[0]
    target, sep, attr = head.rpartition(":")
    if not (sep and target and attr.strip()):
        where = ("no such file or directory" if "/" in part or os.sep in part else
                 "not a module that can be found, and no :attribute")
        raise CEPError(f"rules {spec!r}: {part!r}: {where}: expected {RULE_SET_FORMS}")
    name = attr.strip()
    return [(name, part, _load_rule(spec, name, part))]


def _load_rule(spec: str, name: str, part: str) -> Loaded:
    """:func:`load` of one rule of a set, its errors naming the set and the rule."""
    try:
        return load(part)
    except CEPError as err:
        raise CEPError(f"rules {spec!r}: rule {name!r}: {err}") from None


def _directory_rules(spec: str, path: Path) -> list[tuple[str, str, Loaded]]:
    files = sorted(p for p in path.glob("*.json") if p.is_file())
    if not files:
        raise CEPError(f"rules {spec!r}: the directory {path} holds no .json files "
                       "(its subdirectories are not read)")
    return [rule for f in files for rule in _json_rules(spec, f)]


def _json_rules(spec: str, path: Path) -> list[tuple[str, str, Loaded]]:
    """A pattern or rule file, named by its stem; a rule file of several rules, each rule
    named by its name."""
    names = _rules_in(path)
    if names is None:
        return [(path.stem, str(path), _load_rule(spec, path.stem, str(path)))]
    return [(name, f"{path}:{name}", _load_rule(spec, name, f"{path}:{name}"))
            for name in names]


def _rules_in(path: Path) -> tuple[str, ...] | None:
    """The names of the rules of a rule file that holds several (and loads without
    problems), else None (:func:`load` then reads the file, or says what is wrong)."""
    from cep.rules import load_rules_text

    try:
        text = path.read_text(encoding="utf-8-sig")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        return None
    try:
        rules = load_rules_text(text, str(path))
    except CEPError:
        return None
    return rules.order if len(rules) > 1 and not rules.problems else None


def _module_rules(spec: str, target: str) -> list[tuple[str, str, Loaded]]:
    """The Patterns and pattern factories at the top level of a module or ``file.py``."""
    module = _import(spec, target, what="rules")
    found: list[tuple[str, str, Loaded]] = []
    for attr, value in sorted(vars(module).items()):
        if attr.startswith("_"):
            continue
        if isinstance(value, Pattern):
            found.append((attr, f"{target}:{attr}", Loaded(value)))
        elif _is_factory(value, module.__name__):
            made = _call(f"{target}:{attr}", attr, value, [], {}, what=f"rules {spec!r}: rule")
            if not isinstance(made, Pattern):
                raise CEPError(f"rules {spec!r}: rule {attr!r}: {attr}() is annotated -> "
                               f"Pattern but returned a {type(made).__name__}")
            found.append((attr, f"{target}:{attr}", Loaded(made)))
    if not found:
        raise CEPError(f"rules {spec!r}: {target} holds no Pattern and no pattern factory (a "
                       "function annotated -> Pattern that needs no arguments) at its top "
                       "level: name one with module:factory(arg=...)")
    return found


def _is_factory(value: Any, module_name: str) -> bool:
    """A function defined in the module, annotated to return a Pattern, that needs no
    arguments (the annotation is read as text, never evaluated)."""
    if not inspect.isfunction(value) or value.__module__ != module_name:
        return False
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return False
    returns = signature.return_annotation
    if isinstance(returns, str):
        if returns.strip().strip("'\"").rpartition(".")[2] != "Pattern":
            return False
    elif not (isinstance(returns, type) and issubclass(returns, Pattern)):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in signature.parameters.values())


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module name that can be found (without importing it; its
    parent packages are imported to look)."""
    name = name.strip()
    if not _MODULE.match(name):
        return False
    _current_directory_importable()
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
    except Exception:  # a parent package fails to import: importing it says why
        return True


def _exists(spec: str) -> bool:
    try:
        return Path(spec).exists()
    except (OSError, ValueError):  # a name too long for a path, a NUL byte
        return False


def _split(spec: str) -> list[str]:
    """``spec`` cut at its commas, leaving those within brackets or quotes (a factory's
    arguments) alone.

    >>> _split("a:b(1, c=[2, 3]),d:e('x,y'),f")
    ['a:b(1, c=[2, 3])', "d:e('x,y')", 'f']
    """
    parts: list[str] = []
    depth, quote, start, i = 0, "", 0, 0
    while i < len(spec):
        ch = spec[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(spec[start:i])
            start = i + 1
        i += 1
    parts.append(spec[start:])
    return parts


def parse_key(text: str) -> str | tuple[str, ...]:
    """``--key``: a field, or fields separated by commas (a composite key).

    >>> parse_key("card_id"), parse_key("card_id, merchant")
    ('card_id', ('card_id', 'merchant'))
    """
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a field name, or field names separated by commas (card_id,merchant)")
    return parts[0] if len(parts) == 1 else tuple(parts)


def expand_inputs(items: Sequence[str]) -> list[str]:
    """Input arguments with glob patterns (``data/*.parquet``, ``logs/**/*.jsonl.gz``)
    expanded, in name order; plain paths stay as given (directories are read by the
    readers).  A pattern that matches nothing is an error naming it.

    >>> _ = [Path(n).write_text("ts\\n1\\n") for n in ("b.csv", "a.csv")]
    >>> expand_inputs(["*.csv"])
    ['a.csv', 'b.csv']
    """
    out: list[str] = []
    for item in items:
        if not os.path.exists(item) and glob.has_magic(item):
            found = sorted(glob.glob(item, recursive=True))
            if not found:
                raise CEPError(f"{item}: no files match")
            out += found
        else:
            out.append(item)
    return out


def add_input_arguments(parser: argparse.ArgumentParser, dest: str, key_help: str,
                        pattern_help: str = PATTERN_HELP) -> None:
    """The arguments every subcommand that reads events shares: the pattern spec (its help
    ``pattern_help``), the inputs (into ``dest``) and ``--key``."""
    parser.add_argument("pattern", help=pattern_help)
    parser.add_argument(dest, nargs="+", help="Parquet, CSV or JSONL files (also .gz/.zst), "
                        "directories of them, or glob patterns")
    parser.add_argument("--key", type=parse_key, metavar="FIELD[,FIELD...]", help=key_help)



def add_cap_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-partial-matches N|off`` and ``--on-overflow POLICY`` (see
    :mod:`cep.nfa.capacity`), for every subcommand that matches."""
    parser.add_argument("--max-partial-matches", type=_cap_arg,
                        default=DEFAULT_MAX_PARTIAL_MATCHES, metavar="N|off",
                        help="most partial matches a key may hold (default: %(default)s; off: "
                        "no cap); see --on-overflow")
    parser.add_argument("--on-overflow", choices=OVERFLOW_POLICIES, default="fail",
                        help="a key over --max-partial-matches: fail naming it (default), or "
                        "drop its oldest or newest partial matches (counted)")


def _cap_arg(text: str) -> int | None:
    """``--max-partial-matches``: a positive integer, or ``off``.

    >>> _cap_arg("500"), _cap_arg("off")
    (500, None)
    """
    if text.strip().lower() in ("off", "none"):
        return None
    try:
        return check_cap(int(text.replace(",", "").replace("_", "")))
    except (ValueError, CEPError):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of partial matches > 0 "
                                         "(or off)") from None
