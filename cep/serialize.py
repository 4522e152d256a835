"""Patterns as JSON: saved, shipped (e.g. to Spark executors) and loaded without running code.

Only patterns whose conditions are expressions serialize; a Python callable
cannot be written as data, and the error names the stage that holds one.

>>> from cep import Pattern, col
>>> p = Pattern.begin("a").where(col("x") > 1).followed_by("b").where(col("x") < 0)
>>> pattern_from_json(pattern_to_json(p)) == p
True

Loading builds the pattern with the builder's own calls (``Pattern.begin``, ``.times``,
``.optional``, ...), so a document is held to the rules a pattern written in Python is:
whatever the builder refuses, a document cannot say either.  Every value must have its
JSON type (a count is an integer, a flag ``true`` or ``false``), and a
:class:`PatternJSONError` names the place that is wrong:

>>> import json
>>> doc = json.loads(Pattern.begin("a").times(2, 4).to_json())
>>> doc["pattern"]["stages"][0]["times"]["low"] = "2"
>>> pattern_from_json(json.dumps(doc))
Traceback (most recent call last):
...
cep.serialize.PatternJSONError: pattern JSON at $.pattern.stages[0].times.low: expected an integer, got a string "2"
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from cep.conditions import TRUE, And, Condition, Not, Or, TrueCondition
from cep.errors import CEPError, MalformedPatternError
from cep.expr import Expr
from cep.pattern import GROUP_NAME, Consuming, Kind, Pattern, Stage, WithinType
from cep.skip import SkipKind, SkipStrategy

FORMAT = "cep.pattern/1"
#: the largest integer a document may hold (a count, a window, a rule's version): engines,
#: tables and checkpoints keep them as 64-bit integers, and a larger one would overflow
#: there, long after it was loaded
MAX_INT = 2**63 - 1
#: the deepest a document may nest (objects and lists within each other): loading,
#: compiling, printing and saving a pattern recurse about once a level, and Python's
#: recursion (1,000 calls) runs out near 900 levels, in the JSON parser or later in a job;
#: half of that leaves room for the calls below them (a rule of 200 conditions AND-ed one
#: by one, as ``a & b & ...`` nests them, is some 400 levels deep)
MAX_NESTING = 500
#: the fields of a document's objects, as pattern_to_json writes them
PATTERN_FIELDS = ("skip", "stages")
SKIP_FIELDS = ("kind", "stage", "throw_on_miss")
STAGE_FIELDS = ("name", "consuming", "condition", "until", "kind", "times", "optional",
                "greedy", "inner", "within", "group")
TIMES_FIELDS = ("low", "high", "window")
#: the builder call that adds a stage of each consuming strategy (after the first)
_APPEND: dict[Consuming, Callable[[Pattern, Any], Pattern]] = {
    Consuming.STRICT: Pattern.next, Consuming.SKIP_TILL_NEXT: Pattern.followed_by,
    Consuming.SKIP_TILL_ANY: Pattern.followed_by_any, Consuming.NOT_NEXT: Pattern.not_next,
    Consuming.NOT_FOLLOW: Pattern.not_followed_by,
}
#: the builder call that sets each inner consuming strategy (None: the default)
_INNER: dict[Consuming, Callable[[Pattern], Pattern] | None] = {
    Consuming.SKIP_TILL_NEXT: None, Consuming.STRICT: Pattern.consecutive,
    Consuming.SKIP_TILL_ANY: Pattern.allow_combinations,
}
#: where Expr.from_dict says an expression is wrong, relative to the expression
_EXPRESSION_AT = re.compile(r"expression JSON at \$(\S*): (.*)", re.DOTALL)


class PatternJSONError(MalformedPatternError):
    """A pattern document that cannot be loaded: ``place`` is the JSON path of what is
    wrong (``$.pattern.stages[1].times.low``), ``reason`` what is wrong with it."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"pattern JSON at {place}: {reason}")
        self.place = place
        self.reason = reason


