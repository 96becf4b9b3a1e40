"""GEMMs for cuBLASLt: which epilogue kernels a matmul takes in, and at what precision each
GEMM computes.

Epilogues (XLA:GPU's gemm_rewriter: a dot followed by a bias add and an activation becomes
one cuBLAS Lt call with a fused epilogue): an output fusion the thunk emitter split into a
GEMM and its epilogue kernel is one matmul when the fusion computes exactly

    add(dot, broadcast(bias, dims=[last]))     BIAS
    activation(x)                              RELU or GELU, x the dot or the biased dot
                                               (RELU_BIAS, GELU_BIAS)

with `bias` a fusion operand of one dimension running along the result's last dimension
(cuBLASLt's bias runs along the rows of its column-major result: our row-major last
dimension), the result row-major, f32 or bf16, and not batched (the bias would need a
batch stride of zero, which cuBLASLt does not document). The activation is recognised by
what it computes: elementwise arithmetic of x and scalar constants that equals relu, or
GELU's tanh approximation (jax.nn.gelu's default, the one cuBLASLt implements), at sample
points (`activation_of`). Anything else in the fusion (an erf GELU, a residual add), and
the GEMM keeps its epilogue kernel, the reason in the decisions.

Precision (the decision, `docs/cuda-backend.md`): jax's default precision semantics on
XLA:GPU. An f32 dot whose operands both ask for DEFAULT precision may use TF32 tensor cores
(CUBLAS_COMPUTE_32F_FAST_TF32), as XLA:GPU does for jax's default `jax_default_matmul_precision`;
HIGH and HIGHEST compute in full f32 (XLA:GPU runs HIGH as three bf16 passes, nearer full
f32 than TF32). `MLIRXLA_CUDA_GEMM_PRECISION=highest` computes every f32 GEMM in full f32,
the CPU backend's numbers. bf16 GEMMs accumulate in f32 (CUBLAS_COMPUTE_32F over bf16
operands: bf16 tensor cores), f64 ones in f64.
"""

import dataclasses
import os
from dataclasses import dataclass

import numpy as np

from mlirxla.backends.cpu.emitters.kernels import KernelSpec
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import defining_op, ops_named
from mlirxla.mlir import ir
from mlirxla.runtime.thunks import BufferSlice, ConditionalThunk, GemmThunk, KernelThunk, SlicedKernelThunk, WhileThunk

PRECISION_VARIABLE = "MLIRXLA_CUDA_GEMM_PRECISION"
PRECISION_MODES = ("jax", "highest")
# the GEMM element (as the thunk emitter names it) -> operand dtype, output dtype
GEMM_DTYPES = {"f32": ("float32", "float32"), "f64": ("float64", "float64"), "bf16": ("bfloat16", "bfloat16"),
               "bf16 to f32": ("bfloat16", "float32")}
EPILOGUE_ELEMENTS = {"f32", "bf16"}


@dataclass(frozen=True)
class CublasLtGemm:
    """A GEMM as a cuBLASLt matmul: its compute type and, when it takes in its epilogue
    kernel, the epilogue and bias; it then writes the kernel's result (the GEMM's output
    slice) and reads the bias besides the GEMM's operands."""

    gemm: GemmThunk
    compute: str  # 32F | 32F_FAST_TF32 | 64F
    epilogue: str = "default"  # default | bias | relu | bias_relu | gelu | bias_gelu
    bias: BufferSlice | None = None
    kernel: KernelThunk | None = None  # the epilogue kernel computed in its place
    kind: str = "gemm"

    @property
    def name(self) -> str:
        return self.gemm.name

    @property
    def reads(self):
        return self.gemm.reads + ((self.bias,) if self.bias is not None else ())

    @property
    def writes(self):
        return self.kernel.results if self.kernel is not None else self.gemm.writes

    def describe(self) -> str:
        text = f"{self.gemm.describe()} cublasLt compute {self.compute}"
        if self.kernel is not None:
            bias = f" bias {self.bias.text()}" if self.bias is not None else ""
            text += f" epilogue {self.epilogue}{bias} (in place of kernel {self.kernel.symbol})"
        return text


def precision_mode() -> str:
    mode = os.environ.get(PRECISION_VARIABLE, "jax")
    if mode not in PRECISION_MODES:
        raise MlirxlaError(f"{PRECISION_VARIABLE}={mode}: expected one of {', '.join(PRECISION_MODES)}")
    return mode


