"""The numba engine's kernel: FlinkCEP's NFA step over columnar batches.

One generic kernel serves every pattern: the pattern arrives as data (state
and transition tables, condition bytecode from :mod:`cep.nfa.bytecode`, slot
update tables), so numba compiles this module once per machine and caches it
on disk; a new pattern costs no JIT time.

State per key, carried between batches in an arena:
* partial matches: a heap of records in java.util.PriorityQueue layout;
* completed matches waiting for earlier partial matches (skip strategies).
A record is ``[state, node, start_ts, prev_ts, start_event_ts, start_event_seq]``
plus a row of float64 "slots" (the partial match's running aggregates that
expressions read: first/last/prev values, counts, sums, min, max).
Event paths are nodes ``[row, stage, parent, ts, seq]`` in one append-only arena.
"""

# ruff: noqa: E741

import numpy as np
from numba import njit

from cep.nfa.jit_cache import cacheable

#: numba caches compiled code on disk when it can (see cep.nfa.jit_cache)
CACHE = cacheable(__file__)

MAXI = np.int64(9223372036854775807)
NO_TIME = np.int64(-9223372036854775808)

K_START, K_NORMAL, K_FINAL, K_STOP, K_PENDING = 0, 1, 2, 3, 4
A_TAKE, A_IGNORE, A_PROCEED = 0, 1, 2
S_NONE, S_NEXT, S_PAST_LAST, S_FIRST, S_LAST = 0, 1, 2, 3, 4
# The array layouts and codes, defined here once: every reader (columnar.py, capacity.py,
# numba_state.py, skip_codes.py) imports them.  They stay in this module on purpose:
# numba freezes global values into its on-disk cache, which it renews only when this
# file changes, so constants imported from another module could go stale in the cache.
#: columns of a partial-match record (arena rows ``AI``; see the module docstring)
R_STATE, R_NODE, R_START, R_PREV, R_SID_TS, R_SID_SEQ = 0, 1, 2, 3, 4, 5
#: ``R_SID_TS``/``R_SID_SEQ`` of a partial match that has taken no event yet
NO_START = MAXI
#: columns of an event-path node ``[row, stage, parent, ts, seq]``
N_ROW, N_STAGE, N_PARENT, N_TS, N_SEQ = 0, 1, 2, 3, 4
#: columns of an output row ``[kind, key, tail node, expiry or error]``
O_KIND, O_KEY, O_NODE, O_EXPIRY = 0, 1, 2, 3
#: output kinds (``O_KIND``): a match, a timeout, a skip-strategy error (``O_EXPIRY`` its code)
OUT_MATCH, OUT_TIMEOUT, OUT_ERROR = 0, 1, 2
ERR_SKIP_MISSING, ERR_SKIP_FIRST = 1, 2
#: PROCEED edges that loop without end (an internal error)
ERR_PROCEED_LOOP = 3
#: a key went over its cap on partial matches with ``CAP_FAIL`` (``O_NODE``: how many)
ERR_CAP = 4
#: what a key over its cap on partial matches does (``cap_policy``)
CAP_FAIL, CAP_DROP_OLDEST, CAP_DROP_NEWEST = 0, 1, 2
#: slots of the in-out ``counters`` array: partial matches the cap dropped
C_DROPPED = 0


#: the decorator of the kernel's inner functions: they allocate no array and return none,
#: so they are compiled without numba's reference counting, which otherwise counts every
#: array argument up and down, atomically, on every call (40% of the kernel's time on a
#: pattern whose conditions read the partial match, evaluated per partial match per event;
#: flatline's pass 83 -> 55 ms per 1M events, 49 with the usual ops done in eval_cond).
_inner = njit(cache=CACHE, no_cpython_wrapper=True, _nrt=False)
#: the decorator of inner functions that make arrays: they keep the counting, said in so
#: many words (numba gives a function called from one without it none, unless told)
_counted = njit(cache=CACHE, no_cpython_wrapper=True, _nrt=True)


OP_COL, OP_CONST, OP_SLOT = 0, 1, 2
OP_ADD, OP_SUB, OP_MUL, OP_DIV = 3, 4, 5, 6  # 7 was abs, now OP_MATH
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE = 8, 9, 10, 11, 12, 13
OP_AND3, OP_OR3, OP_NOT3, OP_ISIN, OP_ISNULL, OP_TRUTH, OP_AVG = 14, 15, 16, 17, 18, 19, 20
OP_IS_TRUE, OP_BAND, OP_BOR, OP_BNOT, OP_TRUE, OP_MATH = 21, 22, 23, 24, 25, 26
OP_COALESCE = 27
#: short cuts of AND and OR (``a``: where the AND or OR ends): with the left operand on top,
#: skip the right one and the AND when it is false, the OR when it is true (the left is
#: then the result); evaluated a column at a time both operands are, and these do nothing
OP_SKIP_IF_FALSE, OP_SKIP_IF_TRUE = 28, 29
_UNARY = (OP_MATH, OP_NOT3, OP_BNOT, OP_ISNULL, OP_TRUTH, OP_IS_TRUE, OP_ISIN)
SL_PREV, SL_COUNT, SL_FIRST, SL_LAST, SL_SUM, SL_NONNULL, SL_MIN, SL_MAX = 0, 1, 2, 3, 4, 5, 6, 7


@_inner
def math_fn(fn, v):
    """cep.expr.MATH[fn] of ``v``; NaN (null) for anything not finite, as the reference does."""
    if np.isnan(v):
        return v
    r = np.nan
    if fn == 0:
        r = np.sqrt(v) if v >= 0.0 else np.nan
    elif fn == 1:
        r = np.exp(v)
    elif fn == 2:
        r = np.log(v) if v > 0.0 else np.nan
    elif fn == 3:
        r = np.sin(v)
    elif fn == 4:
        r = np.cos(v)
    elif fn == 5:
        r = np.tan(v)
    elif fn == 6:
        r = np.arcsin(v) if -1.0 <= v <= 1.0 else np.nan
    elif fn == 7:
        r = np.arccos(v) if -1.0 <= v <= 1.0 else np.nan
    elif fn == 8:
        r = np.arctan(v)
    elif fn == 9:
        r = np.floor(v)
    elif fn == 10:
        r = np.ceil(v)
    elif fn == 11:
        r = v * (np.pi / 180.0)
    elif fn == 12:
        r = v * (180.0 / np.pi)
    elif fn == 13:
        r = abs(v)
    elif fn == 14:  # hour of the day, UTC, of epoch milliseconds
        h = np.floor(v / 3600000.0)
        r = h - np.floor(h / 24.0) * 24.0
    elif fn == 15:  # ISO day of the week (Monday 1), UTC; 1970-01-01 was a Thursday
        d = np.floor(v / 86400000.0) + 3.0
        r = d - np.floor(d / 7.0) * 7.0 + 1.0
    return r if np.isfinite(r) else np.nan


@_inner
def _unary(op, v, a, width, null_in, consts):
    """A one-operand op (truth values are floats: 1 true, 0 false, NaN unknown)."""
    if op == OP_MATH:
        return math_fn(a, v)
    if op == OP_NOT3 or op == OP_BNOT:
        return v if np.isnan(v) else 1.0 - v
    if op == OP_ISNULL:
        return 1.0 if np.isnan(v) else 0.0
    if op == OP_TRUTH:
        if np.isnan(v):
            return v
        return 1.0 if v != 0.0 else 0.0
    if op == OP_IS_TRUE:
        return 1.0 if v == 1.0 else 0.0
    # OP_ISIN
    if np.isnan(v):
        return np.nan
    for j in range(a, a + width):
        if consts[j] == v:
            return 1.0
    return np.nan if null_in != 0 else 0.0  # x IN (..., NULL) is unknown on no other hit


