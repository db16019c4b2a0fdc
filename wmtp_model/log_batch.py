"""A block's SGLang decode and prefill lines into `SglangRuns`, a column at a time: what feeding them one by
one to `SglangRuns.decode` / `prefill` does, with the arithmetic done by C (map, compress, reduce, numpy:
imported on first use, `numpy()`) and the float sums in line order (so the results are the same to the last
bit). A block whose lines switch runs, ranks or kinds (or whose lines the per-line parsers also fed) is fed
line by line instead. The decode lines' numbers are read from the block's bytes a skeleton at a time
(`decode_fixed`: every line of a skeleton holds its digits at the same offsets), exactly as `float` reads
them; `Lines` slices a block's lines and prefixes out of its text only when asked."""

from __future__ import annotations

import math
from bisect import bisect_left
from functools import reduce
from itertools import chain, compress, repeat
from operator import add, is_not, itemgetter, ne, sub
from typing import Iterator

from wmtp.acceptance import MAX_DEPTH
from wmtp.log_records import MAX_VALUE
from wmtp.logstats import BIN_WIDTH as _R, MAX_ROWS, PerBatch


class Prefixes(dict):
    """prefix text -> `wmtp.log_prefix.prefix_fields` of it (bounded)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, pre: str):
        if len(self) >= 8192:
            self.clear()
        v = self[pre] = self.fn(pre)
        return v


class Lines:
    """A block's lines, sliced out of its text when asked (`raw`: the text's UTF-8 bytes; `starts`: each
    line's offset in them, then one past the end plus 1): an ASCII text's offsets are its bytes' offsets;
    other text is split."""

    def __init__(self, text: str, raw: bytes, starts):
        self.text, self.starts, self.buf = text, starts, numpy().frombuffer(raw, dtype=numpy().uint8)
        self.split = None if text.isascii() else text.split("\n")

    def take(self, rows: list) -> list:
        """The lines `rows`, as a list."""
        if self.split is not None:
            return list(map(self.split.__getitem__, rows))
        np = numpy()
        r = np.array(rows, dtype=np.int64)
        return list(map(self.text.__getitem__, map(slice, self.starts[r].tolist(), (self.starts[r + 1] - 1).tolist())))

    def __getitem__(self, i: int) -> str:
        return self.split[i] if self.split is not None else self.text[self.starts[i]:self.starts[i + 1] - 1]

    def prefixes(self, rows: list, plen) -> list | None:
        """The first `plen` characters (an int array, one per row) of lines `rows`, each run of rows with
        the same ones sliced once (one str object for the run; the same length and bytes: the same text),
        or None for a text that is not ASCII."""
        if self.split is not None:
            return None
        np = numpy()
        at = self.starts[np.asarray(rows)]
        width = -(-int(plen.max()) // 8) * 8  # the prefixes' bytes, compared 8 at a time
        if int(at.max()) + width > self.buf.size:
            return None
        win = np.lib.stride_tricks.as_strided(self.buf, shape=(self.buf.size - width + 1, width), strides=(1, 1))
        head = win[at].view(np.uint64)  # more than a line's bytes: stricter, still right
        same = (head[1:] == head[:-1]).all(axis=1) & (plen[1:] == plen[:-1])
        cuts = [0, *(np.flatnonzero(~same) + 1).tolist(), len(rows)]
        firsts = at[cuts[:-1]]
        texts = map(self.text.__getitem__, map(slice, firsts.tolist(), (firsts + plen[cuts[:-1]]).tolist()))
        return list(chain.from_iterable(map(repeat, texts, map(sub, cuts[1:], cuts[:-1]))))


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


# (an accept len above MAX_DEPTH sends the lines to the per-line parsers: they refuse it)
_RUN, _AL, _RATE = _Checked(0, 1e7, to_int=True), _Checked(1, MAX_DEPTH), _Checked(0, MAX_VALUE)


def decode_columns(run_t: list, tok_t: list, al_t: list, rate_t: list, thr_t: list):
    """The checked numbers of decode lines from their texts ("" where absent), what `wmtp.logs._decode_fast`
    reads: (running, tokens, accept len or None, accept rate or None, throughput), or None when one of
    them fails `_decode_fast`'s range checks or the lines mix speculative and dense (the lines then go to
    the per-line parsers)."""
    n = len(run_t)
    dense_al, dense_rate = al_t.count(""), rate_t.count("")
    if any("_" in "".join(c) for c in (run_t, tok_t, al_t, rate_t, thr_t)):
        return None  # `1_000`: float() and int() read it, the per-line parsers do not
    try:
        run = list(map(_RUN.__getitem__, run_t))
        al = [None] * n if dense_al == n else list(map(_AL.__getitem__, al_t))
        rate = [None] * n if dense_rate == n else list(map(_RATE.__getitem__, rate_t))
    except ValueError:
        return None
    try:
        tok = list(map(int, tok_t))  # int(float(text)) for a plain integer below 2**53
    except ValueError:
        try:
            tok = list(map(int, map(float, tok_t)))
        except OverflowError:  # a count past any float (400 digits): the per-line parsers refuse it
            return None
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
    run, tok, al, rate, thr = dcols[:5]
    ev = [(base + i + 1, "d", (base + i + 1, None, run[j], tok[j], al[j], rate[j], thr[j], None, None,
                                *info[pfx_d[j]][1:])) for j, i in enumerate(di) if i > skip]
    return ev + [(base + i + 1, "p", info[pfx_p[j]][2:4]) for j, i in enumerate(pi) if i > skip]


def feed(runs, base: int, di: list, pi: list, dcols, pfx_d: list, pfx_p: list, info, extra: list) -> None:
    """Decode rows `di` (columns `dcols`, prefixes `pfx_d`) and prefill rows `pi` of one block whose first
    line is `base + 1`, with `extra`: (line number, kind, payload) the per-line parsers gave."""
    run, tok, al, rate, thr = dcols[:5]  # al, rate: None where the line has none; then maybe their arrays
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
        before = numpy().searchsorted(pi, dcols[5][4] if len(dcols) > 5 else di)
        ap = before[1:] > before[:-1]
    _vector(runs.cur, base + 1, di, dcols, ap)
    st = runs.state[(pid, dp)]
    st[0], st[1], st[2] = False, tok[-1], thr[-1]
    if pi and pi[-1] > di[-1]:
        runs.prefill(pid, dp)


def numpy():
    """numpy, imported on first use: `wmtp predict` and the rest of the core stay free of it."""
    import numpy as np

    return np


def _vector(cur, at: int, di: list, dcols: tuple, ap) -> None:
    """`SglangRuns.decode` on decode lines 1.. of the columns (line 0 fed already, same run and rank, no
    split among them; line numbers `at` + `di`); `ap`: whether a prefill line of the rank came before each
    (a numpy bool array; None: none did); `dcols`: `decode_columns`' lists, maybe with `decode_fixed`'s
    arrays of running, tokens, accept len (nan: none), throughput and rows. The per-line work in numpy; float
    sums in line order (`reduce`, `numpy.add.at`: one add at a time)."""
    np = numpy()
    run, tok, al, rate, thr = dcols[:5]
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
    if len(dcols) > 5:
        r1, t, al_a, h, _ = dcols[5]
        r1 = r1[1:]
    else:
        t, h, al_a = np.array(tok, dtype=np.int64), np.array(thr, dtype=np.float64), None
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
    a_u = None if al.count(None) == len(al) else \
        (np.array(al[1:], dtype=np.float64) if al_a is None else al_a[1:])[used]  # None: nan
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


def _shape(shape: bytes) -> tuple | None:
    """A number field's skeleton (`0` a digit) -> (its digits' offsets, digits after the point), or None
    when `decode_fixed` cannot read it exactly (over 15 digits: the integer might not be a double)."""
    pos = [i for i, c in enumerate(shape) if c != 46]  # 46: "."
    if len(pos) > 15:
        return None
    return pos, len(shape) - 1 - shape.find(b".") if b"." in shape else 0


def _plan(spans: tuple, skel: bytes) -> tuple | None:
    """How `_group_numbers` reads the lines of one skeleton: (the digits' offsets, then for each field
    present: its index, its columns among the digits, their weights (powers of 10), its divisor), whether
    tokens have a point; None when the skeleton is not ASCII or a field too long."""
    np = numpy()
    if not skel.isascii():
        return None
    offs, fields, tok_point = [], [], False
    for f, sp in enumerate(spans[1:6]):
        if sp.stop == 0:  # absent
            continue
        got = _shape(skel[sp])
        if got is None:
            return None
        pos, k = got
        fields.append((f, slice(len(offs), len(offs) + len(pos)),
                       10 ** np.arange(len(pos) - 1, -1, -1, dtype=np.int64), 10.0 ** k))
        offs += [sp.start + i for i in pos]
        tok_point = tok_point or (f == 1 and k > 0)
    return np.array(offs, dtype=np.int64), fields, tok_point


_PLANS: dict = {}  # a decode skeleton's id -> `_plan` of it (bounded)


def _group_numbers(np, raw, at, plan: tuple, cols, sel) -> None:
    """The running, tokens, accept len, accept rate and throughput of lines `sel` of one skeleton (`at`:
    their byte offsets in `raw`, a uint8 array; `plan`: `_plan` of the skeleton) into `cols` (5 rows of
    float64; fields the skeleton lacks are left as they are). A field of m digits, k after the point, is
    m's integer / 10**k: one correctly rounded division of two exact doubles, what `float` reads."""
    offs, fields, _ = plan
    digits = raw[at[:, None] + offs]
    digits -= 48
    for f, cut, w, div in fields:
        m = digits[:, cut] @ w  # int64, below 10**15
        cols[f, sel] = m / div if div != 1.0 else m


