"""Acceptance from what serving engines write: SGLang per-request `meta_info` (JSON, JSONL, Python dict
repr, recognised by content), plain histograms, per-step accept lengths, vLLM V0/V1 spec-decoding metric
lines, bench/offline summaries, llama.cpp stats, SGLang decode logs (mean accept len only).

Estimators (bonus token included: AL = tokens emitted per verify step):
  meta_info   histogram H[n] -> AL = sum (n + 1) H[n] / sum H[n]; without one, sum completion_tokens /
              sum spec_verify_ct; vLLM per-request: acceptance_histogram, else 1 + accepted / num_spec_steps.
  vLLM V1     pooled over intervals: AL = 1 + sum Accepted / sum (Drafted / k), k = number of per-position
              rates (or Drafted from the printed mean AL when no rates); per-position rates are unconditional
              (accepted at position i / drafts), conditional acceptance is their ratio.
  vLLM V0     counters are cumulative: the last line, AL = emitted / (draft tokens / k).
  summaries   bench/offline: 1 + accepted tokens / drafts, else the printed acceptance length.
  llama.cpp   the printed mean acceptance length, else (inferred) emitted / (emitted - accepted).
  SGLang logs mean `accept len` over the decode lines used for TPOT (see wmtp.logstats).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from wmtp.acceptance import AcceptanceProfile, from_histogram, geometric, load_histogram, wilson_interval
from wmtp.errors import WmtpError
from wmtp.logs import Value, VllmSpecLine, open_text

HIST_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")


def _add(total: list[float], h) -> None:
    for i, c in enumerate(h):
        if i >= len(total):
            total.extend([0.0] * (i + 1 - len(total)))
        total[i] += float(c)


def histogram_from_meta(objs) -> list[float]:
    """Sum the per-request histograms of meta_info objects (or responses holding `meta_info`)."""
    total: list[float] = []
    for o in objs:
        if not isinstance(o, dict):
            continue
        m = o.get("meta_info", o)
        for k in HIST_KEYS:
            if isinstance(m, dict) and isinstance(m.get(k), list):
                _add(total, m[k])
                break
    return total


def _json_content(path: Path) -> tuple[object, list]:
    """(the whole file as one JSON document or None, the JSONL objects when it is not one)."""
    with open_text(path) as f:
        text = f.read()
    try:
        return json.loads(text), []
    except (json.JSONDecodeError, RecursionError):
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except (json.JSONDecodeError, RecursionError):
                continue  # a garbled line is skipped
    return None, out


def _legacy(p: Path, info: dict) -> AcceptanceProfile | None:
    """Strict JSON / JSONL / CSV inputs: meta_info histograms, a histogram, per-step accept lengths."""
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    if name.endswith(".csv"):
        info["kind"] = "histogram"
        return load_histogram(p)
    if not name.endswith((".json", ".jsonl")):
        return None
    doc, lines = _json_content(p)
    objs = (doc if isinstance(doc, list) else [doc]) if doc is not None else lines
    hist = histogram_from_meta(objs)
    if hist and sum(hist) > 0:
        info.update(kind="sglang meta_info histograms", requests=len(objs), estimator="summed histograms")
        return from_histogram(hist, f"meta_info histograms {p.name}")
    if doc is None:
        steps = [o.get("accept_length") if isinstance(o, dict) else o for o in lines]
        steps = [int(s) for s in steps if isinstance(s, (int, float)) and not isinstance(s, bool)
                 and math.isfinite(s) and 1 <= s <= 1000]
        if not steps:
            return None
        h = [0.0] * max(steps)
        for s in steps:
            h[s - 1] += 1  # a step that emitted s tokens accepted s - 1 drafts
        info.update(kind="per-step accept lengths", steps=len(steps), estimator="histogram of per-step lengths")
        return from_histogram(h, f"per-step accept lengths {p.name}")
    if isinstance(doc, list) and all(isinstance(x, (int, float)) for x in doc) or (
            isinstance(doc, dict) and doc and all(str(k).isdigit() for k in doc)):
        info.update(kind="histogram", estimator="histogram")
        return load_histogram(p)
    return None


def _unconditional_profile(rates: list[float], drafts: float | None, source: str) -> AcceptanceProfile | None:
    """Unconditional per-position rates (accepted at i / drafts) -> a histogram of drafts (scaled by the
    number of drafts when known, so Wilson intervals mean something)."""
    if not rates:
        return None
    scale = drafts if drafts and drafts > 0 else 1.0
    reached = [1.0] + [min(max(r, 0.0), 1.0) for r in rates]
    for i in range(1, len(reached)):
        reached[i] = min(reached[i], reached[i - 1])
    hist = [(reached[i] - reached[i + 1]) * scale for i in range(len(rates))] + [reached[-1] * scale]
    prof = from_histogram(hist, source)
    return prof if drafts else AcceptanceProfile(prof.alphas, prof.measured_depth, source, "per-position")


class SpecLines:
    """vLLM spec-decoding lines of one file, pooled (V1 per interval; V0 cumulative, last line per process)."""

    def __init__(self) -> None:
        self.acc = self.drafts = 0.0
        self.rate_acc = self.rate_drafted = 0.0
        self.reached: dict[int, list[float]] = {}  # k -> drafts that accepted at least i tokens
        self.v0: dict = {}
        self.n = 0
        self.first = self.last = None

    def add(self, r: VllmSpecLine) -> float | None:
        """Pool one line; returns its own AL (for pairing with its throughput window)."""
        self.n += 1
        self.first = self.first or r.line_no
        self.last = r.line_no
        self.rate_acc += r.accepted or 0
        self.rate_drafted += r.drafted or 0
        if r.emitted is not None:  # V0
            self.v0[r.pid] = r
            k = r.k or 0
            return r.emitted / (r.drafted / k) if k and r.drafted else None
        k = r.k or 0
        if k and r.drafted:
            drafts = r.drafted / k
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
            acc = em = steps = 0.0
            for r in self.v0.values():
                if r.k and r.drafted:
                    steps += r.drafted / r.k
                    em += r.emitted
            if steps:
                return {"value": em / steps, "lines": lines, "samples": len(self.v0), "kind": "vLLM V0 Speculative metrics",
                        "estimator": "emitted / (draft tokens / k), last (cumulative) line per process"}
        if self.drafts > 0:
            out = {"value": 1 + self.acc / self.drafts, "lines": lines, "samples": self.n,
                   "kind": "vLLM V1 SpecDecoding metrics",
                   "estimator": f"1 + sum Accepted / sum (Drafted / k) over {self.n} intervals"}
            if self.reached:
                k, reach = max(self.reached.items(), key=lambda kv: kv[1][0])
                hist = [max(reach[i] - reach[i + 1], 0.0) for i in range(k)] + [reach[k]]
                out["histogram"] = hist
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
        self.block: dict = {}
        self.meta = {"requests": 0, "completion": 0.0, "verify_cv": 0.0, "correct": 0.0, "verify_cc": 0.0,
                     "al_sum": 0.0, "al_n": 0, "vsteps": 0.0, "vacc": 0.0, "hist": [], "vhist": [],
                     "first": None, "last": None}

    def add(self, v: Value) -> None:
        if v.key.startswith("meta:"):
            k = v.key[5:]
            if k in self.block:
                self._flush()
            self.block[k] = v.value
            m = self.meta
            m["first"] = m["first"] or v.line_no
            m["last"] = v.line_no
            return
        if v.key == "header":
            return
        if v.key in self.values:
            self.repeated += 1
        self.values[v.key] = (v.value, v.line_no)

    def _flush(self) -> None:
        b, m = self.block, self.meta
        self.block = {}
        num = {k: x for k, x in b.items() if not isinstance(x, list)}
        spec = any(k.startswith("spec_") or k in ("num_spec_steps", "acceptance_histogram", "mean_acceptance_length")
                   for k in b)
        if not spec:
            for k in ("predicted_per_token_ms", "predicted_n", "draft_n", "draft_n_accepted"):  # llama.cpp timings
                if k in num:
                    self.values["llama_" + k] = (num[k], m["last"])
            return
        m["requests"] += 1
        for k in ("spec_correct_drafts_histogram", "spec_accept_histogram"):
            if isinstance(b.get(k), list):
                _add(m["hist"], b[k])
                break
        else:
            if "completion_tokens" in num and num.get("spec_verify_ct"):
                m["completion"] += num["completion_tokens"]
                m["verify_cv"] += num["spec_verify_ct"]
            elif "spec_num_correct_drafts" in num and num.get("spec_verify_ct"):
                m["correct"] += num["spec_num_correct_drafts"]
                m["verify_cc"] += num["spec_verify_ct"]
            elif "spec_accept_length" in num:
                m["al_sum"] += num["spec_accept_length"]
                m["al_n"] += 1
        if isinstance(b.get("acceptance_histogram"), list):
            _add(m["vhist"], b["acceptance_histogram"])
        elif num.get("num_spec_steps"):
            m["vsteps"] += num["num_spec_steps"]
            m["vacc"] += num.get("num_accepted_draft_tokens", 0.0)
        elif "mean_acceptance_length" in num:
            m["al_sum"] += num["mean_acceptance_length"]
            m["al_n"] += 1

    def finish(self) -> None:
        if self.block:
            self._flush()

    def get(self, key: str):
        v = self.values.get(key)
        return None if v is None else v[0]

    def line(self, *keys) -> list:
        ls = [self.values[k][1] for k in keys if k in self.values]
        return [min(ls), max(ls)] if ls else [None, None]

    def meta_al(self) -> dict | None:
        m = self.meta
        lines, n = [m["first"], m["last"]], m["requests"]
        for key, label in (("hist", "SGLang meta_info"), ("vhist", "vLLM per-request metrics")):
            h = m[key]
            if h and sum(h) > 0 and len(h) >= 2:
                return {"value": sum((i + 1) * c for i, c in enumerate(h)) / sum(h), "histogram": h, "lines": lines,
                        "samples": n, "kind": label, "estimator": f"summed accept histograms of {n} requests"}
        if m["verify_cv"]:
            return {"value": m["completion"] / m["verify_cv"], "lines": lines, "samples": n, "kind": "SGLang meta_info",
                    "estimator": f"sum completion_tokens / sum spec_verify_ct over {n} requests"}
        if m["verify_cc"]:
            return {"value": 1 + m["correct"] / m["verify_cc"], "lines": lines, "samples": n, "kind": "SGLang meta_info",
                    "estimator": "1 + sum spec_num_correct_drafts / sum spec_verify_ct"}
        if m["vsteps"]:
            return {"value": 1 + m["vacc"] / m["vsteps"], "lines": lines, "samples": n, "kind": "vLLM per-request metrics",
                    "estimator": "1 + num_accepted_draft_tokens / num_spec_steps"}
        if m["al_n"]:
            return {"value": m["al_sum"] / m["al_n"], "lines": lines, "samples": n, "kind": "meta_info",
                    "estimator": f"mean of the reported per-request acceptance lengths ({m['al_n']} requests)"}
        return None

    def summary_al(self) -> dict | None:
        g = self.get
        pos = sorted((int(k[4:]), v[0]) for k, v in self.values.items() if k.startswith("pos:"))
        rates = [r for _, r in pos]
        drafts = g("drafts")
        if g("accepted_tokens") is not None and drafts:
            out = {"value": 1 + g("accepted_tokens") / drafts, "estimator": "1 + accepted tokens / drafts",
                   "lines": self.line("accepted_tokens", "drafts")}
        elif g("accept_length") is not None:
            out = {"value": g("accept_length"), "estimator": "printed acceptance length", "lines": self.line("accept_length")}
        elif g("llama_generated") and g("llama_eval_tokens") and g("llama_eval_tokens") > g("llama_accepted"):
            t = g("llama_eval_tokens")
            out = {"value": t / (t - g("llama_accepted")), "lines": self.line("llama_eval_tokens", "llama_accepted"),
                   "estimator": "inferred: eval tokens / (eval tokens - accepted drafts)"}
        elif g("llama_n_predict") and g("llama_n_accept") is not None and g("llama_n_predict") > g("llama_n_accept"):
            t = g("llama_n_predict")
            out = {"value": t / (t - g("llama_n_accept")), "lines": self.line("llama_n_predict", "llama_n_accept"),
                   "estimator": "inferred: n_predict / (n_predict - n_accept)"}
        elif g("llama_predicted_n") and g("llama_draft_n_accepted") is not None and g("llama_predicted_n") > g("llama_draft_n_accepted"):
            t = g("llama_predicted_n")
            out = {"value": t / (t - g("llama_draft_n_accepted")), "lines": self.line("llama_predicted_n"),
                   "estimator": "inferred: predicted_n / (predicted_n - draft_n_accepted)"}
        else:
            return None
        out.update(kind="summary", samples=1)
        llama_pos = g("llama_per_position")
        if rates or llama_pos:
            out["per_position"] = rates or llama_pos
            out["drafts"] = drafts or (g("llama_generated") / len(llama_pos) if llama_pos and g("llama_generated") else None)
        return out

    def tpot(self) -> dict | None:
        g = self.get
        for key, est in (("tpot_mean_ms", "bench summary Mean TPOT"), ("metric_tpot_ms", "[METRIC] tpot"),
                         ("itl_mean_ms", "bench summary Mean ITL (no TPOT section)"),
                         ("llama_eval_ms_per_token", "llama.cpp eval time per token"),
                         ("llama_predicted_per_token_ms", "llama.cpp timings predicted_per_token_ms")):
            if g(key):
                return {"value_ms": g(key), "estimator": est, "lines": self.line(key), "samples": 1, "confidence": "high"}
        if g("llama_decoded_tokens") and g("llama_decoded_s"):
            return {"value_ms": g("llama_decoded_s") / g("llama_decoded_tokens") * 1e3, "samples": 1,
                    "estimator": "llama.cpp decoded seconds / tokens", "lines": self.line("llama_decoded_tokens"),
                    "confidence": "high"}
        return None


def profile_of(al: dict, source: str) -> AcceptanceProfile | None:
    """The per-position profile an AL result carries (histogram or unconditional rates), if any."""
    if al.get("histogram"):
        h = al["histogram"]
        return from_histogram(h, source) if len(h) >= 2 and sum(h) > 0 else None
    if al.get("per_position"):
        return _unconditional_profile(al["per_position"], al.get("drafts"), source)
    return None


def read_acceptance(path: str | Path, depth: int | None = None) -> tuple[AcceptanceProfile | None, dict]:
    """(a per-position profile or None, info with `accept_length`, estimator, source lines) for one file."""
    from wmtp.logstats import analyse

    p = Path(path)
    if not p.exists():
        raise WmtpError(f"no such file: {p}")
    info: dict = {"file": str(p)}
    try:
        prof = _legacy(p, info) if p.is_file() else None
    except (OverflowError, ValueError, TypeError, AttributeError) as e:
        raise WmtpError(f"{p}: not a usable histogram or meta_info file ({e})") from None
    if prof is not None:
        info.update(accept_length=prof.accept_length(prof.measured_depth), lines=None)
        return prof, info
    rep = analyse(p)
    al = rep["al"]
    if al is None or al.get("value") is None:
        has = f"a TPOT ({rep['tpot']['value_ms']:.2f} ms; `wmtp logs` reads it)" if rep["tpot"] else "nothing usable"
        why = (" (dense decode lines: no speculative decoding)" if rep["runs"] and not any(r["speculative"] for r in rep["runs"])
               else f" ({al['estimator']})" if al else "")
        raise WmtpError(f"{p}: no acceptance length in this file{why}; it has {has} "
                        f"({rep['lines']} lines, {rep['garbled']} garbled)")
    info.update(kind=al["kind"], estimator=al["estimator"], lines=al["lines"], samples=al.get("samples"),
                accept_length=al["value"])
    prof = profile_of(al, f"{al['kind']} {p.name}")
    if prof is None and depth is not None:
        mean = al["value"]
        what = "SGLang log mean accept len" if al["kind"].startswith("SGLang decode") else f"{al['kind']} mean AL"
        prof = geometric(min(max(mean, 1.0), depth), depth, f"{what} {mean:.2f} ({p.name})")
        info["note"] = f"a mean AL only: geometric profile at --depth {depth}"
    elif prof is None:
        info["note"] = "a mean AL only: give --depth for a (geometric) per-position profile"
    return prof, info


def profile_from_file(path: str | Path, depth: int | None = None) -> tuple[AcceptanceProfile, dict]:
    """The best per-position profile a file gives (a mean AL alone needs `depth`), and how it was read."""
    prof, info = read_acceptance(path, depth)
    if prof is None:
        raise WmtpError(f"{path}: {info.get('kind', 'this file')} gives only a mean accept length "
                        f"({info['accept_length']:.2f}); say at which --depth")
    return prof, info


def profile_from_vllm(lines: list[VllmSpecLine], source: str) -> AcceptanceProfile:
    """Pool vLLM metric intervals: drafts = Drafted / k; accepted at position i = rate_i * drafts."""
    k = max((len(r.per_position) for r in lines), default=0)
    if k == 0:
        acc = sum(r.accepted or 0 for r in lines)
        dr = sum(r.drafted or 0 for r in lines)
        if dr == 0:
            raise WmtpError("vLLM lines report no drafted tokens")
        raise WmtpError("vLLM lines without per-position rates give only the draft acceptance rate "
                        f"({acc / dr:.3f}); rerun with a vLLM that logs per-position acceptance")
    reached = [0.0] * (k + 1)  # reached[i]: drafts that accepted at least i tokens
    for r in lines:
        if len(r.per_position) != k or not r.drafted:
            continue
        drafts = r.drafted / k
        reached[0] += drafts
        for i, rate in enumerate(r.per_position):
            reached[i + 1] += rate * drafts
    hist = [reached[i] - reached[i + 1] for i in range(k)] + [reached[k]]
    return from_histogram([max(h, 0.0) for h in hist], source)


def compare(native: AcceptanceProfile, window: AcceptanceProfile) -> list[dict]:
    """Position by position: alpha_j of each, and whether they differ at the 5 % level
    (two-proportion z-test; needs counts on both sides)."""
    rows = []
    for j in range(1, max(len(native.alphas), len(window.alphas)) + 1):
        row = {"position": j}
        for name, prof in (("native", native), ("window", window)):
            row[name] = prof.alphas[j - 1] if j <= len(prof.alphas) else math.nan
        if native.counts and window.counts and j < len(native.counts) and j < len(window.counts):
            n1, s1 = sum(native.counts[j - 1:]), sum(native.counts[j:])
            n2, s2 = sum(window.counts[j - 1:]), sum(window.counts[j:])
            if n1 and n2:
                p = (s1 + s2) / (n1 + n2)
                se = math.sqrt(max(p * (1 - p) * (1 / n1 + 1 / n2), 1e-300))
                z = (s1 / n1 - s2 / n2) / se
                row.update(z=z, significant=abs(z) > 1.959964,
                           native_ci=wilson_interval(s1, n1), window_ci=wilson_interval(s2, n2))
        rows.append(row)
    return rows
