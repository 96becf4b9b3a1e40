"""The SPMD partitioner's convolution and reduce_window (`transforms/spmd_windowed.py`): halo
geometry, and convolutions and poolings sharded on each kind of dim run on 8 CPU devices
against the reference interpreter's run of the same program unpartitioned, with the
collectives the partitioner's report lists."""

from collections import Counter

import numpy as np
import pytest

from mlirxla.transforms.spmd_windowed import Window

from .conftest import reference_outputs


def test_halo_geometry():
    # 3x3 SAME, stride 1: a row from each neighbour
    assert Window(3, 1, 1, 1).halo(64, 8, 64) == (1, 1)
    # 3x3 SAME, stride 2 (even input): padding only at the end, a row from the right
    assert Window(3, 2, 0, 1).halo(32, 8, 16) == (0, 1)
    # 2x2 pooling, stride 2: each tile's windows lie inside it
    assert Window(2, 2).halo(64, 8, 32) == (0, 0)
    # dilated 3-wide window spans 5 rows: two from each side
    assert Window(3, 1, 2, 2, window_dilation=2).halo(32, 8, 32) == (2, 2)
    # VALID 3x3 stride 1: 62 output rows do not tile in 8
    assert Window(3).halo(64, 8, 62) is None
    # a halo wider than the tile
    assert Window(9, 1, 4, 4).halo(16, 8, 16) is None
    assert Window(2, 2, base_dilation=2).halo(16, 8, 16) is None


def sharding(tiles) -> str:
    return f'"{{devices=[{",".join(map(str, tiles))}]<=[8]}}"' if any(t > 1 for t in tiles) else '"{replicated}"'