def pattern_to_json(pattern: Pattern) -> str:
    """The pattern as JSON text (what :meth:`Pattern.to_json` returns); a Python callable
    condition is a :class:`~cep.errors.MalformedPatternError` naming its stage.

    >>> from cep import Pattern, col
    >>> import json
    >>> json.loads(pattern_to_json(Pattern.begin("a").where(col("x") > 1)))["format"]
    'cep.pattern/1'
    """
    return json.dumps({"format": FORMAT, "pattern": _pattern(pattern)}, sort_keys=True)


def pattern_from_json(text: str) -> Pattern:
    """Load :func:`pattern_to_json` output (what :meth:`Pattern.from_json` does); never runs
    code, and a malformed document is a :class:`~cep.errors.MalformedPatternError`
    (a :class:`PatternJSONError` naming the place, once the text is JSON).

    >>> from cep import Pattern, col
    >>> pattern_from_json(pattern_to_json(Pattern.begin("a").where(col("x") > 1)))
    Pattern.begin('a').where((col('x') > 1))
    """
    try:
        data = parse_json(text)
    except JSONTextError as err:
        raise MalformedPatternError(f"pattern JSON is {err.reason} ({err.place})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or "pattern" not in data:
        raise MalformedPatternError(
            f"not a cep pattern document (expected an object with format {FORMAT!r} and a "
            "'pattern')"
        )
    return pattern_from_data(data["pattern"], "$.pattern")


class JSONTextError(CEPError):
    """JSON text that cannot be read: ``place`` is where (``line 3, column 10``, or
    ``file``), ``reason`` what is wrong (``not valid JSON: ...``, ``nested more than 500
    levels deep``, ``not readable JSON: ...``)."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"{place}: {reason}")
        self.place = place
        self.reason = reason


class _RepeatedKey(ValueError):
    """A key given twice in one JSON object (its name in ``args[0]``)."""


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


class _NotFinite(ValueError):
    """NaN, or a number beyond float64 (1e400), in JSON text."""


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):  # a literal that overflowed: surely a slip
        raise _NotFinite(literal)
    return value


def _infinity_only(literal: str) -> float:
    """Infinity and -Infinity, as Python's json reads and writes them (a pattern's infinite
    constant is written so); NaN is no value (a comparison with it is never true)."""
    if literal == "NaN":
        raise _NotFinite(literal)
    return float(literal)


#: a JSON string (skipped) or a number or non-standard constant (caught)
_LITERALS = re.compile(r'"(?:\\.|[^"\\])*"|(NaN|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')


def _place_of(text: str | bytes | bytearray, wanted: Callable[[str], bool]) -> str:
    """Where the first number or constant outside a string in ``text`` that is ``wanted``
    stands."""
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "replace")
    for found in _LITERALS.finditer(text):
        if found.group(1) is not None and wanted(found.group(1)):
            at = found.start(1)
            line = text.count("\n", 0, at) + 1
            return f"line {line}, column {at - (text.rfind(chr(10), 0, at) + 1) + 1}"
    return "file"


def parse_json(text: str) -> Any:
    """``json.loads(text)``, what can go wrong said as a :class:`JSONTextError`, the one
    way every reader of pattern and rule documents reports it.

    >>> parse_json('{"a": [1]}')
    {'a': [1]}
    >>> parse_json('{"a": }')
    Traceback (most recent call last):
    ...
    cep.serialize.JSONTextError: line 1, column 7: not valid JSON: Expecting value
    >>> parse_json('{"name": "a", "name": "b"}')
    Traceback (most recent call last):
    ...
    cep.serialize.JSONTextError: file: key 'name' is given twice in one object (JSON readers keep one of them: say it once)
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise JSONTextError("file", f"not text but {type(text).__name__}: give a str or bytes")
    try:
        return json.loads(text, object_pairs_hook=_no_repeated_keys, parse_float=_finite_float,
                          parse_constant=_infinity_only)
    except _NotFinite as err:
        literal = err.args[0]
        what = ("a number beyond the range of float64" if literal[-1].isdigit()
                else "not a number JSON has (null is a missing value)")
        raise JSONTextError(_place_of(text, literal.__eq__), f"{literal} is {what}") from None
    except _RepeatedKey as err:
        raise JSONTextError("file", f"key {err.args[0]!r} is given twice in one object (JSON "
                            "readers keep one of them: say it once)") from None
    except json.JSONDecodeError as err:
        raise JSONTextError(f"line {err.lineno}, column {err.colno}",
                            f"not valid JSON: {err.msg}") from None
    except RecursionError:  # deeper than the parser can go: say where it went too deep
        line, column = nesting_position(text) or (1, 1)
        raise JSONTextError(f"line {line}, column {column}",
                            f"nested more than {MAX_NESTING} levels deep") from None
    except ValueError:  # an integer of thousands of digits: Python refuses to read it
        raise JSONTextError(_place_of(text, lambda number: len(number.lstrip("-")) > 4300),
                            "a number of more than 4,300 digits") from None


