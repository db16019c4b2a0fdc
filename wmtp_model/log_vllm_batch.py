"""A block's vLLM throughput and spec-metrics lines into `VllmWindows` and `SpecLines` a block at a time: what
feeding their records one by one (`wmtp.log_analysis.collect`: `windows.add`, `spec.add`) does, without a
record per line, with the float sums in line order (`reduce`: one add at a time, left to right) so the
results are the same to the last bit. `wmtp.log_blocks` reads the numbers of one skeleton's lines a column
at a time (from the block's bytes, `numbers_fixed`, or from their texts, `numbers`) and hands a block's groups to `VllmBatch.feed` once the windows kept for display are
filled and none awaits its spec line (`VllmBatch.settled`): from then on a window's pairing with its spec
line changes nothing, and every sum the results read is one a column gives. Otherwise (and in a block where
the per-line parsers also gave vLLM records) the groups become records (`records`), read as before."""

from __future__ import annotations

from collections import Counter
from functools import reduce
from itertools import chain, repeat
from math import log
from operator import add, gt, itemgetter, mul, truediv

from wmtp.log_batch import numpy
from wmtp.log_records import MAX_VALUE, VllmSpecLine, VllmThroughput, v1_drafts
from wmtp.logstats import BIN_WIDTH

THROUGHPUT, SPEC = ("v1t", "v0t"), ("v1s", "v0s")  # the kinds: V1 / V0 throughput, V1 / V0 spec metrics


def numbers(kind: str, v: list) -> list | None:
    """The numbers of vLLM lines of one skeleton (`v`: a column of texts per field, the prefix first), as
    `parse_throughput` / `parse_vllm` read them, a column per field: throughput (prompt, generation, running),
    V1 spec (mean AL, accepted, drafted, then a column per position), V0 spec (rate, k, accepted, drafted,
    emitted); None when one of them is out of those parsers' range (or past what int() reads: 4300 digits)."""
    try:
        return _numbers(kind, v)
    except ValueError:  # an integer of more than 4300 digits: the per-line parsers refuse the line
        return None


def _numbers(kind: str, v: list) -> list | None:
    if kind in THROUGHPUT:
        prompt, gen, running = list(map(float, v[-3])), list(map(float, v[-2])), list(map(int, v[-1]))
        if max(prompt) > MAX_VALUE or max(gen) > MAX_VALUE or max(running) > 1e7:
            return None
        return [prompt, gen, running]
    if kind == "v1s":
        mean_al, acc, dr = list(map(float, v[1])), list(map(int, v[2])), list(map(int, v[3]))
        k = v[4][0].count(", ") + 1  # one skeleton: as many positions in every line
        flat = list(map(float, ", ".join(v[4]).split(", ")))
        if max(mean_al) > MAX_VALUE or max(acc) > MAX_VALUE or max(dr) > MAX_VALUE or max(flat) > MAX_VALUE:
            return None
        return [mean_al, acc, dr, *(flat[i::k] for i in range(k))]
    rate, k, acc, dr, em = list(map(float, v[1])), *(list(map(int, c)) for c in v[2:6])
    if max(max(rate), max(k), max(acc), max(dr), max(em)) > MAX_VALUE:
        return None
    return [rate, k, acc, dr, em]


_INTS = {"v1t": (2,), "v0t": (2,), "v1s": (1, 2), "v0s": (1, 2, 3, 4)}  # columns `int` reads (`float` the others)
_PLANS: dict = {}  # a skeleton's id -> `_plan` of it (bounded)


def _plan(kind: str, spans: tuple, skel: bytes) -> tuple | None:
    """Where the digits of each number of a skeleton's lines sit: (their offsets in the line, then per number
    its columns among them, their weights (powers of 10) and its divisor), or None when the skeleton is
    not ASCII (offsets in its text are not offsets in its bytes) or a number has over 15 digits."""
    if not skel.isascii():
        return None
    np = numpy()
    nums = spans[2:5] if kind == "v1t" else spans[1:4] if kind in ("v0t", "v1s") else spans[1:6]
    pieces = [(sp.start, skel[sp]) for sp in nums]
    if kind == "v1s":  # the positions: numbers split by ", "
        at = spans[4].start
        for piece in skel[spans[4]].split(b", "):
            pieces.append((at, piece))
            at += len(piece) + 2
    offs, fields = [], []
    for start, shape in pieces:
        pos = [i for i, c in enumerate(shape) if c != 46]  # 46: "."
        if len(pos) > 15:
            return None
        point = len(shape) - 1 - shape.find(b".") if b"." in shape else 0
        fields.append((slice(len(offs), len(offs) + len(pos)), 10 ** np.arange(len(pos) - 1, -1, -1, dtype=np.int64),
                       10.0 ** point))
        offs += [start + i for i in pos]
    return np.array(offs, dtype=np.int64), fields


