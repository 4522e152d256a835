"""Patterns as JSON: saved, shipped (e.g. to Spark executors) and loaded without running code.

Only patterns whose conditions are expressions serialize; a Python callable
cannot be written as data, and the error names the stage that holds one.

>>> from cep import Pattern, col
>>> p = Pattern.begin("a").where(col("x") > 1).followed_by("b").where(col("x") < 0)
>>> pattern_from_json(pattern_to_json(p)) == p
True
"""

from __future__ import annotations

import json
from typing import Any

from cep.conditions import TRUE, And, Condition, Not, Or, TrueCondition
from cep.errors import MalformedPatternError
from cep.expr import Expr
from cep.pattern import Consuming, Kind, Pattern, Stage, Times, WithinType
from cep.skip import SkipKind, SkipStrategy

FORMAT = "cep.pattern/1"


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
    code, and a malformed document is a :class:`~cep.errors.MalformedPatternError`.

    >>> from cep import Pattern, col
    >>> pattern_from_json(pattern_to_json(Pattern.begin("a").where(col("x") > 1)))
    Pattern.begin('a').where((col('x') > 1))
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise MalformedPatternError(f"pattern JSON is not valid JSON: {err}") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT or "pattern" not in data:
        raise MalformedPatternError(
            f"not a cep pattern document (expected an object with format {FORMAT!r} and a "
            "'pattern')"
        )
    return _load_pattern(data["pattern"], "$.pattern")


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


def _load_cond(d: Any, path: str) -> Condition:
    if not isinstance(d, dict) or len(d) != 1:
        raise MalformedPatternError(f"pattern JSON at {path}: bad condition {d!r}")
    (kind, value), = d.items()
    if kind == "expr":
        return Expr.from_dict(value)
    if kind == "true":
        return TRUE
    if kind in ("and", "or"):
        left, right = (_load_cond(v, f"{path}.{kind}[{i}]") for i, v in enumerate(value))
        return And(left, right) if kind == "and" else Or(left, right)
    if kind == "not":
        return Not(_load_cond(value, f"{path}.not"))
    raise MalformedPatternError(f"pattern JSON at {path}: unknown condition {kind!r}")


def _load_pattern(d: Any, path: str) -> Pattern:
    try:
        skip = d["skip"]
        strategy = SkipStrategy(SkipKind(skip["kind"]), skip["stage"], bool(skip["throw_on_miss"]))
        stages = tuple(_load_stage(s, f"{path}.stages[{i}]") for i, s in enumerate(d["stages"]))
    except (KeyError, TypeError, ValueError) as err:
        raise MalformedPatternError(f"pattern JSON at {path}: {err!r}") from None
    if not stages:
        raise MalformedPatternError(f"pattern JSON at {path}: no stages")
    return Pattern(stages, strategy)


def _load_stage(d: dict[str, Any], path: str) -> Stage:
    t = d["times"]
    for kind, ms in d["within"]:
        if int(ms) <= 0:
            raise MalformedPatternError(
                f"pattern JSON at {path}.within: {kind} window of {ms} ms: a window must be at "
                "least 1 ms (leave it out for no window)")
    return Stage(
        name=d["name"],
        consuming=Consuming[d["consuming"]],
        condition=None if d["condition"] is None else _load_cond(d["condition"], f"{path}.condition"),
        until=None if d["until"] is None else _load_cond(d["until"], f"{path}.until"),
        kind=Kind[d["kind"]],
        times=None if t is None else Times(int(t["low"]), t["high"], t["window"]),
        optional=bool(d["optional"]),
        greedy=bool(d["greedy"]),
        inner=Consuming[d["inner"]],
        within=tuple((WithinType[k], int(ms)) for k, ms in d["within"]),
        group=None if d["group"] is None else _load_pattern(d["group"], f"{path}.group"),
    )
