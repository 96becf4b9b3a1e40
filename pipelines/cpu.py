"""The CPU compiler's pipeline, stage by stage (XLA's cpu_compiler.cc, as a readable list).

    sharding removal (one partition: sharding annotations are identities; a program manual over
    every device takes its per-device parameters and results); on several partitions with
    shardings, sharding propagation, jax's custom_partitioning calls partitioned by their own
    Python callbacks, then the SPMD partitioner (each partition's program, local shapes and
    collectives); rng_bit_generator expansion (Threefry and Philox as integer
    arithmetic, XLA:CPU's bits)
 -> simplification (to a fixed point)
 -> while-loop trip-count annotation (a loop whose induction variable proves its count carries
    it: its thunk then runs the body that many times without the condition)
 -> while-loop constant sinking (a loop recomputes the constants and broadcasts of constants it
    reads, which CSE shared with the computation around it: fusion folds them into its kernels)
 -> collective combining (independent all-reduces, then all-gathers, of one kind become one
    variadic op: XLA's AllReduceCombiner and AllGatherCombiner, run after simplification so
    that dead collectives are gone before they are bundled with live ones)
 -> selecting convolutions as slices (a convolution whose kernel is one-hot, jax's patch
    extraction, becomes strided slices of its padded input interleaved along the features)
 -> convolution group split (a grouped convolution with groups of several input and output
    features becomes one convolution per group, concatenated: the GEMM strategies take one group)
 -> convolution layout (a convolution in another layout than NHWC x HWIO -> NHWC becomes
    one between transposes when the convolution cost model says its GEMM then pays)
 -> dot canonicalization (a float dot no GEMM takes, its batch dimensions not leading, say,
    becomes one between transposes of its operands: XLA's DotDecomposer)
 -> bf16 accumulation in f32 (a bf16 reduce, reduce_window or scatter computes in f32 between
    converts: XLA:CPU's float normalization, its accumulator rounded once)
 -> on the cuda pipeline, tree reductions (a reduction of few kept elements that would leave
    the GPU's multiprocessors idle, split into two: XLA:GPU's TreeReductionRewriter)
 -> narrow dot upcast (a bf16, f16 or f8 dot as an f32 dot between converts: the CPU's GEMMs are f32)
 -> top-k rewriting (a sort of (x, iota) read only in its first k positions, which is what
    lax.top_k becomes, as one TopK custom call: the CPU's selection kernel)
 -> custom call layouts (a custom call's column-major operands and results, which jax's
    LAPACK calls ask for, as transposes around it that fusion folds into their neighbours)
 -> layout assignment, then removal of the copies it made unnecessary
 -> priority fusion (what becomes a kernel), then multi-output fusion (siblings sharing an
    operand, producers kept as an extra output of the reduction that reads them), then
    output fusion (a dot or convolution with its elementwise epilogue), then on the cuda
    pipeline horizontal loop fusion (independent small loop kernels read by one consumer as
    one launch) and on the cpu's batch-slice fusion (chains around convolutions that keep
    batch elements apart run slice by slice)
 -> reshape to bitcast (a reshape no fusion took in shares its operand's buffer)
 -> copy insertion (what in-place updates, loops and outputs need for correctness)
 -> scheduling (a sequential order per computation, minimizing peak memory)
 -> buffer assignment (where every value lives; analysis only), at the backend's alignment:
    the cpu backend executes the assignment this pass makes (its kernels' scratch added to
    the same slab, `backends/cpu/compiler.py`)
"""

from mlirxla.runtime.llvm_host import has_feature
from mlirxla.transforms.all_gather_combiner import AllGatherCombinerPass
from mlirxla.transforms.all_reduce_combiner import AllReduceCombinerPass
from mlirxla.transforms.bf16_accumulation_in_f32 import Bf16AccumulationInF32Pass
from mlirxla.transforms.batch_slice_fusion import BatchSliceFusionPass
from mlirxla.transforms.buffer_assignment import BufferAssignmentPass
from mlirxla.transforms.copy_insertion import CopyInsertionPass
from mlirxla.transforms.convolution_1d_to_2d import Convolution1dTo2dPass
from mlirxla.transforms.convolution_group_split import ConvolutionGroupSplitPass
from mlirxla.transforms.convolution_layout import ConvolutionLayoutPass
from mlirxla.transforms.copy_removal import CopyRemovalPass
from mlirxla.transforms.custom_call_layouts import CustomCallLayoutsPass
from mlirxla.transforms.custom_partitioning import CustomPartitioningPass
from mlirxla.transforms.dot_canonicalizer import DotCanonicalizerPass
from mlirxla.transforms.narrow_dot_upcast import NarrowDotUpcastPass
from mlirxla.transforms.layout_assignment import LayoutAssignmentPass
from mlirxla.transforms.inspect_sharding import InspectShardingPass
from mlirxla.transforms.horizontal_loop_fusion import HorizontalLoopFusionPass
from mlirxla.transforms.integer_dot_as_float import IntegerDotAsFloatPass
from mlirxla.transforms.manual_partitioner import ManualPartitionerPass
from mlirxla.transforms.multi_output_fusion import MultiOutputFusionPass
from mlirxla.transforms.output_fusion import OutputFusionPass
from mlirxla.transforms.priority_fusion import PriorityFusionPass
from mlirxla.transforms.reshape_sinking import ReshapeSinkingPass
from mlirxla.transforms.transpose_sinking import TransposeSinkingPass
from mlirxla.transforms.reshape_to_bitcast import ReshapeToBitcastPass
from mlirxla.transforms.rng_bit_generator_expander import RngBitGeneratorExpanderPass
from mlirxla.transforms.scheduling import SchedulingPass
from mlirxla.transforms.sharding_propagation import ShardingPropagationPass
from mlirxla.transforms.sharding_remover import ShardingRemoverPass
from mlirxla.transforms.spmd_partitioner import SpmdPartitionerPass
from mlirxla.transforms.top_k_rewriter import TopKRewriterPass
from mlirxla.transforms.selecting_convolution_as_slices import SelectingConvolutionAsSlicesPass
from mlirxla.transforms.transposed_convolution_phases import TransposedConvolutionPhasesPass
from mlirxla.transforms.tree_reduction_rewriter import TreeReductionRewriterPass
from mlirxla.transforms.while_loop_constant_sinking import WhileLoopConstantSinkingPass
from mlirxla.transforms.while_loop_trip_count_annotator import WhileLoopTripCountAnnotatorPass
from mlirxla.transforms.widening_gemm_fusion import WideningGemmFusionPass

