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

A pattern is named by a spec (:func:`cep.runtime.specs.load`): ``module:attribute``,
``file.py:attribute``, a factory with literal arguments
(``cep.patterns.fraud:card_testing(tests=4, within="5m")``), or a JSON file holding a
pattern (``Pattern.to_json``) or a rule (:mod:`cep.rules`; ``rules.json:NAME`` picks one
rule of several).

The command sits on top of the runtime: it imports :mod:`cep.runtime.replay` (for
``cep replay``), and both read pattern specs with :mod:`cep.runtime.specs`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time as _time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cep.errors import CEPError
from cep.pattern import Pattern
from cep.runtime.bounded import match
from cep.runtime.specs import (
    ENGINE_CHOICES,
    PATTERN_HELP,
    TIME_UNITS,
    Loaded,
    _key_text,
    add_cap_arguments,
    add_input_arguments,
    expand_inputs,
    load,
)


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
    from cep.runtime.plot import key_events, save_figure, timeline

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
    """``cep match``: the table of matches (:mod:`cep.runtime.tables`) as JSON lines on
    stdout or in ``--output``'s format, a count on stderr."""
    from cep.errors import InputError
    from cep.runtime.bounded import in_files, read_inputs
    from cep.runtime.tables import json_lines, write_table

    started = _time.perf_counter()
    if loaded.rule is not None and not loaded.enabled:
        print(f"cep match: note: rule {loaded.rule!r} is disabled (\"enabled\": false); it "
              "runs because it is named on its own", file=sys.stderr)
    inputs = expand_inputs(args.input)
    sizes: list[tuple[str, int]] = []
    events = read_inputs([Path(p) for p in inputs], sizes)
    key = loaded.key_or(args.key)
    try:
        table = match(events, loaded.pattern, key=key, time=args.time, timeouts=args.timeouts,
                      engine=args.engine, time_unit=args.time_unit,
                      max_partial_matches=args.max_partial_matches,
                      on_overflow=args.on_overflow, output="arrow",
                      measures=loaded.measures or None)
    except InputError as err:
        raise type(err)(in_files(str(err), ", ".join(inputs), sizes)) from err
    if loaded.rule is not None and loaded.version is not None:
        table = _with_rule_columns(table, loaded)
    if args.output:
        where = f" into {write_table(table, args.output)}"
    else:
        where = ""
        try:
            write = sys.stdout.write
            for line in json_lines(table):
                write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            _reader_gone()
            return 0
    if not args.quiet:
        kinds = table.column("kind").to_pylist() if table.num_rows else []
        n, t = kinds.count("match"), kinds.count("timeout")
        counts = f"{n:,} match{'es' if n != 1 else ''}"
        if args.timeouts:
            counts += f", {t:,} timeout{'s' if t != 1 else ''}"
        n_events = events.num_rows if hasattr(events, "num_rows") else len(events)
        print(f"cep match: {counts} over {n_events:,} events{where} "
              f"({_time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return 0


def _with_rule_columns(table: Any, loaded: Loaded) -> Any:
    """A rule's matches name the rule and its version, after ``kind``, as a rule set's
    records do (``cep replay rules/``)."""
    import pyarrow as pa

    taken = [name for name in ("rule", "version") if name in table.column_names]
    if taken:
        raise CEPError(f"rule {loaded.rule!r}: a column {taken[0]!r} is in the output already "
                       "(a key field or measure of that name): rename it")
    at = table.column_names.index("kind") + 1
    table = table.add_column(at, "rule", pa.array([loaded.rule] * table.num_rows, pa.string()))
    return table.add_column(at + 1, "version",
                            pa.array([loaded.version] * table.num_rows, pa.int64()))


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

  cep match cep.patterns.fraud:card_testing transactions.parquet --key card_id --time ts \\
      --output matches.parquet

One row per match and, with --timeouts, per timed-out partial match: the key fields,
kind, match_id, start, end, timeout_at, one column per stage (the events it took) - the
table cep.match(..., output="arrow") and Spark's match_batch give.  As JSON lines on
stdout, or into --output (.parquet, .csv or .jsonl); the count goes to stderr.  The whole
input is read and matched in event-time order.
"""

PLOT_EXAMPLES = """\
examples:
  cep plot cep.patterns.fraud:card_testing events.csv --key card_id --time ts \\
      --value amount --for C031 -o C031.png
  cep plot rules/card_testing.json 'data/*.parquet' --time ts --for C031 \\
      --from 2024-03-05T00:00:00Z --to 2024-03-06T00:00:00Z -o C031.svg
"""

RULES_EXAMPLES = """\
examples:
  cep rules check rules/
  cep rules check rules/card_testing.json -q

Every rule is loaded (JSON, fields, types), its pattern compiled (FlinkCEP's rules) and
its expressions type-checked; a broken rule never stops the others from being checked.
Each problem is one line, FILE: PLACE: WHAT (PLACE is a JSON path such as
$.rules[2].pattern, or the line and column of a JSON syntax error).  Exit status 0 when
every rule is fine, 1 when some are not, 2 when RULES cannot be read.
"""

MAIN_EXAMPLES = """\
examples:
  cep explain cep.patterns.fraud:card_testing
  cep match cep.patterns.fraud:card_testing transactions.parquet --key card_id --time ts
  cep replay cep.patterns.fraud:card_testing data/ --key card_id --time ts --sort \\
      --output out/matches.jsonl
  cep plot cep.patterns.fraud:card_testing events.csv --key card_id --time ts --for C031 -o C031.png
  cep rules check rules/
  cep backtest rules/ rules-edited/ 'history/*.parquet' --time ts --label is_fraud

A PATTERN is module:attribute, file.py:attribute, module:factory(arg=literal, ...), or a
pattern or rule .json file (rules.json:NAME picks one rule).  `cep COMMAND -h` says more.
"""

def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``cep`` argument parser and its subcommands' parsers (``replay`` has its own,
    :func:`cep.runtime.replay.main`).

    >>> parser, commands = build_parser()
    >>> sorted(commands)
    ['backtest', 'explain', 'match', 'plot', 'replay', 'rules']
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
    run.add_argument("-o", "--output", metavar="FILE",
                     help="write the matches to FILE (.parquet, .csv or .jsonl), not stdout")
    add_cap_arguments(run)
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
    rules = sub.add_parser(
        "rules", help="work with rule files (cep rules check DIR)",
        epilog=RULES_EXAMPLES, formatter_class=_Formatter)
    rules_sub = rules.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = rules_sub.add_parser(
        "check", help="load, compile and type-check every rule of a directory or file",
        epilog=RULES_EXAMPLES, formatter_class=_Formatter)
    check.add_argument("rules", metavar="RULES",
                       help="a directory of rule .json files (read in name order, "
                       "subdirectories included) or one rule file")
    check.add_argument("-q", "--quiet", action="store_true",
                       help="print only the problems (and nothing when there are none)")
    from cep.runtime.backtest import EXAMPLES as BACKTEST_EXAMPLES
    from cep.runtime.backtest import add_arguments as add_backtest_arguments

    backtest = sub.add_parser(
        "backtest", help="compare two rule sets over the same history: matches only in the "
        "old, only in the new, in both; precision and recall with --label",
        epilog=BACKTEST_EXAMPLES, formatter_class=_Formatter)
    add_backtest_arguments(backtest)
    return parser, {"explain": explain, "match": run, "plot": plot, "replay": replay,
                    "rules": rules, "backtest": backtest}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``cep`` command (``explain``, ``match``, ``plot``, ``replay``, ``rules``,
    ``backtest``: :func:`cep.runtime.backtest.run_command`); ``argv`` defaults
    to the command line.  Returns the exit status: 0, 2 after printing a
    :class:`~cep.errors.CEPError` (argparse exits with 2 itself for a wrong command line),
    130 when interrupted; ``cep replay`` has more (:func:`cep.runtime.replay.main`).

    >>> main(["explain", "cep.patterns.fraud:card_testing", "-o", "card_testing.dot"])
    0
    >>> Path("card_testing.dot").read_text().startswith("digraph")
    True
    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    with _said_plainly(f"cep {args_in[0]}" if args_in else "cep"):
        return _main(args_in)


@contextlib.contextmanager
def _said_plainly(prog: str) -> Iterator[None]:
    """cep's own warnings (a field no event has, a rule file that changed badly, ...)
    printed as ``cep replay: warning: ...``, not as Python shows a warning (the file and
    line of the code that raised it, then that line)."""
    shown = warnings.showwarning

    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if category.__module__.startswith("cep."):
            print(f"{prog}: warning: {message}", file=sys.stderr if file is None else file)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def _main(args_in: list[str]) -> int:
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
    if args.command == "backtest":
        from cep.runtime.backtest import run_command

        return run_command(args)
    if args.command == "rules":
        try:
            return _check_rules(args.rules, args.quiet)
        except CEPError as err:
            print(f"cep rules check: {err}", file=sys.stderr)
            return 2
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


def _check_rules(path: str, quiet: bool) -> int:
    """``cep rules check``: each rule that is fine (unless ``quiet``) and each problem, one
    line each, then a count; 1 when there are problems.

    >>> import json, tempfile
    >>> from cep import Pattern, col
    >>> folder = Path(tempfile.mkdtemp())
    >>> good = {"name": "big", "version": 2, "key": "card_id",
    ...         "pattern": json.loads(Pattern.begin("a").where(col("amount") > 500).to_json())}
    >>> _ = (folder / "big.json").write_text(json.dumps(good))
    >>> _ = (folder / "broken.json").write_text('{"name": "x",')
    >>> _check_rules(str(folder), quiet=False)  # doctest: +ELLIPSIS
    ok   big (version 2, key card_id) .../big.json
    .../broken.json: line 1, column 14: not valid JSON: Expecting property name enclosed in double quotes
    1 rule fine (1 enabled), 1 problem
    1
    """
    from cep.rules import load_rules

    rules = load_rules(path).check()
    if not len(rules) and not rules.problems:  # a wrong path, or files of another suffix
        print(f"{path}: no rules (no .json file here holds one)")
        return 1
    status = 1 if rules.problems else 0
    try:
        if not quiet:
            for rule in rules:
                key = ",".join(rule.key) if isinstance(rule.key, tuple) else rule.key
                state = "" if rule.enabled else ", disabled"
                print(f"ok   {rule.name} (version {rule.version}, key {key}{state}) "
                      f"{rules.sources[rule.name]}")
        for problem in rules.problems:
            print(problem)
        if not quiet or rules.problems:
            enabled = len(rules.enabled())
            problems = len(rules.problems)
            print(f"{len(rules)} rule{'' if len(rules) == 1 else 's'} fine ({enabled} "
                  f"enabled), {problems} problem{'' if problems == 1 else 's'}")
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_gone()
    return status


def _reader_gone() -> None:
    """The reader of standard output has gone (``cep match ... | head -1``): stop writing
    quietly, as Unix tools do (Python would print a traceback at exit, flushing)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
