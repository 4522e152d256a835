"""Pattern specs: how the ``cep`` command names a pattern, and the arguments every command
that reads events shares (``cep match``, ``cep plot``, ``cep replay``).

A spec (:func:`load`) is ``module:attribute``, ``file.py:attribute``, a factory with
literal arguments (``cep.patterns.fraud:card_testing(tests=4, within="5m")``), or a JSON
file holding a pattern (``Pattern.to_json``) or a rule (:mod:`cep.rules`; ``rules.json:NAME``
picks one rule of several).  :mod:`cep.runtime.cli` and :mod:`cep.runtime.replay` both read
them from here: the command imports the replay, the replay imports this module.

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
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cep.errors import CEPError
from cep.pattern import Pattern
from cep.runtime.bounded import key_spec

#: what a pattern spec may be, as error messages say it
SPEC_FORMS = ("module:attribute, file.py:attribute, module:factory(arg=literal, ...) "
              "or a pattern/rule .json file")
#: what ``--time-unit`` accepts
TIME_UNITS = ("s", "ms", "us", "ns")
#: what ``--engine`` accepts
ENGINE_CHOICES = ("auto", "reference", "numba")
#: the help of a command's PATTERN argument
PATTERN_HELP = ("module:attribute, file.py:attribute, module:factory(tests=4) with literal "
                "arguments, or a pattern/rule .json file (rules.json:NAME)")


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


def _import(spec: str, target: str) -> Any:
    if target.endswith(".py"):
        path = Path(target)
        if not path.exists():
            raise CEPError(f"pattern {spec!r}: no such file {path}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise CEPError(f"pattern {spec!r}: cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            raise CEPError(f"pattern {spec!r}: importing {path} failed: {err!r}") from err
        return module
    # like `python -m`, let modules of the current directory be named
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(target)
    except Exception as err:
        raise CEPError(f"pattern {spec!r}: cannot import module {target!r}: {err!r}") from err


def _call(spec: str, attr: str, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as err:
        shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise CEPError(f"pattern {spec!r}: calling {attr}({shown}) failed: {err!r}") from err


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
    try:
        text = path.read_text(encoding="utf-8-sig")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise CEPError(f"pattern {spec!r}: cannot read {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise CEPError(f"pattern {spec!r}: {path} is not valid JSON: {err.msg} (line "
                       f"{err.lineno}, column {err.colno})") from None
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
    return Loaded(rule.pattern, rule.key, rule.name)


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


def add_input_arguments(parser: argparse.ArgumentParser, dest: str, key_help: str) -> None:
    """The arguments every subcommand that reads events shares: the pattern spec, the
    inputs (into ``dest``) and ``--key``."""
    parser.add_argument("pattern", help=PATTERN_HELP)
    parser.add_argument(dest, nargs="+", help="Parquet, CSV or JSONL files (also .gz/.zst), "
                        "directories of them, or glob patterns")
    parser.add_argument("--key", type=parse_key, metavar="FIELD[,FIELD...]", help=key_help)


PATTERN_HELP = ("module:attribute, file.py:attribute, module:factory(tests=4) with literal "
                "arguments, or a pattern/rule .json file (rules.json:NAME)")
