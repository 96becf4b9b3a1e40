"""Bad input to mlirxla-opt and mlirxla-run: one line on stderr naming the problem and where, exit 2.

Each case runs the tool in a subprocess, as a user would, and holds it to the README's
promise: exit status 2, no Python traceback, exactly one line on stderr of the form
`<tool>: error: <where>: <problem>` (not `internal error`, which marks a bug), and that line
names the file (and line:col where there is one) and the op or value at fault.
"""

import re
import subprocess
import sys

import numpy as np
import pytest

from mlirxla.context import new_context
from mlirxla.mlir import ir, stablehlo

TOOLS = {"opt": "mlirxla-opt", "run": "mlirxla-run"}

ADD = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

TWO_ARGUMENTS = """func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %b : tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

SYNTAX_ERROR = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 tensor<2xf32>
}
"""

UNKNOWN_OP_GENERIC = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "foo.bar"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

UNKNOWN_STABLEHLO_OP = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.nonexistent %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

UNKNOWN_STABLEHLO_OP_GENERIC = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.nonexistent"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

UNSUPPORTED_DIALECT = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = tosa.add %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

UNSUPPORTED_DIALECT_GENERIC = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "tosa.add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

TYPE_MISMATCH = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<3xf32>
  return %0 : tensor<2xf32>
}
"""


def portable_artifact(text: str, version: str) -> bytes:
    with new_context() as context:
        module = ir.Module.parse(text, context)
        return stablehlo.serialize_portable_artifact(module, version)


def future_artifact() -> bytes:
    """A portable artifact whose producer string claims StableHLO 9.0.0.

    The bytecode header is the magic `ML\\xefR`, the bytecode version (a varint) and the
    producer as a NUL-terminated string, so the version can be rewritten in place.
    """
    data = portable_artifact(ADD, "1.15.0")
    producer = b"StableHLO_v1.15.0\x00"
    assert data.startswith(b"ML\xefR") and producer in data[:32], data[:32]
    patched = data.replace(producer, b"StableHLO_v9.0.0\x00", 1)
    assert b"StableHLO_v9.0.0\x00" in patched[:32]
    return patched


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The bad inputs (and the good modules the bad npz inputs go with), written once."""
    root = tmp_path_factory.mktemp("bad_input")
    texts = {
        "add.mlir": ADD,
        "two.mlir": TWO_ARGUMENTS,
        "syntax.mlir": SYNTAX_ERROR,
        "foo_bar.mlir": UNKNOWN_OP_GENERIC,
        "nonexistent.mlir": UNKNOWN_STABLEHLO_OP,
        "nonexistent_generic.mlir": UNKNOWN_STABLEHLO_OP_GENERIC,
        "tosa.mlir": UNSUPPORTED_DIALECT,
        "tosa_generic.mlir": UNSUPPORTED_DIALECT_GENERIC,
        "types.mlir": TYPE_MISMATCH,
        "empty.mlir": "",
    }
    for name, text in texts.items():
        (root / name).write_text(text)
    # Not UTF-8 and no bytecode magic.
    (root / "binary.bin").write_bytes(bytes([0xFF, 0xFE, 0x00, 0x80, 0xC3]) + bytes(range(256)) * 2)
    (root / "junk.mlirbc").write_bytes(b"ML\xefR\x0dgarbage without a terminator")
    (root / "future.vhlo.bc").write_bytes(future_artifact())
    (root / "truncated.vhlo.bc").write_bytes(portable_artifact(ADD, "1.15.0")[:40])
    (root / "directory.mlir").mkdir()

    np.savez(root / "good.npz", arg0=np.ones(2, np.float32))
    np.savez(root / "shape.npz", arg0=np.ones(3, np.float32))
    np.savez(root / "dtype.npz", arg0=np.ones(2, np.int32))
    np.savez(root / "too_few.npz", arg0=np.ones(2, np.float32))
    np.savez(root / "too_many.npz", arg0=np.ones(2, np.float32), arg1=np.ones(2, np.float32))
    (root / "text.npz").write_text("this is not an npz archive\n")
    (root / "truncated.npz").write_bytes((root / "good.npz").read_bytes()[:60])
    return root


def run_tool(tool: str, arguments: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"mlirxla.tools.{tool}", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, tool: str, *fragments: str) -> str:
    stderr = result.stderr
    shown = f"exit {result.returncode}\nstderr:\n{stderr}\nstdout:\n{result.stdout[-2000:]}"
    assert "Traceback" not in stderr, shown
    assert result.returncode == 2, shown
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"stderr is {len(lines)} lines, not one\n{shown}"
    line = lines[0]
    assert line.startswith(f"{TOOLS[tool]}: error: "), f"not a user-facing error\n{shown}"
    for fragment in fragments:
        if isinstance(fragment, re.Pattern):
            assert fragment.search(line), f"{fragment.pattern!r} not matched\n{shown}"
        else:
            assert fragment.lower() in line.lower(), f"{fragment!r} not named\n{shown}"
    return line


