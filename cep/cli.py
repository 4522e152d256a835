"""The ``cep`` command: look at a pattern's NFA, or run it over a file.

    cep explain patterns.fraud:card_testing
    cep match ./rules.py:rule events.parquet --key card_id --time ts
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cep.bounded import match
from cep.errors import CEPError
from cep.pattern import Pattern


def load_pattern(spec: str) -> Pattern:
    """Load ``module:attribute`` or ``path/to/file.py:attribute``; call it if it is a function.

    >>> load_pattern("examples.demo:card_testing")  # doctest: +SKIP
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise CEPError(f"pattern {spec!r}: expected module:attribute or file.py:attribute")
    if target.endswith(".py"):
        path = Path(target)
        if not path.exists():
            raise CEPError(f"pattern {spec!r}: no such file {path}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise CEPError(f"pattern {spec!r}: cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            raise CEPError(f"pattern {spec!r}: importing {path} failed: {err!r}") from err
    else:
        # like `python -m`, let modules of the current directory be named
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(target)
        except Exception as err:
            raise CEPError(f"pattern {spec!r}: cannot import module {target!r}: {err!r}") from err
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise CEPError(f"pattern {spec!r}: module {target!r} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, Pattern):
        try:
            value = value()
        except Exception as err:
            raise CEPError(f"pattern {spec!r}: calling {attr}() failed: {err!r}") from err
    if not isinstance(value, Pattern):
        raise CEPError(f"pattern {spec!r}: {attr!r} is a {type(value).__name__}, not a Pattern")
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["replay"]:
        from runtime.replay import main as replay_main

        return replay_main(args_in[1:])
    parser = argparse.ArgumentParser(prog="cep", description="Complex event processing.")
    sub = parser.add_subparsers(dest="command", required=True)
    explain = sub.add_parser("explain", help="print a pattern's compiled NFA")
    explain.add_argument("pattern", help="module:attribute or file.py:attribute")
    run = sub.add_parser("match", help="run a pattern over a Parquet/CSV/JSONL file")
    run.add_argument("pattern", help="module:attribute or file.py:attribute")
    run.add_argument("input", help="Parquet, CSV or JSONL file")
    run.add_argument("--key", help="field to partition by")
    run.add_argument("--time", help="field holding event time")
    run.add_argument("--timeouts", action="store_true", help="also print timed-out partial matches")
    sub.add_parser("replay", help="replay files through the event-time runtime (cep replay -h)")
    args = parser.parse_args(args_in)
    try:
        pattern = load_pattern(args.pattern)
        if args.command == "explain":
            print(pattern.explain())
            return 0
        matches, timeouts = match(
            args.input, pattern, key=args.key, time=args.time, timeouts=True
        )
        for m in matches:
            row = {"key": m.key, "start": m.start, "end": m.end, "events": dict(m)}
            print(json.dumps(_jsonable(row)))
        if args.timeouts:
            for t in timeouts:
                row = {"timeout": t.timestamp, "key": t.key, "events": dict(t)}
                print(json.dumps(_jsonable(row)))
        return 0
    except CEPError as err:
        print(f"cep: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
