"""What every mlirxla command-line tool shares: one-line errors and exit statuses.

Exit statuses: 0 success, 1 a check failed, 2 bad input or an unsupported construct. No
Python traceback reaches the user: a bug surfaces as one line naming the exception.
"""

import argparse
import sys
from collections.abc import Callable

from mlirxla.errors import MlirxlaError, first_line

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR = 0, 1, 2


def run_tool(tool: str, body: Callable[[], int]) -> int:
    try:
        return body()
    except MlirxlaError as error:
        print(f"{tool}: error: {first_line(error)}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{tool}: interrupted", file=sys.stderr)
    except MemoryError as error:  # an allocation no size check foresaw; numpy says how much it wanted
        print(f"{tool}: error: out of memory{': ' + first_line(error) if str(error) else ''}", file=sys.stderr)
    except Exception as error:  # a bug in mlirxla: still one line, never a traceback
        print(f"{tool}: internal error: {type(error).__name__}: {first_line(error)}", file=sys.stderr)
    return EXIT_ERROR


def add_iree_flag_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--iree-flag", dest="iree_flags", action="append", default=[], metavar="FLAG",
                        help="a flag for IREE's compiler with --backend iree, written with '=' "
                             "(--iree-flag=--iree-llvmcpu-target-cpu=generic); repeatable, after the backend's own flags")


def iree_flags(arguments: argparse.Namespace) -> tuple[str, ...]:
    """The `--iree-flag`s, refused with any backend but iree."""
    if arguments.iree_flags and arguments.backend != "iree":
        raise MlirxlaError(f"--iree-flag is for --backend iree (the backend is {arguments.backend})")
    return tuple(arguments.iree_flags)