def numbers_fixed(kind: str, buf, at, spans: tuple, skel: bytes, key) -> list | bool | None:
    """`numbers` of lines of one skeleton (`skel`, its id `key`, its fields' `spans`) read from the block's
    bytes (`buf`, a uint8 array; `at`: the lines' offsets in it, an int64 array): every line of a skeleton
    holds its digits at the same offsets, and a number of m digits, k after the point, is m's integer /
    10**k (one correctly rounded division of two exact doubles: what `float` reads). None when the skeleton's
    numbers cannot be read so (`numbers` must read the texts); False when one is out of range."""
    plan = _PLANS.get(key, False)
    if plan is False:
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(kind, spans, skel)
    if plan is None:
        return None
    np = numpy()
    offs, fields = plan
    digits = buf[at[:, None] + offs]
    digits -= 48
    ints, cols = _INTS[kind], []
    for f, (cut, w, div) in enumerate(fields):
        m = digits[:, cut] @ w  # int64, below 10**15
        if f in ints:
            if int(m.max()) > (1e7 if kind in THROUGHPUT else MAX_VALUE):
                return False
            cols.append(m.tolist())
        else:
            x = m / div if div != 1.0 else m.astype(np.float64)
            if x.max() > MAX_VALUE:
                return False
            cols.append(x.tolist())
    return cols


def texts(g: list) -> list:
    """A pending group's fields' texts: `g` is `wmtp.log_blocks`' [kind, line numbers, columns, texts (None
    until asked), the prefixes' skeleton, `Lines`, rows, spans]; a column per field, the prefix first (a V0
    spec line's prefix as `parse_vllm` cuts it, before "peculative metrics")."""
    if g[3] is None:
        got = g[5].take(g[6])
        g[3] = [list(map(itemgetter(sp), got)) for sp in g[7]]
        if g[0] == "v0s":
            g[3][0] = list(map(add, g[3][0], repeat("S")))
    return g[3]


def records(kind: str, cols: list, lns: list, secs: list, pids: list, engines) -> list:
    """The records `wmtp.logs`' parsers make of lines `lns` (`numbers`' columns, the prefixes' seconds and
    pids, the engines' texts)."""
    if kind in THROUGHPUT:
        return list(map(VllmThroughput, lns, secs, pids, engines, *cols))
    if kind == "v1s":
        pos = list(map(list, zip(*cols[3:])))
        return list(map(VllmSpecLine, lns, *cols[:3], pos, secs, pids, repeat(len(cols) - 3), repeat(None),
                        repeat(None)))
    rate, k, acc, dr, em = cols
    return list(map(VllmSpecLine, lns, repeat(None), acc, dr, map(list, repeat((), len(lns))), secs, pids, k, em, rate))


def _merged(groups: list, n_cols: int) -> tuple:
    """The line numbers and the first `n_cols` columns of `groups` ((kind, lines, columns, ...), each in line
    order), merged into line order."""
    lns = list(chain.from_iterable(map(itemgetter(1), groups)))
    cols = [list(chain.from_iterable(g[2][c] for g in groups)) for c in range(n_cols)]
    if len(groups) > 1:
        order = sorted(range(len(lns)), key=lns.__getitem__)
        lns, cols = list(map(lns.__getitem__, order)), [list(map(c.__getitem__, order)) for c in cols]
    return lns, cols


class VllmBatch:
    """Feeds a block's vLLM lines to `windows` (`VllmWindows`) and `spec` (`SpecLines`)."""

    def __init__(self, windows, spec) -> None:
        self.windows, self.spec = windows, spec

    def settled(self) -> bool:
        """Whether a window's pairing with its spec line can no longer change anything (`feed` may run)."""
        return self.windows.settled()

    def feed(self, groups: list, last_of) -> None:
        """One block's groups (kind, line numbers, `numbers`' columns, pids or None): their lines as
        `collect` feeds their records, in line order. `last_of(group, rows)`: the records of those rows
        of a V0 spec group (the last line of each process: `SpecLines` keeps it)."""
        thr = [g for g in groups if g[0] in THROUGHPUT]
        if thr:
            self._throughput(thr)
        spec = [g for g in groups if g[0] in SPEC]
        if spec:
            self._spec(spec, last_of)

    def _throughput(self, groups: list) -> None:
        """`VllmWindows.add` of engine windows (never `Engines Aggregated`: those are parsed line by line):
        the windows kept for display are filled already, so only the bins and counts change."""
        w = self.windows
        lns, (prompt, gen, running) = _merged(groups, 3)
        used = [i for i, r, g in zip(range(len(lns)), running, gen) if r > 0 and g > 0]
        w.idle += len(lns) - len(used)
        if not used:
            return
        if len(used) < len(lns):
            lns, prompt, gen, running = ([c[i] for i in used] for c in (lns, prompt, gen, running))
        tpot = map(mul, map(truediv, running, gen), repeat(1e3))  # the per-line TPOT in ms, as `add` computes it
        bins = list(map(round, map(truediv, map(log, tpot), repeat(BIN_WIDTH))))
        _count(w.engine.by_batch, zip(running, bins))
        if any(x <= 0 for x in prompt):  # the windows that ran no prefill, as `add` keeps them
            _count(w.decode.by_batch, ((r, k) for r, k, x in zip(running, bins, prompt) if x <= 0))
        w.lines[0] = w.lines[0] or lns[0]
        w.lines[1] = lns[-1]
        w.prefill_windows += sum(map(gt, prompt, repeat(0.0)))

    def _spec(self, groups: list, last_of) -> None:
        """`SpecLines.add` of V1 and V0 spec lines: their shared counts and sums in line order, then V1's
        pooled drafts and per-position reach, V0's last line of each process."""
        s = self.spec
        acc_at, dr_at = ({"v1s": 1, "v0s": 2}[g[0]] for g in groups), ({"v1s": 2, "v0s": 3}[g[0]] for g in groups)
        lns = list(chain.from_iterable(map(itemgetter(1), groups)))
        acc = list(chain.from_iterable(g[2][a] for g, a in zip(groups, acc_at)))
        dr = list(chain.from_iterable(g[2][d] for g, d in zip(groups, dr_at)))
        if len(groups) > 1:
            order = sorted(range(len(lns)), key=lns.__getitem__)
            lns, acc, dr = (list(map(c.__getitem__, order)) for c in (lns, acc, dr))
        s.n += len(lns)
        s.first = s.first or lns[0]
        s.last = lns[-1]
        bad = [ln for ln, a, d in zip(lns, acc, dr) if a > d]  # (Accepted > Drafted: `SpecLines.contradicted`)
        if bad:
            s.contradicted = [s.contradicted[0] + len(bad), s.contradicted[1] or bad[0]]
        s.rate_acc = reduce(add, acc, s.rate_acc)
        s.rate_drafted = reduce(add, dr, s.rate_drafted)
        v1 = [g for g in groups if g[0] == "v1s"]
        if v1:
            _v1_pool(s, v1)
        v0 = [g for g in groups if g[0] == "v0s"]
        if v0:
            _v0_last(s, v0, last_of)


