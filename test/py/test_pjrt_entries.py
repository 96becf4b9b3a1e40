"""PJRT entries of the plugin that ordinary jax programs reach past jit and execute: raw reads
of a buffer, uninitialized buffers, device memory statistics, executables serialized and
loaded back, and the cost analysis.

Entries jax reaches are checked through jax, against jax's own cpu backend in the same
process where both answer; the others through the PJRT table with ctypes, on a client of
their own (the same library jax loaded), including what a caller with an older (smaller)
argument struct gets.
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
from jax.experimental import serialize_executable  # noqa: E402

from mlirxla import jax_plugin  # noqa: E402

pytestmark = pytest.mark.jax

HEADER_WORDS = 5  # PJRT_Api starts with struct_size, extension_start and the version (3 words)
# positions of entries in PJRT_Api 0.90
ERROR_DESTROY, ERROR_MESSAGE, ERROR_GET_CODE, EVENT_DESTROY = 0, 1, 2, 5
CLIENT_CREATE, CLIENT_DESTROY, CLIENT_DEVICES, CLIENT_BUFFER_FROM_HOST_BUFFER = 10, 11, 15, 22
DEVICE_MEMORY_STATS, EXECUTABLE_SERIALIZE, EXECUTABLE_DESERIALIZE_AND_LOAD = 34, 49, 56
BUFFER_DESTROY, BUFFER_ON_DEVICE_SIZE, BUFFER_DELETE = 58, 64, 67
BUFFER_COPY_RAW_TO_HOST, CLIENT_CREATE_UNINITIALIZED_BUFFER = 100, 112
INVALID_ARGUMENT, FAILED_PRECONDITION, UNIMPLEMENTED = 3, 9, 12
F32, IMMUTABLE_ONLY_DURING_CALL, LAYOUT_TILED = 11, 0, 0
# what the plugin still answers UNIMPLEMENTED, by position (docs/pjrt-plugin.md lists them)
STILL_UNIMPLEMENTED = {
    "PJRT_CopyToDeviceStream_Destroy": 77, "PJRT_CopyToDeviceStream_AddChunk": 78, "PJRT_CopyToDeviceStream_TotalBytes": 79,
    "PJRT_CopyToDeviceStream_GranuleSize": 80, "PJRT_CopyToDeviceStream_CurrentBytes": 81,
    "PJRT_TopologyDescription_Create": 82, "PJRT_TopologyDescription_Destroy": 83, "PJRT_TopologyDescription_PlatformName": 84,
    "PJRT_TopologyDescription_PlatformVersion": 85, "PJRT_TopologyDescription_GetDeviceDescriptions": 86,
    "PJRT_TopologyDescription_Serialize": 87, "PJRT_TopologyDescription_Attributes": 88, "PJRT_Compile": 89,
    "PJRT_Client_CreateViewOfDeviceBuffer": 93, "PJRT_Client_TopologyDescription": 95, "PJRT_ExecuteContext_Create": 98,
    "PJRT_ExecuteContext_Destroy": 99, "PJRT_AsyncHostToDeviceTransferManager_Destroy": 101,
    "PJRT_AsyncHostToDeviceTransferManager_TransferData": 102, "PJRT_Client_CreateBuffersForAsyncHostToDevice": 103,
    "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer": 104, "PJRT_AsyncHostToDeviceTransferManager_Device": 105,
    "PJRT_AsyncHostToDeviceTransferManager_BufferCount": 106, "PJRT_AsyncHostToDeviceTransferManager_BufferSize": 107,
    "PJRT_AsyncHostToDeviceTransferManager_SetBufferError": 108, "PJRT_AsyncHostToDeviceTransferManager_AddMetadata": 109,
    "PJRT_Client_DmaMap": 110, "PJRT_Client_DmaUnmap": 111,
    "PJRT_TopologyDescription_Deserialize": 114, "PJRT_Client_CreateAliasBuffer": 115, "PJRT_Client_FulfillAliasBuffer": 116,
    "PJRT_Client_CreateErrorBuffer": 118, "PJRT_AsyncHostToDeviceTransferManager_TransferLiteral": 119,
    "PJRT_Buffer_CopyRawToHostFuture": 120, "PJRT_Device_PoisonExecution": 121, "PJRT_Device_CreateAsyncTrackingEvent": 122,
    "PJRT_AsyncTrackingEvent_Destroy": 123, "PJRT_Executable_GetCompileOptions": 124,
    "PJRT_Buffer_DonateWithControlDependency": 125,
}

size_t, pointer, int64 = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int64


class Args(ctypes.Structure):
    """A PJRT argument struct: struct_size set to the whole struct unless told smaller."""

    def __init__(self, struct_size: int | None = None, **fields):
        super().__init__(struct_size=struct_size or ctypes.sizeof(self), **fields)


def args_struct(name: str, fields: list) -> type:
    return type(name, (Args,), {"_fields_": [("struct_size", size_t), ("extension_start", pointer)] + fields})


ErrorMessageArgs = args_struct("ErrorMessageArgs", [("error", pointer), ("message", ctypes.c_char_p), ("message_size", size_t)])
ErrorGetCodeArgs = args_struct("ErrorGetCodeArgs", [("error", pointer), ("code", ctypes.c_int)])
ObjectArgs = args_struct("ObjectArgs", [("object", pointer)])  # the Destroy and Delete entries
ClientCreateArgs = args_struct("ClientCreateArgs", [
    ("create_options", pointer), ("num_options", size_t), ("kv_get_callback", pointer), ("kv_get_user_arg", pointer),
    ("kv_put_callback", pointer), ("kv_put_user_arg", pointer), ("client", pointer), ("kv_try_get_callback", pointer),
    ("kv_try_get_user_arg", pointer)])
ClientDevicesArgs = args_struct("ClientDevicesArgs", [
    ("client", pointer), ("devices", ctypes.POINTER(pointer)), ("num_devices", size_t)])
BufferFromHostArgs = args_struct("BufferFromHostArgs", [
    ("client", pointer), ("data", pointer), ("type", ctypes.c_int), ("dims", ctypes.POINTER(int64)), ("num_dims", size_t),
    ("byte_strides", ctypes.POINTER(int64)), ("num_byte_strides", size_t), ("host_buffer_semantics", ctypes.c_int),
    ("device", pointer), ("memory", pointer), ("device_layout", pointer), ("done_with_host_buffer", pointer), ("buffer", pointer)])
CopyRawToHostArgs = args_struct("CopyRawToHostArgs", [
    ("buffer", pointer), ("dst", pointer), ("offset", int64), ("transfer_size", int64), ("event", pointer)])
OnDeviceSizeArgs = args_struct("OnDeviceSizeArgs", [("buffer", pointer), ("on_device_size_in_bytes", size_t)])
CreateUninitializedBufferArgs = args_struct("CreateUninitializedBufferArgs", [
    ("client", pointer), ("shape_dims", ctypes.POINTER(int64)), ("shape_num_dims", size_t), ("shape_element_type", ctypes.c_int),
    ("shape_layout", pointer), ("device", pointer), ("memory", pointer), ("buffer", pointer)])
TiledLayout = args_struct("TiledLayout", [
    ("minor_to_major", ctypes.POINTER(int64)), ("minor_to_major_size", size_t), ("tile_dims", pointer),
    ("tile_dim_sizes", pointer), ("num_tiles", size_t)])
MemoryLayout = args_struct("MemoryLayout", [("tiled", TiledLayout), ("type", ctypes.c_int)])
# bytes_in_use, then each optional statistic followed by its `_is_set` flag
OPTIONAL_MEMORY_STATS = ("peak_bytes_in_use", "num_allocs", "largest_alloc_size", "bytes_limit", "bytes_reserved",
                         "peak_bytes_reserved", "bytes_reservable_limit", "largest_free_block_bytes", "pool_bytes",
                         "peak_pool_bytes")
MemoryStatsArgs = args_struct("MemoryStatsArgs", [("device", pointer), ("bytes_in_use", int64)] + [
    field for stat in OPTIONAL_MEMORY_STATS for field in ((stat, int64), (f"{stat}_is_set", ctypes.c_bool))])
DeserializeArgs = args_struct("DeserializeArgs", [
    ("client", pointer), ("serialized_executable", ctypes.c_char_p), ("serialized_executable_size", size_t),
    ("loaded_executable", pointer), ("overridden_serialized_compile_options", pointer),
    ("overridden_serialized_compile_options_size", size_t)])


class PjrtError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class Plugin:
    """The plugin's PJRT table through ctypes, with a client of its own (one device)."""

    def __init__(self):
        library = ctypes.CDLL(jax_plugin.library_path())
        library.GetPjrtApi.restype = pointer
        self.words = ctypes.cast(library.GetPjrtApi(), ctypes.POINTER(ctypes.c_uint64))
        created = self.call(CLIENT_CREATE, ClientCreateArgs())
        self.client = created.client
        devices = self.call(CLIENT_DEVICES, ClientDevicesArgs(client=self.client))
        self.device = devices.devices[0]

    def error_of(self, index: int, arguments: ctypes.Structure) -> tuple[int, str] | None:
        """(code, message) of the error entry `index` answers, or None."""
        error = ctypes.CFUNCTYPE(pointer, pointer)(self.words[HEADER_WORDS + index])(ctypes.addressof(arguments))
        if not error:
            return None
        message = ErrorMessageArgs(error=error)
        ctypes.CFUNCTYPE(None, pointer)(self.words[HEADER_WORDS + ERROR_MESSAGE])(ctypes.addressof(message))
        code = ErrorGetCodeArgs(error=error)
        ctypes.CFUNCTYPE(pointer, pointer)(self.words[HEADER_WORDS + ERROR_GET_CODE])(ctypes.addressof(code))
        text = message.message[:message.message_size].decode()
        ctypes.CFUNCTYPE(None, pointer)(self.words[HEADER_WORDS + ERROR_DESTROY])(ctypes.addressof(ObjectArgs(object=error)))
        return code.code, text

    def call(self, index: int, arguments: ctypes.Structure) -> ctypes.Structure:
        error = self.error_of(index, arguments)
        if error:
            raise PjrtError(*error)
        return arguments

    def buffer_from(self, array: np.ndarray) -> int:
        dims = (int64 * array.ndim)(*array.shape)
        made = self.call(CLIENT_BUFFER_FROM_HOST_BUFFER, BufferFromHostArgs(
            client=self.client, data=array.ctypes.data, type=F32, dims=dims, num_dims=array.ndim,
            host_buffer_semantics=IMMUTABLE_ONLY_DURING_CALL, device=self.device))
        self.call(EVENT_DESTROY, ObjectArgs(object=made.done_with_host_buffer))
        return made.buffer

    def read_raw(self, buffer: int, offset: int, size: int) -> bytes:
        destination = ctypes.create_string_buffer(max(size, 1))
        copied = self.call(BUFFER_COPY_RAW_TO_HOST, CopyRawToHostArgs(buffer=buffer, dst=ctypes.addressof(destination),
                                                                     offset=offset, transfer_size=size))
        self.call(EVENT_DESTROY, ObjectArgs(object=copied.event))
        return destination.raw[:size]

    def close(self):
        self.call(CLIENT_DESTROY, ObjectArgs(object=self.client))


