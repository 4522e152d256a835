"""Expression conditions: plain-data trees that both engines evaluate.

>>> cond = (col("amount") > 500) & col("country").isin(["RU", "KP"])
>>> cond
((col('amount') > 500) & col('country').isin(['RU', 'KP']))
>>> Expr.from_json(cond.to_json()) .to_json() == cond.to_json()
True

``col(name)`` is a field of the current event.  ``first(stage, field)``,
``last(stage, field)``, ``prev(field)`` and the aggregates ``count(stage)``,
``sum_``/``avg``/``min_``/``max_`` (also exported as ``sum``, ``avg``, ``min``,
``max`` from :mod:`cep`) read the partial match *before* the current event,
exactly what an iterative condition's ``ctx.events(stage)`` sees.

Nulls follow SQL: a comparison with null is unknown, unknown is not true, so
the event is not taken; ``is_null()`` tests for null (NaN counts as null).
Division by zero gives null.  Unary math (``.sqrt() .exp() .log() .sin()
.cos() .tan() .asin() .acos() .atan() .floor() .ceil() .radians()
.degrees()``) gives null out of its domain or when the result is not finite,
so both engines agree (e.g. a great-circle distance for impossible travel).  A stage that has taken nothing yet has no
first/last/min/max/avg (null) and a count and sum of 0.  Strings compare by
equality and membership only; ``.lower()``, ``.startswith(text)`` and
``.contains(text)`` read them.  ``coalesce(a, b, ...)`` is its first non-null argument.

Times are numbers: epoch milliseconds.  ``event_time()`` is the time the engine
gave the current event; datetime values in events (and datetime literals) read as
epoch milliseconds (UTC when they have no zone), durations (``timedelta``) as
milliseconds, so ``col("ts") - first("a", "ts") < timedelta(minutes=5)`` works.
``.hour()`` (0-23) and ``.day_of_week()`` (ISO: Monday 1 .. Sunday 7) read a time, in UTC.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import (
    date,
    datetime,
    timedelta,
    timezone,  # noqa: F401 - datetime literals print as ...tzinfo=timezone.utc
)
from decimal import Decimal
from typing import Any

from cep.conditions import Condition, Context
from cep.errors import MalformedPatternError
from cep.times import millis_to_datetime, time_value_millis

Scalar = int | float | str | bool | None

ARITH = ("+", "-", "*", "/")
COMPARE = ("==", "!=", "<", "<=", ">", ">=")
AGGREGATES = ("count", "sum", "avg", "min", "max")
# unary math, in the order the numba kernel numbers them (nfa/kernel.py OP_MATH)
MATH = (
    "sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan",
    "floor", "ceil", "radians", "degrees", "abs", "hour", "day_of_week",
)
#: functions of text: ``lower`` gives text, ``startswith`` and ``contains`` true/false
TEXT = ("lower", "startswith", "contains")
#: a day and an hour in milliseconds (times in expressions are epoch milliseconds)
DAY_MS = 86_400_000
HOUR_MS = 3_600_000


class Expr(Condition):
    """Base class of expression nodes: build them with ``col``, literals and operators."""

    __slots__ = ()

    # -------------------------------------------------------------- builders
    def __add__(self, o: Any) -> Expr:
        return Arith("+", self, lit(o))

    def __radd__(self, o: Any) -> Expr:
        return Arith("+", lit(o), self)

    def __sub__(self, o: Any) -> Expr:
        return Arith("-", self, lit(o))

    def __rsub__(self, o: Any) -> Expr:
        return Arith("-", lit(o), self)

    def __mul__(self, o: Any) -> Expr:
        return Arith("*", self, lit(o))

    def __rmul__(self, o: Any) -> Expr:
        return Arith("*", lit(o), self)

    def __truediv__(self, o: Any) -> Expr:
        return Arith("/", self, lit(o))

    def __rtruediv__(self, o: Any) -> Expr:
        return Arith("/", lit(o), self)

    def __neg__(self) -> Expr:
        return Arith("-", Lit(0), self)

    def __abs__(self) -> Expr:
        return Math("abs", self)

    def abs(self) -> Expr:
        """The absolute value (also ``abs(expr)``); null stays null.

        >>> e = (col("a") - col("b")).abs() > 5
        >>> e, e.evaluate({"a": 1, "b": 9}, None)
        ((abs((col('a') - col('b'))) > 5), True)
        """
        return Math("abs", self)

    def __eq__(self, o: Any) -> Expr:  # type: ignore[override]
        return Compare("==", self, lit(o))

    def __ne__(self, o: Any) -> Expr:  # type: ignore[override]
        return Compare("!=", self, lit(o))

    def __lt__(self, o: Any) -> Expr:
        return Compare("<", self, lit(o))

    def __le__(self, o: Any) -> Expr:
        return Compare("<=", self, lit(o))

    def __gt__(self, o: Any) -> Expr:
        return Compare(">", self, lit(o))

    def __ge__(self, o: Any) -> Expr:
        return Compare(">=", self, lit(o))

    def __and__(self, o: Any) -> Expr:  # type: ignore[override]
        return BoolOp("&", self, _as_expr(o))

    def __rand__(self, o: Any) -> Expr:
        return BoolOp("&", _as_expr(o), self)

    def __or__(self, o: Any) -> Expr:  # type: ignore[override]
        return BoolOp("|", self, _as_expr(o))

    def __ror__(self, o: Any) -> Expr:
        return BoolOp("|", _as_expr(o), self)

    def __invert__(self) -> Expr:  # type: ignore[override]
        return Negate(self)

    def isin(self, values: Iterable[Scalar]) -> Expr:
        """SQL's IN: true if equal to one of ``values``; unknown if not but a value is null."""
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise MalformedPatternError(
                f"isin() needs a list of values, got {type(values).__name__} {values!r}"
            )
        vals = tuple(None if isinstance(v, float) and math.isnan(v) else v for v in values)
        for v in vals:
            _check_scalar(v)
        return IsIn(self, vals)

    def sqrt(self) -> Expr:
        """Square root; null for a negative value (as for every math function out of its domain).

        >>> (col("dx") * col("dx") + col("dy") * col("dy")).sqrt()
        sqrt(((col('dx') * col('dx')) + (col('dy') * col('dy'))))
        """
        return Math("sqrt", self)

    def exp(self) -> Expr:
        """e to the power of the value; null when that overflows."""
        return Math("exp", self)

    def log(self) -> Expr:
        """Natural logarithm; null for zero or a negative value."""
        return Math("log", self)

    def sin(self) -> Expr:
        """Sine of an angle in radians (``col("lat").radians().sin()``)."""
        return Math("sin", self)

    def cos(self) -> Expr:
        """Cosine of an angle in radians."""
        return Math("cos", self)

    def tan(self) -> Expr:
        """Tangent of an angle in radians."""
        return Math("tan", self)

    def asin(self) -> Expr:
        """Arc sine in radians; null outside [-1, 1]."""
        return Math("asin", self)

    def acos(self) -> Expr:
        """Arc cosine in radians; null outside [-1, 1]."""
        return Math("acos", self)

    def atan(self) -> Expr:
        """Arc tangent in radians."""
        return Math("atan", self)

    def floor(self) -> Expr:
        """The largest whole number not above the value (as a float)."""
        return Math("floor", self)

    def ceil(self) -> Expr:
        """The smallest whole number not below the value (as a float)."""
        return Math("ceil", self)

    def radians(self) -> Expr:
        """Degrees to radians."""
        return Math("radians", self)

    def degrees(self) -> Expr:
        """Radians to degrees."""
        return Math("degrees", self)

    def hour(self) -> Expr:
        """The hour of the day (0-23, UTC) of a time: epoch milliseconds, a datetime field
        or :func:`event_time`.  Shift first for another fixed offset
        (``(col("ts") + timedelta(hours=1)).hour()``).

        >>> from datetime import datetime
        >>> e = col("ts").hour()
        >>> e, e.evaluate({"ts": datetime(2024, 3, 1, 13, 45)}, None)
        (col('ts').hour(), 13)
        """
        return Math("hour", self)

    def day_of_week(self) -> Expr:
        """The ISO day of the week (Monday 1 .. Sunday 7, UTC) of a time: epoch
        milliseconds, a datetime field or :func:`event_time`.

        >>> from datetime import datetime
        >>> weekend = col("ts").day_of_week() >= 6
        >>> weekend.evaluate({"ts": datetime(2024, 3, 2)}, None)  # a Saturday
        True
        """
        return Math("day_of_week", self)

    def lower(self) -> Expr:
        """The text in lower case (Python's ``str.lower``); null stays null.

        >>> e = col("merchant").lower() == "acme"
        >>> e, e.evaluate({"merchant": "ACME"}, None)
        ((col('merchant').lower() == 'acme'), True)
        """
        return Text("lower", self)

    def startswith(self, prefix: str) -> Expr:
        """Whether the text starts with ``prefix`` (case matters: ``.lower()`` first to
        ignore it); null for a null value.

        >>> e = col("name").startswith("ACME")
        >>> e, e.evaluate({"name": "ACME Corp"}, None), e.evaluate({"name": None}, None)
        (col('name').startswith('ACME'), True, None)
        """
        return Text("startswith", self, _text_argument("startswith", prefix))

    def contains(self, text: str) -> Expr:
        """Whether ``text`` occurs in the value (plain text, not a pattern; case matters);
        null for a null value.

        >>> e = col("desc").lower().contains("gift")
        >>> e, e.evaluate({"desc": "Gift card"}, None)
        (col('desc').lower().contains('gift'), True)
        """
        return Text("contains", self, _text_argument("contains", text))

    def between(self, low: Any, high: Any) -> Expr:
        """``low <= self <= high`` (both ends included, as SQL's BETWEEN)."""
        return BoolOp("&", Compare(">=", self, lit(low)), Compare("<=", self, lit(high)))

    def is_null(self) -> Expr:
        """True when the value is null (None or NaN, or a division by zero); never unknown,
        so ``~col(x).is_null()`` keeps exactly the events that have a value.

        >>> e = col("x").is_null()
        >>> e, e.evaluate({"x": float("nan")}, None), e.evaluate({"x": 0}, None)
        (col('x').is_null(), True, False)
        """
        return IsNull(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "an expression has no truth value: combine conditions with & | ~ "
            "(not `and`, `or`, `not`), and compare with .equals() for structure"
        )

    __hash__ = None  # type: ignore[assignment]

    def key(self) -> tuple[Any, ...]:
        return ("expr", self.to_json())

    def equals(self, other: Any) -> bool:
        """Structural equality (``==`` builds a comparison expression instead)."""
        return isinstance(other, Expr) and self.to_json() == other.to_json()

    # ------------------------------------------------------------ evaluation
    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        """The value for ``event`` (None = null); ``ctx`` gives the partial match."""
        raise NotImplementedError

    def test(self, event: Any, ctx: Context) -> bool:
        """Whether the event is taken: only a true value counts (null, unknown, is not).

        >>> (col("v") > 1).test({"v": 2}, None), (col("v") > 1).test({"v": None}, None)
        (True, False)
        """
        return _truth(self.evaluate(event, ctx), self) is True

    # ---------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        """The expression as plain data: ``{"op": ..., "args": [...]}`` nodes.

        >>> (col("v") > 1).to_dict()
        {'op': '>', 'args': [{'op': 'col', 'name': 'v'}, {'op': 'lit', 'value': 1}]}
        """
        raise NotImplementedError

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text with sorted keys (what patterns serialise to).

        >>> col("v").is_null().to_json()
        '{"args": [{"name": "v", "op": "col"}], "op": "is_null"}'
        """
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Expr:
        """Parse :meth:`to_json` output; never runs code."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise MalformedPatternError(f"expression JSON is not valid JSON: {err}") from err
        return Expr.from_dict(data)

    @staticmethod
    def from_dict(data: Any) -> Expr:
        """Parse :meth:`to_dict` output; a malformed tree is a
        :class:`~cep.errors.MalformedPatternError` naming where it is wrong.

        >>> Expr.from_dict({"op": "col", "name": "v"})
        col('v')
        """
        return _from_dict(data, "$")

    def children(self) -> tuple[Expr, ...]:
        """The operands of this node (none for a leaf).

        >>> (col("a") + 1).children()
        (col('a'), lit(1))
        """
        return ()

    def walk(self) -> Iterable[Expr]:
        """This node and every node below it, depth first.

        >>> [type(e).__name__ for e in (col("a") > 1).walk()]
        ['Compare', 'Col', 'Lit']
        """
        yield self
        for c in self.children():
            yield from c.walk()


# --------------------------------------------------------------------- leaves
@dataclass(frozen=True, eq=False, repr=False)
class Col(Expr):
    """A field of the current event: what :func:`col` builds."""

    name: str

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        return _null(value_of(event, self.name))

    def to_dict(self) -> dict[str, Any]:
        return {"op": "col", "name": self.name}

    def __repr__(self) -> str:
        return f"col({self.name!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Lit(Expr):
    """A constant: what :func:`lit` builds (and what plain numbers and strings become)."""

    value: Scalar

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        return self.value

    def to_dict(self) -> dict[str, Any]:
        return {"op": "lit", "value": self.value}

    def __repr__(self) -> str:
        return f"lit({self.value!r})"


@dataclass(frozen=True, eq=False, repr=False)
class TimeLit(Lit):
    """A datetime literal (its value is epoch milliseconds) or a duration literal (its
    value is milliseconds): what :func:`lit` makes of ``datetime``, ``date`` and
    ``timedelta`` values.  JSON tags them: ``{"datetime": "2024-03-01T00:00:00Z"}``,
    ``{"duration_ms": 300000}``.

    >>> from datetime import datetime, timedelta
    >>> lit(datetime(2024, 3, 1)).to_dict()
    {'op': 'lit', 'value': {'datetime': '2024-03-01T00:00:00Z'}}
    >>> lit(timedelta(minutes=5)).evaluate({}, None)
    300000
    """

    value: int
    kind: str = "datetime"  # "datetime" | "duration"

    def python_value(self) -> datetime | timedelta:
        """The literal as a Python value: a UTC datetime or a timedelta.

        >>> from datetime import timedelta
        >>> lit(timedelta(seconds=90)).python_value()
        datetime.timedelta(seconds=90)
        """
        if self.kind == "datetime":
            return millis_to_datetime(self.value)
        return timedelta(milliseconds=self.value)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "datetime":
            text = millis_to_datetime(self.value).isoformat(timespec="milliseconds")
            text = text.replace("+00:00", "Z").replace(".000Z", "Z")
            return {"op": "lit", "value": {"datetime": text}}
        return {"op": "lit", "value": {"duration_ms": self.value}}

    def source(self) -> str:
        """The literal as Python source (``datetime(...)`` or ``timedelta(...)``).

        >>> from datetime import datetime
        >>> lit(datetime(2024, 3, 1, 12, 30)).source()
        'datetime(2024, 3, 1, 12, 30, tzinfo=timezone.utc)'
        """
        return (repr(self.python_value()).replace("datetime.timezone.utc", "timezone.utc")
                .replace("datetime.datetime(", "datetime(")
                .replace("datetime.timedelta(", "timedelta("))

    def __repr__(self) -> str:
        return f"lit({self.source()})"


def _time_literal(value: Any) -> TimeLit | Lit | None:
    """A datetime, date or duration as a literal (NaT as null); None for other values."""
    is_time = isinstance(value, (date, timedelta)) or type(value).__name__ in (
        "datetime64", "timedelta64")
    if not is_time:
        return None
    ms = time_value_millis(value)
    if ms is None:
        return Lit(None)
    duration = isinstance(value, timedelta) or type(value).__name__ == "timedelta64"
    try:
        if not duration:
            millis_to_datetime(ms)  # a literal must print back as a datetime
    except OverflowError:
        raise MalformedPatternError(f"datetime literal {value!r} is out of range") from None
    return TimeLit(ms, "duration" if duration else "datetime")


def _time_literal_from_json(data: Any, path: str) -> Expr:
    if isinstance(data, dict) and set(data) == {"datetime"} and isinstance(data["datetime"], str):
        try:
            parsed = datetime.fromisoformat(data["datetime"])
        except ValueError:
            raise MalformedPatternError(
                f"expression JSON at {path}: {data['datetime']!r} is not an ISO-8601 datetime"
            ) from None
        literal = _time_literal(parsed)
        assert literal is not None
        return literal
    if (isinstance(data, dict) and set(data) == {"duration_ms"}
            and type(data["duration_ms"]) is int):
        return TimeLit(data["duration_ms"], "duration")
    raise MalformedPatternError(
        f"expression JSON at {path}: literals must be numbers, strings, booleans, null, "
        f'{{"datetime": "<ISO-8601>"}} or {{"duration_ms": <integer>}}, not {data!r}'
    )


@dataclass(frozen=True, eq=False, repr=False)
class EventTime(Expr):
    """The time the engine gave the current event (epoch milliseconds): what
    :func:`event_time` builds."""

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        return None if ctx is None else getattr(ctx, "timestamp", None)

    def to_dict(self) -> dict[str, Any]:
        return {"op": "event_time"}

    def __repr__(self) -> str:
        return "event_time()"


@dataclass(frozen=True, eq=False, repr=False)
class StageRef(Expr):
    """``first``/``last`` event of a stage, or ``prev`` (the last event taken by any stage)."""

    kind: str  # "first" | "last" | "prev"
    stage: str | None
    field: str

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        if ctx is None:
            return None
        if self.kind == "prev":
            previous = _previous_event(ctx)
            return None if previous is None else _null(value_of(previous, self.field))
        assert self.stage is not None
        events = ctx.events(self.stage)
        if not events:
            return None
        return _null(value_of(events[0] if self.kind == "first" else events[-1], self.field))

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.kind, "stage": self.stage, "field": self.field}

    def __repr__(self) -> str:
        if self.kind == "prev":
            return f"prev({self.field!r})"
        return f"{self.kind}({self.stage!r}, {self.field!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Aggregate(Expr):
    """``count``/``sum``/``avg``/``min``/``max`` over what a stage has taken so far."""

    func: str
    stage: str
    field: str | None

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        events = ctx.events(self.stage) if ctx is not None else []
        if self.func == "count":
            return len(events)
        assert self.field is not None
        values = [v for v in (_null(value_of(e, self.field)) for e in events) if v is not None]
        if not values:
            # a sum over nothing is 0 (so `sum(b) + col(x) < 100` can start a loop); the
            # others have no value
            return 0 if self.func == "sum" else None
        if self.func in ("sum", "avg"):
            for v in values:  # text would be joined, not added
                _numeric(v, self)
            # left to right, as a running sum over the loop is computed
            total = values[0]
            for v in values[1:]:
                total = total + v
            return total if self.func == "sum" else total / len(values)
        return min(values) if self.func == "min" else max(values)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.func, "stage": self.stage, "field": self.field}

    def __repr__(self) -> str:
        if self.func == "count":
            return f"count({self.stage!r})"
        name = {"sum": "sum_", "min": "min_", "max": "max_"}.get(self.func, self.func)
        return f"{name}({self.stage!r}, {self.field!r})"


# -------------------------------------------------------------------- interior
@dataclass(frozen=True, eq=False, repr=False)
class _Binary(Expr):
    """An operator with two operands: arithmetic, comparison, and/or."""

    op: str
    left: Expr
    right: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "args": [self.left.to_dict(), self.right.to_dict()]}

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Arith(_Binary):
    """``+ - * /`` on numbers; null if an operand is null or on division by zero."""

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        a = self.left.evaluate(event, ctx)
        b = self.right.evaluate(event, ctx)
        if a is None or b is None:
            return None
        _numeric(a, self)
        _numeric(b, self)
        if self.op == "+":
            return _null(a + b)
        if self.op == "-":
            return _null(a - b)
        if self.op == "*":
            return _null(a * b)
        if b == 0:
            return None
        return _null(a / b)


_MATH_IMPL = {
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "floor": lambda v: float(math.floor(v)), "ceil": lambda v: float(math.ceil(v)),
    "radians": math.radians, "degrees": math.degrees, "abs": abs,
    # UTC, from epoch milliseconds, computed as the numba kernel does (nfa/kernel.py math_fn)
    "hour": lambda v: math.floor(v / HOUR_MS) % 24,
    "day_of_week": lambda v: (math.floor(v / DAY_MS) + 3) % 7 + 1,  # 1970-01-01 was a Thursday
}


@dataclass(frozen=True, eq=False, repr=False)
class Math(Expr):
    """A unary math function; any result that is not a finite number is null.

    Nulling infinities as well as domain errors keeps both engines equal
    (numpy gives inf or NaN where Python's math raises).
    """

    fn: str
    arg: Expr

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        v = self.arg.evaluate(event, ctx)
        if v is None:
            return None
        _numeric(v, self)
        try:
            r = _MATH_IMPL[self.fn](v)
        except (ValueError, OverflowError):
            return None
        return r if math.isfinite(r) else None

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.fn, "args": [self.arg.to_dict()]}

    def __repr__(self) -> str:
        if self.fn in ("hour", "day_of_week"):
            return f"{self.arg!r}.{self.fn}()"
        return f"{self.fn}({self.arg!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Compare(_Binary):
    """``== != < <= > >=``; unknown (null) when an operand is null, as in SQL."""

    def evaluate(self, event: Any, ctx: Context | None) -> bool | None:
        a = self.left.evaluate(event, ctx)
        b = self.right.evaluate(event, ctx)
        if a is None or b is None:
            return None
        # the numba engine refuses these for the column's type; here each event says
        a_kind, b_kind = _kind_of(a), _kind_of(b)
        if a_kind in ("string", "boolean") or b_kind in ("string", "boolean"):
            if a_kind != b_kind:
                raise TypeError(f"{self!r}: cannot compare {a!r} with {b!r}")
            if self.op not in ("==", "!="):
                raise TypeError(f"{self!r}: {a_kind}s compare by == and != only")
        if self.op == "==":
            return bool(a == b)
        if self.op == "!=":
            return bool(a != b)
        if self.op == "<":
            return bool(a < b)
        if self.op == "<=":
            return bool(a <= b)
        if self.op == ">":
            return bool(a > b)
        return bool(a >= b)

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {_bare(self.right)})"


@dataclass(frozen=True, eq=False, repr=False)
class BoolOp(_Binary):
    """``&`` / ``|`` with SQL's three-valued logic."""

    def evaluate(self, event: Any, ctx: Context | None) -> bool | None:
        a = _truth(self.left.evaluate(event, ctx), self.left)
        if self.op == "&":
            if a is False:
                return False
            b = _truth(self.right.evaluate(event, ctx), self.right)
            if b is False:
                return False
            return None if a is None or b is None else True
        if a is True:
            return True
        b = _truth(self.right.evaluate(event, ctx), self.right)
        if b is True:
            return True
        return None if a is None or b is None else False


@dataclass(frozen=True, eq=False, repr=False)
class Negate(Expr):
    """``~cond``: not; unknown stays unknown."""

    arg: Expr

    def evaluate(self, event: Any, ctx: Context | None) -> bool | None:
        v = _truth(self.arg.evaluate(event, ctx), self.arg)
        return None if v is None else not v

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_dict(self) -> dict[str, Any]:
        return {"op": "~", "args": [self.arg.to_dict()]}

    def __repr__(self) -> str:
        return f"(~{self.arg!r})"


@dataclass(frozen=True, eq=False, repr=False)
class IsIn(Expr):
    """``expr.isin(values)``: SQL's IN."""

    arg: Expr
    values: tuple[Scalar, ...]

    def evaluate(self, event: Any, ctx: Context | None) -> bool | None:
        v = self.arg.evaluate(event, ctx)
        if v is None:
            return None
        kinds = {_kind_of(x) for x in self.values if x is not None}
        if len(kinds) > 1:  # the numba engine refuses it for any column: one kind or the other
            raise TypeError(f"{self!r}: its values mix {' and '.join(sorted(kinds))}")
        if any(v == x and isinstance(v, str) == isinstance(x, str) for x in self.values):
            return True
        return None if any(x is None for x in self.values) else False

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_dict(self) -> dict[str, Any]:
        return {"op": "isin", "args": [self.arg.to_dict()], "values": list(self.values)}

    def __repr__(self) -> str:
        return f"{self.arg!r}.isin({list(self.values)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class IsNull(Expr):
    """``expr.is_null()``: SQL's IS NULL."""

    arg: Expr

    def evaluate(self, event: Any, ctx: Context | None) -> bool:
        return self.arg.evaluate(event, ctx) is None

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_dict(self) -> dict[str, Any]:
        return {"op": "is_null", "args": [self.arg.to_dict()]}

    def __repr__(self) -> str:
        return f"{self.arg!r}.is_null()"


@dataclass(frozen=True, eq=False, repr=False)
class Text(Expr):
    """A function of text: ``.lower()``, ``.startswith(prefix)``, ``.contains(text)``;
    null in, null out.  ``value`` is the prefix or the text looked for (None for lower)."""

    fn: str
    arg: Expr
    value: str | None = None

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        v = self.arg.evaluate(event, ctx)
        if v is None:
            return None
        if not isinstance(v, str):
            raise TypeError(f"{self!r}: {self.fn}() needs text, got {v!r}")
        if self.fn == "lower":
            return v.lower()
        assert self.value is not None
        if self.fn == "startswith":
            return v.startswith(self.value)
        return self.value in v

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.fn, "args": [self.arg.to_dict()]}
        if self.value is not None:
            out["value"] = self.value
        return out

    def __repr__(self) -> str:
        inside = "" if self.value is None else repr(self.value)
        return f"{self.arg!r}.{self.fn}({inside})"


