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

#: the name of a column's companion holding its stray text is this and the column's name
PREFIX = "__cep_text:"


def stray_text(table: Any, name: str) -> tuple[np.ndarray, list[str]] | None:
    """The rows of ``table`` whose column ``name`` held text among numbers, and that text;
    None when it held none (or ``table`` is other rows than an Arrow table)."""
    companion = PREFIX + name
    names = getattr(table, "column_names", None)
    if not isinstance(names, list) or companion not in names:
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
    for name in table.column_names:
        if name.startswith(PREFIX):
            found = stray_text(table, name[len(PREFIX):])
            if found is not None:
                field = name[len(PREFIX):]
                for i, text in zip(found[0].tolist(), found[1], strict=True):
                    rows[i][field] = text
    return rows
