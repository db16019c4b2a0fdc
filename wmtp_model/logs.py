"""Serving logs and summaries as engines print them, streamed one line at a time into typed records.

Line formats (as printed by the engines; examples in tests/data/real/, one file per public source):
  SGLang  `[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13,
           accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0`; also
          `Decode batch,` / `Decode batch [N],`, `#full token`, `accept rate`, `#retracted-req`, prefixes
          `INFO pid [DPx TPx EPx file:line]`, `(SGLangEngine pid=N)`, time-only `[04:40:55 TP0]`;
          `Prefill batch` lines (the next decode line of that rank counts idle time).
  vLLM    V1 `SpecDecoding metrics: Mean acceptance length: 2.43, ..., Accepted: 352 tokens, Drafted: 728
          tokens, Per-position acceptance rate: 0.736, 0.477, 0.242` (and the older `Draft acceptance rate`
          first); V0 `Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, Number of
          speculative tokens: 3, Number of accepted tokens: ..., Number of draft tokens: ..., Number of
          emitted tokens: ...` (cumulative); throughput `Avg prompt throughput: X tokens/s, Avg generation
          throughput: Y tokens/s, Running: N reqs` (V0, V1 `Engine 000:`, `N Engines Aggregated:`).
  Summaries (`Value` records, one per number): `vllm bench serve` / `sglang.bench_serving` blocks (`Mean TPOT (ms):`,
          `Accept length:`, `Position j:`), `sglang.bench_one_batch`'s `Decode.  median latency: X s`, vLLM's
          offline spec-decode output, llama.cpp (wmtp.log_llama), bench result JSON keys (`mean_tpot_ms`,
          `spec_decode_acceptance_length`, read from a cut line too), results tables, Prometheus samples
          (wmtp.log_summary) and per-request `meta_info` fields wherever they appear (JSON over several lines,
          JSONL, a Python dict repr): recognised by content, not by file name.
Markdown emphasis and backticks, diff `+` and quote `>` prefixes and log collectors' prefixes (kubectl, docker,
journald, line numbers) are decoration. A line that starts like a known kind but lacks its numbers, or carries
NaN, infinite or absurd values, is garbled. Files may be gzip-compressed (recognised by their magic bytes).
"""

from __future__ import annotations

import math
import re
import zlib
from pathlib import Path
from typing import Iterator

from wmtp.acceptance import MAX_DEPTH
from wmtp.errors import WmtpError
from wmtp.fileio import INT_DIGITS
from wmtp.log_engines import parse_bench_al, parse_tgi, parse_trt_iter, parse_trt_stats
from wmtp.log_input import open_text
from wmtp.log_joined import split_joined
from wmtp.log_llama import SKIP, parse_llama, number_list as _number_list
from wmtp.log_prefix import prefix_fields as _prefix
from wmtp.log_aiperf import parse_aiperf
from wmtp.log_tables import parse_mlc_metric, parse_table_line
from wmtp.log_summary import (PROM_OTHER, parse_label, parse_prometheus, parse_spec_k, parse_step,
                               parse_lmdeploy, parse_table_row, strip_collector)
from wmtp.log_records import (MAX_VALUE, CheckedField, DecodeLine, Event, ParseStats, PrefillLine, Refused,  # noqa: F401
                              Value, VllmSpecLine, VllmThroughput, after, finite, nan_rates, num,
                              rates_list, strict_float, ungroup, vllm_field_name, whole_num)

_MAX, _num, _finite, _after, _flt = MAX_VALUE, num, finite, after, strict_float  # the parsers' short local names

