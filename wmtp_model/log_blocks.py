"""`wmtp logs`'s reader: `wmtp.logs.stream`'s records, a block of lines at a time, with C doing the work
per line (split, translate, map, sort) and Python the work per kind of line.

Each line's skeleton (its digits made 0) is looked up once per block (`wmtp.log_layout.SKELETONS`):
every line of one skeleton matches the same way, so its kind and the places of its fields come from the
skeleton (numpy, imported on the first block, sorts the rows by kind). Kinds: SGLang decode lines in
`wmtp.logs._DECODE`'s common layouts and prefill lines, both with the `[date time DPx TPx] ` prefix (into
`SglangRuns` through `wmtp.log_batch`, a block at a time); vLLM V1 `Engine N:` throughput and `SpecDecoding
metrics:` lines, V0 `Avg prompt throughput` and `Speculative metrics:` lines, in their common layouts (their
numbers read a skeleton at a time, into `wmtp.log_vllm_batch.VllmBatch` or the records `wmtp.logs`' parsers
build); lines with none of the words `wmtp.logs`' parsers look for
(skipped, as `parse_other` skips them); decode lines `parse_sglang_general` gives up on whatever their numbers
(garbled); and every other line, or one whose numbers fail a parser's range checks, through `wmtp.logs`'
parsers (`_line`: what `stream` does with it). Numbers are plain digits (`_N`); a field `float` would read
differently is left to the parsers.
`wmtp.logs.stream` stays the reference: `tests/test_log_blocks.py` holds the two to the same output.
"""

from __future__ import annotations

import zlib
from itertools import accumulate, groupby, repeat
from operator import add, getitem, itemgetter, mul
from pathlib import Path
from typing import Iterator

from wmtp.errors import WmtpError
from wmtp.log_batch import Lines, Prefixes, decode_columns, decode_fixed, feed, numpy
from wmtp.log_prefix import DP_RE, PID_RE, TIME_RE, prefix_fields
from wmtp.log_records import DecodeLine, ParseStats, PrefillLine, VllmSpecLine, VllmThroughput, day_seconds
from wmtp.log_vllm_batch import SPEC, numbers, numbers_fixed, records, texts
from wmtp.log_input import open_text
from wmtp.log_layout import (DEC as _DEC, GARBLED as _GARBLED, KINDS as _KINDS, PARSE as _PARSE,
                              PRE as _PRE, RETRACTING, SKELETONS as _SKELETONS, SKIP as _SKIP, V0S as _V0S,
                              V0T as _V0T, V1S as _V1S, V1T as _V1T, VKINDS as _VKINDS, ZERO as _ZERO,
                              ZERO_UTF8 as _ZERO_UTF8)
from wmtp.logs import GENERAL, decode_fast, tally_line

BLOCK_CHARS = 1 << 21  # about 12,000 lines; the block's lists take about 10 MiB per MiB of it


class _Plans(dict):
    """A prefix's skeleton -> where `wmtp.log_prefix.prefix_fields`' regexes match in it (the same places in every
    prefix of that skeleton: they read digits only through `\\d`): the spans of `TIME_RE`'s groups 0-8, of
    the pid and of the DP rank. Bounded."""

    def __missing__(self, skel: str) -> tuple:
        if len(self) >= 4096:
            self.clear()
        m, p, d = TIME_RE.search(skel), PID_RE.search(skel), DP_RE.search(skel)
        v = self[skel] = (m and tuple(slice(*m.span(g)) if m.group(g) is not None else slice(0, 0) for g in range(9)),
                          p and slice(*p.span(1 if p.group(1) is not None else 2)), d and slice(*d.span(1)))
        return v


_PLANS = _Plans()


def _prefix_planned(pre: str, skel: str | None = None) -> tuple:
    """`wmtp.log_prefix.prefix_fields(pre)`, its regexes' matches taken from the prefix's skeleton (`_PLANS`; "" stands
    for a group that took no part: it tests them for truth)."""
    tm, p, d = _PLANS[pre.translate(_ZERO) if skel is None else skel]
    ts = secs = None
    if tm:
        ts = pre[tm[0]]
        secs = _SECS.get(ts)
        if secs is None:
            secs = _seconds(*map(pre.__getitem__, tm[1:]))
            if len(_SECS) >= 8192:
                _SECS.clear()
            _SECS[ts] = secs
    return ts, secs, None if p is None else pre[p], None if d is None else int(pre[d])


class _Days(dict):
    """(year, month, day) texts -> `wmtp.log_records.day_seconds` of them (bounded)."""

    def __missing__(self, key: tuple) -> int:
        if len(self) >= 4096:
            self.clear()
        v = self[key] = day_seconds(*key)
        return v


_DAYS = _Days()


