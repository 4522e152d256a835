"""Conditions as bytecode for the numba kernel, and the slots expressions read.

Every transition condition becomes a short postfix program over float64
values (strings as dictionary codes, null as NaN, truth as 1 / 0 / NaN for
unknown).  Stage references and aggregates read "slots": running values each
partial match carries (first/last/prev values, counts, sums, minima, maxima),
updated when it takes an event.  The kernel interprets both, so a pattern is
data to it and never needs compiling.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.conditions import And, Condition, Not, Or, TrueCondition, condition_nodes
from cep.errors import MalformedPatternError
from cep.expr import (
    BOOLEAN,
    MATH,
    NUMERIC,
    STRING,
    Aggregate,
    Arith,
    BoolOp,
    Coalesce,
    Col,
    Compare,
    EventTime,
    Expr,
    IsIn,
    IsNull,
    Lit,
    Math,
    Negate,
    StageRef,
    Text,
    infer_type,
    literal_type,
)
from cep.nfa import kernel as K
from cep.nfa.model import NFA
from cep.pattern import Pattern, Stage


class NotCompilable(Exception):
    """The pattern holds something the numba engine cannot run (the reason says what)."""


@dataclass(frozen=True)
class Derived:
    """A kernel column computed per batch rather than read: text functions of a string
    field (``fns`` applied in order, e.g. ``(("lower", None), ("startswith", "acme"))``),
    or, with no field, the time the engine gave each event.  Stage references read a
    derived column like any other (``last("a", "m").lower()`` is the ``last`` slot of
    ``col("m").lower()``).

    >>> Derived("m", (("lower", None), ("contains", "gift")))
    col('m').lower().contains('gift')
    >>> EVENT_TIME, EVENT_TIME.kind
    (event_time(), 'numeric')
    """

    field: str | None
    fns: tuple[tuple[str, str | None], ...] = ()

    @property
    def kind(self) -> str:
        """The type of the derived values."""
        if self.field is None:
            return NUMERIC
        return STRING if self.fns[-1][0] == "lower" else BOOLEAN

    def __repr__(self) -> str:
        if self.field is None:
            return "event_time()"
        return f"col({self.field!r})" + "".join(
            f".{fn}({'' if v is None else repr(v)})" for fn, v in self.fns)


#: the event time as a kernel column
EVENT_TIME = Derived(None)


def apply_text(fns: tuple[tuple[str, str | None], ...], value: Any) -> Any:
    """Text functions applied to one value as the reference engine does (null stays null).

    >>> apply_text((("lower", None), ("startswith", "ac")), "ACME")
    True
    """
    for fn, arg in fns:
        if value is None:
            return None
        if fn == "lower":
            value = value.lower()
        elif fn == "startswith":
            value = value.startswith(arg)
        else:
            value = arg in value
    return value


@dataclass
class Program:
    """A pattern's conditions as bytecode, plus the columns, constants and slots they use."""

    #: event fields, and :class:`Derived` columns, in kernel column order
    columns: list[str | Derived] = field(default_factory=list)
    constants: list[float | str] = field(default_factory=list)
    slots: list[tuple[Any, ...]] = field(default_factory=list)
    ops: list[tuple[int, int, int, int]] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    depth: int = 1

    def column(self, name: str | Derived) -> int:
        if name not in self.columns:
            self.columns.append(name)
        return self.columns.index(name)

    def fields(self) -> list[str]:
        """The event fields the kernel columns are read from (not the derived ones).

        >>> p = Program()
        >>> p.column(EVENT_TIME), p.column("v")
        (0, 1)
        >>> p.fields()
        ['v']
        """
        return [c for c in self.columns if isinstance(c, str)]

    def constant(self, value: float | str) -> int:
        self.constants.append(value)
        return len(self.constants) - 1

    def slot(self, spec: tuple[Any, ...]) -> int:
        if spec not in self.slots:
            self.slots.append(spec)
        return self.slots.index(spec)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        prog = np.array(self.ops or [(K.OP_TRUE, 0, 0, 0)], np.int64).reshape(-1, 4)
        return prog, np.array(self.starts, np.int64)

    def slot_tables(self, stages: list[str]) -> tuple[np.ndarray, ...]:
        kinds = {
            "prev": K.SL_PREV, "count": K.SL_COUNT, "first": K.SL_FIRST, "last": K.SL_LAST,
            "sum": K.SL_SUM, "nonnull": K.SL_NONNULL, "min": K.SL_MIN, "max": K.SL_MAX,
        }
        kind, stage, col, cnt = [], [], [], []
        for spec in self.slots:
            kind.append(kinds[spec[0]])
            if spec[0] == "prev":
                stage.append(-1)
                col.append(self.column(spec[1]))
                cnt.append(-1)
                continue
            stage.append(stages.index(spec[1]))
            col.append(self.column(spec[2]) if len(spec) > 2 and spec[2] is not None else 0)
            cnt.append(self.slots.index(("count", spec[1])) if spec[0] == "first" else -1)
        i64 = np.int64
        return (np.array(kind, i64), np.array(stage, i64), np.array(col, i64), np.array(cnt, i64))

    def initial_slots(self) -> np.ndarray:
        init = [0.0 if s[0] in ("count", "nonnull", "sum") else np.nan for s in self.slots]
        return np.array(init or [np.nan], np.float64)


