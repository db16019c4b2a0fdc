"""A block's SGLang decode and prefill lines into `SglangRuns`, a column at a time: what feeding them one by
one to `SglangRuns.decode` / `prefill` does, with the arithmetic done by C (map, compress, reduce, Counter)
and the float sums in line order (so the results are the same to the last bit). A block whose lines
switch runs, ranks or kinds (or whose lines the per-line parsers also fed) is fed line by line instead."""

from __future__ import annotations

import math
from collections import Counter
from functools import reduce
from itertools import accumulate, compress, repeat
from operator import add, and_, eq, is_not, itemgetter, lt, mul, ne, not_, or_, sub, truediv

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
    for i in pi:
        if i < first:
            runs.prefill(pid, dp)
    runs.decode(base + first + 1, None, run[0], tok[0], al[0], rate[0], thr[0], None, None, secs[0], pid, dp)
    if secs[0] is not None:
        d = list(map(sub, secs[1:], secs[:-1]))
        if d and (min(d) < -2 or max(d) > runs.gap_s):
            feed_scalar(runs, _scalar_events(base, di, pi, dcols, pfx_d, pfx_p, info, skip=first))
            return
        runs.last_t = secs[-1]
    if pi:
        is_p = [0] * (di[-1] + 1)
        for i in pi:
            if i <= di[-1]:
                is_p[i] = 1
        cp = list(accumulate(is_p))
        ap = list(map(bool, map(sub, map(cp.__getitem__, di[1:]), map(cp.__getitem__, di[:-1]))))
    else:
        ap = None
    _vector(runs.cur, [base + i + 1 for i in di[1:]], run, tok, al, rate, thr, ap)
    st = runs.state[(pid, dp)]
    st[0], st[1], st[2] = False, tok[-1], thr[-1]
    if pi and pi[-1] > di[-1]:
        runs.prefill(pid, dp)


def _vector(cur, ln: list, run: list, tok: list, al, rate, thr: list, ap) -> None:
    """`SglangRuns.decode` on decode lines 1.. of the columns (line 0 fed already, same run and rank, no
    split among them); `ap`: whether a prefill line of the rank came before each (None: none did)."""
    m = len(ln)
    run1, tok1, thr1, al1 = run[1:], tok[1:], thr[1:], al[1:]
    cur.lines += m
    cur.last_line = ln[-1]
    have = list(filter(None, al1))  # an accept len is >= 1
    cur.al[2] = reduce(add, have, cur.al[2])
    cur.al[3] += len(have)
    if rate[1:].count(None) < m:
        have = list(compress(rate[1:], map(is_not, rate[1:], repeat(None))))
        cur.rate[0] = reduce(add, have, cur.rate[0])
        cur.rate[1] += len(have)
    used = None  # all lines: no zero tokens or batch, no stall
    if 0 in tok1 or 0 in run1 or 0.0 in thr1 or any(map(eq, tok1, tok[:-1])):
        nz = list(map(bool, map(min, tok1, run1)))  # tokens == 0 or running <= 0: not used, not a stall
        stall = list(map(and_, nz, map(or_, map(eq, thr1, repeat(0.0)), map(
            and_, map(lt, thr1, map(mul, repeat(0.5), thr[:-1])), map(eq, tok1, tok[:-1])))))
        n_stall = sum(stall)
        if n_stall:
            cur.stalls += n_stall
            room = MAX_ROWS - len(cur.stall_lines)
            if room > 0:
                cur.stall_lines.extend(list(compress(ln, stall))[:room])
        used = list(map(and_, nz, map(not_, stall)))
    if used is None:
        runU, thrU, apU, alU = run1, thr1, ap, al1
    else:
        runU, thrU, alU = list(compress(run1, used)), list(compress(thr1, used)), list(compress(al1, used))
        apU = None if ap is None else list(compress(ap, used))
    if not runU:
        return
    ltU = list(map(_log, thrU))
    pbs = cur.per_batch
    sizes = set(runU)
    for r in sizes:
        if r not in pbs:
            pbs[r] = PerBatch(_log(r * 1e3))
    if len(sizes) == 1:
        r, = sizes
        k1 = list(map(round, map(truediv, map(sub, repeat(pbs[r].log_ms), ltU), repeat(_R))))
        parts = [(False, k1)] if not apU or not any(apU) else \
            [(False, compress(k1, map(not_, apU))), (True, compress(k1, apU))]
        for a, ks in parts:
            bb = (cur.after_prefill if a else cur.tpot).by_batch
            b = bb.get(r)
            if b is None:
                b = bb[r] = {}
            for k, c in Counter(ks).items():
                b[k] = b.get(k, 0) + c
    else:
        lms = {r: pbs[r].log_ms for r in sizes}
        k1 = list(map(round, map(truediv, map(sub, map(lms.__getitem__, runU), ltU), repeat(_R))))
        for (a, r, k), c in Counter(zip(apU or repeat(False), runU, k1)).items():
            bb = (cur.after_prefill if a else cur.tpot).by_batch
            b = bb.get(r)
            if b is None:
                b = bb[r] = {}
            b[k] = b.get(k, 0) + c
    if apU:
        cur.dropped += sum(apU)
        have = list(filter(None, compress(alU, map(not_, apU))))
    else:
        have = list(filter(None, alU))
    cur.al[0] = reduce(add, have, cur.al[0])
    cur.al[1] += len(have)
    _t_iter(pbs, runU, ltU, alU)


