"""An executable on a device: one slab allocated once (the plan's `slab_bytes`), the
constants copied into it once, then per run the parameters copied in, the thunks run, the
outputs copied out.

Streams: each top-level thunk runs on the stream the compiler assigned it
(`backends/cuda/stream_assignment.py`), first waiting on the events it names, then recording
its own event when later thunks wait on it; the thunks inside a `while` or `conditional` run
on that thunk's stream. Every execution forks the other streams off stream 0 (an event they
wait on) and joins them back (an event per stream that stream 0 waits on), so that stream 0's
completion is the execution's, and so that a graph capture on stream 0 takes in every stream.

CUDA graphs: the first execution is captured on stream 0 (every stream joins the capture
through the fork) into a graph, instantiated once; that and every later execution is one
graph launch. The slab never moves and arguments are copied into it before each execution,
so the captured addresses stay valid. A `while` whose trip count the compiler proved
(`trip_count` in the plan: a `fori_loop`'s or `scan`'s induction variable, XLA's
known-trip-count loops) runs its body that many times without reading anything back, and a
capture records it unrolled; the values it carries in buffers of their own (the plan's
`carried`) alternate with the loop's state from one iteration to the next, odd iterations
running a copy of the body with those pointers traded, instead of being copied back. Not captured, with the reason in `graph_reason`: when turned
off (`graphs=False`, or `MLIRXLA_CUDA_GRAPHS=0`), when the plan has host work (a `while`
without a known trip count or a `conditional` reads its predicate back to the host, which a
capture cannot record), when the unrolled loops come to more than MAX_GRAPH_THUNKS thunks,
or when the capture failed (the device's error).

A device is any object with these methods (`cuda_device.CudaDevice` on a GPU; the tests
pass a recording stand-in):

    load_module(image: bytes, kind: "cubin" | "ptx") -> module
    function(module, name: str) -> function
    allocate(nbytes: int) -> address
    copy_to_device(address: int, data: bytes)
    copy_to_host(address: int, nbytes: int) -> bytes
    create_stream() -> stream
    create_event() -> event
    record_event(event, stream)
    wait_event(stream, event)
    copy_on_device(destination: int, source: int, nbytes: int, stream)
    launch(function, grid: (x, y, z), block: (x, y, z), shared_bytes: int, pointers: [address, ...], stream)
    prepare_matmuls([Matmul, ...])          # at load: cuBLASLt descriptors and algorithms, outside any capture
    matmul(Matmul, lhs, rhs, out, bias, stream)   # row-major, out = epilogue(op(lhs) @ op(rhs) + bias)
    begin_capture(stream)
    end_capture(stream) -> graph
    abandon_capture(stream)                 # after a failure inside a capture
    instantiate_graph(graph) -> graph_exec
    launch_graph(graph_exec, stream)
    synchronize()
"""

import os

import numpy as np

from .cublaslt import Matmul
from .executable_file import ExecutableFile, read

GRAPHS_VARIABLE = "MLIRXLA_CUDA_GRAPHS"
SLAB_ALIGNMENT = 256  # cuMemAlloc's alignment, at least
MAX_GRAPH_THUNKS = 20000  # a capture unrolls loops; beyond this the graph's instantiation outweighs its launches


