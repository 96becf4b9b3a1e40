"""Lower every program of `jax_programs.py` and write what the tests and benchmarks read.

    python examples/export_programs.py [OUTPUT]      # scripts/export-programs; OUTPUT: test/data/jax

Each program is written in the forms it names (`Program.forms`; `FORMS` gives their file
suffixes), most often only `OUTPUT/<stem>.stablehlo.mlir` (`jax.jit(f).lower(*args).as_text()`).
The output is the same byte for byte on every run and every machine: the lowering runs on
jax's CPU backend with four CPU devices whatever the host has, and source locations name
files relative to the repository. XLA's compiled HLO is kept to the entry parameters' lines,
the part that does not depend on the host CPU's features.
"""

import argparse
import os
import re
import sys

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPOSITORY, "test", "data", "jax")

# The installed mlirxla package is a JAX plugin too: the exports are what jax's own CPU
# backend lowers, whatever platforms the environment enables.
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
from jax.extend import source_info_util  # noqa: E402

jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(REPOSITORY + os.sep))
# Locations name the programs' own lines only: editing the exporter leaves the exports alone.
source_info_util.register_exclusion(os.path.abspath(__file__))

from jax_programs import PROGRAMS, Program  # noqa: E402


def lowered(program: Program):
    jax.config.update("jax_use_shardy_partitioner", program.shardy)
    try:
        return jax.jit(program.function).lower(*program.arguments())
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)


def stablehlo_text(program: Program) -> bytes:
    return lowered(program).as_text().encode()


def debug_info_text(program: Program) -> bytes:
    return lowered(program).as_text(debug_info=True).encode()


def exported(program: Program):
    return jax.export.export(jax.jit(program.function))(*program.arguments())


def export_text(program: Program) -> bytes:
    return exported(program).mlir_module().encode()


def portable_artifact(program: Program) -> bytes:
    """The VHLO bytecode `jax.export` serializes, with the StableHLO version it targets."""
    return exported(program).mlir_module_serialized


def compiled_parameters(program: Program) -> bytes:
    """The entry computation's parameter lines of XLA's compiled, partitioned HLO: the
    shardings XLA settled on for the arguments."""
    hlo = lowered(program).compile().as_text()
    entry = hlo[hlo.index("\nENTRY ") :]
    lines = [line for line in entry.splitlines() if " parameter(" in line]
    return "".join(line + "\n" for line in lines).encode()


def linalg_text(program: Program) -> bytes:
    """The StableHLO after the MLIR toolkit's stablehlo-legalize-to-linalg."""
    from mlirxla.backends.cpu.lowering import register_passes
    from mlirxla.context import new_context
    from mlirxla.mlir import ir, passmanager

    register_passes()
    context = new_context()
    with context:
        module = ir.Module.parse(stablehlo_text(program).decode())
        passmanager.PassManager.parse("builtin.module(func.func(stablehlo-legalize-to-linalg))").run(module.operation)
        return (str(module) + "\n").encode()


FORMS = {
    "stablehlo": (".stablehlo.mlir", stablehlo_text),
    "debuginfo": (".debuginfo.mlir", debug_info_text),
    "export": (".export.mlir", export_text),
    "vhlo": (".vhlo.bc", portable_artifact),
    "compiled_parameters": (".compiled_parameters.txt", compiled_parameters),
    "linalg": (".linalg.mlir", linalg_text),
}


def export(program: Program, output: str) -> list[str]:
    """Write the program's forms under `output`; return the paths written."""
    written = []
    for form in program.forms:
        suffix, render = FORMS[form]
        path = os.path.join(output, program.stem + suffix)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(render(program))
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", default=DEFAULT_OUTPUT, help="the folder to write (default: test/data/jax)")
    output = os.path.abspath(parser.parse_args(argv).output)
    for program in PROGRAMS:
        for path in export(program, output):
            print(os.path.relpath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