def compilable_reason(pattern: Pattern) -> str | None:
    """None if every condition is an expression; else why the numba engine cannot run it."""
    for stage, cond in _stage_conditions(pattern):
        for node in condition_nodes(cond):
            if not isinstance(node, (TrueCondition, And, Or, Not, Expr)):
                return (
                    f"stage {stage.name!r} has the condition {node!r}, which is Python code; "
                    "only expression conditions (cep.col(...) ...) compile"
                )
    return None


#: the integers float64 holds exactly: the numba engine reads numbers as float64
EXACT_INTEGERS = 2**53


def inexact_reason(pattern: Pattern) -> str | None:
    """None, or why the numba engine would compute this pattern's conditions inexactly: a
    constant integer beyond 2**53 (``col("id") + 2**62``), which float64 rounds (the
    reference engine computes with Python's integers).

    >>> from cep import Pattern, col
    >>> inexact_reason(Pattern.begin("a").where(col("id") > 2**60)) is not None
    True
    """
    for stage, cond in _stage_conditions(pattern):
        for expr in _exprs(cond):
            for node in expr.walk():
                values = ((node.value,) if isinstance(node, Lit)
                          else node.values if isinstance(node, IsIn) else ())
                for v in values:
                    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > EXACT_INTEGERS:
                        return (f"stage {stage.name!r} holds the integer {v}, beyond 2**53: the "
                                "numba engine computes with float64, which rounds it (the "
                                "reference engine computes with it exactly)")
    return None


def _stage_conditions(pattern: Pattern) -> Iterator[tuple[Stage, Condition]]:
    """Every stage's ``where`` and ``until`` condition, with the stage."""
    for stage in pattern.iter_stages():
        for cond in (stage.condition, stage.until):
            if cond is not None:
                yield stage, cond


def _expr_nodes(pattern: Pattern) -> Iterator[Expr]:
    """Every node of every expression condition of the pattern."""
    for _, cond in _stage_conditions(pattern):
        for expr in _exprs(cond):
            yield from expr.walk()


def _exprs(cond: Condition) -> Iterator[Expr]:
    for node in condition_nodes(cond):
        if isinstance(node, Expr):
            yield node


def referenced_columns(pattern: Pattern) -> list[str]:
    """Every event field the pattern's expressions read."""
    names: list[str] = []
    for node in _expr_nodes(pattern):
        field = node.name if isinstance(node, Col) else getattr(node, "field", None)
        if isinstance(field, str) and field not in names:
            names.append(field)
    return names


def stages_reading(pattern: Pattern) -> dict[str, list[str]]:
    """Event field -> the stages whose conditions read it (for errors that name the stage).

    >>> from cep import Pattern, col
    >>> p = Pattern.begin("a").where(col("v") > 1).next("b").where(col("v") < col("w"))
    >>> stages_reading(p)
    {'v': ['a', 'b'], 'w': ['b']}
    """
    out: dict[str, list[str]] = {}
    for stage, cond in _stage_conditions(pattern):
        for expr in _exprs(cond):
            for node in expr.walk():
                field = node.name if isinstance(node, Col) else getattr(node, "field", None)
                if isinstance(field, str):
                    names = out.setdefault(field, [])
                    if stage.name not in names:
                        names.append(stage.name)
    return out


