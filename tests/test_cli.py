"""Specification: the ``cep`` command line (issue #16, items 2 and 3).

Item 2, replaying bounded history right: ``cep replay`` over files that are not in
event-time order used to lose most matches to late events and exit 0 without a word.
Now more late events than ``--max-late`` (default 0) is a loud warning and exit status 3
(the output is committed all the same), the summary says how many were late and what
to do, and ``--sort`` replays the history in time order and finds what ``cep match``
finds.

Item 3, the command line: pattern specs (module, file, factory with literal arguments
never evaluated, pattern and rule JSON files); ``cep match`` over directories, globs
and compressed files with ``"kind"`` lines and a count; composite keys and time units;
Ctrl-C during ``replay`` stops at a checkpoint and prints the command that resumes;
the summary names the directories really written; ``cep --version``; examples in
every subcommand's help; flags that make no sense together are refused.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from cep import Pattern, col, match
from cep.errors import CEPError
from cep.patterns.fraud import card_testing
from cep.patterns.synthetic import found
from cep.patterns.synthetic.fraud import card_transactions
from cep.rules import Rule
from cep.runtime import FileSink, SortedFileSource, replay
from cep.runtime.cli import main as cep_main
from cep.runtime.specs import load, load_pattern

ROOT = Path(__file__).resolve().parents[1]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    return e


CEP = [sys.executable, "-m", "cep.runtime.cli"]


def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CEP, *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def cards() -> Any:
    """Card transactions with 6 injected card-testing episodes, in time order."""
    return card_transactions(seed=1, cards=120)


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory: pytest.TempPathFactory, cards: Any) -> Path:
    """The same transactions shuffled, as Parquet: history that is not in time order."""
    events = list(cards.events)
    random.Random(16).shuffle(events)
    path = tmp_path_factory.mktemp("history") / "shuffled.parquet"
    pq.write_table(pa.Table.from_pylist(events), path)
    return path


def committed(out: Path, kind: str) -> list[dict[str, Any]]:
    return FileSink(out / kind).read()


def spans(records: list[dict[str, Any]]) -> Counter[tuple[Any, int, int]]:
    return Counter((r["card_id"], r["start"], r["end"]) for r in records)


def replay_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["replay", "cep.patterns.fraud:card_testing", str(data), "--key", "card_id",
            "--time", "ts", "--output", str(out / "matches.jsonl"), *extra]


# =====================================================================================
# item 2: replaying bounded history right
# =====================================================================================

def test_replay_of_unsorted_history_warns_and_exits_3(shuffled: Path, cards: Any,
                                                      tmp_path: Path) -> None:
    """The issue's silent case: most events late, a few matches, exit 0, no warning."""
    proc = run(*replay_args(shuffled, tmp_path / "out", "--batch-size", "200", "--quiet"),
               cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    late = committed(tmp_path / "out", "late")
    assert len(late) > len(cards.events) // 2
    warning = proc.stderr
    assert warning.startswith("cep replay: WARNING: ")
    assert f"{len(late):,} of {len(cards.events):,} events" in warning
    assert "--sort" in warning and "--out-of-orderness" in warning and "--max-late" in warning
    assert str(tmp_path / "out" / "late") in warning
    assert "Traceback" not in warning
    # the output is committed all the same: nothing is pending
    assert not list((tmp_path / "out").glob("*/*.pending"))


def test_sort_finds_what_cep_match_finds(shuffled: Path, cards: Any, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert cep_main(replay_args(shuffled, out, "--sort", "--batch-size", "200", "--quiet")) == 0
    assert capsys.readouterr().err == ""
    want = match(shuffled, card_testing(), key="card_id", time="ts")
    assert found(want) == set(cards.episodes)
    got = committed(out, "matches")
    assert spans(got) == Counter((m.key, m.start, m.end) for m in want)
    assert committed(out, "late") == []


def test_replay_function_sorts_too(shuffled: Path, cards: Any, tmp_path: Path) -> None:
    plain = replay(card_testing(), [shuffled], key="card_id", time="ts",
                   output=tmp_path / "a" / "m.jsonl", batch_size=200, progress=False)
    ordered = replay(card_testing(), [shuffled], key="card_id", time="ts",
                     output=tmp_path / "b" / "m.jsonl", batch_size=200, progress=False,
                     sort=True)
    assert plain.late > 0 and plain.matches < len(cards.episodes)
    assert (ordered.late, ordered.matches) == (0, len(cards.episodes))


def test_replay_writes_timeouts_only_when_asked_and_finds_the_same_matches(
        shuffled: Path, cards: Any, tmp_path: Path) -> None:
    """Timeouts are opt-in, as in ``cep match``, ``cep.match`` and FlinkCEP (a side output
    only when one is asked for); ``--no-timeouts``, once needed, still works."""
    assert cep_main(replay_args(shuffled, tmp_path / "with", "--sort", "--quiet",
                                "--timeouts")) == 0
    assert cep_main(replay_args(shuffled, tmp_path / "default", "--sort", "--quiet")) == 0
    assert cep_main(replay_args(shuffled, tmp_path / "without", "--sort", "--quiet",
                                "--no-timeouts")) == 0
    assert committed(tmp_path / "with", "timeouts")  # each small charge begins one
    for quiet in ("default", "without"):
        assert not (tmp_path / quiet / "timeouts").exists()
        assert (spans(committed(tmp_path / quiet, "matches"))
                == spans(committed(tmp_path / "with", "matches")))
    assert len(committed(tmp_path / "default", "matches")) == len(cards.episodes)
    with pytest.raises(SystemExit):  # argparse: not both
        cep_main(replay_args(shuffled, tmp_path / "both", "--timeouts", "--no-timeouts"))


def test_summary_shows_late_events_and_what_to_do(shuffled: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = cep_main(replay_args(shuffled, tmp_path / "out", "--batch-size", "200"))
    assert code == 3
    captured = capsys.readouterr()
    [row] = [line for line in captured.out.splitlines() if "│ late events" in line]
    late = len(committed(tmp_path / "out", "late"))
    assert f"{late:,} (" in row and "%)" in row
    assert "--sort" in captured.out and "--out-of-orderness" in captured.out
    assert "WARNING" in captured.err


def test_max_late_accepts_some_late_events(shuffled: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    args = replay_args(shuffled, tmp_path / "out", "--batch-size", "200", "--quiet")
    assert cep_main([*args, "--max-late", "100%"]) == 0
    assert capsys.readouterr().err == ""  # --quiet: no note under the threshold
    assert cep_main([*replay_args(shuffled, tmp_path / "o2", "--batch-size", "200"),
                     "--max-late", "100%"]) == 0
    assert "late events (within --max-late) are in" in capsys.readouterr().err
    assert cep_main([*replay_args(shuffled, tmp_path / "o3", "--batch-size", "200",
                                  "--quiet"), "--max-late", "10"]) == 3
    assert "now 10" in capsys.readouterr().err


def test_enough_out_of_orderness_makes_nothing_late(shuffled: Path, tmp_path: Path) -> None:
    """The other way out: a bound at least as wide as the disorder (7 days here)."""
    args = replay_args(shuffled, tmp_path / "out", "--batch-size", "200", "--quiet",
                       "--out-of-orderness", "8d")
    assert cep_main(args) == 0
    assert committed(tmp_path / "out", "late") == []


def test_sorted_source_is_stable_and_dead_letters_unreadable_times(tmp_path: Path) -> None:
    rows = [{"id": 0, "ts": 3000}, {"id": 1, "ts": 1000}, {"id": 2, "ts": "never"},
            {"id": 3, "ts": 1000}, {"id": 4, "ts": 2000}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    chunks = list(SortedFileSource(data, time="ts", batch_size=2).read({}))
    events = [e for c in chunks for e in c.events]
    # unreadable first (dead letters at once), then by time, ties in input order
    assert [getattr(e, "text", None) or e["id"] for e in events] == [2, "{broken", 1, 3, 4, 0]
    assert [c.end_offset for c in chunks] == [2, 4, 6]
    assert chunks[0].positions == [f"{data}:2", f"{data}:5"]
    # resuming from an offset gives the rest, in the same order
    rest = list(SortedFileSource(data, time="ts", batch_size=2).read(
        {chunks[0].partition: 4}))
    assert [e["id"] for c in rest for e in c.events] == [4, 0]


def test_sorted_replay_reads_several_files_and_compressed_ones(cards: Any,
                                                               tmp_path: Path) -> None:
    events = list(cards.events)
    random.Random(3).shuffle(events)
    table = pa.Table.from_pylist(events)
    half = len(events) // 2
    with pa.output_stream(str(tmp_path / "a.csv.gz"), compression="gzip") as f:
        pcsv.write_csv(table.slice(0, half), f)
    with pa.output_stream(str(tmp_path / "b.csv.zst"), compression="zstd") as f:
        pcsv.write_csv(table.slice(half), f)
    s = replay(card_testing(), [str(tmp_path / "a.csv.gz"), str(tmp_path / "b.csv.zst")],
               key="card_id", time="ts", output=tmp_path / "out" / "m.jsonl", sort=True,
               batch_size=300, progress=False)
    assert (s.events_in, s.late, s.dead_letters, s.matches) == (
        len(events), 0, 0, len(cards.episodes))


def test_resuming_a_sorted_replay_needs_sort(shuffled: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    chk = str(tmp_path / "chk")
    batches = iter(range(1000))
    first = replay(card_testing(), [shuffled], key="card_id", time="ts",
                   output=tmp_path / "out" / "m.jsonl", sort=True, batch_size=200,
                   checkpoint_dir=chk, progress=False, stop=lambda: next(batches) == 3)
    assert first.stopped and first.events_in == 800
    args = replay_args(shuffled, tmp_path / "out", "--batch-size", "200", "--quiet",
                       "--checkpoint-dir", chk, "--resume")
    assert cep_main(args) == 2
    assert "it was a replay with --sort: resume with --sort" in capsys.readouterr().err
    assert cep_main([*args, "--sort"]) == 0
    want = match(shuffled, card_testing(), key="card_id", time="ts")
    assert spans(committed(tmp_path / "out", "matches")) == Counter(
        (m.key, m.start, m.end) for m in want)


# =====================================================================================
# item 3: the command line
# =====================================================================================

# ------------------------------------------------------------------ pattern specs
RULES_PY = """\
from cep import Pattern, col

rule = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)


def factory(first=1, second=2):
    return Pattern.begin("a").where(col("v") == first).next("b").where(col("v") == second)
"""


def test_pattern_specs_module_file_and_factory(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myrules.py").write_text(RULES_PY)
    rule = Pattern.begin("a").where(col("v") == 1).next("b").where(col("v") == 2)
    assert load_pattern("cep.patterns.fraud:card_testing") == card_testing()
    assert load_pattern("myrules.py:rule") == rule
    assert load_pattern("myrules:rule") == rule  # a module of the current directory
    assert load_pattern("myrules.py:factory") == rule
    assert load_pattern("myrules.py:factory(1, second=2)") == rule
    assert load_pattern("cep.patterns.fraud:card_testing(tests=4, within='5m')") == card_testing(
        tests=4, within=timedelta(minutes=5))
    assert load_pattern("cep.patterns.fraud:card_testing(big=1e3, tests=3)") == card_testing(
        big=1000.0)


@pytest.mark.parametrize(("spec", "says"), [
    ("cep.patterns.fraud:card_testing(tests=__import__('os').system('touch pwned'))",
     "is not a literal"),
    ("cep.patterns.fraud:card_testing(tests=open('pwned', 'w'))", "is not a literal"),
    ("cep.patterns.fraud:card_testing(*[4])", "*[4] is not allowed"),
    ("cep.patterns.fraud:card_testing(**{'tests': 4})", "is not allowed"),
    ("cep.patterns.fraud:card_testing(tests=4", "cannot read the arguments"),
    ("cep.patterns.fraud:card_testing(tests=4) + 1", "expected one call"),
    ("cep.patterns.fraud:card_testing(within='5')", "has no unit"),
    ("cep.patterns.fraud:card_testing(nope=1)", "calling card_testing(nope=1) failed"),
    ("cep.patterns.fraud:EARTH_RADIUS_KM(1)", "not a function"),
])
def test_factory_arguments_are_literals_never_evaluated(
        spec: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CEPError, match=r"^pattern ") as err:
        load_pattern(spec)
    assert says in str(err.value) and spec in str(err.value)
    assert not (tmp_path / "pwned").exists()


def test_pattern_and_rule_json_files(tmp_path: Path) -> None:
    pattern_file = tmp_path / "card_testing.json"
    pattern_file.write_text(card_testing().to_json())
    assert load_pattern(str(pattern_file)) == card_testing()
    rule_file = tmp_path / "rule.json"
    rule_file.write_text(Rule("ct", 1, "card_id", card_testing(tests=4)).to_json())
    loaded = load(str(rule_file))
    assert (loaded.pattern, loaded.key, loaded.rule) == (card_testing(tests=4), "card_id", "ct")
    several = tmp_path / "rules.json"
    several.write_text(json.dumps({"rules": [
        Rule("ct", 1, ["card_id", "merchant"], card_testing()).to_dict(),
        Rule("big", 2, "card_id", Pattern.begin("b").where(col("amount") > 500)).to_dict()]}))
    assert load(f"{several}:ct").key == ("card_id", "merchant")
    with pytest.raises(CEPError, match="holds 2 rules \\(ct, big\\): pick one with"):
        load(str(several))
    with pytest.raises(CEPError, match="has no rule 'nope' \\(rules: ct, big\\)"):
        load(f"{several}:nope")
    (tmp_path / "broken.json").write_text('{"name": "x",')
    with pytest.raises(CEPError, match="not valid JSON"):
        load(str(tmp_path / "broken.json"))
    with pytest.raises(CEPError, match="no such file"):
        load(str(tmp_path / "missing.json"))


def test_a_rule_file_gives_the_key_and_a_contradicting_key_is_refused(
        cards: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "cards.parquet"
    pq.write_table(pa.Table.from_pylist(cards.events), data)
    rule_file = tmp_path / "rule.json"
    rule_file.write_text(Rule("ct", 1, "card_id", card_testing()).to_json())
    assert cep_main(["match", str(rule_file), str(data), "--time", "ts"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {json.loads(line)["card_id"] for line in lines} == {e.key for e in cards.episodes}
    assert cep_main(["match", str(rule_file), str(data), "--time", "ts",
                     "--key", "merchant"]) == 2
    err = capsys.readouterr().err
    assert "rule 'ct' is keyed by card_id; --key merchant contradicts it" in err


@pytest.mark.parametrize("command", ["explain", "match", "plot", "replay"])
def test_every_subcommand_takes_every_kind_of_spec(command: str, cards: Any, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "cards.parquet"
    pq.write_table(pa.Table.from_pylist(cards.events), data)
    (tmp_path / "p.json").write_text(card_testing().to_json())
    card = cards.episodes[0].key
    for spec in ("cep.patterns.fraud:card_testing(tests=3)", str(tmp_path / "p.json")):
        tail = {"explain": [],
                "match": [str(data), "--key", "card_id", "--time", "ts"],
                "plot": [str(data), "--key", "card_id", "--time", "ts", "--for", card,
                         "-o", str(tmp_path / "p.svg")],
                "replay": [str(data), "--key", "card_id", "--time", "ts", "--quiet",
                           "--output", str(tmp_path / "out" / "m.jsonl")]}[command]
        if command == "replay":
            for p in (tmp_path / "out").glob("*/*"):
                p.unlink()
        assert cep_main([command, spec, *tail]) == 0, capsys.readouterr().err
    capsys.readouterr()


# ------------------------------------------------------------------ cep match
def test_match_reads_directories_globs_and_compressed_files(
        cards: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = pa.Table.from_pylist(cards.events)
    third = table.num_rows // 3
    (tmp_path / "dir").mkdir()
    pq.write_table(table.slice(0, third), tmp_path / "dir" / "part-1.parquet")
    with pa.output_stream(str(tmp_path / "part-2.csv.gz"), compression="gzip") as f:
        pcsv.write_csv(table.slice(third, third), f)
    with pa.output_stream(str(tmp_path / "part-3.jsonl.zst"), compression="zstd") as f:
        f.write("".join(json.dumps(r) + "\n"
                        for r in table.slice(2 * third).to_pylist()).encode())
    code = cep_main(["match", "cep.patterns.fraud:card_testing", str(tmp_path / "dir"),
                     str(tmp_path / "part-[23].*"), "--key", "card_id", "--time", "ts"])
    assert code == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert all(r["kind"] == "match" for r in records)
    want = match(cards.events, card_testing(), key="card_id", time="ts")
    assert spans(records) == Counter(
        (m.key, m.start, m.end) for m in want)
    n = len(want)
    assert captured.err.startswith(f"cep match: {n} matches over {len(cards.events):,} events")
    # a pattern that matches nothing is an error naming it
    assert cep_main(["match", "cep.patterns.fraud:card_testing", str(tmp_path / "*.nope"),
                     "--time", "ts"]) == 2
    assert f"{tmp_path / '*.nope'}: no files match" in capsys.readouterr().err


def test_match_prints_timeouts_with_type_start_and_end(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    rows = [{"card_id": "c1", "ts": 0, "amount": 1.0}, {"card_id": "c1", "ts": 1000,
                                                        "amount": 2.0}]
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cep_main(["match", "cep.patterns.fraud:card_testing(tests=2, within='1m')", str(data),
                     "--key", "card_id", "--time", "ts", "--timeouts"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert records and {r["kind"] for r in records} == {"timeout"}
    assert all(list(r)[:6] == ["card_id", "kind", "match_id", "start", "end", "timeout_at"]
               for r in records)
    assert (records[0]["card_id"], records[0]["start"], records[0]["timeout_at"]) == (
        "c1", 0, 60_000)
    assert "0 matches, 2 timeouts over 2 events" in captured.err


def test_match_composite_key_time_unit_and_engine(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    seconds = 1_709_251_200
    rows = [{"card": "c1", "shop": s, "ts": seconds + 60 * i, "amount": a}
            for s in ("s1", "s2") for i, a in enumerate([1.0, 2.0, 3.0, 900.0])]
    rows.append({"card": "c1", "shop": "s3", "ts": seconds, "amount": 1.0})
    data = tmp_path / "s.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    base = ["match", "cep.patterns.fraud:card_testing", str(data), "--key", "card,shop",
            "--time", "ts"]
    assert cep_main(base) == 2  # epoch seconds are not guessed at
    assert "--time-unit s" in capsys.readouterr().err
    outputs = []
    for engine in ("reference", "numba"):
        assert cep_main([*base, "--time-unit", "s", "--engine", engine, "-q"]) == 0
        captured = capsys.readouterr()
        assert captured.err == ""
        outputs.append(captured.out)
    assert outputs[0] == outputs[1]
    records = [json.loads(line) for line in outputs[0].splitlines()]
    assert [(r["card"], r["shop"], r["start"]) for r in records] == [
        ("c1", "s1", seconds * 1000), ("c1", "s2", seconds * 1000)]


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_match_writes_the_table_of_matches_to_a_file(
        cards: Any, tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "cards.parquet"
    pq.write_table(pa.Table.from_pylist(cards.events), data)
    out = tmp_path / "out" / f"matches{suffix}"
    assert cep_main(["match", "cep.patterns.fraud:card_testing", str(data), "--key", "card_id",
                     "--time", "ts", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"into {out}" in captured.err
    want = match(cards.events, card_testing(), key="card_id", time="ts", output="arrow")
    if suffix == ".parquet":
        got = pq.read_table(out)
        assert got.equals(want)  # nested stage columns kept
    elif suffix == ".csv":
        got = pcsv.read_csv(out)
        assert got["match_id"].to_pylist() == want["match_id"].to_pylist()
        first_stage = want.column_names[6]
        assert [json.loads(v) for v in got[first_stage].to_pylist()] == (
            want[first_stage].to_pylist())
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert rows == want.to_pylist()
    assert cep_main(["match", "cep.patterns.fraud:card_testing", str(data), "--key", "card_id",
                     "--time", "ts", "--output", str(tmp_path / "m.xlsx")]) == 2
    assert "name a .parquet, .csv or .jsonl file" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_match_of_an_empty_file_writes_an_empty_table(tmp_path: Path, suffix: str) -> None:
    """No events, so no columns to make the stages' events of: Parquet, which cannot
    store a struct of no field, gets lists of nulls; every format gets a file of no rows."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / f"matches{suffix}"
    assert cep_main(["match", "cep.patterns.fraud:card_testing", str(empty), "--key",
                     "card_id", "--time", "ts", "--output", str(out), "-q"]) == 0
    if suffix == ".parquet":
        got = pq.read_table(out)
        assert got.num_rows == 0
        assert "match_id" in got.column_names and "small" in got.column_names
    else:
        assert out.exists()


def test_match_exits_quietly_when_the_reader_goes_away(tmp_path: Path) -> None:
    """``cep match ... | head -1``: status 0 and no traceback when stdout's pipe closes."""
    rows = [{"k": i % 50, "ts": i, "v": 1} for i in range(20_000)]
    data = tmp_path / "many.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    (tmp_path / "rules.py").write_text(
        "from cep import Pattern, col\nrule = Pattern.begin('a').where(col('v') == 1)\n")
    proc = subprocess.Popen([*CEP, "match", "rules.py:rule", str(data), "--key", "k",
                             "--time", "ts"], cwd=tmp_path, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # like head -1
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert json.loads(first)["kind"] == "match"
    assert err == ""


# ------------------------------------------------------------------ cep replay
def test_replay_composite_key_time_unit_and_globs(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    seconds = 1_709_251_200
    for day, shop in enumerate(("s1", "s2")):
        rows = [{"card": "c1", "shop": shop, "ts": seconds + 86_400 * day + 60 * i, "amount": a}
                for i, a in enumerate([1.0, 2.0, 3.0, 900.0])]
        (tmp_path / f"day{day}.jsonl.gz").write_bytes(__import__("gzip").compress(
            "".join(json.dumps(r) + "\n" for r in rows).encode()))
    out = tmp_path / "out"
    assert cep_main(["replay", "cep.patterns.fraud:card_testing", str(tmp_path / "day*.jsonl.gz"),
                     "--key", "card,shop", "--time", "ts", "--time-unit", "s",
                     "--output", str(out / "matches.jsonl"), "--quiet"]) == 0
    assert [(r["card"], r["shop"], r["start"]) for r in committed(out, "matches")] == [
        ("c1", "s1", seconds * 1000), ("c1", "s2", (seconds + 86_400) * 1000)]


def test_summary_names_the_directories_really_written(
        shuffled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cep_main(replay_args(shuffled, Path("alerts"), "--sort", "--timeouts")) == 0
    text = capsys.readouterr().out
    [row] = [line for line in text.splitlines() if "│ written" in line]
    assert "alerts/matches/ (6 matches)" in row
    assert "alerts/timeouts/ (" in text
    assert "late/" not in text and "dead_letters" not in text  # nothing went there


def test_ctrl_c_stops_at_a_checkpoint_and_prints_the_command_that_resumes(
        shuffled: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert cep_main(replay_args(shuffled, reference, "--sort", "--quiet")) == 0
    chk = tmp_path / "chk"
    args = replay_args(shuffled, tmp_path / "out", "--sort", "--batch-size", "100",
                       "--checkpoint-dir", str(chk), "--checkpoint-every", "300",
                       "--speed", "50000", "--quiet")
    proc = subprocess.Popen([*CEP, *args], cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(chk.glob("chk-*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "the replay ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "stopping at the next batch boundary" in err
    command = err.split("Resume with:\n", 1)[1].strip()
    assert command == shlex.join(["cep", *args, "--resume"])
    # the printed command resumes; the output is then the uninterrupted run's, exactly once
    resumed = subprocess.run([*CEP, *shlex.split(command)[1:]], cwd=tmp_path, env=env(),
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    for kind in ("matches", "timeouts"):
        got = [json.dumps(r, sort_keys=True) for r in committed(tmp_path / "out", kind)]
        want = [json.dumps(r, sort_keys=True) for r in committed(reference, kind)]
        assert Counter(got) == Counter(want), kind


def test_ctrl_c_without_a_checkpoint_dir_says_nothing_can_be_resumed(shuffled: Path,
                                                                      tmp_path: Path) -> None:
    args = replay_args(shuffled, tmp_path / "out", "--sort", "--batch-size", "100",
                       "--speed", "50000", "--quiet")
    proc = subprocess.Popen([*CEP, *args], cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60  # until the replay has set up its output
    while not (tmp_path / "out" / "matches").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the replay ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "nothing can be resumed (no --checkpoint-dir)" in err and "Traceback" not in err


# ------------------------------------------------------------------ the rest
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        cep_main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"cep {version('cep')}\n"


@pytest.mark.parametrize("command", ["explain", "match", "plot", "replay"])
def test_every_subcommand_help_shows_an_example(command: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cep_main([command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and f"\n  cep {command} " in text


@pytest.mark.parametrize(("args", "says"), [
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--checkpoint-every", "5"],
     "--checkpoint-every needs --checkpoint-dir"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--resume"],
     "--resume needs --checkpoint-dir"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl",
      "--out-of-orderness", "5"], "duration '5' has no unit: write 5ms, 5s"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--sort",
      "--out-of-orderness", "5s"], "leave out --out-of-orderness"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--max-late", "lots"],
     "give a number of events (100) or a percentage"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--speed", "0"],
     "give a number > 0"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--batch-size", "0"],
     "give a number > 0"),
    (["replay", "p:q", "x.csv", "--time", "ts", "--output", "o.jsonl", "--time-unit", "min"],
     "invalid choice: 'min'"),
    (["match", "p:q", "x.csv", "--key", "card,,shop"], "give a field name, or field names"),
    (["match", "p:q", "x.csv", "--time-unit", "s"], "give --time too"),
])
def test_flags_that_make_no_sense_together_are_refused(
        args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cep_main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert says in err and err.startswith("usage: cep ")


def test_out_of_orderness_zero_needs_no_unit(shuffled: Path, tmp_path: Path) -> None:
    args = replay_args(shuffled, tmp_path / "out", "--sort", "--quiet")
    assert cep_main([*args, "--out-of-orderness", "0"]) == 0


def test_plot_takes_a_composite_key_and_a_time_unit(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    seconds = 1_709_251_200
    rows = [{"card": "c1", "shop": s, "ts": seconds + 60 * i, "amount": a}
            for s in ("s1", "s2") for i, a in enumerate([1.0, 2.0, 3.0, 900.0, 5.0])]
    data = tmp_path / "s.csv"
    pcsv.write_csv(pa.Table.from_pylist(rows), data)
    out = tmp_path / "c1-s2.svg"
    assert cep_main(["plot", "cep.patterns.fraud:card_testing", str(data), "--key", "card,shop",
                     "--time", "ts", "--time-unit", "s", "--for", "c1,s2", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}: card,shop = c1,s2, 5 events, 1 match\n"


def test_warnings_are_said_as_the_command_says_its_other_messages(tmp_path: Path) -> None:
    """A field no event holds is a warning: ``cep replay: warning: ...``, not Python's
    form (the file and line of cep's code, then that line)."""
    from cep.rules import Rule

    rule = Rule("typo", 1, "card", Pattern.begin("a").where(col("amout") > 5))
    (tmp_path / "typo.json").write_text(rule.to_json())
    (tmp_path / "e.jsonl").write_text('{"card": "c1", "ts": 1000, "amount": 9}\n')
    done = run("replay", "typo.json", "e.jsonl", "--time", "ts", "--output", "out.jsonl",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "cep replay: warning: field 'amout'" in done.stderr
    assert ".py:" not in done.stderr


def test_cep_match_writes_strict_json(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Every line parses with a strict JSON parser (RFC 8259): an infinite amount is
    null, as NaN is; bytes are base64 and durations ISO-8601, as Spark's JSON writer and
    cep replay's records give them, not Python's reprs."""
    data = tmp_path / "t.parquet"
    pq.write_table(pa.table({"ts": [1, 2], "f": [float("inf"), float("nan")],
                             "b": pa.array([b"\x00\xff", b"ok"]),
                             "dur": pa.array([1500, 1000], pa.duration("ms"))}), data)
    (tmp_path / "p.json").write_text(Pattern.begin("a").to_json())
    assert cep_main(["match", str(tmp_path / "p.json"), str(data), "--time", "ts", "-q"]) == 0

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    rows = [json.loads(line, parse_constant=refuse)
            for line in capsys.readouterr().out.splitlines()]
    assert [r["a"] for r in rows] == [
        [{"ts": 1, "f": None, "b": "AP8=", "dur": "P0DT0H0M1.5S"}],
        [{"ts": 2, "f": None, "b": "b2s=", "dur": "P0DT0H0M1S"}]]


def test_an_error_over_several_files_names_the_row_in_its_own_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not the row of all the files joined (it said ``nulldir: row 4``)."""
    folder = tmp_path / "nulldir"
    folder.mkdir()
    (folder / "1.jsonl").write_text("".join(
        json.dumps({"user": "ann", "ts": t}) + "\n" for t in (1, 2, 3)))
    (folder / "2.jsonl").write_text(json.dumps({"user": "bob", "ts": 3}) + "\n"
                                    + json.dumps({"user": None, "ts": 4}) + "\n")
    (tmp_path / "p.json").write_text(Pattern.begin("a").to_json())
    assert cep_main(["match", str(tmp_path / "p.json"), str(folder), "--key", "user",
                     "--time", "ts"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"cep match: {folder / '2.jsonl'}: row 1: key field 'user' is null")
    with pytest.raises(CEPError, match=r"2\.jsonl: row 1: key field 'user' is null"):
        match([folder], Pattern.begin("a"), key="user", time="ts")