_ENGINE = re.compile(r"Engine (\d+):|(\d+) Engines Aggregated")
_META = re.compile(r"""['"]?(spec_verify_ct|completion_tokens|spec_accept_length|spec_num_correct_drafts|"""
                   r"""spec_accept_token_num|spec_correct_drafts_histogram|spec_accept_histogram|"""
                   r"""mean_acceptance_length|num_spec_steps|num_accepted_draft_tokens|acceptance_histogram|"""
                   r"""predicted_per_token_ms|predicted_n|draft_n_accepted|draft_n|draft_rounds|mean_tpot_ms|accept_length|"""
                   r"""avg_per_output_token_latency|spec_decode_acceptance_length|spec_decode_num_drafts|"""
                   r"""spec_decode_accepted_tokens|spec_decode_per_position_acceptance_rates|e2e_latency|mean_itl_ms|"""
                   r"""avg_tpot_ms|mean_avg_decoded_tokens_per_iter|avg_decoded_tokens_per_iter|"""  # (TensorRT-LLM's)
                   r"""draft_count|accept_count)"""  # (MLC-LLM's engine metrics: its `spec_decode` object)
                   r"""['"]?\s*:\s*"""
                   r"""(\[[^\]]*\]|\{\s*"\d[^{}]*\}|[-+0-9.eE]+|nan|NaN|Infinity)""")  # ({"j": n}: a sparse histogram)


def _opt(v: str | None) -> float | None:
    """An optional field: None when absent, NaN when present but not a finite, sane number."""
    if v is None:
        return None
    x = None if isinstance(v, str) and "_" in v else _num(v)
    return x if x is not None and 0 <= x <= _MAX else math.nan


_PASTE = str.maketrans({"\t": " ", "\u2502": "|", "\u2503": "|"})
_SGL_KEYS = ("#token: ", "#full token: ", "accept len: ", "accept rate: ", "#retracted-req: ", "#queue-req: ",
             "cuda graph: ")
# The common decode layouts (dense, speculative, hybrid `#full token`/`mamba`, 2026's `#cached-token` after
# `#running-req`: scheduler_components/metrics_reporter.py), matched from `Decode batch`
# to the end of the line in one regex call: the fast path. A value here holds no `,` and no `:`, so every key
# the general path looks for occurs only where this pattern puts it, and both read the same text for it (a
# value with markdown fails its conversion; the prefix must be free of it: the general path strips it).
_V, _U = r"([^,:]*)", r"[^,:]*"
_DECODE = re.compile(
    rf"Decode batch(?:\.|,| \[\d+\],) #running-req: {_V}, (?:#cached-token: {_U}, )?(?:#token: {_V}, token usage: {_U}|"
    rf"#full token: {_V}, full token usage: {_U}(?:, mamba num: {_U}, mamba usage: {_U})?), "
    rf"(?:accept len: {_V}, )?(?:accept rate: {_V}, )?(?:cuda graph: (True|False), )?"
    rf"gen throughput \(token/s\): {_V}(?:, #queue-req: {_V})?,? ?\s*$")


# `parse_sglang`'s checks and conversions of each field, remembered by text
# (an accept len above MAX_DEPTH leaves the fast path: the general one refuses the line)
_RUNNING, _AL, _RATE = CheckedField(0, 1e7, to_int=True), CheckedField(1, MAX_DEPTH), CheckedField(0, _MAX)
_QUEUE = CheckedField(0, _MAX, to_int=True, else_none=True)
_CUDA_GRAPH = {None: None, "True": True, "False": False}
_GENERAL = object()  # `_decode_fast`'s answer for a line it leaves to the general path


def _decode_fast(line: str, d: int, make, n: int, ts: str | None, secs: float | None, pid: str | None, dp: int | None):
    """make(DecodeLine's fields) for a decode line in a common layout whose numbers all pass
    `parse_sglang`'s checks, or _GENERAL: the general path decides."""
    m = _DECODE.match(line, d)
    if m is None:
        return _GENERAL
    running, tokens, full, al, rate, cg, thr, queue = m.groups()
    try:
        running, thr, tokens = _RUNNING[running], _flt(thr), _flt(full if tokens is None else tokens)
        al = None if al is None else _AL[al]
        rate = None if rate is None else _RATE[rate]
        queue = None if queue is None else _QUEUE[queue]
    except ValueError:
        return _GENERAL
    if not (0 <= thr <= _MAX and 0 <= tokens <= _MAX):
        return _GENERAL
    return make(n, ts, running, int(tokens), al, rate, thr, _CUDA_GRAPH[cg], queue, secs, pid, dp)


def parse_sglang(line: str, line_no: int) -> DecodeLine | Refused | None:
    """One scheduler decode line, or None when it lost #running-req or gen throughput or holds nonsense
    (the common layouts in one regex call, `_decode_fast`; any other by string finds)."""
    d = line.find("Decode batch")
    pre = line[:d]
    rec = _GENERAL
    if d >= 0 and "*" not in pre and "`" not in pre:
        rec = _decode_fast(line, d, DecodeLine, line_no, *_prefix(pre))
    return _parse_sglang_general(line, line_no) if rec is _GENERAL else rec


