"""Seeded Monte Carlo decode: N output tokens of one request, step by step.

Each speculative step proposes gamma = d - 1 draft tokens; position j is accepted with probability
alpha_j (the acceptance profile in force at that point of the decode) until the first rejection,
and the step emits the accepted tokens plus the bonus token. A recorded per-step trace (accepted
counts) can replace the draws. Each step costs the latency model's step at its depth. TPOT is the
total time over the tokens emitted, with a 95 % confidence interval from batch means (20 batches of
consecutive steps) for that ratio estimator: the interval is centred on the point TPOT (delta method:
the batches' residuals ms_b - TPOT * tokens_b), so it always contains it, also when acceptance changes
over the decode. At most `MAX_TOKENS` output tokens (a hostile count is an error, not an hour).

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

from wmtp.acceptance import MAX_DEPTH
from wmtp.errors import WmtpError
from wmtp.units import ascii_number, parse_whole, split_list
from wmtp import defaults

MAX_TOKENS = 1_000_000  # output tokens one simulation decodes (about 2 s in pure Python)
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
    capped_steps: int = 0  # trace steps whose recorded count exceeded that step's d - 1 (`trace_cap_warning`)


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
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or not 1 <= n_tokens <= MAX_TOKENS:
        raise WmtpError(f"simulate decodes 1..{MAX_TOKENS:,} output tokens, got {n_tokens!r}")
    if not phases and trace is None:
        raise WmtpError("simulate needs an acceptance profile or a recorded trace")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:  # random.Random(-5) draws what Random(5) does
        raise WmtpError(f"--seed must be a non-negative integer, got {seed!r} (a negative seed draws what its "
                        "absolute value draws: two seeds, one sample)")
    adaptive = policy == "adaptive"
    if not adaptive and (isinstance(policy, bool) or not isinstance(policy, int) or not 1 <= policy <= MAX_DEPTH):
        raise WmtpError(f"policy must be a depth d in 1..{MAX_DEPTH} or 'adaptive', got {policy!r}")
    rng = random.Random(seed)
    cost = {d: step_ms(d) for d in (depths if adaptive else [policy])}
    depth = (depths[len(depths) // 2] if adaptive else policy)
    est = [0.7] * (max(depths) if adaptive else max(policy, 1))  # per-position estimate (adaptive)
    emitted, steps, total, capped = 0, 0, 0.0, 0
    per_step = []  # (tokens, ms)
    hist: dict = {}
    while emitted < n_tokens:
        gamma = depth - 1
        if trace is not None:
            recorded = int(trace[steps % len(trace)])
            accepted = min(recorded, gamma)
            capped += recorded > gamma
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
    return SimResult(str(policy), emitted, steps, total, tpot, _batch_means_ci(per_step), emitted / steps, hist,
                     capped)


def trace_cap_warning(trace: Sequence[int] | None, res: SimResult) -> list[str]:
    """Trace steps that accepted more draft tokens than the step's depth drafts (d - 1; adaptive: the depth in use
    then) were capped there (`simulate`): said out loud, with how many, since a trace recorded at a deeper depth says
    less about a shallower one than its counts suggest."""
    if trace is None or not res.capped_steps:
        return []
    at = (f"d - 1 = {int(res.policy) - 1}" if res.policy != "adaptive" else "the d - 1 of the depth in use")
    return [f"{res.capped_steps:,} of the decode's {res.steps:,} steps took a trace count above {at} (the trace "
            f"holds counts up to {max(trace)}): they were capped there, as a step drafts no more; the trace was "
            "likely recorded at a deeper depth, and its counts capped approximate what this depth would accept"]


def trace_replay_warning(trace: Sequence[int] | None, steps: int, tokens: int) -> list[str]:
    """A trace shorter than the decode is replayed from its start (step i takes trace[i % len(trace)]): said out loud,
    since the replays are no new measurements and the 95 % interval counts them as steps of their own."""
    if trace is None or steps <= len(trace):
        return []
    return [f"the trace holds {len(trace):,} steps and the decode of {tokens:,} tokens took {steps:,}: the trace was "
            f"replayed from its start ({steps / len(trace):.1f} times), and the 95 % CI counts the replays as new "
            "steps; give --tokens no more than the trace decodes, or a longer trace"]


def _batch_means_ci(per_step: list, batches: int = 20) -> tuple[float, float]:
    """95 % interval of TPOT = sum(ms) / sum(tokens) from `batches` batches of consecutive steps: the
    ratio estimator's delta-method variance, var = sum_b (ms_b - R tok_b)^2 / (B (B - 1) mean(tok)^2),
    with Student's t at B - 1 degrees of freedom. (nan, nan) below two steps per batch."""
    if len(per_step) < 2 * batches:
        return (math.nan, math.nan)
    size = len(per_step) // batches
    sums = []
    for b in range(batches):
        chunk = per_step[b * size:(b + 1) * size] if b < batches - 1 else per_step[b * size:]
        sums.append((sum(t for t, _ in chunk), sum(ms for _, ms in chunk)))
    tok = sum(t for t, _ in sums)
    ratio = sum(ms for _, ms in sums) / tok
    mean_tok = tok / batches
    resid = sum((ms - ratio * t) ** 2 for t, ms in sums)
    half = 2.093 * math.sqrt(resid / (batches * (batches - 1))) / mean_tok  # t(0.975, 19)
    return (ratio - half, ratio + half)


