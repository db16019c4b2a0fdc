"""AL and TPOT from Prometheus samples (`wmtp.log_summary.parse_prometheus` reads them; `wmtp.log_sources.Summaries`
keeps the last sample of each series, field + labels -> (value, line), and calls these): vLLM / SGLang / llama.cpp /
TensorRT-LLM spec-decode counters and gauges, TPOT and inter-token latency histograms, text-generation-inference's
router metrics (`wmtp.log_bench_values.tgi_al` / `tgi_tpot`)."""

from __future__ import annotations

from wmtp.log_bench_values import tgi_al, tgi_tpot


def prom_totals(prom: dict, *kinds: str) -> tuple[dict, list]:
    """The Prometheus fields whose names start with one of `kinds`, summed over their series (the `al` / `sgal`
    gauges: averaged), and the lines they came from."""
    tot: dict = {}
    ls = []
    for series, (x, ln) in prom.items():
        field = series.split("{", 1)[0]
        if field.startswith(kinds):
            tot.setdefault(field, []).append(x)
            ls.append(ln)
    return ({k: sum(xs) / len(xs) if k in ("al", "sgal") else sum(xs) for k, xs in tot.items()},
            [min(ls), max(ls)] if ls else [None, None])

def prom_al(prom: dict) -> dict | None:
    """AL from Prometheus spec-decode counters: 1 + accepted tokens / drafts, the per-position counters / drafts
    as rates (TensorRT-LLM counts no drafts: its drafted tokens at position 0 are one per draft, and its accepted
    tokens are the per-position ones summed, both counted per finished request); SGLang's generated tokens over its
    verify calls (`generation_tokens_total / spec_verify_calls_total`, both per finished request), else its
    `spec_accept_length` gauge (its last log interval: named so); else the mean of the other engines'
    acceptance-length gauges; None without either."""
    tgi = tgi_al(*prom_totals(prom, "tgi_"))
    if tgi is not None:
        return tgi
    sg, sg_lines = prom_totals(prom, "sg_")
    if sg.get("sg_verify") and sg.get("sg_gen") is not None and sg["sg_gen"] >= sg["sg_verify"]:
        return {"value": sg["sg_gen"] / sg["sg_verify"], "lines": sg_lines,
                "estimator": "SGLang Prometheus counters: generation_tokens_total / spec_verify_calls_total (both "
                             "summed per finished request: sum completion_tokens / sum spec_verify_ct, over series)"}
    tot, lines = prom_totals(prom, "drafts", "accepted", "pos", "dpos")
    if not tot:
        gauge, g_lines = prom_totals(prom, "sgal")
        if gauge.get("sgal") and gauge["sgal"] >= 1:
            why = ("its spec_verify_calls_total counter is 0" if sg.get("sg_verify") == 0 else
                   "its counters contradict (fewer generated tokens than verify calls)" if sg.get("sg_verify") else
                   "no spec_verify_calls_total counter in the scrape (SGLang before 2026-05)")
            return {"value": gauge["sgal"], "lines": g_lines,
                    "estimator": "SGLang Prometheus gauge spec_accept_length (the last log interval's batches, mean of "
                                 f"series; {why}: not the run's pooled counters)"}
        tot, lines = prom_totals(prom, "al")
    drafts, acc = tot.get("drafts"), tot.get("accepted")
    est = "Prometheus counters: 1 + accepted tokens / drafts (summed over engines)"
    k = sum(1 for f in tot if f.startswith("pos"))
    if not drafts and tot.get("dpos0") and k and all(f"pos{i}" in tot for i in range(k)):
        drafts, acc = tot["dpos0"], sum(tot[f"pos{i}"] for i in range(k))
        est = ("Prometheus per-position counters: 1 + sum of accepted tokens over positions / drafted tokens at "
               "position 0 (one per draft)")
    if drafts and acc is not None:
        out = {"value": 1 + acc / drafts, "lines": lines, "drafts": drafts, "estimator": est}
        if k and all(f"pos{i}" in tot for i in range(k)):
            out["per_position"] = [min(tot[f"pos{i}"] / drafts, 1.0) for i in range(k)]
        return out
    if tot.get("al") and tot["al"] >= 1:
        return {"value": tot["al"], "lines": lines,
                "estimator": "Prometheus acceptance-length gauge (mean of series; TensorRT-LLM's: its last iteration)"}
    return None

def prom_tpot(prom: dict) -> dict | None:
    """TPOT from a Prometheus histogram: per-request TPOT (vLLM's `request_time_per_output_token_seconds`,
    TensorRT-LLM's `time_per_output_token_seconds`), else the inter-token latency (`inter_token_latency_seconds`),
    else `time_per_output_token_seconds` (vLLM's older name for it): sum / count, one histogram, never two pooled."""
    tgi = prom_totals(prom, "tgi_")
    if tgi[0]:
        al = tgi_al(*tgi)
        return tgi_tpot(*tgi, al["value"] if al else None)
    lmd, ls = prom_totals(prom, "lmd_")
    if lmd.get("lmd_itl_s") is not None and lmd.get("lmd_gen") and lmd.get("lmd_req") is not None \
            and lmd["lmd_gen"] > lmd["lmd_req"]:  # LMDeploy: each decode iteration's wait over the tokens it brought
        return {"value_ms": lmd["lmd_itl_s"] / (lmd["lmd_gen"] - lmd["lmd_req"]) * 1e3, "lines": ls,
                "samples": int(lmd.get("lmd_itl_n") or 0), "confidence": "high",
                "estimator": "LMDeploy iter_token_latency sum / (generation_tokens - time_to_first_token count): "
                             "decode time over the tokens after each request's first (one first token per request)"}
    if lmd.get("lmd_tpo_n") and lmd.get("lmd_tpo_s") is not None:  # LMDeploy without its iteration latency
        return {"value_ms": lmd["lmd_tpo_s"] / lmd["lmd_tpo_n"] * 1e3, "lines": ls, "samples": int(lmd["lmd_tpo_n"]),
                "confidence": "low", "estimator": "LMDeploy time_per_output_token sum / count: each decode iteration's "
                "wait over its tokens, averaged over iterations (not over tokens: above the time per token where "
                "iterations bring different numbers of tokens, as speculative ones do)"}
    tot, lines = prom_totals(prom, "tpot_", "itl_", "tpo_")
    for s, n, what in (("tpot_s", "tpot_n", "per-request time per output token"), ("itl_s", "itl_n", "inter-token latency"),
                       ("tpo_s", "tpo_n", "time per output token")):
        if tot.get(n) and tot.get(s) is not None:
            return {"value_ms": tot[s] / tot[n] * 1e3, "lines": lines, "samples": int(tot[n]), "confidence": "high",
                    "estimator": f"Prometheus histogram {what}: sum / count"}
    return None