def _parse_sglang_general(line: str, line_no: int) -> DecodeLine | Refused | None:
    """`parse_sglang` for any layout: keys found by string finds, in any order, markdown stripped. An accept len
    above MAX_DEPTH is `Refused`: SGLang prints accepted tokens (bonus included) / verify steps, at most the
    draft's `speculative_num_draft_tokens` (scheduler metrics), and no draft wmtp models is deeper."""
    if "*" in line or "`" in line:  # markdown emphasis / code around keys or values
        line = line.replace("*", "").replace("`", "")
    if "\t" in line:  # a paste whose spaces became tabs
        line = line.replace("\t", " ")
    d = line.find("Decode batch")
    k = line.find("#running-req: ", max(d, 0))
    if k < 0:
        return None
    d = d if d >= 0 else k  # (SGLang v0.1, 2024: `[gpu_id=0] #running-req: ...`, no `Decode batch`)
    body = line[k + 14:]
    j = body.find(", ")  # fields end at `, ` (a comma inside a number groups its thousands)
    i = body.find("gen throughput (token/s): ")
    if i < 0:
        return None
    i += 26
    e = body.find(", ", i)
    try:
        running = _flt(ungroup(body[:j] if j >= 0 else body))
        thr = _flt(ungroup(body[i:e] if e >= 0 else body[i:]))
    except ValueError:
        return None
    if not (0 <= running <= 1e7 and 0 <= thr <= _MAX):
        return None
    v = []  # the optional fields, in _SGL_KEYS order (`accept rate` also matches a paste that lost columns)
    for key in _SGL_KEYS:
        a = body.find(key)
        if a < 0:
            v.append(None)
        else:
            a += len(key)
            b = body.find(", ", a)
            v.append(body[a:b] if b >= 0 else body[a:])
    tokens, full, al, rate, retr, queue, cg = v
    if tokens is None:
        tokens = full
    try:
        tokens = None if tokens is None else _flt(tokens)
        al = None if al is None else _flt(al)
        rate = None if rate is None else _flt(rate)
        retr = None if retr is None else _flt(retr)
        queue = None if queue is None else _flt(queue)
    except ValueError:
        tokens, al, rate, retr, queue = _opt(tokens), _opt(al), _opt(rate), _opt(retr), _opt(queue)
    if ((tokens is not None and not 0 <= tokens <= _MAX) or (al is not None and not 1 <= al <= _MAX)
            or (rate is not None and not 0 <= rate <= _MAX) or (retr is not None and not 0 <= retr <= _MAX)):
        return None
    if al is not None and al > MAX_DEPTH:
        return Refused(line_no, f"SGLang accept len {al:g} is above {MAX_DEPTH}: accepted tokens per verify step "
                       f"(bonus included) are at most the draft's num_draft_tokens, and no draft wmtp models is "
                       f"deeper than d = {MAX_DEPTH}")
    ts, secs, pid, dp = _prefix(line[:d])
    return DecodeLine(line_no, ts, int(running), None if tokens is None else int(tokens), al, rate, thr,
                      None if cg is None else cg.strip() == "True",
                      None if queue is None or not 0 <= queue <= _MAX else int(queue), secs, pid, dp,
                      None if retr is None else int(retr))


# what the block reader (`wmtp.log_blocks`) shares with the per-line one
GENERAL, decode_fast, parse_sglang_general = _GENERAL, _decode_fast, _parse_sglang_general


_VLLM_NAMES: dict = {}  # key text -> vllm_field_name(key)


