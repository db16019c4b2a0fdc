"""Per-iteration and per-request lines of engines other than SGLang, vLLM and llama.cpp, as `wmtp.logs.parse_other`
reads them:

  TensorRT-LLM's PyTorch executor with `print_iter_log` (tensorrt_llm/_torch/pyexecutor/py_executor.py): one line per
          loop iteration, `iter = N, global_rank = G, rank = R, ..., host_step_time = X ms, prev_device_step_time = Y ms,
          ..., states = {'num_ctx_requests': C, 'num_ctx_tokens': T, 'num_generation_tokens': K}`, with
          `num_scheduled_requests: S` near the end (2025) or `num_scheduled_requests = S, kv_cache_util = U` near the
          start (2026), or `elapsed_time = X s` instead of the host step time (early 2025).
  TensorRT-LLM's iteration statistics (trtllm-serve's `/metrics`, `LLM.get_stats()`): JSON records with `iterLatencyMS`,
          `inflightBatchingStats` and `specDecodingStats`, one record or an array of them per line (JSON Lines, a scrape
          saved as is; a line cut inside a record keeps the records before it).
  text-generation-inference's per-request `Success` lines: `time_per_token="20.5ms"` in the request's span, plain or
          JSON logging (`"time_per_token":"20.5ms"`), durations as Rust prints them (`ns`, `µs`, `ms`, `s`).
  trtllm-bench's `--report_json` (tensorrt_llm/bench/dataclasses/reporting.py): `"acceptance_length_percentiles":
          {..., "average": X}` in its `decoding_stats`, on one line or pretty-printed over several (its `"average"` line
          then follows the key's), and `"avg_tpot_ms"` (`wmtp.logs`' per-request keys read that).

Each iteration becomes one `Value` `engine_step`: [step ms (-1: no usable step time), requests, context requests,
tokens per generation request (0: a verify step whose accepted tokens the line does not give), accepted draft tokens,
requests with drafts, rank (-1: none)]; `wmtp.log_engine_steps.EngineSteps` turns them into TPOT and AL.
"""

from __future__ import annotations

import json
import math
import re

from wmtp.log_records import MAX_VALUE, Value

_TRT_FIELD = re.compile(r"\b(host_step_time|elapsed_time|num_scheduled_requests|rank)(?: = |: )(\d+(?:\.\d+)?(?:e-?\d+)?)(ms|s)?")
_TRT_STATES = re.compile(r"'(num_ctx_requests|num_generation_tokens)': (\d+)")
_TGI = re.compile(r"""time_per_token(?:=|"\s*:\s*)"(\d+(?:\.\d+)?)(ns|µs|us|ms|s)\"""")
_UNIT_MS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
_DECODER = json.JSONDecoder()


def parse_trt_iter(line: str, n: int) -> Value | None:
    """An `engine_step` for a TensorRT-LLM `print_iter_log` line, None for one without its step time, request count or
    `states` (garbled)."""
    f = {}
    for key, val, unit in _TRT_FIELD.findall(line):
        f.setdefault(key, (float(val), unit))
    st = dict(_TRT_STATES.findall(line))
    step = f.get("host_step_time") or f.get("elapsed_time")
    if step is None or "num_scheduled_requests" not in f or len(st) < 2:
        return None
    ms = step[0] * (1e3 if step[1] == "s" else 1.0)
    reqs, ctx, toks = f["num_scheduled_requests"][0], float(st["num_ctx_requests"]), float(st["num_generation_tokens"])
    if not (0 <= ms <= MAX_VALUE and reqs <= 1e7):
        return None
    per = 1.0 if toks == reqs - ctx else 0.0  # more tokens than requests: a verify step, its accepted count not given
    rank = f["rank"][0] if "rank" in f else -1.0
    return Value(n, "engine_step", [ms, reqs, ctx, per, 0.0, 0.0, rank])


def _records(line: str) -> tuple[list, bool]:
    """The JSON objects a line holds (one, or an array's; an array cut inside a record: the records before it), and
    whether the line held JSON at all (a `{` or `[`: a line cut inside its only record holds JSON, no record)."""
    i = min((j for j in (line.find("{"), line.find("[")) if j >= 0), default=-1)
    if i < 0:
        return [], False
    try:
        obj, _ = _DECODER.raw_decode(line, i)
        return (obj if isinstance(obj, list) else [obj]), True
    except (ValueError, RecursionError):
        pass
    out, j, end = [], line.find("{", i), len(line)
    while 0 <= j < end:
        try:
            obj, j = _DECODER.raw_decode(line, j)
        except (ValueError, RecursionError):
            break
        out.append(obj)
        while j < end and line[j] in ", \t\r\n":
            j += 1
        if j >= end or line[j] != "{":
            break
    return out, True


