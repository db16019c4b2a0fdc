"""Accumulators of acceptance and TPOT evidence while a log streams by (`wmtp.log_analysis.analyse` feeds
them; `wmtp.acceptance_io` turns their results into acceptance profiles): vLLM spec-decoding lines
(`SpecLines`) and the summary blocks of benchmarks, offline runs, meta_info and llama.cpp (`Summaries`).
"""

from __future__ import annotations

import math

from wmtp.acceptance import is_chain
from wmtp.log_records import v1_drafts
from wmtp.logs import Value, VllmSpecLine
from wmtp.log_engine_steps import EngineSteps
from wmtp.log_aiperf import AiperfParts
from wmtp.log_bench_values import BoxCells, evalscope_old_tpot, mlc_metrics_al
from wmtp.log_meta import MetaBlocks
from wmtp.log_prom import prom_al, prom_tpot


class SpecLines:
    """vLLM spec-decoding lines of one file, pooled (V1 per interval; V0 cumulative, last line per process)."""

    def __init__(self) -> None:
        self.acc = self.drafts = 0.0
        self.rate_acc = self.rate_drafted = 0.0
        self.reached: dict[int, list[float]] = {}  # k -> drafts that accepted at least i tokens
        self.v0: dict = {}
        self.n = 0
        self.first = self.last = None
        self.contradicted = [0, None]  # lines with Accepted > Drafted: how many, the first

    def add(self, r: VllmSpecLine) -> float | None:
        """Pool one line; returns its own AL (for pairing with its throughput window)."""
        self.n += 1
        if (r.accepted or 0) > (r.drafted if r.drafted is not None else math.inf):
            self.contradicted = [self.contradicted[0] + 1, self.contradicted[1] or r.line_no]
        self.first = self.first or r.line_no
        self.last = r.line_no
        self.rate_acc += r.accepted or 0
        self.rate_drafted += r.drafted or 0
        if r.emitted is not None:  # V0
            self.v0[r.pid] = r
            k = r.k or 0
            return r.emitted / (r.drafted / k) if k and r.drafted else None
        k = r.k or 0
        if r.drafted == 0 and r.accepted:  # Accepted > Drafted = 0 (`contradicted`): pooled as printed, no drafts
            self.acc += r.accepted  # (never drafts from the printed mean AL: the counts it came from contradict)
            return None
        if k and r.drafted:
            drafts = v1_drafts(k, r.drafted, r.accepted, r.mean_al)
        elif r.mean_al is not None and r.mean_al > 1 and r.accepted:
            drafts = r.accepted / (r.mean_al - 1)
        else:
            return r.mean_al
        self.acc += r.accepted or 0
        self.drafts += drafts
        if k and len(r.per_position) == k:
            reach = self.reached.setdefault(k, [0.0] * (k + 1))
            reach[0] += drafts
            for i, rate in enumerate(r.per_position):
                reach[i + 1] += rate * drafts
        return 1 + (r.accepted or 0) / drafts if drafts else r.mean_al

    def result(self) -> dict | None:
        if not self.n:
            return None
        lines = [self.first, self.last]
        if self.v0:
            em = steps = 0.0
            for r in self.v0.values():
                if r.k and r.drafted:
                    steps += r.drafted / r.k
                    em += r.emitted
            if steps:
                return {"value": em / steps, "lines": lines, "samples": len(self.v0),
                        "kind": "vLLM V0 Speculative metrics",
                        "estimator": "emitted / (draft tokens / k), last (cumulative) line per process"}
        if self.drafts > 0:
            out = {"value": 1 + self.acc / self.drafts, "lines": lines, "samples": self.n,
                   "kind": "vLLM V1 SpecDecoding metrics",
                   "estimator": f"1 + sum Accepted / sum (Drafted / k) over {self.n} intervals (Accepted / "
                                "(mean AL - 1) where the printed AL disagrees with Drafted / k)"}
            if self.reached:
                k, reach = max(self.reached.items(), key=lambda kv: kv[1][0])
                rates, counts = sum(reach[1:]) / reach[0] if reach[0] else 0.0, self.acc / self.drafts
                if abs(reach[0] - self.drafts) <= 1e-9 * self.drafts and abs(rates - counts) > 0.0005 * k + 0.01:
                    out["per_position_conflict"] = (k, rates, counts)  # every draft's rates (%.3f), and not the counts'
                elif is_chain(reach):
                    out["histogram"] = [max(reach[i] - reach[i + 1], 0.0) for i in range(k)] + [reach[k]]
                elif reach[0] > 0:  # rates above 1 or rising: no histogram (it was clamped into one); `wmtp accept`
                    out.update(per_position=[r / reach[0] for r in reach[1:]], drafts=reach[0])  # refuses the rates
            return out
        if self.rate_drafted:
            return {"value": None, "lines": lines, "samples": self.n, "kind": "vLLM spec metrics",
                    "accept_rate": self.rate_acc / self.rate_drafted,
                    "estimator": "draft acceptance rate only (no k, no mean acceptance length): AL unknown"}
        return None