@pytest.fixture(scope="module")
def plugin():
    opened = Plugin()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def devices():
    try:
        return jax.devices("mlirxla")[0], jax.devices("cpu")[0]
    except RuntimeError as error:
        pytest.fail(f"the mlirxla plugin did not register: {error}")


def compiled_on(device, function, *arguments):
    with jax.default_device(device):
        return jax.jit(function).lower(*arguments).compile()


def test_host_buffers_view_row_major_memory_and_copy_the_rest():
    """The bridge's BufferFromHostBuffer: a read-only view of row-major memory JAX lets it
    keep, a C-contiguous copy otherwise (strided, reversed, or when JAX keeps its memory)."""
    from mlirxla.runtime.pjrt import bridge

    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    view, is_view = bridge.buffer_from_host(x.ctypes.data, "float32", (4, 6), None, True)
    assert is_view and np.shares_memory(view, x) and not view.flags.writeable
    np.testing.assert_array_equal(view, x)
    copied, is_view = bridge.buffer_from_host(x.ctypes.data, "float32", (4, 6), (24, 4), False)
    assert not is_view and not np.shares_memory(copied, x)
    np.testing.assert_array_equal(copied, x)
    every_other, _ = bridge.buffer_from_host(x.ctypes.data, "float32", (4, 3), (24, 8), True)
    np.testing.assert_array_equal(every_other, x[:, ::2])
    assert every_other.flags.c_contiguous and not np.shares_memory(every_other, x)
    reversed_rows, _ = bridge.buffer_from_host(x[3:].ctypes.data, "float32", (4, 6), (-24, 4), True)
    np.testing.assert_array_equal(reversed_rows, x[::-1])
    empty, is_view = bridge.buffer_from_host(0, "bfloat16", (0, 6), None, True)
    assert empty.shape == (0, 6) and empty.dtype.name == "bfloat16" and not is_view