def _num(d: dict, key: str) -> float:
    """d[key] as a finite number in [0, MAX_VALUE] (0 where absent or null); ValueError for anything else."""
    x = d.get(key)
    if x is None:
        return 0.0
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (0 <= x <= MAX_VALUE) or math.isnan(x):
        raise ValueError(key)
    return float(x)


def _count(d: dict, key: str) -> float:
    """`_num` of a count: a whole number (1e-320 requests made 1 + accepted / requests infinite)."""
    x = _num(d, key)
    if x != int(x):
        raise ValueError(key)
    return x


def _trt_record(d: dict, n: int) -> Value:
    """One iteration-statistics record as an `engine_step`. Its step time: the C++ executor's `iterLatencyMS` (it
    fills `avgNumDecodedTokensPerIter`, the PyTorch executor leaves it 0), else `hostStepTimeMS` (2026), else
    `iterLatencyMS` under `schedulerMode` "non_overlap"; none otherwise: under the PyTorch executor's overlap
    scheduler `iterLatencyMS` spans about two loops (TensorRT-LLM PR 14127)."""
    ifb = d.get("inflightBatchingStats") or {}
    sd = d.get("specDecodingStats") or {}
    if not isinstance(ifb, dict) or not isinstance(sd, dict):
        raise ValueError("stats")
    gen, ctx, avg = _count(ifb, "numGenRequests"), _count(ifb, "numContextRequests"), \
        _num(ifb, "avgNumDecodedTokensPerIter")
    if 0 < avg < 1:  # a request decodes at least its own token an iteration (0: not filled); 1e-320 made TPOT inf
        raise ValueError("avgNumDecodedTokensPerIter")
    acc, drafted = _count(sd, "numAcceptedTokens"), _count(sd, "numRequestsWithDraftTokens")
    lat, host = _num(d, "iterLatencyMS"), _num(d, "hostStepTimeMS")
    step = lat if avg > 0 else host if host > 0 else lat if d.get("schedulerMode") == "non_overlap" else -1.0
    per = avg if avg > 0 else 1 + acc / gen if gen else 0.0
    return Value(n, "engine_step", [step, gen + ctx, ctx, per, acc, drafted, -1.0])


def parse_trt_stats(line: str, n: int) -> list | None | bool:
    """The `engine_step`s of the TensorRT-LLM iteration-statistics records on a line, None for a line holding no JSON
    (a pretty-printed record's inner lines), False for records whose numbers do not read or a line cut inside its
    first record."""
    recs, is_json = _records(line)
    if not is_json:
        return None
    out = []
    for d in recs:
        if isinstance(d, dict) and "iterLatencyMS" in d:
            try:
                out.append(_trt_record(d, n))
            except ValueError:
                return False
    return out or False


def parse_tgi(line: str, n: int) -> Value | None:
    """A `tgi_tpot_ms` for a text-generation-inference request line's `time_per_token`, else None."""
    m = _TGI.search(line)
    if m is None:
        return None
    ms = float(m.group(1)) * _UNIT_MS[m.group(2)]
    return Value(n, "tgi_tpot_ms", ms) if 0 < ms <= MAX_VALUE else None


_AVG = re.compile(r'"average"\s*:\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')
_AL_BLOCK = re.compile(r'"acceptance_length_percentiles"\s*:\s*(\{[^{}]*\}?|null)?')


def parse_bench_al(line: str, n: int) -> Value | None:
    """trtllm-bench report JSON: `accept_length` for an `"acceptance_length_percentiles"` object whose `average` is
    on the same line, `bench_al_open` for one opened there (pretty-printed: its average follows), `json_average` for a
    pretty-printed `"average": X` line (`wmtp.log_sources.Summaries` keeps the one right after an opener); None else."""
    m = _AL_BLOCK.search(line)
    if m is not None:
        a = _AVG.search(m.group(1) or "")
        if a is not None:
            x = float(a.group(1))
            return Value(n, "accept_length", x) if 1 <= x <= 1000 else None
        return Value(n, "bench_al_open", 0.0) if (m.group(1) or "").strip() in ("", "{") else None
    a = _AVG.search(line)
    return Value(n, "json_average", float(a.group(1))) if a is not None and "{" not in line else None
