"""Summary lines as `wmtp.logs.parse_other` reads them once no engine-specific kind matched: one labelled
number per line (`Mean TPOT (ms):   5.47`, `num_drafts: 1986`, `n_accept  = 231`, `  Position 0:  83.39`,
`| Mean TPOT (ms) | 5.47 |`),
or several `label: number` pairs on one line (SGLang's `benchmark/mtbench/bench_sglang_eagle.py`:
`#questions: 80, Throughput: 276.30 token/s, Acceptance length: 5.36`). Markdown emphasis and backticks,
diff `+`, quote `>` and table `|` prefixes are decoration and are stripped. Results tables (`|`-separated cells, a
tabulate grid or markdown: a header row naming `mean_tpot_ms` / `accept_length` columns, then rows of numbers) are
read a row at a time by `parse_table_row`; `wmtp.log_sources.Summaries` keeps the first data row under the header.
Box-drawn tables (genai-perf / AIPerf consoles: `│ Inter token latency (ms) │ 1.85 │ ...`) read as `|` tables, their
first number the `avg` column. Prometheus samples (`/metrics` text or a Grafana `metric{labels} | value` table) of the
spec-decode counters and TPOT histograms (vLLM, SGLang, llama.cpp, TensorRT-LLM) are read by `parse_prometheus`."""

from __future__ import annotations

import re

from wmtp.log_records import Value, VllmThroughput, finite, num

POSITION = re.compile(r"(?:position|acceptance (?:rate )?at token)\s+(\d+)$")
LABELS = {
    "mean tpot (ms)": "tpot_mean_ms", "median tpot (ms)": "tpot_median_ms", "p99 tpot (ms)": "tpot_p99_ms",
    "mean itl (ms)": "itl_mean_ms", "median itl (ms)": "itl_median_ms", "mean ttft (ms)": "ttft_mean_ms",
    "inter token latency (ms)": "itl_mean_ms", "inter-token latency (ms)": "itl_mean_ms",  # genai-perf / AIPerf rows
    "mean e2e latency (ms)": "e2e_mean_ms", "mean e2el (ms)": "e2e_mean_ms",
    "accept length": "accept_length", "acceptance length": "accept_length", "mean acceptance length": "accept_length",
    "average acceptance length": "accept_length", "acceptance rate (%)": "accept_rate_pct",
    "drafts": "drafts", "num_drafts": "drafts", "draft tokens": "draft_tokens", "num_draft_tokens": "draft_tokens",
    "accepted tokens": "accepted_tokens", "num_accepted_tokens": "accepted_tokens",
    "total_num_output_tokens": "output_tokens", "total generated tokens": "output_tokens",
    "max request concurrency": "concurrency", "maximum request concurrency": "concurrency",
    "successful requests": "requests", "n_draft": "llama_n_draft", "n_predict": "llama_n_predict",
    "n_drafted": "llama_n_drafted", "n_accept": "llama_n_accept",
    "number of draft proposals": "drafts", "number of draft tokens generated": "draft_tokens",
    "number of accepted tokens": "accepted_tokens",
    "decode. median latency": "one_batch_decode_s",  # sglang.bench_one_batch: `Decode.  median latency: X s, ...`
    # trtllm-bench's report (tensorrt_llm/bench/dataclasses/reporting.py): the streaming TPOT average and its
    # `[TPOT] AVERAGE` / `[AL] AVERAGE` breakdown rows; TensorRT-LLM's benchmark_serving: `Mean Avg Decoded Tokens per
    # Iter` (tokens a request gets per engine iteration: its acceptance length)
    "average time-per-output-token [tpot] (ms)": "tpot_mean_ms", "[al] average": "accept_length", "mean avg decoded tokens per iter": "accept_length",
    "avg decoded tokens per iter": "accept_length",
    # sglang.bench_one_batch_server's per-case block (`batch size: 8`, `output throughput: 2000.00 tok/s`, `acc_length:
    # 2.50`): a request's time per output token is the batch over the output throughput (the last TTFT excluded)
    "batch size": "obs_batch", "output throughput": "obs_out_thr", "acc_length": "accept_length",
    # AIPerf's `LLM Metrics: Spec Decode` table (2026): the per-request mean `Acceptance Length (ratio)` and the
    # `Token-Weighted Acceptance Length` pooled over every verify step (1 + accepted drafts / steps: the AL the
    # engines' own counters give, preferred)
    "acceptance length (ratio)": "accept_length", "token-weighted acceptance length": "accept_length_steps",
    "token-weighted acceptance length (ratio)": "accept_length_steps",
    # EvalScope's summary before 2025-07 (`wmtp.log_bench_values.evalscope_old_tpot`): 0.4's unit-less labels (seconds),
    # the rows that date a summary (`Average package ...`) and the tokens per request
    "average latency": "evs_latency_s", "average time to first token": "evs_ttft_s",
    "average time per output token": "evs_tpot_s", "average output tokens per request": "evs_out_per_req",
    "average package latency": "evs_package", "average package per request": "evs_packages",
}
# labels of a value in seconds (read in ms): EvalScope's `evalscope perf` summary (`| Average time per output token (s) |
# 0.0095 |`, evalscope/perf/utils/benchmark_util.py's Metrics, 4 decimals), the AI-Hypercomputer inference-benchmark's
# `Average Time Per Output Token (s): 0.05`
SECONDS = {"average time per output token (s)": "tpot_mean_ms", "average inter-token latency (s)": "itl_mean_ms",
           "average latency (s)": "evs_latency_ms", "average time to first token (s)": "evs_ttft_ms",
           "average package latency (s)": "evs_package"}