@dataclass(frozen=True, eq=False, repr=False)
class Coalesce(Expr):
    """``coalesce(a, b, ...)``: the first argument that is not null (null if all are)."""

    args: tuple[Expr, ...]

    def evaluate(self, event: Any, ctx: Context | None) -> Any:
        for arg in self.args:
            v = arg.evaluate(event, ctx)
            if v is not None:
                return v
        return None

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def to_dict(self) -> dict[str, Any]:
        return {"op": "coalesce", "args": [a.to_dict() for a in self.args]}

    def __repr__(self) -> str:
        return f"coalesce({', '.join(_bare(a) for a in self.args)})"


# ------------------------------------------------------------ public builders
def col(name: str) -> Expr:
    """A field of the current event.

    >>> col("amount") * 2 > 10
    ((col('amount') * lit(2)) > 10)
    """
    if not isinstance(name, str) or not name:
        raise MalformedPatternError(f"col() needs a field name, got {name!r}")
    return Col(name)


def lit(value: Any) -> Expr:
    """A literal (numbers, strings, booleans, None); expressions pass through.  A
    ``datetime`` or ``date`` is epoch milliseconds (one without a zone is UTC, a date
    its midnight UTC), a ``timedelta`` milliseconds, both to the millisecond.

    >>> from datetime import datetime, timedelta
    >>> lit(datetime(2024, 3, 1)).evaluate({}, None), lit(timedelta(seconds=2)).evaluate({}, None)
    (1709251200000, 2000)
    """
    if isinstance(value, Expr):
        return value
    timed = _time_literal(value)
    if timed is not None:
        return timed
    _check_scalar(value)
    if isinstance(value, float) and math.isnan(value):
        return Lit(None)  # NaN is SQL's null here, as in the data
    return Lit(value)


