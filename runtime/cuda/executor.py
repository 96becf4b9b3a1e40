"""An executable on a device: one slab allocated once (the plan's `slab_bytes`), the
constants copied into it once, then per run the parameters copied in, the thunks run in
order, the outputs copied out.

A device is any object with these methods (`cuda_device.CudaDevice` on a GPU; the tests
pass a recording stand-in):

    load_module(image: bytes, kind: "cubin" | "ptx") -> module
    function(module, name: str) -> function
    allocate(nbytes: int) -> address
    copy_to_device(address: int, data: bytes)
    copy_to_host(address: int, nbytes: int) -> bytes
    copy_on_device(destination: int, source: int, nbytes: int)
    launch(function, grid: (x, y, z), block: (x, y, z), shared_bytes: int, pointers: [address, ...])
    gemm(dtype: str, m, n, k, batch, transpose_lhs, transpose_rhs, lhs, rhs, out)   # row-major, out = op(lhs) @ op(rhs)
    synchronize()
"""

import numpy as np

from .executable_file import ExecutableFile, read


class Executable:
    def __init__(self, executable: ExecutableFile, device):
        self.plan = executable.plan
        self.device = device
        kind = "cubin" if "cubin" in executable.blobs else "ptx"
        module = device.load_module(executable.blobs[kind], kind)
        self.functions = {name: device.function(module, name) for name in self.plan["kernels"]}
        self.slab = device.allocate(self.plan["slab_bytes"])
        for constant in self.plan["constants"]:
            device.copy_to_device(self.slab + constant["offset"], executable.blobs[constant["blob"]])
        self.handlers = {"launch": self.launch, "gemm": self.gemm, "memcpy": self.memcpy,
                         "while": self.loop, "conditional": self.conditional}

    def run(self, inputs) -> list[np.ndarray]:
        """Copy `inputs` in, run the plan, copy the outputs out (synchronizing)."""
        self.copy_in(inputs)
        self.execute()
        return self.copy_out()

    def copy_in(self, inputs) -> None:
        parameters = self.plan["parameters"]
        if len(inputs) != len(parameters):
            raise ValueError(f"the program takes {len(parameters)} input(s), got {len(inputs)}")
        for index, (value, parameter) in enumerate(zip(inputs, parameters)):
            array = np.ascontiguousarray(value)
            if list(array.shape) != parameter["shape"] or array.dtype != np.dtype(parameter["dtype"]):
                raise ValueError(f"input {index}: expected {parameter['dtype']}{parameter['shape']}, got {array.dtype}{list(array.shape)}")
            if parameter["bytes"]:
                self.device.copy_to_device(self.slab + parameter["offset"], array.tobytes())

    def execute(self) -> None:
        """Run the thunks (asynchronously where the device is; `copy_out` synchronizes)."""
        self.run_thunks(self.plan["thunks"])

    def copy_out(self) -> list[np.ndarray]:
        self.device.synchronize()
        outputs = []
        for output in self.plan["outputs"]:
            data = self.device.copy_to_host(self.slab + output["offset"], output["bytes"]) if output["bytes"] else b""
            outputs.append(np.frombuffer(data, dtype=output["dtype"]).reshape(output["shape"]).copy())
        return outputs

    def run_thunks(self, thunks: list) -> None:
        for thunk in thunks:
            self.handlers[thunk["kind"]](thunk)

    def launch(self, thunk: dict) -> None:
        self.device.launch(self.functions[thunk["kernel"]], tuple(thunk["grid"]), tuple(thunk["block"]),
                           thunk["shared_bytes"], [self.slab + offset for offset in thunk["arguments"]])

    def gemm(self, thunk: dict) -> None:
        self.device.gemm(thunk["dtype"], thunk["m"], thunk["n"], thunk["k"], thunk["batch"], thunk["transpose_lhs"],
                         thunk["transpose_rhs"], self.slab + thunk["lhs"], self.slab + thunk["rhs"], self.slab + thunk["out"])

    def memcpy(self, thunk: dict) -> None:
        if thunk["bytes"]:
            self.device.copy_on_device(self.slab + thunk["destination"], self.slab + thunk["source"], thunk["bytes"])

    def read_scalar(self, offset: int, nbytes: int) -> int:
        self.device.synchronize()
        return int.from_bytes(self.device.copy_to_host(self.slab + offset, nbytes), "little", signed=True)

    def loop(self, thunk: dict) -> None:
        while True:
            self.run_thunks(thunk["condition"])
            if not self.read_scalar(thunk["predicate"], thunk["predicate_bytes"]):
                return
            self.run_thunks(thunk["body"])

    def conditional(self, thunk: dict) -> None:
        value = self.read_scalar(thunk["selector"], thunk["selector_bytes"])
        branches = thunk["branches"]
        if thunk["is_predicate"]:
            index = 0 if value else 1
        else:
            index = value if 0 <= value < len(branches) else len(branches) - 1
        self.run_thunks(branches[index])


def load(source, device=None) -> Executable:
    """An executable from a path or the file's bytes, on `device` (GPU 0 when None)."""
    executable = ExecutableFile.from_bytes(source) if isinstance(source, (bytes, bytearray)) else read(source)
    if device is None:
        from .cuda_device import CudaDevice

        device = CudaDevice()
    return Executable(executable, device)
