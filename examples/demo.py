"""Find card-testing fraud in a week of card transactions.

Card testing: a fraudster checks a stolen card with a few tiny charges and,
once they go through, cashes out with one large charge.  As a pattern: three or
more charges under 5.00 in a row on one card, immediately followed by one over
500.00, all within 10 minutes.

The demo runs the pattern twice: once with ``cep.match`` over the whole file
(analysis, notebooks), and once through the event-time runtime, as a stream
replayed with watermarks, checkpoints and exactly-once output files.

Run it with ``make demo`` (or ``.venv/bin/python -m examples.demo [file]``).
"""

from __future__ import annotations

import csv
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cep
from cep import Match
from patterns.fraud import card_testing as card_testing_pattern
from runtime.replay import print_summary, replay

DATA = Path(__file__).resolve().parent / "data" / "card_transactions.csv"
OUT = Path("out") / "demo"

# expression conditions, so the numba engine runs it
card_testing = card_testing_pattern(small=5.0, big=500.0, tests=3, within=timedelta(minutes=10))


def find_card_testing(path: str | Path = DATA) -> list[Match]:
    """Every card-testing episode in the CSV at ``path``."""
    return cep.match(path, card_testing, key="card_id", time="ts")


def format_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def table(matches: list[Match]) -> str:
    header = ("card", "start (UTC)", "end (UTC)", "small charges", "big charge")
    rows = [
        (
            str(m.key),
            format_ms(m.start),
            format_ms(m.end),
            ", ".join(f"{e['amount']:.2f}" for e in m["small"]),
            f"{m['big'][0]['amount']:.2f}",
        )
        for m in matches
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {4}  # money on the right

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DATA
    began = time.perf_counter()
    matches = find_card_testing(path)  # key by key; show them in time order below
    elapsed = time.perf_counter() - began

    with path.open(newline="") as f:  # only for the summary line
        cards = [row["card_id"] for row in csv.DictReader(f)]

    print(f"Card testing in {path.name}: 3+ charges under 5.00 in a row, then one over 500.00,")
    print("within 10 minutes, on the same card.\n")
    in_time_order = sorted(matches, key=lambda m: (m.start, str(m.key)))
    print(table(in_time_order) if matches else "(no matches)")
    print(
        f"\n{len(cards)} events read, {len(set(cards))} cards, {len(matches)} matches, "
        f"{elapsed:.2f} s"
    )

    print("\nThe same pattern as a stream through the event-time runtime "
          "(5 s out-of-orderness, checkpoints every 500 events):")
    shutil.rmtree(OUT, ignore_errors=True)
    summary = replay(
        card_testing, [path], key="card_id", time="ts", output=OUT / "matches.jsonl",
        out_of_orderness=timedelta(seconds=5), checkpoint_dir=OUT / "checkpoints",
        checkpoint_every=500, batch_size=250,
    )
    print_summary(summary, OUT / "matches.jsonl")
    print(f"matches: {OUT / 'matches'}/part-*.jsonl; timeouts, late events and dead letters "
          f"next to them in {OUT}/")


if __name__ == "__main__":
    main()