def test_copy_raw_to_host_reads_a_byte_range(plugin):
    values = np.arange(10, dtype=np.float32)
    buffer = plugin.buffer_from(values)
    try:
        assert plugin.read_raw(buffer, 8, 12) == values[2:5].tobytes()
        assert plugin.read_raw(buffer, 0, 40) == values.tobytes()
        assert plugin.read_raw(buffer, 40, 0) == b""
        with pytest.raises(PjrtError) as outside:
            plugin.read_raw(buffer, 36, 8)
        assert (outside.value.code, outside.value.message) == (
            INVALID_ARGUMENT, "mlirxla: PJRT_Buffer_CopyRawToHost of 8 bytes at offset 36, outside the buffer's 40 bytes")
        plugin.call(BUFFER_DELETE, ObjectArgs(object=buffer))
        with pytest.raises(PjrtError) as deleted:
            plugin.read_raw(buffer, 0, 4)
        assert deleted.value.code == FAILED_PRECONDITION and "PJRT_Buffer_CopyRawToHost on a deleted" in deleted.value.message
    finally:
        plugin.call(BUFFER_DESTROY, ObjectArgs(object=buffer))


def test_create_uninitialized_buffer(plugin):
    dims = (int64 * 2)(3, 4)
    made = plugin.call(CLIENT_CREATE_UNINITIALIZED_BUFFER, CreateUninitializedBufferArgs(
        client=plugin.client, shape_dims=dims, shape_num_dims=2, shape_element_type=F32, device=plugin.device))
    try:
        size = plugin.call(BUFFER_ON_DEVICE_SIZE, OnDeviceSizeArgs(buffer=made.buffer)).on_device_size_in_bytes
        assert size == 48
        assert len(plugin.read_raw(made.buffer, 0, size)) == 48
    finally:
        plugin.call(BUFFER_DESTROY, ObjectArgs(object=made.buffer))
    column_major = (int64 * 2)(0, 1)
    layout = MemoryLayout(tiled=TiledLayout(minor_to_major=column_major, minor_to_major_size=2), type=LAYOUT_TILED)
    assert plugin.error_of(CLIENT_CREATE_UNINITIALIZED_BUFFER, CreateUninitializedBufferArgs(
        client=plugin.client, shape_dims=dims, shape_num_dims=2, shape_element_type=F32, shape_layout=ctypes.addressof(layout))) == (
        UNIMPLEMENTED, "mlirxla: PJRT_Client_CreateUninitializedBuffer in a layout other than row-major")


