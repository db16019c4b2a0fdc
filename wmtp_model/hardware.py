"""The hardware registry: datasheet peaks plus achievable fractions used until a measured profile exists.

Peaks are dense (no sparsity) per GPU. `bw_eff` / `flop_eff` turn a speed-of-light time into an
achievable one; for the H200 they come from `shared/reference/h200-anchors.md` (copy 4.25 TB/s of
4.8, bf16 GEMM 683 TFLOP/s of 989); other rows reuse them until measured. `l2_bw_tbps` is an
estimate (no datasheet gives it) used only for the L2-resident draft re-reads at short context.
`link_bw_gbps` is the GPU-to-GPU bandwidth per direction (NVLink 4: 900 GB/s both ways; NVLink 5:
1.8 TB/s) and `allreduce_latency_us` a small-message preset, both for tensor parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from wmtp.errors import WmtpError
from wmtp.models import build_registry, lookup

GiB = 1024**3


@dataclass(frozen=True)
class HardwareSpec:
    key: str
    name: str
    hbm_bytes: float
    hbm_bw_tbps: float
    bf16_tflops: float
    fp8_tflops: float
    fp4_tflops: float  # 0: no native fp4 (nvfp4 weights computed at the bf16 rate)
    l2_bytes: float
    sm_count: int
    l2_bw_tbps: float
    link_bw_gbps: float = 450.0  # GPU-to-GPU, per direction (NVLink / Infinity Fabric datasheet)
    allreduce_latency_us: float = 8.0  # small-message all-reduce (preset until measured)
    bw_eff: float = 0.88
    flop_eff: float = 0.69
    kernel_overhead_us: float = 2.5  # per kernel inside a CUDA graph (preset)
    source: str = ""
    arch: str = ""  # GPU architecture (hopper, blackwell, cdna3): the same kernels run alike within one

    def __post_init__(self) -> None:
        bad = [
            f for f in ("hbm_bytes", "hbm_bw_tbps", "bf16_tflops", "fp8_tflops", "l2_bytes", "sm_count", "l2_bw_tbps")
            if not getattr(self, f) > 0
        ]
        if self.fp4_tflops < 0:
            bad.append("fp4_tflops")
        if not (0 < self.bw_eff <= 1 and 0 < self.flop_eff <= 1):
            bad.append("bw_eff/flop_eff must be in (0, 1]")
        if self.kernel_overhead_us < 0:
            bad.append("kernel_overhead_us")
        if bad:
            raise WmtpError(f"hardware {self.key!r}: invalid {', '.join(bad)}")

    def tflops_for(self, compute_dtype: str) -> float:
        if compute_dtype == "nvfp4" and self.fp4_tflops > 0:
            return self.fp4_tflops
        if compute_dtype == "fp8":
            return self.fp8_tflops
        return self.bf16_tflops


_NV = "NVIDIA datasheet"
HARDWARE: Mapping[str, HardwareSpec] = build_registry(
    [
        HardwareSpec("h100-sxm", "NVIDIA H100 SXM 80GB", 80 * GiB, 3.35, 989, 1979, 0, 50e6, 132, 8.4,
                     source=f"{_NV} (H100 SXM); fractions from the lent H200", arch="hopper"),
        HardwareSpec("h200", "NVIDIA H200 141GB", 143771 * 1024**2, 4.8, 989, 1979, 0, 60 * 1024**2, 132, 12.0,
                     source=f"{_NV} (H200 SXM); HBM as nvidia-smi reports it; fractions measured on the lent H200",
                     arch="hopper"),
        HardwareSpec("b200", "NVIDIA B200 180GB", 183359 * 1024**2, 7.68, 2250, 4500, 9000, 126e6, 148, 20.0, 900.0,
                     6.0, source=f"{_NV} (HGX B200, per GPU) for flops and links; HBM as nvidia-smi reports it "
                                 "(183359 MiB); bandwidth from the driver's 7680-bit bus at 3996 MHz (7.68 TB/s, "
                                 "not the datasheet's 8; pytorch/ao PR #4002); fractions from the lent H200",
                     arch="blackwell"),
        HardwareSpec("gb200", "NVIDIA GB200 (per GPU)", 186e9, 8.0, 2500, 5000, 10000, 126e6, 148, 20.0, 900.0, 6.0,
                     source=f"{_NV} (GB200 NVL72, per GPU); fractions from the lent H200", arch="blackwell"),
        HardwareSpec("b300", "NVIDIA B300 288GB", 288e9, 8.0, 2250, 4500, 13500, 126e6, 160, 20.0, 900.0, 6.0,
                     source=f"{_NV} (HGX B300, per GPU); fractions from the lent H200", arch="blackwell"),
        HardwareSpec("mi300x", "AMD Instinct MI300X", 192e9, 5.3, 1307, 2615, 0, 256e6, 304, 13.0, 448.0, 10.0,
                     source="AMD datasheet (L2 = 256 MB Infinity Cache); fractions from the lent H200", arch="cdna3"),
    ],
    "hardware",
)


def get_hardware(key: str) -> HardwareSpec:
    return lookup(HARDWARE, key, "hardware")
