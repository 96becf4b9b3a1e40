"""A GPU as `executor.py` wants a device: the CUDA driver API and cuBLASLt through ctypes.

ctypes over `libcuda.so.1` (the driver every GPU machine has) rather than a Python binding
package: the driver's C interface is the one that does not change between the releases of
`cuda-bindings` and `cuda-core`, and nothing needs compiling. GEMMs are cuBLASLt matmuls (`cublaslt.py`), from
the `nvidia-cublas` package found on `sys.path`, else the system's library.
Work runs on the streams the executor creates (`create_stream`: blocking streams, so that the
synchronous copies in and out on the legacy default stream order against them), ordered
across streams by events; a whole execution can be captured into a CUDA graph and replayed.
"""

import ctypes
import ctypes.util

from .cublaslt import CublasLt, Matmul

CU_EVENT_DISABLE_TIMING = 2
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1  # other threads' unsafe calls do not break this thread's capture


class CudaError(RuntimeError):
    """A CUDA driver or cuBLAS call failed."""


def _driver() -> ctypes.CDLL:
    for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    raise CudaError("no CUDA driver (libcuda.so.1) on this machine")


class CudaDevice:
    """GPU `ordinal` of this machine, its primary context current on this thread."""

    def __init__(self, ordinal: int = 0):
        self.cuda = _driver()
        self.check(self.cuda.cuInit(0), "cuInit")
        device = ctypes.c_int()
        self.check(self.cuda.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self.check(self.cuda.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device), "cuDevicePrimaryCtxRetain")
        self.check(self.cuda.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        name = ctypes.create_string_buffer(256)
        self.check(self.cuda.cuDeviceGetName(name, 256, device), "cuDeviceGetName")
        self.name = name.value.decode()
        self.cublaslt = None

    def check(self, status: int, call: str) -> None:
        if status != 0:
            text = ctypes.c_char_p()
            self.cuda.cuGetErrorString(status, ctypes.byref(text))
            raise CudaError(f"{call} failed: {text.value.decode() if text.value else status}")

    # --- modules, memory ---------------------------------------------------------------

    def load_module(self, image: bytes, kind: str):
        module = ctypes.c_void_p()
        data = image if kind == "cubin" else image + b"\0"
        self.check(self.cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(data)), f"cuModuleLoadData ({kind})")
        return module

    def function(self, module, name: str):
        function = ctypes.c_void_p()
        self.check(self.cuda.cuModuleGetFunction(ctypes.byref(function), module, name.encode()), f"cuModuleGetFunction {name}")
        return function

    def allocate(self, nbytes: int) -> int:
        address = ctypes.c_uint64()
        self.check(self.cuda.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(nbytes)), "cuMemAlloc")
        return address.value

    def free(self, address: int) -> None:
        self.check(self.cuda.cuMemFree_v2(ctypes.c_uint64(address)), "cuMemFree")

    def copy_to_device(self, address: int, data: bytes) -> None:
        self.check(self.cuda.cuMemcpyHtoD_v2(ctypes.c_uint64(address), ctypes.c_char_p(data), ctypes.c_size_t(len(data))), "cuMemcpyHtoD")

    def copy_to_host(self, address: int, nbytes: int) -> bytes:
        buffer = ctypes.create_string_buffer(nbytes)
        self.check(self.cuda.cuMemcpyDtoH_v2(buffer, ctypes.c_uint64(address), ctypes.c_size_t(nbytes)), "cuMemcpyDtoH")
        return buffer.raw

    def copy_on_device(self, destination: int, source: int, nbytes: int, stream=None) -> None:
        self.check(self.cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(destination), ctypes.c_uint64(source), ctypes.c_size_t(nbytes), stream),
                   "cuMemcpyDtoDAsync")

    def synchronize(self) -> None:
        self.check(self.cuda.cuCtxSynchronize(), "cuCtxSynchronize")

    # --- streams, events, graphs --------------------------------------------------------

    def driver_call(self, *names: str):
        """The first of `names` the driver exports (versioned entry points: `_v2` first)."""
        for name in names:
            if hasattr(self.cuda, name):
                return getattr(self.cuda, name)
        raise CudaError(f"the CUDA driver exports none of {', '.join(names)}")

    def create_stream(self):
        stream = ctypes.c_void_p()
        self.check(self.cuda.cuStreamCreate(ctypes.byref(stream), 0), "cuStreamCreate")
        return stream

    def create_event(self):
        event = ctypes.c_void_p()
        self.check(self.cuda.cuEventCreate(ctypes.byref(event), CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        return event

    def record_event(self, event, stream) -> None:
        self.check(self.cuda.cuEventRecord(event, stream), "cuEventRecord")

    def wait_event(self, stream, event) -> None:
        self.check(self.cuda.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")

    def begin_capture(self, stream) -> None:
        begin = self.driver_call("cuStreamBeginCapture_v2", "cuStreamBeginCapture")
        self.check(begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture")

    def end_capture(self, stream):
        graph = ctypes.c_void_p()
        self.check(self.cuda.cuStreamEndCapture(stream, ctypes.byref(graph)), "cuStreamEndCapture")
        return graph

    def abandon_capture(self, stream) -> None:
        graph = ctypes.c_void_p()
        self.cuda.cuStreamEndCapture(stream, ctypes.byref(graph))  # its status is the failure already reported
        if graph.value:
            self.cuda.cuGraphDestroy(graph)

    def instantiate_graph(self, graph):
        executable = ctypes.c_void_p()
        self.check(self.cuda.cuGraphInstantiateWithFlags(ctypes.byref(executable), graph, ctypes.c_ulonglong(0)),
                   "cuGraphInstantiateWithFlags")
        return executable

    def launch_graph(self, graph_exec, stream) -> None:
        self.check(self.cuda.cuGraphLaunch(graph_exec, stream), "cuGraphLaunch")

    # --- work ------------------------------------------------------------------------

    def launch(self, function, grid, block, shared_bytes: int, pointers: list[int], stream=None) -> None:
        values = (ctypes.c_uint64 * max(1, len(pointers)))(*pointers)
        base = ctypes.addressof(values)
        parameters = (ctypes.c_void_p * max(1, len(pointers)))(*[base + 8 * i for i in range(len(pointers))])
        self.check(self.cuda.cuLaunchKernel(function, *[ctypes.c_uint(v) for v in grid], *[ctypes.c_uint(v) for v in block],
                                            ctypes.c_uint(shared_bytes), stream, parameters, None), "cuLaunchKernel")

    def prepare_matmuls(self, matmuls) -> None:
        """Descriptors, layouts and algorithms of these GEMMs, made now: nothing of it may
        happen inside a graph capture (the workspace's allocation would break it)."""
        if self.cublaslt is None:
            self.cublaslt = CublasLt(self.allocate)
        for matmul in matmuls:
            self.cublaslt.prepare(matmul)

    def matmul(self, matmul: Matmul, lhs: int, rhs: int, out: int, bias: int | None, stream=None) -> None:
        self.prepare_matmuls([matmul])
        self.cublaslt.run(matmul, lhs, rhs, out, bias, stream)

    # --- timing ----------------------------------------------------------------------

    def elapsed_ms(self, work) -> float:
        """Milliseconds between CUDA events recorded before and after `work()` on the stream."""
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.cuda.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        self.check(self.cuda.cuEventCreate(ctypes.byref(end), 0), "cuEventCreate")
        self.check(self.cuda.cuEventRecord(start, None), "cuEventRecord")
        work()
        self.check(self.cuda.cuEventRecord(end, None), "cuEventRecord")
        self.check(self.cuda.cuEventSynchronize(end), "cuEventSynchronize")
        milliseconds = ctypes.c_float()
        self.check(self.cuda.cuEventElapsedTime(ctypes.byref(milliseconds), start, end), "cuEventElapsedTime")
        self.cuda.cuEventDestroy_v2(start)
        self.cuda.cuEventDestroy_v2(end)
        return milliseconds.value