@pytest.mark.parametrize("index, name, field", [
    (CLIENT_CREATE_UNINITIALIZED_BUFFER, "PJRT_Client_CreateUninitializedBuffer", "buffer"),
    (EXECUTABLE_SERIALIZE, "PJRT_Executable_Serialize", "serialized_executable_deleter"),
    (EXECUTABLE_DESERIALIZE_AND_LOAD, "PJRT_Executable_DeserializeAndLoad", "loaded_executable"),
])
def test_new_entries_refuse_a_struct_too_old_for_their_result(plugin, index, name, field):
    too_old = (16).to_bytes(8, "little") + bytes(120)
    arguments = ctypes.create_string_buffer(too_old, len(too_old))
    error = ctypes.CFUNCTYPE(pointer, pointer)(plugin.words[HEADER_WORDS + index])(ctypes.addressof(arguments))
    message = ErrorMessageArgs(error=error)
    ctypes.CFUNCTYPE(None, pointer)(plugin.words[HEADER_WORDS + ERROR_MESSAGE])(ctypes.addressof(message))
    assert message.message[:message.message_size].decode() == (
        f"mlirxla: {name} got a 16-byte argument struct, too small for its '{field}' field: "
        "the caller's PJRT C API is older than this plugin supports")
    ctypes.CFUNCTYPE(None, pointer)(plugin.words[HEADER_WORDS + ERROR_DESTROY])(ctypes.addressof(ObjectArgs(object=error)))


