"""Keys as JSON: scalars as themselves, other values tagged, so checkpoints round-trip them."""

from __future__ import annotations

from typing import Any

from cep.errors import CEPError
from cep.runtime.jsonvalue import decode, encode


def encode_key(key: Any) -> Any:
    """A key as JSON: scalars as themselves, tuples (composite keys), bytes, datetimes and
    other plain values tagged (see :mod:`cep.runtime.jsonvalue`).

    >>> encode_key("c1"), encode_key(("c1", 7))
    ('c1', {'$cep': 'tuple', 'v': ['c1', 7]})
    """
    try:
        return encode(key)
    except CEPError as err:
        raise CEPError(f"key {key!r} cannot be checkpointed: {err}") from None


def decode_key(value: Any) -> Any:
    """The key :func:`encode_key` encoded (also ``{"tuple": [...]}``, the form of earlier
    checkpoints).

    >>> decode_key({"$cep": "tuple", "v": ["c1", 7]}), decode_key({"tuple": ["c1", 7]})
    (('c1', 7), ('c1', 7))
    """
    if isinstance(value, dict) and set(value) == {"tuple"}:
        return tuple(decode_key(k) for k in value["tuple"])
    return decode(value)
