"""The pattern DSL: an immutable, fluent builder with FlinkCEP's names and rules.

>>> from datetime import timedelta
>>> p = (Pattern.begin("small", skip=SkipStrategy.skip_past_last_event())
...         .where(lambda e: e["amount"] < 5).times_or_more(3).consecutive()
...      .next("big").where(lambda e: e["amount"] > 500)
...      .within(timedelta(minutes=10)))
>>> [s.name for s in p.stages]
['small', 'big']

Every builder call returns a new Pattern; the receiver is never changed.  A
call applies to the *last* stage, as in FlinkCEP where each call configures
the pattern object it is called on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import Enum
from typing import Any

from cep.conditions import TRUE, And, Condition, Or, Subtype, as_condition, callable_name
from cep.durations import to_millis
from cep.errors import MalformedPatternError
from cep.skip import SkipStrategy

GROUP_NAME = "GroupPattern"


class Consuming(Enum):
    """How a stage relates to the one before it (FlinkCEP's ConsumingStrategy)."""

    STRICT = "next"
    SKIP_TILL_NEXT = "followed_by"
    SKIP_TILL_ANY = "followed_by_any"
    NOT_FOLLOW = "not_followed_by"
    NOT_NEXT = "not_next"

    @property
    def negated(self) -> bool:
        """Whether the stage is a NOT stage (``not_next`` / ``not_followed_by``).

        >>> Consuming.NOT_NEXT.negated, Consuming.STRICT.negated
        (True, False)
        """
        return self in (Consuming.NOT_FOLLOW, Consuming.NOT_NEXT)


class Kind(Enum):
    """The quantifier's shape."""

    SINGLE = "single"
    LOOPING = "looping"
    TIMES = "times"


class WithinType(Enum):
    """What ``within`` measures: first to last event, or each event to the next."""

    FIRST_AND_LAST = "FIRST_AND_LAST"
    PREVIOUS_AND_CURRENT = "PREVIOUS_AND_CURRENT"


@dataclass(frozen=True)
class Times:
    """How many events a quantified stage takes, and the optional gap limit between them."""

    low: int
    high: int | None  # None = unbounded (looping)
    window: int | None = None


@dataclass(frozen=True, eq=False)
class Stage:
    """One stage of a pattern: plain data, compared by value."""

    name: str
    consuming: Consuming
    condition: Condition | None = None
    until: Condition | None = None
    kind: Kind = Kind.SINGLE
    times: Times | None = None
    optional: bool = False
    greedy: bool = False
    inner: Consuming = Consuming.SKIP_TILL_NEXT
    within: tuple[tuple[WithinType, int], ...] = ()
    group: Pattern | None = None

    @property
    def is_group(self) -> bool:
        """Whether the stage is a group pattern (``begin``/``next``/... given a Pattern).

        >>> group = Pattern.begin(Pattern.begin("a").next("b")).times(2).next("c")
        >>> [s.is_group for s in group.stages]
        [True, False]
        """
        return self.group is not None

    def window(self, kind: WithinType) -> int | None:
        """The stage's ``within`` of that kind in milliseconds, or None if it has none.

        >>> stage = Pattern.begin("a").next("b").within(5000, WithinType.PREVIOUS_AND_CURRENT).stages[-1]
        >>> stage.window(WithinType.PREVIOUS_AND_CURRENT), stage.window(WithinType.FIRST_AND_LAST)
        (5000, None)
        """
        for k, ms in self.within:
            if k is kind:
                return ms
        return None

    @property
    def take_condition(self) -> Condition:
        """The condition an event must meet to be taken: ``true`` for a stage without ``where``.

        >>> Pattern.begin("a").stages[0].take_condition
        true
        """
        return self.condition if self.condition is not None else TRUE

    def key(self) -> tuple[Any, ...]:
        """Structural identity (conditions by structure, callables by identity)."""
        return (
            self.name,
            self.consuming,
            None if self.condition is None else self.condition.key(),
            None if self.until is None else self.until.key(),
            self.kind,
            self.times,
            self.optional,
            self.greedy,
            self.inner,
            self.within,
            None if self.group is None else self.group.key(),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stage) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


@dataclass(frozen=True, eq=False)
class Pattern:
    """An immutable pattern: a sequence of stages and an after-match skip strategy.

    Build one with :meth:`begin`, then add stages (:meth:`next`, :meth:`followed_by`, ...),
    conditions (:meth:`where`) and quantifiers (:meth:`times`, ...); every call returns a
    new Pattern.  Here two small amounts right before a big one:

    >>> from cep import col, match
    >>> p = (Pattern.begin("small").where(col("amount") < 5).times(2)
    ...      .next("big").where(col("amount") > 500))
    >>> rows = [{"amount": 1}, {"amount": 3}, {"amount": 900}]
    >>> [[e["amount"] for e in m.events()] for m in match(rows, p)]
    [[1, 3, 900]]
    """

    stages: tuple[Stage, ...]
    skip: SkipStrategy = field(default_factory=SkipStrategy.no_skip)

    # ------------------------------------------------------------------ stages
    @staticmethod
    def begin(name_or_group: str | Pattern, skip: SkipStrategy | None = None) -> Pattern:
        """Start a pattern with a stage name, or with a group pattern.

        >>> Pattern.begin("start").where(lambda e: e.name == "c")  # doctest: +ELLIPSIS
        Pattern.begin('start').where(...)
        """
        strategy = skip if skip is not None else SkipStrategy.no_skip()
        if not isinstance(strategy, SkipStrategy):
            raise MalformedPatternError(f"skip must be a SkipStrategy, got {strategy!r}")
        return Pattern((_new_stage(name_or_group, Consuming.STRICT),), strategy)

    def next(self, name_or_group: str | Pattern) -> Pattern:
        """Strict contiguity: the next stage must take the very next event."""
        return self._append(name_or_group, Consuming.STRICT)

    def followed_by(self, name_or_group: str | Pattern) -> Pattern:
        """Relaxed contiguity: non-matching events in between are skipped."""
        return self._append(name_or_group, Consuming.SKIP_TILL_NEXT)

    def followed_by_any(self, name_or_group: str | Pattern) -> Pattern:
        """Non-deterministic relaxed contiguity: matching events may be skipped too."""
        return self._append(name_or_group, Consuming.SKIP_TILL_ANY)

    def not_next(self, name: str) -> Pattern:
        """The event right after the previous stage must not match this stage."""
        self._check_negation_allowed(name)
        return self._append(name, Consuming.NOT_NEXT)

    def not_followed_by(self, name: str) -> Pattern:
        """No event matching this stage may occur between the previous and the next stage."""
        self._check_negation_allowed(name)
        return self._append(name, Consuming.NOT_FOLLOW)

    # -------------------------------------------------------------- conditions
    def where(self, condition: Any) -> Pattern:
        """Add a condition, AND-ed with the stage's existing one."""
        last = self._last_plain("where")
        cond = as_condition(condition, stage=last.name)
        new = cond if last.condition is None else And(last.condition, cond)
        return self._with_last(condition=new)

    def or_(self, condition: Any) -> Pattern:
        """Add a condition, OR-ed with the stage's existing one."""
        last = self._last_plain("or_")
        cond = as_condition(condition, stage=last.name)
        new = cond if last.condition is None else Or(last.condition, cond)
        return self._with_last(condition=new)

    def subtype(self, cls: type) -> Pattern:
        """Only events that are instances of ``cls`` can be taken by this stage."""
        last = self._last_plain("subtype")
        if not isinstance(cls, type):
            raise MalformedPatternError(f"stage {last.name!r}: subtype() needs a class, got {cls!r}")
        new = Subtype(cls) if last.condition is None else And(last.condition, Subtype(cls))
        return self._with_last(condition=new)

    def until(self, condition: Any) -> Pattern:
        """Stop a looping stage at the first event satisfying ``condition`` (not taken)."""
        last = self.stages[-1]
        if last.until is not None:
            raise MalformedPatternError(
                f"stage {last.name!r}: only one until condition can be applied"
            )
        if last.kind is not Kind.LOOPING:
            raise MalformedPatternError(
                f"stage {last.name!r}: until() is only applicable to looping stages "
                "(one_or_more / times_or_more)"
            )
        return self._with_last(until=as_condition(condition, stage=last.name))

    # ------------------------------------------------------------- quantifiers
    def one_or_more(self, window: timedelta | int | None = None) -> Pattern:
        """The stage takes one or more events (FlinkCEP's ``oneOrMore``).

        ``window``: FlinkCEP's ``windowTime``, as explained under :meth:`times`.

        >>> Pattern.begin("a").one_or_more().stages[0].times
        Times(low=1, high=None, window=None)
        """
        self._check_quantifiable("one_or_more")
        return self._quantify(Kind.LOOPING, Times(1, None, self._loop_window(window)), False)

    def times(
        self, n: int, m: int | None = None, window: timedelta | int | None = None
    ) -> Pattern:
        """Exactly ``n`` events, or between ``n`` and ``m`` (``n`` may be 0: optional).

        ``window`` is FlinkCEP's ``windowTime`` and behaves exactly as there: it
        is attached to the stage's NFA states named ``stage:i`` (``explain()``
        lists them as gap windows), so it bounds the time from the previous event
        to each event *those* states take - for ``times(3)`` the first two events
        of the stage, for ``one_or_more`` the first - not every gap in the loop.
        To bound the whole sequence, use the pattern's ``within``.

        >>> Pattern.begin("a").times(2, 4).stages[0].times
        Times(low=2, high=4, window=None)
        """
        last = self._check_quantifiable("times")
        optional = False
        if m is None:
            _check_count(last.name, n, "times(n)")
            if n <= 0:
                raise MalformedPatternError(
                    f"stage {last.name!r}: times(n) needs a positive number, got {n}"
                )
            low, high = n, n
        else:
            _check_count(last.name, n, "times(n, m)")
            _check_count(last.name, m, "times(n, m)")
            if n < 0:
                raise MalformedPatternError(
                    f"stage {last.name!r}: times(n, m) needs n >= 0, got {n}"
                )
            if n == 0:
                optional, n = True, 1
            if m < n:
                raise MalformedPatternError(
                    f"stage {last.name!r}: times(n, m) needs m >= n (and m >= 1), got m={m}"
                )
            low, high = n, m
        return self._quantify(Kind.TIMES, Times(low, high, self._loop_window(window)), optional)

    def times_or_more(self, n: int, window: timedelta | int | None = None) -> Pattern:
        """At least ``n`` events (FlinkCEP's ``timesOrMore``).

        ``window``: FlinkCEP's ``windowTime``, as explained under :meth:`times`.

        >>> Pattern.begin("a").times_or_more(3).stages[0].times
        Times(low=3, high=None, window=None)
        """
        last = self._check_quantifiable("times_or_more")
        _check_count(last.name, n, "times_or_more(n)")
        if n <= 0:
            raise MalformedPatternError(
                f"stage {last.name!r}: times_or_more(n) needs a positive number, got {n}"
            )
        return self._quantify(Kind.LOOPING, Times(n, None, self._loop_window(window)), False)

    def optional(self) -> Pattern:
        """The stage may take no event at all."""
        last = self.stages[-1]
        if len(self.stages) > 1 and self.stages[-2].greedy:
            raise MalformedPatternError(
                f"stage {last.name!r}: an optional stage cannot be preceded by a greedy stage "
                f"({self.stages[-2].name!r})"
            )
        if last.optional:
            raise MalformedPatternError(f"stage {last.name!r}: optional() was already applied")
        if last.consuming.negated:
            raise MalformedPatternError(
                f"stage {last.name!r}: a {last.consuming.value} (NOT) stage cannot be optional"
            )
        return self._with_last(optional=True)

    def greedy(self) -> Pattern:
        """A quantified stage takes as many events as it can."""
        last = self.stages[-1]
        self._check_not_negated("greedy")
        if last.is_group:
            raise MalformedPatternError(
                f"stage {last.name!r}: greedy() is not applicable to a group pattern"
            )
        if last.inner is Consuming.SKIP_TILL_ANY:
            raise MalformedPatternError(
                f"stage {last.name!r}: greedy() is not applicable together with "
                "allow_combinations()"
            )
        if last.kind is Kind.SINGLE:
            raise MalformedPatternError(
                f"stage {last.name!r}: greedy() is not applicable to a single (non-quantified) "
                "stage; apply one_or_more(), times() or times_or_more() first"
            )
        return self._with_last(greedy=True)

    def consecutive(self) -> Pattern:
        """Strict contiguity between the events a quantified stage takes."""
        last = self.stages[-1]
        if last.kind is Kind.SINGLE:
            raise MalformedPatternError(
                f"stage {last.name!r}: consecutive() is only applicable to a quantified stage "
                "(one_or_more, times, times_or_more)"
            )
        if last.inner is Consuming.SKIP_TILL_ANY:
            raise MalformedPatternError(
                f"stage {last.name!r}: you can apply either allow_combinations() or "
                "consecutive(), not both"
            )
        if last.inner is Consuming.STRICT:
            raise MalformedPatternError(f"stage {last.name!r}: consecutive() was already applied")
        return self._with_last(inner=Consuming.STRICT)

    def allow_combinations(self) -> Pattern:
        """Non-deterministic relaxed contiguity between the events of a quantified stage."""
        last = self.stages[-1]
        if last.kind is Kind.SINGLE:
            raise MalformedPatternError(
                f"stage {last.name!r}: allow_combinations() is only applicable to a quantified "
                "stage (one_or_more, times, times_or_more)"
            )
        if last.inner is Consuming.STRICT:
            raise MalformedPatternError(
                f"stage {last.name!r}: you can apply either allow_combinations() or "
                "consecutive(), not both"
            )
        if last.inner is Consuming.SKIP_TILL_ANY:
            raise MalformedPatternError(
                f"stage {last.name!r}: allow_combinations() was already applied"
            )
        return self._with_last(inner=Consuming.SKIP_TILL_ANY)

    # -------------------------------------------------------------------- time
    def within(
        self,
        duration: timedelta | int,
        within_type: WithinType = WithinType.FIRST_AND_LAST,
    ) -> Pattern:
        """Limit the time a match may span (first to last event, or between events)."""
        last = self.stages[-1]
        if not isinstance(within_type, WithinType):
            raise MalformedPatternError(
                f"stage {last.name!r}: within_type must be a WithinType, got {within_type!r}"
            )
        ms = to_millis(duration, f"stage {last.name!r}: within()")
        if ms <= 0:
            # FlinkCEP takes a window of 0 as "no window at all", silently: refuse it
            raise MalformedPatternError(
                f"stage {last.name!r}: within({duration!r}) needs a duration of at least 1 ms "
                "(a window of 0 would mean no window at all; leave within() out for that)")
        rest = tuple((k, v) for k, v in last.within if k is not within_type)
        return self._with_last(within=rest + ((within_type, ms),))

    # ---------------------------------------------------------------- queries
    def key(self) -> tuple[Any, ...]:
        """Structural identity: equal patterns (``==``) have equal keys, and hash by them.

        >>> Pattern.begin("a").next("b").key() == Pattern.begin("a").next("b").key()
        True
        """
        return (tuple(s.key() for s in self.stages), self.skip)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    @property
    def name(self) -> str:
        """The name of the last stage."""
        return self.stages[-1].name

    def iter_stages(self) -> Iterator[Stage]:
        """Every stage, group members included, in pattern order."""
        for stage in self.stages:
            if stage.group is not None:
                yield from stage.group.iter_stages()
            else:
                yield stage

    def stage_names(self) -> list[str]:
        """The names of :meth:`iter_stages`: every stage, group members and NOT stages included.

        >>> Pattern.begin("a").not_next("x").followed_by("b").stage_names()
        ['a', 'x', 'b']
        """
        return [s.name for s in self.iter_stages()]

    def explain(self) -> Explanation:
        """The compiled NFA as text: states and their TAKE / IGNORE / PROCEED edges.

        >>> print(Pattern.begin("a").followed_by("b").explain())  # doctest: +ELLIPSIS
        NFA ...
        """
        from cep.nfa.compiler import compile_pattern
        from cep.nfa.explain import describe

        return Explanation(describe(compile_pattern(self)))

    def to_dot(self) -> str:
        """The compiled NFA as Graphviz DOT text (render with ``dot -Tsvg``): states, and
        TAKE / IGNORE / PROCEED edges labelled with their conditions.

        >>> print(Pattern.begin("a").to_dot())  # doctest: +ELLIPSIS
        digraph NFA {
        ...
          "a" [shape=circle, label="a"];
          "a" -> "$endState$" [label="TAKE\\ntrue", style=solid];
        ...
        """
        from cep.nfa.compiler import compile_pattern
        from cep.nfa.explain import to_dot

        return to_dot(compile_pattern(self))

    def to_svg(self, renderer: str = "auto") -> str:
        """The compiled NFA as an SVG picture: states by kind, TAKE / IGNORE / PROCEED edges
        labelled with their conditions.  Drawn by Graphviz's ``dot`` when it is on PATH, else
        by matplotlib (``pip install 'cep[viz]'``); ``renderer`` ("auto", "graphviz" or
        "matplotlib") chooses.  The same pattern gives the same SVG.

        >>> Pattern.begin("a").to_svg().startswith("<?xml")
        True
        """
        from cep.nfa.compiler import compile_pattern
        from cep.nfa.render import render

        return render(compile_pattern(self), "svg", renderer).decode("utf-8")

    def to_png(self, renderer: str = "auto", dpi: float = 120) -> bytes:
        """The compiled NFA as a PNG picture (see :meth:`to_svg`); ``dpi`` sets the
        resolution of matplotlib's drawing.

        >>> Pattern.begin("a").to_png()[:4]
        b'\\x89PNG'
        """
        from cep.nfa.compiler import compile_pattern
        from cep.nfa.render import render

        return render(compile_pattern(self), "png", renderer, dpi)

    def __repr__(self) -> str:
        return _render(self)

    def to_json(self) -> str:
        """The pattern as JSON (all conditions must be expressions); see :meth:`from_json`."""
        from cep.serialize import pattern_to_json

        return pattern_to_json(self)

    @staticmethod
    def from_json(text: str) -> Pattern:
        """Load a pattern saved with :meth:`to_json`; loading never runs code."""
        from cep.serialize import pattern_from_json

        return pattern_from_json(text)

    # FlinkCEP spellings ----------------------------------------------------
    followedBy = followed_by
    followedByAny = followed_by_any
    notNext = not_next
    notFollowedBy = not_followed_by
    oneOrMore = one_or_more
    timesOrMore = times_or_more
    allowCombinations = allow_combinations

    def or_where(self, condition: Any) -> Pattern:  # alias for readability in chains
        """The same as :meth:`or_`: OR a condition with the stage's existing one.

        >>> Pattern.begin("a").where(lambda e: e < 0).or_where(lambda e: e > 9)
        Pattern.begin('a').where((<lambda> | <lambda>))
        """
        return self.or_(condition)

    # -------------------------------------------------------------- internals
    def _append(self, name_or_group: str | Pattern, consuming: Consuming) -> Pattern:
        return Pattern(self.stages + (_new_stage(name_or_group, consuming),), self.skip)

    def _with_last(self, **changes: Any) -> Pattern:
        return Pattern(self.stages[:-1] + (replace(self.stages[-1], **changes),), self.skip)

    def _last_plain(self, what: str) -> Stage:
        last = self.stages[-1]
        if last.is_group:
            raise MalformedPatternError(
                f"{what}() is not applicable to a group pattern; "
                "put conditions on the stages inside the group"
            )
        return last

    def _check_not_negated(self, what: str) -> Stage:
        last = self.stages[-1]
        if last.consuming.negated:
            raise MalformedPatternError(
                f"stage {last.name!r}: {what}() is not applicable to a "
                f"{last.consuming.value} (NOT) stage"
            )
        return last

    def _check_quantifiable(self, what: str) -> Stage:
        last = self._check_not_negated(what)
        if last.kind is not Kind.SINGLE:
            raise MalformedPatternError(
                f"stage {last.name!r}: a quantifier was already applied "
                f"({last.kind.value}); {what}() cannot be added"
            )
        return last

    def _check_negation_allowed(self, name: str) -> None:
        last = self.stages[-1]
        if last.optional:
            raise MalformedPatternError(
                f"stage {name!r}: a NOT stage cannot follow the optional stage {last.name!r} "
                "(FlinkCEP does not support an optional path to a NOT condition; use two "
                "patterns, one with and one without the optional part)"
            )

    def _quantify(self, kind: Kind, times: Times, optional: bool) -> Pattern:
        # A quantifier replaces the stage's quantifier wholesale, as in FlinkCEP: an
        # optional() applied before it is dropped (apply optional() after the quantifier).
        return self._with_last(
            kind=kind, times=times, optional=optional, greedy=False, inner=Consuming.SKIP_TILL_NEXT
        )

    def _loop_window(self, window: timedelta | int | None) -> int | None:
        if window is None:
            return None
        ms = to_millis(window, f"stage {self.stages[-1].name!r}: loop window")
        if ms <= 0:
            raise MalformedPatternError(
                f"stage {self.stages[-1].name!r}: a loop window must be positive"
            )
        return ms


class Explanation(str):
    """Text that shows itself unquoted at the prompt (``pattern.explain()``)."""

    def __repr__(self) -> str:
        return str(self)


def _check_count(stage: str, value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedPatternError(f"stage {stage!r}: {what} needs whole numbers, got {value!r}")


def _new_stage(name_or_group: str | Pattern, consuming: Consuming) -> Stage:
    if isinstance(name_or_group, Pattern):
        if consuming.negated:
            raise MalformedPatternError("a NOT stage cannot be a group pattern")
        return Stage(name=GROUP_NAME, consuming=consuming, group=name_or_group)
    if not isinstance(name_or_group, str) or not name_or_group:
        raise MalformedPatternError(
            f"a stage needs a non-empty name or a group Pattern, got {name_or_group!r}"
        )
    if ":" in name_or_group:
        raise MalformedPatternError(
            f"stage {name_or_group!r}: ':' is reserved in stage names (internal state names use it)"
        )
    return Stage(name=name_or_group, consuming=consuming)


# ------------------------------------------------------------------- printing
def _render(pattern: Pattern, nested: bool = False) -> str:
    parts: list[str] = []
    for i, stage in enumerate(pattern.stages):
        target = _render(stage.group, nested=True) if stage.group is not None else repr(stage.name)
        if i == 0:
            skip = "" if pattern.skip.kind.value == "no_skip" or nested else f", skip={pattern.skip!r}"
            parts.append(f"Pattern.begin({target}{skip})")
        else:
            parts.append(f".{stage.consuming.value}({target})")
        parts.extend(_render_stage(stage))
    return "".join(parts)


def _render_stage(stage: Stage) -> list[str]:
    out: list[str] = []
    if stage.condition is not None:
        out.append(f".where({_cond_text(stage.condition)})")
    if stage.times is not None:
        t = stage.times
        win = "" if t.window is None else f", window={t.window}"
        if stage.kind is Kind.LOOPING:
            out.append(
                f".one_or_more({win[2:]})" if t.low == 1 else f".times_or_more({t.low}{win})"
            )
        elif t.low == t.high:
            out.append(f".times({t.low}{win})")
        else:
            out.append(f".times({t.low}, {t.high}{win})")
    if stage.until is not None:
        out.append(f".until({_cond_text(stage.until)})")
    if stage.optional:
        out.append(".optional()")
    if stage.greedy:
        out.append(".greedy()")
    if stage.inner is Consuming.STRICT:
        out.append(".consecutive()")
    elif stage.inner is Consuming.SKIP_TILL_ANY:
        out.append(".allow_combinations()")
    for kind, ms in stage.within:
        extra = "" if kind is WithinType.FIRST_AND_LAST else f", WithinType.{kind.value}"
        out.append(f".within({ms}{extra})")
    return out


def _cond_text(cond: Condition) -> str:
    from cep.conditions import Fn

    if isinstance(cond, Fn):
        return "..." if callable_name(cond.fn) == "<lambda>" else callable_name(cond.fn)
    return repr(cond)