def test_memory_stats_follow_live_buffers(devices):
    mlirxla, _ = devices
    gc.collect()  # buffers earlier tests left to the collector would be freed in the middle
    before = mlirxla.memory_stats()
    held = jax.device_put(np.ones(1000, np.float32), mlirxla)
    doubled = jax.jit(lambda a: a * 2)(held)
    during = mlirxla.memory_stats()
    assert during["bytes_in_use"] - before["bytes_in_use"] == 8000
    assert during["num_allocs"] - before["num_allocs"] == 2
    assert during["peak_bytes_in_use"] >= during["bytes_in_use"] and during["largest_alloc_size"] >= 4000
    assert during["bytes_limit"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    held.delete()
    del doubled
    assert mlirxla.memory_stats()["bytes_in_use"] == before["bytes_in_use"]


def test_memory_stats_write_only_within_the_callers_struct(plugin):
    """A caller whose struct ends after bytes_in_use gets that field and nothing past it."""
    struct_size = MemoryStatsArgs.bytes_in_use.offset + 8
    arguments = MemoryStatsArgs(struct_size=struct_size, device=plugin.device, peak_bytes_in_use=-7, bytes_limit=-7)
    buffer = plugin.buffer_from(np.zeros(16, np.float32))
    try:
        plugin.call(DEVICE_MEMORY_STATS, arguments)
    finally:
        plugin.call(BUFFER_DESTROY, ObjectArgs(object=buffer))
    assert arguments.bytes_in_use >= 64
    assert (arguments.peak_bytes_in_use, arguments.bytes_limit, arguments.peak_bytes_in_use_is_set) == (-7, -7, False)


def test_serialized_executable_round_trip(devices):
    mlirxla, _ = devices
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    compiled = compiled_on(mlirxla, lambda a: (jnp.tanh(a) @ a.T, a.sum()), x)
    data, in_tree, out_tree = serialize_executable.serialize(compiled)
    loaded = serialize_executable.deserialize_and_load(data, in_tree, out_tree, backend="mlirxla")
    for got, want in zip(loaded(x), compiled(x)):
        assert got.devices() == {mlirxla}
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert loaded.as_text() == compiled.as_text()
    assert loaded.cost_analysis() == compiled.cost_analysis()


FRESH_PROCESS = """
import sys, jax, numpy as np
from jax.experimental import serialize_executable
from mlirxla.runtime import client

def refuse(*arguments):
    raise AssertionError("the executable was compiled again")

client.compile_bytes = refuse
x = np.arange(6, dtype=np.float32)
in_tree = jax.tree_util.tree_structure(((x,), {}))
out_tree = jax.tree_util.tree_structure(x)
loaded = serialize_executable.deserialize_and_load(open(sys.argv[1], "rb").read(), in_tree, out_tree, backend="mlirxla")
print(np.asarray(loaded(x)).tolist())
"""


def test_serialized_executable_runs_in_a_fresh_process(devices, tmp_path):
    """The plan and object code travel: another process runs it without compiling."""
    mlirxla, _ = devices
    x = np.arange(6, dtype=np.float32)
    data, _, _ = serialize_executable.serialize(compiled_on(mlirxla, lambda a: jnp.sin(a) * 3 + 1, x))
    path = tmp_path / "executable.bin"
    path.write_bytes(data)
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(path)], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_allclose(eval(done.stdout.strip().splitlines()[-1]), np.sin(x) * 3 + 1, rtol=1e-6)


def test_damaged_serialized_executable_is_an_error(plugin):
    junk = b"not an executable"
    assert plugin.error_of(EXECUTABLE_DESERIALIZE_AND_LOAD, DeserializeArgs(
        client=plugin.client, serialized_executable=junk, serialized_executable_size=len(junk))) == (
        INVALID_ARGUMENT, "the serialized executable is not one mlirxla wrote (or another version of its format)")
    truncated = b"mlirxla executable 2\n{\"environment\": "
    code, message = plugin.error_of(EXECUTABLE_DESERIALIZE_AND_LOAD, DeserializeArgs(
        client=plugin.client, serialized_executable=truncated, serialized_executable_size=len(truncated)))
    assert code == INVALID_ARGUMENT and message.startswith("the serialized executable is damaged: JSONDecodeError")


