"""From a Spark input schema to the engine's column types, the Spec, and the output schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cep.errors import InputError, MalformedPatternError
from cep.expr import BOOLEAN, NUMERIC, STRING, Expr, infer_type
from cep.measures import check_measures, is_count, source_column
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, check_cap, check_policy
from cep.pattern import Pattern
from cep.runtime.spark.rule_sets import MEASURES, STAGES, RuleSetSpec
from cep.runtime.spark.runner import FIELD, GROUP, ORDERING, TS, Spec
from cep.runtime.tables import check_output_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

RESERVED = (TS, *ORDERING, GROUP, FIELD, "__cep_wm")


def kinds_of(schema: StructType) -> dict[str, str]:
    """The engine's column types (numeric / string / boolean) for the columns it can read."""
    from pyspark.sql import types as T

    out: dict[str, str] = {}
    for f in schema.fields:
        t = f.dataType
        if isinstance(t, T.BooleanType):
            out[f.name] = BOOLEAN
        elif isinstance(t, T.StringType):
            out[f.name] = STRING
        elif isinstance(t, (T.NumericType, T.TimestampType, T.TimestampNTZType, T.DateType)):
            out[f.name] = NUMERIC
    return out


def make_spec(df: DataFrame, pattern: Pattern, *, key: str | Sequence[str] | None, time: str,
              engine: str, timeouts: bool, late: bool,
              measures: Mapping[str, Expr] | None, time_unit: str | None = None,
              max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
              on_overflow: str = "fail") -> Spec:
    """Check the call against the DataFrame (naming what is wrong) and build the Spec."""

    from cep.nfa.engine import choose_engine
    from cep.times import check_unit

    if not isinstance(pattern, Pattern):
        raise MalformedPatternError(f"pattern must be a cep.Pattern, got {type(pattern).__name__}")
    if key is None:
        raise InputError("a pattern needs key= (the field or fields events are matched per)")
    keys = (key,) if isinstance(key, str) else tuple(key)
    names = df.columns
    for c in keys:
        if c not in names:
            raise InputError(f"key column {c!r} is not in the DataFrame (columns: {names})")
    is_ts = time_is_timestamp(df, time)
    kinds = kinds_of(df.schema)
    measures = dict(measures or {})
    check_measures(pattern, measures, kinds)
    chosen, _ = choose_engine(pattern, engine)
    if chosen == "numba":
        from cep.nfa.bytecode import check_types

        check_types(pattern, kinds)
    spec = Spec(
        pattern=_pattern_payload(pattern), key=keys, columns=tuple(names), kinds=kinds,
        time_is_timestamp=is_ts, engine=chosen, timeouts=timeouts, late=late,
        time_unit=check_unit(time_unit), time=time,
        max_partial_matches=check_cap(max_partial_matches), on_overflow=check_policy(on_overflow),
        measures={name: e.to_json() for name, e in measures.items()},
    )
    check_output_names(list(keys), spec.stages(pattern), list(measures), side=late)
    return spec


def time_is_timestamp(df: DataFrame, time: str) -> bool:
    """Is the time column a timestamp (else integer epoch times)?  Refuses a missing or
    unusable time column, and columns whose names cep reserves."""
    from pyspark.sql import types as T

    names = df.columns
    if time not in names:
        raise InputError(f"time column {time!r} is not in the DataFrame (columns: {names})")
    clash = [c for c in names if c in RESERVED]
    if clash:
        raise InputError(f"column names {clash} are reserved by cep; rename them")
    ttype = df.schema[time].dataType
    if isinstance(ttype, (T.TimestampType, T.TimestampNTZType)):
        return True
    if isinstance(ttype, T.IntegralType):
        return False
    raise InputError(
        f"time column {time!r} is {ttype.simpleString()}: use a timestamp or integer "
        "epoch times (milliseconds, or the time_unit given)"
    )


def _pattern_payload(pattern: Pattern) -> str | Pattern:
    from cep.nfa.bytecode import compilable_reason

    # expression patterns travel as JSON; Python callables as objects (cloudpickle)
    return pattern.to_json() if compilable_reason(pattern) is None else pattern