def _prefix_columns(pres: list, skel: str) -> tuple:
    """The seconds and pids `_prefix_planned` gives for prefixes of one skeleton `skel`, a column at a time."""
    tm, p, _ = _PLANS[skel]
    n = len(pres)
    pids = list(map(itemgetter(p), pres)) if p is not None else [None] * n
    if not tm:
        return [None] * n, pids
    hh, mm, ss = (list(map(int, map(itemgetter(tm[g]), pres))) for g in (6, 7, 8))
    secs = list(map(add, map(add, map(mul, hh, repeat(3600)), map(mul, mm, repeat(60))), ss))
    if tm[1].stop or tm[4].stop:  # a group taking part holds digits: its span ends past 0
        y, mo, d = (map(itemgetter(tm[1]), pres), map(itemgetter(tm[2]), pres), map(itemgetter(tm[3]), pres)) \
            if tm[1].stop else (repeat("1970"), map(itemgetter(tm[4]), pres), map(itemgetter(tm[5]), pres))
        secs = list(map(add, secs, map(_DAYS.__getitem__, zip(y, mo, d))))
    return secs, pids


_SECS: dict = {}  # the time text `TIME_RE` matched -> its seconds (the same text, the same groups)


def _seconds(y: str, mo: str, dd: str, mo2: str, d2: str, hh: str, mm: str, ss: str) -> int:
    """`wmtp.log_prefix.prefix_fields`' seconds from `TIME_RE`'s groups."""
    secs = int(hh) * 3600 + int(mm) * 60 + int(ss)
    if y or mo2:
        secs += day_seconds(y or "1970", mo or mo2, dd or d2)
    return secs


_PREFIXES = Prefixes(_prefix_planned)


def _line(line: str, n: int, stats: ParseStats, out: list) -> None:
    """What `wmtp.logs.stream` does with one line, its records appended to `out` as (line number, record):
    a decode line `_decode_fast` reads as the tuple of DecodeLine's fields (what `stream` hands `decode`)."""
    d = line.find("Decode batch")
    if d >= 0:
        pre = line[:d]
        rec = GENERAL
        if "*" not in pre and "`" not in pre and "Prefill batch" not in pre:
            rec = decode_fast(line, d, _fields, n, *prefix_fields(pre))
        if rec is not GENERAL:
            stats.decode += 1
            out.append((n, rec))
            return
    for r in tally_line(line, n, stats):  # most lines: none (skipped)
        out.append((n, r))


def _fields(*a):
    return a


def _info(pre: str, skel: str) -> tuple:
    """`prefix_fields(pre)` (remembered; `skel`: the prefix's skeleton)."""
    info = _PREFIXES.get(pre)
    if info is None:
        if len(_PREFIXES) >= 8192:
            _PREFIXES.clear()
        info = _PREFIXES[pre] = _prefix_planned(pre, skel)
    return info


def _vllm_group(kind: int, rows: list, spans: tuple, lines: Lines, skels: list, base: int, out: list,
                pending: list, key) -> list:
    """One skeleton's (id `key`) vLLM lines: their numbers (`numbers_fixed`, else `numbers`) appended to
    `pending` as [kind, line numbers, columns, the fields' texts (None until asked), the prefixes' skeleton,
    lines, rows, spans], or when one of them is out of range their records to `out` as (line number,
    record), line by line; returns the rows whose numbers the parsers must see."""
    psk = skels[rows[0]][spans[0]].decode() + ("S" if kind == _V0S else "")  # one skeleton: one prefix skeleton
    lns = list(map(add, rows, repeat(base + 1)))
    vk = _VKINDS[kind]
    g = [vk, lns, None, None, psk, lines, rows, spans]
    cols = None if lines.split is not None else \
        numbers_fixed(vk, lines.buf, lines.starts[numpy().asarray(rows)], spans, skels[rows[0]], key)
    if cols is None:
        cols = numbers(vk, texts(g))
    if cols:
        g[2] = cols
        pending.append(g)
        return []
    bad, v = [], texts(g)
    for j, i in enumerate(rows):  # one of them out of range: line by line
        one = [[c[j]] for c in v]
        cols = numbers(vk, one)
        if cols is None:
            bad.append(i)
        else:
            out.append((lns[j], _vllm_records([vk, [lns[j]], cols, one, psk])[0]))
    return bad


def _vllm_records(g: list, rows: list | None = None) -> list:
    """The records of a pending group's lines (`rows` of them, or all)."""
    kind, lns, cols, v, psk = g[0], g[1], g[2], texts(g), g[4]
    if rows is not None:
        lns, cols, v = [lns[i] for i in rows], [[c[i] for i in rows] for c in cols], [[c[i] for i in rows] for c in v]
    secs, pids = _prefix_columns(v[0], psk)
    return records(kind, cols, lns, secs, pids, v[1] if kind == "v1t" else repeat(""))


