"""``cep replay`` against the targets of issue #11, in one run on one machine.

    make bench-replay                       # 1M card transactions (10k cards); 10M for memory
    python -m benchmarks.replay --quick     # 100k events; 1M for memory, to try it out
    python -m benchmarks.replay --events 200000

The input is the card transactions of ``benchmarks/data.py`` (arrival order, each event
up to 5 s late), as its Parquet file and as the CSV ``benchmarks/flink.py`` writes from
it (``ts`` as ``YYYY-MM-DD HH:MM:SS.fff`` text).  Patterns, as in ``benchmarks/flink.py``:
A = card testing (3+ charges under 5.00 in a row, then one over 500.00, within 10
minutes, skip past last; few matches); B = three contiguous increasing amounts (skip
past last; many matches).  The cases:

1. **cep.match** (the baselines): ``cep.match(path, pattern, key="card_id", time="ts",
   engine="numba")`` on the Parquet file and on the CSV, for A and B.
2. **replay**: ``cep.runtime.replay.replay`` (what ``cep replay`` runs) of A and B from
   the Parquet file and from the CSV: numba engine, out-of-orderness 5 s, a checkpoint
   every 100,000 events into a temporary directory, matches written to Parquet in a
   temporary directory (both removed afterwards), as ``cep replay`` runs by default
   (partial matches whose window passes are not tracked or written, as ``cep.match``
   computes none); and the same with ``--timeouts`` (``replay(timeouts=True)``: they are
   written too).  It must find as many matches as
   ``cep.match`` on the same file; its ratio is ``cep.match``'s seconds ÷ its seconds
   on the same file format (1.00× = as fast as ``cep.match``).
3. **rules**: one replay job of 20 card-testing rules from the Parquet file, passed to
   ``replay`` as a dict ``{name: pattern}`` (every pair of a small-amount threshold in
   :data:`SMALLS` and a count in :data:`TESTS`, then one charge over 500.00, within 10
   minutes), against the same job with one of those rules (the one that is pattern A,
   ``under5x3``, whose matches must equal ``cep.match``'s for A).  Same settings as 2,
   with timeouts and without.
4. **memory**: the peak resident memory (``VmHWM``) of the process replaying A from
   Parquet at N events (the process of case 2) and at 10 N (10M for the default 1M) of
   the same cards (``data.card_transactions(10 N, cards of N)``: ten times the history,
   so what waits for the watermark and the partial matches held stay the same size, and
   so must memory; generated once and cached in ``benchmarks/.data``).
5. **words among numbers**: replay of A (as run by default) from the CSV and from the
   same rows as JSON lines, each as it is and with the amount of one row in
   :data:`WORD_EVERY` a word (``"pending"``: a dead letter of A, the rest of its batch
   columnar), and the JSON lines with whole amounts written as integers (``159`` beside
   ``3.51``, as JavaScript writes them); the ratio is the file's seconds ÷ the clean
   file's (issue #11 asks that a field of the wrong type never make a Python call per
   event: one such row made its whole batch Python dicts, 3.4x slower; integers among
   floats made every batch so, 16x slower).

Each case runs in a fresh process (``benchmarks.run._spawn``): it first makes the same
call on the first 1,000 events of the same file (the numba kernel loaded from its cache,
the readers and sinks imported), then times one call; the best of ``--repeat`` processes
counts (the 10 N memory case runs once).  Each reports seconds, events/s, matches and
the process's peak RSS (and how much of it the timed call added).  The report, with a
"Targets" section saying which targets are met and by how much, goes to
``benchmarks/REPLAY_RESULTS.md`` (``--quick``: ``benchmarks/.data/REPLAY_RESULTS-quick.md``,
so a quick run never replaces the full results).  Exit status 1 when a replay finds
another number of matches than ``cep.match``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.run import (
    ROOT,
    _spawn,
    case_parser,
    peak_rss_mb,
    run_info,
    run_lines,
    serve_worker,
    write_report,
)

OUT = ROOT / "benchmarks" / "REPLAY_RESULTS.md"
QUICK_OUT = ROOT / "benchmarks" / ".data" / "REPLAY_RESULTS-quick.md"
DELAY_MS = 5_000
CHECKPOINT_EVERY = 100_000
WARM_EVENTS = 1_000
#: the small-amount thresholds and counts of the 20 card-testing rules (5.00 x 3 is A)
SMALLS = (2.0, 3.0, 5.0, 7.5, 10.0)
TESTS = (2, 3, 4, 5)
A_RULE = "under5x3"

#: one row in this many has a word for its amount in case 5
WORD_EVERY = 10_000
#: case 5: a file with such words takes at most this many times the clean file's time
#: (not a target of the issue: the check that its rows stay columnar)
WORDS_AT_MOST = 1.5

TARGET_RATE = {"parquet": 1_500_000, "csv": 1_000_000}  # replay of A, events/s
TARGET_RATIO = 0.6  # replay ÷ cep.match, same pattern and file format
TARGET_RULES = 4.0  # time of 20 rules ÷ time of 1 rule, at most
#: "peak memory flat" read as: 10x the events takes at most this much more peak RSS
TARGET_MEMORY = 1.5


# ====================================================================== workers
def rule(small: float, tests: int) -> Any:
    """``tests`` or more charges under ``small`` in a row, then one over 500.00, in 10 min."""
    from benchmarks.patterns import BIG, WINDOW_A
    from cep.patterns.fraud import card_testing

    return card_testing(small=small, big=BIG, tests=tests, within=WINDOW_A)


def rules(count: int) -> dict[str, Any]:
    """``count`` (1 or 20) named card-testing rules; the first is always A's (``under5x3``)."""
    pairs = [(5.0, 3), *((s, t) for s in SMALLS for t in TESTS if (s, t) != (5.0, 3))]
    return {f"under{small:g}x{tests}": rule(small, tests) for small, tests in pairs[:count]}