def event_time() -> Expr:
    """The time the engine gave the current event, as epoch milliseconds: the ``time=``
    field or function of :func:`cep.match` (in milliseconds whatever ``time_unit`` the
    field has), the timestamp of ``Matcher.process``, the runtime's event time.  Compare
    it with ``datetime`` literals, subtract to a duration, take its ``.hour()``.

    >>> from datetime import datetime
    >>> from cep import Pattern, match
    >>> rows = [{"ts": datetime(2024, 2, 29, 23, 0)}, {"ts": datetime(2024, 3, 1, 2, 0)}]
    >>> p = Pattern.begin("a").where((event_time() >= datetime(2024, 3, 1))
    ...                              & (event_time().hour() < 6))
    >>> [m["a"][0]["ts"].isoformat() for m in match(rows, p, time="ts")]
    ['2024-03-01T02:00:00']
    """
    return EventTime()


def coalesce(*args: Any) -> Expr:
    """The first of ``args`` that is not null, as SQL's COALESCE (null if all are); the
    arguments must be of one type (numbers, text or conditions).  Plain values are
    literals.

    >>> e = coalesce(col("nickname"), col("name"), "unknown")
    >>> e, e.evaluate({"nickname": None, "name": "Ada"}, None)
    (coalesce(col('nickname'), col('name'), 'unknown'), 'Ada')
    """
    if not args:
        raise MalformedPatternError("coalesce() needs at least one argument")
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        raise MalformedPatternError(
            "coalesce() takes its arguments one by one: coalesce(a, b), not coalesce([a, b])")
    return Coalesce(tuple(lit(a) for a in args))


