"""Serving logs: SGLang scheduler decode lines and vLLM speculative-decoding metric lines, streamed.

Line formats (as printed by the engines; examples from the public sglang and vLLM repositories):
  SGLang  `[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13,
           accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0`
          (sgl-project/sglang PR #6081); `Decode batch,` and `Decode batch [N],` spellings; dense runs
          without `accept len` (PR #22331); hybrid models log `#full token`, `full token usage`,
          `mamba num`, `mamba usage` instead of `#token` / `token usage`; `accept rate` may follow.
  vLLM    `SpecDecoding metrics: Mean acceptance length: 1.00, Accepted: 0 tokens, Drafted: 670 tokens,
          Per-position acceptance rate: 0.000, ...` and the older `Draft acceptance rate: 100.0%,
          Accepted: 66 tokens, Drafted: 66 tokens` (vllm-project/vllm PR #15902).
Anything else is skipped and counted; a line that starts like one of these but does not parse is
counted as garbled. Files may be gzip-compressed.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from wmtp.errors import WmtpError

_KV = re.compile(r"\s*([#A-Za-z][^:,]*?)\s*:\s*([^,]+?)\s*(?:,|$)")
_NUM = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass
class DecodeLine:
    line_no: int
    time: str | None
    running: int
    tokens: int | None
    accept_len: float | None
    accept_rate: float | None
    gen_throughput: float
    cuda_graph: bool | None
    queue: int | None


@dataclass
class VllmSpecLine:
    line_no: int
    mean_al: float | None
    accepted: int | None
    drafted: int | None
    per_position: list[float] = field(default_factory=list)


@dataclass
class ParseStats:
    lines: int = 0
    decode: int = 0
    vllm: int = 0
    garbled: int = 0
    skipped: int = 0


def open_text(path: str | Path):
    p = Path(path)
    try:
        if p.suffix == ".gz":
            return gzip.open(p, "rt", errors="replace")
        return open(p, errors="replace")
    except OSError as e:
        raise WmtpError(f"cannot read {p}: {e.strerror or e}") from None


def _fields(rest: str) -> dict:
    return {k.strip().lower(): v.strip() for k, v in _KV.findall(rest)}


def _float(d: dict, *keys) -> float | None:
    """The first of `keys` present in `d`, as a number (vLLM fields carry units: '66 tokens')."""
    for k in keys:
        v = _num(d.get(k))
        if v is not None:
            return v
    return None


def _num(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        m = _NUM.match(v)
        return float(m.group(0)) if m else None


def parse_sglang(line: str, line_no: int) -> DecodeLine | None:
    """One scheduler decode line, or None when it is truncated or garbled (string splits, no regex:
    this runs on every line of multi-GB logs)."""
    k = line.find("#running-req", line.find("Decode batch"))
    if k < 0:
        return None
    d = {}
    for part in line[k:].rstrip().split(", "):
        key, sep, val = part.partition(": ")
        if sep:
            d[key] = val
    running, thr = _num(d.get("#running-req")), _num(d.get("gen throughput (token/s)"))
    if running is None or thr is None:
        return None
    tokens = _num(d.get("#token", d.get("#full token")))
    queue = _num(d.get("#queue-req"))
    cg = d.get("cuda graph")
    ts = line[1:20] if line.startswith("[") and line[5:6] == "-" else None
    return DecodeLine(line_no, ts, int(running), None if tokens is None else int(tokens), _num(d.get("accept len")),
                      _num(d.get("accept rate")), thr, None if cg is None else cg == "True",
                      None if queue is None else int(queue))


def parse_vllm(line: str, line_no: int) -> VllmSpecLine | None:
    rest = line[line.find("SpecDecoding metrics:") + 21:]
    pos = []
    k = rest.find("Per-position acceptance rate:")
    if k >= 0:
        tail = rest[k + 29:]
        pos = [float(x) for x in re.findall(r"\d+\.\d+|\d+", tail.split(", Avg")[0])]
        rest = rest[:k]
    d = _fields(rest)
    acc, dr = _float(d, "accepted"), _float(d, "drafted")
    if acc is None or dr is None:
        return None
    return VllmSpecLine(line_no, _float(d, "mean acceptance length"), int(acc), int(dr), pos)


# (substring that marks a line, its parser, the ParseStats counter of parsed lines)
_KINDS = (("Decode batch", parse_sglang, "decode"), ("SpecDecoding metrics:", parse_vllm, "vllm"))


def stream(path: str | Path, stats: ParseStats | None = None) -> Iterator[DecodeLine | VllmSpecLine]:
    """Parsed records of one log, in order; `stats` counts what was read, skipped and garbled."""
    stats = stats if stats is not None else ParseStats()
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            stats.lines += 1
            for marker, parse, counter in _KINDS:
                if marker in line:
                    rec = parse(line, n)
                    if rec is None:
                        stats.garbled += 1
                    else:
                        setattr(stats, counter, getattr(stats, counter) + 1)
                        yield rec
                    break
            else:
                stats.skipped += 1
