"""The cuda backend without a GPU: its kernels compile to PTX that ptxas accepts (sm_90, and
sm_80 as a second target), its loop nests are mapped as stated (one thread per element,
blocks of 256, parallel dimensions first), the mapped loop nests compute what the reference
interpreter computes when run on this CPU (the `cuda-host` backend), the executable file
holds the plan and code, and `mlirxla-opt --pipeline=cuda --dump-to` writes each kernel's
LLVM IR, PTX and ptxas figures."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cuda import compiler, ptx, ptxas
from mlirxla.backends.cuda.loop_mapping import BLOCK_THREADS
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime.client import Client
from mlirxla.runtime.cuda.executable_file import ExecutableFile

from .conftest import JAX_PROGRAMS, REPOSITORY

PTXAS_ABSENT = ptxas.unavailable()
needs_ptxas = pytest.mark.skipif(PTXAS_ABSENT is not None, reason=PTXAS_ABSENT or "")
PROGRAMS = os.path.join(JAX_PROGRAMS, "programs")
BENCHMARKS = sorted(name.split(".")[0] for name in os.listdir(PROGRAMS) if name.endswith(".stablehlo.mlir"))
SAMPLE = ["mlp_softmax_small", "softmax"]  # the default suite's; the rest run under slow


def compile_text(text: str, source: str = "test.mlir") -> compiler.CudaProgram:
    imported = frontdoor.import_bytes(text.encode(), source, new_context())
    return compiler.compile_program(imported.module, RunOptions(backend="cuda"))


def compile_benchmark(name: str) -> compiler.CudaProgram:
    with open(os.path.join(PROGRAMS, f"{name}.stablehlo.mlir")) as handle:
        return compile_text(handle.read(), f"{name}.stablehlo.mlir")


def launches(thunks: list) -> list[dict]:
    found = []
    for thunk in thunks:
        if thunk["kind"] == "launch":
            found.append(thunk)
        for key in ("condition", "body"):
            found += launches(thunk.get(key, []))
        for branch in thunk.get("branches", []):
            found += launches(branch)
    return found


def check_accepted(program: compiler.CudaProgram) -> None:
    """Every PTX entry assembled by ptxas for sm_90 (with figures), every launch naming one,
    every pointer inside the slab."""
    entries = ptx.kernel_names(program.ptx)
    assert ".target sm_90" in program.ptx
    # every kernel the plan had is launched, unless a cuBLASLt matmul computes it as its epilogue
    fused = [d for d in program.decisions if "GEMM and epilogue kernel as one cuBLASLt matmul" in d]
    assert entries or fused
    assert program.cubin is not None and program.cubin.data.startswith(b"\x7fELF")
    assert sorted(r.name for r in program.cubin.resources) == sorted(entries)
    plan = program.executable.plan
    emitter_of = {launch.kernel: emitter for kernel in program.kernels for launch, emitter in zip(kernel.launches, kernel.emitters)}
    for launch in launches(plan["thunks"]):
        assert launch["kernel"] in entries
        assert all(0 <= offset < plan["slab_bytes"] and offset % 256 == 0 for offset in launch["arguments"])
        threads, blocks = launch["block"][0], launch["grid"][0]
        assert list(launch["block"][1:]) == [1, 1] and list(launch["grid"][1:]) == [1, 1]
        if emitter_of[launch["kernel"]] in ("row", "column", "transpose"):  # a power of two threads, at most 1024 a block
            assert threads <= 1024 and threads & (threads - 1) == 0 and blocks >= 1, launch
        else:  # one linear index: full blocks of BLOCK_THREADS, or a single block for fewer elements
            assert 1 <= threads <= BLOCK_THREADS and blocks >= 1 and (blocks == 1 or threads == BLOCK_THREADS)


@needs_ptxas
@pytest.mark.parametrize("name", SAMPLE)
def test_sample_programs_compile_to_ptx_that_ptxas_accepts(name):
    check_accepted(compile_benchmark(name))


@needs_ptxas
@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in BENCHMARKS if name not in SAMPLE])
def test_every_benchmark_program_compiles_to_ptx_that_ptxas_accepts(name):
    check_accepted(compile_benchmark(name))


@needs_ptxas
def test_kernels_also_assemble_for_sm_80():
    program = compile_benchmark("mlp_softmax_small")
    irs = [kernel_ir for kernel in program.kernels if not kernel.same_as for kernel_ir in kernel.llvm_ir]
    text, _ = ptx.emit_ptx(irs, "sm_80")
    assert ".target sm_80" in text
    assert sorted(r.name for r in ptxas.assemble(text, "sm_80").resources) == sorted(ptx.kernel_names(program.ptx))


@needs_ptxas
def test_ptxas_refusal_is_one_line_naming_the_target():
    with pytest.raises(MlirxlaError, match=r"ptxas refused the PTX for sm_90: .*kernels.ptx"):
        ptxas.assemble(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n")


COLUMN_SUM = """func.func @main(%x: tensor<64x300xf32>) -> tensor<300xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x300xf32>, tensor<f32>) -> tensor<300xf32>
  return %s : tensor<300xf32>
}
"""


def test_column_reduction_runs_32_columns_per_block():
    """The column emitter: 300 kept columns in 10 blocks of 32 columns x 32 threads, each
    thread folding every 32nd of the 64 rows; the initial values are a phase of the same
    launch."""
    program = compile_text(COLUMN_SUM)
    (kernel,) = program.kernels
    assert kernel.emitters == ("column",)
    assert [(launch.grid, launch.block) for launch in kernel.launches] == [((10, 1, 1), (1024, 1, 1))]
    assert "scf.for" in kernel.loops and "processor = thread_x" in kernel.loops and "gpu.barrier" in kernel.loops


def test_scalar_work_runs_on_one_thread():
    program = compile_text("""func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %y = stablehlo.multiply %x, %x : tensor<f32>
  return %y : tensor<f32>
}
""")
    assert [(launch.grid, launch.block) for kernel in program.kernels for launch in kernel.launches] == [((1, 1, 1), (1, 1, 1))]


def test_mapped_loop_nests_on_the_cpu_match_the_reference(tmp_path):
    """The cuda-host backend runs each kernel's blocks-and-threads loop nest sequentially:
    `mlirxla-run --check` compares it with the StableHLO reference interpreter."""
    path = os.path.join(PROGRAMS, "mlp_softmax_small.stablehlo.mlir")
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", path, "--backend", "cuda-host", "--check",
                           "--dump-to", str(tmp_path)], capture_output=True, text=True, cwd=REPOSITORY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output(s) match" in done.stdout
    sequence = next(f for f in os.listdir(tmp_path) if f.endswith("thunk-sequence.txt"))
    assert "reference interpreter" not in open(tmp_path / sequence).read()


DYNAMIC_SLICE = """func.func @main(%x: tensor<8x16xf32>, %i: tensor<i32>) -> tensor<1x16xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %s = stablehlo.dynamic_slice %x, %i, %zero, sizes = [1, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<1x16xf32>
  %e = stablehlo.exponential %s : tensor<1x16xf32>
  return %e : tensor<1x16xf32>
}
"""


@needs_ptxas  # its exp calls libdevice, which comes with ptxas in the cuda extra
def test_a_dynamic_slice_offset_is_read_inside_the_kernel():
    """The slice's offset, loaded from a buffer, is recomputed by the loop nest that reads
    it (nothing stays on the host but launches), and the result is the row asked for."""
    program = compile_text(DYNAMIC_SLICE)
    loops = program.kernels[0].loops
    assert "memref.load" in loops and "memref.load" not in loops.split("scf.parallel")[0]
    x = np.arange(128, dtype=np.float32).reshape(8, 16) / 64
    for row in (0, 5, 11):  # 11 is clamped to the last row that fits, 7
        (result,) = Client(backend="cuda-host").compile(DYNAMIC_SLICE).execute_numpy([x, np.array(row, np.int32)])
        np.testing.assert_allclose(result, np.exp(x[min(row, 7):min(row, 7) + 1]), rtol=1e-6)


def test_cuda_host_backend_computes_what_the_cpu_backend_does():
    arguments = [np.linspace(-3, 3, 64 * 300, dtype=np.float32).reshape(64, 300)]
    (on_host,) = Client(backend="cuda-host").compile(COLUMN_SUM).execute_numpy(arguments)
    np.testing.assert_allclose(on_host, arguments[0].sum(axis=0), rtol=1e-5, atol=1e-5)


def test_executable_file_round_trips_and_refuses_other_files():
    program = compile_text(COLUMN_SUM)
    data = program.executable.to_bytes()
    again = ExecutableFile.from_bytes(data)
    assert again.plan == program.executable.plan and again.blobs["ptx"] == program.ptx.encode()
    assert again.plan["parameters"] == [{"offset": 0, "bytes": 64 * 300 * 4, "shape": [64, 300], "dtype": "float32"}]
    from mlirxla.runtime.cuda import ExecutableFileError

    with pytest.raises(ExecutableFileError, match="no MLIRXLA-CUDA magic"):
        ExecutableFile.from_bytes(b"\x7fELF")
    newer = data.replace(b'"version": 2', b'"version": 9', 1)
    with pytest.raises(ExecutableFileError, match="version 9: this runtime reads mlirxla-cuda versions 1, 2"):
        ExecutableFile.from_bytes(newer)


def test_the_client_refuses_the_cuda_backend_in_this_process():
    with pytest.raises(MlirxlaError, match="run on a GPU through mlirxla.runtime.cuda"):
        Client(backend="cuda")


@needs_ptxas
def test_opt_cuda_pipeline_dumps_llvm_ir_ptx_and_resources(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.opt", os.path.join(PROGRAMS, "softmax.stablehlo.mlir"),
                           "--pipeline=cuda", "--dump-to", str(tmp_path)], capture_output=True, text=True, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr
    files = os.listdir(tmp_path)
    assert any(f.endswith(".cuda_after_optimizations.mlir") for f in files) and not any("cpu_after" in f for f in files)
    kernel_ptx = [f for f in files if f.endswith(".ptx") and not f.endswith("kernels.ptx")]
    assert kernel_ptx and all(f"{f[:-4]}.ll" in files for f in kernel_ptx)
    resources = open(tmp_path / next(f for f in files if f.endswith("kernel-resources.txt"))).read()
    assert resources.startswith("ptxas -arch=sm_90 -v\n") and " registers, " in resources
    entries = ptx.kernel_names(open(tmp_path / next(f for f in files if f.endswith(".kernels.ptx"))).read())
    assert len(resources.splitlines()) == 1 + len(entries)
    streams = open(tmp_path / next(f for f in files if f.endswith("stream-assignment.txt"))).read().splitlines()
    assert streams[0] == "1 stream(s), 0 event(s)" and all(line.endswith(": stream 0") for line in streams[1:])  # the softmax is a chain


def test_compile_tool_writes_the_executable(tmp_path):
    source, output = tmp_path / "sum.mlir", tmp_path / "sum.mlirxla"
    source.write_text(COLUMN_SUM)
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.compile", str(source), "--backend", "cuda", "-o", str(output)],
                          capture_output=True, text=True, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr
    assert ExecutableFile.from_bytes(output.read_bytes()).plan["outputs"][0]["shape"] == [300]


LSTM_CELL = """func.func @main(%bias: tensor<64xf32>, %xw: tensor<8x64xf32>, %hu: tensor<8x64xf32>, %c: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %biases = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %sum = stablehlo.add %xw, %hu : tensor<8x64xf32>
  %gates = stablehlo.add %sum, %biases : tensor<8x64xf32>
  %i = stablehlo.slice %gates [0:8, 0:16] : (tensor<8x64xf32>) -> tensor<8x16xf32>
  %f = stablehlo.slice %gates [0:8, 16:32] : (tensor<8x64xf32>) -> tensor<8x16xf32>
  %g = stablehlo.slice %gates [0:8, 32:48] : (tensor<8x64xf32>) -> tensor<8x16xf32>
  %o = stablehlo.slice %gates [0:8, 48:64] : (tensor<8x64xf32>) -> tensor<8x16xf32>
  %si = stablehlo.logistic %i : tensor<8x16xf32>
  %sf = stablehlo.logistic %f : tensor<8x16xf32>
  %tg = stablehlo.tanh %g : tensor<8x16xf32>
  %so = stablehlo.logistic %o : tensor<8x16xf32>
  %kept = stablehlo.multiply %sf, %c : tensor<8x16xf32>
  %new = stablehlo.multiply %si, %tg : tensor<8x16xf32>
  %c2 = stablehlo.add %kept, %new : tensor<8x16xf32>
  %tc = stablehlo.tanh %c2 : tensor<8x16xf32>
  %h2 = stablehlo.multiply %so, %tc : tensor<8x16xf32>
  return %h2, %c2 : tensor<8x16xf32>, tensor<8x16xf32>
}
"""


def test_an_lstm_cell_whose_gates_are_slices_of_one_sum_compiles_and_computes(monkeypatch):
    """One multi-output kernel reads four slices of the gates' sum: sinking the slices into
    the sum erases ops a snapshot still held, which outside an erasure stage was an
    IndexError (or worse) in the cuda backend's kernel compile; its results match numpy."""
    from .test_cuda_emitters import compile_text, run_on_host

    compile_text(LSTM_CELL)
    rng = np.random.default_rng(6)
    bias, xw, hu, c = rng.standard_normal(64), rng.standard_normal((8, 64)), rng.standard_normal((8, 64)), rng.standard_normal((8, 16))
    bias, xw, hu, c = (v.astype(np.float32) for v in (bias, xw, hu, c))
    h2, c2 = run_on_host(LSTM_CELL, [bias, xw, hu, c], monkeypatch)[0]
    gates = (xw.astype(np.float64) + hu + bias)
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    i, f, g, o = sigmoid(gates[:, :16]), sigmoid(gates[:, 16:32]), np.tanh(gates[:, 32:48]), sigmoid(gates[:, 48:])
    expected_c = f * c + i * g
    np.testing.assert_allclose(c2, expected_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h2, o * np.tanh(expected_c), rtol=1e-5, atol=1e-6)


