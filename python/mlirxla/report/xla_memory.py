"""XLA:CPU's temp bytes for the same program, for the report's heap picture.

The program's bytes (StableHLO text, bytecode or a portable artifact, as the tool read them)
are compiled by jax's own CPU client in a child process (XLA reads its flags once per process,
and the tools should not start jax's backends, the mlirxla plugin among them, in their own),
and the executable's compiled memory stats give the temp bytes. The child starts when the
compile starts and is read when the report is written, so it costs no wall time on a machine
with a spare core. Without jax, or for a module XLA does not take (an xhlo module, check ops),
the report says why there is no figure.

    python -m mlirxla.report.xla_memory < program.mlir     # {"temp_bytes": N} or {"error": "..."}
"""

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass

TIMEOUT_S = 300


@dataclass(frozen=True)
class XlaFigure:
    """XLA:CPU's temp bytes for the same program, or why there are none."""

    temp_bytes: int | None
    why_not: str = ""


class Pending:
    """XLA's figure on its way, from a child process."""

    def __init__(self, data: bytes):
        self.figure = None
        self.child = None
        if importlib.util.find_spec("jax") is None:
            self.figure = XlaFigure(None, "jax is not installed (pip install 'mlirxla[jax]')")
            return
        environment = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
        try:
            self.child = subprocess.Popen([sys.executable, "-m", "mlirxla.report.xla_memory"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment)
            self.child.stdin.write(data)
            self.child.stdin.close()
        except OSError as error:  # a child that died at once (BrokenPipeError) answers as it could
            if self.child is None:
                self.figure = XlaFigure(None, f"could not start jax: {error.strerror}")

    def result(self) -> XlaFigure:
        if self.figure is None:
            try:
                self.child.wait(timeout=TIMEOUT_S)  # its answer is one short line: the pipe holds it
                answer = json.loads(self.child.stdout.read().decode().strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                self.cancel()
                answer = {"error": f"XLA took more than {TIMEOUT_S} s"}
            except (ValueError, IndexError):
                answer = {"error": f"jax's child process ended with status {self.child.returncode}"}
            finally:
                self.child.stdout.close()
            self.figure = (XlaFigure(answer["temp_bytes"]) if "temp_bytes" in answer
                           else XlaFigure(None, f"XLA:CPU did not compile it: {answer['error']}"))
        return self.figure

    def cancel(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.wait()


def temp_bytes(data: bytes) -> int:
    """Compile `data` with jax's CPU client and read the executable's temp bytes."""
    from jax._src import compiler, xla_bridge
    from jax._src.lib import _jax

    backend = xla_bridge.get_backend("cpu")
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    devices = _jax.DeviceList(tuple(backend.devices()[:1]))
    executable = backend.compile_and_load(data, executable_devices=devices, compile_options=options)
    return int(executable.get_compiled_memory_stats().temp_size_in_bytes)


def main() -> int:
    data = sys.stdin.buffer.read()
    try:
        answer = {"temp_bytes": temp_bytes(data)}
    except Exception as error:  # whatever XLA says, as one line
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        answer = {"error": lines[0][:300] if lines else type(error).__name__}
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
