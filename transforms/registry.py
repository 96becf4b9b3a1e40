"""Pass registry: name -> where the pass class lives, imported only when the pass is used.

`mlirxla-opt --list-passes` prints it; pipeline text names passes from here, and any other
name is handed to MLIR's PassManager as an upstream pass (`cse`, `canonicalize`, ...).
"""

import importlib

from mlirxla.errors import MlirxlaError

from .pass_base import ModulePass

# name -> "module:Class" under mlirxla.transforms
PASSES = {
    "xhlo-algsimp": "algebraic_simplifier:AlgebraicSimplifierPass",
    "xhlo-constant-folding": "constant_folding:ConstantFoldingPass",
    "xhlo-dce": "dead_code_elimination:DeadCodeEliminationPass",
    "xhlo-call-inliner": "call_inliner:CallInlinerPass",
    "xhlo-tuple-simplifier": "tuple_simplifier:TupleSimplifierPass",
    "xhlo-computation-cse": "computation_cse:ComputationCsePass",
    "xhlo-while-loop-simplifier": "while_loop_simplifier:WhileLoopSimplifierPass",
    "xhlo-verify": "verifier:VerifierPass",
    "xhlo-priority-fusion": "priority_fusion:PriorityFusionPass",
    "xhlo-multi-output-fusion": "multi_output_fusion:MultiOutputFusionPass",
    "xhlo-output-fusion": "output_fusion:OutputFusionPass",
    "xhlo-horizontal-loop-fusion": "horizontal_loop_fusion:HorizontalLoopFusionPass",
    "xhlo-widening-gemm-fusion": "widening_gemm_fusion:WideningGemmFusionPass",
    "xhlo-batch-slice-fusion": "batch_slice_fusion:BatchSliceFusionPass",
    "xhlo-rng-bit-generator-expander": "rng_bit_generator_expander:RngBitGeneratorExpanderPass",
    "xhlo-sharding-remover": "sharding_remover:ShardingRemoverPass",
    "xhlo-manual-partitioner": "manual_partitioner:ManualPartitionerPass",
    "xhlo-sharding-propagation": "sharding_propagation:ShardingPropagationPass",
    "xhlo-inspect-sharding": "inspect_sharding:InspectShardingPass",
    "xhlo-custom-partitioning": "custom_partitioning:CustomPartitioningPass",
    "xhlo-spmd-partitioner": "spmd_partitioner:SpmdPartitionerPass",
    "xhlo-all-reduce-combiner": "all_reduce_combiner:AllReduceCombinerPass",
    "xhlo-all-gather-combiner": "all_gather_combiner:AllGatherCombinerPass",
    "xhlo-convolution-layout": "convolution_layout:ConvolutionLayoutPass",
    "xhlo-convolution-1d-to-2d": "convolution_1d_to_2d:Convolution1dTo2dPass",
    "xhlo-reshape-sinking": "reshape_sinking:ReshapeSinkingPass",
    "xhlo-transpose-sinking": "transpose_sinking:TransposeSinkingPass",
    "xhlo-dot-canonicalizer": "dot_canonicalizer:DotCanonicalizerPass",
    "xhlo-custom-call-layouts": "custom_call_layouts:CustomCallLayoutsPass",
    "xhlo-bf16-accumulation-in-f32": "bf16_accumulation_in_f32:Bf16AccumulationInF32Pass",
    "xhlo-narrow-dot-upcast": "narrow_dot_upcast:NarrowDotUpcastPass",
    "xhlo-integer-dot-as-float": "integer_dot_as_float:IntegerDotAsFloatPass",
    "xhlo-transposed-convolution-phases": "transposed_convolution_phases:TransposedConvolutionPhasesPass",
    "xhlo-convolution-group-split": "convolution_group_split:ConvolutionGroupSplitPass",
    "xhlo-selecting-convolution-as-slices": "selecting_convolution_as_slices:SelectingConvolutionAsSlicesPass",
    "xhlo-tree-reduction-rewriter": "tree_reduction_rewriter:TreeReductionRewriterPass",
    "xhlo-top-k-rewriter": "top_k_rewriter:TopKRewriterPass",
    "xhlo-layout-assignment": "layout_assignment:LayoutAssignmentPass",
    "xhlo-reshape-to-bitcast": "reshape_to_bitcast:ReshapeToBitcastPass",
    "xhlo-while-loop-constant-sinking": "while_loop_constant_sinking:WhileLoopConstantSinkingPass",
    "xhlo-while-loop-trip-count-annotator": "while_loop_trip_count_annotator:WhileLoopTripCountAnnotatorPass",
    "xhlo-copy-insertion": "copy_insertion:CopyInsertionPass",
    "xhlo-copy-removal": "copy_removal:CopyRemovalPass",
    "xhlo-scheduling": "scheduling:SchedulingPass",
    "xhlo-buffer-assignment": "buffer_assignment:BufferAssignmentPass",
    "test-break-invariants": "testing:BreakInvariantsPass",
}

# upstream MLIR passes that mlirxla pipelines use, with what they do to xhlo
UPSTREAM_PASSES = {
    "cse": "common subexpression elimination of side-effect-free ops (MLIR's CSE)",
    "canonicalize": "MLIR's canonicalizer (folds func/builtin structure; xhlo has no patterns of its own there)",
    "symbol-dce": "removes private functions nothing refers to",
}


def pass_class(name: str) -> type[ModulePass]:
    if name not in PASSES:
        raise MlirxlaError(f"unknown pass '{name}'")
    module_name, class_name = PASSES[name].split(":")
    module = importlib.import_module(f"mlirxla.transforms.{module_name}")
    return getattr(module, class_name)


def is_registered(name: str) -> bool:
    return name in PASSES


def pass_listing() -> list[tuple[str, str]]:
    """(name, one-line summary) of every registered pass, then the upstream passes we use."""
    rows = [(name, pass_class(name).summary) for name in sorted(PASSES)]
    rows += [(name, f"[upstream] {summary}") for name, summary in sorted(UPSTREAM_PASSES.items())]
    return rows
