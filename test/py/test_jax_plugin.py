"""JAX on mlirxla through the PJRT plugin (`runtime/pjrt/`), compared with JAX's own CPU
backend in the same process.

The plugin is found as JAX finds any plugin (the `jax_plugins` entry point of the installed
package); every computation runs with `jax.default_device` set to the mlirxla device, and
its result is compared with the same jitted function on the cpu device. The PJRT table
itself is checked through ctypes: the version it reports and that no entry is NULL.
"""

import ctypes
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

from mlirxla import jax_plugin  # noqa: E402

pytestmark = pytest.mark.jax

PJRT_FUNCTIONS = 128  # entries of PJRT_Api in the 0.90 header the plugin is built against
# positions of some entries in PJRT_Api 0.90
ERROR_DESTROY, ERROR_MESSAGE, ERROR_GET_CODE, CLIENT_CREATE, CLIENT_TOPOLOGY_DESCRIPTION = 0, 1, 2, 10, 95
INVALID_ARGUMENT, UNIMPLEMENTED = 3, 12
HEADER_WORDS = 5  # struct_size, extension_start, PJRT_Api_Version (struct_size, extension_start, major and minor)


class ErrorMessageArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("error", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("message_size", ctypes.c_size_t)]


class ErrorGetCodeArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("error", ctypes.c_void_p),
                ("code", ctypes.c_int)]


class PjrtTable:
    """The plugin's PJRT_Api, read and called through ctypes."""

    def __init__(self):
        self.library = ctypes.CDLL(jax_plugin.library_path())
        self.library.GetPjrtApi.restype = ctypes.c_void_p
        self.address = self.library.GetPjrtApi()
        self.words = ctypes.cast(self.address, ctypes.POINTER(ctypes.c_uint64))

    def function(self, index: int):
        return ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(self.words[HEADER_WORDS + index])

    def call(self, index: int, arguments: bytes) -> tuple[int, str] | None:
        """(code, message) of the error entry `index` returns for `arguments`, or None."""
        buffer = ctypes.create_string_buffer(arguments, len(arguments))
        error = self.function(index)(ctypes.addressof(buffer))
        if not error:
            return None
        message = ErrorMessageArgs(ctypes.sizeof(ErrorMessageArgs), None, error)
        self.function(ERROR_MESSAGE)(ctypes.addressof(message))
        code = ErrorGetCodeArgs(ctypes.sizeof(ErrorGetCodeArgs), None, error)
        assert self.function(ERROR_GET_CODE)(ctypes.addressof(code)) is None
        text = message.message[:message.message_size].decode()
        destroy = (ctypes.c_size_t * 3)(24, 0, error)
        self.function(ERROR_DESTROY)(ctypes.addressof(destroy))
        return code.code, text


@pytest.fixture(scope="module")
def devices():
    try:
        return jax.devices("mlirxla")[0], jax.devices("cpu")[0]
    except RuntimeError as error:
        pytest.fail(f"the mlirxla plugin did not register: {error}")


def on(device, function, *arguments):
    with jax.default_device(device):
        return jax.jit(function)(*arguments)


def assert_same_as_cpu(devices, function, *arguments, rtol=1e-5, atol=1e-6):
    mlirxla, cpu = devices
    got, expected = on(mlirxla, function, *arguments), on(cpu, function, *arguments)
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for leaf, want in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert leaf.devices() == {mlirxla}
        assert leaf.dtype == want.dtype and leaf.shape == want.shape
        wide = np.complex128 if np.iscomplexobj(want) else np.float64
        np.testing.assert_allclose(np.asarray(leaf, wide), np.asarray(want, wide), rtol=rtol, atol=atol)


def test_pjrt_table_reports_its_version_and_fills_every_entry():
    table = PjrtTable()
    major_minor = ctypes.cast(table.address + 32, ctypes.POINTER(ctypes.c_int32))
    assert (major_minor[0], major_minor[1]) == (0, 90)
    assert table.words[0] == 8 * (HEADER_WORDS + PJRT_FUNCTIONS)
    assert all(table.words[HEADER_WORDS + i] != 0 for i in range(PJRT_FUNCTIONS))


LAYOUTS_EXTENSION = 4  # PJRT_Extension_Type_Layouts
LAYOUTS_ENTRIES = 7  # PJRT_Layouts_Extension version 4: destroy, serialize, client, buffer, topology, outputs, parameters


class ClientDefaultLayoutArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("client", ctypes.c_void_p),
                ("type", ctypes.c_int), ("dims", ctypes.POINTER(ctypes.c_int64)), ("num_dims", ctypes.c_size_t),
                ("layout", ctypes.c_void_p)]


class SerializeLayoutArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("layout", ctypes.c_void_p),
                ("serialized_bytes", ctypes.c_void_p), ("serialized_bytes_size", ctypes.c_size_t),
                ("serialized_layout", ctypes.c_void_p), ("serialized_layout_deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


class DestroyLayoutArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("layout", ctypes.c_void_p)]


