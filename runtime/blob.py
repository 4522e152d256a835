"""Operator state as one self-describing byte string (for state stores that hold bytes).

Layout: a magic line, the header's length (8 bytes, little-endian), the header
(JSON: plain metadata and where each part lies), then the parts: numeric numpy
arrays in ``.npy`` format (read back with ``allow_pickle=False``) and opaque
byte strings (Arrow IPC files of events).  Nothing is ever unpickled.

>>> import numpy as np
>>> data = pack({"watermark": 7}, {"a": np.arange(3)}, {"rows": b"xyz"})
>>> meta, arrays, blobs = unpack(data)
>>> meta["watermark"], arrays["a"].tolist(), blobs["rows"]
(7, [0, 1, 2], b'xyz')
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import numpy as np

from cep.runtime.checkpoint import CheckpointError, array_bytes

MAGIC = b"CEPSTATE/1\n"


def pack(meta: dict[str, Any], arrays: dict[str, np.ndarray], blobs: dict[str, bytes]) -> bytes:
    """One byte string holding JSON ``meta``, numeric ``arrays`` and opaque ``blobs``.

    >>> pack({"n": 1}, {}, {}).startswith(MAGIC)
    True
    """
    parts: list[bytes] = []
    index: list[list[Any]] = []
    offset = 0
    for kind, items in (("array", arrays), ("bytes", blobs)):
        for name, value in items.items():
            data = array_bytes(value) if kind == "array" else bytes(value)
            index.append([name, kind, offset, len(data)])
            parts.append(data)
            offset += len(data)
    header = json.dumps({"meta": meta, "parts": index}, separators=(",", ":")).encode()
    return b"".join([MAGIC, struct.pack("<Q", len(header)), header, *parts])


def unpack(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, bytes]]:
    """``(meta, arrays, blobs)`` from :func:`pack` output; anything else is a
    :class:`~cep.runtime.checkpoint.CheckpointError` saying what is wrong.

    >>> unpack(pack({"n": 1}, {}, {"b": b"1"}))
    ({'n': 1}, {}, {'b': b'1'})
    >>> unpack(b"pickle")
    Traceback (most recent call last):
    ...
    cep.errors.CheckpointError: state is not cep state (starts with b'pickle', expected b'CEPSTATE/1\\n')
    """
    if not data.startswith(MAGIC):
        raise CheckpointError(
            f"state is not cep state (starts with {bytes(data[:12])!r}, expected {MAGIC!r})"
        )
    pos = len(MAGIC)
    if len(data) < pos + 8:
        raise CheckpointError("state is truncated (no header)")
    (n,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    try:
        header = json.loads(bytes(data[pos:pos + n]))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"state header is not JSON ({err})") from err
    body = pos + n
    arrays: dict[str, np.ndarray] = {}
    blobs: dict[str, bytes] = {}
    for name, kind, offset, length in header["parts"]:
        lo, hi = body + offset, body + offset + length
        if hi > len(data):
            raise CheckpointError(f"state is truncated (part {name!r} ends past the data)")
        if kind == "array":
            arrays[name] = np.load(io.BytesIO(data[lo:hi]), allow_pickle=False)
        else:
            blobs[name] = bytes(data[lo:hi])
    return header["meta"], arrays, blobs


__all__ = ["pack", "unpack"]