class Executable:
    def __init__(self, executable: ExecutableFile, device, graphs: bool | None = None):
        self.plan = executable.plan
        self.device = device
        self.functions = {}
        if self.plan["kernels"]:  # a plan of cuBLASLt matmuls alone loads no module
            kind = "cubin" if "cubin" in executable.blobs else "ptx"
            module = device.load_module(executable.blobs[kind], kind)
            self.functions = {name: device.function(module, name) for name in self.plan["kernels"]}
        self.slab = device.allocate(self.plan["slab_bytes"])
        for constant in self.plan["constants"]:
            device.copy_to_device(self.slab + constant["offset"], executable.blobs[constant["blob"]])
        self.streams = [device.create_stream() for _ in range(self.plan.get("streams", 1))]
        self.events = [device.create_event() for _ in range(self.plan.get("events", 0))]
        self.fork = device.create_event() if len(self.streams) > 1 else None
        self.joins = [device.create_event() for _ in self.streams[1:]]
        self.bodies = {id(loop): alternating_bodies(loop) for loop in every_thunk(self.plan["thunks"]) if loop["kind"] == "while"}
        traded_thunks = [thunk for _, odd in self.bodies.values() for thunk in every_thunk(odd)]
        self.matmuls = {id(thunk): matmul_of(thunk) for thunk in [*every_thunk(self.plan["thunks"]), *traded_thunks]
                        if thunk["kind"] == "gemm"}
        if self.matmuls:
            device.prepare_matmuls(sorted(set(self.matmuls.values()), key=repr))
        self.handlers = {"launch": self.launch, "gemm": self.gemm, "memcpy": self.memcpy,
                         "while": self.loop, "conditional": self.conditional}
        self.graph = None
        self.graph_reason = graph_refusal(self.plan, graphs)

    def execution(self) -> dict:
        """How executions run: the streams, and whether as a CUDA graph (why not, when not)."""
        return {"streams": len(self.streams), "graph": self.graph_reason is None, "graph_reason": self.graph_reason}

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
            array = np.asarray(value)  # tobytes() writes C order (ascontiguousarray would make a scalar 1-D)
            if list(array.shape) != parameter["shape"] or array.dtype != np.dtype(parameter["dtype"]):
                raise ValueError(f"input {index}: expected {parameter['dtype']}{parameter['shape']}, got {array.dtype}{list(array.shape)}")
            if parameter["bytes"]:
                self.device.copy_to_device(self.slab + parameter["offset"], array.tobytes())

    def execute(self) -> None:
        """Run the thunks (asynchronously where the device is; `copy_out` synchronizes): the
        graph's one launch, captured the first time, or thunk by thunk on the streams."""
        main = self.streams[0]
        if self.graph is None and self.graph_reason is None:
            self.graph = self.captured(main)
        if self.graph is not None:
            self.device.launch_graph(self.graph, main)
        else:
            self.run_on_streams()

    def captured(self, main):
        """The execution captured on `main` and instantiated; None when the capture failed on
        the device (`graph_reason` then says how: this execution and the later ones run
        without a graph)."""
        self.device.begin_capture(main)
        try:
            self.run_on_streams()
        except Exception as error:
            self.device.abandon_capture(main)
            self.graph_reason = f"capture failed: {first_line(error)}"
            return None
        try:  # the driver reports a capture another thread's call invalidated only here
            return self.device.instantiate_graph(self.device.end_capture(main))
        except Exception as error:
            self.graph_reason = f"capture failed: {first_line(error)}"
            return None

    def run_on_streams(self) -> None:
        main, others = self.streams[0], self.streams[1:]
        if others:
            self.device.record_event(self.fork, main)
            for stream in others:
                self.device.wait_event(stream, self.fork)
        for thunk in self.plan["thunks"]:
            stream = self.streams[thunk.get("stream", 0)]
            for event in thunk.get("wait", ()):
                self.device.wait_event(stream, self.events[event])
            self.handlers[thunk["kind"]](thunk, stream)
            if "record" in thunk:
                self.device.record_event(self.events[thunk["record"]], stream)
        for stream, join in zip(others, self.joins):
            self.device.record_event(join, stream)
            self.device.wait_event(main, join)

    def profile(self, repeat: int) -> list[dict]:
        """Each thunk's device time within whole executions: `repeat` executions (after one
        to warm up) run thunk by thunk on stream 0, CUDA events around every thunk, so that
        each sees the data an execution gives it (a loop's state, an output an earlier thunk
        accumulated into). One row per thunk in plan order: what it is (`describe`), how
        often an execution runs it (`calls`: a loop of known trip count runs its body's
        thunks that many times, each row summing them), and `ms`, the median over the
        executions of its time in each. A loop the compiler gave no trip count and a
        conditional are timed whole (their predicate read back included)."""
        main = self.streams[0]
        rows = {}
        for execution in range(repeat + 1):
            for row in rows.values():
                row["times"].append(0.0)
            self.time_thunks(self.plan["thunks"], main, rows, warm_up=execution == 0)
        self.device.synchronize()
        return [{**row["thunk"], "calls": row["calls"], "ms": float(np.median(row["times"]))} for row in rows.values()]

    def time_thunks(self, thunks: list, stream, rows: dict, warm_up: bool, rows_of: list | None = None) -> None:
        """Run and time `thunks`, each into the row of the thunk at its place in `rows_of`
        (itself by default: an odd iteration's traded body counts as the body)."""
        for number, thunk in enumerate(thunks):
            own = thunk if rows_of is None else rows_of[number]
            if thunk["kind"] == "while" and thunk.get("trip_count") is not None:
                bodies = self.bodies[id(thunk)]
                for iteration in range(thunk["trip_count"]):
                    self.time_thunks(bodies[iteration % 2], stream, rows, warm_up, rows_of=thunk["body"])
                self.settle_carried(thunk, stream)
                continue
            milliseconds = self.device.elapsed_ms(lambda thunk=thunk: self.handlers[thunk["kind"]](thunk, stream))
            if warm_up:
                row = rows.setdefault(id(own), {"thunk": describe(own), "calls": 0, "times": []})
                row["calls"] += 1
            else:
                rows[id(own)]["times"][-1] += milliseconds

    def copy_out(self) -> list[np.ndarray]:
        self.device.synchronize()
        outputs = []
        for output in self.plan["outputs"]:
            data = self.device.copy_to_host(self.slab + output["offset"], output["bytes"]) if output["bytes"] else b""
            outputs.append(np.frombuffer(data, dtype=output["dtype"]).reshape(output["shape"]).copy())
        return outputs

    def run_thunks(self, thunks: list, stream) -> None:
        for thunk in thunks:
            self.handlers[thunk["kind"]](thunk, stream)

    def launch(self, thunk: dict, stream) -> None:
        self.device.launch(self.functions[thunk["kernel"]], tuple(thunk["grid"]), tuple(thunk["block"]),
                           thunk["shared_bytes"], [self.slab + offset for offset in thunk["arguments"]], stream)

    def gemm(self, thunk: dict, stream) -> None:
        bias = thunk.get("bias")
        self.device.matmul(self.matmuls[id(thunk)], self.slab + thunk["lhs"], self.slab + thunk["rhs"], self.slab + thunk["out"],
                           None if bias is None else self.slab + bias, stream)

    def memcpy(self, thunk: dict, stream) -> None:
        if thunk["bytes"]:
            self.device.copy_on_device(self.slab + thunk["destination"], self.slab + thunk["source"], thunk["bytes"], stream)

    def read_scalar(self, offset: int, nbytes: int) -> int:
        self.device.synchronize()
        return int.from_bytes(self.device.copy_to_host(self.slab + offset, nbytes), "little", signed=True)

    def loop(self, thunk: dict, stream) -> None:
        if thunk.get("trip_count") is not None:
            bodies = self.bodies[id(thunk)]
            for iteration in range(thunk["trip_count"]):
                self.run_thunks(bodies[iteration % 2], stream)
            self.settle_carried(thunk, stream)
            return
        while True:
            self.run_thunks(thunk["condition"], stream)
            if not self.read_scalar(thunk["predicate"], thunk["predicate_bytes"]):
                return
            self.run_thunks(thunk["body"], stream)

    def settle_carried(self, thunk: dict, stream) -> None:
        """After an odd number of iterations the carried values are in their new values'
        buffers: copied into the state, where the loop's readers find them."""
        if thunk["trip_count"] % 2:
            for pair in thunk.get("carried", []):
                self.device.copy_on_device(self.slab + pair["state"], self.slab + pair["result"], pair["bytes"], stream)

    def conditional(self, thunk: dict, stream) -> None:
        value = self.read_scalar(thunk["selector"], thunk["selector_bytes"])
        branches = thunk["branches"]
        if thunk["is_predicate"]:
            index = 0 if value else 1
        else:
            index = value if 0 <= value < len(branches) else len(branches) - 1
        self.run_thunks(branches[index], stream)