@_inner
def _binary(op, x, y):
    """A two-operand op, SQL's three-valued logic for nulls (NaN)."""
    if op == OP_ADD:
        return x + y
    if op == OP_SUB:
        return x - y
    if op == OP_MUL:
        return x * y
    if op == OP_DIV:
        return np.nan if (y == 0.0 or np.isnan(x) or np.isnan(y)) else x / y
    if op == OP_AVG:
        return np.nan if y == 0.0 else x / y
    if op == OP_COALESCE:
        return y if np.isnan(x) else x
    if op == OP_AND3 or op == OP_BAND:
        if x == 0.0 or y == 0.0:
            return 0.0
        return np.nan if (np.isnan(x) or np.isnan(y)) else 1.0
    if op == OP_OR3 or op == OP_BOR:
        if x == 1.0 or y == 1.0:
            return 1.0
        return np.nan if (np.isnan(x) or np.isnan(y)) else 0.0
    if np.isnan(x) or np.isnan(y):
        return np.nan
    if op == OP_EQ:
        return 1.0 if x == y else 0.0
    if op == OP_NE:
        return 1.0 if x != y else 0.0
    if op == OP_LT:
        return 1.0 if x < y else 0.0
    if op == OP_LE:
        return 1.0 if x <= y else 0.0
    if op == OP_GT:
        return 1.0 if x > y else 0.0
    return 1.0 if x >= y else 0.0


#: per comparison op (``OP_EQ`` to ``OP_GE``), which orders of its operands make it true,
#: as bits: bit 0 less, bit 1 equal, bit 2 greater (:func:`eval_cond` picks one by shifting)
_ORDER_BITS = np.array([2, 5, 1, 3, 4, 6], np.int64)


@_inner
def eval_cond(cid, C, i, S, srow, prog, consts, cstart, stack):
    """Run condition ``cid``'s bytecode on event ``i`` with the slots ``S[srow]``; truth
    values are floats: 1 true, 0 false, NaN unknown.  (A row index, not the row: a view
    costs two atomic reference-count updates per call.)  The ops of most conditions
    (operands, comparisons, AND, OR, IS TRUE) are done here, the others by :func:`_unary`
    and :func:`_binary`: a call per op was a fifth of the time of a pattern whose
    conditions read the partial match."""
    sp = 0
    pc = cstart[cid]
    end = cstart[cid + 1]
    while pc < end:
        op = prog[pc, 0]
        a = prog[pc, 1]
        pc += 1
        if op == OP_COL:
            stack[sp] = C[a, i]
            sp += 1
        elif op == OP_CONST:
            stack[sp] = consts[a]
            sp += 1
        elif op == OP_SLOT:
            stack[sp] = S[srow, a]
            sp += 1
        elif op == OP_SKIP_IF_FALSE:
            if stack[sp - 1] == 0.0:
                pc = a
        elif op == OP_SKIP_IF_TRUE:
            if stack[sp - 1] == 1.0:
                pc = a
        elif OP_EQ <= op <= OP_GE:
            sp -= 1
            x = stack[sp - 1]
            y = stack[sp]
            order = 1 + (x > y) - (x < y)
            stack[sp - 1] = (float((_ORDER_BITS[op - OP_EQ] >> order) & 1)
                             if (x == x and y == y) else np.nan)
        elif op == OP_AND3 or op == OP_BAND or op == OP_OR3 or op == OP_BOR:
            # a false operand decides an AND, a true one an OR; else unknown wins
            decides = 0.0 if (op == OP_AND3 or op == OP_BAND) else 1.0
            sp -= 1
            x = stack[sp - 1]
            y = stack[sp]
            if x == decides or y == decides:
                stack[sp - 1] = decides
            else:
                stack[sp - 1] = 1.0 - decides if (x == x and y == y) else np.nan
        elif op == OP_IS_TRUE:
            stack[sp - 1] = 1.0 if stack[sp - 1] == 1.0 else 0.0
        elif op == OP_TRUE:
            stack[sp] = 1.0
            sp += 1
        elif op in _UNARY:
            stack[sp - 1] = _unary(op, stack[sp - 1], a, prog[pc - 1, 2], prog[pc - 1, 3],
                                   consts)
        else:
            sp -= 1
            stack[sp - 1] = _binary(op, stack[sp - 1], stack[sp])
    return stack[0] == 1.0


@njit(cache=CACHE, inline="always", no_cpython_wrapper=True, _nrt=False)
def update_slots(stage, C, i, S, row, sl_kind, sl_stage, sl_col, sl_count):
    """Taking event ``i`` into ``stage``: update the partial match's running values
    ``S[row]``.  Inlined into the kernel: as a call, passing its nine arguments (numba
    passes each array as seven words) was a tenth of the kernel's time on three increasing
    amounts; inlined, that kernel is 15% faster and card testing's 5%, and the first
    compile on two cores was no slower (the kernel's time alone, and the first
    ``cep.match`` on an empty cache, the two versions in turn; 2026-11-28)."""
    for s in range(sl_kind.shape[0]):
        kind = sl_kind[s]
        if kind == SL_PREV:
            S[row, s] = C[sl_col[s], i]
            continue
        if sl_stage[s] != stage or kind == SL_COUNT:
            continue
        v = C[sl_col[s], i]
        if kind == SL_FIRST:
            if S[row, sl_count[s]] == 0.0:
                S[row, s] = v
        elif kind == SL_LAST:
            S[row, s] = v
        elif not np.isnan(v):
            if kind == SL_SUM:
                S[row, s] += v
            elif kind == SL_NONNULL:
                S[row, s] += 1.0
            elif kind == SL_MIN:
                if np.isnan(S[row, s]) or v < S[row, s]:
                    S[row, s] = v
            elif kind == SL_MAX:
                if np.isnan(S[row, s]) or v > S[row, s]:
                    S[row, s] = v
    for s in range(sl_kind.shape[0]):
        if sl_kind[s] == SL_COUNT and sl_stage[s] == stage:
            S[row, s] += 1.0


@_inner
def _rows(D, d, S, s, n):
    """Copy the rows ``S[s:s + n]`` to ``D[d:d + n]``.  (A loop, not a slice assignment:
    numba compiles a shape check for that whose error message alone took seconds of the
    first compile.)"""
    for r in range(n):
        for f in range(S.shape[1]):
            D[d + r, f] = S[s + r, f]


@_inner
def _expiring(RI, lo, n, t, st_kind, st_gap, window):
    """Whether a partial match among ``RI[lo:lo + n]`` times out at ``t`` (a gap or the
    window has passed)."""
    for r in range(lo, lo + n):
        st = RI[r, R_STATE]
        if st_kind[st] != K_START:
            gap = st_gap[st]
            if (gap > 0 and RI[r, R_PREV] <= t - gap) or (
                window > 0 and RI[r, R_START] <= t - window
            ):
                return True
    return False


#: row 0 as an int64 (a literal 0 argument is a type of its own: _copy was compiled four
#: times, once per mix of literal and int64 rows)
_ROW0 = np.int64(0)


@_inner
def _copy(DI, DF, d, SI, SF, s):
    for f in range(6):
        DI[d, f] = SI[s, f]
    for f in range(DF.shape[1]):
        DF[d, f] = SF[s, f]


@njit(cache=CACHE, inline="always", no_cpython_wrapper=True, _nrt=False)
def _less(A, a, B, b):
    """Java's comparator: earlier first event (timestamp, then arrival) comes first."""
    if A[a, R_SID_TS] != B[b, R_SID_TS]:
        return A[a, R_SID_TS] < B[b, R_SID_TS]
    return A[a, R_SID_SEQ] < B[b, R_SID_SEQ]