def parse_vllm(line: str, line_no: int) -> VllmSpecLine | Value | Refused | None:
    """A V1 `SpecDecoding metrics:` or V0 `Speculative metrics:` line (fields found by keyword, so the
    known typo variants and orders read the same); one without its Accepted/Drafted counts but with its
    mean acceptance length (shortened or cut by the paste) gives that AL as a summary `Value`; per-position
    rates with `nan`: `nan_rates`."""
    i = line.find("SpecDecoding metrics:")
    v0 = i < 0
    if v0:
        i = max(line.find("peculative metrics"), line.find("peculative Metrics"))
    rest = line[i:].replace("*", "").replace("`", "")
    pos: list[float] = []
    k = rest.find("Per-position acceptance rate:")
    if k >= 0:
        pos = rates_list(rest[k + 29:])
        c = rest.find("Per-position verification coverage:", k)
        if c >= 0:  # a fork's conditional rates (accepted / drafted at the position, `-----` where none was):
            cover = rates_list(rest[c + 35:])  # times the share of drafts that reached it, vLLM's unconditional ones
            pos = [r * v for r, v in zip(pos, cover)] if len(cover) == len(pos) else []
        rest = rest[:k]
    f: dict[str, float] = {}
    for part in rest.split(", " if "," in rest.replace(", ", "") else ","):  # `, `: keep `2,833` whole
        key, sep, val = part.rpartition(":")
        x = _num(val) if sep else None
        if x is None:
            continue
        name = _VLLM_NAMES.get(key, vllm_field_name)
        if name is vllm_field_name:  # a key not seen before (the same few recur on every line)
            name = vllm_field_name(key)
            if len(_VLLM_NAMES) < 4096:
                _VLLM_NAMES[key] = name
        if name and name not in f:
            f[name] = x
    acc, dr = f.get("accepted"), f.get("drafted")
    nan = nan_rates(pos, acc, dr)
    if nan is True:  # an interval that drafted nothing (its mean AL and rate nan too): a spec line with nothing to pool
        return VllmSpecLine(line_no, None, 0, 0, [], *_prefix(line[:i])[1:3])
    if nan is not None:
        return Refused(line_no, nan)
    if any(_finite(x) is None for x in [*f.values(), *pos]):
        return None
    if acc is None or dr is None:  # a paste that kept the mean AL but not the counts: the printed AL
        al = f.get("mean_al")
        return Value(line_no, "accept_length", al) if al is not None and 1 <= al <= 1000 else None
    kk = f.get("k")
    rate = f.get("rate")
    if rate is not None and "%" in rest.split("acceptance rate", 1)[-1][:12]:
        rate /= 100
    return VllmSpecLine(line_no, f.get("mean_al"), int(acc), int(dr), pos, *_prefix(line[:i])[1:3],
                        k=int(kk) if kk is not None else (len(pos) or None),
                        emitted=None if f.get("emitted") is None else int(f["emitted"]), accept_rate=rate)


def parse_throughput(line: str, line_no: int) -> VllmThroughput | None:
    i = line.find("Avg prompt throughput")
    if i < 0:
        i = line.find("Avg generation throughput")
    body = line[i:].replace("*", "")
    gen = _finite(_after(body, "Avg generation throughput:"))
    running = _finite(_after(body, "Running:"), 0, 1e7)
    if gen is None or running is None:
        return None
    prompt = _finite(_after(body, "Avg prompt throughput:")) or 0.0
    m = _ENGINE.search(line, 0, i + 1)
    engine = "" if not m else m.group(1) if m.group(1) else f"agg{m.group(2)}"
    _, secs, pid, _ = _prefix(line[:m.start() if m else i])
    return VllmThroughput(line_no, secs, pid, engine, prompt, gen, int(running))


