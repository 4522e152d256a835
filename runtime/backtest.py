"""Backtesting: two rule sets over the same history in one pass, compared rule by rule.

:func:`backtest` (and ``cep backtest OLD NEW HISTORY...``) runs the rules of an old and a
new rule set (:mod:`cep.rules`) over history in **one** :class:`~cep.runtime.Job`, and
reports per rule what changes: the matches only the old set finds, only the new, both;
alerts per key and per UTC day; and, given a label column saying which events (or keys)
were fraud, each set's precision, recall and time to detect.

Definitions (what the figures mean):

- **A rule's status**: ``unchanged`` when both sets run it alike (the same key, pattern
  and measures; the version, description and owner may differ, as they change nothing
  the matcher does: such a rule runs once and all its matches are "both"), ``changed``
  (it runs once per side), ``added`` (runs in the new set only), ``removed`` (in the old
  only), ``disabled`` (enabled in neither), ``broken`` (it runs in one set only because
  the other has a problem with it, listed among the problems: its file or the rule
  failed to load or check).  A disabled rule does not run: a rule enabled only in the new
  set is added, one enabled only in the old removed.
- **Match identity** is the project's ``match_id`` (:mod:`cep.runtime.match_ids`): the
  same kind, key, start, end and the same events taken by the same stages give the same
  id in every run and engine, so a changed rule's match is "both" when the other side
  found that very match (renaming a stage makes every match differ).  Only matches are
  alerts, never timeouts; a match found twice by one side (duplicate events) counts once.
- **Alerts per day** are counted on the UTC day of the match's ``end`` (when the alert
  would have been raised); a "both" match counts on both sides.
- **Labels** (``label=`` a column of the history): true, non-zero numbers and the text
  ``true``/``t``/``yes``/``y``/``1`` are positive; false, 0, null and ``false``/``f``/
  ``no``/``n``/``0``/empty text negative; other values are an error.  Keys are each
  rule's own key.  ``labels="event"``: the column marks fraudulent events; a key is
  positive when any of its events is, and its fraud begins (its *onset*) at its first
  positive event.  ``labels="key"``: the column is a per-key flag, positive when any row
  of the key says so; the onset is the key's first event.
- **precision** (key level) = alerted keys that are positive / alerted keys (any alert on
  a positive key counts, even one before its onset); **recall** = positive keys
  *detected* / positive keys, a key being detected by an alert that ends at or after its
  onset (an alert before the fraud began did not see it); **time to detect** of a
  detected key = the end of its first alert at or after the onset minus the onset,
  reported in seconds as the median, the 90th percentile (linear interpolation, numpy's
  default) and the maximum over the detected keys; **alert precision** (event labels
  only) = alerts that took at least one positive event / alerts.  An empty denominator
  gives null (NaN), never an error.  A side a rule does not run on has no figures.

History is read by the runtime's own sources (files: :class:`~cep.runtime.SortedFileSource`,
as ``cep replay --sort``; in memory: :class:`~cep.runtime.IterableSource`) and replayed in
event-time order, so nothing is late and the matches are those :func:`cep.match` finds.
Rule files with problems are reported (``FILE: PLACE: WHAT``) and the other rules still
run; rules are data, loading them never runs code.

>>> from cep import Pattern, col
>>> from cep.rules import Rule
>>> over = lambda amount: Pattern.begin("big").where(col("amount") > amount)
>>> history = [{"card": "c1", "ts": 1000, "amount": 900, "fraud": True},
...            {"card": "c2", "ts": 2000, "amount": 200, "fraud": False}]
>>> bt = backtest(history, [Rule("big", 1, "card", over(500))],
...               [Rule("big", 2, "card", over(100))], time="ts", label="fraud")
>>> bt.summary[["status", "old", "new", "only_old", "only_new", "both"]].to_dict("records")
[{'status': 'changed', 'old': 1, 'new': 2, 'only_old': 0, 'only_new': 1, 'both': 1}]
>>> bt.summary[["old_precision", "new_precision", "old_recall", "new_recall"]].to_dict("records")
[{'old_precision': 1.0, 'new_precision': 0.5, 'old_recall': 1.0, 'new_recall': 1.0}]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cep.errors import CEPError
from cep.nfa.events import object_array, take_rows
from cep.nfa.stray_text import PREFIX, stray_text
from cep.rules import Rule, RuleProblem, RuleSet, load_rules, rule_set
from cep.runtime.job import Job, Summary
from cep.runtime.records import json_columns
from cep.runtime.sinks import Sink
from cep.runtime.sources import Chunk, IterableSource, SortedFileSource, Source
from cep.runtime.specs import ENGINE_CHOICES, TIME_UNITS, expand_inputs
from cep.runtime.tables import stage_columns
from cep.runtime.watermarks import WatermarkStrategy

OLD, NEW, BOTH = "old", "new", "both"
SIDES = (OLD, NEW)
UNCHANGED, CHANGED, ADDED, REMOVED, DISABLED, BROKEN = (
    "unchanged", "changed", "added", "removed", "disabled", "broken")
#: what ``labels=`` accepts
LABEL_KINDS = ("event", "key")
#: the formats :meth:`Backtest.write` writes each table in
FORMATS = ("parquet", "csv")
#: exit status of ``cep backtest`` when some rule had a problem (the rest was backtested)
EXIT_PROBLEMS = 1
#: ... and when a path cannot be read or the command is wrong
EXIT_UNREADABLE = 2

_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0", "")
#: text that is a number (as a label: non-zero is yes)
_NUMBER_TEXT = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([e][+-]?[0-9]+)?$|^nan$"

Rules = str | os.PathLike[str] | RuleSet | Sequence[Rule]


class BacktestError(CEPError):
    """A backtest that cannot be run as asked (arguments, history, labels)."""


class LabelError(BacktestError):
    """The label column is missing, or holds values that say neither yes nor no."""


# ====================================================================== the plan
@dataclass(frozen=True)
class RuleStatus:
    """One rule of either set: its ``status`` (see the module docstring) and its document
    on each side (None where the set has no such rule)."""

    name: str
    status: str
    old: Rule | None
    new: Rule | None


@dataclass(frozen=True)
class _Run:
    """A rule the job runs: its name in the sets, the side(s) its matches count for, and
    the rule as run."""

    name: str
    side: str
    rule: Rule


def compare_rules(old: RuleSet, new: RuleSet) -> list[RuleStatus]:
    """Each rule of either set with its status, in the order of ``new`` then the rules
    only ``old`` has.

    >>> from cep import Pattern, col
    >>> a = Rule("a", 1, "k", Pattern.begin("x").where(col("v") > 1))
    >>> b = Rule("b", 1, "k", Pattern.begin("x"))
    >>> a2 = Rule("a", 2, "k", Pattern.begin("x").where(col("v") > 1), description="same")
    >>> [(s.name, s.status) for s in compare_rules(rule_set([a, b]), rule_set([a2]))]
    [('a', 'unchanged'), ('b', 'removed')]
    """
    out = []
    for rule in new:
        before = old.rules.get(rule.name)
        status = _status(before, rule)
        if before is None and _broken(old, rule.name, new, new.sources.get(rule.name)):
            status = BROKEN
        out.append(RuleStatus(rule.name, status, before, rule))
    out += [RuleStatus(r.name, BROKEN if _broken(new, r.name, old, old.sources.get(r.name))
                       else _status(r, None), r, None)
            for r in old if r.name not in new.rules]
    return out


def _broken(rules: RuleSet, name: str, other: RuleSet, source: str | None) -> bool:
    """Did the rule ``name`` (from the file ``source`` of the ``other`` set) fail to load
    or check in ``rules``: a problem names it, or the file at the same place in this set
    did not load (or holds a document without a readable name), so it may be that rule?
    It is then not removed (or added): the set that lacks it says why in its problems."""
    here = None if source is None else _within(source, other.root)
    return any(p.rule == name or (p.rule is None and here is not None
                                  and _within(p.file, rules.root) == here)
               for p in rules.problems)


def _kept_versions(statuses: Sequence[RuleStatus], new: RuleSet) -> list[RuleProblem]:
    """A rule changed without a new version: backtested as it is, but a running job would
    refuse the change (:func:`cep.rules.plan_changes`), so deploying it would change
    nothing; said as a problem of the new set."""
    return [RuleProblem(new.sources.get(s.name, "?"), f"rule {s.name!r}",
                        f"changed but kept version {s.new.version}: a running job would not "
                        "apply it (give the change a new version)", s.name)
            for s in statuses if s.status == CHANGED and s.old is not None
            and s.new is not None and s.old.version == s.new.version]


def _within(file: str, root: str | None) -> str:
    """``file``'s path inside the rule set read from ``root`` (a directory, or the file)."""
    if root is None:
        return file
    where = Path(root)
    if where.is_dir():
        return os.path.relpath(file, where)
    return Path(file).name