def null_tested_only(pattern: Pattern) -> set[str]:
    """Fields the pattern only tests for null (``col("s").is_null()``,
    ``prev("s").is_null()``): the numba engine needs only whether each value is null,
    whatever its type, so such a field needs no type (and no sample value to guess one).

    >>> from cep import Pattern, col
    >>> p = Pattern.begin("a").where(col("s").is_null() | (col("v") > 1))
    >>> sorted(null_tested_only(p))
    ['s']
    """
    typed: set[str] = set()
    tested: set[str] = set()

    def visit(node: Expr, under_is_null: bool) -> None:
        if isinstance(node, Col):
            (tested if under_is_null else typed).add(node.name)
        elif isinstance(node, StageRef):
            (tested if under_is_null else typed).add(node.field)
        elif isinstance(getattr(node, "field", None), str):
            typed.add(node.field)  # an aggregate reads the values themselves
        for child in node.children():
            visit(child, isinstance(node, IsNull))

    for _, cond in _stage_conditions(pattern):
        for expr in _exprs(cond):
            visit(expr, False)
    return tested - typed


def schema_from_pattern(pattern: Pattern) -> dict[str, str]:
    """Column types the pattern itself implies: compared with a literal, used in arithmetic
    or time functions, read by text functions (a field inside ``coalesce`` counts too),
    used as a condition or combined with ``&``, ``|``, ``~`` (a flag).

    >>> from cep import Pattern, coalesce, col
    >>> schema_from_pattern(Pattern.begin("a").where(
    ...     (coalesce(col("x"), col("y")) > 1) & col("s").lower().startswith("a") & col("ok")))
    {'ok': 'boolean', 'x': 'numeric', 'y': 'numeric', 's': 'string'}
    """
    out: dict[str, str] = {}

    def columns_of(e: Expr) -> list[str]:
        if isinstance(e, Col):
            return [e.name]
        if isinstance(e, StageRef):
            return [e.field]
        if isinstance(e, Coalesce):  # its value is one of its arguments'
            return [name for a in e.args for name in columns_of(a)]
        return []

    def imply(e: Expr, kind: str | None) -> None:
        if kind is not None:
            for name in columns_of(e):
                out.setdefault(name, kind)

    for _, cond in _stage_conditions(pattern):
        for expr in _exprs(cond):
            imply(expr, BOOLEAN)  # a condition is true or false: a bare column is a flag
    for node in _expr_nodes(pattern):
        if isinstance(node, BoolOp):
            imply(node.left, BOOLEAN)
            imply(node.right, BOOLEAN)
        elif isinstance(node, Negate):
            imply(node.arg, BOOLEAN)
        elif isinstance(node, Compare):
            if node.op in ("<", "<=", ">", ">="):
                imply(node.left, NUMERIC)  # strings only compare ==
                imply(node.right, NUMERIC)
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if isinstance(b, Lit):
                    imply(a, literal_type(b.value))
        elif isinstance(node, IsIn):
            kinds = {literal_type(v) for v in node.values} - {None}
            if len(kinds) == 1:
                imply(node.arg, kinds.pop())
        elif isinstance(node, (Arith, Math)):
            for child in node.children():
                imply(child, NUMERIC)
        elif isinstance(node, Aggregate) and node.field and node.func in ("sum", "avg"):
            out.setdefault(node.field, NUMERIC)
        elif isinstance(node, Text):
            imply(node.arg, STRING)
        elif isinstance(node, Coalesce):
            kinds = {literal_type(a.value) for a in node.args if isinstance(a, Lit)} - {None}
            if len(kinds) == 1:
                imply(node, kinds.pop())
    # fields compared for equality with each other are of one type (``col("item") ==
    # first("buy", "item")``): a field no other use types takes its partners' type
    pairs = [(columns_of(n.left), columns_of(n.right)) for n in _expr_nodes(pattern)
             if isinstance(n, Compare) and n.op in ("==", "!=")]
    changed = True
    while changed:
        changed = False
        for left, right in pairs:
            for names, others in ((left, right), (right, left)):
                kind = next((out[o] for o in others if o in out), None)
                for name in names:
                    if kind is not None and name not in out:
                        out[name] = kind
                        changed = True
    return out


def assumed_schema(pattern: Pattern) -> dict[str, str]:
    """The column types a pattern is checked with before any data is seen: those it implies
    (:func:`schema_from_pattern`), numeric for a field nothing types (the engines read such
    a field as numbers until data says otherwise).

    >>> from cep import Pattern, col, first
    >>> assumed_schema(Pattern.begin("a").next("b").where(col("v") == first("a", "v")))
    {'v': 'numeric'}
    """
    implied = schema_from_pattern(pattern)
    return {name: implied.get(name, NUMERIC) for name in referenced_columns(pattern)}


