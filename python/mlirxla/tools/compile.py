"""mlirxla-compile: compile a module with a backend and write the program it made.

    mlirxla-compile model.mlir --backend iree -o model.vmfb      # an IREE module (.vmfb)
    iree-run-module --module=model.vmfb --device=local-task --function=main --input=4xf32=1,2,3,4
    mlirxla-compile model.mlir --backend cuda -o model.mlirxla   # an mlirxla CUDA executable for an H200
    mlirxla-compile model.mlir --backend iree --iree-flag=--iree-llvmcpu-target-cpu=generic -o model.vmfb
    mlirxla-compile model.mlir --dump-to dump/                   # compile only: does it compile, what was made

-o writes the backend's code when that code is a program on its own: with --backend iree the
.vmfb, which IREE's own tools run (iree-run-module, iree-benchmark-module); with --backend
cuda the .mlirxla file (thunk plan, slab layout, cubin and PTX) which mlirxla.runtime.cuda
runs on a GPU (docs/cuda-backend.md). The cpu backend's
code is kernels its thunk plan calls, not a program, and the reference backend makes no code,
so with them -o is refused (Client(cache_dir=...) keeps their compiled programs instead).
Exit status 0 when it compiled, 2 on bad input or a refusal.
"""

import argparse
import sys

from mlirxla import frontdoor
from mlirxla.backends import registry
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.pipelines.runner import RunOptions

from .cli import EXIT_OK, add_iree_flag_argument, iree_flags, run_tool
from .opt import read_input


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="mlirxla-compile", description=__doc__.splitlines()[0],
                                     epilog=__doc__.split("\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="input file (.mlir text, bytecode or portable artifact); - for stdin")
    parser.add_argument("--backend", choices=registry.names(), default=registry.DEFAULT, help="the backend that compiles it (default %(default)s)")
    parser.add_argument("-o", "--output", help="write the compiled program here (--backend iree: a .vmfb; --backend cuda: a .mlirxla)")
    parser.add_argument("--dump-to", help="write the dumps to this directory (the pipeline's, and the backend's code)")
    add_iree_flag_argument(parser)
    arguments = parser.parse_args(argv)
    arguments.iree_flags = iree_flags(arguments)
    return arguments


def run(argv) -> int:
    arguments = parse_arguments(argv)
    backend = registry.backend(arguments.backend)
    if arguments.output and backend.export_format is None:
        raise MlirxlaError(f"-o: the {backend.name} backend's code is not a program on its own; "
                           "--backend iree writes one (a .vmfb), --backend cuda too (a .mlirxla)")
    data, source = read_input(arguments.input)
    try:
        imported = frontdoor.import_bytes(data, source, new_context())
        options = RunOptions(dump_to=arguments.dump_to, backend=backend.name, iree_flags=arguments.iree_flags)
        program = backend.compile(imported.module, options)
    except MlirxlaError as error:
        raise error.with_source(source) from None
    print(f"{source}: compiled by the {backend.name} backend" + "".join(f"; {line}" for line in program.decisions[:1]))
    if arguments.output:
        write_program(arguments.output, program.object_code)
        print(f"  wrote {arguments.output} ({len(program.object_code)} bytes): {backend.export_format}")
    return EXIT_OK


def write_program(path: str, code: bytes) -> None:
    try:
        with open(path, "wb") as stream:
            stream.write(code)
    except OSError as error:
        raise MlirxlaError(f"cannot write the program: {error.strerror}", path) from None


def main(argv=None) -> int:
    return run_tool("mlirxla-compile", lambda: run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
