"""``make demo``: library patterns over generated card, sensor and log streams.

The demo replays each stream through the embedded runtime with out-of-order
arrivals, late re-sends and broken records, and checks that the committed output
holds exactly the injected episodes.  Here it runs at its smallest scale.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from examples import demo


def behind_the_watermark(record: dict[str, Any]) -> bool:
    """Is a late record's event time (its start and end) at or below the watermark its
    reason names?"""
    said = re.fullmatch(r"event time (-?\d+) is at or below the watermark (-?\d+)",
                        record["reason"])
    return (said is not None
            and record["start"] == record["end"] == int(said[1]) <= int(said[2]))


def test_demo_finds_exactly_the_injected_episodes_and_reports_side_outputs(
    tmp_path: Path,
) -> None:
    assert demo.main(["--out", str(tmp_path), "--copies", "2"]) == 0
    for d in demo.DEMOS:
        out = tmp_path / d.name
        assert list((out / "matches").glob("part-*.jsonl")), d.name
        late = [json.loads(x) for p in (out / "late").glob("*.jsonl")
                for x in p.read_text().splitlines()]
        dead = [json.loads(x) for p in (out / "dead_letters").glob("*.jsonl")
                for x in p.read_text().splitlines()]
        assert late and all(r["kind"] == "late" and behind_the_watermark(r)
                            for r in late), d.name
        assert len(dead) == 3, d.name  # the broken records the demo writes into each stream
        assert (tmp_path / "data" / d.domain / f"{d.name}.jsonl").exists()


def test_realistic_lines_keep_every_event_and_stay_within_the_allowed_disorder() -> None:
    data = demo.DEMOS[0].generate(seed=3)
    lines = demo.realistic_lines(data, seed=1)
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    ids = {e["id"] for e in data.events}
    assert ids <= {e["id"] for e in parsed}  # nothing lost
    newest = None
    for e in parsed:
        if e["id"] in ids:
            if newest is not None:
                assert e[data.time] > newest - demo.OUT_OF_ORDERNESS_MS
            newest = e[data.time] if newest is None else max(newest, e[data.time])


def test_demo_changes_its_rule_set_while_it_runs(tmp_path: Path) -> None:
    assert demo.main(["--out", str(tmp_path), "--copies", "2", "--only", "card_testing"]) == 0
    alerts = [json.loads(x) for p in (tmp_path / "rule_set" / "matches").glob("*.jsonl")
              for x in p.read_text().splitlines()]
    # both versions of card testing alerted: the change came halfway through the stream
    assert {(r["rule"], r["version"]) for r in alerts} >= {("card_testing", 1),
                                                           ("card_testing", 2)}
    rules = sorted(p.name for p in (tmp_path / "rule_set" / "rules").iterdir())
    assert rules == ["card_testing.json", "two_big.json"]
