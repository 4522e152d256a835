"""Keys as JSON: scalars as themselves, tuples tagged, so checkpoints round-trip them."""

from __future__ import annotations

from typing import Any

from cep.errors import CEPError


def encode_key(key: Any) -> Any:
    """A key as JSON: scalars as themselves, tuples (composite keys) tagged.

    >>> encode_key("c1"), encode_key(("c1", 7))
    ('c1', {'tuple': ['c1', 7]})
    """
    if key is None or isinstance(key, (bool, int, float, str)):
        return key
    if isinstance(key, tuple):
        return {"tuple": [encode_key(k) for k in key]}
    if hasattr(key, "item"):  # numpy scalar
        return encode_key(key.item())
    raise CEPError(f"key {key!r} ({type(key).__name__}) cannot be checkpointed: use str/int keys")


def decode_key(value: Any) -> Any:
    """The key :func:`encode_key` encoded.

    >>> decode_key({"tuple": ["c1", 7]})
    ('c1', 7)
    """
    if isinstance(value, dict):
        return tuple(decode_key(k) for k in value["tuple"])
    return value