def dot_precisions(module: ir.Module) -> dict[str, set[str]]:
    """For each name a GEMM thunk can carry (its output fusion's, else the dot's or
    convolution's own), the precisions its dots and convolutions ask for."""
    found: dict[str, set[str]] = {}
    for op in ops_named(module, "xhlo.dot", "xhlo.convolution"):
        parent = op.parent
        owner = parent if parent is not None and parent.name == "xhlo.fusion" else op
        name = ir.StringAttr(owner.attributes["name"]).value if "name" in owner.attributes else op.name[len("xhlo."):]
        precisions = [ir.StringAttr(p).value for p in ir.ArrayAttr(op.attributes["precision_config"])] \
            if "precision_config" in op.attributes else ["DEFAULT"]
        found.setdefault(name, set()).update(precisions)
    return found


def compute_type(gemm: GemmThunk, precisions: dict[str, set[str]], mode: str) -> str:
    if gemm.element == "f64":
        return "64F"
    if gemm.element == "f32" and mode == "jax" and precisions.get(gemm.name) == {"DEFAULT"}:
        return "32F_FAST_TF32"
    return "32F"


def plan_gemms(thunks: list, specs: dict[str, KernelSpec], precisions: dict[str, set[str]], mode: str,
               decisions: list[str]) -> list:
    """`thunks` (and the thunks inside loops and conditionals) with every GEMM a
    `CublasLtGemm`, taking in the epilogue kernel after it when cuBLASLt can compute it; the
    decisions say which epilogues were fused, which not and why, and each GEMM's compute type."""
    result, index = [], 0
    while index < len(thunks):
        thunk = thunks[index]
        if isinstance(thunk, WhileThunk):
            result.append(dataclasses.replace(thunk, condition=plan_gemms(thunk.condition, specs, precisions, mode, decisions),
                                              body=plan_gemms(thunk.body, specs, precisions, mode, decisions)))
        elif isinstance(thunk, ConditionalThunk):
            result.append(dataclasses.replace(thunk, branches=[plan_gemms(b, specs, precisions, mode, decisions) for b in thunk.branches]))
        elif isinstance(thunk, GemmThunk):
            compute = compute_type(thunk, precisions, mode)
            fused = fusable(thunk, thunks[index + 1] if index + 1 < len(thunks) else None, specs, compute)
            if isinstance(fused, CublasLtGemm):
                decisions.append(f"{thunk.name}: GEMM and epilogue kernel as one cuBLASLt matmul, epilogue {fused.epilogue.upper()}, "
                                 f"compute {compute}")
                result.append(fused)
                index += 2
                continue
            reason = f", epilogue kernel kept ({fused})" if fused else ""
            decisions.append(f"{thunk.name}: cuBLASLt matmul, compute {compute}{reason}")
            result.append(CublasLtGemm(thunk, compute))
        else:
            result.append(thunk)
        index += 1
    return result


def kernel_symbols(thunks: list) -> set[str]:
    """The kernels `thunks` launch (and the thunks inside loops and conditionals)."""
    found = set()
    for thunk in thunks:
        if isinstance(thunk, KernelThunk):
            found.add(thunk.symbol)
        elif isinstance(thunk, WhileThunk):
            found |= kernel_symbols(thunk.condition + thunk.body)
        elif isinstance(thunk, ConditionalThunk):
            for branch in thunk.branches:
                found |= kernel_symbols(branch)
    return found


def fusable(gemm: GemmThunk, kernel, specs: dict[str, KernelSpec], compute: str) -> CublasLtGemm | str | None:
    """The fused GEMM; else why not (a string) when `kernel` is `gemm`'s epilogue; else None."""
    if not isinstance(kernel, KernelThunk) or isinstance(kernel, SlicedKernelThunk) or kernel.name != gemm.name:
        return None
    spec = specs.get(kernel.symbol)
    if spec is None or spec.library_result is None:
        return None
    if gemm.batch != 1 or gemm.element not in EPILOGUE_ELEMENTS:
        return f"a {'batched ' if gemm.batch != 1 else ''}{gemm.element} GEMM"
    if kernel.results != (gemm.out,) or kernel.scratch is not None:
        return "its result is not the GEMM's output alone"
    matched = match_epilogue(spec.op, spec.library_result, gemm.n)
    if isinstance(matched, str):
        return matched
    epilogue, bias_operand = matched
    return CublasLtGemm(gemm, compute, epilogue, None if bias_operand is None else kernel.arguments[bias_operand], kernel)


