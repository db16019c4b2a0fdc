"""Seeded Monte Carlo decode: N output tokens of one request, step by step.

Each speculative step proposes gamma = d - 1 draft tokens; position j is accepted with probability
alpha_j (the acceptance profile in force at that point of the decode) until the first rejection,
and the step emits the accepted tokens plus the bonus token. A recorded per-step trace (accepted
counts) can replace the draws. Each step costs the latency model's step at its depth. TPOT is the
total time over the tokens emitted, with a 95 % confidence interval from batch means (20 batches).

Policies: a fixed depth, or `adaptive`: every `window_steps` steps it re-estimates the per-position
acceptance from what it has seen (exponentially weighted) and moves d by one toward the depth that
minimises step(d) / AL(d) on that estimate: it raises d while the marginal accepted length pays for
the marginal draft cost and lowers it when acceptance falls.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

from wmtp.errors import WmtpError
from wmtp import defaults

Phase = tuple[int, Sequence[float]]  # (tokens this phase lasts, alphas per position)


@dataclass
class SimResult:
    policy: str
    tokens: int
    steps: int
    total_ms: float
    tpot_ms: float
    tpot_ci95: tuple[float, float]
    mean_accept_length: float
    depth_histogram: dict = field(default_factory=dict)


def _alphas_at(phases: Sequence[Phase], emitted: int) -> Sequence[float]:
    done = 0
    for length, alphas in phases:
        done += length
        if emitted < done:
            return alphas
    return phases[-1][1]


def _al(alphas: Sequence[float], depth: int) -> float:
    al, run = 1.0, 1.0
    for j in range(depth - 1):
        run *= alphas[min(j, len(alphas) - 1)] if alphas else 0.0
        al += run
    return al


def simulate(step_ms: Callable[[int], float], phases: Sequence[Phase], n_tokens: int, policy: int | str = 7,
             seed: int = 0, trace: Sequence[int] | None = None, depths: Sequence[int] = defaults.DEPTH_GRID,
             window_steps: int = 16, ewma: float = 0.1) -> SimResult:
    if n_tokens < 1:
        raise WmtpError("simulate needs at least one output token")
    if not phases and trace is None:
        raise WmtpError("simulate needs an acceptance profile or a recorded trace")
    adaptive = policy == "adaptive"
    if not adaptive and (not isinstance(policy, int) or policy < 1):
        raise WmtpError(f"policy must be a depth d >= 1 or 'adaptive', got {policy!r}")
    rng = random.Random(seed)
    cost = {d: step_ms(d) for d in (depths if adaptive else [policy])}
    depth = (depths[len(depths) // 2] if adaptive else policy)
    est = [0.7] * (max(depths) if adaptive else max(policy, 1))  # per-position estimate (adaptive)
    emitted, steps, total = 0, 0, 0.0
    per_step = []  # (tokens, ms)
    hist: dict = {}
    while emitted < n_tokens:
        gamma = depth - 1
        if trace is not None:
            accepted = min(int(trace[steps % len(trace)]), gamma)
        else:
            alphas = _alphas_at(phases, emitted)
            accepted = 0
            while accepted < gamma and rng.random() < alphas[min(accepted, len(alphas) - 1)]:
                accepted += 1
        tokens = accepted + 1
        ms = cost[depth]
        per_step.append((tokens, ms))
        emitted += tokens
        total += ms
        steps += 1
        hist[depth] = hist.get(depth, 0) + 1
        if adaptive:
            for j in range(min(accepted + 1, gamma)):  # positions this step reached: j accepted iff j < accepted
                est[j] += ewma * ((1.0 if j < accepted else 0.0) - est[j])
            if steps % window_steps == 0:
                score = {d: cost[d] / _al(est, d) for d in depths if abs(d - depth) <= 1}
                depth = min(score, key=score.get)
    tpot = total / emitted
    return SimResult(str(policy), emitted, steps, total, tpot, _batch_means_ci(per_step), emitted / steps, hist)


def _batch_means_ci(per_step: list, batches: int = 20) -> tuple[float, float]:
    if len(per_step) < 2 * batches:
        return (math.nan, math.nan)
    size = len(per_step) // batches
    vals = []
    for b in range(batches):
        chunk = per_step[b * size:(b + 1) * size]
        vals.append(sum(ms for _, ms in chunk) / sum(t for t, _ in chunk))
    mean = sum(vals) / batches
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (batches - 1))
    half = 2.093 * sd / math.sqrt(batches)  # t(0.975, 19)
    return (mean - half, mean + half)


def parse_phases(text: str) -> list[Phase]:
    """`--phases ALPHA:TOKENS,...`: a constant per-position acceptance for each phase of the decode."""
    try:
        ph = [(int(t), [float(a)] * 16) for a, t in (p.split(":") for p in text.split(","))]
    except ValueError:
        raise WmtpError(f"--phases takes ALPHA:TOKENS,..., got {text!r}") from None
    if any(not 0 <= a[0] <= 1 or t < 1 for t, a in ph):
        raise WmtpError("--phases: alpha in [0, 1] and tokens >= 1")
    return ph


def read_trace(path) -> list[int]:
    """A recorded trace: accepted draft tokens per step, one non-negative integer a line."""
    from pathlib import Path

    try:
        tr = [int(x) for x in Path(path).read_text().split()]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise WmtpError(f"cannot read trace {path}: {getattr(e, 'strerror', None) or e}") from None
    if not tr or min(tr) < 0:
        raise WmtpError(f"trace {path} holds no non-negative accepted counts")
    return tr


def step_time_fn(sc, method: str) -> Callable[[int], float]:
    """step(d) in ms of `method` in scenario `sc` (a `wmtp.decisions.Scenario`), cached per depth."""
    cache: dict[int, float] = {}

    def step_ms(d: int) -> float:
        if d not in cache:
            cache[d] = sc.tpot(method, None, depth=d, accept_length=float(d) if d > 1 else 1.0)[1]
        return cache[d]

    return step_ms