# AISBench's `ais_bench --mode perf` table (tabulate's fancy grid: `Performance Parameters │ Stage │ Average │ Min │ ...`):
# a `TPOT` / `ITL` row, its stage (`total`) and its Average cell with its unit (`│ TPOT │ total │ 20.1 ms │ 20.1 ms │`);
# on a terminal narrower than 56 columns the row's first piece ends after that cell (`│ TPOT │ total │ 20.1 ms`)
_AIS_ROW = re.compile(r"(tpot|itl)\s*\|\s*[a-z]+\s*\|\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*(?:\||$)", re.IGNORECASE)
# labels that may also stand after other `label: value` pairs on one line (never the first pair's label)
_INLINE = re.compile(r",\s*(acceptance length|accept length|mean acceptance length):\s*([^,]+)", re.IGNORECASE)


# a cell that is one number, nothing else but a unit (`27.72 ms`, `1.27x`, `65.1%`)
_CELL = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*(?:%|x|×|ms|s))?")


def _head(cell: str) -> str:
    """A header cell as a column name: lower case, no markup, `_` and parentheses as spaces (`Mean TPOT ms`,
    `mean_tpot_ms` and `Mean TPOT (ms)` name the same column)."""
    return " ".join(cell.lower().replace("`", "").replace("*", "").replace("_", " ").replace("(", " ")
                    .replace(")", " ").split())


TABLE_COLUMNS = tuple(frozenset(map(_head, names)) for names in (
    ("mean_tpot_ms", "mean tpot (ms)"),
    ("accept_length", "accept length", "acceptance length", "avg_spec_accept_length", "mean acceptance length",
     "acc length", "acc_length"),  # (sglang.bench_one_batch_server's report: `acc length`, `n/a` without speculation)
    ("itl (ms)", "mean_itl_ms", "mean itl (ms)")))  # (its `ITL (ms)`: batch size / output throughput)
_NO_VALUE = frozenset(("n/a", "N/A", "NA", "-", "\u2014", "nan", "NaN", "None", "none"))  # a cell a tool left empty


def parse_table_row(line: str, n: int):
    """A `Value` for a results-table row: `table_head` ([TPOT column, AL column, ITL column, cells]; -1 where absent)
    for a header row naming a column of TABLE_COLUMNS (no cell a number), `table_row` (its cells, NaN where not a
    number) for a row whose non-empty cells are all numbers or `n/a`-like; None for anything else (separators,
    labelled rows)."""
    cells = [c.strip() for c in line.strip().lstrip(">+ ").strip("|").split("|")]  # (a quoted / diffed row)
    if len(cells) < 2:  # (two cells: a two-column table, or a labelled row, `parse_label`'s, below)
        return None
    xs = [num(c) if _CELL.fullmatch(c) else None for c in cells]
    if all(x is None for x in xs):
        low = list(map(_head, cells))
        idx = [next((i for i, c in enumerate(low) if c in names), -1) for names in TABLE_COLUMNS]
        return Value(n, "table_head", [float(i) for i in idx] + [float(len(cells))]) if max(idx) >= 0 else None
    if any(x is None for x, c in zip(xs, cells) if c and c not in _NO_VALUE):
        return None
    return Value(n, "table_row", [x if x is not None and finite(x) is not None else float("nan") for x in xs])