def check_types(pattern: Pattern, schema: Mapping[str, str]) -> None:
    """Type-check every expression against the input schema; errors name the stage."""
    # a condition may read any stage: one after it has taken nothing yet (count 0, first
    # null), unless a looping group took its events in an earlier round (as FlinkCEP's
    # ctx.getEventsForPattern reads them)
    names = pattern.stage_names()
    for stage, cond in _stage_conditions(pattern):
        for expr in _exprs(cond):
            kind = infer_type(expr, schema, stage.name, names)
            if kind not in (BOOLEAN, None):
                raise MalformedPatternError(
                    f"stage {stage.name!r}: condition {expr!r} gives a {kind} value, "
                    "not true/false"
                )


# ---------------------------------------------------------------- compiling
_COMPARE = {"==": K.OP_EQ, "!=": K.OP_NE, "<": K.OP_LT, "<=": K.OP_LE, ">": K.OP_GT, ">=": K.OP_GE}
_BINARY = {"+": K.OP_ADD, "-": K.OP_SUB, "*": K.OP_MUL, "/": K.OP_DIV, **_COMPARE}


#: ops whose result is a truth value (1, 0 or NaN for unknown) already
_TRUTH_VALUED = frozenset({K.OP_EQ, K.OP_NE, K.OP_LT, K.OP_LE, K.OP_GT, K.OP_GE, K.OP_AND3,
                           K.OP_OR3, K.OP_NOT3, K.OP_ISIN, K.OP_ISNULL, K.OP_TRUTH})


