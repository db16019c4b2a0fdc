"""Per-request objects as `wmtp.log_sources.Summaries` streams their `meta:` fields by (`wmtp.logs`' `_META` keys, one
object a block: a key seen twice starts the next): SGLang's `meta_info` (`completion_tokens`, `spec_verify_ct`,
`spec_accept_length`, `spec_num_correct_drafts` / `spec_accept_token_num`, the accept histograms), vLLM's per-request
`speculative_decoding` stats, MLC-LLM's engine metrics, TensorRT-LLM's per-choice `avg_decoded_tokens_per_iter`
(`trtllm-serve` responses: one request's generated tokens over its decoding iterations), and the one-object JSON of
benchmarks and llama.cpp's timings, whose numbers go to the summary values (`values`: key -> (value, line)).

SGLang's own per-request AL is completion_tokens / spec_verify_ct (`spec_accept_length`, python/sglang/srt/managers/
tokenizer_manager.py); requests are pooled by their verify steps: sum completion_tokens / sum spec_verify_ct, a request
without `completion_tokens` counting spec_accept_length x spec_verify_ct tokens (what its own AL says it emitted)."""

from __future__ import annotations

HIST_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
_BENCH_KEYS = (("mean_tpot_ms", "tpot_mean_ms"), ("accept_length", "accept_length"),  # bench JSON
               ("avg_per_output_token_latency", "per_output_token_ms"),
               ("spec_decode_acceptance_length", "accept_length"), ("spec_decode_num_drafts", "drafts"),
               ("spec_decode_accepted_tokens", "accepted_tokens"), ("mean_itl_ms", "itl_mean_ms"),
               ("avg_tpot_ms", "tpot_mean_ms"),  # (trtllm-bench's report JSON: streaming_metrics)
               ("mean_avg_decoded_tokens_per_iter", "accept_length"))  # (TensorRT-LLM benchmark_serving's result JSON)
_TRT_ONE = ("TensorRT-LLM avg_decoded_tokens_per_iter of one request (its generated tokens / its decoding iterations, "
            "the context step's token included): a single request's figure, not a run's")


def add_histogram(total: list[float], h) -> None:
    for i, c in enumerate(h):
        if i >= len(total):
            total.extend([0.0] * (i + 1 - len(total)))
        total[i] += float(c)


