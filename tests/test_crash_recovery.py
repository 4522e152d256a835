"""Crash recovery for real, and the ``cep replay`` command line.

A ``cep replay`` subprocess with checkpoints is killed with SIGKILL at points drawn
from a seeded random generator, restarted with ``--resume``, killed again, ... until
it exits 0.  Its committed output (``OUT/matches/part-*.jsonl`` and
``OUT/timeouts/part-*.jsonl``) must equal an uninterrupted run's: nothing lost,
nothing duplicated, the same order per key.  This is the issue's acceptance test
(issue 3, "Crash recovery, for real").

Kill points come from a seed and are tied to the job's progress rather than to the
clock alone (so they land in every phase of a run on fast and slow machines alike):
during start-up, a random time after the attempt has written 1-3 new checkpoints,
or while an epoch's sink files are pending (between a checkpoint's prepare and its
commit); restarts after the last checkpoint are killed too.  ``--speed`` paces the
replay so that a run lasts long enough to be killed several times.  The uninterrupted
run uses the same flags.  A longer variant (more events, 15 kills, three seeds) is
marked ``slow`` (``make test-slow``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from cep.runtime.cli import main as cep_main

ROOT = Path(__file__).resolve().parents[1]

EXPR_RULES = '''\
from cep import Pattern, col

# a small charge, two big ones, then a 9, all within 400 ms (numba engine)
rule = (
    Pattern.begin("a").where(col("v") < 2)
    .followed_by("b").where(col("v") >= 7).times(2)
    .followed_by("c").where(col("v") == 9)
    .within(400)
)
'''

LAMBDA_RULES = '''\
from cep import Pattern, SkipStrategy

# a run of small values, then a big one, within 300 ms (Python conditions: reference engine)
rule = (
    Pattern.begin("a", skip=SkipStrategy.skip_past_last_event())
    .where(lambda e: e["v"] < 3).one_or_more().consecutive()
    .next("b").where(lambda e: e["v"] > 8)
    .within(300)
)
'''

#: two rules in one job (the module's Patterns, each a rule named by its attribute)
SEVERAL_RULES = EXPR_RULES + '''
# two nines in a row, within 200 ms
two_nines = Pattern.begin("n1").where(col("v") == 9).next("n2").where(col("v") == 9).within(200)
'''

DELAY_MS = 40  # the stream is out of order by less than this; --out-of-orderness 50ms


def make_stream(n: int, seed: int, keys: int = 5) -> list[dict[str, Any]]:
    """A deterministic keyed stream, slightly out of order (bounded by DELAY_MS)."""
    rng = random.Random(seed)
    rows, ts = [], 1_700_000_000_000
    for i in range(n):
        ts += rng.randint(0, 30)
        rows.append({"k": f"card-{rng.randint(1, keys)}", "v": rng.randint(0, 9), "ts": ts, "i": i})
    jitter = random.Random(seed + 1)
    rows.sort(key=lambda r: r["ts"] + jitter.uniform(0, DELAY_MS - 1))
    return rows


def write_input(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".csv":
        pcsv.write_csv(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    return e


def replay_cmd(rules: Path, data: Path, chk: Path, out: Path, *extra: str) -> list[str]:
    # a module of several rules is named whole; otherwise its rule ``rule``
    spec = str(rules) if "two_nines" in rules.read_text() else f"{rules}:rule"
    return [
        sys.executable, "-m", "cep.runtime.cli", "replay", spec, str(data),
        "--key", "k", "--time", "ts", "--out-of-orderness", f"{DELAY_MS + 10}ms",
        "--checkpoint-dir", str(chk), "--checkpoint-every", "200", "--batch-size", "100",
        "--output", str(out / "matches.jsonl"), "--quiet", "--timeouts", *extra,
    ]


def committed(out: Path, kind: str) -> list[dict[str, Any]]:
    """Every record of the committed files ``out/<kind>/part-*.jsonl``, in file order."""
    records: list[dict[str, Any]] = []
    for part in sorted((out / kind).glob("part-*.jsonl")):
        records += [json.loads(line) for line in part.read_text().splitlines() if line]
    return records


def canon(record: Any) -> str:
    return json.dumps(record, sort_keys=True)


def assert_exactly_once(got: list[dict[str, Any]], want: list[dict[str, Any]], what: str) -> None:
    got_c, want_c = Counter(map(canon, got)), Counter(map(canon, want))
    lost, extra = want_c - got_c, got_c - want_c
    assert not lost and not extra, (
        f"{what}: {sum(lost.values())} lost, {sum(extra.values())} duplicated or extra; "
        f"e.g. lost {list(lost)[:2]}, extra {list(extra)[:2]}"
    )
    for key in {r["k"] for r in want}:
        assert [canon(r) for r in got if r["k"] == key] == \
               [canon(r) for r in want if r["k"] == key], f"{what}: order of key {key}"


def run_to_end(cmd: Sequence[str], cwd: Path, timeout: float = 120) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return time.monotonic() - started, proc.stdout


def latest_checkpoint(chk: Path) -> int | None:
    if not chk.exists():
        return None
    ids = [int(p.name[4:]) for p in chk.glob("chk-*") if p.name[4:].isdigit()]
    return max(ids) if ids else None


def events_done(chk: Path) -> int:
    """Source offset of the newest checkpoint (0 when there is none)."""
    latest = latest_checkpoint(chk)
    if latest is None:
        return 0
    manifest = json.loads((chk / f"chk-{latest:09d}" / "manifest.json").read_text())
    return sum(int(v) for v in manifest["job"]["offsets"].values())


def wait_for(proc: subprocess.Popen[Any], ready: Callable[[], bool], limit: float = 60) -> None:
    """Poll until ``ready()``, the process ends, or ``limit`` seconds pass."""
    deadline = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.001)


def run_with_kills(cmd: Sequence[str], cwd: Path, chk: Path, out: Path, *, seed: int,
                   kills: int, startup: float, interval: float) -> list[dict[str, Any]]:
    """Start, SIGKILL at a seeded random point, restart with --resume, ... until an attempt
    exits 0 (after ``kills`` kills the last attempt is left to finish).

    A kill point is drawn from the seed: some attempts are killed during start-up (a
    random fraction of ``startup`` seconds); the others after the attempt has written 1
    to 3 new checkpoints and then either a random fraction of a checkpoint ``interval``
    later (between checkpoints, or while one is written) or as soon as an epoch's sink
    files are pending (between a checkpoint's sink prepare and commit) -- on fast and
    slow machines alike.  Returns what was seen at each kill.
    """
    rng = random.Random(seed)
    seen: list[dict[str, Any]] = []
    attempt = 0
    while True:
        args = list(cmd) + (["--resume"] if attempt else [])
        log = cwd / f"stderr-{attempt}.txt"
        attempt += 1
        mode = rng.choices(["startup", "between", "pending"], weights=[15, 45, 40])[0]
        wait_startup = rng.uniform(0.1, 1.0) * startup
        new_checkpoints = rng.randint(1, 3)
        extra = rng.uniform(0.0, 1.0) * interval
        first = latest_checkpoint(chk) or 0
        with open(log, "w") as err:
            proc = subprocess.Popen(args, cwd=cwd, env=env(), stdout=subprocess.DEVNULL,
                                    stderr=err)
            if len(seen) < kills:
                if mode == "startup":
                    time.sleep(wait_startup)
                else:
                    target = first + new_checkpoints
                    wait_for(proc, lambda t=target: (latest_checkpoint(chk) or 0) >= t)
                    if mode == "between":
                        time.sleep(extra)
                    else:
                        wait_for(proc, lambda: any(out.glob("*/*.pending")),
                                 limit=1 + 5 * interval)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    seen.append({
                        "mode": mode,
                        "checkpoint": latest_checkpoint(chk),
                        "events_done": events_done(chk),
                        "pending_files": len(list(out.glob("*/*.pending"))),
                    })
                    continue
            rc = proc.wait(timeout=120)
        assert rc == 0, f"attempt {attempt} exited {rc}: {log.read_text()}"
        return seen


def with_words(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with a column ``amount`` no rule reads, and words among the numbers of it
    and of ``v`` (which the rules read): CSV batches that stay columnar, the word kept
    beside the column (cep.nfa.stray_text), in the checkpoints' waiting rows too."""
    out = [dict(r, amount=r["i"] % 50) for r in rows]
    for j in range(13, len(out), 97):
        out[j]["v"] = "pending"
    for j in range(29, len(out), 89):
        out[j]["amount"] = "unknown"
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """CSV of ``rows`` (one header: the first row's fields), values as Python writes them."""
    names = list(rows[0])
    path.write_text(",".join(names) + "\n" + "".join(
        ",".join(str(r[c]) for c in names) + "\n" for r in rows))
    return path


def crash_and_compare(tmp_path: Path, rules_text: str, data_name: str, *, engine: str, n: int,
                      seed: int, kills: int, speed: float, words: bool = False
                      ) -> list[dict[str, Any]]:
    rules = tmp_path / "rules.py"
    rules.write_text(rules_text)
    data = (write_csv(tmp_path / data_name, with_words(make_stream(n, seed))) if words
            else write_input(tmp_path / data_name, make_stream(n, seed)))
    span_s = (max(r["ts"] for r in make_stream(n, seed)) - 1_700_000_000_000) / 1000

    # the reference: one uninterrupted run (same flags, same pace)
    ref_out = tmp_path / "uninterrupted"
    full_seconds, _ = run_to_end(
        replay_cmd(rules, data, tmp_path / "chk-ref", ref_out, "--speed", str(speed)), tmp_path)
    want = {kind: committed(ref_out, kind)
            for kind in ("matches", "timeouts", "late", "dead_letters")}
    assert len(want["matches"]) > 20 and len(want["timeouts"]) > 20, "a stream without matches"
    assert len({r["k"] for r in want["matches"]}) >= 4
    assert not want["late"]
    # every rule reads v: a word there is a dead letter; one in amount is none
    assert [d["event"]["v"] for d in want["dead_letters"]] == (
        ["pending"] * len(range(13, n, 97)) if words else [])
    assert full_seconds >= span_s / speed  # --speed paced it
    manifest = json.loads(
        (max((tmp_path / "chk-ref").glob("chk-*")) / "manifest.json").read_text())
    assert manifest["pattern"].startswith(f"{engine}:")  # engine="auto" chose as expected
    if "two_nines" in rules_text:  # every record says its rule; both rules found some
        assert {r["rule"] for r in want["matches"]} == {"rule", "two_nines"}

    # start-up cost of an attempt: resuming the finished run (imports, checkpoint load)
    startup, _ = run_to_end(
        replay_cmd(rules, data, tmp_path / "chk-ref", ref_out, "--resume"), tmp_path)
    assert_exactly_once(committed(ref_out, "matches"), want["matches"], "resume after the end")

    out, chk = tmp_path / "out", tmp_path / "chk"
    seen = run_with_kills(replay_cmd(rules, data, chk, out, "--speed", str(speed)), tmp_path,
                          chk, out, seed=seed, kills=kills,
                          startup=startup, interval=200 * span_s / n / speed)
    print(f"kills (seed {seed}, uninterrupted run {full_seconds:.1f}s, "
          f"start-up {startup:.1f}s):", seen)

    assert len(seen) >= min(kills, 3), f"the job ended before it could be killed: {seen}"
    # kill points fell while the job was making progress, not only during start-up
    progress = [s["events_done"] for s in seen]
    assert len(set(progress) - {0}) >= 2, seen

    for kind in ("matches", "timeouts", "late", "dead_letters"):
        assert_exactly_once(committed(out, kind), want[kind], kind)
    # nothing left half-done
    assert not list(out.glob("*/*.pending")) and not list(out.glob("*/*.tmp"))
    assert not [p for p in chk.iterdir() if p.name.startswith(".")]
    return seen


def test_sigkill_at_random_points_expression_pattern_numba(tmp_path: Path) -> None:
    crash_and_compare(tmp_path, EXPR_RULES, "events.parquet", engine="numba", n=3000,
                      seed=20240601, kills=6, speed=25)


def test_sigkill_at_random_points_lambda_pattern_reference(tmp_path: Path) -> None:
    crash_and_compare(tmp_path, LAMBDA_RULES, "events.jsonl", engine="reference", n=3000,
                      seed=7, kills=6, speed=25)


def test_sigkill_at_random_points_several_rules_in_one_job(tmp_path: Path) -> None:
    crash_and_compare(tmp_path, SEVERAL_RULES, "events.csv", engine="numba", n=3000,
                      seed=11, kills=6, speed=25)


def test_sigkill_at_random_points_words_among_numbers(tmp_path: Path) -> None:
    crash_and_compare(tmp_path, SEVERAL_RULES, "events.csv", engine="numba", n=3000,
                      seed=13, kills=6, speed=25, words=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("rules", "data", "engine"),
                         [(EXPR_RULES, "events.parquet", "numba"),
                          (LAMBDA_RULES, "events.jsonl", "reference"),
                          (SEVERAL_RULES, "events.csv", "numba")],
                         ids=["numba", "reference", "several-rules"])
def test_sigkill_many_times(tmp_path: Path, rules: str, data: str, engine: str, seed: int) -> None:
    crash_and_compare(tmp_path, rules, data, engine=engine, n=8000, seed=seed, kills=15,
                      speed=40)


# ---------------------------------------------------------------------------
# the command line: errors say what is wrong and exit 2; a summary unless --quiet
# ---------------------------------------------------------------------------

@pytest.fixture
def small(tmp_path: Path) -> dict[str, Path]:
    rules = tmp_path / "rules.py"
    rules.write_text(EXPR_RULES)
    data = write_input(tmp_path / "events.jsonl", make_stream(600, seed=3))
    return {"rules": rules, "data": data, "dir": tmp_path}


def replay(*args: str) -> int:
    return cep_main(["replay", *args])


def base_args(small: dict[str, Path], *extra: str, spec: str | None = None) -> list[str]:
    return [spec or f"{small['rules']}:rule", str(small["data"]), "--key", "k", "--time", "ts",
            "--output", str(small["dir"] / "out" / "matches.jsonl"), *extra]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("rules_without_colon", "expected module:attribute"),
        ("{dir}/nowhere.py:rule", "no such file"),
        ("{dir}/rules.py:nope", "has no attribute 'nope'"),
        ("{dir}/notpattern.py:rule", "not a Pattern"),
        ("no_such_module_xyz:rule", "cannot import module 'no_such_module_xyz'"),
    ],
)
def test_bad_pattern_spec(small: dict[str, Path], capsys: pytest.CaptureFixture[str],
                          spec: str, says: str) -> None:
    (small["dir"] / "notpattern.py").write_text("rule = 42\n")
    spec = spec.format(dir=small["dir"])
    assert replay(*base_args(small, "--quiet", spec=spec)) == 2
    err = capsys.readouterr().err
    assert err.startswith("cep replay: ") and says in err and spec in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("source", ['rule = Pattern.begin("a"\n', 'raise RuntimeError("boom")\n'],
                         ids=["syntax-error", "raises"])
