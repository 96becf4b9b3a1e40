"""`python -m mlirxla.backends.cpu.build_library`: compiles every function of the runtime
library for this host into the persistent cache (`library_cache.py`) unless it is there
already, and says what it built, where and in how long. `scripts/setup` runs it last, so
that a process's first call into the library (the row engine: seconds of LLVM work) reads an
object instead, as XLA's YNNPACK is built into its binary."""

import argparse
import time

from . import library_cache, llvm_jit, runtime_library


def build() -> list[tuple[str, bool, float]]:
    """(function, whether it was compiled now, seconds) for each library function this host runs."""
    done = []
    for function in runtime_library.host_functions():
        start = time.perf_counter()
        cached = library_cache.read(library_cache.path(function, llvm_jit.toolchain())) is not None
        llvm_jit.library_object(function)
        done.append((function, not cached, time.perf_counter() - start))
    return done


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m mlirxla.backends.cpu.build_library", description=__doc__).parse_args(argv)
    print(f"runtime library cache: {library_cache.directory()}")
    for function, built, seconds in build():
        print(f"  {function}: {'built' if built else 'cached'} ({seconds:.2f} s)")


if __name__ == "__main__":
    main()