def _pattern(spec: dict[str, Any]) -> Any:
    """What a case runs: A, B (as ``benchmarks/flink.py`` defines them) or a set of rules."""
    from benchmarks.patterns import card_testing, increasing
    from cep import SkipStrategy

    if spec["variant"] == "rules":
        return rules(spec["rules"])
    return card_testing() if spec["pattern"] == "A" else increasing(
        SkipStrategy.skip_past_last_event())


def _head(path: Path, into: Path) -> Path:
    """The first :data:`WARM_EVENTS` rows of ``path``, in the same format, in ``into``."""
    out = into / f"head{path.suffix}"
    if path.suffix in (".csv", ".jsonl"):
        with path.open() as src:  # a CSV's header line, then a line per row
            head = WARM_EVENTS + (path.suffix == ".csv")
            lines = [line for _, line in zip(range(head), src)]
        out.write_text("".join(lines))
        return out
    import pyarrow as pa
    import pyarrow.parquet as pq

    batch = next(pq.ParquetFile(path).iter_batches(batch_size=WARM_EVENTS))
    pq.write_table(pa.Table.from_batches([batch]), out)
    return out


def _match(pattern: Any) -> Callable[[Path, Path], dict[str, Any]]:
    import cep

    def run(path: Path, work: Path) -> dict[str, Any]:
        found = cep.match(path, pattern, key="card_id", time="ts", engine="numba")
        return {"matches": len(found)}

    return run