def test_serialized_executable_from_another_environment_names_the_difference():
    import json

    from mlirxla.errors import MlirxlaError
    from mlirxla.runtime.client import Client
    from mlirxla.runtime.pjrt import serialization

    client = Client()
    program = "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}"
    data = serialization.serialize(serialization.SerializedExecutable(client.compile(program), (0,), program.encode(), b""))
    document = json.loads(data[len(serialization.HEADER):])
    document["environment"] = document["environment"].replace("cpu=", "cpu=elsewhere-")
    with pytest.raises(MlirxlaError, match=r"^the serialized executable was compiled elsewhere: cpu elsewhere-\S+ there, \S+ here$"):
        serialization.deserialize(client, serialization.HEADER + json.dumps(document).encode())


RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 16)).astype(np.float32)
W = RNG.standard_normal((16, 4)).astype(np.float32)
IMAGES = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
KERNEL = RNG.standard_normal((3, 3, 3, 5)).astype(np.float32)
# programs whose kernels mlirxla forms as XLA:CPU does, so that even the bytes agree
COSTED = {
    "dot, tanh and a sum": (lambda a, b: jnp.tanh(a @ b).sum(), (X, W)),
    "elementwise with a divide": (lambda a: jnp.exp(a) * jnp.sin(a) - a / 3, (X,)),
    "padded, strided convolution": (lambda i, k: jax.lax.conv_general_dilated(
        i, k, (2, 1), "SAME", rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC")), (IMAGES, KERNEL)),
    "argmax": (lambda a: jnp.argmax(a, 1), (X,)),
    "sort": (lambda a: jnp.sort(a, 1), (X,)),
    "batched dot": (lambda a: jnp.einsum("bij,bjk->bik", a, a), (X.reshape(8, 4, 4),)),
}


@pytest.mark.parametrize("name", list(COSTED))
def test_cost_analysis_matches_xla_cpu(devices, name):
    function, arguments = COSTED[name]
    got, want = (compiled_on(device, function, *arguments).cost_analysis() for device in devices)
    for key in ("flops", "transcendentals", "bytes accessed"):
        assert got[key] == want.get(key, 0.0), key


def test_cost_analysis_counts_the_kernels_mlirxla_forms(devices):
    """softmax is one kernel on mlirxla (three on XLA:CPU): it reads its input and writes its
    output once, and computes what XLA:CPU computes."""
    got, want = (compiled_on(device, lambda a: jax.nn.softmax(a, axis=-1), X).cost_analysis() for device in devices)
    assert (got["flops"], got["transcendentals"]) == (want["flops"], want["transcendentals"])
    assert got["bytes accessed"] == 2 * X.nbytes < want["bytes accessed"]


def test_cost_analysis_is_computed_on_request_only(devices, monkeypatch):
    """jit never asks for it, so the compile is not paid twice; asked twice, it is computed once."""
    from mlirxla.transforms import cost_analysis

    requests = []
    analyze = cost_analysis.module_cost
    monkeypatch.setattr(cost_analysis, "module_cost", lambda module: requests.append(1) or analyze(module))
    mlirxla, _ = devices
    with jax.default_device(mlirxla):
        jax.jit(lambda a: jnp.cos(a) + 2)(X).block_until_ready()
        compiled = jax.jit(lambda a: jnp.cos(a) + 3).lower(X).compile()
        assert requests == []
        assert compiled.cost_analysis()["transcendentals"] == X.size
        compiled.cost_analysis()
    assert requests == [1]


@pytest.mark.parametrize("name", list(STILL_UNIMPLEMENTED))
def test_entries_left_unimplemented_say_so(plugin, name):
    arguments = ctypes.create_string_buffer(256)
    assert plugin.error_of(STILL_UNIMPLEMENTED[name], arguments) == (UNIMPLEMENTED, f"mlirxla does not implement {name} yet")


def test_news_of_the_processes_alive_is_accepted(plugin):
    """jax reports which processes of a distributed job are alive whenever that changes
    (jaxlib aborts the process when this answers an error); collectives' deadlines find
    dead processes, so the news is taken and changes nothing."""
    UPDATE_GLOBAL_PROCESS_INFO = 113
    assert plugin.error_of(UPDATE_GLOBAL_PROCESS_INFO, ctypes.create_string_buffer(256)) is None
