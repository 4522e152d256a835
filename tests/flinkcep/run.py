"""``python -m tests.flinkcep.run``: draw cases, run them on FlinkCEP and on cep, compare.

Exits 1 when cep differs from Flink other than by Flink's known loss (see the package
docstring), printing each difference with its pattern and events.  Needs Java 17 and
Flink's jars, which ``make test-flinkcep`` installs (``benchmarks/.flink-venv``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.flinkcep.cases import cases
from tests.flinkcep.compare import differences, on_flink

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = ROOT / "build" / "flinkcep"


def _jars() -> Path:
    found = sorted((ROOT / "benchmarks" / ".flink-venv").glob("lib/python*/site-packages/pyflink/lib"))
    if not found:
        sys.exit("Flink's jars are not installed: run make test-flinkcep (it installs them)")
    return found[0]


def _compiled(jars: Path) -> None:
    """Compile Harness.java into build/flinkcep unless it is up to date."""
    source, made = HERE / "Harness.java", BUILD / "Harness.class"
    if made.exists() and made.stat().st_mtime >= source.stat().st_mtime:
        return
    BUILD.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-cp", f"{jars}/*", "-d", str(BUILD), str(source)],
                   check=True)


def _flink(drawn: list[dict], jars: Path, watermarks: str) -> dict:
    BUILD.mkdir(parents=True, exist_ok=True)
    given, written = BUILD / "cases.json", BUILD / "flink.out"
    given.write_text(json.dumps(drawn))
    env = {**os.environ, "WM": watermarks}
    with open(BUILD / "flink.log", "w") as log:
        subprocess.run(["java", "-Xmx1g", "-cp", f"{BUILD}:{jars}/*", "Harness", str(given),
                        str(written), "60"], check=True, env=env, stderr=log)
    return on_flink(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.flinkcep.run", description=__doc__)
    parser.add_argument("--cases", type=int, default=600, help="cases per seed (600)")
    parser.add_argument("--seed", type=int, action="append",
                        help="seed of the random cases (2 and 3 by default; 3 with ties)")
    parser.add_argument("--watermarks", choices=["final", "periodic", "punctuated"],
                        default="final",
                        help="Flink's watermarks: one when the input ends (cep.match's; the "
                        "default), Flink's periodic ones (by the wall clock: where they fall "
                        "varies) or one after every event (then Flink's timing differs from "
                        "cep.match's, which sees one final watermark)")
    args = parser.parse_args(argv)
    jars = _jars()
    _compiled(jars)
    seeds = args.seed or [2, 3]
    failed = 0
    for seed in seeds:
        began = time.perf_counter()
        drawn = cases(seed, args.cases, ties=seed % 2 == 1)
        flink = _flink(drawn, jars, args.watermarks)
        found = differences(drawn, flink)
        flinks = [d for d in found if d.flinks_lost_timer]
        ours = [d for d in found if not d.flinks_lost_timer]
        refused = sum(1 for c in drawn if flink.get(c["id"], ()) is None)
        crashed = [c["id"] for c in drawn if isinstance(flink.get(c["id"]), str)]
        print(f"seed {seed}{' (ties)' if seed % 2 else ''}: {len(drawn)} cases ({refused} "
              f"refused by Flink's compiler, {len(crashed)} failing in Flink at run time, "
              f"not compared), {len(ours)} differences, {len(flinks)} of Flink's lost "
              f"window timers, {time.perf_counter() - began:.0f} s")
        for c in crashed:
            print(f"  failed in Flink: case {c}: {flink[c]}")
        for d in flinks:
            print(f"  Flink's lost timer: case {d.case['id']} ({d.engine}, {d.what})")
        for d in ours:
            print(d)
        failed += len(ours)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
