"""IREE as an optional package: whether it is installed, its versions, and the device it
compiles for and runs on.

The device is the host CPU (IREE's llvm-cpu target, the local-task driver) unless
`MLIRXLA_IREE_DEVICE=cuda` asks for IREE's cuda target and driver: that path compiles here,
without a GPU, but has never run on one, so it is not chosen by itself on a machine that has a
GPU. On CUDA the code is for `sm_80` (PTX the CUDA driver compiles for newer GPUs when it
loads it), since IREE 3.13 refuses `--iree-cuda-target=sm_90` ("missing GPU target in
#hal.executable.target"); `--iree-flag=--iree-cuda-target=...` picks another.
"""

import functools
import os
from dataclasses import dataclass

from mlirxla.errors import MlirxlaError

INSTALL = "pip install 'mlirxla[iree]' (the iree extra: iree-base-compiler and iree-base-runtime 3.13.0)"
CUDA_TARGET = "sm_80"
DEVICE_VARIABLE = "MLIRXLA_IREE_DEVICE"


def unavailable() -> str | None:
    """Why the iree backend cannot compile here (None: it can)."""
    try:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
    except ImportError:
        return f"the iree backend needs IREE's compiler and runtime: {INSTALL}"
    return None


def require() -> None:
    reason = unavailable()
    if reason is not None:
        raise MlirxlaError(reason)


@dataclass(frozen=True)
class Target:
    """The device IREE compiles for: iree-compile's flags for it and the runtime's HAL driver."""

    device: str  # llvm-cpu | cuda
    driver: str  # local-task | cuda
    flags: tuple[str, ...]


def llvm_cpu() -> Target:
    return Target("llvm-cpu", "local-task", ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                                             "--iree-llvmcpu-target-cpu=host"))


def cuda() -> Target:
    return Target("cuda", "cuda", ("--iree-hal-target-device=cuda", f"--iree-cuda-target={CUDA_TARGET}"))


TARGETS = {"llvm-cpu": llvm_cpu, "cuda": cuda}


@functools.cache
def target() -> Target:
    require()
    name = os.environ.get(DEVICE_VARIABLE) or "llvm-cpu"
    if name not in TARGETS:
        raise MlirxlaError(f"{DEVICE_VARIABLE}={name}: the iree backend targets {' or '.join(TARGETS)}")
    return TARGETS[name]()


def versions() -> str:
    """IREE's compiler and runtime versions with the revisions they were built from (a nightly
    and a release can share a version number)."""
    from iree.compiler import version as compiler
    from iree.runtime import version as runtime

    return (f"iree-compiler={compiler.VERSION}@{compiler.REVISIONS.get('IREE', '')};"
            f"iree-runtime={runtime.VERSION}@{runtime.REVISIONS.get('IREE', '')}")


@functools.cache
def environment() -> str:
    """What decides the compiled module besides the input: IREE's versions, the target and, for
    llvm-cpu, the host CPU its code is tuned for."""
    chosen = target()
    text = f"{versions()};device={chosen.device};flags={' '.join(chosen.flags)}"
    if chosen.device == "llvm-cpu":
        import llvmlite.binding as llvm

        text += f";cpu={llvm.get_host_cpu_name()}:{llvm.get_host_cpu_features().flatten()}"
    return text