def tensor(shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def program(body: str, arguments, result, shardings=None) -> str:
    """A module of 8 partitions (or, without `shardings`, an unpartitioned one) whose @main
    takes `arguments` (shapes) and returns `body`'s %out of shape `result`; `shardings` are
    the tile counts of the arguments and then of the result."""
    partitioned = shardings is not None
    attribute = (lambda i: f" {{mhlo.sharding = {sharding(shardings[i])}}}") if partitioned else (lambda i: "")
    parameters = ", ".join(f"%arg{i}: {tensor(s)}{attribute(i)}" for i, s in enumerate(arguments))
    header = "module attributes {mhlo.num_partitions = 8 : i32}" if partitioned else "module"
    return f"""{header} {{
  func.func @main({parameters}) -> ({tensor(result)}{attribute(len(arguments))}) {{
{body}
    return %out : {tensor(result)}
  }}
}}"""


def convolution(x, kernel, result, stride=(1, 1), padding=((0, 0), (0, 0)), lhs_dilation=(1, 1), rhs_dilation=(1, 1),
                feature_groups=1) -> str:
    window = (f"stride = {list(stride)}, pad = {[list(p) for p in padding]}, lhs_dilate = {list(lhs_dilation)}, "
              f"rhs_dilate = {list(rhs_dilation)}")
    return (f"    %out = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
            f"window = {{{window}}} {{batch_group_count = 1 : i64, feature_group_count = {feature_groups} : i64}} : "
            f"({tensor(x)}, {tensor(kernel)}) -> {tensor(result)}")


def pooling(x, result, reducer, init, window, stride, padding) -> str:
    return f"""    %init = stablehlo.constant dense<{init}> : tensor<f32>
    %out = "stablehlo.reduce_window"(%arg0, %init) ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.{reducer} %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
    }}) {{window_dimensions = array<i64: {", ".join(map(str, window))}>, window_strides = array<i64: {", ".join(map(str, stride))}>,
       padding = dense<{[list(p) for p in padding]}> : tensor<{len(window)}x2xi64>}} : ({tensor(x)}, tensor<f32>) -> {tensor(result)}"""


def partitioned_run(body, arguments, result, shardings, values, tmp_path):
    """The partitioned program's result on 8 devices, the reference interpreter's on the
    unpartitioned one, and the partitioner's collectives (kind -> count) and report."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.pipelines.runner import RunOptions
    from mlirxla.runtime.driver import execute_sharded

    module = frontdoor.import_bytes(program(body, arguments, result, shardings).encode(), "-", new_context()).module
    [ours] = execute_sharded(module, values, options=RunOptions(dump_to=str(tmp_path)))
    whole = frontdoor.import_bytes(program(body, arguments, result).encode(), "-", new_context()).module
    [expected] = reference_outputs(whole, values)
    [report] = [p for p in tmp_path.iterdir() if p.name.endswith("spmd-partitioner.txt")]
    text = report.read_text()
    counts = Counter()
    for line in text.split("collectives inserted")[1].split("total:")[0].splitlines()[1:]:
        if ":" in line:
            kind, count = line.split(":")[0].strip(), line.split(":")[1].split(",")[0]
            counts[kind] = int(count)
    return ours, expected, counts, text


def values(*shapes, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) + shift).astype(np.float32) for s in shapes]


CONVOLUTIONS = {
    # name: (input, kernel, result, window, shardings of input, kernel, result, expected collectives)
    "height_same_stride_1": ((2, 16, 8, 4), (3, 3, 4, 4), (2, 16, 8, 4), {"padding": ((1, 1), (1, 1))},
                             [(1, 8, 1, 1), (1, 1, 1, 1), (1, 8, 1, 1)], {"collective-permute": 2}),
    "height_same_stride_2": ((2, 32, 8, 4), (3, 3, 4, 4), (2, 16, 4, 4), {"stride": (2, 2), "padding": ((0, 1), (0, 1))},
                             [(1, 8, 1, 1), (1, 1, 1, 1), (1, 8, 1, 1)], {"collective-permute": 1}),
    "height_valid_stride_2": ((2, 16, 8, 4), (2, 2, 4, 4), (2, 8, 4, 4), {"stride": (2, 2)},
                              [(1, 8, 1, 1), (1, 1, 1, 1), (1, 8, 1, 1)], {}),
    "height_dilated_kernel": ((2, 32, 8, 4), (3, 3, 4, 4), (2, 32, 8, 4), {"padding": ((2, 2), (1, 1)), "rhs_dilation": (2, 1)},
                              [(1, 8, 1, 1), (1, 1, 1, 1), (1, 8, 1, 1)], {"collective-permute": 2}),
    "height_and_width": ((2, 8, 16, 4), (3, 3, 4, 4), (2, 8, 16, 4), {"padding": ((1, 1), (1, 1))},
                         [(1, 2, 4, 1), (1, 1, 1, 1), (1, 2, 4, 1)], {"collective-permute": 4}),
    "batch": ((8, 8, 8, 4), (3, 3, 4, 4), (8, 8, 8, 4), {"padding": ((1, 1), (1, 1))},
              [(8, 1, 1, 1), (1, 1, 1, 1), (8, 1, 1, 1)], {}),
    "output_feature": ((2, 8, 8, 4), (3, 3, 4, 16), (2, 8, 8, 16), {"padding": ((1, 1), (1, 1))},
                       [(1, 1, 1, 1), (1, 1, 1, 8), (1, 1, 1, 8)], {}),
    # depthwise, 16 groups: each partition convolves its 2 channels with their kernels
    "depthwise_feature": ((2, 8, 8, 16), (3, 3, 1, 16), (2, 8, 8, 16), {"padding": ((1, 1), (1, 1)), "feature_groups": 16},
                          [(1, 1, 1, 8), (1, 1, 1, 8), (1, 1, 1, 8)], {}),
    "depthwise_height": ((2, 16, 8, 4), (3, 3, 1, 4), (2, 16, 8, 4), {"padding": ((1, 1), (1, 1)), "feature_groups": 4},
                         [(1, 8, 1, 1), (1, 1, 1, 1), (1, 8, 1, 1)], {"collective-permute": 2}),
    "input_feature_replicated_result": ((2, 8, 8, 16), (3, 3, 16, 4), (2, 8, 8, 4), {"padding": ((1, 1), (1, 1))},
                                        [(1, 1, 1, 8), (1, 1, 8, 1), (1, 1, 1, 1)], {"all-reduce": 1}),
    "input_feature_height_result": ((2, 8, 8, 16), (3, 3, 16, 4), (2, 8, 8, 4), {"padding": ((1, 1), (1, 1))},
                                    [(1, 1, 1, 8), (1, 1, 8, 1), (1, 8, 1, 1)], {"reduce-scatter": 1}),
}


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_sharded_convolutions_match_the_reference(name, tmp_path):
    x, kernel, result, window, shardings, expected_collectives = CONVOLUTIONS[name]
    ours, expected, counts, report = partitioned_run(convolution(x, kernel, result, **window), [x, kernel], result, shardings,
                                                     values(x, kernel), tmp_path)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)
    assert dict(counts) == expected_collectives, report
    assert "fallbacks (operands gathered, op run whole, result sliced):\n  none" in report


def test_a_window_that_does_not_tile_gathers_its_dim(tmp_path):
    # VALID 3x3, stride 1: 14 output rows in 8 tiles do not divide, so the height is gathered
    x, kernel, result = (2, 16, 8, 4), (3, 3, 4, 4), (2, 14, 6, 4)
    ours, expected, counts, report = partitioned_run(convolution(x, kernel, result), [x, kernel], result,
                                                     [(1, 8, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1)], values(x, kernel), tmp_path)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)
    assert counts["all-gather"] == 1 and "collective-permute" not in counts


POOLINGS = {
    # name: (input, result, reducer, init, window, stride, padding, expected collectives)
    "max_3x3_same_stride_1": ((2, 16, 8, 4), (2, 16, 8, 4), "maximum", "0xFF800000", (1, 3, 3, 1), (1, 1, 1, 1),
                              ((0, 0), (1, 1), (1, 1), (0, 0)), {"collective-permute": 2}),
    "max_2x2_valid_stride_2": ((2, 16, 8, 4), (2, 8, 4, 4), "maximum", "0xFF800000", (1, 2, 2, 1), (1, 2, 2, 1),
                               ((0, 0), (0, 0), (0, 0), (0, 0)), {}),
    "sum_3x3_same_stride_2": ((2, 32, 8, 4), (2, 16, 4, 4), "add", "1.0", (1, 3, 3, 1), (1, 2, 2, 1),
                              ((0, 0), (0, 1), (0, 1), (0, 0)), {"collective-permute": 1}),
}


@pytest.mark.parametrize("name", POOLINGS)
def test_sharded_pooling_matches_the_reference(name, tmp_path):
    x, result, reducer, init, window, stride, padding, expected_collectives = POOLINGS[name]
    # all inputs negative: a max pool whose edge halos were the permute's zeros would differ,
    # as would a sum whose edges were not its init (1.0)
    ours, expected, counts, report = partitioned_run(pooling(x, result, reducer, init, window, stride, padding), [x], result,
                                                     [(1, 8, 1, 1), (1, 8, 1, 1)], values(x, shift=-5.0), tmp_path)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
    assert dict(counts) == expected_collectives, report


def test_pooling_on_a_dim_without_window_is_local(tmp_path):
    x, result = (8, 16, 8, 4), (8, 8, 4, 4)
    body = pooling(x, result, "maximum", "0xFF800000", (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (0, 0), (0, 0), (0, 0)))
    ours, expected, counts, _ = partitioned_run(body, [x], result, [(8, 1, 1, 1), (8, 1, 1, 1)], values(x), tmp_path)
    np.testing.assert_array_equal(ours, expected)
    assert not counts
