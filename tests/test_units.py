import pytest
from hypothesis import given, strategies as st

from wmtp.errors import WmtpError
from wmtp.units import format_bytes, format_tokens, parse_tokens


@pytest.mark.parametrize(
    "text, expected",
    [("1048576", 1048576), ("256K", 262144), ("1M", 1048576), ("1m", 1048576), ("1.04M", round(1.04 * 2**20)),
     ("64k", 65536), (" 2M ", 2 * 2**20), ("1G", 2**30), (4096, 4096)],
)
def test_parse_tokens(text, expected):
    assert parse_tokens(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1T", "-5", "0", "1.5", "1e6", "1 M tokens", "K"])
def test_parse_tokens_rejects(text):
    with pytest.raises(WmtpError, match="token count"):
        parse_tokens(text)


@given(st.integers(min_value=1, max_value=2**34))
def test_format_parse_round_trip_exact(n):
    text = format_tokens(n)
    back = parse_tokens(text)
    if "." in text:  # rounded display: within half a unit of the last digit
        assert abs(back - n) <= 0.006 * n
    else:
        assert back == n


@given(st.integers(min_value=1, max_value=4096), st.sampled_from(["K", "M"]))
def test_suffix_round_trip(k, suffix):
    n = parse_tokens(f"{k}{suffix}")
    assert n == k * (1024 if suffix == "K" else 1024**2)
    assert parse_tokens(format_tokens(n)) == n


def test_format_bytes():
    assert format_bytes(2 * 1024**3) == "2.00 GiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(-1024) == "-1.00 KiB"


def test_token_counts_are_bounded():
    import pytest

    from wmtp.errors import WmtpError
    from wmtp.units import MAX_TOKENS, format_bytes, parse_tokens

    assert parse_tokens("16G") == MAX_TOKENS
    for text in ("17G", "99999999999999999999999999G", "1" * 400):
        with pytest.raises(WmtpError, match="token count"):
            parse_tokens(text)
    assert format_bytes(150 * 1024**3, 0) == "150 GiB" and format_bytes(150 * 1024**3) == "150.00 GiB"