def first(stage: str, field: str) -> Expr:
    """``field`` of the first event ``stage`` took in this partial match."""
    return StageRef("first", _name(stage), _name(field))


def last(stage: str, field: str) -> Expr:
    """``field`` of the last event ``stage`` took (before the current event)."""
    return StageRef("last", _name(stage), _name(field))


def prev(field: str) -> Expr:
    """``field`` of the previously taken event, whatever its stage."""
    return StageRef("prev", None, _name(field))


def count(stage: str) -> Expr:
    """How many events ``stage`` has taken so far in this partial match."""
    return Aggregate("count", _name(stage), None)


def sum_(stage: str, field: str) -> Expr:
    """The sum of ``field`` over the events ``stage`` has taken so far (0 before any;
    ``cep.sum``).  A loop whose running total must stay at or below 10:

    >>> from cep import Pattern, match
    >>> p = Pattern.begin("a").where(sum_("a", "v") + col("v") <= 10).times(3).consecutive()
    >>> [m["a"] for m in match([{"v": 2}, {"v": 3}, {"v": 4}, {"v": 9}], p)]
    [[{'v': 2}, {'v': 3}, {'v': 4}]]
    """
    return Aggregate("sum", _name(stage), _name(field))


def avg(stage: str, field: str) -> Expr:
    """The mean of ``field`` over the events ``stage`` has taken so far (null before any):
    here a big event more than five times the small ones' average.

    >>> from cep import Pattern, match
    >>> rows = [{"v": 2}, {"v": 3}, {"v": 20}]
    >>> p = (Pattern.begin("a").where(col("v") < 10).one_or_more().consecutive()
    ...      .next("b").where(col("v") > 5 * avg("a", "v")))
    >>> [[e["v"] for e in m.events()] for m in match(rows, p)]
    [[2, 3, 20], [3, 20]]
    """
    return Aggregate("avg", _name(stage), _name(field))