def decode_fixed(raw, starts, rows: list, descs: list, skels: list, ids=None):
    """`decode_columns` of decode lines `rows` of a block, read a skeleton at a time from the block's
    UTF-8 bytes `raw` (bytes or a uint8 array; `starts`: each line's byte offset, an int64 array; `descs`,
    `skels`: each line's skeleton's (id, kind, field spans) and skeleton; `ids`: the rows' skeletons' ids,
    an array, if known): the same lists, or None when `decode_columns` gives None, or False when a
    skeleton's numbers are not plain enough here (then `decode_columns` must)."""
    np = numpy()
    n = len(rows)
    buf = np.frombuffer(raw, dtype=np.uint8) if type(raw) is bytes else raw
    if ids is None:
        ids = np.fromiter(map(itemgetter(0), map(descs.__getitem__, rows)), np.int64, n)
    order = np.argsort(ids, kind="stable")
    cuts = [0, *(np.flatnonzero(ids[order][1:] != ids[order][:-1]) + 1).tolist(), n]
    rows_a = np.asarray(rows)
    at_all = starts[rows_a]
    cols = np.full((5, n), np.nan)
    tok_point = False
    for a, b in zip(cuts[:-1], cuts[1:]):
        sel = order[a:b]
        r0 = rows[int(sel[0])]
        d = descs[r0]
        plan = _PLANS.get(d[0], False)
        if plan is False:
            if len(_PLANS) >= 4096:
                _PLANS.clear()
            plan = _PLANS[d[0]] = _plan(d[2], skels[r0])
        if plan is None:
            return False
        _group_numbers(np, buf, at_all[sel], plan, cols, sel)
        tok_point = tok_point or plan[2]
    return _checked(np, cols, tok_point, rows_a)


