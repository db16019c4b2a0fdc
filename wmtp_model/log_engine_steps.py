"""The accumulator of engines' per-iteration and per-request lines (`wmtp.log_engines` parses them): TensorRT-LLM's
iteration log and iteration statistics, text-generation-inference's time per token; `wmtp.log_sources.Summaries`
holds one."""

from __future__ import annotations

from wmtp.logs import Value
from wmtp.logstats import TpotBins, confidence


class EngineSteps:
    """Engines' per-iteration lines (`wmtp.log_engines`' `engine_step`s: TensorRT-LLM's iteration log and iteration
    statistics) and text-generation-inference's per-request time per token. An iteration that ran no context request
    gives each generation request its tokens per request in its step time: TPOT = step / those tokens, binned by the
    batch (`TpotBins`: the median at the batch held longest). A verify step whose accepted tokens the line does not
    give (TensorRT-LLM's iteration log under speculation) keeps its step time until an AL from elsewhere in the file
    divides it. AL of the statistics records: 1 + accepted draft tokens / requests with drafts, over all records."""

    def __init__(self) -> None:
        self.tpot, self.verify = TpotBins(), TpotBins()
        self.acc = self.drafted = 0.0
        self.lines = [None, None]
        self.no_step = 0  # generation iterations without a usable step time
        self.tgi = TpotBins()  # TGI per-request time per token (one "batch")
        self.tgi_lines = [None, None]

    def add(self, v: Value) -> None:
        if v.key == "tgi_tpot_ms":
            self.tgi.add(0, v.value)
            self.tgi_lines = [self.tgi_lines[0] or v.line_no, v.line_no]
            return
        step, reqs, ctx, per, acc, drafted, _ = v.value
        self.lines = [self.lines[0] or v.line_no, v.line_no]
        self.acc, self.drafted = self.acc + acc, self.drafted + drafted
        if ctx or reqs <= 0:
            return
        if step <= 0:
            self.no_step += 1
        elif per > 0:
            self.tpot.add(int(reqs), step / per)
        else:
            self.verify.add(int(reqs), step)

    def al(self) -> dict | None:
        if not self.drafted:
            return None
        return {"value": 1 + self.acc / self.drafted, "lines": self.lines, "kind": "TensorRT-LLM iteration statistics",
                "estimator": "1 + sum numAcceptedTokens / sum numRequestsWithDraftTokens over the iteration records"}

    def result(self, al: float | None) -> tuple[dict | None, str]:
        """(the TPOT headline or None, a note)."""
        if self.tpot.by_batch:
            ms, n, batch, est = self.tpot.headline()
            est = est.replace("#running-req / gen throughput", "step time / tokens per request").replace("lines", "iterations")
            return ({"value_ms": ms, "samples": n, "batch": batch, "confidence": confidence(n), "lines": self.lines,
                     "estimator": f"TensorRT-LLM iterations without context requests: {est}"}, "")
        if self.verify.by_batch:
            ms, n, batch, _ = self.verify.headline()
            if al is None:
                return None, (f"{n} TensorRT-LLM verify iterations (median step {ms:.2f} ms) but no AL in the file to "
                              "divide them by: no TPOT")
            return ({"value_ms": ms / al, "samples": n, "batch": batch, "confidence": "medium", "lines": self.lines,
                     "estimator": f"median step time of {n} TensorRT-LLM verify iterations / the file's AL {al:.2f}"}, "")
        if self.tgi.by_batch:
            ms, n, _, _ = self.tgi.headline()
            return ({"value_ms": ms, "samples": n, "confidence": "low", "lines": self.tgi_lines,
                     "estimator": f"median of {n} text-generation-inference requests' time_per_token (inference time "
                                  "/ generated tokens: the request's prefill included)"}, "")
        note = (f"{self.no_step} TensorRT-LLM iteration records without a usable step time (iterLatencyMS of the "
                "overlap scheduler spans about two loops; no hostStepTimeMS)") if self.no_step else ""
        return None, note
