"""The calibration sweep's `linear_state` rows alone (its `components` part, restricted to the recurrent-state
updates), for the hybrid models of the registry: since a speculative verify keeps every draft token's state
(`wmtp.latency.state_traffic_states`), those rows changed, and the rest of a sweep did not. The rows go to
OUT/state_raw.csv (the sweep's columns, timing and provenance sidecar OUT/state_raw.meta.json), to be spliced into
a shipped raw sweep in place of its `linear_state` rows and refitted with `wmtp calibrate --from-raw`.

    python3 -m wmtp.measure.scripts.state_rows --out $OUT [--models q35,q122,nem]        # on the GPU
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35,q122,nem")
    a = ap.parse_args(argv)
    from wmtp.measure import require_gpu

    require_gpu()
    from wmtp.measure.harness import RowWriter
    from wmtp.measure.provenance import atomic_write_text, collect
    from wmtp.measure.run import TIMER
    from wmtp.measure.sweep import SweepConfig, component_steps
    from wmtp.models import get_model

    a.out.mkdir(parents=True, exist_ok=True)
    cfg = SweepConfig()
    specs = [get_model(m) for m in a.models.split(",")]
    meta = collect(TIMER, {"command": "python3 -m wmtp.measure.scripts.state_rows", "models": [s.key for s in specs],
                           "sweep": {"batches": list(cfg.batches), "depths": [1, *cfg.depths]},
                           "kernel": "linear_state (verify: intermediate states saved at d >= 2)"})
    w = RowWriter(a.out / "state_raw.csv")
    for spec in specs:
        for label, step in component_steps(spec, cfg):
            if " state B=" in label:
                step(w)
                print(label, flush=True)
    w.close()
    atomic_write_text(a.out / "state_raw.meta.json", json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
