"""The ``cep`` command: look at a pattern's NFA, run it over a file, or plot one key's matches.

    cep explain patterns.fraud:card_testing
    cep explain patterns.fraud:card_testing --format svg -o card_testing.svg
    cep match ./rules.py:rule events.parquet --key card_id --time ts
    cep plot patterns.fraud:card_testing events.csv --key card_id --time ts \\
        --value amount --for C031 -o C031.png
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

    >>> load_pattern("patterns.fraud:card_testing").stage_names()
    ['small', 'big']
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


EXPLAIN_FORMATS = ("text", "dot", "svg", "png")
_SUFFIX_FORMATS = {".txt": "text", ".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png"}


def _explain_format(parser: argparse.ArgumentParser, fmt: str | None, output: str | None) -> str:
    """``--format``, else the one ``-o``'s suffix names, else text; png only into a file."""
    if fmt is None:
        suffix = Path(output).suffix.lower() if output else ""
        if suffix and suffix not in _SUFFIX_FORMATS:
            parser.error(f"cannot tell the format from {output!r}: give --format "
                         f"({', '.join(EXPLAIN_FORMATS)})")
        fmt = _SUFFIX_FORMATS.get(suffix, "text")
    if fmt == "png" and output is None:
        parser.error("--format png writes binary data: give -o FILE")
    return fmt


def _explain(pattern: Pattern, fmt: str, output: str | None, renderer: str) -> None:
    data: str | bytes
    if fmt == "text":
        data = str(pattern.explain()) + "\n"
    elif fmt == "dot":
        data = pattern.to_dot() + "\n"
    elif fmt == "svg":
        data = pattern.to_svg(renderer)
    else:
        data = pattern.to_png(renderer)
    if output is None:
        assert isinstance(data, str)
        sys.stdout.write(data)
        return
    try:
        if isinstance(data, str):
            Path(output).write_text(data, encoding="utf-8")
        else:
            Path(output).write_bytes(data)
    except OSError as err:
        raise CEPError(f"cannot write {output}: {err.strerror or err}") from err


def _plot(args: argparse.Namespace, pattern: Pattern) -> None:
    from cep.plot import key_events, save_figure, timeline

    ke = key_events(args.input, pattern, key=args.key, time=args.time, key_value=args.key_value,
                    between=(args.since, args.until))
    fig = timeline(ke, time=args.time, value=args.value, title=args.title)
    try:
        path = save_figure(fig, args.output)
    except OSError as err:
        raise CEPError(f"cannot write {args.output}: {err.strerror or err}") from err
    n = len(ke.matches)
    print(f"{path}: {args.key} = {ke.key_value}, {len(ke.events)} events, "
          f"{n} match{'es' if n != 1 else ''}")


def main(argv: Sequence[str] | None = None) -> int:
    """The ``cep`` command (``explain``, ``match``, ``plot``, ``replay``); ``argv`` defaults
    to the command line.  Returns the exit status: 0, or 2 after printing a
    :class:`~cep.errors.CEPError`.

    >>> main(["explain", "patterns.fraud:card_testing", "-o", "card_testing.dot"])
    0
    >>> Path("card_testing.dot").read_text().startswith("digraph")
    True
    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["replay"]:
        from runtime.replay import main as replay_main

        return replay_main(args_in[1:])
    parser = argparse.ArgumentParser(prog="cep", description="Complex event processing.")
    sub = parser.add_subparsers(dest="command", required=True)
    explain = sub.add_parser(
        "explain", help="print a pattern's compiled NFA, as text, Graphviz DOT or a picture"
    )
    explain.add_argument("pattern", help="module:attribute or file.py:attribute")
    explain.add_argument(
        "--format", "-f", choices=EXPLAIN_FORMATS,
        help="text (default), dot (Graphviz source), svg or png (a picture of the NFA; "
        "png needs -o); default: from the suffix of -o, else text",
    )
    explain.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    explain.add_argument(
        "--renderer", choices=("auto", "graphviz", "matplotlib"), default="auto",
        help="who draws svg/png: Graphviz's dot, matplotlib, or auto (dot when on PATH)",
    )
    run = sub.add_parser("match", help="run a pattern over a Parquet/CSV/JSONL file")
    run.add_argument("pattern", help="module:attribute or file.py:attribute")
    run.add_argument("input", help="Parquet, CSV or JSONL file")
    run.add_argument("--key", help="field to partition by")
    run.add_argument("--time", help="field holding event time")
    run.add_argument("--timeouts", action="store_true", help="also print timed-out partial matches")
    plot = sub.add_parser(
        "plot", help="draw one key's events over time with its matches highlighted (PNG/SVG/PDF)"
    )
    plot.add_argument("pattern", help="module:attribute or file.py:attribute")
    plot.add_argument("input", help="Parquet, CSV or JSONL file")
    plot.add_argument("--key", required=True, help="field to partition by")
    plot.add_argument("--time", required=True, help="field holding event time")
    plot.add_argument("--for", dest="key_value", required=True, metavar="KEY_VALUE",
                      help="the key to plot (e.g. a card id)")
    plot.add_argument("--value", help="field to plot over time (numeric: a line; else: a row "
                      "of markers per distinct value); default: events as one row of markers")
    plot.add_argument("--from", dest="since", metavar="TIME",
                      help="plot from this time (ISO-8601 or epoch milliseconds)")
    plot.add_argument("--to", dest="until", metavar="TIME",
                      help="plot up to this time (ISO-8601 or epoch milliseconds)")
    plot.add_argument("--title", help="figure title (default: key, event and match counts)")
    plot.add_argument("-o", "--output", required=True, metavar="FILE",
                      help="image to write: .png, .svg or .pdf")
    sub.add_parser("replay", help="replay files through the event-time runtime (cep replay -h)")
    args = parser.parse_args(args_in)
    if args.command == "explain":
        fmt = _explain_format(explain, args.format, args.output)
    if args.command == "plot" and Path(args.output).suffix.lower() not in (".png", ".svg", ".pdf"):
        plot.error(f"cannot tell the image format from {args.output!r}: use .png, .svg or .pdf")
    try:
        pattern = load_pattern(args.pattern)
        if args.command == "explain":
            _explain(pattern, fmt, args.output, args.renderer)
            return 0
        if args.command == "plot":
            _plot(args, pattern)
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