@njit(cache=CACHE, inline="always", no_cpython_wrapper=True, _nrt=False)
def _push(HI, HF, n, SI, SF, s):
    """Push row ``s`` of ``SI``/``SF`` onto the heap ``HI[:n]``/``HF[:n]``, which has room
    (see :func:`run`); the new length.  It returns no array: rebinding an array
    variable costs two atomic reference-count updates, most of the kernel's time once."""
    # written out, not with _less and _copy: it is inlined at each call, and inlining
    # functions inside it cost seconds of the first compile
    s_ts = SI[s, R_SID_TS]
    s_seq = SI[s, R_SID_SEQ]
    k = n
    while k > 0:
        p = (k - 1) >> 1
        if not (s_ts < HI[p, R_SID_TS] or (s_ts == HI[p, R_SID_TS] and s_seq < HI[p, R_SID_SEQ])):
            break
        for f in range(6):
            HI[k, f] = HI[p, f]
        for f in range(HF.shape[1]):
            HF[k, f] = HF[p, f]
        k = p
    for f in range(6):
        HI[k, f] = SI[s, f]
    for f in range(HF.shape[1]):
        HF[k, f] = SF[s, f]
    return n + 1


@_inner
def _sift_down(HI, HF, k, XI, XF, n):
    half = n >> 1
    while k < half:
        child = 2 * k + 1
        right = child + 1
        if right < n and _less(HI, right, HI, child):
            child = right
        if not _less(HI, child, XI, 0):
            break
        _copy(HI, HF, k, HI, HF, child)
        k = child
    _copy(HI, HF, k, XI, XF, _ROW0)


@_inner
def _poll(HI, HF, n, OI, OF, XI, XF):
    _copy(OI, OF, _ROW0, HI, HF, _ROW0)
    n -= 1
    if n > 0:
        _copy(XI, XF, _ROW0, HI, HF, n)
        _sift_down(HI, HF, np.int64(0), XI, XF, n)
    return n


@_inner
def _heapify(HI, HF, n, XI, XF):
    """Restore the heap order of ``HI[:n]`` as Java's bulk removal does (sift-down from the
    middle), so survivors sit where java.util.PriorityQueue would put them."""
    for j in range((n >> 1) - 1, -1, -1):
        _copy(XI, XF, _ROW0, HI, HF, j)
        _sift_down(HI, HF, j, XI, XF, n)


@_inner
def _prune(HI, HF, n, strict, p_ts, p_seq, XI, XF):
    """Java's bulk removal: keep survivors in array order, then heapify."""
    w = np.int64(0)
    for r in range(n):
        doomed = False
        if HI[r, R_SID_SEQ] != NO_START:
            s_ts = HI[r, R_SID_TS]
            s_seq = HI[r, R_SID_SEQ]
            if strict:
                doomed = s_ts < p_ts or (s_ts == p_ts and s_seq < p_seq)
            else:
                doomed = s_ts < p_ts or (s_ts == p_ts and s_seq <= p_seq)
        if not doomed:
            if w != r:
                _copy(HI, HF, w, HI, HF, r)
            w += 1
    if w != n:
        _heapify(HI, HF, w, XI, XF)
    return w


@_inner
def _live_count(HI, n):
    """How many partial matches in ``HI[:n]`` have taken an event (not the start)."""
    m = 0
    for r in range(n):
        if HI[r, R_SID_SEQ] != NO_START:
            m += 1
    return m


@_counted
def _live_rows(HI, n):
    """Positions in ``HI[:n]`` of partial matches that have taken an event (not the start)."""
    live = np.empty(n, np.int64)
    m = 0
    for r in range(n):
        if HI[r, R_SID_SEQ] != NO_START:
            live[m] = r
            m += 1
    return live[:m]


@_counted
def _by_start(HI, rows):
    """``rows`` (positions in ascending order) sorted by their partial match's first event
    (time, then arrival), ties keeping their order: a bottom-up merge sort comparing the
    records themselves (numba's generic argsort, twice, cost seconds of first compile)."""
    m = rows.shape[0]
    src = rows.copy()
    dst = np.empty(m, np.int64)
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            a = lo
            b = mid
            for out in range(lo, hi):
                # the right run's head goes first only if strictly earlier: stable
                if b < hi and (a >= mid or _less(HI, src[b], HI, src[a])):
                    dst[out] = src[b]
                    b += 1
                else:
                    dst[out] = src[a]
                    a += 1
        src, dst = dst, src
        width *= 2
    return src


@_counted
def _over_cap(HI, HF, n, cap, newest, XI, XF):
    """Hold the heap ``HI[:n]`` to ``cap`` partial matches, dropping the oldest (or with
    ``newest`` the newest) by first event, ties by place in the queue (as
    ``cep.nfa.capacity.over_cap`` orders them); survivors keep array order and are
    heapified.  Returns the new length and how many were dropped."""
    live = _live_rows(HI, n)
    m = live.shape[0]
    excess = m - cap
    if excess <= 0:
        return n, 0
    live = _by_start(HI, live)
    doomed = np.zeros(n, np.bool_)
    first = m - excess if newest else 0
    for j in range(first, first + excess):
        doomed[live[j]] = True
    w = np.int64(0)
    for r in range(n):
        if not doomed[r]:
            if w != r:
                _copy(HI, HF, w, HI, HF, r)
            w += 1
    _heapify(HI, HF, w, XI, XF)
    return w, excess


@_inner
def _put(OUT, on, kind, key, node, value):
    """Append the output row ``[kind, key, node, value]`` (``O_*`` columns) to ``OUT``,
    which has room; the new length."""
    OUT[on, O_KIND] = kind
    OUT[on, O_KEY] = key
    OUT[on, O_NODE] = node
    OUT[on, O_EXPIRY] = value
    return on + 1


@_inner
def _emit(NI, NF, nn, QI, QF, qn, CI, CF, cn, NODES, OUT, on, key,
          skip_kind, skip_stage, skip_throw, XI, XF, OI, OF):
    """Release completed matches in start order, pruning by the skip strategy; ``CI``
    has room for ``cn + qn`` rows and ``OUT`` for ``on + cn + qn + 1``.  Returns the new
    ``nn, cn, on`` and an error code."""
    for r in range(qn):
        cn = _push(CI, CF, cn, QI, QF, r)
    err = 0
    while cn > 0:
        if skip_kind != S_NONE and nn > 0 and _less(NI, 0, CI, 0):
            break  # an earlier-started partial match is still alive
        cn = _poll(CI, CF, cn, OI, OF, XI, XF)
        tail = OI[0, R_NODE]
        if skip_kind != S_NONE:
            has = False
            p_ts = np.int64(0)
            p_seq = np.int64(0)
            if skip_kind == S_PAST_LAST:
                has = True
                p_ts = NODES[tail, N_TS]
                p_seq = NODES[tail, N_SEQ]
            else:
                node = tail
                root = tail
                while node >= 0:
                    if skip_kind == S_FIRST and NODES[node, N_STAGE] == skip_stage:
                        has = True
                        p_ts = NODES[node, N_TS]
                        p_seq = NODES[node, N_SEQ]
                    if skip_kind == S_LAST and NODES[node, N_STAGE] == skip_stage and not has:
                        has = True
                        p_ts = NODES[node, N_TS]
                        p_seq = NODES[node, N_SEQ]
                    root = node
                    node = NODES[node, N_PARENT]
                if skip_kind == S_NEXT:
                    has = True
                    p_ts = NODES[root, N_TS]
                    p_seq = NODES[root, N_SEQ]
                elif skip_throw:
                    if not has:
                        err = ERR_SKIP_MISSING
                    elif p_ts == NODES[root, N_TS] and p_seq == NODES[root, N_SEQ]:
                        err = ERR_SKIP_FIRST
                    if err != 0:
                        on = _put(OUT, on, np.int64(OUT_ERROR), key, tail, err)
                        return nn, cn, on, err
            if has:
                strict = skip_kind == S_FIRST or skip_kind == S_LAST
                nn = _prune(NI, NF, nn, strict, p_ts, p_seq, XI, XF)
                cn = _prune(CI, CF, cn, strict, p_ts, p_seq, XI, XF)
        on = _put(OUT, on, np.int64(OUT_MATCH), key, tail, np.int64(0))
    return nn, cn, on, err