class _Compiler:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.depth = 0

    def emit(self, op: int, a: int = 0, b: int = 0, c: int = 0, push: int = 0) -> None:
        self.p.ops.append((op, a, b, c))
        self.depth += push
        self.p.depth = max(self.p.depth, self.depth)

    def cond(self, c: Condition) -> None:
        """Two-valued, as FlinkCEP's conditions: unknown counts as false."""
        if isinstance(c, TrueCondition):
            self.emit(K.OP_TRUE, push=1)
        elif isinstance(c, (And, Or)):
            self.cond(c.left)
            skip = self.skip(isinstance(c, And))
            self.cond(c.right)
            self.emit(K.OP_BAND if isinstance(c, And) else K.OP_BOR, push=-1)
            self.land(skip)
        elif isinstance(c, Not):
            self.cond(c.inner)
            self.emit(K.OP_BNOT)
        elif isinstance(c, Expr):
            self.value(c)
            self.truth()
            self.emit(K.OP_IS_TRUE)
        else:
            raise NotCompilable(f"condition {c!r} is not an expression")

    def truth(self) -> None:
        """The value on top as a truth value (1, 0 or unknown); one made by an op that
        gives truth values already is left as it is (an op less per event)."""
        if self.p.ops[-1][0] not in _TRUTH_VALUED:
            self.emit(K.OP_TRUTH)

    def skip(self, conjunction: bool) -> int:
        """A short cut past the right operand of an AND (``conjunction``) or OR, whose left
        operand is on top; its place, for :meth:`land`."""
        self.emit(K.OP_SKIP_IF_FALSE if conjunction else K.OP_SKIP_IF_TRUE)
        return len(self.p.ops) - 1

    def land(self, skip: int) -> None:
        """The short cut at ``skip`` goes to the next op."""
        op, _, b, c = self.p.ops[skip]
        self.p.ops[skip] = (op, len(self.p.ops), b, c)

    def literal(self, v: Any) -> None:
        if v is None:
            value: float | str = float("nan")
        elif isinstance(v, str):
            value = v
        else:
            value = float(v)
        self.emit(K.OP_CONST, self.p.constant(value), push=1)

    def value(self, e: Expr) -> None:
        p = self.p
        if isinstance(e, Col):
            self.emit(K.OP_COL, p.column(e.name), push=1)
        elif isinstance(e, Lit):
            self.literal(e.value)
        elif isinstance(e, StageRef):
            self.stage_ref(e, e.field)
        elif isinstance(e, EventTime):
            self.emit(K.OP_COL, p.column(EVENT_TIME), push=1)
        elif isinstance(e, Text):
            self.text(e)
        elif isinstance(e, Coalesce):
            self.value(e.args[0])
            for arg in e.args[1:]:
                self.value(arg)
                self.emit(K.OP_COALESCE, push=-1)
        elif isinstance(e, Aggregate):
            if e.func == "count":
                self.emit(K.OP_SLOT, p.slot(("count", e.stage)), push=1)
                return
            assert e.field is not None
            p.column(e.field)
            if e.func == "avg":
                self.emit(K.OP_SLOT, p.slot(("sum", e.stage, e.field)), push=1)
                self.emit(K.OP_SLOT, p.slot(("nonnull", e.stage, e.field)), push=1)
                self.emit(K.OP_AVG, push=-1)
            else:
                self.emit(K.OP_SLOT, p.slot((e.func, e.stage, e.field)), push=1)
        elif isinstance(e, (Arith, Compare)):
            self.value(e.left)
            self.value(e.right)
            self.emit(_BINARY[e.op], push=-1)
        elif isinstance(e, Math):
            self.value(e.arg)
            self.emit(K.OP_MATH, MATH.index(e.fn))
        elif isinstance(e, BoolOp):
            self.value(e.left)
            self.truth()
            skip = self.skip(e.op == "&")
            self.value(e.right)
            self.truth()
            self.emit(K.OP_AND3 if e.op == "&" else K.OP_OR3, push=-1)
            self.land(skip)
        elif isinstance(e, Negate):
            self.value(e.arg)
            self.truth()
            self.emit(K.OP_NOT3)
        elif isinstance(e, IsNull):
            self.value(e.arg)
            self.emit(K.OP_ISNULL)
        elif isinstance(e, IsIn):
            self.value(e.arg)
            known = [v for v in e.values if v is not None]
            start = len(p.constants)
            for v in known:
                p.constant(v if isinstance(v, str) else float(v))
            has_null = int(len(known) != len(e.values))
            self.emit(K.OP_ISIN, start, len(known), has_null)
        else:
            raise NotCompilable(f"unknown expression node {type(e).__name__}")

    def stage_ref(self, e: StageRef, column: str | Derived) -> None:
        """``e``'s slot, reading ``column`` of the event it refers to."""
        p = self.p
        p.column(e.field)
        if e.kind == "prev":
            slot = p.slot(("prev", column))
        else:
            if e.kind == "first":
                p.slot(("count", e.stage))
            slot = p.slot((e.kind, e.stage, column))
        self.emit(K.OP_SLOT, slot, push=1)

    def text(self, e: Text) -> None:
        """Text functions read a derived column, computed once per batch from the dictionary
        of strings; over a stage reference, that column's slot; over coalesce, they move
        inside it (a function of a non-null string is never null); over a literal, folded."""
        fns: list[tuple[str, str | None]] = []
        base: Expr = e
        while isinstance(base, Text):
            fns.append((base.fn, base.value))
            base = base.arg
        chain = tuple(reversed(fns))
        if isinstance(base, Lit):
            self.literal(apply_text(chain, base.value))
        elif isinstance(base, Col):
            self.p.column(base.name)
            self.emit(K.OP_COL, self.p.column(Derived(base.name, chain)), push=1)
        elif isinstance(base, StageRef):
            self.stage_ref(base, Derived(base.field, chain))
        elif isinstance(base, Coalesce):
            moved = []
            for arg in base.args:
                for fn, v in chain:
                    arg = Text(fn, arg, v)
                moved.append(arg)
            self.value(Coalesce(tuple(moved)))
        else:
            raise NotCompilable(f"{e!r}: text functions read a field, a stage reference, "
                                "a literal or coalesce() of those")


def compile_conditions(
    nfa: NFA, pattern: Pattern, schema: Mapping[str, str]
) -> tuple[Program, dict[int, int]]:
    """Bytecode for every transition condition; condition object id -> condition index."""
    reason = compilable_reason(pattern) or inexact_reason(pattern)
    if reason is not None:
        raise NotCompilable(reason)
    check_types(pattern, schema)
    program = Program()
    cond_ids: dict[int, int] = {}
    for state in nfa.states.values():
        for t in state.transitions:
            c = t.condition
            if c is None or id(c) in cond_ids:
                continue
            cond_ids[id(c)] = len(program.starts) - 1
            compiler = _Compiler(program)
            compiler.cond(c)
            program.starts.append(len(program.ops))
    return program, cond_ids
