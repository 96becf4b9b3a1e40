"""Where an emitter's per-thread code goes: one launch, a block loop (`block_x`) over a
thread loop (`thread_x`), in two flavours that run the same algorithm.

- **gpu**: one thread loop; a barrier is `gpu.barrier`, an exchange between lanes is
  `gpu.shuffle xor` (`shfl.sync.bfly`; values narrower than 32 bits widened, 64-bit ones
  shuffled as two halves), workgroup memory a `memref.global` in the workgroup address
  space (`.shared` in PTX). `convert-parallel-loops-to-gpu` makes the launch of it.
- **host**: what the `cuda-host` backend runs on the CPU, sequentially. The block's threads
  run as a loop per *phase*: a barrier ends one thread loop and starts the next (loop
  fission, as CPU runtimes of OpenCL and MCUDA run work-groups), so every thread finishes
  what precedes the barrier before any thread goes on. A shuffle is an exchange through a
  per-block array: every lane stores its value, the loop ends, and in the next one each lane
  reads its own slot and its partner's (two arrays alternate, so that a round's writes never
  clobber what that round still reads). Workgroup memory and the exchange arrays are
  `memref.alloca`s before the block loop, which the blocks, running one after another,
  reuse.

An emitter must not carry a value across `barrier` or `exchange_xor` but what those return:
after them it recomputes its coordinates from `thread` (a new loop's index on the host).
Emitters build their code inside `with program.at():`.
"""

from mlirxla.mlir import arith, gpu, ir, memref, scf

WARP = 32
WORKGROUP = "#gpu.address_space<workgroup>"


def dimension_map(processor: str) -> str:
    return f"#gpu.loop_dim_map<processor = {processor}, map = (d0) -> (d0), bound = (d0) -> (d0)>"