def parse_phases(text: str) -> list[Phase]:
    """`--phases ALPHA:TOKENS,...`: a constant per-position acceptance for each phase of the decode."""
    try:  # TOKENS in plain digits: int() also read '1_000' and '+7'
        ph = [(parse_whole(t, "--phases"), [float(ascii_number(a))] * 16)
              for a, t in (p.split(":") for p in split_list(text, "--phases"))]
    except (ValueError, WmtpError):
        raise WmtpError(f"--phases takes ALPHA:TOKENS,... (TOKENS in plain digits), got {text[:80]!r}") from None
    if any(not 0 <= a[0] <= 1 or not 1 <= t <= MAX_TOKENS for t, a in ph):  # NaN fails 0 <= a
        raise WmtpError(f"--phases: alpha in [0, 1] and tokens in 1..{MAX_TOKENS:,}")
    return ph


def read_trace(path) -> list[int]:
    """A recorded trace: accepted draft tokens per step, one non-negative integer a line."""
    from wmtp.fileio import read_text

    text = read_text(path, "trace", WmtpError)
    words = text.split()
    bad = next((w for w in words if not (w.isascii() and w.isdigit())), None)  # int() also reads '1_0', '+1', '²'
    if bad is not None:
        raise WmtpError(f"cannot read trace {path}: {bad[:40]!r} is not a count of accepted draft tokens (one "
                        "non-negative integer a line)")
    if not words:
        raise WmtpError(f"trace {path} holds no non-negative accepted counts")
    # a step accepts at most gamma = d - 1 drafts; more was clamped, silently (and int() of 4300 digits is a ValueError)
    counts = [w.lstrip("0") or "0" for w in words]
    big = next((w for w in counts if len(w) > 4 or int(w) > MAX_DEPTH - 1), None)
    if big is not None:
        raise WmtpError(f"trace {path}: a step with {big if len(big) <= 20 else big[:17] + '...'} accepted draft "
                        f"tokens; a draft of d <= {MAX_DEPTH} accepts at most {MAX_DEPTH - 1} a step")
    return [int(w) for w in counts]


class StepTimes:
    """step(d) in ms of `method` in scenario `sc` (a `wmtp.decisions.Scenario`), priced once per depth; `sources`
    says where those prices come from (measured, interpolated, ...). With `profile` (the acceptance the decode
    draws from), each depth's draft extend runs over that profile's AL(d) accepted tokens, as `wmtp predict` prices
    it, so that a long simulation converges to predict's TPOT; without one, over d tokens (every draft accepted:
    the costliest extend)."""

    def __init__(self, sc, method: str, profile=None):
        self.sc, self.method, self.profile, self._priced = sc, method, profile, {}

    def _at(self, d: int) -> tuple:
        if d not in self._priced:
            al = self.profile.accept_length(d) if self.profile is not None else float(d)
            self._priced[d] = self.sc.priced(self.method, None, depth=d, accept_length=al if d > 1 else 1.0)
        return self._priced[d]

    def __call__(self, d: int) -> float:
        return self._at(d)[1]

    def sources(self, depths) -> dict[int, str]:
        return {d: self._at(d)[3] for d in sorted(depths)}


def step_time_fn(sc, method: str, profile=None) -> StepTimes:
    return StepTimes(sc, method, profile)


def phase_weights(phases: Sequence[Phase], n_tokens: int | None) -> list[int]:
    """The output tokens each phase governs in a decode of `n_tokens` (`_alphas_at`: the last phase runs on to the
    end, a phase past the end governs none); without `n_tokens`, each phase's own length."""
    if n_tokens is None:
        return [t for t, _ in phases]
    starts = [sum(t for t, _ in phases[:i]) for i in range(len(phases))]
    ends = starts[1:] + [max(n_tokens, starts[-1])]
    return [max(0, min(e, n_tokens) - min(s, n_tokens)) for s, e in zip(starts, ends)]


def decode_profile(phases: Sequence[Phase] | None, trace: Sequence[int] | None, depth: int = MAX_DEPTH,
                   n_tokens: int | None = None):
    """The acceptance a simulated decode draws from, as one profile (`wmtp.acceptance.AcceptanceProfile`) that
    prices its steps' draft extend (`StepTimes`): a recorded trace's accepted counts as a histogram, else the phases'
    per-position alphas weighted by the tokens each phase governs in a decode of `n_tokens` (`phase_weights`: the
    phases' stated lengths priced a phase the decode never reached, and cut the last one short)."""
    from wmtp.acceptance import AcceptanceProfile, from_histogram

    if trace is not None:
        counts = [0.0] * min(max(trace) + 2, MAX_DEPTH)  # one empty bin past the most accepted: nothing deeper
        for n in trace:
            counts[n] += 1
        return from_histogram(counts, "the recorded trace")
    weights = phase_weights(phases, n_tokens)
    total = sum(weights)
    alphas = [sum(w * a[min(j, len(a) - 1)] for w, (_, a) in zip(weights, phases) if a) / total
              for j in range(depth - 1)]
    return AcceptanceProfile(tuple(min(1.0, max(0.0, a)) for a in alphas), depth, "the simulated phases")