def extension_entries(table: PjrtTable, extension_type: int, entries: int) -> list[int]:
    """The function pointers of the extension of `extension_type` in the table's chain (each
    extension: struct_size, type, next, then its entries)."""
    extension = table.words[1]
    while extension:
        words = ctypes.cast(extension, ctypes.POINTER(ctypes.c_uint64))
        if words[1] & 0xFFFFFFFF == extension_type:
            assert words[0] == 8 * (3 + entries)
            return [words[3 + i] for i in range(entries)]
        extension = words[2]
    raise AssertionError(f"no extension of type {extension_type}")


def test_layouts_extension_serializes_row_major_layouts_as_xla_writes_them():
    """jaxlib reads an executable's output layouts through the layouts extension (not by
    converting its program to HLO) and calls every entry of it unchecked, so each is set; a
    layout serializes as XLA's Layout::ToString, which jaxlib parses."""
    destroy, serialize, client_default, *others = extension_entries(PjrtTable(), LAYOUTS_EXTENSION, LAYOUTS_ENTRIES)
    assert all(others)
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    for dims, text in (((), b"{}"), ((5,), b"{0}"), ((2, 3, 4), b"{2,1,0}"), (tuple(range(1, 12)), b"{10,9,8,7,6,5,4,3,2,1,0}")):
        extents = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        layout_args = ClientDefaultLayoutArgs(ctypes.sizeof(ClientDefaultLayoutArgs), None, None, 11, extents, len(dims), None)
        assert call(client_default)(ctypes.addressof(layout_args)) is None
        serialized = SerializeLayoutArgs(ctypes.sizeof(SerializeLayoutArgs), None, layout_args.layout)
        assert call(serialize)(ctypes.addressof(serialized)) is None
        assert ctypes.string_at(serialized.serialized_bytes, serialized.serialized_bytes_size) == text
        serialized.serialized_layout_deleter(serialized.serialized_layout)
        assert call(destroy)(ctypes.addressof(DestroyLayoutArgs(ctypes.sizeof(DestroyLayoutArgs), None, layout_args.layout))) is None


def test_unimplemented_entry_and_too_old_caller_get_errors_not_aborts():
    table = PjrtTable()
    assert table.call(CLIENT_TOPOLOGY_DESCRIPTION, (32).to_bytes(8, "little") + bytes(24)) == (
        UNIMPLEMENTED, "mlirxla does not implement PJRT_Client_TopologyDescription yet")
    code, message = table.call(CLIENT_CREATE, (16).to_bytes(8, "little") + bytes(8))
    assert code == INVALID_ARGUMENT
    assert message == ("mlirxla: PJRT_Client_Create got a 16-byte argument struct, too small for its 'client' field: "
                       "the caller's PJRT C API is older than this plugin supports")


def test_devices_and_memories(devices):
    mlirxla, _ = devices
    assert mlirxla.platform == "mlirxla" and mlirxla.device_kind == "cpu"
    assert mlirxla.default_memory().kind == "device"
    x = jax.device_put(np.arange(6, dtype=np.float32).reshape(2, 3), mlirxla)
    assert x.devices() == {mlirxla}
    np.testing.assert_array_equal(np.asarray(x), np.arange(6).reshape(2, 3))
    x.delete()
    assert x.is_deleted()


def sharding_in(device, kind: str):
    return jax.sharding.SingleDeviceSharding(device, memory_kind=kind)


def test_memory_kinds_are_those_of_xla_cpu(devices):
    """Arrays placed in host memory, jitted functions taking and returning them, and placements
    inside a program, as jax's cpu backend has them: the same kinds and values."""
    for device in devices:
        assert [memory.kind for memory in device.addressable_memories()] == ["device", "pinned_host", "unpinned_host"]

    def placed(device):
        host, on_device = sharding_in(device, "pinned_host"), sharding_in(device, "device")
        x = jax.device_put(np.arange(4, dtype=np.float32), sharding_in(device, "unpinned_host"))
        doubled = jax.jit(lambda v: v * 2, out_shardings=host)(x)
        added = jax.jit(lambda v: v + 1, in_shardings=host, out_shardings=on_device)(doubled)
        moved = jax.jit(lambda v: jax.device_put(jax.device_put(v * 3, jax.memory.Space.Host), jax.memory.Space.Device) + 1)(added)
        both = jax.jit(lambda v: (v - 1, jax.device_put(v, jax.memory.Space.Host)), out_shardings=(on_device, host))(moved)
        return [(array.sharding.memory_kind, np.asarray(array).tolist()) for array in (x, doubled, added, moved, *both)]

    mlirxla, cpu = devices
    assert placed(mlirxla) == placed(cpu)
    assert [kind for kind, _ in placed(mlirxla)] == ["unpinned_host", "pinned_host", "device", "device", "device", "pinned_host"]


