"""Conditions: what an event must satisfy to be taken by a stage.

A condition is a small tree of plain objects (``And``, ``Or``, ``Not``,
``Subtype``, ``Fn``), so compiled NFAs can show it and later engines can
inspect it.  Users rarely build these by hand: ``Pattern.where`` accepts

* a callable ``f(event) -> bool`` (FlinkCEP's ``SimpleCondition``),
* a callable ``f(event, ctx) -> bool`` (FlinkCEP's ``IterativeCondition``),
  where ``ctx.events("stage")`` lists what the partial match took for that
  stage and ``ctx.timestamp`` is the current event's timestamp,
* an object with a ``filter(event)`` or ``filter(event, ctx)`` method, so
  FlinkCEP condition classes port one to one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cep.errors import MalformedPatternError


class Context(Protocol):
    """What an iterative condition sees besides the event."""

    @property
    def timestamp(self) -> int:
        """The current event's timestamp (epoch milliseconds, or its position without a time).

        >>> from cep import Pattern, match
        >>> rows = [{"ts": 1000, "v": 1}, {"ts": 1500, "v": 2}, {"ts": 9000, "v": 2}]
        >>> p = (Pattern.begin("a").where(lambda e: e["v"] == 1).followed_by_any("b")
        ...      .where(lambda e, ctx: ctx.timestamp - ctx.events("a")[0]["ts"] < 1000))
        >>> [m["b"][0]["ts"] for m in match(rows, p, time="ts")]
        [1500]
        """
        ...

    def events(self, stage: str) -> Sequence[Any]:
        """The events this partial match has taken for ``stage`` so far, in take order
        (FlinkCEP's ``ctx.getEventsForPattern``); empty if it has taken none.

        >>> from cep import Pattern, match
        >>> p = (Pattern.begin("a").where(lambda e: e < 5).one_or_more().consecutive()
        ...      .next("b").where(lambda e, ctx: e > 2 * sum(ctx.events("a"))))
        >>> [dict(m) for m in match([3, 1, 9], p)]
        [{'a': [3, 1], 'b': [9]}, {'a': [1], 'b': [9]}]
        """
        ...


class Condition:
    """Base class of condition nodes; ``test(event, ctx)`` decides."""

    __slots__ = ()

    def test(self, event: Any, ctx: Context) -> bool:
        """Whether ``event`` satisfies the condition, given the partial match ``ctx``.

        >>> as_condition(lambda e: e > 5).test(7, None)
        True
        """
        raise NotImplementedError

    def key(self) -> tuple[Any, ...]:
        """A hashable structural identity: equal keys mean the same condition."""
        fields = getattr(self, "__dataclass_fields__", {})
        parts: list[Any] = [type(self).__name__]
        for name in fields:
            value = getattr(self, name)
            parts.append(value.key() if isinstance(value, Condition) else _identity(value))
        return tuple(parts)

    def __and__(self, other: Any) -> Condition:
        return And(self, as_condition(other))

    def __or__(self, other: Any) -> Condition:
        return Or(self, as_condition(other))

    def __invert__(self) -> Condition:
        return Not(self)


@dataclass(frozen=True, eq=False, repr=False)
class TrueCondition(Condition):
    """Accepts every event."""

    def test(self, event: Any, ctx: Context) -> bool:
        return True

    def __repr__(self) -> str:
        return "true"


TRUE = TrueCondition()


@dataclass(frozen=True, eq=False, repr=False)
class Fn(Condition):
    """A user callable; ``iterative`` says whether it takes the context too."""

    fn: Callable[..., Any]
    iterative: bool

    def test(self, event: Any, ctx: Context) -> bool:
        if self.iterative:
            return bool(self.fn(event, ctx))
        return bool(self.fn(event))

    def __repr__(self) -> str:
        return callable_name(self.fn)


@dataclass(frozen=True, eq=False, repr=False)
class And(Condition):
    """Both conditions hold (``c1 & c2``); the right one is not tried when the left fails.

    >>> (as_condition(lambda e: e > 1) & as_condition(lambda e: e < 5)).test(3, None)
    True
    """

    left: Condition
    right: Condition

    def test(self, event: Any, ctx: Context) -> bool:
        return self.left.test(event, ctx) and self.right.test(event, ctx)

    def __repr__(self) -> str:
        return f"({self.left!r} & {self.right!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Or(Condition):
    """Either condition holds (``c1 | c2``, what ``Pattern.or_where`` builds).

    >>> (as_condition(lambda e: e < 1) | as_condition(lambda e: e > 5)).test(3, None)
    False
    """

    left: Condition
    right: Condition

    def test(self, event: Any, ctx: Context) -> bool:
        return self.left.test(event, ctx) or self.right.test(event, ctx)

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Not(Condition):
    """The condition does not hold (``~c``).

    >>> (~as_condition(lambda e: e > 5)).test(3, None)
    True
    """

    inner: Condition

    def test(self, event: Any, ctx: Context) -> bool:
        return not self.inner.test(event, ctx)

    def __repr__(self) -> str:
        return f"~{self.inner!r}"


@dataclass(frozen=True, eq=False, repr=False)
class Subtype(Condition):
    """The event is an instance of ``cls`` (FlinkCEP's ``subtype``)."""

    cls: type

    def test(self, event: Any, ctx: Context) -> bool:
        return isinstance(event, self.cls)

    def __repr__(self) -> str:
        return f"subtype({self.cls.__name__})"


def condition_nodes(cond: Condition) -> Iterator[Condition]:
    """``cond`` and every condition it combines (``&``, ``|``, ``~``), depth first.

    >>> a, b = as_condition(lambda e: e > 1), as_condition(lambda e: e < 5)
    >>> len(list(condition_nodes(a & ~b)))
    4
    """
    yield cond
    if isinstance(cond, (And, Or)):
        yield from condition_nodes(cond.left)
        yield from condition_nodes(cond.right)
    elif isinstance(cond, Not):
        yield from condition_nodes(cond.inner)


def _identity(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value


def callable_name(fn: Any) -> str:
    """How a Python condition is named in reprs, pictures and messages: its qualified name.

    >>> callable_name(len), callable_name(lambda e: True)
    ('len', '<lambda>')
    """
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return type(fn).__name__
    return name


def _positional_arity(fn: Callable[..., Any]) -> tuple[int, int] | None:
    """(required, total) positional parameters of ``fn``; None if unknown or it takes *args."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    required = total = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            total += 1
            if p.default is p.empty:
                required += 1
    return required, total


def as_condition(cond: Any, *, stage: str | None = None) -> Condition:
    """Turn what a user passed to ``where``/``or_``/``until`` into a :class:`Condition`.

    >>> as_condition(lambda e: e["amount"] > 5)
    <lambda>
    """
    where = f"stage {stage!r}: " if stage else ""
    if isinstance(cond, Condition):
        return cond
    native = getattr(cond, "__cep_condition__", None)
    if native is not None:
        return native()
    if cond is None:
        raise MalformedPatternError(f"{where}the condition cannot be None")
    target = cond
    if not callable(cond) and callable(getattr(cond, "filter", None)):
        target = cond.filter
    if not callable(target):
        raise MalformedPatternError(
            f"{where}a condition must be a callable f(event) or f(event, ctx), "
            f"or an expression; got {type(cond).__name__}"
        )
    arity = _positional_arity(target)
    if arity is None:
        return Fn(target, iterative=False)
    required, total = arity
    # parameters with defaults (``lambda e, k=k: ...``) are not the context
    if required > 2 or total == 0:
        raise MalformedPatternError(
            f"{where}condition {callable_name(target)} takes {required} required positional "
            "arguments; expected f(event) or f(event, ctx)"
        )
    return Fn(target, iterative=required == 2)


class SimpleCondition:
    """Base class for porting FlinkCEP ``SimpleCondition`` subclasses: override ``filter``.

    >>> from cep import Pattern, match
    >>> class IsA(SimpleCondition):
    ...     def filter(self, value):
    ...         return value["name"] == "a"
    >>> [dict(m) for m in match([{"name": "b"}, {"name": "a"}], Pattern.begin("x").where(IsA()))]
    [{'x': [{'name': 'a'}]}]
    """

    def filter(self, value: Any) -> bool:
        """Whether ``value`` (the event) is taken; override it.

        >>> class Big(SimpleCondition):
        ...     def filter(self, value):
        ...         return value > 100
        >>> Big().filter(500)
        True
        """
        raise NotImplementedError


class IterativeCondition:
    """Base class for porting FlinkCEP ``IterativeCondition`` subclasses: override ``filter``.

    >>> from cep import Pattern, match
    >>> class AboveFirst(IterativeCondition):
    ...     def filter(self, value, ctx):
    ...         return value > ctx.events("a")[0]
    >>> p = Pattern.begin("a").next("b").where(AboveFirst())
    >>> [dict(m) for m in match([5, 3, 8], p)]
    [{'a': [3], 'b': [8]}]
    """

    def filter(self, value: Any, ctx: Context) -> bool:
        """Whether ``value`` (the event) is taken, given the partial match ``ctx``
        (see :class:`Context`); override it, as in the class's example."""
        raise NotImplementedError