def output_schema(df_schema: StructType, spec: Spec, pattern: Pattern) -> StructType:
    """The Spark schema of :func:`~cep.runtime.spark.match_stream` and
    :func:`~cep.runtime.spark.match_batch` output (see :func:`~cep.runtime.spark.runner.output_columns`):
    times have the time column's type, each stage is an array of input rows, measures have
    their type.

    >>> df = spark.createDataFrame([], "card string, ts long, amount double")
    >>> p = Pattern.begin("a").next("b")
    >>> spec = make_spec(df, p, key="card", time="ts", engine="auto", timeouts=False,
    ...                  late=False, measures=None)
    >>> output_schema(df.schema, spec, p).simpleString()
    'struct<card:string,kind:string,match_id:string,start:bigint,end:bigint,timeout_at:bigint,a:array<struct<card:string,ts:bigint,amount:double>>,b:array<struct<card:string,ts:bigint,amount:double>>>'
    """
    from pyspark.sql import types as T

    by_name = {f.name: f.dataType for f in df_schema.fields}
    event = T.StructType([f for f in df_schema.fields])
    fields = [T.StructField(k, by_name[k]) for k in spec.key]
    fields += _fixed_fields(spec, named=False)
    fields += [T.StructField(s, T.ArrayType(event)) for s in spec.stages(pattern)]
    measures = spec.load_measures()
    kinds = dict(spec.kinds)
    stages = pattern.stage_names()
    for name, expr in measures.items():
        fields.append(T.StructField(name, _measure_type(expr, by_name, kinds, stages)))
    return T.StructType(fields + _side_fields(spec, event))


def rule_set_schema(df_schema: StructType, spec: RuleSetSpec) -> StructType:
    """The Spark schema of a rule set's output (see
    :func:`~cep.runtime.spark.rule_sets.rule_set_columns`): every key field of the query,
    ``rule`` and ``version``, the stages as a map from stage name to the events it took,
    the measures as a map from name to JSON text.

    >>> df = spark.createDataFrame([], "card string, ip string, ts long")
    >>> spec = RuleSetSpec(None, ("card",), tuple(df.columns), {}, False,
    ...                    key_columns=("card", "ip"))
    >>> rule_set_schema(df.schema, spec).simpleString()
    'struct<card:string,ip:string,kind:string,rule:string,version:bigint,match_id:string,start:bigint,end:bigint,timeout_at:bigint,stages:map<string,array<struct<card:string,ip:string,ts:bigint>>>,measures:map<string,string>>'
    """
    from pyspark.sql import types as T

    by_name = {f.name: f.dataType for f in df_schema.fields}
    event = T.StructType([f for f in df_schema.fields])
    fields = [T.StructField(k, by_name[k]) for k in spec.key_columns]
    fields += _fixed_fields(spec, named=True)
    fields += [T.StructField(STAGES, T.MapType(T.StringType(), T.ArrayType(event))),
               T.StructField(MEASURES, T.MapType(T.StringType(), T.StringType()))]
    return T.StructType(fields + _side_fields(spec, event))


def _fixed_fields(spec: Spec, named: bool) -> list[Any]:
    """``kind``, (``rule``, ``version`` when ``named``), ``match_id`` and the times."""
    from pyspark.sql import types as T

    time_type: DataType = T.TimestampType() if spec.time_is_timestamp else T.LongType()
    rule = [T.StructField("rule", T.StringType()),
            T.StructField("version", T.LongType())] if named else []
    return [T.StructField("kind", T.StringType(), False), *rule,
            T.StructField("match_id", T.StringType(), False),
            T.StructField("start", time_type), T.StructField("end", time_type),
            T.StructField("timeout_at", time_type)]


def _side_fields(spec: Spec, event: Any) -> list[Any]:
    """The side outputs' columns, when asked for."""
    from pyspark.sql import types as T

    if not spec.late:
        return []
    return [T.StructField("reason", T.StringType()), T.StructField("position", T.StringType()),
            T.StructField("event", event)]


def _measure_type(expr: Expr, by_name: dict[str, Any], kinds: dict[str, str],
                  stages: list[str]) -> DataType:
    from pyspark.sql import types as T

    source = source_column(expr)
    if source is not None:
        return by_name[source]
    if is_count(expr):
        return T.LongType()
    kind = infer_type(expr, kinds, stages[-1], stages)
    return {NUMERIC: T.DoubleType(), STRING: T.StringType(), BOOLEAN: T.BooleanType()}.get(
        kind or NUMERIC, T.DoubleType())


