import math

import pytest
from hypothesis import given, strategies as st

from wmtp.acceptance import (AcceptanceProfile, alpha_intervals, choose_acceptance, from_histogram, geometric,
                             wilson_interval)
from wmtp.errors import WmtpError


def test_histogram_of_a_geometric_chain_has_closed_form_alphas():
    # Each position accepted with prob a independently until the first rejection, gamma = 4:
    # P(n) = a^n (1 - a) for n < 4, P(4) = a^4. Then alpha_j = a and AL = 1 + a + a^2 + a^3 + a^4.
    a, n_steps = 0.6, 10**6
    h = [a**n * (1 - a) * n_steps for n in range(4)] + [a**4 * n_steps]
    prof = from_histogram(h, "test")
    assert prof.alphas == pytest.approx([a] * 4)
    assert prof.accept_length(5) == pytest.approx(1 + a + a**2 + a**3 + a**4)


def test_alpha_definition_on_small_histogram():
    prof = from_histogram([10, 20, 30, 40], "test")  # 100 steps, gamma = 3
    assert prof.alphas == pytest.approx([90 / 100, 70 / 90, 40 / 70])
    # AL = mean of (n + 1) over steps
    assert prof.accept_length(4) == pytest.approx((10 * 1 + 20 * 2 + 30 * 3 + 40 * 4) / 100)


@given(st.lists(st.integers(0, 1000), min_size=2, max_size=12).filter(lambda h: sum(h) > 0))
def test_accept_length_in_one_to_d_and_equals_mean_emitted(h):
    prof = from_histogram(h, "test")
    d = len(h)
    al = prof.accept_length(d)
    assert 1 - 1e-12 <= al <= d + 1e-12
    assert al == pytest.approx(sum((n + 1) * c for n, c in enumerate(h)) / sum(h))
    assert prof.accept_length(d + 3) >= al - 1e-12  # deeper never emits fewer
    assert prof.is_extrapolated(d + 1) and not prof.is_extrapolated(d)


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(50, 100)
    assert (lo, hi) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_intervals_contain_alpha():
    prof = from_histogram([5, 10, 40, 45], "test")
    for alpha, lo, hi in alpha_intervals(prof):
        assert lo <= alpha <= hi


@given(st.integers(2, 12), st.floats(0, 1))
def test_geometric_profile_reproduces_its_al(d, frac):
    al = 1 + frac * (d - 1)
    prof = geometric(al, d, "flag")
    assert prof.accept_length(d) == pytest.approx(al, abs=1e-9)
    assert prof.is_extrapolated(d + 1) and not prof.is_extrapolated(d)
    if d > 2:  # a geometric fit is exact only at the depth it was fitted
        assert prof.is_extrapolated(d - 1)


def test_geometric_rejects_impossible_al():
    with pytest.raises(WmtpError, match=r"\[1, d\]"):
        geometric(7.5, 7, "x")
    with pytest.raises(WmtpError, match=r"non-negative|counts in \[0"):  # acceptance.py words it either way
        from_histogram([-1, 2], "x")
    with pytest.raises(WmtpError):
        AcceptanceProfile((1.2,), 2, "x")


def test_choice_order_flag_then_preset_then_generic():
    flag = choose_acceptance("q35", 7, (3.0, 3.5))
    assert flag.native.accept_length(7) == pytest.approx(3.0) and "accept-length" in flag.native.source
    preset = choose_acceptance("q35", 7, None)
    assert preset.native.accept_length(7) == pytest.approx(4.49)
    assert preset.window.accept_length(7) == pytest.approx(4.74)
    assert preset.warning is None and "preset" in preset.native.source
    generic = choose_acceptance("mimo7b", 7, None)
    assert generic.warning and "mimo7b" in generic.warning
    assert generic.native.accept_length(7) == generic.window.accept_length(7)