def _status(old: Rule | None, new: Rule | None) -> str:
    running_old = old is not None and old.enabled
    running_new = new is not None and new.enabled
    if running_old and running_new:
        assert old is not None and new is not None
        return UNCHANGED if _alike(old, new) else CHANGED
    if running_new:
        return ADDED
    return REMOVED if running_old else DISABLED


def _alike(a: Rule, b: Rule) -> bool:
    """Do two rules find the same matches (the same key, pattern and measures)?"""
    da, db = a.to_dict(), b.to_dict()
    return all(da[k] == db[k] for k in ("key", "pattern", "measures"))


def _runs(statuses: Sequence[RuleStatus]) -> dict[str, _Run]:
    """What the job runs, by the name it runs under (``side:name``: names of the two sets
    never collide)."""
    runs: dict[str, _Run] = {}
    for s in statuses:
        if s.status == UNCHANGED:
            assert s.new is not None
            runs[f"{BOTH}:{s.name}"] = _Run(s.name, BOTH, s.new)
            continue
        for side, rule in ((OLD, s.old), (NEW, s.new)):
            if rule is not None and rule.enabled:
                runs[f"{side}:{s.name}"] = _Run(s.name, side, rule)
    return runs


def _as_rule_set(rules: Rules, which: str) -> RuleSet:
    """The rules of one side, checked (compiled, types agreeing): a path, a RuleSet or
    rules made in code."""
    if isinstance(rules, (str, os.PathLike)):
        return load_rules(rules).check()
    if isinstance(rules, RuleSet):
        return rules.check()
    if isinstance(rules, Sequence) and all(isinstance(r, Rule) for r in rules):
        return rule_set(rules, f"<{which} rules>").check()
    raise BacktestError(f"the {which} rules are a directory or file of rule files, a RuleSet "
                        f"or a list of Rule; got {type(rules).__name__}")


# ==================================================================== the history
def _source(history: Any, time: str, unit: str | None, fmt: str | None,
            batch_size: int) -> tuple[Source, str]:
    """The runtime source of ``history`` in event-time order, and how to name it."""
    if isinstance(history, (str, os.PathLike)):
        history = [history]
    if (isinstance(history, Sequence) and history
            and all(isinstance(p, (str, os.PathLike)) for p in history)):
        paths = expand_inputs([str(p) for p in history])
        return (SortedFileSource(*paths, time=time, time_unit=unit, time_format=fmt,
                                 batch_size=batch_size), ", ".join(paths))
    if isinstance(history, pa.RecordBatch):
        history = pa.Table.from_batches([history])
    if isinstance(history, (pa.Table, pd.DataFrame)):
        what = f"the history ({type(history).__name__})"
        return IterableSource(_in_time_order(history, time, unit, fmt),
                              batch_size=batch_size), what
    if isinstance(history, Sequence) and not isinstance(history, (str, bytes)):
        rows = object_array(list(history))
        return IterableSource(_in_time_order(rows, time, unit, fmt), batch_size=batch_size), \
            "the history (a list of events)"
    raise BacktestError(f"history is files or directories (Parquet, CSV, JSONL), a pandas "
                        f"DataFrame, a pyarrow Table or a list of dicts; got "
                        f"{type(history).__name__}")


def _in_time_order(rows: Any, time: str, unit: str | None, fmt: str | None) -> Any:
    """In-memory rows sorted by event time, stably (as SortedFileSource sorts files); rows
    without a usable time first (the job makes them dead letters)."""
    from cep.time_columns import times_of_column

    if isinstance(rows, np.ndarray):  # events given as dicts: their times are Python values
        values: Any = [r.get(time) if isinstance(r, Mapping) else None for r in rows]
    elif time in _column_names(rows):
        values = rows[time] if isinstance(rows, pd.DataFrame) else rows.column(time)
    else:
        return rows  # the job reports the missing time field
    if not len(values):
        return rows
    column = times_of_column(values, unit, time, fmt)
    keys = np.where(column.bad, np.iinfo(np.int64).min, column.millis)
    return take_rows(rows, np.argsort(keys, kind="stable"))