def pattern_from_data(data: Any, place: str = "$") -> Pattern:
    """The pattern a parsed document's ``pattern`` object describes (``place`` is where
    that object is, for errors: a :class:`PatternJSONError` names the place in it).

    >>> pattern_from_data({"skip": {"kind": "no_skip", "stage": None, "throw_on_miss": False},
    ...                    "stages": [{"name": "a"}]}, "$.pattern")
    Traceback (most recent call last):
    ...
    cep.serialize.PatternJSONError: pattern JSON at $.pattern.stages[0]: missing 'consuming', 'condition', 'until', 'kind', 'times', 'optional', 'greedy', 'inner', 'within', 'group'
    """
    deep = nesting_place(data, place)
    if deep is not None:
        raise PatternJSONError(deep, f"nested more than {MAX_NESTING} levels deep")
    return _load_pattern(data, place)


def expression_from_data(data: Any, place: str) -> Expr:
    """The expression of a parsed document (``Expr.to_dict`` output) at ``place``; a
    :class:`PatternJSONError` names the place in it that is wrong.

    >>> expression_from_data({"op": "+", "args": [{"op": "col", "name": "x"}]}, "$.measures.m")
    Traceback (most recent call last):
    ...
    cep.serialize.PatternJSONError: pattern JSON at $.measures.m: '+' takes 2 args
    """
    try:
        return Expr.from_dict(data)
    except RecursionError:
        raise PatternJSONError(place, f"nested more than {MAX_NESTING} levels deep") from None
    except CEPError as err:
        at = _EXPRESSION_AT.fullmatch(str(err))
        if at is None:
            raise PatternJSONError(place, str(err)) from None
        raise PatternJSONError(place + at[1], at[2]) from None
    except (TypeError, ValueError) as err:  # a value of a type the builders never expect
        raise PatternJSONError(place, f"not an expression: {err}") from None


def nesting_place(data: Any, place: str = "$", limit: int = MAX_NESTING) -> str | None:
    """Where parsed JSON ``data`` (at ``place``) nests more than ``limit`` objects and lists
    deep, shortened (the path of a too deep place is as long as it is deep), else None.

    >>> nesting_place({"a": [[1]]}, limit=2), nesting_place({"a": [1]}, limit=2)
    ('$.a[0]', None)
    """
    # a stack, not recursion: the data may be deeper than Python's recursion allows
    stack: list[tuple[Any, int, Any]] = [(data, 1, None)]
    while stack:
        value, depth, trail = stack.pop()
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        if depth > limit:
            return _trail_text(place, trail)
        stack.extend((v, depth + 1, (trail, k)) for k, v in items)
    return None


def nesting_position(text: str, limit: int = MAX_NESTING) -> tuple[int, int] | None:
    """The line and column (from 1) of the bracket where JSON ``text`` nests more than
    ``limit`` deep, else None: where to look when the text is too deep to parse.

    >>> nesting_position('{"a":\\n  [["]]]]"]]}', limit=2)
    (2, 4)
    """
    depth, quoted, escaped, line, line_start = 0, False, False, 1, 0
    for i, ch in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line, i - line_start + 1
        elif ch in "]}":
            depth -= 1
        if ch == "\n":
            line, line_start = line + 1, i + 1
    return None


