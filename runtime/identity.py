"""What a checkpoint records of the job it belongs to, so a resume can tell it is the same job.

A checkpoint resumed by another job gives wrong output without an error: another input
file starts at the old offsets, another key field mixes partial matches of different
keys, another time unit shifts every window.  The identity lists what must not change
across a resume - the pattern (expressions as their JSON; Python conditions by their
code and the values they capture, so two lambdas of one shape differ), the engine, the
key and time fields, the time unit, the options that shape the output, the watermark
strategy, and the input (file names and sizes; a watched directory by its path) - and a
checkpoint keeps it, so a refusal can say what differs.

>>> from cep import Pattern, col
>>> from cep.runtime.sources import IterableSource
>>> a = {"pattern": pattern_identity(Pattern.begin("a").where(col("v") > 1)), "key": "card"}
>>> b = {**a, "key": "merchant"}
>>> fingerprint(a) == fingerprint(b), differences(a, b)
(False, ["key: 'card' in the checkpoint, 'merchant' now"])
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from cep.errors import CEPError
from cep.pattern import Pattern

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def fingerprint(identity: dict[str, Any]) -> str:
    """A short digest of an identity (canonical JSON), as checkpoints record it.

    >>> fingerprint({"engine": "numba"}).startswith("numba:")
    True
    """
    text = json.dumps(identity, sort_keys=True, default=str)
    return f"{identity.get('engine', '')}:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between a checkpoint's identity and this job's, one line per field.

    >>> differences({"key": "card", "engine": "numba"}, {"key": "card", "engine": "reference"})
    ["engine: 'numba' in the checkpoint, 'reference' now"]
    """
    out = []
    for name in sorted(set(before) | set(now)):
        old, new = before.get(name), now.get(name)
        if json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True,
                                                                      default=str):
            out.append(f"{name}: {_short(old)} in the checkpoint, {_short(new)} now")
    return out


def pattern_identity(pattern: Pattern) -> str:
    """The pattern as text that changes whenever its meaning can: its JSON when every
    condition is an expression, else its structure with each Python callable's code,
    constants, defaults and captured values (a lambda's name alone, ``<lambda>``, would
    not tell ``lambda e: e["v"] < 3`` from ``lambda e: e["v"] < 4``).

    >>> p3 = Pattern.begin("a").where(lambda e: e["v"] < 3)
    >>> p4 = Pattern.begin("a").where(lambda e: e["v"] < 4)
    >>> pattern_identity(p3) == pattern_identity(p4)
    False
    """
    try:
        return pattern.to_json()
    except CEPError:
        return repr(_stable(pattern.key()))


def callable_identity(fn: Any, depth: int = 0) -> str:
    """A callable as text: module, qualified name, bytecode, constants, names, defaults and
    captured values (memory addresses taken out, so the same code reads the same in every
    process).  Depends on the Python version (bytecode): a resume under another Python
    refuses a checkpoint of Python conditions, which is the safe side.

    >>> callable_identity(len)
    'builtins.len'
    """
    if depth > _DEPTH:
        return type(fn).__qualname__
    code = getattr(fn, "__code__", None)
    if code is not None:
        cells = [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
        return (f"{fn.__module__}.{fn.__qualname__}[{_code(code, depth)}] "
                f"defaults={_text(fn.__defaults__, depth)} "
                f"kwdefaults={_text(fn.__kwdefaults__, depth)} captured={_text(cells, depth)}")
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None:
        return (f"partial({callable_identity(inner, depth + 1)}, "
                f"{_text(getattr(fn, 'args', ()), depth)}, "
                f"{_text(getattr(fn, 'keywords', {}), depth)})")
    name = getattr(fn, "__qualname__", None)
    if name is not None:  # builtins and methods of builtins
        return f"{getattr(fn, '__module__', None) or ''}.{name}"
    kind = type(fn)  # an object with __call__: its class and its attributes
    state = _text(vars(fn), depth) if hasattr(fn, "__dict__") else _text(fn, depth)
    return f"{kind.__module__}.{kind.__qualname__}({state})"


def source_identity(source: Any) -> dict[str, Any]:
    """The input as a checkpoint knows it: the kind of source, its files with their sizes
    (a watched directory: its path, since files arrive while it runs), or its partitions.

    >>> from cep.runtime.sources import IterableSource
    >>> source_identity(IterableSource([1], [2]))
    {'kind': 'IterableSource', 'partitions': ['memory-0', 'memory-1']}
    """
    kind = type(source).__name__
    if kind == "DirectorySource":
        return {"kind": kind, "directory": str(Path(source.directory).resolve())}
    files = getattr(source, "files", None)
    if files:
        listed = []
        for f in files:
            path = Path(f)
            size = path.stat().st_size if path.exists() else None
            listed.append([str(path.resolve()), size])
        out: dict[str, Any] = {"kind": kind, "files": listed}
        if getattr(source, "in_order", False):  # one stream: another watermark
            out["in_order"] = True
        if getattr(source, "time", None) is not None:  # a sorted source: its sort field
            out["sorted_by"] = [source.time, getattr(source, "time_unit", None)]
            if getattr(source, "time_format", None) is not None:
                out["sorted_by"].append(source.time_format)
        return out
    return {"kind": kind, "partitions": list(source.partitions())}


def field_identity(spec: Any) -> Any:
    """A key or time spec: a field name, a tuple of names, or a function's identity.

    >>> field_identity(("card", "merchant")), field_identity(None)
    (['card', 'merchant'], None)
    """
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, (tuple, list)):
        return [field_identity(s) for s in spec]
    if callable(spec):
        return callable_identity(spec)
    return _text(spec, 0)


#: how deep captured values are followed (a function that captures itself ends here)
_DEPTH = 4


def _stable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return tuple(_stable(v) for v in value)
    return _text(value, 0)


def _code(code: Any, depth: int) -> str:
    consts = tuple(_code(c, depth) if hasattr(c, "co_code") else c for c in code.co_consts)
    return f"{code.co_code.hex()}|{_text(consts, depth)}|{code.co_names}|{code.co_varnames}"


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


def _text(value: Any, depth: int) -> str:
    if depth > _DEPTH:
        return type(value).__qualname__
    if callable(value) and not isinstance(value, type):
        return f"fn:{callable_identity(value, depth + 1)}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_text(v, depth + 1) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_text(k, depth + 1)}: {_text(v, depth + 1)}"
                               for k, v in value.items()) + "}"
    return _ADDRESS.sub("", repr(value))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
