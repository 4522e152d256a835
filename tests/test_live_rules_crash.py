"""A crash during a rule change (#13 item 2): a job running a rule set whose rules change
twice (a new version drained, then a rule removed) is killed with SIGKILL at seeded
random points, in the middle of the changes too, and resumed; its committed output must
equal an uninterrupted run's, record for record.

The changes come from a :class:`~cep.runtime.RuleSchedule` (sets effective from event
times), so the uninterrupted run and every resumed attempt make them at the same
watermarks; the harness (kill points tied to the job's checkpoints, exactly-once
comparison) is the one of ``test_crash_recovery``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_crash_recovery import (
    DELAY_MS,
    assert_exactly_once,
    committed,
    make_stream,
    run_to_end,
    run_with_kills,
    write_input,
)

JOB = '''\
import sys
from datetime import timedelta

from cep import Pattern, col
from cep.rules import Rule
from cep.runtime import FileSource, Job, RuleSchedule, WatermarkStrategy
from cep.runtime.replay import sinks_for

data, chk, out, engine, policy, first, second = sys.argv[1:8]
speed = float(sys.argv[8])
pattern = (Pattern.begin("a").where(col("v") < 2)
           .followed_by("b").where(col("v") >= 7).times(2)
           .followed_by("c").where(col("v") == 9).within(400))
v1 = Rule("seq", 1, "k", pattern)
v2 = Rule("seq", 2, "k", Pattern.begin("a").where(col("v") < 3)
          .followed_by("b").where(col("v") >= 8).within(300))
nines = Rule("two_nines", 1, "k", Pattern.begin("n1").where(col("v") == 9)
             .next("n2").where(col("v") == 9).within(200))
schedule = RuleSchedule([(None, [v1, nines]), (int(first), [v2, nines]), (int(second), [v2])])
job = (Job(FileSource(data, batch_size=100)).timestamps("ts")
       .with_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
           timedelta(milliseconds={delay})))
       .rules(schedule, on_change=policy, engine=engine)
       .checkpoint(chk, every_events=200))
for kind, sink in sinks_for(out + "/matches.jsonl").items():
    job = job.sink(sink, kinds=(kind,))
job.run(resume="--resume" in sys.argv, speed=speed)
'''.replace("{delay}", str(DELAY_MS + 10))


def crash_during_changes(tmp_path: Path, *, engine: str, policy: str, n: int, seed: int,
                         kills: int, speed: float) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    rows = make_stream(n, seed)
    data = write_input(tmp_path / "events.parquet", rows)
    times = sorted(r["ts"] for r in rows)
    first, second = times[n // 3], times[2 * n // 3]
    span_s = (times[-1] - times[0]) / 1000

    def cmd(chk: Path, out: Path) -> list[str]:
        return [sys.executable, str(script), str(data), str(chk), str(out), engine, policy,
                str(first), str(second), str(speed)]

    ref = tmp_path / "uninterrupted"
    run_to_end(cmd(tmp_path / "chk-ref", ref), tmp_path)
    want = {kind: committed(ref, kind) for kind in ("matches", "timeouts")}
    versions = {(r["rule"], r["version"]) for r in want["matches"]}
    assert versions == {("seq", 1), ("seq", 2), ("two_nines", 1)}, versions
    assert max(r["end"] for r in want["matches"] if r["rule"] == "two_nines") < second
    startup, _ = run_to_end(cmd(tmp_path / "chk-ref", ref) + ["--resume"], tmp_path)

    out, chk = tmp_path / "out", tmp_path / "chk"
    seen = run_with_kills(cmd(chk, out), tmp_path, chk, out, seed=seed, kills=kills,
                          startup=startup, interval=200 * span_s / n / speed)
    print(f"kills (seed {seed}):", seen)
    assert len(seen) >= min(kills, 3), f"the job ended before it could be killed: {seen}"
    # some kills fell on each side of a change
    done = [s["events_done"] for s in seen]
    assert min(done) < n // 3 < max(done) or min(done) < 2 * n // 3 < max(done), seen
    for kind in ("matches", "timeouts"):
        assert_exactly_once(committed(out, kind), want[kind], kind)
    assert not list(out.glob("*/*.pending")) and not list(out.glob("*/*.tmp"))


@pytest.mark.parametrize(("engine", "policy", "seed"), [("numba", "drain", 5),
                                                        ("reference", "drop", 6)])
def test_sigkill_during_rule_changes(tmp_path: Path, engine: str, policy: str,
                                     seed: int) -> None:
    crash_during_changes(tmp_path, engine=engine, policy=policy, n=3000, seed=seed, kills=6,
                         speed=25)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize(("engine", "policy"), [("numba", "drain"), ("numba", "drop"),
                                                ("reference", "drain")])
def test_sigkill_during_rule_changes_many_times(tmp_path: Path, engine: str, policy: str,
                                                seed: int) -> None:
    crash_during_changes(tmp_path, engine=engine, policy=policy, n=8000, seed=seed, kills=15,
                         speed=40)
