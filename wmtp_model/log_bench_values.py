"""TPOT and AL from the values of `wmtp.log_tables` and of a few tools whose printed numbers are not what their names
say (`wmtp.log_sources.Summaries` calls these with its values):

- text-generation-inference's `/metrics` (huggingface/text-generation-inference): `tgi_request_skipped_tokens` is
  recorded once per request and generation, `n - 1` of the n tokens it gave (`backends/v3/src/backend.rs`,
  `send_responses`), and a request's first generation is its prefill, one token and no draft (`server/.../tokens.py`:
  no speculated ids, one accepted): the verify steps are the observations less one per request. Its
  `tgi_request_mean_time_per_token_duration` is the request's inference time / generated tokens (`router/src/server.rs`),
  the prefill included; the decode batches' `tgi_batch_inference_duration{method="decode"}` over AL is the decode time
  per token.
- EvalScope's `evalscope perf` summary before 2025-07 (modelscope/evalscope `evalscope/perf/http_client.py`, 0.4;
  `perf/utils/benchmark_util.py`): `Average time per output token` was the test's wall time / all output tokens (to
  2024-12: the inverse of the aggregate throughput, about TPOT / concurrency), then request latency / output tokens (the
  first token's wait included), then chunk times; those summaries print `Average package latency` / `Average package per
  request` and no `Average inter-token latency (s)` row. Their decode time per token is (Average latency - Average time
  to first token) / (Average output tokens per request - 1).
- MLC-LLM's `/metrics` acceptance samples (`mlc_len:j`, `mlc_prob:j`).
"""

from __future__ import annotations

from wmtp.log_records import Value
from wmtp.log_summary import parse_label


class BoxCells:
    """A box-drawn table's first cell wrapped over rows (`box:` starts one with its row's first number, `box+:` adds a
    fragment): the Value the label read so far names (`parse_label`'s, at the starting row's line), or None."""

    def __init__(self) -> None:
        self.open: list | None = None  # [label, first number, line]

    def add(self, v: Value) -> Value | None:
        if v.key.startswith("box:"):
            self.open = [v.key[4:], v.value, v.line_no]
        elif self.open is None:
            return None
        else:
            self.open[0] += " " + v.key[5:]
        label, x, line = self.open
        rec = parse_label(f"| {label} | {x!r} |", line)
        return rec if isinstance(rec, Value) else None


def mlc_metrics_al(values: dict) -> dict | None:
    """AL from MLC-LLM's `/metrics` text: `accept_len{step=K-1}`, the sum of the K steps' `accept_prob` (steps that
    emitted more than j tokens / steps that drafted j: exact when every step drafted K - 1 tokens, the lists of counts
    not being in the text); per-position rates from `accept_prob{step=1..K-1}` where they never rise."""
    lens = {int(k[8:]): v for k, v in values.items() if k.startswith("mlc_len:")}
    if not lens or sorted(lens) != list(range(len(lens))):
        return None
    k = len(lens)
    probs = [values.get(f"mlc_prob:{j}", (None, 0))[0] for j in range(1, k)]
    ls = [ln for key, (_, ln) in values.items() if key.startswith("mlc_")]
    out = {"value": lens[k - 1][0], "lines": [min(ls), max(ls)],
           "estimator": f"MLC-LLM /metrics spec_decode accept_len{{step={k - 1}}} (tokens per verify step; exact when "
                        "every step drafted the same length)"}
    if probs and None not in probs and all(0 <= b <= a <= 1 for a, b in zip([1.0] + probs, probs)):
        out.update(per_position=probs, drafts=None)
    return out


def tgi_al(tot: dict, lines: list) -> dict | None:
    """AL from TGI's `tgi_request_skipped_tokens`: 1 + sum / (count - requests), a request's prefill generation (one
    token, no draft) left out; the requests from `tgi_request_generated_tokens_count` (or the mean-time-per-token
    histogram's count: both one per finished request)."""
    n, s = tot.get("tgi_skip_n"), tot.get("tgi_skip_sum")
    if not n or s is None:
        return None
    req = tot.get("tgi_requests") or tot.get("tgi_tpt_n") or 0
    if 0 < req < n:
        return {"value": 1 + s / (n - req), "lines": lines, "drafts": n - req,
                "estimator": f"TGI tgi_request_skipped_tokens: 1 + sum / (count - {req:g} requests' prefill "
                             "generations) (verify steps only)"}
    return {"value": 1 + s / n, "lines": lines, "drafts": n,
            "estimator": "TGI tgi_request_skipped_tokens: 1 + sum / count (no request count in the scrape: each "
                         "request's prefill generation left in the steps, AL a little low)"}


def tgi_tpot(tot: dict, lines: list, al: float | None) -> dict | None:
    """TPOT from TGI's `/metrics`: the mean decode batch (`tgi_batch_inference_duration{method="decode"}` sum / count)
    over AL; without those, the per-request `tgi_request_mean_time_per_token_duration` (its prefill included)."""
    steps, secs = tot.get("tgi_step_n"), tot.get("tgi_step_s")
    if steps and secs is not None and al:
        return {"value_ms": secs / steps / al * 1e3, "lines": lines, "samples": int(steps), "confidence": "high",
                "estimator": f"TGI decode batches: tgi_batch_inference_duration{{method=\"decode\"}} sum / count over "
                             f"AL {al:.3f} (the decode step per request token; prefill batches not counted)"}
    n, s = tot.get("tgi_tpt_n"), tot.get("tgi_tpt_s")
    if n and s is not None:
        return {"value_ms": s / n * 1e3, "lines": lines, "samples": int(n), "confidence": "low",
                "estimator": "TGI tgi_request_mean_time_per_token_duration: sum / count (inference time / generated "
                             "tokens: each request's prefill included, so above the decode time per token)"}
    return None


def evalscope_old_tpot(get, line) -> tuple[dict | None, str] | None:
    """For an EvalScope summary from before 2025-07 (`Average package ...` rows, no `Average inter-token latency (s)`):
    (TPOT from (latency - TTFT) / (output tokens per request - 1) or None, the note on the row set aside); None for any
    other file."""
    if all(get(k) is None for k in ("evs_package", "evs_packages", "evs_tpot_s")) or get("itl_mean_ms") is not None:
        return None
    lat = get("evs_latency_ms") if get("evs_latency_ms") is not None else (get("evs_latency_s") or 0) * 1e3
    ttft = get("evs_ttft_ms") if get("evs_ttft_ms") is not None else (get("evs_ttft_s") or 0) * 1e3
    out = get("evs_out_per_req") or 0
    note = ("EvalScope before 2025-07: its `Average time per output token` (wall time / all output tokens, or request "
            "latency / tokens) is no decode time per token; set aside")
    if not (out > 1 and lat > ttft > 0):
        return None, note + " (and the summary lacks the latency, TTFT or tokens per request to derive one)"
    keys = ("evs_latency_ms", "evs_latency_s", "evs_ttft_ms", "evs_ttft_s", "evs_out_per_req")
    return ({"value_ms": (lat - ttft) / (out - 1), "samples": 1, "confidence": "low", "lines": line(*keys),
             "estimator": "EvalScope summary (Average latency - Average time to first token) / (Average output tokens "
                          "per request - 1) (exact when every request has the same length)"}, note)
