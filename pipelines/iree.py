"""What mlirxla does to a module before IREE compiles it: on one partition sharding annotations
become identities (the iree backend runs one device), rng_bit_generator becomes Threefry /
Philox arithmetic (XLA:CPU's bits, which IREE's own lowering would not give), then
simplification to a fixed point. Fusion, layouts, scheduling and buffers are IREE's."""

from mlirxla.transforms.rng_bit_generator_expander import RngBitGeneratorExpanderPass
from mlirxla.transforms.sharding_remover import ShardingRemoverPass

from .pipeline import Pipeline
from .simplification import simplification_pipeline


def iree_pipeline() -> Pipeline:
    return (
        Pipeline("iree")
        .add(ShardingRemoverPass())
        .add(RngBitGeneratorExpanderPass())
        .fixed_point(simplification_pipeline(), max_iterations=25)
    )