def parse_other(line: str, n: int):
    """Every line that is not an SGLang decode line: a record, a list of `Value`s, None (not ours) or
    False (ours but garbled)."""
    own = strip_collector(line)  # a summary line's own text (the parsers below but the last find their keys anywhere)
    boxed = "\u2502" in line
    if "\t" in line or boxed or "\u2503" in line:  # tabs for spaces (`decoded\t673 tokens`), box-drawn
        line, own = line.translate(_PASTE), own.translate(_PASTE)  # table rules (`│ ITL (ms) │ 1.85 │`) for `|`
    if "Prefill batch" in line:
        _, secs, pid, dp = _prefix(line[:line.find("Prefill batch")])
        return PrefillLine(n, secs, pid, dp)
    if "gen throughput (token/s)" in line and "#running-req: " in line:  # an SGLang decode line with no
        return _parse_sglang_general(line, n) or False  # `Decode batch` (v0.1, 2024; the fast path needs it)
    if "Avg generation throughput" in line:
        return parse_throughput(line, n) or False
    if "Avg thr (in/out)" in line:  # LMDeploy's window (and its spec fields): `log_summary.parse_lmdeploy`
        return parse_lmdeploy(line, n, _prefix, parse_vllm) or False
    if "SpecDecoding metrics" in line or "peculative metrics" in line or "peculative Metrics" in line:
        return parse_vllm(line, n) or False
    if ("host_step_time = " in line or "elapsed_time = " in line) and "iter = " in line:  # TensorRT-LLM iteration
        return parse_trt_iter(line, n) or False  # log (`wmtp.log_engines`), its statistics records, TGI requests
    if '"iterLatencyMS"' in line:
        return parse_trt_stats(line, n)
    if "time_per_token" in line and (rec := parse_tgi(line, n)) is not None:
        return rec
    if "etract" in line and "total_retractions" not in line:
        m = re.search(r"#?retracted[_ -]?reqs?\s*[:=]\s*(\d+)", line)
        if m or "etract request" in line or "etracted" in line:
            return Event(n, "retraction", int(m.group(1)) if m else 1)
    if "out of memory" in line or "Out of memory" in line or "OutOfMemory" in line or "OOM" in line:
        return Event(n, "oom")
    if "preempted" in line and "PreemptionMode" in line:
        return Event(n, "preemption")
    if ("vllm" in own or "sglang" in own or "llamacpp" in own or "trtllm" in own or "tgi_" in own or "lmdeploy" in own) and \
            (rec := parse_prometheus(own, n)) is not None:
        return None if rec is PROM_OTHER else rec
    if "spec_decode_accept_" in line and (rec := parse_mlc_metric(own, n)) is not None:  # MLC-LLM's /metrics text
        return rec
    if (rec := parse_aiperf(line, own, n)) is not None:  # AIPerf's histogram line, JSON and CSV exports (`log_aiperf`)
        return rec
    k = (parse_spec_k(line, n) if "speculative_tokens" in line or "speculative-tokens" in line
         or "num_spec_tokens" in line else None)  # the configured draft length, with whatever else the line holds
    al = parse_bench_al(line, n) if '"average"' in line or '"acceptance_length_percentiles"' in line else None
    if ("spec_" in line or "accept" in line or "completion_tokens" in line or "predicted_" in line
            or "draft_" in line or "num_spec" in line or "tpot_ms" in line or "per_output_token" in line
            or "e2e_latency" in line or "mean_itl_ms" in line or "decoded_tokens_per_iter" in line):
        found = _META.findall(line)
        if found:
            out = []
            for key, raw in found:
                xs = _number_list(raw, whole=key.endswith("histogram")) if raw[:1] in "[{" else None
                x = xs if xs is not None else _finite(whole_num(raw)) if raw[:1] not in "[{" else None  # (`4e`: cut)
                if x is None:
                    return False
                out.append(Value(n, "meta:" + key, x))
            return out + [r for r in (k, al) if r is not None]
    if k is not None:
        return [k, al] if al is not None else k
    if al is not None:
        return al
    if "=" in line and ("ms per token" in line or "draft acceptance" in line or "#mean acc len" in line
                        or "#gen drafts" in line or " tg = " in line or " draft tokens" in line) or "decoded " in line:
        rec = parse_llama(line, n)  # llama.cpp server / speculative example lines
        if rec is not None:
            return None if rec is SKIP else rec
    if "[METRIC] tpot=" in line:
        x = _finite(_num(line.split("[METRIC] tpot=", 1)[1].split()[0]))
        return Value(n, "metric_tpot_ms", x) if x is not None else False
    if "Serving Benchmark Result" in line or "Speculative Decoding" in line:
        return Value(n, "header", 0.0)
    if own.startswith("Decode") and "throughput:" in own and (rec := parse_step(own, n)) is not None:
        return rec
    if own.count("|") >= 3:  # a results table's header or row (a labelled `| Mean TPOT (ms) | 5.4 |` row: None);
        rec = parse_table_line(own, n, boxed) or parse_table_row(own, n)  # guidellm's, a box's wrapped cells first
        if rec is not None:
            return rec
    return parse_label(own, n)

