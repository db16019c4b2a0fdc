"""Defaults shared by every layer: one place to read (and change) them.

The window and sink are the paper's (4032 + 64 = 4096 keys per draft step); d = 7 is its headline
depth; the depth grid is what `predict --depth auto`, `sweep depth`, `accept` and `simulate` search.
"""

from __future__ import annotations

WINDOW = 4032  # draft window W, tokens
SINK = 64  # attention-sink tokens n_sink
DEPTH = 7  # draft tokens per step d = gamma + 1
DEPTH_GRID = tuple(range(2, 11))  # depths searched for the best d
CTX_GRID = tuple(2**k for k in range(12, 23))  # 4K .. 4M, contexts `sweep ctx` prices
WINDOW_GRID = (256, 512, 1024, 2048, 4032, 8192, 16384, 65536, 262144)  # windows `sweep window` prices
TASK = "niah_multiquery_enum"  # the paper's headline task (acceptance presets)
# A first guess at a kernel's time from the bytes it moves (3 TB/s): sizes repetition counts before the
# first measurement; never a reported number.
GUESS_BYTES_PER_MS = 3e9


def guess_ms(nbytes: float) -> float:
    """Rough time of a memory-bound kernel moving `nbytes`, to size repetitions (not a prediction)."""
    return nbytes / GUESS_BYTES_PER_MS
