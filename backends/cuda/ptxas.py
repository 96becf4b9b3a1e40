"""PTX to a cubin with NVIDIA's `ptxas` (from the `cuda` extra, `nvidia-cuda-nvcc-cu12`,
which ships it in `nvidia/cuda_nvcc/bin`; or `MLIRXLA_PTXAS`, or `ptxas` on PATH). No GPU is
needed: `ptxas -v` also says what each kernel uses (registers, shared memory, stack,
spills), which the dump writes as `kernel-resources.txt`."""

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlirxla.errors import MlirxlaError

INSTALL_HINT = "pip install 'mlirxla[cuda]' (nvidia-cuda-nvcc-cu12, which ships ptxas)"


@dataclass(frozen=True)
class KernelResources:
    """What one kernel uses per thread (registers, stack) and per block (shared memory)."""

    name: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_bytes: int

    def line(self) -> str:
        return (f"{self.name}: {self.registers} registers, {self.shared_bytes} bytes shared memory, "
                f"{self.stack_bytes} bytes stack, {self.spill_bytes} bytes spilled")


@dataclass(frozen=True)
class Cubin:
    arch: str
    data: bytes
    resources: list[KernelResources]
    log: str


def find_ptxas() -> Path | None:
    """ptxas: `MLIRXLA_PTXAS`, the cuda extra's package, then PATH."""
    if os.environ.get("MLIRXLA_PTXAS"):
        return Path(os.environ["MLIRXLA_PTXAS"])
    if importlib.util.find_spec("nvidia") is not None and (spec := importlib.util.find_spec("nvidia.cuda_nvcc")) is not None:
        for location in spec.submodule_search_locations or []:
            candidate = Path(location) / "bin" / "ptxas"
            if candidate.exists():
                return candidate
    found = shutil.which("ptxas")
    return Path(found) if found else None


def unavailable() -> str | None:
    """Why ptxas cannot run here (None when it can)."""
    return None if find_ptxas() is not None else f"no ptxas found: {INSTALL_HINT}"


def assemble(ptx: str, arch: str = "sm_90") -> Cubin:
    """Run `ptxas -arch=ARCH -v` on `ptx`; a refusal is an error quoting ptxas's first line."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise MlirxlaError(f"no ptxas found: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="mlirxla-ptxas-") as directory:
        source, output = Path(directory) / "kernels.ptx", Path(directory) / "kernels.cubin"
        source.write_text(ptx)
        completed = subprocess.run([str(ptxas), f"-arch={arch}", "-v", str(source), "-o", str(output)],
                                   capture_output=True, text=True)
        log = completed.stdout + completed.stderr
        if completed.returncode != 0:
            first = next((line for line in log.splitlines() if "error" in line.lower()), log.strip().splitlines()[0] if log.strip() else "")
            raise MlirxlaError(f"ptxas refused the PTX for {arch}: {first.replace(str(source), 'kernels.ptx')}")
        return Cubin(arch, output.read_bytes(), parse_resources(log), log)


def parse_resources(log: str) -> list[KernelResources]:
    """The figures of `ptxas -v`, per entry function."""
    resources = []
    for block in re.split(r"ptxas info\s*: Compiling entry function ", log)[1:]:
        name = re.match(r"'(\w+)'", block).group(1)
        registers = re.search(r"Used (\d+) registers", block)
        shared = re.search(r"(\d+) bytes smem", block)
        stack = re.search(r"(\d+) bytes stack frame", block)
        spills = re.search(r"(\d+) bytes spill stores", block)
        resources.append(KernelResources(name, int(registers.group(1)) if registers else 0,
                                         int(shared.group(1)) if shared else 0,
                                         int(stack.group(1)) if stack else 0,
                                         int(spills.group(1)) if spills else 0))
    return sorted(resources, key=lambda r: r.name)
