"""The ``cep`` command: look at a pattern's NFA, run it over files, plot one key's matches,
or replay history through the event-time runtime.

    cep explain cep.patterns.fraud:card_testing
    cep explain cep.patterns.fraud:card_testing --format svg -o card_testing.svg
    cep match 'cep.patterns.fraud:card_testing(tests=4)' 'data/*.parquet' --key card_id --time ts
    cep match rules/card_testing.json events.csv.gz --time ts --timeouts
    cep plot cep.patterns.fraud:card_testing events.csv --key card_id --time ts \\
        --value amount --for C031 -o C031.png
    cep replay cep.patterns.fraud:card_testing data/ --key card_id --time ts --sort \\
        --output out/matches.jsonl

A pattern is named by a spec (:func:`load_pattern`): ``module:attribute``,
``file.py:attribute``, a factory with literal arguments
(``cep.patterns.fraud:card_testing(tests=4, within="5m")``), or a JSON file holding a
pattern (``Pattern.to_json``) or a rule (:mod:`cep.rules`; ``rules.json:NAME`` picks one
rule of several).
"""

from __future__ import annotations

import argparse
import ast
import glob
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time as _time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cep.bounded import key_spec, match
from cep.errors import CEPError
from cep.pattern import Pattern

#: what a pattern spec may be, as error messages say it
SPEC_FORMS = ("module:attribute, file.py:attribute, module:factory(arg=literal, ...) "
              "or a pattern/rule .json file")
TIME_UNITS = ("s", "ms", "us", "ns")
ENGINE_CHOICES = ("auto", "reference", "numba")