# what a log collector or logger writes before a program's own line (possibly several): an RFC 3339 / ISO timestamp
# (`kubectl logs --timestamps`, `docker logs -t`, CRI's `... stdout F`), `kubectl logs --prefix`'s `[pod/NAME/CONTAINER]`,
# docker compose's `service-1  |`, journald's `Mon DD HH:MM:SS host unit[pid]:`, Ray's `(Actor pid=N, ip=...)`,
# a `[date time]` or vLLM `INFO MM-DD HH:MM:SS [file:line]` logger prefix; line numbers (`grep -n`, `cat -n`)
_COLLECTOR = re.compile(
    r"(?:\s*(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?: std(?:out|err) [FP])?"
    r"|\[pod/[^\]]*\]|[\w.-]+[-_]\d+\s+\||[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:]+:"
    r"|\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\)|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]+\d+)*\]"
    r"|(?:INFO|WARNING|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?: \[[\w.]+:\d+\])?)(?=\s)"
    r"|\s*(?:[\w./-]*[A-Za-z][\w./-]*:)?\d+:(?!\d\d:)(?=\S)|\s*\d+\t)+\s*")  # grep -n's `[file:]N:`, cat -n's `   N<tab>`


def strip_collector(line: str) -> str:
    """`line` without the log collectors' and loggers' prefixes (`_COLLECTOR`) before a summary line."""
    m = _COLLECTOR.match(line)
    return line[m.end():] if m else line


def clean(line: str) -> str:
    s = line.strip()
    while (s[:1] in ("+", ">", "|") or s[:2] in ("- ", "• ")) and len(s) > 1:  # (diff, quote, table, list item)
        s = s[1:].lstrip()
    return s.replace("*", "").replace("`", "") if ("*" in s or "`" in s) else s


def parse_label(line: str, n: int):
    """A `Value` for a labelled number, False for a known label with a bad number, None otherwise."""
    s = clean(line)
    sep = s.find(":")
    if sep < 0:
        sep = s.find("=")
    if sep < 0:
        sep = s.find("|")  # a two-column markdown row: `| Mean TPOT (ms) | 12.30 |`
    if sep <= 0 or sep > 48:
        return None
    label = " ".join(s[:sep].lower().replace("|", " ").split())
    key = LABELS.get(label)
    if key is None and label in SECONDS:
        x = num(s[sep + 1:].replace("|", " "))
        return Value(n, SECONDS[label], x * 1e3) if x is not None and finite(x) is not None else False
    if key is None and (label == "tpot" or label == "itl") and (m := _AIS_ROW.match(s)):
        x = float(m.group(2)) * (1e3 if m.group(3) == "s" else 1)
        return Value(n, f"{label}_mean_ms", x)
    if key is None:
        m = POSITION.search(label)
        if not m:
            m = _INLINE.search(s) if "," in s else None
            if m is None:
                return None
            x = num(m.group(2))
            return Value(n, LABELS[m.group(1).lower()], x) if x is not None and finite(x) is not None else False
        key = f"pos:{int(m.group(1))}"
    x = num(s[sep + 1:].replace("|", " "))  # (`num` reads thousands separators)
    if x is None or finite(x) is None:
        return False
    if label.startswith("position"):  # vllm bench serve prints per-position acceptance in %
        x /= 100
    return Value(n, key, x)


# one decode step of 2024's `sglang.bench_latency` (before bench_one_batch printed `Decode N. Batch size: B, ...` steps
# and a `Decode.  median latency` line, which `parse_label` reads): `Decode.  latency:  0.009 ms, throughput:  107.55
# token/s`, its seconds printed as `ms`
_STEP = re.compile(r"Decode\.\s+latency:\s*(\d+(?:\.\d+)?)\s*(ms|s)\b,\s*throughput:\s*(\d+(?:\.\d+)?)\s*token/s")


def parse_step(line: str, n: int) -> Value | bool | None:
    """A `Value` `one_batch_step` (the step's time per token in ms: batch size / throughput, one token per request a
    step, the batch being throughput x latency) for a bench_latency decode-step line, False for one whose numbers
    are past MAX_VALUE (garbled), else None."""
    m = _STEP.match(line)
    if m is None:
        return None
    lat, unit, thr = finite(float(m.group(1))), m.group(2), finite(float(m.group(3)))
    if lat is None or thr is None:  # past MAX_VALUE (a 400-digit latency is inf: round() of it an OverflowError)
        return False
    if unit == "ms" and thr * lat / 1e3 >= 0.5:  # really milliseconds (a batch of at least one request)
        lat /= 1e3
    return Value(n, "one_batch_step", max(1, round(thr * lat)) / thr * 1e3) if thr > 0 else None


# the configured draft length k (a vLLM launch command, speculative config or offline script's arguments)
_SPEC_K = re.compile(r"""num[-_]spec(?:ulative)?[-_]tokens['"]?\s*[:= ]\s*['"]?(\d+)""")


