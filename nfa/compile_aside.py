"""The kernel's first compile on two cores: a second process compiles its helpers.

numba compiles the kernel (:func:`cep.nfa.kernel._keys`) and each jitted helper it calls
one after another, in the process that first needs them: about 10 s on a machine's first
use (numba caches each on disk, so only once).  The helpers are a third of that.  When an
engine is made and the kernel is in neither this process nor numba's cache, a second
Python process compiles the helpers into the same cache (in the order of
:data:`HELPERS`), while this one compiles the kernel.  numba looks in its cache before
it compiles a helper, so each one the second process has finished is loaded instead
(``make bench``: the first ``cep.match`` compiles in about 7 s instead of 10 s on two
cores).  It also compiles the counting sort that puts batches in order, which a
process's first batch does without (:func:`cep.nfa.ordering.key_time_order`).

It runs only when this process may use two CPUs or more (pinned to one, the two would
share it).  The second process writes nothing but numba's cache, as this one would
(numba writes each entry whole and renames it into place, so two writers never leave a
torn file), and it is stopped when this process exits (on Linux also when this process
is killed).  ``CEP_COMPILE_ASIDE=0`` turns it off.

:data:`HELPERS` must name the argument types the kernel's compile gives each helper (the
kernel is called with the same array types whatever the pattern); a test compiles the
kernel in a fresh cache and compares, so a changed helper cannot leave it stale.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from typing import Any

from cep.nfa import kernel, ordering
from cep.nfa.jit_cache import ready

#: the environment variable that turns the second process off (``0``)
SWITCH = "CEP_COMPILE_ASIDE"
#: set in the second process's environment (to the first's pid): it starts no other
_IN_CHILD = "CEP_COMPILE_ASIDE_CHILD"

#: the kernel's helpers, the costly ones its compile reaches early first (the kernel's
#: compile spends two seconds before it reaches any, and this process one starting), the
#: cheap ones it reaches first last (it compiles them itself), then those
#: :func:`cep.nfa.kernel.run` calls after it, with the types of their arguments: ``i``,
#: ``f``, ``b`` for int64, float64 and bool, followed by the number of dimensions for a
#: C-contiguous array of them (``i2``: a 2-D array of int64)
HELPERS: tuple[tuple[str, str], ...] = (
    # what the heap needs, first: the kernel's compile reaches _emit early (timeouts)
    ("_copy", "i2 f2 i i2 f2 i"),
    ("_sift_down", "i2 f2 i i2 f2 i"),
    ("_heapify", "i2 f2 i i2 f2"),
    ("_prune", "i2 f2 i b i i i2 f2"),
    ("_poll", "i2 f2 i i2 f2 i2 f2"),
    ("_emit", "i2 f2 i i2 f2 i i2 f2 i i2 i2 i i i i b i2 f2 i2 f2"),
    # the cap's, then the conditions': it compiles those it reaches before this gets there
    ("_live_rows", "i2 i"),
    ("_by_start", "i2 i1"),
    ("_over_cap", "i2 f2 i i b i2 f2"),
    ("_live_count", "i2 i"),
    ("_put", "i2 i i i i i"),
    ("_hold_to_cap", "i2 f2 i i i i1 i i2 f2 i2 f2 i i2 i2 i i i b i2 f2 i2 f2"),
    ("_binary", "i f f"),
    ("math_fn", "i f"),
    ("_unary", "i f i i i f1"),
    ("eval_cond", "i f2 i f2 i i2 f1 i1 f1"),
    ("_final_after_proceed", "i f2 i f2 i i2 f1 i1 f1 i1 i1 i1 i1 i1 i1 i1 i1 b2"),
    ("_reverse", "i2 i i"),
    ("_rows", "i2 i i2 i i"),
    ("_rows", "f2 i f2 i i"),
    ("_room", "i1 i i i i i i i i"),
    ("_expiring", "i2 i i i i1 i1 i"),
    # called by kernel.run once the kernel is compiled: the second process has the time
    # of the kernel's code generation for them
    ("paths_of", "i2 i1"),
    ("reclaim_nodes", "i2 i i2 i i2 i i2 i i2 i i2 i"),
    ("_mark", "b1 i2 i2 i i i"),  # with reclaim_nodes (listed for the test's check)
    ("_compact", "i2 i b1 i1"),
    ("_remap", "i2 i i i i1"),
)

#: the argument types of :func:`cep.nfa.ordering._counting_order`, compiled last: the first
#: batch is put in order without it (see :func:`cep.nfa.ordering.key_time_order`)
COUNTING_ORDER = "i1 i1 i"

_LOCK = threading.Lock()
_started: list[subprocess.Popen[bytes] | None] = []


def begin() -> None:
    """Start the second process if this one is about to compile the kernel (checked once
    per process; see the module's docstring)."""
    if _started:
        return
    with _LOCK:
        if _started:
            return
        _started.append(None)
        if not _wanted():
            return
        env = {**os.environ, _IN_CHILD: str(os.getpid()),
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            child = subprocess.Popen(
                [sys.executable, "-c",
                 "from cep.nfa.compile_aside import compile_helpers; compile_helpers()"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
        except OSError:  # no interpreter to start: this process compiles them all
            return
        _started[0] = child
        ordering.compiled_aside()
        atexit.register(_stop, child)


def compile_helpers() -> None:
    """Compile :data:`HELPERS` into numba's cache (what the second process runs)."""
    _end_with_parent()
    for name, spec in HELPERS:
        getattr(kernel, name).compile(argument_types(spec))
    ordering._counting_order.compile(argument_types(COUNTING_ORDER))


def _end_with_parent() -> None:
    """On Linux, have this (second) process end when the one that started it ends, however
    that one ends: its exit handler does not run when it is killed (SIGTERM, SIGKILL)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the exit handler alone
        return
    parent = os.environ.get(_IN_CHILD, "")
    if parent.isdigit() and os.getppid() != int(parent):
        sys.exit(0)  # it ended before the line above: nothing to help


#: prctl's option that sends a signal when the parent ends (linux/prctl.h)
_PR_SET_PDEATHSIG = 1


def argument_types(spec: str) -> tuple[Any, ...]:
    """The numba types a :data:`HELPERS` entry names.

    >>> argument_types("i2 f b1")
    (Array(int64, 2, 'C', False, aligned=True), float64, Array(bool, 1, 'C', False, aligned=True))
    """
    from numba.core import types

    scalars = {"i": types.int64, "f": types.float64, "b": types.boolean}
    return tuple(scalars[code[0]] if len(code) == 1
                 else types.Array(scalars[code[0]], int(code[1:]), "C")
                 for code in spec.split())


def _wanted() -> bool:
    """Will this process compile the kernel, with a second CPU to spare?"""
    if os.environ.get(SWITCH, "").strip() == "0" or os.environ.get(_IN_CHILD):
        return False
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) < 2:
        return False
    return bool(sys.executable) and not ready(kernel._keys)


def _stop(child: subprocess.Popen[bytes]) -> None:
    """Stop the second process at exit (it only helps while this one compiles)."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