def tally_decode(rec, stats: ParseStats, line: str = "") -> tuple:
    """The records of a decode line read by the general parser (None: garbled, or skipped for SGLang's one-off
    `Decode batch [first graph replay], #running-req: N, cuda graph: True, #queue-req: M` notice, which has no
    throughput by design: scheduler_components/metrics_reporter.py, 2026), counted in `stats`."""
    if rec is None:
        if "Decode batch [first graph replay]," in line:
            stats.skipped += 1
        else:
            stats.garbled += 1
        return ()
    if type(rec) is Refused:  # (the reader stops at it)
        return (rec,)
    stats.decode += 1
    return (rec,)


def tally_other(rec, stats: ParseStats) -> tuple | list:
    """The records `parse_other` gave for one line (None: skipped, False: garbled, a list: several), counted."""
    if rec is None:
        stats.skipped += 1
        return ()
    if rec is False:
        stats.garbled += 1
        return ()
    one = rec[-1] if isinstance(rec, list) else rec  # (LMDeploy's window and spec fields: a spec line)
    if type(one) is VllmSpecLine:
        stats.vllm += 1
    elif type(one) is DecodeLine:  # (`parse_other`'s SGLang v0.1 decode line)
        stats.decode += 1
    else:
        stats.other += 1
    return rec if isinstance(rec, list) else (rec,)


def tally_line(line: str, n: int, stats: ParseStats) -> tuple | list:
    """The records of a line the decode fast path did not take (`tally_decode` / `tally_other`); a line holding several
    records with no line end between them (`wmtp.log_joined`) gives each one's, and is counted in `stats.joined`. A
    number of more than 4300 digits, which int() refuses (a ValueError the parsers' range checks never saw), makes its
    line garbled."""
    try:
        return _tally_line(line, n, stats)
    except ValueError:
        if len(line) > INT_DIGITS and _HUGE_INT.search(line):
            stats.garbled += 1
            return ()
        raise


_HUGE_INT = re.compile(r"\d{%d}" % (INT_DIGITS + 1))


def _tally_line(line: str, n: int, stats: ParseStats) -> tuple | list:
    parts = split_joined(line)
    if parts is None:
        return tally_decode(_parse_sglang_general(line, n), stats, line) if "Decode batch" in line else \
            tally_other(parse_other(line, n), stats)
    stats.joined_n += 1
    if len(stats.joined) < 5:
        stats.joined.append(n)
    return [r for p in parts for r in (tally_decode(_parse_sglang_general(p, n), stats, p) if "Decode batch" in p
                                      else tally_other(parse_other(p, n), stats))]


def stream(path: str | Path, stats: ParseStats | None = None, decode=None) -> Iterator:
    """Parsed records of one file, in order; `stats` counts what was read, skipped and garbled. With
    `decode`, the SGLang decode lines that `parse_sglang` reads on its fast path are handed to it as
    DecodeLine's fields (in field order, `retracted` left out) instead of being yielded: `wmtp logs`'s
    path, with no record built for most lines of a multi-GB log."""
    stats = stats if stats is not None else ParseStats()
    p = Path(path)
    f = open_text(p)  # (a folder, a name too long to look up: one error there)
    n = fast = 0
    make = DecodeLine if decode is None else decode
    last_pre, clean, ts, secs, pid, dp = None, False, None, None, None, None  # consecutive lines share a prefix
    try:
        for n, line in enumerate(f, 1):
            d = line.find("Decode batch")
            if d >= 0:
                pre = line[:d]
                if pre != last_pre:
                    last_pre, clean = pre, "*" not in pre and "`" not in pre and "Prefill batch" not in pre
                    ts, secs, pid, dp = _prefix(pre)
                rec = _decode_fast(line, d, make, n, ts, secs, pid, dp) if clean else _GENERAL
                if rec is not _GENERAL:
                    fast += 1
                    if rec is not None:
                        yield rec
                    continue
            yield from tally_line(line, n, stats)
    except (OSError, EOFError, zlib.error) as e:
        raise WmtpError(f"{p}: cannot read past line {n}: damaged or truncated file ({e})") from None
    except UnicodeError as e:
        raise WmtpError(f"{p}: undecodable text ({e})") from None
    finally:
        stats.lines = n
        stats.decode += fast
        f.close()
