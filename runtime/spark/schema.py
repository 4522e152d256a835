"""From a Spark input schema to the engine's column types, the Spec, and the output schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cep.errors import InputError, MalformedPatternError
from cep.expr import BOOLEAN, NUMERIC, STRING, Expr, infer_type
from cep.measures import check_measures, is_count, source_column
from cep.nfa.capacity import DEFAULT_MAX_PARTIAL_MATCHES, check_cap, check_policy
from cep.pattern import Pattern
from cep.runtime.spark.runner import FIXED, GROUP, ORDERING, SIDE, TS, Spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

RESERVED = (TS, *ORDERING, GROUP, "__cep_wm")


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


def make_spec(df: DataFrame, pattern: Pattern, *, key: str | Sequence[str], time: str,
              engine: str, timeouts: bool, late: bool,
              measures: Mapping[str, Expr] | None, time_unit: str | None = None,
              max_partial_matches: int | None = DEFAULT_MAX_PARTIAL_MATCHES,
              on_overflow: str = "fail") -> Spec:
    """Check the call against the DataFrame (naming what is wrong) and build the Spec."""
    from pyspark.sql import types as T

    from cep.nfa.engine import choose_engine
    from cep.times import check_unit

    if not isinstance(pattern, Pattern):
        raise MalformedPatternError(f"pattern must be a cep.Pattern, got {type(pattern).__name__}")
    keys = (key,) if isinstance(key, str) else tuple(key)
    names = df.columns
    for what, cols in (("key", keys), ("time", (time,))):
        for c in cols:
            if c not in names:
                raise InputError(f"{what} column {c!r} is not in the DataFrame (columns: {names})")
    clash = [c for c in names if c in RESERVED]
    if clash:
        raise InputError(f"column names {clash} are reserved by cep; rename them")
    ttype = df.schema[time].dataType
    if isinstance(ttype, (T.TimestampType, T.TimestampNTZType)):
        is_ts = True
    elif isinstance(ttype, (T.IntegralType,)):
        is_ts = False
    else:
        raise InputError(
            f"time column {time!r} is {ttype.simpleString()}: use a timestamp or integer "
            "epoch times (milliseconds, or the time_unit given)"
        )
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
    taken = [*keys, *FIXED, *(SIDE if late else ())]
    for name in [*spec.stages(pattern), *measures]:
        if name in taken:
            raise MalformedPatternError(
                f"stage or measure {name!r} would clash with the output column of that name "
                f"(output columns: {taken}); rename it"
            )
    return spec


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
    time_type: DataType = T.TimestampType() if spec.time_is_timestamp else T.LongType()
    event = T.StructType([f for f in df_schema.fields])
    fields = [T.StructField(k, by_name[k]) for k in spec.key]
    fields += [
        T.StructField("kind", T.StringType(), False),
        T.StructField("match_id", T.StringType(), False),
        T.StructField("start", time_type),
        T.StructField("end", time_type),
        T.StructField("timeout_at", time_type),
    ]
    fields += [T.StructField(s, T.ArrayType(event)) for s in spec.stages(pattern)]
    measures = spec.load_measures()
    kinds = dict(spec.kinds)
    stages = pattern.stage_names()
    for name, expr in measures.items():
        fields.append(T.StructField(name, _measure_type(expr, by_name, kinds, stages)))
    if spec.late:
        fields += [T.StructField("reason", T.StringType()), T.StructField("position", T.StringType()),
                   T.StructField("event", event)]
    return T.StructType(fields)


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
