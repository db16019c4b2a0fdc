"""A log line's prefix, what precedes its message: the timestamp (and its seconds), the process id, the DP rank
(`prefix_fields`; the per-line reader `wmtp.logs` and the block reader `wmtp.log_blocks`, which finds the same regexes'
matches in a prefix's skeleton, share these)."""

from __future__ import annotations

import re

from wmtp.log_records import day_seconds

TIME_RE = re.compile(r"(?:(\d{4})-(\d\d)-(\d\d)[ T]|(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)")
PID_RE = re.compile(r"pid=(\d+)|INFO (\d+) \[")
DP_RE = re.compile(r"DP(\d{1,9})(?!\d)")  # (a rank of thousands of digits: none, not an int() error)

_prefix_cache: list = [None, (None, None, None, None)]


def prefix_fields(prefix: str) -> tuple[str | None, float | None, str | None, int | None]:
    """(timestamp text, seconds, pid, DP rank) from what precedes the message; consecutive lines share it."""
    if prefix == _prefix_cache[0]:
        return _prefix_cache[1]
    m = TIME_RE.search(prefix)
    ts = secs = None
    if m:
        y, mo, d, mo2, d2, hh, mm, ss = m.groups()
        secs = int(hh) * 3600 + int(mm) * 60 + int(ss)
        if y or mo2:
            secs += day_seconds(y or "1970", mo or mo2, d or d2)
        ts = m.group(0)
    p = PID_RE.search(prefix)
    dp = DP_RE.search(prefix)
    out = (ts, secs, (p.group(1) or p.group(2)) if p else None, int(dp.group(1)) if dp else None)
    _prefix_cache[0], _prefix_cache[1] = prefix, out
    return out