def _replay(pattern: Any, timeouts: bool = True) -> Callable[[Path, Path], dict[str, Any]]:
    from cep.runtime.replay import replay

    def run(path: Path, work: Path) -> dict[str, Any]:
        summary = replay(pattern, [path], key="card_id", time="ts",
                         output=work / "out" / "matches.parquet", out_of_orderness=DELAY_MS,
                         checkpoint_dir=work / "chk", checkpoint_every=CHECKPOINT_EVERY,
                         engine="numba", progress=False, timeouts=timeouts)
        return {"matches": summary.matches, "events": summary.events_in, "late": summary.late,
                "dead_letters": summary.dead_letters, "checkpoints": summary.checkpoints,
                "per_rule": {name: c["matches"] for name, c in summary.rules.items()}}

    return run


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process: the same call on the first 1,000 events, then timed."""
    path = Path(spec["path"])
    pattern = _pattern(spec)
    run = (_match(pattern) if spec["variant"] == "match"
           else _replay(pattern, timeouts=not spec.get("no_timeouts", False)))
    work = Path(tempfile.mkdtemp(prefix="cep-bench-replay-"))
    try:
        run(_head(path, work), work / "warm")
        before = peak_rss_mb()
        started = time.perf_counter()
        result = run(path, work / "run")
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peak = peak_rss_mb()
    return {**spec, **result, "seconds": seconds, "peak_mb": peak, "rise_mb": peak - before}


# ====================================================================== parent
def _best(spec: dict[str, Any], repeat: int) -> dict[str, Any]:
    runs = [_spawn(spec, None, module="benchmarks.replay") for _ in range(repeat)]
    return min(runs, key=lambda r: r["seconds"])


def _log(r: dict[str, Any], n: int) -> None:
    what = r["variant"] + (f" x{r['rules']}" if r["variant"] == "rules" else "") + (
        " (no timeouts)" if r.get("no_timeouts") else "")
    print(f"{r.get('pattern', 'A')} {r.get('format', 'parquet'):7} {what:9} {n:>11,} events "
          f"{n / r['seconds']:>12,.0f} ev/s {r['matches']:>9,} matches "
          f"{r['peak_mb']:>7,.0f} MB", flush=True)


def _inputs(n: int) -> dict[str, Path]:
    """The Parquet file and the CSV (with a header line) of ``n`` card transactions."""
    from benchmarks import data
    from benchmarks.flink import card_csv

    return {"parquet": data.card_transactions(n, _cards(n)),
            "csv": card_csv(n, True)}


def _cards(n: int) -> int:
    """The cards of ``n`` transactions at the benchmark's size (10,000 for 1M)."""
    return max(1, min(10_000, n // 100))


def measure_patterns(files: dict[str, Path], n: int, repeat: int) -> list[dict[str, Any]]:
    """Cases 1 and 2: cep.match and replay of A and B, from each file format."""
    rows = []
    for name in ("A", "B"):
        for fmt, path in files.items():
            for variant, quiet in (("match", False), ("replay", False), ("replay", True)):
                spec = {"variant": variant, "pattern": name, "format": fmt, "path": str(path),
                        "no_timeouts": quiet}
                rows.append(_best(spec, repeat))
                _log(rows[-1], n)
    return rows


def measure_rules(parquet: Path, n: int, repeat: int) -> list[dict[str, Any]]:
    """Case 3: one job of 1 rule, then one of 20, from Parquet."""
    rows = []
    for quiet in (False, True):
        for count in (1, len(SMALLS) * len(TESTS)):
            rows.append(_best({"variant": "rules", "rules": count, "path": str(parquet),
                               "no_timeouts": quiet}, repeat))
            _log(rows[-1], n)
    return rows


def word_inputs(csv: Path) -> dict[str, Path]:
    """The CSV, the same rows as JSON lines, and each with a word for the amount of one row
    in WORD_EVERY (written once, cached next to the CSV)."""
    import json

    import pyarrow.csv as pcsv

    paths = {"csv": csv, "jsonl": csv.with_suffix(".jsonl"),
             "csv+words": csv.with_name(f"{csv.stem}-words.csv"),
             "jsonl+words": csv.with_name(f"{csv.stem}-words.jsonl"),
             "jsonl+ints": csv.with_name(f"{csv.stem}-ints.jsonl")}
    if all(p.exists() for p in paths.values()):
        return paths
    table = pcsv.read_csv(csv, convert_options=pcsv.ConvertOptions(
        column_types={"ts": "string"}))
    rows = table.to_pylist()
    lines = csv.read_text().splitlines(keepends=True)  # the header, then a line per row
    word_lines = list(lines)
    for i in range(WORD_EVERY // 2, len(rows), WORD_EVERY):
        fields = word_lines[i + 1].split(",")
        fields[table.column_names.index("amount")] = "pending"
        word_lines[i + 1] = ",".join(fields)
    whole = [{**r, "amount": int(r["amount"])} if float(r["amount"]).is_integer() else r
             for r in rows]
    for path, text in ((paths["csv+words"], "".join(word_lines)),
                       (paths["jsonl"], "".join(json.dumps(r) + "\n" for r in rows)),
                       (paths["jsonl+ints"], "".join(json.dumps(r) + "\n" for r in whole))):
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    for i in range(WORD_EVERY // 2, len(rows), WORD_EVERY):
        rows[i]["amount"] = "pending"
    tmp = paths["jsonl+words"].with_suffix(f".tmp{os.getpid()}")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, paths["jsonl+words"])
    return paths


def measure_words(csv: Path, n: int, repeat: int) -> list[dict[str, Any]]:
    """Case 5: replay of A (by default) from CSV and JSON lines, clean and with words."""
    rows = []
    for fmt, path in word_inputs(csv).items():
        rows.append(_best({"variant": "replay", "pattern": "A", "format": fmt,
                           "path": str(path), "no_timeouts": True}, repeat))
        _log(rows[-1], n)
    return rows


def measure_memory(n: int) -> dict[str, Any]:
    """Case 4, the large size: replay of A from Parquet at ``n`` events, the same cards as
    the small size (ten times the history of the same cards)."""
    from benchmarks import data

    path = data.card_transactions(n, _cards(n // 10))
    r = _spawn({"variant": "replay", "pattern": "A", "format": "parquet", "path": str(path)},
               None, module="benchmarks.replay")
    _log(r, n)
    return r


# ====================================================================== report
def _rate(n: int, seconds: float) -> str:
    rate = n / seconds
    return f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:,.0f}k"


def _same(found: int, want: int) -> str:
    return "yes" if found == want else f"**no** ({want:,})"


def _baseline(rows: list[dict[str, Any]], name: str, fmt: str) -> dict[str, Any]:
    return next(r for r in rows if r["variant"] == "match" and r["pattern"] == name
                and r["format"] == fmt)


def _replayed(rows: list[dict[str, Any]], name: str, fmt: str, quiet: bool = False
              ) -> dict[str, Any]:
    """The replay of ``name`` from ``fmt`` (``quiet``: the one with ``--no-timeouts``)."""
    return next(r for r in rows if r["variant"] == "replay" and r["pattern"] == name
                and r["format"] == fmt and bool(r.get("no_timeouts")) == quiet)


def _one_rule(rules_rows: list[dict[str, Any]], quiet: bool) -> dict[str, Any]:
    """The 1-rule job of the rules case, with or without timeouts."""
    return next(r for r in rules_rows if r["rules"] == 1 and bool(r.get("no_timeouts")) == quiet)


def _many_rules(rules_rows: list[dict[str, Any]], quiet: bool) -> dict[str, Any]:
    return next(r for r in rules_rows if r["rules"] > 1 and bool(r.get("no_timeouts")) == quiet)


def _late(r: dict[str, Any], n: int) -> str:
    if "events" not in r:
        return "—"
    read = "" if r["events"] == n else f" (**read {r['events']:,}**)"
    return f"{r['late']:,} / {r['dead_letters']:,}{read}"


def section_patterns(rows: list[dict[str, Any]], n: int) -> list[str]:
    lines = [
        "## Replay against `cep.match`",
        "",
        "Cases 1 and 2. Ratio = `cep.match` seconds ÷ this row's seconds, on the same pattern "
        "and file format; peak = the process's peak resident memory (`VmHWM`; in brackets: what the timed call "
        "added to it).",
        "",
        "| pattern | input | case | matches | same as cep.match | late / dead letters | "
        "time | events/s | ÷ cep.match | peak RSS |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = _baseline(rows, r["pattern"], r["format"])
        what = ("`cep.match` (numba)" if r["variant"] == "match" else
                f"`replay` (numba, {r['checkpoints']} checkpoints"
                + (")" if r.get("no_timeouts") else ", `--timeouts`)"))
        lines.append(
            f"| {r['pattern']} | {r['format']} | {what} | {r['matches']:,} | "
            f"{_same(r['matches'], base['matches'])} | {_late(r, n)} | {r['seconds']:.2f} s | "
            f"{_rate(n, r['seconds'])} | {base['seconds'] / r['seconds']:.2f}× | "
            f"{r['peak_mb']:,.0f} MB (+{r['rise_mb']:,.0f}) |")
    return lines


def section_rules(rules_rows: list[dict[str, Any]], rows: list[dict[str, Any]],
                  n: int) -> list[str]:
    base = _baseline(rows, "A", "parquet")
    lines = [
        "## Many rules in one job",
        "",
        f"Case 3, from Parquet. `{A_RULE}` is pattern A; its matches must equal `cep.match`'s "
        f"for A on Parquet ({base['matches']:,}). Ratio = this row's seconds ÷ the 1-rule "
        "job's seconds (the one with the same timeouts setting).",
        "",
        f"| rules | timeouts | matches (all rules) | `{A_RULE}` matches | same as cep.match | "
        "late / dead letters | time | events/s | ÷ 1 rule | peak RSS |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rules_rows:
        own = r["per_rule"].get(A_RULE, r["matches"] if r["rules"] == 1 else -1)
        one = _one_rule(rules_rows, bool(r.get("no_timeouts")))
        lines.append(
            f"| {r['rules']} | {'off' if r.get('no_timeouts') else 'on'} | {r['matches']:,} | "
            f"{own:,} | {_same(own, base['matches'])} | "
            f"{_late(r, n)} | {r['seconds']:.2f} s | {_rate(n, r['seconds'])} | "
            f"{r['seconds'] / one['seconds']:.2f}× | {r['peak_mb']:,.0f} MB "
            f"(+{r['rise_mb']:,.0f}) |")
    many = _many_rules(rules_rows, False)["per_rule"]
    if many:
        lines += ["", "Matches per rule (20-rule job): " + ", ".join(
            f"`{name}` {count:,}" for name, count in many.items()) + "."]
    return lines


def section_memory(small: dict[str, Any], big: dict[str, Any], n: int, big_n: int) -> list[str]:
    lines = [
        "## Peak memory",
        "",
        f"Case 4: replay of A from Parquet; the {n:,}-event row is the process of case 2. "
        "Ratio = peak RSS ÷ the peak at the smaller size.",
        "",
        "| events | cards | matches | late / dead letters | time | events/s | peak RSS | "
        "added by the run | ÷ smaller |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r, size in ((small, n), (big, big_n)):
        cards = _cards(n)
        lines.append(
            f"| {size:,} | {cards:,} | {r['matches']:,} | {_late(r, size)} | "
            f"{r['seconds']:.2f} s | {_rate(size, r['seconds'])} | {r['peak_mb']:,.0f} MB | "
            f"{r['rise_mb']:,.0f} MB | {r['peak_mb'] / small['peak_mb']:.2f}× |")
    return lines


def section_words(words: list[dict[str, Any]], n: int) -> list[str]:
    lines = [
        "## Words among numbers",
        "",
        f"Case 5: replay of A as run by default; `+words`: one row in {WORD_EVERY:,} has "
        "`pending` for its amount (a dead letter of A); `+ints`: whole amounts written as "
        "integers among the fractions. Ratio = this row's seconds ÷ the clean file's of the "
        "same format.",
        "",
        "| input | matches | late / dead letters | time | events/s | ÷ clean | peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    clean = {r["format"]: r for r in words if "+" not in r["format"]}
    for r in words:
        base = clean[r["format"].split("+")[0]]
        lines.append(f"| {r['format']} | {r['matches']:,} | {_late(r, n)} | "
                     f"{r['seconds']:.2f} s | {_rate(n, r['seconds'])} | "
                     f"{r['seconds'] / base['seconds']:.2f}× | {r['peak_mb']:,.0f} MB |")
    return lines


def _verdict(value: float, target: float, at_least: bool, unit: str) -> str:
    """Met or missed, and by how much (relative to the target)."""
    margin = (value - target) / target if at_least else (target - value) / target
    if margin >= 0:
        return f"**met** ({margin:.0%} to spare)"
    return f"**missed** by {-margin:.0%} ({'short of' if at_least else 'over'} {target:g}{unit})"


def targets(rows: list[dict[str, Any]], rules_rows: list[dict[str, Any]],
            small: dict[str, Any], big: dict[str, Any], n: int, big_n: int,
            words: list[dict[str, Any]]) -> list[str]:
    lines = ["## Targets", "",
             "| target | measured | verdict |", "|---|---:|---|"]
    # judged on replay as it runs by default (no timeouts, as cep.match computes none),
    # then with --timeouts (tracked and written)
    for quiet in (True, False):
        how = "" if quiet else " with `--timeouts`"
        for fmt, want in TARGET_RATE.items():
            r = _replayed(rows, "A", fmt, quiet)
            lines.append(f"| replay{how} of A from {fmt}: at least {want / 1e6:g}M events/s | "
                         f"{n / r['seconds'] / 1e6:.2f}M | "
                         f"{_verdict(n / r['seconds'] / 1e6, want / 1e6, True, 'M')} |")
        for name in ("A", "B"):
            for fmt in TARGET_RATE:
                ratio = (_baseline(rows, name, fmt)["seconds"]
                         / _replayed(rows, name, fmt, quiet)["seconds"])
                lines.append(f"| replay{how} of {name} from {fmt}: at least {TARGET_RATIO}× "
                             f"`cep.match` | {ratio:.2f}× | "
                             f"{_verdict(ratio, TARGET_RATIO, True, '×')} |")
        many = _many_rules(rules_rows, quiet)
        ratio = many["seconds"] / _one_rule(rules_rows, quiet)["seconds"]
        lines.append(f"| {many['rules']} rules in one job{how}: at most {TARGET_RULES:g}× the "
                     f"time of 1 rule | {ratio:.2f}× | "
                     f"{_verdict(ratio, TARGET_RULES, False, '×')} |")
    ratio = big["peak_mb"] / small["peak_mb"]
    lines.append(f"| peak memory flat from {n:,} to {big_n:,} events (read as: at most "
                 f"{TARGET_MEMORY:g}× the peak RSS) | {small['peak_mb']:,.0f} → "
                 f"{big['peak_mb']:,.0f} MB, {ratio:.2f}× (added by the run: "
                 f"{small['rise_mb']:,.0f} → {big['rise_mb']:,.0f} MB) | "
                 f"{_verdict(ratio, TARGET_MEMORY, False, '×')} |")
    pair = {r["format"]: r for r in words}
    for fmt, what in (("csv+words", "a word among the amounts"),
                      ("jsonl+words", "a word among the amounts"),
                      ("jsonl+ints", "whole amounts written as integers")):
        ratio = pair[fmt]["seconds"] / pair[fmt.split("+")[0]]["seconds"]
        lines.append(f"| (our check, not the issue's) replay from {fmt.split('+')[0]} with "
                     f"{what}: at most {WORDS_AT_MOST:g}× the clean file's time | "
                     f"{ratio:.2f}× | {_verdict(ratio, WORDS_AT_MOST, False, '×')} |")
    wrong = _mismatches(rows, rules_rows)
    lines.append(f"| every replay finds `cep.match`'s matches | "
                 f"{'all equal' if not wrong else ', '.join(wrong)} | "
                 f"{'**met**' if not wrong else '**missed**'} |")
    return lines


def _mismatches(rows: list[dict[str, Any]], rules_rows: list[dict[str, Any]]) -> list[str]:
    """The replays whose match count differs from cep.match's on the same input."""
    wrong = [f"{r['pattern']} from {r['format']}" for r in rows if r["variant"] == "replay"
             and r["matches"] != _baseline(rows, r["pattern"], r["format"])["matches"]]
    want = _baseline(rows, "A", "parquet")["matches"]
    wrong += [f"`{A_RULE}` of {r['rules']} rules" for r in rules_rows
              if r["per_rule"].get(A_RULE, r["matches"]) != want]
    return wrong


def report(rows: list[dict[str, Any]], rules_rows: list[dict[str, Any]], big: dict[str, Any],
           n: int, big_n: int, run: dict[str, Any], words: list[dict[str, Any]]) -> str:
    small = _replayed(rows, "A", "parquet")
    lines = [
        "# `cep replay` against the targets of issue #11",
        "",
        *run_lines(run),
        "",
        f"Input: {n:,} card transactions ({max(1, min(10_000, n // 100)):,} cards), as Parquet "
        f"and as CSV (`ts` as text); {big_n:,} for the memory case. What each case runs: see "
        f"the docstring of `benchmarks/replay.py`. Best of {run['repeat']} fresh processes "
        "per case (the large memory case: one), each after a warm-up on the first 1,000 events.",
    ]
    if run["quick"]:
        lines += ["", "**Quick run**: the targets are for 1M events (10M for memory); these "
                      "numbers only show that the benchmark runs."]
    for section in (section_patterns(rows, n), section_rules(rules_rows, rows, n),
                    section_memory(small, big, n, big_n), section_words(words, n),
                    targets(rows, rules_rows, small, big, n, big_n, words)):
        lines += ["", *section]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every case (each in its own process) and write the report."""
    parser = case_parser("python -m benchmarks.replay", __doc__,
                         "100k events, 1M for the memory case; report to "
                         "benchmarks/.data/REPLAY_RESULTS-quick.md")
    parser.add_argument("--events", type=int, help="events (default 1M, 100k with --quick)")
    parser.add_argument("--repeat", type=int, default=2, help="processes per case, best counts")
    args = parser.parse_args(argv)
    if serve_worker(args, worker):
        return 0
    n = args.events or (100_000 if args.quick else 1_000_000)
    big_n = 10 * n
    out = args.out or (QUICK_OUT if args.quick else OUT)
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    files = _inputs(n)
    rows = measure_patterns(files, n, args.repeat)
    rules_rows = measure_rules(files["parquet"], n, args.repeat)
    big = measure_memory(big_n)
    words = measure_words(files["csv"], n, args.repeat)
    run = run_info("python -m benchmarks.replay", argv, began, load_before,
                   repeat=args.repeat, quick=args.quick)
    write_report(out, report(rows, rules_rows, big, n, big_n, run, words))
    wrong = _mismatches(rows, rules_rows)
    if wrong:
        print(f"match counts differ from cep.match: {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