BIT_COUNTS = """func.func @main(%x: tensor<64xi64>) -> (tensor<64xi64>, tensor<64xi64>) {
  %ones = stablehlo.popcnt %x : tensor<64xi64>
  %leading = stablehlo.count_leading_zeros %x : tensor<64xi64>
  return %ones, %leading : tensor<64xi64>, tensor<64xi64>
}
"""


def test_bit_counts_have_no_libdevice_call_and_become_ptx_instructions(monkeypatch):
    """popcnt and count_leading_zeros (math.ctpop, math.ctlz) are LLVM intrinsics, which
    the NVPTX back end emits as popc and clz."""
    from .test_cuda_emitters import compile_text, run_on_host

    program = compile_text(BIT_COUNTS)
    assert "popc.b64" in program.ptx and "clz.b64" in program.ptx
    x = np.random.default_rng(8).integers(-2**63, 2**63 - 1, 64, dtype=np.int64) >> np.arange(64, dtype=np.int64) % 63
    ones, leading = run_on_host(BIT_COUNTS, [x], monkeypatch)[0]
    bits = [format(int(v) & (2**64 - 1), "064b") for v in x]
    np.testing.assert_array_equal(ones, [b.count("1") for b in bits])
    np.testing.assert_array_equal(leading, [len(b) - len(b.lstrip("0")) for b in bits])