def match_epilogue(fusion: ir.Operation, library: ir.Value, n: int) -> tuple[str, int | None] | str:
    """(epilogue, the fusion operand that is the bias or None) when the fusion computes one of
    the forms above over `library` (the dot's result), else why not."""
    block = fusion.regions[0].blocks[0]
    body = [op.operation for op in block.operations]
    returned = body[-1]
    if len(returned.operands) != 1 or not is_row_major(fusion) or ir.RankedTensorType(library.type).shape[-1] != n:
        return "not one row-major result over the GEMM's columns"
    matched = [defining_op(library)]
    biased, bias_operand = library, None
    add = next((op for op in body if op.name == "xhlo.add" and any(operand == library for operand in op.operands)), None)
    if add is not None:
        other = add.operands[1] if add.operands[0] == library else add.operands[0]
        bias_operand = bias_argument(other, block, matched)
        if bias_operand is not None:
            matched.append(add)
            biased = add.results[0]
    root, activation = returned.operands[0], None
    if root != biased:
        activation = activation_of(root, biased, matched, ir.RankedTensorType(root.type).element_type)
    if (root != biased and activation is None) or len(body) - 1 != len(matched):
        return "the fusion computes more than a bias add and a relu or GELU"
    parts = (["bias"] if bias_operand is not None else []) + ([activation] if activation else [])
    if not parts:
        return "nothing after the GEMM"
    return "_".join(parts), bias_operand


def activation_of(root: ir.Value, x: ir.Value, matched: list, element: ir.Type) -> str | None:
    """Which activation `root` is of `x`, when it is elementwise arithmetic of `x` and scalar
    constants alone: evaluated at sample points and compared with each activation cuBLASLt
    has (so that any arrangement of the same arithmetic matches, as XLA's gemm_rewriter
    matches GELU's commuted forms); its ops join `matched`."""
    ops: list = []
    try:
        values = evaluate(root, x, ops)
    except NotElementwise:
        return None
    tolerance = 1e-5 if isinstance(element, ir.F32Type) else 2e-2
    for name, function in ACTIVATIONS.items():
        if np.allclose(values, function(SAMPLES), rtol=tolerance, atol=tolerance):
            matched.extend(ops)
            return name
    return None


class NotElementwise(Exception):
    """The value is not elementwise arithmetic of the activation's input and constants."""


ELEMENTWISE = {"xhlo.add": np.add, "xhlo.subtract": np.subtract, "xhlo.multiply": np.multiply, "xhlo.divide": np.divide,
               "xhlo.maximum": np.maximum, "xhlo.minimum": np.minimum, "xhlo.negate": np.negative, "xhlo.tanh": np.tanh}
# cuBLASLt's activations: RELU, and GELU in its tanh approximation (jax.nn.gelu's default)
ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0),
               "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))}
SAMPLES = np.linspace(-8.0, 8.0, 161)


def evaluate(value: ir.Value, x: ir.Value, ops: list):
    """`value` at the sample points of `x`; its ops (once each) join `ops`."""
    if value == x:
        return SAMPLES
    op = defining_op(value)
    if op is None:
        raise NotElementwise
    if op.name == "xhlo.constant":
        result = splat_value(op)
    elif op.name == "xhlo.broadcast" and ir.RankedTensorType(op.operands[0].type).rank == 0:
        result = evaluate(op.operands[0], x, ops)
    elif op.name in ELEMENTWISE:
        result = ELEMENTWISE[op.name](*[evaluate(operand, x, ops) for operand in op.operands])
    else:
        raise NotElementwise
    if not any(op == seen for seen in ops):
        ops.append(op)
    return result


def splat_value(constant: ir.Operation) -> float:
    values = ir.DenseElementsAttr(constant.attributes["value"])
    if not values.is_splat or not isinstance(values.get_splat_value(), ir.FloatAttr):
        raise NotElementwise
    return ir.FloatAttr(values.get_splat_value()).value


def is_row_major(op: ir.Operation) -> bool:
    if "result_layouts" not in op.attributes:
        return True
    rank = ir.RankedTensorType(op.results[0].type).rank
    return list(ir.DenseI64ArrayAttr(ir.ArrayAttr(op.attributes["result_layouts"])[0])) == list(range(rank - 1, -1, -1))


def bias_argument(value: ir.Value, block: ir.Block, matched: list) -> int | None:
    """The fusion operand `value` broadcasts along the last dimension, else None; the
    broadcast joins `matched` when it is one."""
    op = defining_op(value)
    if op is None or op.name != "xhlo.broadcast":
        return None
    source = op.operands[0]
    rank = ir.RankedTensorType(value.type).rank
    if defining_op(source) is not None or ir.RankedTensorType(source.type).rank != 1:
        return None
    if list(ir.DenseI64ArrayAttr(op.attributes["dimensions"])) != [rank - 1]:
        return None
    index = next((i for i, argument in enumerate(block.arguments) if argument == source), None)
    if index is not None:
        matched.append(op)
    return index