def min_(stage: str, field: str) -> Expr:
    """The least ``field`` among the events ``stage`` has taken so far (null before any;
    ``cep.min``): here a big event more than eight times the smallest before it.

    >>> from cep import Pattern, match
    >>> rows = [{"v": 2}, {"v": 3}, {"v": 20}]
    >>> p = (Pattern.begin("a").where(col("v") < 10).one_or_more().consecutive()
    ...      .next("b").where(col("v") > 8 * min_("a", "v")))
    >>> [[e["v"] for e in m.events()] for m in match(rows, p)]
    [[2, 3, 20]]
    """
    return Aggregate("min", _name(stage), _name(field))


def max_(stage: str, field: str) -> Expr:
    """The greatest ``field`` among the events ``stage`` has taken so far (null before any;
    ``cep.max``): here a big event more than four times the largest before it.

    >>> from cep import Pattern, match
    >>> rows = [{"v": 2}, {"v": 3}, {"v": 20}]
    >>> p = (Pattern.begin("a").where(col("v") < 10).one_or_more().consecutive()
    ...      .next("b").where(col("v") > 4 * max_("a", "v")))
    >>> [[e["v"] for e in m.events()] for m in match(rows, p)]
    [[2, 3, 20], [3, 20]]
    """
    return Aggregate("max", _name(stage), _name(field))