def _trail_text(place: str, trail: Any, shown: int = 8) -> str:
    steps = []
    while trail is not None:
        trail, step = trail
        steps.append(step)
    steps.reverse()
    text = place + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps[:shown])
    return text + ("…" if len(steps) > shown else "")


def _pattern(p: Pattern) -> dict[str, Any]:
    return {"skip": p.skip.to_dict(), "stages": [_stage(s) for s in p.stages]}


def _stage(s: Stage) -> dict[str, Any]:
    return {
        "name": s.name,
        "consuming": s.consuming.name,
        "condition": None if s.condition is None else _cond(s.condition, s.name),
        "until": None if s.until is None else _cond(s.until, s.name),
        "kind": s.kind.name,
        "times": None
        if s.times is None
        else {"low": s.times.low, "high": s.times.high, "window": s.times.window},
        "optional": s.optional,
        "greedy": s.greedy,
        "inner": s.inner.name,
        "within": [[k.name, ms] for k, ms in s.within],
        "group": None if s.group is None else _pattern(s.group),
    }


def _cond(c: Condition, stage: str) -> dict[str, Any]:
    if isinstance(c, Expr):
        return {"expr": c.to_dict()}
    if isinstance(c, TrueCondition):
        return {"true": True}
    if isinstance(c, And):
        return {"and": [_cond(c.left, stage), _cond(c.right, stage)]}
    if isinstance(c, Or):
        return {"or": [_cond(c.left, stage), _cond(c.right, stage)]}
    if isinstance(c, Not):
        return {"not": _cond(c.inner, stage)}
    raise MalformedPatternError(
        f"stage {stage!r}: condition {c!r} is Python code and cannot be serialized; "
        "use expressions (cep.col(...) > ...) to save or ship the pattern"
    )


# ------------------------------------------------------------------- loading
def _load_cond(d: Any, place: str) -> Condition:
    if not isinstance(d, dict) or len(d) != 1:
        raise PatternJSONError(place, "a condition is an object of one field: expr, true, "
                               f"and, or or not; got {_describe(d)}")
    (kind, value), = d.items()
    if kind == "expr":
        return expression_from_data(value, f"{place}.expr")
    if kind == "true":
        if value is not True:
            raise PatternJSONError(f"{place}.true", f"expected true, got {_describe(value)}")
        return TRUE
    if kind in ("and", "or"):
        if not isinstance(value, list) or len(value) != 2:
            raise PatternJSONError(f"{place}.{kind}", "expected a list of two conditions, got "
                                   f"{_describe(value)}")
        left, right = (_load_cond(v, f"{place}.{kind}[{i}]") for i, v in enumerate(value))
        return And(left, right) if kind == "and" else Or(left, right)
    if kind == "not":
        return Not(_load_cond(value, f"{place}.not"))
    raise PatternJSONError(place, f"unknown condition {kind!r} (a condition is one of expr, "
                           "true, and, or, not)")


def _load_pattern(d: Any, place: str) -> Pattern:
    d = _object(d, place, PATTERN_FIELDS, "a pattern")
    skip = _load_skip(d["skip"], f"{place}.skip")
    stages = d["stages"]
    if not isinstance(stages, list) or not stages:
        raise PatternJSONError(f"{place}.stages", "expected a list of one stage or more, got "
                               f"{_describe(stages)}")
    pattern: Pattern | None = None
    for i, stage in enumerate(stages):
        pattern = _add_stage(pattern, stage, f"{place}.stages[{i}]", skip)
    assert pattern is not None
    return pattern


def _load_skip(d: Any, place: str) -> SkipStrategy:
    d = _object(d, place, SKIP_FIELDS, "a skip strategy")
    kinds = [k.value for k in SkipKind]
    if not isinstance(d["kind"], str) or d["kind"] not in kinds:
        given = json.dumps(d["kind"]) if isinstance(d["kind"], str) else _describe(d["kind"])
        raise PatternJSONError(f"{place}.kind", f"unknown skip strategy {given} (one of "
                               f"{', '.join(kinds)})")
    kind = SkipKind(d["kind"])
    make = getattr(SkipStrategy, kind.value)
    if kind in (SkipKind.SKIP_TO_FIRST, SkipKind.SKIP_TO_LAST):
        strategy = _build(f"{place}.stage", make, d["stage"])
    elif d["stage"] is not None:
        raise PatternJSONError(f"{place}.stage", f"{kind.value} names no stage: expected "
                               f"null, got {_describe(d['stage'])}")
    else:
        strategy = make()
    if _flag(d["throw_on_miss"], f"{place}.throw_on_miss"):
        strategy = _build(f"{place}.throw_on_miss", strategy.throw_exception_on_miss)
    return strategy