def parse_spec_k(line: str, n: int) -> Value | None:
    """`spec_k` for a line that configures vLLM's draft length (`"num_speculative_tokens": 3`,
    `--num-speculative-tokens 3`, `--num_spec_tokens 3`), else None."""
    m = _SPEC_K.search(line)
    return Value(n, "spec_k", float(m.group(1))) if m and 1 <= int(m.group(1)) <= 64 else None


# Prometheus samples: `name{labels} value [timestamp]`, or a Grafana table row `name{labels} | value`
_PROM = re.compile(r"\s*(?:[+>]\s*)?(vllm|sglang|llamacpp|trtllm|tgi|lmdeploy)[:_]([a-z0-9_]+?)(?:_total)?(\{[^}]*\})?\s*\|?\s*"
                   r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|NaN|[-+]?Inf)(?:\s+\d+)?\s*\|?\s*$")
PROM_FIELDS = {  # metric (prefix and `_total` dropped) -> what it counts
    "spec_decode_num_drafts": "drafts", "draft_verify_steps": "drafts",  # llama.cpp #25327's names
    "spec_decode_num_accepted_tokens": "accepted", "draft_tokens_accepted": "accepted",
    "spec_decode_num_draft_tokens": "draft_tokens", "draft_tokens": "draft_tokens",
    "spec_decode_num_accepted_tokens_per_pos": "pos", "spec_accept_length": "al", "draft_mean_accept_len": "al",
    "request_time_per_output_token_seconds_sum": "tpot_s", "request_time_per_output_token_seconds_count": "tpot_n",
    "time_per_output_token_seconds_sum": "tpo_s", "time_per_output_token_seconds_count": "tpo_n",
    "inter_token_latency_seconds_sum": "itl_s", "inter_token_latency_seconds_count": "itl_n",
    # TensorRT-LLM's (tensorrt_llm/metrics/collector.py, 2026; `trtllm_`, or `trtllm:` behind Dynamo): per-position
    # drafted and accepted tokens (label `token_position`), the last iteration's acceptance length
    "spec_decode_drafted_tokens": "dpos", "spec_decode_accepted_tokens": "pos", "spec_decode_acceptance_length": "al",
    # text-generation-inference's router (`tgi_`, read by `wmtp.log_bench_values.tgi_al` / `tgi_tpot`): the per-request
    # mean time per token (inference time / generated tokens, seconds), the speculated tokens a generation accepted
    # (`skipped`: one observation per request and generation, its prefill's included), the finished requests, and the
    # decode batches' wall time (`method="decode"` only)
    "request_mean_time_per_token_duration_sum": "tgi_tpt_s", "request_mean_time_per_token_duration_count": "tgi_tpt_n",
    "request_skipped_tokens_sum": "tgi_skip_sum", "request_skipped_tokens_count": "tgi_skip_n",
    "request_generated_tokens_count": "tgi_requests", "batch_inference_duration_sum": "tgi_step_s",
    "batch_inference_duration_count": "tgi_step_n",
    # LMDeploy's (lmdeploy/metrics/loggers.py, 2026-05, PR #4625: `lmdeploy:`; the spec counters are vLLM's names): its
    # mean-AL gauge, and per request and decode iteration the time since the request's last token (`iter_token_latency`,
    # read by `wmtp.log_prom.prom_tpot` with all generated tokens less one first token per request)
    "spec_decode_mean_accept_length": "al", "iter_token_latency_sum": "lmd_itl_s",
    "iter_token_latency_count": "lmd_itl_n", "generation_tokens": "lmd_gen",
    "time_to_first_token_seconds_count": "lmd_req",
    # SGLang's (python/sglang/srt/observability/metrics_collector.py, TokenizerMetricsCollector, PR #25689, 2026-05):
    # per finished request its spec_verify_ct and its completion tokens (`generation_tokens` above: `sg_gen` for it)
    "spec_verify_calls": "sg_verify"}
# `time_per_output_token_seconds`: TensorRT-LLM's per-request TPOT; vLLM's older name of its inter-token latency;
# SGLang's beside its `inter_token_latency_seconds` (per request in some builds, the first token's wait included)
_TRT_FIELDS = {"tpo_s": "tpot_s", "tpo_n": "tpot_n"}
PROM_OTHER = "prometheus"  # a Prometheus sample of another metric (`_created` gauges, buckets, ...): nothing to read
_POS_LABEL = re.compile(r'position="(\d+)"')


