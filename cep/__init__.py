"""cep: FlinkCEP's pattern language and semantics in Python.

>>> from cep import Pattern, match
>>> p = Pattern.begin("a").where(lambda e: e["v"] == 1).followed_by("b").where(lambda e: e["v"] == 2)
>>> [dict(m) for m in match([{"v": 1}, {"v": 0}, {"v": 2}], p)]
[{'a': [{'v': 1}], 'b': [{'v': 2}]}]
"""

from cep.conditions import Condition, IterativeCondition, SimpleCondition
from cep.errors import (
    CEPError,
    ConditionError,
    InputError,
    MalformedPatternError,
    MeasureError,
    MissingFieldError,
    SkipStrategyError,
    TimeUnitError,
    TooManyPartialMatches,
    VisualizationError,
)
from cep.expr import Expr, avg, coalesce, col, count, event_time, first, last, lit, prev
from cep.expr import max_ as max
from cep.expr import min_ as min
from cep.expr import sum_ as sum
from cep.matches import Match, Timeout
from cep.pattern import Pattern, WithinType
from cep.skip import SkipStrategy

# the drivers live below the language (cep.nfa, cep.runtime): imported on first use
_LAZY = {"match": "cep.runtime.bounded", "Matcher": "cep.nfa.matcher"}

__all__ = [
    "CEPError",
    "Condition",
    "Expr",
    "ConditionError",
    "InputError",
    "IterativeCondition",
    "MalformedPatternError",
    "Match",
    "MeasureError",
    "MissingFieldError",
    "Matcher",
    "Pattern",
    "SimpleCondition",
    "SkipStrategy",
    "SkipStrategyError",
    "TimeUnitError",
    "Timeout",
    "TooManyPartialMatches",
    "VisualizationError",
    "WithinType",
    "avg",
    "coalesce",
    "col",
    "count",
    "event_time",
    "first",
    "last",
    "lit",
    "match",
    "max",
    "min",
    "prev",
    "sum",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cep' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value
