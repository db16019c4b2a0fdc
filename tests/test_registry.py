import dataclasses

import pytest

from wmtp.errors import UnknownSpecError, WmtpError
from wmtp.hardware import HARDWARE, HardwareSpec, get_hardware
from wmtp.models import MODELS, build_registry, get_model

# Published parameter counts (the number in the model name, MTP head excluded), in billions.
PUBLISHED_B = {"q35": 35, "q122": 122, "nem": 120, "qnext": 80, "dsv3": 671, "glm45": 355, "mimo7b": 7.6}


def test_registry_has_every_model_and_gpu():
    assert set(MODELS) == {"q35", "q122", "nem", "qnext", "dsv3", "glm45", "mimo7b"}
    assert set(HARDWARE) == {"h100-sxm", "h200", "b200", "gb200", "b300", "mi300x"}


@pytest.mark.parametrize("key", sorted(PUBLISHED_B))
def test_parameter_counts_match_published_sizes(key):
    spec = get_model(key)
    assert spec.target_params / 1e9 == pytest.approx(PUBLISHED_B[key], rel=0.05)
    assert 0 < spec.mtp_params < 0.1 * spec.target_params


@pytest.mark.parametrize(
    "key, kv_bytes, state_mib",
    [("q35", 2048, 60), ("q122", 2048, 144), ("nem", 1024, 160), ("qnext", 2048, 72), ("dsv3", 1152, 0),
     ("glm45", 4096, 0), ("mimo7b", 4096, 0)],
)
def test_kv_and_state_bytes_match_reference(key, kv_bytes, state_mib):
    spec = get_model(key)
    assert spec.kv_bytes_per_token_layer == kv_bytes
    assert spec.n_linear * spec.ssm_state_bytes_per_layer == state_mib * 2**20


def test_kv_formula_is_2_x_kvheads_x_headdim_x_dtype():
    spec = get_model("q35")
    assert spec.kv_bytes_per_token_layer == 2 * spec.kv_heads * spec.head_dim * 2
    assert spec.with_dtypes(kv_dtype="fp8").kv_bytes_per_token_layer == spec.kv_bytes_per_token_layer / 2


def test_unknown_keys_list_known_ones():
    with pytest.raises(UnknownSpecError, match="known: q35, q122"):
        get_model("llama")
    with pytest.raises(UnknownSpecError, match="h200"):
        get_hardware("tpu")


def test_registry_rejects_duplicates_and_is_immutable():
    row = get_model("q35")
    with pytest.raises(WmtpError, match="duplicate"):
        build_registry([row, row], "model")
    with pytest.raises(TypeError):
        MODELS["x"] = row  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.hidden = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "change, message",
    [({"q_heads": 15}, "multiple of kv_heads"), ({"n_full_attn": 0}, "F >= 1"), ({"weight_dtype": "int3"}, "weight_dtype"),
     ({"top_k": 0}, "top_k"), ({"linear_kind": None}, "linear_kind"), ({"hidden": 0}, "hidden")],
)
def test_model_rows_are_validated(change, message):
    with pytest.raises(WmtpError, match=message):
        dataclasses.replace(get_model("q35"), **change)


def test_hardware_rows_are_validated():
    h = get_hardware("h200")
    with pytest.raises(WmtpError, match="bw_eff"):
        dataclasses.replace(h, bw_eff=1.5)
    with pytest.raises(WmtpError, match="hbm_bw_tbps"):
        dataclasses.replace(h, hbm_bw_tbps=0)
    assert isinstance(h, HardwareSpec) and h.source