def _add_stage(pattern: Pattern | None, d: Any, place: str, skip: SkipStrategy) -> Pattern:
    """``pattern`` with the stage document ``d`` added, by the builder calls that made it,
    in the order they apply: the stage, its condition, quantifier, until, optional, greedy,
    inner strategy and windows (a quantifier resets what follows it)."""
    d = _object(d, place, STAGE_FIELDS, "a stage")
    consuming = _member(Consuming, d["consuming"], f"{place}.consuming", "consuming strategy")
    target: str | Pattern = d["name"]
    if d["group"] is not None:
        target = _load_pattern(d["group"], f"{place}.group")
        if d["name"] != GROUP_NAME:
            raise PatternJSONError(f"{place}.name", f"a group stage is named {GROUP_NAME!r}, "
                                   f"got {_describe(d['name'])}")
    if pattern is None:
        if consuming is not Consuming.STRICT:
            raise PatternJSONError(f"{place}.consuming", "the first stage begins the pattern: "
                                   f"its consuming strategy is STRICT, got {consuming.name}")
        pattern = _build(place, Pattern.begin, target, skip)
    else:
        pattern = _build(place, _APPEND[consuming], pattern, target)
    kind = _member(Kind, d["kind"], f"{place}.kind", "stage kind")
    if d["condition"] is not None:
        condition = _load_cond(d["condition"], f"{place}.condition")
        pattern = _build(f"{place}.condition", Pattern.where, pattern, condition)
    optional = _flag(d["optional"], f"{place}.optional")
    pattern = _quantify(pattern, kind, d["times"], f"{place}.times", optional)
    if d["until"] is not None:
        until = _load_cond(d["until"], f"{place}.until")
        pattern = _build(f"{place}.until", Pattern.until, pattern, until)
    if optional and not pattern.stages[-1].optional:
        pattern = _build(f"{place}.optional", Pattern.optional, pattern)
    # greedy before the inner strategy: the builder takes greedy().allow_combinations()
    if _flag(d["greedy"], f"{place}.greedy"):
        pattern = _build(f"{place}.greedy", Pattern.greedy, pattern)
    inner = _member(Consuming, d["inner"], f"{place}.inner", "inner consuming strategy")
    if inner not in _INNER:
        raise PatternJSONError(f"{place}.inner", "the events of a quantified stage follow each "
                               f"other as {', '.join(c.name for c in _INNER)}, not {inner.name}")
    make_inner = _INNER[inner]
    if make_inner is not None:
        pattern = _build(f"{place}.inner", make_inner, pattern)
    return _windows(pattern, d["within"], f"{place}.within")


def _quantify(pattern: Pattern, kind: Kind, times: Any, place: str, optional: bool) -> Pattern:
    if kind is Kind.SINGLE:
        if times is not None:
            raise PatternJSONError(place, "a SINGLE stage takes one event: expected null (a "
                                   f"quantified stage is LOOPING or TIMES), got {_describe(times)}")
        return pattern
    t = _object(times, place, TIMES_FIELDS, f"a {kind.name} stage's times")
    low = _integer(t["low"], f"{place}.low")
    window = None if t["window"] is None else _integer(t["window"], f"{place}.window")
    if kind is Kind.LOOPING:
        if t["high"] is not None:
            raise PatternJSONError(f"{place}.high", "a LOOPING stage takes low events or more: "
                                   f"expected null, got {_describe(t['high'])} (a stage of "
                                   "low to high events is TIMES)")
        return _build(place, Pattern.times_or_more, pattern, low, window)
    high = _integer(t["high"], f"{place}.high")
    if low == 0:  # times(0, m) is saved as low 1 and optional: one way to say it
        raise PatternJSONError(f"{place}.low", "expected 1 or more, got 0 (a stage that may "
                               'take no event says "optional": true)')
    if optional and low == 1:
        # what times(0, m) made: optional without optional()'s check of the stage before
        low = 0
    return _build(place, Pattern.times, pattern, low, high, window)


