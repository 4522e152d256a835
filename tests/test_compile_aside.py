"""The kernel's first compile on two cores (:mod:`cep.nfa.compile_aside`): the second
process compiles exactly the helpers, with exactly the argument types, the kernel's own
compile asks for, so that numba finds them in its cache instead of compiling them again.
Each check runs numba in a fresh process and an empty cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cep.nfa import compile_aside

ROOT = Path(__file__).resolve().parents[1]

#: what a fresh process prints: each jitted function of the kernel module it compiled,
#: with the argument types of each compile in HELPERS' notation
SIGNATURES = """
import json
import numpy as np
from numba.core import types
from cep.nfa import kernel
from cep.nfa.warmup import warm

warm()
kernel.collect_garbage(np.empty((0, 6), np.int64), 0, np.empty((16, 5), np.int64), 0)
scalars = {types.int64: "i", types.float64: "f", types.boolean: "b"}

def code(t):
    if isinstance(t, types.Array):
        assert t.layout == "C" and t.mutable and t.aligned, t
        return scalars[t.dtype] + str(t.ndim)
    return scalars[t]

print(json.dumps({name: [" ".join(map(code, sig)) for sig in f.signatures]
                  for name, f in vars(kernel).items() if hasattr(f, "signatures")}))
"""


def fresh_python(code: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter with an empty numba cache at ``cache``."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(cache), **env})


def test_helpers_are_listed_with_the_types_the_kernel_gives_them(tmp_path: Path) -> None:
    done = fresh_python(SIGNATURES, tmp_path / "cache", CEP_COMPILE_ASIDE="0")
    assert done.returncode == 0, done.stderr[-3000:]
    compiled = json.loads(done.stdout.strip().splitlines()[-1])
    # the kernel itself is compiled by the process that needs it; start_events only for
    # patterns whose start reads the partial match (not the warm-up's)
    asked = {(name, spec) for name, specs in compiled.items() for spec in specs
             if name not in ("_keys", "start_events")}
    assert asked == set(compile_aside.HELPERS)


def test_the_second_process_compiles_every_helper_into_the_cache(tmp_path: Path) -> None:
    """What the second process runs ends cleanly, and numba then holds every helper: a
    process compiling the kernel afterwards loads them."""
    cache = tmp_path / "cache"
    child = fresh_python(
        "from cep.nfa.compile_aside import compile_helpers; compile_helpers()", cache)
    assert child.returncode == 0, child.stderr[-3000:]
    indexed = {p.name.split(".")[1].rsplit("-", 1)[0] for p in cache.rglob("kernel.*.nbi")}
    assert {name for name, _ in compile_aside.HELPERS} <= indexed
    assert list(cache.rglob("ordering._counting_order-*.nbi"))


#: a fresh process's first two batches put in order, and whether the counting sort was
#: compiled after each
FIRST_ORDERS = """
import json
import numpy as np
from cep.nfa import ordering

if ASIDE:
    ordering.compiled_aside()
keys = np.array([2, 0, 1, 0, 2, 1]); times = np.array([9, 4, 4, 1, 3, 4])
out = []
for _ in range(2):
    order = ordering.key_time_order(keys, times, 3)
    out.append([order.tolist(), bool(ordering._counting_order.signatures)])
print(json.dumps(out))
"""


@pytest.mark.parametrize("aside", [True, False])
def test_the_first_batch_is_sorted_without_compiling_the_counting_sort_if_compiled_aside(
        tmp_path: Path, aside: bool) -> None:
    """A process's first batch, the counting sort neither compiled nor cached, is sorted
    by np.lexsort when a second process compiles the counting sort meanwhile (the kernel's
    compile comes next), and the next batch uses it: the same order.  With no second
    process, the counting sort is compiled at once (later it would only delay the next
    batch)."""
    code = f"ASIDE = {aside}\n{FIRST_ORDERS}"
    done = fresh_python(code, tmp_path / "cache", CEP_COMPILE_ASIDE="0")
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    expected = [3, 1, 2, 5, 4, 0]  # key by key, by time, ties in arrival order
    assert first == [expected, not aside]
    assert second == [expected, True]


def test_no_second_process_for_a_kernel_compiled_already() -> None:
    from cep.nfa.warmup import warm

    warm()  # compiled in this process (or loaded from numba's cache)
    assert not compile_aside._wanted()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: never wanted")
@pytest.mark.parametrize("env", [{compile_aside.SWITCH: "0"}, {compile_aside._IN_CHILD: "1"}])
def test_no_second_process_when_switched_off_or_in_the_second_process(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str]) -> None:
    """A kernel neither compiled nor cached (a stand-in): wanted, unless switched off or
    asked from the second process itself."""
    from types import SimpleNamespace

    cache = SimpleNamespace(_cache_file=SimpleNamespace(_index_path=str(tmp_path / "none.nbi")))
    monkeypatch.setattr(compile_aside, "kernel",
                        SimpleNamespace(_keys=SimpleNamespace(signatures=[], _cache=cache)))
    monkeypatch.delenv(compile_aside.SWITCH, raising=False)
    monkeypatch.delenv(compile_aside._IN_CHILD, raising=False)
    assert compile_aside._wanted()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert not compile_aside._wanted()
