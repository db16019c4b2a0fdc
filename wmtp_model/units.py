"""Parsing and formatting of token counts and byte sizes.

Token counts use binary suffixes, as serving engines do: 1K = 1024, 1M = 1,048,576.
"""

from __future__ import annotations

import math
import re

from wmtp.errors import WmtpError

_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
MAX_TOKENS = 1 << 34  # 16G tokens: far past any model's context; more is a typo, not a question
_TOKENS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)\s*$", re.IGNORECASE | re.ASCII)


# C0 controls (newline, ESC, ...), DEL, C1 controls and Unicode's line / paragraph separators: none belongs in one
# line of terminal output
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """`text` with its control characters written as escapes ('\\n', '\\x1b'), for a line on a terminal: a newline in
    a path split one `error:` line in two, and an ESC from a config.json's architectures (or a folder name) reached the
    terminal as an escape sequence."""
    return _CONTROL_RE.sub(lambda m: repr(m.group())[1:-1], str(text))


def ascii_number(text: str) -> str:
    """`text`, for int() / float(), which also read other scripts' digits ('٣' and '３' are 3) and '_' separators
    ('0_5' is 5): a ValueError for those, as every other number option refuses them (`parse_whole`, LOG:D)."""
    if not str(text).isascii():
        raise ValueError(f"{text!r} is not written in ASCII digits")
    if "_" in str(text):  # float('0_5') is 5.0: a typo for 0.5 priced as 5
        raise ValueError(f"{text!r} is not a plain number (no '_' separators)")
    return text


def parse_tokens(text: str | int, what: str | None = None) -> int:
    """Parse `1048576`, `256K`, `1M`, `1.04M` (binary suffixes) into a positive token count; `what` (an option's
    name, e.g. '--window') leads the error, so a command with several counts says which one is wrong."""
    try:
        return _parse_tokens(text)
    except WmtpError as e:
        if what is None:
            raise
        raise WmtpError(f"{what}: {e}") from None


def _parse_tokens(text: str | int) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = _TOKENS_RE.match(str(text))
        if not m:
            raise WmtpError(
                f"cannot read {text!r} as a token count; use e.g. 1048576, 256K, 1M or 1.04M "
                "(K = 1024, M = 1048576)"
            )
        number, suffix = m.group(1), m.group(2).upper()
        if suffix == "" and "." in number:
            raise WmtpError(f"cannot read {text!r} as a token count: a plain count must be whole")
        if len(number) > 24:
            raise WmtpError(f"token count {text!r} is too long to be a token count")
        value = int(round(float(number) * _SUFFIX[suffix]))
    if value <= 0:
        raise WmtpError(f"token count must be positive, got {text!r}")
    if value > MAX_TOKENS:
        raise WmtpError(f"token count {text!r} is larger than {format_tokens(MAX_TOKENS)} tokens; wmtp models at most that")
    return value


def format_tokens(n: int) -> str:
    """Shortest exact binary-suffixed form (1048576 -> '1M', 262144 -> '256K'), else 2 decimals."""
    units = (("G", 1024**3), ("M", 1024**2), ("K", 1024))
    for suffix, scale in units:
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    for suffix, scale in units:
        if n >= scale:
            return f"{n / scale:.2f}{suffix}"
    return str(n)


def format_bytes(n: float, digits: int = 2) -> str:
    """Binary-prefixed bytes: 2147483648 -> '2.00 GiB' (`digits` decimals; 0: '2 GiB')."""
    if not math.isfinite(n):
        return str(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.{digits}f} {unit}"
        n /= 1024
    return f"{sign}{n:.{digits}f} TiB"  # pragma: no cover


_WHOLE_RE = re.compile(r"-?[0-9]{1,4000}")  # int() refuses more than 4300 digits: a ValueError, not an error line


def parse_whole(text: str | int, what: str) -> int:
    """An integer option as typed: plain ASCII digits (a leading '-' is read, so the option's own range check can name
    its bounds). int() would also read '1_000', '+7', ' 7 ' and other scripts' digits, none of which a count is
    written as. `what` (the option) leads the error."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not _WHOLE_RE.fullmatch(str(text)):
        shown = str(text) if len(str(text)) <= 40 else str(text)[:40] + "..."
        raise WmtpError(f"{what}: {shown!r} is not a whole number written in plain digits (e.g. 16)")
    return int(text)


def split_list(text: str, what: str) -> list[str]:
    """The items of a comma-separated option, stripped; an empty item ('3,,5', a trailing comma) is an error naming
    it, not dropped: it is a typo for a value the user meant to give."""
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise WmtpError(f"{what} is empty; give one or more comma-separated values")
    empty = next((i for i, p in enumerate(parts) if not p), None)
    if empty is not None:
        shown = str(text) if len(str(text)) <= 60 else str(text)[:60] + "..."
        raise WmtpError(f"{what} {shown!r} has an empty item (item {empty + 1} of {len(parts)}); remove the extra "
                        "comma or give the value")
    return parts


def parse_int_list(text: str, *, what: str, whole: bool = False) -> list[int]:
    """Comma-separated token counts: '64K,256K,1M'; `whole`: plain positive integers (depths, batch sizes: no
    suffix)."""
    parts = split_list(text, what)
    if len(parts) > 1000:
        raise WmtpError(f"{what}: at most 1000 values, got {len(parts)}")
    values = [parse_whole(p, what) for p in parts] if whole else [parse_tokens(p, what) for p in parts]
    if whole and min(values) <= 0:
        raise WmtpError(f"{what}: values must be positive, got {min(values)}")
    twice = first_repeat(values)
    if twice is not None:  # '1M,1M' measured (on the GPU) and reported the same point twice
        raise WmtpError(f"{what} lists {format_tokens(twice)} twice; give each value once")
    return values


def first_repeat(items):
    """The first item of `items` that an earlier one equals, or None: a list option that names a value twice."""
    seen = set()
    for v in items:
        if v in seen:
            return v
        seen.add(v)
    return None
