"""A stand-in for a GPU with the methods `mlirxla.runtime.cuda.executor` calls: it allocates
addresses from a fake base, keeps copied bytes, and records every call, so that a test can
check the plan a runtime executes (which kernels, which grid and block, which pointers into
the slab, which GEMM dimensions, which stream and events, graph capture and replay) on a
machine without a GPU. Kernels and GEMMs compute nothing: the bytes copied back are what was
copied in, or zeros. Streams are `stream0`, `stream1`, ...; events `event0`, ...; work
recorded while a capture is open is marked `captured` and not run again at a graph launch."""

import dataclasses

import numpy as np

BASE = 0x7F0000000000


class FakeCudaDevice:
    def __init__(self):
        self.calls = []
        self.memory = {}
        self.next_address = BASE
        self.streams = 0
        self.event_count = 0
        self.capturing = None

    def record(self, call: list) -> None:
        self.calls.append(call + ["captured"] if self.capturing is not None else call)

    def load_module(self, image: bytes, kind: str):
        self.calls.append(["load_module", kind, len(image)])
        return "module"

    def function(self, module, name: str):
        self.calls.append(["function", name])
        return name

    def allocate(self, nbytes: int) -> int:
        address = self.next_address
        self.next_address += (nbytes + 255) // 256 * 256
        self.calls.append(["allocate", nbytes, address])
        return address

    def copy_to_device(self, address: int, data: bytes) -> None:
        self.memory[address] = bytes(data)
        self.calls.append(["copy_to_device", address, len(data)])

    def copy_to_host(self, address: int, nbytes: int) -> bytes:
        self.calls.append(["copy_to_host", address, nbytes])
        return self.memory.get(address, b"\0" * nbytes)[:nbytes].ljust(nbytes, b"\0")

    def create_stream(self) -> str:
        self.streams += 1
        return f"stream{self.streams - 1}"

    def create_event(self) -> str:
        self.event_count += 1
        return f"event{self.event_count - 1}"

    def record_event(self, event, stream) -> None:
        self.record(["record_event", event, stream])

    def wait_event(self, stream, event) -> None:
        self.record(["wait_event", stream, event])

    def begin_capture(self, stream) -> None:
        assert self.capturing is None, "a capture is open already"
        self.capturing = stream
        self.calls.append(["begin_capture", stream])

    def end_capture(self, stream) -> str:
        assert self.capturing == stream, "the capture ends on another stream than it began"
        self.capturing = None
        self.calls.append(["end_capture", stream])
        return "graph"

    def abandon_capture(self, stream) -> None:
        self.capturing = None
        self.calls.append(["abandon_capture", stream])

    def instantiate_graph(self, graph) -> str:
        self.calls.append(["instantiate_graph", graph])
        return "graph_exec"

    def launch_graph(self, graph_exec, stream) -> None:
        self.calls.append(["launch_graph", graph_exec, stream])

    def copy_on_device(self, destination: int, source: int, nbytes: int, stream=None) -> None:
        self.record(["copy_on_device", destination, source, nbytes, stream])

    def launch(self, function, grid, block, shared_bytes: int, pointers: list, stream=None) -> None:
        self.record(["launch", function, list(grid), list(block), shared_bytes, list(pointers), stream])

    def prepare_matmuls(self, matmuls) -> None:
        assert self.capturing is None, "cuBLASLt descriptors made inside a capture"
        self.calls.append(["prepare_matmuls", [dataclasses.asdict(m) for m in matmuls]])

    def matmul(self, matmul, lhs, rhs, out, bias, stream=None) -> None:
        """Recorded as ["matmul", its descriptor as a dict, lhs, rhs, out, bias, stream]."""
        self.record(["matmul", dataclasses.asdict(matmul), lhs, rhs, out, bias, stream])

    def synchronize(self) -> None:
        assert self.capturing is None, "synchronize inside a capture"
        self.calls.append(["synchronize"])


class ComputingDevice(FakeCudaDevice):
    """The stand-in with a slab that holds bytes, copies on the device made, and matmuls
    computed in numpy from the column-major view the runtime hands cuBLASLt
    (`cublaslt.Matmul.column_major`): D = epilogue(op(A) @ op(B) + bias), A, B and D stored
    matrices of (rows, columns, leading dimension)."""

    def __init__(self):
        super().__init__()
        self.slab = None
        self.graph_work = []  # what a capture recorded, run at each graph launch

    def allocate(self, nbytes: int) -> int:
        address = super().allocate(nbytes)
        if self.slab is None:
            self.slab = bytearray(nbytes)
        return address

    def copy_to_device(self, address: int, data: bytes) -> None:
        super().copy_to_device(address, data)
        self.slab[address - BASE:address - BASE + len(data)] = data

    def copy_to_host(self, address: int, nbytes: int) -> bytes:
        super().copy_to_host(address, nbytes)
        return bytes(self.slab[address - BASE:address - BASE + nbytes])

    def stored(self, address: int, dtype: str, rows: int, columns: int, leading: int) -> np.ndarray:
        flat = np.frombuffer(self.slab, dtype, count=columns * leading, offset=address - BASE)
        return flat.reshape(columns, leading)[:, :rows].T  # element (i, j) at i + j * leading

    def matmul(self, matmul, lhs: int, rhs: int, out: int, bias, stream=None) -> None:
        super().matmul(matmul, lhs, rhs, out, bias, stream)
        if self.capturing is not None:
            self.graph_work.append(lambda: self.compute_matmul(matmul, lhs, rhs, out, bias))
        else:
            self.compute_matmul(matmul, lhs, rhs, out, bias)

    def copy_on_device(self, destination: int, source: int, nbytes: int, stream=None) -> None:
        super().copy_on_device(destination, source, nbytes, stream)
        if self.capturing is not None:
            self.graph_work.append(lambda: self.copy_bytes(destination, source, nbytes))
        else:
            self.copy_bytes(destination, source, nbytes)

    def copy_bytes(self, destination: int, source: int, nbytes: int) -> None:
        self.slab[destination - BASE:destination - BASE + nbytes] = self.slab[source - BASE:source - BASE + nbytes]

    def launch_graph(self, graph_exec, stream) -> None:
        super().launch_graph(graph_exec, stream)
        for work in self.graph_work:
            work()

    def elapsed_ms(self, work) -> float:
        work()
        return 1.0

    def compute_matmul(self, matmul, lhs: int, rhs: int, out: int, bias) -> None:
        assert matmul.batch == 1
        view = matmul.column_major()
        a = self.stored(rhs, matmul.operand_dtype, *view["a"]).astype(np.float64)
        b = self.stored(lhs, matmul.operand_dtype, *view["b"]).astype(np.float64)
        d = (a.T if view["transa"] else a) @ (b.T if view["transb"] else b)
        rows, columns, leading = view["d"]
        assert d.shape == (rows, columns) and leading == rows
        if matmul.has_bias:
            d = d + np.frombuffer(self.slab, matmul.out_dtype, count=rows, offset=bias - BASE)[:, None]
        if "relu" in matmul.epilogue:
            d = np.maximum(d, 0)
        if "gelu" in matmul.epilogue:  # cuBLASLt's GELU: the tanh approximation
            d = 0.5 * d * (1 + np.tanh(np.sqrt(2 / np.pi) * (d + 0.044715 * d ** 3)))
        data = d.T.astype(matmul.out_dtype).tobytes()  # column-major: column j after column j - 1
        self.slab[out - BASE:out - BASE + len(data)] = data