def _t_iter(pbs: dict, runU: list, ltU: list, alU) -> None:
    """The artifact's T_iter and throughput bins of the used lines (after the first 2 at each batch size)."""
    keep, sizes = None, set(runU)
    if any(pbs[r].seen < 2 for r in sizes):
        keep = []
        for r in runU:
            pb = pbs[r]
            pb.seen += 1
            keep.append(pb.seen > 2)
    elif len(sizes) == 1:
        pbs[runU[0]].seen += len(runU)
    else:
        for r, c in Counter(runU).items():
            pbs[r].seen += c
    if keep is not None:
        runU, ltU = list(compress(runU, keep)), list(compress(ltU, keep))
        alU = list(compress(alU, keep))
    if not runU:
        return
    if not all(alU):
        alU = list(map(_ONE.get, alU, alU))  # no accept len: 1
    las = map(_LA.__getitem__, alU)
    k2 = list(map(round, map(truediv, map(sub, las, ltU), repeat(_R))))
    k3 = map(round, map(truediv, ltU, repeat(_R)))
    if len(sizes) == 1 and keep is None:
        pb = pbs[runU[0]]
        _sum_bins(pb.bins, k2, alU)
        th = pb.thr
        for k, c in Counter(k3).items():
            th[k] = th.get(k, 0) + c
        return
    for r, k, a in zip(runU, k2, alU):
        bins = pbs[r].bins
        b = bins.get(k)
        if b is None:
            b = bins[k] = [0, 0.0]
        b[0] += 1
        b[1] += a
    for (r, k), c in Counter(zip(runU, k3)).items():
        th = pbs[r].thr
        th[k] = th.get(k, 0) + c


def _sum_bins(bins: dict, ks: list, vals: list) -> None:
    """bins[k] = [count, sum of vals] over (k, val) pairs: each bin's sum added up in line order (the lines
    of a bin gathered by a stable sort), new bins inserted in order of their first line."""
    counts = Counter(ks)  # keys in order of first occurrence
    for k in counts:
        if k not in bins:
            bins[k] = [0, 0.0]
    perm = sorted(range(len(ks)), key=ks.__getitem__)
    vals = list(map(vals.__getitem__, perm))
    at = 0
    for k in sorted(counts):
        c = counts[k]
        b = bins[k]
        b[0] += c
        b[1] = reduce(add, vals[at:at + c], b[1])
        at += c