# (input file, fragments the error line must hold); both tools, each file its own test id.
FILE_CASES = {
    "syntax_error": ("syntax.mlir", [re.compile(r"syntax\.mlir:3:\d+: "), "expected ':'"]),
    "unknown_op_generic": ("foo_bar.mlir", ["foo_bar.mlir:2:8", "foo.bar"]),
    "unknown_stablehlo_op": ("nonexistent.mlir", ["nonexistent.mlir:2:8", "stablehlo.nonexistent"]),
    "unknown_stablehlo_op_generic": ("nonexistent_generic.mlir", ["nonexistent_generic.mlir:2:8", "stablehlo.nonexistent"]),
    "unsupported_dialect": ("tosa.mlir", ["tosa.mlir:2:8", "tosa.add"]),
    "unsupported_dialect_generic": ("tosa_generic.mlir", ["tosa_generic.mlir:2:8", "tosa.add"]),
    "type_mismatch": ("types.mlir", ["types.mlir:2:", "tensor<3xf32>"]),
    "missing_file": ("no_such_file.mlir", ["no_such_file.mlir", "no such file"]),
    "directory": ("directory.mlir", ["directory.mlir", "directory"]),
    "binary_file": ("binary.bin", ["binary.bin", "UTF-8"]),
    "malformed_bytecode": ("junk.mlirbc", ["junk.mlirbc"]),
    "future_artifact": ("future.vhlo.bc", ["future.vhlo.bc", "9.0.0", "newer"]),
    "truncated_artifact": ("truncated.vhlo.bc", ["truncated.vhlo.bc", "portable artifact"]),
}


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("case", list(FILE_CASES))
def test_bad_file(files, tool, case):
    name, fragments = FILE_CASES[case]
    assert_one_line_error(run_tool(tool, [name], files), tool, *fragments)


def test_good_inputs_run(files):
    """The control: the module and npz the bad cases below are variations of do run."""
    result = run_tool("run", ["add.mlir", "--inputs", "good.npz"], files)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    result = run_tool("opt", ["add.mlir"], files)
    assert result.returncode == 0, result.stderr
    assert "xhlo" in result.stdout


def test_empty_module_has_no_entry(files):
    """An empty module imports (mlirxla-opt prints it) but has nothing to run; say which file."""
    assert run_tool("opt", ["empty.mlir"], files).returncode == 0
    assert_one_line_error(run_tool("run", ["empty.mlir"], files), "run", "empty.mlir", "@main")


# (module, npz, fragments): mlirxla-run --inputs.
NPZ_CASES = {
    "wrong_shape": ("add.mlir", "shape.npz", ["argument #0", "shape", "[2]", "[3]"]),
    "wrong_dtype": ("add.mlir", "dtype.npz", ["argument #0", "dtype", "float32", "int32"]),
    "too_few_arrays": ("two.mlir", "too_few.npz", ["2 arguments", "got 1"]),
    "too_many_arrays": ("add.mlir", "too_many.npz", ["argument", "2"]),
    "not_an_npz": ("add.mlir", "text.npz", ["text.npz"]),
    "truncated_npz": ("add.mlir", "truncated.npz", ["truncated.npz"]),
    "missing_npz": ("add.mlir", "no_such_inputs.npz", ["no_such_inputs.npz", "no such file"]),
}


@pytest.mark.parametrize("case", list(NPZ_CASES))
def test_bad_inputs_npz(files, case):
    module, npz, fragments = NPZ_CASES[case]
    assert_one_line_error(run_tool("run", [module, "--inputs", npz], files), "run", *fragments)


def test_chlo_custom_syntax_without_jax_names_the_extra(monkeypatch, tmp_path):
    """Without jaxlib, chlo custom syntax is refused with the extra to install."""
    import sys as system

    from mlirxla.context import new_context
    from mlirxla.errors import MlirxlaError
    from mlirxla import frontdoor

    for name in list(system.modules):
        if name in ("jax", "jaxlib") or name.startswith(("jax.", "jaxlib.")):
            monkeypatch.setitem(system.modules, name, None)
    monkeypatch.setitem(system.modules, "jax", None)
    text = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = chlo.erf %x : tensor<4xf32> -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    with pytest.raises(MlirxlaError) as raised:
        frontdoor.import_text(text, "erf.mlir", new_context())
    assert "install the jax extra (pip install 'mlirxla[jax]')" in str(raised.value)
    assert str(raised.value).startswith("erf.mlir: ")


def test_integer_division_by_zero_is_an_error_not_a_crash(tmp_path):
    """The interpreter dies with SIGFPE on an integer division by zero: it runs in a child. The
    cpu backend's kernels give XLA's answer instead (-1)."""
    module = tmp_path / "div.mlir"
    module.write_text("func.func @main(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> {\n"
                      "  %0 = stablehlo.divide %a, %b : tensor<3xi32>\n  return %0 : tensor<3xi32>\n}\n")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, arg0=np.array([1, 2, 3], np.int32), arg1=np.array([1, 0, 3], np.int32))
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", str(module), "--inputs", str(inputs), "--backend", "reference"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == f"mlirxla-run: error: {module}: the reference interpreter crashed with SIGFPE (integer division by zero or overflow?)"
    native = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", str(module), "--inputs", str(inputs)], capture_output=True, text=True)
    assert native.returncode == 0, native.stderr
    assert "int32[3] [ 1, -1,  1]" in native.stdout  # XLA's meaning of x / 0 for signed integers: -1