def version() -> str:
    """The installed version of cep (what ``cep --version`` prints).

    >>> version().count(".") >= 1
    True
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("cep")
    except PackageNotFoundError:  # a source tree that is not installed
        import cep

        return str(getattr(cep, "__version__", "unknown"))


@dataclass(frozen=True)
class Loaded:
    """What a pattern spec names: the pattern, and the key a rule file gives (else None).

    >>> load("cep.patterns.fraud:card_testing(tests=4)").pattern.stage_names()
    ['small', 'big']
    """

    pattern: Pattern
    key: Any = None
    #: the rule's name when the spec named a rule
    rule: str | None = None

    def key_or(self, given: Any) -> Any:
        """The key to run with: ``given`` (the command line's ``--key``) or the rule's; a
        ``--key`` that contradicts the rule's key is refused rather than silently preferred.

        >>> Loaded(Pattern.begin("a"), key="card_id").key_or(None)
        'card_id'
        >>> Loaded(Pattern.begin("a")).key_or(("card", "merchant"))
        ('card', 'merchant')
        """
        if given is None:
            return self.key
        if self.key is not None and key_spec(list(_as_tuple(given))) != key_spec(
                list(_as_tuple(self.key))):
            raise CEPError(f"rule {self.rule!r} is keyed by {_key_text(self.key)}; --key "
                           f"{_key_text(given)} contradicts it (leave --key out to use the rule's)")
        return given


def _as_tuple(key: Any) -> tuple[Any, ...]:
    return tuple(key) if isinstance(key, (list, tuple)) else (key,)


def _key_text(key: Any) -> str:
    return ",".join(map(str, _as_tuple(key)))


def load_pattern(spec: str) -> Pattern:
    """The pattern a spec names (see :func:`load`): ``module:attribute`` or
    ``file.py:attribute`` (called if it is a function), a factory called with literal
    arguments, or a pattern or rule JSON file.

    >>> load_pattern("cep.patterns.fraud:card_testing").stage_names()
    ['small', 'big']
    >>> from cep.patterns.fraud import card_testing
    >>> load_pattern("cep.patterns.fraud:card_testing(tests=4, within='5m')") == card_testing(
    ...     tests=4, within=timedelta(minutes=5))
    True
    """
    return load(spec).pattern


def load(spec: str) -> Loaded:
    """Load a pattern spec, never evaluating text:

    - ``module:attribute`` or ``path/to/file.py:attribute``: a Pattern, or a function
      returning one (called without arguments);
    - ``module:factory(4, within="10m")``: the function called with these arguments,
      which must be literals (numbers, strings, True/False/None, lists, tuples, dicts;
      read with :func:`ast.literal_eval`); a string given for a parameter whose default
      is a ``timedelta`` is a duration (``"10m"``, ``"30s"``);
    - ``pattern.json``: a pattern saved with :meth:`Pattern.to_json`, or a rule file
      (:mod:`cep.rules`) holding one rule, whose key is then the key to run with;
    - ``rules.json:NAME``: the rule ``NAME`` of a rule file holding several.

    >>> from cep import col
    >>> _ = Path("big.json").write_text(Pattern.begin("big").where(col("amount") > 500).to_json())
    >>> load("big.json").pattern.stage_names()
    ['big']
    >>> load("cep.patterns.fraud:card_testing(tests=__import__('os'))")
    Traceback (most recent call last):
    ...
    cep.errors.CEPError: pattern "cep.patterns.fraud:card_testing(tests=__import__('os'))": argument tests=__import__('os') is not a literal: arguments may be numbers, strings, True, False, None, and lists, tuples or dicts of them (nothing is evaluated)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise CEPError(f"pattern {spec!r}: expected {SPEC_FORMS}")
    if spec.lower().endswith(".json"):
        return _load_json(spec, Path(spec), None)
    head, paren, call = spec.partition("(")
    call = paren + call
    target, sep, attr = head.rpartition(":")
    if target.lower().endswith(".json") and sep and attr and not call:
        return _load_json(spec, Path(target), attr)
    if not sep or not target or not attr.strip():
        raise CEPError(f"pattern {spec!r}: expected {SPEC_FORMS}")
    attr = attr.strip()
    arguments = _call_arguments(spec, call) if call else None
    module = _import(spec, target)
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise CEPError(f"pattern {spec!r}: module {target!r} has no attribute {attr!r}") from None
    if arguments is not None:
        if not callable(value) or isinstance(value, Pattern):
            raise CEPError(f"pattern {spec!r}: {attr!r} is a {type(value).__name__}, not a "
                           "function: it takes no arguments")
        args, kwargs = _durations(spec, value, *arguments)
        value = _call(spec, attr, value, args, kwargs)
    elif callable(value) and not isinstance(value, Pattern):
        value = _call(spec, attr, value, [], {})
    if not isinstance(value, Pattern):
        raise CEPError(f"pattern {spec!r}: {attr!r} is a {type(value).__name__}, not a Pattern")
    return Loaded(value)


def _import(spec: str, target: str) -> Any:
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
        return module
    # like `python -m`, let modules of the current directory be named
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(target)
    except Exception as err:
        raise CEPError(f"pattern {spec!r}: cannot import module {target!r}: {err!r}") from err


def _call(spec: str, attr: str, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as err:
        shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise CEPError(f"pattern {spec!r}: calling {attr}({shown}) failed: {err!r}") from err


def _call_arguments(spec: str, text: str) -> tuple[list[Any], dict[str, Any]]:
    """The literal arguments of ``(a, b=...)``, read with the ``ast`` module, never run."""
    try:
        tree = ast.parse("f" + text, mode="eval")
    except SyntaxError as err:
        raise CEPError(f"pattern {spec!r}: cannot read the arguments {text}: {err.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise CEPError(f"pattern {spec!r}: expected one call such as factory(tests=4) after "
                       "the colon")
    args: list[Any] = []
    for node in call.args:
        if isinstance(node, ast.Starred):
            raise CEPError(f"pattern {spec!r}: *{ast.unparse(node.value)} is not allowed: "
                           "write the arguments out")
        args.append(_literal(spec, node, ast.unparse(node)))
    kwargs: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise CEPError(f"pattern {spec!r}: **{ast.unparse(kw.value)} is not allowed: "
                           "write the arguments out")
        kwargs[kw.arg] = _literal(spec, kw.value, f"{kw.arg}={ast.unparse(kw.value)}")
    return args, kwargs


def _literal(spec: str, node: ast.expr, shown: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CEPError(f"pattern {spec!r}: argument {shown} is not a literal: arguments may "
                       "be numbers, strings, True, False, None, and lists, tuples or dicts of "
                       "them (nothing is evaluated)") from None


def _durations(spec: str, func: Any, args: list[Any], kwargs: dict[str, Any]
               ) -> tuple[list[Any], dict[str, Any]]:
    """Strings given for parameters whose default is a timedelta, read as durations."""
    from cep.durations import parse_duration

    try:
        bound = inspect.signature(func).bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs  # the call itself reports what is wrong
    parameters = inspect.signature(func).parameters
    for name, value in list(bound.arguments.items()):
        if isinstance(value, str) and isinstance(parameters[name].default, timedelta):
            try:
                bound.arguments[name] = timedelta(
                    milliseconds=parse_duration(value, default_unit=None))
            except CEPError as err:
                raise CEPError(f"pattern {spec!r}: {name}: {err}") from None
    return list(bound.args), dict(bound.kwargs)


def _load_json(spec: str, path: Path, name: str | None) -> Loaded:
    """A pattern document (``Pattern.to_json``) or a rule file (:mod:`cep.rules`)."""
    from cep.rules import load_rules_text

    if not path.is_file():
        raise CEPError(f"pattern {spec!r}: no such file {path}")
    try:
        text = path.read_text(encoding="utf-8-sig")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise CEPError(f"pattern {spec!r}: cannot read {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise CEPError(f"pattern {spec!r}: {path} is not valid JSON: {err.msg} (line "
                       f"{err.lineno}, column {err.colno})") from None
    if isinstance(data, dict) and data.get("format") == "cep.pattern/1":
        if name is not None:
            raise CEPError(f"pattern {spec!r}: {path} holds one pattern, not rules: leave out "
                           f":{name}")
        try:
            return Loaded(Pattern.from_json(text))
        except CEPError as err:
            raise CEPError(f"pattern {spec!r}: {path}: {err}") from None
    rules = load_rules_text(text, str(path))
    if name is not None:
        if name not in rules.rules:
            problems = [str(p) for p in rules.problems]
            raise CEPError(f"pattern {spec!r}: {path} has no rule {name!r} (rules: "
                           f"{', '.join(rules.order) or 'none'})"
                           + (f"; problems: {'; '.join(problems)}" if problems else ""))
        rule = rules[name]
    else:
        if rules.problems:
            raise CEPError(f"pattern {spec!r}: {'; '.join(str(p) for p in rules.problems)}")
        if len(rules) != 1:
            raise CEPError(f"pattern {spec!r}: {path} holds {len(rules)} rules "
                           f"({', '.join(rules.order)}): pick one with {path}:NAME")
        rule = next(iter(rules))
    return Loaded(rule.pattern, rule.key, rule.name)


def parse_key(text: str) -> str | tuple[str, ...]:
    """``--key``: a field, or fields separated by commas (a composite key).

    >>> parse_key("card_id"), parse_key("card_id, merchant")
    ('card_id', ('card_id', 'merchant'))
    """
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a field name, or field names separated by commas (card_id,merchant)")
    return parts[0] if len(parts) == 1 else tuple(parts)


def expand_inputs(items: Sequence[str]) -> list[str]:
    """Input arguments with glob patterns (``data/*.parquet``, ``logs/**/*.jsonl.gz``)
    expanded, in name order; plain paths stay as given (directories are read by the
    readers).  A pattern that matches nothing is an error naming it.

    >>> _ = [Path(n).write_text("ts\\n1\\n") for n in ("b.csv", "a.csv")]
    >>> expand_inputs(["*.csv"])
    ['a.csv', 'b.csv']
    """
    out: list[str] = []
    for item in items:
        if not os.path.exists(item) and glob.has_magic(item):
            found = sorted(glob.glob(item, recursive=True))
            if not found:
                raise CEPError(f"{item}: no files match")
            out += found
        else:
            out.append(item)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
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


def _plot(args: argparse.Namespace, loaded: Loaded) -> None:
    from cep.plot import key_events, save_figure, timeline

    key = loaded.key_or(args.key)
    if key is None:
        raise CEPError("cep plot needs --key (the field, or fields, the events are keyed by)")
    inputs = expand_inputs(args.input)
    ke = key_events(inputs if len(inputs) > 1 else inputs[0], loaded.pattern, key=key,
                    time=args.time, key_value=args.key_value, between=(args.since, args.until),
                    engine=args.engine, time_unit=args.time_unit)
    fig = timeline(ke, time=args.time, value=args.value, title=args.title)
    try:
        path = save_figure(fig, args.output)
    except OSError as err:
        raise CEPError(f"cannot write {args.output}: {err.strerror or err}") from err
    n = len(ke.matches)
    print(f"{path}: {_key_text(key)} = {_key_text(ke.key_value)}, {len(ke.events)} events, "
          f"{n} match{'es' if n != 1 else ''}")


def _match(args: argparse.Namespace, loaded: Loaded) -> int:
    """``cep match``: JSON lines on stdout, a count on stderr."""
    from cep.bounded import _read_tables
    from cep.errors import InputError
    from cep.runtime.job import match_record

    started = _time.perf_counter()
    inputs = expand_inputs(args.input)
    table = _read_tables([Path(p) for p in inputs])
    key = loaded.key_or(args.key)
    try:
        found = match(table, loaded.pattern, key=key, time=args.time, timeouts=True,
                      engine=args.engine, time_unit=args.time_unit)
    except InputError as err:
        raise type(err)(f"{', '.join(inputs)}: {err}") from err
    matches, timeouts = found
    if not args.timeouts:
        timeouts = []
    try:
        write = sys.stdout.write
        for m in [*matches, *timeouts]:
            write(json.dumps(_jsonable(match_record(m))) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader has gone (`cep match ... | head -1`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    if not args.quiet:
        counts = f"{len(matches):,} match{'es' if len(matches) != 1 else ''}"
        if args.timeouts:
            counts += f", {len(timeouts):,} timeout{'s' if len(timeouts) != 1 else ''}"
        print(f"cep match: {counts} over {table.num_rows:,} events "
              f"({_time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return 0


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help that keeps the examples' line breaks."""


def _time_unit_help(what: str = "--time") -> str:
    return (f"unit of integer times in {what}: s, ms (the default), us or ns; integers that "
            "look like another unit are refused, not guessed")


EXPLAIN_EXAMPLES = """\
examples:
  cep explain cep.patterns.fraud:card_testing
  cep explain 'cep.patterns.fraud:card_testing(tests=4)' --format svg -o card_testing.svg
  cep explain rules/card_testing.json --format dot | dot -Tpng -o nfa.png
"""

MATCH_EXAMPLES = """\
examples:
  cep match cep.patterns.fraud:card_testing transactions.parquet --key card_id --time ts
  cep match 'cep.patterns.fraud:card_testing(tests=4, within="5m")' 'data/*.csv.gz' \\
      --key card_id,merchant --time ts --time-unit s --timeouts
  cep match rules/card_testing.json data/ --time ts | head -1

One JSON line per match ({"type": "match", "key", "start", "end", "events"}) and, with
--timeouts, per timed-out partial match ({"type": "timeout", ..., "timeout"}); the
count goes to stderr.  The whole input is read and matched in event-time order.
"""

PLOT_EXAMPLES = """\
examples:
  cep plot cep.patterns.fraud:card_testing events.csv --key card_id --time ts \\
      --value amount --for C031 -o C031.png
  cep plot rules/card_testing.json 'data/*.parquet' --time ts --for C031 \\
      --from 2024-03-05T00:00:00Z --to 2024-03-06T00:00:00Z -o C031.svg
"""

MAIN_EXAMPLES = """\
examples:
  cep explain cep.patterns.fraud:card_testing
  cep match cep.patterns.fraud:card_testing transactions.parquet --key card_id --time ts
  cep replay cep.patterns.fraud:card_testing data/ --key card_id --time ts --sort \\
      --output out/matches.jsonl
  cep plot cep.patterns.fraud:card_testing events.csv --key card_id --time ts --for C031 -o C031.png

A PATTERN is module:attribute, file.py:attribute, module:factory(arg=literal, ...), or a
pattern or rule .json file (rules.json:NAME picks one rule).  `cep COMMAND -h` says more.
"""

def add_input_arguments(parser: argparse.ArgumentParser, dest: str, key_help: str) -> None:
    """The arguments every subcommand that reads events shares: the pattern spec, the
    inputs (into ``dest``) and ``--key``."""
    parser.add_argument("pattern", help=PATTERN_HELP)
    parser.add_argument(dest, nargs="+", help="Parquet, CSV or JSONL files (also .gz/.zst), "
                        "directories of them, or glob patterns")
    parser.add_argument("--key", type=parse_key, metavar="FIELD[,FIELD...]", help=key_help)


PATTERN_HELP = ("module:attribute, file.py:attribute, module:factory(tests=4) with literal "
                "arguments, or a pattern/rule .json file (rules.json:NAME)")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``cep`` argument parser and its subcommands' parsers (``replay`` has its own,
    :func:`cep.runtime.replay.main`).

    >>> parser, commands = build_parser()
    >>> sorted(commands)
    ['explain', 'match', 'plot', 'replay']
    """
    parser = argparse.ArgumentParser(
        prog="cep", description="Complex event processing with FlinkCEP's semantics.",
        epilog=MAIN_EXAMPLES, formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"cep {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    explain = sub.add_parser(
        "explain", help="print a pattern's compiled NFA, as text, Graphviz DOT or a picture",
        epilog=EXPLAIN_EXAMPLES, formatter_class=_Formatter)
    explain.add_argument("pattern", help=PATTERN_HELP)
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
    run = sub.add_parser(
        "match", help="run a pattern over Parquet/CSV/JSONL files and print the matches",
        epilog=MATCH_EXAMPLES, formatter_class=_Formatter)
    add_input_arguments(run, "input", "field(s) to partition by; a rule file gives its own")
    run.add_argument("--time", help="field holding event time (default: input order)")
    run.add_argument("--time-unit", choices=TIME_UNITS, help=_time_unit_help())
    run.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                     help="numba (compiled, expressions only), reference (any condition) "
                     "or auto (numba when it can)")
    run.add_argument("--timeouts", action="store_true",
                     help="also print timed-out partial matches")
    run.add_argument("-q", "--quiet", action="store_true", help="no count on stderr")
    plot = sub.add_parser(
        "plot", help="draw one key's events over time with its matches highlighted (PNG/SVG/PDF)",
        epilog=PLOT_EXAMPLES, formatter_class=_Formatter)
    add_input_arguments(plot, "input",
                        "field(s) to partition by (required unless a rule file gives it)")
    plot.add_argument("--time", required=True, help="field holding event time")
    plot.add_argument("--time-unit", choices=TIME_UNITS, help=_time_unit_help())
    plot.add_argument("--for", dest="key_value", required=True, metavar="KEY_VALUE",
                      help="the key to plot (e.g. a card id; VALUE,VALUE for a composite key)")
    plot.add_argument("--value", help="field to plot over time (numeric: a line; else: a row "
                      "of markers per distinct value); default: events as one row of markers")
    plot.add_argument("--from", dest="since", metavar="TIME",
                      help="plot from this time (ISO-8601 or epoch milliseconds)")
    plot.add_argument("--to", dest="until", metavar="TIME",
                      help="plot up to this time (ISO-8601 or epoch milliseconds)")
    plot.add_argument("--title", help="figure title (default: key, event and match counts)")
    plot.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                      help="the engine that finds the matches (default: auto)")
    plot.add_argument("-o", "--output", required=True, metavar="FILE",
                      help="image to write: .png, .svg or .pdf")
    replay = sub.add_parser(
        "replay", add_help=False,
        help="replay history through the event-time runtime: watermarks, late events, "
        "checkpoints, exactly-once files (cep replay -h)")
    return parser, {"explain": explain, "match": run, "plot": plot, "replay": replay}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``cep`` command (``explain``, ``match``, ``plot``, ``replay``); ``argv`` defaults
    to the command line.  Returns the exit status: 0, 2 after printing a
    :class:`~cep.errors.CEPError` (argparse exits with 2 itself for a wrong command line),
    130 when interrupted; ``cep replay`` has more (:func:`cep.runtime.replay.main`).

    >>> main(["explain", "cep.patterns.fraud:card_testing", "-o", "card_testing.dot"])
    0
    >>> Path("card_testing.dot").read_text().startswith("digraph")
    True
    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["replay"]:
        try:
            from cep.runtime.replay import main as replay_main

            return replay_main(args_in[1:])
        except KeyboardInterrupt:  # outside the replay's own handling (start-up, summary)
            print("cep replay: interrupted", file=sys.stderr)
            return 130
    parser, commands = build_parser()
    args = parser.parse_args(args_in)
    command = commands[args.command]
    if args.command == "explain":
        fmt = _explain_format(command, args.format, args.output)
    if args.command == "plot" and Path(args.output).suffix.lower() not in (".png", ".svg", ".pdf"):
        command.error(f"cannot tell the image format from {args.output!r}: use .png, .svg or .pdf")
    if args.command == "match" and args.time_unit and not args.time:
        command.error("--time-unit says how to read the --time field: give --time too")
    try:
        loaded = load(args.pattern)
        if args.command == "explain":
            _explain(loaded.pattern, fmt, args.output, args.renderer)
            return 0
        if args.command == "plot":
            _plot(args, loaded)
            return 0
        return _match(args, loaded)
    except CEPError as err:
        print(f"cep {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"cep {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
