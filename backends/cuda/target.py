"""The GPU a program is compiled for: its architecture for PTX and ptxas, and the figures the
cost model and the launch shapes use."""

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuTarget:
    name: str
    arch: str  # the PTX target and ptxas's -arch
    sm_count: int
    hbm_bytes_per_s: float
    launch_overhead_s: float


H200 = GpuTarget("H200", "sm_90", sm_count=132, hbm_bytes_per_s=4.3e12, launch_overhead_s=4e-6)
A100 = GpuTarget("A100", "sm_80", sm_count=108, hbm_bytes_per_s=2.0e12, launch_overhead_s=4e-6)
TARGETS = {"sm_90": H200, "sm_80": A100}