def _count(by_batch: dict, pairs) -> None:
    """`TpotBins.add` of (batch, bin) pairs, counted."""
    for (b, k), c in Counter(pairs).items():  # in order of first appearance
        d = by_batch.get(b)
        if d is None:
            d = by_batch[b] = {}
        d[k] = d.get(k, 0) + c


def _v1_pool(s, groups: list) -> None:
    """`SpecLines.add`'s V1 part: drafts per line (`v1_drafts`, else Accepted / (mean AL - 1), else the line
    adds nothing more), their sums and each k's reach, in line order."""
    k = len(groups[0][2]) - 3
    if all(len(g[2]) - 3 == k for g in groups):  # one k (the usual): a column per position
        _, (mean_al, acc, dr, *pos) = _merged(groups, 3 + k)
        if all(dr):
            drafts = list(map(v1_drafts, repeat(k), dr, acc, mean_al))
            s.acc = reduce(add, acc, s.acc)
            s.drafts = reduce(add, drafts, s.drafts)
            reach = s.reached.setdefault(k, [0.0] * (k + 1))
            reach[0] = reduce(add, drafts, reach[0])
            for i in range(k):
                reach[i + 1] = reduce(add, map(mul, pos[i], drafts), reach[i + 1])
            return
    rows = list(chain.from_iterable(zip(*g[2][:3], repeat(g[2][3:]), range(len(g[1]))) for g in groups))
    lns = list(chain.from_iterable(map(itemgetter(1), groups)))
    if len(groups) > 1:
        rows = list(map(rows.__getitem__, sorted(range(len(lns)), key=lns.__getitem__)))
    kept, drafts = [], []
    for row in rows:
        mean_al, acc, dr, pos, _ = row
        if dr:
            kept.append(row)
            drafts.append(v1_drafts(len(pos), dr, acc, mean_al))
        elif acc:  # Accepted > Drafted = 0: pooled as printed, no drafts (`SpecLines.add`)
            s.acc += acc
    if not kept:
        return
    s.acc = reduce(add, map(itemgetter(1), kept), s.acc)
    s.drafts = reduce(add, drafts, s.drafts)
    ks = list(map(len, map(itemgetter(3), kept)))
    for k in dict.fromkeys(ks):  # in order of first appearance, as `reached.setdefault` meets them
        mine = [i for i, kk in enumerate(ks) if kk == k] if len(set(ks)) > 1 else range(len(ks))
        d_k = list(map(drafts.__getitem__, mine))
        reach = s.reached.setdefault(k, [0.0] * (k + 1))
        reach[0] = reduce(add, d_k, reach[0])
        for i in range(k):
            rates = [kept[j][3][i][kept[j][4]] for j in mine]
            reach[i + 1] = reduce(add, map(mul, rates, d_k), reach[i + 1])


def _v0_last(s, groups: list, last_of) -> None:
    """`SpecLines.add`'s V0 part: the last line of each process kept, the processes in order of first appearance."""
    seen = sorted(chain.from_iterable(zip(g[1], g[3], repeat(j), range(len(g[1]))) for j, g in enumerate(groups)))
    last = {}
    for ln, pid, j, i in seen:
        last[pid] = (j, i)
    got = {}
    for j, g in enumerate(groups):
        rows = [i for jj, i in last.values() if jj == j]
        if rows:
            got.update(zip(((j, i) for i in rows), last_of(g, rows)))
    for pid, at in last.items():
        s.v0[pid] = got[at]
