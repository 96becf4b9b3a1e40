"""XLA's dump grammar for a module's journey through the passes.

    module_0000.jit_mlp.before_optimizations.mlir
    module_0000.jit_mlp.0000.simplification.after_pipeline-start.before_xhlo-algsimp.mlir
    module_0000.jit_mlp.0001.simplification.after_xhlo-algsimp.before_cse.mlir
    module_0000.jit_mlp.cpu_after_optimizations.mlir
    module_0000.jit_mlp.pass-ledger.tsv

The module number counts modules compiled by this process; the step number counts the
per-pass dumps of one module. Later stages add their own files with `write(suffix, text)`
(`module_0000.jit_mlp.<suffix>`: buffer assignment, memory report, LLVM IR, ...).
"""

import itertools
import os
import re
from dataclasses import dataclass, field

from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir

_MODULE_NUMBERS = itertools.count()


def module_name(module: ir.Module) -> str:
    if "sym_name" in module.operation.attributes:
        name = ir.StringAttr(module.operation.attributes["sym_name"]).value
    else:
        name = "module"
    return re.sub(r"[^\w.-]", "_", name)


def file_safe(name: str) -> str:
    return re.sub(r"[^\w.+-]", "_", name)


@dataclass
class DumpWriter:
    """Writes one module's dump files into `directory` (nothing when it is None)."""

    directory: str | None
    module: str
    number: int = field(default_factory=lambda: next(_MODULE_NUMBERS))
    steps: itertools.count = field(default_factory=itertools.count)
    written: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.directory is None:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as error:
            raise MlirxlaError(f"cannot create dump directory: {error.strerror}", self.directory) from None
        if not os.access(self.directory, os.W_OK):
            raise MlirxlaError("dump directory is not writable", self.directory)

    @property
    def prefix(self) -> str:
        return f"module_{self.number:04d}.{self.module}"

    def write(self, suffix: str, text: str) -> str | None:
        """Write `module_NNNN.<name>.<suffix>`; return its path (None when not dumping)."""
        return self.write_bytes(suffix, text.encode())

    def write_bytes(self, suffix: str, data: bytes) -> str | None:
        """`write` for a binary file (a compiled module, an object file)."""
        if self.directory is None:
            return None
        path = os.path.join(self.directory, f"{self.prefix}.{suffix}")
        try:
            with open(path, "wb") as handle:
                handle.write(data)
        except OSError as error:
            raise MlirxlaError(f"cannot write dump file: {error.strerror}", path) from None
        self.written.append(path)
        return path

    def write_step(self, pipeline: str, after: str, before: str, text: str) -> str | None:
        """A per-pass dump: `module_NNNN.<name>.NNNN.<pipeline>.after_<a>.before_<b>.mlir`."""
        return self.write_numbered(pipeline, f"after_{file_safe(after)}.before_{file_safe(before)}", text)

    def write_numbered(self, pipeline: str, label: str, text: str) -> str | None:
        """`module_NNNN.<name>.NNNN.<pipeline>.<label>.mlir`, numbered in the module's step order."""
        if self.directory is None:
            return None
        return self.write(f"{next(self.steps):04d}.{file_safe(pipeline)}.{file_safe(label)}.mlir", text)
