// A two-layer MLP sharded over a 2x2 mesh ("data" x "model"), four partitions: the batch is
// split on "data", the hidden layer on "model". The partitioner turns the second matmul's
// split contraction into an all-reduce over "model" and the replicated result into an
// all-gather over "data". The README's distributed section runs it on 4 processes:
//   mpirun -n 4 mlirxla-run --distributed examples/mlp_sharded.mlir -o out.npz
module @mlp_sharded attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=2]>
  func.func @main(%x: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
                  %w1: tensor<64x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
                  %b1: tensor<128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>},
                  %w2: tensor<128x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})
      -> (tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
    %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<32x64xf32>, tensor<64x128xf32>) -> tensor<32x128xf32>
    %b = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<128xf32>) -> tensor<32x128xf32>
    %hb = stablehlo.add %h, %b : tensor<32x128xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<32x128xf32>
    %r = stablehlo.maximum %hb, %zero : tensor<32x128xf32>
    %y = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] : (tensor<32x128xf32>, tensor<128x16xf32>) -> tensor<32x16xf32>
    return %y : tensor<32x16xf32>
  }
}