def first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def describe(thunk: dict) -> dict:
    """A thunk as a profile row names it: its name and kind, and what sizes its cost: a launch's
    kernel, grid, block and the bytes of the buffers its arguments point at (an upper bound of
    what it moves), a GEMM's shape and floating-point operations, a copy's bytes read and written."""
    row = {"name": thunk["name"], "kind": thunk["kind"]}
    if thunk["kind"] == "launch":
        row.update(kernel=thunk["kernel"], grid=thunk["grid"], block=thunk["block"], bytes=thunk.get("argument_bytes"))
    elif thunk["kind"] == "gemm":
        row.update(m=thunk["m"], n=thunk["n"], k=thunk["k"], batch=thunk["batch"],
                   flops=2 * thunk["m"] * thunk["n"] * thunk["k"] * thunk["batch"])
    elif thunk["kind"] == "memcpy":
        row["bytes"] = 2 * thunk["bytes"]
    return row


def alternating_bodies(loop: dict) -> tuple[list, list]:
    """A loop's body as even and odd iterations run it: on odd ones every pointer into a
    carried value's state and its new value trades places (`carried`, from the compiler's
    `alternating_carries`), so that each iteration reads what the one before wrote and
    nothing is copied back."""
    pairs = loop.get("carried", [])
    return loop["body"], [traded(thunk, pairs) for thunk in loop["body"]] if pairs else loop["body"]


