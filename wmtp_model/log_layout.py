"""The line layouts `wmtp.log_blocks` reads a skeleton at a time: a line's skeleton (its digits made 0) classed once by
`LAYOUT` (SGLang decode and prefill lines, vLLM V1 / V0 throughput and spec lines in their common layouts) into a kind
and the places of its fields (`SKELETONS`); lines with none of the words `wmtp.logs`' parsers look for are skipped,
decode lines the general parser gives up on are garbled, every other line goes to the parsers."""

from __future__ import annotations

import re
from itertools import count

from wmtp.log_joined import record_starts

_N = r"\d+(?:\.\d+)?"  # a plain number: float() reads it, finite and >= 0
_U = r"[^,:\n]*"
_SGL = r"(\[[0-9 :.-]*(?:[A-Z]{2}\d+ ?)*\] )"  # `[2025-05-31 18:31:21 DP0 TP0] `, `[04:40:55 TP0] `
_V1 = r"(\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] )"
_V0 = r"(INFO \d\d-\d\d \d\d:\d\d:\d\d [\w.]+:\d+\] )"
_LAYOUT = re.compile(
    # 1-9: SGLang decode: prefix, running, #token, #full token, accept len, accept rate, cuda graph, throughput, queue
    rf"{_SGL}Decode batch(?:\.|,| \[\d+\],) #running-req: ({_N}), (?:#cached-token: {_N}, )?(?:#token: ({_N}), token usage: {_U}|"
    rf"#full token: ({_N}), full token usage: {_U}(?:, mamba num: {_U}, mamba usage: {_U})?), "
    rf"(?:accept len: ({_N}), )?(?:accept rate: ({_N}), )?"
    # (a PD decode server's queue fields, an encoder-disaggregated language server's waiting images; the graph label
    # of a CUDA, NPU or CPU device)
    rf"(?:pre-allocated usage: {_U}, #prealloc-req: {_N}, #transfer-req: {_N}, (?:#retracted-req: {_N}, )?)?"
    rf"(?:waiting-image-req: {_N}, )?(?:(?:cuda|npu|cpu) graph: (True|False), )?"
    rf"gen throughput \(token/s\): ({_N})(?:, #queue-req: ({_N}))?,? ?[^\S\n]*$"
    # 10-11: SGLang prefill: prefix, the rest
    rf"|{_SGL}Prefill batch[.,](.*)"
    # 12-16: vLLM V1 throughput: prefix, engine, prompt, generation, running
    rf"|{_V1}Engine (\d+): Avg prompt throughput: ({_N}) tokens/s, Avg generation throughput: ({_N}) tokens/s, "
    rf"Running: (\d+) reqs, Waiting: \d+ reqs, GPU KV cache usage: {_N}%, Prefix cache hit rate: {_N}%$"
    # 17-21: vLLM V1 spec: prefix, mean AL, accepted, drafted, per-position rates
    rf"|{_V1}SpecDecoding metrics: Mean acceptance length: ({_N}), Accepted throughput: {_N} tokens/s, "
    rf"Drafted throughput: {_N} tokens/s, Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    rf"Per-position acceptance rate: ({_N}(?:, {_N})*), Avg Draft acceptance rate: {_N}%$"
    # 22-25: vLLM V0 throughput: prefix, prompt, generation, running
    rf"|{_V0}Avg prompt throughput: ({_N}) tokens/s, Avg generation throughput: ({_N}) tokens/s, "
    rf"Running: (\d+) reqs, Swapped: \d+ reqs, Pending: \d+ reqs, GPU KV cache usage: {_N}%, "
    rf"CPU KV cache usage: {_N}%\.$"
    # 26-31: vLLM V0 spec: prefix, rate, k, accepted, drafted, emitted
    rf"|{_V0}Speculative metrics: Draft acceptance rate: ({_N}), System efficiency: {_N}, Number of "
    rf"speculative tokens: (\d+), Number of accepted tokens: (\d+), Number of draft tokens: (\d+), "
    rf"Number of emitted tokens: (\d+)\.$", re.ASCII)
_GROUPS = {1: (1, 2, (3, 4), 5, 6, 8), 10: (10,), 12: (12, 13, 14, 15, 16), 17: (17, 18, 19, 20, 21),
           22: (22, 23, 24, 25), 26: (26, 27, 28, 29, 30, 31)}
SKIP, PARSE, GARBLED, DEC, PRE, V1T, V1S, V0T, V0S = range(9)
KINDS = {1: DEC, 10: PRE, 12: V1T, 17: V1S, 22: V0T, 26: V0S}
VKINDS = {V1T: "v1t", V1S: "v1s", V0T: "v0t", V0S: "v0s"}
ABSENT = slice(0, 0)  # a field the line does not hold: ""
ZERO = str.maketrans("123456789", "000000000")
ZERO_UTF8 = bytes.maketrans(b"123456789", b"000000000")  # the same on the UTF-8 bytes (faster)