def make_rule_specs(df: DataFrame, rules: Any, *, key: Any = None,
                    measures: Mapping[str, Expr] | None = None, time: str, engine: str,
                    timeouts: bool,
                    late: bool, time_unit: str | None = None,
                    max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
                    on_overflow: str = "fail", on_change: str = "drain", every: float = 1.0,
                    key_fields: Sequence[str | Sequence[str]] = (),
                    changes: str | None = None) -> list[RuleSetSpec]:
    """Check a rule set against the DataFrame and build one spec per distinct key field.

    ``rules`` is a directory or file of rule files (read again while a stream runs), a
    :class:`~cep.rules.RuleSet` or a list of :class:`~cep.rules.Rule`.  The key fields are
    those of the set's rules now (enabled or not), of every rule the directory's change
    log holds (a restarted query: a rule whose file no longer loads runs on, an old version
    drains), and ``key_fields``, in the order of their names (the output's key columns); a
    rule added later keyed by another field is reported and not run (the query does not
    route events to it).  Problems
    of single rules (a file that does not load, a field the DataFrame lacks, a type that
    does not fit) are reported as a :class:`~cep.runtime.live_rules.RuleWarning` and the
    rule left out; the query fails only when no rule is left to run.  A directory's change
    log goes to ``changes`` (default: beside the directory, see
    :func:`~cep.runtime.spark.rule_sets.change_log_path`), created here.
    """
    import warnings
    from pathlib import Path

    from cep.nfa.engine import ENGINES
    from cep.rules import Rule, RuleSet, load_rules, rule_set
    from cep.runtime.live_rules import POLICIES, RuleWarning
    from cep.runtime.spark.rule_sets import ChangeLog, change_log_path, fitting, rules_text
    from cep.runtime.spark.rule_sets import key_fields as fields_of
    from cep.times import check_unit

    if key is not None or measures:
        raise InputError("a rule set's rules give their own key and measures: pass neither")
    if on_change not in POLICIES:
        raise InputError(f"on_change is one of {', '.join(POLICIES)}, got {on_change!r}")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    directory = log = None
    if isinstance(rules, (str, Path)):
        directory = str(Path(rules).resolve())  # executors may run elsewhere
        loaded = load_rules(rules).check()
        log = Path(changes).resolve() if changes is not None else change_log_path(directory)
        try:
            log.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"the rule change log {log} cannot be made ({err}): give "
                             "changes= a folder every executor can write") from err
    elif isinstance(rules, RuleSet):
        loaded = rules.check()
    elif isinstance(rules, (list, tuple)) and all(isinstance(r, Rule) for r in rules):
        loaded = rule_set(rules).check()
    else:
        raise InputError(f"a pattern (cep.Pattern) or rules (a directory or file of rule "
                         f"files, a RuleSet, a list of Rule) are needed, got "
                         f"{type(rules).__name__}")
    is_ts = time_is_timestamp(df, time)
    kinds = kinds_of(df.schema)
    problems = [str(p) for p in loaded.problems]
    # a query restarted on a directory with a change log: every field a logged rule was
    # keyed by stays routed, for the groups there may run a version in force whose file no
    # longer loads, or drain an old one
    logged = ([r.key for change in ChangeLog(log).entries() for r in change.rules]
              if log is not None else [])
    keys: list[str | tuple[str, ...]] = []
    for k in [*(r.key for r in loaded), *logged, *(k if isinstance(k, str) else tuple(k)
                                                   for k in key_fields)]:
        missing = [f for f in fields_of(k) if f not in df.columns]
        if missing:
            problems.append(f"key {k!r}: field {missing[0]!r} is not in the DataFrame "
                            f"(columns: {df.columns}); the rules keyed by it do not run")
        elif k not in keys:
            keys.append(k)
    problems += [str(p) for p in fitting(loaded, kinds).problems[len(loaded.problems):]]
    for text in problems:
        warnings.warn(text, RuleWarning, stacklevel=3)
    if not keys:
        raise InputError("no rule of the rule set can run on this DataFrame: "
                         + "; ".join(problems or ["the rule set is empty"]))
    keys.sort(key=fields_of)  # the output's columns do not depend on file names
    columns = [f for k in keys for f in fields_of(k)]
    return [RuleSetSpec(
        pattern=None, key=fields_of(k), columns=tuple(df.columns), kinds=kinds,
        time_is_timestamp=is_ts, engine=engine, timeouts=timeouts, late=late,
        time_unit=check_unit(time_unit), time=time,
        max_partial_matches=check_cap(max_partial_matches), on_overflow=check_policy(on_overflow),
        rule_key=k, key_columns=tuple(dict.fromkeys(columns)), on_change=on_change,
        directory=directory, every=every, changes=None if log is None else str(log),
        rules=None if directory is not None else rules_text(loaded), routed=tuple(keys),
        primary=i == 0) for i, k in enumerate(keys)]