POINTERS = {"launch": ("arguments",), "gemm": ("lhs", "rhs", "out", "bias"), "memcpy": ("source", "destination")}


def traded(thunk: dict, pairs: list[dict]) -> dict:
    """`thunk` with each slab offset inside a pair's state moved to the same place in its new
    value and the other way round."""

    def moved(offset):
        for pair in pairs:
            for here, there in ((pair["state"], pair["result"]), (pair["result"], pair["state"])):
                if offset is not None and here <= offset < here + pair["bytes"]:
                    return offset - here + there
        return offset

    result = dict(thunk)
    for key in POINTERS[thunk["kind"]]:
        value = thunk.get(key)
        result[key] = [moved(offset) for offset in value] if isinstance(value, list) else moved(value)
    return result


def every_thunk(thunks: list):
    for thunk in thunks:
        yield thunk
        for nested in [thunk.get("condition", []), thunk.get("body", []), *thunk.get("branches", [])]:
            yield from every_thunk(nested)


def matmul_of(thunk: dict) -> Matmul:
    """A `gemm` thunk's cuBLASLt matmul; a version 1 file's GEMMs are plain full-precision ones."""
    dtype = thunk.get("dtype")
    offsets = [thunk[key] for key in ("lhs", "rhs", "out", "bias") if thunk.get(key) is not None]
    alignment = min(offset & -offset if offset else SLAB_ALIGNMENT for offset in offsets)  # the slab itself is 256-aligned
    return Matmul(thunk.get("operand_dtype", dtype), thunk.get("out_dtype", dtype),
                  thunk.get("compute", "64F" if dtype == "float64" else "32F"), thunk["m"], thunk["n"], thunk["k"],
                  thunk["batch"], thunk["transpose_lhs"], thunk["transpose_rhs"], thunk.get("epilogue", "default"),
                  min(alignment, SLAB_ALIGNMENT))


def graph_refusal(plan: dict, graphs: bool | None) -> str | None:
    """Why executions do not run as a CUDA graph, or None when they do."""
    if graphs is False:
        return "turned off by the caller"
    if graphs is None and os.environ.get(GRAPHS_VARIABLE, "1") == "0":
        return f"turned off ({GRAPHS_VARIABLE}=0)"
    host_work = next((t for t in every_thunk(plan["thunks"]) if reads_back(t)), None)
    if host_work is not None:
        return f"host work: {host_work['kind']} {host_work['name']} reads its predicate back to the host"
    captured = captured_thunks(plan["thunks"])
    if captured > MAX_GRAPH_THUNKS:
        return f"{captured} thunks with the loops unrolled, over the {MAX_GRAPH_THUNKS} a graph is made of"
    return None


def reads_back(thunk: dict) -> bool:
    """A conditional, or a loop whose trip count the compiler did not prove."""
    return thunk["kind"] == "conditional" or (thunk["kind"] == "while" and thunk.get("trip_count") is None)


def captured_thunks(thunks: list) -> int:
    """The thunks a capture records, each loop's body once per iteration."""
    return sum(thunk["trip_count"] * captured_thunks(thunk["body"]) if thunk["kind"] == "while" else 1 for thunk in thunks)


def load(source, device=None, graphs: bool | None = None) -> Executable:
    """An executable from a path or the file's bytes, on `device` (GPU 0 when None); `graphs`
    False runs without CUDA graphs (None: unless MLIRXLA_CUDA_GRAPHS=0)."""
    executable = ExecutableFile.from_bytes(source) if isinstance(source, (bytes, bytearray)) else read(source)
    if device is None:
        from .cuda_device import CudaDevice

        device = CudaDevice()
    return Executable(executable, device, graphs)
