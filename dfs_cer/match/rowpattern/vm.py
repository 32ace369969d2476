"""The row-pattern matcher: a Pike VM over the instruction program (numba).

Threads are kept in preference order; at every row each thread either consumes the row (its
label's mask is set and its dependent condition holds for the thread's matched rows) or dies.
Threads that reach the same instruction with the same relevant history are equivalent and only
the preferred one is kept (Trino's ``ThreadEquivalence``), which keeps a match attempt linear in
the rows it reads for patterns whose conditions look only at the current row. The relevant
history is the values later conditions read, running aggregates included (kept per thread,
updated row by row); a running statistic every condition reads monotonically orders threads
that agree on the rest (:mod:`dfs_cer.match.rowpattern.dominance`). A thread reaching ``DONE``
ends every less preferred thread; the last match recorded is the preferred one.

Matched rows are recorded in a per-attempt arena of path nodes (row, label, excluded, parent),
so forking a thread costs O(1).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit, types

from dfs_cer.match.rowpattern.conditions import (
    C_ADD,
    C_AGG,
    C_AND,
    C_CASE,
    C_CLS,
    C_CMP,
    C_COALESCE,
    C_COL,
    C_CONST,
    C_DIV,
    C_FUNC,
    C_ISNULL,
    C_MNUM,
    C_MUL,
    C_NEG,
    C_NOT,
    C_OR,
    C_SUB,
    K_BOOL,
    K_FLOAT,
    K_INT,
    K_NULL,
    UNIVERSAL,
)
from dfs_cer.match.rowpattern.program import DONE, END, EXCL_IN, EXCL_OUT, JUMP, LABEL, SPLIT, START

#: numba without reference counting, for functions that allocate nothing: every array they
#: are passed outlives them, and each counted reference is an atomic add on the hot path
leaf = njit(cache=True, _nrt=False)  # type: ignore[call-overload]
#: numba inlined where called (Numba IR): for small helpers of the per-thread loop, where a call
#: would pass every array it reads as a dozen words on the stack
inline = njit(cache=True, inline="always")

SKIP_PAST_LAST, SKIP_NEXT_ROW, SKIP_TO_FIRST, SKIP_TO_LAST = range(4)
# status codes
OK, LIMIT_REACHED, SKIP_TO_FIRST_ROW, SKIP_NO_ROW, STOPPED, OVER_BYTES, OVER_STEPS = range(7)
#: past the time budget (``stop[STOP_MAX_NS]``) in one partition; past the memory the thread
#: lists of one row may take (``stop[STOP_MAX_LIST]``)
OVER_TIME, OVER_THREADS = 7, 8
#: the ``stop`` array's entries: the stop flag, the bytes the matches may take, the thread steps
#: taken (written by the VM) and the most it may take (0: no bound), the partition it was in
#: past it, and (for progress) the partition it is at and the matches found before it; the
#: nanoseconds one partition may take and the bytes one row's thread lists may take (0: no
#: bound)
STOP_FLAG, STOP_BYTES, STOP_STEPS, STOP_MAX_STEPS, STOP_PARTITION, STOP_AT, STOP_FOUND = range(7)
STOP_MAX_NS, STOP_MAX_LIST = 7, 8
STOP_SIZE = 9
#: thread steps the VM takes between two reads of its stop flag (and of the clock)
STOP_EVERY = 65536


@njit(cache=True)
def _grow1(a: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(max(size, a.shape[0] * 2), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _grow_pair(a: np.ndarray, size: int) -> np.ndarray:
    out = np.empty((2, size), a.dtype)
    out[:, : a.shape[1]] = a
    return out


@njit(cache=True)
def _grow_pair3(a: np.ndarray, size: int) -> np.ndarray:
    out = np.empty((2, size, a.shape[2]), a.dtype)
    out[:, : a.shape[1]] = a
    return out


@njit(cache=True)
def _grow_pair4(a: np.ndarray, size: int) -> np.ndarray:
    out = np.empty((2, size, a.shape[2], a.shape[3]), a.dtype)
    out[:, : a.shape[1]] = a
    return out


@njit(cache=True)
def next_rows(mask: np.ndarray) -> np.ndarray:
    """``out[i]``: the first row >= i that ``mask`` accepts (``n`` when none), for i in 0..n."""
    n = mask.shape[0]
    out = np.empty(n + 1, np.int64)
    at = n
    out[n] = n
    for i in range(n - 1, -1, -1):
        if mask[i]:
            at = i
        out[i] = at
    return out


@leaf
def skip_unreachable_starts(
    out: np.ndarray, masks: np.ndarray, required: np.ndarray, bounds: np.ndarray
) -> None:
    """In ``out`` (the first possible start at or after each row), send rows past the last row
    of their partition that some ``required`` label accepts to the partition's end."""
    for p in range(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        if hi <= lo:
            continue
        limit = hi
        for k in range(required.shape[0]):
            v = required[k]
            last = -1
            for r in range(hi - 1, lo - 1, -1):
                if masks[v, r]:
                    last = r
                    break
            if last < limit:
                limit = last
        for i in range(lo, hi):
            if out[i] > limit:
                out[i] = hi


#: failed states are interned (an instruction and the values later conditions read: one id)
#: and remembered as one bit per (id, row) of the partition: at most MEMO_BYTES of bits and
#: MEMO_IDS ids a partition, past which new states are not remembered (later attempts search)
MEMO_BYTES = 1 << 25
MEMO_IDS = 1 << 16
#: failed states remembered with no later attempt reaching one, over at least MEMO_TRIES failed
#: attempts: past both the VM stops remembering for the run (starts do not share states, e.g. a
#: condition reads a high-cardinality value of the first row)
MEMO_TRIAL = 1 << 16
MEMO_TRIES = 256
#: failed states whose dominated value (a running sum, min, max or count that conditions read
#: monotonically) is kept: the best value each (id, row) failed with, 8 bytes each, at most
#: DOM_BYTES a partition (past its ids new states are not remembered)
DOM_BYTES = 1 << 26
#: the best value of a state no attempt failed from yet (below or above every value the VM
#: orders: bounded integers, order-encoded finite doubles)
NO_FAIL_UP, NO_FAIL_DOWN = -(2**63), 2**63 - 1


@leaf
def _intern_slot(i_stamp: np.ndarray, i_key: np.ndarray, gen: int, key: np.ndarray, n: int) -> int:
    """The slot of ``key[:n]`` in the interning table, or of the free slot where it goes
    (``-1 - slot``)."""
    cap = i_stamp.shape[0]
    hh = np.uint64(1469598103934665603)
    for z in range(n):
        hh = (hh ^ np.uint64(key[z])) * np.uint64(1099511628211)
    # murmur3's finalizer: FNV's low bits depend only on the inputs' low bits
    hh ^= hh >> np.uint64(33)
    hh *= np.uint64(0xFF51AFD7ED558CCD)
    hh ^= hh >> np.uint64(33)
    slot = np.int64(hh % np.uint64(cap))
    while i_stamp[slot] == gen:
        same = True
        for z in range(n):
            if i_key[slot, z] != key[z]:
                same = False
                break
        if same:
            return int(slot)
        slot = (slot + 1) % cap
    return int(-1 - slot)


@njit(cache=True)
def _regrow(
    i_stamp: np.ndarray, i_key: np.ndarray, i_id: np.ndarray, gen: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The interning table at four times its slots, this partition's entries moved over."""
    cap = i_stamp.shape[0] * 4
    n_stamp = np.full(cap, -1, np.int64)
    n_key = np.empty((cap, i_key.shape[1]), np.int64)
    n_id = np.empty(cap, np.int64)
    for o in range(i_stamp.shape[0]):
        if i_stamp[o] == gen:
            at = -1 - _intern_slot(n_stamp, n_key, gen, i_key[o], i_key.shape[1])
            n_stamp[at] = gen
            n_key[at] = i_key[o]
            n_id[at] = i_id[o]
    return n_stamp, n_key, n_id, cap


@leaf
def _position(
    name: int,
    logical: int,
    loffset: int,
    row: int,
    var: int,
    start: int,
    lf: np.ndarray,
    ll: np.ndarray,
    lc: int,
    lt: int,
    members: np.ndarray,
    node: int,
    n_parent: np.ndarray,
    n_row: np.ndarray,
    n_label: np.ndarray,
    n_lo: np.ndarray,
) -> int:
    """Row a (possibly navigated) variable reference points at, for the thread about to label
    ``row`` with ``var`` (thread ``lt`` of list ``lc``, whose labels began at ``lf[lc, lt]`` and
    ended at ``ll[lc, lt]``); -1 when there is none."""
    if name == UNIVERSAL:
        if logical == 0:
            p = row - loffset
            return p if p >= start else -1
        p = start + loffset
        return p if p <= row else -1
    cur_in = members[name, var]
    if loffset == 0:
        if logical == 0:
            if cur_in:
                return row
            best = -1
            for m in range(members.shape[1]):
                if members[name, m] and ll[lc, lt, m] > best:
                    best = ll[lc, lt, m]
            return best
        best = -1
        for m in range(members.shape[1]):
            if members[name, m] and lf[lc, lt, m] >= 0 and (best < 0 or lf[lc, lt, m] < best):
                best = lf[lc, lt, m]
        if best < 0 and cur_in:
            best = row
        return best
    # logical offset > 0: walk the path (newest first)
    count = 1 if cur_in else 0
    k = node
    while k >= 0:
        if members[name, n_label[k]]:
            count += n_row[k] - n_lo[k] + 1
        k = n_parent[k]
    if loffset >= count:
        return -1
    target = loffset if logical == 0 else count - 1 - loffset  # index from the newest
    idx = 0
    if cur_in:
        if target == 0:
            return row
        idx = 1
    k = node
    while k >= 0:
        if members[name, n_label[k]]:
            size = n_row[k] - n_lo[k] + 1
            if target < idx + size:
                return n_row[k] - (target - idx)
            idx += size
        k = n_parent[k]
    return -1


@leaf
def _label_at(
    pos: int,
    row: int,
    var: int,
    node: int,
    n_parent: np.ndarray,
    n_row: np.ndarray,
    n_label: np.ndarray,
    n_lo: np.ndarray,
) -> int:
    """Label of matched row ``pos`` (``row`` is being labelled ``var``); -1 when not matched."""
    if pos == row:
        return var
    k = node
    while k >= 0:
        if n_lo[k] <= pos <= n_row[k]:
            return n_label[k]
        if n_row[k] < pos:
            return -1
        k = n_parent[k]
    return -1


@inline
def _acc_add(
    ai: np.ndarray,
    af: np.ndarray,
    a: int,
    kind: int,
    slot: int,
    r: int,
    icols: np.ndarray,
    inull: np.ndarray,
    fcols: np.ndarray,
    fnull: np.ndarray,
) -> None:
    """Add row ``r`` to running aggregate ``a`` of one thread: ``ai[a]`` = (count, int sum, int
    min, int max), ``af[a]`` = (float sum, min, max); ``kind`` -1 counts rows (``count(*)``).
    Rows are added oldest first, so a float sum is the one a running sum over the match's rows
    gives, and a thread's next value follows from its current one and the row alone."""
    if kind < 0:
        ai[a, 0] += 1
    elif kind == K_INT:
        if inull[slot, r]:
            return
        x = icols[slot, r]
        if ai[a, 0] == 0 or x < ai[a, 2]:
            ai[a, 2] = x
        if ai[a, 0] == 0 or x > ai[a, 3]:
            ai[a, 3] = x
        ai[a, 1] += x
        ai[a, 0] += 1
    else:
        if fnull[slot, r]:
            return
        f = fcols[slot, r]
        if ai[a, 0] == 0 or f < af[a, 1]:
            af[a, 1] = f
        if ai[a, 0] == 0 or f > af[a, 2]:
            af[a, 2] = f
        af[a, 0] += f
        ai[a, 0] += 1


@inline
def _agg_value(
    func: int, kind: int, a: int, ai: np.ndarray, af: np.ndarray
) -> tuple[int, int, float]:
    """(kind, int value, float value) of running aggregate ``a`` read as ``func`` (0 count, 1
    sum, 2 avg, 3 min, 4 max)."""
    cnt = ai[a, 0]
    if func == 0:
        return K_INT, cnt, np.float64(cnt)
    if cnt == 0:
        return K_NULL, 0, 0.0
    if func == 2:
        total = np.float64(ai[a, 1]) if kind == K_INT else af[a, 0]
        return K_FLOAT, 0, total / cnt
    if kind == K_INT:
        v = ai[a, 1] if func == 1 else ai[a, 2] if func == 3 else ai[a, 3]
        return K_INT, v, np.float64(v)
    return K_FLOAT, 0, af[a, 0] if func == 1 else af[a, 1] if func == 3 else af[a, 2]


@leaf
def _evaluate(
    code: np.ndarray,
    lo: int,
    hi: int,
    const_i: np.ndarray,
    const_f: np.ndarray,
    const_kind: np.ndarray,
    icols: np.ndarray,
    inull: np.ndarray,
    fcols: np.ndarray,
    fnull: np.ndarray,
    members: np.ndarray,
    row: int,
    var: int,
    start: int,
    p0: int,
    p1: int,
    lf: np.ndarray,
    ll: np.ndarray,
    lc: int,
    lt: int,
    node: int,
    n_parent: np.ndarray,
    n_row: np.ndarray,
    n_label: np.ndarray,
    n_lo: np.ndarray,
    si: np.ndarray,
    sf: np.ndarray,
    sk: np.ndarray,
    match_number: int,
    ag_i: np.ndarray,
    ag_f: np.ndarray,
) -> bool:
    """Run a dependent condition program; True only when it evaluates to TRUE (not NULL).
    ``ag_i`` / ``ag_f``: the thread's running aggregates with the current row (see
    :func:`_acc_add`)."""
    sp = 0
    for pc in range(lo, hi):
        op = code[pc, 0]
        if op == C_CONST:
            c = code[pc, 1]
            si[sp] = const_i[c]
            sf[sp] = const_f[c]
            sk[sp] = const_kind[c]
            sp += 1
        elif op == C_COL:
            pos = _position(
                code[pc, 3],
                code[pc, 4],
                code[pc, 5],
                row,
                var,
                start,
                lf,
                ll,
                lc,
                lt,
                members,
                node,
                n_parent,
                n_row,
                n_label,
                n_lo,
            )
            if pos >= 0:
                pos += code[pc, 6]
            if pos < p0 or pos >= p1:
                sk[sp] = K_NULL
            elif code[pc, 2] == K_INT:
                if inull[code[pc, 1], pos]:
                    sk[sp] = K_NULL
                else:
                    si[sp] = icols[code[pc, 1], pos]
                    sf[sp] = np.float64(si[sp])
                    sk[sp] = K_INT
            else:
                if fnull[code[pc, 1], pos]:
                    sk[sp] = K_NULL
                else:
                    sf[sp] = fcols[code[pc, 1], pos]
                    sk[sp] = K_FLOAT
            sp += 1
        elif op == C_AGG:  # the thread's running aggregate, the current row included
            kd, iv, fv = _agg_value(code[pc, 4], code[pc, 2], code[pc, 5], ag_i, ag_f)
            sk[sp] = kd
            si[sp] = iv
            sf[sp] = fv
            sp += 1
        elif op == C_COALESCE:  # the first non-NULL of the top n values
            base = sp - code[pc, 1]
            for j in range(base, sp):
                if sk[j] != K_NULL:
                    si[base], sf[base], sk[base] = si[j], sf[j], sk[j]
                    break
            else:
                sk[base] = K_NULL
            sp = base + 1
        elif op == C_CASE:  # (condition, result) pairs then the default: the first TRUE's result
            n_when = code[pc, 1]
            base = sp - 2 * n_when - 1
            pick = sp - 1
            for j in range(n_when):
                c = base + 2 * j
                if sk[c] != K_NULL and si[c] == 1:
                    pick = c + 1
                    break
            si[base], sf[base], sk[base] = si[pick], sf[pick], sk[pick]
            sp = base + 1
        elif op == C_FUNC:
            if sk[sp - 1] != K_NULL:
                f = code[pc, 1]
                if sk[sp - 1] == K_INT:
                    x = si[sp - 1]
                    r = abs(x) if f == 0 else (1 if x > 0 else -1 if x < 0 else 0) if f == 1 else x
                    si[sp - 1] = r
                    sf[sp - 1] = np.float64(r)
                else:
                    fx = sf[sp - 1]
                    sf[sp - 1] = (
                        abs(fx)
                        if f == 0
                        else np.sign(fx)
                        if f == 1
                        else np.floor(fx)
                        if f == 2
                        else np.ceil(fx)
                    )
        elif op == C_MNUM:
            si[sp] = match_number
            sf[sp] = np.float64(match_number)
            sk[sp] = K_INT
            sp += 1
        elif op == C_CLS:
            pos = _position(
                code[pc, 1],
                code[pc, 2],
                code[pc, 3],
                row,
                var,
                start,
                lf,
                ll,
                lc,
                lt,
                members,
                node,
                n_parent,
                n_row,
                n_label,
                n_lo,
            )
            if pos >= 0:
                pos += code[pc, 4]
            lab = (
                _label_at(pos, row, var, node, n_parent, n_row, n_label, n_lo)
                if start <= pos <= row
                else -1
            )
            if lab < 0:
                sk[sp] = K_NULL
            else:
                si[sp] = const_i[code[pc, 5] + lab]
                sf[sp] = np.float64(si[sp])
                sk[sp] = K_INT
            sp += 1
        elif op == C_NOT:
            if sk[sp - 1] != K_NULL:
                si[sp - 1] = 1 - si[sp - 1]
        elif op == C_NEG:
            if sk[sp - 1] == K_INT:
                si[sp - 1] = -si[sp - 1]
            sf[sp - 1] = -sf[sp - 1]
        elif op == C_ISNULL:
            is_null = sk[sp - 1] == K_NULL
            si[sp - 1] = 1 if (is_null != (code[pc, 1] == 1)) else 0
            sk[sp - 1] = K_BOOL
        elif op == C_AND or op == C_OR:
            a_k, b_k = sk[sp - 2], sk[sp - 1]
            a_v, b_v = si[sp - 2], si[sp - 1]
            sp -= 1
            if op == C_AND:
                if (a_k != K_NULL and a_v == 0) or (b_k != K_NULL and b_v == 0):
                    si[sp - 1], sk[sp - 1] = 0, K_BOOL
                elif a_k == K_NULL or b_k == K_NULL:
                    sk[sp - 1] = K_NULL
                else:
                    si[sp - 1], sk[sp - 1] = 1, K_BOOL
            else:
                if (a_k != K_NULL and a_v == 1) or (b_k != K_NULL and b_v == 1):
                    si[sp - 1], sk[sp - 1] = 1, K_BOOL
                elif a_k == K_NULL or b_k == K_NULL:
                    sk[sp - 1] = K_NULL
                else:
                    si[sp - 1], sk[sp - 1] = 0, K_BOOL
        else:  # binary arithmetic or comparison
            a_k, b_k = sk[sp - 2], sk[sp - 1]
            sp -= 1
            if a_k == K_NULL or b_k == K_NULL:
                sk[sp - 1] = K_NULL
                continue
            both_int = a_k != K_FLOAT and b_k != K_FLOAT
            if op == C_CMP:
                cmp = code[pc, 1]
                if both_int:
                    x, y = si[sp - 1], si[sp]
                    res = (
                        x == y
                        if cmp == 0
                        else x != y
                        if cmp == 1
                        else x < y
                        if cmp == 2
                        else x <= y
                        if cmp == 3
                        else x > y
                        if cmp == 4
                        else x >= y
                    )
                else:
                    fx, fy = sf[sp - 1], sf[sp]
                    res = (
                        fx == fy
                        if cmp == 0
                        else fx != fy
                        if cmp == 1
                        else fx < fy
                        if cmp == 2
                        else fx <= fy
                        if cmp == 3
                        else fx > fy
                        if cmp == 4
                        else fx >= fy
                    )
                si[sp - 1] = 1 if res else 0
                sk[sp - 1] = K_BOOL
            elif both_int:
                x, y = si[sp - 1], si[sp]
                if op == C_ADD:
                    r = x + y
                elif op == C_SUB:
                    r = x - y
                elif op == C_MUL:
                    r = x * y
                else:
                    if y == 0:
                        sk[sp - 1] = K_NULL  # division by zero: no row can satisfy the condition
                        continue
                    q = abs(x) // abs(y)
                    q = q if (x >= 0) == (y >= 0) else -q  # truncate toward zero, as SQL
                    r = q if op == C_DIV else x - q * y
                si[sp - 1] = r
                sf[sp - 1] = np.float64(r)
                sk[sp - 1] = K_INT
            else:
                fx, fy = sf[sp - 1], sf[sp]
                if op == C_ADD:
                    fr = fx + fy
                elif op == C_SUB:
                    fr = fx - fy
                elif op == C_MUL:
                    fr = fx * fy
                elif op == C_DIV:
                    if fy == 0.0:
                        sk[sp - 1] = K_NULL
                        continue
                    fr = fx / fy
                else:
                    fr = np.fmod(fx, fy)
                sf[sp - 1] = fr
                sk[sp - 1] = K_FLOAT
    return sp == 1 and sk[0] == K_BOOL and si[0] == 1


@njit(cache=True)
def _reach(op: np.ndarray, arg_a: np.ndarray, arg_b: np.ndarray, n_vars: int) -> np.ndarray:
    """``reach[q, v]``: a thread at instruction ``q`` may still label a row with variable ``v``
    (a LABEL of ``v`` is reachable from ``q``)."""
    n_prog = op.shape[0]
    reach = np.zeros((n_prog, max(1, n_vars)), np.bool_)
    seen = np.zeros(n_prog, np.bool_)
    stack = np.empty(2 * n_prog + 2, np.int64)
    for q in range(n_prog):
        seen[:] = False
        stack[0] = q
        sp = 1
        while sp > 0:
            sp -= 1
            x = stack[sp]
            if x < 0 or x >= n_prog or seen[x]:
                continue
            seen[x] = True
            o = op[x]
            if o == LABEL:
                reach[q, arg_a[x]] = True
                stack[sp] = x + 1
                sp += 1
            elif o == JUMP:
                stack[sp] = arg_a[x]
                sp += 1
            elif o == SPLIT:
                stack[sp] = arg_a[x]
                stack[sp + 1] = arg_b[x]
                sp += 2
            elif o != DONE:
                stack[sp] = x + 1
                sp += 1
    return reach


@njit(cache=True)
def _live_reads(
    reach: np.ndarray,
    code: np.ndarray,
    code_start: np.ndarray,
    rd: np.ndarray,
    n_rd: int,
    n_ag: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``live[q, r]``: a condition of some variable a thread at instruction ``q`` may still label
    reads ``rd[r]``; ``live_ag[q, a]``: one reads running aggregate ``a``. A thread's future
    depends only on its live reads: at ``C`` in ``A+ B+ C`` where C reads only ``LAST(B.v)``,
    not on ``LAST(A.v)``."""
    n_prog = reach.shape[0]
    n_vars = code_start.shape[0] - 1
    live = np.zeros((n_prog, max(1, n_rd)), np.bool_)
    live_ag = np.zeros((n_prog, max(1, n_ag)), np.bool_)
    for v in range(n_vars):
        for c in range(code_start[v], code_start[v + 1]):
            if code[c, 0] == C_COL and code[c, 3] >= 0:
                for r in range(n_rd):
                    if (
                        rd[r, 0] == code[c, 3]
                        and rd[r, 1] == code[c, 4]
                        and rd[r, 2] == code[c, 6]
                        and rd[r, 3] == code[c, 2]
                        and rd[r, 4] == code[c, 1]
                    ):
                        for q in range(n_prog):
                            if reach[q, v]:
                                live[q, r] = True
            elif code[c, 0] == C_AGG:
                for q in range(n_prog):
                    if reach[q, v]:
                        live_ag[q, code[c, 5]] = True
    return live, live_ag


@leaf
def _value_key(
    key: np.ndarray,
    q: int,
    rd: np.ndarray,
    n_rd: int,
    live: np.ndarray,
    members: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    q0: int,
    q1: int,
    icols: np.ndarray,
    inull: np.ndarray,
    fcols: np.ndarray,
    fnull: np.ndarray,
    fbox: np.ndarray,
    fbits: np.ndarray,
) -> None:
    """Fill ``key``: instruction ``q``, then (state, value) per read of ``rd`` for a thread
    whose labels began at ``first`` and ended at ``last``; state 0 is no row yet, 1 NULL (or a
    step off the rows navigation may read), 2 a value (a double's bits); then 0. The running
    aggregates' words go there (:func:`_acc_key`)."""
    key[0] = q
    kk = 1
    for r in range(n_rd):
        key[kk] = 0
        key[kk + 1] = 0
        if not live[q, r]:  # no condition a thread here may still evaluate reads it
            kk += 2
            continue
        nm = rd[r, 0]
        at = -1
        for m in range(members.shape[1]):
            if members[nm, m]:
                if rd[r, 1] == 1:
                    if first[m] >= 0 and (at < 0 or first[m] < at):
                        at = first[m]
                elif last[m] > at:
                    at = last[m]
        key[kk] = 0
        key[kk + 1] = 0
        if at >= 0:
            at += rd[r, 2]
            key[kk] = 1
            if q0 <= at < q1:
                if rd[r, 3] == K_INT:
                    if not inull[rd[r, 4], at]:
                        key[kk] = 2
                        key[kk + 1] = icols[rd[r, 4], at]
                elif not fnull[rd[r, 4], at]:
                    key[kk] = 2
                    fbox[0] = fcols[rd[r, 4], at]
                    key[kk + 1] = fbits[0]
        kk += 2
    key[kk] = 0


@inline
def _acc_key(
    key: np.ndarray,
    kk: int,
    q: int,
    accs: np.ndarray,
    live_ag: np.ndarray,
    ag_i: np.ndarray,
    ag_f: np.ndarray,
    fbox: np.ndarray,
    fbits: np.ndarray,
    dom_a: int,
    dom_stat: int,
) -> int:
    """Fill ``key`` from ``kk`` on: per running aggregate (``ag_i`` / ``ag_f``) a later condition
    reads at instruction ``q``, what its later values follow from: its count (or only whether
    it has rows) and the sum, min or max it is read as (a double's bits: exact); then 0.

    Returns the value of the dominated statistic (``dom_a``, ``dom_stat``: 0 count, 1 sum, 2
    min, 3 max; see :mod:`dfs_cer.match.rowpattern.dominance`), left out of the key and ordered
    as its numbers are (a double as an order-preserving integer); 0 when it is not live."""
    dval = 0
    for a in range(accs.shape[0]):
        stats = accs[a, 3]
        on = live_ag[q, a]
        cnt = ag_i[a, 0]
        if not on:
            key[kk] = 0
        elif stats & 1:
            if a == dom_a and dom_stat == 0:
                dval = cnt
                key[kk] = 0
            else:
                key[kk] = cnt
        else:
            key[kk] = 1 if cnt > 0 else 0
        kk += 1
        for z in range(1, 4):  # sum, min, max
            if not stats & (1 << z):
                continue
            w = 0
            if on:
                if accs[a, 1] == K_INT:
                    w = ag_i[a, z]
                else:
                    fbox[0] = ag_f[a, z - 1]
                    w = fbits[0]
                    if a == dom_a and dom_stat == z and w < 0:  # negative doubles: bits reversed
                        w ^= np.int64(0x7FFFFFFFFFFFFFFF)
            if a == dom_a and dom_stat == z:
                dval = w
                w = 0
            key[kk] = w
            kk += 1
    key[kk] = 0
    return dval


@leaf
def _position_key(
    key: np.ndarray,
    q: int,
    relevant: np.ndarray,
    members: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    node: int,
) -> None:
    """Fill ``key``: instruction ``q``, then the first and last positions of every name whose
    first / last position later conditions read (0 where none reads it), then ``node``."""
    key[0] = q
    kk = 1
    for nm in range(members.shape[0]):
        lo_pos = -1
        hi_pos = -1
        if relevant[0, nm] or relevant[1, nm]:
            for m in range(members.shape[1]):
                if members[nm, m]:
                    if last[m] > hi_pos:
                        hi_pos = last[m]
                    if first[m] >= 0 and (lo_pos < 0 or first[m] < lo_pos):
                        lo_pos = first[m]
        # only what later conditions read: threads that differ in where B began are one when
        # conditions read only LAST(B)
        key[kk] = lo_pos if relevant[0, nm] else 0
        key[kk + 1] = hi_pos if relevant[1, nm] else 0
        kk += 2
    key[kk] = node


@leaf
def _follow(
    q: int,
    depth: int,
    row: int,
    p0: int,
    p1: int,
    op: np.ndarray,
    arg_a: np.ndarray,
    arg_b: np.ndarray,
    s_pc: np.ndarray,
    s_depth: np.ndarray,
    sp: int,
) -> int:
    """One step of an epsilon closure at ``row``: push the successors of instruction ``q`` (in
    preference order, the preferred one on top) and return the new stack size, or -1 when ``q``
    consumes a row or ends the match (LABEL, DONE: a thread). START and END pass only at the
    partition's first row / after its last one. The stack holds ``2 * len(program) + 2``
    entries: every instruction is followed at most once per closure."""
    o = op[q]
    if o == JUMP:
        s_pc[sp] = arg_a[q]
        s_depth[sp] = depth
        return sp + 1
    if o == SPLIT:
        s_pc[sp] = arg_b[q]
        s_depth[sp] = depth
        s_pc[sp + 1] = arg_a[q]
        s_depth[sp + 1] = depth
        return sp + 2
    if o == START or o == END:
        if row == (p0 if o == START else p1):
            s_pc[sp] = q + 1
            s_depth[sp] = depth
            return sp + 1
        return sp
    if o == EXCL_IN or o == EXCL_OUT:
        s_pc[sp] = q + 1
        s_depth[sp] = depth + (1 if o == EXCL_IN else -1)
        return sp + 1
    return -1


@leaf
def _h_seen(h_stamp: np.ndarray, h_key: np.ndarray, stamp: int, key: np.ndarray, n: int) -> bool:
    """Whether ``key[:n]`` was seen at this row (``stamp``); records it when not. The table has
    room for every thread of the row (:func:`_scan` asks for it first)."""
    cap = h_stamp.shape[0]
    hh = np.uint64(1469598103934665603)
    for z in range(n):
        hh = (hh ^ np.uint64(key[z])) * np.uint64(1099511628211)
    hh ^= hh >> np.uint64(33)
    slot = np.int64(hh % np.uint64(cap))
    while h_stamp[slot] == stamp:
        same = True
        for z in range(n):
            if h_key[slot, z] != key[z]:
                same = False
                break
        if same:
            return True
        slot = (slot + 1) % cap
    h_stamp[slot] = stamp
    for z in range(n):
        h_key[slot, z] = key[z]
    return False


@leaf
def _h_dominated(
    h_stamp: np.ndarray,
    h_key: np.ndarray,
    h_best: np.ndarray,
    stamp: int,
    key: np.ndarray,
    n: int,
    dval: int,
    ddir: int,
) -> bool:
    """:func:`_h_seen` with dominance: whether a thread with ``key[:n]`` was kept at this row
    whose dominated value is at least as good as ``dval`` (larger is better when ``ddir`` > 0,
    smaller when < 0): such a thread is preferred and does all this one can. Records the key,
    and the best value kept with it, when not."""
    cap = h_stamp.shape[0]
    hh = np.uint64(1469598103934665603)
    for z in range(n):
        hh = (hh ^ np.uint64(key[z])) * np.uint64(1099511628211)
    hh ^= hh >> np.uint64(33)
    slot = np.int64(hh % np.uint64(cap))
    while h_stamp[slot] == stamp:
        same = True
        for z in range(n):
            if h_key[slot, z] != key[z]:
                same = False
                break
        if same:
            best = h_best[slot]
            if (ddir > 0 and best >= dval) or (ddir < 0 and best <= dval):
                return True
            h_best[slot] = dval  # (a total order: this one is better than every one kept)
            return False
        slot = (slot + 1) % cap
    h_stamp[slot] = stamp
    for z in range(n):
        h_key[slot, z] = key[z]
    h_best[slot] = dval
    return False


#: the C library's clock, called from compiled code (an ``objmode`` block reading Python's clock
#: instead is compiled again in every process, a seventh of a second before the first match)
_clock_gettime: Any = types.ExternalFunction(
    "clock_gettime", types.int32(types.int32, types.voidptr)
)
_MONOTONIC = time.CLOCK_MONOTONIC


@njit(cache=True)
def now_ns() -> int:
    """The monotonic clock in nanoseconds (Python's ``time.monotonic_ns``), read from the
    compiled loops once per :data:`STOP_EVERY` steps."""
    spec = np.zeros(2, np.int64)  # struct timespec: seconds, nanoseconds
    _clock_gettime(_MONOTONIC, spec.ctypes)
    return spec[0] * 1_000_000_000 + spec[1]


@njit(cache=True)
def _over_time(stop: np.ndarray, st: np.ndarray, p: int, rows: int) -> bool:
    """The time budget, read where the stop flag is: whether the run has been in partition ``p``
    (of ``rows`` rows) longer than ``stop[STOP_MAX_NS]`` (when positive) and as long again per
    million rows (:func:`time_limit_ns`). Its clock starts at the first read in each partition
    (``st[S_TPART]``, ``st[S_TBEGAN]``), so only a partition that runs long ends it, whatever
    the number of partitions."""
    if stop[STOP_MAX_NS] <= 0:
        return False
    now = now_ns()
    if st[S_TPART] != p:
        st[S_TPART] = p
        st[S_TBEGAN] = now
        return False
    return now - st[S_TBEGAN] > time_limit_ns(stop[STOP_MAX_NS], rows)


@njit(cache=True)
def time_limit_ns(max_ns: int, rows: int) -> int:
    """The time one partition of ``rows`` rows may take: ``max_ns``, and as much again per
    million rows (work that grows with the rows is not a runaway; a short partition whose work
    grows faster than its rows ends within ``max_ns``)."""
    return max_ns + (max_ns // 1_000_000) * rows


@leaf
def _idle_until(
    i: int,
    nt: int,
    cur: int,
    nxt: int,
    l_pc: np.ndarray,
    l_depth: np.ndarray,
    l_src: np.ndarray,
    op: np.ndarray,
    arg_a: np.ndarray,
    free: np.ndarray,
    next_true: np.ndarray,
    ts: np.ndarray,
    win_end: np.ndarray,
    window: int,
    start: int,
    p1: int,
) -> int:
    """The row the next thread list (``nxt``, ``nt`` threads) may jump to from row ``i + 1``:
    when it repeats the current one (``cur``) and only free threads consumed, every row up to
    the next one some blocked label accepts (or the window's or partition's end); else
    ``i + 1``."""
    for k2 in range(nt):
        if (
            l_pc[nxt, k2] != l_pc[cur, k2]
            or l_depth[nxt, k2] != l_depth[cur, k2]
            or op[l_pc[nxt, k2]] == DONE
        ):
            return i + 1
        src = l_src[nxt, k2]
        if not free[arg_a[l_pc[cur, src]]]:
            return i + 1
        if free[arg_a[l_pc[nxt, k2]]] and src != k2:
            return i + 1
    limit = p1 - 1
    if window >= 0:
        lo_w = i + 1
        hi_w = p1
        bound_t = win_end[start]
        while lo_w < hi_w:  # first row beyond the window
            mid = (lo_w + hi_w) // 2
            if ts[mid] > bound_t:
                hi_w = mid
            else:
                lo_w = mid + 1
        if lo_w < limit:
            limit = lo_w
    for k2 in range(nt):
        v2 = arg_a[l_pc[nxt, k2]]
        if not free[v2] and next_true[v2, i + 1] < limit:
            limit = next_true[v2, i + 1]
    return limit if limit > i + 1 else i + 1


#: what :func:`_scan` asks of :func:`run` before it can go on (room in one of its arrays, at
#: least ``st[S_NEED]`` entries), or that it is done
DONE_SCAN, NEED_THREADS, NEED_ARENA, NEED_PEND, NEED_HASH, NEED_IDS, NEED_BITS = range(7)
NEED_MATCHES, NEED_ROWS, NEED_DOM = 7, 8, 9
#: the scan's state between two calls (``st``)
(
    S_P,
    S_POS,
    S_START,
    S_I,
    S_CN,
    S_CUR,
    S_AN,
    S_PENDN,
    S_BEST_NODE,
    S_BEST_END,
    S_STAMP,
    S_CSTAMP,
    S_NMATCH,
    S_NROWS,
    S_STATUS,
    S_UNTIL,
    S_STEPS,
    S_PARTM,
    S_FUSED,
    S_FGEN,
    S_FHITS,
    S_FTRIES,
    S_MEMO,
    S_NIDS,
    S_WORDS,
    S_IDROOM,
    S_RESUME,
    S_NEED,
) = range(28)
#: the partition the time budget's clock runs for and when it started (:func:`_over_time`)
S_TPART, S_TBEGAN = 28, 29
S_SIZE = 30
#: where a scan resumes: a fresh attempt, the thread list at row ``st[S_I]``, the match found
R_FRESH, R_ROW, R_RECORD = range(3)
#: the most failed states one attempt records, 8 bytes each (past it, later attempts search more)
PENDING_MAX = 1 << 22


@njit(cache=True, nogil=True)
def _scan(
    op: np.ndarray,
    arg_a: np.ndarray,
    arg_b: np.ndarray,
    masks: np.ndarray,
    dependent: np.ndarray,
    code: np.ndarray,
    code_start: np.ndarray,
    const_i: np.ndarray,
    const_f: np.ndarray,
    const_kind: np.ndarray,
    icols: np.ndarray,
    inull: np.ndarray,
    fcols: np.ndarray,
    fnull: np.ndarray,
    members: np.ndarray,
    relevant: np.ndarray,
    deep: bool,
    ts: np.ndarray,
    win_end: np.ndarray,
    window: int,
    parts: np.ndarray,
    nav_parts: np.ndarray,
    skip_mode: int,
    skip_target: int,
    max_matches: int,
    next_start: np.ndarray,
    free: np.ndarray,
    next_true: np.ndarray,
    stop: np.ndarray,
    cut_start: bool,
    cut_end: bool,
    any_dependent: bool,
    vals: bool,
    rd: np.ndarray,
    n_rd: int,
    live: np.ndarray,
    f_w: int,
    l_pc: np.ndarray,
    l_node: np.ndarray,
    l_depth: np.ndarray,
    l_src: np.ndarray,
    l_first: np.ndarray,
    l_last: np.ndarray,
    visited: np.ndarray,
    cvisited: np.ndarray,
    h_stamp: np.ndarray,
    h_key: np.ndarray,
    key: np.ndarray,
    i_stamp: np.ndarray,
    i_key: np.ndarray,
    i_id: np.ndarray,
    bits: np.ndarray,
    pend: np.ndarray,
    a_parent: np.ndarray,
    a_row: np.ndarray,
    a_label: np.ndarray,
    a_excl: np.ndarray,
    a_lo: np.ndarray,
    s_pc: np.ndarray,
    s_depth: np.ndarray,
    si: np.ndarray,
    sf: np.ndarray,
    sk: np.ndarray,
    first_tmp: np.ndarray,
    last_tmp: np.ndarray,
    fbox: np.ndarray,
    fbits: np.ndarray,
    m_start: np.ndarray,
    m_end: np.ndarray,
    m_part: np.ndarray,
    r_match: np.ndarray,
    r_row: np.ndarray,
    r_label: np.ndarray,
    r_excl: np.ndarray,
    st: np.ndarray,
    accs: np.ndarray,
    dom: np.ndarray,
    live_ag: np.ndarray,
    l_ai: np.ndarray,
    l_af: np.ndarray,
    tmp_ai: np.ndarray,
    tmp_af: np.ndarray,
    h_best: np.ndarray,
    dbest: np.ndarray,
    pend_val: np.ndarray,
) -> int:
    """The matcher's loops (see :func:`run`), from the state ``st`` on, until done
    (:data:`DONE_SCAN`) or until one of its arrays is too small for the next row or match (a
    ``NEED_*`` code; ``st`` holds where to resume). No array is reassigned here: numba copies
    an array variable reassigned in a loop at every turn (two atomic reference counts each),
    which cost most of the time of every step when the arrays grew inside the loops."""
    n_prog = op.shape[0]
    n_vars = masks.shape[0]
    n_ag = accs.shape[0]
    dom_a, dom_stat, dom_dir = dom[0], dom[1], dom[2]
    key_w = key.shape[0]
    h_cap = h_stamp.shape[0]
    i_cap = i_stamp.shape[0]

    cap_t = l_pc.shape[1]
    # bytes one thread of a list takes, with its share of the equivalence table
    per_thread = 16 * (4 + 2 * n_vars + 7 * l_ai.shape[2]) + 16 * (key_w + 2)
    p = st[S_P]
    pos = st[S_POS]
    start = st[S_START]
    i = st[S_I]
    c_n = st[S_CN]
    cur = st[S_CUR]
    nxt = 1 - cur
    a_n = st[S_AN]
    pend_n = st[S_PENDN]
    best_node = st[S_BEST_NODE]
    best_end = st[S_BEST_END]
    stamp = st[S_STAMP]
    cstamp = st[S_CSTAMP]
    n_matches = st[S_NMATCH]
    n_rows_out = st[S_NROWS]
    status = st[S_STATUS]
    until_check = st[S_UNTIL]
    steps = st[S_STEPS]
    part_matches = st[S_PARTM]
    f_used = st[S_FUSED]
    f_gen = st[S_FGEN]
    f_hits = st[S_FHITS]
    f_tries = st[S_FTRIES]
    memo = st[S_MEMO] != 0
    n_ids = st[S_NIDS]
    words = st[S_WORDS]
    id_room = st[S_IDROOM]
    resume = st[S_RESUME]

    need = DONE_SCAN
    while p < parts.shape[0] - 1:
        p0, p1 = parts[p], parts[p + 1]
        q0, q1 = nav_parts[p, 0], nav_parts[p, 1]
        a0 = -1 if cut_start else p0  # where ^ and $ pass (-1: nowhere)
        a1 = -1 if cut_end else p1
        if resume == R_FRESH and pos < 0:  # a new partition
            if p == 0 or q0 != nav_parts[p - 1, 0]:
                part_matches = n_matches
            f_gen += 1  # failures are per partition
            f_used = 0
            n_ids = 0
            # per id: a bit per row, or (dominance) the best value it failed with per row
            words = (p1 - p0) // 64 + 1 if dom_dir == 0 else p1 - p0 + 1
            id_room = min(
                MEMO_IDS, max(1, (MEMO_BYTES if dom_dir == 0 else DOM_BYTES) // (8 * words))
            )
            pos = p0
            stop[STOP_AT] = p  # read by a progress display
            stop[STOP_FOUND] = n_matches
        while pos < p1:
            if resume == R_FRESH:
                if next_start[pos] != pos:
                    pos = next_start[pos]
                    continue
                start = pos
                a_n = 0
                pend_n = 0
                best_node = -2  # -2: no match; -1: empty match
                best_end = -1
                stamp += 1
                i = start
                # seed: the closure of pc 0 at the start row is the first thread list (at most
                # one thread per instruction: the lists hold 2 * len(program) from the start)
                t_n = 0
                s_pc[0] = 0
                s_depth[0] = 0
                sp = 1
                while sp > 0:
                    sp -= 1
                    pc = s_pc[sp]
                    depth = s_depth[sp]
                    if visited[pc] == stamp:  # one history here: pc alone decides the future
                        continue
                    visited[pc] = stamp
                    pushed = _follow(pc, depth, i, a0, a1, op, arg_a, arg_b, s_pc, s_depth, sp)
                    if pushed >= 0:
                        sp = pushed
                        continue
                    # LABEL or DONE: a thread
                    l_pc[cur, t_n] = pc
                    l_node[cur, t_n] = -1
                    l_depth[cur, t_n] = depth
                    for v in range(n_vars):
                        l_first[cur, t_n, v] = -1
                        l_last[cur, t_n, v] = -1
                    for a in range(n_ag):
                        for z in range(4):
                            l_ai[cur, t_n, a, z] = 0
                        for z in range(3):
                            l_af[cur, t_n, a, z] = 0.0
                    t_n += 1
                c_n = t_n
            if resume != R_RECORD:
                resume = R_FRESH
                # --- step through rows ---
                while c_n > 0:
                    # room for this row: every thread's closure adds at most one thread per
                    # instruction, one path node (two with a run of free rows), one pending
                    # failed state and one interned state per thread it adds
                    most = c_n * n_prog
                    if (
                        most > cap_t
                        and stop[STOP_MAX_LIST] > 0
                        and most * per_thread > stop[STOP_MAX_LIST]
                    ):
                        status = OVER_THREADS
                        stop[STOP_PARTITION] = p
                        break
                    if most > cap_t:
                        need, st[S_NEED] = NEED_THREADS, most
                    elif a_n + 2 * c_n > a_parent.shape[0]:
                        need, st[S_NEED] = NEED_ARENA, a_n + 2 * c_n
                    elif memo and pend_n + most > pend.shape[0] and pend.shape[0] < PENDING_MAX:
                        need, st[S_NEED] = NEED_PEND, min(PENDING_MAX, pend_n + most)
                    elif any_dependent and 2 * (most + 1) > h_cap:
                        need, st[S_NEED] = NEED_HASH, 2 * (most + 1)
                    elif memo and n_ids < id_room and 2 * (min(id_room, n_ids + most) + 1) > i_cap:
                        need, st[S_NEED] = NEED_IDS, 2 * (min(id_room, n_ids + most) + 1)
                    elif (
                        memo and dom_dir == 0 and min(id_room, n_ids + most) * words > bits.shape[0]
                    ):
                        need, st[S_NEED] = NEED_BITS, min(id_room, n_ids + most) * words
                    elif (
                        memo
                        and dom_dir != 0
                        and min(id_room, n_ids + most) * words > dbest.shape[0]
                    ):
                        need, st[S_NEED] = NEED_DOM, min(id_room, n_ids + most) * words
                    if need != DONE_SCAN:
                        resume = R_ROW
                        break
                    until_check -= c_n + 1
                    steps += c_n + 1
                    if until_check <= 0:
                        until_check = STOP_EVERY
                        stop[STOP_STEPS] = steps
                        if stop[STOP_FLAG] != 0:
                            status = STOPPED
                            break
                        if stop[STOP_MAX_STEPS] > 0 and steps > stop[STOP_MAX_STEPS]:
                            status = OVER_STEPS
                            stop[STOP_PARTITION] = p
                            break
                        if _over_time(stop, st, p, p1 - p0):
                            status = OVER_TIME
                            stop[STOP_PARTITION] = p
                            break
                    stamp += 1
                    nt = 0
                    consumed_nonfree = False
                    saw_done = False
                    for t in range(c_n):
                        pc = l_pc[cur, t]
                        if op[pc] == DONE:
                            best_node = l_node[cur, t]
                            best_end = i
                            saw_done = True
                            break
                        v = arg_a[pc]
                        if i >= p1 or not masks[v, i]:
                            continue
                        if window >= 0 and ts[i] > win_end[start]:
                            continue
                        # the thread's running aggregates with row i (labelled v)
                        for a in range(n_ag):
                            for z in range(4):
                                tmp_ai[a, z] = l_ai[cur, t, a, z]
                            for z in range(3):
                                tmp_af[a, z] = l_af[cur, t, a, z]
                            if accs[a, 2] == UNIVERSAL or members[accs[a, 2], v]:
                                _acc_add(
                                    tmp_ai,
                                    tmp_af,
                                    a,
                                    accs[a, 1],
                                    accs[a, 0],
                                    i,
                                    icols,
                                    inull,
                                    fcols,
                                    fnull,
                                )
                        if dependent[v]:
                            if deep:  # an aggregate or a far FIRST/LAST walks the thread's path
                                until_check -= i - start + 1
                                steps += i - start + 1
                            if not _evaluate(
                                code,
                                code_start[v],
                                code_start[v + 1],
                                const_i,
                                const_f,
                                const_kind,
                                icols,
                                inull,
                                fcols,
                                fnull,
                                members,
                                i,
                                v,
                                start,
                                q0,
                                q1,
                                l_first,
                                l_last,
                                cur,
                                t,
                                l_node[cur, t],
                                a_parent,
                                a_row,
                                a_label,
                                a_lo,
                                si,
                                sf,
                                sk,
                                n_matches - part_matches + 1,
                                tmp_ai,
                                tmp_af,
                            ):
                                continue
                        # consume row i: new path node
                        if not free[v]:
                            consumed_nonfree = True
                        a_parent[a_n] = l_node[cur, t]
                        a_row[a_n] = i
                        a_lo[a_n] = i
                        a_label[a_n] = v
                        a_excl[a_n] = l_depth[cur, t] > 0
                        new_node = a_n
                        a_n += 1
                        if any_dependent:  # histories matter only to dependent conditions
                            for u in range(n_vars):
                                first_tmp[u] = l_first[cur, t, u]
                                last_tmp[u] = l_last[cur, t, u]
                            if first_tmp[v] < 0:
                                first_tmp[v] = i
                            last_tmp[v] = i
                        # closure of pc + 1 at row i + 1 into the n-list; inside one closure
                        # every path shares this thread's history, so pc alone prunes (this also
                        # breaks epsilon cycles such as (A*)*)
                        cstamp += 1
                        s_pc[0] = pc + 1
                        s_depth[0] = l_depth[cur, t]
                        sp = 1
                        while sp > 0:
                            sp -= 1
                            q = s_pc[sp]
                            depth = s_depth[sp]
                            if cvisited[q] == cstamp:
                                continue
                            cvisited[q] = cstamp
                            if not any_dependent:
                                # across threads too: a thread already here is preferred and
                                # equivalent
                                if visited[q] == stamp:
                                    continue
                                visited[q] = stamp
                            pushed = _follow(
                                q, depth, i + 1, a0, a1, op, arg_a, arg_b, s_pc, s_depth, sp
                            )
                            if pushed >= 0:
                                sp = pushed
                                continue
                            # equivalence: same instruction and, when conditions read other
                            # variables, the same values (or positions) later conditions read
                            dval = 0
                            if any_dependent:
                                if vals:
                                    _value_key(
                                        key,
                                        q,
                                        rd,
                                        n_rd,
                                        live,
                                        members,
                                        first_tmp,
                                        last_tmp,
                                        q0,
                                        q1,
                                        icols,
                                        inull,
                                        fcols,
                                        fnull,
                                        fbox,
                                        fbits,
                                    )
                                    if n_ag > 0:
                                        dval = _acc_key(
                                            key,
                                            1 + 2 * n_rd,
                                            q,
                                            accs,
                                            live_ag,
                                            tmp_ai,
                                            tmp_af,
                                            fbox,
                                            fbits,
                                            dom_a,
                                            dom_stat,
                                        )
                                else:
                                    _position_key(
                                        key,
                                        q,
                                        relevant,
                                        members,
                                        first_tmp,
                                        last_tmp,
                                        new_node if deep else 0,
                                    )
                                if dom_dir == 0:
                                    if _h_seen(h_stamp, h_key, stamp, key, key_w):
                                        continue
                                elif _h_dominated(
                                    h_stamp, h_key, h_best, stamp, key, key_w, dval, dom_dir
                                ):
                                    continue
                            if memo:
                                if not any_dependent:  # no values matter: the state is q
                                    key[0] = q
                                at = _intern_slot(i_stamp, i_key, f_gen, key, f_w)
                                sid = i_id[at] if at >= 0 else -1
                                rel = i + 1 - p0
                                if sid >= 0 and dom_dir == 0:
                                    if (
                                        bits[sid * words + (rel >> 6)] >> np.uint64(rel & 63)
                                    ) & np.uint64(1):
                                        f_hits += 1
                                        continue  # an earlier attempt failed from here
                                elif sid >= 0:  # failed from here with a value as good?
                                    best = dbest[sid * words + rel]
                                    if (dom_dir > 0 and dval <= best) or (
                                        dom_dir < 0 and dval >= best
                                    ):
                                        f_hits += 1
                                        continue
                                if sid < 0 and n_ids < id_room:  # past the room: not remembered
                                    at = -1 - at
                                    i_stamp[at] = f_gen
                                    for z in range(f_w):
                                        i_key[at, z] = key[z]
                                    i_id[at] = n_ids
                                    sid = n_ids
                                    n_ids += 1
                                    if dom_dir == 0:
                                        for z in range(sid * words, (sid + 1) * words):
                                            bits[z] = 0
                                    else:  # no failure yet: a value no value is worse than
                                        none = NO_FAIL_UP if dom_dir > 0 else NO_FAIL_DOWN
                                        for z in range(sid * words, (sid + 1) * words):
                                            dbest[z] = none
                                if sid >= 0 and pend_n < pend.shape[0]:
                                    pend[pend_n] = rel * MEMO_IDS + sid
                                    pend_val[pend_n] = dval
                                    pend_n += 1
                            l_pc[nxt, nt] = q
                            l_node[nxt, nt] = new_node
                            l_depth[nxt, nt] = depth
                            l_src[nxt, nt] = t
                            if any_dependent:
                                for u in range(n_vars):
                                    l_first[nxt, nt, u] = first_tmp[u]
                                    l_last[nxt, nt, u] = last_tmp[u]
                            for a in range(n_ag):
                                for z in range(4):
                                    l_ai[nxt, nt, a, z] = tmp_ai[a, z]
                                for z in range(3):
                                    l_af[nxt, nt, a, z] = tmp_af[a, z]
                            nt += 1
                    # fixed point? the new list repeats the current one and only free threads
                    # consumed
                    jump = i + 1
                    if not saw_done and not consumed_nonfree and nt == c_n and nt > 0:
                        jump = _idle_until(
                            i,
                            nt,
                            cur,
                            nxt,
                            l_pc,
                            l_depth,
                            l_src,
                            op,
                            arg_a,
                            free,
                            next_true,
                            ts,
                            win_end,
                            window,
                            start,
                            p1,
                        )
                    # swap lists
                    cur, nxt = nxt, cur
                    c_n = nt
                    if jump > i + 1:
                        # free threads consume rows i + 1 .. jump - 1 as one run node each
                        for k2 in range(c_n):
                            v2 = arg_a[l_pc[cur, k2]]
                            if free[v2]:
                                a_parent[a_n] = l_node[cur, k2]
                                a_lo[a_n] = i + 1
                                a_row[a_n] = jump - 1
                                a_label[a_n] = v2
                                a_excl[a_n] = l_depth[cur, k2] > 0
                                l_node[nxt, k2] = a_n  # remember the run of free thread k2
                                a_n += 1
                        for k2 in range(c_n):
                            f = l_src[cur, k2]
                            node_f = l_node[nxt, f]
                            vf = a_label[node_f]
                            l_node[cur, k2] = node_f
                            if any_dependent:
                                if l_first[cur, k2, vf] < 0:
                                    l_first[cur, k2, vf] = i + 1
                                l_last[cur, k2, vf] = jump - 1
                            # the run's rows join the running aggregates of its variable (k2
                            # holds its source's aggregates: it came from it at row i)
                            for a in range(n_ag):
                                if accs[a, 2] == UNIVERSAL or members[accs[a, 2], vf]:
                                    for z in range(4):
                                        tmp_ai[a, z] = l_ai[cur, k2, a, z]
                                    for z in range(3):
                                        tmp_af[a, z] = l_af[cur, k2, a, z]
                                    for r in range(i + 1, jump):
                                        _acc_add(
                                            tmp_ai,
                                            tmp_af,
                                            a,
                                            accs[a, 1],
                                            accs[a, 0],
                                            r,
                                            icols,
                                            inull,
                                            fcols,
                                            fnull,
                                        )
                                    for z in range(4):
                                        l_ai[cur, k2, a, z] = tmp_ai[a, z]
                                    for z in range(3):
                                        l_af[cur, k2, a, z] = tmp_af[a, z]
                    i = jump
                if need != DONE_SCAN:
                    break
                # --- record the preferred match of this attempt ---
                if status != OK:  # stopped, or past a budget
                    break
                if best_node == -2:
                    f_tries += 1
                    if memo and f_hits == 0 and f_used >= MEMO_TRIAL and f_tries >= MEMO_TRIES:
                        memo = False  # states never repeat across starts here: stop paying
                    if memo and dom_dir != 0:
                        # a failed state keeps the best value it failed with: any value no
                        # better fails too
                        for e in range(pend_n):
                            w = (pend[e] % MEMO_IDS) * words + pend[e] // MEMO_IDS
                            if (dom_dir > 0 and pend_val[e] > dbest[w]) or (
                                dom_dir < 0 and pend_val[e] < dbest[w]
                            ):
                                dbest[w] = pend_val[e]
                                f_used += 1
                    elif memo:
                        for e in range(pend_n):
                            rel = pend[e] // MEMO_IDS
                            w = (pend[e] % MEMO_IDS) * words + (rel >> 6)
                            bit = np.uint64(1) << np.uint64(rel & 63)
                            if not bits[w] & bit:
                                bits[w] |= bit
                                f_used += 1
                    pos = start + 1
                    continue
                if n_matches >= max_matches:
                    status = LIMIT_REACHED
                    break
            resume = R_FRESH
            length = best_end - start
            if n_matches >= m_start.shape[0]:
                need, st[S_NEED] = NEED_MATCHES, n_matches + 1
            elif n_rows_out + length > r_row.shape[0]:
                need, st[S_NEED] = NEED_ROWS, n_rows_out + length
            if need != DONE_SCAN:
                resume = R_RECORD
                break
            m_start[n_matches] = start
            m_end[n_matches] = best_end
            m_part[n_matches] = p
            k = best_node
            j = n_rows_out + length - 1
            first_target = -1
            last_target = -1
            while k >= 0:
                for row in range(a_row[k], a_lo[k] - 1, -1):
                    r_match[j] = n_matches
                    r_row[j] = row
                    r_label[j] = a_label[k]
                    r_excl[j] = a_excl[k]
                    j -= 1
                if skip_target >= 0 and members[skip_target, a_label[k]]:
                    if last_target < 0:
                        last_target = a_row[k]
                    first_target = a_lo[k]
                k = a_parent[k]
            n_rows_out += length
            n_matches += 1
            if length == 0 or skip_mode == SKIP_NEXT_ROW:
                pos = start + 1
            elif skip_mode == SKIP_PAST_LAST:
                pos = best_end
            else:
                target = first_target if skip_mode == SKIP_TO_FIRST else last_target
                if target < 0:
                    status = SKIP_NO_ROW
                    break
                if target == start:
                    status = SKIP_TO_FIRST_ROW
                    break
                pos = target
        if need != DONE_SCAN or status != OK:
            break
        p += 1
        pos = -1
    st[S_P] = p
    st[S_POS] = pos
    st[S_START] = start
    st[S_I] = i
    st[S_CN] = c_n
    st[S_CUR] = cur
    st[S_AN] = a_n
    st[S_PENDN] = pend_n
    st[S_BEST_NODE] = best_node
    st[S_BEST_END] = best_end
    st[S_STAMP] = stamp
    st[S_CSTAMP] = cstamp
    st[S_NMATCH] = n_matches
    st[S_NROWS] = n_rows_out
    st[S_STATUS] = status
    st[S_UNTIL] = until_check
    st[S_STEPS] = steps
    st[S_PARTM] = part_matches
    st[S_FUSED] = f_used
    st[S_FGEN] = f_gen
    st[S_FHITS] = f_hits
    st[S_FTRIES] = f_tries
    st[S_MEMO] = 1 if memo else 0
    st[S_NIDS] = n_ids
    st[S_WORDS] = words
    st[S_IDROOM] = id_room
    st[S_RESUME] = resume

    return need


@njit(cache=True, nogil=True)  # a storage node's control calls run beside a long match
def run(
    op: np.ndarray,
    arg_a: np.ndarray,
    arg_b: np.ndarray,
    masks: np.ndarray,
    dependent: np.ndarray,
    code: np.ndarray,
    code_start: np.ndarray,
    const_i: np.ndarray,
    const_f: np.ndarray,
    const_kind: np.ndarray,
    icols: np.ndarray,
    inull: np.ndarray,
    fcols: np.ndarray,
    fnull: np.ndarray,
    members: np.ndarray,
    relevant: np.ndarray,
    deep: bool,
    accs: np.ndarray,
    dom: np.ndarray,
    ts: np.ndarray,
    win_end: np.ndarray,
    window: int,
    parts: np.ndarray,
    nav_parts: np.ndarray,
    skip_mode: int,
    skip_target: int,
    max_matches: int,
    next_start: np.ndarray,
    free: np.ndarray,
    next_true: np.ndarray,
    stop: np.ndarray,
    cut_start: bool = False,
    cut_end: bool = False,
) -> tuple[Any, ...]:
    """Match every partition ``[parts[p], parts[p + 1])``.

    ``nav_parts[p]`` = ``(lo, hi)``: the rows navigation (PREV/NEXT) from unit p may read. It
    holds the unit and may be wider: a final-interval segment reads the rest of its PARTITION BY
    group, including halo rows that no match may contain.

    ``stop[0]`` is read every :data:`STOP_EVERY` thread steps: once it is non-zero (a storage
    node's query was closed or passed its deadline, see :func:`dfs_cer.work.watch`) the run ends
    with status STOPPED. ``stop[2]`` receives the thread steps taken (a thread at a row is one
    step, plus the rows of its path when its condition walks them); past ``stop[3]`` (when
    positive) the run ends with status OVER_STEPS, ``stop[4]``
    naming the partition it was in. Past ``stop[STOP_MAX_NS]`` nanoseconds in one partition
    (when positive; the clock is read with the stop flag) it ends with status OVER_TIME, and
    when one row's thread lists would take more than ``stop[STOP_MAX_LIST]`` bytes, with status
    OVER_THREADS (both naming the partition in ``stop[4]``). ``stop[1]`` (when positive)
    bounds the bytes of the matches kept: a run whose matches would need more ends with status
    OVER_BYTES (the caller may grant more and run again).

    ``accs`` (one row per running aggregate the conditions read: column slot, kind, name and
    the statistics read, a bit each: 1 count, 2 sum, 4 min, 8 max) are kept per thread and
    updated as it labels rows; the C_AGG code's field 5 names its row. Threads and failed
    states are keyed on their values. ``dom`` = (aggregate, statistic, direction): a statistic
    every condition reads monotonically (direction 1: a larger value never turns a TRUE
    condition FALSE; -1: a smaller one never does; see
    :mod:`dfs_cer.match.rowpattern.dominance`), or aggregate -1. Its value is left out of the
    keys: a thread is dropped where a preferred one with the same key has a value at least as
    good, and a failed state stops every later thread with the same key and a value no better.

    ``cut_start`` / ``cut_end``: the rows are cut out of longer partitions (a time chunk), so a
    partition's first row here is not its real first row (``^`` never passes) / its last row
    not its real last row (``$`` never passes).

    ``next_start[i]`` is the first row >= i where a match can start (a row some first label's
    mask accepts); attempts at other rows are skipped without running the program.

    Idle rows are skipped in bulk: when the thread list reaches a fixed point where only
    unconditioned variables (``free``, e.g. ``N`` in ``N*?``) consume rows and every other label
    is blocked by its mask, the free threads consume every row up to the next row some blocked
    label accepts (``next_true[v, i]``) as one run node. Results are those of stepping row by row.

    Returns ``(status, m_start, m_end, m_part, r_match, r_row, r_label, r_excl, work_bytes)``:
    matches (start, exclusive end, partition) and their rows with labels and exclusion flags;
    ``status`` is OK, LIMIT_REACHED, or a runtime AFTER MATCH SKIP error with the offending match
    recorded last; ``work_bytes`` is the matcher's peak working memory.
    """
    n_prog = op.shape[0]
    n_vars = masks.shape[0]
    n_names = members.shape[0]
    any_dependent = False
    for v in range(n_vars):
        if dependent[v]:
            any_dependent = True
    # what later conditions read: (name, FIRST (1) or LAST (0), physical step, kind, column)
    # per distinct column reference through a variable. With no path walks (deep) and no
    # CLASSIFIER, a thread's future depends on the values those references read, not on where
    # they were read, so threads (and failed states) are keyed on the values: A+? B+ C reading
    # LAST(A.v) keeps one thread per distinct value instead of one per split of the rows
    vals = not deep
    n_rd = 0
    rd = np.empty((max(1, code.shape[0]), 5), np.int64)
    for c in range(code.shape[0]):
        if code[c, 0] == C_CLS:
            vals = False
        if code[c, 0] == C_COL and code[c, 3] >= 0:
            seen = False
            for r in range(n_rd):
                if (
                    rd[r, 0] == code[c, 3]
                    and rd[r, 1] == code[c, 4]
                    and rd[r, 2] == code[c, 6]
                    and rd[r, 3] == code[c, 2]
                    and rd[r, 4] == code[c, 1]
                ):
                    seen = True
            if not seen:
                rd[n_rd, 0] = code[c, 3]
                rd[n_rd, 1] = code[c, 4]
                rd[n_rd, 2] = code[c, 6]
                rd[n_rd, 3] = code[c, 2]
                rd[n_rd, 4] = code[c, 1]
                n_rd += 1
    n_ag = accs.shape[0]
    live, live_ag = _live_reads(_reach(op, arg_a, arg_b, n_vars), code, code_start, rd, n_rd, n_ag)
    fbox = np.empty(1, np.float64)  # a double's bits, as a key entry
    fbits = fbox.view(np.int64)
    # equivalence key width: pc + (state, value) per read and the words of the aggregates (see
    # _value_key), or first/last per relevant name in positions (+ node when deep)
    ag_w = 0
    for a in range(n_ag):
        ag_w += 1 + ((accs[a, 3] >> 1) & 1) + ((accs[a, 3] >> 2) & 1) + ((accs[a, 3] >> 3) & 1)
    key_w = 1 + (2 * n_rd + ag_w if vals else 2 * n_names) + 1
    # dominance needs values in the keys
    dom_on = np.empty(3, np.int64)
    dom_on[0] = dom[0] if vals else -1
    dom_on[1] = dom[1]
    dom_on[2] = dom[2] if vals and dom[0] >= 0 else 0
    # failed states: with no WITHIN, no MATCH_NUMBER() and no condition reading the match's
    # first row, a thread's future depends only on its row, its instruction and the values its
    # key holds (what later conditions read, running aggregates included). An attempt that ends
    # without a match failed from every state it reached, so a later attempt reaching one stops
    # there: Trino's memoised failures, which make A+ B+ C over a partition that never matches
    # linear. A failed state is its row and its key less the node, interned as one id (memo
    # implies vals: no CLASSIFIER, not deep)
    memo = window < 0 and vals
    for c in range(code.shape[0]):
        o = code[c, 0]
        if o == C_MNUM or (o == C_COL and code[c, 3] == UNIVERSAL and code[c, 4] == 1):
            memo = False
    f_w = key_w - 1
    # thread lists: index [cur] is the current list, [nxt] the next one
    cap_t = max(16, 2 * n_prog)
    l_pc = np.empty((2, cap_t), np.int64)
    l_node = np.empty((2, cap_t), np.int64)
    l_depth = np.empty((2, cap_t), np.int64)
    l_src = np.empty((2, cap_t), np.int64)
    l_first = np.empty((2, cap_t, n_vars), np.int64)
    l_last = np.empty((2, cap_t, n_vars), np.int64)
    # running aggregates per thread (see _acc_add), and those of the thread labelling a row
    l_ai = np.empty((2, cap_t, max(1, n_ag), 4), np.int64)
    l_af = np.empty((2, cap_t, max(1, n_ag), 3), np.float64)
    tmp_ai = np.zeros((max(1, n_ag), 4), np.int64)
    tmp_af = np.zeros((max(1, n_ag), 3), np.float64)
    visited = np.full(n_prog, -1, np.int64)
    cvisited = np.full(n_prog, -1, np.int64)
    h_cap = 64
    h_stamp = np.full(h_cap, -1, np.int64)
    h_key = np.empty((h_cap, key_w), np.int64)
    h_best = np.empty(h_cap, np.int64)
    key = np.empty(key_w, np.int64)
    i_stamp = np.full(64 if memo else 1, -1, np.int64)
    i_key = np.empty((i_stamp.shape[0], f_w), np.int64)
    i_id = np.empty(i_stamp.shape[0], np.int64)
    bits = np.zeros(64 if memo else 1, np.uint64)
    pend = np.empty(1024 if memo else 1, np.int64)  # row * MEMO_IDS + id
    pend_val = np.empty(pend.shape[0], np.int64)  # its dominated value
    dbest = np.empty(64 if memo and dom_on[2] != 0 else 1, np.int64)
    # path arena
    a_cap = 1024
    a_parent = np.empty(a_cap, np.int64)
    a_row = np.empty(a_cap, np.int64)
    a_label = np.empty(a_cap, np.int64)
    a_excl = np.empty(a_cap, np.bool_)
    a_lo = np.empty(a_cap, np.int64)
    # closure stack: pc and exclusion depth (see _follow for its size)
    s_cap = 2 * n_prog + 2
    s_pc = np.empty(s_cap, np.int64)
    s_depth = np.empty(s_cap, np.int64)
    # evaluation stacks
    ev_n = max(4, code.shape[0] + 1)
    si = np.empty(ev_n, np.int64)
    sf = np.empty(ev_n, np.float64)
    sk = np.empty(ev_n, np.int64)
    first_tmp = np.empty(n_vars, np.int64)
    last_tmp = np.empty(n_vars, np.int64)
    # outputs
    m_cap = 1024
    m_start = np.empty(m_cap, np.int64)
    m_end = np.empty(m_cap, np.int64)
    m_part = np.empty(m_cap, np.int64)
    r_cap = 4096
    r_match = np.empty(r_cap, np.int64)
    r_row = np.empty(r_cap, np.int64)
    r_label = np.empty(r_cap, np.int64)
    r_excl = np.empty(r_cap, np.bool_)
    st = np.zeros(S_SIZE, np.int64)
    st[S_POS] = -1
    st[S_BEST_NODE] = -2
    st[S_BEST_END] = -1
    st[S_UNTIL] = STOP_EVERY
    st[S_MEMO] = 1 if memo else 0
    st[S_WORDS] = 1
    st[S_STATUS] = OK
    st[S_TPART] = -1
    while True:
        need = _scan(
            op,
            arg_a,
            arg_b,
            masks,
            dependent,
            code,
            code_start,
            const_i,
            const_f,
            const_kind,
            icols,
            inull,
            fcols,
            fnull,
            members,
            relevant,
            deep,
            ts,
            win_end,
            window,
            parts,
            nav_parts,
            skip_mode,
            skip_target,
            max_matches,
            next_start,
            free,
            next_true,
            stop,
            cut_start,
            cut_end,
            any_dependent,
            vals,
            rd,
            n_rd,
            live,
            f_w,
            l_pc,
            l_node,
            l_depth,
            l_src,
            l_first,
            l_last,
            visited,
            cvisited,
            h_stamp,
            h_key,
            key,
            i_stamp,
            i_key,
            i_id,
            bits,
            pend,
            a_parent,
            a_row,
            a_label,
            a_excl,
            a_lo,
            s_pc,
            s_depth,
            si,
            sf,
            sk,
            first_tmp,
            last_tmp,
            fbox,
            fbits,
            m_start,
            m_end,
            m_part,
            r_match,
            r_row,
            r_label,
            r_excl,
            st,
            accs,
            dom_on,
            live_ag,
            l_ai,
            l_af,
            tmp_ai,
            tmp_af,
            h_best,
            dbest,
            pend_val,
        )
        size = st[S_NEED]
        if need == DONE_SCAN:
            break
        if need == NEED_THREADS:
            cap_t = max(2 * cap_t, size)
            l_pc = _grow_pair(l_pc, cap_t)
            l_node = _grow_pair(l_node, cap_t)
            l_depth = _grow_pair(l_depth, cap_t)
            l_src = _grow_pair(l_src, cap_t)
            l_first = _grow_pair3(l_first, cap_t)
            l_last = _grow_pair3(l_last, cap_t)
            l_ai = _grow_pair4(l_ai, cap_t)
            l_af = _grow_pair4(l_af, cap_t)
        elif need == NEED_ARENA:
            a_cap = max(2 * a_cap, size)
            a_parent = _grow1(a_parent, a_cap)
            a_row = _grow1(a_row, a_cap)
            a_label = _grow1(a_label, a_cap)
            a_excl = _grow1(a_excl, a_cap)
            a_lo = _grow1(a_lo, a_cap)
        elif need == NEED_PEND:
            pend = _grow1(pend, min(PENDING_MAX, max(2 * pend.shape[0], size)))
            pend_val = _grow1(pend_val, pend.shape[0])
        elif need == NEED_HASH:  # the row starts again: what the table held is not needed
            while h_cap < size:
                h_cap *= 4
            h_stamp = np.full(h_cap, -1, np.int64)
            h_key = np.empty((h_cap, key_w), np.int64)
            h_best = np.empty(h_cap, np.int64)
        elif need == NEED_DOM:
            dbest = _grow1(dbest, size)
        elif need == NEED_IDS:
            while i_stamp.shape[0] < size:
                i_stamp, i_key, i_id, _ = _regrow(i_stamp, i_key, i_id, st[S_FGEN])
        elif need == NEED_BITS:
            bits = _grow1(bits, size)
        elif need == NEED_MATCHES:
            if stop[STOP_BYTES] > 0 and 24 * 2 * m_cap + 25 * r_cap > stop[STOP_BYTES]:
                st[S_STATUS] = OVER_BYTES
                break
            m_cap *= 2
            m_start = _grow1(m_start, m_cap)
            m_end = _grow1(m_end, m_cap)
            m_part = _grow1(m_part, m_cap)
        else:  # NEED_ROWS
            if stop[STOP_BYTES] > 0 and 24 * m_cap + 25 * max(2 * r_cap, size) > stop[STOP_BYTES]:
                st[S_STATUS] = OVER_BYTES
                break
            r_cap = max(2 * r_cap, size)
            r_match = _grow1(r_match, r_cap)
            r_row = _grow1(r_row, r_cap)
            r_label = _grow1(r_label, r_cap)
            r_excl = _grow1(r_excl, r_cap)
    stop[STOP_STEPS] = st[S_STEPS]
    n_matches = st[S_NMATCH]
    n_rows_out = st[S_NROWS]
    # working memory at its peak (arrays only grow): thread lists, dedup tables, path arena, stacks
    work = (
        8
        * (
            l_pc.size
            + l_node.size
            + l_depth.size
            + l_src.size
            + l_first.size
            + l_last.size
            + visited.size
            + cvisited.size
            + h_stamp.size
            + h_key.size
            + h_best.size
            + l_ai.size
            + l_af.size
            + dbest.size
            + pend_val.size
            + i_stamp.size
            + i_key.size
            + i_id.size
            + bits.size
            + pend.size
            + a_parent.size
            + a_row.size
            + a_label.size
            + a_lo.size
            + s_pc.size
            + s_depth.size
            + si.size
            + sf.size
            + sk.size
        )
        + a_excl.size
    )
    return (
        st[S_STATUS],
        m_start[:n_matches],
        m_end[:n_matches],
        m_part[:n_matches],
        r_match[:n_rows_out],
        r_row[:n_rows_out],
        r_label[:n_rows_out],
        r_excl[:n_rows_out],
        work,
    )