def _vllm_feed(vllm, pending: list, out: list) -> None:
    """A block's vLLM groups to `vllm` (`VllmBatch`) when it may take them and no other vLLM record of the
    block came from the parsers; else their records to `out`."""
    if vllm is None or not vllm.settled() or any(type(r) is VllmThroughput or type(r) is VllmSpecLine for _, r in out):
        for g in pending:
            out += zip(g[1], _vllm_records(g))
        return
    groups = []
    for g in pending:
        p = _PLANS[g[4]][1] if g[0] == "v0s" else None  # a V0 spec line's pid: its process
        groups.append((*g[:3], None if g[0] != "v0s" else list(map(itemgetter(p), texts(g)[0])) if p is not None
                       else [None] * len(g[1]), g))
    vllm.feed(groups, lambda g, rows: _vllm_records(g[4], rows))


def _block(block: str, base: int, stats: ParseStats, runs, newline: bool = True, vllm=None) -> list:
    """One block of whole lines (newline-terminated; the last one not when `newline` is False), its first
    line being line `base + 1`: SGLang lines go to `runs`, vLLM lines to `vllm` (`VllmBatch`) when it
    takes them, the other records come back as (line number, record), in file order. Lines are classed by their skeleton's kind; SGLang decode numbers are read from
    the block's bytes a skeleton at a time (`decode_fixed`; else the fields sliced out with each line's
    skeleton's spans), prefixes once per run of equal ones, vLLM lines a skeleton at a time."""
    raw = block.encode()
    skels = raw.translate(_ZERO_UTF8).split(b"\n")
    if newline:
        skels.pop()
    n = len(skels)
    np = numpy()
    starts = np.zeros(n + 1, dtype=np.int64)  # each line's byte offset
    np.cumsum(np.fromiter(map(len, skels), np.int64, n) + 1, out=starts[1:])
    lines = Lines(block, raw, starts)
    descs = list(map(_SKELETONS.__getitem__, skels))
    codes = np.fromiter(map(itemgetter(3), descs), np.int64, n)
    rows_of, rows_np, skipped, garbled = _rows_by_kind(np, codes & 15)
    todo, out = rows_of.get(_PARSE, []), []
    vrows, pending = [i for k in (_V1T, _V1S, _V0T, _V0S) for i in rows_of.get(k, ())], []
    if vrows:
        ids = list(map(itemgetter(0), map(descs.__getitem__, vrows)))
        for _, g in groupby(sorted(range(len(vrows)), key=ids.__getitem__), key=ids.__getitem__):
            rows = list(map(vrows.__getitem__, g))
            key, kind, spans = descs[rows[0]][:3]
            todo += _vllm_group(kind, rows, spans, lines, skels, base, out, pending, key)
    if RETRACTING and _DEC in rows_of:
        _retracting(rows_of, rows_np, todo, descs, skels, lines)
    dec, dcols = _decode_rows(rows_of.get(_DEC, []), rows_np.get(_DEC), codes, lines, descs, skels)
    pre = _prefill_rows(rows_of.get(_PRE, []), rows_np.get(_PRE), codes, lines, descs)
    if dec[0] and dcols is None:  # a number out of range: the lines go to the parsers
        todo += dec[0]
        dec = [[] for _ in range(7)]
    spec = sum(1 for r in out if type(r[1]) is VllmSpecLine) + sum(len(g[1]) for g in pending if g[0] in SPEC)
    stats.vllm += spec
    stats.other += len(out) + sum(len(g[1]) for g in pending) - spec
    stats.decode += len(dec[0])
    stats.other += len(pre[0])
    stats.skipped += skipped
    stats.garbled += garbled
    extra = []
    if todo:
        todo.sort()
        got = []
        for i in todo:
            _line(lines[i] + "\n" if newline or i < n - 1 else lines[i], base + i + 1, stats, got)
        for ln, r in got:
            if type(r) is tuple:
                extra.append((ln, "d", r))
            elif type(r) is DecodeLine or type(r) is PrefillLine:
                extra.append((ln, "r", r))
            else:
                out.append((ln, r))
    if pending:
        _vllm_feed(vllm, pending, out)
    out.sort(key=itemgetter(0))  # stable: one line's records keep their order
    if dec[0] or pre[0] or extra:
        feed(runs, base, dec[0], pre[0], dcols or ([], [], [], [], []), dec[1], pre[1], _PREFIXES, extra)
    return out, n