def _windows(pattern: Pattern, within: Any, place: str) -> Pattern:
    if not isinstance(within, list):
        raise PatternJSONError(place, f"expected a list of [kind, milliseconds], got "
                               f"{_describe(within)}")
    seen: set[WithinType] = set()
    for i, entry in enumerate(within):
        at = f"{place}[{i}]"
        if not isinstance(entry, list) or len(entry) != 2:
            raise PatternJSONError(at, f"expected [kind, milliseconds], got {_describe(entry)}")
        kind = _member(WithinType, entry[0], f"{at}[0]", "window kind")
        ms = _integer(entry[1], f"{at}[1]")
        if kind in seen:
            raise PatternJSONError(at, f"a second {kind.name} window: a stage has one of each "
                                   "kind")
        seen.add(kind)
        if ms <= 0:  # the builder refuses it too, in words of within(...), not of the JSON
            raise PatternJSONError(f"{at}[1]", f"{kind.name} window of {ms} ms: a window must "
                                   "be at least 1 ms (leave it out for no window)")
        pattern = _build(at, Pattern.within, pattern, ms, kind)
    return pattern


def _build(place: str, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, a builder call; what it refuses is wrong at ``place``."""
    try:
        return call(*args)
    except CEPError as err:
        raise PatternJSONError(place, str(err)) from None


def _object(d: Any, place: str, fields: tuple[str, ...], what: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise PatternJSONError(place, f"{what} is an object, got {_describe(d)}")
    unknown = sorted(set(d) - set(fields))
    if unknown:
        raise PatternJSONError(place, f"unknown field{'s' if len(unknown) > 1 else ''} "
                               f"{', '.join(map(repr, unknown))} ({what} has: {', '.join(fields)})")
    missing = [f for f in fields if f not in d]
    if missing:
        raise PatternJSONError(place, f"missing {', '.join(map(repr, missing))}")
    return d


def _member(enum: Any, value: Any, place: str, what: str) -> Any:
    names = list(enum.__members__)
    if not isinstance(value, str) or value not in names:
        given = json.dumps(value) if isinstance(value, str) else _describe(value)
        raise PatternJSONError(place, f"unknown {what} {given} (one of {', '.join(names)})")
    return enum[value]


def _flag(value: Any, place: str) -> bool:
    # a JSON boolean only: "false" is text, and bool("false") would be true
    if not isinstance(value, bool):
        raise PatternJSONError(place, f"expected true or false, got {_describe(value)}")
    return value


def _integer(value: Any, place: str) -> int:
    # a JSON integer only: int("2") or int(2.5) would load a document that says otherwise
    if isinstance(value, bool) or not isinstance(value, int):
        raise PatternJSONError(place, f"expected an integer, got {_describe(value)}")
    if not -MAX_INT <= value <= MAX_INT:
        raise PatternJSONError(place, f"{number_text(value)} is beyond the largest integer, "
                               f"2^63-1 ({MAX_INT})")
    return value


def number_text(value: int) -> str:
    """An integer for a message: whole, unless it is too long to read.

    >>> number_text(12), number_text(10**40)
    ('12', 'a number of 41 digits')
    """
    text = str(value)
    return text if len(text) <= 30 else f"a number of {len(text.lstrip('-'))} digits"


def _describe(value: Any) -> str:
    """A JSON value for a message: its JSON type, and the value when it is short."""
    if value is None:
        return "null"
    name = next((n for t, n in _JSON_TYPES if isinstance(value, t)), None)
    if name is None:
        return type(value).__name__
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{name} {number_text(value)}"
    text = json.dumps(value)
    return f"{name} {text}" if len(text) <= 40 else name


#: JSON's types as a message names them (bool before int: True is an int too)
_JSON_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
               (list, "a list"), (dict, "an object"))
