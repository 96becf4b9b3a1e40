"""Executions reuse the memory the previous one freed (`runtime/freed_memory.py`), and the temp
slab a finished execution left (`Executable.spare_temps`): outputs or temps written into
fresh kernel pages page-fault once per 4 KiB, which cost an Adam step over many parameters
three quarters of its time, and a cross-entropy gradient's 33 MiB slab (above the 32 MiB
malloc maps fresh from the kernel) its zero fill at a tenth of the bandwidth. Counted as
minor page faults (`getrusage`), in a process of its own so that no other test's allocations
are counted. Outputs and slabs of 64 KiB or more start on 64 bytes, as XLA:CPU's buffers do."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mlirxla.runtime import freed_memory, memory
from mlirxla.runtime.client import Client

# sixteen 1 MiB outputs: 16 MiB freed per call, far above glibc's default trim threshold
# (2 MiB after the first free of a 1 MiB block), so without retention every call faults
# 4,096 times
MANY_OUTPUTS = textwrap.dedent("""
    import resource
    import numpy as np
    from mlirxla.runtime.client import Client

    count = 16
    results = ", ".join(["tensor<262144xf32>"] * count)
    body = "".join(f"    %r{i} = stablehlo.add %x, %x : tensor<262144xf32>\\n" for i in range(count))
    names = ", ".join(f"%r{i}" for i in range(count))
    program = (f"func.func @main(%x: tensor<262144xf32>) -> ({results}) {{\\n{body}"
               f"    return {names} : {results}\\n}}\\n")
    executable = Client().compile(program)
    argument = np.ones(262144, np.float32)
    for _ in range(3):
        outputs = executable.execute_numpy([argument])
        assert all((output == 2).all() for output in outputs)
        del outputs
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        executable.execute_numpy([argument])
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 5)
""")


# the square is a temp (the GEMM reads it: no fusion takes it)
SQUARE_THEN_GEMM = """func.func @main(%x: tensor<512x4096xf32>, %w: tensor<4096x256xf32>) -> tensor<512x256xf32> {
  %t = stablehlo.multiply %x, %x : tensor<512x4096xf32>
  %r = stablehlo.dot_general %t, %w, contracting_dims = [1] x [0] : (tensor<512x4096xf32>, tensor<4096x256xf32>) -> tensor<512x256xf32>
  return %r : tensor<512x256xf32>
}"""


def test_an_execution_reuses_the_temp_slab_a_finished_one_left():
    """Page faults do not show it where the kernel backs a large mapping with huge pages, so
    the slab's address does: the second execution runs in the first one's slab, and two
    executions at once get two slabs."""
    executable = Client().compile(SQUARE_THEN_GEMM).executable
    assert "temp" in executable.plan.allocation_kinds
    x, w = np.full((512, 4096), 0.5, np.float32), np.ones((4096, 256), np.float32)
    assert (executable.execute([x, w])[0] == 1024).all()
    (slab,) = executable.spare_temps
    addresses = {index: array.ctypes.data for index, array in slab.items()}
    assert (executable.execute([x, w])[0] == 1024).all()
    (again,) = executable.spare_temps
    assert {index: array.ctypes.data for index, array in again.items()} == addresses
    first, second = executable.allocate(), executable.allocate()
    assert all(first[index].ctypes.data != second[index].ctypes.data for index in addresses)


@pytest.mark.skipif(freed_memory._glibc_mallopt() is None, reason="malloc here takes no mallopt")
def test_an_execution_writes_its_outputs_into_memory_the_last_one_freed():
    run = subprocess.run([sys.executable, "-c", MANY_OUTPUTS], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    faults_per_call = int(run.stdout.split()[-1])
    assert faults_per_call < 4096 // 8, f"{faults_per_call} page faults per call: the outputs landed in fresh pages"


# through jax's plugin (which holds each result until the next replaces it): a complex FFT
# whose scipy result (2 MiB, before it is copied into the output) is freed at the heap's top,
# after another FFT moved that top; with the trim threshold only twice the outputs, 992
# faults per call
FFT_AFTER_ANOTHER = textwrap.dedent("""
    import resource
    import numpy as np, jax, jax.numpy as jnp
    z = jax.device_put(np.ones((64, 4096), np.complex64))
    big = jax.device_put(np.ones(65536, np.float32))
    fft, rfft = jax.jit(jnp.fft.fft), jax.jit(jnp.fft.rfft)
    for function, argument in ((fft, z), (rfft, big), (fft, z)):
        for _ in range(3):
            jax.block_until_ready(function(argument))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        jax.block_until_ready(fft(z))
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 10)
""")


@pytest.mark.jax
@pytest.mark.skipif(freed_memory._glibc_mallopt() is None, reason="malloc here takes no mallopt")
def test_memory_a_host_call_frees_beside_the_outputs_is_kept():
    pytest.importorskip("jax")
    run = subprocess.run([sys.executable, "-c", FFT_AFTER_ANOTHER], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "JAX_PLATFORMS": "mlirxla"})
    assert run.returncode == 0, run.stderr
    faults_per_call = int(run.stdout.split()[-1])
    assert faults_per_call < 64, f"{faults_per_call} page faults per call: the FFT's memory went back to the kernel"


def test_retention_grows_with_the_largest_execution_and_never_shrinks():
    if freed_memory._glibc_mallopt() is None:
        assert freed_memory.keep_for(1 << 20) == 0
        return
    kept = freed_memory.keep_for(3 << 20)
    assert kept >= max(6 << 20, min(freed_memory.HEAP_KEPT_AT_LEAST, memory.physical_memory() // 8))
    assert freed_memory.keep_for(1 << 20) == kept
    assert freed_memory.keep_for(1 << 40) == min(memory.physical_memory() // 8, freed_memory.LARGEST_KEPT)


# a 40 MiB output: above glibc's largest heap block, so malloc would map it fresh every call
LARGE_OUTPUT = """func.func @main(%x: tensor<10485760xf32>) -> tensor<10485760xf32> {
  %r = stablehlo.add %x, %x : tensor<10485760xf32>
  return %r : tensor<10485760xf32>
}"""


def test_an_output_above_the_heap_lands_where_the_last_one_died():
    """A freed 40 MiB output is kept, not unmapped, and the next execution writes into it; a
    view outliving its array keeps the block from being handed out while it is read."""
    blocks = freed_memory.LARGE_BLOCKS
    executable = Client().compile(LARGE_OUTPUT).executable
    x = np.arange(10485760, dtype=np.float32)
    (first,) = executable.execute([x])
    address, held = first.ctypes.data, blocks.held
    view = first[1:]
    del first
    assert blocks.held == held
    (second,) = executable.execute([x])
    assert second.ctypes.data != address and (view == 2 * x[1:]).all()
    del view
    assert blocks.held == held + (40 << 20) and address in blocks.free[40 << 20]
    (third,) = executable.execute([x])
    assert third.ctypes.data == address and blocks.held == held
    assert (third == 2 * x).all() and (second == third).all()


def test_large_blocks_keep_no_more_than_the_retention_budget():
    retention = freed_memory._Retention()
    blocks = freed_memory.LargeBlocks(retention)
    retention.keep(48 << 20)  # two 48 MiB blocks fit in the budget of 96 MiB
    unmapped = []
    munmap = blocks.munmap
    blocks.munmap = lambda address, size: unmapped.append(size) or munmap(address, size)
    arrays = [blocks.empty((12 << 20,), np.float32) for _ in range(3)]
    addresses = [array.ctypes.data for array in arrays]
    del arrays
    assert blocks.held == 96 << 20 and unmapped[-1] == 48 << 20
    kept = list(blocks.free[48 << 20])
    assert len(kept) == 2 and set(kept) < set(addresses)
    again = [blocks.empty((12 << 20,), np.float32) for _ in range(3)]
    assert {array.ctypes.data for array in again[:2]} == set(kept)
    assert blocks.held == 0
    for array in again:
        array[:] = 1
        assert (array == 1).all()


def test_large_outputs_and_slabs_start_on_64_bytes():
    executable = Client().compile(SQUARE_THEN_GEMM).executable
    x, w = np.full((512, 4096), 0.5, np.float32), np.ones((4096, 256), np.float32)
    for _ in range(3):  # malloc's 16-byte offsets come back in whichever order it frees and reuses blocks
        (product,) = executable.execute([x, w])
        assert product.ctypes.data % freed_memory.ALIGNMENT == 0
        assert all(array.ctypes.data % freed_memory.ALIGNMENT == 0 for array in executable.spare_temps[0].values())
    assert all(freed_memory.empty(shape, np.float32).ctypes.data % freed_memory.ALIGNMENT == 0
               for shape in [(16384,), (129, 131), (300, 1000)])