def test_offloading_remat_policy_matches_cpu(devices):
    """A checkpoint policy that offloads a residual to pinned host memory (jax's host offloading,
    as large models use it): the gradient jax's cpu backend computes."""
    def loss(x):
        y = checkpoint_name(jnp.sin(x) * x, "residual")
        return jnp.sum(jnp.cos(y) ** 2)

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["residual"], offload_src="device", offload_dst="pinned_host")
    assert_same_as_cpu(devices, jax.grad(jax.checkpoint(loss, policy=policy)), np.linspace(-2, 2, 64, dtype=np.float32))


RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 16)).astype(np.float32)
W = RNG.standard_normal((16, 4)).astype(np.float32)
PARAMS = {"w1": W, "b1": np.zeros(4, np.float32), "w2": RNG.standard_normal((4, 2)).astype(np.float32)}


def mlp_loss(params, x):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"]) ** 2)


PROGRAMS = {
    "elementwise": (lambda a: jnp.exp(a) * jnp.sin(a) - a / 3, (X,)),
    "matmul": (lambda a, b: a @ b, (X, W)),
    "reductions": (lambda a: (a.sum(0), a.max(), jnp.mean(a, 1), jnp.argmax(a, 1)), (X,)),
    "scan": (lambda a: jax.lax.scan(lambda c, r: (c + r, c * 2), jnp.zeros(16), a), (X,)),
    "while": (lambda a: jax.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1), (0, a)), (X,)),
    "cond": (lambda p, a: jax.lax.cond(p, lambda v: v + 1, lambda v: v - 1, a), (np.bool_(False), X)),
    "grad of an mlp loss": (jax.grad(mlp_loss), (PARAMS, X)),
    "vmap": (jax.vmap(lambda row: jnp.dot(row, row)), (X,)),
    "jax.random": (lambda key: (jax.random.normal(key, (5,)), jax.random.randint(key, (3,), 0, 10)), (jax.random.key_data(jax.random.key(0)),)),
    "jax.random on a typed key": (lambda key: (jax.random.uniform(key, (3,)), jax.random.normal(jax.random.split(key)[1], (3,))),
                                  (jax.random.key(0),)),
    "pytree of outputs": (lambda a: (a + 1, {"twice": a * 2, "sum": a.sum()}), (X,)),
    "linalg.inv": (jnp.linalg.inv, (np.eye(3, dtype=np.float32) + 0.1,)),
    "linalg.eigh and svd": (lambda m: (jnp.linalg.eigh(m @ m.T)[0], jnp.linalg.svd(m, compute_uv=False),
                                        jnp.linalg.pinv(m) @ m), (X[:4, :4],)),
    "linalg.eigh and svd of non-finite matrices": (lambda m: (jnp.linalg.eigh(m)[0], jnp.linalg.svd(m, compute_uv=False),
                                                         *(jnp.isnan(part).all(axis=(-2, -1)) for part in (jnp.linalg.eigh(m)[1], *jnp.linalg.svd(m)[::2]))),
                                                   (np.stack([X[:4, :4] @ X[:4, :4].T, np.full((4, 4), np.nan, np.float32),
                                                              np.eye(4, dtype=np.float32) * np.inf]),)),
    # the second system's fourth row is zero: singular
    "tridiagonal solves, pivoted and perturbed": (lambda dl, d, du, b: [jax.lax.linalg.tridiagonal_solve(*(v.at[1, 3].set(0) for v in (dl, d, du)), b,
                                                                                                     perturb_singular=p) for p in (False, True)],
                                                  (X[:2, :8], X[2:4, :8], X[4:6, :8], X[:2, :8, None])),
    "linalg.qr, lu and lstsq": (lambda m: (*jnp.linalg.qr(m), *jax.scipy.linalg.lu(m), jnp.linalg.lstsq(m, X[:4, :2])[0]), (X[:4, :4],)),
    "linalg.eig, schur, hessenberg and tridiagonal": (lambda m: (*jnp.linalg.eig(m), *jax.scipy.linalg.schur(m), *jax.scipy.linalg.hessenberg(m, calc_q=True),
                                                                  *jax.lax.linalg.tridiagonal(m @ m.T)), (X[:4, :4],)),
    "linalg.cholesky and solve": (lambda m: (jnp.linalg.cholesky(m), jnp.linalg.solve(m, X[:3, :4])), (2 * np.eye(3, dtype=np.float32) + 0.1,)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_cpu(devices, name):
    function, arguments = PROGRAMS[name]
    if name == "jax.random":
        def function(data, sample=function):
            return sample(jax.random.wrap_key_data(data))
    assert_same_as_cpu(devices, function, *arguments, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int8", "int16", "int32", "int64", "uint8", "uint32", "bool"])
def test_dtypes(devices, dtype):
    values = (X * 10).astype(jnp.dtype(dtype))
    function = (lambda a: a | ~a) if dtype == "bool" else (lambda a: a * 2 + a)
    assert_same_as_cpu(devices, function, values)


def test_float64_with_x64(devices):
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        values = X.astype(np.float64)
        assert on(devices[0], lambda a: a * a, values).dtype == np.float64
        assert_same_as_cpu(devices, lambda a: jnp.tanh(a) @ a.T, values, rtol=1e-12, atol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_denormal_constants_survive_compiles_on_jaxs_flushing_threads(devices, dtype):
    """jaxlib compiles on threads that flush denormals (as XLA:CPU computes): the compiler's
    numpy arithmetic there read jnp.spacing's smallest-subnormal constant as zero, and the
    spacing of a subnormal came out 0 (jax's lax_numpy_operators_test testSpacingSubnormals)."""
    tiny = np.array([np.finfo(np.float32).smallest_subnormal], np.float32).astype(dtype)
    values = np.concatenate([-tiny * 3, -tiny, np.zeros(1, dtype), tiny, tiny * 2])
    got, want = (np.asarray(on(device, jnp.spacing, values)) for device in devices)
    assert got.tobytes() == want.tobytes() and np.any(want != 0)


def test_f64_exp_gives_xla_cpu_bits(devices):
    """f64 exp is XLA:CPU's own (Cephes' rational form after the ln 2 reduction): its bits
    across the whole range, 0 and inf past its bounds, NaN kept."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        values = np.concatenate([np.linspace(-750.0, 750.0, 30001), [np.nan, np.inf, -np.inf, -0.0, 709.78, -708.39]])
        got, want = (np.asarray(on(device, jnp.exp, values)) for device in devices)
        assert got.tobytes() == want.tobytes()
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_training_steps_give_cpu_losses(devices):
    def step(params, x):
        loss, grads = jax.value_and_grad(mlp_loss)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss

    losses = {}
    for device in devices:
        params, losses[device] = PARAMS, []
        for _ in range(5):
            params, loss = on(device, step, params, X)
            losses[device].append(float(loss))
    np.testing.assert_allclose(losses[devices[0]], losses[devices[1]], rtol=1e-5)
    assert losses[devices[0]][-1] < losses[devices[0]][0]


@pytest.mark.parametrize("shape", [(10, 10), (1, 1)])
def test_lu_gradient_compiles_and_matches_finite_differences(devices, shape):
    """jax's linalg_test testLuGrad: output fusion used to walk into an epilogue it had
    erased and kill the process (segfault), or end in an IndexError naming nothing."""
    from jax.test_util import check_grads

    matrix = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    with jax.default_device(devices[0]):
        check_grads(jax.scipy.linalg.lu, (matrix,), 2, atol=5e-2, rtol=3e-1)


@pytest.mark.parametrize("algorithm", ["RNG_THREE_FRY", "RNG_PHILOX", "RNG_DEFAULT"])
def test_rng_bit_generator_gives_xla_cpu_bits(devices, algorithm):
    """Bit for bit as XLA:CPU, over shapes that split in halves every way (scalar, odd, even,
    no even dimension, empty) and every output width: one program per algorithm."""
    key = np.array([0x12345678, 0x9ABCDEF0, 0xDEADBEEF, 0x0BADF00D], np.uint32)
    cases = [(shape, dtype) for shape in [(), (5,), (3, 5), (2, 0)] for dtype in [np.uint8, np.uint32]] + [((4, 3), np.uint16)]

    def generate(k):
        return [jax.lax.rng_bit_generator(k, shape, dtype=dtype, algorithm=getattr(jax.lax.RandomAlgorithm, algorithm)) for shape, dtype in cases]

    got, want = (on(device, generate, key) for device in devices)
    for case, leaf, expected in zip(cases * 2, jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(expected), err_msg=str(case))


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_rbg_keys_give_xla_cpu_numbers(devices, impl):
    """jax's rbg keys: bits and uniforms equal XLA:CPU's; normals within an ulp (our erf_inv)."""
    def sample(seed):
        key = jax.random.key(seed, impl=impl)
        return jax.random.bits(key, (4,), jnp.uint16), jax.random.uniform(key, (7,)), jax.random.normal(jax.random.split(key)[1], (2, 3))

    (bits, uniform, normal), (want_bits, want_uniform, want_normal) = (on(device, sample, np.uint32(42)) for device in devices)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(want_bits))
    np.testing.assert_array_equal(np.asarray(uniform), np.asarray(want_uniform))
    np.testing.assert_allclose(np.asarray(normal), np.asarray(want_normal), rtol=3e-7)


def test_gamma_samples_of_a_large_batch_are_xla_cpus(devices):
    """16384 samples: their threefry kernels write results over operands they read, and a
    chain of loop nests wrote one before its last read (`overwritten_operands.py`); every
    sample then differed from XLA's, their sum by only 0.06%."""
    alphas = np.random.default_rng(0).uniform(0.5, 3, 16384).astype(np.float32)

    def sample(data, a):
        return jax.random.gamma(jax.random.wrap_key_data(data), a)

    key = np.asarray(jax.random.key_data(jax.random.key(0)))
    assert_same_as_cpu(devices, sample, key, alphas, rtol=1e-5, atol=1e-5)


def test_erf_gives_xla_cpu_bits(devices):
    """f32 erf is XLA:CPU's own rational approximation (Eigen's interpolant), saturating to +-1
    at 3.8325: its bits, with NaN, infinities and signed zeros, and for bf16 (computed in
    f32). Results below the smallest normal are left out: XLA:CPU flushes them to zero."""
    x = np.concatenate([np.linspace(-5, 5, 20001), [np.nan, np.inf, -np.inf, -0.0, 0.0, 3.8325068, 3.8325069, 1e-30]])
    for dtype in (np.float32, jnp.bfloat16):
        values = x.astype(dtype)
        got, want = (np.asarray(on(device, jax.scipy.special.erf, values)) for device in devices)
        assert got.tobytes() == want.tobytes()


def test_sorts_match_cpu_bit_for_bit(devices):
    """Several keys (`num_keys`, lexsort), descending with NaNs and signed zeros, complex keys,
    top_k and approx_max_k / approx_min_k (exact on CPU): the host sort reads every comparator
    jax writes; ties keep their order. (approx_min_k's plain LT comparator leaves a NaN's place
    to the sort algorithm: XLA's std::sort and numpy's differ, so it gets no NaN.) Without
    `aggregate_to_topk` the result keeps the whole sorted dimension, as XLA's fallback does."""
    rng = np.random.default_rng(3)
    floats = rng.integers(0, 3, 24).astype(np.float32)
    floats[[3, 5, 6, 7]] = [np.nan, -0.0, 0.0, -np.inf]
    ints = rng.integers(0, 4, 24).astype(np.int32)
    complexes = (rng.integers(0, 2, 24) + 1j * rng.integers(0, 3, 24)).astype(np.complex64)

    def sorts(f, i, z):
        return (jax.lax.sort((f, i, f * 2), num_keys=2), jnp.lexsort((f, i)), jnp.argsort(f, descending=True, stable=True),
                jnp.sort(z), jax.lax.top_k(f * i, 5), jnp.sort(f.astype(jnp.bfloat16)), jax.lax.approx_max_k(f * i, 4),
                jax.lax.approx_min_k(jnp.nan_to_num(f).reshape(4, 6), 2, reduction_dimension=0),
                jax.lax.approx_max_k(jnp.nan_to_num(f).reshape(4, 6), 2, reduction_dimension=0, aggregate_to_topk=False))

    got, want = (on(device, sorts, floats, ints, complexes) for device in devices)
    for leaf, expected in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        leaf, expected = np.asarray(leaf), np.asarray(expected)
        assert leaf.tobytes() == expected.tobytes(), (leaf, expected)


def test_updates_with_no_elements(devices):
    """vmap of a dynamic_update_slice whose update has no elements is a scatter of nothing: the
    operand, unchanged (its scatter kernel did not lower before algsimp folded it)."""
    operand = np.arange(3 * 7 * 5 * 2, dtype=np.float32).reshape(3, 7, 5, 2)
    update = np.ones((3, 2, 0, 1), np.float32)
    assert_same_as_cpu(devices, jax.vmap(lambda o, u: jax.lax.dynamic_update_slice(o, u, (4, 1, 0))), operand, update)


def test_host_arrays_with_negative_strides(devices):
    """A reversed view (jax's conv_transpose tests flip kernels with numpy) is copied from
    its first element backwards."""
    mlirxla, _ = devices
    view = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::-2]
    np.testing.assert_array_equal(np.asarray(jax.device_put(view, mlirxla)), view)


def test_donated_argument_is_consumed(devices):
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        double = jax.jit(lambda a: a * 2, donate_argnums=0)
        x = jax.device_put(X, mlirxla)
        y = double(x)
        assert x.is_deleted()
        np.testing.assert_allclose(np.asarray(y), X * 2)
        kept = jax.device_put(X, mlirxla)
        jax.jit(lambda a: a * 2)(kept)
        assert not kept.is_deleted()


def test_donated_argument_no_output_computes_in_is_consumed_too(devices):
    """As on XLA, a donated buffer is gone after the call even where no output took its
    memory: returned as it is (a weak-typed int astype'd to its own dtype) or where buffer
    assignment kept the output apart (api_test's test_jit_donate_weak_type)."""
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        x = jnp.broadcast_to(2, (3,))
        y = jax.jit(lambda a: a.astype(int), donate_argnums=0)(x)
        assert x.is_deleted()
        np.testing.assert_array_equal(np.asarray(y), [2, 2, 2])
        z = jax.device_put(np.ones(1, np.float32), mlirxla)
        jax.jit(lambda a: a + a - a, donate_argnums=0)(z)
        assert z.is_deleted()


def test_a_buffer_donated_and_also_passed_again_is_refused(devices):
    """f(donate(a), a): the execution would overwrite what the other argument reads; XLA
    refuses it, and so does the plugin (api_test's test_double_donation), leaving `a` alive."""
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        add = jax.jit(lambda a, b: a + b, donate_argnums=0)
        x = jnp.arange(10, dtype=jnp.float32)
        with pytest.raises(RuntimeError, match="donated and is also argument 1"):
            add(x, x).block_until_ready()
        assert not x.is_deleted()
        np.testing.assert_array_equal(np.asarray(add(jnp.ones(10), x)), np.arange(10) + 1)


def test_tokens_made_returned_and_passed_through_jit(devices):
    """`jax.lax.create_token` lowers to `stablehlo.create_token` (api_test's token tests)."""
    from jax._src.core import Token

    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        token = jax.lax.create_token()
        assert isinstance(jax.jit(jax.lax.create_token)(1.0), Token)
        value, passed = jax.jit(lambda a, t: (a + 2, t))(jnp.float32(7), token)
        assert isinstance(passed, Token) and passed is not token
        assert float(value) == 9.0


def test_entry_layouts_are_row_major_as_on_cpu(devices):
    """The layouts jax reads off a compiled executable are those of its buffers, as on jax's
    cpu backend: a returned transpose was reported column-major, and a user asking for the
    row-major layout was refused ("Unexpected XLA layout override")."""
    from jax.experimental.layout import Format, Layout

    def layouts(device):
        with jax.default_device(device):
            compiled = jax.jit(lambda x: (x.T, x + 1, x.sum(), x[0, 0])).lower(np.zeros((4, 3, 2), np.int32)).compile()
            buffer = jax.device_put(np.zeros((2, 3)), device)
        return ([compiled.input_formats[0][0].layout.major_to_minor] + [f.layout.major_to_minor for f in compiled.output_formats]
                + [buffer.format.layout.major_to_minor])

    mlirxla, cpu = devices
    assert layouts(mlirxla) == layouts(cpu) == [(0, 1, 2)] * 3 + [(), (0,), (0, 1)]
    row_major = Format(Layout(major_to_minor=(0, 1)), jax.sharding.SingleDeviceSharding(mlirxla))
    out = jax.jit(lambda x: x.T, out_shardings=row_major)(jax.device_put(np.arange(6.0).reshape(2, 3), mlirxla))
    np.testing.assert_array_equal(np.asarray(out), np.arange(6.0).reshape(2, 3).T)


def test_host_arrays_are_viewed_without_copy_and_never_written(devices):
    """device_put of a numpy array views its memory (JAX asks for zero copy); donating that
    buffer computes into a copy, so the host array keeps its values; once the buffer is gone
    JAX lets go of the host array (the done_with_host_buffer event fired)."""
    mlirxla, _ = devices
    x = np.arange(1024, dtype=np.float32)
    kept, references = x.copy(), sys.getrefcount(x)
    with jax.default_device(mlirxla):
        on_device = jax.device_put(x, mlirxla)
        assert on_device.unsafe_buffer_pointer() == x.ctypes.data
        doubled = jax.jit(lambda a: a * 2, donate_argnums=0)(on_device)
    assert on_device.is_deleted()
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_array_equal(np.asarray(doubled), kept * 2)
    del on_device
    gc.collect()
    assert sys.getrefcount(x) == references
    with jax.default_device(mlirxla):
        viewed = jax.device_put(x, mlirxla)
        returned = jax.jit(lambda a: a.astype(jnp.float32), donate_argnums=0)(viewed)
    assert viewed.is_deleted()
    assert returned.unsafe_buffer_pointer() != x.ctypes.data  # a donated view returned as it is is copied
    np.testing.assert_array_equal(np.asarray(returned), kept)


SEVERAL_DEVICES = """
import jax, numpy as np
assert [d.id for d in jax.devices()] == [0, 1, 2], jax.devices()
third = jax.device_put(np.arange(4, dtype=np.float32), jax.devices()[2])
result = jax.jit(lambda a: a * 2 + 1)(third)
assert result.devices() == {jax.devices()[2]}, result.devices()
moved = jax.device_put(result, jax.devices()[1])
assert moved.devices() == {jax.devices()[1]}
np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a - 1)(moved)), np.arange(4) * 2)
print("ok")
"""


def test_programs_run_on_the_device_they_were_compiled_for():
    """MLIRXLA_NUM_DEVICES=3 gives three devices (a fresh process: jax creates its clients
    once); a program compiled for device 2, by jax's device assignment, runs and leaves its
    results there."""
    environment = dict(os.environ, MLIRXLA_NUM_DEVICES="3", JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", SEVERAL_DEVICES], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


SPARSE_SOLVE = """
import sys, jax, jax.numpy as jnp, numpy as np
if sys.argv[1] == "after":
    jax.devices()
from jax.experimental import sparse
matrix = np.array([[4, 1, 0, 0], [1, 3, 0, 2], [0, 0, 2, 0], [0, 2, 0, 5]], np.float32)
b = np.array([1, 2, 3, 4], np.float32)
data, indices, indptr = sparse.csr._csr_fromdense(jnp.asarray(matrix), nse=8)
x = jax.jit(sparse.linalg.spsolve)(data, indices, indptr, jnp.asarray(b))
assert x.devices() == set(jax.devices("mlirxla")), x.devices()
np.testing.assert_allclose(np.asarray(x), np.linalg.solve(matrix, b), rtol=1e-5)
gradient = jax.grad(lambda b: sparse.linalg.spsolve(data, indices, indptr, b).sum())(jnp.asarray(b))
np.testing.assert_allclose(np.asarray(gradient), np.linalg.solve(matrix.T, np.ones(4, np.float32)), rtol=1e-5)
print("ok")
"""


@pytest.mark.parametrize("imported", ["before", "after"])
def test_sparse_solve(imported):
    """`jax.experimental.sparse.linalg.spsolve` (and its gradient, a transposed solve) on the
    plugin, with jax's sparse module imported before the backend starts or after it: jax lowers
    it only for cpu and cuda, and the plugin registers its rule when the module is imported."""
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", SPARSE_SOLVE, imported], env=environment, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


AFTER_EXIT_HOOKS = """
import atexit, jax, numpy as np
assert np.asarray(jax.jit(lambda x: x + 1)(np.zeros(2, np.float32))).tolist() == [1.0, 1.0]
atexit._run_exitfuncs()
try:
    jax.jit(lambda x: x * 3)(np.ones(2, np.float32))
except Exception as error:
    print(str(error).splitlines()[0])
"""


def test_plugin_calls_after_exit_hooks_are_refused_not_run():
    """The plugin's atexit hook stops calls into Python before the interpreter finalizes:
    a jaxlib thread that waited for the GIL then would be ended mid-call and abort the
    process (`mlirxla_pjrt.c`, shutdown). Calls after the hooks get an error instead."""
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", AFTER_EXIT_HOOKS], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the Python interpreter is shutting down" in done.stdout, done.stdout


def test_debug_print_and_callbacks(devices, capsys):
    """jax.debug.print and jax.debug.callback run on the host while the program runs: inside a
    loop, in order when ordered (jax threads a token through the program)."""
    mlirxla, _ = devices
    seen = []

    def program(x):
        jax.debug.print("first {}", x[0], ordered=True)
        total = jax.lax.fori_loop(0, 3, lambda i, c: (jax.debug.print("step {i}", i=i), c + x)[1], jnp.zeros_like(x))
        jax.debug.callback(lambda value: seen.append(np.array(value)), total)
        jax.debug.print("last {}", total[-1], ordered=True)
        return total

    with jax.default_device(mlirxla):
        result = jax.jit(program)(X[0])
    np.testing.assert_allclose(np.asarray(result), 3 * X[0], rtol=1e-6)
    np.testing.assert_allclose(seen[0], 3 * X[0], rtol=1e-6)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"first {X[0, 0]}" and lines[1:4] == ["step 0", "step 1", "step 2"]
    assert lines[4].startswith("last ")


def test_compile_error_reaches_jax_with_our_message(devices):
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        program = jax.jit(lambda low: jax.lax.rng_uniform(low, low + 1, (4,)))
        with pytest.raises(Exception, match=r"test_jax_plugin.py:\d+:\d+: xhlo.rng: rng is not implemented in the cpu backend yet \(jax primitive 'rng_uniform'\)"):
            program(np.float32(0))
        np.testing.assert_allclose(np.asarray(jax.jit(lambda a: a + 1)(X)), X + 1)


def mlirxla_frames(call) -> list[str]:
    """The Python functions of mlirxla that `call` runs."""
    names = []

    def record(frame, event, argument):
        if event == "call" and frame.f_globals.get("__name__", "").startswith("mlirxla"):
            names.append(f"{frame.f_globals['__name__']}.{frame.f_code.co_name}")

    sys.setprofile(record)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


NATIVE_PROGRAMS = {
    "one kernel": lambda a: jnp.tanh(a) + a,
    "a copy and a kernel": lambda a: (a[:3], a[3:] * 2),
    "a native driver": lambda a: (jnp.sort(a, 0), jnp.cumsum(a, 1), jnp.max(a, 0)),
    "a loop over temps": lambda a: jax.lax.fori_loop(0, 100, lambda i, c: c * 0.99 + 0.01 * i, a),
    "a kernel's scratch": lambda a: jax.nn.logsumexp(a, -1),
}


@pytest.mark.parametrize("name", NATIVE_PROGRAMS)
def test_small_programs_run_without_python(devices, name):
    """An execution whose outputs are fresh arrays of their own (no parameter written, no
    BLAS) and whose thunks are kernels (their scratch included) and copies, or one native
    driver that never calls back, over at most a MiB of temps, is run by the plugin itself:
    no mlirxla Python runs per call, and the results are the cpu backend's."""
    mlirxla, _ = devices
    function = NATIVE_PROGRAMS[name]
    assert_same_as_cpu(devices, function, X)
    with jax.default_device(mlirxla):
        jitted, x = jax.jit(function), jax.device_put(X, mlirxla)
        jax.block_until_ready(jitted(x))
        assert mlirxla_frames(lambda: jax.block_until_ready(jitted(x))) == []


def test_executions_walk_their_thunks_in_python_while_a_profile_records(devices):
    """While a profile records, a native execution walks its thunks in Python, where the
    profile times them; after it, the plugin runs it natively again."""
    from mlirxla.report import profile

    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        jitted, x = jax.jit(NATIVE_PROGRAMS["one kernel"]), jax.device_put(X, mlirxla)
        jax.block_until_ready(jitted(x))
        with profile.recording() as recorded:
            frames = mlirxla_frames(lambda: jax.block_until_ready(jitted(x)))
        assert "mlirxla.runtime.executable.execute_checked" in frames
        assert recorded.summary().startswith("mlirxla profile: 1 execution(s)")
        assert mlirxla_frames(lambda: jax.block_until_ready(jitted(x))) == []


def test_execute_with_wrong_buffers_is_an_error(devices):
    """Straight to the PJRT executable, past jax's own checks: a wrong shape comes back as an
    INVALID_ARGUMENT with the runtime's message, and the executable still runs."""
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        executable = jax.jit(lambda a: a + 1).lower(np.ones(4, np.float32)).compile().runtime_executable()
        with pytest.raises(Exception, match=r"INVALID_ARGUMENT: argument 0: expected shape \(4,\) \(f32\[4\]\), got \(5,\)"):
            executable.execute([jax.device_put(np.ones(5, np.float32), mlirxla)])
        [result] = executable.execute([jax.device_put(np.ones(4, np.float32), mlirxla)])
        np.testing.assert_array_equal(np.asarray(result), np.full(4, 2, np.float32))


def test_compiled_program_prints_as_hlo(devices):
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        text = jax.jit(lambda a: jnp.tanh(a) * 2).lower(X).compile().as_text()
    assert text.startswith("HloModule") and "tanh" in text


def test_memory_analysis(devices):
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        analysis = jax.jit(lambda a, b: jnp.tanh(a @ b) @ b.T).lower(X, W).compile().memory_analysis()
    assert analysis.argument_size_in_bytes == X.nbytes + W.nbytes
    assert analysis.output_size_in_bytes == X.nbytes
    assert analysis.generated_code_size_in_bytes > 0


def test_compiler_options_reach_the_dump(devices, tmp_path):
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        lowered = jax.jit(lambda a: jnp.tanh(a) + 1).lower(X)
        compiled = lowered.compile(compiler_options={"xla_dump_to": str(tmp_path), "xla_dump_hlo_pass_re": ".",
                                                     "xla_disable_hlo_passes": "xhlo-algsimp"})
        np.testing.assert_allclose(np.asarray(compiled(X)), np.tanh(X) + 1, rtol=1e-5)
        assert list(tmp_path.glob("*thunk-sequence.txt"))
        ledger = next(tmp_path.glob("*pass-ledger.tsv")).read_text()
        assert "xhlo-algsimp" not in ledger and "xhlo-constant-folding" in ledger
        with pytest.raises(Exception, match="No such compile option: 'xla_no_such_option'"):
            lowered.compile(compiler_options={"xla_no_such_option": True})


def test_xla_options_are_taken_as_xla_takes_them(devices):
    """Fields of XLA's DebugOptions that mlirxla has no equivalent for are accepted without
    effect (as XLA:CPU takes the GPU ones), as are XLA's effort and level settings; a name that
    is no option, or a bool option given a word, gets XLA's error."""
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        lowered = jax.jit(lambda a: jnp.sqrt(a ** 2) + 1).lower(X)
        compiled = lowered.compile(compiler_options={"xla_embed_ir_in_executable": True, "xla_dump_max_hlo_modules": 200,
                                                     "xla_gpu_auto_spmd_partitioning_memory_budget_ratio": 0.5,
                                                     "exec_time_optimization_effort": 0.0, "optimization_level": 1})
        np.testing.assert_allclose(np.asarray(compiled(X)), np.abs(X) + 1, rtol=1e-6)
        with pytest.raises(Exception, match="No such compile option: 'exec_time_compilation_effort'"):
            lowered.compile(compiler_options={"exec_time_compilation_effort": 0.0})
        with pytest.raises(Exception, match="is not a valid bool value"):
            lowered.compile(compiler_options={"xla_embed_ir_in_executable": "invalid_value"})