# -------------------------------------------------------------------- helpers
def field_of(event: Any, name: str) -> Any:
    """Read a field from a mapping or an object."""
    if type(event) is dict:  # the common case, without the ABC check
        try:
            return event[name]
        except KeyError:
            raise KeyError(f"event has no field {name!r}") from None
    if isinstance(event, Mapping):
        if name not in event:
            raise KeyError(f"event has no field {name!r}")
        return event[name]
    try:
        return getattr(event, name)
    except AttributeError:
        raise KeyError(f"event has no field {name!r}") from None


def value_of(event: Any, name: str) -> Any:
    """A field as a condition reads it: an event without the field holds null there (as
    a table row does when its column is null), so events of several shapes can share a
    stream.

    >>> value_of({"v": 1}, "v"), value_of({"v": 1}, "w")
    (1, None)
    """
    if type(event) is dict:
        return event.get(name)
    try:
        return field_of(event, name)
    except KeyError:
        return None


def _previous_event(ctx: Any) -> Any:
    getter = getattr(ctx, "previous_event", None)
    return getter() if getter is not None else None


def _null(v: Any) -> Any:
    """A field's value as expressions see it: None for null (None, NaN, NA, NaT), epoch
    milliseconds for a datetime or date, milliseconds for a duration, a float for a Decimal."""
    kind = type(v)
    if kind is int or kind is str or kind is bool:
        return v
    if kind is float:
        return None if v != v else v
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    name = kind.__name__
    if name in ("NaTType", "NAType"):
        return None
    if isinstance(v, (date, timedelta)) or name in ("datetime64", "timedelta64"):
        return time_value_millis(v)
    if hasattr(v, "item") and type(v).__module__ == "numpy":
        return _null(v.item())
    if isinstance(v, Decimal):  # a number, as the numba engine reads it (float64)
        return _null(float(v))
    return v