def parse_prometheus(line: str, n: int):
    """A `Value` (key `prom:<field><labels>`: one series; the last sample of a series wins) for a sample of a
    spec-decode counter (`vllm:spec_decode_num_drafts_total`, `..._accepted_tokens_total`, per position; llama.cpp's
    `llamacpp:spec_decode_num_*`; TensorRT-LLM's per-position `trtllm_spec_decode_drafted_tokens_total` and
    `..._accepted_tokens_total`), the `sglang:spec_accept_length` / `trtllm_spec_decode_acceptance_length` gauges (the
    draft engine's own series left out) or a TPOT / inter-token latency histogram's `_sum` / `_count`; PROM_OTHER for
    another metric; None for no sample."""
    m = _PROM.match(line)
    if m is None:
        return None
    engine, name, labels, raw = m.groups()
    field = PROM_FIELDS.get(name)
    x = finite(num(raw))
    if field is None or x is None or 'engine_type="draft"' in (labels or ""):
        return PROM_OTHER
    decode = 'method="decode"' in (labels or "")
    if engine == "sglang" and field in ("lmd_gen", "al"):  # (SGLang's generated tokens and AL gauge: `prom_al`)
        field = "sg_gen" if field == "lmd_gen" else "sgal"
    if field.startswith("tgi_") and (engine != "tgi" or field.startswith("tgi_step") and not decode) or \
            field.startswith("lmd_") and engine != "lmdeploy" or field.startswith("sg_") and engine != "sglang":
        return PROM_OTHER
    if engine == "trtllm":
        field = _TRT_FIELDS.get(field, field)
    elif engine == "lmdeploy" and field in ("tpo_s", "tpo_n"):  # (its per-iteration time per token: `prom_tpot`)
        field = "lmd_" + field
    if field == "pos" or field == "dpos":
        p = _POS_LABEL.search(labels or "")
        if p is None:
            return PROM_OTHER
        field = f"{field}{p.group(1)}"
    return Value(n, f"prom:{field}{_POS_LABEL.sub('', labels or '')}", x)


# LMDeploy's stats line (lmdeploy/metrics/loggers.py, 2026): `[YYYY-MM-DD HH:MM:SS Engine 000] Avg thr (in/out): P / G
# tokens/s, Server (succeeded/failed/routed/waiting): ..., Engine (running/waiting): R / W, KV cache: X%, ` (its first
# form, PR 4297: `[... DP0]`, `API server (completed/routed/waiting)`), with speculative decoding vLLM's
# `SpecDecoding metrics: ...` fields appended to the same line
_LMD = re.compile(r"Avg thr \(in/out\):\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\s*tokens/s,"
                  r".*?Engine \(running/waiting\):\s*(\d+)\s*/\s*\d+")
_LMD_RANK = re.compile(r"(?:Engine |DP)(\d+)\]")


def parse_lmdeploy(line: str, n: int, prefix, spec) -> list | None:
    """An LMDeploy stats line's records: its window as a `VllmThroughput` (Running = the engine's running requests,
    the engine its DP rank), then the `VllmSpecLine` that `spec` (`wmtp.logs.parse_vllm`) reads from the spec fields
    on the same line; None for a line that is not one (or whose numbers or spec fields do not read).
    `prefix`: `wmtp.logs`' prefix reader ((timestamp, seconds, pid, DP rank) of the text before the message)."""
    m = _LMD.search(line)
    if m is None:
        return None
    prompt, gen, running = finite(num(m.group(1))), finite(num(m.group(2))), int(m.group(3))
    if prompt is None or gen is None or running > 10**7:
        return None
    rank = _LMD_RANK.search(line, 0, m.start())
    _, secs, pid, _ = prefix(line[:m.start()])
    out: list = [VllmThroughput(n, secs, pid, rank.group(1) if rank else "", prompt, gen, running)]
    if "SpecDecoding metrics:" in line:
        rec = spec(line, n)
        if rec is None:
            return None
        out.append(rec)
    return out


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # terminal colour / style codes (CSI sequences)


class FileView:
    """A reader over a text file `f` that closes it (and works as a context manager)."""

    def __init__(self, f) -> None:
        self.f = f

    def close(self) -> None:
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


class NoAnsi(FileView):
    """A text file with its ANSI escape sequences deleted (a log captured from a colour terminal: the
    codes around a number or a key would hide it from the parsers); chunks end on a line end."""

    def read(self, size: int = -1) -> str:
        text = self.f.read(size)
        if text and size > 0 and not text.endswith("\n"):
            text += self.f.readline()  # no escape sequence is cut between two chunks
        return ANSI.sub("", text) if "\x1b" in text else text

    def __iter__(self):
        for line in self.f:
            yield ANSI.sub("", line) if "\x1b" in line else line