@_inner
def _hold_to_cap(NI, NF, nn, cap, cap_policy, counters, k, QI, QF, KI, KF, cn, NODES, OUT,
                 on, skip_kind, skip_stage, skip_throw, XI, XF, OI, OF):
    """Key ``k``, holding ``nn`` > ``cap`` partial matches after an event, held to ``cap``
    (``cap_policy``; ``ReferenceRun._hold_to_cap``).  Returns the new ``nn, cn, on`` and
    an error code (``ERR_CAP`` for ``CAP_FAIL``, the error in ``OUT``).  Apart from
    :func:`_keys`, which calls it only when a key goes over the cap: its typing and code
    (with :func:`_over_cap`'s) were a tenth of the kernel's first compile, and a second
    process can compile it meanwhile (:mod:`cep.nfa.compile_aside`)."""
    err = 0
    if cap_policy == CAP_FAIL:
        live = _live_count(NI, nn)
        if live > cap:
            on = _put(OUT, on, np.int64(OUT_ERROR), k, live, np.int64(ERR_CAP))
            err = ERR_CAP
        return nn, cn, on, err
    nn, dropped = _over_cap(NI, NF, nn, cap, cap_policy == CAP_DROP_NEWEST, XI, XF)
    counters[C_DROPPED] += dropped
    if dropped > 0 and skip_kind != S_NONE and cn > 0:
        # completed matches that waited for a dropped one may leave now
        nn, cn, on, err = _emit(
            NI, NF, nn, QI, QF, np.int64(0), KI, KF, cn, NODES, OUT, on, k,
            skip_kind, skip_stage, skip_throw, XI, XF, OI, OF)
    return nn, cn, on, err


@_inner
def _final_after_proceed(state, C, i, S, srow, prog, consts, cstart, vstack, st_first, st_count,
                         st_kind, tr_action, tr_target, tr_cond, stack, pre_row, PRE):
    stack[0] = state
    sp = 1
    while sp > 0:
        sp -= 1
        s = stack[sp]
        for tr in range(st_first[s], st_first[s] + st_count[s]):
            if tr_action[tr] != A_PROCEED:
                continue
            c = tr_cond[tr]
            if c < 0:
                ok = True
            elif pre_row[c] >= 0:
                ok = PRE[pre_row[c], i]
            else:
                ok = eval_cond(c, C, i, S, srow, prog, consts, cstart, vstack)
            if ok:
                target = tr_target[tr]
                if st_kind[target] == K_FINAL:
                    return target
                if sp >= stack.shape[0]:
                    return -2  # runaway PROCEED loop
                stack[sp] = target
                sp += 1
    return -1


@_inner
def _mark(live, NODES, A, lo, hi, col):
    for r in range(lo, hi):
        node = A[r, col]
        while node >= 0 and not live[node]:
            live[node] = True
            node = NODES[node, N_PARENT]


@_inner
def _remap(A, lo, hi, col, remap):
    for r in range(lo, hi):
        node = A[r, col]
        if node >= 0:
            A[r, col] = remap[node]


@_counted
def _compact(NODES, nodes_n, live, remap):
    """Live nodes, renumbered, in a new array (a snapshot may still hold the old one)."""
    m = 0
    for j in range(nodes_n):
        if live[j]:
            m += 1
    NEW = np.empty((max(2 * m, 64), 5), np.int64)
    m = 0
    for j in range(nodes_n):
        if live[j]:
            remap[j] = m
            parent = NODES[j, N_PARENT]
            for f in range(5):
                NEW[m, f] = NODES[j, f]
            NEW[m, N_PARENT] = remap[parent] if parent >= 0 else -1
            m += 1
    return NEW, m


@njit(cache=CACHE, nogil=True)
def start_events(C, n, start_state, init_slots, st_first, st_count, tr_action, tr_target,
                 tr_cond, prog, consts, cstart, stack_depth):
    """Per event, whether a key with nothing pending begins a partial match with it: an
    edge that takes the event is reached from the start state.  This is :func:`run`'s
    decision graph for the start row, whose slots are always the initial ones, so it
    holds for every key alike; :func:`run` lets a key with nothing pending skip every
    other event, which would leave it as it is (FlinkCEP steps it through them)."""
    out = np.zeros(n, np.bool_)
    # a state once on the stack for event i is not pushed again (its edges and their
    # conditions, read with the initial slots, give the same each time): the paths
    # through chained PROCEED edges can be exponentially many, the states are few
    stacked = np.full(st_first.shape[0], -1, np.int64)
    stack = np.empty(st_first.shape[0] + 1, np.int64)
    vstack = np.empty(stack_depth + 1, np.float64)
    init2 = init_slots.reshape((1, init_slots.shape[0]))
    for i in range(n):
        stack[0] = start_state
        stacked[start_state] = i
        sp = 1
        hit = False
        while sp > 0 and not hit:
            sp -= 1
            s = stack[sp]
            for tr in range(st_first[s], st_first[s] + st_count[s]):
                c = tr_cond[tr]
                if c < 0 or eval_cond(c, C, i, init2, np.int64(0), prog, consts, cstart, vstack):
                    if tr_action[tr] == A_TAKE:
                        hit = True
                        break
                    if tr_action[tr] == A_PROCEED:
                        target = tr_target[tr]
                        if stacked[target] == i:
                            continue
                        stacked[target] = i
                        stack[sp] = target
                        sp += 1
        out[i] = hit
    return out


#: the position vector ``P`` :func:`run` and :func:`_keys` share (int64): where the pass
#: is (key, event, lengths of the new arena and of the outputs, path nodes), the block of
#: untouched keys' rows waiting to be copied, and the key being processed when ``_keys``
#: pauses in the middle of one (its heap lengths and time)
(P_K, P_SEG, P_BN, P_ON, P_NODES_N, P_BLK_LO, P_BLK_HI, P_BLK_TO, P_GC_AT, P_STATUS, P_ERR,
 P_RESUME, P_PN, P_CN, P_KTIME, P_NEED_SCRATCH, P_NEED_NODES, P_NEED_OUT, P_NEED_ARENA,
 P_NEED_STACK) = range(20)
P_SIZE = 20
#: why :func:`_keys` returned (``P[P_STATUS]``): done, an error (``P[P_ERR]``), path nodes
#: to collect, or arrays to grow (``P[P_NEED_*]``) before it goes on
ST_DONE, ST_ERR, ST_GC, ST_ROOM = 0, 1, 2, 3