_WORDS = ("Decode batch", "Prefill batch", "Avg generation throughput", "SpecDecoding metrics", "peculative metrics",
          "peculative Metrics", "etract", "out of memory", "Out of memory", "OutOfMemory", "OOM", "preempted",
          "spec_", "accept", "completion_tokens", "predicted_", "draft_n", "num_spec", "tpot_ms", "ms per token",
          "draft acceptance", "#mean acc len", "#gen drafts", " tg = ", "decoded ", "[METRIC] tpot=",
          "Serving Benchmark Result", "Speculative Decoding", "per_output_token", "draft_verify",
          "speculative_tokens", "speculative-tokens", "Avg thr (in/out)",  # (LMDeploy's window)
          "gen throughput (token/s)",  # (an SGLang decode line with no `Decode batch`: v0.1's)
          "host_step_time = ", "elapsed_time = ", '"iterLatencyMS"', "time_per_token",  # (`wmtp.log_engines`' lines)
          '"average"', '"acceptance_length_percentiles"', "tgi_request_", "tgi_batch_inference_duration",
          '"avg"', '"unit"', "lmdeploy:",  # (`wmtp.log_aiperf.parse_json_itl`: AIPerf's profile export JSON)
          "generation_tokens", "decoded_tokens_per_iter")  # (SGLang's counter; TensorRT-LLM's per-request figure)
_LABEL_WORDS = ("tpot", "itl", "ttft", "accept", "draft", "output_tokens", "generated", "concurrency", "successful",
                "n_predict", "position", "latency", "eel (ms)", "e0el (ms)", "[al] ",  # trtllm-bench's `[AL] AVERAGE`
                "decoded tokens per iter",  # `Mean E2EL (ms)`, skeleton `E0EL`
                "batch size", "output throughput", "acc_length", "acc length",  # (sglang.bench_one_batch_server's)
                "time per output token", "inter-token latency (s)",  # (EvalScope's and others' summaries in seconds;
                "time to first token", "tokens per request", "average package",  # its summaries before 2025-07)
                "spec decode steps")  # (AIPerf's CSV export: `Total Spec Decode Steps,5120.00`)
_PIECE = frozenset("0.:%>= \r\n")  # the wrapped rest of AIPerf's histogram line (`0%   0: 0%   >=0: 0%`)


def maybe_ours(shape: str) -> bool:
    """Whether a line (its digits deleted: no word above holds a digit) can hold anything for the parsers."""
    if "*" in shape or "`" in shape or "\t" in shape or not shape.isascii() or shape.count("|") >= 3:
        return True  # (three bars: a results table's row, `parse_table_row`'s)
    low = shape.lower()
    return any(w in shape for w in _WORDS) or any(w in low for w in _LABEL_WORDS) or \
        "%" in shape and set(shape) <= _PIECE


def _garbled(skel: str) -> bool:
    """Whether a line of this skeleton is a decode line `_parse_sglang_general` gives up on before reading a
    number (no `#running-req: ` after `Decode batch`, or no `gen throughput (token/s): ` after it), and
    `_decode_fast` cannot take (it needs both): garbled, whatever its digits."""
    d = skel.find("Decode batch")
    if d < 0 or "Decode batch [first graph replay]," in skel or "*" in skel or "`" in skel or "\t" in skel \
            or len(record_starts(skel)) > 1:  # (the general path reads tabs as spaces; records joined: `split_joined`)
        return False
    k = skel.find("#running-req: ", d)
    return k < 0 or "gen throughput (token/s): " not in skel[k + 14:]


class _Skeletons(dict):
    """A line's skeleton (its digits made 0) -> (id, kind, spans of the fields, id << 24 | length of the
    prefix << 4 | kind): every line of one skeleton matches `_LAYOUT` the same way (its digits sit where a
    `\\d` or a class holding every digit reads them), and holds the same words (none holds a digit). A
    prefix of 2**20 characters or more: the parsers read the line. Bounded."""

    def __missing__(self, utf8: bytes) -> tuple:
        if len(self) >= 16384:
            self.clear()
            RETRACTING.clear()
        skel = utf8.decode()
        m = _LAYOUT.match(skel)
        first = m and next(g for g in _GROUPS if m.group(g) is not None)
        i, plen = next(_IDS), m and m.end(first)
        if m is None or (first == 10 and ("Decode batch" in skel or skel.count("Prefill batch") > 1)):  # a prefill
            # line the decode test sees first, or two joined (`wmtp.log_joined`)
            kind = GARBLED if _garbled(skel) else PARSE if maybe_ours(skel) else SKIP
            v = (i, kind, (), i << 24 | kind)
        elif plen >= 1 << 20:
            v = (i, PARSE, (), i << 24 | PARSE)
        else:
            kind = KINDS[first]
            v = (i, kind, tuple(_span(m, g) for g in _GROUPS[first]), i << 24 | plen << 4 | kind)
            if kind == DEC and "#retracted-req: " in skel:
                RETRACTING.add(i)
        self[utf8] = v
        return v


def _span(m: re.Match, g) -> slice:
    """Where group `g` matched (a tuple of groups: the one that did), `ABSENT` where none did."""
    for h in g if type(g) is tuple else (g,):
        if m.group(h) is not None:
            return slice(*m.span(h))
    return ABSENT


# decode skeletons with a PD decode server's `#retracted-req: N` (the fast path does not read it): a line whose count is
# not 0 goes to the parsers, which keep the largest count of a run
RETRACTING: set = set()
_IDS = count()
SKELETONS = _Skeletons()