class Summaries:
    """Numbers from summary blocks (last value per key wins) and per-request meta_info objects (summed)."""

    def __init__(self) -> None:
        self.values: dict[str, tuple] = {}
        self.repeated = 0
        self.table: list | None = None  # the open results table's [TPOT column, AL column, cells]
        self.rounds = [0, 0.0, None, None]  # llama.cpp verify rounds: count, accepted drafts, first and last line
        self.prom: dict = {}  # Prometheus series (field + labels) -> (last sample, line)
        self.steps: list = []  # bench_one_batch decode steps: (ms per token, line)
        self.engine = EngineSteps()  # TensorRT-LLM iterations, TGI requests
        self.note = ""  # what `tpot` set aside
        self.al_open = None  # the line of trtllm-bench's open `acceptance_length_percentiles` object
        self.boxes = BoxCells()  # a box table's first cell wrapped over rows
        self.aiperf = AiperfParts(self.values)  # AIPerf's histogram line (wrapped), JSON export objects
        self.metas = MetaBlocks(self.values)  # per-request objects (`wmtp.log_meta`)

    def add(self, v: Value) -> None:
        if v.key.startswith("meta:"):
            self.metas.add(v.key[5:], v.value, v.line_no)
            return
        if v.key == "header":
            return
        if v.key == "one_batch_step":
            self.steps.append((v.value, v.line_no))
            return
        if v.key == "engine_step" or v.key == "tgi_tpot_ms":
            self.engine.add(v)
            return
        if v.key == "bench_al_open" or v.key == "json_average":  # trtllm-bench's pretty-printed report JSON: the
            if v.key == "bench_al_open":  # `average` within its percentiles object (at most 8 keys) is the AL
                self.al_open = v.line_no
            elif self.al_open and v.line_no - self.al_open <= 9:
                self.al_open = None
                if 1 <= v.value <= 1000:
                    self.values["accept_length"] = (v.value, v.line_no)
            return
        if v.key.startswith(("aiperf_", "json_open:")) or v.key in ("json_unit", "json_avg"):  # (`wmtp.log_aiperf`)
            self.aiperf.add(v)
            return
        if v.key.startswith("prom:"):  # a counter's later sample (a second scrape) replaces its earlier one
            self.prom[v.key[5:]] = (v.value, v.line_no)
            return
        if v.key in ("table_head", "table_row"):
            self._table(v)
            return
        if v.key.startswith("box"):  # (`box:` / `box+:`: a wrapped cell's label, read once it names a known value)
            if (rec := self.boxes.add(v)) is not None:
                self.values[rec.key] = (rec.value, rec.line_no)
            return
        if v.key == "llama_round":  # llama.cpp per-round lines: summed, not last-wins
            r = self.rounds
            r[0], r[1], r[2], r[3] = r[0] + 1, r[1] + v.value[0], r[2] or v.line_no, v.line_no
            return
        if v.key in self.values:
            self.repeated += 1
        self.values[v.key] = (v.value, v.line_no)

    def _table(self, v: Value) -> None:
        """A results table: its header's TPOT / AL columns, then its first data row's values (later rows are other
        runs of a sweep: the first is kept, as the table's headline)."""
        if v.key == "table_head":
            self.table = [int(x) for x in v.value]
            return
        t = self.table
        if t is None or len(v.value) != t[3]:
            return
        self.table = None
        itl = ("table_itl_ms", "guidellm_itl_ms", "guidellm_itl_mdn_ms")[t[4] if len(t) > 4 else 0]  # (guidellm's)
        for col, key in ((t[0], "table_tpot_ms"), (t[1], "accept_length"), (t[2], itl)):
            x = v.value[col] if col >= 0 else float("nan")
            if x == x and (key != "accept_length" or x >= 1):
                self.values[key] = (x, v.line_no)

    def finish(self) -> None:
        self.metas.finish()

    def get(self, key: str):
        v = self.values.get(key)
        return None if v is None else v[0]

    def line(self, *keys) -> list:
        ls = [self.values[k][1] for k in keys if k in self.values]
        return [min(ls), max(ls)] if ls else [None, None]

    def meta_tpot(self) -> dict | None:
        return self.metas.tpot()

    def meta_al(self) -> dict | None:
        return self.metas.al()

    def summary_al(self) -> dict | None:
        g = self.get
        pos = sorted((int(k[4:]), v[0]) for k, v in self.values.items() if k.startswith("pos:"))
        rates = [r for _, r in pos]
        drafts = g("drafts")
        skeys = [k for k in self.values if k.startswith("llama_stat_")]
        stats = (sum(self.values[k][0] for k in skeys if k.startswith("llama_stat_drafts:")),
                 sum(self.values[k][0] for k in skeys if k.startswith("llama_stat_acc:")), skeys)
        prom = prom_al(self.prom) if self.prom else None
        if (aiperf := self.aiperf.al(g, self.line)) is not None:  # AIPerf's histograms (pooled counts, % of steps)
            out = aiperf
        elif g("accepted_tokens") is not None and drafts:
            out = {"value": 1 + g("accepted_tokens") / drafts, "estimator": "1 + accepted tokens / drafts",
                   "lines": self.line("accepted_tokens", "drafts")}
        elif g("accept_length_steps") is not None:
            out = {"value": g("accept_length_steps"), "lines": self.line("accept_length_steps"),
                   "estimator": "AIPerf Token-Weighted Acceptance Length (1 + accepted drafts / verify steps, pooled)"}
        elif g("accept_length_requests") is not None:  # (AIPerf's JSON export without its token-weighted object)
            out = {"value": g("accept_length_requests"), "lines": self.line("accept_length_requests"),
                   "estimator": "AIPerf spec_decode_acceptance_length: the mean of per-request ALs (not weighted by "
                                "verify steps; the file has no token-weighted object)"}
        elif (mlc := mlc_metrics_al(self.values)) is not None:  # MLC-LLM's /metrics text
            out = mlc
        elif g("accept_length") is not None:
            out = {"value": g("accept_length"), "estimator": "printed acceptance length",
                   "lines": self.line("accept_length")}
        elif prom is not None:  # a /metrics scrape
            out = prom
        elif self.engine.drafted:  # TensorRT-LLM iteration statistics
            out = self.engine.al()
        elif g("llama_draft_rounds") and g("llama_draft_n_accepted") is not None:  # MLX servers count accepted
            r, emitted = g("llama_draft_rounds"), (g("llama_predicted_n") or 0) - 1  # drafts past the reply's end
            out = {"value": min(1 + g("llama_draft_n_accepted") / r, emitted / r if emitted >= r else float("inf")),
                   "lines": self.line("llama_draft_rounds", "llama_draft_n_accepted"),
                   "estimator": "timings: 1 + draft_n_accepted / draft_rounds, at most (predicted_n - 1) / "
                                "draft_rounds"}
        elif stats[0] and g("llama_accepted") in (None, stats[1]):  # counted drafts of this request (its accepted
            # tokens are the request's): before the inferences from tokens below
            out = {"value": 1 + stats[1] / stats[0], "lines": self.line(*stats[2]),
                   "estimator": "llama.cpp statistics: 1 + #acc tokens / #gen drafts (last line of each "
                                "implementation)"}
        elif self.rounds[0]:
            out = {"value": 1 + self.rounds[1] / self.rounds[0], "lines": self.rounds[2:],
                   "estimator": f"llama.cpp per-round lines: 1 + accepted drafts / rounds over {self.rounds[0]} rounds"}
        elif g("llama_generated") and g("llama_eval_tokens") and g("llama_eval_tokens") > g("llama_accepted"):
            t = g("llama_eval_tokens")
            out = {"value": t / (t - g("llama_accepted")), "lines": self.line("llama_eval_tokens", "llama_accepted"),
                   "estimator": "inferred: eval tokens / (eval tokens - accepted drafts)"}
        elif g("llama_n_predict") and g("llama_n_accept") is not None and g("llama_n_predict") > g("llama_n_accept"):
            t = g("llama_n_predict")
            out = {"value": t / (t - g("llama_n_accept")), "lines": self.line("llama_n_predict", "llama_n_accept"),
                   "estimator": "inferred: n_predict / (n_predict - n_accept)"}
        elif g("llama_predicted_n") and g("llama_draft_n_accepted") is not None and \
                g("llama_predicted_n") > g("llama_draft_n_accepted"):
            t = g("llama_predicted_n")
            out = {"value": t / (t - g("llama_draft_n_accepted")), "lines": self.line("llama_predicted_n"),
                   "estimator": "inferred: predicted_n / (predicted_n - draft_n_accepted)"}
        elif stats[0]:
            out = {"value": 1 + stats[1] / stats[0], "lines": self.line(*stats[2]),
                   "estimator": "llama.cpp statistics: 1 + #acc tokens / #gen drafts (last line of each "
                                "implementation)"}
        else:
            return None
        out.update(kind="summary", samples=1)
        llama_pos = g("llama_per_position")
        if rates or llama_pos:
            out["per_position"] = rates or llama_pos
            out["drafts"] = drafts or (g("llama_generated") / len(llama_pos) if llama_pos and g("llama_generated")
                                       else None)
        return out

    def tpot(self) -> dict | None:
        g = self.get
        if (old := evalscope_old_tpot(g, self.line)) is not None:  # (its TPOT row: no decode time per token)
            out, self.note = old
            return out
        itl = "bench summary Mean ITL (" + ("its Mean TPOT 0, set aside)" if g("tpot_mean_ms") == 0 else
                                            "no TPOT section)")  # (a TPOT of 0, as printed, is none)
        for key, est in (("tpot_mean_ms", "bench summary Mean TPOT"), ("metric_tpot_ms", "[METRIC] tpot"),
                         ("table_tpot_ms", "bench results table: mean_tpot_ms of its first row"),
                         ("guidellm_itl_ms", "guidellm Benchmarks Stats: ITL (ms) mean of its first benchmark row (its "
                          "TPOT column is request latency / output tokens, the first token's wait included)"),
                         ("guidellm_itl_mdn_ms", "guidellm Request Latency Statistics: ITL ms Mdn of its first "
                          "benchmark row (its TPOT column is request latency / output tokens, first token included)"),
                         ("itl_mean_ms", itl),
                         ("table_itl_ms", "bench results table: ITL (ms) of its first row "
                                          "(sglang.bench_one_batch_server: batch size / output throughput)"),
                         ("llama_decoded_s", ""),
                         ("llama_eval_ms_per_token", "llama.cpp eval time per token"),
                         ("llama_predicted_per_token_ms", "llama.cpp timings predicted_per_token_ms")):
            if key == "llama_decoded_s":  # a speculative example's own total: its `eval time` lines are per
                if g(key) and g("llama_decoded_tokens"):  # model (the draft's, the target's batches)
                    return {"value_ms": g(key) / g("llama_decoded_tokens") * 1e3, "samples": 1, "confidence": "high",
                            "estimator": "llama.cpp decoded seconds / tokens",
                            "lines": self.line("llama_decoded_tokens")}
            elif g(key):
                return {"value_ms": g(key), "estimator": est, "lines": self.line(key), "samples": 1,
                        "confidence": "high"}
        if g("obs_batch") and g("obs_out_thr"):  # sglang.bench_one_batch_server's per-case block (its last case)
            return {"value_ms": g("obs_batch") / g("obs_out_thr") * 1e3, "samples": 1, "confidence": "high",
                    "lines": self.line("obs_batch", "obs_out_thr"), "estimator": "sglang.bench_one_batch_server: batch "
                    "size / output throughput of its last case (decode time: the last request's TTFT excluded)"}
        if self.prom and (out := prom_tpot(self.prom)) is not None:
            return out
        if self.engine.lines[0] or self.engine.tgi_lines[0]:
            al = self.summary_al() if self.engine.verify.by_batch else None
            out, self.note = self.engine.result(al["value"] if al else None)
            if out is not None:
                return out
        if g("per_output_token_ms"):
            return {"value_ms": g("per_output_token_ms"), "samples": 1, "confidence": "low",
                    "lines": self.line("per_output_token_ms"), "estimator": "bench JSON avg_per_output_token_latency "
                    "(request latency / output tokens: the first token's wait included)"}
        if g("one_batch_decode_s"):  # one forward per step at a fixed batch: each request gets one token a step
            return {"value_ms": g("one_batch_decode_s") * 1e3, "samples": 1, "confidence": "high",
                    "lines": self.line("one_batch_decode_s"), "estimator": "sglang.bench_one_batch median decode "
                    "step latency (`Decode.  median latency`; the file's last, i.e. its last batch size)"}
        if self.steps:  # 2024 bench_latency per-step lines (no median line)
            ms = sorted(x for x, _ in self.steps)
            k = len(ms)
            return {"value_ms": (ms[(k - 1) // 2] + ms[k // 2]) / 2, "samples": k, "confidence": "high",
                    "lines": [self.steps[0][1], self.steps[-1][1]],
                    "estimator": f"median over {k} bench_latency decode steps of batch size / throughput"}
        if g("llama_tg"):
            return {"value_ms": 1e3 / g("llama_tg"), "samples": 1, "lines": self.line("llama_tg"), "confidence": "low",
                    "estimator": "llama.cpp progress line: 1000 / tg (cumulative t/s of the last task)"}
        per_req = g("output_tokens") / g("requests") if g("output_tokens") and g("requests") else 0.0
        e2e, ttft = g("e2e_mean_ms"), g("ttft_mean_ms")
        if per_req > 1 and e2e and ttft is not None and e2e > ttft:  # a summary cut before its TPOT and ITL values
            return {"value_ms": (e2e - ttft) / (per_req - 1), "samples": 1, "confidence": "low",
                    "lines": self.line("e2e_mean_ms", "ttft_mean_ms", "output_tokens", "requests"),
                    "estimator": "bench summary (Mean E2E - Mean TTFT) / (generated tokens per request - 1) "
                                 "(no TPOT or ITL value; exact when every request has the same length)"}
        return None