def _checked(np, cols, tok_point: bool, rows):
    """`decode_columns`' range checks and lists from the columns (nan: absent), then the arrays of running,
    tokens, accept len, throughput and the rows."""
    run, tok, al, rate, thr = cols
    n = run.size
    has_al, has_rate = ~np.isnan(al), ~np.isnan(rate)
    if not ((run >= 0) & (run <= 1e7)).all() or not ((al[has_al] >= 1) & (al[has_al] <= MAX_DEPTH)).all() or \
            not ((rate[has_rate] >= 0) & (rate[has_rate] <= MAX_VALUE)).all():
        return None
    toks = np.trunc(tok) if tok_point else tok
    if toks.max() > MAX_VALUE or thr.max() > MAX_VALUE:
        return None
    n_al, n_rate = int(np.count_nonzero(has_al)), int(np.count_nonzero(has_rate))
    if n_al < n and n_rate < n and (n_al or n_rate) and not (has_al | has_rate).all() and (has_al | has_rate).any():
        return None  # speculative and dense lines in one block
    run, toks = run.astype(np.int64), toks.astype(np.int64)
    return (run.tolist(), toks.tolist(), _or_none(np, al, has_al, n_al), _or_none(np, rate, has_rate, n_rate),
            thr.tolist(), (run, toks, al, thr, rows))


def _or_none(np, col, has, k: int) -> list:
    if not k:
        return [None] * col.size
    out = col.tolist()
    if k < col.size:
        for i in np.flatnonzero(~has).tolist():
            out[i] = None
    return out
