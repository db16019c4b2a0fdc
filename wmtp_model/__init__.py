"""wmtp: cost model and measurement tool for Windowed-MTP speculative decoding.

The analytical core (this package's top level) needs numpy/scipy only and never imports torch:
`wmtp predict` answers in well under a second. `wmtp.measure` is the only place that imports
torch or triton.
"""

__version__ = "0.1.0"