def _retracting(rows_of: dict, rows_np: dict, todo: list, descs: list, skels: list, lines: Lines) -> None:
    """Moves the decode rows whose `#retracted-req` count is not 0 (their skeleton in RETRACTING) to `todo`."""
    rows = rows_of[_DEC]
    held = [i for i in rows if descs[i][0] in RETRACTING and "#retracted-req: 0," not in lines[i]]
    if held:
        keep = sorted(set(rows) - set(held))
        todo += held
        if keep:
            rows_of[_DEC], rows_np[_DEC] = keep, numpy().asarray(keep, dtype=rows_np[_DEC].dtype)
        else:
            del rows_of[_DEC], rows_np[_DEC]


def _rows_by_kind(np, kinds) -> tuple:
    """({kind: its rows, ascending} for the kinds to read, the same as arrays, lines skipped, lines garbled)."""
    cnt = np.bincount(kinds, minlength=len(_KINDS) + 3).tolist()
    order = np.argsort(kinds.astype(np.int8), kind="stable")
    cuts = [0, *accumulate(cnt)]
    rows_np = {j: order[cuts[j]:cuts[j + 1]] for j in range(len(cnt)) if cnt[j] and j != _SKIP and j != _GARBLED}
    return {j: r.tolist() for j, r in rows_np.items()}, rows_np, cnt[_SKIP], cnt[_GARBLED]


def _decode_rows(rows: list, rows_np, codes, lines: Lines, descs: list, skels: list) -> tuple:
    """([rows, prefixes, and the text of each field when read as text], `decode_columns`' numbers of
    them or None): the numbers read from the bytes a skeleton at a time (`decode_fixed`), or from the
    fields' texts when a skeleton's numbers are not plain enough for it."""
    if not rows:
        return [[] for _ in range(7)], None
    mine = codes[rows_np]
    dcols = decode_fixed(lines.buf, lines.starts, rows_np, descs, skels, mine >> 24)
    if dcols is False:
        dec = _columns(rows, lines, descs, 6)  # row, prefix, running, #token or #full token,
        return dec, decode_columns(*dec[2:])  # accept len, rate, throughput
    pfx = lines.prefixes(rows_np, mine >> 4 & 0xFFFFF) if dcols else None
    return ([rows, pfx] if pfx is not None else _columns(rows, lines, descs, 1)), dcols


def _prefill_rows(rows: list, rows_np, codes, lines: Lines, descs: list) -> list:
    """[rows, prefixes] of prefill lines."""
    if not rows:
        return [[], []]
    pfx = lines.prefixes(rows_np, codes[rows_np] >> 4 & 0xFFFFF)
    return [rows, pfx] if pfx is not None else _columns(rows, lines, descs, 1)


def _columns(rows: list, lines: Lines, descs: list, k: int) -> list:
    """The rows, then the first `k` fields of each of those lines (its skeleton's spans; "" where absent)."""
    got = lines.take(rows)
    spans = list(map(itemgetter(2), map(descs.__getitem__, rows)))
    return [rows] + [list(map(getitem, got, map(itemgetter(f), spans))) for f in range(k)]


def stream_blocks(path: str | Path, stats: ParseStats, runs, vllm=None) -> Iterator:
    """`wmtp.logs.stream(path, stats, decode=runs.decode)` read a block at a time: the SGLang decode and
    prefill lines go to `runs` (`SglangRuns`), the vLLM throughput and spec lines to `vllm` (a
    `wmtp.log_vllm_batch.VllmBatch`, when given, once it takes them), the other records are yielded, in file
    order (consume each block's records before the next: `vllm` takes a block's lines only when the
    records before them have reached its accumulators)."""
    p = Path(path)
    f = open_text(p)  # (a folder, a name too long to look up: one error there)
    base, tail = 0, ""
    try:
        while True:
            chunk = f.read(BLOCK_CHARS)
            if not chunk:
                break
            cut = chunk.rfind("\n") + 1
            if not cut:
                tail += chunk
                continue
            block = chunk if cut == len(chunk) else chunk[:cut]
            block, tail = tail + block if tail else block, chunk[cut:]
            out, n = _block(block, base, stats, runs, vllm=vllm)
            base += n
            for _, r in out:
                yield r
        if tail:
            out, n = _block(tail, base, stats, runs, newline=False, vllm=vllm)
            base += n
            for _, r in out:
                yield r
    except (OSError, EOFError, zlib.error) as e:
        raise WmtpError(f"{p}: cannot read past line {_lines_before_error(p)}: damaged or truncated file ({e})") from None
    except UnicodeError as e:
        raise WmtpError(f"{p}: undecodable text ({e})") from None
    finally:
        stats.lines = base
        f.close()


def _lines_before_error(p: Path) -> int:
    """The line `wmtp.logs.stream` had read when the same read error stopped it."""
    n = 0
    with open_text(p) as f:
        try:
            for n, _ in enumerate(f, 1):
                pass
        except (OSError, EOFError, zlib.error, UnicodeError):
            pass
    return n
