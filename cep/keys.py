"""Keys: how a key is given (a field, fields, a function) and how keys are written as JSON
(scalars as themselves, other values tagged, so checkpoints round-trip them)."""

from __future__ import annotations

from typing import Any

from cep.errors import CEPError, InputError
from cep.jsonvalue import decode, encode


def encode_key(key: Any) -> Any:
    """A key as JSON: scalars as themselves, tuples (composite keys), bytes, datetimes and
    other plain values tagged (see :mod:`cep.jsonvalue`).

    >>> encode_key("c1"), encode_key(("c1", 7))
    ('c1', {'$cep': 'tuple', 'v': ['c1', 7]})
    """
    try:
        return encode(key)
    except CEPError as err:
        raise CEPError(f"key {key!r} cannot be checkpointed: {err}") from None


def encode_keys(keys: list[Any]) -> list[Any]:
    """:func:`encode_key` of each of ``keys``; a list of text or integer keys as it is
    (an engine's keys, at every checkpoint: a hundred rules hold hundreds of thousands).

    >>> encode_keys(["c1", "c2"]), encode_keys([("c1", 7)])
    (['c1', 'c2'], [{'$cep': 'tuple', 'v': ['c1', 7]}])
    """
    if set(map(type, keys)) <= {str, int}:
        return list(keys)
    return [encode_key(k) for k in keys]


def decode_key(value: Any) -> Any:
    """The key :func:`encode_key` encoded (also ``{"tuple": [...]}``, the form of earlier
    checkpoints).

    >>> decode_key({"$cep": "tuple", "v": ["c1", 7]}), decode_key({"tuple": ["c1", 7]})
    (('c1', 7), ('c1', 7))
    """
    if isinstance(value, dict) and set(value) == {"tuple"}:
        return tuple(decode_key(k) for k in value["tuple"])
    return decode(value)


def key_spec(key: Any) -> Any:
    """A key as cep reads it: None, a field name, a function, or a tuple of field names (a
    composite key, whose value is the tuple of the fields' values).

    >>> key_spec(["card", "merchant"]), key_spec(["card"]), key_spec("card")
    (('card', 'merchant'), 'card', 'card')
    """
    if isinstance(key, (list, tuple)):
        if not key or not all(isinstance(k, str) for k in key):
            raise InputError(f"key {key!r}: a composite key is a non-empty list of field names")
        return tuple(key) if len(key) > 1 else key[0]
    if key is not None and not isinstance(key, str) and not callable(key):
        raise InputError(f"key {key!r}: give a field name, a list of field names or a function")
    return key