def _numeric(v: Any, where: Expr) -> None:
    if isinstance(v, (str, bool)) or not isinstance(v, (int, float)):
        raise TypeError(f"{where!r}: arithmetic needs numbers, got {v!r}")


def _kind_of(v: Any) -> str:
    """What a value is to a condition, as the numba engine types columns: text, true/false
    or a number (times and everything else compared as Python compares them).

    >>> _kind_of(True), _kind_of(1), _kind_of("1")
    ('boolean', 'numeric', 'string')
    """
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool) or type(v).__name__ in ("bool", "bool_"):  # numpy's too
        return "boolean"
    return "numeric"


def _truth(v: Any, where: Expr) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    raise TypeError(f"{where!r} is not a condition (it gives {v!r}, not true/false)")


def _bare(e: Expr) -> str:
    if isinstance(e, TimeLit):
        return e.source()
    return repr(e.value) if isinstance(e, Lit) else repr(e)


def _text_argument(fn: str, text: Any) -> str:
    if not isinstance(text, str):
        raise MalformedPatternError(
            f"{fn}() needs a string to look for, got {type(text).__name__} {text!r}")
    return text


def _name(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise MalformedPatternError(f"expected a stage or field name, got {v!r}")
    return v


def _check_scalar(v: Any) -> None:
    if v is not None and not isinstance(v, (bool, int, float, str)):
        raise MalformedPatternError(
            f"literals must be numbers, strings, booleans or None, got {type(v).__name__} {v!r}"
        )


def _as_expr(o: Any) -> Expr:
    if isinstance(o, Expr):
        return o
    if isinstance(o, bool):
        return Lit(o)
    raise MalformedPatternError(f"cannot combine an expression with {o!r} using & or |")


def _from_dict(d: Any, path: str) -> Expr:
    if not isinstance(d, dict) or "op" not in d:
        raise MalformedPatternError(f"expression JSON at {path}: expected an object with 'op'")
    op = d["op"]
    args = d.get("args", [])
    if not isinstance(args, list):
        raise MalformedPatternError(f"expression JSON at {path}: 'args' must be a list")
    sub = [_from_dict(a, f"{path}.args[{i}]") for i, a in enumerate(args)]

    def need(n: int) -> None:
        if len(sub) != n:
            raise MalformedPatternError(f"expression JSON at {path}: {op!r} takes {n} args")

    try:
        if op == "col":
            return col(d["name"])
        if op == "lit":
            if isinstance(d["value"], dict):
                return _time_literal_from_json(d["value"], path)
            return lit(d["value"])
        if op == "event_time":
            return EventTime()
        if op in ("first", "last"):
            return StageRef(op, _name(d["stage"]), _name(d["field"]))
        if op == "prev":
            return prev(d["field"])
        if op == "count":
            return count(d["stage"])
        if op in AGGREGATES:
            return Aggregate(op, _name(d["stage"]), _name(d["field"]))
        if op in ARITH:
            need(2)
            return Arith(op, sub[0], sub[1])
        if op in COMPARE:
            need(2)
            return Compare(op, sub[0], sub[1])
        if op in ("&", "|"):
            need(2)
            return BoolOp(op, sub[0], sub[1])
        if op == "~":
            need(1)
            return Negate(sub[0])
        if op in MATH:
            need(1)
            return Math(op, sub[0])
        if op == "is_null":
            need(1)
            return IsNull(sub[0])
        if op == "lower":
            need(1)
            return Text("lower", sub[0])
        if op in TEXT:
            need(1)
            return Text(op, sub[0], _text_argument(op, d["value"]))
        if op == "coalesce":
            if not sub:
                raise MalformedPatternError(f"expression JSON at {path}: 'coalesce' needs args")
            return Coalesce(tuple(sub))
        if op == "isin":
            need(1)
            if not isinstance(d["values"], list):
                raise MalformedPatternError(f"expression JSON at {path}: 'values' must be a list")
            return sub[0].isin(d["values"])
    except KeyError as err:
        raise MalformedPatternError(f"expression JSON at {path}: {op!r} needs {err}") from None
    raise MalformedPatternError(f"expression JSON at {path}: unknown op {op!r}")


# -------------------------------------------------------------- type checking
NUMERIC, STRING, BOOLEAN = "numeric", "string", "boolean"


def fields_read(e: Expr) -> list[str]:
    """The event fields ``e`` reads (columns, and the fields of stage references and
    aggregates), each once, in order.

    >>> fields_read((last("b", "amount") - first("a", "amount")) / col("fee"))
    ['amount', 'fee']
    """
    out: list[str] = []
    for node in e.walk():
        name = node.name if isinstance(node, Col) else getattr(node, "field", None)
        if isinstance(name, str) and name not in out:
            out.append(name)
    return out


def literal_type(value: Any) -> str | None:
    """The type of a literal value (None for null).

    >>> literal_type(5), literal_type("x"), literal_type(True), literal_type(None)
    ('numeric', 'string', 'boolean', None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return BOOLEAN
    return STRING if isinstance(value, str) else NUMERIC


def infer_type(
    e: Expr, schema: Mapping[str, str], stage: str, visible: Sequence[str]
) -> str | None:
    """The type of ``e`` under ``schema`` (None = null literal); raise naming ``stage``.

    ``visible`` are the stages the expression may reference (the pattern's).
    """
    where = f"stage {stage!r}: {e!r}"

    def column(name: str) -> str:
        if name not in schema:
            raise MalformedPatternError(
                f"stage {stage!r}: unknown column {name!r} (columns: {sorted(schema)})"
            )
        return schema[name]

    def stage_ok(name: str) -> None:
        if name not in visible:
            raise MalformedPatternError(
                f"stage {stage!r}: {e!r} refers to stage {name!r}, which the pattern does "
                f"not have (its stages: {list(visible)})"
            )

    if isinstance(e, Col):
        return column(e.name)
    if isinstance(e, Lit):
        return literal_type(e.value)
    if isinstance(e, StageRef):
        if e.stage is not None:
            stage_ok(e.stage)
        return column(e.field)
    if isinstance(e, Aggregate):
        stage_ok(e.stage)
        if e.field is not None and column(e.field) != NUMERIC and e.func in ("sum", "avg"):
            raise MalformedPatternError(f"{where}: {e.func} needs a numeric column")
        if e.field is not None and column(e.field) == STRING:
            raise MalformedPatternError(f"{where}: {e.func} over a string column")
        return NUMERIC
    if isinstance(e, (Arith, Math)):
        for c in e.children():
            t = infer_type(c, schema, stage, visible)
            if t not in (NUMERIC, None):
                raise MalformedPatternError(f"{where}: arithmetic needs numbers, {c!r} is {t}")
        return NUMERIC
    if isinstance(e, Compare):
        lt = infer_type(e.left, schema, stage, visible)
        rt = infer_type(e.right, schema, stage, visible)
        if lt is not None and rt is not None and lt != rt:
            raise MalformedPatternError(f"{where}: cannot compare {lt} with {rt}")
        if STRING in (lt, rt) and e.op not in ("==", "!="):
            raise MalformedPatternError(f"{where}: strings compare by == and != only")
        return BOOLEAN
    if isinstance(e, (BoolOp, Negate)):
        for c in e.children():
            t = infer_type(c, schema, stage, visible)
            if t not in (BOOLEAN, None):
                raise MalformedPatternError(f"{where}: {c!r} is {t}, not a condition")
        return BOOLEAN
    if isinstance(e, IsIn):
        t = infer_type(e.arg, schema, stage, visible)
        for v in e.values:
            vt = literal_type(v)
            if t is not None and vt is not None and vt != t:
                raise MalformedPatternError(f"{where}: {v!r} is {vt}, the value is {t}")
        return BOOLEAN
    if isinstance(e, IsNull):
        infer_type(e.arg, schema, stage, visible)
        return BOOLEAN
    if isinstance(e, EventTime):
        return NUMERIC
    if isinstance(e, Text):
        t = infer_type(e.arg, schema, stage, visible)
        if t not in (STRING, None):
            raise MalformedPatternError(f"{where}: {e.fn}() needs text, {e.arg!r} is {t}")
        return STRING if e.fn == "lower" else BOOLEAN
    if isinstance(e, Coalesce):
        kinds = [infer_type(c, schema, stage, visible) for c in e.args]
        known = list(dict.fromkeys(k for k in kinds if k is not None))
        if len(known) > 1:
            raise MalformedPatternError(
                f"{where}: coalesce() needs arguments of one type, not {' and '.join(known)}")
        return known[0] if known else None
    raise MalformedPatternError(f"{where}: unknown expression node {type(e).__name__}")
