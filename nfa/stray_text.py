"""Text found in a column of numbers, kept beside it in an Arrow table.

A CSV column of numbers may hold a word (``pending``, ``unknown``): Arrow columns have one
type, so the word is null in the column of numbers and kept in a companion column of text
(:data:`PREFIX` + the column's name, null where the value is a number), which exists only
in a batch that has such a word.  Tables with and without it join (Arrow fills a missing
column with nulls), so the batch stays columnar: a rule that reads the column refuses
those rows (its screening, :mod:`cep.nfa.screening`), a rule that does not takes them, and
Python objects made of the rows (:func:`with_stray_text`) hold the word again, as a CSV
reader working row by row would give it.  Output tables, one type per column, hold null.

>>> import pyarrow as pa
>>> t = pa.table({"amount": [2.5, None], PREFIX + "amount": [None, "pending"]})
>>> stray_text(t, "amount")
(array([1]), ['pending'])
>>> without_stray_text(t).column_names
['amount']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cep.nfa.table_names import has_column

#: the name of a column's companion holding its stray text is this and the column's name
PREFIX = "__cep_text:"


def stray_text(table: Any, name: str) -> tuple[np.ndarray, list[str]] | None:
    """The rows of ``table`` whose column ``name`` held text among numbers, and that text;
    None when it held none (or ``table`` is other rows than an Arrow table)."""
    companion = PREFIX + name
    if not (type(table).__module__.startswith("pyarrow") and hasattr(table, "num_rows")
            and has_column(table, companion)):
        return None
    column = table.column(companion)
    if column.null_count == len(column):
        return None
    import pyarrow.compute as pc

    rows = np.flatnonzero(pc.is_valid(column).to_numpy(zero_copy_only=False))
    return rows, column.take(rows).to_pylist()


def has_stray_text(table: Any) -> bool:
    """Does ``table`` (any rows, or an Arrow schema: only an Arrow table can) carry a
    companion column?"""
    names = getattr(table, "column_names", None) or getattr(table, "names", None)
    return isinstance(names, list) and any(n.startswith(PREFIX) for n in names)


def without_stray_text(table: Any) -> Any:
    """``table`` without its companion columns (the same table when it has none)."""
    if not has_stray_text(table):
        return table
    return table.drop_columns([n for n in table.column_names if n.startswith(PREFIX)])


def with_stray_text(rows: list[dict[str, Any]], table: Any) -> list[dict[str, Any]]:
    """``rows`` (the dicts of ``table``'s rows, without the companion columns) with each
    stray text put back in its field; the dicts are changed in place."""
    for field in [n[len(PREFIX):] for n in table.column_names if n.startswith(PREFIX)]:
        found = stray_text(table, field)
        if found is not None:
            for i, text in zip(found[0].tolist(), found[1], strict=True):
                rows[i][field] = text
    return rows


def split_column(values: list[Any], numbers: bool = False) -> tuple[Any, Any] | None:
    """Python values of one field as an Arrow column and its companion of text (None when
    no value is text), or None when they are not one column's values so split: numbers
    (of one kind: integers never become floats, unless ``numbers``, for output tables,
    which hold one type per column) or true/false, with text among them.

    >>> split_column([1, "pending", None])
    (<pyarrow.lib.Int64Array object at ...>
    [
      1,
      null,
      null
    ], <pyarrow.lib.StringArray object at ...>
    [
      null,
      "pending",
      null
    ])
    """
    import pyarrow as pa

    kinds = {_kind(v, numbers) for v in values} - {"null"}
    if "text" not in kinds or len(kinds - {"text"}) != 1 or "other" in kinds:
        return None
    words = [v if isinstance(v, str) else None for v in values]
    rest = [None if isinstance(v, str) else v for v in values]
    try:
        column = pa.array(rest)
        text = pa.array(words, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError,
            UnicodeError):
        return None
    return column, text


def table_of_dicts(rows: list[dict[str, Any]]) -> Any:
    """Events given as dicts (JSON lines Python read) as an Arrow table of the values they
    hold, when a field of numbers or true/false holds text among them (split as
    :func:`split_column` does); None when none does, or some field's values are no one
    column's without changing one (integers among floats, nested values, text Arrow
    cannot hold): such dicts stay dicts.

    >>> table_of_dicts([{"v": 1}, {"v": "x", "w": True}]).column_names
    ['v', 'w', '__cep_text:v']
    >>> table_of_dicts([{"v": 1}, {"v": 2.5}]) is None, table_of_dicts([{"v": 1}]) is None
    (True, True)
    >>> table_of_dicts([{"v": 1}, {"v": 2.5}, {"v": "x"}]) is None  # Python's 1 stays 1
    True
    """
    import pyarrow as pa

    columns: dict[str, Any] = {}
    texts: dict[str, Any] = {}
    for name in dict.fromkeys(k for r in rows for k in r):
        values = [r.get(name) for r in rows]
        kinds = {_kind(v) for v in values} - {"null"}
        if len(kinds) <= 1 and kinds <= {"int", "float", "bool", "text"}:
            try:
                columns[name] = pa.array(values)  # NaN stays NaN, as Python read it
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeError):
                return None  # a lone surrogate escape: text Arrow cannot hold
        words = sum(isinstance(v, str) for v in values)
        if 2 * words > len(values) - values.count(None):
            # text with a few numbers among it, not words among numbers: made a column of
            # numbers, every text would be refused by a rule reading the field (found by
            # an independent check: one 7 among 10,000 types made 10,000 dead letters)
            return None
        split = split_column(values)
        if split is None:
            return None
        columns[name], texts[PREFIX + name] = split
    if not texts:
        return None
    return pa.table({**columns, **texts})


def _kind(v: Any, numbers: bool = False) -> str:
    """What a Python value is to a column: null, bool, int, float (both "number" with
    ``numbers``: integers among floats are floats, as pandas and Spark read them, and
    JSON lines' batches), text or other."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "number" if numbers and abs(v) < 2**53 else "int"
    if isinstance(v, float):
        return "number" if numbers else "float"
    if isinstance(v, str):
        return "text"
    return "other"