def index_constant(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


class ThreadProgram:
    """One launch of `grid` blocks of `block` threads, built at the current insertion point."""

    def __init__(self, grid: int, block: int, host: bool, module_body: ir.Block, name: str):
        self.block, self.host = block, host
        self.module_body, self.name = module_body, name
        self.shared_count = 0
        self.exchange_arrays: dict[tuple[str, int], list[ir.Value]] = {}
        self.exchange_round = 0
        index = ir.IndexType.get()
        zero, one = index_constant(0), index_constant(1)
        self.block_loop = scf.ParallelOp([], [zero], [index_constant(grid)], [one], [])
        self.block_loop.attributes["mapping"] = ir.Attribute.parse(f"[{dimension_map('block_x')}]")
        block_body = self.block_loop.regions[0].blocks.append(index)
        self.block_index = block_body.arguments[0]
        with ir.InsertionPoint(block_body):
            ir.Operation.create("scf.reduce")
        self.phases = block_body
        self.open_thread_loop()

    def open_thread_loop(self) -> None:
        with ir.InsertionPoint.at_block_terminator(self.phases):
            zero, one, size = index_constant(0), index_constant(1), index_constant(self.block)
            loop = scf.ParallelOp([], [zero], [size], [one], [])
            loop.attributes["mapping"] = ir.Attribute.parse(f"[{dimension_map('thread_x')}]")
            self.body = loop.regions[0].blocks.append(ir.IndexType.get())
            with ir.InsertionPoint(self.body):
                ir.Operation.create("scf.reduce")
        self.thread = self.body.arguments[0]

    def at(self) -> ir.InsertionPoint:
        return ir.InsertionPoint.at_block_terminator(self.body)

    def sink_target(self) -> ir.Block:
        """The block into which top-level reads are recomputed: the thread loop on the GPU
        (the launch body), the block's phases on the host (every thread loop sees them)."""
        return self.phases if self.host else self.body

    def barrier(self) -> None:
        if self.host:
            self.open_thread_loop()
        else:
            with self.at():
                gpu.BarrierOp()

    def shared(self, count: int, element: ir.Type):
        """Workgroup memory of `count` elements; returns a function giving it as a memref
        value usable at the current insertion point of any later phase."""
        if self.host:
            with ir.InsertionPoint(self.block_loop):
                allocation = memref.AllocaOp(ir.MemRefType.get([count], element), [], []).result
            return lambda: allocation
        name = f"{self.name}_shared_{self.shared_count}"
        self.shared_count += 1
        kind = ir.MemRefType.get([count], element, memory_space=ir.Attribute.parse(WORKGROUP))
        with ir.InsertionPoint.at_block_begin(self.module_body):
            memref.GlobalOp(name, ir.TypeAttr.get(kind), sym_visibility="private")
        return lambda: memref.GetGlobalOp(kind, name).result

    def exchange_xor(self, values: list[ir.Value], offset: int) -> tuple[list[ir.Value], list[ir.Value]]:
        """This lane's `values` and those of the lane whose index differs by xor `offset`
        (within its warp), as values at the (possibly new) insertion point."""
        if not self.host:
            with self.at():
                return values, [shuffle_xor(value, offset) for value in values]
        arrays = [self.exchange_array(value.type, number) for number, value in enumerate(values)]
        self.exchange_round += 1
        with self.at():
            for value, array in zip(values, arrays):
                memref.StoreOp(value, array, [self.thread])
        self.open_thread_loop()
        with self.at():
            partner = arith.XOrIOp(self.thread, index_constant(offset)).result
            return ([memref.LoadOp(array, [self.thread]).result for array in arrays],
                    [memref.LoadOp(array, [partner]).result for array in arrays])

    def exchange_array(self, kind: ir.Type, number: int) -> ir.Value:
        """The per-block array the `number`th value of this round's exchange goes through."""
        key = (str(kind), number)
        arrays = self.exchange_arrays.get(key)
        if arrays is None:
            with ir.InsertionPoint(self.block_loop):
                arrays = [memref.AllocaOp(ir.MemRefType.get([self.block], kind), [], []).result for _ in range(2)]
            self.exchange_arrays[key] = arrays
        return arrays[self.exchange_round % 2]


def shuffle_xor(value: ir.Value, offset: int) -> ir.Value:
    """`gpu.shuffle xor` over the whole warp, for any scalar type of 1 to 64 bits."""
    kind = value.type
    i32, f32 = ir.IntegerType.get_signless(32), ir.F32Type.get()
    if kind == i32 or kind == f32:
        return raw_shuffle(value, offset)
    if isinstance(kind, (ir.F16Type, ir.BF16Type)):
        return arith.TruncFOp(kind, raw_shuffle(arith.ExtFOp(f32, value).result, offset)).result
    width = kind.width if isinstance(kind, ir.IntegerType) else 64 if isinstance(kind, ir.F64Type) else None
    if width is None:
        raise ValueError(f"no shuffle for {kind}")
    if width < 32:
        return arith.TruncIOp(kind, raw_shuffle(arith.ExtUIOp(i32, value).result, offset)).result
    i64 = ir.IntegerType.get_signless(64)
    bits = value if kind == i64 else arith.BitcastOp(i64, value).result
    low = raw_shuffle(arith.TruncIOp(i32, bits).result, offset)
    high = raw_shuffle(arith.TruncIOp(i32, arith.ShRUIOp(bits, arith.ConstantOp(i64, 32).result).result).result, offset)
    joined = arith.OrIOp(arith.ExtUIOp(i64, low).result,
                         arith.ShLIOp(arith.ExtUIOp(i64, high).result, arith.ConstantOp(i64, 32).result).result).result
    return joined if kind == i64 else arith.BitcastOp(kind, joined).result


def raw_shuffle(value: ir.Value, offset: int) -> ir.Value:
    i32 = ir.IntegerType.get_signless(32)
    shuffle = gpu.ShuffleOp(value, arith.ConstantOp(i32, offset).result, arith.ConstantOp(i32, WARP).result,
                            ir.Attribute.parse("#gpu<shuffle_mode xor>"))
    return shuffle.results[0]


def shuffles_supported(kind: ir.Type) -> bool:
    if isinstance(kind, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)):
        return True
    return isinstance(kind, ir.IntegerType) and kind.width <= 64