def run(mode, t_adv, seg_key, ts, rowid, C, prog, consts, cstart, stack_depth,
        sl_kind, sl_stage, sl_col, sl_count,
        st_kind, st_first, st_count, st_gap, tr_action, tr_target, tr_cond, tr_stage,
        start_state, window, skip_kind, skip_stage, skip_throw, init_slots, want_timeouts,
        gc_min, n_keys, key_time, key_off, key_len, key_coff, key_clen, AI, AF, NODES, nodes_n,
        cap, cap_policy, counters, can_start, pre_row, PRE, scratch=None):
    """Process one sorted batch (mode 0) or advance every key to ``t_adv`` (mode 1).

    ``scratch``: a dict the caller keeps between calls (one engine's, used by one thread
    at a time), holding the scratch arrays as the last call left them, grown, and how
    many outputs, arena rows and path nodes the last call of the same mode made: each
    call starts with room for a quarter more (a call to :func:`_keys` from Python costs
    tens of microseconds, and growing from the last size took three of them per batch).

    The per-key arrays (``key_time`` to ``key_clen``) are ``n_keys`` long, a key new in
    the batch idle in them (no time, length -1), and this function writes them in place,
    as it goes, for the keys it visits: a pass costs what its keys with events or state
    cost, not four new arrays of every key seen (see ``ColumnarEngine._own_keys``).

    A key with nothing pending skips to its next event in ``can_start`` (see
    :func:`start_events`): the events before it would leave the key as it is.  A condition
    with ``pre_row[c] >= 0`` reads only the event and was evaluated for the whole batch
    (:func:`cep.nfa.column_conditions.eval_columns`): whether it holds for event ``i`` is ``PRE[pre_row[c], i]``.

    The work is done by :func:`_keys`, compiled; this function, plain Python, owns the
    arrays.  Numba updates an array's reference count, atomically, each time a variable
    is bound to another array, and a variable rebound anywhere in a loop costs that on
    every turn of the loop (half the kernel's time once, in growing its scratch arrays).
    So :func:`_keys` never binds an array: before each step it checks that the arrays
    have room for what the step can add, and if not it stops before changing anything,
    saying what it needs in ``P``; this function grows the arrays (or reclaims path nodes
    no partial match reaches) and calls it again to go on where it stopped.  (It was
    compiled too, once: numba optimises a function's machine code again within each
    function that calls it, and this one, calling everything, took 3.4 s of the first
    compile's 15.6.  Its allocations cost microseconds from Python.)"""
    ns = init_slots.shape[0]
    n_trans = tr_action.shape[0]
    held = {} if scratch is None else scratch
    last_out, last_arena, last_nodes = held.get(mode, (64, 16, 0))
    # room for half as much again as the last call made: a call that runs out stops,
    # grows and goes on, which cost a restart in a third of a 100-rule job's calls when
    # the room was a quarter more (unused room of an empty array is never touched)
    NODES = _grown(NODES, nodes_n + last_nodes + last_nodes // 2 + 64)
    # the new arena and per-key index
    arena = max(AI.shape[0], last_arena) * 3 // 2 + 16
    BI = np.empty((arena, 6), np.int64)
    BF = np.empty((arena, ns), np.float64)
    # as a key with nothing pending is left: the pass over the keys visits only those
    # with events or state (``live_keys``)
    live_keys = np.flatnonzero(key_len >= 0).astype(np.int64)
    # the caller's per-key arrays are written in place (the pass writes a key's entries
    # only after it has read them)
    new_off, new_len, new_coff, new_clen = key_off, key_len, key_coff, key_clen
    OUT = np.empty((last_out + last_out // 2, 4), np.int64)
    (PI, NI, QI, KI, TI, PF, NF, QF, KF, TF, eoff, eend, XI, XF, OI, OF,
     stack, edges, fstack, vstack) = _scratch_arrays(held.get("arrays"), ns, n_trans,
                                                     stack_depth)
    rows = PI.shape[0]
    P = np.zeros(P_SIZE, np.int64)
    P[P_NODES_N] = nodes_n
    P[P_BLK_LO] = -1
    P[P_BLK_HI] = -1
    P[P_GC_AT] = max(gc_min, 2 * nodes_n)
    an = AI.shape[0]
    while True:
        _keys(P, mode, t_adv, seg_key, ts, rowid, C, prog, consts, cstart,
              sl_kind, sl_stage, sl_col, sl_count,
              st_kind, st_first, st_count, st_gap, tr_action, tr_target, tr_cond, tr_stage,
              start_state, window, skip_kind, skip_stage, skip_throw, init_slots,
              want_timeouts, n_keys, key_time, key_off, key_len, key_coff, key_clen,
              live_keys, AI, AF, NODES, cap, cap_policy, counters, can_start, pre_row, PRE,
              BI, BF, new_off, new_len, new_coff, new_clen, OUT,
              PI, PF, NI, NF, QI, QF, KI, KF, TI, TF, XI, XF, OI, OF,
              stack, edges, fstack, vstack, eoff, eend)
        status = P[P_STATUS]
        if status == ST_GC:
            # reclaim event-path nodes no partial match or pending output reaches
            AI = AI.copy()  # the caller's arena may be held by a snapshot
            NODES, n_nodes = reclaim_nodes(NODES, P[P_NODES_N], AI, an, BI, P[P_BN],
                                           PI, P[P_PN], KI, P[P_CN], OUT, P[P_ON])
            P[P_NODES_N] = n_nodes
            P[P_GC_AT] = max(gc_min, 4 * n_nodes, n_nodes + 1)  # +1: the step goes on
        elif status == ST_ROOM:
            need = P[P_NEED_SCRATCH]
            if need > PI.shape[0]:
                PI = _grown(PI, need)
                rows = PI.shape[0]
                PF, NI, NF, QI, QF, KI, KF, TI, TF = (
                    _grown(a, rows) for a in (PF, NI, NF, QI, QF, KI, KF, TI, TF))
                eoff = np.empty(rows, np.int64)
                eend = np.empty(rows, np.int64)
            NODES = _grown(NODES, P[P_NEED_NODES])
            OUT = _grown(OUT, P[P_NEED_OUT])
            BI = _grown(BI, P[P_NEED_ARENA])
            BF = _grown(BF, P[P_NEED_ARENA])
            stack = _grown(stack, P[P_NEED_STACK])
            edges = _grown(edges, P[P_NEED_STACK])
            P[P_NEED_SCRATCH:P_NEED_STACK + 1] = 0
        else:
            break
    held["arrays"] = (PI, NI, QI, KI, TI, PF, NF, QF, KF, TF, eoff, eend, XI, XF, OI, OF,
                      stack, edges, fstack, vstack)
    held[mode] = (max(64, int(P[P_ON])), max(16, int(P[P_BN])),
                  max(0, int(P[P_NODES_N]) - nodes_n))
    lo, hi, to = P[P_BLK_LO], P[P_BLK_HI], P[P_BLK_TO]
    if hi > lo:  # the block of untouched keys' rows still to copy
        BI = _grown(BI, to + hi - lo)
        BF = _grown(BF, to + hi - lo)
        BI[to:to + hi - lo] = AI[lo:hi]
        BF[to:to + hi - lo] = AF[lo:hi]
    return (BI, BF, P[P_BN], new_off, new_len, new_coff, new_clen, NODES, P[P_NODES_N], OUT,
            P[P_ON], P[P_ERR], key_time)


def _scratch_arrays(kept, ns, n_trans, stack_depth):
    """:func:`run`'s scratch, all with room for as many rows: partial (P), new partial (N),
    potential (Q), completed (K), step results (T), each partial match's edges (eoff,
    eend), single rows (X, O) and stacks; ``kept`` (a call's, grown) when it fits a
    pattern of ``ns`` slots, ``n_trans`` transitions and conditions ``stack_depth`` deep."""
    if kept is not None:
        PF, stack, vstack = kept[5], kept[16], kept[19]
        if (PF.shape[1] == ns and stack.shape[0] >= 4 * n_trans + 64
                and vstack.shape[0] >= stack_depth + 1):
            return kept
    rows = 16
    return (*(np.empty((rows, 6), np.int64) for _ in range(5)),
            *(np.empty((rows, ns), np.float64) for _ in range(5)),
            np.empty(rows, np.int64), np.empty(rows, np.int64),
            np.empty((1, 6), np.int64), np.empty((1, ns), np.float64),
            np.empty((1, 6), np.int64), np.empty((1, ns), np.float64),
            *(np.empty(4 * n_trans + 64, np.int64) for _ in range(3)),
            np.empty(stack_depth + 1, np.float64))


def _grown(a, need):
    """``a`` with room for ``need`` rows (a new, larger array if it has not)."""
    cap = a.shape[0]
    if need <= cap:
        return a
    b = np.empty((max(int(need), 2 * cap + 16), *a.shape[1:]), a.dtype)
    b[:cap] = a
    return b


@_inner
def _room(P, scratch, nodes, out, arena, rows, n_nodes, n_out, n_arena):
    """Whether the arrays have room for a step: rows of scratch (of ``rows``), path nodes,
    outputs, rows of the new arena; if not, what to grow is noted in ``P`` for
    :func:`run`.  (Its callers pass ``np.int64(0)``, not ``0``: numba compiles a function
    anew for each literal it is called with.)"""
    if scratch <= rows and nodes <= n_nodes and out <= n_out and arena <= n_arena:
        return True
    P[P_NEED_SCRATCH] = scratch
    P[P_NEED_NODES] = nodes
    P[P_NEED_OUT] = out
    P[P_NEED_ARENA] = arena
    P[P_STATUS] = ST_ROOM
    return False


@_inner
def _reverse(OUT, lo, hi):
    """Reverse the rows ``OUT[lo:hi]`` in place."""
    hi -= 1
    while lo < hi:
        for f in range(4):
            v = OUT[lo, f]
            OUT[lo, f] = OUT[hi, f]
            OUT[hi, f] = v
        lo += 1
        hi -= 1


@njit(cache=CACHE, nogil=True, _nrt=False)
def _keys(P, mode, t_adv, seg_key, ts, rowid, C, prog, consts, cstart,
          sl_kind, sl_stage, sl_col, sl_count,
          st_kind, st_first, st_count, st_gap, tr_action, tr_target, tr_cond, tr_stage,
          start_state, window, skip_kind, skip_stage, skip_throw, init_slots,
          want_timeouts, n_keys, key_time, key_off, key_len, key_coff, key_clen, live_keys,
          AI, AF, NODES, cap, cap_policy, counters, can_start, pre_row, PRE,
          BI, BF, new_off, new_len, new_coff, new_clen, OUT,
          PI, PF, NI, NF, QI, QF, KI, KF, TI, TF, XI, XF, OI, OF,
          stack, edges, fstack, vstack, eoff, eend):
    """:func:`run`'s pass over the keys, from where ``P`` says, until done or until an array
    lacks room (it binds no array: see :func:`run`).

    Key by key (``seg_key`` sorted; keys without events or timers are copied as they are,
    in blocks, at the end by :func:`run`): load the key's heaps from the arena; then for each of
    its events (or once, for the timer pass), in the sections marked ``# ----``:

    - *time*: partial matches whose window or gap has passed leave, as timeouts or as
      pending matches to emit (``ReferenceRun.advance_time``, FlinkCEP's
      ``NFA.advanceTime``), then :func:`_emit`;
    - *the decision graph*: every partial match's edges for the event, PROCEED edges
      followed (the first half of ``ReferenceRun._next``, FlinkCEP's
      ``computeNextStates``);
    - *follow the edges*: ignore, take (a new path node, slots updated), begin a new
      partial match at the start, reach a final state (its second half); then
      :func:`_emit` (``ReferenceRun._emit``: skip strategies, emission order);

    then hold the key to ``cap`` partial matches (``cap_policy``; ``cap`` < 0: no cap;
    ``ReferenceRun._hold_to_cap``); and store the key's heaps in the new arena, or nothing
    when the key is idle (only its start state: it is as a key never seen).  Path nodes no
    partial match reaches are reclaimed as they grow (by :func:`run`, between steps).

    A step changes nothing until it knows it has room: the time section and the edges'
    section each check first, so a step stopped for room runs again from its start.

    The sections stay in this one function.  As functions called per event, with thirty
    arrays in and eleven out, they made the kernel 15-25% slower; inlined by numba
    (``inline="always"``, the tables passed as tuples, since CPython calls a function of
    more than 30 arguments through a tuple the inliner refuses) still 14% slower on card
    testing and 8% on three increasing amounts (``cep.match`` of 1M card transactions,
    best of five, the two versions in turn; measured 2026-11-24).  Only the cap's section
    is apart (:func:`_hold_to_cap`, run when a key goes over its cap): a second process
    compiles it while this one is typed.  The time section, moved apart the same way,
    made three increasing amounts' pass 20-40% slower, though no partial match times out
    there (the kernel's time alone, the two versions in turn; 2026-11-28)."""
    ns = init_slots.shape[0]
    P[P_STATUS] = ST_DONE
    n_events = seg_key.shape[0]
    seg = P[P_SEG]
    bn = P[P_BN]
    on = P[P_ON]
    nodes_n = P[P_NODES_N]
    gc_at = P[P_GC_AT]
    blk_lo = P[P_BLK_LO]
    blk_hi = P[P_BLK_HI]
    blk_to = P[P_BLK_TO]
    err = P[P_ERR]  # ERR_CAP when stopped for room to store the key that went over its cap
    zero = np.int64(0)
    rows = np.int64(PI.shape[0])
    n_nodes = np.int64(NODES.shape[0])
    n_out = np.int64(OUT.shape[0])
    n_arena = np.int64(BI.shape[0])
    # without a window or a gap nothing ever expires; slots exist only if conditions read them
    timed = window > 0
    for g in st_gap:
        timed = timed or g > 0
    has_slots = sl_kind.shape[0] > 0
    # keys with no event in the batch and nothing pending stay as they are (``run`` set
    # their entries): the pass goes from key to key among those with either
    n_live = live_keys.shape[0]
    # where the pass resumes among them: a binary search written out (numba's
    # np.searchsorted cost a quarter of a second of the first compile)
    li = zero
    li_hi = n_live
    while li < li_hi:
        mid = (li + li_hi) >> 1
        if live_keys[mid] < P[P_K]:
            li = mid + 1
        else:
            li_hi = mid
    skip_to = zero
    for k in range(P[P_K], n_keys):
        if k < skip_to:
            continue
        P[P_K] = k
        resume = P[P_RESUME] == 1
        P[P_RESUME] = 0
        if not resume:
            while li < n_live and live_keys[li] < k:
                li += 1
            nxt = live_keys[li] if li < n_live else n_keys
            if mode == 0 and seg < n_events and seg_key[seg] < nxt:
                nxt = seg_key[seg]
            if nxt > k:
                skip_to = nxt
                continue
        old_len = key_len[k] if k < key_len.shape[0] else -1
        if resume:
            pn = P[P_PN]
            cn = P[P_CN]
            ktime = P[P_KTIME]
        else:
            has_events = seg < n_events and seg_key[seg] == k
            if mode == 0 and has_events and old_len < 0:
                # nothing pending: its events up to the first that begins something are no-ops
                while seg < n_events and seg_key[seg] == k and not can_start[seg]:
                    seg += 1
                has_events = seg < n_events and seg_key[seg] == k
            untouched = (mode == 0 and not has_events) or (mode == 1 and old_len < 0)
            if mode == 1 and old_len >= 0:
                # a timer pass changes a key only if one of its partial matches times out
                if key_time[k] != NO_TIME and t_adv <= key_time[k]:
                    untouched = True
                elif not _expiring(AI, key_off[k], old_len, t_adv, st_kind, st_gap, window):
                    key_time[k] = t_adv
                    untouched = True
            if untouched:
                if old_len < 0:
                    new_off[k] = 0
                    new_len[k] = -1
                    new_coff[k] = 0
                    new_clen[k] = 0
                    continue
                # this loop is the only writer of the arena: a key's completed rows always
                # follow its partial ones (key_coff == key_off + key_len)
                lo = key_off[k]
                if lo != blk_hi:
                    if not _room(P, zero, zero, zero, bn, rows, n_nodes, n_out, n_arena):
                        break
                    if blk_hi > blk_lo:
                        _rows(BI, blk_to, AI, blk_lo, blk_hi - blk_lo)
                        _rows(BF, blk_to, AF, blk_lo, blk_hi - blk_lo)
                    blk_lo = lo
                    blk_to = bn
                new_off[k] = bn
                new_len[k] = key_len[k]
                new_coff[k] = bn + key_len[k]
                new_clen[k] = key_clen[k]
                bn += key_len[k] + key_clen[k]
                blk_hi = lo + key_len[k] + key_clen[k]
                continue
            pn = np.int64(1) if old_len < 0 else key_len[k]
            cn = np.int64(0) if old_len < 0 else key_clen[k]
            if not _room(P, pn + cn, zero, zero, bn, rows, n_nodes, n_out, n_arena):
                break
            if blk_hi > blk_lo:
                _rows(BI, blk_to, AI, blk_lo, blk_hi - blk_lo)
                _rows(BF, blk_to, AF, blk_lo, blk_hi - blk_lo)
            blk_lo = np.int64(-1)
            blk_hi = np.int64(-1)
            # load the key's heaps
            if old_len < 0:
                PI[0, R_STATE] = start_state
                PI[0, R_NODE] = -1
                PI[0, R_START] = -1
                PI[0, R_PREV] = -1
                PI[0, R_SID_TS] = NO_START
                PI[0, R_SID_SEQ] = NO_START
                for f in range(ns):
                    PF[0, f] = init_slots[f]
                ktime = NO_TIME
            else:
                _rows(PI, np.int64(0), AI, key_off[k], pn)
                _rows(PF, np.int64(0), AF, key_off[k], pn)
                _rows(KI, np.int64(0), AI, key_coff[k], cn)
                _rows(KF, np.int64(0), AF, key_coff[k], cn)
                ktime = key_time[k]
        paused = False
        while err == 0:
            # ---- one step: advance time to t, then (mode 0) process event i
            if mode == 0:
                if cn == 0 and pn == 1 and st_kind[PI[0, R_STATE]] == K_START:
                    # nothing pending again: skip ahead as above
                    while seg < n_events and seg_key[seg] == k and not can_start[seg]:
                        seg += 1
                if not (seg < n_events and seg_key[seg] == k):
                    break
                i = seg
                t = ts[i]
                if nodes_n >= gc_at:
                    P[P_STATUS] = ST_GC
                    paused = True
                    break
            else:
                i = -1
                t = t_adv
            # ---- time: what has expired by t leaves (timeouts, pending matches)
            expiring = False
            if ktime == NO_TIME or t > ktime:
                expiring = timed and _expiring(PI, np.int64(0), pn, t, st_kind, st_gap, window)
                if expiring and not _room(P, pn + cn, zero, on + pn + cn + 1, zero, rows,
                                          n_nodes, n_out, n_arena):
                    paused = True
                    break
                ktime = t
            if expiring:
                nn = np.int64(0)
                qn = np.int64(0)
                t_lo = on  # this step's timeouts go to OUT[t_lo:t_hi]
                for r in range(pn):
                    st = PI[r, R_STATE]
                    gap = st_gap[st]
                    gap_exp = gap > 0 and PI[r, R_PREV] <= t - gap
                    span_exp = window > 0 and PI[r, R_START] <= t - window
                    if st_kind[st] == K_START or not (gap_exp or span_exp):
                        nn = _push(NI, NF, nn, PI, PF, r)
                    elif st_kind[st] == K_PENDING:
                        qn = _push(QI, QF, qn, PI, PF, r)
                    elif want_timeouts:
                        expiry = PI[r, R_PREV] + gap if gap_exp else PI[r, R_START] + window
                        on = _put(OUT, on, np.int64(OUT_TIMEOUT), k, PI[r, R_NODE], expiry)
                t_hi = on
                if qn > 0 or cn > 0:  # else nothing to release (the call costs)
                    nn, cn, on, err = _emit(
                        NI, NF, nn, QI, QF, qn, KI, KF, cn, NODES, OUT, on, k,
                        skip_kind, skip_stage, skip_throw, XI, XF, OI, OF)
                    if err != 0:
                        break
                if t_hi > t_lo and on > t_hi:
                    # the matches this released go before its timeouts (ReferenceRun's
                    # advance_time and FlinkCEP's operator give them so): rotate in place
                    _reverse(OUT, t_lo, t_hi)
                    _reverse(OUT, t_hi, on)
                    _reverse(OUT, t_lo, on)
                _rows(PI, np.int64(0), NI, np.int64(0), nn)
                _rows(PF, np.int64(0), NF, np.int64(0), nn)
                pn = nn
            if mode == 1:
                break
            # ---- the decision graph: every partial match's edges for event i
            ne = 0
            unchanged = True
            short = False
            for r in range(pn):
                st = PI[r, R_STATE]
                eoff[r] = ne
                if st_kind[st] == K_START and not can_start[i]:
                    # no edge from the start takes event i (can_start says so): the start
                    # state only stays, as its walk would find
                    eend[r] = ne
                    continue
                stack[0] = st
                sp = 1
                while sp > 0:
                    sp -= 1
                    s = stack[sp]
                    for tr in range(st_first[s], st_first[s] + st_count[s]):
                        c = tr_cond[tr]
                        if c < 0:
                            ok = True
                        elif pre_row[c] >= 0:
                            ok = PRE[pre_row[c], i]
                        else:
                            ok = eval_cond(c, C, i, PF, r, prog, consts, cstart, vstack)
                        if ok:
                            if tr_action[tr] == A_PROCEED:
                                if sp >= stack.shape[0]:
                                    short = True
                                    break
                                stack[sp] = tr_target[tr]
                                sp += 1
                            else:
                                if ne >= edges.shape[0]:
                                    short = True
                                    break
                                edges[ne] = tr
                                ne += 1
                    if short:
                        break
                if short:
                    break
                eend[r] = ne
                if unchanged:
                    if st_kind[st] == K_START:
                        for e in range(eoff[r], ne):
                            if tr_action[edges[e]] == A_TAKE:
                                unchanged = False
                    elif not (ne - eoff[r] == 1 and tr_action[edges[eoff[r]]] == A_IGNORE
                              and tr_target[edges[eoff[r]]] == st):
                        unchanged = False
            if short:
                P[P_NEED_STACK] = 2 * stack.shape[0] + 16
                P[P_STATUS] = ST_ROOM
                paused = True
                break
            if unchanged:
                # every partial match stays as it is: same heap, nothing completes
                seg += 1
                continue
            # ---- follow the edges: ignore, take (a new node), begin, complete
            # each edge gives at most two rows (the target, and a final state after it) and
            # the start one more; each taking edge one path node; each row one output
            grow = 2 * ne + pn + 2
            if not _room(P, grow + cn, nodes_n + ne, on + grow + cn + 2, zero, rows, n_nodes, n_out,
                         n_arena):
                paused = True
                break
            nn = np.int64(0)
            qn = np.int64(0)
            for r in range(pn):
                st = PI[r, R_STATE]
                at_start = st_kind[st] == K_START
                tn = np.int64(0)
                for e in range(eoff[r], eend[r]):
                    tr = edges[e]
                    target = tr_target[tr]
                    if tr_action[tr] == A_IGNORE:
                        if not at_start:
                            for f in range(6):
                                TI[tn, f] = PI[r, f]
                            for f in range(ns):
                                TF[tn, f] = PF[r, f]
                            TI[tn, R_STATE] = target
                            tn += 1
                        continue
                    NODES[nodes_n, N_ROW] = rowid[i]
                    NODES[nodes_n, N_STAGE] = tr_stage[tr]
                    NODES[nodes_n, N_PARENT] = PI[r, R_NODE]
                    NODES[nodes_n, N_TS] = t
                    NODES[nodes_n, N_SEQ] = rowid[i]
                    node = nodes_n
                    nodes_n += 1
                    TI[tn, R_STATE] = target
                    TI[tn, R_NODE] = node
                    TI[tn, R_PREV] = t
                    if at_start:
                        TI[tn, R_START] = t
                        TI[tn, R_SID_TS] = t
                        TI[tn, R_SID_SEQ] = rowid[i]
                    else:
                        TI[tn, R_START] = PI[r, R_START]
                        TI[tn, R_SID_TS] = PI[r, R_SID_TS]
                        TI[tn, R_SID_SEQ] = PI[r, R_SID_SEQ]
                    for f in range(ns):
                        TF[tn, f] = PF[r, f]
                    if has_slots:
                        update_slots(tr_stage[tr], C, i, TF, tn, sl_kind, sl_stage, sl_col,
                                     sl_count)
                    tn += 1
                    final = -1
                    for out_tr in range(st_first[target], st_first[target] + st_count[target]):
                        if tr_action[out_tr] == A_PROCEED:  # else no call: it has no way on
                            final = _final_after_proceed(
                                target, C, i, PF, r, prog, consts, cstart, vstack, st_first,
                                st_count, st_kind, tr_action, tr_target, tr_cond, fstack,
                                pre_row, PRE)
                            break
                    if final == -2:
                        err = ERR_PROCEED_LOOP
                        break
                    if final >= 0:
                        for f in range(6):
                            TI[tn, f] = TI[tn - 1, f]
                        for f in range(ns):
                            TF[tn, f] = TF[tn - 1, f]
                        TI[tn, R_STATE] = final
                        tn += 1
                if err != 0:
                    break
                if at_start:
                    for f in range(6):
                        TI[tn, f] = PI[r, f]
                    for f in range(ns):
                        TF[tn, f] = init_slots[f]
                    tn += 1
                stopped = False
                for q in range(tn):
                    kind = st_kind[TI[q, R_STATE]]
                    if kind == K_FINAL:
                        qn = _push(QI, QF, qn, TI, TF, q)
                    elif kind == K_STOP:
                        stopped = True
                if not stopped:
                    for q in range(tn):
                        kind = st_kind[TI[q, R_STATE]]
                        if kind != K_FINAL and kind != K_STOP:
                            nn = _push(NI, NF, nn, TI, TF, q)
            if err != 0:
                break
            if qn > 0 or cn > 0:  # else nothing to release
                nn, cn, on, err = _emit(
                    NI, NF, nn, QI, QF, qn, KI, KF, cn, NODES, OUT, on, k,
                    skip_kind, skip_stage, skip_throw, XI, XF, OI, OF)
                if err != 0:
                    break
            # ---- the cap: no key holds more than ``cap`` partial matches after an event
            if cap >= 0 and nn > cap:
                nn, cn, on, err = _hold_to_cap(
                    NI, NF, nn, cap, cap_policy, counters, k, QI, QF, KI, KF, cn, NODES, OUT,
                    on, skip_kind, skip_stage, skip_throw, XI, XF, OI, OF)
            for r in range(nn):  # a loop here: a call per step costs more than the copy
                for f in range(6):
                    PI[r, f] = NI[r, f]
                for f in range(ns):
                    PF[r, f] = NF[r, f]
            pn = nn
            seg += 1
            if err == ERR_CAP:
                break  # stored below, so the caller can say which stages hold them
            if err != 0:
                break
        if paused:
            # stopped for room or to reclaim nodes: this key goes on at the next call
            P[P_RESUME] = 1
            P[P_PN] = pn
            P[P_CN] = cn
            P[P_KTIME] = ktime
            break
        if err != 0 and err != ERR_CAP:
            break
        # ---- store the key's heaps: nothing for an idle key
        if cn == 0 and pn == 1 and st_kind[PI[0, R_STATE]] == K_START:
            key_time[k] = NO_TIME
            new_off[k] = 0
            new_len[k] = -1
            new_coff[k] = 0
            new_clen[k] = 0
            if err != 0:
                break
            continue
        if not _room(P, zero, zero, zero, bn + pn + cn, rows, n_nodes, n_out, n_arena):
            P[P_RESUME] = 1
            P[P_PN] = pn
            P[P_CN] = cn
            P[P_KTIME] = ktime
            break
        key_time[k] = ktime
        new_off[k] = bn
        new_len[k] = pn
        _rows(BI, bn, PI, np.int64(0), pn)
        _rows(BF, bn, PF, np.int64(0), pn)
        bn += pn
        new_coff[k] = bn
        new_clen[k] = cn
        _rows(BI, bn, KI, np.int64(0), cn)
        _rows(BF, bn, KF, np.int64(0), cn)
        bn += cn
        if err != 0:
            break
    if err != 0 and P[P_STATUS] == ST_DONE:
        P[P_STATUS] = ST_ERR
    P[P_ERR] = err
    P[P_SEG] = seg
    P[P_BN] = bn
    P[P_ON] = on
    P[P_NODES_N] = nodes_n
    P[P_BLK_LO] = blk_lo
    P[P_BLK_HI] = blk_hi
    P[P_BLK_TO] = blk_to


def collect_garbage(AI, an, NODES, nodes_n):
    """Keep only nodes reachable from live records; renumber them (in AI too)."""
    none = np.empty((0, 6), np.int64)
    return reclaim_nodes(NODES, nodes_n, AI, an, none, 0, none, 0, none, 0,
                         np.empty((0, 4), np.int64), 0)


@njit(cache=CACHE, nogil=True)
def reclaim_nodes(NODES, nodes_n, AI, an, BI, bn, PI, pn, KI, kn, OUT, on):
    """Keep only the nodes the first rows of the arenas (``AI``, ``BI``), the scratch of
    partial and completed matches (``PI``, ``KI``) and the outputs (``OUT``) reach;
    renumber them there, in place, and return the new node array and its length (a new
    array: a snapshot may hold the old one)."""
    live = np.zeros(nodes_n, np.bool_)
    _mark(live, NODES, AI, np.int64(0), an, np.int64(R_NODE))
    _mark(live, NODES, BI, np.int64(0), bn, np.int64(R_NODE))
    _mark(live, NODES, PI, np.int64(0), pn, np.int64(R_NODE))
    _mark(live, NODES, KI, np.int64(0), kn, np.int64(R_NODE))
    _mark(live, NODES, OUT, np.int64(0), on, np.int64(O_NODE))
    remap = np.full(nodes_n, -1, np.int64)
    NEW, m = _compact(NODES, nodes_n, live, remap)
    _remap(AI, np.int64(0), an, np.int64(R_NODE), remap)
    _remap(BI, np.int64(0), bn, np.int64(R_NODE), remap)
    _remap(PI, np.int64(0), pn, np.int64(R_NODE), remap)
    _remap(KI, np.int64(0), kn, np.int64(R_NODE), remap)
    _remap(OUT, np.int64(0), on, np.int64(O_NODE), remap)
    return NEW, m


@njit(cache=CACHE, nogil=True)
def paths_of(NODES, tails):
    """Flatten the event paths ending at ``tails``: offsets, then row/stage/ts per node."""
    n = tails.shape[0]
    offsets = np.empty(n + 1, np.int64)
    total = 0
    for j in range(n):
        offsets[j] = total
        node = tails[j]
        while node >= 0:
            total += 1
            node = NODES[node, N_PARENT]
    offsets[n] = total
    rows = np.empty(total, np.int64)
    stages = np.empty(total, np.int64)
    times = np.empty(total, np.int64)
    for j in range(n):
        pos = offsets[j + 1] - 1
        node = tails[j]
        while node >= 0:
            rows[pos] = NODES[node, N_ROW]
            stages[pos] = NODES[node, N_STAGE]
            times[pos] = NODES[node, N_TS]
            pos -= 1
            node = NODES[node, N_PARENT]
    return offsets, rows, stages, times
