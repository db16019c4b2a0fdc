"""A block's SGLang decode and prefill lines into `SglangRuns`, a column at a time: what feeding them one by
one to `SglangRuns.decode` / `prefill` does, with the arithmetic done by C (map, compress, reduce, numpy:
imported on first use, `numpy()`) and the float sums in line order (so the results are the same to the last
bit). A block whose lines switch runs, ranks or kinds (or whose lines the per-line parsers also fed) is fed
line by line instead."""

from __future__ import annotations

import math
from bisect import bisect_left
from functools import reduce
from itertools import compress, repeat
from operator import add, is_not, itemgetter, ne, sub
from typing import Iterator

from wmtp.log_records import MAX_VALUE
from wmtp.logstats import BIN_WIDTH as _R, MAX_ROWS, PerBatch


class Prefixes(dict):
    """prefix text -> `wmtp.logs.prefix_fields` of it (bounded)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, pre: str):
        if len(self) >= 8192:
            self.clear()
        v = self[pre] = self.fn(pre)
        return v


class _LogAl(dict):
    def __missing__(self, al: float) -> float:
        la = _log(al)
        if len(self) < 65536:
            self[al] = la
        return la


_LA, _ONE, _log = _LogAl(), {None: 1.0}, math.log


class _Checked(dict):
    """text -> number in [lo, hi] (an int with `to_int`); "" -> None (the field is absent); a text out of
    range raises ValueError (and is not remembered). Bounded."""

    def __init__(self, lo: float, hi: float, to_int: bool = False):
        super().__init__()
        self.lo, self.hi, self.to_int = lo, hi, to_int
        self[""] = None

    def __missing__(self, text: str):
        x = float(text)
        if not self.lo <= x <= self.hi:
            raise ValueError(text)
        if len(self) >= 65536:
            self.clear()
            self[""] = None
        x = self[text] = int(x) if self.to_int else x
        return x


_RUN, _AL, _RATE = _Checked(0, 1e7, to_int=True), _Checked(1, 1000), _Checked(0, MAX_VALUE)


def decode_columns(run_t: list, tok_t: list, al_t: list, rate_t: list, thr_t: list):
    """The checked numbers of decode lines from their texts ("" where absent), what `wmtp.logs._decode_fast`
    reads: (running, tokens, accept len or None, accept rate or None, throughput), or None when one of
    them fails `_decode_fast`'s range checks or the lines mix speculative and dense (the lines then go to
    the per-line parsers)."""
    n = len(run_t)
    dense_al, dense_rate = al_t.count(""), rate_t.count("")
    try:
        run = list(map(_RUN.__getitem__, run_t))
        al = [None] * n if dense_al == n else list(map(_AL.__getitem__, al_t))
        rate = [None] * n if dense_rate == n else list(map(_RATE.__getitem__, rate_t))
    except ValueError:
        return None
    try:
        tok = list(map(int, tok_t))  # int(float(text)) for a plain integer below 2**53
    except ValueError:
        tok = list(map(int, map(float, tok_t)))
    thr = list(map(float, thr_t))
    if max(tok) > MAX_VALUE or max(thr) > MAX_VALUE:
        return None
    if dense_al and dense_rate and (dense_al < n or dense_rate < n) and \
            not all(map(add, al_t, rate_t)) and any(map(add, al_t, rate_t)):
        return None  # speculative and dense lines in one block
    return run, tok, al, rate, thr


def feed_scalar(runs, events: list) -> None:
    """(line number, kind, payload) in line order: "d" decode fields, "p" prefill (pid, dp), "r" a record."""
    for _, kind, x in sorted(events, key=itemgetter(0)):
        if kind == "d":
            runs.decode(*x)
        elif kind == "p":
            runs.prefill(*x)
        else:
            runs.add(x)


def _scalar_events(base: int, di: list, pi: list, dcols, pfx_d: list, pfx_p: list, info, skip: int = -1) -> list:
    run, tok, al, rate, thr = dcols
    ev = [(base + i + 1, "d", (base + i + 1, None, run[j], tok[j], al[j], rate[j], thr[j], None, None,
                                *info[pfx_d[j]][1:])) for j, i in enumerate(di) if i > skip]
    return ev + [(base + i + 1, "p", info[pfx_p[j]][2:4]) for j, i in enumerate(pi) if i > skip]


def feed(runs, base: int, di: list, pi: list, dcols, pfx_d: list, pfx_p: list, info, extra: list) -> None:
    """Decode rows `di` (columns `dcols`, prefixes `pfx_d`) and prefill rows `pi` of one block whose first
    line is `base + 1`, with `extra`: (line number, kind, payload) the per-line parsers gave."""
    run, tok, al, rate, thr = dcols  # al, rate: None where the line has none
    nd = len(di)
    # the prefixes where they change (consecutive lines mostly share one): their seconds, pids and ranks
    steps = [pfx_d[0]] + list(map(pfx_d.__getitem__, compress(range(1, nd), map(ne, pfx_d[1:], pfx_d[:-1])))) \
        if nd else []
    dinfo = list(map(info.__getitem__, steps))
    keys = {x[2:4] for x in dinfo} | {info[p][2:4] for p in set(pfx_p)}
    secs = list(map(itemgetter(1), dinfo))
    if extra or len(keys) != 1 or nd < 2 or (None in secs and any(s is not None for s in secs)):
        feed_scalar(runs, _scalar_events(base, di, pi, dcols, pfx_d, pfx_p, info) + extra)
        return
    (pid, dp), = keys
    first = di[0]
    for _ in range(bisect_left(pi, first)):  # rows ascending
        runs.prefill(pid, dp)
    runs.decode(base + first + 1, None, run[0], tok[0], al[0], rate[0], thr[0], None, None, secs[0], pid, dp)
    if secs[0] is not None:
        d = list(map(sub, secs[1:], secs[:-1]))
        if d and (min(d) < -2 or max(d) > runs.gap_s):
            feed_scalar(runs, _scalar_events(base, di, pi, dcols, pfx_d, pfx_p, info, skip=first))
            return
        runs.last_t = secs[-1]
    ap = None
    if pi:  # a prefill row between two decode rows: prefill rows before each (no row is both)
        before = numpy().searchsorted(pi, di)
        ap = before[1:] > before[:-1]
    _vector(runs.cur, base + 1, di, run, tok, al, rate, thr, ap)
    st = runs.state[(pid, dp)]
    st[0], st[1], st[2] = False, tok[-1], thr[-1]
    if pi and pi[-1] > di[-1]:
        runs.prefill(pid, dp)


def numpy():
    """numpy, imported on first use: `wmtp predict` and the rest of the core stay free of it."""
    import numpy as np

    return np


def _vector(cur, at: int, di: list, run: list, tok: list, al, rate, thr: list, ap) -> None:
    """`SglangRuns.decode` on decode lines 1.. of the columns (line 0 fed already, same run and rank, no
    split among them; line numbers `at` + `di`); `ap`: whether a prefill line of the rank came before each
    (a numpy bool array; None: none did). The
    per-line work in numpy; float sums in line order (`reduce`, `numpy.add.at`: one add at a time)."""
    np = numpy()
    m = len(di) - 1
    cur.lines += m
    cur.last_line = at + di[-1]
    have = list(filter(None, al[1:]))  # an accept len is >= 1
    cur.al[2] = reduce(add, have, cur.al[2])
    cur.al[3] += len(have)
    if rate[1:].count(None) < m:
        have = list(compress(rate[1:], map(is_not, rate[1:], repeat(None))))
        cur.rate[0] = reduce(add, have, cur.rate[0])
        cur.rate[1] += len(have)
    t, h = np.array(tok, dtype=np.int64), np.array(thr, dtype=np.float64)
    r1 = np.array(run[1:], dtype=np.int64)
    nz = (t[1:] != 0) & (r1 != 0)  # tokens == 0 or running <= 0: not used, not a stall
    stall = nz & ((h[1:] == 0.0) | ((h[1:] < 0.5 * h[:-1]) & (t[1:] == t[:-1])))
    n_stall = int(np.count_nonzero(stall))
    if n_stall:
        cur.stalls += n_stall
        room = MAX_ROWS - len(cur.stall_lines)
        if room > 0:
            rows = (np.flatnonzero(stall)[:room] + 1).tolist()
            cur.stall_lines.extend(map(add, map(di.__getitem__, rows), repeat(at)))
    used = np.flatnonzero(nz & ~stall)
    if not used.size:
        return
    run_u = r1[used]
    lth = np.array(list(map(_log, h[1:][used].tolist())))  # math.log: the reference's logs, bit for bit
    a_u = None if al.count(None) == len(al) else np.array(al[1:], dtype=np.float64)[used]  # None: nan
    ap_u = None if ap is None or not ap.any() else ap[used]
    pbs = cur.per_batch
    sizes = np.unique(run_u).tolist()
    for r in sizes:
        if r not in pbs:
            pbs[r] = PerBatch(_log(r * 1e3))
    log_ms = np.array([pbs[r].log_ms for r in sizes])[np.searchsorted(sizes, run_u)] if len(sizes) > 1 \
        else pbs[sizes[0]].log_ms
    k1 = np.rint((log_ms - lth) / _R).astype(np.int64)
    after = np.zeros(len(used), dtype=np.int64) if ap_u is None else ap_u.astype(np.int64)
    for ar, ks, cs in _groups(np, (after << 24) + run_u, k1):  # running <= 1e7 < 2**24
        _add_counts((cur.after_prefill if ar >> 24 else cur.tpot).by_batch.setdefault(ar & 0xFFFFFF, {}), ks, cs)
    if a_u is not None:
        mine = ~np.isnan(a_u) if ap_u is None else ~np.isnan(a_u) & ~ap_u
        cur.al[0] = reduce(add, a_u[mine].tolist(), cur.al[0])
        cur.al[1] += int(np.count_nonzero(mine))
    if ap_u is not None:
        cur.dropped += int(np.count_nonzero(ap_u))
    _t_iter(np, pbs, sizes, run_u, lth, a_u)


def _groups(np, hi, lo, values=None) -> Iterator:
    """(hi, the distinct lo of it, their counts[, the `values` of each line as one array, their index into
    the distinct lo]) for each distinct `hi` (an int >= 0 below 2**31; `lo`: ints fitting 32 bits signed);
    the lo ascending, or with `values` in order of their first line."""
    key = (hi.astype(np.int64) << 32) + (lo + (1 << 31))
    if values is None:
        uniq, cnt = np.unique(key, return_counts=True)
    else:
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        cnt = np.bincount(inv.reshape(-1), minlength=len(uniq))
    his = uniq >> 32
    cuts = [0, *(np.flatnonzero(his[1:] != his[:-1]) + 1).tolist(), len(uniq)]
    for a, b in zip(cuts[:-1], cuts[1:]):
        los = (uniq[a:b] & 0xFFFFFFFF) - (1 << 31)
        if values is None:
            yield int(his[a]), los.tolist(), cnt[a:b].tolist()
            continue
        order = np.argsort(first[a:b], kind="stable")
        rank = np.empty(b - a, dtype=np.int64)
        rank[order] = np.arange(b - a)
        mine = (inv.reshape(-1) >= a) & (inv.reshape(-1) < b)
        yield int(his[a]), los[order].tolist(), cnt[a:b][order].tolist(), values[mine], rank[inv.reshape(-1)[mine] - a]


def _add_counts(d: dict, keys: list, counts: list) -> None:
    d.update(zip(keys, map(add, map(d.get, keys, repeat(0)), counts)))


def _t_iter(np, pbs: dict, sizes: list, run_u, lt, a_u) -> None:
    """The artifact's T_iter and throughput bins of the used lines (after the first 2 at each batch size)."""
    keep = None
    for r in sizes:
        pb = pbs[r]
        at = np.flatnonzero(run_u == r) if len(sizes) > 1 else None
        if pb.seen < 2:
            drop = (at if at is not None else np.arange(len(run_u)))[:2 - pb.seen]
            if keep is None:
                keep = np.ones(len(run_u), dtype=bool)
            keep[drop] = False
        pb.seen += len(run_u) if at is None else len(at)
    if keep is not None:
        run_u, lt = run_u[keep], lt[keep]
        a_u = None if a_u is None else a_u[keep]
    if not run_u.size:
        return
    if a_u is None:
        a_u, la = np.ones(len(run_u)), 0.0  # no accept len: 1
    else:
        a_u = np.where(np.isnan(a_u), 1.0, a_u)
        la = np.array(list(map(_LA.__getitem__, a_u.tolist())))
    k2 = np.rint((la - lt) / _R).astype(np.int64)
    k3 = np.rint(lt / _R).astype(np.int64)
    for r, ks, cs in _groups(np, run_u, k3):
        _add_counts(pbs[r].thr, ks, cs)
    for r, ks, cs, vals, at in _groups(np, run_u, k2, a_u):  # ks: in order of their first line
        bins = pbs[r].bins
        new = [k for k in ks if k not in bins]
        if new:
            bins.update(zip(new, map(list, repeat((0, 0.0), len(new)))))
        olds = list(map(bins.__getitem__, ks))
        sums = np.array(list(map(itemgetter(1), olds)))
        np.add.at(sums, at, vals)  # one add at a time, in line order: each bin's sum as the reference adds it
        bins.update(zip(ks, map(list, zip(map(add, map(itemgetter(0), olds), cs), sums.tolist()))))