def test_pattern_file_that_does_not_import(tmp_path: Path, source: str) -> None:
    rules = tmp_path / "broken.py"
    rules.write_text(source)
    data = write_input(tmp_path / "events.jsonl", make_stream(10, seed=1))
    proc = subprocess.run(
        [sys.executable, "-m", "cep.runtime.cli", "replay", f"{rules}:rule", str(data), "--time", "ts",
         "--output", str(tmp_path / "out" / "m.jsonl"), "--quiet"],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("cep replay: ") and "broken.py" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_exit_code_and_stderr_of_a_real_process(small: dict[str, Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cep.runtime.cli", "replay", *base_args(small, "--quiet", spec="bad")],
        cwd=small["dir"], env=env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "cep replay: pattern 'bad': expected module:attribute, file.py:attribute, "
        "module:factory(arg=literal, ...) or a pattern/rule .json file")
    assert proc.stdout == ""


def test_missing_input_file(small: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    missing = small["dir"] / "no-such-events.parquet"
    args = base_args(small, "--quiet")
    args[1] = str(missing)
    assert replay(*args) == 2
    err = capsys.readouterr().err
    assert err.startswith("cep replay: ") and str(missing) in err and "no such file" in err


def test_resume_without_a_checkpoint_dir(small: dict[str, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:  # a wrong command line: argparse's usage error
        replay(*base_args(small, "--quiet", "--resume"))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "cep replay: error: --resume needs --checkpoint-dir" in err


def test_resume_from_a_corrupt_checkpoint(small: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    chk = small["dir"] / "chk"
    assert replay(*base_args(small, "--quiet", "--checkpoint-dir", str(chk))) == 0
    latest = max(chk.glob("chk-*"))
    victim = latest / "arrays.npz"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0x55
    victim.write_bytes(bytes(data))
    assert replay(*base_args(small, "--quiet", "--checkpoint-dir", str(chk), "--resume")) == 2
    err = capsys.readouterr().err
    assert err.startswith("cep replay: checkpoint ") and victim.name in err and "checksum" in err


def test_a_fresh_run_over_an_earlier_runs_checkpoints(
    small: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Forgetting --resume must not destroy the committed output of the earlier run."""
    chk = small["dir"] / "chk"
    args = base_args(small, "--quiet", "--checkpoint-dir", str(chk), "--checkpoint-every", "200",
                     "--batch-size", "100")
    assert replay(*args) == 0
    out = small["dir"] / "out"
    before = {kind: committed(out, kind) for kind in ("matches", "timeouts")}
    assert before["matches"]
    code = replay(*args)
    err = capsys.readouterr().err
    if code == 2:
        assert err.startswith("cep replay: ") and "--resume" in err
    else:
        assert code == 0, err
    assert {kind: committed(out, kind) for kind in ("matches", "timeouts")} == before
    assert replay(*args, "--resume") == 0
    assert {kind: committed(out, kind) for kind in ("matches", "timeouts")} == before


def test_summary_unless_quiet(small: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    chk = small["dir"] / "chk"
    assert replay(*base_args(small, "--checkpoint-dir", str(chk), "--checkpoint-every", "200",
                             "--batch-size", "100")) == 0
    out = capsys.readouterr().out
    matches = committed(small["dir"] / "out", "matches")
    timeouts = committed(small["dir"] / "out", "timeouts")
    assert "replay summary" in out
    for label, value in [("events", "600"), ("matches", f"{len(matches):,}"),
                         ("timeouts", f"{len(timeouts):,}"), ("late events", "0"),
                         ("dead letters", "0"), ("engine", "numba")]:
        assert any(label in line and f" {value} " in line for line in out.splitlines()), \
            (label, value, out)
    assert "throughput" in out and "peak partial matches" in out and "checkpoints" in out

    # the same batch size: the watermark moves once per batch (another one is refused)
    assert replay(*base_args(small, "--checkpoint-dir", str(chk), "--resume",
                             "--batch-size", "100")) == 0
    out = capsys.readouterr().out
    assert any("resumed from checkpoint" in line and str(max(int(p.name[4:]) for p in
               chk.glob("chk-*")) - 1) in line for line in out.splitlines()), out

    assert replay(*base_args(small, "--checkpoint-dir", str(chk), "--resume", "--quiet",
                             "--batch-size", "100")) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_summary_of_a_real_process(small: dict[str, Path]) -> None:
    _, out = run_to_end([sys.executable, "-m", "cep.runtime.cli", "replay", *base_args(small)],
                        small["dir"])
    assert "replay summary" in out and "600" in out
    _, quiet = run_to_end([sys.executable, "-m", "cep.runtime.cli", "replay",
                           *base_args(small, "--quiet", "--overwrite")], small["dir"])
    assert quiet == ""
