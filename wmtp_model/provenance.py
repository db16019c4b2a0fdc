"""Where a number comes from, as a value: an `Origin` (what kind of evidence) and the text a user reads.

`Source` is a `str` (its text is what `--json` prints, unchanged) that also carries its `origin` and, for a
sum of parts, the `parts`; renderers ask `weakest()` instead of searching the text. A number is only as
measured as its least measured part.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Iterable


class Origin(Enum):
    MEASURED = "measured"  # a shape of this model that was timed
    INTERPOLATED = "interpolated"  # inside the measured range of bytes and flops
    EXTRAPOLATED = "extrapolated"  # outside it, holding the fitted rates
    SCALED = "scaled"  # measured on another GPU, scaled by bandwidth and flop ratios
    SPEED_OF_LIGHT = "speed-of-light"  # datasheet bandwidth and flops
    ANALYTICAL = "analytical"  # a model with no measurement behind it (e.g. the TP ring model)
    ENGINE = "engine preset"  # a fitted serving-engine term
    FRAMEWORK = "framework profile"  # fitted from the user's own logs
    NONE = "none"


# Weakest first: what a combined number is tagged with.
WEAKEST_FIRST = (Origin.ENGINE, Origin.SCALED, Origin.EXTRAPOLATED, Origin.SPEED_OF_LIGHT, Origin.ANALYTICAL,
                 Origin.INTERPOLATED, Origin.FRAMEWORK, Origin.MEASURED, Origin.NONE)


class Source(str):
    """A source text with its origin (and parts, when it sums several)."""

    origin: Origin
    parts: tuple

    def __new__(cls, text: str, origin: Origin, parts: tuple = ()) -> "Source":
        obj = super().__new__(cls, text)
        obj.origin = origin
        obj.parts = parts
        return obj

    @property
    def mixed(self) -> bool:
        return len({p.origin for p in self.parts}) > 1

    def weakest(self) -> Origin:
        origins = {p.origin for p in self.parts} or {self.origin}
        return next(o for o in WEAKEST_FIRST if o in origins)


# an origin's word, not a part of a name: "interpolated (torch_scaled_mm_tensor ...)" is not scaled
_WORDS = {o: re.compile(rf"(?<![\w-]){re.escape(o.value)}(?![\w-])") for o in Origin}


def classify(text: str) -> Origin:
    """The origin of a source text written before sources were values (presets, framework profiles): the first of
    the origins below whose word it holds (a kernel name such as `torch_scaled_mm_tensor` holds none)."""
    for origin in (Origin.ENGINE, Origin.FRAMEWORK, Origin.SCALED, Origin.SPEED_OF_LIGHT, Origin.EXTRAPOLATED,
                   Origin.INTERPOLATED, Origin.MEASURED, Origin.ANALYTICAL):
        if _WORDS[origin].search(text):
            return origin
    return Origin.NONE


def source(text: str, origin: Origin | None = None) -> Source:
    if isinstance(text, Source) and origin is None:
        return text
    return Source(str(text), origin or classify(str(text)))


def combine(sources: Iterable[str]) -> Source:
    """One source for a sum: the single source when all agree, else `mixed: a + b` carrying every part."""
    parts = {str(s): source(s) for s in sources}
    if not parts:
        return Source("none", Origin.NONE)
    texts = sorted(parts)
    if len(texts) == 1:
        return parts[texts[0]]
    flat = tuple(parts[t] for t in texts)
    return Source("mixed: " + " + ".join(texts), Origin.NONE, flat)


def weakest_of(sources: Iterable[str]) -> tuple[Origin, bool]:
    """The weakest origin among `sources` (their parts' included; `Origin.NONE` when none has one), and whether
    they or their parts differ: what one tag for several priced numbers shows."""
    srcs = [source(s) for s in sources]
    origins = {s.weakest() for s in srcs} - {Origin.NONE}
    if not origins:
        return Origin.NONE, False
    return next(o for o in WEAKEST_FIRST if o in origins), len(origins) > 1 or any(s.mixed for s in srcs)
