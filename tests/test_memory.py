import pytest
from hypothesis import given, strategies as st

from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.memory import memory_report, request_memory
from wmtp.models import MODELS, get_model


@pytest.mark.parametrize("key, share", [("q122", 0.077), ("q35", 0.091), ("nem", 0.111)])
def test_draft_pool_share_matches_paper(key, share):
    rep = memory_report(get_model(key), get_hardware("h200"), 2**20)
    assert round(rep.draft_pool_share, 3) == share


@given(st.sampled_from(sorted(MODELS)), st.integers(1, 2**22))
def test_draft_pool_share_is_one_over_f_plus_one(key, ctx):
    spec = get_model(key)
    rep = memory_report(spec, get_hardware("b200"), ctx)
    assert rep.draft_pool_share == pytest.approx(1 / (spec.n_full_attn + 1))


def test_request_memory_formulas():
    spec = get_model("q35")
    nat = request_memory(spec, "native", 2**20, 4032, 64, 7)
    assert nat.target_kv_bytes == 10 * 2048 * 2**20
    assert nat.draft_kv_bytes == 2048 * 2**20
    assert nat.state_bytes == 30 * spec.state_bytes_per_layer
    win = request_memory(spec, "window", 2**20, 4032, 64, 7, tree_width=4)
    assert win.draft_kv_bytes == 2048 * (64 + 4032 + 7 * 4)
    # A window that covers the context is the native draft: its KV, no ring (issue 14).
    short = request_memory(spec, "window", 100, 4032, 64, 7)
    assert short.draft_kv_bytes == 2048 * 100
    assert request_memory(spec, "dense", 2**20, 4032, 64, 7).draft_kv_bytes == 0


def test_window_seats_at_least_as_many_and_reclaims():
    rep = memory_report(get_model("q35"), get_hardware("b200"), 2**20)
    assert rep.max_batch["window"] >= rep.max_batch["native"]
    assert rep.reclaimable_bytes == pytest.approx(2048 * (2**20 - (64 + 4032 + 7)))
    # Budget arithmetic by hand for the window method.
    per = rep.per_request["window"].total_bytes
    assert rep.max_batch["window"] == int(rep.budget_bytes["window"] // per)


def test_model_too_large_seats_nothing():
    rep = memory_report(get_model("glm45"), get_hardware("h200"), 2**20)
    assert rep.max_batch == {"dense": 0, "native": 0, "window": 0}


def test_fp8_kv_halves_bytes_not_entries():
    spec = get_model("q35")
    bf = memory_report(spec, get_hardware("h200"), 2**20)
    f8 = memory_report(spec.with_dtypes(kv_dtype="fp8"), get_hardware("h200"), 2**20)
    assert f8.reclaimable_bytes == pytest.approx(bf.reclaimable_bytes / 2)
    assert f8.ring_slots == bf.ring_slots


def test_bad_memory_arguments():
    with pytest.raises(WmtpError, match="mem_fraction"):
        memory_report(get_model("q35"), get_hardware("h200"), 1000, mem_fraction=1.5)


def test_window_covering_the_context_reclaims_nothing_and_has_no_ring():
    rep = memory_report(get_model("q35"), get_hardware("h200"), 4096, 4032, 64, 7)
    assert rep.ring_slots == 0
    assert rep.reclaimable_bytes == 0
    assert rep.max_batch["window"] == rep.max_batch["native"]