class MetaBlocks:
    """The per-request objects of one file, summed (`add` their `meta:` values in order, `finish` at the end)."""

    def __init__(self, values: dict) -> None:
        self.values = values
        self.block: dict = {}
        self.m = {"requests": 0, "completion": 0.0, "verify_cv": 0.0, "implied": 0, "correct": 0.0, "verify_cc": 0.0,
                  "al_sum": 0.0, "al_n": 0, "vsteps": 0.0, "vacc": 0.0, "hist": [], "vhist": [], "trt": [],
                  "first": None, "last": None, "e2e_s": 0.0, "e2e_tokens": 0.0, "e2e_n": 0, "mhist": []}

    def add(self, key: str, value, line_no: int) -> None:
        if key in self.block:
            self.flush()
        self.block[key] = value
        m = self.m
        m["first"] = m["first"] or line_no
        m["last"] = line_no

    def finish(self) -> None:
        if self.block:
            self.flush()

    def flush(self) -> None:
        b, m = self.block, self.m
        self.block = {}
        num = {k: x for k, x in b.items() if not isinstance(x, list)}
        if num.get("completion_tokens", 0) > 1 and "e2e_latency" in num:  # a request's own time per token
            m["e2e_s"], m["e2e_tokens"], m["e2e_n"] = m["e2e_s"] + num["e2e_latency"], m["e2e_tokens"] + \
                num["completion_tokens"], m["e2e_n"] + 1
        if isinstance(b.get("accept_count"), list) and isinstance(b.get("draft_count"), list):
            self._mlc(b["accept_count"], b["draft_count"])
            return
        spec = any((k.startswith("spec_") and not k.startswith("spec_decode_"))  # (vllm bench serve's result JSON)
                   or k in ("num_spec_steps", "acceptance_histogram", "mean_acceptance_length") for k in b)
        if spec:
            self._spec(b, num)
        else:
            self._other(b, num)

    def _other(self, b: dict, num: dict) -> None:
        """A block with no speculative per-request field: llama.cpp timings, bench JSON keys, a TensorRT-LLM choice."""
        last = self.m["last"]
        for k in ("predicted_per_token_ms", "predicted_n", "draft_n", "draft_n_accepted", "draft_rounds"):
            if k in num:  # llama.cpp timings (`draft_rounds`: the llama.cpp-compatible MLX servers')
                self.values["llama_" + k] = (num[k], last)
        for k, key in _BENCH_KEYS:
            if k in num and (key != "accept_length" or num[k] >= 1):
                self.values[key] = (num[k], last)
        rates = b.get("spec_decode_per_position_acceptance_rates")  # (vllm bench serve's JSON: accepted at i / drafts)
        if isinstance(rates, list) and rates and all(0 <= r <= 1 for r in rates):
            for i, r in enumerate(rates):
                self.values[f"pos:{i}"] = (r, last)
        a = num.get("avg_decoded_tokens_per_iter")
        if a is not None and a >= 1:  # (0: a request with no decoding iteration, TensorRT-LLM's `0.F`)
            self.m["trt"].append((a, num.get("completion_tokens")))

    def _spec(self, b: dict, num: dict) -> None:
        m = self.m
        m["requests"] += 1
        verify = num.get("spec_verify_ct")
        correct = num.get("spec_num_correct_drafts", num.get("spec_accept_token_num"))
        for k in HIST_KEYS:
            if isinstance(b.get(k), list):
                add_histogram(m["hist"], b[k])
                break
        else:
            if "completion_tokens" in num and verify:
                m["completion"] += num["completion_tokens"]
                m["verify_cv"] += verify
            elif "spec_accept_length" in num and verify and num["spec_accept_length"] >= 1:
                m["completion"] += num["spec_accept_length"] * verify  # (its own AL x its verify steps)
                m["verify_cv"] += verify
                m["implied"] += 1
            elif correct is not None and verify:
                m["correct"] += correct
                m["verify_cc"] += verify
            elif "spec_accept_length" in num:
                m["al_sum"] += num["spec_accept_length"]
                m["al_n"] += 1
        if isinstance(b.get("acceptance_histogram"), list):
            add_histogram(m["vhist"], b["acceptance_histogram"])
        elif num.get("num_spec_steps"):
            m["vsteps"] += num["num_spec_steps"]
            m["vacc"] += num.get("num_accepted_draft_tokens", 0.0)
        elif "mean_acceptance_length" in num:
            m["al_sum"] += num["mean_acceptance_length"]
            m["al_n"] += 1

    def _mlc(self, acc: list, drafted: list) -> None:
        """MLC-LLM's engine metrics (`spec_decode`: `accept_count[j]` verify steps that emitted more than j tokens, the
        bonus one included; `draft_count[j]` steps whose draft, with the bonus prediction, was longer than j; the
        engine's lifetime, the last dump wins): steps that accepted exactly j drafts, as a histogram."""
        if not acc or len(acc) != len(drafted) or any(acc[j] < acc[j + 1] for j in range(len(acc) - 1)) \
                or acc[0] != drafted[0] or min(acc) < 0:
            return
        self.m["mhist"] = [acc[j] - (acc[j + 1] if j + 1 < len(acc) else 0) for j in range(len(acc))]

    def tpot(self) -> dict | None:
        """Per-request time per token of meta_info requests (`e2e_latency` / `completion_tokens`, the first token's
        wait included: meta_info has no TTFT), for a file with no other TPOT."""
        m = self.m
        if not m["e2e_n"]:
            return None
        return {"value_ms": m["e2e_s"] / m["e2e_tokens"] * 1e3, "samples": m["e2e_n"], "confidence": "low",
                "lines": [m["first"], m["last"]],
                "estimator": f"meta_info sum e2e_latency / sum completion_tokens over {m['e2e_n']} requests"}

    def al(self) -> dict | None:
        m = self.m
        lines, n = [m["first"], m["last"]], m["requests"]
        for key, label in (("hist", "SGLang meta_info"), ("vhist", "vLLM per-request metrics"),
                           ("mhist", "MLC-LLM engine metrics")):
            h = m[key]
            if h and sum(h) > 0 and len(h) >= 2:
                est = (f"summed accept histograms of {n} requests" if key != "mhist" else "spec_decode accept_count: "
                       "tokens emitted / verify steps, over the engine's life (its last dump)")
                return {"value": sum((i + 1) * c for i, c in enumerate(h)) / sum(h), "histogram": h, "lines": lines,
                        "samples": n, "kind": label, "estimator": est}
        if m["verify_cv"]:
            est = f"sum completion_tokens / sum spec_verify_ct over {n} requests"
            if m["implied"]:
                est += (f" ({m['implied']} without completion_tokens: spec_accept_length x spec_verify_ct tokens each, "
                        "what its own AL says it emitted)")
            return {"value": m["completion"] / m["verify_cv"], "lines": lines, "samples": n, "kind": "SGLang meta_info",
                    "estimator": est}
        if m["verify_cc"]:
            return {"value": 1 + m["correct"] / m["verify_cc"], "lines": lines, "samples": n,
                    "kind": "SGLang meta_info", "estimator": "1 + sum spec_num_correct_drafts / sum spec_verify_ct"}
        if m["vsteps"]:
            return {"value": 1 + m["vacc"] / m["vsteps"], "lines": lines, "samples": n,
                    "kind": "vLLM per-request metrics", "estimator": "1 + num_accepted_draft_tokens / num_spec_steps"}
        if m["al_n"]:
            return {"value": m["al_sum"] / m["al_n"], "lines": lines, "samples": n, "kind": "meta_info",
                    "estimator": f"mean of the reported per-request acceptance lengths ({m['al_n']} requests)"}
        return self._trt_al(lines)

    def _trt_al(self, lines: list) -> dict | None:
        """TensorRT-LLM responses' per-choice `avg_decoded_tokens_per_iter`: one request's figure as it is; several,
        pooled by their iterations (completion_tokens / the figure) where every one gives its completion_tokens."""
        trt = self.m["trt"]
        if not trt:
            return None
        out = {"lines": lines, "samples": len(trt), "kind": "TensorRT-LLM response", "scope": "request"}
        if len(trt) == 1:
            return {**out, "value": trt[0][0], "estimator": _TRT_ONE}
        if all(c for _, c in trt):
            iters = sum(c / a for a, c in trt)
            return {**out, "scope": "requests", "value": sum(c for _, c in trt) / iters,
                    "estimator": f"TensorRT-LLM responses: sum completion_tokens / sum (completion_tokens / "
                                 f"avg_decoded_tokens_per_iter) over {len(trt)} requests (tokens per decoding "
                                 "iteration, pooled)"}
        return {**out, "scope": "requests", "value": sum(a for a, _ in trt) / len(trt),
                "estimator": f"TensorRT-LLM responses: mean avg_decoded_tokens_per_iter of {len(trt)} requests (not "
                             "every one gives its completion_tokens: not weighted by iterations)"}