from .pipeline import Pipeline
from .simplification import simplification_pipeline


ALIGNMENT = 64  # bytes: the cpu backend's (`backends/cpu/kernel_scratch.ALIGNMENT`, which it passes), so that dumps agree


def cpu_pipeline(alignment: int = ALIGNMENT) -> Pipeline:
    """The pipeline; `alignment`: byte alignment of the temp slab's offsets. Int8 dots stay
    integer where the host has the byte GEMM's instructions."""
    return compiler_pipeline("cpu", alignment, fusion_cost_model="cpu", batch_slices=True, f32_gemms_only=True, top_k_calls=True,
                             byte_gemms=has_feature("avx512vnni"))


def compiler_pipeline(name: str, alignment: int, fusion_cost_model: str, batch_slices: bool,
                      f32_gemms_only: bool = False, top_k_calls: bool = False, gpu: bool = False,
                      byte_gemms: bool = False) -> Pipeline:
    """The stages above, named `name`, fusing by the cost model `fusion_cost_model`
    (`transforms/cost_model.py`); batch-slice fusion only for a backend that runs slices;
    with `gpu`, tree reductions (reductions that would leave the GPU idle split in two) and
    horizontal loop fusion (independent loop nests run as one launch);
    bf16 dots upcast to f32 for a backend whose GEMMs are f32 only, a weight's widening then
    taken into its GEMM; narrow integer dots made exact float dots for it and for a GPU (whose
    GEMMs are cuBLASLt's float ones), but for the int8 GEMMs a backend with `byte_gemms` runs
    itself; top-k sorts as TopK calls for a backend that runs them."""
    pipeline = (
        Pipeline(name)
        .add(ShardingRemoverPass())
        .add(ManualPartitionerPass())
        .add(ShardingPropagationPass())
        .add(InspectShardingPass())
        .add(CustomPartitioningPass())
        .add(SpmdPartitionerPass())
        .add(RngBitGeneratorExpanderPass())
        .fixed_point(simplification_pipeline(), max_iterations=25)
        .add(WhileLoopTripCountAnnotatorPass())
        .add(WhileLoopConstantSinkingPass())
        .add(AllReduceCombinerPass())
        .add(AllGatherCombinerPass())
        .add(Convolution1dTo2dPass())
        .add(ReshapeSinkingPass())
        .add(SelectingConvolutionAsSlicesPass())
        .add(TransposedConvolutionPhasesPass())
        .add(ConvolutionGroupSplitPass())
        .add(ConvolutionLayoutPass())
        .add(DotCanonicalizerPass())
        .add(Bf16AccumulationInF32Pass())
    )
    if gpu:
        pipeline.add(TreeReductionRewriterPass(backend=fusion_cost_model))
    if f32_gemms_only:
        pipeline.add(NarrowDotUpcastPass())
    if f32_gemms_only or gpu:
        pipeline.add(IntegerDotAsFloatPass(byte_gemms=byte_gemms, tf32_operands=gpu))
    if top_k_calls:
        pipeline.add(TopKRewriterPass())
    pipeline.add(CustomCallLayoutsPass()).add(TransposeSinkingPass()).add(LayoutAssignmentPass()).add(CopyRemovalPass())
    pipeline.add(PriorityFusionPass(backend=fusion_cost_model)).add(MultiOutputFusionPass()).add(OutputFusionPass())
    if f32_gemms_only:
        pipeline.add(WideningGemmFusionPass())
    if gpu:
        pipeline.add(HorizontalLoopFusionPass())
    if batch_slices:
        pipeline.add(BatchSliceFusionPass())
    return (
        pipeline
        .add(ReshapeToBitcastPass())
        .add(CopyInsertionPass())
        .add(SchedulingPass())
        .add(BufferAssignmentPass(alignment=alignment))
    )
