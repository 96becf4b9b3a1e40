"""mlirxla-opt: read StableHLO in any form JAX produces, import it to verified xhlo, print it.

    mlirxla-opt model.mlir            # xhlo on stdout
    mlirxla-opt model.vhlo.bc -o out.mlir
    cat model.mlir | mlirxla-opt -
"""

import argparse
import sys

from mlirxla import frontdoor, printing
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError

from .cli import EXIT_OK, run_tool


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="mlirxla-opt", description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", default="-", help="input file (.mlir text, bytecode or portable artifact); - for stdin")
    parser.add_argument("-o", "--output", default="-", help="output file; - for stdout")
    parser.add_argument("--mlir-print-generic", action="store_true", help="print every op in generic form")
    parser.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    return parser.parse_args(argv)


def read_input(path: str) -> tuple[bytes, str]:
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    try:
        with open(path, "rb") as handle:
            return handle.read(), path
    except OSError as error:
        raise MlirxlaError(f"cannot read file: {error.strerror}", path) from None


def write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as error:
        raise MlirxlaError(f"cannot write file: {error.strerror}", path) from None


def opt(argv) -> int:
    arguments = parse_arguments(argv)
    data, source = read_input(arguments.input)
    imported = frontdoor.import_bytes(data, source, new_context())
    text = printing.module_text(imported.module, arguments.mlir_print_generic, arguments.mlir_print_debuginfo)
    write_output(arguments.output, text)
    return EXIT_OK


def main(argv=None) -> int:
    return run_tool("mlirxla-opt", lambda: opt(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