def _column_names(rows: Any) -> list[str]:
    if isinstance(rows, pd.DataFrame):
        return [str(c) for c in rows.columns]
    return list(rows.column_names)


class _LabelTap(Source):
    """A source passed through as it is, keeping on the way what labels need of each row:
    its time (epoch ms), whether the label says positive, and the text of each key the
    rules use.  The rows are read once, by the job; nothing else reads the history."""

    def __init__(self, inner: Source, *, time: str, unit: str | None, fmt: str | None,
                 label: str, keys: Sequence[tuple[str, ...]], what: str) -> None:
        self.inner = inner
        self.bounded = inner.bounded
        self.time, self.unit, self.fmt, self.label = time, unit, fmt, label
        self.keys = list(keys)
        self.what = what
        self.parts: list[pa.Table] = []
        self.label_seen = False
        self.rows_seen = False

    def partitions(self) -> list[str]:
        return self.inner.partitions()

    def streams(self) -> list[str]:
        return self.inner.streams()

    def read(self, offsets: dict[str, int]) -> Iterator[Chunk]:
        for chunk in self.inner.read(offsets):
            if len(chunk.rows):
                self.rows_seen = True
                self.parts.append(self._keep(chunk.rows))
                chunk.rows = self._labels_said(chunk.rows)
            yield chunk
        if self.rows_seen and not self.label_seen:
            raise self._missing([])

    def _keep(self, rows: Any) -> pa.Table:
        from cep.time_columns import times_of_column

        names = None if isinstance(rows, np.ndarray) else _column_names(rows)
        if names is not None and self.label not in names:
            raise self._missing(names)
        times = times_of_column(_values(rows, self.time), self.unit, self.time, self.fmt)
        label = _values(rows, self.label)
        self.label_seen = self.label_seen or bool(pc.any(pc.is_valid(label)).as_py()
                                                  or names is not None)
        columns = {"ms": pa.array(times.millis), "usable": pa.array(~times.bad),
                   "positive": pa.array(truthy(label, self.label, self.what))}
        for i, key in enumerate(self.keys):
            columns[f"k{i}"] = key_text([_values(rows, f) for f in key])
        return pa.table(columns)

    def _labels_said(self, rows: Any) -> Any:
        """``rows`` with each word among the label column's values (a CSV column of
        true/false holding a ``yes``: null there, kept beside it) in the column as what it
        says, yes or no: matched events carry their labels in output tables, which hold
        no such words (see :mod:`cep.nfa.stray_text`)."""
        stray = stray_text(rows, self.label)
        if stray is None:
            return rows
        column = rows.column(self.label).combine_chunks()
        mask = np.zeros(len(column), np.bool_)
        mask[stray[0]] = True
        said = pa.array(truthy(pa.array(stray[1], pa.string()), self.label, self.what))
        try:
            column = pc.replace_with_mask(column, pa.array(mask), said.cast(column.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return rows
        rows = rows.set_column(rows.schema.get_field_index(self.label), self.label, column)
        return rows.drop_columns([PREFIX + self.label])

    def _missing(self, names: list[str]) -> LabelError:
        shown = f" (its columns: {', '.join(names)})" if names else ""
        return LabelError(f"{self.what}: no label column {self.label!r}{shown}; give --label "
                          "the column that marks known fraud, or leave it out")

    def table(self) -> pa.Table:
        """Everything kept, one row per usable event."""
        if not self.parts:
            schema = {"ms": pa.int64(), "usable": pa.bool_(), "positive": pa.bool_(),
                      **{f"k{i}": pa.string() for i in range(len(self.keys))}}
            return pa.schema(schema).empty_table()
        whole = pa.concat_tables(self.parts)
        return whole.filter(whole.column("usable"))


def _values(rows: Any, name: str) -> pa.Array:
    """One field of a batch's rows as an Arrow array (null where a row lacks it)."""
    if isinstance(rows, np.ndarray):
        items = [r.get(name) if isinstance(r, Mapping) else None for r in rows]
        return _python_array(items)
    if isinstance(rows, pd.DataFrame):
        if name not in rows.columns:
            return pa.nulls(len(rows))
        try:
            return pa.Array.from_pandas(rows[name])
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return _python_array(rows[name].tolist())
    if name not in rows.column_names:
        return pa.nulls(rows.num_rows)
    stray = stray_text(rows, name)
    if stray is not None:  # text among its numbers (a CSV column): each value as it was
        items = rows.column(name).to_pylist()
        for i, text in zip(stray[0].tolist(), stray[1], strict=True):
            items[i] = text
        return _python_array(items)
    return rows.column(name).combine_chunks()


def _python_array(items: list[Any]) -> pa.Array:
    """Python values as one column; values of mixed types as their text."""
    try:
        return pa.array(items, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else str(v) for v in items], pa.string())


def truthy(values: Any, label: str = "label", where: str = "the history") -> np.ndarray:
    """Which label values say yes (see the module docstring): booleans, numbers (non-zero)
    or text; null is no.  Other values raise a :class:`LabelError` naming a few.

    >>> truthy(pa.array([True, None, False])).tolist()
    [True, False, False]
    >>> truthy(pa.array([1, 0, None, 2])).tolist(), truthy(pa.array(["Yes", "no", ""])).tolist()
    ([True, False, False, True], [True, False, False])
    >>> truthy(pa.array(['"no"', "true", "2.5", "0.0"])).tolist()  # JSON text of mixed values
    [False, True, True, False]
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = arr.type
    if pa.types.is_dictionary(kind):
        arr = arr.dictionary_decode()
        kind = arr.type
    if pa.types.is_null(kind):
        return np.zeros(len(arr), np.bool_)
    if pa.types.is_boolean(kind):
        said = arr
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        said = pc.not_equal(arr, pa.scalar(0, kind) if not pa.types.is_decimal(kind) else 0)
        if pa.types.is_floating(kind):
            said = pc.and_kleene(said, pc.invert(pc.is_nan(arr)))
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
        # a column of values of mixed types (true, "no", 2.5) reaches a match's events as
        # JSON text: a text quoted, a number in digits
        quoted = pc.fill_null(pc.match_substring_regex(text, r'^".*"$'), False)
        text = pc.if_else(quoted, pc.utf8_slice_codeunits(text, 1, -1), text)
        said = pc.is_in(text, pa.array(_TRUE))
        known = pc.or_(said, pc.is_in(text, pa.array(_FALSE)))
        number = pc.and_(pc.invert(known), pc.fill_null(
            pc.match_substring_regex(text, _NUMBER_TEXT), False))
        if pc.any(number).as_py():
            value = pc.cast(pc.if_else(number, text, pa.scalar(None, pa.string())), pa.float64())
            said = pc.or_(said, pc.fill_null(pc.and_(pc.not_equal(value, 0.0),
                                                     pc.invert(pc.is_nan(value))), False))
            known = pc.or_(known, number)
        odd = pc.filter(text, pc.and_(pc.invert(known), pc.is_valid(text)))
        if len(odd):
            shown = ", ".join(repr(v) for v in pc.unique(odd).to_pylist()[:3])
            raise LabelError(f"{where}: label column {label!r} holds {shown}: a label is "
                             f"true/false, 1/0, yes/no (or null for no)")
    else:
        raise LabelError(f"{where}: label column {label!r} is {kind}: a label is a boolean, a "
                         "number (non-zero: yes) or the text true/false, yes/no")
    return pc.fill_null(said, False).to_numpy(zero_copy_only=False).astype(np.bool_)


def key_text(columns: Sequence[Any], json_text: Sequence[bool] = ()) -> pa.Array:
    """A key's values as text, the way every table here names a key: one field's value as
    text (``C0001``, ``42``), a composite key's values joined by commas, a comma or
    backslash inside a value escaped by a backslash (so ``("a,b", "c")`` and ``("a",
    "b,c")`` stay two keys).  A column ``json_text`` marks holds JSON text (an output
    table's column of values of mixed types): its values are read first, so the key
    ``"x"`` is ``x`` as the history's own column gives it.

    >>> key_text([pa.array([1, 2])]).to_pylist(), key_text([pa.array(["a"]), pa.array([7])]).to_pylist()
    (['1', '2'], ['a,7'])
    >>> key_text([pa.array(["a,b"]), pa.array(["c"])]).to_pylist()
    ['a\\\\,b,c']
    >>> key_text([pa.array(['"x"', "7"])], [True]).to_pylist()
    ['x', '7']
    """
    parts = []
    for i, column in enumerate(columns):
        arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if i < len(json_text) and json_text[i]:
            arr = _python_array([_json_key(v) for v in arr.to_pylist()])
        if pa.types.is_timestamp(arr.type):  # one text whatever the unit it was read in
            arr = arr.cast(pa.timestamp("us", arr.type.tz))
        try:
            parts.append(pc.cast(arr, pa.string()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            parts.append(_python_array([None if v is None else str(v) for v in arr.to_pylist()]))
    if len(parts) == 1:
        return parts[0]
    escaped = [pc.replace_substring(pc.replace_substring(p, "\\", "\\\\"), ",", "\\,")
               for p in parts]
    return pc.binary_join_element_wise(*escaped, ",")


def _json_key(text: str | None) -> str | None:
    """A key value held as JSON text, as the history's own column gives it as text."""
    value = None if text is None else json.loads(text)
    return None if value is None else str(value)


def _key_fields(rule: Rule) -> tuple[str, ...]:
    return rule.key if isinstance(rule.key, tuple) else (rule.key,)


# ====================================================================== the job
class _Collect(Sink):
    """Keeps what a backtest needs of each match (id, key, start, end, whether it took a
    positive event) a batch at a time, per rule as run; and the first reason each rule
    refused an event for."""

    def __init__(self, runs: Mapping[str, _Run], label: str | None) -> None:
        self.runs = runs
        self.label = label
        self.found: dict[str, list[pa.Table]] = {name: [] for name in runs}
        #: the first reason each rule (None: every rule) refused an event for
        self.refused: dict[str | None, str] = {}

    def write_table(self, table: pa.Table) -> None:
        name = table.column("rule")[0].as_py()
        rule = self.runs[name].rule
        fields, as_json = _key_fields(rule), set(json_columns(table))
        slim = {"match_id": table.column("match_id"),
                "key": key_text([table.column(f) for f in fields],
                                [f in as_json for f in fields]),
                "start": _millis(table.column("start")), "end": _millis(table.column("end"))}
        if self.label is not None:
            slim["positive"] = pa.array(self._took_positive(table, rule))
        self.found[name].append(pa.table(slim))

    def _took_positive(self, table: pa.Table, rule: Rule) -> np.ndarray:
        """Per match: did any stage take an event the label calls positive?"""
        assert self.label is not None
        took = np.zeros(table.num_rows, np.bool_)
        for stage in stage_columns(rule.pattern):
            if stage not in table.column_names:
                continue
            lists = table.column(stage).combine_chunks()
            events = pc.list_flatten(lists)
            if not pa.types.is_struct(events.type) or events.type.get_field_index(
                    self.label) < 0:
                continue
            positive = truthy(pc.struct_field(events, self.label), self.label)
            parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
            took[parents[positive]] = True
        return took

    def write(self, records: list[dict[str, Any]]) -> None:  # dead letters
        for record in records:
            self.refused.setdefault(record.get("rule"), str(record.get("reason")))

    def matches(self, name: str) -> pd.DataFrame:
        """The distinct matches of one rule as run."""
        parts = self.found[name]
        if not parts:
            columns = ["match_id", "key", "start", "end"] + (
                ["positive"] if self.label is not None else [])
            return pd.DataFrame({c: pd.Series(dtype=_DTYPES[c]) for c in columns})
        frame = pa.concat_tables(parts).to_pandas()
        return frame.drop_duplicates("match_id", ignore_index=True)


_DTYPES = {"match_id": object, "key": object, "start": "int64", "end": "int64",
           "positive": bool}


def _millis(column: Any) -> pa.Array:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_timestamp(arr.type):
        arr = pc.cast(pc.cast(arr, pa.timestamp("ms", tz=arr.type.tz)), pa.int64())
    return arr


# ==================================================================== the result
@dataclass
class Backtest:
    """What :func:`backtest` found (pandas frames; see the module docstring for the
    definitions):

    - ``summary``: a row per rule: ``rule``, ``status``, ``old_version``, ``new_version``,
      ``old`` and ``new`` (alerts of each side), ``only_old``, ``only_new``, ``both``, and
      with labels each side's ``precision``, ``recall``, ``alert_precision`` and
      ``ttd_median_s``, ``ttd_p90_s``, ``ttd_max_s`` (``old_precision``, ...);
    - ``matches``: a row per distinct alert: ``rule``, ``side`` (old, new or both),
      ``key_field``, ``key`` (as text), ``match_id``, ``start``, ``end`` (UTC timestamps)
      and, with event labels, ``positive`` (it took a positive event);
    - ``by_day``: ``rule``, ``day`` (UTC day of the alert's end), ``old``, ``new``;
    - ``by_key``: ``rule``, ``key_field``, ``key``, ``old``, ``new`` (and ``positive``
      with labels);
    - ``scores`` (with labels, else None): a row per rule and side it runs on, with the
      counts behind the figures: ``alerts``, ``alerted_keys``, ``positive_keys``,
      ``alerted_positive_keys``, ``detected_keys``, ``positive_alerts`` and the figures;
    - ``problems``: the rules that could not be loaded, compiled or run (the others ran);
      ``warnings``: what else the run noticed; ``job``: the job's
      :class:`~cep.runtime.Summary`.
    """

    summary: pd.DataFrame
    matches: pd.DataFrame
    by_day: pd.DataFrame
    by_key: pd.DataFrame
    scores: pd.DataFrame | None = None
    problems: list[RuleProblem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    job: Summary | None = None
    label: str | None = None
    labels: str = "event"

    def frames(self) -> dict[str, pd.DataFrame]:
        """The tables by the name :meth:`write` gives their files."""
        out = {"summary": self.summary, "matches": self.matches, "by_day": self.by_day,
               "by_key": self.by_key}
        if self.scores is not None:
            out["scores"] = self.scores
        return out

    def write(self, directory: str | os.PathLike[str],
              formats: Sequence[str] = FORMATS) -> list[Path]:
        """Write every table into ``directory`` as ``NAME.parquet`` (types kept: times as
        UTC timestamps, days as dates) and ``NAME.csv`` (for spreadsheets), and the
        problems, one ``FILE: PLACE: WHAT`` a line, as ``problems.txt`` when there are
        some; returns the files written.

        >>> from cep import Pattern
        >>> one = [Rule("any", 1, "k", Pattern.begin("a"))]
        >>> bt = backtest([{"k": 1, "ts": 5}], one, one, time="ts")
        >>> sorted(p.name for p in bt.write("report", formats=["csv"]))
        ['by_day.csv', 'by_key.csv', 'matches.csv', 'summary.csv']
        """
        unknown = [f for f in formats if f not in FORMATS]
        if unknown or isinstance(formats, str):
            raise BacktestError(f"formats are some of {', '.join(FORMATS)}; got {formats!r}")
        out = Path(directory)
        try:
            out.mkdir(parents=True, exist_ok=True)
            written = []
            for name, frame in self.frames().items():
                for fmt in formats:
                    path = out / f"{name}.{fmt}"
                    if fmt == "parquet":
                        frame.to_parquet(path, index=False)
                    else:
                        frame.to_csv(path, index=False)
                    written.append(path)
            if self.problems:
                path = out / "problems.txt"
                path.write_text("".join(f"{p}\n" for p in self.problems), encoding="utf-8")
                written.append(path)
        except OSError as err:
            raise BacktestError(f"cannot write {out}: {err.strerror or err}") from err
        return written

    def tables(self, rows: int = 15) -> list[Any]:
        """The terminal view, as rich tables: the rules, the scores (with labels), then the
        days and keys whose alert counts differ most between the sets (``rows`` of each)."""
        from rich.table import Table

        rules = Table(title="backtest: old rules -> new rules")
        for column in ("rule", "status", "version", "old", "new", "only old", "only new",
                       "both"):
            rules.add_column(column, justify="left" if column in ("rule", "status",
                                                                  "version") else "right")
        for r in self.summary.itertuples(index=False):
            rules.add_row(r.rule, r.status, _versions(r.old_version, r.new_version),
                          *(f"{int(getattr(r, c)):,}" for c in
                            ("old", "new", "only_old", "only_new", "both")))
        out = [rules]
        if self.scores is not None:
            out.append(self._scores_table())
        out.append(_differences(self.by_day.assign(day=self.by_day["day"].astype(str)),
                                ["rule", "day"], "alerts per day (UTC) that differ", rows))
        out.append(_differences(self.by_key, ["rule", "key_field", "key"],
                                "keys whose alerts differ most", rows))
        return out

    def _scores_table(self) -> Any:
        from rich.table import Table

        assert self.scores is not None
        table = Table(title=f"scores against the {self.labels} labels in {self.label!r}")
        columns = ["rule", "side", "alerts", "precision", "recall", "detected", "TTD median",
                   "TTD p90", "TTD max"]
        if self.labels == "event":
            columns.insert(4, "alert precision")
        for column in columns:
            table.add_column(column, justify="left" if column in ("rule", "side") else "right")
        for s in self.scores.to_dict("records"):
            cells = [s["rule"], s["side"], f"{s['alerts']:,}", _share(s["precision"]),
                     _share(s["recall"]),
                     f"{s['detected_keys']:,} of {s['positive_keys']:,}",
                     _seconds(s["ttd_median_s"]), _seconds(s["ttd_p90_s"]),
                     _seconds(s["ttd_max_s"])]
            if self.labels == "event":
                cells.insert(4, _share(s["alert_precision"]))
            table.add_row(*cells)
        return table

    def print(self, console: Any = None) -> None:
        """Print the problems, one ``FILE: PLACE: WHAT`` a line, the warnings and
        :meth:`tables` (to ``console``, a rich Console)."""
        from rich.console import Console

        console = console or Console()
        for line in [*map(str, self.problems), *(f"warning: {w}" for w in self.warnings)]:
            console.print(line, markup=False, highlight=False)
        for table in self.tables():
            console.print(table)


def _versions(old: Any, new: Any) -> str:
    shown = ["-" if pd.isna(v) else str(int(v)) for v in (old, new)]
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} -> {shown[1]}"


def _share(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.3f}"


def _seconds(value: Any) -> str:
    """A duration for people.

    >>> _seconds(42.0), _seconds(3725.4), _seconds(360), _seconds(0.25), _seconds(float("nan"))
    ('42s', '1h 2m 5s', '6m', '0.250s', '-')
    """
    if value is None or pd.isna(value):
        return "-"
    whole = int(round(value))
    if not whole:
        return f"{value:.3f}s"
    hours, rest = divmod(whole, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             f"{seconds}s" if seconds else ""]
    return " ".join(p for p in parts if p)


def _differences(frame: pd.DataFrame, by: list[str], title: str, rows: int) -> Any:
    """The rows of ``frame`` whose old and new counts differ, the largest first."""
    from rich.table import Table

    changed = frame[frame["old"] != frame["new"]]
    gap = (changed["new"] - changed["old"]).abs()
    top = changed.assign(_gap=gap).sort_values(["_gap", *by], ascending=[False] + [True] * len(
        by), kind="stable").head(rows)
    table = Table(title=f"{title} ({len(changed):,})" if len(changed) > rows else title)
    for column in (*by, "old", "new"):
        table.add_column(column.replace("_", " "),
                         justify="right" if column in ("old", "new") else "left")
    for r in top.to_dict("records"):
        table.add_row(*(str(r[c]) for c in by), f"{r['old']:,}", f"{r['new']:,}")
    return table


# ==================================================================== backtest()
def backtest(
    history: Any,
    old: Rules,
    new: Rules,
    *,
    time: str,
    label: str | None = None,
    labels: str = "event",
    engine: str = "auto",
    time_unit: str | None = None,
    time_format: str | None = None,
    batch_size: int = 65536,
) -> Backtest:
    """Run the rules of ``old`` and ``new`` over ``history`` in one pass and compare them
    rule by rule (see the module docstring for what is reported and what it means).

    ``old`` and ``new`` are each a directory or file of rule files, a
    :class:`~cep.rules.RuleSet` or a list of :class:`~cep.rules.Rule`.  ``history`` is what
    ``cep replay`` reads (Parquet, CSV, JSONL files, directories of them, glob patterns)
    or data in memory: a pandas DataFrame, a pyarrow Table, a list of dicts; it is
    replayed in event-time order.  ``time`` names the event-time field (integers are epoch
    milliseconds unless ``time_unit`` says ``s``, ``us`` or ``ns``; text in another layout
    than ISO-8601 takes a ``strptime`` ``time_format``).  ``label`` names a column of known
    fraud, per event (``labels="event"``) or per key (``"key"``).  ``engine`` is
    ``"auto"``, ``"reference"`` or ``"numba"``; both give the same figures.

    A rule that does not load or compile, on either side, is a problem (returned in
    ``problems``, ``FILE: PLACE: WHAT``), as is one that refused every event (a key field
    the history lacks); the others are backtested.  A :class:`LabelError` says the label
    column is missing (naming it and the files) or holds values that are no label.

    >>> from cep import Pattern, col
    >>> pair = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    >>> events = [{"k": "x", "ts": t, "v": v} for t, v in enumerate([1, 2, 1, 2])]
    >>> bt = backtest(events, [Rule("pair", 1, "k", pair)], [], time="ts")
    >>> bt.summary[["rule", "status", "old", "new", "only_old"]].to_dict("records")
    [{'rule': 'pair', 'status': 'removed', 'old': 2, 'new': 0, 'only_old': 2}]
    >>> bt.by_day.to_dict("records")
    [{'rule': 'pair', 'day': datetime.date(1970, 1, 1), 'old': 2, 'new': 0}]
    """
    if labels not in LABEL_KINDS:
        raise BacktestError(f"labels is one of {', '.join(LABEL_KINDS)}, got {labels!r}")
    if engine not in ENGINE_CHOICES:
        raise BacktestError(f"engine is one of {', '.join(ENGINE_CHOICES)}, got {engine!r}")
    old_rules, new_rules = _as_rule_set(old, OLD), _as_rule_set(new, NEW)
    statuses = compare_rules(old_rules, new_rules)
    runs = _runs(statuses)
    problems = [*old_rules.problems, *new_rules.problems, *_kept_versions(statuses, new_rules)]
    source, what = _source(history, time, time_unit, time_format, batch_size)
    key_specs = sorted({_key_fields(r.rule) for r in runs.values()})
    tap = None
    if label is not None:
        source = tap = _LabelTap(source, time=time, unit=time_unit, fmt=time_format,
                                 label=label, keys=key_specs, what=what)
    collect = _Collect(runs, label)
    job_summary = None
    if runs:
        job = (Job(source)
               .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(0))
               .timestamps(time, unit=time_unit, format=time_format)
               .rules([_renamed(name, run.rule) for name, run in runs.items()], engine=engine,
                      timeouts=False)
               .sink(collect, kinds=("match", "dead_letter")))
        job_summary = job.run()
    refused, notes = _refusals(runs, job_summary, collect, {
        OLD: old_rules.sources, NEW: new_rules.sources, BOTH: new_rules.sources})
    matches = _matches(statuses, runs, collect, label is not None and labels == "event")
    keyed = None if tap is None else _positive_keys(tap.table(), key_specs, labels)
    result = _report(statuses, matches, keyed, problems + refused, job_summary, label, labels)
    result.warnings += notes
    return result


def _renamed(name: str, rule: Rule) -> Rule:
    return Rule(name, rule.version, rule.key, rule.pattern, rule.measures)


def _refusals(runs: Mapping[str, _Run], job: Summary | None, collect: _Collect,
              sources: Mapping[str, Mapping[str, str]]) -> tuple[list[RuleProblem], list[str]]:
    """The events rules refused (dead letters).  A rule that refused every event it was
    given cannot run on this history (a field it is keyed by that the history lacks, one
    of the wrong type): a problem.  Fewer, or events no rule could use (no usable time),
    are noted as warnings."""
    problems: list[RuleProblem] = []
    notes: list[str] = []
    if job is None:
        return problems, notes
    if job.dead_letters:
        notes.append(f"{job.dead_letters:,} of {job.events_in:,} events of the history could "
                     f"not be used (e.g. {collect.refused.get(None)})")
    for name, run in runs.items():
        counts = job.rules.get(name, {})
        refused = counts.get("dead_letters", 0)
        if not refused:
            continue
        side = "both sets" if run.side == BOTH else f"the {run.side} set"
        if not counts.get("events"):
            problems.append(RuleProblem(
                sources[run.side].get(run.name, "?"), f"rule {run.name!r}",
                f"refused every event of the history in {side} ({refused:,}): "
                f"{collect.refused.get(name)}", run.name))
        else:
            notes.append(f"rule {run.name!r} in {side} refused {refused:,} "
                         f"event{'s' if refused != 1 else ''} (e.g. "
                         f"{collect.refused.get(name)})")
    return problems, notes


def _matches(statuses: Sequence[RuleStatus], runs: Mapping[str, _Run], collect: _Collect,
             event_labels: bool) -> pd.DataFrame:
    """Every distinct alert of every rule, with the side(s) that raised it."""
    frames = []
    for s in statuses:
        if s.status == UNCHANGED:
            both = collect.matches(f"{BOTH}:{s.name}").assign(side=BOTH)
            frames.append(both.assign(rule=s.name, key_field=_field_text(s.new)))
            continue
        sides = {side: collect.matches(f"{side}:{s.name}") for side in SIDES
                 if f"{side}:{s.name}" in runs}
        if not sides:
            continue
        frames.append(_sided(sides).assign(rule=s.name))
        # a row's key field: its side's (a "both" match is found under either key)
        frames[-1]["key_field"] = np.where(frames[-1]["side"] == OLD, _field_text(s.old),
                                           _field_text(s.new))
    columns = ["rule", "side", "key_field", "key", "match_id", "start", "end"] + (
        ["positive"] if event_labels else [])
    if not frames:
        empty = {c: pd.Series(dtype=_DTYPES.get(c, object)) for c in columns}
        return pd.DataFrame(empty)
    out = pd.concat(frames, ignore_index=True)[columns]
    return out.sort_values(["rule", "end", "start", "match_id"], kind="stable",
                           ignore_index=True)


def _sided(sides: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The matches of a rule run on each side it runs on: old, new or both."""
    if len(sides) == 1:
        [(side, frame)] = sides.items()
        return frame.assign(side=side)
    joined = sides[OLD].merge(sides[NEW], on="match_id", how="outer", suffixes=("", "_new"),
                              indicator=True)
    for column in [c for c in joined.columns if c.endswith("_new")]:
        mine = joined[column[:-4]]
        joined[column[:-4]] = mine.where(mine.notna(), joined[column])
    joined["side"] = joined["_merge"].map({"left_only": OLD, "right_only": NEW, "both": BOTH}
                                          ).astype(object)
    kept = [*sides[OLD].columns, "side"]
    out = joined[kept]
    return out.astype({c: sides[OLD][c].dtype for c in sides[OLD].columns})


def _field_text(rule: Rule | None) -> str | None:
    return None if rule is None else ",".join(_key_fields(rule))


def _positive_keys(kept: pa.Table, key_specs: Sequence[tuple[str, ...]], labels: str
                   ) -> dict[str, pd.DataFrame]:
    """Per key field (as ``key_field`` text): the positive keys and their onset (ms)."""
    out = {}
    for i, spec in enumerate(key_specs):
        frame = pa.table({"key": kept.column(f"k{i}"), "ms": kept.column("ms"),
                          "positive": kept.column("positive")}).to_pandas()
        frame = frame[frame["key"].notna()]
        positive = frame[frame["positive"]]
        if labels == "event":
            onset = positive.groupby("key")["ms"].min()
        else:  # a flagged key's fraud is all of it: from its first event
            onset = frame[frame["key"].isin(positive["key"])].groupby("key")["ms"].min()
        out[",".join(spec)] = onset.rename("onset").reset_index()
    return out


# ====================================================================== reporting
def _report(statuses: Sequence[RuleStatus], matches: pd.DataFrame,
            keyed: dict[str, pd.DataFrame] | None,
            problems: list[RuleProblem], job: Summary | None, label: str | None,
            labels: str) -> Backtest:
    summary = _summary(statuses, matches)
    scores = None
    if keyed is not None:
        scores = _scores(statuses, matches, keyed, labels)
        summary = _with_scores(summary, scores)
    by_key = _by(matches, ["rule", "key_field", "key"])
    if keyed is not None:
        flagged = {(f, k) for f, frame in keyed.items() for k in frame["key"]}
        by_key["positive"] = [(f, k) in flagged for f, k in
                              zip(by_key["key_field"], by_key["key"], strict=True)]
    shown = matches.assign(start=_stamps(matches["start"]), end=_stamps(matches["end"]))
    return Backtest(summary, shown, _by(matches.assign(day=_days(matches["end"])),
                                        ["rule", "day"]),
                    by_key, scores, problems, list(job.warnings) if job else [], job, label,
                    labels)


def _summary(statuses: Sequence[RuleStatus], matches: pd.DataFrame) -> pd.DataFrame:
    counts = pd.crosstab(matches["rule"], matches["side"]).reindex(
        columns=[OLD, NEW, BOTH], fill_value=0)
    rows = []
    for s in statuses:
        c = counts.loc[s.name] if s.name in counts.index else dict.fromkeys((OLD, NEW, BOTH), 0)
        rows.append({"rule": s.name, "status": s.status,
                     "old_version": None if s.old is None else s.old.version,
                     "new_version": None if s.new is None else s.new.version,
                     "old": int(c[OLD] + c[BOTH]), "new": int(c[NEW] + c[BOTH]),
                     "only_old": int(c[OLD]), "only_new": int(c[NEW]), "both": int(c[BOTH])})
    frame = pd.DataFrame(rows, columns=["rule", "status", "old_version", "new_version", "old",
                                        "new", "only_old", "only_new", "both"])
    return frame.astype({"old_version": "Int64", "new_version": "Int64"})


def _on(matches: pd.DataFrame, side: str) -> pd.DataFrame:
    """The alerts one side raised (its own and those both raised)."""
    return matches[matches["side"].isin([side, BOTH])]


def _by(matches: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Alerts of each side per group of ``by``."""
    if matches.empty:
        return pd.DataFrame({**{c: pd.Series(dtype=object) for c in by},
                             OLD: pd.Series(dtype="int64"), NEW: pd.Series(dtype="int64")})
    sides = [_on(matches, side).groupby(by, sort=False).size().rename(side) for side in SIDES]
    out = pd.concat(sides, axis=1).fillna(0).astype("int64").reset_index()
    return out.sort_values(by, kind="stable", ignore_index=True)


def _stamps(millis: pd.Series) -> pd.Series:
    """Epoch milliseconds as UTC timestamps (of milliseconds, as the files keep them)."""
    return pd.to_datetime(millis.astype("int64"), unit="ms", utc=True).astype(
        "datetime64[ms, UTC]")


def _days(millis: pd.Series) -> pd.Series:
    """The UTC day of each time (epoch ms), as dates."""
    return _stamps(millis).dt.date


SCORE_COLUMNS = ["rule", "side", "alerts", "alerted_keys", "positive_keys",
                 "alerted_positive_keys", "detected_keys", "positive_alerts", "precision",
                 "recall", "alert_precision", "ttd_median_s", "ttd_p90_s", "ttd_max_s"]


def _scores(statuses: Sequence[RuleStatus], matches: pd.DataFrame,
            keyed: Mapping[str, pd.DataFrame], labels: str) -> pd.DataFrame:
    rows = []
    for s in statuses:
        for side, rule in ((OLD, s.old), (NEW, s.new)):
            if rule is None or not rule.enabled:
                continue
            alerts = _on(matches[matches["rule"] == s.name], side)
            rows.append({"rule": s.name, "side": side, **_score(
                alerts, keyed[_field_text(rule) or ""], labels)})
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def _score(alerts: pd.DataFrame, onsets: pd.DataFrame, labels: str) -> dict[str, Any]:
    """One rule's figures on one side (see the module docstring)."""
    alerted = alerts["key"].unique()
    positive = onsets["key"]
    hits = np.isin(alerted, positive.to_numpy())
    seen = alerts.merge(onsets, on="key")
    seen = seen[seen["end"] >= seen["onset"]]
    first = seen.groupby("key").agg(end=("end", "min"), onset=("onset", "first"))
    ttd = ((first["end"] - first["onset"]) / 1000).to_numpy(dtype=float)
    n_alerts = len(alerts)
    positive_alerts = int(alerts["positive"].sum()) if labels == "event" else None
    return {
        "alerts": n_alerts, "alerted_keys": len(alerted), "positive_keys": len(positive),
        "alerted_positive_keys": int(hits.sum()), "detected_keys": len(first),
        "positive_alerts": positive_alerts,
        "precision": _ratio(int(hits.sum()), len(alerted)),
        "recall": _ratio(len(first), len(positive)),
        "alert_precision": (_ratio(positive_alerts, n_alerts) if positive_alerts is not None
                            else np.nan),
        "ttd_median_s": float(np.median(ttd)) if len(ttd) else np.nan,
        "ttd_p90_s": float(np.percentile(ttd, 90)) if len(ttd) else np.nan,
        "ttd_max_s": float(ttd.max()) if len(ttd) else np.nan,
    }


def _ratio(part: int, whole: int) -> float:
    """``part / whole``, NaN (null in the files) when ``whole`` is 0.

    >>> _ratio(1, 4), _ratio(0, 0)
    (0.25, nan)
    """
    return part / whole if whole else np.nan


#: the figures of each side the summary shows (with labels)
FIGURES = ("precision", "recall", "alert_precision", "ttd_median_s", "ttd_p90_s", "ttd_max_s")


def _with_scores(summary: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    out = summary
    for side in SIDES:
        part = scores[scores["side"] == side].set_index("rule")[list(FIGURES)]
        out = out.join(part.add_prefix(f"{side}_"), on="rule")
    return out


# ======================================================================= the command
EXAMPLES = """\
examples:
  cep backtest rules/ ../main/rules/ 'history/*.parquet' --time ts
  cep backtest rules/ rules-edited/ history.csv --time ts --label is_fraud --output report/
  cep backtest old.json new.json events.jsonl --time ts --label fraudster --labels key

Both rule sets run over the history in one pass (replayed in event-time order); a rule the
two sets hold alike runs once.  Per rule: its status (unchanged, changed, added, removed,
disabled, or broken when one set has a problem with it), the matches only the old set finds, only the new, both (compared by match id),
then the days and keys whose alert counts differ.  With --label, each set's precision and
recall over keys, alert precision (event labels) and time to detect.  --output writes
summary, matches, by_day, by_key (and scores) as .parquet and .csv, and problems.txt.

Exit status: 0; 1 when a rule has a problem (it is reported as FILE: PLACE: WHAT and the
other rules are backtested); 2 when a path cannot be read or the command is wrong.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``cep backtest`` (on the subcommand's parser)."""
    parser.add_argument("old", metavar="OLD", help="the rules as they are: a directory of "
                        "rule .json files or one rule file")
    parser.add_argument("new", metavar="NEW", help="the rules as they would be (same forms)")
    parser.add_argument("history", metavar="HISTORY", nargs="+",
                        help="Parquet, CSV or JSONL files (also .gz/.zst), directories of "
                        "them, or glob patterns")
    parser.add_argument("--time", required=True, help="event-time field")
    parser.add_argument("--time-unit", choices=TIME_UNITS,
                        help="unit of integer times: s, ms (the default), us or ns")
    parser.add_argument("--time-format", metavar="FORMAT",
                        help="strptime format of text times, when they are not ISO-8601 "
                        "(every text time must then match it)")
    parser.add_argument("--label", metavar="COLUMN",
                        help="a column of known fraud (true/1: fraud; false/0/empty: not)")
    parser.add_argument("--labels", choices=LABEL_KINDS, default="event",
                        help="what --label marks: fraudulent events (default) or keys")
    parser.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                        help="numba, reference or auto (numba when it can); the figures "
                        "are the same")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="write the tables into DIR as .parquet and .csv")
    parser.add_argument("--rows", type=int, default=15, metavar="N",
                        help="rows of the differing days and keys shown (default 15)")


def run_command(args: argparse.Namespace) -> int:
    """``cep backtest`` with parsed ``args``: prints the problems (stderr) and the tables;
    returns the exit status (see :data:`EXAMPLES`)."""
    from rich.console import Console

    try:
        result = backtest(args.history, args.old, args.new, time=args.time, label=args.label,
                          labels=args.labels, engine=args.engine, time_unit=args.time_unit,
                          time_format=args.time_format)
        written = result.write(args.output) if args.output else []
    except CEPError as err:
        print(f"cep backtest: {err}", file=sys.stderr)
        return EXIT_UNREADABLE
    for problem in result.problems:
        print(problem, file=sys.stderr)
    for warning in result.warnings:
        print(f"cep backtest: warning: {warning}", file=sys.stderr)
    console = Console(width=max(Console().width, 120))
    for table in result.tables(args.rows):
        console.print(table)
    if written:
        console.print(f"written: {len(written)} files in {Path(args.output)}/")
    if result.problems:
        n = len(result.problems)
        print(f"cep backtest: {n} rule problem{'s' if n != 1 else ''} (the other rules "
              "were backtested)", file=sys.stderr)
        return EXIT_PROBLEMS
    return 0


__all__ = ["ADDED", "BOTH", "BROKEN", "CHANGED", "DISABLED", "FORMATS", "LABEL_KINDS", "NEW", "OLD",
           "REMOVED", "UNCHANGED", "Backtest", "BacktestError", "LabelError", "RuleStatus",
           "add_arguments", "backtest", "compare_rules", "key_text", "run_command", "truthy"]
